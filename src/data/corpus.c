/*
 * corpus.c — reading and writing the tokenized split files of corpus.h.
 *
 * Why it checks so much: a .tok file is produced once and read by every
 * training run, so a truncated copy or a flipped bit must give a message
 * naming the file and the fault, never a crash or silently wrong ids. A
 * version-2 file's header carries its own crc32 and the counts, and the
 * file must be exactly as long as they say before anything is mapped; the
 * offset tables are checked (monotone, ending at the id counts) so every
 * pair's ids lie inside the file. Version 1 is read as before: header
 * sanity-checked before anything large is allocated, and the trailing
 * crc32 over every decompressed byte.
 *
 * Why the offset check releases pages as it goes: a mapped page that was
 * read counts in the process's resident memory until it is dropped, and the
 * tables of a 10M-pair file are 160 MB; checked in windows that are
 * released behind the check (madvise MADV_DONTNEED: the pages stay in the
 * page cache), start-up stays as small at 10M pairs as at 100k.
 *
 * Why the writer keeps target ids in a side file: the sections are laid out
 * source ids before target ids, and how many source ids there are is known
 * only at the end; the offsets' places are known from n_pairs, so they and
 * the source ids go to their final place at once (pwrite).
 *
 * Ownership: pmt_corpus owns its four arrays (malloc'd) or its mapping;
 * pmt_corpus_free. A pmt_corpus_writer owns its descriptors and buffers.
 */
#define _DEFAULT_SOURCE   /* madvise */
#include "data/corpus.h"

#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "core/fileio.h"
#include "core/gzstream.h"

static const char corpus_magic[8] = {'P', 'M', 'T', 'T', 'O', 'K', '\0', '\1'};
enum { CORPUS_VERSION = 1 };
static const char mapped_magic[8] = {'P', 'M', 'T', 'T', 'O', 'K', '\0', '\2'};
enum { MAPPED_VERSION = 2, HEADER_BYTES = 64 };
/* Offsets checked per window before its pages are released (8 MB). */
enum { CHECK_WINDOW = 1 << 20 };

/* The checksummed stream (core/gzstream.h) and what messages need. */
typedef struct {
    pmt_gzstream gz;
    const char *path;
    char *err;
    size_t errlen;
} tok_stream;

/* A read of `what` came up short: the file ends early or does not inflate. */
static int read_failed(tok_stream *s, const char *what) {
    snprintf(s->err, s->errlen, "corrupt token file '%s': cannot read its %s: %s "
             "(re-run `projmt prepare` to rebuild it)", s->path, what, pmt_gzstream_reason(&s->gz));
    return -1;
}

/* Reads exactly n bytes (what names the part, for the message); 0 or -1. */
static int stream_read(tok_stream *s, void *data, size_t n, const char *what) {
    return pmt_gzstream_read(&s->gz, data, n) == 0 ? 0 : read_failed(s, what);
}

/* Checks an offset table: starts at 0, never decreases, ends at total. */
static int offsets_valid(const uint64_t *off, uint32_t n_pairs, uint64_t total) {
    if (off[0] != 0 || off[n_pairs] != total) return 0;
    for (uint32_t i = 0; i < n_pairs; i++)
        if (off[i + 1] < off[i] || off[i + 1] - off[i] > (uint64_t)INT32_MAX) return 0;
    return 1;
}

/* Sets the standard "corrupt token file" message; returns -1. */
static int fail_corrupt(tok_stream *s, const char *what) {
    snprintf(s->err, s->errlen, "corrupt token file '%s': %s (re-run `projmt prepare` to rebuild it)", s->path, what);
    return -1;
}

/* Reads and checks the fixed header; fills the counts. */
static int read_header(tok_stream *s, uint64_t file_size, uint32_t *n_pairs, uint64_t *n_src, uint64_t *n_tgt) {
    char magic[8];
    uint32_t version;
    if (stream_read(s, magic, sizeof magic, "header")) return -1;
    if (memcmp(magic, corpus_magic, sizeof magic) != 0) {
        snprintf(s->err, s->errlen, "'%s' is not a projmt token file (bad magic); expected a <split>.tok "
                 "written by `projmt prepare`", s->path);
        return -1;
    }
    if (stream_read(s, &version, sizeof version, "header")) return -1;
    if (version != CORPUS_VERSION) {
        snprintf(s->err, s->errlen, "token file '%s' has format version %u, this build reads versions %d and %d; "
                 "re-run `projmt prepare`", s->path, version, CORPUS_VERSION, MAPPED_VERSION);
        return -1;
    }
    if (stream_read(s, n_pairs, sizeof *n_pairs, "header") || stream_read(s, n_src, sizeof *n_src, "header") ||
        stream_read(s, n_tgt, sizeof *n_tgt, "header"))
        return -1;
    if (*n_pairs > (uint32_t)INT32_MAX - 1) return fail_corrupt(s, "pair count out of range");
    /* Every count is bounded by what the compressed bytes could expand to. */
    uint64_t limit = pmt_gzstream_inflate_bound(file_size);
    if (*n_pairs > limit / 16 || *n_src > limit / 4 || *n_tgt > limit / 4 ||
        ((uint64_t)*n_pairs + 1) * 16 + (*n_src + *n_tgt) * 4 > limit)
        return fail_corrupt(s, "header counts exceed what the file can hold");
    return 0;
}

/* Reads and verifies everything after gzopen; on failure c is partly
 * filled and the caller frees it. */
static int read_body(tok_stream *s, pmt_corpus *c, uint64_t file_size) {
    uint32_t n_pairs;
    uint64_t n_src, n_tgt;
    if (read_header(s, file_size, &n_pairs, &n_src, &n_tgt)) return -1;
    size_t n_off = (size_t)n_pairs + 1;
    c->n_pairs = (int)n_pairs;
    c->src_off = malloc(n_off * sizeof(uint64_t));
    c->tgt_off = malloc(n_off * sizeof(uint64_t));
    c->src_ids = malloc((n_src ? n_src : 1) * sizeof(int32_t));
    c->tgt_ids = malloc((n_tgt ? n_tgt : 1) * sizeof(int32_t));
    if (!c->src_off || !c->tgt_off || !c->src_ids || !c->tgt_ids) {
        snprintf(s->err, s->errlen, "out of memory loading '%s'", s->path);
        return -1;
    }
    if (stream_read(s, c->src_off, n_off * sizeof(uint64_t), "source offsets") ||
        stream_read(s, c->tgt_off, n_off * sizeof(uint64_t), "target offsets"))
        return -1;
    if (!offsets_valid(c->src_off, n_pairs, n_src) || !offsets_valid(c->tgt_off, n_pairs, n_tgt))
        return fail_corrupt(s, "offset table is inconsistent");
    if (stream_read(s, c->src_ids, n_src * sizeof(int32_t), "source ids") ||
        stream_read(s, c->tgt_ids, n_tgt * sizeof(int32_t), "target ids"))
        return -1;
    uint32_t computed = (uint32_t)s->gz.crc;   /* what the stored checksum must be */
    int crc = pmt_gzstream_check_crc(&s->gz);
    if (crc < 0) return read_failed(s, "checksum");
    if (crc > 0) return fail_corrupt(s, "checksum mismatch");
    if (pmt_gzstream_at_end(&s->gz) != 1) return fail_corrupt(s, "unexpected bytes after the checksum");
    c->checksum = computed;
    return 0;
}

/* Version 1: the whole gzip stream read into memory and its crc checked. */
static int load_version1(pmt_corpus *c, const char *path, uint64_t file_size, char *err, size_t errlen) {
    tok_stream s = {.path = path, .err = err, .errlen = errlen};
    if (pmt_gzstream_open_read(&s.gz, path) != 0) {
        snprintf(err, errlen, "cannot open token file '%s': %s", path, errno ? strerror(errno) : "out of memory");
        return -1;
    }
    int rc = read_body(&s, c, file_size);
    if (pmt_gzstream_close(&s.gz) != 0 && rc == 0) rc = fail_corrupt(&s, "zlib reported an error when closing it");
    return rc;
}

/* ---- version 2: mapped ----------------------------------------------- */

/* The fixed header of a version-2 file, as laid out in corpus.h. */
typedef struct {
    char magic[8];
    uint32_t version, header_bytes;
    uint64_t n_pairs, n_src, n_tgt;
    uint32_t vocab_size, spm_checksum, body_checksum, reserved[2], header_checksum;
} mapped_header;
_Static_assert(sizeof(mapped_header) == HEADER_BYTES && offsetof(mapped_header, header_checksum) == 60,
               "the version-2 header is 64 bytes, its checksum last");

/* Sets "corrupt token file" for a version-2 file; returns -1. */
static int mapped_corrupt(const char *path, char *err, size_t errlen, const char *what) {
    snprintf(err, errlen, "corrupt token file '%s': %s (re-run `projmt prepare` to rebuild it)", path, what);
    return -1;
}

static uint32_t crc_of(uint32_t crc, const void *data, size_t n) {
    const unsigned char *p = data;
    while (n > 0) {   /* zlib's length is a uInt */
        uInt part = n > (1u << 30) ? (1u << 30) : (uInt)n;
        crc = (uint32_t)crc32(crc, p, part);
        p += part;
        n -= part;
    }
    return crc;
}

/* Reads exactly n bytes at offset pos of fd; 0, or -1 (errno, or 0 at the end). */
static int read_at(int fd, void *data, size_t n, uint64_t pos) {
    unsigned char *p = data;
    while (n > 0) {
        ssize_t got = pread(fd, p, n, (off_t)pos);
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0) { if (got == 0) errno = 0; return -1; }
        p += got;
        n -= (size_t)got;
        pos += (uint64_t)got;
    }
    return 0;
}

/* Checks the header's fields and the file's size; fills *body_bytes. */
static int check_header(const mapped_header *h, const char *path, uint64_t file_size, char *err, size_t errlen) {
    if (h->version != MAPPED_VERSION) {
        snprintf(err, errlen, "token file '%s' has format version %u, this build reads versions %d and %d; "
                 "re-run `projmt prepare`", path, h->version, CORPUS_VERSION, MAPPED_VERSION);
        return -1;
    }
    if (crc_of(0, h, offsetof(mapped_header, header_checksum)) != h->header_checksum)
        return mapped_corrupt(path, err, errlen, "header checksum mismatch");
    if (h->header_bytes != HEADER_BYTES || h->reserved[0] != 0 || h->reserved[1] != 0)
        return mapped_corrupt(path, err, errlen, "unknown header layout");
    if (h->n_pairs > (uint64_t)INT32_MAX - 1) return mapped_corrupt(path, err, errlen, "pair count out of range");
    /* Bounded by the size first, so the sum below cannot overflow. */
    if (h->n_pairs > file_size / 16 || h->n_src > file_size / 4 || h->n_tgt > file_size / 4) {
        snprintf(err, errlen, "token file '%s' is truncated: %llu bytes cannot hold the %llu pairs, %llu source "
                 "and %llu target ids its header names (an interrupted copy? re-run `projmt prepare`)", path,
                 (unsigned long long)file_size, (unsigned long long)h->n_pairs, (unsigned long long)h->n_src,
                 (unsigned long long)h->n_tgt);
        return -1;
    }
    uint64_t expected = HEADER_BYTES + 16 * (h->n_pairs + 1) + 4 * (h->n_src + h->n_tgt);
    if (file_size < expected) {
        snprintf(err, errlen, "token file '%s' is truncated: it has %llu bytes, its header promises %llu (an "
                 "interrupted copy? re-run `projmt prepare`)", path, (unsigned long long)file_size,
                 (unsigned long long)expected);
        return -1;
    }
    if (file_size > expected) {
        snprintf(err, errlen, "corrupt token file '%s': %llu bytes after the %llu its header describes (re-run "
                 "`projmt prepare` to rebuild it)", path, (unsigned long long)(file_size - expected),
                 (unsigned long long)expected);
        return -1;
    }
    return 0;
}

/* Gives back the pages of [from, to) of the mapping that lie wholly inside. */
static void release_pages(const pmt_corpus *c, const void *from, const void *to) {
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE), base = (uintptr_t)c->map;
    uintptr_t lo = ((uintptr_t)from - base + page - 1) / page * page, hi = ((uintptr_t)to - base) / page * page;
    if (hi > lo) (void)madvise((char *)c->map + lo, hi - lo, MADV_DONTNEED);   /* advice: failure costs only memory */
}

/* offsets_valid over a mapped table, window by window, each window's pages
 * released once checked (see the top of this file). */
static int mapped_offsets_valid(const pmt_corpus *c, const uint64_t *off, uint64_t n_pairs, uint64_t total) {
    if (off[0] != 0 || off[n_pairs] != total) return 0;
    for (uint64_t start = 0; start < n_pairs; start += CHECK_WINDOW) {
        uint64_t end = n_pairs - start < CHECK_WINDOW ? n_pairs : start + CHECK_WINDOW;
        for (uint64_t i = start; i < end; i++)
            if (off[i + 1] < off[i] || off[i + 1] - off[i] > (uint64_t)INT32_MAX) return 0;
        release_pages(c, off + start, off + end);
    }
    return 1;
}

/* Version 2: header checks, then the file mapped read-only. */
static int load_version2(pmt_corpus *c, int fd, const char *path, uint64_t file_size, char *err, size_t errlen) {
    mapped_header h;
    if (file_size < HEADER_BYTES) {
        snprintf(err, errlen, "token file '%s' is truncated: %llu bytes, shorter than its %d-byte header (re-run "
                 "`projmt prepare`)", path, (unsigned long long)file_size, HEADER_BYTES);
        return -1;
    }
    if (read_at(fd, &h, sizeof h, 0) != 0) {
        snprintf(err, errlen, "cannot read token file '%s': %s", path, errno ? strerror(errno) : "it ended early");
        return -1;
    }
    if (check_header(&h, path, file_size, err, errlen) != 0) return -1;
    c->map = mmap(NULL, (size_t)file_size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (c->map == MAP_FAILED) {
        c->map = NULL;
        snprintf(err, errlen, "cannot map token file '%s' (%llu bytes): %s", path, (unsigned long long)file_size,
                 strerror(errno));
        return -1;
    }
    c->map_bytes = (size_t)file_size;
    (void)madvise(c->map, c->map_bytes, MADV_RANDOM);   /* batches read scattered pairs: no read-ahead of MBs */
    char *base = c->map;
    size_t n_off = (size_t)h.n_pairs + 1;
    c->n_pairs = (int)h.n_pairs;
    c->src_off = (uint64_t *)(void *)(base + HEADER_BYTES);
    c->tgt_off = c->src_off + n_off;
    c->src_ids = (int32_t *)(void *)(c->tgt_off + n_off);
    c->tgt_ids = c->src_ids + h.n_src;
    if (!mapped_offsets_valid(c, c->src_off, h.n_pairs, h.n_src) ||
        !mapped_offsets_valid(c, c->tgt_off, h.n_pairs, h.n_tgt))
        return mapped_corrupt(path, err, errlen, "offset table is inconsistent");
    c->checksum = h.body_checksum;
    c->vocab_size = (int)h.vocab_size;
    c->spm_checksum = h.spm_checksum;
    return 0;
}

int pmt_corpus_load(pmt_corpus *c, const char *path, char *err, size_t errlen) {
    memset(c, 0, sizeof *c);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        snprintf(err, errlen, "cannot open token file '%s': %s (run `projmt prepare` first)", path, strerror(errno));
        if (fd >= 0) close(fd);
        return -1;
    }
    char magic[8] = {0};
    int rc;
    if (st.st_size >= (off_t)sizeof magic && read_at(fd, magic, sizeof magic, 0) != 0) {
        snprintf(err, errlen, "cannot read token file '%s': %s", path, errno ? strerror(errno) : "it ended early");
        rc = -1;
    } else if (memcmp(magic, mapped_magic, sizeof magic) == 0) {
        rc = load_version2(c, fd, path, (uint64_t)st.st_size, err, errlen);
    } else {
        rc = load_version1(c, path, (uint64_t)st.st_size, err, errlen);   /* gzip, or a bad magic */
    }
    close(fd);   /* the mapping stays valid without it */
    if (rc != 0) pmt_corpus_free(c);
    return rc;
}

int pmt_corpus_check_vocabulary(const pmt_corpus *c, const char *path, int vocab_size, uint32_t spm_checksum,
                                char *err, size_t errlen) {
    if (c->vocab_size == 0) return 0;   /* version 1: names no vocabulary */
    if (c->vocab_size == vocab_size && c->spm_checksum == spm_checksum) return 0;
    snprintf(err, errlen, "token file '%s' was encoded with another vocabulary (%d pieces, spm.model checksum "
             "%08x) than this spm.model (%d pieces, checksum %08x): its ids would mean other pieces. Use the "
             "spm.model it was prepared with, or re-run `projmt prepare`", path, c->vocab_size,
             (unsigned)c->spm_checksum, vocab_size, (unsigned)spm_checksum);
    return -1;
}

int pmt_corpus_verify(const pmt_corpus *c, const char *path, char *err, size_t errlen) {
    if (!c->map) return 0;   /* version 1: its crc was checked as it was read */
    const char *body = (const char *)c->map + HEADER_BYTES, *end = (const char *)c->map + c->map_bytes;
    uint32_t crc = 0;
    for (const char *p = body; p < end;) {
        size_t n = (size_t)(end - p) < ((size_t)8 << 20) ? (size_t)(end - p) : ((size_t)8 << 20);
        crc = crc_of(crc, p, n);
        release_pages(c, p, p + n);
        p += n;
    }
    if (crc == c->checksum) return 0;
    return mapped_corrupt(path, err, errlen, "checksum mismatch");
}

void pmt_corpus_free(pmt_corpus *c) {
    if (c->map) {
        munmap(c->map, c->map_bytes);
    } else {
        free(c->src_off);
        free(c->tgt_off);
        free(c->src_ids);
        free(c->tgt_ids);
    }
    memset(c, 0, sizeof *c);
}

void pmt_corpus_release_pages(const pmt_corpus *c) {
    if (c->map) (void)madvise(c->map, c->map_bytes, MADV_DONTNEED);   /* advice: failure costs only memory */
}

uint32_t pmt_corpus_spm_checksum(const void *spm_bytes, size_t size) { return crc_of(0, spm_bytes, size); }

/* ---- version 2: writing ------------------------------------------------ */

enum { WRITER_BUFFER = 1 << 16 };   /* entries per buffered section */

/* One section of the body: where its next bytes go, its running crc32, and
 * a buffer of pending bytes. */
typedef struct {
    uint64_t pos;         /* file offset of the next flush (main file), or unused (side file) */
    uint64_t bytes;       /* bytes of the section so far */
    uint32_t crc;
    unsigned char *buf;
    size_t used;
} section;

struct pmt_corpus_writer {
    int fd;               /* the output */
    FILE *side;           /* target ids until finish */
    char path[PMT_ATOMIC_PATH_MAX + 8], side_path[PMT_ATOMIC_PATH_MAX + 16];
    uint64_t n_pairs, added, n_src, n_tgt;
    int vocab_size;
    uint32_t spm_checksum;
    section src_off, tgt_off, src_ids, tgt_ids;
};

/* Writes n bytes at pos; 0 or -1 (errno). */
static int write_at(int fd, const void *data, size_t n, uint64_t pos) {
    const unsigned char *p = data;
    while (n > 0) {
        ssize_t put = pwrite(fd, p, n, (off_t)pos);
        if (put < 0 && errno == EINTR) continue;
        if (put <= 0) { if (put == 0) errno = EIO; return -1; }
        p += put;
        n -= (size_t)put;
        pos += (uint64_t)put;
    }
    return 0;
}

/* Sends a section's buffer to its place (side: the side file); 0 or -1. */
static int section_flush(pmt_corpus_writer *w, section *s, FILE *side) {
    if (s->used == 0) return 0;
    if (side ? fwrite(s->buf, 1, s->used, side) != s->used : write_at(w->fd, s->buf, s->used, s->pos) != 0)
        return -1;
    s->pos += s->used;
    s->used = 0;
    return 0;
}

/* Appends n bytes to a section; 0 or -1 (a flush failed). */
static int section_put(pmt_corpus_writer *w, section *s, const void *data, size_t n, FILE *side) {
    s->crc = crc_of(s->crc, data, n);
    s->bytes += n;
    const unsigned char *p = data;
    while (n > 0) {
        size_t room = WRITER_BUFFER * sizeof(uint64_t) - s->used, part = n < room ? n : room;
        memcpy(s->buf + s->used, p, part);
        s->used += part;
        p += part;
        n -= part;
        if (s->used == WRITER_BUFFER * sizeof(uint64_t) && section_flush(w, s, side) != 0) return -1;
    }
    return 0;
}

static void writer_free(pmt_corpus_writer *w) {
    section *parts[] = {&w->src_off, &w->tgt_off, &w->src_ids, &w->tgt_ids};
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++) free(parts[i]->buf);
    free(w);
}

void pmt_corpus_writer_discard(pmt_corpus_writer *w) {
    if (!w) return;
    if (w->fd >= 0) close(w->fd);
    if (w->side) fclose(w->side);
    remove(w->path);
    remove(w->side_path);
    writer_free(w);
}

/* A failed write: the message names the file, errno says why. */
static int writer_failed(pmt_corpus_writer *w, const char *which, char *err, size_t errlen) {
    snprintf(err, errlen, "cannot write token file '%s': %s", which ? which : w->path, strerror(errno));
    return -1;
}

pmt_corpus_writer *pmt_corpus_writer_open(const char *path, long n_pairs, int vocab_size, uint32_t spm_checksum,
                                          char *err, size_t errlen) {
    if (n_pairs < 0 || n_pairs > INT32_MAX - 1 || vocab_size < 0) {
        snprintf(err, errlen, "token file '%s': %ld pairs or vocabulary %d out of range", path, n_pairs, vocab_size);
        return NULL;
    }
    pmt_corpus_writer *w = calloc(1, sizeof *w);
    if (!w) { snprintf(err, errlen, "out of memory writing '%s'", path); return NULL; }
    w->fd = -1;
    if (snprintf(w->path, sizeof w->path, "%s", path) >= (int)sizeof w->path) {
        snprintf(err, errlen, "token file path too long: '%.100s...'", path);
        free(w);
        return NULL;
    }
    snprintf(w->side_path, sizeof w->side_path, "%s.tgt.tmp", path);
    w->n_pairs = (uint64_t)n_pairs;
    w->vocab_size = vocab_size;
    w->spm_checksum = spm_checksum;
    section *parts[] = {&w->src_off, &w->tgt_off, &w->src_ids, &w->tgt_ids};
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++)
        if (!(parts[i]->buf = malloc(WRITER_BUFFER * sizeof(uint64_t)))) {
            snprintf(err, errlen, "out of memory writing '%s'", path);
            writer_free(w);
            return NULL;
        }
    w->src_off.pos = HEADER_BYTES;
    w->tgt_off.pos = HEADER_BYTES + 8 * (w->n_pairs + 1);
    w->src_ids.pos = HEADER_BYTES + 16 * (w->n_pairs + 1);
    w->fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
    if (w->fd < 0) {
        writer_failed(w, NULL, err, errlen);
        writer_free(w);
        return NULL;
    }
    if (!(w->side = fopen(w->side_path, "w+b"))) {
        writer_failed(w, w->side_path, err, errlen);
        pmt_corpus_writer_discard(w);
        return NULL;
    }
    const uint64_t zero = 0;
    if (section_put(w, &w->src_off, &zero, 8, NULL) != 0 || section_put(w, &w->tgt_off, &zero, 8, NULL) != 0) {
        writer_failed(w, NULL, err, errlen);
        pmt_corpus_writer_discard(w);
        return NULL;
    }
    return w;
}

int pmt_corpus_writer_add(pmt_corpus_writer *w, const int32_t *src, size_t n_src, const int32_t *tgt, size_t n_tgt,
                          char *err, size_t errlen) {
    if (w->added == w->n_pairs) {
        snprintf(err, errlen, "token file '%s': more pairs than the %llu it was opened for", w->path,
                 (unsigned long long)w->n_pairs);
        return -1;
    }
    if (n_src > INT32_MAX || n_tgt > INT32_MAX) {
        snprintf(err, errlen, "token file '%s': a sentence of %zu ids is too long", w->path, n_src > n_tgt ? n_src : n_tgt);
        return -1;
    }
    w->n_src += n_src;
    w->n_tgt += n_tgt;
    w->added++;
    if (section_put(w, &w->src_ids, src, n_src * sizeof *src, NULL) != 0 ||
        section_put(w, &w->src_off, &w->n_src, 8, NULL) != 0 || section_put(w, &w->tgt_off, &w->n_tgt, 8, NULL) != 0)
        return writer_failed(w, NULL, err, errlen);
    if (section_put(w, &w->tgt_ids, tgt, n_tgt * sizeof *tgt, w->side) != 0)
        return writer_failed(w, w->side_path, err, errlen);
    return 0;
}

/* Copies the side file's target ids after the source ids. */
static int append_targets(pmt_corpus_writer *w) {
    if (fflush(w->side) != 0 || fseek(w->side, 0, SEEK_SET) != 0) return -1;
    uint64_t pos = w->src_ids.pos, left = w->tgt_ids.bytes;
    while (left > 0) {
        size_t n = left < WRITER_BUFFER * sizeof(uint64_t) ? (size_t)left : WRITER_BUFFER * sizeof(uint64_t);
        if (fread(w->tgt_ids.buf, 1, n, w->side) != n) { if (!ferror(w->side)) errno = EIO; return -1; }
        if (write_at(w->fd, w->tgt_ids.buf, n, pos) != 0) return -1;
        pos += n;
        left -= n;
    }
    return 0;
}

int pmt_corpus_writer_finish(pmt_corpus_writer *w, uint32_t *checksum, char *err, size_t errlen) {
    if (w->added != w->n_pairs) {
        snprintf(err, errlen, "token file '%s': %llu pairs written of the %llu it was opened for", w->path,
                 (unsigned long long)w->added, (unsigned long long)w->n_pairs);
        pmt_corpus_writer_discard(w);
        return -1;
    }
    if (section_flush(w, &w->src_off, NULL) != 0 || section_flush(w, &w->tgt_off, NULL) != 0 ||
        section_flush(w, &w->src_ids, NULL) != 0 || section_flush(w, &w->tgt_ids, w->side) != 0 ||
        append_targets(w) != 0) {
        writer_failed(w, NULL, err, errlen);
        pmt_corpus_writer_discard(w);
        return -1;
    }
    /* The body's crc32 from its sections' in file order. */
    uint32_t body = w->src_off.crc;
    body = (uint32_t)crc32_combine(body, w->tgt_off.crc, (z_off_t)w->tgt_off.bytes);
    body = (uint32_t)crc32_combine(body, w->src_ids.crc, (z_off_t)w->src_ids.bytes);
    body = (uint32_t)crc32_combine(body, w->tgt_ids.crc, (z_off_t)w->tgt_ids.bytes);
    mapped_header h;
    memset(&h, 0, sizeof h);
    memcpy(h.magic, mapped_magic, sizeof h.magic);
    h.version = MAPPED_VERSION;
    h.header_bytes = HEADER_BYTES;
    h.n_pairs = w->n_pairs;
    h.n_src = w->n_src;
    h.n_tgt = w->n_tgt;
    h.vocab_size = (uint32_t)w->vocab_size;
    h.spm_checksum = w->spm_checksum;
    h.body_checksum = body;
    h.header_checksum = crc_of(0, &h, offsetof(mapped_header, header_checksum));
    /* the header last: a file cut short before this point has none */
    if (write_at(w->fd, &h, sizeof h, 0) != 0 || fsync(w->fd) != 0) {
        writer_failed(w, NULL, err, errlen);
        pmt_corpus_writer_discard(w);
        return -1;
    }
    int rc = close(w->fd);
    w->fd = -1;
    if (rc != 0) {
        writer_failed(w, NULL, err, errlen);
        pmt_corpus_writer_discard(w);
        return -1;
    }
    fclose(w->side);   /* read back already; its content is no longer needed */
    w->side = NULL;
    remove(w->side_path);
    if (checksum) *checksum = body;
    writer_free(w);
    return 0;
}

int pmt_corpus_save(const pmt_corpus *c, const char *path, int vocab_size, uint32_t spm_checksum, char *err,
                    size_t errlen) {
    if (c->n_pairs < 0 || c->src_off[0] != 0 || c->tgt_off[0] != 0) {
        snprintf(err, errlen, "refusing to write '%s': corpus offsets do not start at 0", path);
        return -1;
    }
    pmt_atomic_file af;
    if (pmt_atomic_name(&af, path, NULL, err, errlen) != 0) return -1;
    pmt_corpus_writer *w = pmt_corpus_writer_open(af.tmp, c->n_pairs, vocab_size, spm_checksum, err, errlen);
    if (!w) return -1;
    for (int i = 0; i < c->n_pairs; i++)
        if (pmt_corpus_writer_add(w, c->src_ids + c->src_off[i], (size_t)pmt_corpus_src_len(c, i),
                                  c->tgt_ids + c->tgt_off[i], (size_t)pmt_corpus_tgt_len(c, i), err, errlen) != 0) {
            pmt_corpus_writer_discard(w);
            return -1;
        }
    if (pmt_corpus_writer_finish(w, NULL, err, errlen) != 0) return -1;
    if (pmt_atomic_rename(&af, err, errlen) != 0) {
        remove(af.tmp);
        return -1;
    }
    return 0;
}

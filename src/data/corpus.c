/*
 * corpus.c — reading and writing the tokenized split files of corpus.h.
 *
 * Why it checks so much: a .tok file is produced once and read by every
 * training run, so a truncated copy or a flipped bit must give a message
 * naming the file and the fault, never a crash or silently wrong ids. The
 * header is read first and sanity-checked (offset tables must be monotone
 * and end at the id counts; counts may not claim more data than the
 * compressed file could hold) before anything large is allocated, and the
 * trailing crc32 covers every decompressed byte.
 *
 * Ownership: pmt_corpus owns its four arrays (malloc'd); pmt_corpus_free.
 */
#include "data/corpus.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/gzstream.h"

static const char corpus_magic[8] = {'P', 'M', 'T', 'T', 'O', 'K', '\0', '\1'};
enum { CORPUS_VERSION = 1 };

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

/* Writes the header, tables and ids (pmt_gzstream_save appends their
 * crc32); 0, or -1 when a write failed. */
static int write_body(pmt_gzstream *gz, void *user) {
    const pmt_corpus *c = user;
    uint32_t version = CORPUS_VERSION, n_pairs = (uint32_t)c->n_pairs;
    uint64_t n_src = c->src_off[c->n_pairs], n_tgt = c->tgt_off[c->n_pairs];
    size_t n_off = (size_t)c->n_pairs + 1;
    const struct { const void *data; size_t n; } parts[] = {
        {corpus_magic, sizeof corpus_magic}, {&version, sizeof version}, {&n_pairs, sizeof n_pairs},
        {&n_src, sizeof n_src}, {&n_tgt, sizeof n_tgt}, {c->src_off, n_off * sizeof(uint64_t)},
        {c->tgt_off, n_off * sizeof(uint64_t)}, {c->src_ids, n_src * sizeof(int32_t)},
        {c->tgt_ids, n_tgt * sizeof(int32_t)}};
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++)
        if (pmt_gzstream_write(gz, parts[i].data, parts[i].n) != 0) return -1;
    return 0;
}

int pmt_corpus_save(const pmt_corpus *c, const char *path, char *err, size_t errlen) {
    if (c->n_pairs < 0 || c->src_off[0] != 0 || c->tgt_off[0] != 0) {
        snprintf(err, errlen, "refusing to write '%s': corpus offsets do not start at 0", path);
        return -1;
    }
    return pmt_gzstream_save(path, 6, "token file", write_body, (void *)c, err, errlen);
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
        snprintf(s->err, s->errlen, "token file '%s' has format version %u, this build reads version %d; "
                 "re-run `projmt prepare`", s->path, version, CORPUS_VERSION);
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

int pmt_corpus_load(pmt_corpus *c, const char *path, char *err, size_t errlen) {
    memset(c, 0, sizeof *c);
    struct stat st;
    if (stat(path, &st) != 0) {
        snprintf(err, errlen, "cannot open token file '%s': %s (run `projmt prepare` first)", path, strerror(errno));
        return -1;
    }
    tok_stream s = {.path = path, .err = err, .errlen = errlen};
    if (pmt_gzstream_open_read(&s.gz, path) != 0) {
        snprintf(err, errlen, "cannot open token file '%s': %s", path, errno ? strerror(errno) : "out of memory");
        return -1;
    }
    int rc = read_body(&s, c, (uint64_t)st.st_size);
    if (pmt_gzstream_close(&s.gz) != 0 && rc == 0) rc = fail_corrupt(&s, "zlib reported an error when closing it");
    if (rc != 0) pmt_corpus_free(c);
    return rc;
}

void pmt_corpus_free(pmt_corpus *c) {
    free(c->src_off);
    free(c->tgt_off);
    free(c->src_ids);
    free(c->tgt_ids);
    memset(c, 0, sizeof *c);
}

/*
 * gzstream.c — see gzstream.h. zlib takes unsigned int lengths, so large
 * arrays go through in chunks; a 1 MiB buffer keeps the calls few.
 */
#include "core/gzstream.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "core/fileio.h"

#define IO_CHUNK ((size_t)1 << 28)
#define BUFFER_BYTES (1u << 20)

int pmt_gzstream_open_write(pmt_gzstream *s, FILE *f, int level) {
    char mode[4] = {'w', 'b', (char)('0' + (level < 0 ? 0 : level > 9 ? 9 : level)), '\0'};
    s->crc = crc32(0L, Z_NULL, 0);
    int fd = dup(fileno(f));
    s->gz = fd >= 0 ? gzdopen(fd, mode) : NULL;
    if (!s->gz) {
        if (fd >= 0) close(fd);
        return -1;
    }
    if (gzbuffer(s->gz, BUFFER_BYTES) != 0) {
        gzclose(s->gz);
        s->gz = NULL;
        return -1;
    }
    return 0;
}

int pmt_gzstream_open_read(pmt_gzstream *s, const char *path) {
    s->crc = crc32(0L, Z_NULL, 0);
    errno = 0;
    s->gz = gzopen(path, "rb");
    if (!s->gz) return -1;
    if (gzbuffer(s->gz, BUFFER_BYTES) != 0) {
        gzclose_r(s->gz);
        s->gz = NULL;
        return -1;
    }
    return 0;
}

/* Moves n bytes through the stream in zlib-sized chunks, folding each into
 * the checksum (written bytes are only read here). */
static int transfer(pmt_gzstream *s, unsigned char *p, size_t n, int writing) {
    while (n > 0) {
        unsigned len = (unsigned)(n < IO_CHUNK ? n : IO_CHUNK);
        int done = writing ? gzwrite(s->gz, p, len) : gzread(s->gz, p, len);
        if (done != (int)len) return -1;
        s->crc = crc32(s->crc, p, len);
        p += len;
        n -= len;
    }
    return 0;
}

int pmt_gzstream_write(pmt_gzstream *s, const void *data, size_t n) {
    return transfer(s, (unsigned char *)(uintptr_t)data, n, 1);
}

void pmt_gzsink_put(pmt_gzsink *s, const void *data, size_t n) {
    if (!s->failed && pmt_gzstream_write(s->gz, data, n) != 0) s->failed = 1;
}
void pmt_gzsink_u32(pmt_gzsink *s, uint32_t v) { pmt_gzsink_put(s, &v, sizeof v); }
void pmt_gzsink_i32(pmt_gzsink *s, int32_t v) { pmt_gzsink_put(s, &v, sizeof v); }
void pmt_gzsink_u64(pmt_gzsink *s, uint64_t v) { pmt_gzsink_put(s, &v, sizeof v); }
void pmt_gzsink_i64(pmt_gzsink *s, int64_t v) { pmt_gzsink_put(s, &v, sizeof v); }

int pmt_gzstream_write_crc(pmt_gzstream *s) {
    uint32_t crc = (uint32_t)s->crc;
    return pmt_gzstream_write(s, &crc, sizeof crc);
}

int pmt_gzstream_read(pmt_gzstream *s, void *data, size_t n) {
    return transfer(s, data, n, 0);
}

int pmt_gzstream_check_crc(pmt_gzstream *s) {
    uint32_t computed = (uint32_t)s->crc, stored;
    if (pmt_gzstream_read(s, &stored, sizeof stored) != 0) return -1;
    return stored == computed ? 0 : 1;
}

int pmt_gzstream_at_end(pmt_gzstream *s) {
    unsigned char extra;
    int got = gzread(s->gz, &extra, 1);
    if (got > 0) return 0;
    int code = Z_OK;
    gzerror(s->gz, &code);
    return (got == 0 && (code == Z_OK || code == Z_STREAM_END)) ? 1 : -1;
}

const char *pmt_gzstream_reason(pmt_gzstream *s) {
    int code = Z_OK;
    const char *msg = gzerror(s->gz, &code);
    if (code == Z_ERRNO) return strerror(errno);
    if (code == Z_OK || code == Z_STREAM_END || !msg || !*msg) return "unexpected end of file (truncated?)";
    return msg;
}

int pmt_gzstream_close(pmt_gzstream *s) {
    if (!s->gz) return 0;
    int rc = gzclose(s->gz);
    s->gz = NULL;
    return rc == Z_OK ? 0 : -1;
}

uint64_t pmt_gzstream_inflate_bound(uint64_t file_size) {
    enum { DEFLATE_MAX_RATIO = 1100 };   /* 1032:1, rounded up */
    return (file_size + 1) * DEFLATE_MAX_RATIO;
}

int pmt_gzstream_save(const char *path, int level, const char *what, int (*body)(pmt_gzstream *s, void *user),
                      void *user, char *err, size_t errlen) {
    char inner[PMT_ATOMIC_PATH_MAX * 2 + 128];
    pmt_atomic_file af;
    if (pmt_atomic_open(&af, path, inner, sizeof inner) != 0) {
        snprintf(err, errlen, "%s: %s (check that the directory exists and is writable)", what, inner);
        return -1;
    }
    pmt_gzstream s;
    errno = 0;
    if (pmt_gzstream_open_write(&s, af.f, level) != 0) {
        snprintf(err, errlen, "%s '%s': cannot start the gzip stream (%s)", what, path,
                 errno ? strerror(errno) : "out of memory");
        pmt_atomic_discard(&af);
        return -1;
    }
    int failed = body(&s, user) != 0 || pmt_gzstream_write_crc(&s) != 0;
    char why[256] = "";
    if (failed) snprintf(why, sizeof why, "%s", pmt_gzstream_reason(&s));
    if (pmt_gzstream_close(&s) != 0 && !failed) {
        failed = 1;
        snprintf(why, sizeof why, "%s", strerror(errno));
    }
    if (failed) {
        snprintf(err, errlen, "writing %s '%s' failed: %s (disk full?)", what, af.tmp, why);
        pmt_atomic_discard(&af);
        return -1;
    }
    if (pmt_atomic_commit(&af, inner, sizeof inner) != 0) {
        snprintf(err, errlen, "%s: %s", what, inner);
        return -1;
    }
    return 0;
}

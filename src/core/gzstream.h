/*
 * gzstream.h — the checksummed gzip stream of checkpoints (model/checkpoint.c)
 * and token files (data/corpus.c).
 *
 * Why a checksum of our own inside gzip: both formats end with the crc32 of
 * every uncompressed byte before it and must end right after it. That
 * catches what gzip alone lets through — a file cut exactly at a member
 * boundary, a second member appended, bytes after the payload — and it
 * checks the payload as the reader parsed it, field by field.
 *
 * Writing goes into a file opened by core/fileio.h (pmt_atomic_open): the
 * stream works on a duplicate of its descriptor, so closing the stream
 * leaves the file open for the fsync and rename of pmt_atomic_commit.
 *
 * Ownership: a pmt_gzstream owns its zlib handle from open to
 * pmt_gzstream_close (call it on every opened stream, also after a failure).
 */
#ifndef PROJMT_GZSTREAM_H
#define PROJMT_GZSTREAM_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <zlib.h>

typedef struct pmt_gzstream {
    gzFile gz;
    uLong crc;                   /* crc32 of every byte written or read so far */
} pmt_gzstream;

/* Opens a compressing stream over a duplicate of f's descriptor: zlib level
 * 1..9, or 0 for stored (uncompressed) deflate blocks, which any gzip reader
 * still reads and checks. 0, or -1 (errno set, or out of memory). */
int pmt_gzstream_open_write(pmt_gzstream *s, FILE *f, int level);
/* Opens path for reading. 0, or -1 (errno set, or out of memory). */
int pmt_gzstream_open_read(pmt_gzstream *s, const char *path);

/* Writes n bytes and folds them into the checksum. 0, or -1. */
int pmt_gzstream_write(pmt_gzstream *s, const void *data, size_t n);
/* Appends the checksum of everything written so far. 0, or -1. */
int pmt_gzstream_write_crc(pmt_gzstream *s);

/* Reads exactly n bytes and folds them into the checksum. 0, or -1 when the
 * stream ends early or does not inflate (pmt_gzstream_reason says which). */
int pmt_gzstream_read(pmt_gzstream *s, void *data, size_t n);
/* Reads the stored checksum and compares it with the bytes read before it:
 * 0 when they match, 1 when they differ, -1 when it cannot be read. */
int pmt_gzstream_check_crc(pmt_gzstream *s);
/* 1 when nothing follows in the stream, 0 when bytes follow, -1 when the
 * rest does not inflate. */
int pmt_gzstream_at_end(pmt_gzstream *s);

/* Why the last call failed: the I/O error, zlib's message, or "unexpected
 * end of file (truncated?)" after a short read. */
const char *pmt_gzstream_reason(pmt_gzstream *s);

/* A fixed-layout writer that checks once, at the end: the first failed
 * write sticks in `failed` and every later put does nothing, so a format's
 * fields are one unchecked call each (checkpoints, exported model files). */
typedef struct pmt_gzsink {
    pmt_gzstream *gz;
    int failed;
} pmt_gzsink;
void pmt_gzsink_put(pmt_gzsink *s, const void *data, size_t n);
void pmt_gzsink_u32(pmt_gzsink *s, uint32_t v);
void pmt_gzsink_i32(pmt_gzsink *s, int32_t v);
void pmt_gzsink_u64(pmt_gzsink *s, uint64_t v);
void pmt_gzsink_i64(pmt_gzsink *s, int64_t v);

/* Writes a checksummed gzip file whole or not at all, the sequence every
 * format of ours shares: body(stream, user) writes the payload into a
 * stream (zlib level 1..9) over a temporary sibling of path
 * (core/fileio.h), the checksum is appended, the stream closed and the file
 * renamed over path. body returns 0, or -1 when a write failed. what names
 * the file in messages ("checkpoint", "model file", "token file"). 0, or -1
 * with err; on failure path is left as it was. */
int pmt_gzstream_save(const char *path, int level, const char *what, int (*body)(pmt_gzstream *s, void *user),
                      void *user, char *err, size_t errlen);

/* The most bytes a gzip file of file_size bytes can inflate to (deflate
 * expands at most about 1032:1): a header count that needs more is a lie,
 * caught before anything is allocated for it. */
uint64_t pmt_gzstream_inflate_bound(uint64_t file_size);

/* Flushes (when writing) and frees the stream. 0, or -1 when zlib reports
 * an error (a failed write, or a damaged gzip trailer when reading). */
int pmt_gzstream_close(pmt_gzstream *s);

#endif

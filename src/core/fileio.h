/*
 * fileio.h — files that are never seen half-written, and directories made
 * on demand.
 *
 * Why one helper: checkpoints, token files, the training log table, the
 * SentencePiece model and every output of `projmt prepare` are read by later
 * runs, so a crash or a full disk in the middle of a write must leave the old
 * file (or none) under the final name, never a truncated one. Each of them is
 * written as <path>.tmp, fsync'ed, renamed over <path>, and then the
 * directory is fsync'ed so that the rename itself survives a power cut.
 *
 *     pmt_atomic_file af;
 *     if (pmt_atomic_open(&af, path, err, errlen) != 0) return -1;
 *     ... write to af.f (or to its descriptor) ...
 *     return pmt_atomic_commit(&af, err, errlen);   // or pmt_atomic_discard
 *
 * A writer that publishes several files together (prepare) closes each one
 * with pmt_atomic_close when it is written and renames them all at the end
 * with pmt_atomic_rename.
 *
 * Ownership: a pmt_atomic_file owns its open stream and its temporary file
 * from pmt_atomic_open until pmt_atomic_commit or pmt_atomic_discard (one of
 * them must be called; both are safe on a zeroed or finished value).
 */
#ifndef PROJMT_FILEIO_H
#define PROJMT_FILEIO_H

#include <stddef.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Longest path a pmt_atomic_file takes, without the ".tmp" suffix. */
#define PMT_ATOMIC_PATH_MAX 1100

typedef struct pmt_atomic_file {
    FILE *f;                                 /* the temporary file while open, else NULL */
    char path[PMT_ATOMIC_PATH_MAX];          /* final name */
    char tmp[PMT_ATOMIC_PATH_MAX + 8];       /* temporary name, <path>.tmp unless given */
} pmt_atomic_file;

/* Names af for path without opening anything, for a temporary that another
 * writer fills; tmp is its name (NULL: <path>.tmp). -1 with err when a name
 * is too long. */
int pmt_atomic_name(pmt_atomic_file *af, const char *path, const char *tmp, char *err, size_t errlen);

/* Names af for path, then creates (truncates) <path>.tmp for binary writing.
 * 0, or -1 with err naming the temporary file. */
int pmt_atomic_open(pmt_atomic_file *af, const char *path, char *err, size_t errlen);

/* Flushes, fsyncs and closes the temporary file; it stays under its
 * temporary name. 0, or -1 with err (the temporary is left for discard). */
int pmt_atomic_close(pmt_atomic_file *af, char *err, size_t errlen);

/* Renames the (closed) temporary over path and fsyncs the directory.
 * 0, or -1 with err. */
int pmt_atomic_rename(pmt_atomic_file *af, char *err, size_t errlen);

/* pmt_atomic_close + pmt_atomic_rename; on failure the temporary is removed
 * and the old file, if any, is left as it was. 0, or -1 with err. */
int pmt_atomic_commit(pmt_atomic_file *af, char *err, size_t errlen);

/* Closes the stream if open and removes the temporary file. */
void pmt_atomic_discard(pmt_atomic_file *af);

/* Writes data[0..n) to path atomically (open, write, commit). */
int pmt_atomic_write(const char *path, const void *data, size_t n, char *err, size_t errlen);

/* mkdir -p: creates path and any missing parents (mode 0777 less the umask).
 * 0 when it exists as a directory afterwards; else -1 with errno set and
 * the directory that could not be made copied to failed (EEXIST: path
 * itself exists but is not a directory). */
int pmt_make_dirs(const char *path, char *failed, size_t failed_len);

#ifdef __cplusplus
}
#endif

#endif

/*
 * corpus.h — a tokenized parallel split, and its binary file <split>.tok.
 *
 * File format, version 2 (written by `projmt prepare`; little-endian,
 * uncompressed so that training maps it and touches only what it reads):
 *   header, 64 bytes:
 *     char magic[8] = "PMTTOK\0\2"; uint32 version = 2; uint32 header_bytes = 64;
 *     uint64 n_pairs; uint64 n_src_ids; uint64 n_tgt_ids;
 *     uint32 vocab_size;     pieces of the SentencePiece model the ids are of
 *     uint32 spm_checksum;   crc32 of that spm.model's bytes
 *     uint32 body_checksum;  crc32 of every byte after the header
 *     uint32 reserved[2] = {0, 0};
 *     uint32 header_checksum (crc32 of the 60 bytes before it)
 *   body, each section right after the previous one (all 4-byte aligned):
 *     uint64 src_off[n_pairs + 1] at 64; uint64 tgt_off[n_pairs + 1];
 *     int32 src_ids[n_src_ids]; int32 tgt_ids[n_tgt_ids].
 *   The file is exactly 64 + 16 (n_pairs + 1) + 4 (n_src_ids + n_tgt_ids)
 *   bytes: a shorter one is truncated, a longer one has something appended.
 * Sentence i's source ids are src_ids[src_off[i] .. src_off[i+1]), plain
 * SentencePiece pieces with no bos/eos (the batcher adds them).
 *
 * Version 1 (earlier builds; still read, into memory): the gzip stream of
 * "PMTTOK\0\1", uint32 version = 1, uint32 n_pairs, uint64 n_src_ids,
 * uint64 n_tgt_ids, the same four arrays, and a crc32 of all that. It names
 * no vocabulary, so its ids are range-checked as before.
 *
 * Why the body checksum is not verified on load: it would read the whole
 * file, which at 10M pairs is gigabytes, every time training starts. Load
 * checks the header (its own checksum, the counts against the file size)
 * and the offset tables (so no read can leave the file); a damaged id is
 * caught where it is used (the batcher, batcher.h). The body checksum is
 * the split's identity (pmt_corpus.checksum: what a checkpoint records to
 * resume on the same data) and `pmt_corpus_verify` checks it on demand.
 *
 * Ownership: pmt_corpus owns its arrays (malloc'd, or pointers into its
 * read-only mapping); pmt_corpus_free releases them. A mapped corpus must
 * not be written to.
 */
#ifndef PROJMT_CORPUS_H
#define PROJMT_CORPUS_H

#include <stddef.h>
#include <stdint.h>

typedef struct pmt_corpus {
    int n_pairs;
    uint64_t *src_off, *tgt_off;   /* [n_pairs + 1] */
    int32_t *src_ids, *tgt_ids;    /* [src_off[n_pairs]], [tgt_off[n_pairs]] */
    uint32_t checksum;             /* set by load: the file's crc32 of its ids; with n_pairs, its identity */
    int vocab_size;                /* set by load: the vocabulary of the ids (0: not recorded, version 1) */
    uint32_t spm_checksum;         /* set by load: crc32 of that spm.model */
    void *map;                     /* the file's mapping (version 2), else NULL */
    size_t map_bytes;
} pmt_corpus;

static inline int pmt_corpus_src_len(const pmt_corpus *c, int i) { return (int)(c->src_off[i + 1] - c->src_off[i]); }
static inline int pmt_corpus_tgt_len(const pmt_corpus *c, int i) { return (int)(c->tgt_off[i + 1] - c->tgt_off[i]); }

/* Loads a .tok file: version 2 mapped, version 1 read into memory. 0, or -1
 * with a message naming the file and the fault (missing, truncated, bad
 * magic/version/header, inconsistent offsets, checksum mismatch of a
 * version-1 file). */
int pmt_corpus_load(pmt_corpus *c, const char *path, char *err, size_t errlen);
/* Refuses a corpus whose ids are of another vocabulary than the model
 * (vocab_size pieces, spm.model bytes with crc32 spm_checksum): 0, or -1
 * with a message naming path and both vocabularies. A version-1 corpus
 * (no vocabulary recorded) passes: its ids are range-checked instead. */
int pmt_corpus_check_vocabulary(const pmt_corpus *c, const char *path, int vocab_size, uint32_t spm_checksum,
                                char *err, size_t errlen);
/* Reads the whole body and compares its crc32 with the header's: 0, or -1
 * with err (slow on a big file: for tools and tests, not start-up). */
int pmt_corpus_verify(const pmt_corpus *c, const char *path, char *err, size_t errlen);
/* Writes c as version 2, recording the vocabulary (vocab_size pieces,
 * spm.model's crc32), atomically (temporary file, then rename); 0 or -1
 * with err. */
int pmt_corpus_save(const pmt_corpus *c, const char *path, int vocab_size, uint32_t spm_checksum, char *err,
                    size_t errlen);
void pmt_corpus_free(pmt_corpus *c);
/* Drops the pages of a mapped corpus from the process's resident memory
 * (they stay in the page cache and come back when read): a reader that
 * just scanned much of the file (the batcher cutting a strided block)
 * calls it so resident memory does not grow with the corpus. No-op when
 * not mapped. */
void pmt_corpus_release_pages(const pmt_corpus *c);

/* crc32 of a SentencePiece model's bytes: the vocabulary identity stored
 * in version-2 files. */
uint32_t pmt_corpus_spm_checksum(const void *spm_bytes, size_t size);

/* Writes a version-2 file pair by pair, holding only a few buffers whatever
 * the corpus size (prepare encodes straight into it). The number of pairs
 * is fixed at open; target ids wait in a temporary file beside the output
 * until finish appends them. */
typedef struct pmt_corpus_writer pmt_corpus_writer;
/* Creates path (written in place: the caller renames it when complete) for
 * n_pairs pairs. NULL with err. */
pmt_corpus_writer *pmt_corpus_writer_open(const char *path, long n_pairs, int vocab_size, uint32_t spm_checksum,
                                          char *err, size_t errlen);
/* Appends the next pair. 0, or -1 with err (a write failed, or more pairs
 * than n_pairs). */
int pmt_corpus_writer_add(pmt_corpus_writer *w, const int32_t *src, size_t n_src, const int32_t *tgt, size_t n_tgt,
                          char *err, size_t errlen);
/* Completes the file (exactly n_pairs pairs must have been added), syncs
 * and closes it, and frees w; the body checksum goes to *checksum (may be
 * NULL). 0, or -1 with err (the file is then removed). */
int pmt_corpus_writer_finish(pmt_corpus_writer *w, uint32_t *checksum, char *err, size_t errlen);
/* Abandons the file: closes and removes it, frees w (NULL is a no-op). */
void pmt_corpus_writer_discard(pmt_corpus_writer *w);

#endif

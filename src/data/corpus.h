/*
 * corpus.h — a tokenized parallel split in memory, and its binary file.
 *
 * File format (little-endian), written by `projmt prepare` as <split>.tok:
 *   zlib-compressed (gzip container) stream of:
 *     char magic[8] = "PMTTOK\0\1"; uint32 version = 1;
 *     uint32 n_pairs; uint64 n_src_ids; uint64 n_tgt_ids;
 *     uint64 src_off[n_pairs + 1]; uint64 tgt_off[n_pairs + 1];
 *     int32 src_ids[n_src_ids]; int32 tgt_ids[n_tgt_ids];
 *     uint32 crc32 of everything above (after decompression).
 * Sentence i's source ids are src_ids[src_off[i] .. src_off[i+1]), plain
 * SentencePiece pieces with no bos/eos (the batcher adds them).
 *
 * Ownership: pmt_corpus owns its arrays; pmt_corpus_free releases them.
 */
#ifndef PROJMT_CORPUS_H
#define PROJMT_CORPUS_H

#include <stddef.h>
#include <stdint.h>

typedef struct pmt_corpus {
    int n_pairs;
    uint64_t *src_off, *tgt_off;   /* [n_pairs + 1] */
    int32_t *src_ids, *tgt_ids;    /* [src_off[n_pairs]], [tgt_off[n_pairs]] */
    uint32_t checksum;             /* the file's stored crc32 (set by load): with n_pairs, its identity */
} pmt_corpus;

static inline int pmt_corpus_src_len(const pmt_corpus *c, int i) { return (int)(c->src_off[i + 1] - c->src_off[i]); }
static inline int pmt_corpus_tgt_len(const pmt_corpus *c, int i) { return (int)(c->tgt_off[i + 1] - c->tgt_off[i]); }

/* Loads a .tok file; 0, or -1 with a message naming the file and the fault
 * (missing, truncated, bad magic/version, checksum mismatch). */
int pmt_corpus_load(pmt_corpus *c, const char *path, char *err, size_t errlen);
/* Writes atomically (temporary file, then rename); 0 or -1 with err. */
int pmt_corpus_save(const pmt_corpus *c, const char *path, char *err, size_t errlen);
void pmt_corpus_free(pmt_corpus *c);

#endif

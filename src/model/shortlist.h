/*
 * shortlist.h — a lexical vocabulary shortlist (Marian's --shortlist,
 * CTranslate2's vocabulary map): for each source piece, the target pieces
 * it most often translates into, so that a batch's decoding steps compute
 * their logits over the union of its sources' candidates and the most
 * frequent target pieces instead of the whole vocabulary.
 *
 * Why: in the base model the logits are the widest product of a decoding
 * step (V = 8000 rows of C = 256 against the three decoder layers' ~14·C
 * rows each), ~40 % of a step's multiply-adds, and the log-normaliser and
 * the search's top-token scan run over every one of them. A batch of 32
 * spa-eng sentences needs ~1,500 of the 8,000 (docs/speed.md).
 *
 * The candidates come from IBM Model 1 (Brown et al. 1993), trained by EM
 * on the prepared training split with a NULL source word: t(e|f), the
 * probability that source piece f produces target piece e. Per f, the K
 * largest t(e|f) are stored, best first (ties: lower id), and the
 * n_frequent most frequent target pieces of the split once for all. It is
 * an approximation: a token outside a batch's list cannot be output, and
 * the log-probabilities are normalised over the list (as in Marian and
 * CTranslate2), so a shortlist is opt-in at translation time.
 *
 * Stored inside an exported model file (model_file.h, format version 2),
 * so it travels with the weights it was built for.
 *
 * Ownership: a pmt_shortlist owns its two arrays; pmt_shortlist_free
 * releases them (and the struct when it came from pmt_shortlist_build or
 * the model file reader, which allocate it).
 */
#ifndef PROJMT_SHORTLIST_H
#define PROJMT_SHORTLIST_H

#include <stddef.h>
#include <stdint.h>

#include "data/corpus.h"

/* Bounds a stored shortlist is checked against (the reader believes no
 * larger count). */
#define PMT_SHORTLIST_MAX_PER_SOURCE 1000

typedef struct pmt_shortlist {
    int vocab_size;              /* V: source and target pieces (one joint vocabulary) */
    int per_source;              /* K: candidates stored per source piece */
    int n_frequent;              /* target pieces always in the list */
    int32_t *frequent;           /* [n_frequent], most frequent first */
    int32_t *candidates;         /* [V * K]: row f best first, -1 after its last candidate */
} pmt_shortlist;

/* Trains IBM Model 1 (iterations EM passes) on the pairs of train and
 * keeps per_source candidates per source piece and the n_frequent most
 * frequent target pieces. Every id must be in [0, vocab_size). Returns a
 * new shortlist, or NULL with err (bad sizes, an id out of range, out of
 * memory). Deterministic: the same corpus gives the same lists. */
pmt_shortlist *pmt_shortlist_build(const pmt_corpus *train, int vocab_size, int per_source, int n_frequent,
                                   int iterations, char *err, size_t errlen);
void pmt_shortlist_free(pmt_shortlist *s);

/* The checks a stored shortlist must pass (the model file reader's):
 * sizes within bounds, every id in [0, V), each row's -1 only after its
 * candidates. 0, or -1 with err saying what is wrong. */
int pmt_shortlist_validate(const pmt_shortlist *s, char *err, size_t errlen);

/* The output vocabulary of a batch: EOS, UNK, the frequent pieces and the
 * first k (<= per_source) candidates of every source id of the sentences
 * src[j·S .. j·S + src_len[j]) (j < n_sent), sorted by id, no repeats,
 * into ids [V]; col_of [V] gets each id's position in ids, or -1. Returns
 * the number of ids. */
int pmt_shortlist_batch(const pmt_shortlist *s, int k, const int32_t *src, const int32_t *src_len, int n_sent, int S,
                        int32_t *ids, int32_t *col_of);

#endif

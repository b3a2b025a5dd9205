/*
 * attention_dump.h — the attention weights of one sentence pair, every layer
 * and head at the three sites, as JSON for plotting (scripts/plot_attention.py).
 *
 * The pair runs through one teacher-forced forward pass with train = 0 (no
 * dropout), so the weights are those the model uses when it produces the
 * given target. Token positions follow model.h: the source is its pieces
 * then </s>; the decoder reads <s> y1..yn (tgt_in) and predicts y1..yn </s>
 * (tgt_out), so query row t of a decoder site is the step that predicts
 * tgt_out[t].
 *
 * JSON shape (one object):
 *   {"source": str, "target": str, "n_heads": NH, "sigma": "fixed|learned",
 *    "attention": {"encoder_self": kind, "decoder_self": kind, "decoder_cross": kind},
 *    "src_pieces": [...], "tgt_in_pieces": [...], "tgt_out_pieces": [...],
 *    "sites": [{"site": "encoder_self", "layer": 0, "kind": "standard",
 *               "queries": "src", "keys": "src", "weights": [head][query][key]}, ...]}
 * queries/keys name the piece list labelling the rows/columns.
 *
 * Ownership: pmt_attention_pair owns its id arrays (pmt_attention_pair_free).
 */
#ifndef PROJMT_ATTENTION_DUMP_H
#define PROJMT_ATTENTION_DUMP_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "model/model.h"
#include "data/spm.h"

/* One tokenized sentence pair (pieces only: no bos/eos). */
typedef struct pmt_attention_pair {
    const char *source, *target; /* texts as given (borrowed) */
    int32_t *src, *tgt;          /* ids */
    int src_len, tgt_len;
} pmt_attention_pair;

/* Encodes source and target with spm, each cut to max_len - 1 pieces so the
 * pair fits the model. 0, or -1 with err (empty side, out of memory). */
int pmt_attention_pair_init(pmt_attention_pair *p, const pmt_spm *spm, const char *source, const char *target,
                            int max_len, char *err, size_t errlen);
void pmt_attention_pair_free(pmt_attention_pair *p);

/* Runs the teacher-forced forward pass of pair p on m (whose arena must hold
 * max_len tokens per side) and writes the JSON object above to out.
 * 0, or -1 with err (pair too long for the arena, write failure). */
int pmt_attention_dump(pmt_model *m, const pmt_spm *spm, const pmt_attention_pair *p, FILE *out,
                       char *err, size_t errlen);

#endif

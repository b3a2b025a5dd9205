/*
 * alignment.h — the cross-attention of one translated sentence, for the web
 * page's heatmap: the last decoder layer's weights of every head at every
 * output step.
 *
 * The weights come from the incremental decoder itself (its cross_probs_out
 * hook, translate/decoder.h) fed the chosen hypothesis token by token: the
 * decoder computes the same function as the search, so these are the weights
 * the model used when it produced that hypothesis, whatever the beam size.
 *
 * Rows are output steps: step t predicts tgt[t] (the last one predicts </s>);
 * columns are the source pieces then </s>.
 *
 * Ownership: pmt_aligner borrows its model (which must outlive it) and owns
 * its decoder and buffers; pmt_alignment owns its arrays (pmt_alignment_free).
 */
#ifndef PROJMT_TRANSLATE_ALIGNMENT_H
#define PROJMT_TRANSLATE_ALIGNMENT_H

#include <stddef.h>
#include <stdint.h>

#include "translate/decoder.h"

typedef struct pmt_alignment {
    int n_heads;
    int src_len, tgt_len;        /* columns (pieces + </s>), rows (pieces + </s>) */
    int32_t *src_ids, *tgt_ids;  /* [src_len], [tgt_len]: the pieces, each ending in </s> */
    float *weights;              /* [n_heads, tgt_len, src_len] */
} pmt_alignment;

typedef struct pmt_aligner {
    pmt_decoder dec;             /* one sentence, one row */
    float *probs;                /* [NH, max_len] one step's weights */
    int32_t *src;                /* [max_len] source ids + EOS */
} pmt_aligner;

int pmt_aligner_init(pmt_aligner *a, pmt_model *m, char *err, size_t errlen);
void pmt_aligner_free(pmt_aligner *a);

/* Runs src[0..src_len) (no EOS, src_len <= max_len - 1) and the output
 * tgt[0..tgt_len) (no BOS/EOS, tgt_len <= max_len - 1) through the decoder
 * and fills *out. 0, or -1 with err (sizes, out of memory). */
int pmt_aligner_run(pmt_aligner *a, const int32_t *src, int src_len, const int32_t *tgt, int tgt_len,
                    pmt_alignment *out, char *err, size_t errlen);
void pmt_alignment_free(pmt_alignment *al);

#endif

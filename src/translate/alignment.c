/*
 * alignment.c — see alignment.h: a forced decode of one hypothesis with the
 * decoder's cross-attention hook switched on.
 */
#include "translate/alignment.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/vocab.h"

int pmt_aligner_init(pmt_aligner *a, pmt_model *m, char *err, size_t errlen) {
    memset(a, 0, sizeof *a);
    if (pmt_decoder_init(&a->dec, m, 1, 1, err, errlen) != 0) return -1;
    a->probs = malloc((size_t)m->NH * m->max_len * sizeof *a->probs);
    a->src = malloc((size_t)m->max_len * sizeof *a->src);
    if (!a->probs || !a->src) {
        snprintf(err, errlen, "aligner: out of memory");
        pmt_aligner_free(a);
        return -1;
    }
    return 0;
}

void pmt_aligner_free(pmt_aligner *a) {
    if (a->dec.m) pmt_decoder_free(&a->dec);
    free(a->probs);
    free(a->src);
    memset(a, 0, sizeof *a);
}

int pmt_aligner_run(pmt_aligner *a, const int32_t *src, int src_len, const int32_t *tgt, int tgt_len,
                    pmt_alignment *out, char *err, size_t errlen) {
    const pmt_model *m = a->dec.m;
    memset(out, 0, sizeof *out);
    if (src_len < 0 || src_len > m->max_len - 1 || tgt_len < 0 || tgt_len > m->max_len - 1) {
        snprintf(err, errlen, "aligner: %d source / %d output tokens exceed the model's %d positions", src_len,
                 tgt_len, m->max_len);
        return -1;
    }
    const int S = src_len + 1, T = tgt_len + 1, NH = m->NH;
    memcpy(a->src, src, (size_t)src_len * sizeof *src);
    a->src[src_len] = PMT_EOS_ID;
    const int32_t slen = S;
    if (pmt_decoder_start(&a->dec, a->src, &slen, 1, S, 1, T, err, errlen) != 0) return -1;
    out->weights = malloc((size_t)NH * T * S * sizeof *out->weights);
    out->src_ids = malloc((size_t)S * sizeof *out->src_ids);
    out->tgt_ids = malloc((size_t)T * sizeof *out->tgt_ids);
    if (!out->weights || !out->src_ids || !out->tgt_ids) {
        pmt_alignment_free(out);
        snprintf(err, errlen, "aligner: out of memory");
        return -1;
    }
    memcpy(out->src_ids, a->src, (size_t)S * sizeof *out->src_ids);
    memcpy(out->tgt_ids, tgt, (size_t)tgt_len * sizeof *out->tgt_ids);
    out->tgt_ids[tgt_len] = PMT_EOS_ID;
    out->n_heads = NH;
    out->src_len = S;
    out->tgt_len = T;
    a->dec.cross_probs_out = a->probs;   /* [1, NH, 1, S] per step */
    for (int t = 0; t < T; t++) {
        const int32_t token = t == 0 ? PMT_BOS_ID : tgt[t - 1];
        if (!pmt_decoder_step(&a->dec, &token)) {
            a->dec.cross_probs_out = NULL;
            pmt_alignment_free(out);
            snprintf(err, errlen, "aligner: %s", a->dec.error);
            return -1;
        }
        for (int h = 0; h < NH; h++)
            memcpy(out->weights + ((size_t)h * T + t) * S, a->probs + (size_t)h * S, (size_t)S * sizeof(float));
    }
    a->dec.cross_probs_out = NULL;
    return 0;
}

void pmt_alignment_free(pmt_alignment *al) {
    free(al->weights);
    free(al->src_ids);
    free(al->tgt_ids);
    memset(al, 0, sizeof *al);
}

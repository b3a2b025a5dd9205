/*
 * test_alignment.c — the heatmap's weights (translate/alignment.h, via the
 * decoder's cross_probs_out hook) are the last decoder layer's
 * cross-attention of the teacher-forced pass (pmt_model_attention_weights)
 * on the same source and output, for standard and projection
 * cross-attention, with two decoder layers (so the hook must take the last
 * one, not the first); rows sum to 1; the id lists end in </s>; sizes over
 * the model's limit fail cleanly; the hook is off again afterwards.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "data/vocab.h"
#include "translate/alignment.h"
#include "testutil.h"

enum { V = 20, SRC = 5, TGT = 4, MAX_LEN = 10 };

static void check_kind(int cross_kind) {
    pmt_config cfg;
    char err[256];
    pmt_config_defaults(&cfg);
    cfg.d_model = 16;
    cfg.n_heads = 2;
    cfg.d_ff = 32;
    cfg.enc_layers = 1;
    cfg.dec_layers = 2;
    cfg.dropout = 0.0;
    cfg.max_len = MAX_LEN;
    cfg.batch_tokens = 4 * MAX_LEN;
    cfg.site_kind[PMT_SITE_DEC_CROSS] = cross_kind;
    pmt_model m;
    if (pmt_model_init(&m, &cfg, V, 64, MAX_LEN, err, sizeof err) != 0) {
        CHECK_MSG(0, "model init: %s", err);
        return;
    }
    pmt_model_init_params(&m, 3);
    const int32_t src[SRC] = {5, 9, 4, 17, 11}, tgt[TGT] = {8, 6, 15, 7};

    /* Teacher-forced reference: src </s> ; <s> tgt -> tgt </s>. */
    int32_t bsrc[SRC + 1], tin[TGT + 1], tout[TGT + 1], slen = SRC + 1, tlen = TGT + 1;
    memcpy(bsrc, src, sizeof src);
    bsrc[SRC] = PMT_EOS_ID;
    tin[0] = PMT_BOS_ID;
    memcpy(tin + 1, tgt, sizeof tgt);
    memcpy(tout, tgt, sizeof tgt);
    tout[TGT] = PMT_EOS_ID;
    pmt_batch b = {1, SRC + 1, TGT + 1, bsrc, &slen, tin, tout, &tlen};
    pmt_model_forward(&m, &b, 0, 0, NULL);
    const float *ref = pmt_model_attention_weights(&m, PMT_SITE_DEC_CROSS, cfg.dec_layers - 1);
    const float *first = pmt_model_attention_weights(&m, PMT_SITE_DEC_CROSS, 0);

    pmt_aligner a;
    pmt_alignment al;
    CHECK(pmt_aligner_init(&a, &m, err, sizeof err) == 0);
    CHECK(pmt_aligner_run(&a, src, SRC, tgt, TGT, &al, err, sizeof err) == 0);
    CHECK(al.n_heads == 2 && al.src_len == SRC + 1 && al.tgt_len == TGT + 1);
    CHECK(al.src_ids[SRC] == PMT_EOS_ID && al.tgt_ids[TGT] == PMT_EOS_ID && al.src_ids[0] == 5 && al.tgt_ids[0] == 8);
    CHECK(a.dec.cross_probs_out == NULL);
    double worst = 0, worst_row = 0, differs_from_first = 0;
    for (int h = 0; h < 2; h++)
        for (int t = 0; t < TGT + 1; t++) {
            double row = 0;
            for (int s = 0; s < SRC + 1; s++) {
                size_t i = ((size_t)h * (TGT + 1) + t) * (SRC + 1) + s;
                worst = fmax(worst, fabs((double)al.weights[i] - (double)ref[i]));
                differs_from_first = fmax(differs_from_first, fabs((double)al.weights[i] - (double)first[i]));
                row += al.weights[i];
            }
            worst_row = fmax(worst_row, fabs(row - 1));
        }
    CHECK_MSG(worst < 1e-5, "%s cross-attention: max |incremental - teacher-forced| = %g",
              pmt_attention_kind_name(cross_kind), worst);
    CHECK_MSG(differs_from_first > 1e-4, "layer 0 and layer 1 weights coincide (%g): the test cannot tell them apart",
              differs_from_first);
    CHECK_MSG(worst_row < 1e-5, "row sums off by %g", worst_row);
    pmt_alignment_free(&al);

    /* Over-long inputs fail with a message, and leave nothing allocated. */
    int32_t many[MAX_LEN] = {0};
    CHECK(pmt_aligner_run(&a, many, MAX_LEN, tgt, TGT, &al, err, sizeof err) == -1 && strstr(err, "exceed"));
    CHECK(al.weights == NULL);
    pmt_aligner_free(&a);
    pmt_model_free(&m);
}

int main(void) {
    check_kind(PMT_ATTN_STANDARD);
    check_kind(PMT_ATTN_PROJECTION);
    return test_finish();
}

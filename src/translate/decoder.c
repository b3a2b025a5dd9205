/*
 * decoder.c — the incremental decoder: one position per step for every
 * hypothesis row, against per-row caches (see decoder.h for what is cached).
 *
 * Every block is the model's pre-LN block x + sublayer(LN(x)) (eval mode: no
 * dropout), computed with the same ops.h kernels as model.c so that the
 * incremental pass and the teacher-forced pass are the same function:
 *   - self-attention: one query (T = 1) per row against its t+1 cached
 *     positions (no causal mask needed: the cache only holds the past),
 *     found through the position → cache-row table row_map, so that beam
 *     reordering moves ints, not every cached vector at every step;
 *   - cross-attention: the `beam` rows of a sentence are that sentence's
 *     queries (B = n_sent, T = beam), so all hypotheses of a sentence share
 *     one copy of its keys/values — nothing is replicated per beam.
 */
#include "translate/decoder.h"

#include <assert.h>
#include <pthread.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/model_file.h"
#include "nn/ops.h"

static float *alloc_floats(size_t n) {
    size_t bytes = ((n ? n : 1) * sizeof(float) + 63) & ~(size_t)63;
    return aligned_alloc(64, bytes);
}

/* The tensor whose values start at w (the tensor table is in offset order). */
static int tensor_at(const pmt_model *m, const float *w) {
    assert(w >= m->params && w < m->params + m->n_params);
    const size_t offset = (size_t)(w - m->params);
    int lo = 0, hi = m->n_tensors - 1;
    while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        if (m->tensors[mid].offset <= offset) lo = mid;
        else hi = mid - 1;
    }
    return lo;
}

/* One matrix in the decoder's low-precision form: the first `rows` rows of
 * a parameter tensor from w (a fused Q|K|V matrix is lowered as its parts:
 * self-attention all of it, cross-attention its Q rows for the steps and
 * its K|V rows for the memory, once per batch). Rows are quantised each by
 * itself, so a part gives the rows of the whole. */
struct pmt_lowp_matrix {
    const float *w;
    int rows;
    pmt_int8_matmul *q8;         /* int8: packed weights (own, or sharing a base's) ... */
    float *q8_scale;             /* ... and their row scales [rows] */
    pmt_bf16_matmul *bf16;       /* bf16 */
    int borrowed;                /* q8_scale and bf16 are a base decoder's (pmt_decoder_init_sharing) */
};

static const struct pmt_lowp_matrix *find_lowp(const pmt_decoder *d, const float *w) {
    for (int i = 0; i < d->n_lowp; i++)
        if (d->lowp[i].w == w) return &d->lowp[i];
    return NULL;
}

/* Rows a product of the decoder may have: a step's, or an encoder pass's. */
static int lowp_rows(const pmt_decoder *d) { return d->max_rows > d->m->max_rows ? d->max_rows : d->m->max_rows; }

/* The low-precision form of w [rows, cols] into lm (zeroed). 0, or -1 with err. */
static int lower_into(const pmt_decoder *d, struct pmt_lowp_matrix *lm, const float *w, int rows, int cols,
                      int with_bias, char *err, size_t errlen) {
    lm->w = w;
    lm->rows = rows;
    if (d->m->decode_weights == PMT_WEIGHTS_BF16) {
        lm->bf16 = pmt_bf16_matmul_init(w, cols, rows, with_bias, err, errlen);
        return lm->bf16 ? 0 : -1;
    }
    int8_t *wq = malloc((size_t)rows * cols);
    lm->q8_scale = malloc((size_t)rows * sizeof(float));
    if (!wq || !lm->q8_scale) {
        free(wq);
        snprintf(err, errlen, "decoder: out of memory for int8 weights");
        return -1;
    }
    pmt_int8_quantize_rows(wq, lm->q8_scale, w, rows, cols);
    lm->q8 = pmt_int8_matmul_init(wq, cols, rows, lowp_rows(d), err, errlen);
    free(wq);
    return lm->q8 ? 0 : -1;
}

static void lowp_matrix_free(struct pmt_lowp_matrix *lm) {
    pmt_int8_matmul_free(lm->q8);
    if (!lm->borrowed) {
        free(lm->q8_scale);
        pmt_bf16_matmul_free(lm->bf16);
    }
    memset(lm, 0, sizeof *lm);
}

/* lm (zeroed) over base's low-precision form of the same matrix: its
 * int8 weights through a sharing matmul of this decoder's own, its row
 * scales and bf16 matmul borrowed (a bf16 matmul only reads itself when
 * it runs). 0, or -1 with err. */
static int share_into(const pmt_decoder *d, struct pmt_lowp_matrix *lm, const struct pmt_lowp_matrix *base,
                      char *err, size_t errlen) {
    *lm = *base;
    lm->borrowed = 1;
    lm->q8 = NULL;
    if (!base->q8) return 0;
    lm->q8 = pmt_int8_matmul_init_sharing(base->q8, lowp_rows(d), err, errlen);
    return lm->q8 ? 0 : -1;
}

/* Lowers rows [0, rows) of the tensor starting at w, once. 0, or -1 with err. */
static int lower_matrix(pmt_decoder *d, const float *w, int rows, int with_bias, char *err, size_t errlen) {
    if (find_lowp(d, w)) return 0;   /* the embedding serves every step */
    const pmt_tensor *t = &d->m->tensors[tensor_at(d->m, w)];
    assert(w >= d->m->params + t->offset && w + (size_t)rows * t->cols <= d->m->params + t->offset + t->size);
    return lower_into(d, &d->lowp[d->n_lowp++], w, rows, t->cols, with_bias, err, errlen);
}

/* Lowers a linear layer's matrix (NULL: the site has none, projection). */
static int lower_linear(pmt_decoder *d, const float *w, int rows, char *err, size_t errlen) {
    return w ? lower_matrix(d, w, rows, 1, err, errlen) : 0;
}

/* Lowers every matrix the encoder and a step multiply by. 0, or -1 with err. */
static int lower_all(pmt_decoder *d, char *err, size_t errlen) {
    const pmt_model *m = d->m;
    const int C = m->C, F = m->F;
    int rc = lower_matrix(d, m->wte, m->V, 0, err, errlen);
    for (int l = 0; rc == 0 && l < m->cfg.enc_layers; l++) {
        const pmt_layer_params *p = &m->enc[l];
        rc = lower_linear(d, p->self.wqkv, 3 * C, err, errlen) || lower_linear(d, p->self.wo, C, err, errlen) ||
             lower_linear(d, p->ffn.w1, F, err, errlen) || lower_linear(d, p->ffn.w2, C, err, errlen);
    }
    for (int l = 0; rc == 0 && l < m->cfg.dec_layers; l++) {
        const pmt_layer_params *p = &m->dec[l];
        rc = lower_linear(d, p->self.wqkv, 3 * C, err, errlen) || lower_linear(d, p->self.wo, C, err, errlen) ||
             lower_linear(d, p->cross.wqkv, C, err, errlen) ||
             lower_linear(d, p->cross.wqkv ? p->cross.wqkv + (size_t)C * C : NULL, 2 * C, err, errlen) ||
             lower_linear(d, p->cross.wo, C, err, errlen) || lower_linear(d, p->ffn.w1, F, err, errlen) ||
             lower_linear(d, p->ffn.w2, C, err, errlen);
    }
    return rc ? -1 : 0;
}

/* Low-precision forms of every matrix the encoder and a step multiply by
 * (lowered here, or shared with base's when base is not NULL), and their
 * scratch. 0, or -1 with err. */
static int init_lowp(pmt_decoder *d, const pmt_decoder *base, char *err, size_t errlen) {
    const pmt_model *m = d->m;
    const int C = m->C, F = m->F;
    /* Widest products: a step's logits, FFN or fused Q|K|V; an encoder
     * pass's FFN or Q|K|V (never the logits). */
    const size_t R = (size_t)pmt_int8_matmul_rows(d->max_rows), RE = (size_t)pmt_int8_matmul_rows(m->max_rows);
    const size_t wide_fqkv = (size_t)(F > 3 * C ? F : 3 * C), wide_step = (size_t)m->V > wide_fqkv ? (size_t)m->V : wide_fqkv;
    const size_t widest_in = (size_t)(F > C ? F : C), rows = R > RE ? R : RE;
    const size_t acc = R * wide_step > RE * wide_fqkv ? R * wide_step : RE * wide_fqkv;
    const int int8 = m->decode_weights == PMT_WEIGHTS_INT8;
    d->lowp = calloc((size_t)(1 + 4 * m->cfg.enc_layers + 7 * m->cfg.dec_layers), sizeof *d->lowp);
    if (int8) {   /* the packed products pad their rows (pmt_int8_matmul_rows) */
        d->q8_scratch.xq = malloc(rows * widest_in);
        d->q8_scratch.x_scale = malloc(rows * sizeof(float));
        d->q8_scratch.acc = malloc(acc * sizeof(int32_t));
        /* Without int8 dot products the weights are split in two parts (nn/gemm.h). */
        if (!pmt_cpu_has_int8_dot() && !(d->q8_scratch.acc_lo = malloc(acc * sizeof(int32_t)))) d->q8_scratch.acc = NULL;
    } else {
        d->bf16_scratch = malloc(rows * widest_in * sizeof *d->bf16_scratch);
    }
    if (!d->lowp || (int8 ? !d->q8_scratch.xq || !d->q8_scratch.x_scale || !d->q8_scratch.acc : !d->bf16_scratch)) {
        snprintf(err, errlen, "decoder: out of memory for low-precision weights");
        return -1;
    }
    int rc = 0;
    for (int i = 0; base && rc == 0 && i < base->n_lowp; i++) {
        rc = share_into(d, &d->lowp[i], &base->lowp[i], err, errlen);
        d->n_lowp = i + 1;
    }
    if (!base) rc = lower_all(d, err, errlen);
    /* One scratchpad for the bf16 matmuls (they run one at a time). */
    size_t pad = 0;
    for (int i = 0; rc == 0 && !int8 && i < d->n_lowp; i++)
        if (pmt_bf16_matmul_scratchpad_bytes(d->lowp[i].bf16) > pad) pad = pmt_bf16_matmul_scratchpad_bytes(d->lowp[i].bf16);
    if (rc == 0 && pad > 0 && !(d->bf16_pad = aligned_alloc(64, (pad + 63) & ~(size_t)63))) {
        snprintf(err, errlen, "decoder: out of memory for the bf16 scratchpad");
        rc = -1;
    }
    if (rc == 0) d->bf16_pad_bytes = pad;
    return rc;
}

static void free_lowp(pmt_decoder *d) {
    for (int i = 0; d->lowp && i < d->n_lowp; i++) lowp_matrix_free(&d->lowp[i]);
    if (d->vocab_lowp) lowp_matrix_free(d->vocab_lowp);
    free(d->lowp);
    free(d->q8_scratch.xq);
    free(d->q8_scratch.x_scale);
    free(d->q8_scratch.acc);
    free(d->q8_scratch.acc_lo);
    free(d->bf16_scratch);
    free(d->bf16_pad);
}

/* out [N, OUT] = in [N, IN] · wᵀ + b: with the low-precision form of w when
 * the decoder has one, else in fp32. A product that fails (oneDNN refuses
 * a shape on this CPU) leaves NaN and records the failure on this thread
 * (nn/gemm.h); pmt_decoder_start and the steps take it when they end, so
 * the return value is that record's, not lost. */
static void linear_with(const pmt_decoder *d, const struct pmt_lowp_matrix *lm, float *out, const float *in,
                        const float *w, const float *b, int N, int IN, int OUT) {
    assert(!lm || lm->rows == OUT);
    if (lm && lm->q8) (void)linear_forward_int8_packed(out, in, lm->q8, lm->q8_scale, b, N, &d->q8_scratch);
    else if (lm && lm->bf16) (void)linear_forward_bf16(out, in, lm->bf16, b, N, d->bf16_scratch, d->bf16_pad);
    else linear_forward(out, in, w, b, N, IN, OUT);
}

static void linear_rows(const pmt_decoder *d, float *out, const float *in, const float *w, const float *b, int N,
                        int IN, int OUT) {
    linear_with(d, find_lowp(d, w), out, in, w, b, N, IN, OUT);
}

/* pmt_linear_hook of the encoder passes: the same products. */
static void encoder_linear(void *ctx, float *out, const float *in, const float *w, const float *b, int N, int IN,
                           int OUT) {
    linear_rows(ctx, out, in, w, b, N, IN, OUT);
}

/* Gathers the live rows of in [rows, W] into d->gather_in [n_live, W]. */
static const float *gather_live(const pmt_decoder *d, const float *in, int W) {
    for (int c = 0; c < d->n_live; c++)
        memcpy(d->gather_in + (size_t)c * W, in + (size_t)d->live_rows[c] * W, (size_t)W * sizeof(float));
    return d->gather_in;
}

/* What a step's linear layer does with its output rows: store them, store
 * their ReLU, or add them to out (a residual: out is then d->x). */
typedef enum { STEP_STORE = PMT_INT8_STORE, STEP_RELU = PMT_INT8_RELU, STEP_ADD = PMT_INT8_ADD } step_op;

/* The linear layer of a step over all rows [rows, IN] -> [rows, OUT], or,
 * when some rows are not live, over the live ones only (the other rows of
 * out keep what they held), finished by op. With int8 weights the product
 * reads and writes the live rows in place and applies op as it rescales
 * (linear_forward_int8_rows); otherwise the live rows are gathered and
 * scattered, and op is a pass of its own (over every row: a dead row's
 * values are never read). The live rows get the bits of the gather/scatter
 * form either way. */
static void step_linear(const pmt_decoder *d, float *out, const float *in, const float *w, const float *b, int N,
                        int IN, int OUT, step_op op) {
    const struct pmt_lowp_matrix *lm = find_lowp(d, w);
    const int all_live = d->n_live == N;
    assert(all_live || (N == d->rows && d->n_live < N));
    if (lm && lm->q8) {
        assert(lm->rows == OUT);
        const int32_t *rows = all_live ? NULL : d->live_rows;
        const pmt_int8_rows how = {.in_rows = rows, .out_rows = rows, .op = (pmt_int8_epilogue)op};
        (void)linear_forward_int8_rows(out, in, lm->q8, lm->q8_scale, b, d->n_live, &d->q8_scratch, &how);
        return;
    }
    float *dst = op == STEP_ADD ? d->sub : out;
    if (all_live) {
        linear_rows(d, dst, in, w, b, N, IN, OUT);
    } else {
        linear_rows(d, d->gather_out, gather_live(d, in, IN), w, b, d->n_live, IN, OUT);
        for (int c = 0; c < d->n_live; c++)
            memcpy(dst + (size_t)d->live_rows[c] * OUT, d->gather_out + (size_t)c * OUT, (size_t)OUT * sizeof(float));
    }
    if (op == STEP_RELU) relu_forward(out, out, (size_t)N * OUT);
    if (op == STEP_ADD) residual_forward(out, out, d->sub, (size_t)N * OUT);
}

static int is_standard(const pmt_decoder *d, int site) {
    return d->m->cfg.site_kind[site] == PMT_ATTN_STANDARD;
}

int pmt_decoder_init_sharing(pmt_decoder *d, pmt_model *m, int max_sent, int max_beam, const pmt_decoder *base,
                             char *err, size_t errlen) {
    memset(d, 0, sizeof *d);
    if (max_sent < 1 || max_beam < 1) {
        snprintf(err, errlen, "decoder: bad sizes (sentences %d, beam %d)", max_sent, max_beam);
        return -1;
    }
    if (base && (base->m != m || (m->decode_weights != PMT_WEIGHTS_FP32 && base->n_lowp == 0))) {
        snprintf(err, errlen, "decoder: can only share the low-precision weights of a decoder of the same model");
        return -1;
    }
    d->m = m;
    d->max_sent = max_sent;
    d->max_beam = max_beam;
    d->max_rows = max_sent * max_beam;
    const size_t R = (size_t)d->max_rows, C = (size_t)m->C, L = (size_t)m->max_len;
    const int n_layers = m->cfg.dec_layers;
    int ok = 1;
    d->src_len = calloc((size_t)max_sent, sizeof *d->src_len);
    d->self_klen = calloc(R, sizeof *d->self_klen);
    d->row_map = calloc(R * L, sizeof *d->row_map);
    d->row_map2 = calloc(R * L, sizeof *d->row_map2);
    d->layers = calloc((size_t)n_layers, sizeof *d->layers);
    d->log_sigma_fixed = alloc_floats((size_t)m->NH);
    /* Caches are sized for the worst case, but a batch only touches
     * rows*cap*C of them, so the untouched pages are never made resident. */
    d->enc_out = alloc_floats((size_t)max_sent * L * C);
    ok = d->src_len && d->self_klen && d->row_map && d->row_map2 && d->layers && d->log_sigma_fixed && d->enc_out;
    if (ok && pmt_model_uses_poolattn(&m->cfg) && !is_standard(d, PMT_SITE_DEC_SELF))
        ok = (d->pool_keys = alloc_floats(R * L * C)) != NULL;
    for (int l = 0; ok && l < n_layers; l++) {
        pmt_decoder_layer *c = &d->layers[l];
        c->k = alloc_floats(R * L * C);
        ok = c->k != NULL;
        if (ok && is_standard(d, PMT_SITE_DEC_SELF)) {
            c->v = alloc_floats(R * L * C);
            ok = c->v != NULL;
        }
        if (ok && is_standard(d, PMT_SITE_DEC_CROSS)) {
            c->cross_kv = alloc_floats((size_t)max_sent * L * 2 * C);
            ok = c->cross_kv != NULL;
        }
    }
    if (ok && pmt_model_uses_poolattn(&m->cfg) && (!is_standard(d, PMT_SITE_DEC_SELF) || !is_standard(d, PMT_SITE_DEC_CROSS))) {
        /* self: one query per row over cap <= max_len keys; cross: the beam
         * rows of each sentence over its source. */
        size_t self = poolattn_scratch_floats(d->max_rows, 1, m->max_len, m->C, m->NH);
        size_t cross = poolattn_scratch_floats(max_sent, max_beam, m->max_len, m->C, m->NH);
        d->pool_scratch_floats = self > cross ? self : cross;
        ok = (d->pool_scratch = alloc_floats(d->pool_scratch_floats)) != NULL;
    }
    float **scratch[] = {&d->x, &d->ln, &d->att, &d->sub};
    for (size_t i = 0; ok && i < sizeof scratch / sizeof scratch[0]; i++) ok = (*scratch[i] = alloc_floats(R * C)) != NULL;
    if (ok) {
        d->qkv = alloc_floats(R * 3 * C);
        d->mean = alloc_floats(R);
        d->rstd = alloc_floats(R);
        d->lse = alloc_floats(R);
        d->h = alloc_floats(R * (size_t)m->F);
        d->attn_probs = alloc_floats(R * (size_t)m->NH * L);
        d->logits = alloc_floats(R * (size_t)m->V);
        /* the widest step product: the FFN's F or the fused Q/K/V's 3C */
        const size_t wide = (size_t)(m->F > 3 * m->C ? m->F : 3 * m->C);
        d->gather_in = alloc_floats(R * wide);
        d->gather_out = alloc_floats(R * wide);
        d->live_rows = calloc(R, sizeof *d->live_rows);
        d->logit_slot = calloc(R, sizeof *d->logit_slot);
        ok = d->qkv && d->mean && d->rstd && d->lse && d->h && d->attn_probs && d->logits && d->gather_in &&
             d->gather_out && d->live_rows && d->logit_slot;
    }
    d->n_vocab = m->V;
    if (ok && m->decode_weights != PMT_WEIGHTS_FP32 && init_lowp(d, base, err, errlen) != 0) {
        pmt_decoder_free(d);
        return -1;
    }
    if (!ok) {
        snprintf(err, errlen, "decoder: out of memory (%d sentences x beam %d, max_len %d)", max_sent, max_beam,
                 m->max_len);
        pmt_decoder_free(d);
        return -1;
    }
    for (int h = 0; h < m->NH; h++) d->log_sigma_fixed[h] = pmt_model_fixed_log_sigma(&m->cfg);
    return 0;
}

int pmt_decoder_init(pmt_decoder *d, pmt_model *m, int max_sent, int max_beam, char *err, size_t errlen) {
    return pmt_decoder_init_sharing(d, m, max_sent, max_beam, NULL, err, errlen);
}

void pmt_decoder_free(pmt_decoder *d) {
    if (d->layers) {
        for (int l = 0; l < d->m->cfg.dec_layers; l++) {
            pmt_decoder_layer *c = &d->layers[l];
            free(c->k); free(c->v);
            free(c->cross_kv);
        }
    }
    if (d->m) free_lowp(d);
    free(d->layers);
    free(d->src_len); free(d->self_klen); free(d->row_map); free(d->row_map2); free(d->pool_keys);
    free(d->log_sigma_fixed); free(d->enc_out); free(d->pool_scratch);
    free(d->x); free(d->ln); free(d->qkv); free(d->att); free(d->sub);
    free(d->mean); free(d->rstd); free(d->lse); free(d->h); free(d->attn_probs); free(d->logits);
    free(d->gather_in); free(d->gather_out); free(d->live_rows); free(d->logit_slot);
    free(d->vocab_ids); free(d->vocab_col); free(d->vocab_w); free(d->vocab_lowp);
    memset(d, 0, sizeof *d);
}

/* The batch fields of a start; -1 with err when the sizes do not fit. */
static int start_batch(pmt_decoder *d, const int32_t *src_len, int n_sent, int S, int beam, int cap, char *err,
                       size_t errlen) {
    const pmt_model *m = d->m;
    if (n_sent < 1 || n_sent > d->max_sent || beam < 1 || beam > d->max_beam || S < 1 || S > m->max_len ||
        cap < 1 || cap > m->max_len) {
        snprintf(err, errlen,
                 "decoder: batch of %d sentences x %d source tokens, beam %d, %d positions does not fit "
                 "(max %d sentences, beam %d, max_len %d)",
                 n_sent, S, beam, cap, d->max_sent, d->max_beam, m->max_len);
        return -1;
    }
    d->n_sent = n_sent;
    d->beam = beam;
    d->rows = n_sent * beam;
    d->S = S;
    d->cap = cap;
    d->t = 0;
    memcpy(d->src_len, src_len, (size_t)n_sent * sizeof *src_len);
    return 0;
}

/* The shortlist's per-batch arrays, on the first shortlisted start: a
 * decoder of a model with a shortlist that never decodes with one (the
 * default) does not hold the [V, C] rows (8 MB for the base model). 0, or
 * -1 with err and the arrays freed. */
static int ensure_vocabulary_buffers(pmt_decoder *d, char *err, size_t errlen) {
    const pmt_model *m = d->m;
    d->vocab_ids = calloc((size_t)m->V, sizeof *d->vocab_ids);
    d->vocab_col = calloc((size_t)m->V, sizeof *d->vocab_col);
    d->vocab_w = alloc_floats((size_t)m->V * m->C);
    d->vocab_lowp = calloc(1, sizeof *d->vocab_lowp);
    if (d->vocab_ids && d->vocab_col && d->vocab_w && d->vocab_lowp) return 0;
    free(d->vocab_ids); free(d->vocab_col); free(d->vocab_w); free(d->vocab_lowp);
    d->vocab_ids = d->vocab_col = NULL;
    d->vocab_w = NULL;
    d->vocab_lowp = NULL;
    snprintf(err, errlen, "decoder: out of memory for a shortlist of %d output rows x %d", m->V, m->C);
    return -1;
}

/* The batch's output vocabulary: all of it, or with d->shortlist_k > 0 the
 * shortlist's union for these sources (model/shortlist.h), whose rows of
 * the output embedding are gathered (and lowered, for int8 or bf16
 * weights: per-row quantisation gives a gathered row the values of the
 * whole matrix's). 0, or -1 with err. */
static int start_vocabulary(pmt_decoder *d, const int32_t *src, char *err, size_t errlen) {
    const pmt_model *m = d->m;
    d->shortlisted = 0;
    d->n_vocab = m->V;
    if (d->shortlist_k <= 0) return 0;
    if (!m->shortlist) {
        snprintf(err, errlen, "decoder: a shortlist of %d candidates was asked for, but the model carries no "
                 "shortlist (export it with --shortlist)", d->shortlist_k);
        return -1;
    }
    if (!d->vocab_ids && ensure_vocabulary_buffers(d, err, errlen) != 0) return -1;
    const int n = pmt_shortlist_batch(m->shortlist, d->shortlist_k, src, d->src_len, d->n_sent, d->S, d->vocab_ids,
                                      d->vocab_col);
    const size_t C = (size_t)m->C;
    for (int c = 0; c < n; c++)
        memcpy(d->vocab_w + (size_t)c * C, m->wte + (size_t)d->vocab_ids[c] * C, C * sizeof(float));
    lowp_matrix_free(d->vocab_lowp);
    if (m->decode_weights != PMT_WEIGHTS_FP32) {
        if (lower_into(d, d->vocab_lowp, d->vocab_w, n, m->C, 0, err, errlen) != 0) {
            lowp_matrix_free(d->vocab_lowp);
            return -1;
        }
        const size_t pad = d->vocab_lowp->bf16 ? pmt_bf16_matmul_scratchpad_bytes(d->vocab_lowp->bf16) : 0;
        if (pad > d->bf16_pad_bytes) {
            void *bigger = aligned_alloc(64, (pad + 63) & ~(size_t)63);
            if (!bigger) {
                snprintf(err, errlen, "decoder: out of memory for the bf16 scratchpad");
                return -1;
            }
            free(d->bf16_pad);
            d->bf16_pad = bigger;
            d->bf16_pad_bytes = pad;
        }
    }
    d->n_vocab = n;
    d->shortlisted = 1;
    return 0;
}

/* Cross-attention keys/values of d->enc_out, once per batch. */
static void cross_keys_values(pmt_decoder *d) {
    const pmt_model *m = d->m;
    for (int l = 0; l < m->cfg.dec_layers; l++) {
        const pmt_attn_params *p = &m->dec[l].cross;
        pmt_decoder_layer *c = &d->layers[l];
        if (!c->cross_kv) continue;
        linear_rows(d, c->cross_kv, d->enc_out, p->wqkv + (size_t)m->C * m->C, p->bqkv + m->C, d->n_sent * d->S,
                    m->C, 2 * m->C);
    }
}

int pmt_decoder_start(pmt_decoder *d, const int32_t *src, const int32_t *src_len, int n_sent, int S,
                      int beam, int cap, char *err, size_t errlen) {
    pmt_model *m = d->m;
    if ((long)n_sent * S > m->max_rows) {
        snprintf(err, errlen, "decoder: batch of %d sentences x %d source tokens exceeds the encoder rows %d", n_sent,
                 S, m->max_rows);
        return -1;
    }
    if (start_batch(d, src_len, n_sent, S, beam, cap, err, errlen) != 0 ||
        start_vocabulary(d, src, err, errlen) != 0)
        return -1;
    const pmt_linear_hook hook = {encoder_linear, d};
    const pmt_linear_hook *lowp = d->lowp ? &hook : NULL;
    if (d->encoder) {
        pmt_model_encode(d->encoder, src, src_len, n_sent, S, lowp, d->enc_out);
    } else {
        /* The model's arena serves one encoder pass at a time: decoders of
         * one model started concurrently without views encode in turn (a
         * lock of this model's, so other translators' models never wait). */
        pthread_mutex_lock(m->arena_lock);
        pmt_model_encode(m, src, src_len, n_sent, S, lowp, d->enc_out);
        pthread_mutex_unlock(m->arena_lock);
    }
    cross_keys_values(d);
    char why[256];
    if (pmt_gemm_take_error(why, sizeof why) != 0) {
        snprintf(err, errlen, "encoder: %s", why);
        return -1;
    }
    return 0;
}

static const float *site_log_sigma(const pmt_decoder *d, const pmt_attn_params *p) {
    return p->log_sigma ? p->log_sigma : d->log_sigma_fixed;
}

/* Projection attention of q over keys k (values = keys) at a projection
 * site: Sanger's projattn, or the pooling family (as model.c chooses). */
static void projection_attention(pmt_decoder *d, const pmt_attn_params *p, const float *q, const float *k,
                                 const int32_t *klen, int B, int T, int S) {
    const pmt_model *m = d->m;
    if (!pmt_model_uses_poolattn(&m->cfg)) {
        projattn_forward_few_queries(d->att, d->attn_probs, q, k, site_log_sigma(d, p), klen, 0, B, T, S, m->C, m->NH);
        return;
    }
    const poolattn_params pp = {m->cfg.proj_kernel, m->cfg.proj_metric, site_log_sigma(d, p), p->log_metric,
                                p->log_radius};
    poolattn_forward(d->att, d->attn_probs, q, k, &pp, klen, 0, B, T, S, m->C, m->NH, d->pool_scratch,
                     d->pool_scratch_floats);
}

/* Copies rows [R, ld] (C values each) into position t of a [R, cap, C] cache. */
static void cache_put(float *cache, const float *rows, int ld, int R, int cap, int t, int C) {
    for (int r = 0; r < R; r++)
        memcpy(cache + ((size_t)r * cap + t) * C, rows + (size_t)r * ld, (size_t)C * sizeof(float));
}

/* d->att = self-attention of d->ln (one query per row) over the row caches,
 * after appending this position's keys/values. */
static void self_attention(pmt_decoder *d, const pmt_attn_params *p, pmt_decoder_layer *c) {
    const pmt_model *m = d->m;
    const int R = d->rows, C = m->C;
    if (is_standard(d, PMT_SITE_DEC_SELF)) {
        step_linear(d, d->qkv, d->ln, p->wqkv, p->bqkv, R, C, 3 * C, STEP_STORE);   /* [R, 3C]: q | k | v */
        cache_put(c->k, d->qkv + C, 3 * C, R, d->cap, d->t, C);
        cache_put(c->v, d->qkv + 2 * C, 3 * C, R, d->cap, d->t, C);
        attention_forward_cached(d->att, d->attn_probs, d->qkv, c->k, c->v, 3 * C, d->row_map, d->max_rows, R,
                                 d->t + 1, d->cap, C, m->NH, (float)(1.0 / sqrt((double)m->HS)));
    } else {
        cache_put(c->k, d->ln, C, R, d->cap, d->t, C);
        if (!pmt_model_uses_poolattn(&m->cfg)) {
            projattn_forward_cached(d->att, d->attn_probs, d->ln, c->k, d->row_map, d->max_rows, site_log_sigma(d, p),
                                    R, d->t + 1, d->cap, C, m->NH);
        } else {
            /* The pooling kernels read a contiguous cache: gather this
             * step's view through row_map (the Gaussian path needs no copy). */
            for (int r = 0; r < R; r++) {
                for (int j = 0; j <= d->t; j++)
                    memcpy(d->pool_keys + ((size_t)r * d->cap + j) * C,
                           c->k + ((size_t)d->row_map[(size_t)j * d->max_rows + r] * d->cap + j) * C,
                           sizeof(float) * C);
                d->self_klen[r] = d->t + 1;
            }
            projection_attention(d, p, d->ln, d->pool_keys, d->self_klen, R, 1, d->cap);
        }
    }
}

/* d->att = cross-attention of d->ln: the beam rows of sentence b are its
 * T = beam queries against its S encoder positions. */
static void cross_attention(pmt_decoder *d, const pmt_attn_params *p, const pmt_decoder_layer *c) {
    const pmt_model *m = d->m;
    const int C = m->C;
    if (is_standard(d, PMT_SITE_DEC_CROSS)) {
        step_linear(d, d->qkv, d->ln, p->wqkv, p->bqkv, d->rows, C, C, STEP_STORE);   /* the Q rows: [rows, C] */
        attention_forward_few_queries(d->att, d->attn_probs, d->qkv, c->cross_kv, c->cross_kv + C, C, 2 * C,
                                      d->src_len, 0, d->n_sent, d->beam, d->S, C, m->NH,
                                      (float)(1.0 / sqrt((double)m->HS)));
    } else {
        projection_attention(d, p, d->ln, d->enc_out, d->src_len, d->n_sent, d->beam, d->S);
    }
}

/* x += W_O · att + b_O (the residual of an attention block). */
static void attention_output(pmt_decoder *d, const pmt_attn_params *p) {
    const int R = d->rows, C = d->m->C;
    step_linear(d, d->x, d->att, p->wo, p->bo, R, C, C, STEP_ADD);
}

static void ffn_block(pmt_decoder *d, const pmt_ffn_params *p) {
    const pmt_model *m = d->m;
    const int R = d->rows;
    layernorm_forward(d->ln, d->mean, d->rstd, d->x, p->ln_w, p->ln_b, R, m->C);
    step_linear(d, d->h, d->ln, p->w1, p->b1, R, m->C, m->F, STEP_RELU);
    step_linear(d, d->x, d->h, p->w2, p->b2, R, m->F, m->C, STEP_ADD);
}

const float *pmt_decoder_step_live(pmt_decoder *d, const int32_t *tokens, const int32_t *live) {
    pmt_model *m = d->m;
    const int R = d->rows, C = m->C;
    d->n_live = 0;
    for (int j = 0; j < d->n_sent; j++) {
        const int n = live ? live[j] : d->beam;
        assert(n >= 0 && n <= d->beam);
        for (int i = 0; i < d->beam; i++) d->logit_slot[j * d->beam + i] = i < n ? d->n_live + i : -1;
        for (int i = 0; i < n; i++) d->live_rows[d->n_live++] = j * d->beam + i;
    }
    embedding_forward(d->x, tokens, m->wte, m->pos + (size_t)d->t * C, R, 1, C, (float)sqrt((double)C));
    for (int r = 0; r < R; r++) d->row_map[(size_t)d->t * d->max_rows + r] = r;
    for (int l = 0; l < m->cfg.dec_layers; l++) {
        const pmt_layer_params *lp = &m->dec[l];
        pmt_decoder_layer *c = &d->layers[l];
        layernorm_forward(d->ln, d->mean, d->rstd, d->x, lp->self.ln_w, lp->self.ln_b, R, C);
        self_attention(d, &lp->self, c);
        attention_output(d, &lp->self);
        layernorm_forward(d->ln, d->mean, d->rstd, d->x, lp->cross.ln_w, lp->cross.ln_b, R, C);
        cross_attention(d, &lp->cross, c);
        if (d->cross_probs_out && l == m->cfg.dec_layers - 1)
            memcpy(d->cross_probs_out, d->attn_probs, (size_t)R * m->NH * d->S * sizeof(float));
        attention_output(d, &lp->cross);
        ffn_block(d, &lp->ffn);
    }
    layernorm_forward(d->ln, d->mean, d->rstd, d->x, m->dec_ln_w, m->dec_ln_b, R, C);
    /* Logits (the widest product of a step) of the live rows only, in
     * live-row order: row r's are at logit_slot[r]; with int8 weights their
     * normaliser is taken as each row is written. Over the batch's
     * vocabulary: all of it, or its shortlist's rows. */
    const float *w_out = d->shortlisted ? d->vocab_w : m->wte;
    const struct pmt_lowp_matrix *lm = d->shortlisted ? (d->vocab_lowp->w ? d->vocab_lowp : NULL) : find_lowp(d, m->wte);
    const int int8_visits = lm && lm->q8 && d->visit;
    if (lm && lm->q8) {
        /* visited: finished one row at a time in logits' first row */
        const pmt_int8_rows how = {.in_rows = d->n_live == R ? NULL : d->live_rows, .op = PMT_INT8_STORE,
                                   .lse = d->lse, .visit = d->visit, .visit_ctx = d->visit_ctx, .row_buf = d->logits};
        (void)linear_forward_int8_rows(d->logits, d->ln, lm->q8, lm->q8_scale, NULL, d->n_live, &d->q8_scratch, &how);
    } else {
        linear_with(d, lm, d->logits, d->n_live == R ? d->ln : gather_live(d, d->ln, C), w_out, NULL, d->n_live, C,
                    d->n_vocab);
        logsumexp_rows(d->lse, d->logits, d->n_live, d->n_vocab);
    }
    char why[256];
    if (pmt_gemm_take_error(why, sizeof why) != 0) {
        snprintf(d->error, sizeof d->error, "decoder step %d: %s", d->t, why);
        return NULL;
    }
    if (d->visit && !int8_visits)
        for (int c = 0; c < d->n_live; c++) d->visit(d->visit_ctx, c, d->logits + (size_t)c * d->n_vocab);
    d->t++;
    return d->logits;
}

const float *pmt_decoder_step(pmt_decoder *d, const int32_t *tokens) {
    return pmt_decoder_step_live(d, tokens, NULL);
}

const float *pmt_decoder_logits_row(const pmt_decoder *d, int r) {
    assert(r >= 0 && r < d->rows && d->logit_slot[r] >= 0);
    return d->logits + (size_t)d->logit_slot[r] * d->n_vocab;
}

double pmt_decoder_logprob(const pmt_decoder *d, int r, int id) {
    assert(id >= 0 && id < d->m->V);
    const int col = d->shortlisted ? d->vocab_col[id] : id;
    if (col < 0) return -INFINITY;   /* outside the batch's shortlist */
    return (double)pmt_decoder_logits_row(d, r)[col] - (double)d->lse[d->logit_slot[r]];
}

/* Moves sentence rows of a [n_sent, S, C] buffer down to their kept slots
 * (keep is increasing, so keep[j] >= j and memmove in order is safe). */
static void compact_sentences(float *buf, const int32_t *keep, int n_keep, size_t sentence_floats) {
    for (int j = 0; j < n_keep; j++)
        if (keep[j] != j)
            memmove(buf + (size_t)j * sentence_floats, buf + (size_t)keep[j] * sentence_floats,
                    sentence_floats * sizeof(float));
}


void pmt_decoder_reorder(pmt_decoder *d, const int32_t *parent, const int32_t *keep, int n_keep) {
    const int C = d->m->C, beam = d->beam, new_rows = n_keep * beam;
    /* The row map, built in the spare klen buffer's place: self_klen is
     * rewritten at every step, so it is free scratch here. */
    int32_t *from = d->self_klen;
    int identity = 1;
    for (int r = 0; r < new_rows; r++) {
        from[r] = parent ? parent[r] : keep[r / beam] * beam + r % beam;
        identity &= from[r] == r;
    }
    if (!identity) {
        /* Hypothesis r now continues old hypothesis from[r]: it inherits
         * that one's position → cache-row table (ints, not vectors). */
        const size_t ld = (size_t)d->max_rows;
        for (int j = 0; j < d->t; j++)
            for (int r = 0; r < new_rows; r++) d->row_map2[j * ld + r] = d->row_map[j * ld + from[r]];
        int32_t *tmp = d->row_map;
        d->row_map = d->row_map2;
        d->row_map2 = tmp;
    }
    if (n_keep != d->n_sent) {
        const size_t sent = (size_t)d->S * C;
        compact_sentences(d->enc_out, keep, n_keep, sent);
        for (int l = 0; l < d->m->cfg.dec_layers; l++) {
            if (d->layers[l].cross_kv) compact_sentences(d->layers[l].cross_kv, keep, n_keep, 2 * sent);
        }
        for (int j = 0; j < n_keep; j++) d->src_len[j] = d->src_len[keep[j]];
        d->n_sent = n_keep;
        d->rows = new_rows;
    }
}

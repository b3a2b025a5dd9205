/*
 * model.c — the encoder–decoder Transformer assembled from ops.h kernels.
 *
 * Pre-LayerNorm residual blocks: x_out = x_in + dropout(sublayer(LN(x_in))),
 * where the sublayer is attention (self or cross; standard or projection per
 * site) or the ReLU feed-forward. The block structure is shared by every site
 * through block_forward/block_backward, so the three attention sites and the
 * two stacks differ only in the arguments they pass.
 *
 * Parameters are one flat buffer addressed by a table of named tensors built
 * by one walk over the architecture (build_tensor_table), used twice: once to
 * count, once to bind pointers. Activations live in an arena allocated once
 * for the largest batch; forward and backward never allocate.
 *
 * bf16 training passes (--precision bf16; `auto` resolves to it through
 * pmt_gemm_precision_auto where the CPU has native bf16 dot products): a
 * training pass switches nn/gemm.c to bf16 products with fp32 accumulation,
 * and every operand is rounded once per pass: the weights into
 * m->params16 (round_params_bf16, or written by Adam's update in its own
 * pass: pmt_optim_keep_bf16_copy, pmt_model_params16_written), linear inputs
 * into arena slots that the weight-gradient products read again, producer
 * kernels' outputs by the producers themselves (the *_lp kernels of
 * nn/ops.h), the rest into gemm.c's workspace, reserved at init. Two
 * activations exist only in bf16: the FFN's hidden layer
 * (linear_relu_forward_bf16: bias, ReLU and rounding in the oneDNN
 * matmul's epilogue, pmt_gemm_bf16_out; its backward gated by the bf16
 * values) and the logits (the cross-entropy runs over them in place,
 * crossentropy_fused_bf16_logits); biased linear layers add the bias in
 * the epilogue (pmt_gemm_bf16_bias). Standard and Sanger projection
 * attention run their per-head products as avx512_bf16 dot products
 * (attention_*_bf16, projattn_*_bf16 in nn/ops_attention.c), the pooling
 * family (ops_poolattn.c) stays fp32. Each pass starts with
 * pmt_gemm_bf16_weights_changed, so the products' blocked weight copies
 * (PMT_LP_B_FIXED, nn/gemm.h) are made again from the new params16.
 * Weights, gradients, Adam, LayerNorm statistics and every softmax stay
 * fp32, and evaluation passes run in fp32.
 */
#include "model/model.h"
#include "model/record.h"
#include "model/shortlist.h"

#include <math.h>
#include <stdint.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn/gemm.h"
#include "nn/ops.h"
#include "nn/ops_internal.h"
#include "nn/profile.h"
#include "core/rng.h"

/* ------------------------------------------------------------------ */
/* activations                                                         */

/* One pre-LN block's saved values. Which fields are used depends on the
 * block: attention (standard uses q/k/v, projection does not) or FFN (h). */
typedef struct block_act {
    float *ln, *mean, *rstd;   /* LN(x_in) [N, C], stats [N] */
    /* Standard attention projections as column blocks of the fused
     * products: self-attention one [N, 3C] buffer, q/k/v at columns 0, C,
     * 2C (ldq = ldkv = 3C); cross-attention q [N, C] (ldq = C) and one
     * [Nk, 2C] buffer, k/v at columns 0, C (ldkv = 2C). */
    float *q, *k, *v;
    int ldq, ldkv;
    float *att;                /* heads concatenated, before W_O [N, C] */
    float *probs;              /* [B, NH, Tq, Tk] */
    float *h;                  /* FFN hidden after ReLU [N, F] (not written by a bf16 training
                                  pass, whose hidden layer is h16 alone) */
    float *out;                /* x_in + dropout(sublayer) [N, C]; the sublayer output is
                                  written here first and the fused dropout + residual
                                  pass updates it in place (no mask is stored: backward
                                  regenerates it from the counter-based stream) */
    /* --precision bf16 training only (else NULL): the bf16 roundings of the
     * linear layers' inputs, written in the forward pass and read again by
     * the weight-gradient products (linear_bf16 of nn/ops.h): ln16 of ln
     * (Q|K|V, cross Q, FFN up; rounded by the LayerNorm), att16 of att
     * (W_O), h16 of h (FFN down; rounded in the bias + ReLU pass). */
    uint16_t *ln16, *att16, *h16;
} block_act;

typedef struct layer_act {
    block_act self, cross, ffn;
} layer_act;

struct pmt_model_activations {
    float *arena;              /* one allocation; everything below points into it */
    size_t arena_floats;

    float *enc_x0;                     /* embedded source after dropout [B*S, C] */
    float *dec_x0;                     /* embedded target after dropout [B*T, C] */
    layer_act *enc, *dec;
    float *enc_out, *enc_mean, *enc_rstd;   /* final encoder LN [B*S, C] */
    uint16_t *enc_out16;                    /* its bf16 rounding, the K|V input of every standard cross-
                                               attention (bf16 training only, else NULL) */
    float *dec_out, *dec_mean, *dec_rstd;   /* final decoder LN [B*T, C] */
    /* The vocabulary projection runs only over the Nc counted (non-pad)
     * target rows: padding rows have no loss and no gradient, so their
     * [V]-wide logits would be wasted work in the largest GEMM and in the
     * cross-entropy. */
    float *logit_in;                   /* [Nc, C] final decoder LN rows of counted targets */
    int32_t *logit_row;                /* [Nc] their row in [B*T] */
    int32_t *logit_tgt;                /* [Nc] their targets */
    int logit_rows;                    /* Nc of the last forward pass */
    int logits_hold_grad;              /* logits holds p − q (training pass), not p */
    float *logits;                     /* [Nc, V]: logits, then probs, then dlogits */
    float *loss_rows;                  /* [Nc] */
    /* bf16 training: logit_in's rounding (the vocabulary product's input),
     * and the rounded scaled gradient bf16(logits16_scale · dlogits) when a
     * training step's forward pass wrote it (logits16_scale 0: it did not). */
    uint16_t *logit_in16;              /* [Nc, C] */
    uint16_t *logits16;                /* [Nc, V] */
    float logits16_scale;

    /* backward scratch */
    float *d_enc_stream, *d_dec_stream;    /* residual-stream gradients [rows, C] */
    float *d_enc_out, *d_dec_out;          /* gradients of the final LN outputs */
    float *d_ln, *d_att, *d_sub;           /* [rows, C] */
    float *d_qkv;                          /* [rows, 3C]: d(q|k|v), laid out as block_act's q/k/v */
    float *d_h;                            /* [rows, F]: d(ReLU output), then in place d(pre-activation) */
    /* bf16 training: the roundings of d_sub (from the dropout pass) and of
     * d(pre-activation) (from the ReLU pass), the dout16 of W_O / FFN down
     * and of FFN up (nn/ops.h linear_bf16); else NULL. */
    uint16_t *d_sub16, *d_h16;
    float *ln_scratch;                     /* layernorm_backward's partial sums */
    float *bias_scratch;                   /* relu_backward_bias_lp16's partial sums (bf16 training) */

    float *log_sigma_fixed;            /* [NH]: pmt_model_fixed_log_sigma */
    float *pool_scratch;               /* poolattn_* scratch (NULL unless pooling) */
    size_t pool_scratch_floats;
    float *nll_rows;                   /* [B*T] plain NLL per row for perplexity */

    /* shapes of the last forward pass */
    int B, S, T;
    const pmt_linear_hook *linear_hook;   /* this encoder pass's products (NULL: fp32 params) */
    uint64_t dropout_seed;
    int train;
};

/* ------------------------------------------------------------------ */
/* tensor table                                                        */

typedef struct table_builder {
    pmt_tensor *table;         /* NULL while counting */
    float *base;               /* NULL while counting or describing (no parameters) */
    size_t offset;
    int count;
} table_builder;

static float *add_tensor(table_builder *tb, const char *name, int rows, int cols) {
    size_t size = (size_t)rows * (size_t)cols;
    if (tb->table) {
        pmt_tensor *t = &tb->table[tb->count];
        snprintf(t->name, sizeof t->name, "%s", name);
        t->offset = tb->offset;
        t->size = size;
        t->rows = rows;
        t->cols = cols;
    }
    float *p = tb->base ? tb->base + tb->offset : NULL;
    tb->offset += size;
    tb->count++;
    return p;
}

static void add_attention(table_builder *tb, pmt_attn_params *a, const char *prefix, int kind,
                          const pmt_config *cfg, int C, int NH) {
    char name[64];
#define T(field, suffix, r, c) (snprintf(name, sizeof name, "%s.%s", prefix, suffix), a->field = add_tensor(tb, name, r, c))
    memset(a, 0, sizeof *a);
    T(ln_w, "ln_w", C, 1);
    T(ln_b, "ln_b", C, 1);
    if (kind == PMT_ATTN_STANDARD) {
        T(wqkv, "wqkv", 3 * C, C);
        T(bqkv, "bqkv", 3 * C, 1);
    }
    T(wo, "wo", C, C);
    T(bo, "bo", C, 1);
    if (kind == PMT_ATTN_PROJECTION && cfg->sigma_learned) T(log_sigma, "log_sigma", NH, 1);
    if (kind == PMT_ATTN_PROJECTION && cfg->proj_metric == PMT_METRIC_DIAGONAL) T(log_metric, "log_metric", C, 1);
    if (kind == PMT_ATTN_PROJECTION && cfg->proj_metric == PMT_METRIC_COSINE) T(log_radius, "log_radius", NH, 1);
#undef T
}

static void add_ffn(table_builder *tb, pmt_ffn_params *f, const char *prefix, int C, int F) {
    char name[64];
#define T(field, suffix, r, c) (snprintf(name, sizeof name, "%s.%s", prefix, suffix), f->field = add_tensor(tb, name, r, c))
    T(ln_w, "ln_w", C, 1);
    T(ln_b, "ln_b", C, 1);
    T(w1, "w1", F, C); T(b1, "b1", F, 1);
    T(w2, "w2", C, F); T(b2, "b2", C, 1);
#undef T
}

/* The one description of the architecture's parameters, in table order. */
static void build_tensor_table(table_builder *tb, const pmt_config *cfg, int V,
                               pmt_layer_params *enc, pmt_layer_params *dec,
                               float **wte, float **enc_ln, float **dec_ln) {
    const int C = cfg->d_model, NH = cfg->n_heads, F = cfg->d_ff;
    char prefix[48];
    *wte = add_tensor(tb, "wte", V, C);
    for (int l = 0; l < cfg->enc_layers; l++) {
        snprintf(prefix, sizeof prefix, "enc.%d.self", l);
        add_attention(tb, &enc[l].self, prefix, cfg->site_kind[PMT_SITE_ENC_SELF], cfg, C, NH);
        snprintf(prefix, sizeof prefix, "enc.%d.ffn", l);
        add_ffn(tb, &enc[l].ffn, prefix, C, F);
    }
    enc_ln[0] = add_tensor(tb, "enc.ln_w", C, 1);
    enc_ln[1] = add_tensor(tb, "enc.ln_b", C, 1);
    for (int l = 0; l < cfg->dec_layers; l++) {
        snprintf(prefix, sizeof prefix, "dec.%d.self", l);
        add_attention(tb, &dec[l].self, prefix, cfg->site_kind[PMT_SITE_DEC_SELF], cfg, C, NH);
        snprintf(prefix, sizeof prefix, "dec.%d.cross", l);
        add_attention(tb, &dec[l].cross, prefix, cfg->site_kind[PMT_SITE_DEC_CROSS], cfg, C, NH);
        snprintf(prefix, sizeof prefix, "dec.%d.ffn", l);
        add_ffn(tb, &dec[l].ffn, prefix, C, F);
    }
    dec_ln[0] = add_tensor(tb, "dec.ln_w", C, 1);
    dec_ln[1] = add_tensor(tb, "dec.ln_b", C, 1);
}

size_t pmt_model_count_params(const pmt_config *cfg, int V) {
    char why[160];
    if (pmt_record_check_limits(cfg, V, why, sizeof why) != 0) return 0;   /* its products could overflow */
    pmt_layer_params *enc = calloc((size_t)cfg->enc_layers, sizeof *enc);
    pmt_layer_params *dec = calloc((size_t)cfg->dec_layers, sizeof *dec);
    if (!enc || !dec) { free(enc); free(dec); return 0; }
    table_builder tb = {0};
    float *wte, *enc_ln[2], *dec_ln[2];
    build_tensor_table(&tb, cfg, V, enc, dec, &wte, enc_ln, dec_ln);
    free(enc);
    free(dec);
    return tb.offset;
}

int pmt_model_tensor_table(const pmt_config *cfg, int V, pmt_tensor **tensors, int *n_tensors, char *err,
                           size_t errlen) {
    *tensors = NULL;
    *n_tensors = 0;
    if (pmt_record_check_limits(cfg, V, err, errlen) != 0) return -1;
    pmt_layer_params *enc = calloc((size_t)cfg->enc_layers, sizeof *enc);
    pmt_layer_params *dec = calloc((size_t)cfg->dec_layers, sizeof *dec);
    float *wte, *enc_ln[2], *dec_ln[2];
    table_builder count = {0};
    if (enc && dec) build_tensor_table(&count, cfg, V, enc, dec, &wte, enc_ln, dec_ln);
    table_builder describe = {.table = enc && dec ? calloc((size_t)count.count, sizeof *describe.table) : NULL};
    if (describe.table) build_tensor_table(&describe, cfg, V, enc, dec, &wte, enc_ln, dec_ln);
    free(enc);
    free(dec);
    if (!describe.table) {
        snprintf(err, errlen, "out of memory describing the tensor table");
        return -1;
    }
    *tensors = describe.table;
    *n_tensors = describe.count;
    return 0;
}

float pmt_model_fixed_log_sigma(const pmt_config *cfg) {
    const double HS = (double)(cfg->d_model / cfg->n_heads);
    const int compact = cfg->proj_kernel == PMT_KERNEL_BOXCAR || cfg->proj_kernel == PMT_KERNEL_EPANECHNIKOV;
    const double sigma_sq = cfg->sigma_sq > 0 ? cfg->sigma_sq : compact ? 2.0 * HS : sqrt(HS);
    return (float)(0.5 * log(sigma_sq));
}

int pmt_model_uses_poolattn(const pmt_config *cfg) {
    return cfg->proj_kernel != PMT_KERNEL_GAUSSIAN || cfg->proj_metric != PMT_METRIC_EUCLIDEAN;
}

const pmt_tensor *pmt_model_find_tensor(const pmt_model *m, const char *name) {
    for (int i = 0; i < m->n_tensors; i++)
        if (!strcmp(m->tensors[i].name, name)) return &m->tensors[i];
    return NULL;
}

/* ------------------------------------------------------------------ */
/* the layout before the fused Q/K/V projection                        */

static const char *const legacy_qkv_leaf[6] = {"wq", "bq", "wk", "bk", "wv", "bv"};

/* Whether tensors[i] is "<prefix>.wq" (the prefix, with its dot, is
 * tensors[i].name up to *prefix_len). */
static int starts_legacy_qkv(const pmt_tensor *t, size_t *prefix_len) {
    const char *dot = strrchr(t->name, '.');
    if (!dot || strcmp(dot + 1, "wq")) return 0;
    *prefix_len = (size_t)(dot + 1 - t->name);
    return 1;
}

/* Checks the run of six tensors at t (prefix of prefix_len chars): names
 * in legacy_qkv_leaf order, shapes [C, C] / [C, 1], back to back. */
static int legacy_qkv_run_ok(const pmt_tensor *t, int available, size_t prefix_len) {
    if (available < 6) return 0;
    const int C = t[0].rows;
    size_t end = t[0].offset;
    for (int k = 0; k < 6; k++) {
        const int is_matrix = k % 2 == 0;
        if (strncmp(t[k].name, t[0].name, prefix_len) || strcmp(t[k].name + prefix_len, legacy_qkv_leaf[k]) ||
            t[k].rows != C || t[k].cols != (is_matrix ? C : 1) || t[k].offset != end)
            return 0;
        end += t[k].size;
    }
    return 1;
}

/* One region of 3C² + 3C floats from wq|bq|wk|bk|wv|bv to wq|wk|wv|bq|bk|bv,
 * through tmp of the same size. */
static void fuse_region(float *x, float *tmp, size_t C) {
    const size_t mat = C * C;
    for (size_t k = 0; k < 3; k++) {
        memcpy(tmp + k * mat, x + k * (mat + C), mat * sizeof(float));
        memcpy(tmp + 3 * mat + k * C, x + k * (mat + C) + mat, C * sizeof(float));
    }
    memcpy(x, tmp, (3 * mat + 3 * C) * sizeof(float));
}

int pmt_model_fuse_legacy_qkv(pmt_tensor *tensors, int *n_tensors, float *const *arrays, int n_arrays,
                              char *err, size_t errlen) {
    size_t prefix_len, largest = 0;
    int sites = 0;
    for (int i = 0; i < *n_tensors; i++) {   /* check every run before changing anything */
        if (!starts_legacy_qkv(&tensors[i], &prefix_len)) continue;
        if (!legacy_qkv_run_ok(&tensors[i], *n_tensors - i, prefix_len)) {
            snprintf(err, errlen, "tensor '%s' [%d x %d] starts the separate Q/K/V layout of older projmt builds, "
                     "but is not followed by its bq, wk, bk, wv, bv back to back, so it cannot be converted to "
                     "the fused wqkv layout", tensors[i].name, tensors[i].rows, tensors[i].cols);
            return -1;
        }
        const size_t region = 3 * tensors[i].size + 3 * (size_t)tensors[i].rows;
        if (region > largest) largest = region;
        sites++;
        i += 5;
    }
    if (sites == 0) return 0;
    float *tmp = malloc(largest * sizeof(float));
    if (!tmp) {
        snprintf(err, errlen, "out of memory converting the separate Q/K/V tensors to the fused layout");
        return -1;
    }
    int out = 0;
    for (int i = 0; i < *n_tensors; out++) {
        if (!starts_legacy_qkv(&tensors[i], &prefix_len)) {
            tensors[out] = tensors[i++];
            continue;
        }
        const pmt_tensor wq = tensors[i];
        const int C = wq.rows;
        for (int a = 0; a < n_arrays; a++)
            if (arrays[a]) fuse_region(arrays[a] + wq.offset, tmp, (size_t)C);
        pmt_tensor *w = &tensors[out], *b = &tensors[out + 1];
        *w = wq;
        snprintf(w->name + prefix_len, sizeof w->name - prefix_len, "wqkv");
        w->rows = 3 * C;
        w->size = (size_t)3 * C * C;
        *b = wq;
        snprintf(b->name + prefix_len, sizeof b->name - prefix_len, "bqkv");
        b->rows = 3 * C;
        b->cols = 1;
        b->offset = w->offset + w->size;
        b->size = (size_t)3 * C;
        out++;
        i += 6;
    }
    free(tmp);
    *n_tensors = out;
    return sites;
}

/* ------------------------------------------------------------------ */
/* FLOPs                                                               */

/* Forward matmul FLOPs of one attention block: Nq query rows, Nk key rows,
 * Bq*Tq*Tk score entries. */
static double attention_block_flops(int kind, double C, double Nq, double Nk, double scores) {
    double proj = (kind == PMT_ATTN_STANDARD) ? 2.0 * C * C * (2.0 * Nq + 2.0 * Nk) : 2.0 * C * C * Nq;
    return proj + 4.0 * scores * C;   /* q·kᵀ and P·v */
}

double pmt_model_train_flops(const pmt_config *cfg, int V, int B, int S, int T) {
    const double C = cfg->d_model, F = cfg->d_ff;
    const double Ns = (double)B * S, Nt = (double)B * T;
    double fwd = 0;
    for (int l = 0; l < cfg->enc_layers; l++)
        fwd += attention_block_flops(cfg->site_kind[PMT_SITE_ENC_SELF], C, Ns, Ns, (double)B * S * S) + 4.0 * C * F * Ns;
    for (int l = 0; l < cfg->dec_layers; l++) {
        /* self-attention: Q,K,V all from the target; the formula's 2Nq+2Nk
         * counts Q,O on queries and K,V on keys. */
        fwd += attention_block_flops(cfg->site_kind[PMT_SITE_DEC_SELF], C, Nt, Nt, (double)B * T * T);
        fwd += attention_block_flops(cfg->site_kind[PMT_SITE_DEC_CROSS], C, Nt, Ns, (double)B * T * S);
        fwd += 4.0 * C * F * Nt;
    }
    fwd += 2.0 * C * V * Nt;
    return 3.0 * fwd;
}

/* ------------------------------------------------------------------ */
/* init / free                                                         */

/* Carves the arena: called once to count (base NULL) and once to bind. */
typedef struct arena_builder { float *base; size_t used; } arena_builder;

static float *carve(arena_builder *ab, size_t n) {
    float *p = ab->base ? ab->base + ab->used : NULL;
    ab->used += (n + 15) & ~(size_t)15;   /* 64-byte alignment for every buffer */
    return p;
}

/* n bf16 values, or NULL (nothing carved) unless lowp. */
static uint16_t *carve_bf16(arena_builder *ab, size_t n, int lowp) {
    return lowp ? (uint16_t *)carve(ab, (n + 1) / 2) : NULL;
}

static void carve_block(arena_builder *ab, block_act *a, int is_attention, int kind, int is_cross,
                        size_t rows, size_t key_rows, size_t probs, int C, int F, int lowp) {
    memset(a, 0, sizeof *a);
    a->ln = carve(ab, rows * C);
    const int standard = is_attention && kind == PMT_ATTN_STANDARD;
    a->ln16 = carve_bf16(ab, rows * C, lowp && (standard || !is_attention));
    a->att16 = carve_bf16(ab, rows * C, lowp && is_attention);
    a->h16 = carve_bf16(ab, rows * F, lowp && !is_attention);
    a->mean = carve(ab, rows);
    a->rstd = carve(ab, rows);
    if (is_attention) {
        if (kind == PMT_ATTN_STANDARD && is_cross) {
            a->q = carve(ab, rows * C);
            a->k = carve(ab, key_rows * 2 * C);
            a->v = a->k ? a->k + C : NULL;
            a->ldq = C;
            a->ldkv = 2 * C;
        } else if (kind == PMT_ATTN_STANDARD) {
            a->q = carve(ab, rows * 3 * C);
            a->k = a->q ? a->q + C : NULL;
            a->v = a->q ? a->q + 2 * C : NULL;
            a->ldq = a->ldkv = 3 * C;
        }
        a->att = carve(ab, rows * C);
        a->probs = carve(ab, probs);
    } else {
        a->h = carve(ab, rows * F);
    }
    a->out = carve(ab, rows * C);
}

/* training = 0 (inference-only models): the forward pass only, none of the
 * backward scratch; the bf16 roundings only for bf16 training. */
static void carve_activations(arena_builder *ab, pmt_model_activations *A, const pmt_config *cfg,
                              int V, size_t rows, size_t probs, int max_len, int training) {
    const int C = cfg->d_model, F = cfg->d_ff, NH = cfg->n_heads;
    const int lowp = training && cfg->precision == PMT_PRECISION_BF16;
    A->log_sigma_fixed = carve(ab, (size_t)NH);
    const int any_projection = pmt_config_any_projection(cfg);
    A->pool_scratch_floats = any_projection && pmt_model_uses_poolattn(cfg)
                                 ? poolattn_scratch_bound((int)rows, max_len, C, NH) : 0;
    A->pool_scratch = A->pool_scratch_floats ? carve(ab, A->pool_scratch_floats) : NULL;
    A->enc_x0 = carve(ab, rows * C);
    for (int l = 0; l < cfg->enc_layers; l++) {
        carve_block(ab, &A->enc[l].self, 1, cfg->site_kind[PMT_SITE_ENC_SELF], 0, rows, rows, probs, C, F, lowp);
        carve_block(ab, &A->enc[l].ffn, 0, 0, 0, rows, rows, probs, C, F, lowp);
    }
    A->enc_out = carve(ab, rows * C);
    A->enc_out16 = carve_bf16(ab, rows * C, lowp && cfg->site_kind[PMT_SITE_DEC_CROSS] == PMT_ATTN_STANDARD);
    A->enc_mean = carve(ab, rows);
    A->enc_rstd = carve(ab, rows);
    A->dec_x0 = carve(ab, rows * C);
    for (int l = 0; l < cfg->dec_layers; l++) {
        carve_block(ab, &A->dec[l].self, 1, cfg->site_kind[PMT_SITE_DEC_SELF], 0, rows, rows, probs, C, F, lowp);
        carve_block(ab, &A->dec[l].cross, 1, cfg->site_kind[PMT_SITE_DEC_CROSS], 1, rows, rows, probs, C, F, lowp);
        carve_block(ab, &A->dec[l].ffn, 0, 0, 0, rows, rows, probs, C, F, lowp);
    }
    A->dec_out = carve(ab, rows * C);
    A->dec_mean = carve(ab, rows);
    A->dec_rstd = carve(ab, rows);
    A->logit_in = carve(ab, rows * C);
    A->logit_row = (int32_t *)carve(ab, rows);   /* int32 and float have the same size */
    A->logit_tgt = (int32_t *)carve(ab, rows);
    A->logits = carve(ab, rows * (size_t)V);
    A->logit_in16 = carve_bf16(ab, rows * C, lowp);
    A->logits16 = carve_bf16(ab, rows * (size_t)V, lowp);
    A->loss_rows = carve(ab, rows);
    A->nll_rows = carve(ab, rows);
    if (!training) return;
    A->d_enc_stream = carve(ab, rows * C);
    A->d_dec_stream = carve(ab, rows * C);
    A->d_enc_out = carve(ab, rows * C);
    A->d_dec_out = carve(ab, rows * C);
    A->d_ln = carve(ab, rows * C);
    A->d_qkv = carve(ab, rows * 3 * C);
    A->d_att = carve(ab, rows * C);
    A->d_sub = carve(ab, rows * C);
    A->d_h = carve(ab, rows * F);
    A->d_sub16 = carve_bf16(ab, rows * C, lowp);
    A->d_h16 = carve_bf16(ab, rows * F, lowp);
    A->ln_scratch = carve(ab, layernorm_backward_scratch_floats(C));
    if (lowp) A->bias_scratch = carve(ab, relu_backward_bias_scratch_floats(F));
}

/* --precision bf16: the gemm layer's bf16 copies of the largest operands a
 * training step multiplies (nn/gemm.h), reserved here so no step allocates.
 * Every product is a linear layer's: forward inp [rows, IN] · w [OUT, IN]ᵀ,
 * backward dout [rows, OUT] · w and doutᵀ · inp, with rows <= max_rows,
 * IN ∈ {C, F} and OUT ∈ {C, 2C, 3C (the fused Q|K|V), F, V}. A operands:
 * inp or dout; B operands: w or inp. */
static int reserve_bf16(const pmt_model *m, char *err, size_t errlen) {
    const size_t rows = (size_t)m->max_rows, V = (size_t)m->V, C = (size_t)m->C, F = (size_t)m->F;
    const size_t widest_in = F > C ? F : C, widest_out_f = V > F ? V : F;
    const size_t widest_out = widest_out_f > 3 * C ? widest_out_f : 3 * C;
    const size_t widest = widest_out > widest_in ? widest_out : widest_in;
    const size_t widest_w = (V > F ? (V > 3 * C ? V : 3 * C) : (F > 3 * C ? F : 3 * C)) * C;   /* wte, w1/w2, wqkv */
    char inner[256];
    const size_t widest_inp = rows * widest_in;
    if (pmt_gemm_bf16_reserve(rows * widest, widest_w > widest_inp ? widest_w : widest_inp, inner, sizeof inner) != 0) {
        snprintf(err, errlen, "%s", inner);
        return -1;
    }
    return 0;
}

static int model_init(pmt_model *m, const pmt_config *cfg, int V, int max_rows, int max_len, int training,
                      char *err, size_t errlen) {
    memset(m, 0, sizeof *m);
    if (pmt_config_validate(cfg, err, errlen) != 0) return -1;
    /* Every size below is computed from these: within the limits no
     * product of them overflows (record.h). */
    if (pmt_record_check_limits(cfg, V, err, errlen) != 0) return -1;
    if (V < 4 || max_rows < 1 || max_len < 1) {
        snprintf(err, errlen, "model: bad sizes (vocab %d, max_rows %d, max_len %d)", V, max_rows, max_len);
        return -1;
    }
    m->cfg = *cfg;
    m->V = V;
    m->C = cfg->d_model;
    m->NH = cfg->n_heads;
    m->HS = cfg->d_model / cfg->n_heads;
    m->F = cfg->d_ff;
    m->max_rows = max_rows;
    m->max_len = max_len;

    m->enc = calloc((size_t)cfg->enc_layers, sizeof *m->enc);
    m->dec = calloc((size_t)cfg->dec_layers, sizeof *m->dec);
    m->act = calloc(1, sizeof *m->act);
    if (!m->enc || !m->dec || !m->act) goto oom;
    m->act->enc = calloc((size_t)cfg->enc_layers, sizeof *m->act->enc);
    m->act->dec = calloc((size_t)cfg->dec_layers, sizeof *m->act->dec);
    if (!m->act->enc || !m->act->dec) goto oom;

    float *enc_ln[2], *dec_ln[2];
    table_builder count = {0};
    build_tensor_table(&count, cfg, V, m->enc, m->dec, &m->wte, enc_ln, dec_ln);
    m->n_params = count.offset;
    m->n_tensors = count.count;
    m->tensors = calloc((size_t)m->n_tensors, sizeof *m->tensors);
    m->params = aligned_alloc(64, ((m->n_params * sizeof(float)) + 63) & ~(size_t)63);
    m->grads = training ? aligned_alloc(64, ((m->n_params * sizeof(float)) + 63) & ~(size_t)63) : NULL;
    m->pos = malloc((size_t)max_len * m->C * sizeof(float));
    if (!m->tensors || !m->params || (training && !m->grads) || !m->pos) goto oom;
    table_builder bind = {.table = m->tensors, .base = m->params};
    build_tensor_table(&bind, cfg, V, m->enc, m->dec, &m->wte, enc_ln, dec_ln);
    m->enc_ln_w = enc_ln[0];
    m->enc_ln_b = enc_ln[1];
    m->dec_ln_w = dec_ln[0];
    m->dec_ln_b = dec_ln[1];
    memset(m->params, 0, m->n_params * sizeof(float));
    if (m->grads) memset(m->grads, 0, m->n_params * sizeof(float));
    positional_table_init(m->pos, max_len, m->C);

    size_t rows = (size_t)max_rows;
    size_t probs = (size_t)m->NH * rows * (size_t)max_len;
    arena_builder ab = {0};
    carve_activations(&ab, m->act, cfg, V, rows, probs, max_len, training);
    m->act->arena_floats = ab.used;
    if (ab.used > SIZE_MAX / sizeof(float)) goto oom;   /* max_rows is the caller's: no limit bounds it */
    m->act->arena = aligned_alloc(64, ab.used * sizeof(float));
    if (!m->act->arena) goto oom;
    m->arena_lock = malloc(sizeof *m->arena_lock);
    if (!m->arena_lock) goto oom;
    if (pthread_mutex_init(m->arena_lock, NULL) != 0) {
        free(m->arena_lock);
        m->arena_lock = NULL;
        goto oom;
    }
    arena_builder bind_arena = {.base = m->act->arena};
    carve_activations(&bind_arena, m->act, cfg, V, rows, probs, max_len, training);
    for (int h = 0; h < m->NH; h++) m->act->log_sigma_fixed[h] = pmt_model_fixed_log_sigma(cfg);
    /* The attention kernels' per-thread scratch, sized once here for the
     * longest sequences (the decoder's shapes are smaller). */
    if (attention_scratch_reserve(max_len, max_len, m->HS) != 0) goto oom;
    if (training && cfg->precision == PMT_PRECISION_BF16) {
        if (reserve_bf16(m, err, errlen) != 0) {
            pmt_model_free(m);
            return -1;
        }
        m->params16 = aligned_alloc(64, ((m->n_params * sizeof(uint16_t)) + 63) & ~(size_t)63);
        if (!m->params16) goto oom;
    }
    return 0;
oom:
    snprintf(err, errlen, "model: out of memory (vocab %d, max_rows %d, max_len %d)", V, max_rows, max_len);
    pmt_model_free(m);
    return PMT_OUT_OF_MEMORY;
}

int pmt_model_init(pmt_model *m, const pmt_config *cfg, int V, int max_rows, int max_len,
                   char *err, size_t errlen) {
    return model_init(m, cfg, V, max_rows, max_len, 1, err, errlen);
}

int pmt_model_init_inference(pmt_model *m, const pmt_config *cfg, int V, int max_rows, int max_len,
                             char *err, size_t errlen) {
    return model_init(m, cfg, V, max_rows, max_len, 0, err, errlen);
}

int pmt_model_init_view(pmt_model *view, const pmt_model *m, char *err, size_t errlen) {
    if (model_init(view, &m->cfg, m->V, m->max_rows, m->max_len, 0, err, errlen) != 0) return -1;
    /* Drop the view's own (zeroed) parameters; its layer tables become
     * copies of m's, which point into m's parameters. */
    free(view->params);
    view->params = NULL;
    view->wte = m->wte;
    view->enc_ln_w = m->enc_ln_w;
    view->enc_ln_b = m->enc_ln_b;
    view->dec_ln_w = m->dec_ln_w;
    view->dec_ln_b = m->dec_ln_b;
    memcpy(view->enc, m->enc, (size_t)m->cfg.enc_layers * sizeof *m->enc);
    memcpy(view->dec, m->dec, (size_t)m->cfg.dec_layers * sizeof *m->dec);
    view->decode_weights = m->decode_weights;
    return 0;
}

size_t pmt_model_arena_floats(const pmt_model *m) { return m->act ? m->act->arena_floats : 0; }

void pmt_model_free(pmt_model *m) {
    if (m->act) {
        free(m->act->arena);
        free(m->act->enc);
        free(m->act->dec);
        free(m->act);
    }
    free(m->enc);
    free(m->dec);
    free(m->tensors);
    free(m->params);
    free(m->params16);
    free(m->grads);
    free(m->pos);
    pmt_shortlist_free(m->shortlist);
    if (m->arena_lock) pthread_mutex_destroy(m->arena_lock);
    free(m->arena_lock);
    memset(m, 0, sizeof *m);
}

void pmt_model_init_params(pmt_model *m, uint64_t seed) {
    pmt_rng rng = {pmt_splitmix64(seed ^ 0x5EED0F0DE1ULL)};
    for (int i = 0; i < m->n_tensors; i++) {
        const pmt_tensor *t = &m->tensors[i];
        float *p = m->params + t->offset;
        const char *leaf = strrchr(t->name, '.');
        leaf = leaf ? leaf + 1 : t->name;
        if (!strcmp(t->name, "wte")) {
            double sd = 1.0 / sqrt((double)m->C);
            for (size_t j = 0; j < t->size; j++) p[j] = (float)(sd * pmt_rng_normal(&rng));
            for (int c = 0; c < m->C; c++) p[(size_t)PMT_PAD_ID * m->C + c] = 0.0f;
        } else if (!strcmp(leaf, "ln_w")) {
            for (size_t j = 0; j < t->size; j++) p[j] = 1.0f;
        } else if (!strcmp(leaf, "log_sigma")) {
            for (size_t j = 0; j < t->size; j++) p[j] = pmt_model_fixed_log_sigma(&m->cfg);
        } else if (!strcmp(leaf, "log_radius")) {
            for (size_t j = 0; j < t->size; j++) p[j] = (float)(0.5 * log((double)m->HS));
        } else if (t->cols > 1) {
            /* The fused Q|K|V matrix is three [C, C] projections: each keeps
             * its own Xavier range (and the draws their order). */
            const int fan_out = !strcmp(leaf, "wqkv") ? t->rows / 3 : t->rows;
            double limit = sqrt(6.0 / (double)(fan_out + t->cols));
            for (size_t j = 0; j < t->size; j++) p[j] = (float)(limit * (2.0 * pmt_rng_uniform(&rng) - 1.0));
        } else {
            memset(p, 0, t->size * sizeof(float));
        }
    }
}

/* Counted rows are copied from the forward pass; padding rows, which the
 * forward pass skips, are computed here from the final decoder LN output
 * (this is for tests and inspection, not for training). */
void pmt_model_output_probs(const pmt_model *m, float *out) {
    const pmt_model_activations *A = m->act;
    const size_t V = (size_t)m->V;
    const int N = A->B * A->T;
    if (A->logits_hold_grad) {
        pmt_gemm_record_error("internal error: output probabilities requested after a training forward pass");
        return;
    }
    for (int i = 0, c = 0; i < N; i++) {
        float *row = out + (size_t)i * V;
        if (c < A->logit_rows && A->logit_row[c] == i) {
            memcpy(row, A->logits + (size_t)c * V, V * sizeof(float));
            c++;
        } else {
            const int32_t pad = PMT_PAD_ID;
            float unused_loss;
            linear_forward(row, A->dec_out + (size_t)i * m->C, m->wte, NULL, 1, m->C, m->V);
            crossentropy_forward(&unused_loss, row, row, &pad, 1, m->V, 0.0f, PMT_PAD_ID, NULL);
        }
    }
}

const float *pmt_model_attention_weights(const pmt_model *m, int site, int layer) {
    const pmt_model_activations *A = m->act;
    if (site == PMT_SITE_ENC_SELF) return layer < m->cfg.enc_layers ? A->enc[layer].self.probs : NULL;
    if (layer >= m->cfg.dec_layers) return NULL;
    return site == PMT_SITE_DEC_SELF ? A->dec[layer].self.probs : A->dec[layer].cross.probs;
}

/* Zeroes n floats; large buffers in parallel chunks (a serial memset of a
 * [rows, C] gradient would leave the other threads idle). */
static void zero(float *p, size_t n) {
    enum { CHUNK = 1 << 16 };   /* floats per task: 256 KiB */
    if (n < 4 * (size_t)CHUNK) {
        memset(p, 0, n * sizeof(float));
        return;
    }
    const long nchunk = (long)((n + CHUNK - 1) / CHUNK);
#pragma omp parallel for schedule(static)
    for (long i = 0; i < nchunk; i++) {
        const size_t lo = (size_t)i * CHUNK, len = n - lo < (size_t)CHUNK ? n - lo : (size_t)CHUNK;
        memset(p + lo, 0, len * sizeof(float));
    }
}

void pmt_model_zero_grad(pmt_model *m) {
    if (m->grads) zero(m->grads, m->n_params);
}

/* Gradient pointer of a parameter pointer (same offset in the grads buffer). */
static inline float *grad_of(const pmt_model *m, const float *param) {
    return param ? m->grads + (param - m->params) : NULL;
}

/* Whether this pass keeps bf16 roundings (a training pass of --precision
 * bf16); evaluation passes of such a model are fp32 and leave them alone. */
static inline int rounding(const pmt_model *m) { return m->params16 && m->act->train; }

/* A bf16 slot when this pass keeps roundings, else NULL. */
static inline uint16_t *slot16(const pmt_model *m, uint16_t *slot) { return rounding(m) ? slot : NULL; }

/* The bf16 copies of a linear layer with weight w and input slot inp16
 * (nn/ops.h linear_bf16; inp_rounded: inp's producer rounded it): all NULL
 * unless this pass keeps roundings. */
static inline linear_bf16 lp_of(const pmt_model *m, uint16_t *inp16, const float *w, int inp_rounded) {
    if (!rounding(m)) return (linear_bf16){NULL, NULL, NULL, 0, 0};
    return (linear_bf16){inp16, m->params16 + (w - m->params), NULL, inp_rounded, 1};
}

/* A forward linear layer: through the pass's hook when it has one. */
static void model_linear(pmt_model *m, float *out, const float *in, const float *w, const float *b, int N, int IN,
                         int OUT, const linear_bf16 *lp) {
    const pmt_linear_hook *hook = m->act->linear_hook;
    if (hook) hook->linear(hook->ctx, out, in, w, b, N, IN, OUT);
    else linear_forward_lp(out, in, w, b, N, IN, OUT, lp);
}

/* params16 = bf16(params), in rows so the conversion runs on every thread. */
static void round_params_bf16(pmt_model *m) {
    enum { ROW = 4096 };
    const double t0 = pmt_profile_begin();
    const size_t full = m->n_params / ROW, tail = m->n_params % ROW;
    if (full) pmt_bf16_convert(m->params16, m->params, (int)full, ROW, ROW, 1.0f);
    if (tail) pmt_bf16_convert(m->params16 + full * ROW, m->params + full * ROW, 1, (int)tail, (int)tail, 1.0f);
    pmt_profile_end(PMT_PHASE_CONVERT, t0);
}

/* LayerNorm forward/backward, timed as the step profile's LayerNorm phase. */
static void norm_forward(float *out, uint16_t *out16, float *mean, float *rstd, const float *inp, const float *w,
                         const float *b, int N, int C) {
    const double t0 = pmt_profile_begin();
    layernorm_forward_lp(out, out16, mean, rstd, inp, w, b, N, C);
    pmt_profile_end(PMT_PHASE_NORM, t0);
}

static void norm_backward(float *dinp, float *dw, float *db, const float *dout, const float *inp, const float *w,
                          const float *mean, const float *rstd, int N, int C, float *scratch) {
    const double t0 = pmt_profile_begin();
    layernorm_backward(dinp, dw, db, dout, inp, w, mean, rstd, N, C, scratch);
    pmt_profile_end(PMT_PHASE_NORM, t0);
}

void pmt_model_params16_written(pmt_model *m) { m->params16_written = m->params16 != NULL; }

/* ------------------------------------------------------------------ */
/* forward                                                             */

/* The dropout probability of this pass: 0 unless training. */
static float dropout_p(const pmt_model *m) {
    return m->act->train && m->cfg.dropout > 0 ? (float)m->cfg.dropout : 0.0f;
}

/* The same for the attention output (attn_dropout), and its masks' stream:
 * the block's own stream in a space of its own. */
static float attn_dropout_p(const pmt_model *m) {
    return m->act->train && m->cfg.attn_dropout > 0 ? (float)m->cfg.attn_dropout : 0.0f;
}
static uint64_t attn_dropout_stream(uint64_t block_stream) { return block_stream | (1ull << 40); }

/* Everything a block needs to know about its inputs. */
typedef struct block_io {
    int B, Tq, Tk;             /* batch, query length, key length */
    const float *memory;       /* cross-attention keys/values source [B*Tk, C] (NULL: self) */
    const int32_t *klen;       /* visible keys per sentence */
    int causal;
    int kind;                  /* attention kind (attention blocks) */
    uint64_t dropout_stream;
} block_io;

static const float *site_log_sigma(const pmt_model *m, const pmt_attn_params *p) {
    return p->log_sigma ? p->log_sigma : m->act->log_sigma_fixed;
}

static poolattn_params site_pool_params(const pmt_model *m, const pmt_attn_params *p) {
    return (poolattn_params){m->cfg.proj_kernel, m->cfg.proj_metric, site_log_sigma(m, p), p->log_metric,
                             p->log_radius};
}

static void attention_sublayer_forward(pmt_model *m, const pmt_attn_params *p, block_act *a,
                                       const block_io *io) {
    const int C = m->C, NH = m->NH;
    const int Nq = io->B * io->Tq, Nk = io->B * io->Tk;
    const float *mem = io->memory ? io->memory : a->ln;
    if (io->kind == PMT_ATTN_STANDARD) {
        const linear_bf16 q_lp = lp_of(m, a->ln16, p->wqkv, 1);
        if (io->memory) {   /* Q on the decoder stream, K|V on the memory */
            const linear_bf16 kv_lp = lp_of(m, m->act->enc_out16, p->wqkv + (size_t)C * C, 1);
            model_linear(m, a->q, a->ln, p->wqkv, p->bqkv, Nq, C, C, &q_lp);
            model_linear(m, a->k, mem, p->wqkv + (size_t)C * C, p->bqkv + C, Nk, C, 2 * C, &kv_lp);
        } else {
            model_linear(m, a->q, a->ln, p->wqkv, p->bqkv, Nq, C, 3 * C, &q_lp);
        }
        const double t0 = pmt_profile_begin();
        (rounding(m) ? attention_forward_bf16 : attention_forward)(a->att, a->probs, a->q, a->k, a->v, a->ldq,
                                                                   a->ldkv, io->klen, io->causal, io->B, io->Tq,
                                                                   io->Tk, C, NH, (float)(1.0 / sqrt((double)m->HS)));
        pmt_profile_end(PMT_PHASE_ATTENTION, t0);
    } else if (!pmt_model_uses_poolattn(&m->cfg)) {
        const double t0 = pmt_profile_begin();
        (rounding(m) ? projattn_forward_bf16 : projattn_forward)(a->att, a->probs, a->ln, mem, site_log_sigma(m, p),
                                                                 io->klen, io->causal, io->B, io->Tq, io->Tk, C, NH);
        pmt_profile_end(PMT_PHASE_ATTENTION, t0);
    } else {
        const double t0 = pmt_profile_begin();
        const poolattn_params pp = site_pool_params(m, p);
        poolattn_forward(a->att, a->probs, a->ln, mem, &pp, io->klen, io->causal, io->B, io->Tq, io->Tk, C, NH,
                         m->act->pool_scratch, m->act->pool_scratch_floats);
        pmt_profile_end(PMT_PHASE_ATTENTION, t0);
    }
    if (attn_dropout_p(m) > 0)   /* the pooled values, before W_O (whose bf16 input is rounded after) */
        dropout_inplace_forward(a->att, (size_t)Nq * C, attn_dropout_p(m), m->act->dropout_seed,
                                attn_dropout_stream(io->dropout_stream));
    const linear_bf16 o_lp = lp_of(m, a->att16, p->wo, 0);
    model_linear(m, a->out, a->att, p->wo, p->bo, Nq, C, C, &o_lp);
}

/* In a bf16 training pass the hidden layer exists only in bf16 (h16): the
 * up product writes it with bias and ReLU applied in its epilogue, and the
 * down product and the ReLU's backward read it (a->h is not written). */
static void ffn_sublayer_forward(pmt_model *m, const pmt_ffn_params *p, block_act *a, int N) {
    const linear_bf16 up_lp = lp_of(m, a->ln16, p->w1, 1), down_lp = lp_of(m, a->h16, p->w2, 1);
    if (rounding(m) && !m->act->linear_hook) {
        linear_relu_forward_bf16(a->h16, a->ln16, up_lp.w, up_lp.w_fixed, p->b1, N, m->C, m->F);
    } else if (m->act->linear_hook) {
        model_linear(m, a->h, a->ln, p->w1, p->b1, N, m->C, m->F, NULL);
        relu_forward(a->h, a->h, (size_t)N * m->F);
    } else {
        linear_relu_forward(a->h, a->ln, p->w1, p->b1, N, m->C, m->F);   /* fp32 passes */
    }
    model_linear(m, a->out, a->h, p->w2, p->b2, N, m->F, m->C, &down_lp);
}

/* x_out = x_in + dropout(sublayer(LN(x_in))). attn is NULL for an FFN block. */
static void block_forward(pmt_model *m, const pmt_attn_params *attn, const pmt_ffn_params *ffn,
                          block_act *a, const float *x_in, const block_io *io) {
    const int N = io->B * io->Tq, C = m->C;
    const float *ln_w = attn ? attn->ln_w : ffn->ln_w, *ln_b = attn ? attn->ln_b : ffn->ln_b;
    norm_forward(a->ln, slot16(m, a->ln16), a->mean, a->rstd, x_in, ln_w, ln_b, N, C);
    if (attn) attention_sublayer_forward(m, attn, a, io);
    else ffn_sublayer_forward(m, ffn, a, N);
    dropout_residual_forward(a->out, x_in, a->out, (size_t)N * C, dropout_p(m), m->act->dropout_seed,
                             io->dropout_stream);
}

/* Embedding with sqrt(C) scale, sinusoidal positions and dropout. */
static void embed_forward(pmt_model *m, float *x0, const int32_t *ids, int B, int T, uint64_t stream) {
    embedding_forward(x0, ids, m->wte, m->pos, B, T, m->C, (float)sqrt((double)m->C));
    dropout_inplace_forward(x0, (size_t)B * T * m->C, dropout_p(m), m->act->dropout_seed, stream);
}

/* Dropout streams: a distinct id per dropout site so masks are independent. */
enum { STREAM_ENC_EMB = 1, STREAM_DEC_EMB = 2, STREAM_LAYER_BASE = 16 };
static uint64_t block_stream(int decoder, int layer, int block) {
    return STREAM_LAYER_BASE + (uint64_t)((decoder * 1024 + layer) * 4 + block);
}

static void encoder_forward(pmt_model *m, const int32_t *src, const int32_t *src_len, int B, int S) {
    pmt_model_activations *A = m->act;
    embed_forward(m, A->enc_x0, src, B, S, STREAM_ENC_EMB);
    const float *x = A->enc_x0;
    for (int l = 0; l < m->cfg.enc_layers; l++) {
        block_io io = {B, S, S, NULL, src_len, 0, m->cfg.site_kind[PMT_SITE_ENC_SELF], block_stream(0, l, 0)};
        block_forward(m, &m->enc[l].self, NULL, &A->enc[l].self, x, &io);
        io.dropout_stream = block_stream(0, l, 1);
        block_forward(m, NULL, &m->enc[l].ffn, &A->enc[l].ffn, A->enc[l].self.out, &io);
        x = A->enc[l].ffn.out;
    }
    norm_forward(A->enc_out, slot16(m, A->enc_out16), A->enc_mean, A->enc_rstd, x, m->enc_ln_w,
                         m->enc_ln_b, B * S, m->C);
}

static void decoder_forward(pmt_model *m, const pmt_batch *b) {
    pmt_model_activations *A = m->act;
    embed_forward(m, A->dec_x0, b->tgt_in, b->B, b->T, STREAM_DEC_EMB);
    const float *x = A->dec_x0;
    for (int l = 0; l < m->cfg.dec_layers; l++) {
        block_io self = {b->B, b->T, b->T, NULL, b->tgt_len, 1, m->cfg.site_kind[PMT_SITE_DEC_SELF], block_stream(1, l, 0)};
        block_forward(m, &m->dec[l].self, NULL, &A->dec[l].self, x, &self);
        block_io cross = {b->B, b->T, b->S, A->enc_out, b->src_len, 0, m->cfg.site_kind[PMT_SITE_DEC_CROSS], block_stream(1, l, 1)};
        block_forward(m, &m->dec[l].cross, NULL, &A->dec[l].cross, A->dec[l].self.out, &cross);
        block_io ffn = {b->B, b->T, b->T, NULL, NULL, 0, 0, block_stream(1, l, 2)};
        block_forward(m, NULL, &m->dec[l].ffn, &A->dec[l].ffn, A->dec[l].cross.out, &ffn);
        x = A->dec[l].ffn.out;
    }
    norm_forward(A->dec_out, NULL, A->dec_mean, A->dec_rstd, x, m->dec_ln_w, m->dec_ln_b, b->B * b->T, m->C);
}

/* 0, or -1 with the error recorded for pmt_gemm_take_error (nn/gemm.h),
 * where every caller of a pass collects a failed product's. */
static int check_batch_fits(const pmt_model *m, int B, int S, int T) {
    if ((long)B * S > m->max_rows || (long)B * T > m->max_rows || S > m->max_len || T > m->max_len) {
        pmt_gemm_record_error("internal error: batch B=%d S=%d T=%d exceeds the model arena (rows %d, len %d)", B, S,
                              T, m->max_rows, m->max_len);
        return -1;
    }
    return 0;
}

void pmt_model_encode(pmt_model *m, const int32_t *src, const int32_t *src_len, int B, int S,
                      const pmt_linear_hook *hook, float *enc_out) {
    if (check_batch_fits(m, B, S, 1) != 0) return;
    m->act->train = 0;
    m->act->linear_hook = hook;
    encoder_forward(m, src, src_len, B, S);
    m->act->linear_hook = NULL;
    memcpy(enc_out, m->act->enc_out, (size_t)B * S * m->C * sizeof(float));
}

/* loss_denominator > 0 (a training step, bf16): the cross-entropy also
 * writes bf16(dlogits / loss_denominator) for backward. */
static double forward(pmt_model *m, const pmt_batch *b, int train, uint64_t dropout_seed, double loss_denominator,
                      pmt_stats *stats) {
    pmt_model_activations *A = m->act;
    if (!m->grads && train) {
        pmt_gemm_record_error("internal error: training forward pass on an inference-only model");
        return NAN;
    }
    if (check_batch_fits(m, b->B, b->S, b->T) != 0) return NAN;
    A->B = b->B;
    A->S = b->S;
    A->T = b->T;
    A->train = train;
    A->dropout_seed = dropout_seed;
    A->logits16_scale = 0.0f;
    A->linear_hook = NULL;
    if (train && m->params16) {
        if (!m->params16_written) round_params_bf16(m);
        pmt_gemm_bf16_weights_changed();   /* the products' blocked copies of params16 are stale */
    }
    m->params16_written = 0;   /* the next pass rounds again unless told otherwise */
    encoder_forward(m, b->src, b->src_len, b->B, b->S);
    decoder_forward(m, b);
    const int N = b->B * b->T, C = m->C;
    /* Gather the counted rows (row order kept, so sums run as before). */
    double t_loss = pmt_profile_begin();
    int Nc = 0;
    for (int i = 0; i < N; i++)
        if (b->tgt_out[i] != PMT_PAD_ID) {
            A->logit_row[Nc] = i;
            A->logit_tgt[Nc] = b->tgt_out[i];
            Nc++;
        }
    A->logit_rows = Nc;
    /* A bf16 training step computes the logits in bf16 only: the product
     * writes them rounded (pmt_gemm_bf16_out) and the cross-entropy turns
     * them into bf16(dlogits / tokens) in place, so no fp32 [Nc, V] matrix
     * is written or read; A->logits lends one row per thread as the
     * cross-entropy's fp32 row. */
    const int logits_bf16 = rounding(m) && omp_get_max_threads() <= m->max_rows;
#pragma omp parallel for schedule(static) if ((long)Nc * C > OPS_PAR_MIN)
    for (int i = 0; i < Nc; i++) {
        memcpy(A->logit_in + (size_t)i * C, A->dec_out + (size_t)A->logit_row[i] * C, sizeof(float) * C);
        if (logits_bf16) pmt_bf16_convert_row(A->logit_in16 + (size_t)i * C, A->logit_in + (size_t)i * C, C, 1.0f);
    }
    pmt_profile_end(PMT_PHASE_LOSS, t_loss);
    if (logits_bf16) {
        pmt_gemm_bf16_out(PMT_LP_B_FIXED, 0, 1, Nc, m->V, C, A->logit_in16, m->params16 + (m->wte - m->params),
                          NULL, 0, A->logits16, m->V);
    } else {
        const linear_bf16 logits_lp = lp_of(m, A->logit_in16, m->wte, 0);
        linear_forward_lp(A->logits, A->logit_in, m->wte, NULL, Nc, C, m->V, &logits_lp);
    }
    t_loss = pmt_profile_begin();
    int correct = 0, counted;
    double loss_sum = 0, nll_sum = 0;
    /* Training: the logits become the (unscaled) gradient in the same pass
     * that computes the loss; backward only applies the 1/tokens scale.
     * Evaluation keeps the probabilities (pmt_model_output_probs). */
    A->logits_hold_grad = train;
    if (logits_bf16) {
        /* Without the denominator (a forward pass alone) the unscaled
         * gradient stays in fp32 for backward to scale: the same bits. */
        A->logits16_scale = loss_denominator > 0 ? (float)(1.0 / loss_denominator) : 0.0f;
        counted = crossentropy_fused_bf16_logits(A->loss_rows, A->nll_rows, A->logits16, A->logits16_scale,
                                                 loss_denominator > 0 ? NULL : A->logits, A->logit_tgt, Nc, m->V,
                                                 (float)m->cfg.label_smoothing, PMT_PAD_ID, &correct, A->logits);
        for (int i = 0; i < Nc; i++) {
            loss_sum += A->loss_rows[i];
            nll_sum += A->nll_rows[i];
        }
    } else if (train && A->logits16 && loss_denominator > 0) {
        A->logits16_scale = (float)(1.0 / loss_denominator);
        counted = crossentropy_fused_bf16(A->loss_rows, A->nll_rows, A->logits, A->logits16, A->logits16_scale,
                                          A->logits, A->logit_tgt, Nc, m->V, (float)m->cfg.label_smoothing,
                                          PMT_PAD_ID, &correct);
        for (int i = 0; i < Nc; i++) {
            loss_sum += A->loss_rows[i];
            nll_sum += A->nll_rows[i];
        }
    } else if (train) {
        counted = crossentropy_fused(A->loss_rows, A->nll_rows, A->logits, A->logits, A->logit_tgt, Nc, m->V,
                                     (float)m->cfg.label_smoothing, PMT_PAD_ID, &correct);
        for (int i = 0; i < Nc; i++) {
            loss_sum += A->loss_rows[i];
            nll_sum += A->nll_rows[i];
        }
    } else {
        counted = crossentropy_forward(A->loss_rows, A->logits, A->logits, A->logit_tgt, Nc, m->V,
                                       (float)m->cfg.label_smoothing, PMT_PAD_ID, &correct);
        for (int i = 0; i < Nc; i++) {
            loss_sum += A->loss_rows[i];
            double p = A->logits[(size_t)i * m->V + A->logit_tgt[i]];
            nll_sum += -log(p > 1e-30 ? p : 1e-30);
        }
    }
    pmt_profile_end(PMT_PHASE_LOSS, t_loss);
    if (stats) {
        stats->loss_sum = loss_sum;
        stats->nll_sum = nll_sum;
        stats->tokens = counted;
        stats->correct = correct;
    }
    return counted > 0 ? loss_sum / counted : 0.0;
}

/* ------------------------------------------------------------------ */
/* backward                                                            */


/* Back-propagates one attention sublayer from d_sub = d(att-output-after-W_O)
 * to d(LN output) in A->d_ln (overwritten) and, for cross-attention, into
 * d_memory (accumulated). Scratch gradients are SET by their first writer
 * (the *_set kernels of nn/ops.h) instead of being zeroed first. */
static void attention_sublayer_backward(pmt_model *m, const pmt_attn_params *p, const block_act *a,
                                        const block_io *io, const float *d_sub, const uint16_t *d_sub16,
                                        float *d_memory) {
    pmt_model_activations *A = m->act;
    const int C = m->C, NH = m->NH;
    const int Nq = io->B * io->Tq, Nk = io->B * io->Tk;
    const float *mem = io->memory ? io->memory : a->ln;
    linear_bf16 o_lp = lp_of(m, a->att16, p->wo, 0);
    o_lp.dout = d_sub16;
    linear_backward_lp(A->d_att, grad_of(m, p->wo), grad_of(m, p->bo), d_sub, a->att, p->wo, Nq, C, C, 0.0f, 1.0f,
                       &o_lp);
    if (attn_dropout_p(m) > 0)
        dropout_regen_backward_set(A->d_att, A->d_att, (size_t)Nq * C, attn_dropout_p(m), A->dropout_seed,
                                   attn_dropout_stream(io->dropout_stream));
    if (io->kind == PMT_ATTN_STANDARD) {
        /* d(q|k|v) in the layout of a->q/k/v: self [Nq, 3C]; cross [Nq, C]
         * then [Nk, 2C]. */
        float *d_q = A->d_qkv, *d_kv = io->memory ? A->d_qkv + (size_t)Nq * C : A->d_qkv + C;
        const double t0 = pmt_profile_begin();   /* d(q|k|v) is set by the kernel: no zeroing pass */
        (rounding(m) ? attention_backward_set_bf16 : attention_backward_set)(
            d_q, d_kv, d_kv + C, A->d_att, a->probs, a->q, a->k, a->v, a->ldq, a->ldkv, io->klen, io->causal, io->B,
            io->Tq, io->Tk, C, NH, (float)(1.0 / sqrt((double)m->HS)));
        pmt_profile_end(PMT_PHASE_ATTENTION, t0);
        float *dw = grad_of(m, p->wqkv), *db = grad_of(m, p->bqkv);
        const linear_bf16 q_lp = lp_of(m, a->ln16, p->wqkv, 1);
        if (io->memory) {
            const linear_bf16 kv_lp = lp_of(m, A->enc_out16, p->wqkv + (size_t)C * C, 1);
            linear_backward_lp(A->d_ln, dw, db, d_q, a->ln, p->wqkv, Nq, C, C, 0.0f, 1.0f, &q_lp);
            linear_backward_lp(d_memory, dw + (size_t)C * C, db + C, d_kv, mem, p->wqkv + (size_t)C * C, Nk, C,
                               2 * C, 1.0f, 1.0f, &kv_lp);
        } else {
            linear_backward_lp(A->d_ln, dw, db, d_q, a->ln, p->wqkv, Nq, C, 3 * C, 0.0f, 1.0f, &q_lp);
        }
    } else {
        zero(A->d_ln, (size_t)Nq * C);
        float *d_mem = io->memory ? d_memory : A->d_ln;   /* q = k (= v) in self-attention */
        const double t0 = pmt_profile_begin();
        if (!pmt_model_uses_poolattn(&m->cfg)) {
            (rounding(m) ? projattn_backward_bf16 : projattn_backward)(
                A->d_ln, d_mem, grad_of(m, p->log_sigma), A->d_att, a->probs, a->ln, mem, site_log_sigma(m, p),
                io->klen, io->causal, io->B, io->Tq, io->Tk, C, NH);
        } else {
            const poolattn_params pp = site_pool_params(m, p);
            const poolattn_grads pg = {grad_of(m, p->log_sigma), grad_of(m, p->log_metric), grad_of(m, p->log_radius)};
            poolattn_backward(A->d_ln, d_mem, &pg, A->d_att, a->probs, a->ln, mem, &pp, io->klen, io->causal,
                              io->B, io->Tq, io->Tk, C, NH, A->pool_scratch, A->pool_scratch_floats);
        }
        pmt_profile_end(PMT_PHASE_ATTENTION, t0);
    }
}

/* d_h = d(ReLU output), then in place d(pre-activation); d_ln overwritten. */
static void ffn_sublayer_backward(pmt_model *m, const pmt_ffn_params *p, const block_act *a, const float *d_sub,
                                  const uint16_t *d_sub16, int N) {
    pmt_model_activations *A = m->act;
    linear_bf16 up_lp = lp_of(m, a->ln16, p->w1, 1), down_lp = lp_of(m, a->h16, p->w2, 1);
    down_lp.dout = d_sub16;
    linear_backward_lp(A->d_h, grad_of(m, p->w2), grad_of(m, p->b2), d_sub, a->h, p->w2, N, m->F, m->C, 0.0f, 1.0f,
                       &down_lp);
    float *db1 = grad_of(m, p->b1);
    if (rounding(m)) {   /* the bias gradient summed in the ReLU's pass */
        relu_backward_bias_lp16(A->d_h, A->d_h16, db1, a->h16, N, m->F, A->bias_scratch);
        up_lp.dout = A->d_h16;
        db1 = NULL;
    } else {
        relu_backward_inplace(A->d_h, a->h, (size_t)N * m->F);
    }
    linear_backward_lp(A->d_ln, grad_of(m, p->w1), db1, A->d_h, a->ln, p->w1, N, m->C, m->F, 0.0f, 1.0f, &up_lp);
}

/* d_stream holds d(x_out) on entry and d(x_in) on exit: the residual passes
 * it through unchanged and the LN branch accumulates into it. */
static void block_backward(pmt_model *m, const pmt_attn_params *attn, const pmt_ffn_params *ffn,
                           const block_act *a, const float *x_in, const block_io *io,
                           float *d_stream, float *d_memory) {
    pmt_model_activations *A = m->act;
    const int N = io->B * io->Tq, C = m->C;
    size_t n = (size_t)N * C;
    /* d(sublayer output): through the dropout mask, or d_stream itself (it
     * is only read before layernorm_backward updates it). */
    const float *d_sub = d_stream;
    const uint16_t *d_sub16 = NULL;   /* its rounding, when a pass writes d_sub */
    if (dropout_p(m) > 0 && rounding(m)) {
        dropout_regen_backward_set_lp(A->d_sub, A->d_sub16, d_stream, n, dropout_p(m), A->dropout_seed,
                                      io->dropout_stream);
        d_sub = A->d_sub;
        d_sub16 = A->d_sub16;
    } else if (dropout_p(m) > 0) {
        dropout_regen_backward_set(A->d_sub, d_stream, n, dropout_p(m), A->dropout_seed, io->dropout_stream);
        d_sub = A->d_sub;
    }
    if (attn) attention_sublayer_backward(m, attn, a, io, d_sub, d_sub16, d_memory);
    else ffn_sublayer_backward(m, ffn, a, d_sub, d_sub16, N);
    const float *ln_w = attn ? attn->ln_w : ffn->ln_w;
    norm_backward(d_stream, grad_of(m, ln_w), grad_of(m, attn ? attn->ln_b : ffn->ln_b), A->d_ln,
                       x_in, ln_w, a->mean, a->rstd, N, C, A->ln_scratch);
}

static void embed_backward(pmt_model *m, const float *d_stream, const int32_t *ids, int B, int T,
                           uint64_t stream) {
    size_t n = (size_t)B * T * m->C;
    const float *d_emb = d_stream;
    if (dropout_p(m) > 0) {
        dropout_regen_backward_set(m->act->d_sub, d_stream, n, dropout_p(m), m->act->dropout_seed, stream);
        d_emb = m->act->d_sub;
    }
    embedding_backward(grad_of(m, m->wte), d_emb, ids, B, T, m->C, (float)sqrt((double)m->C));
}

static void backward(pmt_model *m, const pmt_batch *b, double loss_denominator) {
    pmt_model_activations *A = m->act;
    if (!m->grads) {
        pmt_gemm_record_error("internal error: backward pass on an inference-only model");
        return;
    }
    const int C = m->C, Nt = b->B * b->T, Ns = b->B * b->S;
    const int Nc = A->logit_rows;
    const float scale = (float)(1.0 / loss_denominator);
    if (!A->logits_hold_grad)
        crossentropy_backward(A->logits, A->logits, A->logit_tgt, Nc, m->V, (float)m->cfg.label_smoothing,
                              PMT_PAD_ID, 1.0f);
    /* d(counted rows) = scale · dlogits · wte into d_sub (free until the
     * first block's backward), then scattered: padding rows of d_dec_out
     * get exact zeros. */
    linear_bf16 logits_lp = lp_of(m, A->logit_in16, m->wte, 0);
    if (A->logits16_scale != 0.0f && A->logits16_scale == scale) logits_lp.dout = A->logits16;
    linear_backward_lp(A->d_sub, grad_of(m, m->wte), NULL, A->logits, A->logit_in, m->wte, Nc, C, m->V, 0.0f, scale,
                       &logits_lp);
    zero(A->d_dec_out, (size_t)Nt * C);
#pragma omp parallel for schedule(static) if ((long)Nc * C > OPS_PAR_MIN)
    for (int i = 0; i < Nc; i++)
        memcpy(A->d_dec_out + (size_t)A->logit_row[i] * C, A->d_sub + (size_t)i * C, sizeof(float) * C);

    /* decoder */
    int L = m->cfg.dec_layers;
    const float *dec_last = L > 0 ? A->dec[L - 1].ffn.out : A->dec_x0;
    zero(A->d_dec_stream, (size_t)Nt * C);
    norm_backward(A->d_dec_stream, grad_of(m, m->dec_ln_w), grad_of(m, m->dec_ln_b), A->d_dec_out,
                       dec_last, m->dec_ln_w, A->dec_mean, A->dec_rstd, Nt, C, A->ln_scratch);
    zero(A->d_enc_out, (size_t)Ns * C);
    for (int l = L - 1; l >= 0; l--) {
        const float *x_in = l > 0 ? A->dec[l - 1].ffn.out : A->dec_x0;
        block_io ffn = {b->B, b->T, b->T, NULL, NULL, 0, 0, block_stream(1, l, 2)};
        block_backward(m, NULL, &m->dec[l].ffn, &A->dec[l].ffn, A->dec[l].cross.out, &ffn, A->d_dec_stream, NULL);
        block_io cross = {b->B, b->T, b->S, A->enc_out, b->src_len, 0, m->cfg.site_kind[PMT_SITE_DEC_CROSS],
                          block_stream(1, l, 1)};
        block_backward(m, &m->dec[l].cross, NULL, &A->dec[l].cross, A->dec[l].self.out, &cross, A->d_dec_stream,
                       A->d_enc_out);
        block_io self = {b->B, b->T, b->T, NULL, b->tgt_len, 1, m->cfg.site_kind[PMT_SITE_DEC_SELF],
                         block_stream(1, l, 0)};
        block_backward(m, &m->dec[l].self, NULL, &A->dec[l].self, x_in, &self, A->d_dec_stream, NULL);
    }
    embed_backward(m, A->d_dec_stream, b->tgt_in, b->B, b->T, STREAM_DEC_EMB);

    /* encoder */
    L = m->cfg.enc_layers;
    const float *enc_last = A->enc[L - 1].ffn.out;
    zero(A->d_enc_stream, (size_t)Ns * C);
    norm_backward(A->d_enc_stream, grad_of(m, m->enc_ln_w), grad_of(m, m->enc_ln_b), A->d_enc_out,
                       enc_last, m->enc_ln_w, A->enc_mean, A->enc_rstd, Ns, C, A->ln_scratch);
    for (int l = L - 1; l >= 0; l--) {
        const float *x_in = l > 0 ? A->enc[l - 1].ffn.out : A->enc_x0;
        block_io io = {b->B, b->S, b->S, NULL, b->src_len, 0, m->cfg.site_kind[PMT_SITE_ENC_SELF],
                       block_stream(0, l, 1)};
        block_backward(m, NULL, &m->enc[l].ffn, &A->enc[l].ffn, A->enc[l].self.out, &io, A->d_enc_stream, NULL);
        io.dropout_stream = block_stream(0, l, 0);
        block_backward(m, &m->enc[l].self, NULL, &A->enc[l].self, x_in, &io, A->d_enc_stream, NULL);
    }
    embed_backward(m, A->d_enc_stream, b->src, b->B, b->S, STREAM_ENC_EMB);
}

/* A training pass runs its linear layers' products in the configured
 * precision (bf16: reserved at init); evaluation passes stay fp32, so
 * validation scores the weights as translation will use them. */
double pmt_model_forward(pmt_model *m, const pmt_batch *b, int train, uint64_t dropout_seed, pmt_stats *stats) {
    const int before = pmt_gemm_set_precision(train ? m->cfg.precision : PMT_PRECISION_FP32);
    const double loss = forward(m, b, train, dropout_seed, 0.0, stats);
    pmt_gemm_set_precision(before);
    return loss;
}

void pmt_model_backward(pmt_model *m, const pmt_batch *b, double loss_denominator) {
    const int before = pmt_gemm_set_precision(m->cfg.precision);
    backward(m, b, loss_denominator);
    pmt_gemm_set_precision(before);
}

double pmt_model_train_step(pmt_model *m, const pmt_batch *b, uint64_t dropout_seed, double loss_denominator,
                            pmt_stats *stats) {
    const int before = pmt_gemm_set_precision(m->cfg.precision);
    const double loss = forward(m, b, 1, dropout_seed, loss_denominator, stats);
    backward(m, b, loss_denominator);
    pmt_gemm_set_precision(before);
    return loss;
}

/*
 * test_ops_grad.c — central finite differences against every backward kernel
 * of ops.h.
 *
 * Method: a scalar loss L = Σ_i out_i · r_i with fixed random r, summed in
 * double. Backward runs with dout = r into gradient buffers PRE-FILLED with
 * random values, and the analytic gradient is (after − before): this checks
 * the += contract of ops.h at the same time as the values. Each fp32 input
 * x is then perturbed to the nearest floats of x ± h, h = 1e-2·max(1, |x|),
 * and (L⁺ − L⁻)/(x⁺ − x⁻) (the actually representable step) is compared.
 *
 * Why h = 1e-2: the fp32 forward rounds L by ~1e-7·|L| ≈ 1e-6 here, so the
 * difference quotient carries ~1e-6/2h = 5e-5 of rounding noise; the
 * truncation error h²/6·|f'''| is ~2e-5 for these O(1) inputs. Both sit well
 * below the tolerance |ana − num| ≤ 1e-3 + 1e-2·max(|ana|, |num|), while a
 * wrong term of a gradient (a factor 2, a missing path) is O(0.1) or more.
 * Sizes are tiny (B=2, T=3, S=3/5, C=8, NH=2, plus a few HS=20 attention
 * cases) so every element is checked.
 */
#include "nn/ops.h"
#include "fd_testutil.h"

/* ---------------------------------------------------------------- embedding */

typedef struct {
    const int32_t *ids;
    float *wte, *pos, *out;
    const float *r;
    int B, T, C;
    float scale;
} emb_ctx;

static double emb_loss(void *c_) {
    emb_ctx *c = c_;
    embedding_forward(c->out, c->ids, c->wte, c->pos, c->B, c->T, c->C, c->scale);
    return tu_dot_r(c->out, c->r, (size_t)c->B * c->T * c->C);
}

static void test_embedding(void) {
    enum { B = 2, T = 3, C = 8, V = 5, TMAX = 4 };
    const int32_t ids[B * T] = {1, 3, 1, 3, 3, 0}; /* repeats within and across sentences */
    float *wte = tu_alloc(V * C), *pos = tu_alloc(TMAX * C), *out = tu_alloc(B * T * C);
    float *r = tu_alloc(B * T * C), *dwte = tu_alloc(V * C);
    tu_fill(wte, V * C, -1, 1);
    tu_fill(r, B * T * C, -1, 1);
    positional_table_init(pos, TMAX, C);
    emb_ctx c = {ids, wte, pos, out, r, B, T, C, 2.8284271f};
    emb_loss(&c);
    float *g0 = prefill(dwte, V * C);
    embedding_backward(dwte, r, ids, B, T, C, c.scale);
    fd_param ps[] = {{"wte", wte, dwte, g0, V * C}};
    fd_check("embedding (repeated ids)", emb_loss, &c, ps, 1);
    free(wte); free(pos); free(out); free(r); free(dwte); free(g0);
}

/* ---------------------------------------------------------------- layernorm */

typedef struct {
    float *inp, *w, *b, *out, *mean, *rstd;
    const float *r;
    int N, C;
} ln_ctx;

static double ln_loss(void *c_) {
    ln_ctx *c = c_;
    layernorm_forward(c->out, c->mean, c->rstd, c->inp, c->w, c->b, c->N, c->C);
    return tu_dot_r(c->out, c->r, (size_t)c->N * c->C);
}

static void test_layernorm(void) {
    enum { N = 5, C = 8 };
    float *inp = tu_alloc(N * C), *w = tu_alloc(C), *b = tu_alloc(C), *out = tu_alloc(N * C);
    float *mean = tu_alloc(N), *rstd = tu_alloc(N), *r = tu_alloc(N * C);
    float *dinp = tu_alloc(N * C), *dw = tu_alloc(C), *db = tu_alloc(C);
    tu_fill(inp, N * C, -1, 1);
    for (int i = 0; i < C; i++) inp[i] += 3.0f; /* a row with a large mean */
    tu_fill(w, C, 0.5, 1.5);
    tu_fill(b, C, -0.5, 0.5);
    tu_fill(r, N * C, -1, 1);
    ln_ctx c = {inp, w, b, out, mean, rstd, r, N, C};
    ln_loss(&c);
    float *g0i = prefill(dinp, N * C), *g0w = prefill(dw, C), *g0b = prefill(db, C);
    float *scratch = tu_alloc(layernorm_backward_scratch_floats(C));
    layernorm_backward(dinp, dw, db, r, inp, w, mean, rstd, N, C, scratch);
    free(scratch);
    fd_param ps[] = {{"inp", inp, dinp, g0i, N * C}, {"w", w, dw, g0w, C}, {"b", b, db, g0b, C}};
    fd_check("layernorm", ln_loss, &c, ps, 3);
    free(inp); free(w); free(b); free(out); free(mean); free(rstd); free(r);
    free(dinp); free(dw); free(db); free(g0i); free(g0w); free(g0b);
}

/* ---------------------------------------------------------------- linear */

typedef struct {
    float *inp, *w, *b, *out;
    const float *r;
    int N, IN, OUT;
} lin_ctx;

static double lin_loss(void *c_) {
    lin_ctx *c = c_;
    linear_forward(c->out, c->inp, c->w, c->b, c->N, c->IN, c->OUT);
    return tu_dot_r(c->out, c->r, (size_t)c->N * c->OUT);
}

/* with_bias: b and db present; with_dinp: whether dinp is requested. */
static void check_linear(const char *name, int with_bias, int with_dinp) {
    enum { N = 5, IN = 6, OUT = 4 };
    float *inp = tu_alloc(N * IN), *w = tu_alloc(OUT * IN), *b = tu_alloc(OUT);
    float *out = tu_alloc(N * OUT), *r = tu_alloc(N * OUT);
    float *dinp = tu_alloc(N * IN), *dw = tu_alloc(OUT * IN), *db = tu_alloc(OUT);
    tu_fill(inp, N * IN, -1, 1);
    tu_fill(w, OUT * IN, -1, 1);
    tu_fill(b, OUT, -1, 1);
    tu_fill(r, N * OUT, -1, 1);
    lin_ctx c = {inp, w, with_bias ? b : NULL, out, r, N, IN, OUT};
    lin_loss(&c);
    float *g0i = prefill(dinp, N * IN), *g0w = prefill(dw, OUT * IN), *g0b = prefill(db, OUT);
    linear_backward(with_dinp ? dinp : NULL, dw, with_bias ? db : NULL, r, inp, w, N, IN, OUT);
    fd_param ps[3];
    int np = 0;
    ps[np++] = (fd_param){"w", w, dw, g0w, OUT * IN};
    if (with_dinp) ps[np++] = (fd_param){"inp", inp, dinp, g0i, N * IN};
    if (with_bias) ps[np++] = (fd_param){"b", b, db, g0b, OUT};
    fd_check(name, lin_loss, &c, ps, np);
    if (!with_dinp) CHECK(memcmp(dinp, g0i, sizeof(float) * N * IN) == 0);
    free(inp); free(w); free(b); free(out); free(r); free(dinp); free(dw); free(db);
    free(g0i); free(g0w); free(g0b);
}

/* ---------------------------------------------------------------- elementwise */

typedef struct {
    int kind; /* 0 relu, 1 residual, 2 residual x + x, 3 dropout */
    float *a, *b, *out;
    const float *mask, *r;
    size_t n;
} ew_ctx;

static double ew_loss(void *c_) {
    ew_ctx *c = c_;
    switch (c->kind) {
    case 0: relu_forward(c->out, c->a, c->n); break;
    case 1: residual_forward(c->out, c->a, c->b, c->n); break;
    case 2: residual_forward(c->out, c->a, c->a, c->n); break;
    default: dropout_forward(c->out, c->a, c->mask, c->n); break;
    }
    return tu_dot_r(c->out, c->r, c->n);
}

static void test_elementwise(void) {
    enum { n = 24 };
    float *a = tu_alloc(n), *b = tu_alloc(n), *out = tu_alloc(n), *r = tu_alloc(n), *mask = tu_alloc(n);
    float *da = tu_alloc(n), *db = tu_alloc(n);
    /* |a| >= 0.1 > h keeps every ReLU input away from the kink at 0. */
    for (int i = 0; i < n; i++) a[i] = (float)((i % 2 ? 1 : -1) * tu_uniform(0.1, 1.0));
    tu_fill(b, n, -1, 1);
    tu_fill(r, n, -1, 1);

    ew_ctx c = {0, a, b, out, mask, r, n};
    ew_loss(&c);
    float *g0 = prefill(da, n);
    relu_backward(da, r, out, n);
    fd_check("relu", ew_loss, &c, (fd_param[]){{"inp", a, da, g0, n}}, 1);
    free(g0);

    c.kind = 1;
    float *g0a = prefill(da, n), *g0b = prefill(db, n);
    residual_backward(da, db, r, n);
    fd_check("residual", ew_loss, &c, (fd_param[]){{"a", a, da, g0a, n}, {"b", b, db, g0b, n}}, 2);
    free(g0a); free(g0b);

    c.kind = 2;
    g0a = prefill(da, n);
    residual_backward(da, da, r, n);
    fd_check("residual x + x (da == db)", ew_loss, &c, (fd_param[]){{"x", a, da, g0a, n}}, 1);
    free(g0a);

    c.kind = 3;
    dropout_mask_fill(mask, n, 0.25f, 7, 3);
    g0a = prefill(da, n);
    dropout_backward(da, r, mask, n);
    fd_check("dropout (fixed mask, p = 0.25)", ew_loss, &c, (fd_param[]){{"inp", a, da, g0a, n}}, 1);
    free(g0a);

    free(a); free(b); free(out); free(r); free(mask); free(da); free(db);
}

/* ---------------------------------------------------------------- attention */

typedef struct {
    int proj, B, T, S, C, NH, causal;
    const int32_t *klen;
    float scale;
    float *q, *k, *v, *log_sigma, *out, *probs;
    const float *r;
} attn_ctx;

static double attn_loss(void *c_) {
    attn_ctx *c = c_;
    if (c->proj)
        projattn_forward(c->out, c->probs, c->q, c->k, c->log_sigma, c->klen, c->causal,
                         c->B, c->T, c->S, c->C, c->NH);
    else
        attention_forward(c->out, c->probs, c->q, c->k, c->v, c->C, c->C, c->klen, c->causal,
                          c->B, c->T, c->S, c->C, c->NH, c->scale);
    return tu_dot_r(c->out, c->r, (size_t)c->B * c->T * c->C);
}

/* Forward-value facts every configuration must satisfy: finite output,
 * probability rows summing to 1 over the visible prefix, masked weights
 * exactly 0, and all-zero output rows when no key is visible. */
static void check_attn_values(const char *name, const attn_ctx *c) {
    const int B = c->B, T = c->T, S = c->S, C = c->C, NH = c->NH;
    double max_sum_err = 0.0;
    int masked_nonzero = 0, dead_out_nonzero = 0;
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++)
            for (int t = 0; t < T; t++) {
                const float *p = c->probs + (((size_t)b * NH + h) * T + t) * S;
                int nvis = 0;
                double sum = 0.0;
                for (int j = 0; j < S; j++) {
                    const int vis = j < c->klen[b] && (!c->causal || j <= t);
                    if (vis) { nvis++; sum += p[j]; }
                    else masked_nonzero += p[j] != 0.0f;
                }
                if (nvis > 0) max_sum_err = fmax(max_sum_err, fabs(sum - 1.0));
                else
                    for (int d = 0; d < C / NH; d++)
                        dead_out_nonzero += c->out[((size_t)b * T + t) * C + h * (C / NH) + d] != 0.0f;
            }
    printf("  %-52s softmax row-sum max err = %.3e\n", name, max_sum_err);
    CHECK_MSG(tu_all_finite(c->out, (size_t)B * T * C), "%s: non-finite output", name);
    CHECK_MSG(tu_all_finite(c->probs, (size_t)B * NH * T * S), "%s: non-finite probs", name);
    CHECK_MSG(max_sum_err <= 1e-6, "%s: softmax row sums off by %.3e", name, max_sum_err);
    CHECK_MSG(masked_nonzero == 0, "%s: %d masked weights are not exactly 0", name, masked_nonzero);
    CHECK_MSG(dead_out_nonzero == 0, "%s: %d outputs of fully masked rows are not 0", name, dead_out_nonzero);
}

/* One attention configuration. self: T == S and q = k (= v) share one buffer,
 * as do their gradients. learned: projection attention with dlog_sigma. */
static void check_attention(const char *name, int proj, int self, int learned, int T, int S, int C,
                            const int32_t *klen, int causal) {
    enum { B = 2, NH = 2 };
    const size_t nq = (size_t)B * T * C, nk = (size_t)B * S * C;
    float *q = tu_alloc(nq), *k = tu_alloc(nk), *v = tu_alloc(nk);
    float *dq = tu_alloc(nq), *dk = tu_alloc(nk), *dv = tu_alloc(nk);
    float *out = tu_alloc(nq), *probs = tu_alloc((size_t)B * NH * T * S), *r = tu_alloc(nq);
    float log_sigma[NH] = {0.3f, -0.15f}, dls[NH];
    tu_fill(q, nq, -1, 1);
    tu_fill(k, nk, -1, 1);
    tu_fill(v, nk, -1, 1);
    tu_fill(r, nq, -1, 1);
    float *kk = self ? q : k, *vv = self ? q : v;
    float *dkk = self ? dq : dk, *dvv = self ? dq : dv;
    attn_ctx c = {proj, B, T, S, C, NH, causal, klen, 1.0f / sqrtf((float)(C / NH)), q, kk, vv, log_sigma,
                  out, probs, r};
    attn_loss(&c);
    check_attn_values(name, &c);

    float *g0q = prefill(dq, nq), *g0k = prefill(dk, nk), *g0v = prefill(dv, nk);
    float *g0s = prefill(dls, NH);
    if (proj)
        projattn_backward(dq, dkk, learned ? dls : NULL, r, probs, q, kk, log_sigma, klen, causal,
                          B, T, S, C, NH);
    else
        attention_backward(dq, dkk, dvv, r, probs, q, kk, vv, C, C, klen, causal, B, T, S, C, NH, c.scale);
    CHECK_MSG(tu_all_finite(dq, nq) && tu_all_finite(dk, nk) && tu_all_finite(dv, nk) &&
              tu_all_finite(dls, NH), "%s: non-finite gradient", name);

    fd_param ps[4];
    int np = 0;
    ps[np++] = (fd_param){self ? (proj ? "q=k" : "q=k=v") : "q", q, dq, g0q, nq};
    if (!self) ps[np++] = (fd_param){"k", k, dk, g0k, nk};
    if (!self && !proj) ps[np++] = (fd_param){"v", v, dv, g0v, nk};
    if (proj && learned) ps[np++] = (fd_param){"log_sigma", log_sigma, dls, g0s, NH};
    fd_check(name, attn_loss, &c, ps, np);
    if (proj && !learned) CHECK(memcmp(dls, g0s, sizeof dls) == 0);
    free(q); free(k); free(v); free(dq); free(dk); free(dv); free(out); free(probs); free(r);
    free(g0q); free(g0k); free(g0v); free(g0s);
}

/* The mask cases shared by both attention forms. */
typedef struct {
    const char *tag;
    int32_t klen[2];
    int causal;
} mask_case;

static const mask_case MASKS[] = {
    {"no mask", {99, 99}, 0},              /* klen >= S: all keys visible */
    {"key padding", {99, 2}, 0},
    {"causal", {99, 99}, 1},
    {"causal + padding", {99, 2}, 1},
    {"klen = 0 (fully masked)", {3, 0}, 0},
    {"causal + klen = 0", {3, 0}, 1},
};

static void test_attention_grads(void) {
    char name[96];
    const int nm = (int)(sizeof MASKS / sizeof MASKS[0]);
    for (int proj = 0; proj <= 1; proj++)
        for (int self = 0; self <= 1; self++)
            for (int learned = 0; learned <= proj; learned++)
                for (int m = 0; m < nm; m++) {
                    const int T = 3, S = self ? 3 : 5;
                    int32_t klen[2] = {MASKS[m].klen[0] < S ? MASKS[m].klen[0] : S,
                                       MASKS[m].klen[1] < S ? MASKS[m].klen[1] : S};
                    snprintf(name, sizeof name, "%s %s%s: %s", proj ? "projattn" : "attention",
                             self ? "self" : "cross", proj ? (learned ? " learned-σ" : " fixed-σ") : "",
                             MASKS[m].tag);
                    check_attention(name, proj, self, learned, T, S, 8, klen, MASKS[m].causal);
                }
    /* Wider heads (HS = 20) and more rows (T, S >= 5) also exercise the full
     * 4-row × 16-column register blocks of the attention GEMM, not only its
     * tails. */
    const int32_t kl[2] = {6, 3};
    check_attention("attention cross HS=20: causal + padding", 0, 0, 0, 5, 6, 40, kl, 1);
    check_attention("attention self HS=20: key padding", 0, 1, 0, 6, 6, 40, kl, 0);
    check_attention("projattn cross HS=20 learned-σ: padding", 1, 0, 1, 5, 6, 40, kl, 0);
    check_attention("projattn self HS=20 learned-σ: causal + padding", 1, 1, 1, 6, 6, 40, kl, 1);
    /* Long causal rows: several causal row blocks (ops_attention.c runs
     * the products per block of 8 query rows over the keys they can see,
     * and per block of 8 keys over the queries that see them), block edges
     * inside and outside the padding, and more keys than queries. */
    const int32_t kl_long[2] = {21, 13}, kl_cross[2] = {23, 17};
    check_attention("attention self T=21: causal + padding", 0, 1, 0, 21, 21, 8, kl_long, 1);
    check_attention("attention cross T=19 S=23: causal + padding", 0, 0, 0, 19, 23, 8, kl_cross, 1);
    check_attention("projattn self T=21 learned-σ: causal + padding", 1, 1, 1, 21, 21, 8, kl_long, 1);
    check_attention("projattn cross T=19 S=23 fixed-σ: causal + padding", 1, 0, 0, 19, 23, 8, kl_cross, 1);
}

/* ---------------------------------------------------------------- cross-entropy */

typedef struct {
    float *logits, *probs, *loss;
    const int32_t *targets;
    int N, V;
    float eps, scale;
    int32_t ignore;
} ce_ctx;

static double ce_loss(void *c_) {
    ce_ctx *c = c_;
    int correct;
    crossentropy_forward(c->loss, c->probs, c->logits, c->targets, c->N, c->V, c->eps, c->ignore, &correct);
    double s = 0.0;
    for (int n = 0; n < c->N; n++) s += c->loss[n];
    return c->scale * s;
}

static void test_crossentropy_grad(void) {
    enum { N = 6, V = 7 };
    const int32_t targets[N] = {3, 0, 6, 0, 1, 5}; /* ignore_id 0: rows 1 and 3 */
    float *logits = tu_alloc(N * V), *probs = tu_alloc(N * V), *loss = tu_alloc(N);
    float *dl = tu_alloc(N * V);
    tu_fill(logits, N * V, -2, 2);
    ce_ctx c = {logits, probs, loss, targets, N, V, 0.1f, 0.25f, 0};
    ce_loss(&c);
    for (int i = 0; i < N * V; i++) dl[i] = 123.0f; /* backward must SET, not add */
    crossentropy_backward(dl, probs, targets, N, V, c.eps, c.ignore, c.scale);
    fd_check("crossentropy (eps 0.1, ignore rows)", ce_loss, &c,
             (fd_param[]){{"logits", logits, dl, NULL, N * V}}, 1);
    int ignored_nonzero = 0;
    for (int j = 0; j < V; j++) ignored_nonzero += (dl[1 * V + j] != 0.0f) + (dl[3 * V + j] != 0.0f);
    CHECK_MSG(ignored_nonzero == 0, "%d gradient entries of ignored rows are non-zero", ignored_nonzero);
    CHECK(loss[1] == 0.0f && loss[3] == 0.0f);
    free(logits); free(probs); free(loss); free(dl);
}

int main(void) {
    tu_seed(20240611);
    printf("finite differences: h = %.0e·max(1,|x|), pass iff |ana-num| <= %.0e + %.0e·max(|ana|,|num|)\n",
           FD_H, FD_ATOL, FD_RTOL);
    test_embedding();
    test_layernorm();
    check_linear("linear (bias)", 1, 1);
    check_linear("linear (no bias)", 0, 1);
    check_linear("linear (bias, dinp = NULL)", 1, 0);
    test_elementwise();
    test_attention_grads();
    test_crossentropy_grad();
    return test_finish();
}

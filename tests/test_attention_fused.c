/*
 * test_attention_fused.c — the standard attention kernels on the fused
 * Q|K|V layout.
 *
 * Self-attention hands the kernels q, k, v as the column blocks 0, C, 2C of
 * one [N, 3C] buffer (row stride 3C), cross-attention its [N, C] queries
 * and the K|V blocks of one [Nk, 2C] buffer (stride 2C); gradients come
 * back in the same layout. Both must give exactly the bits of separate
 * [N, C] operands — forward output and weights, and every gradient —
 * including the accumulation into gradients that already hold values.
 * Causal self-attention skips the masked upper triangle: its rows must be
 * the bits of the unmasked kernel over each row's visible keys.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nn/ops.h"
#include "ops_testutil.h"
#include "testutil.h"

/* Copies the [rows, C] block at column col of x [rows, ld] to out [rows, C] or back. */
static void get_block(float *out, const float *x, int rows, int ld, int col, int C) {
    for (int r = 0; r < rows; r++) memcpy(out + (size_t)r * C, x + (size_t)r * ld + col, sizeof(float) * C);
}

/* One configuration: self-attention (fused [N, 3C]) when S == 0, else
 * cross-attention over S keys ([N, C] queries, [Nk, 2C] keys|values). */
static void check_fused(const char *name, int B, int T, int S, int causal, const int32_t *klen) {
    enum { C = 24, NH = 3 };
    const int self = S == 0, Tk = self ? T : S;
    const int Nq = B * T, Nk = B * Tk, ldq = self ? 3 * C : C, ldkv = self ? 3 * C : 2 * C;
    const float scale = 0.3f;
    /* the fused buffers (q in qbuf; k, v in kvbuf, which is qbuf for self) */
    float *qbuf = tu_alloc((size_t)Nq * ldq), *kvbuf = self ? qbuf : tu_alloc((size_t)Nk * ldkv);
    tu_fill(qbuf, (size_t)Nq * ldq, -2, 2);
    if (!self) tu_fill(kvbuf, (size_t)Nk * ldkv, -2, 2);
    const int kcol = self ? C : 0, vcol = kcol + C;
    float *q = tu_alloc((size_t)Nq * C), *k = tu_alloc((size_t)Nk * C), *v = tu_alloc((size_t)Nk * C);
    get_block(q, qbuf, Nq, ldq, 0, C);
    get_block(k, kvbuf, Nk, ldkv, kcol, C);
    get_block(v, kvbuf, Nk, ldkv, vcol, C);

    float *o1 = tu_alloc((size_t)Nq * C), *o2 = tu_alloc((size_t)Nq * C);
    float *p1 = tu_alloc((size_t)B * NH * T * Tk), *p2 = tu_alloc((size_t)B * NH * T * Tk);
    attention_forward(o1, p1, q, k, v, C, C, klen, causal, B, T, Tk, C, NH, scale);
    attention_forward(o2, p2, qbuf, kvbuf + kcol, kvbuf + vcol, ldq, ldkv, klen, causal, B, T, Tk, C, NH, scale);
    CHECK_MSG(!memcmp(o1, o2, sizeof(float) * Nq * C), "%s: fused forward output differs", name);
    CHECK_MSG(!memcmp(p1, p2, sizeof(float) * B * NH * T * Tk), "%s: fused forward weights differ", name);

    /* Gradients accumulate onto what is there: start both from the same values. */
    float *dout = tu_alloc((size_t)Nq * C);
    tu_fill(dout, (size_t)Nq * C, -1, 1);
    float *dqbuf = tu_alloc((size_t)Nq * ldq), *dkvbuf = self ? dqbuf : tu_alloc((size_t)Nk * ldkv);
    tu_fill(dqbuf, (size_t)Nq * ldq, -0.5, 0.5);
    if (!self) tu_fill(dkvbuf, (size_t)Nk * ldkv, -0.5, 0.5);
    float *dq = tu_alloc((size_t)Nq * C), *dk = tu_alloc((size_t)Nk * C), *dv = tu_alloc((size_t)Nk * C);
    get_block(dq, dqbuf, Nq, ldq, 0, C);
    get_block(dk, dkvbuf, Nk, ldkv, kcol, C);
    get_block(dv, dkvbuf, Nk, ldkv, vcol, C);
    attention_backward(dq, dk, dv, dout, p1, q, k, v, C, C, klen, causal, B, T, Tk, C, NH, scale);
    attention_backward(dqbuf, dkvbuf + kcol, dkvbuf + vcol, dout, p2, qbuf, kvbuf + kcol, kvbuf + vcol, ldq, ldkv,
                       klen, causal, B, T, Tk, C, NH, scale);
    float *back = tu_alloc((size_t)(Nq > Nk ? Nq : Nk) * C);
    get_block(back, dqbuf, Nq, ldq, 0, C);
    CHECK_MSG(!memcmp(back, dq, sizeof(float) * Nq * C), "%s: fused dq differs", name);
    get_block(back, dkvbuf, Nk, ldkv, kcol, C);
    CHECK_MSG(!memcmp(back, dk, sizeof(float) * Nk * C), "%s: fused dk differs", name);
    get_block(back, dkvbuf, Nk, ldkv, vcol, C);
    CHECK_MSG(!memcmp(back, dv, sizeof(float) * Nk * C), "%s: fused dv differs", name);

    /* The setting form over garbage: the bits of the accumulating form
     * over zeros (every row, padding and masked keys included). */
    float *sq = tu_alloc((size_t)Nq * ldq), *skv = self ? sq : tu_alloc((size_t)Nk * ldkv);
    float *zq = tu_alloc((size_t)Nq * ldq), *zkv = self ? zq : tu_alloc((size_t)Nk * ldkv);
    tu_fill(sq, (size_t)Nq * ldq, 1e3, 2e3);
    if (!self) tu_fill(skv, (size_t)Nk * ldkv, -2e3, -1e3);
    memset(zq, 0, sizeof(float) * (size_t)Nq * ldq);
    if (!self) memset(zkv, 0, sizeof(float) * (size_t)Nk * ldkv);
    attention_backward_set(sq, skv + kcol, skv + vcol, dout, p2, qbuf, kvbuf + kcol, kvbuf + vcol, ldq, ldkv, klen,
                           causal, B, T, Tk, C, NH, scale);
    attention_backward(zq, zkv + kcol, zkv + vcol, dout, p2, qbuf, kvbuf + kcol, kvbuf + vcol, ldq, ldkv, klen,
                       causal, B, T, Tk, C, NH, scale);
    CHECK_MSG(!memcmp(sq, zq, sizeof(float) * (size_t)Nq * ldq) &&
                  (self || !memcmp(skv, zkv, sizeof(float) * (size_t)Nk * ldkv)),
              "%s: attention_backward_set differs from attention_backward over zeros", name);
    free(sq); free(zq); if (!self) { free(skv); free(zkv); }

    /* The decoder's forms: few queries over the fused K|V, cached with a strided q. */
    if (!self) {
        attention_forward_few_queries(o1, p1, q, k, v, C, C, klen, 0, B, T, Tk, C, NH, scale);
        attention_forward_few_queries(o2, p2, qbuf, kvbuf, kvbuf + C, ldq, ldkv, klen, 0, B, T, Tk, C, NH, scale);
        CHECK_MSG(!memcmp(o1, o2, sizeof(float) * Nq * C), "%s: fused few-queries output differs", name);
    }
    free(qbuf); if (!self) free(kvbuf);
    free(dqbuf); if (!self) free(dkvbuf);
    free(q); free(k); free(v); free(o1); free(o2); free(p1); free(p2);
    free(dout); free(dq); free(dk); free(dv); free(back);
}

/* attention_forward_cached with the Q block of a [R, 3C] step product. */
static void check_cached_strided(void) {
    enum { R = 3, NK = 5, CAP = 7, C = 24, NH = 3 };
    float *qkv = tu_alloc(R * 3 * C), *q = tu_alloc(R * C);
    float *kc = tu_alloc(R * CAP * C), *vc = tu_alloc(R * CAP * C);
    float *o1 = tu_alloc(R * C), *o2 = tu_alloc(R * C), *p1 = tu_alloc(R * NH * CAP), *p2 = tu_alloc(R * NH * CAP);
    tu_fill(qkv, R * 3 * C, -1, 1);
    tu_fill(kc, R * CAP * C, -1, 1);
    tu_fill(vc, R * CAP * C, -1, 1);
    get_block(q, qkv, R, 3 * C, 0, C);
    int32_t map[NK * R];
    for (int j = 0; j < NK; j++)
        for (int r = 0; r < R; r++) map[j * R + r] = (r + j) % R;
    attention_forward_cached(o1, p1, q, kc, vc, C, map, R, R, NK, CAP, C, NH, 0.4f);
    attention_forward_cached(o2, p2, qkv, kc, vc, 3 * C, map, R, R, NK, CAP, C, NH, 0.4f);
    CHECK(!memcmp(o1, o2, sizeof(float) * R * C) && !memcmp(p1, p2, sizeof(float) * R * NH * CAP));
    free(qkv); free(q); free(kc); free(vc); free(o1); free(o2); free(p1); free(p2);
}

/* Causal rows against the unmasked kernels: query t of sentence b under
 * the causal mask is the one query of a sentence whose keys are its
 * visible prefix, without a mask. The causal kernels skip the masked upper
 * triangle (row blocks over the keys they can see); the skipped terms are
 * exact zeros, so output and weights must be the same bits. Standard and
 * projection attention, rows long enough for several blocks, padding. */
static void check_causal_rows(int proj) {
    enum { B = 2, T = 37, C = 24, NH = 3 };
    const int32_t klen[B] = {37, 20};
    const float log_sigma[NH] = {0.2f, 0.5f, -0.1f}, scale = 0.35f;
    float *x = tu_alloc(B * T * C), *v = tu_alloc(B * T * C);
    float *out = tu_alloc(B * T * C), *probs = tu_alloc(B * NH * T * T);
    float *o1 = tu_alloc(C), *p1 = tu_alloc(NH * T);
    tu_fill(x, B * T * C, -1.5, 1.5);
    tu_fill(v, B * T * C, -1, 1);
    if (proj) projattn_forward(out, probs, x, x, log_sigma, klen, 1, B, T, T, C, NH);
    else attention_forward(out, probs, x, x, v, C, C, klen, 1, B, T, T, C, NH, scale);
    int same_out = 1, same_probs = 1;
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            const int32_t nvis = t + 1 < klen[b] ? t + 1 : klen[b];
            const float *qt = x + (size_t)(b * T + t) * C, *kb = x + (size_t)b * T * C;
            if (proj) projattn_forward(o1, p1, qt, kb, log_sigma, &nvis, 0, 1, 1, T, C, NH);
            else attention_forward(o1, p1, qt, kb, v + (size_t)b * T * C, C, C, &nvis, 0, 1, 1, T, C, NH, scale);
            same_out &= !memcmp(o1, out + (size_t)(b * T + t) * C, sizeof(float) * C);
            for (int h = 0; h < NH; h++)
                same_probs &= !memcmp(p1 + (size_t)h * T, probs + (((size_t)b * NH + h) * T + t) * T, sizeof(float) * T);
        }
    CHECK_MSG(same_out && same_probs, "%s causal rows differ from the unmasked one-query kernel (out %s, weights %s)",
              proj ? "projection" : "standard", same_out ? "same" : "differ", same_probs ? "same" : "differ");
    free(x); free(v); free(out); free(probs); free(o1); free(p1);
}

int main(void) {
    tu_seed(4242);
    const int32_t klen3[3] = {9, 4, 0}, klen2[2] = {37, 20};
    check_fused("self causal", 3, 9, 0, 1, klen3);
    check_fused("self", 3, 9, 0, 0, klen3);
    check_fused("self causal long", 2, 37, 0, 1, klen2);
    check_fused("cross", 3, 5, 9, 0, klen3);
    check_fused("cross long", 2, 11, 37, 0, klen2);
    check_cached_strided();
    check_causal_rows(0);
    check_causal_rows(1);
    return test_finish();
}

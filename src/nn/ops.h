/*
 * ops.h — the Transformer's layers as forward/backward kernel pairs.
 *
 * Dimension legend (used in every shape comment of projmt):
 *   B  batch (sentences)          S  source length (padded)
 *   T  target length (padded)     N  rows of a token matrix (B*S or B*T)
 *   C  d_model                    NH heads, HS head size (C = NH*HS)
 *   F  feed-forward width         V  vocabulary size
 *
 * Conventions (as in llm.c):
 *   - Every <op>_forward has an <op>_backward with the same argument order:
 *     gradients first, then the saved forward values.
 *   - Backward ACCUMULATES into every gradient it writes (+=; sgemm beta = 1),
 *     so shared tensors (tied embeddings, q = k = v) need no special casing.
 *     The caller zeroes gradients once per step.
 *   - Kernels never allocate; all buffers are owned by the caller.
 *   - Token matrices are row-major [N, C]; attention heads are the column
 *     slices h*HS .. h*HS+HS-1 of a [N, C] matrix.
 *   - Linear weights are [OUT, IN] (PyTorch layout): out = inp · wᵀ + b.
 *   - fp32 storage; reductions accumulate in double.
 */
#ifndef PROJMT_OPS_H
#define PROJMT_OPS_H

#include <stddef.h>
#include <stdint.h>

/* ---- embedding: out[b,t,:] = wte[ids[b,t],:] * scale + pos[t,:] ----
 * out [B*T, C], ids [B*T], wte [V, C], pos [Tmax >= T, C] (sinusoidal table). */
void embedding_forward(float *out, const int32_t *ids, const float *wte, const float *pos,
                       int B, int T, int C, float scale);
/* dwte [V, C] += scale * dout rows scattered by ids. */
void embedding_backward(float *dwte, const float *dout, const int32_t *ids,
                        int B, int T, int C, float scale);
/* Fills pos [Tmax, C] with the Vaswani sinusoidal table:
 * pos[t, 2i] = sin(t / 10000^(2i/C)), pos[t, 2i+1] = cos(same). */
void positional_table_init(float *pos, int Tmax, int C);

/* ---- layernorm over the last dimension (eps 1e-5) ----
 * out [N, C], mean [N], rstd [N] (saved for backward), inp [N, C], w [C], b [C]. */
void layernorm_forward(float *out, float *mean, float *rstd, const float *inp,
                       const float *w, const float *b, int N, int C);
/* The same, and out16 [N, C] = bf16(out) rounded per row while it is in
 * cache (the next linear layer's inp16; nn/ops.h linear_bf16). Needs a CPU
 * with native bf16 (as --precision bf16). */
void layernorm_forward_lp(float *out, uint16_t *out16, float *mean, float *rstd, const float *inp, const float *w,
                          const float *b, int N, int C);
/* dinp [N, C] += ..., dw, db [C] += ... in one pass over the rows; scratch:
 * caller memory of layernorm_backward_scratch_floats(C) floats (overwritten)
 * for the per-chunk partial sums of dw/db. Bit-identical for any thread count. */
size_t layernorm_backward_scratch_floats(int C);
void layernorm_backward(float *dinp, float *dw, float *db, const float *dout,
                        const float *inp, const float *w, const float *mean,
                        const float *rstd, int N, int C, float *scratch);

/* ---- linear: out [N, OUT] = inp [N, IN] · w[OUT, IN]ᵀ + b [OUT] (b may be NULL) ---- */
void linear_forward(float *out, const float *inp, const float *w, const float *b,
                    int N, int IN, int OUT);
/* dinp may be NULL (no gradient wanted), db may be NULL (no bias). */
void linear_backward(float *dinp, float *dw, float *db, const float *dout,
                     const float *inp, const float *w, int N, int IN, int OUT);

/* ---- linear + bias + ReLU fused: out [N, OUT] = max(inp · wᵀ + b, 0) ----
 * b [OUT] required. linear_forward then relu_forward up to fp32 rounding
 * (a BLAS may accumulate the product onto the preloaded bias there).
 * Backward: relu_backward_inplace, then linear_backward(_set). */
void linear_relu_forward(float *out, const float *inp, const float *w, const float *b, int N, int IN, int OUT);

/* ---- linear layers with caller-kept bf16 copies (the bf16 training precision) ----
 * In --precision bf16 every product rounds its operands to bf16 (nn/gemm.h).
 * A linear layer's input is an operand of its forward product and of its
 * weight-gradient product, and its weight of the forward and the input-
 * gradient product: converted per product, each is rounded twice per step.
 * With these copies each is rounded once: the model keeps them in its arena.
 *   inp16 [N, IN]: bf16(inp), written by the forward (or, with inp_rounded,
 *                  by inp's producer in its own pass: layernorm_forward_lp,
 *                  linear_relu_forward_lp) and read by backward;
 *   w16 [OUT, IN]: bf16(w), rounded by the caller once per step;
 *   dout16 [N, OUT]: bf16(α · dout), from a producer that rounds its output
 *                   (the fused cross-entropy); then α is not applied again;
 *   w_fixed: w16 stays unchanged until the next
 *            pmt_gemm_bf16_weights_changed, so the products may multiply
 *            its blocked copy (nn/gemm.h PMT_LP_B_FIXED): the model's
 *            weights, whose copy it announces at each training pass.
 * Any of them NULL: converted per product, as the plain forms do. In fp32
 * the copies are ignored, and these are the plain forms exactly; in bf16
 * they give the plain forms' bits (the same roundings). */
typedef struct linear_bf16 {
    uint16_t *inp;
    const uint16_t *w;
    const uint16_t *dout;
    int inp_rounded;
    int w_fixed;
} linear_bf16;
void linear_forward_lp(float *out, const float *inp, const float *w, const float *b, int N, int IN, int OUT,
                       const linear_bf16 *lp);
/* out16 [N, OUT] (may be NULL): also bf16(out), rounded per row in the
 * bias + ReLU pass (the next layer's inp16). */
void linear_relu_forward_lp(float *out, uint16_t *out16, const float *inp, const float *w, const float *b, int N,
                            int IN, int OUT, const linear_bf16 *lp);
/* dinp [N, IN] = dinp_beta · dinp + α · dout · w (dinp_beta 1: accumulate,
 * 0: set; dinp may be NULL); dw += α · doutᵀ · inp; db += α · Σ_n dout (db
 * may be NULL; when not, dout is required even with lp->dout). */
void linear_backward_lp(float *dinp, float *dw, float *db, const float *dout, const float *inp, const float *w,
                        int N, int IN, int OUT, float dinp_beta, float alpha, const linear_bf16 *lp);

/* out16 [N, OUT] = bf16(max(inp16 · w16ᵀ + b, 0)) in one bf16 product whose
 * epilogue adds the bias, applies the ReLU and rounds (pmt_gemm_bf16_out):
 * the FFN's up projection in the bf16 precision, where the next product
 * and the ReLU's backward read only the bf16 hidden layer, so it is never
 * written in fp32. inp16 [N, IN], w16 [OUT, IN] bf16, b [OUT]; w_fixed as
 * in linear_bf16. Only in the bf16 precision. */
void linear_relu_forward_bf16(uint16_t *out16, const uint16_t *inp16, const uint16_t *w16, int w_fixed,
                              const float *b, int N, int IN, int OUT);

/* ---- relu: out = max(inp, 0), n elements; backward uses the saved output ---- */
void relu_forward(float *out, const float *inp, size_t n);
void relu_backward(float *dinp, const float *dout, const float *out, size_t n);

/* ---- residual: out = a + b ---- */
void residual_forward(float *out, const float *a, const float *b, size_t n);
void residual_backward(float *da, float *db, const float *dout, size_t n);

/* ---- dropout with an explicit mask ----
 * dropout_mask_fill writes mask[i] = 0 with probability p, else 1/(1-p), from a
 * deterministic stream (seed, stream offset) so runs and resumes are repeatable.
 * forward: out = inp * mask (out may alias inp); backward: dinp += dout * mask. */
void dropout_mask_fill(float *mask, size_t n, float p, uint64_t seed, uint64_t stream);
void dropout_forward(float *out, const float *inp, const float *mask, size_t n);
void dropout_backward(float *dinp, const float *dout, const float *mask, size_t n);

/* ---- dropout with a regenerated mask (the model's training path) ----
 * The mask of dropout_mask_fill(p, seed, stream) is recomputed per element
 * from the counter-based stream instead of being stored: no [N, C] mask
 * buffer per site, and the forward dropout is fused with the residual add.
 * dropout_residual_forward: out = a + sub ⊙ mask (out may alias a or sub;
 * p <= 0: out = a + sub). dropout_inplace_forward: x = x ⊙ mask.
 * dropout_regen_backward_set: dinp = dout ⊙ mask (SET, see below; dinp may
 * be dout). */
void dropout_residual_forward(float *out, const float *a, const float *sub, size_t n, float p,
                              uint64_t seed, uint64_t stream);
void dropout_inplace_forward(float *x, size_t n, float p, uint64_t seed, uint64_t stream);
void dropout_regen_backward_set(float *dinp, const float *dout, size_t n, float p, uint64_t seed,
                                uint64_t stream);
/* The same, and dinp16 = bf16(dinp) rounded in the same pass (the dout16
 * of the linear layer behind; nn/ops.h linear_bf16). Needs native bf16. */
void dropout_regen_backward_set_lp(float *dinp, uint16_t *dinp16, const float *dout, size_t n, float p,
                                   uint64_t seed, uint64_t stream);

/* ---- attention masks ----
 * Key j of sentence b is visible to query t iff j < klen[b] and (!causal || j <= t).
 * Masked logits are -INFINITY before a max-subtracted softmax; a row with no
 * visible key gets all-zero weights (and zero output), never NaN. */

/* ---- attention scratch ----
 * The attention kernels keep per-task scratch (transposed operands, a
 * [T, S] gradient block per (b, h)) in a heap buffer of each OS thread
 * (thread-local, freed when the thread exits), not on the stack, whose size
 * an OpenMP worker cannot grow, and never in one buffer of the process:
 * kernels of independent translators run at once on different threads.
 * Reserve it for the largest query length T, key length S and head size HS
 * to be used, on the calling thread (the model does at init, each decoder
 * lane on its thread); a thread that has less grows its own buffer in the
 * task, once. A kernel whose scratch cannot grow leaves its outputs unwritten
 * and records the error for pmt_gemm_take_error (nn/gemm.h), as a failed
 * product does. 0, or -1 when out of memory. */
int attention_scratch_reserve(int T, int S, int HS);

/* ---- standard scaled dot-product attention (per head) ----
 * out [B*T, C] = concat_h softmax(q_h k_hᵀ * scale + mask) v_h
 * probs [B, NH, T, S] saved for backward; klen [B].
 * q [B*T, ldq]; k, v [B*S, ldkv]: row strides, so the operands can be
 * column blocks of one fused projection — self-attention passes q, q + C,
 * q + 2C of its [N, 3C] Q|K|V product with ldq = ldkv = 3C; cross-attention
 * its [N, C] queries (ldq = C) and k, k + C of the [Nk, 2C] K|V product of
 * the memory (ldkv = 2C). The gradients dq, dk, dv have the same strides. */
void attention_forward(float *out, float *probs, const float *q, const float *k,
                       const float *v, int ldq, int ldkv, const int32_t *klen, int causal,
                       int B, int T, int S, int C, int NH, float scale);
void attention_backward(float *dq, float *dk, float *dv, const float *dout,
                        const float *probs, const float *q, const float *k,
                        const float *v, int ldq, int ldkv, const int32_t *klen, int causal,
                        int B, int T, int S, int C, int NH, float scale);
/* As attention_backward into zeroed dq, dk, dv (the same bits), but SETS
 * them: each (b, h) task zeroes its own head slices of its sentence's rows
 * right before accumulating into them, instead of the caller zeroing the
 * whole [N, 3C] (or [Nq, C] and [Nk, 2C]) gradient in a pass of its own. */
void attention_backward_set(float *dq, float *dk, float *dv, const float *dout, const float *probs, const float *q,
                            const float *k, const float *v, int ldq, int ldkv, const int32_t *klen, int causal, int B,
                            int T, int S, int C, int NH, float scale);
/* bf16 products (a CPU with avx512_bf16, as --precision bf16; the caller
 * checks pmt_cpu_has_bf16): the same contracts, with every product of q,
 * k, v, dout and the weights over their bf16 roundings (vdpbf16ps, fp32
 * sums). The softmax, its backward, probs and all outputs stay fp32, the
 * masks exact (masked weights and their gradients are exact zeros). */
void attention_forward_bf16(float *out, float *probs, const float *q, const float *k, const float *v, int ldq,
                            int ldkv, const int32_t *klen, int causal, int B, int T, int S, int C, int NH,
                            float scale);
void attention_backward_set_bf16(float *dq, float *dk, float *dv, const float *dout, const float *probs,
                                 const float *q, const float *k, const float *v, int ldq, int ldkv,
                                 const int32_t *klen, int causal, int B, int T, int S, int C, int NH, float scale);

/* ---- projection attention (Sanger): softmax over negative Gaussian distances ----
 * For head h:  logit[t,j] = -(|q_t|² + |k_j|² - 2 q_t·k_j) / (2 σ_h²) + mask,
 *              out_t = Σ_j softmax_j(logit)[t,j] · k_j      (values = keys)
 * σ_h² = exp(2 * log_sigma[h]). q [B*T, C]; k [B*S, C] (k may equal q for
 * self-attention: pass the same pointer, and the same pointer for dq and dk).
 * probs [B, NH, T, S] saved for backward. All three distance terms are
 * back-propagated. dlog_sigma [NH] may be NULL when σ is fixed.
 * log σ is clamped to [PMT_LOG_SIGMA_MIN, PMT_LOG_SIGMA_MAX] (σ² from e^-8
 * to e^16; the fixed σ² = √HS is well inside): a learned σ → 0 would make
 * 1/(2σ²) overflow and the distance-0 diagonal of self-attention NaN.
 * Beyond the clamp the gradient of log σ is 0. */
#define PMT_LOG_SIGMA_MIN (-4.0)
#define PMT_LOG_SIGMA_MAX 8.0
void projattn_forward(float *out, float *probs, const float *q, const float *k,
                      const float *log_sigma, const int32_t *klen, int causal,
                      int B, int T, int S, int C, int NH);
void projattn_backward(float *dq, float *dk, float *dlog_sigma, const float *dout,
                       const float *probs, const float *q, const float *k,
                       const float *log_sigma, const int32_t *klen, int causal,
                       int B, int T, int S, int C, int NH);
/* bf16 products, as attention_forward_bf16: the distances' cross term
 * and the norms both of the rounded q and k (so a distance is that of the
 * rounded vectors: 0 on the self-attention diagonal up to fp32 rounding);
 * logits, softmax, σ's gradient and all outputs fp32. */
void projattn_forward_bf16(float *out, float *probs, const float *q, const float *k, const float *log_sigma,
                           const int32_t *klen, int causal, int B, int T, int S, int C, int NH);
void projattn_backward_bf16(float *dq, float *dk, float *dlog_sigma, const float *dout, const float *probs,
                            const float *q, const float *k, const float *log_sigma, const int32_t *klen, int causal,
                            int B, int T, int S, int C, int NH);

/* ---- pooling attention: the projection family (ops_poolattn.c) ----
 * Nadaraya–Watson pooling over the visible keys, values = the raw keys:
 *   z = M_h(x)                     per-head metric map of queries and keys
 *   r[t,j] = |z_q,t − z_k,j|² / σ_h²   (dot metric: −2 z_q,t·z_k,j / σ_h²)
 *   w[t,j] = K(r[t,j]) / Σ_j' K(r[t,j'])   over the visible keys j' of row t
 *   out_t = Σ_j w[t,j] · k_j
 * kernel (PMT_KERNEL_* of core/config.h): gaussian K = exp(−r/2) (a softmax),
 * boxcar K = [r ≤ 1], constant K = 1, epanechnikov K = max(0, 1 − r).
 * metric (PMT_METRIC_*): euclidean z = x; diagonal z_c = x_c·exp(log_metric[c]/2)
 * (so d² = Σ_c a_c (q_c − k_c)², a = exp(log_metric)); cosine
 * z = ρ_h · x / √(|x|² + 1e-6) with ρ_h = exp(log_radius[h]); dot z = x.
 * A row whose visible keys all have K = 0 (boxcar/epanechnikov, every key
 * beyond σ) takes its NEAREST visible key (weight 1 on the smallest r, the
 * first on ties): the limit of both kernels as σ shrinks onto that key, so
 * the output is continuous in σ, finite, and the value gradient still flows.
 * A row with no visible key is all zeros, as in every attention kernel.
 * Gradients: through the values always; through r (so to q, k, σ and the
 * metric) for gaussian and for epanechnikov inside its support; boxcar and
 * constant are piecewise constant in r, so q and k get only the value
 * gradient, and a nearest-key row gets no gradient through r.
 * Shapes and aliasing as projattn_*: q [B*T, C], k [B*S, C] (k may be q),
 * weights [B, NH, T, S]. log_sigma [NH]; log_metric [C] (diagonal only);
 * log_radius [NH] (cosine only). scratch: caller memory of at least
 * poolattn_scratch_floats(B, T, S, C, NH) floats (shared by forward and
 * backward, overwritten; passed with its size, which is asserted). */
typedef struct poolattn_params {
    int kernel, metric;           /* PMT_KERNEL_*, PMT_METRIC_* */
    const float *log_sigma;       /* [NH] */
    const float *log_metric;      /* [C] diagonal metric, else unused */
    const float *log_radius;      /* [NH] cosine metric, else unused */
} poolattn_params;
/* Gradients of the parameters, accumulated; NULL members are not computed. */
typedef struct poolattn_grads {
    float *log_sigma, *log_metric, *log_radius;
} poolattn_grads;

size_t poolattn_scratch_floats(int B, int T, int S, int C, int NH);
/* Enough scratch for every call with B*T <= rows, B*S <= rows and T, S <= len
 * (the model's arena bounds). */
size_t poolattn_scratch_bound(int rows, int len, int C, int NH);
void poolattn_forward(float *out, float *weights, const float *q, const float *k, const poolattn_params *p,
                      const int32_t *klen, int causal, int B, int T, int S, int C, int NH,
                      float *scratch, size_t scratch_floats);
/* dq [B*T, C], dk [B*S, C] += ... (dq == dk for self-attention). */
void poolattn_backward(float *dq, float *dk, const poolattn_grads *dp, const float *dout, const float *weights,
                       const float *q, const float *k, const poolattn_params *p, const int32_t *klen, int causal,
                       int B, int T, int S, int C, int NH, float *scratch, size_t scratch_floats);

/* ---- softmax cross-entropy with label smoothing ----
 * Smoothed target q = (1-eps)·onehot(target) + eps/V (PyTorch's label_smoothing).
 * logits [N, V] in; probs [N, V] out (may alias logits); loss [N] per row
 * (0 for rows whose target == ignore_id); returns the number of counted rows
 * and writes how many of them have argmax == target into *correct. */
int crossentropy_forward(float *loss, float *probs, const float *logits,
                         const int32_t *targets, int N, int V, float eps,
                         int32_t ignore_id, int *correct);
/* dlogits [N, V] = (probs - q) * dloss_scale for counted rows, 0 for ignored
 * rows. The one op that SETS its gradient: it is the root of back-propagation,
 * and dlogits may alias probs so the [N, V] buffer is reused in place. */
void crossentropy_backward(float *dlogits, const float *probs, const int32_t *targets,
                           int N, int V, float eps, int32_t ignore_id, float dloss_scale);

/* ---- cross-entropy forward and backward fused per logits row (training) ----
 * As crossentropy_forward then crossentropy_backward with dloss_scale = 1,
 * in one visit of each row (llm.c's fused classifier): the row's softmax is
 * turned into the gradient while it is in cache, instead of a second pass
 * over the [N, V] buffer in backward. dlogits [N, V] = p − q, UNSCALED (the
 * caller applies the 1/tokens scale, e.g. as the α of the next GEMM), 0 for
 * ignored rows; it may alias logits. nll [N] (may be NULL): −log p[target]
 * = lse − logit[target] for counted rows, 0 otherwise. Returns the number
 * of counted rows; *correct as crossentropy_forward. */
int crossentropy_fused(float *loss, float *nll, float *dlogits, const float *logits, const int32_t *targets,
                       int N, int V, float eps, int32_t ignore_id, int *correct);
/* crossentropy_fused that also rounds each gradient row, while it is in
 * cache, to dlogits16 [N, V] = bf16(scale · dlogits) (0 for ignored rows):
 * the dout16 of linear_backward_lp with α = scale, instead of a conversion
 * pass over the [N, V] gradient in the next products. Needs a CPU with
 * native bf16 (as --precision bf16). */
int crossentropy_fused_bf16(float *loss, float *nll, float *dlogits, uint16_t *dlogits16, float scale,
                            const float *logits, const int32_t *targets, int N, int V, float eps, int32_t ignore_id,
                            int *correct);
/* crossentropy_fused_bf16 over bf16 logits, in place: on entry logits16
 * [N, V] holds the bf16 logits (as pmt_gemm_bf16_out writes them), on exit
 * bf16(scale · dlogits). No fp32 [N, V] matrix is written or read: each row
 * is widened into this thread's row of row_scratch [threads, V] (threads =
 * omp_get_max_threads()), where the softmax, loss and gradient run in fp32
 * as in crossentropy_fused, and rounded back into its own bf16 row. The
 * loss is that of the rounded logits. With dlogits [N, V] (fp32) given
 * instead, each row works there and the unscaled gradient stays in it
 * (logits16 keeps the logits; scale and row_scratch are unused): the same
 * values, for a caller that scales later. Needs native bf16. */
int crossentropy_fused_bf16_logits(float *loss, float *nll, uint16_t *logits16, float scale, float *dlogits,
                                   const int32_t *targets, int N, int V, float eps, int32_t ignore_id, int *correct,
                                   float *row_scratch);

/* ---- overwrite variants for the model's scratch gradients ----
 * ops.h kernels accumulate into their gradients (the caller zeroes them).
 * For the model's per-block scratch gradients that means a memset before
 * every backward kernel — a serial pass over [N, C] or [N, F] each time.
 * These variants SET their input gradient instead, with the same values as
 * the ops.h kernel applied to a zeroed buffer. Parameter gradients (dw, db)
 * still accumulate. */

/* As linear_backward, but dinp = dout · w (sgemm beta = 0); dinp may be NULL. */
void linear_backward_set(float *dinp, float *dw, float *db, const float *dout,
                         const float *inp, const float *w, int N, int IN, int OUT);
/* As linear_backward_set for the gradient α · dout (α folded into the GEMMs:
 * the fused cross-entropy leaves the 1/tokens scale to this call). */
void linear_backward_scaled_set(float *dinp, float *dw, float *db, const float *dout, const float *inp,
                                const float *w, int N, int IN, int OUT, float alpha);
/* d = out > 0 ? d : 0 in place: relu_backward of d into a zeroed buffer. */
void relu_backward_inplace(float *d, const float *out, size_t n);
/* The bf16 training form of relu_backward_inplace over d [N, OUT], gated
 * by the bf16 output out16 (the FFN's hidden layer, which exists only in
 * bf16: linear_relu_forward_bf16; out16 > 0 exactly where the rounded
 * output is positive), that also writes d16 = bf16(d) and sums the layer's
 * bias gradient while each row is in registers: db [OUT] += Σ_n d[n] (the
 * gated gradient), instead of linear_backward's column pass reading d
 * again. Needs native bf16. Row chunks fixed by N, partials in scratch (caller memory of
 * relu_backward_bias_scratch_floats(OUT) floats, overwritten) added in
 * order: the same bits for any thread count. */
size_t relu_backward_bias_scratch_floats(int OUT);
void relu_backward_bias_lp16(float *d, uint16_t *d16, float *db, const uint16_t *out16, int N, int OUT,
                             float *scratch);
/* dinp = dout * mask. */
void dropout_backward_set(float *dinp, const float *dout, const float *mask, size_t n);

/* ---- attention forward for a few queries per sentence (the decoder) ----
 * Same contract and arguments as attention_forward / projattn_forward, but
 * the q·k scores are one dot product per (query, key) instead of a
 * transposed copy of the keys and a small GEMM: much cheaper when T is 1
 * (self-attention step) or the beam (cross-attention), more expensive for
 * training shapes. Equal up to fp32 rounding (another summation order). */
void attention_forward_few_queries(float *out, float *probs, const float *q, const float *k,
                                   const float *v, int ldq, int ldkv, const int32_t *klen, int causal,
                                   int B, int T, int S, int C, int NH, float scale);
void projattn_forward_few_queries(float *out, float *probs, const float *q, const float *k,
                                  const float *log_sigma, const int32_t *klen, int causal,
                                  int B, int T, int S, int C, int NH);

/* ---- decoder self-attention over a cache with a position → row table ----
 * One query per row r of q [R, ldq] (the Q block of the fused Q|K|V step
 * product: ldq = 3C); its keys are j = 0..nkeys-1, key j being
 * position j of cache row map[j*ld_map + r] in kcache/vcache [rows, cap, C]
 * (row-major: (row*cap + j)*C). probs [R, NH, cap] (positions >= nkeys 0).
 * Same values as the few-queries kernels on a cache gathered by the table,
 * bit for bit. projattn: values = keys, σ from log_sigma [NH]. */
void attention_forward_cached(float *out, float *probs, const float *q, const float *kcache, const float *vcache,
                              int ldq, const int32_t *map, int ld_map, int R, int nkeys, int cap, int C, int NH,
                              float scale);
void projattn_forward_cached(float *out, float *probs, const float *q, const float *kcache, const int32_t *map,
                             int ld_map, const float *log_sigma, int R, int nkeys, int cap, int C, int NH);

/* ---- log-normalisers of logit rows (the decoder's search) ----
 * lse [R] = log Σ_v exp(logits[r, v]) over logits [R, V], max-subtracted, so
 * log p(v) = logit − lse exactly and without underflow. */
void logsumexp_rows(float *lse, const float *logits, int R, int V);

#endif

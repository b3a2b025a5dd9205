/*
 * model.h — the encoder–decoder Transformer: parameters, activations arena,
 * teacher-forced forward pass with loss, and backward pass.
 *
 * Shapes use the legend of ops.h (B, S, T, C, NH, HS, F, V).
 *
 * Memory (llm.c style): parameters, gradients live in ONE contiguous buffer
 * each, addressed through a table of named tensors (pmt_tensor), so zeroing,
 * the optimizer, checkpointing and an MPI all-reduce are single calls over
 * [0, n_params). Activations live in an arena sized at init for the largest
 * batch (max_rows tokens per side, max_len positions); forward/backward never
 * allocate.
 *
 * Ownership: pmt_model owns every buffer; pmt_model_free releases them. A
 * pmt_batch (data/batch.h) is owned by its producer (the batcher); the model only reads it.
 */
#ifndef PROJMT_MODEL_H
#define PROJMT_MODEL_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include "core/config.h"
#include "data/batch.h"

/* One named parameter tensor inside the flat buffer. */
typedef struct pmt_tensor {
    char name[64];       /* e.g. "enc.0.self.wo" */
    size_t offset;       /* in floats from the start of params/grads */
    size_t size;         /* rows * cols */
    int rows, cols;      /* cols = 1 for vectors */
} pmt_tensor;

/* One attention block's parameters (pointers into the flat params buffer;
 * wqkv/bqkv are NULL for a projection site, log_sigma NULL unless learned σ,
 * log_metric / log_radius NULL unless the projection metric is diagonal /
 * cosine). The Q, K and V projections are one fused matrix, rows 0..C-1 Q,
 * C..2C-1 K, 2C..3C-1 V: self-attention multiplies by all of it at once
 * ([N, 3C] = LN(x) · wqkvᵀ), cross-attention by the Q rows on the decoder
 * stream and by the K|V rows ([2C, C], contiguous) on the encoder memory. */
typedef struct pmt_attn_params {
    float *ln_w, *ln_b;                      /* pre-LayerNorm [C] */
    float *wqkv, *bqkv;                      /* [3C, C], [3C] (standard only) */
    float *wo, *bo;                          /* [C, C], [C] */
    float *log_sigma;                        /* [NH] (projection + learned σ) */
    float *log_metric;                       /* [C]: a = exp(·) per head dimension (diagonal metric) */
    float *log_radius;                       /* [NH]: sphere radius ρ = exp(·) (cosine metric) */
} pmt_attn_params;

typedef struct pmt_ffn_params {
    float *ln_w, *ln_b;                      /* [C] */
    float *w1, *b1;                          /* [F, C], [F] */
    float *w2, *b2;                          /* [C, F], [C] */
} pmt_ffn_params;

typedef struct pmt_layer_params {
    pmt_attn_params self;
    pmt_attn_params cross;                   /* decoder layers only */
    pmt_ffn_params ffn;
} pmt_layer_params;

/* What one forward pass measured. */
typedef struct pmt_stats {
    double loss_sum;     /* summed smoothed cross-entropy over counted tokens */
    double nll_sum;      /* summed plain negative log-likelihood (for perplexity) */
    int tokens;          /* counted (non-pad) target tokens */
    int correct;         /* argmax == reference among them */
} pmt_stats;

typedef struct pmt_model_activations pmt_model_activations; /* model.c */

typedef struct pmt_model {
    pmt_config cfg;              /* copy of the effective config */
    int V, C, NH, HS, F;         /* vocab, d_model, heads, head size, ffn */
    int max_rows, max_len;       /* arena bounds: tokens per side, positions */

    pmt_tensor *tensors;         /* table of named tensors */
    int n_tensors;
    size_t n_params;
    float *params;               /* [n_params] */
    float *grads;                /* [n_params]; NULL for an inference-only model */
    uint16_t *params16;          /* [n_params] bf16 rounding of params, rounded at the start of every
                                  * training forward pass of --precision bf16 (the weights of its
                                  * products, rounded once per pass); NULL otherwise */
    int params16_written;        /* 1: params16 already holds bf16(params) for the next training forward
                                  * pass, which then skips the rounding (and clears this): set by
                                  * pmt_model_params16_written after an optimizer update that wrote it */

    float *wte;                  /* [V, C] shared embedding / output projection */
    float *enc_ln_w, *enc_ln_b;  /* final encoder LayerNorm [C] */
    float *dec_ln_w, *dec_ln_b;  /* final decoder LayerNorm [C] */
    pmt_layer_params *enc, *dec; /* [enc_layers], [dec_layers] */
    float *pos;                  /* [max_len, C] sinusoidal table (not a parameter) */

    pmt_model_activations *act;  /* arena */
    pthread_mutex_t *arena_lock; /* owned: taken by a decoder that encodes in this model's own arena
                                  * (translate/decoder.h), so that decoders of one model without views
                                  * encode in turn while other models' run at once */
    int decode_weights;          /* pmt_weight_type (model_file.h) the incremental decoder multiplies by:
                                  * the exported file's type for int8 (0 = fp32, the params) */
    struct pmt_shortlist *shortlist; /* owned: the vocabulary shortlist of the file it was loaded from
                                  * (model/shortlist.h; NULL: none; views have none) */
} pmt_model;

/* What the loaders and initialisers below return when memory ran out (a
 * bad config or file is -1): the C API tells the two apart. */
enum { PMT_OUT_OF_MEMORY = -2 };

/* Builds the tensor table for cfg and vocab V, allocates params, grads and an
 * activation arena for batches of up to max_rows tokens per side and max_len
 * positions. Returns 0, -1 with a message in err (bad config), or
 * PMT_OUT_OF_MEMORY with one. */
int pmt_model_init(pmt_model *m, const pmt_config *cfg, int V, int max_rows, int max_len,
                   char *err, size_t errlen);
/* As pmt_model_init for translation and inspection: parameters and the
 * forward activations, but no gradients (m->grads is NULL) and none of the
 * backward scratch. pmt_model_encode and pmt_model_forward with train = 0
 * work; a training forward pass (NaN loss) or pmt_model_backward (nothing
 * done) records an error for pmt_gemm_take_error (nn/gemm.h), as a batch
 * larger than the arena does in any pass, and as every failed product and
 * kernel does: callers check once after a pass. */
int pmt_model_init_inference(pmt_model *m, const pmt_config *cfg, int V, int max_rows, int max_len,
                             char *err, size_t errlen);
/* An inference view of m: m's weights (borrowed: m must outlive the view;
 * view->params is NULL) with an activation arena of its own as large as m's,
 * so that encoder passes (pmt_model_encode) of one model can run on several
 * threads at once, one per view (the search's lanes). pmt_model_free
 * releases the view's own buffers only. 0, or -1 with err. */
int pmt_model_init_view(pmt_model *view, const pmt_model *m, char *err, size_t errlen);
void pmt_model_free(pmt_model *m);
/* Floats in the activation arena (memory accounting, tests). */
size_t pmt_model_arena_floats(const pmt_model *m);
/* Tells the model that params16 = bf16(params) was just written by whoever
 * last changed params (the optimizer's update, pmt_optim_keep_bf16_copy):
 * the next training forward pass uses it as it is. Only for the caller that
 * changed params in the same pass that wrote params16. */
void pmt_model_params16_written(pmt_model *m);
/* The tensor table (names, shapes, offsets) that cfg and vocab V imply,
 * without parameters: what a stored file's table must be before a model is
 * allocated for it. Checks the limits first (model/record.h), so nothing is
 * sized by a value beyond them. 0 with a malloc'd *tensors (the caller
 * frees) of *n_tensors entries, or -1 with err. */
int pmt_model_tensor_table(const pmt_config *cfg, int V, pmt_tensor **tensors, int *n_tensors, char *err,
                           size_t errlen);
/* Number of parameters cfg would have for vocab V (no allocation); 0 when
 * cfg or V is beyond the limits of model/record.h. */
size_t pmt_model_count_params(const pmt_config *cfg, int V);
/* Matrix-product FLOPs of one training step (forward + backward = 3x forward)
 * on a padded batch of B pairs with lengths S and T, as the GEMMs run them. */
double pmt_model_train_flops(const pmt_config *cfg, int V, int B, int S, int T);
/* Xavier-uniform matrices, zero biases, unit LayerNorm gains, N(0, C^-1/2)
 * embeddings, log σ = pmt_model_fixed_log_sigma, log_metric = 0 (the
 * euclidean distance), log ρ = log(HS)/2 (the typical norm of a LayerNormed
 * head slice) — deterministic in seed. */
void pmt_model_init_params(pmt_model *m, uint64_t seed);
const pmt_tensor *pmt_model_find_tensor(const pmt_model *m, const char *name);
/* Checkpoints and exported files written before the fused Q/K/V layout
 * store, per standard attention site, six tensors <site>.wq [C, C], .bq [C],
 * .wk, .bk, .wv, .bv in that order and back to back. This rewrites every
 * such run of the table in place as <site>.wqkv [3C, C] and .bqkv [3C] (the
 * same floats at the same offsets, so no other tensor moves) and permutes
 * each of the n_arrays flat arrays [n_params] the same way (parameters,
 * Adam moments, moving average; NULL entries are skipped). *n_tensors
 * shrinks by 4 per site. Returns the number of sites converted, or -1 with
 * err when a run is there but does not have that shape (nothing changed). */
int pmt_model_fuse_legacy_qkv(pmt_tensor *tensors, int *n_tensors, float *const *arrays, int n_arrays,
                              char *err, size_t errlen);
/* log σ of the projection sites when fixed (the training pass and the
 * incremental decoder use it), and where a learned σ starts:
 * σ² = cfg->sigma_sq if set, else √HS for the gaussian kernel (Sanger's
 * choice; with the dot metric it is standard attention's 1/√HS scaling) and
 * 2·HS for boxcar and Epanechnikov — the squared distance of two orthogonal
 * LayerNormed head slices (|x|² ≈ HS each), so keys within 90° of the query
 * are in range at the start. The constant kernel ignores σ. */
float pmt_model_fixed_log_sigma(const pmt_config *cfg);
/* Whether the projection sites run the pooling family (nn/ops.h poolattn_*)
 * rather than Sanger's gaussian/euclidean projattn_*. */
int pmt_model_uses_poolattn(const pmt_config *cfg);

/* Teacher-forced forward pass with label-smoothed loss. train = 1 applies
 * dropout with masks drawn from dropout_seed (repeatable). Fills *stats;
 * returns the mean loss over counted tokens. The batch must fit the arena. */
double pmt_model_forward(pmt_model *m, const pmt_batch *batch, int train,
                         uint64_t dropout_seed, pmt_stats *stats);
/* Back-propagates the last forward pass. Gradients ACCUMULATE into m->grads,
 * scaled so that they are those of (loss_sum / loss_denominator): pass the
 * number of target tokens of the whole (accumulated / all-reduced) batch. */
void pmt_model_backward(pmt_model *m, const pmt_batch *batch, double loss_denominator);
/* A training step's passes: pmt_model_forward (train = 1) then
 * pmt_model_backward, with the same results. Knowing the loss scale before
 * the loss, the forward pass can hand backward the scaled gradient of the
 * logits in the form its products take (bf16 precision: rounded while the
 * cross-entropy has each row in cache, not in a pass of its own). */
double pmt_model_train_step(pmt_model *m, const pmt_batch *batch, uint64_t dropout_seed, double loss_denominator,
                            pmt_stats *stats);
void pmt_model_zero_grad(pmt_model *m);
/* Copies the output distribution [B*T, V] of the last forward pass, which
 * must have been an evaluation pass (train = 0: a training pass turns the
 * logits into their gradient at once), into out (valid until
 * pmt_model_backward, which reuses that buffer for dlogits).
 * Rows whose target is padding, which the forward pass skips, are computed
 * by this call. */
void pmt_model_output_probs(const pmt_model *m, float *out);

/* Attention weights of the last forward pass at one site of one layer
 * (site: PMT_SITE_*; layer indexes the encoder for ENC_SELF, else the
 * decoder): a pointer into the arena, shaped [B, NH, Tq, Tk] with Tq/Tk the
 * batch's S or T as the site implies; valid until the next forward pass. */
const float *pmt_model_attention_weights(const pmt_model *m, int site, int layer);

/* How an encoder pass multiplies by a linear layer's weight matrix: out
 * [N, OUT] = in [N, IN] · wᵀ + b, w the first OUT rows of a parameter
 * tensor starting at w (nn/ops.h layout). The decoder hands its int8 or
 * bf16 matmuls of the exported weights this way, so the encoder runs in the
 * weights' precision as the decoder steps do. */
typedef struct pmt_linear_hook {
    void (*linear)(void *ctx, float *out, const float *in, const float *w, const float *b, int N, int IN, int OUT);
    void *ctx;
} pmt_linear_hook;
/* Encoder only: writes the final encoder output [B*S, C] into enc_out
 * (caller-owned), for decoding. hook NULL: the fp32 parameters. */
void pmt_model_encode(pmt_model *m, const int32_t *src, const int32_t *src_len, int B, int S,
                      const pmt_linear_hook *hook, float *enc_out);

#endif

/*
 * decoder.h — the incremental decoder (whisper.cpp / Marian style caches) over
 * a pmt_model; the search that drives it is translate/beam_search.h.
 *
 *     pmt_decoder runs the decoder one position at a time for a batch of
 *     `rows` hypotheses (n_sent sentences × beam rows each, sentence-major).
 *     The encoder runs once per batch (pmt_model_encode; with int8 or bf16
 *     weights through the decoder's matmuls, as the steps). Per decoder layer
 *     it caches what a new token needs, so a step costs O(current length):
 *       self-attention  standard:   K and V rows of every past position;
 *                       projection: the LayerNormed inputs of past positions
 *                                   (they are the keys and the values);
 *       cross-attention standard:   K = enc_out·W_Kᵀ + b_K and V likewise,
 *                                   computed once per batch;
 *                       projection: the encoder output itself.
 *     It computes exactly the function of pmt_model_forward (eval mode): a
 *     teacher-forced step sequence reproduces its output distribution.
 *
 * Token conventions (as model.h): source ids are given WITHOUT the trailing
 * EOS (the search appends it); hypotheses are returned without BOS/EOS.
 *
 * Ownership: a pmt_decoder borrows its pmt_model (which must outlive it) and
 * owns every buffer it allocates in pmt_decoder_init, released by
 * pmt_decoder_free; one made by pmt_decoder_init_sharing also borrows its
 * base decoder's packed low-precision weights. Nothing allocates after
 * init, but for an int8 matmul's primitive of a row count it has not
 * multiplied yet (built once, nn/gemm.h)
 * and the shortlist's arrays: allocated at the first start with a
 * shortlist (held until pmt_decoder_free), and, in a shortlisted batch
 * with int8 or bf16 weights, the low-precision form of that batch's output
 * rows (built at each start, freed at the next).
 */
#ifndef PROJMT_DECODER_H
#define PROJMT_DECODER_H

#include <stddef.h>
#include <stdint.h>

#include "core/config.h"
#include "model/model.h"
#include "nn/gemm.h"

typedef struct pmt_decoder_layer {
    /* Self-attention cache, [rows, cap, C] each, physical row p's position
     * j at (p*cap + j)*C; which physical row holds position j of hypothesis
     * r is the decoder's row_map. standard: keys in k, values in v;
     * projection: the LayerNormed inputs in k (v unused). */
    float *k, *v;
    /* Cross-attention keys|values, [n_sent, S, 2C] (the K|V rows of the
     * fused projection: keys at column 0, values at C; standard only, a
     * projection site reads the decoder's enc_out). */
    float *cross_kv;
} pmt_decoder_layer;

typedef struct pmt_decoder {
    pmt_model *m;                /* borrowed */
    /* Optional, caller-owned (NULL by default): a view of m
     * (pmt_model_init_view) whose arena runs this decoder's encoder passes,
     * so that decoders of one model encode concurrently. */
    pmt_model *encoder;
    int max_sent, max_beam;      /* bounds fixed at init */
    int max_rows;                /* max_sent * max_beam */

    /* current batch */
    int n_sent, beam, rows;      /* rows = n_sent * beam */
    int S;                       /* padded source length (incl. EOS) */
    int cap;                     /* cache stride: positions per row (<= m->max_len) */
    int t;                       /* positions already fed (next position index) */

    int32_t *src_len;            /* [max_sent] source tokens incl. EOS */
    int32_t *self_klen;          /* [max_rows] scratch of pmt_decoder_reorder */
    /* [max_len, max_rows]: row_map[j*max_rows + r] is the cache row holding
     * position j of hypothesis r. Step t writes position t of every
     * hypothesis into its own row r (never written before, so no live
     * position is overwritten); reordering permutes this table (ints)
     * instead of the cached vectors. row_map2 is its double buffer. */
    int32_t *row_map, *row_map2;
    float *pool_keys;            /* [max_rows, max_len, C]: the self-attention keys gathered
                                    through row_map for the pooling kernels (NULL otherwise) */
    float *enc_out;              /* [max_sent * max_len, C] */
    pmt_decoder_layer *layers;   /* [dec_layers] */
    float *log_sigma_fixed;      /* [NH] log σ for fixed σ (pmt_model_fixed_log_sigma) */
    float *pool_scratch;         /* poolattn_* scratch for the largest step (NULL unless pooling) */
    size_t pool_scratch_floats;

    /* per-step scratch, [max_rows, ...] */
    float *x, *ln, *mean, *rstd, *att, *sub, *h;
    float *qkv;                  /* [max_rows, 3C]: self-attention q | k | v; cross-attention q [rows, C] */
    float *attn_probs;           /* [max_rows, NH, max_len] */
    float *logits;               /* [max_rows, V] output logits of the last step's live rows (n_vocab a row) */
    float *lse;                  /* [max_rows] their log-normaliser: log p = logit − lse */
    /* The last step's live rows (pmt_decoder_step_live): their list, the
     * slot of each row's logits (-1: not live), and the gather/scatter
     * buffers of the products run on them only, [max_rows, max(F, 3C)]
     * (fp32 and bf16 weights; int8 products read and write the live rows
     * in place and leave them and sub unused during steps). */
    int32_t *live_rows, *logit_slot;
    int n_live;
    float *gather_in, *gather_out;

    /* Optional, caller-owned (NULL by default): when set, every step copies
     * the last decoder layer's cross-attention weights into it, shaped
     * [n_sent, NH, beam, S] (source positions past src_len are 0). Alignment
     * views (serve's heatmap) set it; the search leaves it NULL. */
    float *cross_probs_out;
    /* Optional, caller-set (NULL by default): when set, each step hands
     * every live row's logits to visit(visit_ctx, slot, logits) as soon as
     * they and their normaliser lse[slot] are finished (slot: the row's
     * place in the step's live rows, logit_slot), instead of keeping them:
     * after such a step pmt_decoder_logits_row and pmt_decoder_logprob must
     * not be called. Why: the search needs a few values of each row; a
     * kept row is 32 KB (V = 8000) written and read back from memory, and
     * in a visited row they are taken while it is in L1. With int8 weights
     * the row never leaves the product's epilogue. */
    pmt_row_visit visit;
    void *visit_ctx;
    /* Low-precision weights (m->decode_weights int8 or bf16): every matrix
     * the encoder and a step multiply by, once, as a packed int8 matmul with
     * its row scales or as a bf16 matmul (nn/gemm.h), found by the
     * address of its first row; and their activation scratch, for the
     * larger of a step's rows and an encoder pass's. */
    struct pmt_lowp_matrix *lowp;  /* [n_lowp] */
    int n_lowp;
    pmt_int8_scratch q8_scratch;
    uint16_t *bf16_scratch;      /* [rows, max(C, F)] */
    void *bf16_pad;              /* the bf16 matmuls' scratchpad (the largest of theirs; NULL if none) */
    size_t bf16_pad_bytes;       /* bf16_pad's size */

    /* The vocabulary shortlist (model/shortlist.h). shortlist_k is the
     * caller's (0 by default: the whole vocabulary): with k > 0 every
     * pmt_decoder_start computes the logits of its batch over the union of
     * its sources' first k candidates and the frequent pieces only (the
     * model must carry a shortlist). The batch's output vocabulary is
     * n_vocab columns; when shortlisted, column c is token vocab_ids[c]
     * and token v is column vocab_col[v] (-1: not in the list), whose
     * output-embedding rows are vocab_w [n_vocab, C] (vocab_lowp their
     * low-precision form). The arrays exist from the first shortlisted start
 * (NULL before: a model's shortlist costs nothing until it is used). */
    int shortlist_k;
    int shortlisted, n_vocab;
    int32_t *vocab_ids, *vocab_col;   /* [V] each */
    float *vocab_w;                   /* [V, C] */
    struct pmt_lowp_matrix *vocab_lowp;  /* one, allocated with the arrays */
    char error[320];             /* why the last step returned NULL */
} pmt_decoder;

/* Allocates for up to max_sent sentences × max_beam rows with sources and
 * outputs up to m->max_len positions. Returns 0, or -1 with err. */
int pmt_decoder_init(pmt_decoder *d, pmt_model *m, int max_sent, int max_beam, char *err, size_t errlen);
/* As pmt_decoder_init, with the low-precision weights of base (a decoder
 * of the same m, int8 or bf16 weights; NULL: its own): the int8 matrices
 * through matmuls of its own over base's packed weights, so that the two
 * may step on different threads at once (nn/gemm.h). Why: the search's
 * lanes share one copy instead of one each. base must outlive d. */
int pmt_decoder_init_sharing(pmt_decoder *d, pmt_model *m, int max_sent, int max_beam, const pmt_decoder *base,
                             char *err, size_t errlen);
void pmt_decoder_free(pmt_decoder *d);

/* Starts a batch: encodes src [n_sent*S] (padded, EOS included, lengths
 * src_len), precomputes the cross-attention keys/values, and prepares
 * n_sent*beam rows with caches of cap positions (cap <= m->max_len).
 * Requires n_sent*S <= m->max_rows (the encoder's arena). Decoders of one
 * model may start and step concurrently: each encodes in its own view
 * (d->encoder) when set, else the model's arena takes one encoder pass at a
 * time. 0 or -1 with err. */
int pmt_decoder_start(pmt_decoder *d, const int32_t *src, const int32_t *src_len, int n_sent, int S,
                      int beam, int cap, char *err, size_t errlen);

/* Feeds one token per row at position d->t (BOS first) and returns the
 * next-token logits [rows, n_vocab] (d->logits, over the batch's
 * vocabulary: V, or the shortlisted columns; d->lse their log-normalisers;
 * all rows are live), or NULL when a product failed (d->error says why;
 * the batch cannot go on, pmt_decoder_start begins another).
 * Caller guarantees d->t < d->cap. */
const float *pmt_decoder_step(pmt_decoder *d, const int32_t *tokens);

/* As pmt_decoder_step, computing only the rows that matter: live[j] (NULL:
 * beam) is how many of sentence j's rows are live, its first ones. The
 * other rows (a beam's slots left empty by finished hypotheses) skip the
 * step's products and get no logits; their cache entries of this position
 * must never be read (a row that is not live is never a parent). Live rows
 * get what pmt_decoder_step would give them, up to the rounding of products
 * over fewer rows. Returns the logits of the live rows in row order,
 * [n_live, V]; pmt_decoder_logits_row finds a row's. */
const float *pmt_decoder_step_live(pmt_decoder *d, const int32_t *tokens, const int32_t *live);
/* (With d->visit set, the rows were visited and the returned pointer only
 * says that the step succeeded: its contents are not the logits.) */

/* The logits [n_vocab] of live row r of the last step (column c is token
 * c, or vocab_ids[c] when the batch is shortlisted). */
const float *pmt_decoder_logits_row(const pmt_decoder *d, int r);

/* Log-probability of token `id` (< V) in (live) row r of the last step:
 * −INFINITY when a shortlisted batch cannot output it. */
double pmt_decoder_logprob(const pmt_decoder *d, int r, int id);

/* Rearranges the batch after a search step: the kept sentences keep[0..n_keep)
 * (old sentence indices, strictly increasing) become sentences 0..n_keep-1,
 * and new row r (of n_keep*beam) continues old row parent[r], which must
 * belong to old sentence keep[r / beam]. parent == NULL means row r of each
 * kept sentence continues itself (sentence compaction only). */
void pmt_decoder_reorder(pmt_decoder *d, const int32_t *parent, const int32_t *keep, int n_keep);

#endif

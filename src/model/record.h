/*
 * record.h — the one reader and writer of the binary records that both
 * stored model formats are made of: checkpoints (checkpoint.h) and exported
 * model files (model_file.h). Each format keeps its own layout (which
 * fields, in which order, what its flags mean); the pieces they share live
 * here once: the source that remembers its first failure, the bounded
 * length-prefixed blob, the tensor table, the trailer (CRC and end of
 * stream) and the size limits that no real file reaches.
 *
 * Reading never believes a count before checking it against what the file
 * can inflate to (budget, pmt_gzstream_inflate_bound), in the unit the count
 * is in: nothing is allocated for bytes the file cannot hold.
 *
 * Messages name the file by its kind and path ("checkpoint 'x.ckpt' is
 * corrupted: ..."). After the first failure every call returns -1 at once,
 * so a format reads field after field and checks once.
 *
 * Ownership: the source borrows its stream, path and err buffer; the blob
 * and table readers allocate what they return (the caller frees, e.g. via
 * pmt_checkpoint_free).
 */
#ifndef PROJMT_MODEL_RECORD_H
#define PROJMT_MODEL_RECORD_H

#include <stddef.h>
#include <stdint.h>

#include "core/gzstream.h"
#include "model/checkpoint.h"

/* Bounds that no real file reaches: a length beyond them means damage. */
#define PMT_RECORD_MAX_CONFIG_BYTES (1u << 20)
#define PMT_RECORD_MAX_SPM_BYTES (1u << 28)
#define PMT_RECORD_MAX_TENSORS (1 << 20)
#define PMT_RECORD_MAX_PARAMS ((uint64_t)1 << 34)
/* Bytes of one tensor-table entry: name, rows, cols, offset, size. */
#define PMT_RECORD_TENSOR_ENTRY_BYTES (PMT_TENSOR_NAME_BYTES + 4 + 4 + 8 + 8)

/* The limits of the architecture a stored file may describe, in one place:
 * these values, and the one table that pairs each with its config key in
 * pmt_record_check_limits (record.c), checked before anything is sized by
 * the stored config (the loaders) or by any config (pmt_model_init). Each is far beyond any
 * model this project trains or could run on a CPU, and small enough that
 * every size computed from them (3 * d_model, vocab * d_model,
 * n_heads * rows * max_len, per layer) fits its integer type with room to
 * spare: a value beyond one is damage or a crafted file, refused by name.
 *   d_model       8192: 8x the Transformer-big width (1024); 3 * C and
 *                 the [V, C] embedding stay far inside int / PMT_RECORD_MAX_PARAMS.
 *   n_heads       256: 16x Transformer-big's 16; the attention
 *                 probabilities (n_heads x rows x max_len floats per site and
 *                 layer) grow with it and no tensor shows it (only σ of a
 *                 learned projection site), so the table cannot bound it.
 *   head size     1024 (d_model / n_heads): 8x the usual 64-128; sizes the
 *                 attention kernels' per-thread scratch.
 *   d_ff          65536: 16x Transformer-big's 4096.
 *   layers        1024 each side: above the deepest published translation
 *                 Transformers (DeepNet, 1000 layers); the per-layer tables
 *                 are allocated by this count before any tensor is matched.
 *   vocabulary    2^20 pieces: 4x the largest SentencePiece vocabularies in
 *                 use (~256k); sizes the logits (rows x V) and the embedding.
 *   max_len       PMT_MAX_LEN_CAP (core/config.h, with its reason).
 *   batch_tokens  2^20 tokens: 32x a large training batch; evaluation sizes
 *                 its arena (rows) by the stored value.
 * The shortlist's per-source count has its own limit next to its format
 * (PMT_SHORTLIST_MAX_PER_SOURCE, model/shortlist.h), checked where it is read. */
#define PMT_LIMIT_D_MODEL 8192
#define PMT_LIMIT_HEADS 256
#define PMT_LIMIT_HEAD_SIZE 1024
#define PMT_LIMIT_D_FF 65536
#define PMT_LIMIT_LAYERS 1024
#define PMT_LIMIT_VOCAB (1 << 20)
#define PMT_LIMIT_BATCH_TOKENS (1 << 20)

typedef struct pmt_record_source {
    pmt_gzstream *gz;
    const char *kind;            /* "checkpoint" | "model file": how messages name the file */
    const char *path;
    uint64_t budget;             /* most bytes the file can inflate to */
    char *err;
    size_t errlen;
    int failed;
} pmt_record_source;

/* Reads n bytes of `what` into p; a short read is "truncated or corrupted". 0 or -1. */
int pmt_record_get(pmt_record_source *s, void *p, size_t n, const char *what);
/* Records "<kind> '<path>' is truncated or corrupted (reading what: reason)"; -1. */
int pmt_record_truncated(pmt_record_source *s, const char *what);
/* Records "<kind> '<path>' is corrupted: " and the formatted detail (unless
 * a failure is recorded already); -1. */
int pmt_record_corrupt(pmt_record_source *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A count read from the file, checked before anything is sized by it:
 * count items of unit bytes must fit in the budget. 0, or -1 with
 * "its header claims N what, more than the file can hold". */
int pmt_record_claim(pmt_record_source *s, uint64_t count, uint64_t unit, const char *what);

/* A uint64 length, then that many bytes (at most limit, and within the
 * budget) into *out, malloc'd and NUL-terminated; *size the length. 0 or -1
 * (*out may be set: the caller frees it either way). */
int pmt_record_get_blob(pmt_record_source *s, char **out, size_t *size, uint64_t limit, const char *what);

/* The tensor table: int32 vocab_size, int32 n_tensors, then n entries
 * (name, rows, cols, offset, size; with storage non-NULL also a uint32 per
 * entry, returned in a malloc'd *storage). Fills ck->vocab_size, tensors and
 * n_tensors. Checks what every format needs: vocabulary >= 4, 1..MAX
 * tensors that the budget can hold, shapes >= 1 with size = rows x cols,
 * offsets within PMT_RECORD_MAX_PARAMS and in order without overlap. 0 or -1. */
int pmt_record_get_tensor_table(pmt_record_source *s, pmt_checkpoint *ck, uint32_t **storage);

/* Checks cfg and the vocabulary size V against the limits above (and the
 * lower bounds the sizes need: d_model >= 2, n_heads >= 1 dividing d_model,
 * d_ff, layers >= 1, V >= 4, max_len >= 4). 0, or -1 with
 * "<key> = <value> is beyond this build's limit of <limit> (<why>)" in why. */
int pmt_record_check_limits(const pmt_config *cfg, int V, char *why, size_t whylen);

/* The end of a file: the stored CRC matches and nothing follows. 0 or -1. */
int pmt_record_get_trailer(pmt_record_source *s);

/* Writes one tensor-table entry (the name zero-padded to PMT_TENSOR_NAME_BYTES). */
void pmt_record_put_tensor_entry(pmt_gzsink *s, const pmt_tensor *t);

#endif

/*
 * checkpoint.h — one self-contained file per checkpoint: everything needed
 * to translate (config, SentencePiece model, parameters) and, optionally,
 * everything needed to resume training exactly (Adam moments, step, data
 * position, best metric, counters, log window).
 *
 * Why self-contained: a checkpoint copied to another machine translates with
 * no data directory; the stored config rebuilds the same model.
 *
 * File (gzip stream via zlib; native little-endian values):
 *   char     magic[8] = "PMTCKPT\0";  uint32 version = 2;  uint32 flags
 *            (bit 0: Adam moments present, bit 1: training state present)
 *   uint64   config_len; char config[config_len]     (pmt_config_to_string INI)
 *   uint64   spm_len;    uint8 spm[spm_len]          (SentencePiece .model bytes)
 *   int32    vocab_size; int32 n_tensors
 *   n_tensors x { char name[64]; int32 rows, cols; uint64 offset, size }
 *   uint64   n_params;   float params[n_params]
 *   [bit 0]  float m[n_params], v[n_params]; int64 adam_t, bad_steps, skipped
 *   [bit 1]  uint32 n_fields; n_fields x { char name[32]; 8 bytes value }
 *            (the pmt_train_state fields by name: int64, uint64 or double)
 *   [bit 2]  float ema[n_params]   (exponential moving average of params, --ema)
 *   uint32   crc32 of every byte above (uncompressed)
 * Version 1 (read, no longer written) stored the training state as
 * uint32 136 and the first 17 fields of pmt_train_state as a raw struct.
 * Files (of either format) from builds before the fused Q|K|V projection,
 * with separate wq … bv tensors, are converted on load
 * (pmt_model_fuse_legacy_qkv, model/model.h).
 * Compatibility: the config is INI text and the state named fields, so a
 * build reads what a newer one wrote: unknown config keys and state fields
 * are skipped, named in pmt_checkpoint.ignored and in one pmt_log warning
 * (stderr in the program, the log callback in the library: core/log.h).
 * Bounds: every count is checked against sane limits and against what the
 * file's size can inflate to before anything is allocated for it; the
 * stored config, which sizes the model, must be within the limits of
 * model/record.h and imply exactly the stored tensor table.
 * A file that starts with "PMTMODEL" instead is an exported model
 * (model/model_file.h); pmt_checkpoint_load reads both.
 * Writes go through core/fileio.h (<path>.tmp, fsync, rename, directory
 * fsync): a reader sees the old file or the new one, never a partial one.
 *
 * Ownership: pmt_checkpoint owns every array it holds; pmt_checkpoint_free
 * releases them. Save functions only read their arguments.
 */
#ifndef PROJMT_CHECKPOINT_H
#define PROJMT_CHECKPOINT_H

#include <stddef.h>
#include <stdint.h>

#include "core/config.h"
#include "model/model.h"
#include "model/shortlist.h"
#include "data/spm.h"

#define PMT_CHECKPOINT_VERSION 2

/* The training loop's position and counters (8-byte fields only; stored by
 * name, see the table in checkpoint.c: a new field is one line there). */
typedef struct pmt_train_state {
    int64_t step;                /* optimizer steps taken (skipped ones included) */
    int64_t epoch;               /* data position: epoch of the next batch (0-based) */
    int64_t batch;               /* index of the next batch within that epoch */
    uint64_t seed;               /* seed of batch order and dropout streams */
    int64_t has_best;            /* best_metric is set */
    double best_metric;          /* best validation value of early_stopping_metric */
    int64_t stale_validations;   /* validations since the best (patience) */
    double elapsed_seconds;      /* training time over all sessions */
    int64_t tokens_seen;         /* source + target tokens trained on */
    /* Accumulators of the train.tsv row in progress, so rows after a resume
     * are the ones an uninterrupted run writes. */
    double win_loss_sum, win_nll_sum, win_grad_norm_sum;
    int64_t win_tokens, win_correct, win_steps, win_all_tokens;
    double win_seconds;
    /* Identity of the training split the position refers to (train.tok's
     * pair count and stored crc32); 0 when unknown (a version-1 file). */
    int64_t train_pairs;
    uint64_t train_checksum;
    /* A cosine or linear decay over a minutes budget: the step its end was
     * estimated at (train.c, at the end of warm-up), kept so a resumed run
     * follows the same schedule; 0 when not estimated. */
    int64_t decay_end;
} pmt_train_state;

/* Adam's state as plain arrays, so that this layer needs no optimizer type
 * (train/optim.h builds one from a pmt_optim and restores one into it). */
typedef struct pmt_adam_state {
    size_t n;                    /* values in m and v (= the model's n_params) */
    const float *m, *v;          /* [n] first and second moments (borrowed) */
    int64_t t, bad_steps, skipped;
} pmt_adam_state;

/* A checkpoint read into memory. */
typedef struct pmt_checkpoint {
    pmt_config cfg;              /* stored config, parsed over defaults */
    char *config_text;           /* as stored, NUL-terminated */
    uint8_t *spm;                /* SentencePiece model bytes */
    size_t spm_size;
    int vocab_size;
    pmt_tensor *tensors;
    int n_tensors;
    size_t n_params;
    float *params;
    int has_optim;               /* m, v and the counters below are set */
    float *adam_m, *adam_v;
    int64_t adam_t, adam_bad_steps, adam_skipped;
    int has_state;
    pmt_train_state state;
    uint32_t version;            /* format version of the file */
    char ignored[256];           /* config keys and state fields this build does not know ("" if none) */
    int has_ema;                 /* ema is set (trained with --ema) */
    float *ema;                  /* [n_params] moving average of params */
    int is_export;               /* read from an exported model file */
    int weights;                 /* pmt_weight_type the matrices were stored in (fp32 for checkpoints) */
    int params_are_ema;          /* params hold the moving average (exported so, or pmt_checkpoint_use_ema) */
    pmt_shortlist *shortlist;    /* owned; the vocabulary shortlist of an exported file (NULL: none) */
} pmt_checkpoint;

/* Writes model m (its config, tensor table and parameters) with the given
 * SentencePiece bytes; adam (NULL: none) adds Adam state, state (NULL: none)
 * the training position, ema (NULL: none; [m->n_params]) the moving average
 * of the parameters. Atomic. 0, or -1 with a message naming the file. */
int pmt_checkpoint_save(const char *path, const pmt_model *m, const void *spm, size_t spm_size,
                        const pmt_adam_state *adam, const pmt_train_state *state, const float *ema, char *err,
                        size_t errlen);

/* Reads and verifies a checkpoint (format version 1 or 2) or an exported
 * model file (told apart by the magic; an exported file has no Adam or
 * training state). Missing, truncated, corrupted, wrong-magic or
 * unknown-version files, counts the file cannot hold, and a stored config
 * beyond the limits of model/record.h or one whose architecture is not the
 * stored tensor table give -1 and a message naming the file (and the key,
 * value and limit, or the first tensor that differs). So a model built
 * from a loaded ck->cfg and ck->vocab_size is sized by what the file holds. Settings of a newer build are skipped with one
 * warning on stderr (ck->ignored). */
int pmt_checkpoint_load(pmt_checkpoint *ck, const char *path, char *err, size_t errlen);
void pmt_checkpoint_free(pmt_checkpoint *ck);
/* The tensor-table entry the stored formats share (checkpoints and
 * exported model files, model_file.h; read and written by model/record.h):
 * the name in a zero-padded field of PMT_TENSOR_NAME_BYTES, rows and cols
 * (int32), offset and size (uint64). */
enum { PMT_TENSOR_NAME_BYTES = 64 };

/* The weights to translate with: when ck holds a moving average (--ema),
 * it becomes ck->params (the raw parameters move to ck->ema) and
 * params_are_ema is set — what Marian's smoothed model.npz gives its users.
 * No-op without an average or when already applied. */
void pmt_checkpoint_use_ema(pmt_checkpoint *ck);

/* Copies the stored parameters into m after checking that m's tensor table
 * (names and shapes) is the stored one. 0, or -1 with err naming the mismatch. */
int pmt_checkpoint_copy_params(const pmt_checkpoint *ck, pmt_model *m, char *err, size_t errlen);

/* For inference (translator, bench --decode, attention, serve): loads path (a
 * checkpoint or an exported file; the moving average when the checkpoint
 * has one, see pmt_checkpoint_use_ema), initializes m inference-only (no
 * gradients or training arena, see pmt_model_init_inference) with the stored
 * config and vocabulary (arena for max_rows tokens per side; max_len <= 0 means the
 * stored max_len), copies the parameters and opens the stored SentencePiece
 * model into *spm (caller frees with pmt_spm_free; pass NULL to skip).
 * 0, or -1 with err; on failure nothing is left allocated. */
int pmt_checkpoint_load_model(const char *path, pmt_model *m, int max_rows, int max_len,
                              pmt_spm **spm, char *err, size_t errlen);
/* What the decoder of a loaded model m multiplies by (pmt_compute_type of
 * core/config.h): auto keeps what loading chose: the file's own type where
 * this CPU runs it fast (int8 with int8 dot products, bf16 with native
 * bf16), else fp32 over the file's weights;
 * fp32, bf16 and int8 take effect at decoder init (int8 and bf16 are the
 * weights `projmt export --weights` would store). bf16 needs native bf16
 * dot products: -1 with err naming the way out. */
int pmt_model_set_compute_type(pmt_model *m, int compute_type, char *err, size_t errlen);
/* One line on what the decoder of m multiplies with on this CPU (oneDNN's
 * effective ISA), for verbose output and benchmarks: the compute type and,
 * for int8, the path its integer products take. */
void pmt_model_describe_compute(const pmt_model *m, char *buf, size_t len);

#endif

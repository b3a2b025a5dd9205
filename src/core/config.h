/*
 * config.h — the one effective configuration of a projmt run.
 *
 * Every setting is a field of pmt_config, described once in a table
 * (config.c) that serves the INI reader (libinih), the command line
 * (`--batch-tokens 2048` sets key `batch_tokens`), --dump-config, --help and
 * the copy stored inside every checkpoint. Precedence: defaults < config file
 * (`--config FILE`) < command-line flags.
 *
 * Ownership: pmt_config is a plain value; string fields are fixed-size arrays,
 * so copies need no free.
 */
#ifndef PROJMT_CONFIG_H
#define PROJMT_CONFIG_H

#include <stdio.h>

#define PMT_PATH_MAX 1024
/* Room for every `source` entry of prepare (one per line, see config.c). */
#define PMT_SOURCES_TEXT 8192

/* Attention form at one site. */
typedef enum { PMT_ATTN_STANDARD = 0, PMT_ATTN_PROJECTION = 1 } pmt_attention_kind;
/* Attention sites, in the order used by every per-site array. */
enum { PMT_SITE_ENC_SELF = 0, PMT_SITE_DEC_SELF = 1, PMT_SITE_DEC_CROSS = 2, PMT_SITES = 3 };
/* Pooling kernel of the projection sites: weight K(d) of a key at distance d
 * from the query, for width σ, normalised over the row's visible keys. */
typedef enum {
    PMT_KERNEL_GAUSSIAN = 0,      /* exp(−d²/(2σ²)): Sanger's projection attention */
    PMT_KERNEL_BOXCAR = 1,        /* 1 if d ≤ σ, else 0 */
    PMT_KERNEL_CONSTANT = 2,      /* 1: the plain mean of the visible keys */
    PMT_KERNEL_EPANECHNIKOV = 3,  /* max(0, 1 − d²/σ²) */
    PMT_KERNELS = 4
} pmt_kernel;
/* Distance of the projection sites (per head; values stay the raw keys). */
typedef enum {
    PMT_METRIC_EUCLIDEAN = 0,     /* d² = |q − k|² */
    PMT_METRIC_DIAGONAL = 1,      /* d² = Σ_c a_c (q_c − k_c)², a_c = exp(learned) per head and site */
    PMT_METRIC_COSINE = 2,        /* q, k scaled onto a sphere of learned radius per head */
    PMT_METRIC_DOT = 3,           /* |q|² and |k|² dropped: "d²" = −2 q·k, logits q·k/σ² */
    PMT_METRICS = 4
} pmt_metric;

/* Precision of training's large matrix products (nn/gemm.h): fp32, or bf16
 * inputs with fp32 accumulation and outputs (master weights, gradients and
 * Adam moments stay fp32 either way). PMT_PRECISIONS counts those two.
 * auto (the default) is bf16 on a CPU with native bf16 dot products and
 * fp32 elsewhere: the programs that train resolve it before building a
 * model (pmt_gemm_precision_auto), so a model, a checkpoint and a bench
 * result always carry fp32 or bf16; a model built on an unresolved auto
 * runs fp32. */
typedef enum {
    PMT_PRECISION_FP32 = 0,
    PMT_PRECISION_BF16 = 1,
    PMT_PRECISIONS = 2,
    PMT_PRECISION_AUTO = 2
} pmt_precision;

/* The weights decoding multiplies by (as CTranslate2's compute_type): auto
 * is the model file's own type (a checkpoint's fp32); the others convert at
 * load, int8 and bf16 as `projmt export --weights` stores them. */
typedef enum {
    PMT_COMPUTE_AUTO = 0, PMT_COMPUTE_FP32 = 1, PMT_COMPUTE_BF16 = 2, PMT_COMPUTE_INT8 = 3, PMT_COMPUTE_TYPES = 4
} pmt_compute_type;

/* Upper bound of max_len. Attention keeps [T, S] blocks per sentence and
 * head (activations B·NH·T·S, per-thread scratch ~2·T·S floats), so memory
 * grows with the square of the length: 2048 tokens (several times the
 * longest sentence of any corpus we train on) keeps the per-thread scratch
 * near 33 MB. */
#define PMT_MAX_LEN_CAP 2048

typedef struct pmt_config {
    /* ---- data / prepare ---- */
    char corpus[PMT_PATH_MAX];      /* Anki TSV: English<TAB>Spanish[<TAB>attribution] */
    char src_file[PMT_PATH_MAX];    /* or two aligned plain-text files */
    char tgt_file[PMT_PATH_MAX];
    char sources[PMT_SOURCES_TEXT]; /* more corpora, one spec a line (repeatable key
                                       `source`; syntax in data/prepare_internal.h) */
    char dev_file[PMT_PATH_MAX];    /* validation split from this source spec ("" = carve) */
    char data_dir[PMT_PATH_MAX];    /* prepared data: splits, spm.model, *.tok */
    int valid_size;                 /* pairs held out for validation */
    int test_size;                  /* pairs held out for test */
    int max_words;                  /* drop pairs with a side longer than this (words) */
    double max_ratio;               /* drop pairs whose word-length ratio exceeds this */
    int vocab_size;                 /* joint SentencePiece vocabulary */
    char spm_model_type[32];        /* unigram | bpe */
    double character_coverage;
    int spm_sample_sentences;       /* SentencePiece trains on a seeded sample of this many lines (0 = all) */
    char spm_model[PMT_PATH_MAX];   /* encode with this SentencePiece model instead of training one ("" = train) */
    unsigned long seed;             /* shuffles, init, dropout, batching */

    /* ---- model ---- */
    int d_model, n_heads, d_ff, enc_layers, dec_layers;
    double dropout, label_smoothing;
    double attn_dropout;            /* dropout on each attention site's output before W_O (training) */
    int site_kind[PMT_SITES];       /* pmt_attention_kind per site */
    int sigma_learned;              /* projection σ: 0 fixed, 1 learned per head/site */
    int proj_kernel;                /* pmt_kernel of the projection sites */
    int proj_metric;                /* pmt_metric of the projection sites */
    double sigma_sq;                /* fixed / initial σ² (0: pmt_model_fixed_log_sigma's default) */
    int max_len;                    /* longest sequence in tokens (positions table, decoding);
                                       at most PMT_MAX_LEN_CAP */

    /* ---- training ---- */
    int batch_tokens;               /* source+target tokens incl. padding per batch */
    int accum;                      /* gradient accumulation steps */
    double lr, beta1, beta2, adam_eps, clip_norm, weight_decay;
    int warmup;
    char lr_schedule[16];           /* inverse-sqrt | cosine | linear (pmt_lr_schedule_kind) */
    int decay_steps;                /* cosine/linear: lr reaches min_lr here (0 = max_steps) */
    double min_lr;
    int epochs, max_steps;
    double minutes;
    int log_every, valid_every;
    char save_dir[PMT_PATH_MAX];    /* run folder: checkpoints and train.tsv */
    char init_from[PMT_PATH_MAX];   /* a new run starts from this model's weights ("" = from the seed) */
    int threads;                    /* 0 = all cores */
    int max_bad_steps;              /* consecutive NaN/Inf steps before giving up */
    int valid_bleu_sentences;       /* BLEU/chrF on this many valid sentences (0 = off) */
    char early_stopping_metric[16]; /* loss | accuracy | bleu | chrf */
    int patience;                   /* validations without improvement (0 = off) */
    double ema;                     /* decay of the parameters' moving average (0 = off) */
    int keep_last;                  /* keep this many step-N.ckpt files in save_dir (0 = none) */
    int precision;                  /* pmt_precision of the training products */

    /* ---- translation ---- */
    char model[PMT_PATH_MAX];       /* checkpoint to translate with */
    int beam_size, n_best;
    double normalize;               /* length penalty exponent α: score / len^α */
    double max_length_factor;       /* output limit = factor * source length + max_length_const */
    int max_length_const;
    int compute_type;               /* pmt_compute_type of decoding */
    int shortlist;                  /* candidates per source piece of the vocabulary shortlist (0 = off) */

    /* ---- serve (`projmt serve`; --api-key stays the command's own: a
     * secret is never printed by --dump-config nor stored in a checkpoint) ---- */
    char host[256];                 /* address to bind */
    int port;                       /* 0 = any free port */
    char card[PMT_PATH_MAX];        /* model card ("" = README.md beside the model) */
    int max_batch;                  /* sentences decoded together */
    int max_wait_ms;                /* wait for a batch to fill */
    int max_beam;                   /* largest beam_size a request may ask for */
    int max_sentences;              /* lines per request */
    int max_chars;                  /* characters per sentence */
    int split_sentences;            /* serve: texts cut into sentences (translate/segment.h) */
    int max_body;                   /* bytes per request body */
    int timeout;                    /* idle seconds before a connection is closed */
    int max_connections;            /* concurrent connections */
    int drain_timeout;              /* seconds SIGTERM waits for requests in flight */
    int request_timeout;            /* seconds from a request's headers to its answer */
    int max_connections_per_ip;     /* connections one client address may hold */
    char api_key_file[PMT_PATH_MAX];/* first line is the API key ("" = none) */
} pmt_config;

/* Fills every field with its default. */
void pmt_config_defaults(pmt_config *cfg);
/* Reads an INI file over cfg; returns 0, or -1 with a message in err. */
int pmt_config_load_file(pmt_config *cfg, const char *path, char *err, size_t errlen);
/* Parses an INI text over cfg; every key must be known. 0 or -1 with err. */
int pmt_config_load_string(pmt_config *cfg, const char *text, char *err, size_t errlen);
/* The same for the config stored in a checkpoint, which a newer build may
 * have written: unknown keys are skipped and named in ignored
 * (comma-separated, cut with "..." to fit ignored_len); a known key with a
 * value this build cannot read is still an error. 0 or -1 with err. */
int pmt_config_load_stored(pmt_config *cfg, const char *text, char *ignored, size_t ignored_len, char *err,
                           size_t errlen);
/* Sets one key (underscore or dash spelling) from a string value; 0 or -1 with err. */
int pmt_config_set(pmt_config *cfg, const char *key, const char *value, char *err, size_t errlen);
/* Writes the full effective config as INI text. */
void pmt_config_dump(const pmt_config *cfg, FILE *out);
/* Same into a malloc'd string (caller frees); NULL on allocation failure. */
char *pmt_config_to_string(const pmt_config *cfg);
/* Prints the keys (as --flags) whose group is one of groups ("data,model,...") with help text. */
void pmt_config_print_help(FILE *out, const char *groups);
/* The learning-rate decays after warm-up (the lr_schedule key's names). */
enum { PMT_LR_INVERSE_SQRT = 0, PMT_LR_COSINE = 1, PMT_LR_LINEAR = 2 };
/* PMT_LR_* of a lr_schedule name, or -1 if it is none of them. */
int pmt_lr_schedule_kind(const char *name);
/* The step where a cosine or linear decay ends: decay_steps, else max_steps (0: neither given). */
int pmt_config_decay_end(const pmt_config *cfg);
/* Checks ranges (heads divide d_model, ...); 0 or -1 with err. */
int pmt_config_validate(const pmt_config *cfg, char *err, size_t errlen);

/*
 * Parses argv for a subcommand: `--config FILE` first (wherever it appears),
 * then every other `--key value` / `--key=value` over it. `extra` lists the
 * subcommand's own options (NULL-terminated): a name ending in '=' takes a
 * value ("hyp=" matches --hyp FILE), any other is a switch ("json"); single
 * letters match one dash too ("i=" matches -i FILE). extra_val[i] receives the
 * value (argv storage) or "1" for a switch, and stays NULL when absent.
 * `--help`/`-h` sets *help; `--dump-config` sets *dump. Positional arguments
 * are an error. Returns 0, or -1 with a message naming the bad flag in err.
 */
int pmt_config_parse_args(pmt_config *cfg, int argc, char **argv,
                          const char *const *extra, const char **extra_val,
                          int *help, int *dump, char *err, size_t errlen);

const char *pmt_attention_kind_name(int kind);
/* Whether any of the three sites runs projection attention. */
int pmt_config_any_projection(const pmt_config *cfg);
/* Names as the config spells them ("epanechnikov", "cosine"). */
const char *pmt_kernel_name(int kernel);
const char *pmt_metric_name(int metric);
const char *pmt_precision_name(int precision);
const char *pmt_compute_type_name(int compute_type);

/* Checked integer parsing for every number read from a user: the whole of
 * text must be a base-10 integer in [min, max] ("1e3", "4x", "" and
 * overflows are refused, unlike atoi). 0 and *out set, or -1 (*out kept). */
int pmt_parse_int(const char *text, int min, int max, int *out);
/* Same with a message naming the option: "invalid value '1e3' for --beam: ...". */
int pmt_parse_int_option(const char *what, const char *text, int min, int max, int *out, char *err, size_t errlen);

#endif

/*
 * config.c — one table describes every setting (key, type, field, default,
 * group, help); the INI reader, the command line, --dump-config, --help and
 * the checkpoint's stored config are all walks over that table, so a new
 * setting is one line here and one field in config.h.
 */
#include "core/config.h"

#include "core/path.h"

#include <errno.h>
#include <ini.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

/* T_PATH is a T_STRING naming a file or folder: checked by pmt_path_check
 * ("" is allowed and means unset; whoever needs the path refuses "").
 * T_LIST is a repeatable key (`source`): each value is appended as one line
 * of the field, an empty value clears it; --dump-config writes the empty
 * value first and then one line per entry, so the text reads back as
 * itself, and the first command-line flag of the key replaces the config
 * file's list (flags override the file, as for every key). */
typedef enum {
    T_INT, T_ULONG, T_DOUBLE, T_STRING, T_PATH, T_LIST, T_KIND, T_SIGMA, T_KERNEL, T_METRIC, T_PRECISION, T_COMPUTE
} field_type;

typedef struct {
    const char *key;      /* INI key; the CLI flag is the same with '-' for '_' */
    field_type type;
    size_t offset;
    size_t size;          /* for strings: buffer size */
    const char *dflt;     /* default, as text */
    const char *group;    /* data | model | train | translate | serve */
    const char *help;
    int min, max;         /* T_INT with min < max: the values allowed (named when one is refused) */
} field;

#define F(key, type, member, dflt, group, help) \
    {key, type, offsetof(pmt_config, member), sizeof(((pmt_config *)0)->member), dflt, group, help, 0, 0}
/* A T_INT key with its range. */
#define FI(key, member, dflt, lo, hi, group, help) \
    {key, T_INT, offsetof(pmt_config, member), sizeof(((pmt_config *)0)->member), dflt, group, help, lo, hi}

static const field fields[] = {
    F("corpus", T_PATH, corpus, "", "data", "Anki/Tatoeba TSV: English<TAB>Spanish[<TAB>attribution]"),
    F("src_file", T_PATH, src_file, "", "data", "aligned plain-text source (English) file"),
    F("tgt_file", T_PATH, tgt_file, "", "data", "aligned plain-text target (Spanish) file"),
    F("source", T_LIST, sources, "", "data",
      "another corpus, repeatable: PATH[:OPTIONS] (TSV) or EN_PATH+ES_PATH[:OPTIONS] (line-aligned files); "
      "OPTIONS: en=COL,es=COL,weight=N,name=NAME,max_words=N,max_ratio=X,markup=drop,primary (projmt prepare --help)"),
    F("dev_file", T_STRING, dev_file, "", "data",
      "validation split from this source (same syntax as --source) instead of carving it from the primary"),
    F("data_dir", T_PATH, data_dir, "data/spa-eng", "data,train", "prepared data directory"),
    F("valid_size", T_INT, valid_size, "2000", "data", "sentence pairs held out for validation"),
    F("test_size", T_INT, test_size, "2000", "data", "sentence pairs held out for test"),
    F("max_words", T_INT, max_words, "50", "data", "drop pairs with a side longer than this many words"),
    F("max_ratio", T_DOUBLE, max_ratio, "3.0", "data", "drop pairs whose word-length ratio exceeds this"),
    F("vocab_size", T_INT, vocab_size, "8000", "data", "joint SentencePiece vocabulary size"),
    F("spm_model_type", T_STRING, spm_model_type, "unigram", "data", "SentencePiece model: unigram or bpe"),
    F("character_coverage", T_DOUBLE, character_coverage, "1.0", "data", "SentencePiece character coverage"),
    FI("spm_sample_sentences", spm_sample_sentences, "400000", 0, 2000000000, "data",
       "train SentencePiece on a seeded sample of at most this many training sentences (English and Spanish lines "
       "count alike; 0 = every line), so its memory does not grow with the corpus"),
    F("spm_model", T_PATH, spm_model, "", "data",
      "encode with this SentencePiece model (e.g. DIR/spm.model of the data a model was trained on, to fine-tune "
      "it on other data with train --init-from) instead of training one; vocab_size, spm_model_type, "
      "character_coverage and spm_sample_sentences then do not apply"),
    F("seed", T_ULONG, seed, "1", "data,train", "random seed (shuffle, split, init, dropout, batches)"),

    F("d_model", T_INT, d_model, "256", "model", "model width C"),
    F("n_heads", T_INT, n_heads, "4", "model", "attention heads NH (HS = C / NH)"),
    F("d_ff", T_INT, d_ff, "1024", "model", "feed-forward width F"),
    F("enc_layers", T_INT, enc_layers, "3", "model", "encoder layers"),
    F("dec_layers", T_INT, dec_layers, "3", "model", "decoder layers"),
    F("dropout", T_DOUBLE, dropout, "0.1", "model", "dropout on embeddings and residual branches"),
    F("label_smoothing", T_DOUBLE, label_smoothing, "0.1", "model", "label smoothing epsilon"),
    F("attn_dropout", T_DOUBLE, attn_dropout, "0", "model",
      "dropout on every attention site's output (the pooled values) before W_O, in training"),
    {"encoder_self", T_KIND, offsetof(pmt_config, site_kind) + PMT_SITE_ENC_SELF * sizeof(int), sizeof(int),
     "standard", "model", "encoder self-attention: standard | projection", 0, 0},
    {"decoder_self", T_KIND, offsetof(pmt_config, site_kind) + PMT_SITE_DEC_SELF * sizeof(int), sizeof(int),
     "standard", "model", "decoder self-attention: standard | projection", 0, 0},
    {"decoder_cross", T_KIND, offsetof(pmt_config, site_kind) + PMT_SITE_DEC_CROSS * sizeof(int), sizeof(int),
     "standard", "model", "decoder cross-attention: standard | projection", 0, 0},
    F("sigma", T_SIGMA, sigma_learned, "fixed", "model", "projection sigma: fixed | learned (per head and site)"),
    F("kernel", T_KERNEL, proj_kernel, "gaussian", "model",
      "projection pooling kernel: gaussian | boxcar | constant | epanechnikov"),
    F("proj_metric", T_METRIC, proj_metric, "euclidean", "model",
      "projection distance: euclidean | diagonal (learned weight per dimension) | cosine (sphere of learned "
      "radius) | dot (q.k/sigma^2, no norm terms)"),
    F("sigma_sq", T_DOUBLE, sigma_sq, "0", "model",
      "projection sigma^2, fixed or initial (0: sqrt(HS) for gaussian, 2*HS for boxcar/epanechnikov)"),
    F("max_len", T_INT, max_len, "128", "model", "longest sequence in tokens (at most 2048)"),

    F("batch_tokens", T_INT, batch_tokens, "4096", "train", "source+target tokens (with padding) per batch"),
    F("accum", T_INT, accum, "1", "train", "gradient accumulation steps"),
    F("lr", T_DOUBLE, lr, "7e-4", "train", "peak learning rate"),
    F("warmup", T_INT, warmup, "1000", "train", "linear warm-up steps to the peak lr, then lr_schedule's decay"),
    F("lr_schedule", T_STRING, lr_schedule, "inverse-sqrt", "train",
      "decay after warm-up: inverse-sqrt (lr * sqrt(warmup / step), open-ended) | cosine | linear (from lr down "
      "to min_lr at decay_steps, then min_lr; for a known budget)"),
    F("decay_steps", T_INT, decay_steps, "0", "train",
      "cosine and linear: the step at which lr reaches min_lr (0 = max_steps; with neither, the step the minutes "
      "budget is expected to reach, estimated from the pace of warm-up, and the run ends there)"),
    F("min_lr", T_DOUBLE, min_lr, "0", "train", "cosine and linear: the lr at and after decay_steps"),
    F("beta1", T_DOUBLE, beta1, "0.9", "train", "Adam beta1"),
    F("beta2", T_DOUBLE, beta2, "0.98", "train", "Adam beta2"),
    F("adam_eps", T_DOUBLE, adam_eps, "1e-9", "train", "Adam epsilon"),
    F("clip_norm", T_DOUBLE, clip_norm, "1.0", "train", "clip gradients to this global norm (0 = off)"),
    F("weight_decay", T_DOUBLE, weight_decay, "0", "train", "decoupled weight decay (AdamW)"),
    F("epochs", T_INT, epochs, "10", "train", "stop after this many epochs (0 = no limit)"),
    F("max_steps", T_INT, max_steps, "0", "train", "stop after this many steps (0 = no limit)"),
    F("minutes", T_DOUBLE, minutes, "0", "train", "stop after this many minutes (0 = no limit)"),
    F("log_every", T_INT, log_every, "50", "train", "log a training row every K steps"),
    F("valid_every", T_INT, valid_every, "1000", "train", "validate every M steps (and at each epoch end)"),
    F("save_dir", T_PATH, save_dir, "models/run", "train", "run folder: checkpoints and train.tsv"),
    F("init_from", T_PATH, init_from, "", "train",
      "fine-tuning: a new run starts from this checkpoint's (or fp32 export's) weights, its moving average when it "
      "has one, with a new optimizer, schedule and data position; the data must use its vocabulary (prepare "
      "--spm-model). A run that resumes from save_dir/last.ckpt continues from there instead"),
    F("threads", T_INT, threads, "0", "train,translate", "threads (0 = all cores)"),
    F("max_bad_steps", T_INT, max_bad_steps, "10", "train", "stop after this many consecutive NaN/Inf steps"),
    F("valid_bleu_sentences", T_INT, valid_bleu_sentences, "500", "train", "validation BLEU/chrF on this many sentences (0 = off)"),
    F("early_stopping_metric", T_STRING, early_stopping_metric, "loss", "train", "best checkpoint metric: loss | accuracy | bleu | chrf"),
    F("patience", T_INT, patience, "0", "train", "stop after this many validations without improvement (0 = off)"),
    F("ema", T_DOUBLE, ema, "0", "train", "keep an exponential moving average of the weights with this decay, e.g. 0.9999 (0 = off)"),
    F("keep_last", T_INT, keep_last, "0", "train", "also save step-N.ckpt at each save and keep the newest N (0 = off)"),
    F("precision", T_PRECISION, precision, "auto", "train",
      "training matrix products: auto (bf16 where the CPU has native bf16 dot products, else fp32) | fp32 | bf16 "
      "(bf16 inputs, fp32 accumulation; needs avx512_bf16 or AMX)"),

    F("model", T_PATH, model, "", "translate", "checkpoint or exported model file"),
    F("beam_size", T_INT, beam_size, "4", "translate", "beam size (1 = greedy)"),
    F("n_best", T_INT, n_best, "1", "translate", "hypotheses printed per sentence"),
    F("normalize", T_DOUBLE, normalize, "1.0", "translate", "length normalization: score / length^alpha"),
    F("max_length_factor", T_DOUBLE, max_length_factor, "1.5", "translate", "output limit: factor * source length + const"),
    F("max_length_const", T_INT, max_length_const, "10", "translate", "output limit constant"),
    F("compute_type", T_COMPUTE, compute_type, "auto", "translate",
      "weights decoding multiplies by: auto (the file's own where this CPU runs it fast, else fp32) | fp32 | bf16 | int8 (converted at load, as export stores them)"),
    FI("shortlist", shortlist, "0", 0, 1000, "translate",
       "vocabulary shortlist: each batch's output vocabulary is its sources' first K candidates and the frequent "
       "pieces (needs a model exported with --shortlist; 0 = the whole vocabulary, exact)"),

    F("host", T_STRING, host, "127.0.0.1", "serve", "address to bind (0.0.0.0 = every interface)"),
    FI("port", port, "8080", 0, 65535, "serve", "port (0 = any free port, printed at start)"),
    F("card", T_PATH, card, "", "serve",
      "model card whose BLEU/chrF rows /info and the page show (\"\" = README.md beside the model, if present)"),
    FI("max_batch", max_batch, "32", 1, 4096, "serve", "sentences decoded together"),
    FI("max_wait_ms", max_wait_ms, "5", 0, 60000, "serve", "milliseconds a batch waits to fill"),
    FI("max_beam", max_beam, "8", 1, 256, "serve", "largest beam_size a request may ask for"),
    FI("max_sentences", max_sentences, "128", 1, 1048576, "serve", "lines per request"),
    FI("max_chars", max_chars, "1000", 1, 16777216, "serve", "characters per sentence"),
    FI("split_sentences", split_sentences, "1", 0, 1, "serve",
       "cut each text into sentences before translating, as LibreTranslate does (0 = each line as one sentence)"),
    FI("max_body", max_body, "65536", 16, 1073741824, "serve", "bytes per request body"),
    FI("timeout", timeout, "10", 1, 86400, "serve", "close connections idle for this many seconds"),
    FI("max_connections", max_connections, "256", 1, 65536, "serve", "concurrent connections"),
    FI("drain_timeout", drain_timeout, "30", 0, 86400, "serve",
      "seconds a stop (SIGTERM/SIGINT) waits for the requests in flight before closing their connections"),
    FI("request_timeout", request_timeout, "60", 1, 86400, "serve",
      "seconds from a request's headers to its answer; a client still sending its body then gets 408"),
    FI("max_connections_per_ip", max_connections_per_ip, "16", 1, 65536, "serve",
      "connections one client address may hold at once (further ones are closed at accept)"),
    F("api_key_file", T_PATH, api_key_file, "", "serve",
      "file whose first line is the API key (or set PROJMT_API_KEY): unlike --api-key, not shown by ps"),
};
enum { N_FIELDS = sizeof fields / sizeof fields[0] };

static const char *const kind_names[] = {"standard", "projection"};
static const char *const kernel_names[PMT_KERNELS] = {"gaussian", "boxcar", "constant", "epanechnikov"};
static const char *const metric_names[PMT_METRICS] = {"euclidean", "diagonal", "cosine", "dot"};
static const char *const precision_names[PMT_PRECISIONS + 1] = {"fp32", "bf16", "auto"};
static const char *const compute_type_names[PMT_COMPUTE_TYPES] = {"auto", "fp32", "bf16", "int8"};

const char *pmt_compute_type_name(int compute_type) {
    return compute_type >= 0 && compute_type < PMT_COMPUTE_TYPES ? compute_type_names[compute_type] : "?";
}

const char *pmt_kernel_name(int kernel) {
    return kernel >= 0 && kernel < PMT_KERNELS ? kernel_names[kernel] : "?";
}

const char *pmt_metric_name(int metric) {
    return metric >= 0 && metric < PMT_METRICS ? metric_names[metric] : "?";
}

const char *pmt_precision_name(int precision) {
    return precision >= 0 && precision <= PMT_PRECISION_AUTO ? precision_names[precision] : "?";
}

/* Index of value in names[0..n), or -1. */
static int parse_name(const char *value, const char *const *names, int n) {
    for (int i = 0; i < n; i++)
        if (!strcmp(value, names[i])) return i;
    return -1;
}

const char *pmt_attention_kind_name(int kind) {
    return (kind == PMT_ATTN_PROJECTION) ? kind_names[1] : kind_names[0];
}

int pmt_config_any_projection(const pmt_config *cfg) {
    for (int s = 0; s < PMT_SITES; s++)
        if (cfg->site_kind[s] == PMT_ATTN_PROJECTION) return 1;
    return 0;
}

/* Keys compare with '-' and '_' treated alike, so flags and INI keys match. */
static int key_equal(const char *a, const char *b) {
    for (; *a && *b; a++, b++) {
        char ca = (*a == '-') ? '_' : *a, cb = (*b == '-') ? '_' : *b;
        if (ca != cb) return 0;
    }
    return *a == *b;
}

static const field *find_field(const char *key) {
    for (int i = 0; i < N_FIELDS; i++)
        if (key_equal(fields[i].key, key)) return &fields[i];
    return NULL;
}

static int parse_kind(const char *v) {
    for (int k = 0; k < 2; k++)
        if (!strcmp(v, kind_names[k])) return k;
    return -1;
}

int pmt_parse_int(const char *text, int min, int max, int *out) {
    char *end = NULL;
    errno = 0;
    long v = strtol(text, &end, 10);
    if (end == text || *end || errno || v < min || v > max) return -1;
    *out = (int)v;
    return 0;
}

int pmt_parse_int_option(const char *what, const char *text, int min, int max, int *out, char *err, size_t errlen) {
    if (pmt_parse_int(text, min, max, out) == 0) return 0;
    snprintf(err, errlen, "invalid value '%s' for %s: need a whole number from %d to %d", text, what, min, max);
    return -1;
}

/* Every config is stored as INI text inside its checkpoints and read back
 * with libinih, which strips surrounding whitespace, ends a value at a ';'
 * that follows whitespace (an inline comment) and a line at a newline. A
 * string that would not read back as itself is refused when set, so a
 * checkpoint always restores the config it was trained with. */
static int ini_safe(const field *f, const char *value, char *err, size_t errlen) {
    size_t n = strlen(value);
    /* libinih reads lines of at most INI_MAX_LINE - 1 bytes with the
     * newline: the stored line is "key = value\n". */
    size_t max_value = (size_t)INI_MAX_LINE - 1 - strlen(f->key) - 4;
    if (n > max_value) {
        snprintf(err, errlen, "value of '%s' is %zu bytes; the config stored in checkpoints holds at most %zu "
                 "(libinih's line limit): use a shorter (e.g. relative) path", f->key, n, max_value);
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)value[i];
        const char *why = NULL;
        if (c < 0x20 || c == 0x7f) why = "a control character";
        else if (c == ';' && (i == 0 || value[i - 1] == ' ')) why = "a ';' at its start or after a space";
        if (why) {
            snprintf(err, errlen, "value of '%s' contains %s (byte %zu), which the stored config cannot hold",
                     f->key, why, i);
            return -1;
        }
    }
    if (n > 0 && (value[0] == ' ' || value[n - 1] == ' ')) {
        snprintf(err, errlen, "value of '%s' starts or ends with a space, which the stored config cannot hold",
                 f->key);
        return -1;
    }
    return 0;
}

static int set_field(pmt_config *cfg, const field *f, const char *value, char *err, size_t errlen) {
    char *p = (char *)cfg + f->offset;
    char *end = NULL;
    errno = 0;
    switch (f->type) {
    case T_INT:
        if (f->min < f->max) {
            if (pmt_parse_int(value, f->min, f->max, (int *)p) != 0) {
                snprintf(err, errlen, "invalid value '%s' for '%s': an integer from %d to %d (%s)", value, f->key,
                         f->min, f->max, f->help);
                return -1;
            }
            return 0;
        }
        if (pmt_parse_int(value, -2147483647, 2147483647, (int *)p) != 0) goto bad;
        return 0;
    case T_ULONG: {
        if (value[0] == '-') goto bad;
        unsigned long v = strtoul(value, &end, 10);
        if (end == value || *end || errno) goto bad;
        *(unsigned long *)p = v;
        return 0;
    }
    case T_DOUBLE: {
        double v = strtod(value, &end);
        if (end == value || *end || errno || !isfinite(v)) goto bad;
        *(double *)p = v;
        return 0;
    }
    case T_LIST: {
        if (!value[0]) { p[0] = '\0'; return 0; }
        if (ini_safe(f, value, err, errlen) != 0) return -1;
        size_t used = strlen(p), n = strlen(value);
        if (used + (used > 0) + n >= f->size) {
            snprintf(err, errlen, "too many or too long values for '%s' (all together at most %zu bytes)", f->key,
                     f->size - 1);
            return -1;
        }
        if (used) p[used++] = '\n';
        memcpy(p + used, value, n + 1);
        return 0;
    }
    case T_PATH:
        if (pmt_path_check(f->key, value, 1, err, errlen) != 0) return -1;
        /* fall through - stored like any string */
    case T_STRING:
        if (ini_safe(f, value, err, errlen) != 0) return -1;
        if (strlen(value) >= f->size) {
            snprintf(err, errlen, "value of '%s' is too long (max %zu bytes)", f->key, f->size - 1);
            return -1;
        }
        memcpy(p, value, strlen(value) + 1);
        return 0;
    case T_KIND: {
        int k = parse_kind(value);
        if (k < 0) goto bad;
        *(int *)p = k;
        return 0;
    }
    case T_SIGMA:
        if (!strcmp(value, "fixed")) *(int *)p = 0;
        else if (!strcmp(value, "learned")) *(int *)p = 1;
        else goto bad;
        return 0;
    case T_KERNEL: {
        /* The issue that asked for the kernel spelled it "epanechikov". */
        int k = !strcmp(value, "epanechikov") ? PMT_KERNEL_EPANECHNIKOV : parse_name(value, kernel_names, PMT_KERNELS);
        if (k < 0) goto bad;
        *(int *)p = k;
        return 0;
    }
    case T_METRIC:
    case T_PRECISION:
    case T_COMPUTE: {
        int k = f->type == T_METRIC      ? parse_name(value, metric_names, PMT_METRICS)
                : f->type == T_PRECISION ? parse_name(value, precision_names, PMT_PRECISION_AUTO + 1)
                                         : parse_name(value, compute_type_names, PMT_COMPUTE_TYPES);
        if (k < 0) goto bad;
        *(int *)p = k;
        return 0;
    }
    }
bad:
    snprintf(err, errlen, "invalid value '%s' for '%s' (%s)", value, f->key, f->help);
    return -1;
}

int pmt_config_set(pmt_config *cfg, const char *key, const char *value, char *err, size_t errlen) {
    /* `attention` is shorthand for all three sites. */
    if (key_equal(key, "attention")) {
        int k = parse_kind(value);
        if (k < 0) {
            snprintf(err, errlen, "invalid value '%s' for 'attention' (standard | projection)", value);
            return -1;
        }
        for (int s = 0; s < PMT_SITES; s++) cfg->site_kind[s] = k;
        return 0;
    }
    const field *f = find_field(key);
    if (!f) {
        snprintf(err, errlen, "unknown setting '%s' (see --help for the list)", key);
        return -1;
    }
    return set_field(cfg, f, value, err, errlen);
}

void pmt_config_defaults(pmt_config *cfg) {
    char err[256];
    memset(cfg, 0, sizeof *cfg);
    for (int i = 0; i < N_FIELDS; i++) {
        int rc = set_field(cfg, &fields[i], fields[i].dflt, err, sizeof err);
        (void)rc;
    }
}

static void format_field(const pmt_config *cfg, const field *f, char *buf, size_t len) {
    const char *p = (const char *)cfg + f->offset;
    switch (f->type) {
    case T_INT: snprintf(buf, len, "%d", *(const int *)p); break;
    case T_ULONG: snprintf(buf, len, "%lu", *(const unsigned long *)p); break;
    case T_DOUBLE: snprintf(buf, len, "%.17g", *(const double *)p); break;
    case T_STRING:
    case T_PATH:
    case T_LIST: snprintf(buf, len, "%s", p); break;
    case T_KIND: snprintf(buf, len, "%s", pmt_attention_kind_name(*(const int *)p)); break;
    case T_SIGMA: snprintf(buf, len, "%s", *(const int *)p ? "learned" : "fixed"); break;
    case T_KERNEL: snprintf(buf, len, "%s", pmt_kernel_name(*(const int *)p)); break;
    case T_METRIC: snprintf(buf, len, "%s", pmt_metric_name(*(const int *)p)); break;
    case T_PRECISION: snprintf(buf, len, "%s", pmt_precision_name(*(const int *)p)); break;
    case T_COMPUTE: snprintf(buf, len, "%s", pmt_compute_type_name(*(const int *)p)); break;
    }
}

/* INI text of every setting, grouped in sections (sections are informative:
 * keys are unique, so the reader ignores them). */
static size_t write_ini(const pmt_config *cfg, char *out, size_t cap) {
    size_t n = 0;
    char section[32] = "";
    char value[PMT_PATH_MAX + 32];
    for (int i = 0; i < N_FIELDS; i++) {
        const char *group = fields[i].group;
        size_t glen = strcspn(group, ",");
        if (strncmp(section, group, glen) || section[glen] != '\0') {
            snprintf(section, sizeof section, "%.*s", (int)glen, group);
            n += (size_t)snprintf(out ? out + n : NULL, out ? cap - n : 0, "%s[%s]\n", i ? "\n" : "", section);
        }
        if (fields[i].type == T_LIST) {
            /* the empty value first (it clears), then one line per entry */
            const char *entry = (const char *)cfg + fields[i].offset;
            n += (size_t)snprintf(out ? out + n : NULL, out ? cap - n : 0, "%s = \n", fields[i].key);
            while (*entry) {
                int len = (int)strcspn(entry, "\n");
                n += (size_t)snprintf(out ? out + n : NULL, out ? cap - n : 0, "%s = %.*s\n", fields[i].key, len,
                                      entry);
                entry += len + (entry[len] == '\n');
            }
            continue;
        }
        format_field(cfg, &fields[i], value, sizeof value);
        n += (size_t)snprintf(out ? out + n : NULL, out ? cap - n : 0, "%s = %s\n", fields[i].key, value);
    }
    return n;
}

char *pmt_config_to_string(const pmt_config *cfg) {
    size_t n = write_ini(cfg, NULL, 0);
    char *s = malloc(n + 1);
    if (!s) return NULL;
    write_ini(cfg, s, n + 1);
    return s;
}

void pmt_config_dump(const pmt_config *cfg, FILE *out) {
    char *s = pmt_config_to_string(cfg);
    if (s) fputs(s, out);
    free(s);
}

void pmt_config_print_help(FILE *out, const char *groups) {
    char value[PMT_PATH_MAX + 32], flag[64];
    pmt_config d;
    pmt_config_defaults(&d);
    for (int i = 0; i < N_FIELDS; i++) {
        /* A field is shown when any of its groups is listed. */
        int shown = 0;
        const char *g = fields[i].group;
        while (*g && !shown) {
            size_t len = strcspn(g, ",");
            const char *w = groups;
            while (*w && !shown) {
                size_t wl = strcspn(w, ",");
                if (wl == len && !strncmp(g, w, len)) shown = 1;
                w += wl + (w[wl] == ',');
            }
            g += len + (g[len] == ',');
        }
        if (!shown) continue;
        snprintf(flag, sizeof flag, "--%s", fields[i].key);
        for (char *c = flag; *c; c++) if (*c == '_') *c = '-';
        format_field(&d, &fields[i], value, sizeof value);
        fprintf(out, "  %-26s %s (default: %s)\n", flag, fields[i].help, value[0] ? value : "none");
    }
    if (strstr(groups, "model"))
        fprintf(out, "  %-26s %s\n", "--attention", "shorthand: set all three sites to standard | projection");
}

/* ignored (NULL: strict) collects the names of unknown keys instead of
 * failing on them. */
typedef struct { pmt_config *cfg; char *err; size_t errlen; int failed; char *ignored; size_t ignored_len; } ini_ctx;

/* Appends name to the comma-separated list (cut, with "...", when full). */
static void list_append(char *list, size_t len, const char *name) {
    size_t used = strlen(list);
    if (used + 4 >= len || (used >= 3 && !strcmp(list + used - 3, "..."))) return;
    int n = snprintf(list + used, len - used, "%s%s", used ? ", " : "", name);
    if (n < 0 || (size_t)n >= len - used) snprintf(list + (len > 4 ? len - 4 : 0), 4, "...");
}

static int config_ini_handler(void *user, const char *section, const char *name, const char *value) {
    (void)section;
    ini_ctx *ctx = user;
    if (ctx->failed) return 0;
    if (ctx->ignored && !find_field(name) && !key_equal(name, "attention")) {
        list_append(ctx->ignored, ctx->ignored_len, name);
        return 1;
    }
    if (pmt_config_set(ctx->cfg, name, value, ctx->err, ctx->errlen) != 0) {
        ctx->failed = 1;
        return 0;
    }
    return 1;
}

int pmt_config_load_file(pmt_config *cfg, const char *path, char *err, size_t errlen) {
    char inner[512] = "";
    ini_ctx ctx = {cfg, inner, sizeof inner, 0, NULL, 0};
    FILE *f = fopen(path, "r");
    if (!f) {
        snprintf(err, errlen, "cannot open config file '%s': %s", path, strerror(errno));
        return -1;
    }
    int rc = ini_parse_file(f, config_ini_handler, &ctx);
    fclose(f);
    if (rc != 0) {
        snprintf(err, errlen, "config file '%s', line %d: %s", path, rc > 0 ? rc : 0,
                 ctx.failed ? inner : "syntax error");
        return -1;
    }
    return 0;
}

static int load_string(pmt_config *cfg, const char *text, char *ignored, size_t ignored_len, char *err,
                       size_t errlen) {
    char inner[512] = "";
    ini_ctx ctx = {cfg, inner, sizeof inner, 0, ignored, ignored_len};
    if (ignored && ignored_len) ignored[0] = '\0';
    int rc = ini_parse_string(text, config_ini_handler, &ctx);
    if (rc != 0) {
        snprintf(err, errlen, "stored config, line %d: %s", rc, ctx.failed ? inner : "syntax error");
        return -1;
    }
    return 0;
}

int pmt_config_load_string(pmt_config *cfg, const char *text, char *err, size_t errlen) {
    return load_string(cfg, text, NULL, 0, err, errlen);
}

int pmt_config_load_stored(pmt_config *cfg, const char *text, char *ignored, size_t ignored_len, char *err,
                           size_t errlen) {
    /* A stored config without the key predates it: that model trained in
     * fp32 (never auto, which only a run resolves). */
    cfg->precision = PMT_PRECISION_FP32;
    return load_string(cfg, text, ignored, ignored_len, err, errlen);
}

int pmt_lr_schedule_kind(const char *name) {
    if (!strcmp(name, "inverse-sqrt")) return PMT_LR_INVERSE_SQRT;
    if (!strcmp(name, "cosine")) return PMT_LR_COSINE;
    if (!strcmp(name, "linear")) return PMT_LR_LINEAR;
    return -1;
}

int pmt_config_decay_end(const pmt_config *cfg) { return cfg->decay_steps > 0 ? cfg->decay_steps : cfg->max_steps; }

int pmt_config_validate(const pmt_config *cfg, char *err, size_t errlen) {
#define REQUIRE(cond, ...) do { if (!(cond)) { snprintf(err, errlen, __VA_ARGS__); return -1; } } while (0)
    REQUIRE(cfg->data_dir[0], "data_dir is empty: give the folder `projmt prepare` wrote");
    REQUIRE(cfg->save_dir[0], "save_dir is empty: give the run folder for checkpoints and train.tsv");
    REQUIRE(cfg->d_model > 0 && cfg->n_heads > 0 && cfg->d_model % cfg->n_heads == 0,
            "d_model (%d) must be a positive multiple of n_heads (%d)", cfg->d_model, cfg->n_heads);
    REQUIRE(cfg->d_model % 2 == 0, "d_model (%d) must be even (sinusoidal positions)", cfg->d_model);
    REQUIRE(cfg->d_ff > 0, "d_ff must be positive (got %d)", cfg->d_ff);
    REQUIRE(cfg->enc_layers >= 1 && cfg->dec_layers >= 1, "enc_layers and dec_layers must be >= 1");
    REQUIRE(cfg->dropout >= 0 && cfg->dropout < 1, "dropout must be in [0, 1) (got %g)", cfg->dropout);
    REQUIRE(cfg->attn_dropout >= 0 && cfg->attn_dropout < 1, "attn_dropout must be in [0, 1) (got %g)",
            cfg->attn_dropout);
    REQUIRE(cfg->label_smoothing >= 0 && cfg->label_smoothing < 1,
            "label_smoothing must be in [0, 1) (got %g)", cfg->label_smoothing);
    REQUIRE(cfg->max_len >= 4 && cfg->max_len <= PMT_MAX_LEN_CAP, "max_len must be in [4, %d] (got %d)",
            PMT_MAX_LEN_CAP, cfg->max_len);
    REQUIRE(cfg->batch_tokens >= 2 * cfg->max_len,
            "batch_tokens (%d) must hold at least one pair of max_len (%d) sentences", cfg->batch_tokens, cfg->max_len);
    REQUIRE(cfg->accum >= 1, "accum must be >= 1");
    REQUIRE(cfg->ema >= 0 && cfg->ema < 1, "ema must be in [0, 1) (got %g; 0 = off)", cfg->ema);
    REQUIRE(cfg->keep_last >= 0, "keep_last must be >= 0 (got %d)", cfg->keep_last);
    REQUIRE(cfg->lr > 0, "lr must be positive");
    REQUIRE(cfg->warmup >= 0, "warmup must be >= 0 (got %d)", cfg->warmup);
    REQUIRE(pmt_lr_schedule_kind(cfg->lr_schedule) >= 0,
            "lr_schedule must be inverse-sqrt, cosine or linear (got '%s')", cfg->lr_schedule);
    REQUIRE(cfg->min_lr >= 0 && cfg->min_lr <= cfg->lr, "min_lr must be in [0, lr (%g)] (got %g)", cfg->lr,
            cfg->min_lr);
    REQUIRE(cfg->decay_steps >= 0, "decay_steps must be >= 0 (got %d)", cfg->decay_steps);
    if (pmt_lr_schedule_kind(cfg->lr_schedule) != PMT_LR_INVERSE_SQRT) {
        const int end = pmt_config_decay_end(cfg);
        REQUIRE(end > 0 || cfg->minutes > 0,
                "lr_schedule %s decays over a known budget: give decay_steps, max_steps or minutes", cfg->lr_schedule);
        REQUIRE(end > 0 || cfg->warmup > 0,
                "lr_schedule %s over a time limit needs warmup > 0: warm-up's pace estimates the step it ends at",
                cfg->lr_schedule);
        REQUIRE(end == 0 || end > cfg->warmup, "lr_schedule %s: decay_steps (%d) must be larger than warmup (%d)",
                cfg->lr_schedule, end, cfg->warmup);
    }
    REQUIRE(cfg->vocab_size >= 16, "vocab_size must be at least 16");
    REQUIRE(cfg->valid_size >= 0 && cfg->test_size >= 0, "valid_size and test_size must be >= 0");
    REQUIRE(cfg->beam_size >= 1, "beam_size must be >= 1");
    REQUIRE(cfg->n_best >= 1 && cfg->n_best <= cfg->beam_size, "n_best (%d) must be in [1, beam_size (%d)]",
            cfg->n_best, cfg->beam_size);
    REQUIRE(!strcmp(cfg->early_stopping_metric, "loss") || !strcmp(cfg->early_stopping_metric, "accuracy") ||
            !strcmp(cfg->early_stopping_metric, "bleu") || !strcmp(cfg->early_stopping_metric, "chrf"),
            "early_stopping_metric must be loss, accuracy, bleu or chrf (got '%s')", cfg->early_stopping_metric);
    if (pmt_config_any_projection(cfg)) {
        const int flat = cfg->proj_kernel == PMT_KERNEL_BOXCAR || cfg->proj_kernel == PMT_KERNEL_CONSTANT;
        REQUIRE(cfg->sigma_sq >= 0, "sigma_sq must be >= 0 (0: the kernel's default; got %g)", cfg->sigma_sq);
        REQUIRE(cfg->proj_metric != PMT_METRIC_DOT || cfg->proj_kernel == PMT_KERNEL_GAUSSIAN,
                "proj_metric dot gives scores, not distances: it needs kernel gaussian (got %s)",
                pmt_kernel_name(cfg->proj_kernel));
        REQUIRE(!flat || !cfg->sigma_learned,
                "kernel %s has no gradient with respect to sigma: use sigma fixed (and sigma_sq to set it)",
                pmt_kernel_name(cfg->proj_kernel));
        REQUIRE(!flat || cfg->proj_metric == PMT_METRIC_EUCLIDEAN,
                "kernel %s has no gradient with respect to distances, so the %s metric could not learn: use "
                "proj_metric euclidean", pmt_kernel_name(cfg->proj_kernel), pmt_metric_name(cfg->proj_metric));
    }
#undef REQUIRE
    return 0;
}

/* Matches argv[i] against a subcommand option; returns its index or -1. */
static int match_extra(const char *arg, const char *const *extra, int *takes_value) {
    if (!extra) return -1;
    for (int i = 0; extra[i]; i++) {
        size_t len = strlen(extra[i]);
        int with_value = len > 0 && extra[i][len - 1] == '=';
        size_t name_len = len - (size_t)with_value;
        const char *name = NULL;
        if (arg[0] == '-' && arg[1] == '-') name = arg + 2;
        else if (arg[0] == '-' && name_len == 1) name = arg + 1;
        if (name && strlen(name) == name_len && !strncmp(name, extra[i], name_len)) {
            *takes_value = with_value;
            return i;
        }
    }
    return -1;
}

int pmt_config_parse_args(pmt_config *cfg, int argc, char **argv,
                          const char *const *extra, const char **extra_val,
                          int *help, int *dump, char *err, size_t errlen) {
    *help = 0;
    *dump = 0;
    unsigned char list_replaced[N_FIELDS] = {0};   /* T_LIST keys a flag already set */
    if (extra)
        for (int i = 0; extra[i]; i++) extra_val[i] = NULL;
    /* The config file goes first, whatever its position, so flags override it. */
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--config")) {
            if (i + 1 >= argc) { snprintf(err, errlen, "--config needs a file name"); return -1; }
            if (pmt_config_load_file(cfg, argv[i + 1], err, errlen) != 0) return -1;
        } else if (!strncmp(argv[i], "--config=", 9)) {
            if (pmt_config_load_file(cfg, argv[i] + 9, err, errlen) != 0) return -1;
        }
    }
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        int takes_value = 0;
        int x = match_extra(arg, extra, &takes_value);
        if (x >= 0) {
            if (takes_value) {
                if (i + 1 >= argc) { snprintf(err, errlen, "option %s needs a value", arg); return -1; }
                extra_val[x] = argv[++i];
            } else {
                extra_val[x] = "1";
            }
            continue;
        }
        if (!strcmp(arg, "--help") || !strcmp(arg, "-h")) { *help = 1; continue; }
        if (!strcmp(arg, "--dump-config")) { *dump = 1; continue; }
        if (!strcmp(arg, "--config")) { i++; continue; }
        if (!strncmp(arg, "--config=", 9)) continue;
        if (arg[0] != '-' || arg[1] != '-' || !arg[2]) {
            snprintf(err, errlen, "unexpected argument '%s' (options are --key value; see --help)", arg);
            return -1;
        }
        char key[128];
        const char *eq = strchr(arg + 2, '=');
        const char *value;
        size_t klen = eq ? (size_t)(eq - (arg + 2)) : strlen(arg + 2);
        if (klen >= sizeof key) { snprintf(err, errlen, "unknown option '%s'", arg); return -1; }
        memcpy(key, arg + 2, klen);
        key[klen] = '\0';
        if (eq) {
            value = eq + 1;
        } else {
            if (i + 1 >= argc) { snprintf(err, errlen, "option --%s needs a value", key); return -1; }
            value = argv[++i];
        }
        const field *f = find_field(key);
        if (f && f->type == T_LIST && !list_replaced[f - fields]) {
            list_replaced[f - fields] = 1;
            ((char *)cfg + f->offset)[0] = '\0';   /* the flags' list replaces the file's */
        }
        if (pmt_config_set(cfg, key, value, err, errlen) != 0) return -1;
    }
    return 0;
}

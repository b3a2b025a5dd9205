/*
 * checkpoint.c — see checkpoint.h for the format. Writing and reading go
 * through a sink/source pair over the checksummed gzip stream of
 * core/gzstream.h that remembers the first failure, so each field is one
 * call and errors are checked once.
 */
#include "model/checkpoint.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/gzstream.h"
#include "model/model_file.h"
#include "nn/gemm.h"

static const char MAGIC[8] = {'P', 'M', 'T', 'C', 'K', 'P', 'T', '\0'};
enum { FLAG_OPTIM = 1, FLAG_STATE = 2, FLAG_EMA = 4 };
/* Bounds that no real checkpoint reaches: a length beyond them means damage. */
#define MAX_CONFIG_BYTES (1u << 20)
#define MAX_SPM_BYTES (1u << 28)
#define MAX_TENSORS (1 << 20)
#define MAX_PARAMS ((uint64_t)1 << 34)
#define MAX_STATE_FIELDS 256u
/* Bytes per tensor-table entry: name, rows, cols, offset, size. */
#define TENSOR_ENTRY_BYTES (PMT_TENSOR_NAME_BYTES + 4 + 4 + 8 + 8)
enum { STATE_NAME_BYTES = 32, STATE_FIELDS_V1 = 17 };

/* The training state by name. Every field is 8 bytes and stored as its
 * bytes; the first STATE_FIELDS_V1, in this order, were version 1's raw
 * struct. A new field is one line at the end. */
#define S(field) {#field, offsetof(pmt_train_state, field)}
static const struct { const char *name; size_t offset; } state_fields[] = {
    S(step), S(epoch), S(batch), S(seed), S(has_best), S(best_metric), S(stale_validations),
    S(elapsed_seconds), S(tokens_seen), S(win_loss_sum), S(win_nll_sum), S(win_grad_norm_sum),
    S(win_tokens), S(win_correct), S(win_steps), S(win_all_tokens), S(win_seconds),
    S(train_pairs), S(train_checksum),
};
#undef S
enum { N_STATE_FIELDS = sizeof state_fields / sizeof state_fields[0] };
_Static_assert(N_STATE_FIELDS * 8 == sizeof(pmt_train_state), "every pmt_train_state field is in state_fields");

_Static_assert(sizeof(pmt_tensor) >= PMT_TENSOR_NAME_BYTES, "tensor names fit the stored field");

/* ------------------------------------------------------------------ */
/* writing                                                             */

void pmt_checkpoint_put_tensor_entry(struct pmt_gzsink *s, const pmt_tensor *t) {
    char name[PMT_TENSOR_NAME_BYTES] = {0};
    snprintf(name, sizeof name, "%s", t->name);
    pmt_gzsink_put(s, name, sizeof name);
    pmt_gzsink_i32(s, t->rows);
    pmt_gzsink_i32(s, t->cols);
    pmt_gzsink_u64(s, t->offset);
    pmt_gzsink_u64(s, t->size);
}

static void put_tensor_table(pmt_gzsink *s, const pmt_model *m) {
    pmt_gzsink_i32(s, m->V);
    pmt_gzsink_i32(s, m->n_tensors);
    for (int i = 0; i < m->n_tensors; i++) pmt_checkpoint_put_tensor_entry(s, &m->tensors[i]);
}

static void put_payload(pmt_gzsink *s, const pmt_model *m, const char *config, const void *spm, size_t spm_size,
                        const pmt_adam_state *adam, const pmt_train_state *state, const float *ema) {
    pmt_gzsink_put(s, MAGIC, sizeof MAGIC);
    pmt_gzsink_u32(s, PMT_CHECKPOINT_VERSION);
    pmt_gzsink_u32(s, (adam ? FLAG_OPTIM : 0) | (state ? FLAG_STATE : 0) | (ema ? FLAG_EMA : 0));
    pmt_gzsink_u64(s, strlen(config));
    pmt_gzsink_put(s, config, strlen(config));
    pmt_gzsink_u64(s, spm_size);
    pmt_gzsink_put(s, spm, spm_size);
    put_tensor_table(s, m);
    pmt_gzsink_u64(s, m->n_params);
    pmt_gzsink_put(s, m->params, m->n_params * sizeof(float));
    if (adam) {
        pmt_gzsink_put(s, adam->m, m->n_params * sizeof(float));
        pmt_gzsink_put(s, adam->v, m->n_params * sizeof(float));
        pmt_gzsink_i64(s, adam->t);
        pmt_gzsink_i64(s, adam->bad_steps);
        pmt_gzsink_i64(s, adam->skipped);
    }
    if (state) {
        pmt_gzsink_u32(s, N_STATE_FIELDS);
        for (int i = 0; i < N_STATE_FIELDS; i++) {
            char name[STATE_NAME_BYTES] = {0};
            snprintf(name, sizeof name, "%s", state_fields[i].name);
            pmt_gzsink_put(s, name, sizeof name);
            pmt_gzsink_put(s, (const char *)state + state_fields[i].offset, 8);
        }
    }
    if (ema) pmt_gzsink_put(s, ema, m->n_params * sizeof(float));
}

/* What pmt_checkpoint_save writes, for pmt_gzstream_save's body. */
typedef struct {
    const pmt_model *m;
    const char *config;
    const void *spm;
    size_t spm_size;
    const pmt_adam_state *adam;
    const pmt_train_state *state;
    const float *ema;
} payload;

static int write_payload(pmt_gzstream *gz, void *user) {
    const payload *p = user;
    pmt_gzsink s = {gz, 0};
    put_payload(&s, p->m, p->config, p->spm, p->spm_size, p->adam, p->state, p->ema);
    return s.failed ? -1 : 0;
}

int pmt_checkpoint_save(const char *path, const pmt_model *m, const void *spm, size_t spm_size,
                        const pmt_adam_state *adam, const pmt_train_state *state, const float *ema, char *err,
                        size_t errlen) {
    if (adam && adam->n != m->n_params) {
        snprintf(err, errlen, "checkpoint '%s': optimizer holds %zu values for %zu parameters", path, adam->n,
                 m->n_params);
        return -1;
    }
    char *config = pmt_config_to_string(&m->cfg);
    if (!config) {
        snprintf(err, errlen, "checkpoint '%s': out of memory", path);
        return -1;
    }
    payload p = {m, config, spm, spm_size, adam, state, ema};
    int rc = pmt_gzstream_save(path, 1, "checkpoint", write_payload, &p, err, errlen);
    free(config);
    return rc;
}

/* ------------------------------------------------------------------ */
/* reading                                                             */

typedef struct {
    pmt_gzstream gz;
    const char *path;
    char *err;
    size_t errlen;
    int failed;
    uint64_t budget;             /* most bytes the file can inflate to */
} source;

/* A read of `what` came up short: the file ends early or does not inflate. */
static int read_failed(source *s, const char *what) {
    snprintf(s->err, s->errlen, "checkpoint '%s' is truncated or corrupted (reading %s: %s)", s->path, what,
             pmt_gzstream_reason(&s->gz));
    s->failed = 1;
    return -1;
}

static int get(source *s, void *p, size_t n, const char *what) {
    if (s->failed) return -1;
    return pmt_gzstream_read(&s->gz, p, n) == 0 ? 0 : read_failed(s, what);
}

static int fail(source *s, const char *fmt, const char *detail) {
    if (!s->failed) {
        char what[256];
        snprintf(what, sizeof what, fmt, detail);
        snprintf(s->err, s->errlen, "checkpoint '%s' is corrupted: %s", s->path, what);
    }
    s->failed = 1;
    return -1;
}

/* A count read from the file, checked before anything is sized by it:
 * count items of unit bytes must fit in what the file can inflate to. */
static int claim(source *s, uint64_t count, uint64_t unit, const char *what) {
    if (s->failed) return -1;
    if (count <= s->budget / unit) return 0;
    snprintf(s->err, s->errlen, "checkpoint '%s' is corrupted: its header claims %llu %s, more than the file can "
             "hold", s->path, (unsigned long long)count, what);
    s->failed = 1;
    return -1;
}

static int get_header(source *s, uint32_t *flags, uint32_t *version_out) {
    char magic[sizeof MAGIC];
    uint32_t version;
    if (get(s, magic, sizeof magic, "magic") != 0) return -1;
    if (memcmp(magic, PMT_MODEL_FILE_MAGIC, sizeof magic) == 0) return 1;
    if (memcmp(magic, MAGIC, sizeof MAGIC) != 0) {
        snprintf(s->err, s->errlen, "'%s' is not a projmt checkpoint or exported model (bad magic number)", s->path);
        s->failed = 1;
        return -1;
    }
    if (get(s, &version, sizeof version, "version") != 0) return -1;
    if (version < 1 || version > PMT_CHECKPOINT_VERSION) {
        snprintf(s->err, s->errlen,
                 "checkpoint '%s' has format version %u, but this projmt reads versions 1 to %d "
                 "(use the projmt that wrote it, or retrain)", s->path, version, PMT_CHECKPOINT_VERSION);
        s->failed = 1;
        return -1;
    }
    *version_out = version;
    if (get(s, flags, sizeof *flags, "flags") != 0) return -1;
    if (*flags & ~(uint32_t)(FLAG_OPTIM | FLAG_STATE | FLAG_EMA)) return fail(s, "%s", "unknown flags");
    return 0;
}

/* A length-prefixed blob, bounded; text gets a terminating NUL. */
static int get_blob(source *s, void **out, size_t *size, uint64_t limit, const char *what) {
    uint64_t n;
    if (get(s, &n, sizeof n, what) != 0) return -1;
    if (n > limit) return fail(s, "implausible length of %s", what);
    if (claim(s, n, 1, what) != 0) return -1;
    *out = malloc((size_t)n + 1);
    if (!*out) return fail(s, "no memory for %s", what);
    ((char *)*out)[n] = '\0';
    *size = (size_t)n;
    return get(s, *out, (size_t)n, what);
}

static int get_tensor_table(source *s, pmt_checkpoint *ck) {
    int32_t v, n;
    if (get(s, &v, sizeof v, "vocab size") != 0 || get(s, &n, sizeof n, "tensor count") != 0) return -1;
    if (v < 4 || n < 1 || n > MAX_TENSORS) return fail(s, "%s", "implausible vocabulary size or tensor count");
    if (claim(s, (uint64_t)n, TENSOR_ENTRY_BYTES, "tensors") != 0) return -1;
    ck->vocab_size = v;
    ck->tensors = calloc((size_t)n, sizeof *ck->tensors);
    if (!ck->tensors) return fail(s, "%s", "no memory for the tensor table");
    ck->n_tensors = n;
    for (int i = 0; i < n; i++) {
        pmt_tensor *t = &ck->tensors[i];
        char name[PMT_TENSOR_NAME_BYTES];
        int32_t rows, cols;
        uint64_t offset, size;
        if (get(s, name, sizeof name, "tensor table") != 0 || get(s, &rows, sizeof rows, "tensor table") != 0 ||
            get(s, &cols, sizeof cols, "tensor table") != 0 || get(s, &offset, sizeof offset, "tensor table") != 0 ||
            get(s, &size, sizeof size, "tensor table") != 0)
            return -1;
        name[PMT_TENSOR_NAME_BYTES - 1] = '\0';
        snprintf(t->name, sizeof t->name, "%s", name);
        t->rows = rows;
        t->cols = cols;
        t->offset = (size_t)offset;
        t->size = (size_t)size;
        /* Tensors follow each other without overlap (the layout may pad). */
        uint64_t prev_end = i ? (uint64_t)ck->tensors[i - 1].offset + ck->tensors[i - 1].size : 0;
        if (rows < 1 || cols < 1 || size != (uint64_t)rows * (uint64_t)cols || offset > MAX_PARAMS ||
            offset < prev_end)
            return fail(s, "bad shape or offset of tensor '%s'", t->name);
    }
    return 0;
}

static int get_floats(source *s, float **out, size_t n, const char *what) {
    *out = malloc((n ? n : 1) * sizeof(float));
    if (!*out) return fail(s, "no memory for %s", what);
    return get(s, *out, n * sizeof(float), what);
}

static int get_params(source *s, pmt_checkpoint *ck, uint32_t flags) {
    uint64_t n;
    if (get(s, &n, sizeof n, "parameter count") != 0) return -1;
    if (n > MAX_PARAMS) return fail(s, "%s", "implausible parameter count");
    /* parameters, Adam's two moments and the moving average when present */
    const uint64_t copies = 1 + ((flags & FLAG_OPTIM) ? 2 : 0) + ((flags & FLAG_EMA) ? 1 : 0);
    if (claim(s, n, sizeof(float) * copies, "parameters") != 0) return -1;
    const pmt_tensor *last = &ck->tensors[ck->n_tensors - 1];
    if (last->offset + last->size != n) return fail(s, "%s", "tensor table does not cover the parameters");
    ck->n_params = (size_t)n;
    return get_floats(s, &ck->params, ck->n_params, "parameters");
}

static int get_optim(source *s, pmt_checkpoint *ck) {
    if (get_floats(s, &ck->adam_m, ck->n_params, "Adam moments") != 0 ||
        get_floats(s, &ck->adam_v, ck->n_params, "Adam moments") != 0 ||
        get(s, &ck->adam_t, sizeof ck->adam_t, "Adam step") != 0 ||
        get(s, &ck->adam_bad_steps, sizeof ck->adam_bad_steps, "Adam step") != 0 ||
        get(s, &ck->adam_skipped, sizeof ck->adam_skipped, "Adam step") != 0)
        return -1;
    ck->has_optim = 1;
    return 0;
}

/* Version 1: the first STATE_FIELDS_V1 fields as a raw struct. */
static int get_state_v1(source *s, pmt_checkpoint *ck) {
    uint32_t size;
    if (get(s, &size, sizeof size, "training state") != 0) return -1;
    if (size != STATE_FIELDS_V1 * 8) return fail(s, "%s", "training state has an unexpected size");
    for (int i = 0; i < STATE_FIELDS_V1; i++)
        if (get(s, (char *)&ck->state + state_fields[i].offset, 8, "training state") != 0) return -1;
    return 0;
}

/* Appends name to the comma-separated list (cut with "..." when full). */
static void note_ignored(pmt_checkpoint *ck, const char *name) {
    size_t used = strlen(ck->ignored), cap = sizeof ck->ignored;
    if (used + strlen(name) + 6 >= cap) {
        if (used + 4 < cap && (used < 3 || strcmp(ck->ignored + used - 3, "..."))) strcat(ck->ignored, "...");
        return;
    }
    snprintf(ck->ignored + used, cap - used, "%s%s", used ? ", " : "", name);
}

/* Version 2: named fields; names this build does not know are skipped. */
static int get_state_v2(source *s, pmt_checkpoint *ck) {
    uint32_t n;
    if (get(s, &n, sizeof n, "training state") != 0) return -1;
    if (n > MAX_STATE_FIELDS) return fail(s, "%s", "implausible number of training state fields");
    for (uint32_t k = 0; k < n; k++) {
        char name[STATE_NAME_BYTES];
        unsigned char value[8];
        if (get(s, name, sizeof name, "training state") != 0 || get(s, value, sizeof value, "training state") != 0)
            return -1;
        name[STATE_NAME_BYTES - 1] = '\0';
        int found = 0;
        for (int i = 0; i < N_STATE_FIELDS && !found; i++)
            if (!strcmp(name, state_fields[i].name)) {
                memcpy((char *)&ck->state + state_fields[i].offset, value, 8);
                found = 1;
            }
        if (!found) note_ignored(ck, name);
    }
    return 0;
}

static int get_state(source *s, pmt_checkpoint *ck) {
    if ((ck->version == 1 ? get_state_v1(s, ck) : get_state_v2(s, ck)) != 0) return -1;
    ck->has_state = 1;
    return 0;
}

/* The stored CRC must match, and the stream must end right after it. */
static int get_trailer(source *s) {
    int crc = pmt_gzstream_check_crc(&s->gz);
    if (crc < 0) return read_failed(s, "checksum");
    if (crc > 0) return fail(s, "%s", "checksum mismatch");
    int end = pmt_gzstream_at_end(&s->gz);
    if (end != 1) return fail(s, "%s", end == 0 ? "trailing data" : pmt_gzstream_reason(&s->gz));
    return 0;
}

static int read_checkpoint(source *s, pmt_checkpoint *ck) {
    uint32_t flags;
    void *config = NULL, *spm = NULL;
    size_t config_len, spm_len;
    int kind = get_header(s, &flags, &ck->version);
    if (kind == 1) return pmt_model_file_read(&s->gz, s->path, s->budget, ck, s->err, s->errlen);
    if (kind != 0) return -1;
    if (get_blob(s, &config, &config_len, MAX_CONFIG_BYTES, "config") != 0) { free(config); return -1; }
    ck->config_text = config;
    if (get_blob(s, &spm, &spm_len, MAX_SPM_BYTES, "SentencePiece model") != 0) { free(spm); return -1; }
    ck->spm = spm;
    ck->spm_size = spm_len;
    if (get_tensor_table(s, ck) != 0 || get_params(s, ck, flags) != 0) return -1;
    if ((flags & FLAG_OPTIM) && get_optim(s, ck) != 0) return -1;
    if ((flags & FLAG_STATE) && get_state(s, ck) != 0) return -1;
    if (flags & FLAG_EMA) {
        if (get_floats(s, &ck->ema, ck->n_params, "moving average") != 0) return -1;
        ck->has_ema = 1;
    }
    if (get_trailer(s) != 0) return -1;
    char inner[200], keys[sizeof ck->ignored];
    pmt_config_defaults(&ck->cfg);
    if (pmt_config_load_stored(&ck->cfg, ck->config_text, keys, sizeof keys, inner, sizeof inner) != 0)
        return fail(s, "%s", inner);
    if (keys[0]) {   /* config keys first, then the state fields noted while reading */
        char fields[sizeof ck->ignored];
        snprintf(fields, sizeof fields, "%s", ck->ignored);
        ck->ignored[0] = '\0';
        note_ignored(ck, keys);
        if (fields[0]) note_ignored(ck, fields);
    }
    if (ck->ignored[0])
        fprintf(stderr, "projmt: warning: checkpoint '%s' was written by a newer projmt; ignoring what this "
                "build does not know: %s\n", s->path, ck->ignored);
    return 0;
}

/* Files of builds before the fused Q/K/V projection (checkpoints and
 * exported models alike) come out in the current tensor layout: parameters,
 * Adam moments and the moving average are permuted together, so training
 * resumes exactly where it stopped. */
static int fuse_legacy_qkv(source *s, pmt_checkpoint *ck) {
    char inner[240];
    float *const arrays[] = {ck->params, ck->adam_m, ck->adam_v, ck->ema};
    if (pmt_model_fuse_legacy_qkv(ck->tensors, &ck->n_tensors, arrays, 4, inner, sizeof inner) < 0)
        return fail(s, "%s", inner);
    return 0;
}

int pmt_checkpoint_load(pmt_checkpoint *ck, const char *path, char *err, size_t errlen) {
    memset(ck, 0, sizeof *ck);
    source s = {.path = path, .err = err, .errlen = errlen};
    struct stat st;
    if (stat(path, &st) != 0) {
        snprintf(err, errlen, "cannot open checkpoint '%s': %s", path, strerror(errno));
        return -1;
    }
    s.budget = pmt_gzstream_inflate_bound((uint64_t)st.st_size);
    if (pmt_gzstream_open_read(&s.gz, path) != 0) {
        snprintf(err, errlen, "cannot open checkpoint '%s': %s", path, errno ? strerror(errno) : "out of memory");
        return -1;
    }
    int rc = read_checkpoint(&s, ck);
    if (pmt_gzstream_close(&s.gz) != 0 && rc == 0) rc = fail(&s, "%s", "error closing the file");
    if (rc == 0) rc = fuse_legacy_qkv(&s, ck);
    if (rc != 0) pmt_checkpoint_free(ck);
    return rc;
}

void pmt_checkpoint_free(pmt_checkpoint *ck) {
    free(ck->config_text);
    free(ck->spm);
    free(ck->tensors);
    free(ck->params);
    free(ck->adam_m);
    free(ck->adam_v);
    free(ck->ema);
    memset(ck, 0, sizeof *ck);
}

void pmt_checkpoint_use_ema(pmt_checkpoint *ck) {
    if (!ck->has_ema || ck->params_are_ema) return;
    float *raw = ck->params;
    ck->params = ck->ema;
    ck->ema = raw;
    ck->params_are_ema = 1;
}

/* ------------------------------------------------------------------ */
/* into a model                                                        */

int pmt_checkpoint_copy_params(const pmt_checkpoint *ck, pmt_model *m, char *err, size_t errlen) {
    /* The first differing tensor says most about which setting changed. */
    int n = ck->n_tensors < m->n_tensors ? ck->n_tensors : m->n_tensors;
    for (int i = 0; i < n; i++) {
        const pmt_tensor *a = &ck->tensors[i], *b = &m->tensors[i];
        if (strcmp(a->name, b->name) || a->rows != b->rows || a->cols != b->cols || a->offset != b->offset) {
            snprintf(err, errlen, "the checkpoint's model differs: its tensor %d is '%s' [%d x %d], this model's "
                     "is '%s' [%d x %d]", i, a->name, a->rows, a->cols, b->name, b->rows, b->cols);
            return -1;
        }
    }
    if (ck->vocab_size != m->V || ck->n_tensors != m->n_tensors || ck->n_params != m->n_params) {
        snprintf(err, errlen,
                 "the checkpoint's model (vocab %d, %d tensors, %zu parameters) differs from this model "
                 "(vocab %d, %d tensors, %zu parameters)",
                 ck->vocab_size, ck->n_tensors, ck->n_params, m->V, m->n_tensors, m->n_params);
        return -1;
    }
    memcpy(m->params, ck->params, m->n_params * sizeof(float));
    return 0;
}

int pmt_model_set_compute_type(pmt_model *m, int compute_type, char *err, size_t errlen) {
    switch (compute_type) {
    case PMT_COMPUTE_AUTO: return 0;
    case PMT_COMPUTE_FP32: m->decode_weights = PMT_WEIGHTS_FP32; return 0;
    case PMT_COMPUTE_INT8:
        if (pmt_model_round_weights(m, PMT_WEIGHTS_INT8, err, errlen) != 0) return -1;
        m->decode_weights = PMT_WEIGHTS_INT8;
        return 0;
    case PMT_COMPUTE_BF16:
        if (!pmt_cpu_has_bf16()) {
            snprintf(err, errlen, "compute type bf16 needs a CPU with native bf16 dot products (avx512_bf16); "
                     "use --compute-type int8 or fp32");
            return -1;
        }
        if (pmt_model_round_weights(m, PMT_WEIGHTS_BF16, err, errlen) != 0) return -1;
        m->decode_weights = PMT_WEIGHTS_BF16;
        return 0;
    default:
        snprintf(err, errlen, "unknown compute type %d", compute_type);
        return -1;
    }
}

void pmt_model_describe_compute(const pmt_model *m, char *buf, size_t len) {
    switch (m->decode_weights) {
    case PMT_WEIGHTS_INT8: snprintf(buf, len, "compute type int8 on %s (%s)", pmt_cpu_isa_name(), pmt_int8_path_name()); break;
    case PMT_WEIGHTS_BF16:
        snprintf(buf, len, "compute type bf16 on %s (oneDNN bf16 matmul, fp32 accumulation)", pmt_cpu_isa_name());
        break;
    default: snprintf(buf, len, "compute type fp32 on %s (%s sgemm)", pmt_cpu_isa_name(), pmt_gemm_name(pmt_gemm_active()));
    }
}

int pmt_checkpoint_load_model(const char *path, pmt_model *m, int max_rows, int max_len,
                              pmt_spm **spm, char *err, size_t errlen) {
    pmt_checkpoint ck;
    char inner[256];
    if (pmt_checkpoint_load(&ck, path, err, errlen) != 0) return -1;
    pmt_checkpoint_use_ema(&ck);
    int len = max_len > 0 ? max_len : ck.cfg.max_len;
    if (pmt_model_init_inference(m, &ck.cfg, ck.vocab_size, max_rows, len, inner, sizeof inner) != 0) {
        snprintf(err, errlen, "checkpoint '%s': %s", path, inner);
        pmt_checkpoint_free(&ck);
        return -1;
    }
    if (pmt_checkpoint_copy_params(&ck, m, inner, sizeof inner) != 0) {
        snprintf(err, errlen, "checkpoint '%s': %s", path, inner);
        goto fail;
    }
    /* Low-precision files decode in their precision where this CPU runs it
     * fast (compute type auto): the decoder rounds the widened weights
     * again, which gives back the stored ones. int8 needs int8 dot products
     * (VNNI, AMX): without them oneDNN's exact int8 (nn/gemm.h, split
     * weights) is slower than fp32 (docs/isa.md); bf16 needs native bf16.
     * Elsewhere the widened weights (the same values) decode in fp32;
     * --compute-type int8 still forces the exact int8 products. */
    if ((ck.weights == PMT_WEIGHTS_INT8 && pmt_cpu_has_int8_dot()) ||
        (ck.weights == PMT_WEIGHTS_BF16 && pmt_cpu_has_bf16()))
        m->decode_weights = ck.weights;
    if (spm) {
        *spm = pmt_spm_load_buffer(ck.spm, ck.spm_size, inner, sizeof inner);
        if (!*spm) {
            snprintf(err, errlen, "checkpoint '%s': stored SentencePiece model: %s", path, inner);
            goto fail;
        }
        if (pmt_spm_vocab_size(*spm) != m->V) {
            snprintf(err, errlen, "checkpoint '%s': the stored SentencePiece vocabulary has %d pieces, the model %d",
                     path, pmt_spm_vocab_size(*spm), m->V);
            pmt_spm_free(*spm);
            *spm = NULL;
            goto fail;
        }
    }
    pmt_checkpoint_free(&ck);
    return 0;
fail:
    pmt_model_free(m);
    pmt_checkpoint_free(&ck);
    return -1;
}

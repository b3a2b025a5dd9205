/*
 * checkpoint.c — see checkpoint.h for the format. Writing and reading go
 * through a sink/source pair over the checksummed gzip stream of
 * core/gzstream.h that remembers the first failure, so each field is one
 * call and errors are checked once; the records both stored formats share
 * (blobs, the tensor table, the trailer, the limits) are model/record.h's.
 */
#include "model/checkpoint.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/gzstream.h"
#include "core/log.h"
#include "model/model_file.h"
#include "model/record.h"
#include "nn/gemm.h"

static const char MAGIC[8] = {'P', 'M', 'T', 'C', 'K', 'P', 'T', '\0'};
enum { FLAG_OPTIM = 1, FLAG_STATE = 2, FLAG_EMA = 4 };
#define MAX_STATE_FIELDS 256u   /* no real checkpoint has more: beyond it means damage */
enum { STATE_NAME_BYTES = 32, STATE_FIELDS_V1 = 17 };
enum { CHECKPOINT_ZLIB_LEVEL = 0 };   /* stored blocks: see pmt_checkpoint_save */

/* The training state by name. Every field is 8 bytes and stored as its
 * bytes; the first STATE_FIELDS_V1, in this order, were version 1's raw
 * struct. A new field is one line at the end. */
#define S(field) {#field, offsetof(pmt_train_state, field)}
static const struct { const char *name; size_t offset; } state_fields[] = {
    S(step), S(epoch), S(batch), S(seed), S(has_best), S(best_metric), S(stale_validations),
    S(elapsed_seconds), S(tokens_seen), S(win_loss_sum), S(win_nll_sum), S(win_grad_norm_sum),
    S(win_tokens), S(win_correct), S(win_steps), S(win_all_tokens), S(win_seconds),
    S(train_pairs), S(train_checksum), S(decay_end),
};
#undef S
enum { N_STATE_FIELDS = sizeof state_fields / sizeof state_fields[0] };
_Static_assert(N_STATE_FIELDS * 8 == sizeof(pmt_train_state), "every pmt_train_state field is in state_fields");

_Static_assert(sizeof(pmt_tensor) >= PMT_TENSOR_NAME_BYTES, "tensor names fit the stored field");

/* ------------------------------------------------------------------ */
/* writing                                                             */

static void put_tensor_table(pmt_gzsink *s, const pmt_model *m) {
    pmt_gzsink_i32(s, m->V);
    pmt_gzsink_i32(s, m->n_tensors);
    for (int i = 0; i < m->n_tensors; i++) pmt_record_put_tensor_entry(s, &m->tensors[i]);
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
    /* Stored blocks, not compressed: fp32 weights, moments and the moving
     * average shrink by about 7 % at zlib level 1, at about 30 MB/s on one
     * core, which held training still for about 20 s at every validation
     * of a 19 M-parameter run (docs/training.md, on checkpoints). The gzip
     * framing and both checksums stay, so either kind loads in any build. */
    int rc = pmt_gzstream_save(path, CHECKPOINT_ZLIB_LEVEL, "checkpoint", write_payload, &p, err, errlen);
    free(config);
    return rc;
}

/* ------------------------------------------------------------------ */
/* reading                                                             */

/* A checkpoint's reader: the shared record source over its own stream. */
typedef struct {
    pmt_gzstream gz;
    pmt_record_source rec;
} source;

static int get(source *s, void *p, size_t n, const char *what) { return pmt_record_get(&s->rec, p, n, what); }

static int get_header(source *s, uint32_t *flags, uint32_t *version_out) {
    char magic[sizeof MAGIC];
    uint32_t version;
    pmt_record_source *r = &s->rec;
    if (get(s, magic, sizeof magic, "magic") != 0) return -1;
    if (memcmp(magic, PMT_MODEL_FILE_MAGIC, sizeof magic) == 0) return 1;
    if (memcmp(magic, MAGIC, sizeof MAGIC) != 0) {
        snprintf(r->err, r->errlen, "'%s' is not a projmt checkpoint or exported model (bad magic number)", r->path);
        r->failed = 1;
        return -1;
    }
    if (get(s, &version, sizeof version, "version") != 0) return -1;
    if (version < 1 || version > PMT_CHECKPOINT_VERSION) {
        snprintf(r->err, r->errlen,
                 "checkpoint '%s' has format version %u, but this projmt reads versions 1 to %d "
                 "(use the projmt that wrote it, or retrain)", r->path, version, PMT_CHECKPOINT_VERSION);
        r->failed = 1;
        return -1;
    }
    *version_out = version;
    if (get(s, flags, sizeof *flags, "flags") != 0) return -1;
    if (*flags & ~(uint32_t)(FLAG_OPTIM | FLAG_STATE | FLAG_EMA)) return pmt_record_corrupt(r, "unknown flags");
    return 0;
}

static int get_floats(source *s, float **out, size_t n, const char *what) {
    *out = malloc((n ? n : 1) * sizeof(float));
    if (!*out) return pmt_record_corrupt(&s->rec, "no memory for %s", what);
    return get(s, *out, n * sizeof(float), what);
}

static int get_params(source *s, pmt_checkpoint *ck, uint32_t flags) {
    uint64_t n;
    if (get(s, &n, sizeof n, "parameter count") != 0) return -1;
    if (n > PMT_RECORD_MAX_PARAMS) return pmt_record_corrupt(&s->rec, "implausible parameter count");
    /* parameters, Adam's two moments and the moving average when present */
    const uint64_t copies = 1 + ((flags & FLAG_OPTIM) ? 2 : 0) + ((flags & FLAG_EMA) ? 1 : 0);
    if (pmt_record_claim(&s->rec, n, sizeof(float) * copies, "parameters") != 0) return -1;
    const pmt_tensor *last = &ck->tensors[ck->n_tensors - 1];
    if (last->offset + last->size != n) return pmt_record_corrupt(&s->rec, "tensor table does not cover the parameters");
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
    if (size != STATE_FIELDS_V1 * 8) return pmt_record_corrupt(&s->rec, "training state has an unexpected size");
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
    if (n > MAX_STATE_FIELDS) return pmt_record_corrupt(&s->rec, "implausible number of training state fields");
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

static int read_checkpoint(source *s, pmt_checkpoint *ck) {
    uint32_t flags;
    char *spm = NULL;
    size_t config_len;
    pmt_record_source *r = &s->rec;
    int kind = get_header(s, &flags, &ck->version);
    if (kind == 1) return pmt_model_file_read(&s->gz, r->path, r->budget, ck, r->err, r->errlen);
    if (kind != 0) return -1;
    const int blobs = pmt_record_get_blob(r, &ck->config_text, &config_len, PMT_RECORD_MAX_CONFIG_BYTES, "config") == 0 &&
                      pmt_record_get_blob(r, &spm, &ck->spm_size, PMT_RECORD_MAX_SPM_BYTES, "SentencePiece model") == 0;
    ck->spm = (uint8_t *)spm;
    if (!blobs || pmt_record_get_tensor_table(r, ck, NULL) != 0 || get_params(s, ck, flags) != 0) return -1;
    if ((flags & FLAG_OPTIM) && get_optim(s, ck) != 0) return -1;
    if ((flags & FLAG_STATE) && get_state(s, ck) != 0) return -1;
    if (flags & FLAG_EMA) {
        if (get_floats(s, &ck->ema, ck->n_params, "moving average") != 0) return -1;
        ck->has_ema = 1;
    }
    if (pmt_record_get_trailer(r) != 0) return -1;
    char inner[200], keys[sizeof ck->ignored];
    pmt_config_defaults(&ck->cfg);
    if (pmt_config_load_stored(&ck->cfg, ck->config_text, keys, sizeof keys, inner, sizeof inner) != 0)
        return pmt_record_corrupt(r, "%s", inner);
    if (keys[0]) {   /* config keys first, then the state fields noted while reading */
        char fields[sizeof ck->ignored];
        snprintf(fields, sizeof fields, "%s", ck->ignored);
        ck->ignored[0] = '\0';
        note_ignored(ck, keys);
        if (fields[0]) note_ignored(ck, fields);
    }
    if (ck->ignored[0])
        pmt_log(PMT_LOG_WARNING, "checkpoint '%s' was written by a newer projmt; ignoring what this build does not "
                "know: %s", r->path, ck->ignored);
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
        return pmt_record_corrupt(&s->rec, "%s", inner);
    return 0;
}

/* The stored config is what pmt_model_init sizes a model by; only the
 * tensor table was bounded by the file. So before any model is allocated
 * from ck->cfg (pmt_checkpoint_load_model, evaluation, resuming, averaging
 * all start from a loaded file), the config must be within the limits of
 * record.h and imply exactly the stored table: then every buffer a model
 * of it allocates is bounded by what the file holds. */
static int check_architecture(source *s, const pmt_checkpoint *ck) {
    pmt_record_source *r = &s->rec;
    const char *kind = ck->is_export ? "model file" : "checkpoint";
    char why[256];
    if (pmt_record_check_limits(&ck->cfg, ck->vocab_size, why, sizeof why) != 0) {
        snprintf(r->err, r->errlen, "%s '%s' describes a model this build refuses to size: %s; the file is damaged "
                 "or was not written by projmt (train or export it again)", kind, r->path, why);
        return -1;
    }
    pmt_tensor *want;
    int n_want;
    if (pmt_model_tensor_table(&ck->cfg, ck->vocab_size, &want, &n_want, why, sizeof why) != 0) {
        snprintf(r->err, r->errlen, "%s '%s': %s", kind, r->path, why);
        return -1;
    }
    const pmt_config *c = &ck->cfg;
    char arch[160];
    snprintf(arch, sizeof arch, "d_model %d, d_ff %d, %d encoder and %d decoder layers, vocabulary %d", c->d_model,
             c->d_ff, c->enc_layers, c->dec_layers, ck->vocab_size);
    int rc = 0;
    const int n = n_want < ck->n_tensors ? n_want : ck->n_tensors;
    for (int i = 0; i < n && rc == 0; i++) {
        const pmt_tensor *a = &want[i], *b = &ck->tensors[i];
        if (!strcmp(a->name, b->name) && a->rows == b->rows && a->cols == b->cols && a->offset == b->offset) continue;
        snprintf(r->err, r->errlen, "%s '%s' is corrupted: its stored config (%s) implies tensor %d '%s' [%d x %d] "
                 "at offset %zu, but its tensor table holds '%s' [%d x %d] at offset %zu", kind, r->path, arch, i,
                 a->name, a->rows, a->cols, a->offset, b->name, b->rows, b->cols, b->offset);
        rc = -1;
    }
    const size_t want_params = n_want ? want[n_want - 1].offset + want[n_want - 1].size : 0;
    if (rc == 0 && (n_want != ck->n_tensors || want_params != ck->n_params)) {
        snprintf(r->err, r->errlen, "%s '%s' is corrupted: its stored config (%s) implies %d tensors of %zu "
                 "parameters, but its tensor table holds %d tensors of %zu", kind, r->path, arch, n_want, want_params,
                 ck->n_tensors, ck->n_params);
        rc = -1;
    }
    free(want);
    return rc;
}

int pmt_checkpoint_load(pmt_checkpoint *ck, const char *path, char *err, size_t errlen) {
    memset(ck, 0, sizeof *ck);
    source s = {.rec = {.kind = "checkpoint", .path = path, .err = err, .errlen = errlen}};
    s.rec.gz = &s.gz;
    struct stat st;
    if (stat(path, &st) != 0) {
        snprintf(err, errlen, "cannot open checkpoint '%s': %s", path, strerror(errno));
        return -1;
    }
    s.rec.budget = pmt_gzstream_inflate_bound((uint64_t)st.st_size);
    if (pmt_gzstream_open_read(&s.gz, path) != 0) {
        snprintf(err, errlen, "cannot open checkpoint '%s': %s", path, errno ? strerror(errno) : "out of memory");
        return -1;
    }
    int rc = read_checkpoint(&s, ck);
    if (pmt_gzstream_close(&s.gz) != 0 && rc == 0) rc = pmt_record_corrupt(&s.rec, "error closing the file");
    if (rc == 0) rc = fuse_legacy_qkv(&s, ck);
    if (rc == 0) rc = check_architecture(&s, ck);
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
    pmt_shortlist_free(ck->shortlist);
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
    const int init = pmt_model_init_inference(m, &ck.cfg, ck.vocab_size, max_rows, len, inner, sizeof inner);
    if (init != 0) {
        snprintf(err, errlen, "checkpoint '%s': %s", path, inner);
        pmt_checkpoint_free(&ck);
        return init;
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
    m->shortlist = ck.shortlist;   /* the model owns it from here */
    ck.shortlist = NULL;
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

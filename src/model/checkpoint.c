/*
 * checkpoint.c — see checkpoint.h for the format. Writing and reading go
 * through a sink/source pair over the checksummed gzip stream of
 * core/gzstream.h that remembers the first failure, so each field is one
 * call and errors are checked once.
 */
#include "model/checkpoint.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/fileio.h"
#include "core/gzstream.h"

static const char MAGIC[8] = {'P', 'M', 'T', 'C', 'K', 'P', 'T', '\0'};
enum { FLAG_OPTIM = 1, FLAG_STATE = 2 };
enum { NAME_BYTES = 64 };
/* Bounds that no real checkpoint reaches: a length beyond them means damage. */
#define MAX_CONFIG_BYTES (1u << 20)
#define MAX_SPM_BYTES (1u << 28)
#define MAX_TENSORS (1 << 20)
#define MAX_PARAMS ((uint64_t)1 << 34)

_Static_assert(sizeof(pmt_train_state) % 8 == 0, "pmt_train_state must hold 8-byte fields only");
_Static_assert(sizeof(pmt_tensor) >= NAME_BYTES, "tensor names fit the stored field");

/* ------------------------------------------------------------------ */
/* writing                                                             */

/* The stream plus the first failure, so each field is one unchecked call. */
typedef struct {
    pmt_gzstream gz;
    int failed;
} sink;

static void put(sink *s, const void *p, size_t n) {
    if (!s->failed && pmt_gzstream_write(&s->gz, p, n) != 0) s->failed = 1;
}
static void put_u32(sink *s, uint32_t v) { put(s, &v, sizeof v); }
static void put_i32(sink *s, int32_t v) { put(s, &v, sizeof v); }
static void put_u64(sink *s, uint64_t v) { put(s, &v, sizeof v); }
static void put_i64(sink *s, int64_t v) { put(s, &v, sizeof v); }

static void put_tensor_table(sink *s, const pmt_model *m) {
    put_i32(s, m->V);
    put_i32(s, m->n_tensors);
    for (int i = 0; i < m->n_tensors; i++) {
        const pmt_tensor *t = &m->tensors[i];
        char name[NAME_BYTES] = {0};
        snprintf(name, sizeof name, "%s", t->name);
        put(s, name, sizeof name);
        put_i32(s, t->rows);
        put_i32(s, t->cols);
        put_u64(s, t->offset);
        put_u64(s, t->size);
    }
}

static void put_payload(sink *s, const pmt_model *m, const char *config, const void *spm, size_t spm_size,
                        const pmt_adam_state *adam, const pmt_train_state *state) {
    put(s, MAGIC, sizeof MAGIC);
    put_u32(s, PMT_CHECKPOINT_VERSION);
    put_u32(s, (adam ? FLAG_OPTIM : 0) | (state ? FLAG_STATE : 0));
    put_u64(s, strlen(config));
    put(s, config, strlen(config));
    put_u64(s, spm_size);
    put(s, spm, spm_size);
    put_tensor_table(s, m);
    put_u64(s, m->n_params);
    put(s, m->params, m->n_params * sizeof(float));
    if (adam) {
        put(s, adam->m, m->n_params * sizeof(float));
        put(s, adam->v, m->n_params * sizeof(float));
        put_i64(s, adam->t);
        put_i64(s, adam->bad_steps);
        put_i64(s, adam->skipped);
    }
    if (state) {
        put_u32(s, (uint32_t)sizeof *state);
        put(s, state, sizeof *state);
    }
    if (!s->failed && pmt_gzstream_write_crc(&s->gz) != 0) s->failed = 1;
}

int pmt_checkpoint_save(const char *path, const pmt_model *m, const void *spm, size_t spm_size,
                        const pmt_adam_state *adam, const pmt_train_state *state, char *err, size_t errlen) {
    if (adam && adam->n != m->n_params) {
        snprintf(err, errlen, "checkpoint '%s': optimizer holds %zu values for %zu parameters", path, adam->n,
                 m->n_params);
        return -1;
    }
    char inner[PMT_ATOMIC_PATH_MAX * 2 + 128];
    pmt_atomic_file af;
    if (pmt_atomic_open(&af, path, inner, sizeof inner) != 0) {
        snprintf(err, errlen, "checkpoint: %s (check that the directory exists and is writable)", inner);
        return -1;
    }
    char *config = pmt_config_to_string(&m->cfg);
    sink s = {.failed = 0};
    if (!config || pmt_gzstream_open_write(&s.gz, af.f, 1) != 0) {
        snprintf(err, errlen, "checkpoint '%s': %s", path, config ? "cannot start the gzip stream" : "out of memory");
        free(config);
        pmt_atomic_discard(&af);
        return -1;
    }
    put_payload(&s, m, config, spm, spm_size, adam, state);
    free(config);
    if (pmt_gzstream_close(&s.gz) != 0 || s.failed) {
        snprintf(err, errlen, "writing checkpoint '%s' failed: %s (disk full?)", af.tmp, strerror(errno));
        pmt_atomic_discard(&af);
        return -1;
    }
    if (pmt_atomic_commit(&af, inner, sizeof inner) != 0) {
        snprintf(err, errlen, "checkpoint: %s", inner);
        return -1;
    }
    return 0;
}

/* ------------------------------------------------------------------ */
/* reading                                                             */

typedef struct {
    pmt_gzstream gz;
    const char *path;
    char *err;
    size_t errlen;
    int failed;
} source;

/* Reads n bytes; a short read means the file ends early or does not inflate. */
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

static int get_header(source *s, uint32_t *flags) {
    char magic[sizeof MAGIC];
    uint32_t version;
    if (get(s, magic, sizeof magic, "magic") != 0) return -1;
    if (memcmp(magic, MAGIC, sizeof MAGIC) != 0) {
        snprintf(s->err, s->errlen, "'%s' is not a projmt checkpoint (bad magic number)", s->path);
        s->failed = 1;
        return -1;
    }
    if (get(s, &version, sizeof version, "version") != 0) return -1;
    if (version != PMT_CHECKPOINT_VERSION) {
        snprintf(s->err, s->errlen,
                 "checkpoint '%s' has format version %u, but this projmt reads version %d "
                 "(use the projmt that wrote it, or retrain)", s->path, version, PMT_CHECKPOINT_VERSION);
        s->failed = 1;
        return -1;
    }
    return get(s, flags, sizeof *flags, "flags");
}

/* A length-prefixed blob, bounded; text gets a terminating NUL. */
static int get_blob(source *s, void **out, size_t *size, uint64_t limit, const char *what) {
    uint64_t n;
    if (get(s, &n, sizeof n, what) != 0) return -1;
    if (n > limit) return fail(s, "implausible length of %s", what);
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
    ck->vocab_size = v;
    ck->tensors = calloc((size_t)n, sizeof *ck->tensors);
    if (!ck->tensors) return fail(s, "%s", "no memory for the tensor table");
    ck->n_tensors = n;
    for (int i = 0; i < n; i++) {
        pmt_tensor *t = &ck->tensors[i];
        char name[NAME_BYTES];
        int32_t rows, cols;
        uint64_t offset, size;
        if (get(s, name, sizeof name, "tensor table") != 0 || get(s, &rows, sizeof rows, "tensor table") != 0 ||
            get(s, &cols, sizeof cols, "tensor table") != 0 || get(s, &offset, sizeof offset, "tensor table") != 0 ||
            get(s, &size, sizeof size, "tensor table") != 0)
            return -1;
        name[NAME_BYTES - 1] = '\0';
        snprintf(t->name, sizeof t->name, "%s", name);
        t->rows = rows;
        t->cols = cols;
        t->offset = (size_t)offset;
        t->size = (size_t)size;
        if (rows < 1 || cols < 1 || size != (uint64_t)rows * (uint64_t)cols || offset > MAX_PARAMS)
            return fail(s, "bad shape of tensor '%s'", t->name);
    }
    return 0;
}

static int get_floats(source *s, float **out, size_t n, const char *what) {
    *out = malloc((n ? n : 1) * sizeof(float));
    if (!*out) return fail(s, "no memory for %s", what);
    return get(s, *out, n * sizeof(float), what);
}

static int get_params(source *s, pmt_checkpoint *ck) {
    uint64_t n;
    if (get(s, &n, sizeof n, "parameter count") != 0) return -1;
    if (n > MAX_PARAMS) return fail(s, "%s", "implausible parameter count");
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

static int get_state(source *s, pmt_checkpoint *ck) {
    uint32_t size;
    if (get(s, &size, sizeof size, "training state") != 0) return -1;
    if (size != sizeof ck->state) return fail(s, "%s", "training state has an unexpected size");
    if (get(s, &ck->state, sizeof ck->state, "training state") != 0) return -1;
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
    if (get_header(s, &flags) != 0) return -1;
    if (get_blob(s, &config, &config_len, MAX_CONFIG_BYTES, "config") != 0) { free(config); return -1; }
    ck->config_text = config;
    if (get_blob(s, &spm, &spm_len, MAX_SPM_BYTES, "SentencePiece model") != 0) { free(spm); return -1; }
    ck->spm = spm;
    ck->spm_size = spm_len;
    if (get_tensor_table(s, ck) != 0 || get_params(s, ck) != 0) return -1;
    if ((flags & FLAG_OPTIM) && get_optim(s, ck) != 0) return -1;
    if ((flags & FLAG_STATE) && get_state(s, ck) != 0) return -1;
    if (get_trailer(s) != 0) return -1;
    char inner[200];
    pmt_config_defaults(&ck->cfg);
    if (pmt_config_load_string(&ck->cfg, ck->config_text, inner, sizeof inner) != 0) return fail(s, "%s", inner);
    return 0;
}

int pmt_checkpoint_load(pmt_checkpoint *ck, const char *path, char *err, size_t errlen) {
    memset(ck, 0, sizeof *ck);
    source s = {.path = path, .err = err, .errlen = errlen};
    if (pmt_gzstream_open_read(&s.gz, path) != 0) {
        snprintf(err, errlen, "cannot open checkpoint '%s': %s", path, errno ? strerror(errno) : "out of memory");
        return -1;
    }
    int rc = read_checkpoint(&s, ck);
    if (pmt_gzstream_close(&s.gz) != 0 && rc == 0) rc = fail(&s, "%s", "error closing the file");
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
    memset(ck, 0, sizeof *ck);
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

int pmt_checkpoint_load_model(const char *path, pmt_model *m, int max_rows, int max_len,
                              pmt_spm **spm, char *err, size_t errlen) {
    pmt_checkpoint ck;
    char inner[256];
    if (pmt_checkpoint_load(&ck, path, err, errlen) != 0) return -1;
    int len = max_len > 0 ? max_len : ck.cfg.max_len;
    if (pmt_model_init(m, &ck.cfg, ck.vocab_size, max_rows, len, inner, sizeof inner) != 0) {
        snprintf(err, errlen, "checkpoint '%s': %s", path, inner);
        pmt_checkpoint_free(&ck);
        return -1;
    }
    if (pmt_checkpoint_copy_params(&ck, m, inner, sizeof inner) != 0) {
        snprintf(err, errlen, "checkpoint '%s': %s", path, inner);
        goto fail;
    }
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

/*
 * model_file.c — see model_file.h for the format. Like checkpoint.c, writing
 * and reading go through a stream that remembers its first failure, so each
 * field is one call and errors are checked once; the records both stored
 * formats share (blobs, the tensor table, the trailer, the limits) are
 * model/record.h's.
 */
#include "model/model_file.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/record.h"

enum { FLAG_EMA = 1 };

_Static_assert(sizeof PMT_MODEL_FILE_MAGIC == 9, "the magic is 8 bytes");

int pmt_weight_type_parse(const char *name, pmt_weight_type *out) {
    static const pmt_weight_type all[] = {PMT_WEIGHTS_FP32, PMT_WEIGHTS_BF16, PMT_WEIGHTS_INT8};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        if (name && !strcmp(name, pmt_weight_type_name(all[i]))) {
            *out = all[i];
            return 0;
        }
    return -1;
}

const char *pmt_weight_type_name(pmt_weight_type t) {
    switch (t) {
    case PMT_WEIGHTS_FP32: return "fp32";
    case PMT_WEIGHTS_BF16: return "bf16";
    case PMT_WEIGHTS_INT8: return "int8";
    }
    return "?";
}

/* The storage of one tensor in a file of the given type. */
static pmt_weight_type storage_of(const pmt_tensor *t, pmt_weight_type weights) {
    return t->rows > 1 && t->cols > 1 ? weights : PMT_WEIGHTS_FP32;
}

int pmt_model_round_weights(pmt_model *m, pmt_weight_type weights, char *err, size_t errlen) {
    for (int i = 0; i < m->n_tensors; i++) {
        const pmt_tensor *t = &m->tensors[i];
        float *w = m->params + t->offset;
        switch (storage_of(t, weights)) {
        case PMT_WEIGHTS_FP32:
            break;
        case PMT_WEIGHTS_BF16:
            for (size_t k = 0; k < t->size; k++) w[k] = pmt_bf16_to_float(pmt_bf16_from_float(w[k]));
            break;
        case PMT_WEIGHTS_INT8: {
            int8_t *q = malloc(t->size);
            float *scale = malloc((size_t)t->rows * sizeof *scale);
            if (!q || !scale) {
                free(q);
                free(scale);
                snprintf(err, errlen, "out of memory rounding '%s' to int8", t->name);
                return -1;
            }
            pmt_int8_quantize_rows(q, scale, w, t->rows, t->cols);
            pmt_int8_dequantize_rows(w, q, scale, t->rows, t->cols);
            free(q);
            free(scale);
            break;
        }
        }
    }
    return 0;
}

/* ------------------------------------------------------------------ */
/* writing                                                             */

/* One tensor's values in its storage type; scratch holds size values of any type. */
static void put_tensor(pmt_gzsink *s, const pmt_tensor *t, const float *w, pmt_weight_type storage,
                       void *scratch) {
    switch (storage) {
    case PMT_WEIGHTS_FP32:
        pmt_gzsink_put(s, w, t->size * sizeof(float));
        break;
    case PMT_WEIGHTS_BF16: {
        uint16_t *h = scratch;
        for (size_t i = 0; i < t->size; i++) h[i] = pmt_bf16_from_float(w[i]);
        pmt_gzsink_put(s, h, t->size * sizeof *h);
        break;
    }
    case PMT_WEIGHTS_INT8: {
        float *scale = scratch;
        int8_t *q = (int8_t *)(scale + t->rows);
        pmt_int8_quantize_rows(q, scale, w, t->rows, t->cols);
        pmt_gzsink_put(s, scale, (size_t)t->rows * sizeof *scale);
        pmt_gzsink_put(s, q, t->size);
        break;
    }
    }
}

static void put_payload(pmt_gzsink *s, const pmt_checkpoint *ck, pmt_weight_type weights, int is_ema,
                        void *scratch) {
    pmt_gzsink_put(s, PMT_MODEL_FILE_MAGIC, 8);
    pmt_gzsink_u32(s, ck->shortlist ? PMT_MODEL_FILE_VERSION : PMT_MODEL_FILE_VERSION_PLAIN);
    pmt_gzsink_u32(s, (uint32_t)weights);
    pmt_gzsink_u32(s, is_ema ? FLAG_EMA : 0);
    pmt_gzsink_u64(s, strlen(ck->config_text));
    pmt_gzsink_put(s, ck->config_text, strlen(ck->config_text));
    pmt_gzsink_u64(s, ck->spm_size);
    pmt_gzsink_put(s, ck->spm, ck->spm_size);
    pmt_gzsink_i32(s, ck->vocab_size);
    pmt_gzsink_i32(s, ck->n_tensors);
    for (int i = 0; i < ck->n_tensors; i++) {
        const pmt_tensor *t = &ck->tensors[i];
        pmt_record_put_tensor_entry(s, t);
        pmt_gzsink_u32(s, (uint32_t)storage_of(t, weights));
    }
    for (int i = 0; i < ck->n_tensors; i++) {
        const pmt_tensor *t = &ck->tensors[i];
        put_tensor(s, t, ck->params + t->offset, storage_of(t, weights), scratch);
    }
    const pmt_shortlist *sl = ck->shortlist;
    if (sl) {
        pmt_gzsink_i32(s, sl->vocab_size);
        pmt_gzsink_i32(s, sl->per_source);
        pmt_gzsink_i32(s, sl->n_frequent);
        pmt_gzsink_put(s, sl->frequent, (size_t)sl->n_frequent * sizeof *sl->frequent);
        pmt_gzsink_put(s, sl->candidates, (size_t)sl->vocab_size * sl->per_source * sizeof *sl->candidates);
    }
}

/* What pmt_model_file_export writes, for pmt_gzstream_save's body. */
typedef struct {
    const pmt_checkpoint *ck;
    pmt_weight_type weights;
    int is_ema;
    void *scratch;
} payload;

static int write_payload(pmt_gzstream *gz, void *user) {
    const payload *p = user;
    pmt_gzsink s = {gz, 0};
    put_payload(&s, p->ck, p->weights, p->is_ema, p->scratch);
    return s.failed ? -1 : 0;
}

int pmt_model_file_export(const char *path, const pmt_checkpoint *ck, pmt_weight_type weights, int is_ema,
                          char *err, size_t errlen) {
    if (ck->shortlist && ck->shortlist->vocab_size != ck->vocab_size) {
        snprintf(err, errlen, "exporting '%s': the shortlist is for a vocabulary of %d pieces, the model has %d", path,
                 ck->shortlist->vocab_size, ck->vocab_size);
        return -1;
    }
    size_t largest = 0;
    for (int i = 0; i < ck->n_tensors; i++)
        if (ck->tensors[i].size > largest) largest = ck->tensors[i].size;
    /* Big enough for a bf16 copy, or int8 values plus fp32 row scales, of the largest tensor. */
    void *scratch = malloc(largest * sizeof(float) * 2 + 64);
    if (!scratch) {
        snprintf(err, errlen, "exporting '%s': out of memory", path);
        return -1;
    }
    payload p = {ck, weights, is_ema, scratch};
    int rc = pmt_gzstream_save(path, 9, "model file", write_payload, &p, err, errlen);
    free(scratch);
    return rc;
}

/* ------------------------------------------------------------------ */
/* reading                                                             */

typedef pmt_record_source source;

static int get(source *s, void *p, size_t n, const char *what) { return pmt_record_get(s, p, n, what); }

static int get_header(source *s, pmt_checkpoint *ck, uint32_t *flags) {
    uint32_t version, weights;
    if (get(s, &version, sizeof version, "version") != 0) return -1;
    if (version != PMT_MODEL_FILE_VERSION && version != PMT_MODEL_FILE_VERSION_PLAIN) {
        snprintf(s->err, s->errlen, "model file '%s' has format version %u, but this projmt reads versions %d "
                 "and %d (use the projmt that wrote it, or export it again)", s->path, version,
                 PMT_MODEL_FILE_VERSION_PLAIN, PMT_MODEL_FILE_VERSION);
        s->failed = 1;
        return -1;
    }
    if (get(s, &weights, sizeof weights, "weight type") != 0 || get(s, flags, sizeof *flags, "flags") != 0) return -1;
    if (weights > PMT_WEIGHTS_INT8 || (*flags & ~(uint32_t)FLAG_EMA)) return pmt_record_corrupt(s, "unknown weight type or flags");
    ck->weights = (int)weights;
    ck->version = version;
    return 0;
}

/* Bytes one tensor takes in the file (see the format in model_file.h). */
static uint64_t stored_bytes(const pmt_tensor *t, pmt_weight_type storage) {
    switch (storage) {
    case PMT_WEIGHTS_FP32: return (uint64_t)t->size * sizeof(float);
    case PMT_WEIGHTS_BF16: return (uint64_t)t->size * sizeof(uint16_t);
    case PMT_WEIGHTS_INT8: return (uint64_t)t->size + (uint64_t)t->rows * sizeof(float);
    }
    return 0;
}

/* What an exported file's table adds to the shared checks (record.h): the
 * tensors tile the parameters exactly, each stored as its shape says for
 * the file's type, and their stored bytes fit in what the file can hold. */
static int check_table(source *s, pmt_checkpoint *ck, const uint32_t *storage) {
    uint64_t weight_bytes = 0;   /* what the table says the weights take in the file */
    for (int i = 0; i < ck->n_tensors; i++) {
        const pmt_tensor *t = &ck->tensors[i];
        const uint64_t expect = i ? ck->tensors[i - 1].offset + ck->tensors[i - 1].size : 0;
        if (t->offset != expect || (uint64_t)t->offset + t->size > PMT_RECORD_MAX_PARAMS ||
            storage[i] != (uint32_t)storage_of(t, (pmt_weight_type)ck->weights))
            return pmt_record_corrupt(s, "bad tensor table entry '%s'", t->name);
        /* The budget is in bytes, the table in elements of each storage type. */
        weight_bytes += stored_bytes(t, (pmt_weight_type)storage[i]);
    }
    if (pmt_record_claim(s, weight_bytes, 1, "bytes of weights") != 0) return -1;
    ck->n_params = ck->tensors[ck->n_tensors - 1].offset + ck->tensors[ck->n_tensors - 1].size;
    return 0;
}

/* One tensor's stored values, dequantised into w; scratch as in put_tensor. */
static int get_tensor(source *s, const pmt_tensor *t, float *w, uint32_t storage, void *scratch) {
    if (storage == PMT_WEIGHTS_FP32) return get(s, w, t->size * sizeof(float), "weights");
    if (storage == PMT_WEIGHTS_BF16) {
        uint16_t *h = scratch;
        if (get(s, h, t->size * sizeof *h, "weights") != 0) return -1;
        for (size_t i = 0; i < t->size; i++) w[i] = pmt_bf16_to_float(h[i]);
        return 0;
    }
    float *scale = scratch;
    int8_t *q = (int8_t *)(scale + t->rows);
    if (get(s, scale, (size_t)t->rows * sizeof *scale, "row scales") != 0 || get(s, q, t->size, "weights") != 0)
        return -1;
    for (int r = 0; r < t->rows; r++)
        if (!(scale[r] >= 0.0f && isfinite(scale[r]))) return pmt_record_corrupt(s, "a row scale is negative or not finite");
    pmt_int8_dequantize_rows(w, q, scale, t->rows, t->cols);
    return 0;
}

static int get_weights(source *s, pmt_checkpoint *ck, const uint32_t *storage) {
    size_t largest = 0;
    for (int i = 0; i < ck->n_tensors; i++)
        if (ck->tensors[i].size > largest) largest = ck->tensors[i].size;
    void *scratch = malloc(largest * sizeof(float) * 2 + 64);
    ck->params = malloc((ck->n_params ? ck->n_params : 1) * sizeof(float));
    int rc = scratch && ck->params ? 0 : pmt_record_corrupt(s, "out of memory for the weights");
    for (int i = 0; rc == 0 && i < ck->n_tensors; i++)
        rc = get_tensor(s, &ck->tensors[i], ck->params + ck->tensors[i].offset, storage[i], scratch);
    free(scratch);
    return rc;
}

/* A version 2 file's shortlist, checked (model/shortlist.h) before use. */
static int get_shortlist(source *s, pmt_checkpoint *ck) {
    int32_t head[3];
    if (get(s, head, sizeof head, "shortlist sizes") != 0) return -1;
    if (head[0] != ck->vocab_size || head[1] < 1 || head[1] > PMT_SHORTLIST_MAX_PER_SOURCE || head[2] < 0 ||
        head[2] > ck->vocab_size)
        return pmt_record_corrupt(s, "shortlist sizes out of range (vocabulary %d for a model of %d, %d per source "
                                  "piece of at most %d, %d frequent of at most the vocabulary)", head[0],
                                  ck->vocab_size, head[1], PMT_SHORTLIST_MAX_PER_SOURCE, head[2]);
    const uint64_t n = (uint64_t)head[2] + (uint64_t)head[0] * (uint64_t)head[1];
    if (pmt_record_claim(s, n, sizeof(int32_t), "shortlist ids") != 0) return -1;
    pmt_shortlist *sl = calloc(1, sizeof *sl);
    if (!sl) return pmt_record_corrupt(s, "out of memory for the shortlist");
    ck->shortlist = sl;
    sl->vocab_size = head[0];
    sl->per_source = head[1];
    sl->n_frequent = head[2];
    sl->frequent = malloc((size_t)(head[2] ? head[2] : 1) * sizeof *sl->frequent);
    sl->candidates = malloc((size_t)head[0] * (size_t)head[1] * sizeof *sl->candidates);
    if (!sl->frequent || !sl->candidates) return pmt_record_corrupt(s, "out of memory for the shortlist");
    if (get(s, sl->frequent, (size_t)head[2] * sizeof *sl->frequent, "shortlist") != 0 ||
        get(s, sl->candidates, (size_t)head[0] * (size_t)head[1] * sizeof *sl->candidates, "shortlist") != 0)
        return -1;
    char why[200];
    if (pmt_shortlist_validate(sl, why, sizeof why) != 0) return pmt_record_corrupt(s, "%s", why);
    return 0;
}

int pmt_model_file_read(pmt_gzstream *gz, const char *path, uint64_t budget, pmt_checkpoint *ck, char *err,
                        size_t errlen) {
    source s = {.gz = gz, .kind = "model file", .path = path, .budget = budget, .err = err, .errlen = errlen};
    uint32_t flags = 0, *storage = NULL;
    size_t config_len;
    char *spm = NULL;
    ck->is_export = 1;
    int rc = get_header(&s, ck, &flags) == 0 &&
             pmt_record_get_blob(&s, &ck->config_text, &config_len, PMT_RECORD_MAX_CONFIG_BYTES, "config") == 0 &&
             pmt_record_get_blob(&s, &spm, &ck->spm_size, PMT_RECORD_MAX_SPM_BYTES, "SentencePiece model") == 0
                 ? 0 : -1;
    ck->spm = (uint8_t *)spm;
    if (rc == 0) rc = pmt_record_get_tensor_table(&s, ck, &storage);
    if (rc == 0) rc = check_table(&s, ck, storage);
    if (rc == 0) rc = get_weights(&s, ck, storage);
    free(storage);
    if (rc == 0 && ck->version == PMT_MODEL_FILE_VERSION) rc = get_shortlist(&s, ck);
    if (rc == 0) rc = pmt_record_get_trailer(&s);
    if (rc != 0) return -1;
    ck->params_are_ema = (flags & FLAG_EMA) != 0;
    char inner[200];
    pmt_config_defaults(&ck->cfg);
    if (pmt_config_load_string(&ck->cfg, ck->config_text, inner, sizeof inner) != 0)
        return pmt_record_corrupt(&s, "%s", inner);
    return 0;
}

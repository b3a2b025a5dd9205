/*
 * record.c — see record.h.
 */
#include "model/record.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int pmt_record_truncated(pmt_record_source *s, const char *what) {
    if (!s->failed)
        snprintf(s->err, s->errlen, "%s '%s' is truncated or corrupted (reading %s: %s)", s->kind, s->path, what,
                 pmt_gzstream_reason(s->gz));
    s->failed = 1;
    return -1;
}

int pmt_record_corrupt(pmt_record_source *s, const char *fmt, ...) {
    if (!s->failed) {
        char detail[512];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(detail, sizeof detail, fmt, ap);
        va_end(ap);
        snprintf(s->err, s->errlen, "%s '%s' is corrupted: %s", s->kind, s->path, detail);
    }
    s->failed = 1;
    return -1;
}

int pmt_record_get(pmt_record_source *s, void *p, size_t n, const char *what) {
    if (s->failed) return -1;
    return pmt_gzstream_read(s->gz, p, n) == 0 ? 0 : pmt_record_truncated(s, what);
}

int pmt_record_claim(pmt_record_source *s, uint64_t count, uint64_t unit, const char *what) {
    if (s->failed) return -1;
    if (count <= s->budget / unit) return 0;
    return pmt_record_corrupt(s, "its header claims %llu %s, more than the file can hold", (unsigned long long)count,
                              what);
}

int pmt_record_get_blob(pmt_record_source *s, char **out, size_t *size, uint64_t limit, const char *what) {
    uint64_t n;
    if (pmt_record_get(s, &n, sizeof n, what) != 0) return -1;
    if (n > limit) return pmt_record_corrupt(s, "implausible length of %s", what);
    if (pmt_record_claim(s, n, 1, what) != 0) return -1;
    if (!(*out = malloc((size_t)n + 1))) return pmt_record_corrupt(s, "no memory for %s", what);
    (*out)[n] = '\0';
    *size = (size_t)n;
    return pmt_record_get(s, *out, (size_t)n, what);
}

int pmt_record_get_tensor_table(pmt_record_source *s, pmt_checkpoint *ck, uint32_t **storage) {
    int32_t v, n;
    if (pmt_record_get(s, &v, sizeof v, "vocab size") != 0 || pmt_record_get(s, &n, sizeof n, "tensor count") != 0)
        return -1;
    if (v < 4 || n < 1 || n > PMT_RECORD_MAX_TENSORS)
        return pmt_record_corrupt(s, "implausible vocabulary size or tensor count");
    const uint64_t entry = PMT_RECORD_TENSOR_ENTRY_BYTES + (storage ? sizeof **storage : 0);
    if (pmt_record_claim(s, (uint64_t)n, entry, "tensors") != 0) return -1;
    ck->vocab_size = v;
    ck->tensors = calloc((size_t)n, sizeof *ck->tensors);
    if (storage) *storage = calloc((size_t)n, sizeof **storage);
    if (!ck->tensors || (storage && !*storage)) return pmt_record_corrupt(s, "no memory for the tensor table");
    ck->n_tensors = n;
    for (int i = 0; i < n; i++) {
        pmt_tensor *t = &ck->tensors[i];
        char name[PMT_TENSOR_NAME_BYTES];
        int32_t rows, cols;
        uint64_t offset, size;
        if (pmt_record_get(s, name, sizeof name, "tensor table") != 0 ||
            pmt_record_get(s, &rows, sizeof rows, "tensor table") != 0 ||
            pmt_record_get(s, &cols, sizeof cols, "tensor table") != 0 ||
            pmt_record_get(s, &offset, sizeof offset, "tensor table") != 0 ||
            pmt_record_get(s, &size, sizeof size, "tensor table") != 0 ||
            (storage && pmt_record_get(s, &(*storage)[i], sizeof **storage, "tensor table") != 0))
            return -1;
        name[PMT_TENSOR_NAME_BYTES - 1] = '\0';
        snprintf(t->name, sizeof t->name, "%s", name);
        t->rows = rows;
        t->cols = cols;
        t->offset = (size_t)offset;
        t->size = (size_t)size;
        /* Tensors follow each other without overlap (a layout may pad). */
        const uint64_t prev_end = i ? (uint64_t)ck->tensors[i - 1].offset + ck->tensors[i - 1].size : 0;
        if (rows < 1 || cols < 1 || size != (uint64_t)rows * (uint64_t)cols || offset > PMT_RECORD_MAX_PARAMS ||
            offset < prev_end)
            return pmt_record_corrupt(s, "bad shape or offset of tensor '%s'", t->name);
    }
    return 0;
}

/* The table of limits (record.h gives each one's reason): the value a
 * config or file sets, the least a model can be built with, the most this
 * build believes. */
typedef struct {
    const char *key;
    long long value, least, most;
    const char *why;
} limit_check;

/* Whether the n checks hold; the first that does not is described in why. */
static int within(const limit_check *checks, size_t n, char *why, size_t whylen) {
    for (size_t i = 0; i < n; i++) {
        const limit_check *l = &checks[i];
        if (l->value >= l->least && l->value <= l->most) continue;
        const int low = l->value < l->least;
        snprintf(why, whylen, "%s = %lld is %s this build's %s of %lld (%s)", l->key, l->value,
                 low ? "below" : "beyond", low ? "least" : "limit", low ? l->least : l->most, l->why);
        return 0;
    }
    return 1;
}

int pmt_record_check_limits(const pmt_config *cfg, int V, char *why, size_t whylen) {
    /* The head size divides by n_heads: those two are checked first. */
    const limit_check width[] = {
        {"d_model", cfg->d_model, 2, PMT_LIMIT_D_MODEL, "8x the Transformer-big width"},
        {"n_heads", cfg->n_heads, 1, PMT_LIMIT_HEADS, "16x Transformer-big's heads"},
    };
    if (!within(width, sizeof width / sizeof *width, why, whylen)) return -1;
    if (cfg->d_model % cfg->n_heads != 0) {
        snprintf(why, whylen, "d_model = %d is not a multiple of n_heads = %d", cfg->d_model, cfg->n_heads);
        return -1;
    }
    const limit_check rest[] = {
        {"head size (d_model / n_heads)", cfg->d_model / cfg->n_heads, 1, PMT_LIMIT_HEAD_SIZE, "8x the usual 128"},
        {"d_ff", cfg->d_ff, 1, PMT_LIMIT_D_FF, "16x Transformer-big's feed-forward width"},
        {"enc_layers", cfg->enc_layers, 1, PMT_LIMIT_LAYERS, "above the deepest published Transformers"},
        {"dec_layers", cfg->dec_layers, 1, PMT_LIMIT_LAYERS, "above the deepest published Transformers"},
        {"vocabulary size", V, 4, PMT_LIMIT_VOCAB, "4x the largest SentencePiece vocabularies in use"},
        {"max_len", cfg->max_len, 4, PMT_MAX_LEN_CAP, "attention memory grows with its square"},
        {"batch_tokens", cfg->batch_tokens, 1, PMT_LIMIT_BATCH_TOKENS, "32x a large training batch"},
    };
    return within(rest, sizeof rest / sizeof *rest, why, whylen) ? 0 : -1;
}

int pmt_record_get_trailer(pmt_record_source *s) {
    if (s->failed) return -1;
    const int crc = pmt_gzstream_check_crc(s->gz);
    if (crc < 0) return pmt_record_truncated(s, "checksum");
    if (crc > 0) return pmt_record_corrupt(s, "checksum mismatch");
    const int end = pmt_gzstream_at_end(s->gz);
    if (end != 1) return pmt_record_corrupt(s, "%s", end == 0 ? "trailing data" : pmt_gzstream_reason(s->gz));
    return 0;
}

void pmt_record_put_tensor_entry(pmt_gzsink *s, const pmt_tensor *t) {
    char name[PMT_TENSOR_NAME_BYTES] = {0};
    snprintf(name, sizeof name, "%s", t->name);
    pmt_gzsink_put(s, name, sizeof name);
    pmt_gzsink_i32(s, t->rows);
    pmt_gzsink_i32(s, t->cols);
    pmt_gzsink_u64(s, t->offset);
    pmt_gzsink_u64(s, t->size);
}

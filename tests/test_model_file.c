/*
 * test_model_file.c — the exported model file (model/model_file.h):
 * bf16 rounding and int8 per-row quantisation error bounds; an export round
 * trip per weight type (config, SentencePiece bytes and table exact; fp32
 * weights bitwise, bf16/int8 weights exactly their rounding, vectors fp32);
 * the moving average is what gets exported; an int8 file is at most 30 % of
 * its checkpoint; a file exported by a build before the fused Q/K/V
 * projection (separate wq, bq, wk, bk, wv, bv) loads as the same weights,
 * bit for bit, in every weight type; truncated, corrupted, appended-to, wrong-version and
 * impossible-count files are refused with a message naming the file.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <zlib.h>

#include "core/rng.h"
#include "model/checkpoint.h"
#include "model/model_file.h"
#include "testutil.h"
#include "train_fixture.h"

static void test_bf16(void) {
    CHECK(pmt_bf16_from_float(1.0f) == 0x3f80);
    CHECK(pmt_bf16_to_float(0x3f80) == 1.0f);
    /* 1 + 2^-8 is halfway between bf16 1 and 1 + 2^-7: ties go to even (1). */
    CHECK(pmt_bf16_from_float(1.0f + 0x1p-8f) == 0x3f80);
    CHECK(pmt_bf16_from_float(1.0f + 0x1p-7f + 0x1p-8f) == 0x3f82);
    CHECK(pmt_bf16_from_float(-2.0f) == 0xc000);
    CHECK(isnan(pmt_bf16_to_float(pmt_bf16_from_float(NAN))));
    CHECK(isinf(pmt_bf16_to_float(pmt_bf16_from_float(INFINITY))));
    pmt_rng r = {5};
    double worst = 0;
    for (int i = 0; i < 100000; i++) {
        float x = (float)(pmt_rng_normal(&r) * 3.0);
        float y = pmt_bf16_to_float(pmt_bf16_from_float(x));
        double rel = fabs((double)y - x) / fabs((double)x);
        if (rel > worst) worst = rel;
    }
    CHECK_MSG(worst <= 0x1p-8 && worst > 0x1p-10, "worst relative bf16 error %g (bound 2^-8)", worst);
}

static void test_int8(void) {
    enum { ROWS = 7, COLS = 33 };
    float w[ROWS * COLS], back[ROWS * COLS], scale[ROWS];
    int8_t q[ROWS * COLS];
    pmt_rng r = {8};
    for (int i = 0; i < ROWS * COLS; i++) w[i] = (float)pmt_rng_normal(&r) * (float)(1 + i / COLS);
    for (int c = 0; c < COLS; c++) w[2 * COLS + c] = 0.0f;   /* an all-zero row */
    w[4 * COLS + 5] = -90.0f;                                   /* a row whose extreme is negative */
    pmt_int8_quantize_rows(q, scale, w, ROWS, COLS);
    pmt_int8_dequantize_rows(back, q, scale, ROWS, COLS);
    for (int row = 0; row < ROWS; row++) {
        float amax = 0;
        int hit = 0;
        for (int c = 0; c < COLS; c++) amax = fmaxf(amax, fabsf(w[row * COLS + c]));
        CHECK(scale[row] == amax / 127.0f);
        for (int c = 0; c < COLS; c++) {
            const int i = row * COLS + c;
            CHECK_MSG(fabsf(back[i] - w[i]) <= 0.5f * scale[row] * (1 + 1e-5f), "row %d col %d: %g vs %g", row, c,
                      back[i], w[i]);
            CHECK(q[i] >= -127 && q[i] <= 127);
            hit |= q[i] == 127 || q[i] == -127;
        }
        CHECK(row == 2 ? (scale[row] == 0 && !hit) : hit);
    }
    CHECK(q[4 * COLS + 5] == -127 && fabsf(back[4 * COLS + 5] + 90.0f) <= 90.0f * 0x1p-22f);
}

/* A checkpoint of the fixture model with Adam state and a moving average. */
static void make_checkpoint(const char *path, pmt_model *m) {
    pmt_config cfg;
    char err[512];
    fixture_config(&cfg, PMT_ATTN_STANDARD, "unused");
    cfg.site_kind[PMT_SITE_DEC_CROSS] = PMT_ATTN_PROJECTION;
    cfg.sigma_learned = 1;
    cfg.ema = 0.999;
    CHECK(pmt_model_init(m, &cfg, FIX_VOCAB * 20, 64, 16, err, sizeof err) == 0);
    pmt_model_init_params(m, 3);
    float *moment = malloc(m->n_params * sizeof(float)), *ema = malloc(m->n_params * sizeof(float));
    for (size_t i = 0; i < m->n_params; i++) {
        moment[i] = (float)i * 1e-6f;
        ema[i] = 0.5f * m->params[i];
    }
    pmt_adam_state adam = {m->n_params, moment, moment, 10, 0, 0};
    pmt_train_state st = {.step = 10};
    CHECK_MSG(pmt_checkpoint_save(path, m, FIX_SPM, sizeof FIX_SPM, &adam, &st, ema, err, sizeof err) == 0, "%s",
              err);
    free(moment);
    free(ema);
}

static long file_size(const char *path) {
    struct stat s;
    return stat(path, &s) == 0 ? (long)s.st_size : -1;
}

/* What a weight of tensor t reads back as after an export in type w. */
static float expected(const pmt_tensor *t, const float *row, int c, pmt_weight_type w) {
    if (t->rows == 1 || t->cols == 1 || w == PMT_WEIGHTS_FP32) return row[c];
    if (w == PMT_WEIGHTS_BF16) return pmt_bf16_to_float(pmt_bf16_from_float(row[c]));
    float amax = 0;
    for (int k = 0; k < t->cols; k++) amax = fmaxf(amax, fabsf(row[k]));
    const float scale = amax / 127.0f;
    return scale * (float)(int8_t)fminf(127.0f, fmaxf(-127.0f, nearbyintf(row[c] / scale)));
}

static void test_round_trip(const char *dir) {
    char ckpt[1100], out[1100], err[512];
    snprintf(ckpt, sizeof ckpt, "%s/last.ckpt", dir);
    pmt_model m;
    make_checkpoint(ckpt, &m);
    pmt_checkpoint ck;
    CHECK_MSG(pmt_checkpoint_load(&ck, ckpt, err, sizeof err) == 0, "%s", err);
    CHECK(ck.has_ema && !ck.is_export && !ck.params_are_ema);
    CHECK(memcmp(ck.params, m.params, m.n_params * sizeof(float)) == 0);
    pmt_checkpoint_use_ema(&ck);
    CHECK(ck.params_are_ema && ck.params[7] == 0.5f * m.params[7] && ck.ema[7] == m.params[7]);
    pmt_checkpoint_use_ema(&ck);   /* applied once only */
    CHECK(ck.params[7] == 0.5f * m.params[7]);
    static const pmt_weight_type types[] = {PMT_WEIGHTS_FP32, PMT_WEIGHTS_BF16, PMT_WEIGHTS_INT8};
    long sizes[3];
    for (int k = 0; k < 3; k++) {
        const pmt_weight_type w = types[k];
        snprintf(out, sizeof out, "%s/model.%s", dir, pmt_weight_type_name(w));
        CHECK_MSG(pmt_model_file_export(out, &ck, w, 1, err, sizeof err) == 0, "%s", err);
        sizes[k] = file_size(out);
        pmt_checkpoint e;
        int rc = pmt_checkpoint_load(&e, out, err, sizeof err);
        CHECK_MSG(rc == 0, "%s: %s", pmt_weight_type_name(w), err);
        if (rc != 0) continue;
        CHECK(e.is_export && e.weights == (int)w && e.params_are_ema && !e.has_optim && !e.has_state && !e.has_ema);
        CHECK(!strcmp(e.config_text, ck.config_text) && e.cfg.d_model == 32 && e.cfg.sigma_learned == 1);
        CHECK(e.spm_size == sizeof FIX_SPM && !memcmp(e.spm, FIX_SPM, sizeof FIX_SPM));
        CHECK(e.vocab_size == ck.vocab_size && e.n_tensors == ck.n_tensors && e.n_params == ck.n_params);
        size_t wrong = 0, quantised = 0;
        for (int i = 0; i < e.n_tensors; i++) {
            const pmt_tensor *t = &ck.tensors[i];
            CHECK(!strcmp(t->name, e.tensors[i].name) && t->offset == e.tensors[i].offset);
            quantised += t->rows > 1 && t->cols > 1 ? t->size : 0;
            for (int r = 0; r < t->rows; r++)
                for (int c = 0; c < t->cols; c++) {
                    const size_t at = t->offset + (size_t)r * t->cols + c;
                    wrong += e.params[at] != expected(t, ck.params + t->offset + (size_t)r * t->cols, c, w);
                }
        }
        CHECK_MSG(wrong == 0, "%s: %zu weights differ from their expected rounding", pmt_weight_type_name(w), wrong);
        CHECK(quantised > ck.n_params / 2);
        /* A model loads from it for inference. */
        pmt_model back;
        CHECK_MSG(pmt_checkpoint_load_model(out, &back, 32, 0, NULL, err, sizeof err) == 0, "%s", err);
        CHECK(!memcmp(back.params, e.params, e.n_params * sizeof(float)));
        pmt_model_free(&back);
        /* The same weights exported in the separate Q/K/V layout read back
         * as the same values: bf16 rounds each weight and int8 each row by
         * itself, so fusing before or after the rounding is the same. */
        pmt_checkpoint legacy = ck;
        legacy.tensors = calloc((size_t)m.n_tensors * 3, sizeof *legacy.tensors);
        legacy.params = malloc(m.n_params * sizeof(float));
        legacy.n_tensors = test_legacy_qkv_table(&m, legacy.tensors);
        test_unfuse_qkv(&m, ck.params, legacy.params);
        int sites = 0;
        for (int i = 0; i < m.n_tensors; i++) sites += strstr(m.tensors[i].name, ".wqkv") != NULL;
        CHECK(sites > 0 && legacy.n_tensors == m.n_tensors + 4 * sites);
        snprintf(out, sizeof out, "%s/legacy.%s", dir, pmt_weight_type_name(w));
        CHECK_MSG(pmt_model_file_export(out, &legacy, w, 1, err, sizeof err) == 0, "%s", err);
        free(legacy.tensors);
        free(legacy.params);
        CHECK_MSG(pmt_checkpoint_load_model(out, &back, 32, 0, NULL, err, sizeof err) == 0, "%s", err);
        CHECK_MSG(!memcmp(back.params, e.params, e.n_params * sizeof(float)), "%s: legacy export differs",
                  pmt_weight_type_name(w));
        pmt_model_free(&back);
        pmt_checkpoint_free(&e);
    }
    const long full = file_size(ckpt);
    CHECK_MSG(sizes[2] > 0 && sizes[2] * 10 <= full * 3, "int8 file %ld bytes, checkpoint %ld", sizes[2], full);
    CHECK(sizes[2] < sizes[1] && sizes[1] < sizes[0]);
    pmt_checkpoint_free(&ck);
    pmt_model_free(&m);
}

/* Reads a file whole (gunzipped when gz). */
static unsigned char *slurp(const char *path, size_t *n, int gz) {
    size_t cap = 1 << 20;
    unsigned char *buf = malloc(cap);
    *n = 0;
    if (gz) {
        gzFile f = gzopen(path, "rb");
        int got;
        while (f && (got = gzread(f, buf + *n, (unsigned)(cap - *n))) > 0) {
            *n += (size_t)got;
            if (*n == cap) buf = realloc(buf, cap *= 2);
        }
        if (f) gzclose(f);
    } else {
        FILE *f = fopen(path, "rb");
        size_t got;
        while (f && (got = fread(buf + *n, 1, cap - *n, f)) > 0) {
            *n += got;
            if (*n == cap) buf = realloc(buf, cap *= 2);
        }
        if (f) fclose(f);
    }
    return buf;
}

static void write_gz(const char *path, const unsigned char *p, size_t n) {
    gzFile f = gzopen(path, "wb");
    CHECK(f && gzwrite(f, p, (unsigned)n) == (int)n && gzclose(f) == Z_OK);
}

static void expect_refused(const char *path, const char *what, const char *needle) {
    pmt_checkpoint ck;
    char err[512] = "";
    CHECK_MSG(pmt_checkpoint_load(&ck, path, err, sizeof err) == -1, "%s loaded", what);
    CHECK_MSG(strstr(err, path) != NULL && (!needle || strstr(err, needle)), "%s: message '%s'", what, err);
}

static void test_corrupted(const char *dir) {
    char good[1100], bad[1100];
    snprintf(good, sizeof good, "%s/model.int8", dir);
    snprintf(bad, sizeof bad, "%s/bad.int8", dir);
    size_t n;
    unsigned char *raw = slurp(good, &n, 1);
    CHECK(n > 1000 && !memcmp(raw, "PMTMODEL", 8));
    /* Cut at several points of the payload. */
    const size_t cuts[] = {4, 8, 12, 40, n / 3, n - 5, n - 1};
    for (size_t i = 0; i < sizeof cuts / sizeof *cuts; i++) {
        write_gz(bad, raw, cuts[i]);
        expect_refused(bad, "truncated", NULL);
    }
    /* One flipped bit in the weights: the checksum catches it. */
    raw[n / 2] ^= 0x10;
    write_gz(bad, raw, n);
    expect_refused(bad, "bit flip", "checksum");
    raw[n / 2] ^= 0x10;
    /* Bytes after the checksum. */
    unsigned char *longer = malloc(n + 4);
    memcpy(longer, raw, n);
    memcpy(longer + n, "more", 4);
    write_gz(bad, longer, n + 4);
    expect_refused(bad, "appended", "trailing");
    free(longer);
    /* Another format version, and an unknown weight type. */
    raw[8] = 9;
    write_gz(bad, raw, n);
    expect_refused(bad, "version 9", "version 9");
    raw[8] = 1;
    raw[12] = 7;
    write_gz(bad, raw, n);
    expect_refused(bad, "weight type 7", "weight type");
    raw[12] = 2;
    /* A tensor count the file cannot hold is refused before anything is
     * allocated for it (not read until the stream runs out). */
    uint64_t config_len, spm_len;
    memcpy(&config_len, raw + 20, 8);
    memcpy(&spm_len, raw + 28 + config_len, 8);
    const size_t count_at = 28 + config_len + 8 + spm_len + 4;
    int32_t count, huge = 1000000;
    memcpy(&count, raw + count_at, 4);
    CHECK(count > 10 && count < 200);
    memcpy(raw + count_at, &huge, 4);
    write_gz(bad, raw, n);
    expect_refused(bad, "huge tensor count", "claims 1000000 tensors, more than the file can hold");
    memcpy(raw + count_at, &count, 4);
    write_gz(bad, raw, n);
    pmt_checkpoint ck;
    char err[512];
    CHECK_MSG(pmt_checkpoint_load(&ck, bad, err, sizeof err) == 0, "the restored bytes load again: %s", err);
    pmt_checkpoint_free(&ck);
    free(raw);
    /* Compressed bytes cut short. */
    raw = slurp(good, &n, 0);
    FILE *f = fopen(bad, "wb");
    CHECK(f && fwrite(raw, 1, n / 2, f) == n / 2 && fclose(f) == 0);
    expect_refused(bad, "cut gzip", NULL);
    free(raw);
}

/* A table whose tensors need more bytes than the file can inflate to is
 * refused before the weights are allocated. The count here (60 000 fp32
 * values, 240 000 bytes) is below the ~100 000-byte budget of this small
 * file in elements but not in bytes: comparing elements with the byte
 * budget let the reader allocate the parameters and their scratch (six
 * times the file's bound) and fail only when the stream ran out. */
static void test_tensor_bytes_bounded(const char *dir) {
    unsigned char file[512];
    size_t n = 0;
#define PUT(value) do { __typeof__(value) v_ = (value); memcpy(file + n, &v_, sizeof v_); n += sizeof v_; } while (0)
    memcpy(file, "PMTMODEL", 8);
    n = 8;
    PUT((uint32_t)1);              /* version */
    PUT((uint32_t)PMT_WEIGHTS_FP32);
    PUT((uint32_t)0);              /* flags */
    const char config[] = "[model]\nd_model = 4\n";
    PUT((uint64_t)(sizeof config - 1));
    memcpy(file + n, config, sizeof config - 1);
    n += sizeof config - 1;
    PUT((uint64_t)0);              /* no SentencePiece model */
    PUT((int32_t)8);               /* vocabulary */
    PUT((int32_t)1);               /* tensors */
    memset(file + n, 0, PMT_TENSOR_NAME_BYTES);
    memcpy(file + n, "tok_embedding", strlen("tok_embedding"));
    n += PMT_TENSOR_NAME_BYTES;
    PUT((int32_t)300);
    PUT((int32_t)200);
    PUT((uint64_t)0);
    PUT((uint64_t)60000);
    PUT((uint32_t)PMT_WEIGHTS_FP32);
#undef PUT
    char path[1100];
    snprintf(path, sizeof path, "%s/claims-too-much.fp32", dir);
    write_gz(path, file, n);
    const uint64_t budget = pmt_gzstream_inflate_bound((uint64_t)file_size(path));
    CHECK_MSG(budget > 60000 && budget < 60000 * sizeof(float), "budget %llu", (unsigned long long)budget);
    expect_refused(path, "tensor bytes over the budget", "more than the file can hold");
}

static void test_names(void) {
    pmt_weight_type w;
    CHECK(pmt_weight_type_parse("int8", &w) == 0 && w == PMT_WEIGHTS_INT8);
    CHECK(pmt_weight_type_parse("bf16", &w) == 0 && w == PMT_WEIGHTS_BF16);
    CHECK(pmt_weight_type_parse("fp32", &w) == 0 && w == PMT_WEIGHTS_FP32);
    CHECK(pmt_weight_type_parse("fp16", &w) == -1 && pmt_weight_type_parse(NULL, &w) == -1);
}

int main(void) {
    char dir[1024];
    snprintf(dir, sizeof dir, "%s", test_tmpdir("model-file"));
    (void)fixture_corpus;   /* the fixture's corpus half is for the training tests */
    (void)fixture_corpus_free;
    test_names();
    test_bf16();
    test_int8();
    test_round_trip(dir);
    test_corrupted(dir);
    test_tensor_bytes_bounded(dir);
    return test_finish();
}

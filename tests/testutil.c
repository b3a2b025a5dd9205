/* testutil.c — see testutil.h. */
#include "testutil.h"

#include "data/spm.h"
#include "model/checkpoint.h"
#include "model/model.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

int test_passed = 0, test_failed = 0;

int test_check(int ok, const char *file, int line, const char *expr) {
    if (ok) { test_passed++; return 1; }
    test_failed++;
    fprintf(stderr, "FAIL %s:%d: %s\n", file, line, expr);
    return 0;
}

int test_finish(void) {
    printf("%d passed, %d failed\n", test_passed, test_failed);
    return (test_failed == 0 && test_passed > 0) ? 0 : 1;
}

void test_skip(const char *why) {
    printf("SKIPPED: %s\n", why);
    exit(77);
}

const char *test_tmpdir(const char *tag) {
    static char path[4096];
    const char *base = getenv("TMPDIR");
    if (!base || !*base) base = "/tmp";
    snprintf(path, sizeof path, "%s/projmt-%s-XXXXXX", base, tag);
    if (!mkdtemp(path)) { perror("mkdtemp"); exit(2); }
    return path;
}

const char *test_source_dir(void) {
    const char *d = getenv("PROJMT_SOURCE_DIR");
    return (d && *d) ? d : ".";
}

const char *test_spa_corpus(void) {
    static char path[4096];
    const char *d = getenv("PROJMT_DATA_DIR");
    if (d && *d) {
        snprintf(path, sizeof path, "%s/spa-eng/spa.txt", d);
        if (access(path, R_OK) == 0) return path;
    }
    snprintf(path, sizeof path, "%s/../shared/data/spa-eng/spa.txt", test_source_dir());
    if (access(path, R_OK) == 0) return path;
    return NULL;
}

int test_write_file(const char *path, const char *text) {
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    size_t n = strlen(text);
    int ok = fwrite(text, 1, n, f) == n;
    if (fclose(f) != 0) ok = 0;
    return ok ? 0 : -1;
}

int test_train_spm(const char *text_path, const char *prefix, int vocab_size) {
    pmt_spm_train_options opt;
    char err[512];
    pmt_spm_train_options_default(&opt);
    opt.vocab_size = vocab_size;
    opt.num_threads = 1;
    const char *inputs[1] = {text_path};
    if (pmt_spm_train(inputs, 1, prefix, &opt, err, sizeof err) != 0) {
        fprintf(stderr, "spm training on %s failed: %s\n", text_path, err);
        return -1;
    }
    return 0;
}

/* Whether tensor t is "<prefix>.<leaf>"; *prefix_len counts the prefix and its dot. */
static int has_leaf(const pmt_tensor *t, const char *leaf, size_t *prefix_len) {
    const char *dot = strrchr(t->name, '.');
    if (!dot || strcmp(dot + 1, leaf)) return 0;
    *prefix_len = (size_t)(dot + 1 - t->name);
    return 1;
}

int test_legacy_qkv_table(const pmt_model *m, pmt_tensor *out) {
    static const char *const leaf[6] = {"wq", "bq", "wk", "bk", "wv", "bv"};
    int n = 0;
    size_t plen;
    for (int i = 0; i < m->n_tensors; i++) {
        const pmt_tensor *t = &m->tensors[i];
        if (has_leaf(t, "bqkv", &plen)) continue;   /* written with its wqkv */
        if (!has_leaf(t, "wqkv", &plen)) {
            out[n++] = *t;
            continue;
        }
        const int C = t->cols;
        size_t offset = t->offset;
        for (int k = 0; k < 6; k++) {
            pmt_tensor *o = &out[n++];
            *o = *t;
            snprintf(o->name + plen, sizeof o->name - plen, "%s", leaf[k]);
            o->rows = C;
            o->cols = k % 2 ? 1 : C;
            o->offset = offset;
            o->size = (size_t)o->rows * o->cols;
            offset += o->size;
        }
    }
    return n;
}

void test_unfuse_qkv(const pmt_model *m, const float *fused, float *legacy) {
    memcpy(legacy, fused, m->n_params * sizeof(float));
    size_t plen;
    for (int i = 0; i < m->n_tensors; i++) {
        const pmt_tensor *t = &m->tensors[i];
        if (!has_leaf(t, "wqkv", &plen)) continue;
        const size_t C = (size_t)t->cols, bias = t->offset + t->size;   /* bqkv follows wqkv */
        float *dst = legacy + t->offset;
        for (size_t k = 0; k < 3; k++) {   /* wq bq | wk bk | wv bv */
            memcpy(dst, fused + t->offset + k * C * C, C * C * sizeof(float));
            memcpy(dst + C * C, fused + bias + k * C, C * sizeof(float));
            dst += C * C + C;
        }
    }
}

int test_made_up_model(const char *from, const char *path) {
    char err[768];
    pmt_checkpoint ck;
    if (pmt_checkpoint_load(&ck, from, err, sizeof err) != 0) {
        fprintf(stderr, "%s\n", err);
        return -1;
    }
    pmt_config cfg = ck.cfg;
    cfg.d_model = 96;
    cfg.n_heads = 3;
    cfg.d_ff = 192;
    cfg.enc_layers = 2;
    cfg.dec_layers = 2;
    cfg.max_len = 160;
    cfg.site_kind[PMT_SITE_DEC_CROSS] = PMT_ATTN_PROJECTION;
    /* fp32 whatever the shipped model was trained in: a bf16 training
     * config needs avx512_bf16, absent under the ISA matrix's caps. */
    cfg.precision = PMT_PRECISION_FP32;
    pmt_model m;
    int rc = -1;
    if (pmt_model_init(&m, &cfg, ck.vocab_size, 256, cfg.max_len, err, sizeof err) == 0) {
        pmt_model_init_params(&m, 4321);
        rc = pmt_checkpoint_save(path, &m, ck.spm, ck.spm_size, NULL, NULL, NULL, err, sizeof err);
        pmt_model_free(&m);
    }
    if (rc != 0) fprintf(stderr, "%s\n", err);
    pmt_checkpoint_free(&ck);
    return rc;
}

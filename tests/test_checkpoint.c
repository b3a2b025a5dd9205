/*
 * test_checkpoint.c — a checkpoint round-trips bitwise (config, SentencePiece
 * bytes, tensor table, parameters, Adam state, training state); damaged files
 * (missing, truncated, corrupted, wrong magic, wrong version) fail with a
 * message naming the file; a failed save leaves the previous file intact and
 * no temporary behind; the translator entry point rebuilds the model.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "model/checkpoint.h"
#include "train/optim.h"
#include "core/rng.h"
#include "testutil.h"

enum { VOCAB = 61 };
static const char FAKE_SPM[] = "not really a sentencepiece model, just bytes \x01\x02\x00\xff";

static void tiny_config(pmt_config *cfg, int kind) {
    pmt_config_defaults(cfg);
    cfg->d_model = 16;
    cfg->n_heads = 2;
    cfg->d_ff = 24;
    cfg->enc_layers = 1;
    cfg->dec_layers = 2;
    cfg->max_len = 16;
    cfg->batch_tokens = 64;
    for (int s = 0; s < PMT_SITES; s++) cfg->site_kind[s] = kind;
    cfg->lr = 0.00123;
}

static void make_model_v(pmt_model *m, int kind, uint64_t seed, int vocab) {
    pmt_config cfg;
    char err[256];
    tiny_config(&cfg, kind);
    int rc = pmt_model_init(m, &cfg, vocab, 64, 16, err, sizeof err);
    CHECK_MSG(rc == 0, "%s", err);
    if (rc != 0) exit(1);
    pmt_model_init_params(m, seed);
}

static void make_model(pmt_model *m, int kind, uint64_t seed) { make_model_v(m, kind, seed, VOCAB); }

static void fill_optim(pmt_optim *o, const pmt_model *m) {
    char err[256];
    CHECK(pmt_optim_init(o, &m->cfg, m->tensors, m->n_tensors, m->n_params, err, sizeof err) == 0);
    pmt_rng r = {99};
    for (size_t i = 0; i < o->n; i++) {
        o->m[i] = (float)pmt_rng_normal(&r);
        o->v[i] = (float)pmt_rng_uniform(&r);
    }
    o->t = 1234;
    o->bad_steps = 2;
    o->skipped = 5;
}

static void fill_state(pmt_train_state *st) {
    memset(st, 0, sizeof *st);
    st->step = 1234;
    st->epoch = 3;
    st->batch = 17;
    st->seed = 42;
    st->has_best = 1;
    st->best_metric = 2.718281828;
    st->elapsed_seconds = 61.5;
    st->win_loss_sum = 1e-3;
    st->win_steps = 4;
}

static size_t read_bytes(const char *path, unsigned char **out) {
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    *out = malloc((size_t)n);
    size_t got = fread(*out, 1, (size_t)n, f);
    fclose(f);
    return got;
}

static void write_bytes(const char *path, const unsigned char *p, size_t n) {
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL && fwrite(p, 1, n, f) == n);
    if (f) CHECK(fclose(f) == 0);
}

/* Loading path must fail with a message that names it and contains `expect`. */
static void expect_load_error(const char *path, const char *expect) {
    pmt_checkpoint ck;
    char err[512] = "";
    CHECK(pmt_checkpoint_load(&ck, path, err, sizeof err) == -1);
    CHECK_MSG(strstr(err, path) != NULL && strstr(err, expect) != NULL, "message '%s' lacks '%s'", err, expect);
    CHECK(ck.params == NULL && ck.tensors == NULL);
}

static void test_round_trip(const char *dir) {
    pmt_model m;
    pmt_optim o;
    pmt_train_state st;
    char path[1024], tmp[1100], err[512];
    make_model(&m, PMT_ATTN_STANDARD, 7);
    fill_optim(&o, &m);
    fill_state(&st);
    snprintf(path, sizeof path, "%s/last.ckpt", dir);
    const pmt_adam_state adam = pmt_optim_state(&o);
    int rc = pmt_checkpoint_save(path, &m, FAKE_SPM, sizeof FAKE_SPM, &adam, &st, NULL, err, sizeof err);
    CHECK_MSG(rc == 0, "%s", err);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    CHECK(access(tmp, F_OK) != 0);

    pmt_checkpoint ck;
    rc = pmt_checkpoint_load(&ck, path, err, sizeof err);
    CHECK_MSG(rc == 0, "%s", err);
    if (rc == 0) {
        char *text = pmt_config_to_string(&m.cfg), *again = pmt_config_to_string(&ck.cfg);
        CHECK(strcmp(text, ck.config_text) == 0 && strcmp(text, again) == 0);
        free(text);
        free(again);
        CHECK(ck.spm_size == sizeof FAKE_SPM && memcmp(ck.spm, FAKE_SPM, sizeof FAKE_SPM) == 0);
        CHECK(ck.vocab_size == VOCAB && ck.n_tensors == m.n_tensors && ck.n_params == m.n_params);
        CHECK(memcmp(ck.tensors, m.tensors, (size_t)m.n_tensors * sizeof *m.tensors) == 0);
        CHECK(memcmp(ck.params, m.params, m.n_params * sizeof(float)) == 0);
        CHECK(ck.has_optim && ck.has_state);
        CHECK(memcmp(ck.adam_m, o.m, o.n * sizeof(float)) == 0 && memcmp(ck.adam_v, o.v, o.n * sizeof(float)) == 0);
        CHECK(ck.adam_t == 1234 && ck.adam_bad_steps == 2 && ck.adam_skipped == 5);
        CHECK(memcmp(&ck.state, &st, sizeof st) == 0);

        /* Into a fresh model and optimizer: bitwise the saved ones. */
        pmt_model m2;
        pmt_optim o2;
        make_model(&m2, PMT_ATTN_STANDARD, 8);
        CHECK(memcmp(m2.params, m.params, m.n_params * sizeof(float)) != 0);
        CHECK(pmt_checkpoint_copy_params(&ck, &m2, err, sizeof err) == 0);
        CHECK(memcmp(m2.params, m.params, m.n_params * sizeof(float)) == 0);
        CHECK(pmt_optim_init(&o2, &m2.cfg, m2.tensors, m2.n_tensors, m2.n_params, err, sizeof err) == 0);
        CHECK(pmt_optim_restore(&o2, &ck, err, sizeof err) == 0);
        CHECK(memcmp(o2.m, o.m, o.n * sizeof(float)) == 0 && o2.t == 1234 && o2.bad_steps == 2);
        pmt_optim_free(&o2);
        pmt_model_free(&m2);

        /* A different architecture is refused, naming the tensor. */
        pmt_model p;
        make_model(&p, PMT_ATTN_PROJECTION, 7);
        err[0] = '\0';
        CHECK(pmt_checkpoint_copy_params(&ck, &p, err, sizeof err) == -1);
        CHECK_MSG(strstr(err, "differs") != NULL || strstr(err, "tensor") != NULL, "message: %s", err);
        pmt_model_free(&p);
        pmt_checkpoint_free(&ck);
    }

    /* Parameters only (what a translator needs). */
    snprintf(path, sizeof path, "%s/params.ckpt", dir);
    CHECK(pmt_checkpoint_save(path, &m, FAKE_SPM, sizeof FAKE_SPM, NULL, NULL, NULL, err, sizeof err) == 0);
    CHECK(pmt_checkpoint_load(&ck, path, err, sizeof err) == 0);
    CHECK(!ck.has_optim && !ck.has_state && ck.adam_m == NULL);
    CHECK(memcmp(ck.params, m.params, m.n_params * sizeof(float)) == 0);
    pmt_checkpoint_free(&ck);
    pmt_optim_free(&o);
    pmt_model_free(&m);
}

static void test_damaged_files(const char *dir) {
    char good[1024], bad[1024], err[512];
    pmt_model m;
    make_model(&m, PMT_ATTN_PROJECTION, 3);
    snprintf(good, sizeof good, "%s/good.ckpt", dir);
    CHECK(pmt_checkpoint_save(good, &m, FAKE_SPM, sizeof FAKE_SPM, NULL, NULL, NULL, err, sizeof err) == 0);
    unsigned char *bytes = NULL;
    size_t n = read_bytes(good, &bytes);
    CHECK(n > 100);
    snprintf(bad, sizeof bad, "%s/bad.ckpt", dir);

    expect_load_error(bad, "cannot open");
    const size_t cuts[] = {0, 5, 30, n / 2, n - 9, n - 1};
    for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
        write_bytes(bad, bytes, cuts[i]);
        expect_load_error(bad, "");
        pmt_checkpoint ck;
        CHECK_MSG(pmt_checkpoint_load(&ck, bad, err, sizeof err) == -1, "a %zu-byte prefix loaded", cuts[i]);
    }
    /* Flipped bits inside the compressed stream. */
    for (size_t pos = 20; pos < n - 8; pos += n / 7) {
        unsigned char *copy = malloc(n);
        memcpy(copy, bytes, n);
        copy[pos] ^= 0x5a;
        write_bytes(bad, copy, n);
        expect_load_error(bad, "corrupted");
        free(copy);
    }
    /* A plain-text file and a gzip file with other contents: bad magic. */
    write_bytes(bad, (const unsigned char *)"[model]\nd_model = 4\n", 20);
    expect_load_error(bad, "not a projmt checkpoint");
    gzFile gz = gzopen(bad, "wb");
    CHECK(gz != NULL && gzwrite(gz, "PMTTOK\0\1 more bytes here", 24) == 24 && gzclose(gz) == Z_OK);
    expect_load_error(bad, "not a projmt checkpoint");
    /* The right magic with a future version. */
    uint32_t version = PMT_CHECKPOINT_VERSION + 1;
    gz = gzopen(bad, "wb");
    CHECK(gz != NULL && gzwrite(gz, "PMTCKPT\0", 8) == 8 && gzwrite(gz, &version, 4) == 4 && gzclose(gz) == Z_OK);
    char named[64];
    snprintf(named, sizeof named, "format version %u", version);   /* the file's version is named */
    expect_load_error(bad, named);
    free(bytes);
    pmt_model_free(&m);
}

/* A save that cannot complete reports an error and leaves the old file as it was. */
static void test_failed_save_keeps_old_file(const char *dir) {
    char path[1024], tmp[1100], err[512] = "";
    pmt_model m;
    make_model(&m, PMT_ATTN_STANDARD, 1);
    snprintf(path, sizeof path, "%s/keep.ckpt", dir);
    CHECK(pmt_checkpoint_save(path, &m, FAKE_SPM, 4, NULL, NULL, NULL, err, sizeof err) == 0);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    CHECK(mkdir(tmp, 0755) == 0);  /* the temporary file cannot be created */
    m.params[0] += 1.0f;
    CHECK(pmt_checkpoint_save(path, &m, FAKE_SPM, 4, NULL, NULL, NULL, err, sizeof err) == -1);
    CHECK_MSG(strstr(err, "keep.ckpt.tmp") != NULL, "message: %s", err);
    pmt_checkpoint ck;
    CHECK(pmt_checkpoint_load(&ck, path, err, sizeof err) == 0);
    CHECK(ck.params && ck.params[0] == m.params[0] - 1.0f);
    pmt_checkpoint_free(&ck);
    CHECK(rmdir(tmp) == 0);
    snprintf(path, sizeof path, "%s/no/such/dir/x.ckpt", dir);
    CHECK(pmt_checkpoint_save(path, &m, FAKE_SPM, 4, NULL, NULL, NULL, err, sizeof err) == -1);
    CHECK_MSG(strstr(err, "x.ckpt.tmp") != NULL, "message: %s", err);
    pmt_model_free(&m);
}

/* Writes a small bilingual-looking text and trains a SentencePiece model on it. */
static int train_spm(const char *dir, char *model_path, size_t len) {
    enum { PREFIX_MAX = 900 };
    static const char *words[] = {"the", "cat", "dog", "house", "el", "gato", "perro", "casa", "is", "es",
                                  "big", "grande", "small", "pequeño", "red", "rojo"};
    char text_path[1024], prefix[PREFIX_MAX];
    snprintf(text_path, sizeof text_path, "%s/text.txt", dir);
    FILE *f = fopen(text_path, "w");
    if (!f) return -1;
    pmt_rng r = {11};
    for (int line = 0; line < 300; line++) {
        for (int w = 0; w < 6; w++) fprintf(f, "%s%s", w ? " " : "", words[pmt_rng_below(&r, 16)]);
        fputc('\n', f);
    }
    if (fclose(f) != 0) return -1;
    snprintf(prefix, sizeof prefix, "%s/spm", dir);
    if (test_train_spm(text_path, prefix, VOCAB) != 0) return -1;
    if (snprintf(model_path, len, "%.900s.model", prefix) >= (int)len) return -1;
    return 0;
}

static void test_load_model_for_translation(const char *dir) {
    char spm_path[1024], path[1024], err[512];
    CHECK(train_spm(dir, spm_path, sizeof spm_path) == 0);
    pmt_spm *spm = pmt_spm_load_file(spm_path, err, sizeof err);
    CHECK_MSG(spm != NULL, "%s", err);
    if (!spm) return;
    size_t spm_size;
    const void *spm_bytes = pmt_spm_serialized(spm, &spm_size);
    pmt_model m, t;
    int vocab = pmt_spm_vocab_size(spm);
    CHECK(vocab > 20);
    make_model_v(&m, PMT_ATTN_PROJECTION, 5, vocab);
    snprintf(path, sizeof path, "%s/best.ckpt", dir);
    CHECK(pmt_checkpoint_save(path, &m, spm_bytes, spm_size, NULL, NULL, NULL, err, sizeof err) == 0);
    pmt_spm *loaded = NULL;
    int rc = pmt_checkpoint_load_model(path, &t, 40, 0, &loaded, err, sizeof err);
    CHECK_MSG(rc == 0, "%s", err);
    if (rc == 0) {
        CHECK(t.V == vocab && t.max_len == m.cfg.max_len && t.max_rows == 40);
        CHECK(t.cfg.site_kind[PMT_SITE_DEC_CROSS] == PMT_ATTN_PROJECTION && t.cfg.lr == m.cfg.lr);
        CHECK(t.n_params == m.n_params && memcmp(t.params, m.params, m.n_params * sizeof(float)) == 0);
        /* Loaded for translation: no gradients and no backward scratch. */
        CHECK(t.grads == NULL);
        pmt_model full;
        char ferr[256];
        if (pmt_model_init(&full, &t.cfg, t.V, 40, t.max_len, ferr, sizeof ferr) == 0) {
            CHECK(full.grads != NULL);
            CHECK_MSG(pmt_model_arena_floats(&t) < pmt_model_arena_floats(&full), "inference arena %zu, training %zu",
                      pmt_model_arena_floats(&t), pmt_model_arena_floats(&full));
            pmt_model_free(&full);
        }
        CHECK(loaded && pmt_spm_vocab_size(loaded) == vocab);
        int32_t a[16], b[16];
        int na = pmt_spm_encode(spm, "the big cat", a, 16), nb = pmt_spm_encode(loaded, "the big cat", b, 16);
        CHECK(na > 0 && na == nb && memcmp(a, b, (size_t)na * sizeof a[0]) == 0);
        pmt_spm_free(loaded);
        pmt_model_free(&t);
    }
    /* Fake SentencePiece bytes: a clear error and nothing left allocated. */
    CHECK(pmt_checkpoint_save(path, &m, FAKE_SPM, sizeof FAKE_SPM, NULL, NULL, NULL, err, sizeof err) == 0);
    loaded = NULL;
    CHECK(pmt_checkpoint_load_model(path, &t, 40, 0, &loaded, err, sizeof err) == -1);
    CHECK_MSG(strstr(err, "SentencePiece") != NULL, "message: %s", err);
    /* A SentencePiece model whose vocabulary is not the model's is refused. */
    pmt_model w;
    make_model_v(&w, PMT_ATTN_STANDARD, 5, vocab + 1);
    CHECK(pmt_checkpoint_save(path, &w, spm_bytes, spm_size, NULL, NULL, NULL, err, sizeof err) == 0);
    CHECK(pmt_checkpoint_load_model(path, &t, 40, 0, &loaded, err, sizeof err) == -1);
    CHECK_MSG(strstr(err, "vocabulary") != NULL, "message: %s", err);
    pmt_model_free(&w);
    pmt_model_free(&m);
    pmt_spm_free(spm);
}

/* A pooling-family model (kernel, metric and σ² in its config, metric
 * parameters among its tensors) comes back as the same model: same config,
 * same parameters, and a model of another metric refuses its parameters. */
static void test_pooling_round_trip(const char *dir) {
    pmt_config cfg;
    char path[1024], err[512];
    tiny_config(&cfg, PMT_ATTN_PROJECTION);
    cfg.proj_kernel = PMT_KERNEL_EPANECHNIKOV;
    cfg.proj_metric = PMT_METRIC_DIAGONAL;
    cfg.sigma_learned = 1;
    cfg.sigma_sq = 7.5;
    pmt_model m, back;
    CHECK_MSG(pmt_model_init(&m, &cfg, VOCAB, 64, 16, err, sizeof err) == 0, "%s", err);
    pmt_model_init_params(&m, 3);
    CHECK(pmt_model_find_tensor(&m, "dec.1.cross.log_metric") != NULL);
    CHECK_NEAR(m.params[pmt_model_find_tensor(&m, "enc.0.self.log_sigma")->offset], 0.5 * log(7.5), 1e-6);
    for (size_t i = 0; i < m.n_params; i++) m.params[i] += 1e-3f * (float)(i % 7);
    snprintf(path, sizeof path, "%s/pool.ckpt", dir);
    CHECK_MSG(pmt_checkpoint_save(path, &m, FAKE_SPM, sizeof FAKE_SPM, NULL, NULL, NULL, err, sizeof err) == 0, "%s", err);
    CHECK_MSG(pmt_checkpoint_load_model(path, &back, 64, 16, NULL, err, sizeof err) == 0, "%s", err);
    CHECK(back.cfg.proj_kernel == PMT_KERNEL_EPANECHNIKOV && back.cfg.proj_metric == PMT_METRIC_DIAGONAL &&
          back.cfg.sigma_learned == 1 && back.cfg.sigma_sq == 7.5);
    CHECK(back.n_params == m.n_params && memcmp(back.params, m.params, m.n_params * sizeof(float)) == 0);
    pmt_model_free(&back);

    pmt_checkpoint ck;
    CHECK(pmt_checkpoint_load(&ck, path, err, sizeof err) == 0);
    pmt_model other;
    cfg.proj_metric = PMT_METRIC_COSINE;
    CHECK(pmt_model_init(&other, &cfg, VOCAB, 64, 16, err, sizeof err) == 0);
    CHECK(pmt_checkpoint_copy_params(&ck, &other, err, sizeof err) == -1);
    pmt_model_free(&other);
    pmt_checkpoint_free(&ck);
    pmt_model_free(&m);
}

int main(void) {
    const char *dir = test_tmpdir("ckpt");
    char d[1024];
    snprintf(d, sizeof d, "%s", dir);
    test_round_trip(d);
    test_pooling_round_trip(d);
    test_damaged_files(d);
    test_failed_save_keeps_old_file(d);
    test_load_model_for_translation(d);
    return test_finish();
}

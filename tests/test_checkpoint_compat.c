/*
 * test_checkpoint_compat.c — checkpoints across builds and against lying
 * headers. The files are written here byte by byte (gzip + crc32 through
 * zlib directly), so the layouts under test are spelled out independently
 * of the writer in model/checkpoint.c:
 *   - format version 1 (training state as the raw 136-byte struct of that
 *     build) still loads, with every state field where it belongs and no
 *     corpus identity;
 *   - a version-2 file with a config key and a state field this build does
 *     not know loads with both ignored and named in ck.ignored;
 *   - headers that claim more than the file can hold (2^33 parameters, 2^20
 *     tensors, a 200 MB SentencePiece model, 255 state fields in a tiny
 *     file) are refused before anything of that size is allocated, naming
 *     the count;
 *   - the corpus identity (pairs, checksum) round-trips in version 2;
 *   - files of builds before the fused Q/K/V projection (separate wq, bq,
 *     wk, bk, wv, bv per site) load in the fused layout, parameters, Adam
 *     moments and moving average alike, and fit the model; a separate-Q/K/V
 *     run that is not whole is refused by name.
 */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "core/log.h"
#include "model/checkpoint.h"
#include "testutil.h"

enum { VOCAB = 37, NAME_BYTES = 64, STATE_NAME_BYTES = 32 };
static const char SPM[] = "fake sentencepiece bytes";

typedef struct {
    gzFile gz;
    uLong crc;
} raw_writer;

static void put(raw_writer *w, const void *p, size_t n) {
    CHECK(n == 0 || gzwrite(w->gz, p, (unsigned)n) == (int)n);
    w->crc = crc32(w->crc, p, (uInt)n);
}
static void put_u32(raw_writer *w, uint32_t v) { put(w, &v, 4); }
static void put_i32(raw_writer *w, int32_t v) { put(w, &v, 4); }
static void put_u64(raw_writer *w, uint64_t v) { put(w, &v, 8); }
static void put_f64(raw_writer *w, double v) { put(w, &v, 8); }

static void make_model(pmt_model *m) {
    pmt_config cfg;
    char err[256];
    pmt_config_defaults(&cfg);
    cfg.d_model = 8;
    cfg.n_heads = 2;
    cfg.d_ff = 8;
    cfg.enc_layers = cfg.dec_layers = 1;
    cfg.max_len = 8;
    cfg.batch_tokens = 32;
    int rc = pmt_model_init(m, &cfg, VOCAB, 16, 8, err, sizeof err);
    CHECK_MSG(rc == 0, "%s", err);
    if (rc != 0) exit(1);
    pmt_model_init_params(m, 11);
}

/* What the header says; the test lies through these. */
typedef struct {
    uint32_t version, flags;
    const char *config;          /* NULL: the model's */
    uint64_t spm_len_claim;      /* 0: the real length */
    int32_t n_tensors_claim;     /* 0: the real count */
    uint64_t n_params_claim;     /* 0: the real count */
    int stop_after_header;       /* end the file after the counts */
    int v2_unknown_state_field;  /* add a state field named "future_counter" */
    uint32_t n_state_fields_claim;
    int legacy_qkv;              /* the separate Q/K/V layout (testutil.h) */
    int legacy_broken;           /* ... with the first site's bq renamed */
} layout;

/* The v1 state: 17 eight-byte fields in the order of that build's struct. */
static void put_state_v1(raw_writer *w) {
    put_u32(w, 17 * 8);
    const uint64_t ints[] = {1234, 3, 17, 42, 1};   /* step epoch batch seed has_best */
    for (int i = 0; i < 5; i++) put_u64(w, ints[i]);
    put_f64(w, 2.5);                                /* best_metric */
    put_u64(w, 2);                                  /* stale_validations */
    put_f64(w, 61.5);                               /* elapsed_seconds */
    put_u64(w, 99999);                              /* tokens_seen */
    put_f64(w, 0.25); put_f64(w, 0.125); put_f64(w, 3.0);      /* win_loss/nll/grad_norm sums */
    put_u64(w, 400); put_u64(w, 123); put_u64(w, 4); put_u64(w, 420);   /* win tokens/correct/steps/all */
    put_f64(w, 1.75);                               /* win_seconds */
}

static void put_state_field(raw_writer *w, const char *name, uint64_t bits) {
    char field[STATE_NAME_BYTES] = {0};
    snprintf(field, sizeof field, "%s", name);
    put(w, field, sizeof field);
    put_u64(w, bits);
}

static void put_state_v2(raw_writer *w, const layout *l) {
    uint32_t n = 4 + (l->v2_unknown_state_field ? 1 : 0);
    put_u32(w, l->n_state_fields_claim ? l->n_state_fields_claim : n);
    put_state_field(w, "step", 77);
    put_state_field(w, "seed", 5);
    put_state_field(w, "train_pairs", 240);
    put_state_field(w, "train_checksum", 0xdeadbeefu);
    if (l->v2_unknown_state_field) put_state_field(w, "future_counter", 9);
}

static void write_file(const char *path, const pmt_model *m, const layout *l) {
    raw_writer w = {gzopen(path, "wb1"), crc32(0L, Z_NULL, 0)};
    pmt_tensor *table = calloc((size_t)m->n_tensors * 3, sizeof *table);
    float *params = malloc(m->n_params * sizeof *params);
    int n_tensors = m->n_tensors;
    memcpy(table, m->tensors, (size_t)n_tensors * sizeof *table);
    memcpy(params, m->params, m->n_params * sizeof *params);
    if (l->legacy_qkv) {
        n_tensors = test_legacy_qkv_table(m, table);
        test_unfuse_qkv(m, m->params, params);
        for (int i = 0; l->legacy_broken && i < n_tensors; i++) {
            char *leaf = strrchr(table[i].name, '.');
            if (leaf && !strcmp(leaf, ".bq")) {
                strcpy(leaf, ".bx");
                break;
            }
        }
    }
    CHECK(w.gz != NULL);
    char *config = pmt_config_to_string(&m->cfg);
    const char *text = l->config ? l->config : config;
    put(&w, "PMTCKPT\0", 8);
    put_u32(&w, l->version);
    put_u32(&w, l->flags);
    put_u64(&w, strlen(text));
    put(&w, text, strlen(text));
    put_u64(&w, l->spm_len_claim ? l->spm_len_claim : sizeof SPM);
    if (l->spm_len_claim && l->stop_after_header) goto done;
    put(&w, SPM, sizeof SPM);
    put_i32(&w, m->V);
    put_i32(&w, l->n_tensors_claim ? l->n_tensors_claim : n_tensors);
    if (l->n_tensors_claim && l->stop_after_header) goto done;
    for (int i = 0; i < n_tensors; i++) {
        char name[NAME_BYTES] = {0};
        snprintf(name, sizeof name, "%s", table[i].name);
        put(&w, name, sizeof name);
        put_i32(&w, table[i].rows);
        put_i32(&w, table[i].cols);
        put_u64(&w, table[i].offset);
        put_u64(&w, table[i].size);
    }
    put_u64(&w, l->n_params_claim ? l->n_params_claim : m->n_params);
    if (l->n_params_claim && l->stop_after_header) goto done;
    put(&w, params, m->n_params * sizeof(float));
    if (l->flags & 1) {   /* Adam moments: the parameters again */
        put(&w, params, m->n_params * sizeof(float));
        put(&w, params, m->n_params * sizeof(float));
        put_u64(&w, 7); put_u64(&w, 0); put_u64(&w, 1);
    }
    if (l->flags & 2) {
        if (l->version == 1) put_state_v1(&w);
        else put_state_v2(&w, l);
    }
    if (l->flags & 4) put(&w, params, m->n_params * sizeof(float));   /* moving average: the same */
    uint32_t crc = (uint32_t)w.crc;
    CHECK(gzwrite(w.gz, &crc, 4) == 4);
done:
    CHECK(gzclose(w.gz) == Z_OK);
    free(config);
    free(table);
    free(params);
}

/* Writes dir/file by the layout and loads it into ck: 0, or -1 (counted as a failure). */
static int write_and_load(const char *dir, const char *file, const pmt_model *m, const layout *l, pmt_checkpoint *ck) {
    char path[4200], err[512];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    write_file(path, m, l);
    int rc = pmt_checkpoint_load(ck, path, err, sizeof err);
    CHECK_MSG(rc == 0, "%s", err);
    return rc;
}

static void test_version1(const char *dir, const pmt_model *m) {
    pmt_checkpoint ck;
    /* Version-1 files predate the fused Q/K/V projection. */
    if (write_and_load(dir, "v1.ckpt", m, &(layout){.version = 1, .flags = 3, .legacy_qkv = 1}, &ck) != 0) return;
    const pmt_train_state *s = &ck.state;
    CHECK(ck.version == 1 && ck.has_state && ck.has_optim && ck.adam_t == 7);
    CHECK(s->step == 1234 && s->epoch == 3 && s->batch == 17 && s->seed == 42 && s->has_best == 1);
    CHECK(s->best_metric == 2.5 && s->stale_validations == 2 && s->elapsed_seconds == 61.5 && s->tokens_seen == 99999);
    CHECK(s->win_loss_sum == 0.25 && s->win_nll_sum == 0.125 && s->win_grad_norm_sum == 3.0);
    CHECK(s->win_tokens == 400 && s->win_correct == 123 && s->win_steps == 4 && s->win_all_tokens == 420);
    CHECK(s->win_seconds == 1.75);
    CHECK(s->train_pairs == 0 && s->train_checksum == 0);   /* v1 did not know the corpus */
    CHECK(memcmp(ck.params, m->params, m->n_params * sizeof(float)) == 0);
    pmt_checkpoint_free(&ck);
}

/* What the log callback received (test_unknown_keys). */
static char logged[1024];
static int logged_level;

static void keep_log(pmt_log_level level, const char *message, void *user) {
    (void)user;
    logged_level = level;
    snprintf(logged, sizeof logged, "%s", message);
}

/* Bytes the library wrote to stderr while loading path (nothing, it never
 * prints): stderr is a temporary file for the call. */
static long stderr_bytes_of_load(const char *dir, const char *path) {
    char capture[4200], err[512];
    snprintf(capture, sizeof capture, "%s/stderr.txt", dir);
    fflush(stderr);
    const int saved = dup(2), fd = open(capture, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (saved < 0 || fd < 0) return -1;
    dup2(fd, 2);
    pmt_checkpoint ck;
    const int rc = pmt_checkpoint_load(&ck, path, err, sizeof err);
    if (rc == 0) pmt_checkpoint_free(&ck);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    struct stat st;
    const long bytes = fstat(fd, &st) == 0 ? (long)st.st_size : -1;
    close(fd);
    return rc == 0 ? bytes : -1;
}

static void test_unknown_keys(const char *dir, const pmt_model *m) {
    char path[4200], err[512];
    char *config = pmt_config_to_string(&m->cfg);
    size_t n = strlen(config) + 128;
    char *newer = malloc(n);
    snprintf(newer, n, "%s[future]\nfuture_option = 3\nrope_scaling = yarn\n", config);
    snprintf(path, sizeof path, "%s/newer.ckpt", dir);
    write_file(path, m, &(layout){.version = 2, .flags = 2, .config = newer, .v2_unknown_state_field = 1});
    /* The warning goes to the log callback, naming the file and the keys;
     * with none installed the library writes nothing at all. */
    CHECK_MSG(stderr_bytes_of_load(dir, path) == 0, "the library printed while loading a newer checkpoint");
    pmt_log_set(keep_log, NULL);
    pmt_checkpoint ck;
    int rc = pmt_checkpoint_load(&ck, path, err, sizeof err);
    pmt_log_set(NULL, NULL);
    CHECK_MSG(logged_level == PMT_LOG_WARNING && strstr(logged, "newer.ckpt") && strstr(logged, "future_option"),
              "logged: '%s'", logged);
    CHECK_MSG(rc == 0, "%s", err);
    if (rc == 0) {
        CHECK(ck.cfg.d_model == 8 && ck.cfg.max_len == 8);
        CHECK_MSG(strstr(ck.ignored, "future_option") && strstr(ck.ignored, "rope_scaling") &&
                  strstr(ck.ignored, "future_counter"), "ignored: '%s'", ck.ignored);
        CHECK(ck.state.step == 77 && ck.state.seed == 5 && ck.state.train_pairs == 240 &&
              ck.state.train_checksum == 0xdeadbeefu && ck.state.epoch == 0);
        pmt_checkpoint_free(&ck);
    }
    /* A known key with a value this build cannot read is still an error. */
    snprintf(newer, n, "%sd_model = wide\n", config);
    write_file(path, m, &(layout){.version = 2, .flags = 0, .config = newer});
    CHECK(pmt_checkpoint_load(&ck, path, err, sizeof err) == -1 && strstr(err, "d_model"));
    free(newer);
    free(config);
}

/* Loading must fail naming `expect`, for a file of a few KB. */
static void expect_refused(const char *dir, const pmt_model *m, const layout *l, const char *expect) {
    char path[4200], err[512] = "";
    snprintf(path, sizeof path, "%s/liar.ckpt", dir);
    write_file(path, m, l);
    pmt_checkpoint ck;
    CHECK(pmt_checkpoint_load(&ck, path, err, sizeof err) == -1);
    CHECK_MSG(strstr(err, expect) != NULL, "message '%s' lacks '%s'", err, expect);
}

static void test_lying_headers(const char *dir, const pmt_model *m) {
    const char *more = "more than the file can hold";
    expect_refused(dir, m, &(layout){.version = 2, .n_params_claim = (uint64_t)1 << 33, .stop_after_header = 1}, more);
    expect_refused(dir, m, &(layout){.version = 2, .n_params_claim = (uint64_t)1 << 33}, more);
    expect_refused(dir, m, &(layout){.version = 2, .n_tensors_claim = 1 << 20, .stop_after_header = 1}, more);
    expect_refused(dir, m, &(layout){.version = 2, .spm_len_claim = 200u << 20, .stop_after_header = 1}, more);
    expect_refused(dir, m, &(layout){.version = 2, .flags = 2, .n_state_fields_claim = 255}, "");
    expect_refused(dir, m, &(layout){.version = 2, .flags = 2, .n_state_fields_claim = 1u << 30}, "state");
}

static void test_identity_round_trip(const char *dir, const pmt_model *m) {
    char path[4200], err[512];
    snprintf(path, sizeof path, "%s/v2.ckpt", dir);
    pmt_train_state st;
    memset(&st, 0, sizeof st);
    st.step = 9;
    st.train_pairs = 118964;
    st.train_checksum = 0x89abcdefu;
    CHECK(pmt_checkpoint_save(path, m, SPM, sizeof SPM, NULL, &st, NULL, err, sizeof err) == 0);
    pmt_checkpoint ck;
    CHECK(pmt_checkpoint_load(&ck, path, err, sizeof err) == 0);
    CHECK(ck.version == PMT_CHECKPOINT_VERSION && PMT_CHECKPOINT_VERSION == 2);
    CHECK(memcmp(&ck.state, &st, sizeof st) == 0 && ck.ignored[0] == '\0');
    pmt_checkpoint_free(&ck);
}

/* A checkpoint of the separate Q/K/V layout loads as the model's own
 * layout: same table, and every stored array (parameters, both Adam
 * moments, moving average) permuted alike, so a resumed run continues from
 * the same state; it copies into a model of the config. */
static void test_legacy_qkv(const char *dir, const pmt_model *m) {
    char err[512];
    pmt_checkpoint ck;
    if (write_and_load(dir, "legacy-qkv.ckpt", m, &(layout){.version = 2, .flags = 7, .legacy_qkv = 1}, &ck) != 0)
        return;
    const size_t bytes = m->n_params * sizeof(float);
    CHECK(ck.n_tensors == m->n_tensors && ck.n_params == m->n_params && ck.has_optim && ck.has_ema);
    for (int i = 0; i < ck.n_tensors && i < m->n_tensors; i++)
        CHECK_MSG(!strcmp(ck.tensors[i].name, m->tensors[i].name) && ck.tensors[i].rows == m->tensors[i].rows &&
                  ck.tensors[i].cols == m->tensors[i].cols && ck.tensors[i].offset == m->tensors[i].offset,
                  "tensor %d: '%s', the model's '%s'", i, ck.tensors[i].name, m->tensors[i].name);
    CHECK(memcmp(ck.params, m->params, bytes) == 0);
    CHECK(memcmp(ck.adam_m, m->params, bytes) == 0 && memcmp(ck.adam_v, m->params, bytes) == 0);
    CHECK(memcmp(ck.ema, m->params, bytes) == 0);
    pmt_model copy;
    int rc = pmt_model_init_inference(&copy, &m->cfg, m->V, 16, 8, err, sizeof err);
    CHECK_MSG(rc == 0, "%s", err);
    if (rc == 0) {
        CHECK_MSG(pmt_checkpoint_copy_params(&ck, &copy, err, sizeof err) == 0, "%s", err);
        CHECK(memcmp(copy.params, m->params, bytes) == 0);
        pmt_model_free(&copy);
    }
    pmt_checkpoint_free(&ck);
    expect_refused(dir, m, &(layout){.version = 2, .legacy_qkv = 1, .legacy_broken = 1}, "cannot be converted");
}

int main(void) {
    const char *dir = test_tmpdir("ckpt-compat");
    pmt_model m;
    make_model(&m);
    test_version1(dir, &m);
    test_unknown_keys(dir, &m);
    test_lying_headers(dir, &m);
    test_identity_round_trip(dir, &m);
    test_legacy_qkv(dir, &m);
    pmt_model_free(&m);
    return test_finish();
}

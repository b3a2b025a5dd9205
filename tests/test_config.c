/* test_config.c — defaults, INI files, CLI precedence, shorthand, round trip, errors. */
#include <stdlib.h>
#include <string.h>

#include "core/config.h"
#include "testutil.h"

static void test_defaults_and_validate(void) {
    pmt_config c;
    char err[512];
    pmt_config_defaults(&c);
    CHECK(c.d_model == 256 && c.n_heads == 4 && c.d_ff == 1024);
    CHECK(c.vocab_size == 8000 && c.batch_tokens == 4096 && c.warmup == 1000);
    CHECK_NEAR(c.lr, 7e-4, 1e-12);
    CHECK(c.site_kind[PMT_SITE_DEC_CROSS] == PMT_ATTN_STANDARD);
    CHECK(pmt_config_validate(&c, err, sizeof err) == 0);
    c.n_heads = 3;
    CHECK(pmt_config_validate(&c, err, sizeof err) == -1);
    CHECK(strstr(err, "n_heads") != NULL);
    /* max_len has a documented cap (attention memory grows with its square). */
    pmt_config_defaults(&c);
    c.max_len = PMT_MAX_LEN_CAP;
    c.batch_tokens = 2 * PMT_MAX_LEN_CAP;
    CHECK(pmt_config_validate(&c, err, sizeof err) == 0);
    c.max_len = PMT_MAX_LEN_CAP + 1;
    c.batch_tokens = 2 * PMT_MAX_LEN_CAP + 2;
    CHECK(pmt_config_validate(&c, err, sizeof err) == -1);
    CHECK(strstr(err, "max_len") != NULL && strstr(err, "2048") != NULL);
}

static void test_file_then_flags(void) {
    const char *dir = test_tmpdir("config");
    char path[1200], err[512];
    snprintf(path, sizeof path, "%s/x.ini", dir);
    CHECK(test_write_file(path, "[model]\nd_model = 64\nattention = projection\n[train]\nlr = 0.01\n") == 0);
    char *argv[] = {"train", "--lr", "0.5", "--config", path, "--decoder-self=standard", "--json"};
    const char *extra[] = {"json", "hyp=", NULL};
    const char *extra_val[2];
    int help, dump;
    pmt_config c;
    pmt_config_defaults(&c);
    int rc = pmt_config_parse_args(&c, 7, argv, extra, extra_val, &help, &dump, err, sizeof err);
    CHECK_MSG(rc == 0, "%s", err);
    CHECK(c.d_model == 64);
    CHECK_NEAR(c.lr, 0.5, 1e-12); /* the flag beats the file even when it comes first */
    CHECK(c.site_kind[PMT_SITE_ENC_SELF] == PMT_ATTN_PROJECTION);
    CHECK(c.site_kind[PMT_SITE_DEC_SELF] == PMT_ATTN_STANDARD);
    CHECK(c.site_kind[PMT_SITE_DEC_CROSS] == PMT_ATTN_PROJECTION);
    CHECK(extra_val[0] && !strcmp(extra_val[0], "1"));
    CHECK(extra_val[1] == NULL);
    CHECK(!help && !dump);
}

static void test_round_trip(void) {
    pmt_config a, b;
    char err[512];
    pmt_config_defaults(&a);
    a.d_model = 96;
    a.lr = 1.25e-3;
    a.sigma_learned = 1;
    a.proj_kernel = PMT_KERNEL_EPANECHNIKOV;
    a.proj_metric = PMT_METRIC_COSINE;
    a.sigma_sq = 12.5;
    a.site_kind[PMT_SITE_DEC_SELF] = PMT_ATTN_PROJECTION;
    strcpy(a.save_dir, "models/with space");
    char *text = pmt_config_to_string(&a);
    CHECK(text != NULL);
    pmt_config_defaults(&b);
    CHECK_MSG(pmt_config_load_string(&b, text, err, sizeof err) == 0, "%s", err);
    CHECK(memcmp(&a, &b, sizeof a) == 0);
    free(text);
}

static void test_errors(void) {
    pmt_config c;
    char err[512];
    int help, dump;
    pmt_config_defaults(&c);
    char *bad_key[] = {"train", "--no-such-thing", "1"};
    CHECK(pmt_config_parse_args(&c, 3, bad_key, NULL, NULL, &help, &dump, err, sizeof err) == -1);
    CHECK(strstr(err, "no-such-thing") != NULL);
    char *bad_value[] = {"train", "--d-model", "abc"};
    CHECK(pmt_config_parse_args(&c, 3, bad_value, NULL, NULL, &help, &dump, err, sizeof err) == -1);
    CHECK(strstr(err, "abc") != NULL && strstr(err, "d_model") != NULL);
    char *bad_kind[] = {"train", "--attention", "gaussian"};
    CHECK(pmt_config_parse_args(&c, 3, bad_kind, NULL, NULL, &help, &dump, err, sizeof err) == -1);
    char *missing[] = {"train", "--config", "/nonexistent/x.ini"};
    CHECK(pmt_config_parse_args(&c, 3, missing, NULL, NULL, &help, &dump, err, sizeof err) == -1);
    CHECK(strstr(err, "/nonexistent/x.ini") != NULL);
    char *positional[] = {"train", "stray"};
    CHECK(pmt_config_parse_args(&c, 2, positional, NULL, NULL, &help, &dump, err, sizeof err) == -1);
    char *no_value[] = {"train", "--lr"};
    CHECK(pmt_config_parse_args(&c, 2, no_value, NULL, NULL, &help, &dump, err, sizeof err) == -1);
}

/* The projection family's keys: names, the spelling, defaults, and
 * the combinations validation refuses (with a message naming them). */
static void test_projection_family(void) {
    pmt_config c;
    char err[512];
    pmt_config_defaults(&c);
    CHECK(c.proj_kernel == PMT_KERNEL_GAUSSIAN && c.proj_metric == PMT_METRIC_EUCLIDEAN && c.sigma_sq == 0);
    const char *kernels[] = {"gaussian", "boxcar", "constant", "epanechnikov"};
    for (int k = 0; k < PMT_KERNELS; k++) {
        CHECK(pmt_config_set(&c, "kernel", kernels[k], err, sizeof err) == 0 && c.proj_kernel == k);
        CHECK(!strcmp(pmt_kernel_name(k), kernels[k]));
    }
    CHECK(pmt_config_set(&c, "kernel", "epanechikov", err, sizeof err) == 0 &&
          c.proj_kernel == PMT_KERNEL_EPANECHNIKOV);
    CHECK(pmt_config_set(&c, "kernel", "triangle", err, sizeof err) == -1 && strstr(err, "triangle"));
    const char *metrics[] = {"euclidean", "diagonal", "cosine", "dot"};
    for (int m = 0; m < PMT_METRICS; m++) {
        CHECK(pmt_config_set(&c, "proj-metric", metrics[m], err, sizeof err) == 0 && c.proj_metric == m);
        CHECK(!strcmp(pmt_metric_name(m), metrics[m]));
    }
    CHECK(pmt_config_set(&c, "proj_metric", "manhattan", err, sizeof err) == -1);

    /* What validation refuses, only when a site uses projection attention. */
    struct { const char *kernel, *metric, *sigma, *needle; } bad[] = {
        {"boxcar", "euclidean", "learned", "no gradient with respect to sigma"},
        {"constant", "euclidean", "learned", "no gradient with respect to sigma"},
        {"boxcar", "cosine", "fixed", "could not learn"},
        {"constant", "diagonal", "fixed", "could not learn"},
        {"epanechnikov", "dot", "fixed", "needs kernel gaussian"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        pmt_config_defaults(&c);
        CHECK(pmt_config_set(&c, "kernel", bad[i].kernel, err, sizeof err) == 0);
        CHECK(pmt_config_set(&c, "proj_metric", bad[i].metric, err, sizeof err) == 0);
        CHECK(pmt_config_set(&c, "sigma", bad[i].sigma, err, sizeof err) == 0);
        CHECK_MSG(pmt_config_validate(&c, err, sizeof err) == 0, "all-standard model refused: %s", err);
        CHECK(pmt_config_set(&c, "decoder_cross", "projection", err, sizeof err) == 0);
        CHECK_MSG(pmt_config_validate(&c, err, sizeof err) == -1 && strstr(err, bad[i].needle),
                  "%s/%s/%s: got '%s'", bad[i].kernel, bad[i].metric, bad[i].sigma, err);
    }
    pmt_config_defaults(&c);
    c.site_kind[PMT_SITE_ENC_SELF] = PMT_ATTN_PROJECTION;
    c.sigma_sq = -1;
    CHECK(pmt_config_validate(&c, err, sizeof err) == -1 && strstr(err, "sigma_sq"));
    c.sigma_sq = 3;
    c.proj_kernel = PMT_KERNEL_EPANECHNIKOV;
    c.proj_metric = PMT_METRIC_DIAGONAL;
    c.sigma_learned = 1;
    CHECK_MSG(pmt_config_validate(&c, err, sizeof err) == 0, "%s", err);
}

static void test_shipped_configs_valid(void) {
    const char *names[] = {"tiny", "small", "base"};
    for (int i = 0; i < 3; i++) {
        char path[1200], err[512];
        pmt_config c;
        pmt_config_defaults(&c);
        snprintf(path, sizeof path, "%s/configs/%s.ini", test_source_dir(), names[i]);
        CHECK_MSG(pmt_config_load_file(&c, path, err, sizeof err) == 0, "%s", err);
        CHECK_MSG(pmt_config_validate(&c, err, sizeof err) == 0, "%s: %s", names[i], err);
    }
}

int main(void) {
    test_defaults_and_validate();
    test_file_then_flags();
    test_round_trip();
    test_errors();
    test_projection_family();
    test_shipped_configs_valid();
    return test_finish();
}

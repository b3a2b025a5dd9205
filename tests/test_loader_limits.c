/*
 * test_loader_limits.c — the loaders check the stored architecture before
 * they allocate a model for it (issue 43, part 5). Each crafted file of
 * tests/fuzz-regressions/{checkpoint,model_file}/ (written by
 * tests/fuzz/make_seeds.py: a few KB whose stored config is beyond one of
 * the limits of model/record.h, or does not describe its tensor table) is
 * loaded for translation, as `projmt translate` loads a model
 * (pmt_checkpoint_load_model), in a forked child whose address space is
 * capped (RLIMIT_AS) and whose peak resident memory is measured (VmHWM):
 * the load must fail with a message naming the file, the key, the value
 * and the limit (or the first tensor that differs), and the peak must stay
 * small. Before the checks, the loaders sized the model by the config:
 * several files made hundreds of MB resident from a 4 KB file, the others
 * asked for more than the cap and failed as "out of memory".
 * A real small checkpoint, and the generator's tiny model that the crafted
 * files are variations of, load under the same cap, so neither the cap nor
 * the generator is what refuses the crafted files. Last, pmt_model_init refuses a config beyond
 * the limits, naming the key, whoever built it.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include "model/checkpoint.h"
#include "testutil.h"

#if defined(__SANITIZE_ADDRESS__)
#define UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define UNDER_ASAN 1
#endif
#endif
#ifndef UNDER_ASAN
#define UNDER_ASAN 0   /* ASan reserves terabytes of shadow: no RLIMIT_AS under it */
#endif

/* Room above the child's address space at fork: a real small model needs a
 * few MB; every crafted file asked the old loaders for far more (or, for
 * the mismatched one, hundreds of MB resident, caught by the peak check). */
#define ADDRESS_SPACE_ROOM ((rlim_t)1 << 30)
/* Most a refused load may add to the peak resident memory. */
#define PEAK_GROWTH_KB (16 * 1024L)

typedef struct {
    const char *file;     /* in tests/fuzz-regressions/<target>/ */
    const char *expect;   /* what the message must say */
} crafted;

/* The files written for both formats. */
static const crafted shared_cases[] = {
    {"limit-d_model", "d_model = 1048576 is beyond this build's limit of 8192"},
    {"limit-n_heads", "n_heads = 4096 is beyond this build's limit of 256"},
    {"limit-head_size", "head size (d_model / n_heads) = 4096 is beyond this build's limit of 1024"},
    {"limit-d_ff", "d_ff = 268435456 is beyond this build's limit of 65536"},
    {"limit-enc_layers", "enc_layers = 1000000 is beyond this build's limit of 1024"},
    {"limit-dec_layers", "dec_layers = 16777216 is beyond this build's limit of 1024"},
    {"limit-vocab", "vocabulary size = 16777216 is beyond this build's limit of 1048576"},
    {"limit-max_len", "max_len = 1000000 is beyond this build's limit of 2048"},
    {"limit-batch_tokens", "batch_tokens = 1073741824 is beyond this build's limit of 1048576"},
    {"overflow-3-d_model", "d_model = 715827884 is beyond this build's limit of 8192"},
    {"mismatch-config-table", "implies tensor 0 'wte' [32000 x 512] at offset 0, but its tensor table holds "
                              "'wte' [4 x 2] at offset 0"},
    {"mismatch-extra-tensor", "implies 35 tensors of 122 parameters, but its tensor table holds 36 tensors of 126"},
};

/* The limit only an exported file has: its shortlist's candidates per source piece. */
static const crafted model_file_cases[] = {
    {"limit-shortlist_per_source", "1001 per source piece of at most 1000"},
};

/* One "<key>: <n> kB" line of /proc/self/status, or -1. */
static long status_kb(const char *key) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kb = -1;
    const size_t n = strlen(key);
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, key, n) && line[n] == ':') kb = strtol(line + n + 1, NULL, 10);
    if (f) fclose(f);
    return kb;
}

/* Writes a fuzz input as the harness does (fuzz_common.h): the first byte
 * is the framing (all crafted files use 2: gzip, the last 4 bytes rewritten
 * as the crc32 of the rest); the model_file target's inputs lack the
 * "PMTMODEL" magic, which goes in front. 0 or -1. */
static int write_framed(const char *in, const char *out, int add_model_magic) {
    FILE *f = fopen(in, "rb");
    if (!f) return -1;
    unsigned char *buf = malloc(1 << 16);
    size_t n = buf ? fread(buf, 1, 1 << 16, f) : 0;
    fclose(f);
    if (!buf || n < 6 || n == 1 << 16 || buf[0] != 2) {
        free(buf);
        return -1;
    }
    unsigned char *body = buf + 1;
    n -= 1;
    uint32_t crc = (uint32_t)crc32(0L, Z_NULL, 0);
    if (add_model_magic) crc = (uint32_t)crc32(crc, (const Bytef *)"PMTMODEL", 8);
    crc = (uint32_t)crc32(crc, body, (uInt)(n - 4));
    memcpy(body + n - 4, &crc, 4);
    gzFile gz = gzopen(out, "wb1");
    int ok = gz != NULL && (!add_model_magic || gzwrite(gz, "PMTMODEL", 8) == 8) && gzwrite(gz, body, (unsigned)n) == (int)n;
    if (gz && gzclose(gz) != Z_OK) ok = 0;
    free(buf);
    return ok ? 0 : -1;
}

typedef struct {
    int rc;               /* of the call */
    long peak_growth_kb;  /* VmHWM after the load minus VmRSS before */
    char err[600];
} child_report;

/* One call whose memory is measured: 0 or -1 with err (a model it built is freed). */
typedef int (*capped_call)(const void *arg, char *err, size_t errlen);

/* Runs call(arg) in a forked child under the address-space cap and reports
 * what happened, so that a build without the checks cannot take the
 * machine's memory. 0, or -1 when the child did not report (it crashed:
 * counted as a failure by the caller). */
static int run_capped(capped_call call, const void *arg, const char *what, child_report *out) {
    int fds[2];
    if (pipe(fds) != 0) return -1;
    pid_t pid = fork();
    if (pid < 0) return -1;
    if (pid == 0) {
        close(fds[0]);
        child_report r;
        memset(&r, 0, sizeof r);
        /* Reset the peak to the present, so it measures this load only. */
        FILE *clear = fopen("/proc/self/clear_refs", "w");
        if (clear) {
            fputs("5", clear);
            fclose(clear);
        }
        const long rss_before = status_kb("VmRSS"), vm_before = status_kb("VmSize");
        if (!UNDER_ASAN) {
            struct rlimit cap = {(rlim_t)vm_before * 1024 + ADDRESS_SPACE_ROOM,
                                 (rlim_t)vm_before * 1024 + ADDRESS_SPACE_ROOM};
            if (setrlimit(RLIMIT_AS, &cap) != 0) _exit(3);
        }
        r.rc = call(arg, r.err, sizeof r.err);
        r.peak_growth_kb = status_kb("VmHWM") - rss_before;
        const ssize_t w = write(fds[1], &r, sizeof r);
        _exit(w == (ssize_t)sizeof r ? 0 : 4);
    }
    close(fds[1]);
    ssize_t got = read(fds[0], out, sizeof *out);
    close(fds[0]);
    int status = 0;
    if (waitpid(pid, &status, 0) != pid) return -1;
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || got != (ssize_t)sizeof *out) {
        fprintf(stderr, "    the child running %s %s %d\n", what, WIFSIGNALED(status) ? "died of signal" : "exited",
                WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
        return -1;
    }
    return 0;
}

/* Loads a model for translation, as `projmt translate` does. */
static int load_for_translation(const void *path, char *err, size_t errlen) {
    pmt_model m;
    if (pmt_checkpoint_load_model(path, &m, 64, 0, NULL, err, errlen) != 0) return -1;
    pmt_model_free(&m);
    return 0;
}

static int load_in_child(const char *path, child_report *out) {
    return run_capped(load_for_translation, path, path, out);
}

static void test_crafted_files(const char *dir, const char *target, const crafted *cases, size_t n_cases) {
    const int is_model_file = !strcmp(target, "model_file");
    for (size_t i = 0; i < n_cases; i++) {
        char in[4200], path[4200];
        snprintf(in, sizeof in, "%s/tests/fuzz-regressions/%s/%s", test_source_dir(), target, cases[i].file);
        snprintf(path, sizeof path, "%s/%s-%s.%s", dir, target, cases[i].file, is_model_file ? "pmt" : "ckpt");
        if (!test_check(write_framed(in, path, is_model_file) == 0, __FILE__, __LINE__, "crafted file readable")) {
            fprintf(stderr, "    %s (run tests/fuzz/make_seeds.py)\n", in);
            continue;
        }
        child_report r;
        CHECK_MSG(load_in_child(path, &r) == 0, "%s: the load crashed", path);
        if (r.rc != -1) {
            CHECK_MSG(r.rc == -1, "%s loaded", path);
            continue;
        }
        CHECK_MSG(strstr(r.err, path) && strstr(r.err, cases[i].expect), "%s: message '%s' lacks '%s'", path, r.err,
                  cases[i].expect);
        CHECK_MSG(strstr(r.err, is_model_file ? "model file '" : "checkpoint '") == r.err, "%s: message '%s'", path,
                  r.err);
        CHECK_MSG(r.peak_growth_kb >= 0 && r.peak_growth_kb < PEAK_GROWTH_KB,
                  "%s: peak resident memory grew by %ld kB while refusing it", path, r.peak_growth_kb);
        printf("%-11s %-22s peak +%6ld kB  %s\n", target, cases[i].file, r.peak_growth_kb, r.err);
    }
}

/* The cap and the peak check are no obstacle to a real model. */
static void test_real_model_loads(const char *dir) {
    pmt_config cfg;
    pmt_model m;
    char err[300], path[4200];
    pmt_config_defaults(&cfg);
    cfg.d_model = 16;
    cfg.n_heads = 2;
    cfg.d_ff = 32;
    cfg.enc_layers = cfg.dec_layers = 2;
    cfg.max_len = 32;
    cfg.batch_tokens = 256;
    int rc = pmt_model_init(&m, &cfg, 50, 64, 32, err, sizeof err);
    CHECK_MSG(rc == 0, "%s", err);
    if (rc != 0) return;
    pmt_model_init_params(&m, 3);
    snprintf(path, sizeof path, "%s/real.ckpt", dir);
    CHECK(pmt_checkpoint_save(path, &m, "spm", 3, NULL, NULL, NULL, err, sizeof err) == 0);
    pmt_model_free(&m);
    child_report r;
    CHECK_MSG(load_in_child(path, &r) == 0 && r.rc == 0, "a real checkpoint did not load under the cap: %s", r.err);
    /* The generator's tiny model (the crafted files' table) is the one
     * model.c describes: each crafted file differs from a loadable one only
     * in what it was made to break. */
    const char *const tiny[][2] = {{"checkpoint", "v2-tiny-model"}, {"model_file", "fp32-tiny-model"}};
    for (int i = 0; i < 2; i++) {
        char in[4200];
        snprintf(in, sizeof in, "%s/tests/fuzz/seeds/%s/%s", test_source_dir(), tiny[i][0], tiny[i][1]);
        snprintf(path, sizeof path, "%s/%s.%s", dir, tiny[i][1], i ? "pmt" : "ckpt");
        CHECK_MSG(write_framed(in, path, i == 1) == 0, "%s (run tests/fuzz/make_seeds.py)", in);
        CHECK_MSG(load_in_child(path, &r) == 0 && r.rc == 0, "%s did not load: %s", path, r.err);
    }
}

/* pmt_model_init checks the limits too: a config from flags or a config
 * file is no more trusted than a stored one. Each config is one step past
 * a limit of model/record.h (spelled out here as the messages are). */
typedef struct {
    const char *key;
    int value, vocab, training;
    const char *expect;
} beyond_limit;

static int init_model(const void *arg, char *err, size_t errlen) {
    const beyond_limit *b = arg;
    pmt_config cfg;
    pmt_model m;
    pmt_config_defaults(&cfg);
    char value[32];
    snprintf(value, sizeof value, "%d", b->value);
    if (pmt_config_set(&cfg, b->key, value, err, errlen) != 0) return -1;
    const int rc = b->training ? pmt_model_init(&m, &cfg, b->vocab, 64, 32, err, errlen)
                               : pmt_model_init_inference(&m, &cfg, b->vocab, 64, 32, err, errlen);
    if (rc == 0) pmt_model_free(&m);
    return rc;
}

static void test_model_init_refuses(void) {
    static const beyond_limit configs[] = {
        {"d_model", 16384, 100, 1, "d_model = 16384 is beyond this build's limit of 8192"},
        {"enc_layers", 1025, 100, 0, "enc_layers = 1025 is beyond this build's limit of 1024"},
        {"d_model", 256, 1048577, 0, "vocabulary size = 1048577 is beyond this build's limit of 1048576"},
    };
    for (size_t i = 0; i < sizeof configs / sizeof *configs; i++) {
        child_report r;
        CHECK_MSG(run_capped(init_model, &configs[i], configs[i].expect, &r) == 0, "%s: crashed", configs[i].expect);
        CHECK_MSG(r.rc == -1 && strstr(r.err, configs[i].expect), "rc %d, message '%s' lacks '%s'", r.rc, r.err,
                  configs[i].expect);
        CHECK_MSG(r.peak_growth_kb >= 0 && r.peak_growth_kb < PEAK_GROWTH_KB, "%s: peak grew by %ld kB",
                  configs[i].expect, r.peak_growth_kb);
    }
}

int main(void) {
    const char *dir = test_tmpdir("loader_limits");
    test_crafted_files(dir, "checkpoint", shared_cases, sizeof shared_cases / sizeof *shared_cases);
    test_crafted_files(dir, "model_file", shared_cases, sizeof shared_cases / sizeof *shared_cases);
    test_crafted_files(dir, "model_file", model_file_cases, sizeof model_file_cases / sizeof *model_file_cases);
    test_real_model_loads(dir);
    test_model_init_refuses();
    return test_finish();
}

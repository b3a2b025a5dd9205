/*
 * test_prepare.c — the prepare pipeline (prepare.h) on a small made-up TSV
 * that holds one of every kind of dirt: a BOM, CRLF lines, an attribution
 * column, extra whitespace, duplicates (exact and after whitespace cleanup),
 * over-long lines, bad length ratios, invalid UTF-8, a line without a tab,
 * empty sides, and one English sentence with two translations.
 *
 * Checks: exact drop counts and split sizes, the warnings name file:line,
 * the .tok files decode back to the cleaned text, both translations of one
 * English sentence share a split, same seed → identical files, another seed
 * → another split, and failures leave no new files (a previous complete run
 * stays intact). Aligned-file input and its errors are covered too.
 */
#include <dirent.h>
#include <stdlib.h>
#include <string.h>

#include "core/config.h"
#include "data/corpus.h"
#include "fake_corpus.h"
#include "data/prepare.h"
#include "data/spm.h"
#include "testutil.h"

enum { N_GOOD = 300, VALID = 20, TEST = 20 };

static char root[1024];

/* dir/name in one of a few rotating buffers: copy it to keep it long. */
static const char *path_in(const char *dir, const char *name) {
    static char buf[4][2200];
    static int which = 0;
    which = (which + 1) % 4;
    snprintf(buf[which], sizeof buf[which], "%s/%s", dir, name);
    return buf[which];
}

/* Line numbers (1-based) of the invalid UTF-8 lines in the test TSV. */
static int bad_utf8_lines[2];

/* The dirty TSV: N_GOOD distinct pairs plus one extra translation, and the
 * counted dirt. Returns the number of lines written. */
static int write_dirty_tsv(const char *path) {
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL);
    if (!f) return 0;
    int line = 0, n_bad = 0;
    char en[256], es[256];
    fputs("\xEF\xBB\xBF", f);
    for (int i = 0; i < N_GOOD; i++) {
        fake_pair(i, en, sizeof en, es, sizeof es);
        if (i % 11 == 3) fprintf(f, "  %s \t %s  ", en, es);      /* extra whitespace */
        else fprintf(f, "%s\t%s", en, es);
        if (i % 7 == 0) fputs("\tCC-BY 2.0 (France) Attribution: tatoeba.org #123 (someone)", f);
        fputs(i % 10 == 0 ? "\r\n" : "\n", f);
        line++;
        if (i == 100 || i == 200) {                                /* invalid UTF-8 */
            fprintf(f, "Bad \xff line %d\tMala l\xednea\n", i);
            bad_utf8_lines[n_bad++] = ++line;
        }
    }
    fake_pair(5, en, sizeof en, es, sizeof es);
    fprintf(f, "%s\tOtra traducción distinta.\n", en), line++;       /* 2nd translation of pair 5 */
    for (int i = 0; i < 10; i++) { fake_pair(i, en, sizeof en, es, sizeof es); fprintf(f, "%s\t%s\n", en, es); line++; }
    for (int i = 10; i < 15; i++) { fake_pair(i, en, sizeof en, es, sizeof es); fprintf(f, "%s  \t%s \n", en, es); line++; }
    for (int i = 0; i < 3; i++, line++)                            /* 13 words > max_words 12 */
        fprintf(f, "The boy sees the apple and the girl sees the bread %d times.\tEl niño ve la manzana.\n", i);
    fputs("Yes.\tSí, claro que sí, por supuesto, mi amigo.\n", f), line++;   /* ratio 8 */
    fputs("Okay.\tMuy bien, lo haré mañana sin falta.\n", f), line++;         /* ratio 7 */
    fputs("a line without any tab\n", f), line++;
    fputs("\n", f), line++;
    fputs("   \tHola\n", f), line++;
    CHECK(fclose(f) == 0);
    return line;
}

/* Copies a path into a config field (tests keep paths short). */
static void set_path(char dst[PMT_PATH_MAX], const char *src) {
    size_t n = strlen(src);
    CHECK_MSG(n < PMT_PATH_MAX, "test path too long: %s", src);
    if (n >= PMT_PATH_MAX) n = PMT_PATH_MAX - 1;
    memcpy(dst, src, n);
    dst[n] = '\0';
}

static void config_for(pmt_config *cfg, const char *corpus, const char *data_dir, unsigned long seed) {
    pmt_config_defaults(cfg);
    set_path(cfg->corpus, corpus);
    set_path(cfg->data_dir, data_dir);
    cfg->valid_size = VALID;
    cfg->test_size = TEST;
    cfg->max_words = 12;
    cfg->vocab_size = 120;
    cfg->seed = seed;
}

static char *slurp(const char *path, size_t *size) {
    FILE *f = fopen(path, "rb");
    if (!f) { *size = 0; return NULL; }
    char *buf = malloc(1 << 22);
    *size = fread(buf, 1, (1 << 22) - 1, f);
    buf[*size] = '\0';
    if (fclose(f) != 0) { free(buf); return NULL; }
    return buf;
}

static int files_equal(const char *a, const char *b) {
    size_t na, nb;
    char *x = slurp(a, &na), *y = slurp(b, &nb);
    int same = x && y && na == nb && memcmp(x, y, na) == 0;
    free(x);
    free(y);
    return same;
}

/* Splits a text file into lines in place; returns the count. */
static int split_lines(char *text, char **lines, int max) {
    int n = 0;
    for (char *p = text; *p && n < max;) {
        char *nl = strchr(p, '\n');
        lines[n++] = p;
        if (!nl) break;
        *nl = '\0';
        p = nl + 1;
    }
    return n;
}

/* Entries in dir other than . and .. (optionally only those ending in suffix). */
static int count_entries(const char *dir, const char *suffix) {
    DIR *d = opendir(dir);
    if (!d) return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        size_t len = strlen(e->d_name), sl = suffix ? strlen(suffix) : 0;
        if (!suffix || (len >= sl && !strcmp(e->d_name + len - sl, suffix))) n++;
    }
    closedir(d);
    return n;
}

static void check_log_reports(const char *log_path, const char *tsv) {
    size_t size;
    char *log = slurp(log_path, &size);
    CHECK(log != NULL);
    if (!log) return;
    for (int i = 0; i < 2; i++) {
        char want[1200];
        snprintf(want, sizeof want, "%s:%d: invalid UTF-8", tsv, bad_utf8_lines[i]);
        CHECK_MSG(strstr(log, want) != NULL, "log lacks '%s':\n%s", want, log);
    }
    CHECK_MSG(strstr(log, "no tab") != NULL, "log lacks the malformed line:\n%s", log);
    free(log);
}

/* Every pair of split `name` decodes back to the cleaned text lines. */
static void check_tok_matches_text(const char *dir, const char *name, long expected_pairs) {
    char err[1024] = "", file[64];
    pmt_spm *spm = pmt_spm_load_file(path_in(dir, "spm.model"), err, sizeof err);
    CHECK_MSG(spm != NULL, "%s", err);
    pmt_corpus c;
    snprintf(file, sizeof file, "%s.tok", name);
    CHECK_MSG(pmt_corpus_load(&c, path_in(dir, file), err, sizeof err) == 0, "%s", err);
    if (!spm || !c.src_off) { pmt_spm_free(spm); return; }
    CHECK(c.n_pairs == expected_pairs);
    const char *sides[2] = {"en", "es"};
    for (int s = 0; s < 2; s++) {
        size_t size;
        snprintf(file, sizeof file, "%s.%s", name, sides[s]);
        char *text = slurp(path_in(dir, file), &size);
        char **lines = malloc(1000 * sizeof *lines);
        int n = text ? split_lines(text, lines, 1000) : 0;
        CHECK(n == c.n_pairs);
        int mismatches = 0;
        for (int i = 0; i < n && i < c.n_pairs; i++) {
            const uint64_t *off = s ? c.tgt_off : c.src_off;
            const int32_t *ids = s ? c.tgt_ids : c.src_ids;
            char *dec = pmt_spm_decode(spm, ids + off[i], (int)(off[i + 1] - off[i]));
            if (!dec || strcmp(dec, lines[i]) != 0) {
                if (mismatches++ < 3) fprintf(stderr, "  %s line %d: '%s' vs '%s'\n", file, i, lines[i], dec ? dec : "");
            }
            free(dec);
        }
        CHECK_MSG(mismatches == 0, "%s: %d lines differ from their decoded .tok", file, mismatches);
        free(lines);
        free(text);
    }
    pmt_corpus_free(&c);
    pmt_spm_free(spm);
}

/* Text cleanup: no CR, BOM, tab, attribution, double or edge spaces remain. */
static void check_clean_text(const char *dir) {
    const char *names[] = {"train.en", "train.es", "valid.en", "valid.es", "test.en", "test.es"};
    for (int k = 0; k < 6; k++) {
        size_t size;
        char *t = slurp(path_in(dir, names[k]), &size);
        CHECK_MSG(t && size > 0, "%s missing or empty", names[k]);
        if (!t) continue;
        CHECK_MSG(!strchr(t, '\r') && !strchr(t, '\t') && !strstr(t, "  ") && !strstr(t, "\xEF\xBB\xBF") &&
                  !strstr(t, "tatoeba") && !strstr(t, " \n") && !strstr(t, "\n ") && t[0] != ' ',
                  "%s is not clean", names[k]);
        free(t);
    }
}

/* Both translations of pair 5's English sentence are in the same split. */
static void check_group_shares_split(const char *dir) {
    const char *names[] = {"train.en", "valid.en", "test.en"};
    int found_in = -1, occurrences = 0, same = 1;
    char en[256], es[256], needle[300];
    fake_pair(5, en, sizeof en, es, sizeof es);
    snprintf(needle, sizeof needle, "%s\n", en);
    for (int k = 0; k < 3; k++) {
        size_t size;
        char *t = slurp(path_in(dir, names[k]), &size);
        for (char *p = t; p && (p = strstr(p, needle)) != NULL; p++) {
            occurrences++;
            if (found_in >= 0 && found_in != k) same = 0;
            found_in = k;
        }
        free(t);
    }
    CHECK(occurrences == 2);
    CHECK(same);
}

static void check_manifest(const char *dir, int input_lines) {
    size_t size;
    char *m = slurp(path_in(dir, "manifest.json"), &size);
    CHECK(m != NULL);
    if (!m) return;
    char want[128];
    snprintf(want, sizeof want, "\"input_lines\": %d,", input_lines);
    CHECK_MSG(strstr(m, want) != NULL, "manifest lacks %s", want);
    CHECK(strstr(m, "\"dropped\": {\"invalid_utf8\": 2, \"malformed\": 1, \"empty\": 2, \"duplicate\": 15, "
                    "\"too_long\": 3, \"length_ratio\": 2, \"markup\": 0, \"held_out\": 0}") != NULL);
    CHECK(strstr(m, "\"kept_pairs\": 301,") != NULL);
    CHECK(strstr(m, "\"valid\": {\"pairs\": 20,") != NULL);
    CHECK(strstr(m, "\"p50\": ") != NULL && strstr(m, "\"coverage\": ") != NULL && strstr(m, "\"seed\": 7}") != NULL);
    free(m);
}

static void test_dirty_tsv(const char *tsv, int lines, const char *dir) {
    pmt_config cfg;
    config_for(&cfg, tsv, dir, 7);
    pmt_prepare_stats st;
    char err[2048] = "";
    const char *log_path = path_in(root, "prepare.log");
    FILE *log = fopen(log_path, "wb");
    int rc = pmt_prepare(&cfg, log, &st, err, sizeof err);
    CHECK(log && fclose(log) == 0);
    CHECK_MSG(rc == 0, "prepare failed: %s", err);
    if (rc != 0) return;
    CHECK(st.input_lines == lines);
    CHECK(st.dropped.invalid_utf8 == 2 && st.dropped.malformed == 1 && st.dropped.empty == 2);
    CHECK_MSG(st.dropped.duplicate == 15, "duplicates %ld", st.dropped.duplicate);
    CHECK(st.dropped.too_long == 3 && st.dropped.length_ratio == 2);
    CHECK(st.kept_pairs == N_GOOD + 1);
    CHECK(st.split[PMT_SPLIT_VALID].pairs == VALID && st.split[PMT_SPLIT_TEST].pairs == TEST);
    CHECK(st.split[PMT_SPLIT_TRAIN].pairs == N_GOOD + 1 - VALID - TEST);
    CHECK(st.vocab_size > 20 && st.vocab_size <= 120);
    CHECK(st.vocab_used_in_train > 0 && st.vocab_used_in_train <= st.vocab_size);
    CHECK(st.split[PMT_SPLIT_TRAIN].tokens[PMT_SIDE_EN] >= 3 * st.split[PMT_SPLIT_TRAIN].pairs);
    const pmt_length_stats *len = &st.split[PMT_SPLIT_TRAIN].length[PMT_SIDE_ES];
    CHECK(len->p50 > 0 && len->p50 <= len->p90 && len->p90 <= len->p99 && len->p99 <= len->max);
    CHECK(st.split[PMT_SPLIT_VALID].unk_tokens[PMT_SIDE_ES] == 0);

    check_log_reports(log_path, tsv);
    CHECK(count_entries(dir, ".tmp") == 0);
    CHECK(count_entries(dir, NULL) == 12);
    check_tok_matches_text(dir, "train", N_GOOD + 1 - VALID - TEST);
    check_tok_matches_text(dir, "valid", VALID);
    check_tok_matches_text(dir, "test", TEST);
    check_clean_text(dir);
    check_group_shares_split(dir);
    check_manifest(dir, lines);
}

static void test_determinism(const char *tsv, const char *dir_a) {
    const char *dir_b = path_in(root, "again"), *dir_c = path_in(root, "seed8");
    char b[1100], c[1100];
    snprintf(b, sizeof b, "%s", dir_b);
    snprintf(c, sizeof c, "%s", dir_c);
    pmt_config cfg;
    pmt_prepare_stats st;
    char err[2048] = "";
    config_for(&cfg, tsv, b, 7);
    CHECK_MSG(pmt_prepare(&cfg, NULL, &st, err, sizeof err) == 0, "%s", err);
    const char *same[] = {"spm.model", "spm.vocab", "train.tok", "valid.tok", "test.tok", "train.en", "valid.es", "test.en"};
    for (int i = 0; i < 8; i++)
        CHECK_MSG(files_equal(path_in(dir_a, same[i]), path_in(b, same[i])), "%s differs between equal runs", same[i]);
    config_for(&cfg, tsv, c, 8);
    CHECK_MSG(pmt_prepare(&cfg, NULL, &st, err, sizeof err) == 0, "%s", err);
    CHECK(!files_equal(path_in(dir_a, "valid.en"), path_in(c, "valid.en")));
    CHECK(st.split[PMT_SPLIT_VALID].pairs == VALID);
}

/* pmt_prepare must fail with a message containing `expect`, create no
 * files in dir, and leave a previous run's files there untouched. */
static void expect_failure(pmt_config *cfg, const char *expect, int files_before) {
    pmt_prepare_stats st;
    char err[2048] = "";
    CHECK_MSG(pmt_prepare(cfg, NULL, &st, err, sizeof err) == -1, "should fail: %s", expect);
    CHECK_MSG(strstr(err, expect) != NULL, "message '%s' lacks '%s'", err, expect);
    CHECK_MSG(count_entries(cfg->data_dir, NULL) == files_before, "%s: files left in %s", expect, cfg->data_dir);
}

static void test_failures(const char *tsv, const char *complete_dir) {
    pmt_config cfg;
    char fresh[1100];
    snprintf(fresh, sizeof fresh, "%s", path_in(root, "fail"));

    config_for(&cfg, tsv, fresh, 7);
    cfg.valid_size = 200;
    cfg.test_size = 101;
    expect_failure(&cfg, "leaves no training pairs", 0);

    size_t before_size;
    char *manifest_before = slurp(path_in(complete_dir, "manifest.json"), &before_size);
    config_for(&cfg, tsv, complete_dir, 7);
    cfg.valid_size = 1000;
    expect_failure(&cfg, "leaves no training pairs", 12);
    size_t after_size;
    char *manifest_after = slurp(path_in(complete_dir, "manifest.json"), &after_size);
    CHECK(manifest_before && manifest_after && before_size == after_size &&
          !memcmp(manifest_before, manifest_after, before_size));
    free(manifest_before);
    free(manifest_after);

    config_for(&cfg, path_in(root, "no-such-corpus.txt"), fresh, 7);
    expect_failure(&cfg, "no-such-corpus.txt", 0);

    const char *empty = path_in(root, "empty.tsv");
    CHECK(test_write_file(empty, "\n \t \nno tab here\n") == 0);
    config_for(&cfg, empty, fresh, 7);
    expect_failure(&cfg, "no sentence pairs left", 0);

    char file[1100];
    snprintf(file, sizeof file, "%s", path_in(root, "a-file"));
    CHECK(test_write_file(file, "x") == 0);
    config_for(&cfg, tsv, path_in(file, "sub"), 7);
    pmt_prepare_stats st;
    char err[2048] = "";
    CHECK(pmt_prepare(&cfg, NULL, &st, err, sizeof err) == -1);
    CHECK_MSG(strstr(err, "cannot create output directory") != NULL, "message: %s", err);
}

/* Aligned English/Spanish files: BOM and CRLF on one side only still align. */
static void test_aligned(void) {
    char en_path[1100], es_path[1100];
    snprintf(en_path, sizeof en_path, "%s", path_in(root, "a.en"));
    snprintf(es_path, sizeof es_path, "%s", path_in(root, "a.es"));
    FILE *en = fopen(en_path, "wb"), *es = fopen(es_path, "wb");
    CHECK(en && es);
    if (!en || !es) return;
    char a[256], b[256];
    fputs("\xEF\xBB\xBF", es);
    for (int i = 0; i < 200; i++) {
        fake_pair(i * 3, a, sizeof a, b, sizeof b);
        CHECK(fprintf(en, "%s\n", a) > 0 && fprintf(es, "%s\r\n", b) > 0);
    }
    CHECK(fprintf(en, "\n") > 0 && fprintf(es, "Hola\n") > 0);   /* empty English side */
    CHECK(fclose(en) == 0 && fclose(es) == 0);

    pmt_config cfg;
    char dir[1100];
    snprintf(dir, sizeof dir, "%s", path_in(root, "aligned"));
    config_for(&cfg, "", dir, 3);
    set_path(cfg.src_file, en_path);
    set_path(cfg.tgt_file, es_path);
    pmt_prepare_stats st;
    char err[2048] = "";
    CHECK_MSG(pmt_prepare(&cfg, NULL, &st, err, sizeof err) == 0, "%s", err);
    CHECK(st.input_lines == 201 && st.kept_pairs == 200 && st.dropped.empty == 1);
    CHECK(st.split[PMT_SPLIT_TRAIN].pairs == 160);
    check_tok_matches_text(dir, "valid", VALID);

    FILE *longer = fopen(es_path, "ab");
    CHECK(longer && fputs("Una línea de más.\n", longer) >= 0 && fclose(longer) == 0);
    snprintf(dir, sizeof dir, "%s", path_in(root, "aligned-bad"));
    set_path(cfg.data_dir, dir);
    expect_failure(&cfg, "differ in length", 0);

    cfg.tgt_file[0] = '\0';
    expect_failure(&cfg, "--tgt-file", 0);
}

int main(void) {
    snprintf(root, sizeof root, "%s", test_tmpdir("prepare"));
    char tsv[1100], dir[1100];
    snprintf(tsv, sizeof tsv, "%s", path_in(root, "dirty.tsv"));
    snprintf(dir, sizeof dir, "%s", path_in(root, "out"));
    int lines = write_dirty_tsv(tsv);
    test_dirty_tsv(tsv, lines, dir);
    test_determinism(tsv, dir);
    test_failures(tsv, dir);
    test_aligned();
    return test_finish();
}

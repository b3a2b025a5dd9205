/*
 * test_prepare_sources.c — `projmt prepare` over several corpora (the
 * `source` and `dev_file` settings, data/prepare_internal.h) on made-up
 * data (tests/fake_corpus.h).
 *
 * Checks: a primary TSV plus a gzip'd TSV with a reference column (en=2,
 * es=3, weight=3) and an EN+ES file pair (one side gzip'd): exact per-source
 * counts (read, kept, duplicate across sources, held out, malformed), the
 * weighted training count, the valid/test files identical to a run on the
 * primary alone, no valid/test English sentence in training, every input
 * line accounted for; a dev file replacing valid while test stays; the
 * markup rule; spec parsing errors; hard errors (aligned files of different
 * lengths, a truncated and a corrupt .gz) that name the file and leave no
 * output; the repeatable `source` key (append, clear, dump round trip,
 * flags replacing the config file's list).
 */
#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "core/config.h"
#include "data/prepare.h"
#include "data/prepare_internal.h"
#include "fake_corpus.h"
#include "testutil.h"

enum { N_PRIMARY = 300, VALID = 20, TEST = 20, N_NEW = 100, N_DUP = 5, WEIGHT = 3, N_PAIR_FILES = 50 };

static char root[1024];

/* dir/name in one of a few rotating buffers: copy it to keep it long. */
static const char *path_in(const char *dir, const char *name) {
    static char buf[4][2200];
    static int which = 0;
    which = (which + 1) % 4;
    snprintf(buf[which], sizeof buf[which], "%s/%s", dir, name);
    return buf[which];
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

/* Entries in dir other than . and .. (-1 when dir does not exist). */
static int count_entries(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
    closedir(d);
    return n;
}

/* Writes text to path, gzip-compressed. */
static void write_gzip(const char *path, const char *text, size_t n) {
    gzFile gz = gzopen(path, "wb9");
    CHECK(gz != NULL);
    if (!gz) return;
    CHECK(gzwrite(gz, text, (unsigned)n) == (int)n);
    CHECK(gzclose(gz) == Z_OK);
}

/* The "other" Spanish translation of made-up English sentence i. */
static void other_es(int i, char *es, size_t len) { snprintf(es, len, "Otra versión número %d.", i); }

/* The primary: made-up pairs 0..N_PRIMARY-1 as a plain TSV. */
static void write_primary(const char *path) {
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL && fake_write_tsv(f, 0, N_PRIMARY) == 0 && fclose(f) == 0);
}

/* The extra TSV, reference<TAB>English<TAB>Spanish, gzip'd: N_NEW new pairs,
 * N_DUP exact repeats of primary pairs, another translation of every
 * primary English sentence, and one line without the Spanish column (line
 * number in *bad_line). */
static void write_extra_gz(const char *path, int *bad_line) {
    size_t cap = 1 << 20, n = 0;
    char *text = malloc(cap), en[256], es[256];
    int line = 0;
    for (int i = 0; i < N_NEW; i++) {
        fake_pair(N_PRIMARY + i, en, sizeof en, es, sizeof es);
        n += (size_t)snprintf(text + n, cap - n, "Ref %d:%d\t%s\t%s\n", i, i, en, es), line++;
        if (i == 40) n += (size_t)snprintf(text + n, cap - n, "Ref 9:9\tOnly English here.\n"), *bad_line = ++line;
    }
    for (int i = 0; i < N_DUP; i++) {
        fake_pair(i, en, sizeof en, es, sizeof es);
        n += (size_t)snprintf(text + n, cap - n, "Dup %d\t%s\t%s\n", i, en, es), line++;
    }
    for (int i = 0; i < N_PRIMARY; i++) {
        fake_pair(i, en, sizeof en, es, sizeof es);
        other_es(i, es, sizeof es);
        n += (size_t)snprintf(text + n, cap - n, "Alt %d\t%s\t%s\n", i, en, es), line++;
    }
    write_gzip(path, text, n);
    free(text);
}

/* An EN+ES file pair (English gzip'd, Spanish plain) of new pairs; the
 * Spanish file's line 7 is invalid UTF-8. */
static void write_pair_files(const char *en_path, const char *es_path) {
    size_t cap = 1 << 16, n = 0;
    char *text = malloc(cap), en[256], es[256];
    FILE *f = fopen(es_path, "wb");
    CHECK(f != NULL);
    for (int i = 0; i < N_PAIR_FILES; i++) {
        fake_pair(N_PRIMARY + N_NEW + i, en, sizeof en, es, sizeof es);
        n += (size_t)snprintf(text + n, cap - n, "%s\n", en);
        if (f) fprintf(f, i == 6 ? "Mala l\xednea\n" : "%s\n", es);
    }
    CHECK(f && fclose(f) == 0);
    write_gzip(en_path, text, n);
    free(text);
}

static void config_for(pmt_config *cfg, const char *corpus, const char *data_dir) {
    pmt_config_defaults(cfg);
    snprintf(cfg->corpus, sizeof cfg->corpus, "%.1000s", corpus);
    snprintf(cfg->data_dir, sizeof cfg->data_dir, "%.1000s", data_dir);
    cfg->valid_size = VALID;
    cfg->test_size = TEST;
    cfg->max_words = 12;
    cfg->vocab_size = 120;
    cfg->seed = 5;
}

/* Adds one `source` line through the config API (as a flag or INI line would). */
static void add_source(pmt_config *cfg, const char *spec) {
    char err[512] = "";
    CHECK_MSG(pmt_config_set(cfg, "source", spec, err, sizeof err) == 0, "%s", err);
}

/* Splits a text file's lines into a NULL-free array (in place). */
static int read_lines(const char *path, char **buf, char ***lines) {
    size_t size;
    *buf = slurp(path, &size);
    *lines = malloc((size + 1) * sizeof **lines);
    int n = 0;
    for (char *p = *buf; p && *p;) {
        char *nl = strchr(p, '\n');
        (*lines)[n++] = p;
        if (!nl) break;
        *nl = '\0';
        p = nl + 1;
    }
    return n;
}

/* No English sentence of valid or test occurs in training. */
static void check_no_held_out_in_train(const char *dir) {
    char *tb, *hb, **train, **held;
    int nt = read_lines(path_in(dir, "train.en"), &tb, &train);
    for (int k = 0; k < 2; k++) {
        int nh = read_lines(path_in(dir, k ? "test.en" : "valid.en"), &hb, &held);
        int found = 0;
        for (int i = 0; i < nh; i++)
            for (int j = 0; j < nt; j++) found += !strcmp(held[i], train[j]);
        CHECK_MSG(found == 0, "%d %s sentences also in train.en", found, k ? "test" : "valid");
        free(hb);
        free(held);
    }
    free(tb);
    free(train);
}

/* Every input line of a row is kept or dropped for one reason. */
static void check_row_accounts(const pmt_source_stats *r) {
    const pmt_drop_counts *d = &r->dropped;
    long dropped = d->invalid_utf8 + d->malformed + d->empty + d->duplicate + d->too_long + d->length_ratio +
                   d->markup + d->held_out;
    CHECK_MSG(r->kept_pairs + dropped == r->input_lines, "%s: kept %ld + dropped %ld != read %ld", r->name,
              r->kept_pairs, dropped, r->input_lines);
}

static void test_several_sources(void) {
    char primary[1100], extra[1100], pair_en[1100], pair_es[1100], alone[1100], multi[1100], log_path[1100];
    snprintf(primary, sizeof primary, "%s", path_in(root, "primary.tsv"));
    snprintf(extra, sizeof extra, "%s", path_in(root, "extra.tsv.gz"));
    snprintf(pair_en, sizeof pair_en, "%s", path_in(root, "pair.en.gz"));
    snprintf(pair_es, sizeof pair_es, "%s", path_in(root, "pair.es"));
    snprintf(alone, sizeof alone, "%s", path_in(root, "alone"));
    snprintf(multi, sizeof multi, "%s", path_in(root, "multi"));
    snprintf(log_path, sizeof log_path, "%s", path_in(root, "multi.log"));
    int bad_line = 0;
    write_primary(primary);
    write_extra_gz(extra, &bad_line);
    write_pair_files(pair_en, pair_es);

    pmt_config cfg;
    pmt_prepare_stats st;
    char err[2048] = "";
    config_for(&cfg, primary, alone);
    CHECK_MSG(pmt_prepare(&cfg, NULL, &st, err, sizeof err) == 0, "%s", err);
    CHECK(st.n_sources == 1 && st.source[0].split_pairs[PMT_SPLIT_TRAIN] == N_PRIMARY - VALID - TEST);

    config_for(&cfg, primary, multi);
    char spec[2400];
    snprintf(spec, sizeof spec, "%s:en=2,es=3,weight=%d,name=extra", extra, WEIGHT);
    add_source(&cfg, spec);
    snprintf(spec, sizeof spec, "%s+%s", pair_en, pair_es);
    add_source(&cfg, spec);
    FILE *log = fopen(log_path, "w");
    CHECK(log != NULL);
    CHECK_MSG(pmt_prepare(&cfg, log, &st, err, sizeof err) == 0, "%s", err);
    CHECK(log && fclose(log) == 0);

    /* the primary's splits are those of the run on it alone */
    const char *same[] = {"valid.en", "valid.es", "test.en", "test.es"};
    for (int i = 0; i < 4; i++)
        CHECK_MSG(files_equal(path_in(alone, same[i]), path_in(multi, same[i])), "%s differs from the primary-alone run",
                  same[i]);
    CHECK(st.split[PMT_SPLIT_VALID].pairs == VALID && st.split[PMT_SPLIT_TEST].pairs == TEST);

    CHECK(st.n_sources == 3);
    const pmt_source_stats *p = &st.source[0], *x = &st.source[1], *m = &st.source[2];
    CHECK(!strcmp(p->name, "primary") && !strcmp(p->role, "primary") && p->input_lines == N_PRIMARY);
    CHECK(p->split_pairs[PMT_SPLIT_TRAIN] == N_PRIMARY - VALID - TEST && p->split_pairs[PMT_SPLIT_TEST] == TEST);
    CHECK(!strcmp(x->name, "extra") && !strcmp(x->role, "extra") && x->weight == WEIGHT);
    CHECK_MSG(x->input_lines == N_NEW + 1 + N_DUP + N_PRIMARY, "extra read %ld", x->input_lines);
    CHECK_MSG(x->dropped.duplicate == N_DUP, "duplicates across sources: %ld", x->dropped.duplicate);
    CHECK_MSG(x->dropped.malformed == 1, "malformed: %ld", x->dropped.malformed);
    /* every primary English sentence has another translation here: those
     * in valid/test are held out, the others train */
    CHECK_MSG(x->dropped.held_out == VALID + TEST, "held out: %ld", x->dropped.held_out);
    long extra_kept = N_NEW + N_PRIMARY - VALID - TEST;
    CHECK_MSG(x->kept_pairs == extra_kept, "extra kept %ld", x->kept_pairs);
    CHECK_MSG(x->split_pairs[PMT_SPLIT_TRAIN] == WEIGHT * extra_kept, "extra train %ld",
              x->split_pairs[PMT_SPLIT_TRAIN]);
    CHECK(x->split_pairs[PMT_SPLIT_VALID] == 0 && x->split_pairs[PMT_SPLIT_TEST] == 0);
    CHECK(!strcmp(m->name, "pair") && m->input_lines == N_PAIR_FILES && m->dropped.invalid_utf8 == 1);
    CHECK(m->kept_pairs == N_PAIR_FILES - 1 && m->split_pairs[PMT_SPLIT_TRAIN] == N_PAIR_FILES - 1);
    long train = (N_PRIMARY - VALID - TEST) + WEIGHT * extra_kept + (N_PAIR_FILES - 1);
    CHECK_MSG(st.split[PMT_SPLIT_TRAIN].pairs == train, "train pairs %ld, expected %ld",
              st.split[PMT_SPLIT_TRAIN].pairs, train);
    for (int i = 0; i < st.n_sources; i++) check_row_accounts(&st.source[i]);
    CHECK(st.input_lines == p->input_lines + x->input_lines + m->input_lines);
    CHECK(st.kept_pairs == p->kept_pairs + x->kept_pairs + m->kept_pairs);
    check_no_held_out_in_train(multi);

    size_t size;
    char *text = slurp(log_path, &size), want[1300];
    snprintf(want, sizeof want, "%s:%d: fewer than 3 tab-separated columns", extra, bad_line);
    CHECK_MSG(text && strstr(text, want), "log lacks '%s':\n%s", want, text ? text : "");
    snprintf(want, sizeof want, "%s:7: invalid UTF-8", pair_es);
    CHECK_MSG(text && strstr(text, want), "log lacks '%s':\n%s", want, text ? text : "");
    free(text);
    text = slurp(path_in(multi, "manifest.json"), &size);
    CHECK_MSG(text && strstr(text, "\"name\": \"extra\", \"role\": \"extra\", \"weight\": 3"), "manifest: %s",
              text ? text : "");
    snprintf(want, sizeof want, "\"split_pairs\": {\"train\": %ld, \"valid\": 0, \"test\": 0}", WEIGHT * extra_kept);
    CHECK_MSG(text && strstr(text, want), "manifest lacks %s", want);
    free(text);
}

/* --dev-file: valid is the dev file's pairs, test stays the primary's, and
 * primary training pairs whose English is in the dev set are held out. */
static void test_dev_file(void) {
    char primary[1100], dev[1100], dir[1100];
    snprintf(primary, sizeof primary, "%s", path_in(root, "primary.tsv"));
    snprintf(dev, sizeof dev, "%s", path_in(root, "dev.tsv"));
    snprintf(dir, sizeof dir, "%s", path_in(root, "with-dev"));
    FILE *f = fopen(dev, "wb");
    char en[256], es[256];
    CHECK(f != NULL);
    for (int i = 0; f && i < 10; i++) {   /* English of primary pairs 100..109, other Spanish */
        fake_pair(100 + i, en, sizeof en, es, sizeof es);
        other_es(i, es, sizeof es);
        fprintf(f, "%s\t%s\n", en, es);
    }
    CHECK(f && fake_write_tsv(f, 600, 10) == 0 && fclose(f) == 0);

    pmt_config cfg;
    config_for(&cfg, primary, dir);
    snprintf(cfg.dev_file, sizeof cfg.dev_file, "%.1000s", dev);
    pmt_prepare_stats st;
    char err[2048] = "";
    CHECK_MSG(pmt_prepare(&cfg, NULL, &st, err, sizeof err) == 0, "%s", err);
    char alone_test[1200];
    snprintf(alone_test, sizeof alone_test, "%s/alone/test.en", root);
    CHECK(files_equal(alone_test, path_in(dir, "test.en")));
    char *vb, **valid_lines;
    int n_valid = read_lines(path_in(dir, "valid.en"), &vb, &valid_lines);
    fake_pair(100, en, sizeof en, es, sizeof es);
    CHECK(n_valid == 20 && !strcmp(valid_lines[0], en));   /* the dev file, in its order */
    free(vb);
    free(valid_lines);
    CHECK(st.n_sources == 2 && !strcmp(st.source[1].role, "dev") && !strcmp(st.source[1].name, "dev"));
    CHECK(st.split[PMT_SPLIT_VALID].pairs == 20 && st.source[1].split_pairs[PMT_SPLIT_VALID] == 20);

    /* dev English sentences not in test were primary training pairs: held out */
    char *tb, **test_lines;
    int n_test = read_lines(path_in(dir, "test.en"), &tb, &test_lines), in_test = 0;
    for (int i = 0; i < 10; i++) {
        fake_pair(100 + i, en, sizeof en, es, sizeof es);
        for (int j = 0; j < n_test; j++) in_test += !strcmp(en, test_lines[j]);
    }
    free(tb);
    free(test_lines);
    const pmt_source_stats *p = &st.source[0];
    CHECK_MSG(p->dropped.held_out == 10 - in_test, "primary held out %ld, %d of the 10 in test", p->dropped.held_out,
              in_test);
    CHECK(p->split_pairs[PMT_SPLIT_TRAIN] == N_PRIMARY - TEST - (10 - in_test));
    CHECK(p->split_pairs[PMT_SPLIT_VALID] == 0);
    check_row_accounts(p);
    check_no_held_out_in_train(dir);
}

/* An extra source that only repeats the primary adds nothing, with a
 * warning, and is no error (a source with no usable line is, see below). */
static void test_all_duplicate_source(void) {
    char primary[1100], dir[1100], log_path[1100];
    snprintf(primary, sizeof primary, "%s", path_in(root, "primary.tsv"));
    snprintf(dir, sizeof dir, "%s", path_in(root, "all-dup"));
    snprintf(log_path, sizeof log_path, "%s", path_in(root, "all-dup.log"));
    pmt_config cfg;
    config_for(&cfg, primary, dir);
    char spec[1200];
    snprintf(spec, sizeof spec, "%s:name=again", primary);
    add_source(&cfg, spec);
    pmt_prepare_stats st;
    char err[2048] = "";
    FILE *log = fopen(log_path, "w");
    CHECK_MSG(pmt_prepare(&cfg, log, &st, err, sizeof err) == 0, "%s", err);
    CHECK(log && fclose(log) == 0);
    CHECK(st.n_sources == 2 && st.source[1].kept_pairs == 0 && st.source[1].dropped.duplicate == N_PRIMARY);
    CHECK(st.split[PMT_SPLIT_TRAIN].pairs == N_PRIMARY - VALID - TEST);
    size_t size;
    char *text = slurp(log_path, &size);
    CHECK_MSG(text && strstr(text, "adds nothing"), "log: %s", text ? text : "");
    free(text);
}

/* pmt_prepare fails with a message holding both strings and writes nothing. */
static void expect_failure(pmt_config *cfg, const char *expect, const char *expect2) {
    pmt_prepare_stats st;
    char err[2048] = "";
    CHECK_MSG(pmt_prepare(cfg, NULL, &st, err, sizeof err) == -1, "should fail: %s", expect);
    CHECK_MSG(strstr(err, expect) != NULL, "message '%s' lacks '%s'", err, expect);
    CHECK_MSG(!expect2 || strstr(err, expect2) != NULL, "message '%s' lacks '%s'", err, expect2);
    CHECK_MSG(count_entries(cfg->data_dir) <= 0, "%s: files left in %s", expect, cfg->data_dir);
}

static void test_errors(void) {
    char primary[1100], fresh[1100], gz[1100], truncated[1100], corrupt[1100], spec[2400];
    snprintf(primary, sizeof primary, "%s", path_in(root, "primary.tsv"));
    snprintf(fresh, sizeof fresh, "%s", path_in(root, "fail"));
    snprintf(gz, sizeof gz, "%s", path_in(root, "extra.tsv.gz"));
    snprintf(truncated, sizeof truncated, "%s", path_in(root, "truncated.tsv.gz"));
    snprintf(corrupt, sizeof corrupt, "%s", path_in(root, "corrupt.tsv"));   /* gzip without the name */
    size_t size;
    char *bytes = slurp(gz, &size);
    CHECK(bytes && size > 200);
    if (!bytes) return;
    FILE *f = fopen(truncated, "wb");
    CHECK(f && fwrite(bytes, 1, size / 2, f) == size / 2 && fclose(f) == 0);
    bytes[size / 2] ^= 0x55;
    bytes[size / 2 + 1] ^= 0xAA;
    f = fopen(corrupt, "wb");
    CHECK(f && fwrite(bytes, 1, size, f) == size && fclose(f) == 0);
    free(bytes);

    pmt_config cfg;
    config_for(&cfg, primary, fresh);
    snprintf(spec, sizeof spec, "%s:en=2,es=3", truncated);
    add_source(&cfg, spec);
    expect_failure(&cfg, truncated, "truncated gzip");

    config_for(&cfg, primary, fresh);
    snprintf(spec, sizeof spec, "%s:en=2,es=3", corrupt);
    add_source(&cfg, spec);
    expect_failure(&cfg, corrupt, "gzip");

    config_for(&cfg, primary, fresh);     /* the pair's Spanish file has one line fewer */
    char es_short[1100];
    snprintf(es_short, sizeof es_short, "%s", path_in(root, "short.es"));
    CHECK(test_write_file(es_short, "Uno.\nDos.\n") == 0);
    char en3[1100];
    snprintf(en3, sizeof en3, "%s", path_in(root, "three.en"));
    CHECK(test_write_file(en3, "One.\nTwo.\nThree.\n") == 0);
    snprintf(spec, sizeof spec, "%s+%s", en3, es_short);
    add_source(&cfg, spec);
    expect_failure(&cfg, "differ in length", es_short);

    struct { const char *spec, *expect; } bad[] = {
        {"x.tsv:wieght=2", "unknown option 'wieght'"},
        {"x.tsv:weight=0", "weight="},
        {"x.tsv:en=2,es=2", "same column"},
        {"a.en+b.es:en=2", "file pair has none"},
        {"+b.es", "names no file"},
        {"x.tsv:markup=maybe", "drop or keep"},
        {"x.tsv:primary", "already the primary"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        config_for(&cfg, primary, fresh);
        add_source(&cfg, bad[i].spec);
        expect_failure(&cfg, bad[i].expect, NULL);
    }
    config_for(&cfg, primary, fresh);     /* no line has the chosen columns */
    snprintf(spec, sizeof spec, "%s:en=3,es=4", primary);
    add_source(&cfg, spec);
    expect_failure(&cfg, "no sentence pairs left", "en=/es= columns");

    config_for(&cfg, primary, fresh);
    snprintf(spec, sizeof spec, "%s", path_in(root, "no-such-source.tsv"));
    add_source(&cfg, spec);
    expect_failure(&cfg, "no-such-source.tsv", NULL);
}

/* Spec parsing details: a ':' in a folder is part of the path, the default
 * name drops the extensions, primary moves a source first. */
static void test_spec_parsing(void) {
    pmt_config cfg;
    pmt_config_defaults(&cfg);
    pmt_source_spec s;
    char err[512] = "";
    CHECK(pmt_source_spec_parse("/data/a:b/corpus.en-es.tsv.gz", &cfg, &s, err, sizeof err) == 0);
    CHECK(!strcmp(s.path, "/data/a:b/corpus.en-es.tsv.gz") && !strcmp(s.name, "corpus") && s.weight == 1);
    CHECK(pmt_source_spec_parse("odd:name.tsv:", &cfg, &s, err, sizeof err) == 0 && !strcmp(s.path, "odd:name.tsv"));
    CHECK(pmt_source_spec_parse("b.tsv.gz:en=2,es=3,max_words=80,max_ratio=2.5,markup=drop", &cfg, &s, err,
                                sizeof err) == 0);
    CHECK(s.en_col == 2 && s.es_col == 3 && s.max_words == 80 && s.max_ratio == 2.5 && s.drop_markup);
    CHECK(pmt_source_spec_parse("t.en+t.es", &cfg, &s, err, sizeof err) == 0);
    CHECK(!strcmp(s.path, "t.en") && !strcmp(s.es_path, "t.es") && !strcmp(s.name, "t") &&
          s.max_words == cfg.max_words);

    pmt_source_set set;
    add_source(&cfg, "one.tsv");
    add_source(&cfg, "two.tsv:primary");
    CHECK_MSG(pmt_source_set_from_config(&cfg, &set, err, sizeof err) == 0, "%s", err);
    CHECK(set.n == 2 && !strcmp(set.spec[0].path, "two.tsv") && !strcmp(set.spec[1].path, "one.tsv"));
    CHECK(set.spec[0].primary && !set.spec[1].primary && !set.has_dev);
}

static void test_markup_rule(void) {
    const char *markup[] = {
        "See :func:`open` for details.", "Use ``None`` here.", "Read `the tutorial`_ first.",
        ".. note:: This is new.", ">>> print(1)", "The <b>bold</b> word.", "Call :py:meth:`str.join`.",
    };
    const char *plain[] = {
        "The boy sees the apple.", "Ratio: 3 to 1.", "a < b and b > c", "Time: 10:30.", "Use 'quotes' here.",
    };
    for (size_t i = 0; i < sizeof markup / sizeof markup[0]; i++)
        CHECK_MSG(pmt_looks_like_markup(markup[i]), "not seen as markup: %s", markup[i]);
    for (size_t i = 0; i < sizeof plain / sizeof plain[0]; i++)
        CHECK_MSG(!pmt_looks_like_markup(plain[i]), "seen as markup: %s", plain[i]);
}

/* `source` is repeatable: values append, "" clears, the dump reads back as
 * itself (also over a config that already has sources), and flags replace
 * the config file's list. */
static void test_source_setting(void) {
    pmt_config cfg, back;
    char err[512] = "";
    pmt_config_defaults(&cfg);
    add_source(&cfg, "a.tsv");
    add_source(&cfg, "b.en+b.es:weight=2");
    CHECK(!strcmp(cfg.sources, "a.tsv\nb.en+b.es:weight=2"));
    char *text = pmt_config_to_string(&cfg);
    CHECK(text != NULL);
    pmt_config_defaults(&back);
    add_source(&back, "stale.tsv");
    CHECK_MSG(text && pmt_config_load_string(&back, text, err, sizeof err) == 0, "%s", err);
    CHECK_MSG(!strcmp(back.sources, cfg.sources), "read back: '%s'", back.sources);
    free(text);
    CHECK(pmt_config_set(&cfg, "source", "", err, sizeof err) == 0 && cfg.sources[0] == '\0');

    char ini[1100];
    snprintf(ini, sizeof ini, "%s", path_in(root, "sources.ini"));
    CHECK(test_write_file(ini, "[data]\nsource = f1.tsv\nsource = f2.tsv:weight=2\n") == 0);
    int help, dump;
    char *argv1[] = {"prepare", "--config", ini, NULL};
    pmt_config_defaults(&cfg);
    CHECK(pmt_config_parse_args(&cfg, 3, argv1, NULL, NULL, &help, &dump, err, sizeof err) == 0);
    CHECK_MSG(!strcmp(cfg.sources, "f1.tsv\nf2.tsv:weight=2"), "from the file: '%s'", cfg.sources);
    char *argv2[] = {"prepare", "--source", "c1.tsv", "--config", ini, "--source=c2.tsv", NULL};
    pmt_config_defaults(&cfg);
    CHECK(pmt_config_parse_args(&cfg, 6, argv2, NULL, NULL, &help, &dump, err, sizeof err) == 0);
    CHECK_MSG(!strcmp(cfg.sources, "c1.tsv\nc2.tsv"), "flags over the file: '%s'", cfg.sources);
}

int main(void) {
    snprintf(root, sizeof root, "%s", test_tmpdir("prepare-sources"));
    test_markup_rule();
    test_spec_parsing();
    test_source_setting();
    test_several_sources();
    test_dev_file();
    test_all_duplicate_source();
    test_errors();
    return test_finish();
}

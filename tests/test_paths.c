/*
 * test_paths.c — the checks on user-given names and numbers (core/path.h,
 * pmt_parse_int) and the config strings that must survive the INI text
 * stored in checkpoints.
 *
 * Checks: "" and names with control characters or surrounding spaces are
 * refused with the setting named; mkdir -p handles repeated and trailing
 * slashes, refuses "" and a file in the way; "1e3", "4x", "" and overflow
 * are not integers; a ';' that libinih would read as a comment and a value
 * too long for libinih's line are refused, and every accepted string reads
 * back from the stored config unchanged.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/config.h"
#include "core/path.h"
#include "testutil.h"

static void test_path_check(void) {
    char err[256];
    CHECK(pmt_path_check("--save-dir", "", 0, err, sizeof err) == -1 && strstr(err, "--save-dir is empty"));
    CHECK(pmt_path_check("--corpus", "", 1, err, sizeof err) == 0);
    CHECK(pmt_path_check("-o", NULL, 1, err, sizeof err) == -1);
    CHECK(pmt_path_check("-o", "out\n", 0, err, sizeof err) == -1 && strstr(err, "control character"));
    CHECK(pmt_path_check("-o", "a\tb", 0, err, sizeof err) == -1);
    CHECK(pmt_path_check("-o", " out", 0, err, sizeof err) == -1 && strstr(err, "space"));
    CHECK(pmt_path_check("-o", "out ", 0, err, sizeof err) == -1);
    CHECK(pmt_path_check("-o", "runs/a b/ñandú.txt", 0, err, sizeof err) == 0);
    char longer[PMT_PATH_MAX + 8];
    memset(longer, 'a', sizeof longer - 1);
    longer[sizeof longer - 1] = '\0';
    CHECK(pmt_path_check("-o", longer, 0, err, sizeof err) == -1 && strstr(err, "too long"));
}

static void test_make_dirs(void) {
    char err[512], path[8400], file[4200];
    const char *dir = test_tmpdir("paths");
    struct stat st;
    snprintf(path, sizeof path, "%s//x/y//z/", dir);
    CHECK_MSG(pmt_path_make_dirs("save_dir", path, err, sizeof err) == 0, "%s", err);
    snprintf(path, sizeof path, "%s/x/y/z", dir);
    CHECK(stat(path, &st) == 0 && S_ISDIR(st.st_mode));
    CHECK(pmt_path_make_dirs("save_dir", path, err, sizeof err) == 0);   /* exists: fine */
    CHECK(pmt_path_make_dirs("save_dir", "", err, sizeof err) == -1 && strstr(err, "save_dir is empty"));
    snprintf(file, sizeof file, "%s/plain", dir);
    CHECK(test_write_file(file, "x") == 0);
    CHECK(pmt_path_make_dirs("save_dir", file, err, sizeof err) == -1 && strstr(err, "not a folder"));
    snprintf(path, sizeof path, "%s/sub", file);
    CHECK(pmt_path_make_dirs("save_dir", path, err, sizeof err) == -1 && strstr(err, "cannot create"));
}

static void test_parse_int(void) {
    int v = 7;
    char err[256];
    CHECK(pmt_parse_int("12", 1, 100, &v) == 0 && v == 12);
    CHECK(pmt_parse_int("-3", -5, 5, &v) == 0 && v == -3);
    const char *bad[] = {"1e3", "4x", "", "0x10", "3.0", "99999999999999999999", "101"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        v = 7;
        CHECK_MSG(pmt_parse_int(bad[i], 1, 100, &v) == -1 && v == 7, "'%s' accepted", bad[i]);
    }
    CHECK(pmt_parse_int_option("--beam", "1e3", 1, 100, &v, err, sizeof err) == -1 && strstr(err, "'1e3'") &&
          strstr(err, "--beam"));
    pmt_config cfg;
    pmt_config_defaults(&cfg);
    CHECK(pmt_config_set(&cfg, "beam_size", "1e3", err, sizeof err) == -1 && cfg.beam_size == 4);
}

/* What is accepted reads back unchanged from the stored INI text. */
static void test_ini_round_trip(void) {
    char err[256];
    pmt_config cfg, back;
    pmt_config_defaults(&cfg);
    CHECK(pmt_config_set(&cfg, "early_stopping_metric", ";m", err, sizeof err) == -1 && strstr(err, "';'"));
    CHECK(pmt_config_set(&cfg, "save_dir", "runs/a ;b", err, sizeof err) == -1);
    CHECK(pmt_config_set(&cfg, "save_dir", "runs/a\nlr = 5", err, sizeof err) == -1);
    CHECK(pmt_config_set(&cfg, "spm_model_type", "bpe ", err, sizeof err) == -1);
    char long_dir[400];
    memset(long_dir, 'd', sizeof long_dir - 1);
    long_dir[sizeof long_dir - 1] = '\0';
    CHECK(pmt_config_set(&cfg, "save_dir", long_dir, err, sizeof err) == -1 && strstr(err, "line limit"));
    long_dir[180] = '\0';   /* "save_dir = " + 180 + "\n" fits a 200-byte line */
    CHECK_MSG(pmt_config_set(&cfg, "data_dir", long_dir, err, sizeof err) == 0, "%s", err);
    CHECK(pmt_config_set(&cfg, "save_dir", "runs/a;b #1", err, sizeof err) == 0);
    CHECK(pmt_config_set(&cfg, "corpus", "", err, sizeof err) == 0);
    char *text = pmt_config_to_string(&cfg);
    pmt_config_defaults(&back);
    CHECK(text && pmt_config_load_string(&back, text, err, sizeof err) == 0);
    CHECK(!strcmp(back.save_dir, "runs/a;b #1") && back.corpus[0] == '\0' && !strcmp(back.data_dir, long_dir));
    free(text);
    pmt_config_defaults(&cfg);
    CHECK(pmt_config_set(&cfg, "save_dir", "", err, sizeof err) == 0);
    CHECK(pmt_config_validate(&cfg, err, sizeof err) == -1 && strstr(err, "save_dir is empty"));
}

int main(void) {
    test_path_check();
    test_make_dirs();
    test_parse_int();
    test_ini_round_trip();
    return test_finish();
}

/*
 * fuzz_config.c — the INI config readers and the command-line parser.
 * The first byte picks the entry: 0 the strict string reader
 * (pmt_config_load_string), 1 the file reader (pmt_config_load_file, as for
 * --config), 2 the argv parser (the rest split at NUL bytes into arguments;
 * --config is dropped so no other file is read), 3 the reader of configs
 * stored in checkpoints (pmt_config_load_stored: unknown keys skipped).
 *
 * Properties: 0 or -1 with a message; a config that was read round-trips:
 * its INI text (pmt_config_to_string) reads back into the same text.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/config.h"
#include "fuzz_common.h"

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    return 0;
}

/* The config's INI text reads back to the same text. */
static void check_round_trip(const pmt_config *cfg) {
    char *text = pmt_config_to_string(cfg), err[512];
    if (!text) abort();
    pmt_config again;
    pmt_config_defaults(&again);
    if (pmt_config_load_string(&again, text, err, sizeof err) != 0) {
        fprintf(stderr, "round trip failed: %s\n%s", err, text);
        abort();
    }
    char *text2 = pmt_config_to_string(&again);
    if (!text2 || strcmp(text, text2) != 0) abort();
    free(text);
    free(text2);
    pmt_config_validate(cfg, err, sizeof err);
}

static void parse_argv(pmt_config *cfg, const char *text, size_t n) {
    enum { MAX_ARGS = 32 };
    char *copy = malloc(n + 1);
    if (!copy) abort();
    memcpy(copy, text, n);
    copy[n] = '\0';
    char *args[MAX_ARGS + 1] = {"projmt"};
    int argc = 1;
    for (char *p = copy; p <= copy + n && argc < MAX_ARGS; p += strlen(p) + 1)
        if (strncmp(p, "--config", 8) != 0) args[argc++] = p;
    static const char *const extra[] = {"i=", "o=", "batch=", "beam=", "scores", NULL};
    const char *val[6];
    int help, dump;
    char err[512];
    if (pmt_config_parse_args(cfg, argc, args, extra, val, &help, &dump, err, sizeof err) == 0) check_round_trip(cfg);
    else if (err[0] == '\0') abort();
    free(copy);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size == 0) return 0;
    pmt_config cfg;
    pmt_config_defaults(&cfg);
    char err[512] = "";
    const char *text = (const char *)data + 1;
    size_t n = size - 1;
    switch (data[0] % 4) {
    case 0: {
        char *s = malloc(n + 1);
        if (!s) abort();
        memcpy(s, text, n);
        s[n] = '\0';
        if (pmt_config_load_string(&cfg, s, err, sizeof err) == 0) check_round_trip(&cfg);
        else if (err[0] == '\0') abort();
        free(s);
        break;
    }
    case 1: {
        const char *path = fuzz_scratch_path(".ini");
        fuzz_write_file(path, text, n);
        if (pmt_config_load_file(&cfg, path, err, sizeof err) == 0) check_round_trip(&cfg);
        else if (err[0] == '\0') abort();
        unlink(path);
        break;
    }
    case 2:
        parse_argv(&cfg, text, n);
        break;
    default: {
        char *s = malloc(n + 1), ignored[64];
        if (!s) abort();
        memcpy(s, text, n);
        s[n] = '\0';
        if (pmt_config_load_stored(&cfg, s, ignored, sizeof ignored, err, sizeof err) == 0) {
            if (strlen(ignored) >= sizeof ignored) abort();
            check_round_trip(&cfg);
        } else if (err[0] == '\0') {
            abort();
        }
        free(s);
    }
    }
    return 0;
}

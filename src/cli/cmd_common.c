/*
 * cmd_common.c — what every subcommand does first (commands.h): defaults,
 * options, --help. One place, so that every command reports a bad flag the
 * same way ("projmt <name>: ..." and exit status 2).
 */
#include "cli/commands.h"

#include <stdlib.h>
#include <string.h>

#include "model/checkpoint.h"
#include "nn/gemm.h"

int cmd_parse_args(const char *name, int argc, char **argv, const char *const *extra, const char **extra_val,
                   void (*usage)(FILE *), pmt_config *cfg, int *dump) {
    char err[2048];
    int help = 0;
    pmt_config_defaults(cfg);
    if (pmt_config_parse_args(cfg, argc, argv, extra, extra_val, &help, dump, err, sizeof err) != 0) {
        fprintf(stderr, "projmt %s: %s\n", name, err);
        return 2;
    }
    if (help) {
        usage(stdout);
        return 0;
    }
    return CMD_CONTINUE;
}

static int verbose(void) {
    const char *v = getenv("PROJMT_VERBOSE");
    return v && v[0] && strcmp(v, "0") != 0;
}

void cmd_note_compute(const char *name, const struct pmt_model *m) {
    static int said;
    if (said || !verbose()) return;
    said = 1;
    char line[512];
    pmt_model_describe_compute(m, line, sizeof line);
    fprintf(stderr, "projmt %s: %s\n", name, line);
}

void cmd_note_fallbacks(const char *name) {
    const long n = pmt_int8_fallback_count();
    if (verbose() && n > 0)
        fprintf(stderr, "projmt %s: %ld int8 products ran the one-call GEMM (oneDNN built no packed primitive for "
                "their row count; the same results, slower)\n", name, n);
}

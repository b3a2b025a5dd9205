/*
 * cmd_common.c — what every subcommand does first (commands.h): defaults,
 * options, --help. One place, so that every command reports a bad flag the
 * same way ("projmt <name>: ..." and exit status 2).
 */
#include "cli/commands.h"

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

/*
 * cmd_average.c — `projmt average`: the element-wise mean of several
 * checkpoints of one run (fairseq's average_checkpoints.py, Marian's
 * average.py), given as files or as the newest N step-<step>.ckpt of a save
 * dir (written by training with --keep-last N). What is averaged:
 * model/average.h.
 *
 * Exit status: 0 written, 1 unreadable input or unwritable output, 2 bad usage.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h"
#include "core/path.h"
#include "model/average.h"

enum { OPT_OUT, OPT_LAST, OPT_DIR, N_AVERAGE_OPTIONS };
static const char *const average_options[N_AVERAGE_OPTIONS + 1] = {"out=", "last=", "dir=", NULL};

static void print_usage(FILE *out) {
    fprintf(out,
            "usage: projmt average --out FILE CKPT...\n"
            "       projmt average --out FILE --last N --dir SAVE_DIR\n\n"
            "Averages the weights of checkpoints of one training run (each one's moving\n"
            "average when it has one) into a checkpoint without optimizer state, for\n"
            "translate, eval and export.\n\n"
            "  --out FILE        checkpoint to write (atomically)\n"
            "  --last N          the newest N step-<step>.ckpt files of --dir (train with\n"
            "                    --keep-last N to have them)\n"
            "  --dir SAVE_DIR    training run folder for --last\n");
}

/* The newest n step checkpoints of dir into paths (malloc'd strings). */
static int newest_steps(const char *dir, int n, char ***paths, int *count) {
    char err[1024];
    int64_t *steps;
    int have;
    if (pmt_step_checkpoints(dir, &steps, &have, err, sizeof err) != 0) {
        fprintf(stderr, "projmt average: %s\n", err);
        return 1;
    }
    if (have < n) {
        fprintf(stderr, "projmt average: '%s' has %d step-<step>.ckpt file(s), --last asks for %d (train with "
                "--keep-last %d)\n", dir, have, n, n);
        free(steps);
        return 1;
    }
    *paths = calloc((size_t)n, sizeof **paths);
    for (int i = 0; *paths && i < n; i++) {
        (*paths)[i] = malloc(PMT_PATH_MAX + 48);
        if ((*paths)[i]) pmt_step_checkpoint_path((*paths)[i], PMT_PATH_MAX + 48, dir, steps[have - n + i]);
    }
    *count = n;
    free(steps);
    return 0;
}

/* --out, --dir and every checkpoint name are usable names (core/path.h);
 * 0, or -1 after printing why not. */
static int check_paths(const char *const *values, char *const *files, int n_files) {
    char err[2048];
    int rc = pmt_path_check("--out", values[OPT_OUT], 0, err, sizeof err);
    if (rc == 0 && values[OPT_DIR]) rc = pmt_path_check("--dir", values[OPT_DIR], 0, err, sizeof err);
    for (int i = 0; rc == 0 && i < n_files; i++) rc = pmt_path_check("checkpoint", files[i], 0, err, sizeof err);
    if (rc != 0) fprintf(stderr, "projmt average: %s\n", err);
    return rc;
}

/* Every option but these is followed by its value. */
static int option_without_value(const char *arg) {
    return !strcmp(arg, "--help") || !strcmp(arg, "-h") || !strcmp(arg, "--dump-config") || strchr(arg, '=');
}

int cmd_average(int argc, char **argv) {
    pmt_config cfg;
    const char *values[N_AVERAGE_OPTIONS];
    char err[2048];
    int dump = 0;
    /* The checkpoints are the positional arguments: options are taken out first. */
    char **files = calloc((size_t)argc + 1, sizeof *files), **rest = calloc((size_t)argc + 1, sizeof *rest);
    int n_files = 0, n_rest = 0;
    if (!files || !rest) { fprintf(stderr, "projmt average: out of memory\n"); free(files); free(rest); return 1; }
    rest[n_rest++] = argv[0];
    for (int i = 1; i < argc; i++) {
        if (argv[i][0] != '-') {
            files[n_files++] = argv[i];
            continue;
        }
        rest[n_rest++] = argv[i];
        if (!option_without_value(argv[i]) && i + 1 < argc) rest[n_rest++] = argv[++i];
    }
    int status = cmd_parse_args("average", n_rest, rest, average_options, values, print_usage, &cfg, &dump);
    if (status == CMD_CONTINUE) status = dump ? (pmt_config_dump(&cfg, stdout), 0) : -2;
    char **owned = NULL;
    int n = n_files;
    if (status == -2) {
        if (!values[OPT_OUT] || (values[OPT_LAST] ? !values[OPT_DIR] || n_files : n_files == 0)) {
            fprintf(stderr, "projmt average: give --out FILE and either checkpoints or --last N --dir SAVE_DIR "
                    "(see --help)\n");
            status = 2;
        } else if (check_paths(values, files, n_files) != 0) {
            status = 2;
        } else if (values[OPT_LAST]) {
            int last = atoi(values[OPT_LAST]);
            if (last < 1) {
                fprintf(stderr, "projmt average: --last must be a positive count (got '%s')\n", values[OPT_LAST]);
                status = 2;
            } else if ((status = newest_steps(values[OPT_DIR], last, &owned, &n)) == 0) {
                status = -2;
                for (int i = 0; i < n; i++) if (!owned || !owned[i]) status = 1;
            }
        }
    }
    if (status == -2) {
        const char *const *paths = owned ? (const char *const *)owned : (const char *const *)files;
        if (pmt_checkpoint_average(paths, n, values[OPT_OUT], err, sizeof err) != 0) {
            fprintf(stderr, "projmt average: %s\n", err);
            status = 1;
        } else {
            printf("wrote %s: the average of %d checkpoint(s)", values[OPT_OUT], n);
            for (int i = 0; i < n; i++) printf("%s%s", i ? ", " : ": ", paths[i]);
            printf("\n");
            status = 0;
        }
    }
    for (int i = 0; owned && i < n; i++) free(owned[i]);
    free(owned);
    free(files);
    free(rest);
    return status;
}

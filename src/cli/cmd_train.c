/*
 * cmd_train.c — `projmt train`: options → pmt_config → pmt_train_from_dir.
 *
 * Validation also reports BLEU/chrF of greedy translations of the first
 * valid_bleu_sentences lines of <data_dir>/valid.{en,es} (valid_bleu.h),
 * which early_stopping_metric bleu | chrf select the best checkpoint by.
 *
 * Exit status: 0 when a stop criterion was reached; 128 + signal number
 * (130 for Ctrl-C, 143 for SIGTERM) when stopped by a signal — last.ckpt is
 * then saved and the same command resumes; 1 on an error (message on
 * stderr); 2 on bad options.
 *
 * Under mpirun (scripts/train_mpi.sh) every rank runs this command and they
 * train one model data-parallel (dist.h); an error on any rank ends the whole
 * job, so no rank waits forever for one that gave up.
 */
#include <stdio.h>

#include "cli/commands.h"
#include "core/config.h"
#include "train/dist.h"
#include "train/train.h"
#include "train/valid_bleu.h"

static void usage(FILE *out) {
    fprintf(out,
            "usage: projmt train [--config FILE] [options]\n\n"
            "Trains on <data_dir>/{train,valid}.tok with <data_dir>/spm.model, writing\n"
            "<save_dir>/{last,best}.ckpt and <save_dir>/train.tsv. If <save_dir>/last.ckpt\n"
            "exists, training resumes from it (same model, seed, batch_tokens, max_len);\n"
            "Ctrl-C saves last.ckpt and stops.\n\n"
            "options:\n"
            "  %-26s %s\n  %-26s %s\n  %-26s %s\n  %-26s %s\n  %-26s %s\n",
            "--config FILE", "INI file (flags override it)", "--fresh",
            "start over in save_dir, ignoring last.ckpt and train.tsv", "--quiet", "no progress output",
            "--dump-config", "print the effective config and exit", "--help", "this help");
    pmt_config_print_help(out, "data,model,train");
}

/* Under mpirun every rank parses the options; one copy of the help is enough. */
static void usage_on_root(FILE *out) {
    if (pmt_dist_is_root()) usage(out);
}

static int train_command(int argc, char **argv) {
    static const char *const extra[] = {"fresh", "quiet", NULL};
    const char *extra_val[3];
    pmt_config cfg;
    char err[1024];
    int dump = 0;
    int parsed = cmd_parse_args("train", argc, argv, extra, extra_val, usage_on_root, &cfg, &dump);
    if (parsed != CMD_CONTINUE) return parsed;
    if (dump) {
        if (pmt_dist_is_root()) pmt_config_dump(&cfg, stdout);
        return 0;
    }
    /* Settings are checked before any data is read (training checks again). */
    if (pmt_config_validate(&cfg, err, sizeof err) != 0) {
        fprintf(stderr, "projmt train: %s\n", err);
        return 2;
    }
    pmt_train_options opt = {extra_val[0] != NULL, extra_val[1] != NULL, 1};
    pmt_valid_bleu vb;
    pmt_train_hooks hooks = {&vb, NULL, pmt_valid_bleu_hook};
    pmt_train_result res;
    int rc = pmt_valid_bleu_init(&vb, &cfg, opt.quiet ? NULL : stderr, err, sizeof err);
    if (rc == 0) {
        if (!vb.enabled) hooks.valid_metric = NULL;
        rc = pmt_train_from_dir(&cfg, &opt, &hooks, &res, err, sizeof err);
    }
    pmt_valid_bleu_free(&vb);
    if (rc != 0) {
        fprintf(stderr, "projmt train: %s\n", err);
        return 1;
    }
    return res.stop == PMT_TRAIN_INTERRUPTED ? 128 + (res.signal > 0 ? res.signal : 2) : 0;
}

int cmd_train(int argc, char **argv) {
    char err[256];
    if (pmt_dist_init(&argc, &argv, err, sizeof err) != 0) {
        fprintf(stderr, "projmt train: %s\n", err);
        return 1;
    }
    int rc = train_command(argc, argv);
    if (rc == 1 && pmt_dist_size() > 1) pmt_dist_abort("training failed (reason above); stopping every rank");
    pmt_dist_finalize();
    return rc;
}

/*
 * cmd_prepare.c — `projmt prepare`: options into a pmt_config, then the
 * library's pmt_prepare (prepare.h) does the work. Exit 0 on success, 1 on a
 * failed run, 2 on bad usage.
 */
#include <stdio.h>

#include "cli/commands.h"
#include "core/config.h"
#include "data/prepare.h"

static void usage(FILE *out) {
    fprintf(out,
            "usage: projmt prepare [--config FILE] (--corpus spa.txt | --src-file EN --tgt-file ES)\n"
            "                      [--data-dir DIR] [--key value ...] [--dump-config]\n\n"
            "Cleans, deduplicates and filters the sentence pairs, splits them (seeded) into\n"
            "train/valid/test, trains a joint SentencePiece model on train and writes\n"
            "DIR/{spm.model,train.tok,valid.tok,test.tok,*.en,*.es,manifest.json}.\n"
            "scripts/get_data.sh prints the corpus path.\n\noptions:\n");
    pmt_config_print_help(out, "data");
}

int cmd_prepare(int argc, char **argv) {
    pmt_config cfg;
    int dump = 0;
    int parsed = cmd_parse_args("prepare", argc, argv, NULL, NULL, usage, &cfg, &dump);
    if (parsed != CMD_CONTINUE) return parsed;
    if (dump) { pmt_config_dump(&cfg, stdout); return 0; }

    char err[2048];
    pmt_prepare_stats stats;
    if (pmt_prepare(&cfg, stderr, &stats, err, sizeof err) != 0) {
        fprintf(stderr, "projmt prepare: error: %s\n", err);
        return 1;
    }
    pmt_prepare_print_summary(stdout, &cfg, &stats);
    return 0;
}

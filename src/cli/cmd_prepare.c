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
            "                      [--source SPEC ...] [--dev-file SPEC]\n"
            "                      [--data-dir DIR] [--key value ...] [--dump-config]\n\n"
            "Cleans, deduplicates and filters the sentence pairs, splits them (seeded) into\n"
            "train/valid/test, trains a joint SentencePiece model on train and writes\n"
            "DIR/{spm.model,train.tok,valid.tok,test.tok,*.en,*.es,manifest.json}.\n"
            "scripts/get_data.sh prints the corpus path.\n\n"
            "Several corpora: --corpus (or --src-file/--tgt-file) is the primary source;\n"
            "each --source SPEC (repeatable; `source = SPEC` lines in a config file) adds one:\n"
            "  PATH[:OPTIONS]             TSV; English in column 1, Spanish in column 2\n"
            "  EN_PATH+ES_PATH[:OPTIONS]  two line-aligned files (Moses form)\n"
            "Any file may be gzip'd (found by its magic bytes). OPTIONS, comma-separated:\n"
            "  en=COL,es=COL   TSV columns (1-based), e.g. en=2,es=3 skips a reference column\n"
            "  weight=N        put each kept training pair in N times (1..100; default 1)\n"
            "  name=NAME       the row's name in the per-source table (default: file name)\n"
            "  max_words=N, max_ratio=X   this source's length limits (default: the global ones)\n"
            "  markup=drop     drop pairs with reST roles (:func:`x`), ``literals``, `links`_,\n"
            "                  '.. ' directives, '>>>' prompts or <tags> (default: keep)\n"
            "  primary         valid/test come from this source (default: --corpus, else the first)\n"
            "Everything after the last ':' is OPTIONS unless it holds a '/' (a path with a ':'\n"
            "in its file name needs a trailing ':'). Valid/test are carved from the primary\n"
            "source only, by the same seeded split as when it is alone; other sources go to\n"
            "train only. A pair kept by an earlier source (primary first, then in the order\n"
            "given) is dropped from later ones as a duplicate, and training pairs whose\n"
            "English sentence is in valid/test are dropped (\"held\"). --dev-file SPEC makes the\n"
            "valid split that file's pairs (no length or dedup rules); the primary's\n"
            "would-be valid pairs then train, so the test split stays the same. A per-source\n"
            "table of pairs read, kept and dropped by reason is printed and kept in manifest.json.\n"
            "\noptions:\n");
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

/*
 * cmd_attention.c — `projmt attention`: the attention weights a checkpoint
 * uses on one sentence, written as DIR/attention.json for
 * scripts/plot_attention.py (format in attention_dump.h).
 *
 * Without --tgt the sentence is first translated greedily, so the pictures
 * show the model attending while it produces its own translation.
 *
 * Exit status: 0 written, 1 unreadable model or unwritable output, 2 bad usage.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "tools/attention_dump.h"
#include "cli/commands.h"
#include "core/config.h"
#include "core/path.h"
#include "core/threads.h"
#include "translate/translator.h"

enum { OPT_MODEL, OPT_SRC, OPT_TGT, OPT_OUT, N_ATTENTION_OPTIONS };
static const char *const attention_options[N_ATTENTION_OPTIONS + 1] = {"model=", "src=", "tgt=", "out=", NULL};

static void print_usage(FILE *out) {
    fprintf(out,
            "usage: projmt attention --model CKPT --src \"English sentence\" [--tgt \"Spanish\"] --out DIR\n\n"
            "Runs one teacher-forced pass (no dropout) over the sentence and its translation\n"
            "(--tgt, or the model's greedy translation) and writes the attention weights of\n"
            "every layer and head at the three sites (encoder self, decoder self, decoder\n"
            "cross), with the source and target pieces, to DIR/attention.json.\n"
            "Plot them with scripts/plot_attention.py.\n\n"
            "  --model CKPT      checkpoint or exported model file\n"
            "  --src TEXT        English sentence\n"
            "  --tgt TEXT        Spanish sentence to attend with (default: greedy translation)\n"
            "  --out DIR         output folder (created if missing)\n"
            "  --threads N       threads (0 = all cores)\n");
}

/* The model's greedy translation of source (owned by t until its next
 * call), or NULL after printing why there is none. */
static const char *greedy_translation(pmt_translator *t, const char *source) {
    char err[1024];
    pmt_translation out;
    if (pmt_translator_translate(t, &source, 1, &out, err, sizeof err) != 0) {
        fprintf(stderr, "projmt attention: translating: %s\n", err);
        return NULL;
    }
    if (out.n == 0 || out.text[0][0] == '\0') {
        fprintf(stderr, "projmt attention: the model translates '%s' to nothing; give --tgt TEXT\n", source);
        return NULL;
    }
    return out.text[0];
}

/* Writes the dump of (source, target) to dir/attention.json; exit status. */
static int write_dump(pmt_model *m, const pmt_spm *spm, const char *source, const char *target, const char *dir) {
    char err[1024], path[PMT_PATH_MAX + 32];
    pmt_attention_pair pair;
    if (pmt_attention_pair_init(&pair, spm, source, target, m->max_len, err, sizeof err) != 0) {
        fprintf(stderr, "projmt attention: %s\n", err);
        return 2;
    }
    snprintf(path, sizeof path, "%s/attention.json", dir);
    int status = 1;
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "projmt attention: cannot write '%s': %s\n", path, strerror(errno));
    } else {
        int rc = pmt_attention_dump(m, spm, &pair, f, err, sizeof err);
        if (fclose(f) != 0 && rc == 0) {
            snprintf(err, sizeof err, "closing failed: %s", strerror(errno));
            rc = -1;
        }
        if (rc != 0) fprintf(stderr, "projmt attention: %s: %s\n", path, err);
        else {
            printf("source: %s\ntarget: %s\nwrote %s\n", source, target, path);
            status = 0;
        }
    }
    pmt_attention_pair_free(&pair);
    return status;
}

int cmd_attention(int argc, char **argv) {
    pmt_config cfg;
    const char *values[N_ATTENTION_OPTIONS];
    char err[1024];
    int dump = 0;
    int parsed = cmd_parse_args("attention", argc, argv, attention_options, values, print_usage, &cfg, &dump);
    if (parsed != CMD_CONTINUE) return parsed;
    if (dump) { pmt_config_dump(&cfg, stdout); return 0; }
    if (!values[OPT_MODEL] || !values[OPT_SRC] || !values[OPT_OUT]) {
        fprintf(stderr, "projmt attention: --model CKPT, --src TEXT and --out DIR are required (see --help)\n");
        return 2;
    }
    if (pmt_path_check("--model", values[OPT_MODEL], 0, err, sizeof err) != 0 ||
        pmt_path_check("--out", values[OPT_OUT], 0, err, sizeof err) != 0) {
        fprintf(stderr, "projmt attention: %s\n", err);
        return 2;
    }
    if (pmt_path_make_dirs("--out", values[OPT_OUT], err, sizeof err) != 0) {
        fprintf(stderr, "projmt attention: %s\n", err);
        return 1;
    }
    pmt_set_threads(cfg.threads);
    /* The translator holds the model and tokenizer the dump needs, and
     * translates when no target is given. */
    pmt_decode_options greedy;
    pmt_decode_options_from_config(&greedy, &cfg);
    greedy.beam_size = greedy.n_best = 1;
    pmt_translator t;
    if (pmt_translator_load(&t, values[OPT_MODEL], &greedy, 1, err, sizeof err) != 0) {
        fprintf(stderr, "projmt attention: %s\n", err);
        return 1;
    }
    t.warn = pmt_translator_warn_file;
    t.warn_ctx = stderr;
    const char *target = values[OPT_TGT];
    int status = 1;
    if (!target) target = greedy_translation(&t, values[OPT_SRC]);
    if (target) status = write_dump(&t.model, t.spm, values[OPT_SRC], target, values[OPT_OUT]);
    pmt_translator_free(&t);
    return status;
}

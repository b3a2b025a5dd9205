/*
 * cmd_export.c — `projmt export`: a checkpoint into an inference-only model
 * file (format in model/model_file.h) with fp32, bf16 or int8 weights.
 *
 * The checkpoint's moving average is exported when it has one (--ema in
 * training), as every inference load of that checkpoint uses it; --raw
 * exports the raw parameters instead.
 *
 * Exit status: 0 written, 1 unreadable checkpoint or unwritable output, 2 bad usage.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/commands.h"
#include "core/clock.h"
#include "core/path.h"
#include "data/corpus.h"
#include "model/checkpoint.h"
#include "model/model_file.h"

enum { OPT_MODEL, OPT_OUT, OPT_WEIGHTS, OPT_RAW, OPT_SHORTLIST, OPT_SHORTLIST_SIZE, OPT_SHORTLIST_FREQUENT,
       N_EXPORT_OPTIONS };
static const char *const export_options[N_EXPORT_OPTIONS + 1] = {
    "model=", "out=", "weights=", "raw", "shortlist=", "shortlist-size=", "shortlist-frequent=", NULL};

/* Defaults of the shortlist stored (translate --shortlist K uses its first
 * K <= size per source piece; docs/speed.md measures the choices). */
enum { SHORTLIST_SIZE = 100, SHORTLIST_FREQUENT = 100, SHORTLIST_PASSES = 5 };

static void print_usage(FILE *out) {
    fprintf(out,
            "usage: projmt export --model CKPT --out FILE [--weights fp32|bf16|int8] [--raw]\n"
            "                     [--shortlist DATA_DIR [--shortlist-size K] [--shortlist-frequent N]]\n\n"
            "Writes an inference-only model file: config, SentencePiece model and weights,\n"
            "without optimizer or training state, checksummed. translate, eval and\n"
            "bench --decode take it like a checkpoint.\n\n"
            "  --model CKPT      checkpoint (last.ckpt, best.ckpt, step-N.ckpt or an average)\n"
            "  --out FILE        model file to write (atomically)\n"
            "  --weights TYPE    fp32 | bf16 | int8 (per-output-row symmetric; default: int8)\n"
            "  --raw             export the raw parameters even when the checkpoint holds a\n"
            "                    moving average (--ema in training; exported by default)\n"
            "  --shortlist DIR   also store a vocabulary shortlist built from DIR/train.tok,\n"
            "                    the prepared data the model was trained on (IBM Model 1;\n"
            "                    translate --shortlist K then decodes over it)\n"
            "  --shortlist-size K       candidates kept per source piece (default %d)\n"
            "  --shortlist-frequent N   most frequent target pieces always kept (default %d)\n",
            SHORTLIST_SIZE, SHORTLIST_FREQUENT);
}

/* Whether DIR/spm.model holds exactly the model's SentencePiece bytes (so
 * DIR's token ids are the model's). 0, or -1 with err. */
static int same_vocabulary(const char *dir, const pmt_checkpoint *ck, char *err, size_t errlen) {
    char path[PMT_PATH_MAX + 16];
    snprintf(path, sizeof path, "%s/spm.model", dir);
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, errlen, "--shortlist: cannot open '%s' (%s): give the prepared data directory the model was "
                 "trained on", path, strerror(errno));
        return -1;
    }
    int same = 1;
    size_t at = 0;
    unsigned char buf[1 << 16];
    size_t n;
    while (same && (n = fread(buf, 1, sizeof buf, f)) > 0) {
        same = at + n <= ck->spm_size && memcmp(buf, ck->spm + at, n) == 0;
        at += n;
    }
    const int failed = ferror(f);
    fclose(f);
    if (failed) {
        snprintf(err, errlen, "--shortlist: reading '%s' failed", path);
        return -1;
    }
    if (!same || at != ck->spm_size) {
        snprintf(err, errlen, "--shortlist: '%s' is not the model's SentencePiece model, so '%s' is not the data it "
                 "was trained on (give that prepared data directory)", path, dir);
        return -1;
    }
    return 0;
}

/* Builds ck->shortlist from DIR/train.tok. 0, or -1 with err. */
static int build_shortlist(pmt_checkpoint *ck, const char *dir, int size, int frequent, char *err, size_t errlen) {
    if (same_vocabulary(dir, ck, err, errlen) != 0) return -1;
    if (frequent > ck->vocab_size) frequent = ck->vocab_size;   /* a small vocabulary: all of it */
    char path[PMT_PATH_MAX + 16], inner[1024];
    snprintf(path, sizeof path, "%s/train.tok", dir);
    pmt_corpus train;
    if (pmt_corpus_load(&train, path, inner, sizeof inner) != 0) {
        snprintf(err, errlen, "--shortlist: %s", inner);
        return -1;
    }
    const double t0 = pmt_now_seconds();
    pmt_shortlist *sl = pmt_shortlist_build(&train, ck->vocab_size, size, frequent, SHORTLIST_PASSES, inner,
                                            sizeof inner);
    const int pairs = train.n_pairs;
    pmt_corpus_free(&train);
    if (!sl) {
        snprintf(err, errlen, "--shortlist: %s", inner);
        return -1;
    }
    pmt_shortlist_free(ck->shortlist);
    ck->shortlist = sl;
    printf("shortlist: %d candidates per source piece and the %d most frequent target pieces, from %d training "
           "pairs of %s (IBM Model 1, %d passes, %.1f s)\n", sl->per_source, sl->n_frequent, pairs, path,
           SHORTLIST_PASSES, pmt_now_seconds() - t0);
    return 0;
}

int cmd_export(int argc, char **argv) {
    pmt_config cfg;
    const char *values[N_EXPORT_OPTIONS];
    char err[2048];
    int dump = 0;
    int parsed = cmd_parse_args("export", argc, argv, export_options, values, print_usage, &cfg, &dump);
    if (parsed != CMD_CONTINUE) return parsed;
    if (dump) { pmt_config_dump(&cfg, stdout); return 0; }
    pmt_weight_type weights = PMT_WEIGHTS_INT8;
    if (!values[OPT_MODEL] || !values[OPT_OUT]) {
        fprintf(stderr, "projmt export: --model CKPT and --out FILE are required (see --help)\n");
        return 2;
    }
    if (pmt_path_check("--model", values[OPT_MODEL], 0, err, sizeof err) != 0 ||
        pmt_path_check("--out", values[OPT_OUT], 0, err, sizeof err) != 0) {
        fprintf(stderr, "projmt export: %s\n", err);
        return 2;
    }
    if (values[OPT_WEIGHTS] && pmt_weight_type_parse(values[OPT_WEIGHTS], &weights) != 0) {
        fprintf(stderr, "projmt export: --weights must be fp32, bf16 or int8 (got '%s')\n", values[OPT_WEIGHTS]);
        return 2;
    }
    int shortlist_size = SHORTLIST_SIZE, shortlist_frequent = SHORTLIST_FREQUENT;
    if ((values[OPT_SHORTLIST_SIZE] && pmt_parse_int_option("--shortlist-size", values[OPT_SHORTLIST_SIZE], 1,
                                                            PMT_SHORTLIST_MAX_PER_SOURCE, &shortlist_size, err,
                                                            sizeof err) != 0) ||
        (values[OPT_SHORTLIST_FREQUENT] && pmt_parse_int_option("--shortlist-frequent", values[OPT_SHORTLIST_FREQUENT],
                                                                0, 1 << 20, &shortlist_frequent, err, sizeof err) != 0) ||
        (values[OPT_SHORTLIST] && pmt_path_check("--shortlist", values[OPT_SHORTLIST], 0, err, sizeof err) != 0)) {
        fprintf(stderr, "projmt export: %s\n", err);
        return 2;
    }
    if ((values[OPT_SHORTLIST_SIZE] || values[OPT_SHORTLIST_FREQUENT]) && !values[OPT_SHORTLIST]) {
        fprintf(stderr, "projmt export: --shortlist-size and --shortlist-frequent need --shortlist DIR\n");
        return 2;
    }
    pmt_checkpoint ck;
    if (pmt_checkpoint_load(&ck, values[OPT_MODEL], err, sizeof err) != 0) {
        fprintf(stderr, "projmt export: %s\n", err);
        return 1;
    }
    if (!values[OPT_RAW]) pmt_checkpoint_use_ema(&ck);
    if (values[OPT_SHORTLIST] &&
        build_shortlist(&ck, values[OPT_SHORTLIST], shortlist_size, shortlist_frequent, err, sizeof err) != 0) {
        fprintf(stderr, "projmt export: %s\n", err);
        pmt_checkpoint_free(&ck);
        return 1;
    }
    int rc = pmt_model_file_export(values[OPT_OUT], &ck, weights, ck.params_are_ema, err, sizeof err);
    if (rc != 0) {
        fprintf(stderr, "projmt export: %s\n", err);
    } else {
        struct stat in, out;
        int sized = stat(values[OPT_MODEL], &in) == 0 && stat(values[OPT_OUT], &out) == 0;
        printf("wrote %s: %s weights%s, %zu parameters%s", values[OPT_OUT], pmt_weight_type_name(weights),
               ck.params_are_ema ? " (moving average)" : "", ck.n_params,
               ck.shortlist ? ", with a vocabulary shortlist" : "");
        if (sized)
            printf(", %.2f MB (%.1f%% of %s)", out.st_size / 1e6, 100.0 * (double)out.st_size / (double)in.st_size,
                   values[OPT_MODEL]);
        printf("\n");
    }
    pmt_checkpoint_free(&ck);
    return rc == 0 ? 0 : 1;
}

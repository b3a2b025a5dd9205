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
#include <stdio.h>
#include <sys/stat.h>

#include "cli/commands.h"
#include "core/path.h"
#include "model/checkpoint.h"
#include "model/model_file.h"

enum { OPT_MODEL, OPT_OUT, OPT_WEIGHTS, OPT_RAW, N_EXPORT_OPTIONS };
static const char *const export_options[N_EXPORT_OPTIONS + 1] = {"model=", "out=", "weights=", "raw", NULL};

static void print_usage(FILE *out) {
    fprintf(out,
            "usage: projmt export --model CKPT --out FILE [--weights fp32|bf16|int8] [--raw]\n\n"
            "Writes an inference-only model file: config, SentencePiece model and weights,\n"
            "without optimizer or training state, checksummed. translate, eval and\n"
            "bench --decode take it like a checkpoint.\n\n"
            "  --model CKPT      checkpoint (last.ckpt, best.ckpt, step-N.ckpt or an average)\n"
            "  --out FILE        model file to write (atomically)\n"
            "  --weights TYPE    fp32 | bf16 | int8 (per-output-row symmetric; default: int8)\n"
            "  --raw             export the raw parameters even when the checkpoint holds a\n"
            "                    moving average (--ema in training; exported by default)\n");
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
    pmt_checkpoint ck;
    if (pmt_checkpoint_load(&ck, values[OPT_MODEL], err, sizeof err) != 0) {
        fprintf(stderr, "projmt export: %s\n", err);
        return 1;
    }
    if (!values[OPT_RAW]) pmt_checkpoint_use_ema(&ck);
    int rc = pmt_model_file_export(values[OPT_OUT], &ck, weights, ck.params_are_ema, err, sizeof err);
    if (rc != 0) {
        fprintf(stderr, "projmt export: %s\n", err);
    } else {
        struct stat in, out;
        int sized = stat(values[OPT_MODEL], &in) == 0 && stat(values[OPT_OUT], &out) == 0;
        printf("wrote %s: %s weights%s, %zu parameters", values[OPT_OUT], pmt_weight_type_name(weights),
               ck.params_are_ema ? " (moving average)" : "", ck.n_params);
        if (sized)
            printf(", %.2f MB (%.1f%% of %s)", out.st_size / 1e6, 100.0 * (double)out.st_size / (double)in.st_size,
                   values[OPT_MODEL]);
        printf("\n");
    }
    pmt_checkpoint_free(&ck);
    return rc == 0 ? 0 : 1;
}

/*
 * main.c — `projmt <command> [options]`: dispatches to the subcommands.
 */
#include <stdio.h>
#include <string.h>

#include "cli/commands.h"
#include "core/build_info.h"
#include "core/cpu_check.h"
#include "core/log.h"
#include "nn/gemm.h"

typedef struct {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
} command;

static const command commands[] = {
    {"prepare",   cmd_prepare,   "clean, split and tokenize a parallel corpus"},
    {"train",     cmd_train,     "train a Transformer (standard or projection SDPA)"},
    {"translate", cmd_translate, "translate English text with a checkpoint"},
    {"eval",      cmd_eval,      "score translations (BLEU, chrF) or a model's loss"},
    {"bench",     cmd_bench,     "measure training/decoding speed of both attention forms"},
    {"attention", cmd_attention, "dump a checkpoint's attention weights on one sentence"},
    {"serve",     cmd_serve,     "HTTP translation server (LibreTranslate API) with a web page"},
    {"export",    cmd_export,    "write an inference-only model file (fp32, bf16 or int8 weights)"},
    {"average",   cmd_average,   "average the weights of several checkpoints of one run"},
};
enum { N_COMMANDS = sizeof commands / sizeof commands[0] };

static void usage(FILE *out) {
    fprintf(out, "usage: projmt <command> [options]   (projmt <command> --help for its options)\n\ncommands:\n");
    for (int i = 0; i < N_COMMANDS; i++) fprintf(out, "  %-10s %s\n", commands[i].name, commands[i].summary);
}

int main(int argc, char **argv) {
    /* First: a build for newer CPUs must say so, not die of an illegal
     * instruction inside some kernel. */
    char cpu_err[400];
    if (pmt_cpu_check(cpu_err, sizeof cpu_err) != 0) {
        fprintf(stderr, "projmt: %s\n", cpu_err);
        return 1;
    }
    pmt_log_set(pmt_log_to_stderr, NULL);   /* the library's warnings: the program's stderr */
    if (argc < 2) { usage(stderr); return 2; }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) { usage(stdout); return 0; }
    if (!strcmp(argv[1], "--version")) {
        /* The CPU as every feature check sees it (ONEDNN_MAX_CPU_ISA caps it). */
        printf("projmt %s (commit %s)\nCPU: %s (oneDNN %s's effective ISA); bf16 dot products: %s\n%s\n"
               "built for: -march=%s\n",
               pmt_build_version, pmt_build_commit, pmt_cpu_isa_name(), pmt_onednn_version(),
               pmt_cpu_has_bf16() ? "yes" : "no", pmt_int8_path_name(), pmt_cpu_built_march);
        return 0;
    }
    for (int i = 0; i < N_COMMANDS; i++)
        if (!strcmp(argv[1], commands[i].name)) return commands[i].run(argc - 1, argv + 1);
    fprintf(stderr, "projmt: unknown command '%s'\n\n", argv[1]);
    usage(stderr);
    return 2;
}

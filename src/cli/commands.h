/*
 * commands.h — the subcommands of the `projmt` program. Each is a thin main
 * over the library: parse options into a pmt_config, call the library, map
 * failures to a message and a non-zero exit. argv[0] is the subcommand name.
 */
#ifndef PROJMT_COMMANDS_H
#define PROJMT_COMMANDS_H

#include <stdio.h>

#include "core/config.h"

int cmd_prepare(int argc, char **argv);
int cmd_train(int argc, char **argv);
int cmd_translate(int argc, char **argv);
int cmd_eval(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_attention(int argc, char **argv);
int cmd_serve(int argc, char **argv);
int cmd_export(int argc, char **argv);
int cmd_average(int argc, char **argv);

/* cmd_parse_args returns this when the command goes on. */
enum { CMD_CONTINUE = -1 };

/* The start of every command: config defaults, then argv parsed into cfg
 * and the command's extra options (pmt_config_parse_args; extra may be
 * NULL). Prints usage(stdout) for --help; sets *dump for --dump-config,
 * which the command prints once its own options are applied. Returns
 * CMD_CONTINUE, or the exit status: 0 after --help, 2 after printing a
 * parse error as "projmt <name>: ...". */
int cmd_parse_args(const char *name, int argc, char **argv, const char *const *extra, const char **extra_val,
                   void (*usage)(FILE *), pmt_config *cfg, int *dump);

/* With PROJMT_VERBOSE set (and not "0"), says once per process on stderr
 * what the decoder of m multiplies with on this CPU ("projmt <name>:
 * compute type int8 on avx2 (...)"), as CT2_VERBOSE does for CTranslate2. */
struct pmt_model;
void cmd_note_compute(const char *name, const struct pmt_model *m);
/* With PROJMT_VERBOSE, at the end: how many int8 products fell back to the
 * one-call GEMM (nothing when none did). */
void cmd_note_fallbacks(const char *name);

#endif

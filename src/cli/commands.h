/*
 * commands.h — the subcommands of the `projmt` program. Each is a thin main
 * over the library: parse options into a pmt_config, call the library, map
 * failures to a message and a non-zero exit. argv[0] is the subcommand name.
 */
#ifndef PROJMT_COMMANDS_H
#define PROJMT_COMMANDS_H

int cmd_prepare(int argc, char **argv);
int cmd_train(int argc, char **argv);
int cmd_translate(int argc, char **argv);
int cmd_eval(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_attention(int argc, char **argv);

#endif

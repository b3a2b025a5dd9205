/* cmd_train.c — `projmt train` (placeholder until its issue lands). */
#include <stdio.h>
#include "commands.h"

int cmd_train(int argc, char **argv) {
    (void)argc; (void)argv;
    fprintf(stderr, "projmt train: not built yet\n");
    return 2;
}

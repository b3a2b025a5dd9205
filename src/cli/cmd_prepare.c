/* cmd_prepare.c — `projmt prepare` (placeholder until its issue lands). */
#include <stdio.h>
#include "commands.h"

int cmd_prepare(int argc, char **argv) {
    (void)argc; (void)argv;
    fprintf(stderr, "projmt prepare: not built yet\n");
    return 2;
}

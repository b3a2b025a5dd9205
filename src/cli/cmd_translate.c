/* cmd_translate.c — `projmt translate` (placeholder until its issue lands). */
#include <stdio.h>
#include "commands.h"

int cmd_translate(int argc, char **argv) {
    (void)argc; (void)argv;
    fprintf(stderr, "projmt translate: not built yet\n");
    return 2;
}

/* cmd_bench.c — `projmt bench` (placeholder until its issue lands). */
#include <stdio.h>
#include "commands.h"

int cmd_bench(int argc, char **argv) {
    (void)argc; (void)argv;
    fprintf(stderr, "projmt bench: not built yet\n");
    return 2;
}

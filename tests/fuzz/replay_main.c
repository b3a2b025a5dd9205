/*
 * replay_main.c — runs a fuzz target over files instead of under libFuzzer,
 * so the ordinary (gcc, and gcc + ASan/UBSan) builds replay the committed
 * seeds and every regression in ctest without clang.
 *
 * usage: replay_<target> PATH...   each PATH is a file or a folder of files
 * (read in name order; a missing folder counts as empty). Exit 0 when every
 * input ran (a crash aborts the process, which ctest reports), 1 when no
 * input was found at all (a replay that checks nothing must not pass).
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz_common.h"

static int run_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "replay: cannot open %s\n", path);
        exit(1);
    }
    size_t cap = 4096, n = 0, got;
    uint8_t *buf = malloc(cap);
    while (buf && (got = fread(buf + n, 1, cap - n, f)) > 0) {
        n += got;
        if (n == cap) buf = realloc(buf, cap *= 2);
    }
    fclose(f);
    if (!buf) {
        fprintf(stderr, "replay: out of memory reading %s\n", path);
        exit(1);
    }
    /* An exact-size copy, so ASan sees reads past the end as libFuzzer would. */
    uint8_t *exact = malloc(n ? n : 1);
    memcpy(exact, buf, n);
    free(buf);
    LLVMFuzzerTestOneInput(exact, n);
    free(exact);
    return 1;
}

static int by_name(const struct dirent **a, const struct dirent **b) { return strcmp((*a)->d_name, (*b)->d_name); }

int main(int argc, char **argv) {
    LLVMFuzzerInitialize(&argc, &argv);
    long count = 0;
    for (int i = 1; i < argc; i++) {
        struct stat st;
        if (stat(argv[i], &st) != 0) continue;   /* no regressions yet */
        if (!S_ISDIR(st.st_mode)) {
            count += run_file(argv[i]);
            continue;
        }
        struct dirent **names;
        int n = scandir(argv[i], &names, NULL, by_name);
        for (int k = 0; k < n; k++) {
            char path[4096];
            snprintf(path, sizeof path, "%s/%s", argv[i], names[k]->d_name);
            if (names[k]->d_name[0] != '.' && stat(path, &st) == 0 && S_ISREG(st.st_mode)) {
                printf("replay: %s\n", path);
                fflush(stdout);
                count += run_file(path);
            }
            free(names[k]);
        }
        free(names);
    }
    printf("replayed %ld inputs\n", count);
    return count > 0 ? 0 : 1;
}

/*
 * path.c — see path.h.
 */
#include "core/path.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "core/config.h"
#include "core/fileio.h"

static int is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }

int pmt_path_check(const char *what, const char *path, int allow_empty, char *err, size_t errlen) {
    if (!path || !path[0]) {
        if (allow_empty && path) return 0;
        snprintf(err, errlen, "%s is empty: give a file or folder name", what);
        return -1;
    }
    size_t n = strlen(path);
    if (n >= PMT_PATH_MAX) {
        snprintf(err, errlen, "%s is too long (%zu bytes; at most %d)", what, n, PMT_PATH_MAX - 1);
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)path[i];
        if (c < 0x20 || c == 0x7f) {
            snprintf(err, errlen, "%s '%.200s' contains a control character (byte 0x%02x at %zu; a stray newline "
                     "or tab?)", what, path, c, i);
            return -1;
        }
    }
    if (is_space(path[0]) || is_space(path[n - 1])) {
        snprintf(err, errlen, "%s '%.200s' starts or ends with a space; remove it (or check the quoting)", what,
                 path);
        return -1;
    }
    return 0;
}

int pmt_path_make_dirs(const char *what, const char *path, char *err, size_t errlen) {
    if (pmt_path_check(what, path, 0, err, errlen) != 0) return -1;
    char failed[PMT_PATH_MAX];
    if (pmt_make_dirs(path, failed, sizeof failed) == 0) return 0;
    if (errno == EEXIST)
        snprintf(err, errlen, "%s '%s' exists and is not a folder; choose another name", what, path);
    else
        snprintf(err, errlen, "%s: cannot create folder '%s': %s", what, failed, strerror(errno));
    return -1;
}

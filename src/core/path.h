/*
 * path.h — checks on the file and folder names users give, and mkdir -p.
 *
 * Why: a name arrives from a flag, a config file or a script variable, and
 * an empty one ("--save-dir \"$DIR\"" with DIR unset), one with a stray
 * newline or tab (a config line pasted with its terminator), or one that
 * starts or ends with a space is almost never meant. Each is refused with a
 * message naming the setting, before any work is done, instead of creating
 * odd files or reading before a buffer.
 *
 * Ownership: nothing is allocated or retained.
 */
#ifndef PROJMT_PATH_H
#define PROJMT_PATH_H

#include <stddef.h>

/* 0 when path is a usable name for the setting `what` (e.g. "--save-dir"):
 * not empty (unless allow_empty, for optional settings where "" means
 * unset), shorter than PMT_PATH_MAX, no control characters, no leading or
 * trailing whitespace. Else -1 with a message naming what and path. */
int pmt_path_check(const char *what, const char *path, int allow_empty, char *err, size_t errlen);

/* mkdir -p (core/fileio.h) after pmt_path_check: 0 when path then is a
 * folder; -1 with a message naming what and the part that failed. */
int pmt_path_make_dirs(const char *what, const char *path, char *err, size_t errlen);

#endif

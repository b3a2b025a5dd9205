/*
 * test_fileio.c — the one atomic-write helper and mkdir -p (core/fileio.h):
 * a commit replaces the file and leaves no temporary; a write that cannot
 * complete leaves the old file as it was; discard removes the temporary;
 * close + rename publish later (prepare's way); mkdir -p makes nested
 * directories and names the one it could not make.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/fileio.h"
#include "testutil.h"

static char *slurp(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    static char buf[4096];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    return buf;
}

static int exists(const char *path) { return access(path, F_OK) == 0; }

static void test_write_and_replace(const char *dir) {
    char path[1024], tmp[1100], err[512] = "";
    snprintf(path, sizeof path, "%s/a.txt", dir);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    CHECK_MSG(pmt_atomic_write(path, "first\n", 6, err, sizeof err) == 0, "%s", err);
    CHECK(slurp(path) && strcmp(slurp(path), "first\n") == 0);
    CHECK(!exists(tmp));
    pmt_atomic_file af;
    CHECK(pmt_atomic_open(&af, path, err, sizeof err) == 0);
    CHECK(strcmp(af.tmp, tmp) == 0 && exists(tmp));
    fputs("second\n", af.f);
    CHECK(strcmp(slurp(path), "first\n") == 0);   /* not visible before the commit */
    CHECK_MSG(pmt_atomic_commit(&af, err, sizeof err) == 0, "%s", err);
    CHECK(strcmp(slurp(path), "second\n") == 0);
    CHECK(!exists(tmp) && af.f == NULL);
}

static void test_discard_and_failure(const char *dir) {
    char path[1024], tmp[1100], err[512] = "";
    snprintf(path, sizeof path, "%s/keep.txt", dir);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    CHECK(pmt_atomic_write(path, "old", 3, err, sizeof err) == 0);
    pmt_atomic_file af;
    CHECK(pmt_atomic_open(&af, path, err, sizeof err) == 0);
    fputs("half-written", af.f);
    pmt_atomic_discard(&af);
    CHECK(!exists(tmp) && strcmp(slurp(path), "old") == 0);

    CHECK(mkdir(tmp, 0755) == 0);   /* the temporary cannot be created */
    CHECK(pmt_atomic_write(path, "new", 3, err, sizeof err) == -1);
    CHECK_MSG(strstr(err, "keep.txt.tmp") != NULL, "message: %s", err);
    CHECK(strcmp(slurp(path), "old") == 0);
    CHECK(rmdir(tmp) == 0);

    snprintf(path, sizeof path, "%s/no/such/dir/x.txt", dir);
    CHECK(pmt_atomic_write(path, "x", 1, err, sizeof err) == -1);
    CHECK_MSG(strstr(err, "x.txt.tmp") != NULL, "message: %s", err);

    /* A rename onto a directory fails: the temporary goes, the target stays. */
    snprintf(path, sizeof path, "%s/is-a-dir", dir);
    CHECK(mkdir(path, 0755) == 0);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    CHECK(pmt_atomic_write(path, "x", 1, err, sizeof err) == -1);
    CHECK_MSG(strstr(err, "rename") != NULL, "message: %s", err);
    CHECK(!exists(tmp));
    struct stat st;
    CHECK(stat(path, &st) == 0 && S_ISDIR(st.st_mode));
}

/* prepare's way: several temporaries closed (synced) first, renamed later. */
static void test_close_then_rename(const char *dir) {
    char path[1024], given[1100], err[512] = "";
    pmt_atomic_file a, b;
    snprintf(path, sizeof path, "%s/one", dir);
    CHECK(pmt_atomic_open(&a, path, err, sizeof err) == 0);
    fputs("1", a.f);
    CHECK(pmt_atomic_close(&a, err, sizeof err) == 0);
    CHECK(!exists(path) && exists(a.tmp));
    snprintf(path, sizeof path, "%s/two", dir);
    snprintf(given, sizeof given, "%s/two.staged", dir);
    CHECK(pmt_atomic_name(&b, path, given, err, sizeof err) == 0);
    CHECK(strcmp(b.tmp, given) == 0 && b.f == NULL);
    CHECK(test_write_file(given, "2") == 0);
    CHECK(pmt_atomic_rename(&a, err, sizeof err) == 0 && pmt_atomic_rename(&b, err, sizeof err) == 0);
    CHECK(strcmp(slurp(a.path), "1") == 0 && strcmp(slurp(path), "2") == 0);
    CHECK(!exists(a.tmp) && !exists(given));

    char *long_path = malloc(PMT_ATOMIC_PATH_MAX + 16);
    memset(long_path, 'x', PMT_ATOMIC_PATH_MAX + 15);
    long_path[PMT_ATOMIC_PATH_MAX + 15] = '\0';
    CHECK(pmt_atomic_open(&a, long_path, err, sizeof err) == -1);
    CHECK_MSG(strstr(err, "too long") != NULL, "message: %s", err);
    free(long_path);
}

static void test_make_dirs(const char *dir) {
    char path[1024], failed[1024];
    snprintf(path, sizeof path, "%s/x/y/z", dir);
    CHECK(pmt_make_dirs(path, failed, sizeof failed) == 0);
    struct stat st;
    CHECK(stat(path, &st) == 0 && S_ISDIR(st.st_mode));
    CHECK(pmt_make_dirs(path, failed, sizeof failed) == 0);   /* already there */
    snprintf(path, sizeof path, "%s/x/y/z/", dir);
    CHECK(pmt_make_dirs(path, failed, sizeof failed) == 0);   /* trailing slash */

    snprintf(path, sizeof path, "%s/a-file", dir);
    CHECK(test_write_file(path, "not a directory") == 0);
    CHECK(pmt_make_dirs(path, failed, sizeof failed) == -1);
    CHECK(errno == EEXIST && strcmp(failed, path) == 0);
    char below[1100];
    snprintf(below, sizeof below, "%s/sub/deeper", path);
    CHECK(pmt_make_dirs(below, failed, sizeof failed) == -1);
    CHECK_MSG(errno == ENOTDIR && strstr(failed, "a-file/sub") != NULL, "errno %d, failed '%s'", errno, failed);
}

int main(void) {
    const char *dir = test_tmpdir("fileio");
    test_write_and_replace(dir);
    test_discard_and_failure(dir);
    test_close_then_rename(dir);
    test_make_dirs(dir);
    return test_finish();
}

/*
 * fileio.c — see fileio.h. The directory fsync is what makes a rename
 * durable: without it a power cut can bring back the old directory entry
 * (or none) although the new file's data was synced.
 */
#include "core/fileio.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int pmt_atomic_name(pmt_atomic_file *af, const char *path, const char *tmp, char *err, size_t errlen) {
    memset(af, 0, sizeof *af);
    if (strlen(path) >= sizeof af->path || (tmp && strlen(tmp) >= sizeof af->tmp)) {
        snprintf(err, errlen, "path too long (over %d bytes): '%s'", PMT_ATOMIC_PATH_MAX - 1,
                 tmp && strlen(tmp) >= sizeof af->tmp ? tmp : path);
        return -1;
    }
    snprintf(af->path, sizeof af->path, "%s", path);
    if (tmp) snprintf(af->tmp, sizeof af->tmp, "%s", tmp);
    else snprintf(af->tmp, sizeof af->tmp, "%s.tmp", path);
    return 0;
}

int pmt_atomic_open(pmt_atomic_file *af, const char *path, char *err, size_t errlen) {
    if (pmt_atomic_name(af, path, NULL, err, errlen) != 0) return -1;
    af->f = fopen(af->tmp, "wb");
    if (!af->f) {
        snprintf(err, errlen, "cannot create '%s': %s", af->tmp, strerror(errno));
        return -1;
    }
    return 0;
}

int pmt_atomic_close(pmt_atomic_file *af, char *err, size_t errlen) {
    if (!af->f) return 0;
    int ok = !ferror(af->f) && fflush(af->f) == 0 && fsync(fileno(af->f)) == 0;
    int saved = errno;
    if (fclose(af->f) != 0 && ok) { ok = 0; saved = errno; }
    af->f = NULL;
    if (!ok) snprintf(err, errlen, "cannot write '%s': %s (disk full?)", af->tmp, saved ? strerror(saved) : "I/O error");
    return ok ? 0 : -1;
}

/* fsync of the directory holding path, so that a rename into it is durable.
 * EINVAL: the file system cannot sync directories, nothing more to do. */
static int sync_parent_dir(const char *path) {
    char dir[PMT_ATOMIC_PATH_MAX];
    const char *slash = strrchr(path, '/');
    if (!slash) snprintf(dir, sizeof dir, ".");
    else if (slash == path) snprintf(dir, sizeof dir, "/");
    else snprintf(dir, sizeof dir, "%.*s", (int)(slash - path), path);
    int fd = open(dir, O_RDONLY | O_DIRECTORY);
    if (fd < 0) return -1;
    int rc = fsync(fd) == 0 || errno == EINVAL ? 0 : -1;
    int saved = errno;
    close(fd);
    errno = saved;
    return rc;
}

int pmt_atomic_rename(pmt_atomic_file *af, char *err, size_t errlen) {
    if (rename(af->tmp, af->path) != 0) {
        snprintf(err, errlen, "cannot rename '%s' to '%s': %s", af->tmp, af->path, strerror(errno));
        return -1;
    }
    if (sync_parent_dir(af->path) != 0) {
        snprintf(err, errlen, "cannot sync the directory of '%s': %s", af->path, strerror(errno));
        return -1;
    }
    return 0;
}

int pmt_atomic_commit(pmt_atomic_file *af, char *err, size_t errlen) {
    if (pmt_atomic_close(af, err, errlen) != 0 || pmt_atomic_rename(af, err, errlen) != 0) {
        pmt_atomic_discard(af);
        return -1;
    }
    return 0;
}

void pmt_atomic_discard(pmt_atomic_file *af) {
    if (af->f) fclose(af->f);
    af->f = NULL;
    if (af->tmp[0]) unlink(af->tmp);
}

int pmt_atomic_write(const char *path, const void *data, size_t n, char *err, size_t errlen) {
    pmt_atomic_file af;
    if (pmt_atomic_open(&af, path, err, errlen) != 0) return -1;
    if (n > 0 && fwrite(data, 1, n, af.f) != n) {
        snprintf(err, errlen, "cannot write '%s': %s (disk full?)", af.tmp, strerror(errno));
        pmt_atomic_discard(&af);
        return -1;
    }
    return pmt_atomic_commit(&af, err, errlen);
}

int pmt_make_dirs(const char *path, char *failed, size_t failed_len) {
    char buf[PMT_ATOMIC_PATH_MAX];
    if (strlen(path) >= sizeof buf) {
        snprintf(failed, failed_len, "%s", path);
        errno = ENAMETOOLONG;
        return -1;
    }
    snprintf(buf, sizeof buf, "%s", path);
    for (char *p = buf + 1; buf[0]; p++) {
        if (*p != '/' && *p != '\0') continue;
        char c = *p;
        *p = '\0';
        if (mkdir(buf, 0777) != 0 && errno != EEXIST) {
            snprintf(failed, failed_len, "%s", buf);
            return -1;
        }
        *p = c;
        if (c == '\0') break;
    }
    struct stat st;
    int found = stat(path, &st) == 0;
    if (!found || !S_ISDIR(st.st_mode)) {
        if (found) errno = EEXIST;   /* the name exists but is no directory */
        snprintf(failed, failed_len, "%s", path);
        return -1;
    }
    return 0;
}

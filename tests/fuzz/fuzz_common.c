/*
 * fuzz_common.c — see fuzz_common.h. Compiled into every fuzz target and
 * replay program.
 */
#include "fuzz_common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "model/checkpoint.h"

const char *fuzz_scratch_path(const char *suffix) {
    static char path[256];
    struct stat st;
    const char *dir = stat("/dev/shm", &st) == 0 && S_ISDIR(st.st_mode) ? "/dev/shm" : "/tmp";
    snprintf(path, sizeof path, "%s/projmt-fuzz-%ld%s", dir, (long)getpid(), suffix);
    return path;
}

void fuzz_write_file(const char *path, const void *data, size_t size) {
    FILE *f = fopen(path, "wb");
    if (!f || (size && fwrite(data, 1, size, f) != size) || fclose(f) != 0) {
        fprintf(stderr, "fuzz harness: cannot write %s\n", path);
        abort();
    }
}

void fuzz_write_framed(const char *path, const uint8_t *data, size_t size) {
    if (size == 0) {
        fuzz_write_file(path, data, 0);
        return;
    }
    int frame = data[0] % 3;
    data++;
    size--;
    if (frame == FUZZ_FRAME_RAW) {
        fuzz_write_file(path, data, size);
        return;
    }
    unsigned char *body = malloc(size ? size : 1);
    if (!body) abort();
    memcpy(body, data, size);
    if (frame == FUZZ_FRAME_GZIP_CRC && size >= 4) {
        uint32_t crc = (uint32_t)crc32(crc32(0L, Z_NULL, 0), body, (uInt)(size - 4));
        memcpy(body + size - 4, &crc, 4);
    }
    gzFile gz = gzopen(path, "wb1");
    if (!gz || (size && gzwrite(gz, body, (unsigned)size) != (int)size) || gzclose(gz) != Z_OK) {
        fprintf(stderr, "fuzz harness: cannot write %s\n", path);
        abort();
    }
    free(body);
}

void fuzz_build_model(const struct pmt_checkpoint *ck) {
    pmt_model m;
    char err[512];
    if (pmt_model_init_inference(&m, &ck->cfg, ck->vocab_size, 8, ck->cfg.max_len, err, sizeof err) != 0) return;
    if (pmt_checkpoint_copy_params(ck, &m, err, sizeof err) != 0) {
        fprintf(stderr, "fuzz: a loaded file's model does not take its parameters: %s\n", err);
        abort();
    }
    pmt_model_free(&m);
}

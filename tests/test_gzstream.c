/*
 * test_gzstream.c — the checksummed gzip stream shared by checkpoints and
 * token files (core/gzstream.h): a round trip reads back what was written
 * and matches the stored checksum; a changed payload fails the checksum;
 * bytes after the checksum and a cut-short file are reported;
 * pmt_gzstream_save writes a file the reader accepts, and when its body
 * fails it reports the file and leaves the old one as it was; level 0
 * (checkpoints) stores the payload uncompressed and reads back; pmt_gzsink
 * round-trips its fields and writes nothing once it has failed.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <zlib.h>

#include "core/fileio.h"
#include "core/gzstream.h"
#include "testutil.h"

enum { N = 100000 };

/* Writes N ints (value i*7) plus the checksum, then the bytes of extra
 * inside the stream when it is not NULL. */
static void write_file(const char *path, const char *extra) {
    char err[512];
    pmt_atomic_file af;
    CHECK_MSG(pmt_atomic_open(&af, path, err, sizeof err) == 0, "%s", err);
    pmt_gzstream s;
    CHECK(pmt_gzstream_open_write(&s, af.f, 6) == 0);
    int32_t *v = malloc(N * sizeof *v);
    for (int i = 0; i < N; i++) v[i] = i * 7;
    CHECK(pmt_gzstream_write(&s, v, N * sizeof *v) == 0);
    CHECK(pmt_gzstream_write_crc(&s) == 0);
    if (extra) CHECK(pmt_gzstream_write(&s, extra, strlen(extra)) == 0);
    CHECK(pmt_gzstream_close(&s) == 0);
    CHECK_MSG(pmt_atomic_commit(&af, err, sizeof err) == 0, "%s", err);
    free(v);
}

/* pmt_gzstream_save bodies: the N ints, or a failure after half of them. */
static int body_ints(pmt_gzstream *s, void *user) {
    (void)user;
    int32_t *v = malloc(N * sizeof *v);
    CHECK(v != NULL);
    for (int i = 0; i < N; i++) v[i] = i * 7;
    int rc = pmt_gzstream_write(s, v, N * sizeof *v);
    free(v);
    return rc;
}
static int body_fails(pmt_gzstream *s, void *user) {
    (void)user;
    static int32_t half[N / 2];
    CHECK(pmt_gzstream_write(s, half, sizeof half) == 0);
    return -1;   /* gives up halfway, as a writer whose field cannot be produced */
}

/* Reads the file back: 0 all good, else which check failed. */
static int read_file(const char *path, char *reason, size_t reason_len) {
    pmt_gzstream s;
    reason[0] = '\0';
    if (pmt_gzstream_open_read(&s, path) != 0) return 1;
    int32_t *v = malloc(N * sizeof *v);
    int rc = 0;
    if (pmt_gzstream_read(&s, v, N * sizeof *v) != 0) { rc = 2; snprintf(reason, reason_len, "%s", pmt_gzstream_reason(&s)); }
    else if (pmt_gzstream_check_crc(&s) != 0) rc = 3;
    else if (pmt_gzstream_at_end(&s) != 1) rc = 4;
    for (int i = 0; rc == 0 && i < N; i++)
        if (v[i] != i * 7) rc = 5;
    pmt_gzstream_close(&s);
    free(v);
    return rc;
}

int main(void) {
    const char *dir = test_tmpdir("gzstream");
    char path[1024];
    char reason[256];
    snprintf(path, sizeof path, "%s/good.gz", dir);
    write_file(path, NULL);
    CHECK(read_file(path, reason, sizeof reason) == 0);

    snprintf(path, sizeof path, "%s/trailing.gz", dir);
    write_file(path, "more");
    CHECK(read_file(path, reason, sizeof reason) == 4);

    /* A stream whose stored checksum is not that of its payload. */
    snprintf(path, sizeof path, "%s/mismatch.gz", dir);
    gzFile gz = gzopen(path, "wb");
    int32_t *v = malloc(N * sizeof *v);
    for (int i = 0; i < N; i++) v[i] = i * 7;
    uint32_t wrong = (uint32_t)crc32(crc32(0L, Z_NULL, 0), (const unsigned char *)v, 100);
    CHECK(gzwrite(gz, v, N * sizeof *v) == (int)(N * sizeof *v) && gzwrite(gz, &wrong, 4) == 4);
    CHECK(gzclose(gz) == Z_OK);
    CHECK(read_file(path, reason, sizeof reason) == 3);

    /* Cut short: half of the compressed bytes. */
    char good[1024];
    snprintf(good, sizeof good, "%s/good.gz", dir);
    FILE *f = fopen(good, "rb");
    static unsigned char bytes[1 << 20];
    size_t n = fread(bytes, 1, sizeof bytes, f);
    fclose(f);
    snprintf(path, sizeof path, "%s/short.gz", dir);
    f = fopen(path, "wb");
    CHECK(fwrite(bytes, 1, n / 2, f) == n / 2);
    fclose(f);
    CHECK(read_file(path, reason, sizeof reason) == 2);
    CHECK_MSG(strlen(reason) > 0, "no reason for a short read");
    printf("short read reason: %s\n", reason);

    /* pmt_gzstream_save: the reader accepts what it writes (checksum
     * appended, nothing after it); a failing body leaves the old file. */
    char err[1024];
    snprintf(path, sizeof path, "%s/saved.gz", dir);
    CHECK_MSG(pmt_gzstream_save(path, 6, "test file", body_ints, NULL, err, sizeof err) == 0, "%s", err);
    CHECK(read_file(path, reason, sizeof reason) == 0);
    err[0] = '\0';
    CHECK(pmt_gzstream_save(path, 6, "test file", body_fails, NULL, err, sizeof err) == -1);
    CHECK_MSG(strstr(err, "writing test file '") && strstr(err, "saved.gz.tmp"), "message: %s", err);
    CHECK(read_file(path, reason, sizeof reason) == 0);
    snprintf(path, sizeof path, "%s/no/such/dir/x.gz", dir);
    CHECK(pmt_gzstream_save(path, 6, "test file", body_ints, NULL, err, sizeof err) == -1);
    CHECK_MSG(strstr(err, "test file: ") && strstr(err, "x.gz"), "message: %s", err);
    /* Level 0, as checkpoints are written: stored blocks, so the file is at
     * least as large as its payload (level 1 would compress these ints to a
     * fraction), and it reads back and checks as any other level does. */
    struct stat st;
    snprintf(path, sizeof path, "%s/stored.gz", dir);
    CHECK_MSG(pmt_gzstream_save(path, 0, "test file", body_ints, NULL, err, sizeof err) == 0, "%s", err);
    CHECK(read_file(path, reason, sizeof reason) == 0);
    CHECK(stat(path, &st) == 0);
    CHECK_MSG(st.st_size >= (off_t)(N * sizeof(int32_t)), "level 0 wrote %lld bytes for %zu", (long long)st.st_size,
              N * sizeof(int32_t));
    snprintf(path, sizeof path, "%s/level1.gz", dir);
    CHECK_MSG(pmt_gzstream_save(path, 1, "test file", body_ints, NULL, err, sizeof err) == 0, "%s", err);
    CHECK(read_file(path, reason, sizeof reason) == 0);
    CHECK(stat(path, &st) == 0);
    CHECK_MSG(st.st_size < (off_t)(N * sizeof(int32_t)) / 2, "level 1 wrote %lld bytes", (long long)st.st_size);
    /* pmt_gzsink: the fields round-trip; after a failure it writes nothing
     * more (the stream's checksum stays where it was). */
    snprintf(path, sizeof path, "%s/sink.gz", dir);
    pmt_atomic_file af;
    CHECK_MSG(pmt_atomic_open(&af, path, err, sizeof err) == 0, "%s", err);
    pmt_gzstream gs;
    CHECK(pmt_gzstream_open_write(&gs, af.f, 6) == 0);
    pmt_gzsink sink = {&gs, 0};
    pmt_gzsink_u32(&sink, 0xdeadbeefu);
    pmt_gzsink_i32(&sink, -7);
    pmt_gzsink_u64(&sink, 1ull << 40);
    pmt_gzsink_i64(&sink, -(1ll << 40));
    pmt_gzsink_put(&sink, "abc", 3);
    CHECK(sink.failed == 0);
    const uLong crc_before = gs.crc;
    sink.failed = 1;
    pmt_gzsink_u32(&sink, 1);
    pmt_gzsink_put(&sink, "more", 4);
    CHECK_MSG(gs.crc == crc_before, "a failed sink still wrote");
    CHECK(pmt_gzstream_write_crc(&gs) == 0 && pmt_gzstream_close(&gs) == 0);
    CHECK_MSG(pmt_atomic_commit(&af, err, sizeof err) == 0, "%s", err);
    pmt_gzstream rs;
    uint32_t u32 = 0;
    int32_t i32 = 0;
    uint64_t u64 = 0;
    int64_t i64 = 0;
    char abc[3] = {0};
    CHECK(pmt_gzstream_open_read(&rs, path) == 0);
    CHECK(pmt_gzstream_read(&rs, &u32, 4) == 0 && pmt_gzstream_read(&rs, &i32, 4) == 0 &&
          pmt_gzstream_read(&rs, &u64, 8) == 0 && pmt_gzstream_read(&rs, &i64, 8) == 0 &&
          pmt_gzstream_read(&rs, abc, 3) == 0);
    CHECK(u32 == 0xdeadbeefu && i32 == -7 && u64 == 1ull << 40 && i64 == -(1ll << 40) && memcmp(abc, "abc", 3) == 0);
    CHECK(pmt_gzstream_check_crc(&rs) == 0 && pmt_gzstream_at_end(&rs) == 1);
    pmt_gzstream_close(&rs);
    free(v);
    return test_finish();
}

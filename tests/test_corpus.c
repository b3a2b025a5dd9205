/*
 * test_corpus.c — the .tok file format of corpus.h: save/load round trip
 * (including an empty split), and every kind of damage (missing, truncated,
 * a flipped compressed byte, a flipped payload byte caught only by the crc,
 * wrong magic, wrong version, inconsistent offsets, plain text) must give a
 * message naming the file instead of a crash or wrong ids.
 *
 * The damaged payloads are built by this test's own writer of the layout in
 * corpus.h, so the test also pins the documented format.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "data/corpus.h"
#include "testutil.h"

static char dir[1024];

/* A small corpus with varied lengths, including an empty sentence. */
static void make_corpus(pmt_corpus *c, int n_pairs) {
    c->n_pairs = n_pairs;
    c->src_off = malloc((size_t)(n_pairs + 1) * sizeof(uint64_t));
    c->tgt_off = malloc((size_t)(n_pairs + 1) * sizeof(uint64_t));
    c->src_off[0] = c->tgt_off[0] = 0;
    for (int i = 0; i < n_pairs; i++) {
        c->src_off[i + 1] = c->src_off[i] + (uint64_t)(i % 5);
        c->tgt_off[i + 1] = c->tgt_off[i] + (uint64_t)(1 + i % 7);
    }
    c->src_ids = malloc((c->src_off[n_pairs] + 1) * sizeof(int32_t));
    c->tgt_ids = malloc((c->tgt_off[n_pairs] + 1) * sizeof(int32_t));
    for (uint64_t i = 0; i < c->src_off[n_pairs]; i++) c->src_ids[i] = (int32_t)(4 + i * 37 % 7996);
    for (uint64_t i = 0; i < c->tgt_off[n_pairs]; i++) c->tgt_ids[i] = (int32_t)(4 + i * 53 % 7996);
}

static int corpora_equal(const pmt_corpus *a, const pmt_corpus *b) {
    if (a->n_pairs != b->n_pairs) return 0;
    size_t n_off = (size_t)a->n_pairs + 1;
    if (memcmp(a->src_off, b->src_off, n_off * 8) || memcmp(a->tgt_off, b->tgt_off, n_off * 8)) return 0;
    return !memcmp(a->src_ids, b->src_ids, a->src_off[a->n_pairs] * 4) &&
           !memcmp(a->tgt_ids, b->tgt_ids, a->tgt_off[a->n_pairs] * 4);
}

static const char *path_in_dir(const char *name) {
    static char path[2][1100];
    static int which = 0;
    which ^= 1;
    snprintf(path[which], sizeof path[which], "%s/%s", dir, name);
    return path[which];
}

/* Raw decompressed payload (the layout of corpus.h) of c; malloc'd. */
static unsigned char *payload_of(const pmt_corpus *c, size_t *size) {
    uint32_t version = 1, n = (uint32_t)c->n_pairs;
    uint64_t ns = c->src_off[n], nt = c->tgt_off[n];
    size_t total = 8 + 4 + 4 + 8 + 8 + 2 * (n + 1) * 8 + (ns + nt) * 4 + 4;
    unsigned char *p = malloc(total), *w = p;
#define PUT(src, len) do { memcpy(w, (src), (len)); w += (len); } while (0)
    PUT("PMTTOK\0\1", 8);
    PUT(&version, 4);
    PUT(&n, 4);
    PUT(&ns, 8);
    PUT(&nt, 8);
    PUT(c->src_off, (n + 1) * 8);
    PUT(c->tgt_off, (n + 1) * 8);
    PUT(c->src_ids, ns * 4);
    PUT(c->tgt_ids, nt * 4);
    uint32_t crc = (uint32_t)crc32(0, p, (uInt)(w - p));
    PUT(&crc, 4);
#undef PUT
    *size = total;
    return p;
}

static void write_gz(const char *path, const void *data, size_t size) {
    gzFile gz = gzopen(path, "wb");
    CHECK(gz != NULL);
    if (!gz) return;
    CHECK(gzwrite(gz, data, (unsigned)size) == (int)size);
    CHECK(gzclose(gz) == Z_OK);
}

static void write_raw(const char *path, const void *data, size_t size) {
    FILE *f = fopen(path, "wb");
    CHECK(f && fwrite(data, 1, size, f) == size);
    CHECK(f && fclose(f) == 0);
}

static unsigned char *read_raw(const char *path, size_t *size) {
    FILE *f = fopen(path, "rb");
    unsigned char *buf = malloc(1 << 20);
    *size = f ? fread(buf, 1, 1 << 20, f) : 0;
    CHECK(f && fclose(f) == 0);
    return buf;
}

/* Loading path must fail with a message containing the path and `expect`. */
static void expect_load_error(const char *path, const char *expect) {
    pmt_corpus c;
    char err[1024] = "";
    CHECK_MSG(pmt_corpus_load(&c, path, err, sizeof err) == -1, "loading %s should fail (%s)", path, expect);
    CHECK_MSG(strstr(err, path) != NULL && strstr(err, expect) != NULL, "message '%s' lacks '%s'", err, expect);
    CHECK(c.src_ids == NULL && c.src_off == NULL && c.n_pairs == 0);
}

static void test_round_trip(const pmt_corpus *orig) {
    char err[1024] = "";
    const char *path = path_in_dir("rt.tok");
    CHECK_MSG(pmt_corpus_save(orig, path, err, sizeof err) == 0, "%s", err);
    pmt_corpus back;
    CHECK_MSG(pmt_corpus_load(&back, path, err, sizeof err) == 0, "%s", err);
    CHECK(corpora_equal(orig, &back));
    CHECK(pmt_corpus_src_len(&back, 3) == 3 && pmt_corpus_tgt_len(&back, 3) == 4);
    pmt_corpus_free(&back);

    /* The file is exactly the documented payload, gzip-compressed. */
    size_t expected_size, got_size;
    unsigned char *expected = payload_of(orig, &expected_size);
    unsigned char *got = malloc(expected_size + 16);
    gzFile gz = gzopen(path, "rb");
    got_size = gz ? (size_t)gzread(gz, got, (unsigned)expected_size + 16) : 0;
    CHECK(gz && gzclose(gz) == Z_OK);
    CHECK(got_size == expected_size && memcmp(got, expected, expected_size) == 0);
    free(got);
    free(expected);
}

static void test_empty_corpus(void) {
    pmt_corpus empty, back;
    make_corpus(&empty, 0);
    char err[1024] = "";
    const char *path = path_in_dir("empty.tok");
    CHECK_MSG(pmt_corpus_save(&empty, path, err, sizeof err) == 0, "%s", err);
    CHECK_MSG(pmt_corpus_load(&back, path, err, sizeof err) == 0, "%s", err);
    CHECK(back.n_pairs == 0 && back.src_off[0] == 0 && back.tgt_off[0] == 0);
    pmt_corpus_free(&back);
    pmt_corpus_free(&empty);
}

static void test_damaged_files(const pmt_corpus *orig) {
    expect_load_error(path_in_dir("does-not-exist.tok"), "No such file");

    size_t size;
    unsigned char *good = read_raw(path_in_dir("rt.tok"), &size);
    write_raw(path_in_dir("truncated.tok"), good, size / 2);
    expect_load_error(path_in_dir("truncated.tok"), "corrupt");
    write_raw(path_in_dir("header-only.tok"), good, 12);
    expect_load_error(path_in_dir("header-only.tok"), "corrupt");

    good[size / 2] ^= 0x55;   /* inside the deflate stream */
    write_raw(path_in_dir("flipped.tok"), good, size);
    expect_load_error(path_in_dir("flipped.tok"), "corrupt");
    free(good);

    size_t psize;
    unsigned char *payload = payload_of(orig, &psize);
    payload[psize - 20] ^= 0x01;   /* a target id: only our crc32 notices */
    write_gz(path_in_dir("badcrc.tok"), payload, psize);
    expect_load_error(path_in_dir("badcrc.tok"), "checksum mismatch");
    payload[psize - 20] ^= 0x01;

    memcpy(payload, "NOTATOK!", 8);
    write_gz(path_in_dir("magic.tok"), payload, psize);
    expect_load_error(path_in_dir("magic.tok"), "bad magic");
    memcpy(payload, "PMTTOK\0\1", 8);

    payload[8] = 9;   /* version */
    write_gz(path_in_dir("version.tok"), payload, psize);
    expect_load_error(path_in_dir("version.tok"), "version 9");
    payload[8] = 1;

    payload[8 + 4 + 4 + 8 + 8 + 8] = 200;   /* src_off[1] beyond n_src_ids */
    write_gz(path_in_dir("offsets.tok"), payload, psize);
    expect_load_error(path_in_dir("offsets.tok"), "offset table");
    free(payload);

    uint32_t huge[8] = {0x54544d50, 0x01004b4f, 1, 1000000u, 0xffffffffu, 0xffffffffu, 5, 5};
    write_gz(path_in_dir("huge.tok"), huge, sizeof huge);
    expect_load_error(path_in_dir("huge.tok"), "exceed");

    write_raw(path_in_dir("text.tok"), "hello\tworld\n", 12);
    expect_load_error(path_in_dir("text.tok"), "bad magic");
}

int main(void) {
    snprintf(dir, sizeof dir, "%s", test_tmpdir("corpus"));
    pmt_corpus orig;
    make_corpus(&orig, 500);
    test_round_trip(&orig);
    test_empty_corpus();
    test_damaged_files(&orig);

    char err[1024] = "";
    CHECK(pmt_corpus_save(&orig, "/nonexistent-dir/x.tok", err, sizeof err) == -1);
    CHECK_MSG(strstr(err, "/nonexistent-dir/x.tok") != NULL, "message: %s", err);
    pmt_corpus_free(&orig);
    return test_finish();
}

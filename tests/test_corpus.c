/*
 * test_corpus.c — the .tok file formats of corpus.h: version 2 (mapped)
 * save/load round trip (including an empty split) and its exact layout;
 * version 1 (gzip, earlier builds) still loads; and every kind of damage
 * must give a message naming the file instead of a crash or wrong ids —
 * version 2: truncated (by one byte, by half, to less than a header), bytes
 * appended, a flipped header byte, another format version, inconsistent
 * offsets, a flipped id (found by pmt_corpus_verify), ids of another
 * vocabulary (refused by pmt_corpus_check_vocabulary); version 1: missing,
 * truncated, a flipped compressed byte, a flipped payload byte caught only
 * by the crc, wrong magic, wrong version, inconsistent offsets, plain text.
 *
 * The payloads are built by this test's own writers of the layouts in
 * corpus.h, so the test also pins the documented formats.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "data/corpus.h"
#include "testutil.h"

static char dir[1024];

/* A small corpus with varied lengths, including an empty sentence. */
static void make_corpus(pmt_corpus *c, int n_pairs) {
    memset(c, 0, sizeof *c);   /* not mapped: pmt_corpus_free frees the arrays */
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

/* Raw decompressed payload (the version-1 layout of corpus.h) of c; malloc'd. */
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

enum { TEST_VOCAB = 8000 };
static const uint32_t test_spm_checksum = 0x5eed1234u;

/* The version-2 file (the layout of corpus.h) of c; malloc'd. */
static unsigned char *file_v2_of(const pmt_corpus *c, size_t *size) {
    uint64_t n = (uint64_t)c->n_pairs, ns = c->src_off[n], nt = c->tgt_off[n];
    size_t total = 64 + 2 * (n + 1) * 8 + (ns + nt) * 4;
    unsigned char *p = calloc(1, total), *w = p + 64;
#define PUT(src, len) do { memcpy(w, (src), (len)); w += (len); } while (0)
    PUT(c->src_off, (n + 1) * 8);
    PUT(c->tgt_off, (n + 1) * 8);
    PUT(c->src_ids, ns * 4);
    PUT(c->tgt_ids, nt * 4);
    uint32_t version = 2, header_bytes = 64, vocab = TEST_VOCAB, spm = test_spm_checksum;
    uint32_t body = (uint32_t)crc32(0, p + 64, (uInt)(total - 64));
    w = p;
    PUT("PMTTOK\0\2", 8);
    PUT(&version, 4);
    PUT(&header_bytes, 4);
    PUT(&n, 8);
    PUT(&ns, 8);
    PUT(&nt, 8);
    PUT(&vocab, 4);
    PUT(&spm, 4);
    PUT(&body, 4);
    w += 8;   /* reserved */
    uint32_t header = (uint32_t)crc32(0, p, 60);
    PUT(&header, 4);
#undef PUT
    *size = total;
    return p;
}

/* Sets the header checksum of a version-2 file after a header edit. */
static void reseal_header(unsigned char *file) {
    uint32_t header = (uint32_t)crc32(0, file, 60);
    memcpy(file + 60, &header, 4);
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
    CHECK_MSG(pmt_corpus_save(orig, path, TEST_VOCAB, test_spm_checksum, err, sizeof err) == 0, "%s", err);
    pmt_corpus back;
    CHECK_MSG(pmt_corpus_load(&back, path, err, sizeof err) == 0, "%s", err);
    CHECK(corpora_equal(orig, &back));
    CHECK(pmt_corpus_src_len(&back, 3) == 3 && pmt_corpus_tgt_len(&back, 3) == 4);
    CHECK(back.map != NULL && back.vocab_size == TEST_VOCAB && back.spm_checksum == test_spm_checksum);
    CHECK_MSG(pmt_corpus_verify(&back, path, err, sizeof err) == 0, "%s", err);
    CHECK(pmt_corpus_check_vocabulary(&back, path, TEST_VOCAB, test_spm_checksum, err, sizeof err) == 0);

    /* The file is exactly the documented version-2 layout, and its
     * identity the crc32 of its body. */
    size_t expected_size, got_size;
    unsigned char *expected = file_v2_of(orig, &expected_size);
    unsigned char *got = read_raw(path, &got_size);
    CHECK(got_size == expected_size && memcmp(got, expected, expected_size) == 0);
    CHECK(back.checksum == (uint32_t)crc32(0, expected + 64, (uInt)(expected_size - 64)));
    pmt_corpus_free(&back);
    free(got);
    free(expected);

    /* A version-1 file of an earlier build loads into memory, the same ids. */
    size_t psize;
    unsigned char *payload = payload_of(orig, &psize);
    write_gz(path_in_dir("v1.tok"), payload, psize);
    CHECK_MSG(pmt_corpus_load(&back, path_in_dir("v1.tok"), err, sizeof err) == 0, "%s", err);
    CHECK(corpora_equal(orig, &back));
    CHECK(back.map == NULL && back.vocab_size == 0);
    uint32_t stored;
    memcpy(&stored, payload + psize - 4, 4);
    CHECK(back.checksum == stored);
    /* it names no vocabulary: passes the check (ids range-checked instead) */
    CHECK(pmt_corpus_check_vocabulary(&back, path_in_dir("v1.tok"), 123, 0, err, sizeof err) == 0);
    pmt_corpus_free(&back);
    free(payload);
}

static void test_empty_corpus(void) {
    pmt_corpus empty, back;
    make_corpus(&empty, 0);
    char err[1024] = "";
    const char *path = path_in_dir("empty.tok");
    CHECK_MSG(pmt_corpus_save(&empty, path, TEST_VOCAB, test_spm_checksum, err, sizeof err) == 0, "%s", err);
    CHECK_MSG(pmt_corpus_load(&back, path, err, sizeof err) == 0, "%s", err);
    CHECK(back.n_pairs == 0 && back.src_off[0] == 0 && back.tgt_off[0] == 0);
    pmt_corpus_free(&back);
    pmt_corpus_free(&empty);
}

/* Writes file[0..size) under name and expects loading it to fail with `expect`. */
static void expect_v2_error(const char *name, const unsigned char *file, size_t size, const char *expect) {
    write_raw(path_in_dir(name), file, size);
    expect_load_error(path_in_dir(name), expect);
}

static void test_damaged_v2(const pmt_corpus *orig) {
    size_t size;
    unsigned char *file = file_v2_of(orig, &size);
    expect_v2_error("cut-by-one.tok", file, size - 1, "truncated");
    expect_v2_error("cut-half.tok", file, size / 2, "truncated");
    expect_v2_error("cut-header.tok", file, 40, "truncated");
    unsigned char *longer = malloc(size + 1);
    memcpy(longer, file, size);
    longer[size] = 0;
    expect_v2_error("appended.tok", longer, size + 1, "after the");
    free(longer);

    file[30] ^= 0x01;   /* n_src_ids, header checksum left as it was */
    expect_v2_error("header-flip.tok", file, size, "header checksum");
    file[30] ^= 0x01;

    file[8] = 9;        /* a later format version, correctly sealed */
    reseal_header(file);
    expect_v2_error("version.tok", file, size, "version 9");
    file[8] = 2;
    reseal_header(file);

    uint64_t off1;      /* src_off[1] beyond the source ids */
    memcpy(&off1, file + 64 + 8, 8);
    uint64_t bad = 1u << 30;
    memcpy(file + 64 + 8, &bad, 8);
    expect_v2_error("offsets.tok", file, size, "offset table");
    memcpy(file + 64 + 8, &off1, 8);

    /* A flipped id loads (start-up reads no ids); verify finds it. */
    file[size - 20] ^= 0x01;
    write_raw(path_in_dir("id-flip.tok"), file, size);
    pmt_corpus c;
    char err[1024] = "";
    CHECK_MSG(pmt_corpus_load(&c, path_in_dir("id-flip.tok"), err, sizeof err) == 0, "%s", err);
    CHECK(pmt_corpus_verify(&c, path_in_dir("id-flip.tok"), err, sizeof err) == -1);
    CHECK_MSG(strstr(err, path_in_dir("id-flip.tok")) && strstr(err, "checksum mismatch"), "message: %s", err);
    pmt_corpus_free(&c);
    file[size - 20] ^= 0x01;

    /* Ids of another vocabulary: another size, or the same size from
     * another spm.model, are refused with both named. */
    write_raw(path_in_dir("vocab.tok"), file, size);
    CHECK_MSG(pmt_corpus_load(&c, path_in_dir("vocab.tok"), err, sizeof err) == 0, "%s", err);
    CHECK(pmt_corpus_check_vocabulary(&c, path_in_dir("vocab.tok"), 16000, test_spm_checksum, err, sizeof err) == -1);
    CHECK_MSG(strstr(err, path_in_dir("vocab.tok")) && strstr(err, "another vocabulary") && strstr(err, "16000") &&
              strstr(err, "8000"), "message: %s", err);
    CHECK(pmt_corpus_check_vocabulary(&c, path_in_dir("vocab.tok"), TEST_VOCAB, 0xabcdef01u, err, sizeof err) == -1);
    CHECK_MSG(strstr(err, "another vocabulary") && strstr(err, "abcdef01"), "message: %s", err);
    pmt_corpus_free(&c);
    free(file);
}

/* The writer refuses a pair more than it was opened for, and a file with
 * fewer is not left behind. */
static void test_writer_counts(void) {
    char err[1024] = "";
    const int32_t ids[2] = {5, 6};
    const char *path = path_in_dir("count.tok");
    pmt_corpus_writer *w = pmt_corpus_writer_open(path, 1, TEST_VOCAB, 0, err, sizeof err);
    CHECK_MSG(w != NULL, "%s", err);
    if (!w) return;
    CHECK(pmt_corpus_writer_add(w, ids, 2, ids, 1, err, sizeof err) == 0);
    CHECK(pmt_corpus_writer_add(w, ids, 2, ids, 1, err, sizeof err) == -1 && strstr(err, "more pairs"));
    pmt_corpus_writer_discard(w);
    CHECK(access(path, F_OK) != 0);
    w = pmt_corpus_writer_open(path, 2, TEST_VOCAB, 0, err, sizeof err);
    CHECK(w && pmt_corpus_writer_add(w, ids, 2, ids, 1, err, sizeof err) == 0);
    CHECK(w && pmt_corpus_writer_finish(w, NULL, err, sizeof err) == -1 && strstr(err, "1 pairs written of the 2"));
    CHECK(access(path, F_OK) != 0);
}

static void test_damaged_files(const pmt_corpus *orig) {
    expect_load_error(path_in_dir("does-not-exist.tok"), "No such file");

    size_t size;
    unsigned char *good = read_raw(path_in_dir("v1.tok"), &size);
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
    test_damaged_v2(&orig);
    test_writer_counts();

    char err[1024] = "";
    CHECK(pmt_corpus_save(&orig, "/nonexistent-dir/x.tok", TEST_VOCAB, 0, err, sizeof err) == -1);
    CHECK_MSG(strstr(err, "/nonexistent-dir/x.tok") != NULL, "message: %s", err);
    pmt_corpus_free(&orig);
    return test_finish();
}

/*
 * testutil.h — the small harness every C unit test uses.
 *
 * CHECK failures print file:line and the expression and count as failures;
 * test_finish() prints "N passed, N failed" and returns the exit status.
 * A test that cannot run (e.g. the real corpus is absent) calls test_skip(),
 * which prints "SKIPPED: why" and exits 77 (ctest's SKIP_RETURN_CODE).
 */
#ifndef PROJMT_TESTUTIL_H
#define PROJMT_TESTUTIL_H

#include <stdio.h>
#include <stddef.h>

extern int test_passed, test_failed;

#define CHECK(cond) test_check((cond) ? 1 : 0, __FILE__, __LINE__, #cond)
#define CHECK_MSG(cond, ...) do { if (!test_check((cond) ? 1 : 0, __FILE__, __LINE__, #cond)) \
    { fprintf(stderr, "    "); fprintf(stderr, __VA_ARGS__); fprintf(stderr, "\n"); } } while (0)
#define CHECK_NEAR(a, b, tol) do { double _a = (a), _b = (b); \
    CHECK_MSG(_a - _b <= (tol) && _b - _a <= (tol), "%s = %.9g, %s = %.9g, tol %.3g", #a, _a, #b, _b, (double)(tol)); } while (0)

int test_check(int ok, const char *file, int line, const char *expr);
int test_finish(void);
void test_skip(const char *why);
/* Makes a fresh empty directory under $TMPDIR (or /tmp) and returns its path (static buffer). */
const char *test_tmpdir(const char *tag);
/* Root of the source tree (PROJMT_SOURCE_DIR or "."). */
const char *test_source_dir(void);
/* Path to the shared spa.txt when present (PROJMT_DATA_DIR, then ../shared/data), else NULL. */
const char *test_spa_corpus(void);
/* Trains a SentencePiece model <prefix>.model of vocab_size pieces on one
 * text file, single-threaded (repeatable); 0, or -1 with the reason printed. */
int test_train_spm(const char *text_path, const char *prefix, int vocab_size);
/* Writes a string to a file; returns 0 on success. */
int test_write_file(const char *path, const char *text);
/* Saves to path a random fp32 checkpoint over the SentencePiece model of
 * `from` (a checkpoint or exported file): another width and head size than
 * the shipped model (other scratch sizes), a longer max_len (larger scratch),
 * projection cross-attention, no vocabulary shortlist. 0, or -1 with the
 * reason printed. */
int test_made_up_model(const char *from, const char *path);

/* The layout of builds before the fused Q/K/V projection, spelled out here
 * independently of model.c's converter: every <site>.wqkv [3C, C], .bqkv
 * [3C] pair of m's table becomes <site>.wq, .bq, .wk, .bk, .wv, .bv
 * ([C, C], [C]) at the same place. test_legacy_qkv_table writes that table
 * into out (room for m->n_tensors + 4 per standard site) and returns its
 * count; test_unfuse_qkv copies a flat array [n_params] of m's layout into
 * that order. */
struct pmt_model;
struct pmt_tensor;
int test_legacy_qkv_table(const struct pmt_model *m, struct pmt_tensor *out);
void test_unfuse_qkv(const struct pmt_model *m, const float *fused, float *legacy);

#endif

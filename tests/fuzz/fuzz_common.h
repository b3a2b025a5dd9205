/*
 * fuzz_common.h — what the fuzz targets share: the libFuzzer entry points
 * (declared here so every target spells them the same), a per-process
 * scratch file for loaders that take a path, and the gzip framing helpers
 * that let mutations reach the parsers behind a compressed, checksummed
 * stream.
 *
 * Each tests/fuzz/fuzz_<name>.c builds two ways: with clang's libFuzzer
 * (-DPROJMT_FUZZ=ON, scripts/fuzz.sh) and, in every ordinary build, linked
 * with replay_main.c so that ctest feeds it the committed seeds and every
 * crash ever found (tests/fuzz-regressions/<name>/).
 *
 * Ownership: fuzz_scratch_path returns a static buffer; fuzz_gzip returns a
 * malloc'd buffer the caller frees.
 */
#ifndef PROJMT_FUZZ_COMMON_H
#define PROJMT_FUZZ_COMMON_H

#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

/* A file name private to this process (in /dev/shm when present, so the
 * many writes stay in memory); suffix distinguishes several files. */
const char *fuzz_scratch_path(const char *suffix);
/* Writes data to path; aborts on failure (a harness fault, not a finding). */
void fuzz_write_file(const char *path, const void *data, size_t size);
/* How a loader test case is framed, chosen by the input's first byte:
 * RAW writes the bytes as they are (exercises the gzip layer itself),
 * GZIP compresses them (the parser sees the bytes), GZIP_CRC also rewrites
 * the last 4 bytes as the crc32 of the rest (passes the checksum, so the
 * code after it is reached). */
enum { FUZZ_FRAME_RAW = 0, FUZZ_FRAME_GZIP = 1, FUZZ_FRAME_GZIP_CRC = 2 };
/* Writes data[1..size) to path framed as data[0] % 3 says. */
void fuzz_write_framed(const char *path, const uint8_t *data, size_t size);

/* What the loaders promise of a file they loaded (ck, from pmt_checkpoint_load):
 * its stored config is within the limits and implies its tensor table, so
 * an inference model of it (the few rows a translation lane takes) is
 * built from what the file holds and takes its parameters. Aborts when
 * pmt_checkpoint_copy_params refuses them; a model that cannot be built
 * for another reason (the config's other settings) is not a finding. */
struct pmt_checkpoint;
void fuzz_build_model(const struct pmt_checkpoint *ck);

#endif

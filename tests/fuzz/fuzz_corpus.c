/*
 * fuzz_corpus.c — the prepared-corpus reader (pmt_corpus_load, <split>.tok)
 * on arbitrary files, framed as in fuzz_common.h so mutations get past gzip
 * and the checksum.
 *
 * Property: 0 or -1 with a message; a loaded corpus has monotone offsets
 * that end at the id counts, so every pair's span is inside the id arrays.
 */
#include <stdlib.h>
#include <unistd.h>

#include "data/corpus.h"
#include "fuzz_common.h"

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *path = fuzz_scratch_path(".tok");
    fuzz_write_framed(path, data, size);
    pmt_corpus c;
    char err[512];
    if (pmt_corpus_load(&c, path, err, sizeof err) == 0) {
        int64_t sum = 0;
        for (int i = 0; i < c.n_pairs; i++) {
            if (pmt_corpus_src_len(&c, i) < 0 || pmt_corpus_tgt_len(&c, i) < 0) abort();
            /* touch the first and last id of each span: ASan checks they exist */
            if (pmt_corpus_src_len(&c, i) > 0) sum += (int64_t)c.src_ids[c.src_off[i]] + c.src_ids[c.src_off[i + 1] - 1];
            if (pmt_corpus_tgt_len(&c, i) > 0) sum += (int64_t)c.tgt_ids[c.tgt_off[i]] + c.tgt_ids[c.tgt_off[i + 1] - 1];
        }
        (void)sum;
        pmt_corpus_free(&c);
    } else if (err[0] == '\0') {
        abort();
    }
    unlink(path);
    return 0;
}

/*
 * fuzz_checkpoint.c — the checkpoint reader (pmt_checkpoint_load) on
 * arbitrary files: raw bytes, gzip-framed bytes, or gzip-framed with a
 * correct trailing crc32 (see fuzz_common.h), so mutations reach the header
 * bounds, the tensor table and the stored-config parser.
 *
 * Property: the loader returns 0 or -1 with a message, never crashes, leaks
 * or allocates more than the file can describe; a loaded checkpoint's tensor
 * table covers exactly its parameters, and a model built from its stored
 * config (as translation builds it) takes its parameters (fuzz_build_model).
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fuzz_common.h"
#include "model/checkpoint.h"

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *path = fuzz_scratch_path(".ckpt");
    fuzz_write_framed(path, data, size);
    pmt_checkpoint ck;
    char err[512];
    if (pmt_checkpoint_load(&ck, path, err, sizeof err) == 0) {
        const pmt_tensor *last = &ck.tensors[ck.n_tensors - 1];
        if (last->offset + last->size != ck.n_params) abort();
        fuzz_build_model(&ck);
        pmt_checkpoint_free(&ck);
    } else if (err[0] == '\0') {
        abort();   /* a failure must say why */
    }
    unlink(path);
    return 0;
}

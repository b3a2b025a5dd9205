/*
 * fuzz_model_file.c — the exported model file reader (model_file.h, reached
 * through pmt_checkpoint_load as every command reaches it) on arbitrary
 * files that start with the "PMTMODEL" magic: the harness puts the magic in
 * front of the input after its framing byte (fuzz_common.h), so no mutation
 * is spent on the magic and every input reaches the header, the tensor
 * table with its storage types, the fp32/bf16/int8 weights, a version 2
 * file's vocabulary shortlist and the trailer.
 *
 * Property: the loader returns 0 or -1 with a message, never crashes, leaks
 * or allocates more than the file can describe; a loaded file is marked as
 * an export, its tensor table covers exactly its parameters, and a
 * shortlist it carries passes the shortlist's own checks for its vocabulary,
 * and a model built from its stored config takes its parameters
 * (fuzz_build_model).
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fuzz_common.h"
#include "model/checkpoint.h"
#include "model/model_file.h"

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const size_t magic = sizeof PMT_MODEL_FILE_MAGIC - 1;
    uint8_t *file = malloc(size + magic + 1);
    if (!file) abort();
    file[0] = size ? data[0] : FUZZ_FRAME_RAW;   /* the framing byte stays first */
    memcpy(file + 1, PMT_MODEL_FILE_MAGIC, magic);
    if (size > 1) memcpy(file + 1 + magic, data + 1, size - 1);
    const char *path = fuzz_scratch_path(".pmt");
    fuzz_write_framed(path, file, (size ? size : 1) + magic);
    free(file);
    pmt_checkpoint ck;
    char err[512];
    if (pmt_checkpoint_load(&ck, path, err, sizeof err) == 0) {
        const pmt_tensor *last = &ck.tensors[ck.n_tensors - 1];
        if (!ck.is_export || last->offset + last->size != ck.n_params) abort();
        if (ck.shortlist && (ck.shortlist->vocab_size != ck.vocab_size ||
                             pmt_shortlist_validate(ck.shortlist, err, sizeof err) != 0))
            abort();
        fuzz_build_model(&ck);
        pmt_checkpoint_free(&ck);
    } else if (err[0] == '\0') {
        abort();   /* a failure must say why */
    }
    unlink(path);
    return 0;
}

/*
 * spm.h — C API over SentencePiece (implemented in spm.cc, the project's only
 * C++). No C++ exception crosses this boundary: every entry point catches and
 * turns failures into a NULL/-1 result and a message.
 *
 * Ownership: pmt_spm is an opaque handle created by pmt_spm_load_* and
 * released by pmt_spm_free. Strings returned by pmt_spm_decode are malloc'd
 * and freed by the caller; pmt_spm_id_to_piece and pmt_spm_serialized return
 * pointers owned by the handle, valid until pmt_spm_free.
 */
#ifndef PROJMT_SPM_H
#define PROJMT_SPM_H

#include <stddef.h>
#include <stdint.h>

#include "data/vocab.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct pmt_spm pmt_spm;

typedef struct pmt_spm_train_options {
    int vocab_size;              /* 8000 */
    const char *model_type;      /* "unigram" or "bpe" */
    double character_coverage;   /* 1.0 */
    int num_threads;             /* 0 = all cores */
    unsigned long seed;          /* sampling of input sentences, for repeatability */
    long input_sentence_size;    /* 0 = use every line */
} pmt_spm_train_options;

/* Fills defaults: vocab 8000, unigram, coverage 1.0. */
void pmt_spm_train_options_default(pmt_spm_train_options *opt);
/* Trains on the lines of the given text files, writing <prefix>.model and
 * <prefix>.vocab. Special ids: those of data/vocab.h. Returns 0 or -1 with err. */
int pmt_spm_train(const char *const *input_files, int n_files, const char *model_prefix,
                  const pmt_spm_train_options *opt, char *err, size_t errlen);

/* Writes spm's model as <prefix>.model (its bytes, unchanged) and
 * <prefix>.vocab (the "piece<TAB>score" text of pmt_spm_train), so a data dir
 * that reuses another's vocabulary holds the same files. 0 or -1 with err. */
int pmt_spm_save(const pmt_spm *spm, const char *model_prefix, char *err, size_t errlen);
pmt_spm *pmt_spm_load_file(const char *path, char *err, size_t errlen);
/* Loads from the bytes of a .model file (e.g. embedded in a checkpoint). */
pmt_spm *pmt_spm_load_buffer(const void *data, size_t size, char *err, size_t errlen);
void pmt_spm_free(pmt_spm *spm);

/* The serialized model (the .model file's bytes), owned by the handle. */
const void *pmt_spm_serialized(const pmt_spm *spm, size_t *size);

/* Encodes UTF-8 text into at most max_ids ids (no bos/eos added). Returns the
 * total number of ids the text has (may exceed max_ids: then only the first
 * max_ids were written), or -1 on error. */
int pmt_spm_encode(const pmt_spm *spm, const char *text, int32_t *ids, int max_ids);
/* Decodes ids to detokenized UTF-8 (pad/bos/eos are skipped); malloc'd. */
char *pmt_spm_decode(const pmt_spm *spm, const int32_t *ids, int n);

int pmt_spm_vocab_size(const pmt_spm *spm);
int pmt_spm_piece_to_id(const pmt_spm *spm, const char *piece);  /* unk id if absent */
const char *pmt_spm_id_to_piece(const pmt_spm *spm, int id);    /* NULL if out of range */
int pmt_spm_pad_id(const pmt_spm *spm);
int pmt_spm_unk_id(const pmt_spm *spm);
int pmt_spm_bos_id(const pmt_spm *spm);
int pmt_spm_eos_id(const pmt_spm *spm);
/* The message of the last failure on this handle ("" if none). */
const char *pmt_spm_last_error(const pmt_spm *spm);

#ifdef __cplusplus
}
#endif
#endif

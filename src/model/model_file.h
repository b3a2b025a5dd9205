/*
 * model_file.h — the exported, inference-only model file (`projmt export`):
 * config, SentencePiece model and weights, nothing else (no Adam moments, no
 * training position), in fp32, bf16 or int8.
 *
 * Why a format of its own: a checkpoint carries three copies of every weight
 * (parameters, two Adam moments) and the training position; a user who only
 * translates needs one copy, and in int8 a quarter of it. The file is read
 * into the same pmt_checkpoint a checkpoint is read into (pmt_checkpoint_load
 * tells the two apart by their magic and hands an exported file to
 * pmt_model_file_read), so every command that loads a model for inference
 * takes either.
 *
 * File (gzip stream of core/gzstream.h; native little-endian values):
 *   char     magic[8] = "PMTMODEL";  uint32 version = 1
 *   uint32   weights (pmt_weight_type);  uint32 flags (bit 0: the weights
 *            are the checkpoint's exponential moving average)
 *   uint64   config_len; char config[config_len]     (the checkpoint's INI)
 *   uint64   spm_len;    uint8 spm[spm_len]          (SentencePiece .model)
 *   int32    vocab_size; int32 n_tensors
 *   n_tensors x { char name[64]; int32 rows, cols; uint64 offset, size;
 *                 uint32 storage (pmt_weight_type of this tensor) }
 *   per tensor, in table order, by its storage:
 *     fp32: float w[size]
 *     bf16: uint16 w[size]             (top half of the fp32, rounded to nearest even)
 *     int8: float scale[rows]; int8 q[size]   (w[r][c] ≈ scale[r] * q[r][c])
 *   version 2 only (a file with a vocabulary shortlist, model/shortlist.h):
 *     int32 vocab_size (again); int32 per_source K; int32 n_frequent
 *     int32 frequent[n_frequent]; int32 candidates[vocab_size * K]
 *   uint32   crc32 of every byte above (uncompressed); nothing may follow
 * A file without a shortlist is written as version 1, so the projmt
 * builds before shortlists still read it.
 * Matrices (rows > 1 and cols > 1: the linear weights and the embedding,
 * whose rows are the output rows of the tied logits) take the requested
 * type; vectors (biases, LayerNorm gains, log σ) stay fp32.
 *
 * int8 is per-output-row symmetric: scale[r] = max_c |w[r][c]| / 127,
 * q = round(w · 127 / max) in [-127, 127], ties to even, so
 * |w - scale*q| <= scale/2 (an all-zero row has scale 0 and q 0): the one
 * quantiser of nn/gemm.h (pmt_int8_quantize_rows), that of activations too.
 *
 * Writes are atomic (core/fileio.h). Loading dequantises into fp32
 * parameters (pmt_checkpoint.params), the reference path every kernel can use.
 *
 * Ownership: the functions only read their arguments; pmt_model_file_read
 * fills a pmt_checkpoint that pmt_checkpoint_free releases.
 */
#ifndef PROJMT_MODEL_FILE_H
#define PROJMT_MODEL_FILE_H

#include <stddef.h>
#include <stdint.h>

#include "core/gzstream.h"
#include "model/checkpoint.h"
#include "nn/gemm.h"

#define PMT_MODEL_FILE_VERSION 2      /* the newest version read and written */
#define PMT_MODEL_FILE_VERSION_PLAIN 1 /* the version of a file without a shortlist */
#define PMT_MODEL_FILE_MAGIC "PMTMODEL"

typedef enum { PMT_WEIGHTS_FP32 = 0, PMT_WEIGHTS_BF16 = 1, PMT_WEIGHTS_INT8 = 2 } pmt_weight_type;

/* "fp32" | "bf16" | "int8" into *out: 0, or -1 for any other name. */
int pmt_weight_type_parse(const char *name, pmt_weight_type *out);
const char *pmt_weight_type_name(pmt_weight_type t);

/* Writes ck's config text, SentencePiece bytes, tensor table and parameters
 * (ck->params as they are: pmt_checkpoint_use_ema first to export the
 * average) with matrices in the given type, and ck->shortlist when set
 * (its vocabulary must be ck's). is_ema is recorded in the flags.
 * Atomic; 0, or -1 with a message naming the file. */
int pmt_model_file_export(const char *path, const pmt_checkpoint *ck, pmt_weight_type weights, int is_ema,
                          char *err, size_t errlen);

/* Reads the rest of an exported file from gz, whose 8-byte magic has been
 * read already, into ck (zeroed by the caller): config, SentencePiece bytes,
 * tensor table, dequantised parameters, and the shortlist of a version 2
 * file (ck->shortlist); ck->weights and ck->params_are_ema say what it held. budget is the most bytes the file can inflate to
 * (pmt_gzstream_inflate_bound): no count that needs more is believed, so
 * nothing is allocated for it. Verifies the version, bounds, the CRC and
 * the end of the stream. 0, or -1 with a message naming path. */
int pmt_model_file_read(pmt_gzstream *gz, const char *path, uint64_t budget, pmt_checkpoint *ck, char *err,
                        size_t errlen);

/* Rounds m's matrices (the tensors a file of this type stores in it) to
 * the values an exported file of that type holds, in place: int8 per-row
 * quantised and widened back, bf16 rounded. fp32 changes nothing; values
 * already so rounded stay as they are. 0, or -1 with err (out of memory). */
int pmt_model_round_weights(pmt_model *m, pmt_weight_type weights, char *err, size_t errlen);

#endif

/*
 * average.h — checkpoint averaging (`projmt average`, as fairseq's
 * average_checkpoints.py and Marian's average.py) and the numbered
 * checkpoints it averages (`--keep-last N` in training writes
 * save_dir/step-<step>.ckpt and keeps the newest N).
 *
 * What is averaged: each checkpoint's inference weights, i.e. its
 * exponential moving average when it has one (pmt_checkpoint_use_ema), else
 * its parameters; element-wise in double. The files must hold one model:
 * the same tensor table, [model] config (dropout and label smoothing
 * aside) and SentencePiece model; and either all give moving averages or
 * none (a mix of the two is refused: they are different estimates). The result is a checkpoint with
 * those parameters, the first file's config and SentencePiece model, and no
 * optimizer or training state (it translates, exports and evaluates; it
 * does not resume).
 *
 * Ownership: callers own every buffer they pass; pmt_step_checkpoints
 * returns a malloc'd array the caller frees.
 */
#ifndef PROJMT_AVERAGE_H
#define PROJMT_AVERAGE_H

#include <stddef.h>
#include <stdint.h>

/* Writes dir/step-<step>.ckpt into buf. */
void pmt_step_checkpoint_path(char *buf, size_t len, const char *dir, int64_t step);

/* The steps of the step-<N>.ckpt files in dir, ascending, into *steps
 * (malloc'd, caller frees; NULL when none) and *n. 0, or -1 with err when
 * dir cannot be read. */
int pmt_step_checkpoints(const char *dir, int64_t **steps, int *n, char *err, size_t errlen);

/* Averages the n >= 1 checkpoints (or exported files) in paths into out
 * (atomic). They must hold one model, all with or all without moving
 * averages (above). 0, or -1 with err naming the file that failed or
 * differs, and how. */
int pmt_checkpoint_average(const char *const *paths, int n, const char *out, char *err, size_t errlen);

#endif

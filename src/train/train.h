/*
 * train.h — the training loop: batches → forward → backward → clip → Adam,
 * with validation, train.tsv, checkpoints, exact resume and clean stops.
 *
 * Resume (fairseq-like): when save_dir/last.ckpt exists the run continues
 * from it automatically — parameters, Adam moments, step, data position
 * (epoch, batch) and the log-row accumulators — and, given the same thread
 * count, produces bitwise the losses of an uninterrupted run. The
 * architecture, seed, batch_tokens and max_len must match the checkpoint
 * (they decide the parameters and the batches); other settings (lr, stop
 * criteria, ...) may change. `fresh` starts over and overwrites the folder.
 *
 * Randomness: batch order is a function of (seed, epoch) (batcher.h) and
 * each micro-batch's dropout masks of (seed, step, micro-batch index), so the
 * checkpoint needs no generator state beyond the seed and the position.
 *
 * Stop criteria are totals over all sessions: `epochs`, `max_steps`,
 * `minutes` (training time, validation included), `patience` validations
 * without improvement; whichever comes first. A stop request (SIGINT/SIGTERM
 * when handle_signals, or pmt_train_request_stop) finishes the current step,
 * saves last.ckpt and returns PMT_TRAIN_INTERRUPTED.
 *
 * Files in save_dir: last.ckpt (full training state; after every validation
 * and at exit), best.ckpt (parameters + state of the best validation by
 * early_stopping_metric), train.tsv (trainlog.h).
 *
 * Ownership: pmt_train_run borrows its inputs and frees everything it makes.
 */
#ifndef PROJMT_TRAIN_H
#define PROJMT_TRAIN_H

#include <stddef.h>
#include <stdint.h>

#include "core/config.h"
#include "data/corpus.h"
#include "model/model.h"
#include "train/optim.h"

/* The data of a run, already in memory (borrowed). */
typedef struct pmt_train_data {
    const pmt_corpus *train;
    const pmt_corpus *valid;     /* NULL or empty: no validation, no best.ckpt */
    const void *spm;             /* SentencePiece model bytes, stored in checkpoints */
    size_t spm_size;
    int vocab_size;
} pmt_train_data;

/* Optional callbacks (all may be NULL). */
typedef struct pmt_train_hooks {
    void *user;
    /* After every optimizer step, with the batch loss and what the optimizer did. */
    void (*on_step)(void *user, int64_t step, double loss, pmt_step_status status);
    /* Translation scores at every validation (valid_bleu.h): decode a
     * validation sample with m (no dropout) and fill *bleu and *chrf
     * (0..100, higher is better); they go into the valid row and serve
     * early_stopping_metric bleu | chrf, which requires this hook. 0, or -1
     * with err. */
    int (*valid_metric)(void *user, pmt_model *m, double *bleu, double *chrf, char *err, size_t errlen);
} pmt_train_hooks;

typedef struct pmt_train_options {
    int fresh;                   /* ignore save_dir/last.ckpt and start over */
    int quiet;                   /* no messages or progress on stderr */
    int handle_signals;          /* SIGINT/SIGTERM request a clean stop */
} pmt_train_options;

typedef enum {
    PMT_TRAIN_DONE = 0,          /* a stop criterion was reached */
    PMT_TRAIN_INTERRUPTED = 1    /* a stop was requested; last.ckpt saved */
} pmt_train_stop;

typedef struct pmt_train_result {
    pmt_train_stop stop;
    int signal;                  /* the signal that stopped the run (0: none) */
    int64_t steps;               /* optimizer steps taken in total */
    double epochs;               /* epochs completed (fractional) */
    double valid_loss;           /* last validation (NAN if none) */
    double valid_accuracy;
    double best_metric;          /* NAN if none */
} pmt_train_result;

/* Trains on data with cfg. Returns 0 (see res->stop), or -1 with a message in
 * err: bad config or data, unwritable save_dir, checkpoint mismatch,
 * divergence (max_bad_steps consecutive non-finite steps). */
int pmt_train_run(const pmt_config *cfg, const pmt_train_data *data, const pmt_train_options *opt,
                  const pmt_train_hooks *hooks, pmt_train_result *res, char *err, size_t errlen);

/* Loads data_dir/{train,valid}.tok and data_dir/spm.model, then pmt_train_run. */
int pmt_train_from_dir(const pmt_config *cfg, const pmt_train_options *opt, const pmt_train_hooks *hooks,
                       pmt_train_result *res, char *err, size_t errlen);

/* Asks a running pmt_train_run to stop after its current step (async-signal-safe). */
void pmt_train_request_stop(int signo);

#endif

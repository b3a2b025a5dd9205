/*
 * train.c — see train.h. One trainer struct holds the run; pmt_train_run
 * sets it up (threads, batchers, model, optimizer, resume), loops over
 * steps, validates, checkpoints, and tears it down. Every buffer is sized
 * before the first step: the loop itself never allocates.
 */
#include "train/train.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <omp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include "data/batcher.h"
#include "model/average.h"
#include "model/checkpoint.h"
#include "model/model_file.h"
#include "nn/gemm.h"
#include "train/dist.h"
#include "core/build_info.h"
#include "core/cpu_check.h"
#include "core/path.h"
#include "core/rng.h"
#include "core/signals.h"
#include "core/clock.h"
#include "core/threads.h"
#include "data/spm.h"
#include "train/trainlog.h"

static volatile sig_atomic_t g_stop_signal = 0;

void pmt_train_request_stop(int signo) { g_stop_signal = signo > 0 ? signo : -1; }

static void on_signal(int signo) { g_stop_signal = signo; }

typedef struct trainer {
    pmt_config cfg;                         /* the run's config, its precision resolved (never auto) */
    int precision_auto;                     /* the precision came as auto */
    const pmt_train_data *data;
    /* 1: the corpora's headers named this vocabulary (pmt_train_from_dir
     * checked them, corpus.h), so start-up does not read every id to check
     * its range (gigabytes at 10M pairs); the batchers check the ids of
     * each batch they fill instead. 0: every id is checked at start-up. */
    int vocabulary_checked;
    const pmt_train_options *opt;
    const pmt_train_hooks *hooks;
    pmt_model model;
    pmt_optim optim;
    float *ema;                             /* [n_params] moving average of params (cfg.ema > 0), else NULL */
    float *raw_backup;                      /* [n_params] the raw params while validating with the average */
    pmt_batcher train_b, valid_b;
    int has_valid;
    pmt_train_state st;
    pmt_trainlog log;
    double session_start, elapsed_base;     /* elapsed_base: st.elapsed_seconds at session start */
    int64_t session_first_step, session_tokens;
    double session_step_seconds;
    int64_t last_saved_step, last_valid_step;
    int patience_exhausted;
    int decay_by_time;                      /* cosine/linear over the minutes budget: st.decay_end estimated */
    double pace_start;                      /* clock at the end of this session's first step (0: not yet) */
    int64_t pace_first_step;                /* st.step then */
    pmt_stop_signals signals;   /* handlers and masks to put back (handle_signals) */
    double last_loss, last_accuracy;        /* latest train row, for the live line */
    double valid_loss, valid_accuracy;
    char last_path[PMT_PATH_MAX + 16], best_path[PMT_PATH_MAX + 16], tsv_path[PMT_PATH_MAX + 16];
    int save_dir_fd;                        /* save_dir, flock'ed while the run lives (-1: not held) */
} trainer;

/* ------------------------------------------------------------------ */
/* set-up                                                              */

static void format_count(size_t n, char *buf, size_t len) {
    char digits[32];
    int nd = snprintf(digits, sizeof digits, "%zu", n), j = 0;
    for (int i = 0; i < nd && j + 2 < (int)len; i++) {
        if (i > 0 && (nd - i) % 3 == 0) buf[j++] = ',';
        buf[j++] = digits[i];
    }
    buf[j] = '\0';
}

/* The binary and the CPU, the chosen model's size, and that of every standard/projection combination
 * of the three attention sites, so the cost of each choice is visible. */
static void print_build_and_model(trainer *t) {
    pmt_trainlog *l = &t->log;
    char n[32];
    /* First, which binary trains (a resumed run may continue with another):
     * scripts/make_report.py reads this line. */
    pmt_progress_message(l, "projmt %s (commit %s), built for -march=%s; CPU %s (oneDNN's effective ISA)",
                         pmt_build_version, pmt_build_commit, pmt_cpu_built_march, pmt_cpu_isa_name());
    format_count(t->model.n_params, n, sizeof n);
    pmt_progress_message(l, "model: %s parameters (d_model %d, %d+%d layers, vocab %d; attention enc-self %s, "
                         "dec-self %s, dec-cross %s)", n, t->cfg.d_model, t->cfg.enc_layers, t->cfg.dec_layers,
                         t->model.V, pmt_attention_kind_name(t->cfg.site_kind[0]),
                         pmt_attention_kind_name(t->cfg.site_kind[1]), pmt_attention_kind_name(t->cfg.site_kind[2]));
    if (pmt_model_uses_poolattn(&t->cfg))
        pmt_progress_message(l, "projection sites: kernel %s, metric %s, sigma %s (initial sigma^2 %.4g)",
                             pmt_kernel_name(t->cfg.proj_kernel), pmt_metric_name(t->cfg.proj_metric),
                             t->cfg.sigma_learned ? "learned" : "fixed",
                             exp(2.0 * (double)pmt_model_fixed_log_sigma(&t->cfg)));
    pmt_progress_message(l, "parameters per attention combination (enc-self / dec-self / dec-cross):");
    for (int mask = 0; mask < 8; mask++) {
        pmt_config c = t->cfg;
        int same = 1;
        for (int s = 0; s < PMT_SITES; s++) {
            c.site_kind[s] = (mask >> (PMT_SITES - 1 - s)) & 1;
            same &= c.site_kind[s] == t->cfg.site_kind[s];
        }
        format_count(pmt_model_count_params(&c, t->model.V), n, sizeof n);
        pmt_progress_message(l, "  %-10s / %-10s / %-10s %12s%s", pmt_attention_kind_name(c.site_kind[0]),
                             pmt_attention_kind_name(c.site_kind[1]), pmt_attention_kind_name(c.site_kind[2]), n,
                             same ? "  <- this run" : "");
    }
}

/* Every id must index the embedding table. */
static int check_ids(const pmt_corpus *c, int V, const char *name, char *err, size_t errlen) {
    const int32_t *sides[2] = {c->src_ids, c->tgt_ids};
    const uint64_t counts[2] = {c->src_off[c->n_pairs], c->tgt_off[c->n_pairs]};
    for (int s = 0; s < 2; s++)
        for (uint64_t i = 0; i < counts[s]; i++)
            if (sides[s][i] < 0 || sides[s][i] >= V) {
                snprintf(err, errlen, "%s corpus has token id %d outside the vocabulary of %d pieces "
                         "(re-run `projmt prepare` so the .tok files match spm.model)", name, sides[s][i], V);
                return -1;
            }
    return 0;
}

static int setup_batchers(trainer *t, char *err, size_t errlen) {
    const pmt_train_data *d = t->data;
    char inner[256];
    if (!t->vocabulary_checked && check_ids(d->train, d->vocab_size, "training", err, errlen) != 0) return -1;
    if (pmt_batcher_init(&t->train_b, d->train, t->cfg.batch_tokens, t->cfg.max_len, t->cfg.seed, 1, inner,
                         sizeof inner) != 0) {
        snprintf(err, errlen, "training data: %s", inner);
        return -1;
    }
    if (t->vocabulary_checked) t->train_b.vocab_size = d->vocab_size;
    t->has_valid = d->valid && d->valid->n_pairs > 0;
    if (t->has_valid) {
        if (!t->vocabulary_checked && check_ids(d->valid, d->vocab_size, "validation", err, errlen) != 0) return -1;
        if (pmt_batcher_init(&t->valid_b, d->valid, t->cfg.batch_tokens, t->cfg.max_len, t->cfg.seed, 0, inner,
                             sizeof inner) != 0) {
            snprintf(err, errlen, "validation data: %s", inner);
            return -1;
        }
        if (t->vocabulary_checked) t->valid_b.vocab_size = d->vocab_size;
    }
    if (t->train_b.n_truncated)   /* with blocks, of the pairs looked at so far (batcher.h) */
        pmt_progress_message(&t->log, "note: %d of %s%d training pairs have a side longer than max_len - 1 = %d "
                             "tokens; they are truncated", t->train_b.n_truncated,
                             t->train_b.pairs_seen < d->train->n_pairs ? "the first " : "", t->train_b.pairs_seen,
                             t->cfg.max_len - 1);
    return 0;
}

/* Refuses a checkpoint whose parameters or batches would not be this run's. */
/* The data position (epoch, batch) means the same batches only over the
 * same train.tok: a re-prepared split (other pairs, order or vocabulary)
 * is refused. A version-1 checkpoint stored no identity: a note, and on. */
static int check_same_corpus(trainer *t, const pmt_checkpoint *ck, char *err, size_t errlen) {
    const pmt_corpus *train = t->data->train;
    if (ck->state.train_pairs == 0) {
        pmt_progress_message(&t->log, "note: '%s' does not record which train.tok it was trained on (an older "
                             "checkpoint); resuming without checking the data", t->last_path);
        return 0;
    }
    if (ck->state.train_pairs == train->n_pairs && ck->state.train_checksum == train->checksum) return 0;
    snprintf(err, errlen, "'%s' was trained on another train.tok (%lld pairs, checksum %08llx; now %d pairs, "
             "checksum %08x): its data position would pick other batches. Resume with the data it was trained on, "
             "use another --save-dir, or --fresh to start over", t->last_path, (long long)ck->state.train_pairs,
             (unsigned long long)ck->state.train_checksum, train->n_pairs, train->checksum);
    return -1;
}

static int check_resumable(trainer *t, const pmt_checkpoint *ck, char *err, size_t errlen) {
    const char *what = NULL;
    long have = 0, want = 0;
    if (!ck->has_optim || !ck->has_state) what = "training state";
    else if (ck->state.seed != (uint64_t)t->cfg.seed) what = "seed", have = (long)ck->state.seed, want = (long)t->cfg.seed;
    else if (ck->cfg.batch_tokens != t->cfg.batch_tokens)
        what = "batch_tokens", have = ck->cfg.batch_tokens, want = t->cfg.batch_tokens;
    else if (ck->cfg.max_len != t->cfg.max_len) what = "max_len", have = ck->cfg.max_len, want = t->cfg.max_len;
    if (!what) return check_same_corpus(t, ck, err, errlen);
    if (have == want)
        snprintf(err, errlen, "'%s' has no %s (not written by a training run); use another --save-dir or --fresh",
                 t->last_path, what);
    else
        snprintf(err, errlen, "'%s' was trained with %s = %ld, this run has %ld: resume with the same value, use "
                 "another --save-dir, or --fresh to start over", t->last_path, what, have, want);
    return -1;
}

/* The stored best value is in the units of the metric the checkpoint was
 * trained with (e.g. -loss); compared with another (BLEU) it would decide
 * best.ckpt and patience wrongly, so a changed metric starts them over. */
static void forget_best_of_other_metric(trainer *t, const pmt_checkpoint *ck) {
    if (!t->st.has_best || !strcmp(ck->cfg.early_stopping_metric, t->cfg.early_stopping_metric)) return;
    t->st.has_best = 0;
    t->st.stale_validations = 0;
    pmt_progress_message(&t->log, "note: early_stopping_metric changed from %s to %s: best.ckpt and patience "
                         "start over at the next validation", ck->cfg.early_stopping_metric,
                         t->cfg.early_stopping_metric);
}

/* A run may continue in another precision than the checkpoint's (as
 * Marian and fairseq allow switching mixed precision on resume): the
 * master weights and Adam state are fp32 either way, only the products'
 * rounding changes, so it is a note, not a refusal. The run's precision is
 * what the next checkpoint records. */
static void note_other_precision(trainer *t, const pmt_checkpoint *ck) {
    if (ck->cfg.precision == t->cfg.precision) return;
    pmt_progress_message(&t->log, "note: %s was trained with precision %s; continuing with %s (weights and Adam "
                         "state are fp32 in both; the steps from here are not bitwise those of an uninterrupted "
                         "%s run)", t->last_path, pmt_precision_name(ck->cfg.precision),
                         pmt_precision_name(t->cfg.precision), pmt_precision_name(ck->cfg.precision));
}

/* The moving average continues from the checkpoint's; a checkpoint trained
 * without --ema starts it at its parameters. */
static void resume_ema(trainer *t, const pmt_checkpoint *ck) {
    const float *from = ck->has_ema ? ck->ema : ck->params;
    memcpy(t->ema, from, t->model.n_params * sizeof(float));
    if (!ck->has_ema)
        pmt_progress_message(&t->log, "note: %s has no moving average; --ema starts it at the current weights",
                             t->last_path);
}

/* init_from (fine-tuning, as fairseq's --finetune-from-model and Marian's
 * --pretrained-model): the weights of another model, a new optimizer,
 * schedule and data position (step 0). The translating weights are taken,
 * the moving average when there is one, since those are the ones the model
 * was chosen by. Refused: a model of another shape (tensor table), of another
 * vocabulary (its ids would index other pieces: same size is not enough, the
 * SentencePiece bytes must match the data's). An int8/bf16 export is a
 * starting point too (a shipped file is often all a user has): its rounded
 * weights, widened, with a note; the rounding is far below what fine-tuning
 * changes, and the run's own checkpoints are fp32 from there on. */
static int init_from_model(trainer *t, char *err, size_t errlen) {
    const char *path = t->cfg.init_from;
    pmt_checkpoint ck;
    char inner[512];
    if (pmt_checkpoint_load(&ck, path, inner, sizeof inner) != 0) {
        snprintf(err, errlen, "init_from: %s", inner);
        return -1;
    }
    int rc = 0;
    if (t->data->spm && (ck.spm_size != t->data->spm_size || memcmp(ck.spm, t->data->spm, ck.spm_size))) {
        snprintf(err, errlen, "init_from '%s' was trained with another vocabulary than %s/spm.model (SentencePiece "
                 "checksums %08x and %08x): prepare the data with its vocabulary, `projmt prepare --spm-model "
                 "<its data dir>/spm.model`", path, t->cfg.data_dir,
                 pmt_corpus_spm_checksum(ck.spm, ck.spm_size),
                 pmt_corpus_spm_checksum(t->data->spm, t->data->spm_size));
        rc = -1;
    }
    const int had_ema = ck.has_ema || ck.params_are_ema;
    if (rc == 0) pmt_checkpoint_use_ema(&ck);
    if (rc == 0 && pmt_checkpoint_copy_params(&ck, &t->model, inner, sizeof inner) != 0) {
        snprintf(err, errlen, "init_from '%s': %s (give the model flags it was trained with)", path, inner);
        rc = -1;
    }
    if (rc == 0 && ck.weights != PMT_WEIGHTS_FP32)
        pmt_progress_message(&t->log, "note: %s stores %s weights: training starts from their rounded values, "
                             "widened to fp32 (its checkpoint or an fp32 export starts from the exact ones)", path,
                             ck.weights == PMT_WEIGHTS_INT8 ? "int8" : "bf16");
    if (rc == 0) {
        if (t->ema) memcpy(t->ema, t->model.params, t->model.n_params * sizeof(float));
        pmt_progress_message(&t->log, "fine-tuning from %s (%s%s): new optimizer, schedule and data position", path,
                             had_ema ? "its moving average" : "its weights",
                             ck.has_state ? "" : ", no training state");
        if (ck.has_state)
            pmt_progress_message(&t->log, "  it had trained %lld steps (%lld tokens)", (long long)ck.state.step,
                                 (long long)ck.state.tokens_seen);
    }
    pmt_checkpoint_free(&ck);
    return rc;
}

/* Continues from save_dir/last.ckpt if present (and not fresh), else
 * starts from init_from's weights, else
 * initializes the parameters from the seed. Returns the step resumed at. */
static int resume_or_init(trainer *t, char *err, size_t errlen) {
    memset(&t->st, 0, sizeof t->st);
    t->st.seed = t->cfg.seed;
    t->st.train_pairs = t->data->train->n_pairs;
    t->st.train_checksum = t->data->train->checksum;
    if (t->opt->fresh || access(t->last_path, F_OK) != 0) {
        if (t->cfg.init_from[0]) return init_from_model(t, err, errlen);
        pmt_model_init_params(&t->model, t->cfg.seed);
        if (t->ema) memcpy(t->ema, t->model.params, t->model.n_params * sizeof(float));
        return 0;
    }
    pmt_checkpoint ck;
    char inner[512];
    if (pmt_checkpoint_load(&ck, t->last_path, err, errlen) != 0) return -1;
    int rc = check_resumable(t, &ck, err, errlen);
    if (rc == 0 && (pmt_checkpoint_copy_params(&ck, &t->model, inner, sizeof inner) != 0 ||
                    pmt_optim_restore(&t->optim, &ck, inner, sizeof inner) != 0)) {
        snprintf(err, errlen, "cannot resume from '%s': %s (use another --save-dir, or --fresh to start over)",
                 t->last_path, inner);
        rc = -1;
    }
    if (rc == 0 && t->ema) resume_ema(t, &ck);
    if (rc == 0) {
        t->st = ck.state;
        t->st.train_pairs = t->data->train->n_pairs;   /* recorded from now on (older checkpoints lack it) */
        t->st.train_checksum = t->data->train->checksum;
        pmt_progress_message(&t->log, "resuming from %s at step %lld (epoch %lld, batch %lld)", t->last_path,
                             (long long)t->st.step, (long long)t->st.epoch + 1, (long long)t->st.batch);
        forget_best_of_other_metric(t, &ck);
        note_other_precision(t, &ck);
        if (t->cfg.init_from[0])
            pmt_progress_message(&t->log, "note: init_from '%s' applies to a new run only; this one continues from "
                                 "%s (--fresh to start over from init_from)", t->cfg.init_from, t->last_path);
    }
    pmt_checkpoint_free(&ck);
    return rc;
}

/* Data parallelism: every rank starts from rank 0's parameters, Adam
 * state and position (only rank 0 read last.ckpt or drew the initial
 * parameters). No-op alone. */
static void share_start(trainer *t) {
    if (pmt_dist_size() == 1) return;
    pmt_dist_broadcast_floats(t->model.params, t->model.n_params);
    pmt_dist_broadcast_floats(t->optim.m, t->optim.n);
    if (t->ema) pmt_dist_broadcast_floats(t->ema, t->model.n_params);
    pmt_dist_broadcast_floats(t->optim.v, t->optim.n);
    pmt_dist_broadcast_bytes(&t->optim.t, sizeof t->optim.t);
    pmt_dist_broadcast_bytes(&t->optim.bad_steps, sizeof t->optim.bad_steps);
    pmt_dist_broadcast_bytes(&t->optim.skipped, sizeof t->optim.skipped);
    pmt_dist_broadcast_bytes(&t->st, sizeof t->st);
}

/* ------------------------------------------------------------------ */
/* one step                                                            */

static uint64_t dropout_seed(uint64_t seed, int64_t step, int micro) {
    return pmt_splitmix64(pmt_splitmix64(seed ^ 0x64726f706f7574ULL) + (uint64_t)step * 1000003ULL + (uint64_t)micro);
}

static double elapsed(const trainer *t) { return t->elapsed_base + (pmt_now_seconds() - t->session_start); }

static double epochs_done(const trainer *t) {
    return (double)t->st.epoch + (double)t->st.batch / (double)t->train_b.n_batches;
}

/* Data parallelism: sums the ranks' gradients (each already scaled by the
 * global token count) and statistics, so every rank takes the same optimizer
 * step and the logs are the whole job's. No-op alone. */
static void combine_ranks(trainer *t, pmt_stats *sum, int64_t *tokens, double denominator) {
    if (pmt_dist_size() == 1) return;
    pmt_dist_allreduce_sum_floats(t->model.grads, t->model.n_params);
    double v[5] = {sum->loss_sum, sum->nll_sum, sum->tokens, sum->correct, (double)*tokens};
    pmt_dist_allreduce_sum_doubles(v, 5);
    if (v[2] != denominator)
        pmt_dist_abort("the ranks' parts of a batch do not add up to the batch: every rank must read the same "
                       "train.tok with the same seed, batch_tokens and max_len");
    *sum = (pmt_stats){v[0], v[1], (int)v[2], (int)v[3]};
    *tokens = (int64_t)v[4];
}

/* Accumulates the gradients of the next `accum` batches (fewer at the end of
 * an epoch, so epochs end on a step) and applies the optimizer. */
static pmt_step_status train_step(trainer *t, int *epoch_end, double *loss) {
    pmt_train_state *st = &t->st;
    const double start = pmt_now_seconds();
    const int epoch = (int)st->epoch, first = (int)st->batch;
    /* up to accum batches, fewer at the end of the epoch (batcher.h: found
     * by has_batch, n_batches may be an estimate) */
    int group = 0;
    while (group < t->cfg.accum && pmt_batcher_has_batch(&t->train_b, epoch, first + group)) group++;
    double denominator = 0;
    for (int k = 0; k < group; k++) denominator += pmt_batcher_target_tokens(&t->train_b, epoch, first + k);

    pmt_model_zero_grad(&t->model);
    pmt_stats sum = {0, 0, 0, 0};
    int64_t tokens = 0;
    /* With several ranks each takes its part of every batch (alone: all of it). */
    const int rank = pmt_dist_rank(), ranks = pmt_dist_size();
    for (int k = 0; k < group; k++) {
        const pmt_batch *b = pmt_batcher_fill_part(&t->train_b, epoch, first + k, rank, ranks);
        if (b->B == 0) continue;  /* fewer pairs than ranks: nothing for this one */
        pmt_stats s;
        pmt_model_train_step(&t->model, b, dropout_seed(st->seed, st->step, k * ranks + rank), denominator, &s);
        sum.loss_sum += s.loss_sum;
        sum.nll_sum += s.nll_sum;
        sum.tokens += s.tokens;
        sum.correct += s.correct;
        for (int r = 0; r < b->B; r++) tokens += b->src_len[r] + b->tgt_len[r];
    }
    combine_ranks(t, &sum, &tokens, denominator);
    *loss = sum.loss_sum / denominator;
    double norm, lr;
    st->step++;
    pmt_step_status status =
        pmt_optim_step(&t->optim, t->model.params, t->model.grads, *loss, st->step, &norm, &lr);
    if (status == PMT_STEP_APPLIED && t->optim.params16) pmt_model_params16_written(&t->model);
    if (t->ema && status == PMT_STEP_APPLIED)
        pmt_ema_update(t->ema, t->model.params, t->model.n_params, t->cfg.ema, st->step);

    st->batch += group;
    *epoch_end = !pmt_batcher_has_batch(&t->train_b, epoch, (int)st->batch);
    if (*epoch_end) {
        st->epoch++;
        st->batch = 0;
    }
    st->tokens_seen += tokens;
    const double seconds = pmt_now_seconds() - start;
    t->session_tokens += tokens;
    t->session_step_seconds += seconds;
    st->win_seconds += seconds;
    st->win_all_tokens += tokens;
    if (status == PMT_STEP_APPLIED) {
        st->win_loss_sum += sum.loss_sum;
        st->win_nll_sum += sum.nll_sum;
        st->win_tokens += sum.tokens;
        st->win_correct += sum.correct;
        st->win_grad_norm_sum += norm;
        st->win_steps++;
    }
    return status;
}

/* ------------------------------------------------------------------ */
/* logging and progress                                                */

static pmt_log_row empty_row(const trainer *t, const char *kind) {
    pmt_log_row r = {kind, t->st.step, epochs_done(t), NAN, NAN, NAN, NAN, NAN, NAN, elapsed(t), NAN, NAN};
    return r;
}

/* Seconds until the first stop criterion, from this session's pace. */
static double eta_seconds(const trainer *t) {
    const pmt_config *c = &t->cfg;
    int64_t done = t->st.step - t->session_first_step;
    double per_step = done > 0 ? (pmt_now_seconds() - t->session_start) / (double)done : NAN, eta = INFINITY;
    if (c->max_steps > 0) eta = fmin(eta, (double)(c->max_steps - t->st.step) * per_step);
    if (c->epochs > 0) {
        const int64_t steps_per_epoch = (t->train_b.n_batches + c->accum - 1) / c->accum;   /* may be an estimate */
        int64_t left = (int64_t)(c->epochs - t->st.epoch) * steps_per_epoch -
                       (t->st.batch + c->accum - 1) / c->accum;
        eta = fmin(eta, (double)left * per_step);
    }
    if (c->minutes > 0) eta = fmin(eta, c->minutes * 60.0 - elapsed(t));
    if (t->decay_by_time && t->st.decay_end > 0) eta = fmin(eta, (double)(t->st.decay_end - t->st.step) * per_step);
    return eta > 0 ? eta : 0;
}

static void format_progress(const trainer *t, char *line, size_t len) {
    const pmt_train_state *st = &t->st;
    double loss = st->win_tokens ? st->win_loss_sum / (double)st->win_tokens : t->last_loss;
    double acc = st->win_tokens ? (double)st->win_correct / (double)st->win_tokens : t->last_accuracy;
    double rate = t->session_step_seconds > 0 ? (double)t->session_tokens / t->session_step_seconds : 0;
    char eta[48] = "";
    double left = eta_seconds(t);
    if (isfinite(left)) {
        strcpy(eta, " | ETA ");
        pmt_format_duration(left, eta + strlen(eta), sizeof eta - strlen(eta));
    }
    snprintf(line, len, "epoch %lld | step %lld | loss %.3f | acc %.1f%% | %.1fk tok/s%s",
             (long long)st->epoch + 1, (long long)st->step, loss, 100.0 * acc, rate / 1000.0, eta);
}

/* Writes the train row of the window that ends at this step and resets it. */
static int log_train_row(trainer *t, double lr, char *err, size_t errlen) {
    pmt_train_state *st = &t->st;
    pmt_log_row r = empty_row(t, "train");
    if (st->win_tokens > 0) {
        r.loss = st->win_loss_sum / (double)st->win_tokens;
        r.accuracy = (double)st->win_correct / (double)st->win_tokens;
        r.perplexity = exp(st->win_nll_sum / (double)st->win_tokens);
        t->last_loss = r.loss;
        t->last_accuracy = r.accuracy;
    }
    r.lr = lr;
    if (st->win_steps > 0) r.grad_norm = st->win_grad_norm_sum / (double)st->win_steps;
    if (st->win_seconds > 0) r.tokens_per_s = (double)st->win_all_tokens / st->win_seconds;
    char line[256];
    format_progress(t, line, sizeof line);
    pmt_progress_plain(&t->log, line);
    st->win_loss_sum = st->win_nll_sum = st->win_grad_norm_sum = st->win_seconds = 0;
    st->win_tokens = st->win_correct = st->win_steps = st->win_all_tokens = 0;
    return pmt_trainlog_row(&t->log, &r, err, errlen);
}

/* ------------------------------------------------------------------ */
/* validation and checkpoints                                          */

/* Data parallelism: the ranks' parameters must still be the same (they
 * apply the same update to the same all-reduced gradient); a difference
 * would mean rank 0's checkpoints no longer describe the run. */
static void check_ranks_agree(const trainer *t) {
    if (!pmt_dist_same_on_all_ranks(t->model.params, t->model.n_params * sizeof(float)))
        pmt_dist_abort("the ranks' parameters have drifted apart (the MPI library's all-reduce does not give "
                       "every rank the same sums); stopping");
}

/* --keep-last N: save_dir/step-<step>.ckpt (weights, moving average and
 * position; no Adam state, they are for averaging and translating), then
 * removes all but the newest N of them. */
static int save_numbered(trainer *t, char *err, size_t errlen) {
    char path[PMT_PATH_MAX + 48], inner[512];
    pmt_step_checkpoint_path(path, sizeof path, t->cfg.save_dir, t->st.step);
    if (pmt_checkpoint_save(path, &t->model, t->data->spm, t->data->spm_size, NULL, &t->st, t->ema, err, errlen) != 0)
        return -1;
    int64_t *steps;
    int n;
    if (pmt_step_checkpoints(t->cfg.save_dir, &steps, &n, inner, sizeof inner) != 0) {
        snprintf(err, errlen, "--keep-last: %s", inner);
        return -1;
    }
    for (int i = 0; i < n - t->cfg.keep_last; i++) {
        pmt_step_checkpoint_path(path, sizeof path, t->cfg.save_dir, steps[i]);
        if (unlink(path) != 0 && errno != ENOENT) {
            snprintf(err, errlen, "--keep-last: cannot remove '%s': %s", path, strerror(errno));
            free(steps);
            return -1;
        }
    }
    free(steps);
    return 0;
}

/* A save's temporary (<name>.tmp, core/fileio.h) that this trainer writes:
 * last.ckpt.tmp, best.ckpt.tmp or step-<digits>.ckpt.tmp. */
static int is_own_temporary(const char *name) {
    if (!strcmp(name, "last.ckpt.tmp") || !strcmp(name, "best.ckpt.tmp")) return 1;
    if (strncmp(name, "step-", 5) != 0) return 0;
    const char *p = name + 5;
    if (*p < '0' || *p > '9') return 0;
    while (*p >= '0' && *p <= '9') p++;
    return !strcmp(p, ".ckpt.tmp");
}

/* Why: a run killed inside a save (SIGKILL, power loss) leaves its
 * <name>.tmp behind; the next run on the folder overwrites last.ckpt.tmp at
 * its first save, but a best.ckpt.tmp or step-<N>.ckpt.tmp it never writes
 * again would stay for good. Removing them is safe only when no other run
 * writes there, so the folder is flock'ed first (released by the kernel
 * however the run ends) and a second run on it is refused instead of the
 * two overwriting each other's last.ckpt. */
static int claim_save_dir(trainer *t, char *err, size_t errlen) {
    const char *dir = t->cfg.save_dir;
    t->save_dir_fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (t->save_dir_fd < 0) {
        snprintf(err, errlen, "cannot open save_dir '%s': %s", dir, strerror(errno));
        return -1;
    }
    if (flock(t->save_dir_fd, LOCK_EX | LOCK_NB) != 0) {
        int e = errno;
        close(t->save_dir_fd);
        t->save_dir_fd = -1;
        if (e == EWOULDBLOCK)
            snprintf(err, errlen, "save_dir '%s' is in use by another projmt train: wait for it to end, or give "
                     "this run its own --save-dir", dir);
        else
            snprintf(err, errlen, "cannot lock save_dir '%s': %s", dir, strerror(e));
        return -1;
    }
    DIR *d = opendir(dir);
    if (!d) {
        snprintf(err, errlen, "cannot list save_dir '%s': %s", dir, strerror(errno));
        return -1;
    }
    int rc = 0;
    const struct dirent *e;
    while (rc == 0 && (e = readdir(d)) != NULL) {
        if (!is_own_temporary(e->d_name)) continue;
        char path[PMT_PATH_MAX + 300];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        if (unlink(path) == 0) {
            pmt_progress_message(&t->log, "removed '%s', left by a save that was interrupted", path);
        } else if (errno != ENOENT) {
            snprintf(err, errlen, "cannot remove '%s', left by an interrupted save: %s", path, strerror(errno));
            rc = -1;
        }
    }
    closedir(d);
    return rc;
}

/* --fresh: the old run's best.ckpt and step-<N>.ckpt files go, so that
 * --keep-last does not keep the old run's newer steps in place of this
 * run's, and `projmt average --last N` never mixes two runs. last.ckpt is
 * overwritten by the first save. */
static int remove_old_run(trainer *t, char *err, size_t errlen) {
    char path[PMT_PATH_MAX + 48], inner[512];
    if (unlink(t->best_path) != 0 && errno != ENOENT) {
        snprintf(err, errlen, "--fresh: cannot remove the old '%s': %s", t->best_path, strerror(errno));
        return -1;
    }
    int64_t *steps;
    int n;
    if (pmt_step_checkpoints(t->cfg.save_dir, &steps, &n, inner, sizeof inner) != 0) {
        snprintf(err, errlen, "--fresh: %s", inner);
        return -1;
    }
    int rc = 0;
    for (int i = 0; i < n && rc == 0; i++) {
        pmt_step_checkpoint_path(path, sizeof path, t->cfg.save_dir, steps[i]);
        if (unlink(path) != 0 && errno != ENOENT) {
            snprintf(err, errlen, "--fresh: cannot remove the old '%s': %s", path, strerror(errno));
            rc = -1;
        }
    }
    free(steps);
    return rc;
}

static int save_last(trainer *t, char *err, size_t errlen) {
    t->st.elapsed_seconds = elapsed(t);
    check_ranks_agree(t);
    const pmt_adam_state adam = pmt_optim_state(&t->optim);
    if (pmt_dist_is_root() && pmt_checkpoint_save(t->last_path, &t->model, t->data->spm, t->data->spm_size,
                                                  &adam, &t->st, t->ema, err, errlen) != 0)
        return -1;
    if (pmt_dist_is_root() && t->cfg.keep_last > 0 && save_numbered(t, err, errlen) != 0) return -1;
    t->last_saved_step = t->st.step;
    return 0;
}

/* A batch held an id outside the vocabulary (the batcher put unk in its
 * place): the mapped file is damaged, so the run stops before the step is
 * saved. 0 when every id was in range. */
static int check_filled_ids(const pmt_batcher *b, const char *split, char *err, size_t errlen) {
    if (b->bad_ids == 0) return 0;
    snprintf(err, errlen, "the %s split's token file has id %d (pair %d) outside the vocabulary of %d pieces: the "
             "file is damaged; re-run `projmt prepare`", split, (int)b->first_bad_id, b->first_bad_pair,
             b->vocab_size);
    return -1;
}

/* Teacher-forced pass over the validation set (no dropout). */
static void evaluate(trainer *t, pmt_stats *sum) {
    memset(sum, 0, sizeof *sum);
    /* With several ranks each evaluates every ranks-th batch; sums are combined below. */
    for (int k = pmt_dist_rank(); k < t->valid_b.n_batches; k += pmt_dist_size()) {
        pmt_stats s;
        pmt_model_forward(&t->model, pmt_batcher_fill(&t->valid_b, 0, k), 0, 0, &s);
        sum->loss_sum += s.loss_sum;
        sum->nll_sum += s.nll_sum;
        sum->tokens += s.tokens;
        sum->correct += s.correct;
    }
    if (pmt_dist_size() > 1) {
        double v[4] = {sum->loss_sum, sum->nll_sum, sum->tokens, sum->correct};
        pmt_dist_allreduce_sum_doubles(v, 4);
        *sum = (pmt_stats){v[0], v[1], (int)v[2], (int)v[3]};
    }
}

/* The early-stopping value of a validation row, oriented so higher is better. */
static double metric_value(const trainer *t, const pmt_log_row *r) {
    const char *metric = t->cfg.early_stopping_metric;
    if (!strcmp(metric, "loss")) return -r->loss;
    if (!strcmp(metric, "accuracy")) return r->accuracy;
    return !strcmp(metric, "bleu") ? r->bleu : r->chrf;
}

/* BLEU and chrF from the valid_metric hook (if any) into the row, and their
 * part of the validation message (with the time decoding took) into note. */
static int translation_scores(trainer *t, pmt_log_row *r, char *note, size_t notelen, char *err, size_t errlen) {
    note[0] = '\0';
    if (!t->hooks->valid_metric) return 0;
    char inner[512];
    const double start = pmt_now_seconds();
    if (t->hooks->valid_metric(t->hooks->user, &t->model, &r->bleu, &r->chrf, inner, sizeof inner) != 0) {
        snprintf(err, errlen, "validation BLEU/chrF at step %lld: %s", (long long)t->st.step, inner);
        return -1;
    }
    snprintf(note, notelen, " | BLEU %.2f | chrF %.2f (%.1fs)", r->bleu, r->chrf, pmt_now_seconds() - start);
    return 0;
}

/* With --ema, validation scores the moving average (as Marian validates its
 * smoothed parameters): it is what translate, eval and export use, so it is
 * what best.ckpt and patience should judge. Swaps it into the model's
 * parameters (in = 1) and the raw ones back (in = 0); a copy, so bitwise. */
static void swap_in_average(trainer *t, int in) {
    if (!t->ema) return;
    const size_t bytes = t->model.n_params * sizeof(float);
    if (in) {
        memcpy(t->raw_backup, t->model.params, bytes);
        memcpy(t->model.params, t->ema, bytes);
    } else {
        memcpy(t->model.params, t->raw_backup, bytes);
    }
}

/* Validates, logs the row, keeps best.ckpt and the patience count, saves last.ckpt. */
static int validate(trainer *t, char *err, size_t errlen) {
    pmt_stats s;
    pmt_log_row r = empty_row(t, "valid");
    char scores[96];
    swap_in_average(t, 1);
    evaluate(t, &s);
    char why[256];
    int rc = pmt_gemm_take_error(why, sizeof why);
    if (rc != 0) snprintf(err, errlen, "validation: %s", why);
    else if ((rc = check_filled_ids(&t->valid_b, "validation", err, errlen)) == 0)
        rc = translation_scores(t, &r, scores, sizeof scores, err, errlen);
    swap_in_average(t, 0);
    if (rc != 0) return -1;
    r.loss = s.loss_sum / (double)s.tokens;
    r.accuracy = (double)s.correct / (double)s.tokens;
    r.perplexity = exp(s.nll_sum / (double)s.tokens);
    const double value = metric_value(t, &r);
    t->valid_loss = r.loss;
    t->valid_accuracy = r.accuracy;
    t->last_valid_step = t->st.step;
    if (pmt_trainlog_row(&t->log, &r, err, errlen) != 0) return -1;

    int improved = !t->st.has_best || value > t->st.best_metric;
    pmt_progress_message(&t->log, "valid step %lld | loss %.4f | acc %.2f%% | ppl %.2f%s%s", (long long)t->st.step,
                         r.loss, 100.0 * r.accuracy, r.perplexity, scores, improved ? " | new best" : "");
    if (improved) {
        t->st.has_best = 1;
        t->st.best_metric = value;
        t->st.stale_validations = 0;
        t->st.elapsed_seconds = elapsed(t);
        if (pmt_dist_is_root() && pmt_checkpoint_save(t->best_path, &t->model, t->data->spm, t->data->spm_size,
                                                      NULL, &t->st, t->ema, err, errlen) != 0)
            return -1;
    } else {
        t->st.stale_validations++;
        t->patience_exhausted = t->cfg.patience > 0 && t->st.stale_validations >= t->cfg.patience;
    }
    return save_last(t, err, errlen);
}

/* ------------------------------------------------------------------ */
/* the loop                                                            */

/* Why the run should stop now, or NULL to go on. */
static const char *stop_reason(const trainer *t) {
    const pmt_config *c = &t->cfg;
    if (c->epochs > 0 && t->st.epoch >= c->epochs) return "epochs reached";
    if (c->max_steps > 0 && t->st.step >= c->max_steps) return "max_steps reached";
    if (c->minutes > 0 && elapsed(t) >= c->minutes * 60.0) return "time limit reached";
    if (t->patience_exhausted) return "no improvement for `patience` validations";
    if (t->decay_by_time && t->st.decay_end > 0 && t->st.step >= t->st.decay_end)
        return "the lr schedule's end reached (estimated from the time limit)";
    return NULL;
}

/* A cosine or linear decay over a minutes budget needs the step the budget
 * will end at. It is estimated once, at the end of warm-up, from this
 * session's pace so far (validations included, so a run that validates
 * within warm-up counts them; set-up and the session's first step, which
 * pays for first-touch memory, left out; at least PACE_STEPS steps timed),
 * and kept in the checkpoint: from then on the
 * schedule is a function of the step, as with decay_steps, a resumed run
 * follows it, and the run ends there (or at the time limit, if slower).
 * Data parallelism: the ranks' clocks differ, so they take the largest. */
enum { PACE_STEPS = 10 };
static void estimate_decay_end(trainer *t) {
    if (!t->decay_by_time || t->st.decay_end > 0) return;
    if (t->pace_start == 0) {
        t->pace_start = pmt_now_seconds();
        t->pace_first_step = t->st.step;
    }
    const int64_t done = t->st.step - t->pace_first_step;
    if (t->st.step < t->cfg.warmup || done < PACE_STEPS) return;
    const double seconds = pmt_now_seconds() - t->pace_start;
    const double pace = seconds > 0 ? (double)done / seconds : 0;   /* done >= PACE_STEPS */
    const double left = t->cfg.minutes * 60.0 - elapsed(t);
    double end = (double)t->st.step + (left > 0 ? floor(left * pace) : 0);
    if (end > INT_MAX) end = INT_MAX;
    int agreed = end > (double)t->st.step ? (int)end : (int)t->st.step + 1;
    pmt_dist_allreduce_max_ints(&agreed, 1);
    t->st.decay_end = agreed;
    t->optim.schedule.decay_end = agreed;
    pmt_progress_message(&t->log, "lr schedule: %s decay to step %d, where the %g-minute time limit is expected to "
                         "end at this pace (%.2f steps/s); --decay-steps %d --max-steps %d repeats it exactly",
                         t->cfg.lr_schedule, agreed, t->cfg.minutes, pace, agreed, agreed);
}

static int after_step(trainer *t, pmt_step_status status, double loss, int epoch_end, char *err, size_t errlen) {
    if (t->hooks->on_step) t->hooks->on_step(t->hooks->user, t->st.step, loss, status);
    if (status == PMT_STEP_DIVERGED) {
        int saved = access(t->last_path, F_OK) == 0;
        snprintf(err, errlen, "training diverged at step %lld: %d consecutive steps had a non-finite loss or "
                 "gradient norm (try a lower --lr, a longer --warmup or --clip-norm 1)%s%s",
                 (long long)t->st.step, t->optim.bad_steps, saved ? "; last checkpoint: " : "",
                 saved ? t->last_path : "");
        return -1;
    }
    if (status == PMT_STEP_SKIPPED)
        pmt_progress_message(&t->log, "warning: step %lld skipped (loss %g is not finite or the gradient norm is)",
                             (long long)t->st.step, loss);
    estimate_decay_end(t);
    if (t->cfg.log_every > 0 && t->st.step % t->cfg.log_every == 0 &&
        log_train_row(t, pmt_lr_at(&t->optim.schedule, t->st.step), err, errlen) != 0)
        return -1;
    char line[256];
    format_progress(t, line, sizeof line);
    pmt_progress_live(&t->log, line, 0);
    int due = epoch_end || (t->cfg.valid_every > 0 && t->st.step % t->cfg.valid_every == 0);
    if (due && t->has_valid) return validate(t, err, errlen);
    if (due) return save_last(t, err, errlen);
    return 0;
}

/* stop_reason, agreed by all ranks: one rank leaving the loop alone (its
 * clock passed `minutes`, it got the signal first) would leave the others
 * waiting in the next all-reduce. Alone: stop_reason. */
static const char *agreed_stop_reason(trainer *t, int *stop_signal) {
    const char *reason = stop_reason(t);
    *stop_signal = g_stop_signal;
    if (pmt_dist_size() == 1) return reason;
    int flags[3] = {reason != NULL, *stop_signal != 0, *stop_signal};
    pmt_dist_allreduce_max_ints(flags, 3);
    *stop_signal = flags[1] ? (flags[2] > 0 ? flags[2] : -1) : 0;
    return reason ? reason : flags[0] ? "a stop criterion was reached on another rank" : NULL;
}

/* Data parallelism: what the gradient all-reduce cost this session (its time
 * includes waiting for the slowest rank). Nothing alone. */
static void report_allreduce(trainer *t) {
    long calls = pmt_dist_allreduce_calls();
    if (calls == 0 || t->session_step_seconds <= 0) return;
    double seconds = pmt_dist_allreduce_seconds();
    pmt_progress_message(&t->log, "all-reduce: %ld steps, %.1f ms per step, %.1f%% of step time (%.1f MB, %d ranks)",
                         calls, 1e3 * seconds / (double)calls, 100.0 * seconds / t->session_step_seconds,
                         t->model.n_params * 4.0 / 1e6, pmt_dist_size());
}

static int loop(trainer *t, pmt_train_result *res, char *err, size_t errlen) {
    const char *reason;
    int stop_signal;
    for (;;) {
        /* Signals are let in only here, between steps (core/signals.h). */
        if (t->opt->handle_signals) pmt_stop_signals_poll();
        if ((reason = agreed_stop_reason(t, &stop_signal))) break;
        if (stop_signal) {
            /* A second signal now kills at once; the checkpoint on disk stays whole. */
            if (t->opt->handle_signals) pmt_stop_signals_unhold(&t->signals);
            res->stop = PMT_TRAIN_INTERRUPTED;
            res->signal = stop_signal > 0 ? stop_signal : 0;
            if (save_last(t, err, errlen) != 0) return -1;
            pmt_progress_message(&t->log, "stopped at step %lld; saved %s (run the same command to resume)",
                                 (long long)t->st.step, t->last_path);
            return 0;
        }
        int epoch_end;
        double loss;
        pmt_step_status status = train_step(t, &epoch_end, &loss);
        /* A failed product left NaN, so the optimizer skipped the step; say why and stop. */
        char why[256];
        if (pmt_gemm_take_error(why, sizeof why) != 0) {
            snprintf(err, errlen, "step %lld: %s (the step was not applied)", (long long)t->st.step, why);
            return -1;
        }
        if (check_filled_ids(&t->train_b, "training", err, errlen) != 0) return -1;
        if (after_step(t, status, loss, epoch_end, err, errlen) != 0) return -1;
    }
    res->stop = PMT_TRAIN_DONE;
    if (t->has_valid && t->st.step > 0 && t->last_valid_step != t->st.step && validate(t, err, errlen) != 0)
        return -1;
    if (t->last_saved_step != t->st.step && save_last(t, err, errlen) != 0) return -1;
    report_allreduce(t);
    pmt_progress_message(&t->log, "done: %s at step %lld (%.2f epochs, %.1f min)", reason, (long long)t->st.step,
                         epochs_done(t), elapsed(t) / 60.0);
    return 0;
}

/* Paths, log, batchers, model, optimizer, resume. */
static int setup(trainer *t, char *err, size_t errlen) {
    char inner[512];
    const pmt_config *c = &t->cfg;
    if (pmt_config_validate(c, inner, sizeof inner) != 0) {
        snprintf(err, errlen, "config: %s", inner);
        return -1;
    }
    if (!strcmp(c->early_stopping_metric, "bleu") || !strcmp(c->early_stopping_metric, "chrf")) {
        if (!t->hooks->valid_metric) {
            snprintf(err, errlen, "early_stopping_metric = %s needs validation BLEU/chrF (a valid_metric hook, "
                     "valid_bleu.h); use loss or accuracy", c->early_stopping_metric);
            return -1;
        }
    }
    /* Data parallelism: only rank 0 writes files (and reads last.ckpt), so
     * save_dir need exist on its machine only. */
    const int root = pmt_dist_is_root();
    if (root && pmt_path_make_dirs("save_dir", c->save_dir, err, errlen) != 0) return -1;
    snprintf(t->last_path, sizeof t->last_path, "%s/last.ckpt", c->save_dir);
    snprintf(t->best_path, sizeof t->best_path, "%s/best.ckpt", c->save_dir);
    snprintf(t->tsv_path, sizeof t->tsv_path, "%s/train.tsv", c->save_dir);
    t->log.quiet = t->opt->quiet || !root;
    if (root && claim_save_dir(t, err, errlen) != 0) return -1;
    if (root && t->opt->fresh && remove_old_run(t, err, errlen) != 0) return -1;
    if (setup_batchers(t, err, errlen) != 0) return -1;
    if (pmt_model_init(&t->model, c, t->data->vocab_size, c->batch_tokens, c->max_len, inner, sizeof inner) != 0 ||
        pmt_optim_init(&t->optim, c, t->model.tensors, t->model.n_tensors, t->model.n_params, inner,
                       sizeof inner) != 0) {
        snprintf(err, errlen, "%s", inner);
        return -1;
    }
    pmt_optim_keep_bf16_copy(&t->optim, t->model.params16);
    if (c->ema > 0 && (!(t->ema = malloc(t->model.n_params * sizeof(float))) ||
                       !(t->raw_backup = malloc(t->model.n_params * sizeof(float))))) {
        snprintf(err, errlen, "out of memory for the moving average (--ema) of %zu parameters", t->model.n_params);
        return -1;
    }
    print_build_and_model(t);
    if (root && resume_or_init(t, err, errlen) != 0) return -1;
    share_start(t);
    int64_t keep = (t->opt->fresh || t->st.step == 0) ? -1 : t->st.step;
    if (root && pmt_trainlog_open(&t->log, t->tsv_path, keep, t->opt->quiet, err, errlen) != 0) return -1;
    t->last_saved_step = t->last_valid_step = t->st.step;
    t->session_first_step = t->st.step;
    t->elapsed_base = t->st.elapsed_seconds;
    t->last_loss = t->last_accuracy = NAN;
    t->decay_by_time = t->optim.schedule.kind != PMT_LR_INVERSE_SQRT && pmt_config_decay_end(c) == 0;
    if (!t->decay_by_time) t->st.decay_end = 0;   /* decay_steps or max_steps given: they decide */
    if (t->decay_by_time && t->st.decay_end > 0) {
        t->optim.schedule.decay_end = t->st.decay_end;
        pmt_progress_message(&t->log, "lr schedule: %s decay to step %lld, as estimated from the time limit when the "
                             "run started (--fresh to estimate again)", c->lr_schedule, (long long)t->st.decay_end);
    }
    pmt_progress_message(&t->log, "training: %d pairs in %s%d batches of <= %d tokens (accum %d), %d validation "
                         "pairs; %d thread(s); precision %s%s; logging to %s", t->data->train->n_pairs,
                         t->train_b.n_batches_exact ? "" : "about ", t->train_b.n_batches, c->batch_tokens, c->accum,
                         t->has_valid ? t->data->valid->n_pairs : 0,
                         omp_get_max_threads(), pmt_precision_name(c->precision),
                         !t->precision_auto ? ""
                         : c->precision == PMT_PRECISION_BF16 ? " (auto: this CPU has native bf16 dot products)"
                                                              : " (auto: this CPU has no native bf16 dot products)",
                         t->tsv_path);
    if (pmt_dist_size() > 1)
        pmt_progress_message(&t->log, "data-parallel: %d ranks (%d on this machine) x %d thread(s); each batch is "
                             "split across the ranks; gradient all-reduce of %.1f MB per step", pmt_dist_size(),
                             pmt_dist_local_size(), omp_get_max_threads(), t->model.n_params * 4.0 / 1e6);
    return 0;
}

static void teardown(trainer *t, char *err, size_t errlen, int *rc) {
    char inner[256];
    if (pmt_trainlog_close(&t->log, inner, sizeof inner) != 0 && *rc == 0) {
        snprintf(err, errlen, "%s", inner);
        *rc = -1;
    }
    pmt_optim_free(&t->optim);
    free(t->ema);
    free(t->raw_backup);
    pmt_model_free(&t->model);
    pmt_batcher_free(&t->train_b);
    if (t->has_valid) pmt_batcher_free(&t->valid_b);
    if (t->save_dir_fd >= 0) close(t->save_dir_fd);   /* releases the flock */
}

/* pmt_train_run, told whether the data's vocabulary was checked (the
 * trainer's vocabulary_checked). */
static int run(const pmt_config *cfg, const pmt_train_data *data, int vocabulary_checked,
               const pmt_train_options *opt, const pmt_train_hooks *hooks, pmt_train_result *res, char *err,
               size_t errlen) {
    static const pmt_train_options default_opt = {0, 0, 0};
    static const pmt_train_hooks no_hooks = {NULL, NULL, NULL};
    trainer *t = calloc(1, sizeof *t);
    if (!t) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    t->cfg = *cfg;
    /* auto becomes what this CPU runs best, and that is what the model,
     * train.tsv's start line and every checkpoint record. */
    t->precision_auto = t->cfg.precision == PMT_PRECISION_AUTO;
    if (t->precision_auto) t->cfg.precision = pmt_gemm_precision_auto();
    t->cfg.vocab_size = data->vocab_size;
    t->data = data;
    t->vocabulary_checked = vocabulary_checked;
    t->opt = opt ? opt : &default_opt;
    t->hooks = hooks ? hooks : &no_hooks;
    t->session_start = pmt_now_seconds();
    t->save_dir_fd = -1;
    t->valid_loss = t->valid_accuracy = NAN;
    memset(res, 0, sizeof *res);
    /* Alone: every core. Several ranks on one machine share its cores. */
    pmt_set_threads(cfg->threads > 0 ? cfg->threads : pmt_dist_default_threads());

    g_stop_signal = 0;
    if (t->opt->handle_signals) {
        pmt_stop_signals_catch(&t->signals, on_signal);
        pmt_stop_signals_hold(&t->signals);
    }
    int rc = setup(t, err, errlen);
    if (rc == 0) rc = loop(t, res, err, errlen);
    if (t->opt->handle_signals) {
        pmt_stop_signals_unhold(&t->signals);
        pmt_stop_signals_restore(&t->signals);
    }
    res->steps = t->st.step;
    res->epochs = t->train_b.n_batches ? epochs_done(t) : 0;
    res->valid_loss = t->valid_loss;
    res->valid_accuracy = t->valid_accuracy;
    res->best_metric = t->st.has_best ? t->st.best_metric : NAN;
    teardown(t, err, errlen, &rc);
    free(t);
    return rc;
}

int pmt_train_run(const pmt_config *cfg, const pmt_train_data *data, const pmt_train_options *opt,
                  const pmt_train_hooks *hooks, pmt_train_result *res, char *err, size_t errlen) {
    return run(cfg, data, 0, opt, hooks, res, err, errlen);
}

/* ------------------------------------------------------------------ */
/* from a prepared data directory                                      */

int pmt_train_from_dir(const pmt_config *cfg, const pmt_train_options *opt, const pmt_train_hooks *hooks,
                       pmt_train_result *res, char *err, size_t errlen) {
    char path[PMT_PATH_MAX + 32], inner[512];
    pmt_corpus train = {0}, valid = {0};
    snprintf(path, sizeof path, "%s/spm.model", cfg->data_dir);
    pmt_spm *spm = pmt_spm_load_file(path, inner, sizeof inner);
    if (!spm) {
        snprintf(err, errlen, "%s", inner);
        return -1;
    }
    int rc = -1;
    pmt_train_data data = {&train, &valid, NULL, 0, pmt_spm_vocab_size(spm)};
    data.spm = pmt_spm_serialized(spm, &data.spm_size);
    const uint32_t spm_checksum = pmt_corpus_spm_checksum(data.spm, data.spm_size);
    /* Both files mapped (corpus.h); their headers must name this spm.model. */
    snprintf(path, sizeof path, "%s/train.tok", cfg->data_dir);
    if (pmt_corpus_load(&train, path, inner, sizeof inner) != 0 ||
        pmt_corpus_check_vocabulary(&train, path, data.vocab_size, spm_checksum, inner, sizeof inner) != 0)
        goto done;
    snprintf(path, sizeof path, "%s/valid.tok", cfg->data_dir);
    if (pmt_corpus_load(&valid, path, inner, sizeof inner) != 0 ||
        pmt_corpus_check_vocabulary(&valid, path, data.vocab_size, spm_checksum, inner, sizeof inner) != 0)
        goto done;
    /* version-1 files name no vocabulary: their ids are range-checked at start-up, as before */
    rc = run(cfg, &data, train.vocab_size > 0 && valid.vocab_size > 0, opt, hooks, res, err, errlen);
    goto out;
done:
    snprintf(err, errlen, "%s (run `projmt prepare --data-dir %s`)", inner, cfg->data_dir);
out:
    pmt_corpus_free(&train);
    pmt_corpus_free(&valid);
    pmt_spm_free(spm);
    return rc;
}

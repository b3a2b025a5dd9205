/*
 * batch_queue.c — see batch_queue.h. One mutex guards the FIFO of waiting
 * sentences and the jobs' remaining counts; the worker holds it only to pick
 * a batch and to hand results back, never while decoding. A job's results,
 * alignments and failure are written by the worker alone while any of its
 * sentences is in a batch, and read by its submitter once none is.
 */
#include "serve/batch_queue.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/clock.h"
#include "core/threads.h"
#include "data/spm.h"

struct pmt_serve_item {
    pmt_serve_job *job;
    int index;                   /* sentence of the job */
    pmt_serve_item *next;
};

static int same_options(const pmt_serve_job *a, const pmt_serve_job *b) {
    return a->beam_size == b->beam_size && a->n_best == b->n_best;
}

/* Waiting sentences that can join a batch led by job `lead`. */
static int compatible_waiting(const pmt_serve_queue *q, const pmt_serve_job *lead, int limit) {
    int n = 0;
    for (const pmt_serve_item *it = q->head; it && n < limit; it = it->next) n += same_options(it->job, lead);
    return n;
}

/* The tail, found again from the head after items were unlinked. Caller
 * holds the lock. */
static void find_tail(pmt_serve_queue *q) {
    q->tail = q->head;
    while (q->tail && q->tail->next) q->tail = q->tail->next;
}

/* Unlinks up to max_batch sentences compatible with the head into batch[];
 * returns how many. Caller holds the lock. */
static int take_batch(pmt_serve_queue *q, pmt_serve_item **batch) {
    const pmt_serve_job *lead = q->head->job;
    int n = 0;
    for (pmt_serve_item **link = &q->head; *link && n < q->max_batch;) {
        pmt_serve_item *it = *link;
        if (same_options(it->job, lead)) {
            batch[n++] = it;
            *link = it->next;
        } else {
            link = &it->next;
        }
    }
    /* The loop may stop at a full batch before it reaches the end of the queue. */
    find_tail(q);
    return n;
}

/* Unlinks the waiting sentences of job (a job that failed or was
 * cancelled; every job's when job is NULL), so that nothing more is
 * translated for an answer that will be an error, and wakes each job left
 * with no sentence in a batch. Caller holds the lock. Returns how many were
 * unlinked. */
static long drop_waiting(pmt_serve_queue *q, const pmt_serve_job *job) {
    long dropped = 0;
    for (pmt_serve_item **link = &q->head; *link;) {
        pmt_serve_item *it = *link;
        if (job && it->job != job) {
            link = &it->next;
            continue;
        }
        *link = it->next;
        dropped++;
        if (--it->job->remaining == 0) pthread_cond_signal(&it->job->done);
    }
    find_tail(q);
    return dropped;
}

static void fail_job(pmt_serve_job *job, const char *err) {
    if (job->failed) return;
    job->failed = 1;
    snprintf(job->err, sizeof job->err, "%s", err);
}

/* Copies translation r into the job's result slot; -1 on out of memory. */
static int keep_result(pmt_serve_result *out, const pmt_translation *r) {
    out->n = r->n;
    if (r->n == 0) return 0;
    out->text = calloc((size_t)r->n, sizeof *out->text);
    out->score = calloc((size_t)r->n, sizeof *out->score);
    if (!out->text || !out->score) return -1;
    for (int k = 0; k < r->n; k++) {
        out->text[k] = strdup(r->text[k]);
        out->score[k] = r->hyp[k].score;
        if (!out->text[k]) return -1;
    }
    return 0;
}

/* The alignment of job sentence k with its best hypothesis, tokenized
 * as the translator does (cut to max_len - 1 pieces), into
 * job->alignments[k] — unless its cells would take the job past its budget,
 * which fails the job as over budget before anything is allocated. */
static void align_item(pmt_serve_queue *q, pmt_serve_job *job, int k, const pmt_translation *r, const char *text) {
    const int max_src = q->tr->model.max_len - 1;
    int32_t *ids = malloc((size_t)(max_src + 1) * sizeof *ids);
    char err[256];
    if (!ids) {
        fail_job(job, "out of memory");
        return;
    }
    int n = pmt_spm_encode(q->tr->spm, text, ids, max_src);
    if (n < 0) {
        fail_job(job, "tokenizing failed");
        free(ids);
        return;
    }
    const int src_len = n < max_src ? n : max_src;
    /* rows: the output pieces and </s>; columns: the source pieces and </s> */
    const long cells = (long)q->tr->model.NH * (r->hyp[0].len + 1) * (src_len + 1);
    if (job->cells + cells > job->max_cells) {
        job->over_budget = 1;
        fail_job(job, "the attention passes its budget of cells");
    } else if (pmt_aligner_run(&q->aligner, ids, src_len, r->hyp[0].ids, r->hyp[0].len, &job->alignments[k], err,
                               sizeof err) != 0) {
        fail_job(job, err);
    } else {
        job->cells += cells;
    }
    free(ids);
}

static void run_batch(pmt_serve_queue *q, pmt_serve_item **batch, int n, const char **lines,
                      pmt_translation *res) {
    pmt_serve_job *lead = batch[0]->job;
    char err[256];
    int rc = 0;
    if (lead->beam_size != q->tr->opt.beam_size || lead->n_best != q->tr->opt.n_best) {
        pmt_decode_options opt = q->tr->opt;
        opt.beam_size = lead->beam_size;
        opt.n_best = lead->n_best;
        rc = pmt_translator_set_options(q->tr, &opt, err, sizeof err);
    }
    for (int i = 0; i < n; i++) lines[i] = batch[i]->job->text[batch[i]->index];
    if (rc == 0) rc = pmt_translator_translate(q->tr, lines, n, res, err, sizeof err);
    for (int i = 0; i < n; i++) {
        pmt_serve_job *job = batch[i]->job;
        const int k = batch[i]->index;
        if (rc != 0) {
            fail_job(job, err);
            continue;
        }
        if (job->failed) continue;   /* its answer is an error: nothing more to keep */
        if (keep_result(&job->results[k], &res[i]) != 0) fail_job(job, "out of memory");
        else if (job->align && res[i].n > 0) align_item(q, job, k, &res[i], lines[i]);
    }
    if (q->metrics) pmt_metrics_batch(q->metrics, n);
}

static void free_buffers(pmt_serve_queue *q) {
    free(q->batch);
    free(q->lines);
    free(q->res);
    q->batch = NULL;
    q->lines = NULL;
    q->res = NULL;
}

static void *worker_main(void *arg) {
    pmt_serve_queue *q = arg;
    /* OpenMP's thread count is a per-thread setting: a new thread starts
     * from the default (every core), not from what main() chose. */
    pmt_set_threads(q->threads);
    pthread_mutex_lock(&q->lock);
    for (;;) {
        while (!q->head && !q->stop) pthread_cond_wait(&q->work, &q->lock);
        if (!q->head) break;   /* stopping and drained */
        const pmt_serve_job *lead = q->head->job;
        const double deadline = lead->arrival + q->max_wait;
        while (!q->stop && compatible_waiting(q, lead, q->max_batch) < q->max_batch) {
            double left = deadline - pmt_now_seconds();
            if (left <= 0) break;
            struct timespec until;   /* q->work waits on CLOCK_MONOTONIC */
            clock_gettime(CLOCK_MONOTONIC, &until);
            double t = (double)until.tv_sec + 1e-9 * (double)until.tv_nsec + left;
            until.tv_sec = (time_t)t;
            until.tv_nsec = (long)((t - (double)until.tv_sec) * 1e9);
            if (pthread_cond_timedwait(&q->work, &q->lock, &until) == ETIMEDOUT) break;
        }
        int n = take_batch(q, q->batch);
        pthread_mutex_unlock(&q->lock);
        run_batch(q, q->batch, n, q->lines, q->res);
        pthread_mutex_lock(&q->lock);
        for (int i = 0; i < n; i++) {
            pmt_serve_job *job = q->batch[i]->job;
            /* A job that failed in this batch (over budget, an error) has
             * its other sentences taken off the queue first. */
            if (job->failed && job->remaining > 1) drop_waiting(q, job);
            if (--job->remaining == 0) pthread_cond_signal(&job->done);
        }
    }
    pthread_mutex_unlock(&q->lock);
    return NULL;
}

int pmt_serve_queue_start(pmt_serve_queue *q, pmt_translator *tr, pmt_metrics *metrics, int max_batch,
                          int max_wait_ms, int threads, char *err, size_t errlen) {
    memset(q, 0, sizeof *q);
    if (max_batch < 1 || max_batch > tr->max_batch || max_wait_ms < 0) {
        snprintf(err, errlen, "batch queue: max batch %d must be in [1, %d] and max wait %d ms >= 0", max_batch,
                 tr->max_batch, max_wait_ms);
        return -1;
    }
    q->tr = tr;
    q->metrics = metrics;
    q->max_batch = max_batch;
    q->max_wait = 1e-3 * max_wait_ms;
    q->threads = threads;
    q->batch = calloc((size_t)max_batch, sizeof *q->batch);
    q->lines = calloc((size_t)max_batch, sizeof *q->lines);
    q->res = calloc((size_t)max_batch, sizeof *q->res);
    if (!q->batch || !q->lines || !q->res) {
        snprintf(err, errlen, "batch queue: out of memory");
        free_buffers(q);
        return -1;
    }
    if (pmt_aligner_init(&q->aligner, &tr->model, err, errlen) != 0) {
        free_buffers(q);
        return -1;
    }
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_mutex_init(&q->lock, NULL);
    pthread_cond_init(&q->work, &attr);
    pthread_condattr_destroy(&attr);
    if (pthread_create(&q->worker, NULL, worker_main, q) != 0) {
        snprintf(err, errlen, "batch queue: cannot start the worker thread");
        pmt_aligner_free(&q->aligner);
        pthread_cond_destroy(&q->work);
        pthread_mutex_destroy(&q->lock);
        free_buffers(q);
        return -1;
    }
    q->started = 1;
    return 0;
}

int pmt_serve_queue_submit(pmt_serve_queue *q, pmt_serve_job *job) {
    job->failed = job->over_budget = job->cancelled = 0;
    job->err[0] = '\0';
    job->cells = 0;
    job->results = calloc((size_t)(job->n > 0 ? job->n : 1), sizeof *job->results);
    job->items = calloc((size_t)(job->n > 0 ? job->n : 1), sizeof *job->items);
    job->alignments = job->align ? calloc((size_t)(job->n > 0 ? job->n : 1), sizeof *job->alignments) : NULL;
    if (!job->results || !job->items || (job->align && !job->alignments)) {
        fail_job(job, "out of memory");
        return -1;
    }
    if (job->n == 0) return 0;
    pthread_cond_init(&job->done, NULL);
    job->arrival = pmt_now_seconds();
    job->remaining = job->n;
    pthread_mutex_lock(&q->lock);
    if (q->cancelled) {
        job->cancelled = 1;
        job->remaining = 0;
    }
    for (int i = 0; i < job->remaining; i++) {
        pmt_serve_item *it = &job->items[i];
        it->job = job;
        it->index = i;
        it->next = NULL;
        if (q->tail) q->tail->next = it;
        else q->head = it;
        q->tail = it;
    }
    pthread_cond_signal(&q->work);
    while (job->remaining > 0) pthread_cond_wait(&job->done, &q->lock);
    pthread_mutex_unlock(&q->lock);
    pthread_cond_destroy(&job->done);
    if (job->cancelled) snprintf(job->err, sizeof job->err, "the server is stopping: its queue was cancelled");
    return job->failed || job->cancelled ? -1 : 0;
}

long pmt_serve_queue_cancel(pmt_serve_queue *q) {
    if (!q->started) return 0;
    pthread_mutex_lock(&q->lock);
    q->cancelled = 1;
    /* Only the flag, under the lock: the worker may be writing the job's
     * results and err for its sentences in the batch being decoded. */
    for (pmt_serve_item *it = q->head; it; it = it->next) it->job->cancelled = 1;
    const long dropped = drop_waiting(q, NULL);
    pthread_mutex_unlock(&q->lock);
    return dropped;
}

void pmt_serve_queue_stop(pmt_serve_queue *q) {
    if (!q->started) return;
    pthread_mutex_lock(&q->lock);
    q->stop = 1;
    pthread_cond_broadcast(&q->work);
    pthread_mutex_unlock(&q->lock);
    pthread_join(q->worker, NULL);
    pmt_aligner_free(&q->aligner);
    pthread_cond_destroy(&q->work);
    pthread_mutex_destroy(&q->lock);
    free_buffers(q);
    q->started = 0;
}

void pmt_serve_job_free(pmt_serve_job *job) {
    for (int i = 0; job->results && i < job->n; i++) {
        for (int k = 0; k < job->results[i].n; k++) free(job->results[i].text ? job->results[i].text[k] : NULL);
        free(job->results[i].text);
        free(job->results[i].score);
    }
    free(job->results);
    free(job->items);
    for (int i = 0; job->alignments && i < job->n; i++) pmt_alignment_free(&job->alignments[i]);
    free(job->alignments);
    job->results = NULL;
    job->items = NULL;
    job->alignments = NULL;
}

/*
 * batch_queue.h — dynamic batching: sentences of concurrent requests are
 * decoded together by one worker thread.
 *
 * A request thread submits a job (its sentences and search options) and
 * blocks until every sentence is translated. The worker takes the oldest
 * waiting sentence and every later one with the same options, up to
 * max_batch, waiting at most max_wait_ms after the oldest arrived for the
 * batch to fill; then it translates them in one pmt_translator call. Under
 * load, sentences queue while a batch decodes, so the next batch is full at
 * once — which is what brings the throughput close to `translate -i`.
 *
 * Ownership: the queue borrows the translator (which must outlive it and is
 * used by the worker thread only, as is the aligner it owns). A job is the
 * caller's; the results pmt_serve_queue_submit fills are freed with
 * pmt_serve_job_free.
 */
#ifndef PROJMT_SERVE_BATCH_QUEUE_H
#define PROJMT_SERVE_BATCH_QUEUE_H

#include <pthread.h>
#include <stddef.h>

#include "translate/alignment.h"
#include "serve/metrics.h"
#include "translate/translator.h"

typedef struct pmt_serve_result {
    int n;                       /* hypotheses, best first (0 for an empty sentence) */
    char **text;                 /* [n] */
    double *score;               /* [n] log-prob / length^α */
} pmt_serve_result;

typedef struct pmt_serve_item pmt_serve_item;

typedef struct pmt_serve_job {
    /* set by the caller */
    int n;                       /* sentences */
    const char *const *text;     /* [n] valid UTF-8, no NUL (borrowed) */
    int beam_size, n_best;
    int align;                   /* also fill alignment, of every sentence */
    /* filled by pmt_serve_queue_submit */
    pmt_serve_result *results;   /* [n] */
    pmt_alignment alignment;     /* when align: the sentences' alignments joined (pmt_alignment_concat;
                                    empty sentences have none, so none at all when every one is empty) */
    int failed;                  /* 1: err says why */
    char err[256];
    /* private */
    pmt_alignment *parts;        /* [n] when align: each sentence's, joined into alignment at the end */
    pmt_serve_item *items;
    int remaining;
    double arrival;
    pthread_cond_t done;
} pmt_serve_job;

typedef struct pmt_serve_queue {
    pmt_translator *tr;          /* borrowed; sized for max_batch and the largest beam */
    pmt_metrics *metrics;        /* borrowed */
    pmt_aligner aligner;
    int max_batch;
    double max_wait;             /* seconds */
    int threads;                 /* decoding threads (0 = all cores) */
    pthread_mutex_t lock;
    pthread_cond_t work;
    pmt_serve_item *head, *tail;
    int stop;
    pthread_t worker;
    int started;
    /* the worker's batch, [max_batch] each */
    pmt_serve_item **batch;
    const char **lines;
    pmt_translation *res;
} pmt_serve_queue;

/* Starts the worker, which decodes with `threads` threads (0 = all cores).
 * 0, or -1 with err. */
int pmt_serve_queue_start(pmt_serve_queue *q, pmt_translator *tr, pmt_metrics *metrics, int max_batch,
                          int max_wait_ms, int threads, char *err, size_t errlen);
/* Translates every sentence of job (blocking). 0, or -1 with job->err
 * (out of memory, or the translator failed). */
int pmt_serve_queue_submit(pmt_serve_queue *q, pmt_serve_job *job);
/* Lets the worker finish every queued sentence, then joins it. */
void pmt_serve_queue_stop(pmt_serve_queue *q);
void pmt_serve_job_free(pmt_serve_job *job);

#endif

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
 * A job that asks for alignments carries a budget of cells (heads x output
 * pieces x source pieces, summed over its sentences): each sentence's
 * alignment is made only while the sum stays within it, so what a job holds
 * grows with its text, never with a joined square. A job that fails (over
 * its budget, or an error) has its sentences still waiting taken off the
 * queue: nothing is translated for an answer that will not be sent.
 *
 * The stop: pmt_serve_queue_cancel takes every waiting sentence off the
 * queue and fails its job as cancelled (the server answers 503 past its
 * drain deadline), so a full queue cannot hold a stop for the time it
 * takes to translate it; the batch being decoded finishes first.
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
    int align;                   /* also fill alignments, of every sentence */
    long max_cells;              /* when align: the budget of alignment cells over all sentences */
    /* filled by pmt_serve_queue_submit */
    pmt_serve_result *results;   /* [n] */
    pmt_alignment *alignments;   /* [n] when align: each sentence's own (an empty sentence has none: weights NULL) */
    long cells;                  /* alignment cells made: n_heads x tgt_len x src_len summed */
    int failed;                  /* 1: err says why (over_budget: the alignments would pass max_cells) */
    int over_budget;
    int cancelled;               /* taken off the queue by pmt_serve_queue_cancel (the answer is that,
                                    whatever else failed) */
    char err[256];
    /* private */
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
    int cancelled;               /* pmt_serve_queue_cancel ran: every job submitted later fails at once */
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
 * (out of memory, the translator failed, job->over_budget, job->cancelled). */
int pmt_serve_queue_submit(pmt_serve_queue *q, pmt_serve_job *job);
/* Fails every job with sentences still waiting as cancelled, and every job
 * submitted from now on; sentences being decoded finish. Returns how many
 * sentences were taken off the queue. */
long pmt_serve_queue_cancel(pmt_serve_queue *q);
/* Lets the worker finish every queued sentence, then joins it. */
void pmt_serve_queue_stop(pmt_serve_queue *q);
void pmt_serve_job_free(pmt_serve_job *job);

#endif

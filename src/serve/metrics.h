/*
 * metrics.h — the server's counters and histograms, rendered in the
 * Prometheus text exposition format (version 0.0.4) for GET /metrics.
 *
 *   projmt_requests_total{endpoint,code}   responses sent, by endpoint and status
 *   projmt_errors_total{endpoint}          of those, status >= 400
 *   projmt_sentences_total                 sentences translated
 *   projmt_request_duration_seconds        latency of POST /translate (histogram)
 *   projmt_batch_size                      sentences per decoder batch (histogram)
 *   projmt_in_flight_requests              requests being handled (gauge)
 *   projmt_connections_closed_total{reason} requests cut without an answer:
 *                                          body_too_large (a chunked body passed
 *                                          the limit), request_timeout (a body
 *                                          still arriving at the deadline)
 *
 * Every function is thread-safe (one mutex; updates are a few additions).
 * Ownership: pmt_metrics is a plain value with a mutex; pmt_metrics_render
 * returns a malloc'd string the caller frees.
 */
#ifndef PROJMT_SERVE_METRICS_H
#define PROJMT_SERVE_METRICS_H

#include <pthread.h>

enum { PMT_METRICS_MAX_SERIES = 64, PMT_LATENCY_BUCKETS = 12, PMT_BATCH_BUCKETS = 9 };
/* Why a request was cut without an answer (libmicrohttpd 0.9 can queue an
 * answer only before the body or after all of it). */
typedef enum { PMT_CLOSED_BODY_TOO_LARGE = 0, PMT_CLOSED_REQUEST_TIMEOUT = 1, PMT_CLOSED_REASONS = 2 } pmt_closed_reason;

typedef struct pmt_histogram {
    const double *bounds;        /* [n] upper bounds (le); +Inf is implicit */
    int n;
    long counts[16];             /* [n + 1] per bucket (not cumulative) */
    double sum;
    long count;
} pmt_histogram;

typedef struct pmt_metrics {
    pthread_mutex_t lock;
    struct { const char *endpoint; int code; long n; } series[PMT_METRICS_MAX_SERIES];
    int n_series;
    long sentences;
    long in_flight;
    long closed[PMT_CLOSED_REASONS];
    pmt_histogram latency, batch;
} pmt_metrics;

void pmt_metrics_init(pmt_metrics *mx);
void pmt_metrics_free(pmt_metrics *mx);
/* One response: endpoint is a static string (the route, or "other"). */
void pmt_metrics_response(pmt_metrics *mx, const char *endpoint, int code);
void pmt_metrics_latency(pmt_metrics *mx, double seconds);
void pmt_metrics_batch(pmt_metrics *mx, int sentences);
void pmt_metrics_in_flight(pmt_metrics *mx, int delta);
void pmt_metrics_closed(pmt_metrics *mx, pmt_closed_reason reason);
char *pmt_metrics_render(pmt_metrics *mx);
/* Sentences translated so far (read under the lock: the worker adds to it). */
long pmt_metrics_sentences(pmt_metrics *mx);

#endif

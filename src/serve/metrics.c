/*
 * metrics.c — see metrics.h. Histogram buckets are stored per bucket and
 * made cumulative when rendered, as the format requires.
 */
#include "serve/metrics.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const double latency_bounds[PMT_LATENCY_BUCKETS - 1] = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
                                                               0.5,   1,    2.5,   5,    10};
static const double batch_bounds[PMT_BATCH_BUCKETS - 1] = {1, 2, 4, 8, 16, 32, 64, 128};

void pmt_metrics_init(pmt_metrics *mx) {
    memset(mx, 0, sizeof *mx);
    pthread_mutex_init(&mx->lock, NULL);
    mx->latency.bounds = latency_bounds;
    mx->latency.n = PMT_LATENCY_BUCKETS - 1;
    mx->batch.bounds = batch_bounds;
    mx->batch.n = PMT_BATCH_BUCKETS - 1;
}

void pmt_metrics_free(pmt_metrics *mx) { pthread_mutex_destroy(&mx->lock); }

static void observe(pmt_histogram *h, double value) {
    int b = 0;
    while (b < h->n && value > h->bounds[b]) b++;
    h->counts[b]++;
    h->sum += value;
    h->count++;
}

void pmt_metrics_response(pmt_metrics *mx, const char *endpoint, int code) {
    pthread_mutex_lock(&mx->lock);
    int i = 0;
    while (i < mx->n_series && !(mx->series[i].code == code && !strcmp(mx->series[i].endpoint, endpoint))) i++;
    if (i == mx->n_series && i < PMT_METRICS_MAX_SERIES) {
        mx->series[i].endpoint = endpoint;
        mx->series[i].code = code;
        mx->series[i].n = 0;
        mx->n_series++;
    }
    if (i < mx->n_series) mx->series[i].n++;
    pthread_mutex_unlock(&mx->lock);
}

void pmt_metrics_latency(pmt_metrics *mx, double seconds) {
    pthread_mutex_lock(&mx->lock);
    observe(&mx->latency, seconds);
    pthread_mutex_unlock(&mx->lock);
}

void pmt_metrics_batch(pmt_metrics *mx, int sentences) {
    pthread_mutex_lock(&mx->lock);
    observe(&mx->batch, sentences);
    mx->sentences += sentences;
    pthread_mutex_unlock(&mx->lock);
}

void pmt_metrics_in_flight(pmt_metrics *mx, int delta) {
    pthread_mutex_lock(&mx->lock);
    mx->in_flight += delta;
    pthread_mutex_unlock(&mx->lock);
}

void pmt_metrics_closed(pmt_metrics *mx, pmt_closed_reason reason) {
    pthread_mutex_lock(&mx->lock);
    mx->closed[reason]++;
    pthread_mutex_unlock(&mx->lock);
}

/* A growing text buffer; on allocation failure it stops growing and the
 * render returns NULL. */
typedef struct text_buf { char *s; size_t len, cap; int failed; } text_buf;

static void put(text_buf *b, const char *fmt, ...) {
    if (b->failed) return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(b->s + b->len, b->cap - b->len, fmt, ap);
        va_end(ap);
        if (n < 0) { b->failed = 1; return; }
        if (b->len + (size_t)n < b->cap) { b->len += (size_t)n; return; }
        size_t cap = 2 * b->cap + (size_t)n;
        char *s = realloc(b->s, cap);
        if (!s) { b->failed = 1; return; }
        b->s = s;
        b->cap = cap;
    }
}

static void put_histogram(text_buf *b, const char *name, const char *help, const pmt_histogram *h) {
    put(b, "# HELP %s %s\n# TYPE %s histogram\n", name, help, name);
    long cumulative = 0;
    for (int i = 0; i < h->n; i++) {
        cumulative += h->counts[i];
        put(b, "%s_bucket{le=\"%g\"} %ld\n", name, h->bounds[i], cumulative);
    }
    cumulative += h->counts[h->n];
    put(b, "%s_bucket{le=\"+Inf\"} %ld\n%s_sum %.9g\n%s_count %ld\n", name, cumulative, name, h->sum, name, h->count);
}

char *pmt_metrics_render(pmt_metrics *mx) {
    text_buf b = {malloc(4096), 0, 4096, 0};
    if (!b.s) return NULL;
    b.s[0] = '\0';
    pthread_mutex_lock(&mx->lock);
    put(&b, "# HELP projmt_requests_total HTTP responses by endpoint and status code.\n"
            "# TYPE projmt_requests_total counter\n");
    for (int i = 0; i < mx->n_series; i++)
        put(&b, "projmt_requests_total{endpoint=\"%s\",code=\"%d\"} %ld\n", mx->series[i].endpoint,
            mx->series[i].code, mx->series[i].n);
    put(&b, "# HELP projmt_errors_total HTTP responses with status >= 400 by endpoint.\n"
            "# TYPE projmt_errors_total counter\n");
    for (int i = 0; i < mx->n_series; i++) {
        if (mx->series[i].code < 400) continue;
        long n = 0;
        int first = 1;
        for (int j = 0; j < mx->n_series; j++) {
            if (mx->series[j].code < 400 || strcmp(mx->series[j].endpoint, mx->series[i].endpoint)) continue;
            if (j < i) first = 0;
            n += mx->series[j].n;
        }
        if (first) put(&b, "projmt_errors_total{endpoint=\"%s\"} %ld\n", mx->series[i].endpoint, n);
    }
    put(&b, "# HELP projmt_sentences_total Sentences translated.\n# TYPE projmt_sentences_total counter\n"
            "projmt_sentences_total %ld\n", mx->sentences);
    put(&b, "# HELP projmt_in_flight_requests Requests being handled.\n# TYPE projmt_in_flight_requests gauge\n"
            "projmt_in_flight_requests %ld\n", mx->in_flight);
    static const char *const closed_names[PMT_CLOSED_REASONS] = {"body_too_large", "request_timeout"};
    put(&b, "# HELP projmt_connections_closed_total Requests cut without an answer, by reason.\n"
            "# TYPE projmt_connections_closed_total counter\n");
    for (int r = 0; r < PMT_CLOSED_REASONS; r++)
        put(&b, "projmt_connections_closed_total{reason=\"%s\"} %ld\n", closed_names[r], mx->closed[r]);
    put_histogram(&b, "projmt_request_duration_seconds", "Latency of POST /translate, arrival to response.",
                  &mx->latency);
    put_histogram(&b, "projmt_batch_size", "Sentences per decoder batch.", &mx->batch);
    pthread_mutex_unlock(&mx->lock);
    if (b.failed) {
        free(b.s);
        return NULL;
    }
    return b.s;
}

long pmt_metrics_sentences(pmt_metrics *mx) {
    pthread_mutex_lock(&mx->lock);
    const long sentences = mx->sentences;
    pthread_mutex_unlock(&mx->lock);
    return sentences;
}

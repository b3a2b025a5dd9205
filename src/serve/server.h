/*
 * server.h — `projmt serve`: an HTTP/1.1 translation server (libmicrohttpd,
 * one thread per connection) in front of the dynamic batch queue.
 *
 * Endpoints (exact paths; nothing else is served and no request ever
 * touches the file system):
 *   POST /translate   LibreTranslate's API (serve/request.h), JSON answers
 *   GET  /languages   LibreTranslate's shape
 *   GET  /health      {"status": "ok"}
 *   GET  /metrics     Prometheus text (serve/metrics.h)
 *   GET  /info        the model's facts, limits and card scores (the page's panel)
 *   GET  /            the web page, embedded in the binary
 * Errors are {"error": "..."} with 400 (bad request, JSON, language pair,
 * limits on sentences and characters), 403 (API key), 404, 405, 413 (body
 * size) or 500. Idle connections close after the timeout.
 *
 * Ownership: pmt_server owns its translator, queue, daemon and strings;
 * pmt_server_stop releases everything.
 */
#ifndef PROJMT_SERVE_SERVER_H
#define PROJMT_SERVE_SERVER_H

#include <pthread.h>
#include <stddef.h>

#include "serve/batch_queue.h"
#include "serve/metrics.h"
#include "serve/request.h"
#include "translate/translator.h"

typedef struct pmt_serve_options {
    const char *model_path;      /* checkpoint */
    const char *card_path;       /* model card (Markdown); NULL: README.md beside the model, if any */
    const char *host;            /* address to bind (default 127.0.0.1) */
    int port;                    /* 0 = any free port (see pmt_server.port) */
    const char *api_key;         /* NULL = open */
    int max_batch;               /* sentences per decoder batch */
    int max_wait_ms;             /* wait for a batch to fill */
    int timeout_s;               /* idle connection timeout */
    int max_connections;
    int threads;                 /* decoding threads (0 = all cores) */
    pmt_serve_limits limits;     /* default_beam/max_beam included */
    pmt_decode_options decode;   /* normalize, max_length_* (beam and n-best per request) */
} pmt_serve_options;

typedef struct pmt_server {
    pmt_serve_options opt;
    pmt_translator tr;
    pmt_metrics metrics;
    pmt_serve_queue queue;
    struct MHD_Daemon *daemon;
    char *info_json;             /* GET /info body */
    int port;                    /* bound port */
    pthread_mutex_t lock;        /* guards in_flight and stopping */
    pthread_cond_t idle;
    int in_flight;               /* requests between arrival and completion */
    int stopping;                /* set by pmt_server_stop: new requests get 503 */
} pmt_server;

/* Loads the model, starts the batch worker and the HTTP daemon. 0, or -1
 * with err (model, address in use, bad options); nothing is left running. */
int pmt_server_start(pmt_server *s, const pmt_serve_options *opt, char *err, size_t errlen);

/* Graceful stop: no new connections; every request already received is
 * answered, and a request arriving later on an open keep-alive connection
 * gets 503 with "Connection: close" (otherwise clients that keep sending
 * keep in_flight above zero and the drain never ends); then the daemon, the
 * worker and the model are released. */
void pmt_server_stop(pmt_server *s);

#endif

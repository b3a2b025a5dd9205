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
 * size; attention past PMT_SERVE_MAX_ATTENTION_CELLS, serve/request.h), 408
 * (a request not received within request_timeout_s), 503 (stopping) or 500.
 *
 * Slow clients: connections idle for timeout_s are closed (libmicrohttpd's
 * timeout, which every byte restarts). So that a client trickling bytes
 * cannot hold a connection either, each connection's client has a turn of
 * at most request_timeout_s: from the accept (or from the previous answer,
 * on a keep-alive connection) until its request — headers and body — is
 * received, and from an answer until it has been read. A watchdog thread
 * closes a connection whose turn passes that (shutdown of its socket);
 * the time the server spends answering does not count.
 *
 * Client addresses: one holds at most max_connections_per_ip connections,
 * where an IPv6 address counts by its /64 (one host is usually given a
 * whole /64), an IPv4 address by itself and an IPv4-mapped IPv6 address as
 * that IPv4 one. Host "::" listens on IPv6 and IPv4 both. With an API key, a request that
 * gives a wrong key in "Authorization: Bearer" is refused before its body
 * is read, and one without a key anywhere gets 403 before any field of
 * the request is checked (the body is decoded only to find api_key).
 *
 * Ownership: pmt_server owns its translator, queue, daemon and strings;
 * pmt_server_stop releases everything.
 */
#ifndef PROJMT_SERVE_SERVER_H
#define PROJMT_SERVE_SERVER_H

#include <pthread.h>
#include <stddef.h>
#include <sys/socket.h>

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
    int request_timeout_s;       /* a client's turn: accept (or the last answer) to its request received */
    int drain_timeout_s;         /* pmt_server_stop waits this long for requests in flight */
    int max_connections;
    int max_connections_per_ip;
    int threads;                 /* decoding threads (0 = all cores) */
    pmt_serve_limits limits;     /* default_beam/max_beam included */
    pmt_decode_options decode;   /* normalize, max_length_* (beam and n-best per request) */
} pmt_serve_options;

typedef struct pmt_serve_connection pmt_serve_connection;   /* server.c: one accepted connection */

typedef struct pmt_server {
    pmt_serve_options opt;
    pmt_translator tr;
    pmt_metrics metrics;
    pmt_serve_queue queue;
    struct MHD_Daemon *daemon;
    char *info_json;             /* GET /info body */
    int port;                    /* bound port */
    pthread_mutex_t lock;        /* guards everything below */
    pthread_cond_t idle;         /* broadcast when in_flight, serving or sending falls */
    int in_flight;               /* requests between arrival and completion */
    int serving;                 /* of those, held by the server (received, not yet answered) */
    int sending;                 /* of those, answered, the answer not yet read */
    int stopping;                /* set by pmt_server_stop: new requests get 503 */
    pmt_serve_connection *connections;   /* every open connection (the watchdog's and the address limit's list) */
    pthread_t watchdog;
    pthread_cond_t watchdog_wake;        /* CLOCK_MONOTONIC */
    int watchdog_started, watchdog_stop;
} pmt_server;

/* The group a client address counts in for max_connections_per_ip: an
 * IPv4 address (also IPv4-mapped IPv6) by itself, another IPv6 address by
 * its first 64 bits. Writes PMT_ADDRESS_GROUP_BYTES bytes; two addresses
 * share a group when the bytes are equal. */
enum { PMT_ADDRESS_GROUP_BYTES = 9 };
void pmt_serve_address_group(const struct sockaddr *addr, unsigned char group[PMT_ADDRESS_GROUP_BYTES]);

/* Loads the model, starts the batch worker and the HTTP daemon. 0, or -1
 * with err (model, address in use, bad options); nothing is left running. */
int pmt_server_start(pmt_server *s, const pmt_serve_options *opt, char *err, size_t errlen);

/* Graceful stop: no new connections; every request already received is
 * answered, and a request arriving later on an open keep-alive connection
 * gets 503 with "Connection: close" (otherwise clients that keep sending
 * keep in_flight above zero and the drain never ends). The wait lasts at
 * most drain_timeout_s: a client still sending its body then (one byte
 * every few seconds keeps an idle timeout from ever firing) has its
 * connection closed; a request already being translated finishes first.
 * Then the daemon, the worker and the model are released. Returns the
 * sentences translated over the server's life, counted after the worker
 * stopped. */
long pmt_server_stop(pmt_server *s);

#endif

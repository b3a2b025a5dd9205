/*
 * server.c — see server.h. libmicrohttpd calls handle() several times per
 * request: first with the headers (the request state is created), then with
 * pieces of the body (buffered up to the body limit), then once more with no
 * data, when the answer is built and queued. Translation requests block
 * their connection thread in the batch queue until the worker is done.
 *
 * libmicrohttpd 0.9.75 has no deadline of its own that covers the headers
 * (its timeout restarts at every byte, and the first callback comes after
 * the last header), so the server keeps its own record of each connection:
 * made and dropped by the notify-connection callback (called by the daemon
 * thread, before the socket is closed), read by the accept-policy callback
 * (the per-address limit, by /64 for IPv6) and by a watchdog thread that
 * shuts a connection's socket down when its client's turn passes
 * request_timeout_s. Every record field is read and written under s->lock.
 */
#include "serve/server.h"

#include <ctype.h>
#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <microhttpd.h>

#include "core/clock.h"
#include "core/utf8.h"
#include "model/checkpoint.h"
#include "nn/gemm.h"
#include "serve/page.h"

/* ---- routes ---------------------------------------------------------- */

typedef enum { R_PAGE, R_TRANSLATE, R_LANGUAGES, R_HEALTH, R_METRICS, R_INFO, R_NONE } route_id;

static const struct {
    const char *path;
    const char *method;          /* GET routes also answer HEAD */
} routes[R_NONE] = {
    [R_PAGE] = {"/", "GET"},           [R_TRANSLATE] = {"/translate", "POST"},
    [R_LANGUAGES] = {"/languages", "GET"}, [R_HEALTH] = {"/health", "GET"},
    [R_METRICS] = {"/metrics", "GET"},    [R_INFO] = {"/info", "GET"},
};

static route_id find_route(const char *url) {
    for (int r = 0; r < R_NONE; r++)
        if (!strcmp(url, routes[r].path)) return (route_id)r;
    return R_NONE;
}

/* One accepted connection (the notify-connection callback's socket context). */
struct pmt_serve_connection {
    pmt_serve_connection *prev, *next;
    MHD_socket fd;
    unsigned char group[PMT_ADDRESS_GROUP_BYTES];   /* pmt_serve_address_group of the client */
    double turn_start;           /* the client's turn began: accept, or the last answer queued */
    int serving;                 /* the server holds a request of it: the turn is paused */
    int cut;                     /* closed for its deadline, and counted (once) */
};

/* Where a request is: its counts in pmt_server (serving, sending) follow. */
typedef enum { PHASE_RECEIVING, PHASE_SERVING, PHASE_SENDING } request_phase;

/* Per-request state, created on the first call. */
typedef struct request_state {
    route_id route;
    double start;
    char *body;
    size_t len, cap;
    int responded;               /* a response was queued early */
    request_phase phase;
    pmt_serve_connection *conn;  /* NULL when its record could not be made (the connection is being closed) */
} request_state;

/* Moves st to phase, keeping the server's counts and its connection's
 * turn: serving pauses the deadline, an answer starts the client's next turn. */
static void set_phase(pmt_server *s, request_state *st, request_phase phase) {
    pthread_mutex_lock(&s->lock);
    if (st->phase == PHASE_SERVING) s->serving--;
    if (st->phase == PHASE_SENDING) s->sending--;
    if (phase == PHASE_SERVING) s->serving++;
    if (phase == PHASE_SENDING) s->sending++;
    if (st->conn) {
        st->conn->serving = phase == PHASE_SERVING;
        if (phase == PHASE_SENDING) st->conn->turn_start = pmt_now_seconds();
    }
    st->phase = phase;
    pthread_cond_broadcast(&s->idle);
    pthread_mutex_unlock(&s->lock);
}

/* Whether st's client has used up its turn. */
static int turn_over(pmt_server *s, const request_state *st) {
    pthread_mutex_lock(&s->lock);
    const int over = st->conn && pmt_now_seconds() - st->conn->turn_start > s->opt.request_timeout_s;
    pthread_mutex_unlock(&s->lock);
    return over;
}

/* ---- responses -------------------------------------------------------- */

static enum MHD_Result send_response(pmt_server *s, struct MHD_Connection *c, request_state *st, int status,
                                     const char *content_type, struct MHD_Response *resp) {
    if (!resp) return MHD_NO;
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, content_type);
    MHD_add_response_header(resp, "X-Content-Type-Options", "nosniff");
    if (st->route == R_PAGE && status == 200)
        MHD_add_response_header(resp, "Content-Security-Policy",
                                "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
                                "connect-src 'self'; img-src data:; base-uri 'none'; form-action 'none'");
    if (status == 503) {         /* shutting down: this connection takes no more requests */
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONNECTION, "close");
        MHD_add_response_header(resp, MHD_HTTP_HEADER_RETRY_AFTER, "1");
    }
    if (status == 405)
        MHD_add_response_header(resp, MHD_HTTP_HEADER_ALLOW,
                                st->route == R_TRANSLATE ? "POST" : "GET, HEAD");
    enum MHD_Result rc = MHD_queue_response(c, (unsigned)status, resp);
    MHD_destroy_response(resp);
    st->responded = 1;
    set_phase(s, st, PHASE_SENDING);
    if (rc != MHD_YES) return rc;   /* MHD closes the connection: nothing was answered */
    const char *endpoint = st->route == R_NONE ? "other" : routes[st->route].path;
    pmt_metrics_response(&s->metrics, endpoint, status);
    if (st->route == R_TRANSLATE) pmt_metrics_latency(&s->metrics, pmt_now_seconds() - st->start);
    return rc;
}

static enum MHD_Result send_text(pmt_server *s, struct MHD_Connection *c, request_state *st, int status,
                                 const char *content_type, char *text) {
    if (!text) return MHD_NO;
    return send_response(s, c, st, status, content_type,
                         MHD_create_response_from_buffer(strlen(text), text, MHD_RESPMEM_MUST_FREE));
}

/* Sends a JSON value (reference stolen). */
static enum MHD_Result send_json(pmt_server *s, struct MHD_Connection *c, request_state *st, int status,
                                 json_t *value) {
    char *text = value ? json_dumps(value, JSON_COMPACT | JSON_REAL_PRECISION(4)) : NULL;
    json_decref(value);
    if (!text) return MHD_NO;
    return send_text(s, c, st, status, "application/json; charset=utf-8", text);
}

/* The message is made well-formed UTF-8 first: jansson refuses anything
 * else, and a refused message would drop the connection with no answer. */
static enum MHD_Result send_error(pmt_server *s, struct MHD_Connection *c, request_state *st, int status,
                                  const char *message) {
    const size_t len = strlen(message);
    char *clean = malloc(3 * len + 1);
    json_t *answer = json_pack("{s:s}", "error", clean ? (pmt_utf8_sanitize(message, len, clean), clean) : "out of memory");
    free(clean);
    return send_json(s, c, st, status, answer);
}

/* ---- POST /translate ---------------------------------------------------- */

/* Form fields collected by MHD's post processor into a JSON object; a key
 * given twice (q) becomes an array. */
typedef struct form_ctx {
    json_t *obj;
    char *key;
    char *value;
    size_t len;
    int replaced, failed;
} form_ctx;

static void form_flush(form_ctx *f) {
    if (!f->key) return;
    char *clean = malloc(3 * f->len + 1);
    if (!clean) {
        f->failed = 1;
    } else {
        f->replaced += pmt_utf8_sanitize(f->value ? f->value : "", f->len, clean);
        json_t *v = json_string(clean), *old = json_object_get(f->obj, f->key);
        if (!v) f->failed = 1;
        else if (json_is_array(old)) json_array_append_new(old, v);
        else if (old) json_object_set_new(f->obj, f->key, json_pack("[Oo]", old, v));
        else json_object_set_new(f->obj, f->key, v);
    }
    free(clean);
    free(f->key);
    free(f->value);
    f->key = f->value = NULL;
    f->len = 0;
}

static enum MHD_Result form_field(void *cls, enum MHD_ValueKind kind, const char *key, const char *filename,
                                  const char *content_type, const char *transfer_encoding, const char *data,
                                  uint64_t off, size_t size) {
    (void)kind; (void)filename; (void)content_type; (void)transfer_encoding;
    form_ctx *f = cls;
    if (off == 0 || !f->key || strcmp(f->key, key)) {
        form_flush(f);
        if (!(f->key = strdup(key))) { f->failed = 1; return MHD_NO; }
    }
    char *grown = realloc(f->value, f->len + size + 1);
    if (!grown) { f->failed = 1; return MHD_NO; }
    memcpy(grown + f->len, data, size);
    f->value = grown;
    f->len += size;
    grown[f->len] = '\0';
    return MHD_YES;
}

static int is_form(const char *content_type) {
    return content_type && (!strncasecmp(content_type, MHD_HTTP_POST_ENCODING_FORM_URLENCODED,
                                         strlen(MHD_HTTP_POST_ENCODING_FORM_URLENCODED)) ||
                            !strncasecmp(content_type, MHD_HTTP_POST_ENCODING_MULTIPART_FORMDATA,
                                         strlen(MHD_HTTP_POST_ENCODING_MULTIPART_FORMDATA)));
}

/* Parses the body as a form into *obj. 0, or an HTTP status with err. */
static int parse_form(struct MHD_Connection *c, const request_state *st, json_t **obj, int *replaced, char *err,
                      size_t errlen) {
    form_ctx f = {json_object(), NULL, NULL, 0, 0, 0};
    struct MHD_PostProcessor *pp = MHD_create_post_processor(c, 16 * 1024, form_field, &f);
    int ok = f.obj && pp && MHD_post_process(pp, st->body ? st->body : "", st->len) == MHD_YES;
    if (pp) MHD_destroy_post_processor(pp);   /* delivers the last field */
    form_flush(&f);
    if (!ok || f.failed) {
        json_decref(f.obj);
        snprintf(err, errlen, "Invalid request: the form body could not be parsed");
        return f.failed ? 500 : 400;
    }
    *obj = f.obj;
    *replaced = f.replaced;
    return 0;
}

/* Constant-time key check: the time depends on the configured key's length
 * only, never on where the given key first differs. */
static int key_matches(const char *given, const char *key) {
    const size_t given_len = strlen(given), key_len = strlen(key);
    unsigned diff = (unsigned)(given_len != key_len);
    for (size_t i = 0; i < key_len; i++)
        diff |= (unsigned)((unsigned char)key[i] ^ (unsigned char)(i < given_len ? given[i] : 0));
    return diff == 0;
}

/* The Authorization header's Bearer key; NULL without one. */
static const char *header_key(struct MHD_Connection *c, int *has_header) {
    const char *auth = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
    *has_header = auth != NULL;
    return auth && !strncasecmp(auth, "Bearer ", 7) ? auth + 7 : NULL;
}

/* The key in the header, or else in the decoded body's api_key field (obj
 * NULL when the body did not decode). */
static int authorized(const pmt_server *s, struct MHD_Connection *c, const json_t *obj) {
    if (!s->opt.api_key) return 1;
    int has_header;
    const char *given = header_key(c, &has_header);
    if (!has_header && obj) given = json_string_value(json_object_get(obj, "api_key"));
    return given && key_matches(given, s->opt.api_key);
}

/* Text i's hypothesis k, its sentences joined as they were cut (req->joiner:
 * '\n' between lines, ' ' between the sentences of one; a sentence with
 * fewer hypotheses contributes its best). NULL when out of memory. */
static char *join_text(const pmt_serve_request *req, const pmt_serve_job *job, int i, int k) {
    size_t total = 1;
    for (int l = req->first_line[i]; l < req->first_line[i + 1]; l++) {
        const pmt_serve_result *r = &job->results[l];
        total += (r->n ? strlen(r->text[k < r->n ? k : 0]) : 0) + 1;
    }
    char *out = malloc(total), *p = out;
    if (!out) return NULL;
    for (int l = req->first_line[i]; l < req->first_line[i + 1]; l++) {
        const pmt_serve_result *r = &job->results[l];
        if (l > req->first_line[i]) *p++ = req->joiner[l];
        if (r->n) {
            const char *t = r->text[k < r->n ? k : 0];
            memcpy(p, t, strlen(t));
            p += strlen(t);
        }
    }
    *p = '\0';
    return out;
}

/* Number of alternatives text i has (its lines' most, capped by the request). */
static int alternatives_of(const pmt_serve_request *req, const pmt_serve_job *job, int i) {
    int most = 0;
    for (int l = req->first_line[i]; l < req->first_line[i + 1]; l++)
        if (job->results[l].n - 1 > most) most = job->results[l].n - 1;
    return most < req->alternatives ? most : req->alternatives;
}

static json_t *pieces_json(const pmt_spm *spm, const int32_t *ids, int n) {
    json_t *a = json_array();
    for (int i = 0; a && i < n; i++) {
        const char *piece = pmt_spm_id_to_piece(spm, ids[i]);
        json_array_append_new(a, json_string(piece ? piece : "?"));
    }
    return a;
}

/* The attention is written as text directly, not as jansson values: a
 * jansson number costs about 50 bytes of heap a cell, and the freed heap of
 * large answers stayed with the connection threads' malloc arenas (a
 * 10-minute abuse run grew from 352 to 508 MB). A text buffer that grows by
 * doubling; failed once any allocation failed. */
typedef struct text_buffer {
    char *text;
    size_t len, cap;
    int failed;
} text_buffer;

static void put(text_buffer *b, const char *s, size_t n) {
    if (b->failed) return;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->len + n + 1) cap *= 2;
        char *grown = realloc(b->text, cap);
        if (!grown) {
            b->failed = 1;
            return;
        }
        b->text = grown;
        b->cap = cap;
    }
    memcpy(b->text + b->len, s, n);
    b->len += n;
    b->text[b->len] = '\0';
}

static void put_string(text_buffer *b, const char *s) { put(b, s, strlen(s)); }

/* A weight as the answer gives it: rounded to 4 decimals, trailing zeros
 * dropped ("0.1234", "0.12", "0", "1"): at most 6 characters, which is what
 * bounds an answer's bytes per cell (PMT_SERVE_MAX_ATTENTION_CELLS).
 * Weights are probabilities in [0, 1]. */
static void put_weight(text_buffer *b, float w) {
    long units = (long)((double)w * 1e4 + 0.5);
    char text[32];
    int n = snprintf(text, sizeof text, "%ld.%04ld", units / 10000, units % 10000);
    while (text[n - 1] == '0') n--;
    if (text[n - 1] == '.') n--;
    put(b, text, (size_t)n);
}

/* Pieces as a JSON array of strings (jansson escapes them). */
static void put_pieces(text_buffer *b, const pmt_spm *spm, const int32_t *ids, int n) {
    json_t *pieces = pieces_json(spm, ids, n);
    char *text = pieces ? json_dumps(pieces, JSON_COMPACT) : NULL;
    json_decref(pieces);
    if (!text) {
        b->failed = 1;
        return;
    }
    put_string(b, text);
    free(text);
}

/* One sentence's block: its source and output pieces and its own
 * [heads][target][source] weights. */
static void put_sentence_attention(text_buffer *b, const pmt_server *s, const pmt_alignment *al) {
    put_string(b, "{\"source\":");
    put_pieces(b, s->tr.spm, al->src_ids, al->src_len);
    put_string(b, ",\"target\":");
    put_pieces(b, s->tr.spm, al->tgt_ids, al->tgt_len);
    put_string(b, ",\"weights\":[");
    for (int h = 0; h < al->n_heads; h++) {
        put_string(b, h ? ",[" : "[");
        for (int t = 0; t < al->tgt_len; t++) {
            put_string(b, t ? ",[" : "[");
            const float *w = al->weights + ((size_t)h * al->tgt_len + t) * al->src_len;
            for (int j = 0; j < al->src_len; j++) {
                if (j) put(b, ",", 1);
                put_weight(b, w[j]);
            }
            put(b, "]", 1);
        }
        put(b, "]", 1);
    }
    put_string(b, "]}");
}

/* The attention field's value: one block per translated sentence of the
 * text, in order (an empty sentence has none), each its own matrix — never
 * one matrix of the whole text, which grows with the square of its length.
 * NULL when out of memory. */
static char *attention_text(const pmt_server *s, const pmt_serve_job *job) {
    text_buffer b = {0};
    char head[96];
    snprintf(head, sizeof head, "{\"layer\":%d,\"site\":\"decoder_cross\",\"sentences\":[",
             s->tr.model.cfg.dec_layers - 1);
    put_string(&b, head);
    int blocks = 0;
    for (int l = 0; l < job->n; l++) {
        if (!job->alignments[l].weights) continue;
        if (blocks++) put(&b, ",", 1);
        put_sentence_attention(&b, s, &job->alignments[l]);
    }
    put_string(&b, "]}");
    if (b.failed) {
        free(b.text);
        return NULL;
    }
    return b.text;
}

/* The answer's text: answer (reference stolen) with, when attention is not
 * NULL, an "attention" field of that text added as its last. NULL when out
 * of memory. */
static char *answer_text(json_t *answer, const char *attention) {
    char *text = answer ? json_dumps(answer, JSON_COMPACT | JSON_REAL_PRECISION(4)) : NULL;
    json_decref(answer);
    if (!text || !attention) return text;
    const size_t len = strlen(text);
    if (len < 2 || text[len - 1] != '}') {   /* jansson dumps an object: "{...}" */
        free(text);
        return NULL;
    }
    text_buffer b = {0};
    put(&b, text, len - 1);   /* without its closing brace */
    put_string(&b, len > 2 ? ",\"attention\":" : "\"attention\":");
    put_string(&b, attention);
    put(&b, "}", 1);
    free(text);
    if (b.failed) {
        free(b.text);
        return NULL;
    }
    return b.text;
}

/* The answer to a translated request, LibreTranslate's shape plus projmt's
 * warning field (the attention is added as text: answer_text). NULL when
 * out of memory. */
static json_t *translation_json(const pmt_serve_request *req, const pmt_serve_job *job) {
    json_t *root = json_object(), *texts = json_array(), *alts = json_array();
    for (int i = 0; root && texts && alts && i < req->n_texts; i++) {
        json_t *alt = json_array();
        for (int k = 1; alt && k <= alternatives_of(req, job, i); k++) {
            char *t = join_text(req, job, i, k);
            json_array_append_new(alt, t ? json_string(t) : NULL);
            free(t);
        }
        char *best = join_text(req, job, i, 0);
        json_array_append_new(texts, best ? json_string(best) : NULL);
        free(best);
        json_array_append_new(alts, alt);
    }
    if (!root || !texts || !alts) {
        json_decref(root); json_decref(texts); json_decref(alts);
        return NULL;
    }
    if (req->q_is_array) {
        json_object_set(root, "translatedText", texts);
        if (req->alternatives > 0) json_object_set(root, "alternatives", alts);
    } else {
        json_object_set(root, "translatedText", json_array_get(texts, 0));
        if (req->alternatives > 0) json_object_set(root, "alternatives", json_array_get(alts, 0));
    }
    json_decref(texts);
    json_decref(alts);
    if (req->auto_source)
        json_object_set_new(root, "detectedLanguage", json_pack("{s:s,s:f}", "language", "en", "confidence", 100.0));
    if (req->replaced) {
        char warning[128];
        snprintf(warning, sizeof warning, "%d invalid UTF-8 byte(s) replaced by U+FFFD", req->replaced);
        json_object_set_new(root, "warning", json_string(warning));
    }
    return root;
}

static enum MHD_Result handle_translate(pmt_server *s, struct MHD_Connection *c, request_state *st) {
    char err[512];
    const char *type = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_TYPE);
    json_t *obj = NULL;
    int replaced = 0;
    int status = is_form(type) ? parse_form(c, st, &obj, &replaced, err, sizeof err)
                               : pmt_serve_parse_json(st->body ? st->body : "", st->len, &obj, &replaced, err, sizeof err);
    /* The key first: a client without one learns nothing about the fields. */
    if (!authorized(s, c, status ? NULL : obj)) {
        json_decref(obj);
        return send_error(s, c, st, 403, "Invalid API key");
    }
    if (status) return send_error(s, c, st, status, err);
    pmt_serve_request req;
    status = pmt_serve_request_from_json(obj, &s->opt.limits, replaced, &req, err, sizeof err);
    json_decref(obj);
    if (status) {
        pmt_serve_request_free(&req);
        return send_error(s, c, st, status, err);
    }
    pmt_serve_job job = {.n = req.n_lines, .text = (const char *const *)req.lines, .beam_size = req.beam_size,
                         .n_best = req.alternatives + 1, .align = req.attention,
                         .max_cells = PMT_SERVE_MAX_ATTENTION_CELLS};
    enum MHD_Result rc;
    if (pmt_serve_queue_submit(&s->queue, &job) != 0) {
        if (job.cancelled) {
            snprintf(err, sizeof err, "Server is shutting down: its drain deadline of %d s passed before this request "
                     "was translated; send it again to a running server", s->opt.drain_timeout_s);
            rc = send_error(s, c, st, 503, err);
        } else if (job.over_budget) {
            snprintf(err, sizeof err, "Request too large for attention: its attention would pass the limit of %d cells "
                     "(heads x output pieces x source pieces, summed over its sentences); send fewer or shorter "
                     "sentences per request, or ask without \"attention\"", PMT_SERVE_MAX_ATTENTION_CELLS);
            rc = send_error(s, c, st, 413, err);
        } else {
            snprintf(err, sizeof err, "Translation failed: %s", job.err);
            rc = send_error(s, c, st, 500, err);
        }
    } else {
        char *attention = req.attention ? attention_text(s, &job) : NULL;
        char *text = req.attention && !attention ? NULL : answer_text(translation_json(&req, &job), attention);
        free(attention);
        rc = text ? send_text(s, c, st, 200, "application/json; charset=utf-8", text)
                  : send_error(s, c, st, 500, "out of memory");
    }
    pmt_serve_job_free(&job);
    pmt_serve_request_free(&req);
    return rc;
}

/* ---- GET routes ------------------------------------------------------ */

static enum MHD_Result handle_get(pmt_server *s, struct MHD_Connection *c, request_state *st) {
    switch (st->route) {
    case R_PAGE:
        return send_response(s, c, st, 200, "text/html; charset=utf-8",
                             MHD_create_response_from_buffer(pmt_serve_page_size, (void *)pmt_serve_page,
                                                             MHD_RESPMEM_PERSISTENT));
    case R_LANGUAGES:
        return send_json(s, c, st, 200,
                         json_pack("[{s:s,s:s,s:[s]},{s:s,s:s,s:[]}]", "code", "en", "name", "English", "targets",
                                   "es", "code", "es", "name", "Spanish", "targets"));
    case R_HEALTH:
        return send_json(s, c, st, 200, json_pack("{s:s}", "status", "ok"));
    case R_METRICS:
        return send_text(s, c, st, 200, "text/plain; version=0.0.4; charset=utf-8", pmt_metrics_render(&s->metrics));
    case R_INFO:
        return send_text(s, c, st, 200, "application/json; charset=utf-8", strdup(s->info_json));
    default:
        return send_error(s, c, st, 404, "Not found");
    }
}

/* ---- the libmicrohttpd callbacks ------------------------------------------ */

/* Ends a request whose body is still arriving: libmicrohttpd 0.9 queues an
 * answer only before the body or after all of it, so the connection is
 * closed, and counted by reason. */
static enum MHD_Result close_unanswered(pmt_server *s, request_state *st, pmt_closed_reason reason) {
    pthread_mutex_lock(&s->lock);
    const int counted = st->conn && st->conn->cut;   /* the watchdog got there first */
    if (st->conn) st->conn->cut = 1;
    pthread_mutex_unlock(&s->lock);
    if (!counted) pmt_metrics_closed(&s->metrics, reason);
    return MHD_NO;
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                              const char *version, const char *upload_data, size_t *upload_data_size,
                              void **con_cls) {
    (void)version;
    pmt_server *s = cls;
    request_state *st = *con_cls;
    if (!st) {
        if (!(st = calloc(1, sizeof *st))) return MHD_NO;
        st->route = find_route(url);
        st->start = pmt_now_seconds();
        st->phase = PHASE_RECEIVING;
        const union MHD_ConnectionInfo *info = MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
        st->conn = info ? info->socket_context : NULL;
        *con_cls = st;
        pthread_mutex_lock(&s->lock);
        s->in_flight++;
        const int stopping = s->stopping;
        pthread_mutex_unlock(&s->lock);
        pmt_metrics_in_flight(&s->metrics, 1);
        if (stopping) return send_error(s, c, st, 503, "Server is shutting down");
        if (st->route != R_TRANSLATE) return MHD_YES;
        /* A wrong key in the header is refused before the body is read. */
        int has_header;
        const char *key = header_key(c, &has_header);
        if (s->opt.api_key && has_header && !(key && key_matches(key, s->opt.api_key)))
            return send_error(s, c, st, 403, "Invalid API key");
        /* A declared body over the limit is refused before it is read. */
        const char *length = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
        if (length && strtoull(length, NULL, 10) > s->opt.limits.max_body) {
            char err[128];
            snprintf(err, sizeof err, "Request body exceeds the limit of %zu bytes", s->opt.limits.max_body);
            return send_error(s, c, st, 413, err);
        }
        return MHD_YES;
    }
    if (st->responded) {         /* the rest of a refused body is discarded */
        *upload_data_size = 0;
        return MHD_YES;
    }
    /* A client trickling its body never lets the idle timeout fire: its
     * turn has a deadline, checked here as each piece arrives (and by the
     * watchdog in between). */
    const int late = turn_over(s, st);
    if (*upload_data_size) {
        size_t n = *upload_data_size;
        *upload_data_size = 0;
        if (late) return close_unanswered(s, st, PMT_CLOSED_REQUEST_TIMEOUT);
        if (st->route != R_TRANSLATE) return MHD_YES;
        /* A body without a declared length (chunked) is cut as soon as it
         * passes the limit, not read to its end first. */
        if (st->len + n > s->opt.limits.max_body) return close_unanswered(s, st, PMT_CLOSED_BODY_TOO_LARGE);
        if (st->len + n + 1 > st->cap) {
            size_t cap = 2 * (st->len + n) + 1;
            char *body = realloc(st->body, cap);
            if (!body) return MHD_NO;
            st->body = body;
            st->cap = cap;
        }
        memcpy(st->body + st->len, upload_data, n);
        st->len += n;
        st->body[st->len] = '\0';
        return MHD_YES;
    }
    if (late) {
        char err[128];
        snprintf(err, sizeof err, "Request not received within %d seconds", s->opt.request_timeout_s);
        return send_error(s, c, st, 408, err);
    }
    set_phase(s, st, PHASE_SERVING);   /* received: the time from here is the server's */
    if (st->route == R_NONE) return send_error(s, c, st, 404, "Not found");
    const char *want = routes[st->route].method;
    const int is_get = !strcmp(want, "GET");
    if (strcmp(method, want) && !(is_get && !strcmp(method, "HEAD")))
        return send_error(s, c, st, 405, "Method not allowed");
    return st->route == R_TRANSLATE ? handle_translate(s, c, st) : handle_get(s, c, st);
}

static void request_done(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode why) {
    (void)c; (void)why;
    pmt_server *s = cls;
    request_state *st = *con_cls;
    if (!st) return;
    pthread_mutex_lock(&s->lock);
    if (st->phase == PHASE_SERVING) s->serving--;
    if (st->phase == PHASE_SENDING) s->sending--;
    if (st->conn) st->conn->serving = 0;
    s->in_flight--;
    pthread_cond_broadcast(&s->idle);
    pthread_mutex_unlock(&s->lock);
    free(st->body);
    free(st);
    *con_cls = NULL;
    pmt_metrics_in_flight(&s->metrics, -1);
}

/* ---- connections: the address limit and the watchdog ---------------------- */

void pmt_serve_address_group(const struct sockaddr *addr, unsigned char group[PMT_ADDRESS_GROUP_BYTES]) {
    memset(group, 0, PMT_ADDRESS_GROUP_BYTES);
    if (addr->sa_family == AF_INET) {
        group[0] = 4;
        memcpy(group + 1, &((const struct sockaddr_in *)addr)->sin_addr, 4);
    } else if (addr->sa_family == AF_INET6) {
        const struct in6_addr *a = &((const struct sockaddr_in6 *)addr)->sin6_addr;
        if (IN6_IS_ADDR_V4MAPPED(a)) {
            group[0] = 4;
            memcpy(group + 1, a->s6_addr + 12, 4);
        } else {
            group[0] = 6;
            memcpy(group + 1, a->s6_addr, 8);   /* the /64 */
        }
    }
}

/* libmicrohttpd's accept policy: a client group at its limit is refused
 * (the socket closed at once). Called by the daemon thread, which also
 * adds each accepted connection's record before the next accept. */
static enum MHD_Result accept_policy(void *cls, const struct sockaddr *addr, socklen_t addrlen) {
    (void)addrlen;
    pmt_server *s = cls;
    unsigned char group[PMT_ADDRESS_GROUP_BYTES];
    pmt_serve_address_group(addr, group);
    int held = 0;
    pthread_mutex_lock(&s->lock);
    for (const pmt_serve_connection *r = s->connections; r; r = r->next) held += !memcmp(r->group, group, sizeof group);
    pthread_mutex_unlock(&s->lock);
    return held < s->opt.max_connections_per_ip ? MHD_YES : MHD_NO;
}

/* Makes a connection's record when it starts and drops it when it closes
 * (before its socket is closed, so the watchdog never shuts down a socket
 * number already reused). A record that cannot be made closes the
 * connection: untracked, it would escape both limits. */
static void connection_notify(void *cls, struct MHD_Connection *c, void **socket_context,
                              enum MHD_ConnectionNotificationCode code) {
    pmt_server *s = cls;
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        const union MHD_ConnectionInfo *fd = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
        const union MHD_ConnectionInfo *addr = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
        pmt_serve_connection *r = fd && addr ? calloc(1, sizeof *r) : NULL;
        *socket_context = r;
        if (!r) {
            if (fd) shutdown(fd->connect_fd, SHUT_RDWR);
            return;
        }
        r->fd = fd->connect_fd;
        pmt_serve_address_group(addr->client_addr, r->group);
        r->turn_start = pmt_now_seconds();
        pthread_mutex_lock(&s->lock);
        r->next = s->connections;
        if (s->connections) s->connections->prev = r;
        s->connections = r;
        pthread_mutex_unlock(&s->lock);
    } else if (code == MHD_CONNECTION_NOTIFY_CLOSED && *socket_context) {
        pmt_serve_connection *r = *socket_context;
        pthread_mutex_lock(&s->lock);
        if (r->prev) r->prev->next = r->next;
        else s->connections = r->next;
        if (r->next) r->next->prev = r->prev;
        pthread_mutex_unlock(&s->lock);
        free(r);
        *socket_context = NULL;
    }
}

/* Ten times a second: every connection whose client has held its turn past
 * request_timeout_s has its socket shut down, which its connection thread
 * sees as the client closing. Cut while receiving or while reading an
 * answer; never while the server is answering. */
static void *watchdog_main(void *arg) {
    pmt_server *s = arg;
    pthread_mutex_lock(&s->lock);
    while (!s->watchdog_stop) {
        const double now = pmt_now_seconds();
        for (pmt_serve_connection *r = s->connections; r; r = r->next) {
            if (r->serving || r->cut || now - r->turn_start <= s->opt.request_timeout_s) continue;
            r->cut = 1;
            if (shutdown(r->fd, SHUT_RDWR) == 0) pmt_metrics_closed(&s->metrics, PMT_CLOSED_REQUEST_TIMEOUT);
        }
        struct timespec until;
        clock_gettime(CLOCK_MONOTONIC, &until);
        until.tv_nsec += 100 * 1000 * 1000;
        if (until.tv_nsec >= 1000 * 1000 * 1000) {
            until.tv_sec++;
            until.tv_nsec -= 1000 * 1000 * 1000;
        }
        pthread_cond_timedwait(&s->watchdog_wake, &s->lock, &until);
    }
    pthread_mutex_unlock(&s->lock);
    return NULL;
}

static void watchdog_stop(pmt_server *s) {
    if (!s->watchdog_started) return;
    pthread_mutex_lock(&s->lock);
    s->watchdog_stop = 1;
    pthread_cond_signal(&s->watchdog_wake);
    pthread_mutex_unlock(&s->lock);
    pthread_join(s->watchdog, NULL);
    s->watchdog_started = 0;
}

/* ---- facts for GET /info ------------------------------------------------ */

/* The [model] section of the effective config as strings (so a key added
 * later, such as the kernel, shows up without a change here). */
static json_t *model_config_json(const pmt_config *cfg) {
    json_t *obj = json_object();
    char *text = pmt_config_to_string(cfg);
    if (!obj || !text) {
        free(text);
        return obj;
    }
    int in_model = 0;
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
        if (line[0] == '[') { in_model = !strcmp(line, "[model]"); continue; }
        char *eq = strstr(line, " = ");
        if (!in_model || !eq) continue;
        *eq = '\0';
        json_object_set_new(obj, line, json_string(eq + 3));
    }
    free(text);
    return obj;
}

/* Markdown table cells of line (which starts with '|'), trimmed, in place:
 * at most max of them; returns how many. */
enum { CARD_CELLS = 8 };
static int table_cells(char *line, char **cells, int max) {
    int n = 0;
    char *p = line + 1;
    while (n < max) {
        char *bar = strchr(p, '|');
        if (!bar) break;
        *bar = '\0';
        while (isspace((unsigned char)*p)) p++;
        char *e = p + strlen(p);
        while (e > p && isspace((unsigned char)e[-1])) *--e = '\0';
        cells[n++] = p;
        p = bar + 1;
    }
    return n;
}

static int names_score(const char *s) { return strstr(s, "BLEU") || strstr(s, "chrF"); }
static int has_digit(const char *s) { return strpbrk(s, "0123456789") != NULL; }

/* A table's separator row: only '|', '-', ':' and spaces. */
static int separator_row(const char *line) {
    return line[0] == '|' && strspn(line, "|-: \t\r\n") == strlen(line) && strchr(line, '-');
}

/* The score lines of a Markdown model card (scripts/model_card.py writes
 * its scores as a table with a header naming the columns): each table row
 * whose first cell names BLEU or chrF and that holds a number, as "first
 * cell: header value · header value" ("test split BLEU: fp32 44.55 · int8
 * 44.62"), and each list item naming BLEU or chrF with a number, without
 * its mark. Headings, prose and header rows are left out. */
static json_t *card_json(const char *path, int explicit_path, char *err, size_t errlen, int *failed) {
    *failed = 0;
    FILE *f = fopen(path, "r");
    if (!f) {
        if (explicit_path) {
            snprintf(err, errlen, "cannot read the model card '%s'", path);
            *failed = 1;
        }
        return NULL;
    }
    json_t *scores = json_array();
    char line[1024], prev[1024] = "", header[1024] = "";
    char *head[CARD_CELLS];
    int n_head = 0;
    while (scores && fgets(line, sizeof line, f) && json_array_size(scores) < 24) {
        size_t n = strlen(line);
        while (n && isspace((unsigned char)line[n - 1])) line[--n] = '\0';
        char out[2 * sizeof line] = "";
        if (line[0] != '|') {
            n_head = 0;   /* a table ends at its first line that is not a row */
            prev[0] = '\0';
            const char *item = line + strspn(line, " ");
            if ((item[0] == '-' || item[0] == '*') && item[1] == ' ' && names_score(item) && has_digit(item))
                snprintf(out, sizeof out, "%s", item + 2);
        } else if (separator_row(line)) {
            snprintf(header, sizeof header, "%s", prev);   /* the row above names the columns */
            n_head = table_cells(header, head, CARD_CELLS);
            continue;
        } else {
            snprintf(prev, sizeof prev, "%s", line);
            char row[sizeof line];
            char *cell[CARD_CELLS];
            snprintf(row, sizeof row, "%s", line);
            const int n_cell = table_cells(row, cell, CARD_CELLS);
            int numbers = 0;
            for (int i = 1; i < n_cell; i++) numbers |= has_digit(cell[i]);
            if (n_cell < 2 || !names_score(cell[0]) || !numbers) continue;
            /* each value after its column's name */
            size_t len = (size_t)snprintf(out, sizeof out, "%s:", cell[0]);
            for (int i = 1; i < n_cell && len < sizeof out; i++) {
                const char *name = i < n_head ? head[i] : "";
                len += (size_t)snprintf(out + len, sizeof out - len, "%s %s%s%s", i > 1 ? " ·" : "", name,
                                        name[0] ? " " : "", cell[i]);
            }
        }
        if (!out[0]) continue;
        char clean[3 * sizeof out + 1];
        pmt_utf8_sanitize(out, strlen(out), clean);
        json_array_append_new(scores, json_string(clean));
    }
    fclose(f);
    const char *base = strrchr(path, '/');
    return json_pack("{s:s,s:o}", "file", base ? base + 1 : path, "scores", scores);
}

static int build_info(pmt_server *s, char *err, size_t errlen) {
    const pmt_model *m = &s->tr.model;
    char card_path[PMT_PATH_MAX + 16];
    if (s->opt.card_path) {
        snprintf(card_path, sizeof card_path, "%s", s->opt.card_path);
    } else {
        const char *slash = strrchr(s->opt.model_path, '/');
        snprintf(card_path, sizeof card_path, "%.*sREADME.md", slash ? (int)(slash - s->opt.model_path + 1) : 0,
                 s->opt.model_path);
    }
    int failed;
    json_t *card = card_json(card_path, s->opt.card_path != NULL, err, errlen, &failed);
    if (failed) return -1;
    const char *base = strrchr(s->opt.model_path, '/');
    json_t *cfg = model_config_json(&m->cfg);
    json_t *info = json_pack(
        "{s:s,s:s,s:I,s:{s:s,s:s,s:s},s:o,s:o,s:{s:i,s:i,s:I,s:i,s:i,s:i},s:b,s:{s:i,s:i}}", "model",
        base ? base + 1 : s->opt.model_path, "languages", "en -> es", "parameters", (json_int_t)m->n_params,
        "attention", "encoder_self", pmt_attention_kind_name(m->cfg.site_kind[PMT_SITE_ENC_SELF]), "decoder_self",
        pmt_attention_kind_name(m->cfg.site_kind[PMT_SITE_DEC_SELF]), "decoder_cross",
        pmt_attention_kind_name(m->cfg.site_kind[PMT_SITE_DEC_CROSS]), "config", cfg ? cfg : json_object(), "card",
        card ? card : json_null(), "limits", "max_sentences", s->opt.limits.max_sentences, "max_chars",
        s->opt.limits.max_chars, "max_body_bytes", (json_int_t)s->opt.limits.max_body, "max_attention_cells",
        PMT_SERVE_MAX_ATTENTION_CELLS, "max_beam",
        s->opt.limits.max_beam, "default_beam", s->opt.limits.default_beam, "api_key_required",
        s->opt.api_key != NULL, "batching", "max_batch", s->opt.max_batch, "max_wait_ms", s->opt.max_wait_ms);
    /* The CPU as the products see it, and what they multiply with on it. */
    char compute[512];
    pmt_model_describe_compute(m, compute, sizeof compute);
    /* The vocabulary shortlist decoding uses (candidates 0: none) and whether the model has one. */
    if (info && (json_object_set_new(info, "cpu_isa", json_string(pmt_cpu_isa_name())) != 0 ||
                 json_object_set_new(info, "compute", json_string(compute)) != 0 ||
                 json_object_set_new(info, "shortlist", json_pack("{s:i,s:b}", "candidates", s->tr.opt.shortlist,
                                                                  "in_model", m->shortlist != NULL)) != 0)) {
        json_decref(info);
        info = NULL;
    }
    s->info_json = info ? json_dumps(info, JSON_COMPACT) : NULL;
    json_decref(info);
    if (!s->info_json) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    return 0;
}

/* ---- start / stop --------------------------------------------------------- */

static int resolve(const char *host, int port, struct sockaddr_storage *addr, int *ipv6, char *err, size_t errlen) {
    struct addrinfo hints = {0}, *res = NULL;
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE;
    char service[16];
    snprintf(service, sizeof service, "%d", port);
    int rc = getaddrinfo(host, service, &hints, &res);
    if (rc != 0 || !res) {
        snprintf(err, errlen, "cannot resolve host '%s': %s", host, gai_strerror(rc));
        return -1;
    }
    memcpy(addr, res->ai_addr, res->ai_addrlen);
    *ipv6 = res->ai_family == AF_INET6;
    freeaddrinfo(res);
    return 0;
}

int pmt_server_start(pmt_server *s, const pmt_serve_options *opt, char *err, size_t errlen) {
    memset(s, 0, sizeof *s);
    s->opt = *opt;
    const pmt_serve_limits *lim = &opt->limits;
    if (opt->max_batch < 1 || opt->max_wait_ms < 0 || opt->timeout_s < 1 || opt->max_connections < 1 ||
        opt->request_timeout_s < 1 || opt->drain_timeout_s < 0 || opt->max_connections_per_ip < 1 ||
        lim->max_sentences < 1 || lim->max_chars < 1 || lim->max_body < 16 || lim->max_beam < 1 ||
        lim->default_beam < 1 || lim->default_beam > lim->max_beam || opt->port < 0 || opt->port > 65535) {
        snprintf(err, errlen, "bad options: need max batch, timeout, request timeout, connections (also per "
                              "address), sentences, characters >= 1, drain timeout >= 0, body >= 16 bytes, "
                              "1 <= beam <= max beam, port in [0, 65535]");
        return -1;
    }
    struct sockaddr_storage addr;
    int ipv6;
    if (resolve(opt->host, opt->port, &addr, &ipv6, err, errlen) != 0) return -1;
    json_object_seed(0);
    pmt_decode_options decode = opt->decode;
    decode.beam_size = lim->max_beam;   /* the search is sized once for the largest beam */
    decode.n_best = 1;
    if (pmt_translator_load(&s->tr, opt->model_path, &decode, opt->max_batch, err, errlen) != 0) return -1;
    s->tr.warn = NULL;                  /* invalid UTF-8 is reported in the answer */
    decode.beam_size = lim->default_beam;
    if (pmt_translator_set_options(&s->tr, &decode, err, errlen) != 0 || build_info(s, err, errlen) != 0) {
        pmt_translator_free(&s->tr);
        free(s->info_json);
        return -1;
    }
    pmt_metrics_init(&s->metrics);
    pthread_mutex_init(&s->lock, NULL);
    pthread_cond_init(&s->idle, NULL);
    pthread_condattr_t monotonic;
    pthread_condattr_init(&monotonic);
    pthread_condattr_setclock(&monotonic, CLOCK_MONOTONIC);
    pthread_cond_init(&s->watchdog_wake, &monotonic);
    pthread_condattr_destroy(&monotonic);
    if (pmt_serve_queue_start(&s->queue, &s->tr, &s->metrics, opt->max_batch, opt->max_wait_ms, opt->threads, err,
                              errlen) != 0)
        goto fail;
    if (pthread_create(&s->watchdog, NULL, watchdog_main, s) != 0) {
        snprintf(err, errlen, "cannot start the connection watchdog thread");
        pmt_serve_queue_stop(&s->queue);
        goto fail;
    }
    s->watchdog_started = 1;
    /* "::" is every address: IPv4 clients too (as IPv4-mapped addresses). */
    const int every_address = ipv6 && IN6_IS_ADDR_UNSPECIFIED(&((const struct sockaddr_in6 *)&addr)->sin6_addr);
    s->daemon = MHD_start_daemon(
        MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ITC | (ipv6 ? MHD_USE_IPv6 : 0) |
            (every_address ? MHD_USE_DUAL_STACK : 0),
        0, accept_policy, s, handle, s, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&addr, MHD_OPTION_CONNECTION_TIMEOUT,
        (unsigned int)opt->timeout_s, MHD_OPTION_CONNECTION_LIMIT, (unsigned int)opt->max_connections,
        MHD_OPTION_NOTIFY_CONNECTION, connection_notify, s, MHD_OPTION_NOTIFY_COMPLETED, request_done, s,
        MHD_OPTION_END);
    if (!s->daemon) {
        snprintf(err, errlen, "cannot listen on %s port %d (in use, or not an address of this machine?)", opt->host,
                 opt->port);
        watchdog_stop(s);
        pmt_serve_queue_stop(&s->queue);
        goto fail;
    }
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(s->daemon, MHD_DAEMON_INFO_BIND_PORT);
    s->port = info ? info->port : opt->port;
    return 0;
fail:
    pthread_cond_destroy(&s->watchdog_wake);
    pthread_cond_destroy(&s->idle);
    pthread_mutex_destroy(&s->lock);
    pmt_metrics_free(&s->metrics);
    pmt_translator_free(&s->tr);
    free(s->info_json);
    return -1;
}

/* Waits on s->idle (s->lock held) until done(s) or the CLOCK_REALTIME
 * deadline; returns done(s). */
static int wait_until(pmt_server *s, int (*done)(const pmt_server *), const struct timespec *deadline) {
    int rc = 0;
    while (!done(s) && rc != ETIMEDOUT) rc = pthread_cond_timedwait(&s->idle, &s->lock, deadline);
    return done(s);
}

static int nothing_in_flight(const pmt_server *s) { return s->in_flight == 0; }
static int nothing_served(const pmt_server *s) { return s->serving == 0; }
static int nothing_answered_unread(const pmt_server *s) { return s->serving == 0 && s->sending == 0; }

static struct timespec realtime_in(int seconds) {
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);   /* the condition variable's clock */
    t.tv_sec += seconds;
    return t;
}

long pmt_server_stop(pmt_server *s) {
    pthread_mutex_lock(&s->lock);
    s->stopping = 1;
    pthread_mutex_unlock(&s->lock);
    MHD_socket listener = MHD_quiesce_daemon(s->daemon);
    if (listener != MHD_INVALID_SOCKET) close(listener);
    struct timespec deadline = realtime_in(s->opt.drain_timeout_s);
    pthread_mutex_lock(&s->lock);
    const int drained = wait_until(s, nothing_in_flight, &deadline);
    pthread_mutex_unlock(&s->lock);
    if (!drained) {
        /* Past the deadline a full queue would still take as long as it
         * takes to translate: what waits there is answered 503 instead,
         * and only the batch being decoded is finished. */
        pmt_serve_queue_cancel(&s->queue);
        pthread_mutex_lock(&s->lock);
        while (!nothing_served(s)) {
            struct timespec slice = realtime_in(1);
            wait_until(s, nothing_served, &slice);
        }
        /* The answers just made (503s, the last batch's) get a second to be
         * written before every connection is closed. */
        struct timespec grace = realtime_in(1);
        wait_until(s, nothing_answered_unread, &grace);
        pthread_mutex_unlock(&s->lock);
    }
    /* Closes what is left: connections still receiving are cut. */
    MHD_stop_daemon(s->daemon);
    watchdog_stop(s);
    pmt_serve_queue_stop(&s->queue);
    const long sentences = pmt_metrics_sentences(&s->metrics);
    pthread_cond_destroy(&s->watchdog_wake);
    pthread_cond_destroy(&s->idle);
    pthread_mutex_destroy(&s->lock);
    pmt_metrics_free(&s->metrics);
    pmt_translator_free(&s->tr);
    free(s->info_json);
    memset(s, 0, sizeof *s);
    return sentences;
}

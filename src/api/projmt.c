/*
 * projmt.c — the C API of include/projmt.h over the translator
 * (translate/translator.h) and the aligner (translate/alignment.h).
 *
 * Why a layer of its own: the public header must stay small and stable
 * (opaque handles, plain arrays, CTranslate2's option names) while the
 * internals change; and the library must never print (the translator's
 * warning stream is switched off: what it repaired goes into each result's
 * flags, other warnings to core/log's callback) nor leave an error
 * unreported (every failure sets the thread's last error and returns NULL
 * or a status that says what kind it is). Results are copied out of the
 * translator's storage, which the next call reuses, into memory the caller
 * frees.
 *
 * Both APIs (the first, 0.1.0: projmt_translator_new / projmt_translate_batch
 * over projmt_result arrays; and 0.2.0's growable options and opaque
 * results) run the same code: open_translator and translate_into.
 */
#include <projmt.h>   /* the public header (include/), as users include it */

#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/build_info.h"
#include "core/config.h"
#include "core/cpu_check.h"
#include "core/log.h"
#include "core/threads.h"
#include "model/checkpoint.h"
#include "nn/gemm.h"
#include "model/model.h"
#include "translate/alignment.h"
#include "translate/segment.h"
#include "translate/translator.h"

enum { DEFAULT_BATCH = 64, DEFAULT_BEAM = 4 };

struct projmt_translator {
    pmt_translator tr;
    pmt_decode_options base;     /* the config's decoding defaults: what options left at 0 mean */
    pmt_aligner aligner;
    int have_aligner;
    int threads;
    char compute[512];
};

static _Thread_local char last_error[1024];

static void set_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void set_error(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
}

const char *projmt_version(void) { return pmt_build_version; }
int projmt_version_number(void) { return PROJMT_VERSION_NUMBER; }
int projmt_api_version(void) { return PROJMT_API_VERSION; }

/* The public callback behind core/log's (their levels have the same
 * values): one pair, swapped under log_lock, so that a message never meets
 * a half-installed callback. */
static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static projmt_log_callback user_log;
static void *user_log_data;

static void forward_log(pmt_log_level level, const char *message, void *unused) {
    (void)unused;
    pthread_mutex_lock(&log_lock);
    const projmt_log_callback fn = user_log;
    void *data = user_log_data;
    pthread_mutex_unlock(&log_lock);
    if (fn) fn(level == PMT_LOG_WARNING ? PROJMT_LOG_WARNING : PROJMT_LOG_INFO, message, data);
}

void projmt_set_log_callback(projmt_log_callback callback, void *user_data) {
    pthread_mutex_lock(&log_lock);
    user_log = callback;
    user_log_data = user_data;
    pthread_mutex_unlock(&log_lock);
    pmt_log_set(callback ? forward_log : NULL, NULL);
}
const char *projmt_last_error(void) { return last_error; }
const char *projmt_cpu_isa(void) { return pmt_cpu_isa_name(); }

/* "auto", "fp32", "bf16", "int8" → pmt_compute_type, or -1. */
static int compute_type_of(const char *name) {
    for (int i = 0; i < PMT_COMPUTE_TYPES; i++)
        if (!strcmp(name, pmt_compute_type_name(i))) return i;
    return -1;
}

/* Reads a caller's options struct of struct_size bytes over the library's
 * defaults (*out, `known` bytes): a smaller struct (an older caller) keeps
 * the defaults of the fields it lacks; a larger one (a newer caller) may
 * only have zeros where this library knows no field. `oldest` is the
 * struct's size in the first release that had it. 0, or -1 with the error
 * set. */
static int read_options(void *out, size_t known, const void *in, size_t oldest, const char *what) {
    const size_t size = *(const size_t *)in;
    if (size < oldest) {
        set_error("%s: struct_size %zu is less than the smallest %s (%zu): initialise it with %s_init", what, size,
                  what, oldest, what);
        return -1;
    }
    for (size_t i = known; i < size; i++)
        if (((const unsigned char *)in)[i]) {
            set_error("%s: byte %zu is set, but this libprojmt (%s) knows %zu bytes of it: a field it does not "
                      "know; use a newer libprojmt or leave the field zero", what, i, pmt_build_version, known);
            return -1;
        }
    memcpy(out, in, size < known ? size : known);
    return 0;
}

void projmt_translator_options_init(projmt_translator_options *options, size_t struct_size) {
    if (!options) return;
    const projmt_translator_options defaults = {struct_size, "auto", 0, 0};
    memcpy(options, &defaults, struct_size < sizeof defaults ? struct_size : sizeof defaults);
    options->struct_size = struct_size;
}

/* The one way a translator is made (both APIs). */
static projmt_status open_translator(const char *model_path, const char *compute_name, int threads, int max_batch,
                                     projmt_translator **out) {
    *out = NULL;
    if (!model_path) {
        set_error("projmt_translator_open: model_path is NULL");
        return PROJMT_ERROR_ARGUMENT;
    }
    char cpu_err[400];
    if (pmt_cpu_check(cpu_err, sizeof cpu_err) != 0) {
        set_error("projmt_translator_open: %s", cpu_err);
        return PROJMT_ERROR_RUNTIME;
    }
    const int compute_type = compute_type_of(compute_name ? compute_name : "auto");
    if (compute_type < 0 || threads < 0 || max_batch < 0) {
        set_error("projmt_translator_open: bad options (compute_type '%s': auto, fp32, bf16 or int8; threads %d and "
                  "max_batch %d must be >= 0)", compute_name ? compute_name : "auto", threads, max_batch);
        return PROJMT_ERROR_ARGUMENT;
    }
    projmt_translator *t = calloc(1, sizeof *t);
    if (!t) {
        set_error("projmt_translator_open: out of memory");
        return PROJMT_ERROR_MEMORY;
    }
    t->threads = threads;
    pmt_set_threads(t->threads);
    pmt_config cfg;
    pmt_config_defaults(&cfg);
    pmt_decode_options opt;
    pmt_decode_options_from_config(&opt, &cfg);
    opt.compute_type = compute_type;
    opt.beam_size = DEFAULT_BEAM;
    t->base = opt;
    char err[768];
    const int rc = pmt_translator_load(&t->tr, model_path, &opt, max_batch ? max_batch : DEFAULT_BATCH, err, sizeof err);
    if (rc != 0) {
        set_error("%s", err);
        free(t);
        return rc == PMT_OUT_OF_MEMORY            ? PROJMT_ERROR_MEMORY
               : rc == PMT_TRANSLATOR_UNSUPPORTED ? PROJMT_ERROR_RUNTIME
                                                  : PROJMT_ERROR_MODEL;
    }
    t->tr.warn = NULL;   /* the library never prints: input repairs are each result's flags */
    pmt_model_describe_compute(&t->tr.model, t->compute, sizeof t->compute);
    *out = t;
    last_error[0] = '\0';
    return PROJMT_OK;
}

projmt_status projmt_translator_open(const char *model_path, const projmt_translator_options *options,
                                     projmt_translator **translator) {
    if (!translator) {
        set_error("projmt_translator_open: translator is NULL");
        return PROJMT_ERROR_ARGUMENT;
    }
    *translator = NULL;
    projmt_translator_options o;
    projmt_translator_options_init(&o, sizeof o);
    if (options && read_options(&o, sizeof o, options, sizeof(projmt_translator_options), "projmt_translator_options"))
        return PROJMT_ERROR_ARGUMENT;
    return open_translator(model_path, o.compute_type, o.threads, o.max_batch, translator);
}

projmt_translator *projmt_translator_new(const char *model_path, const projmt_load_options *options) {
    const projmt_load_options defaults = {"auto", 0, 0};
    const projmt_load_options *o = options ? options : &defaults;
    projmt_translator *t;
    open_translator(model_path, o->compute_type, o->threads, o->max_batch, &t);
    return t;
}

void projmt_translator_free(projmt_translator *t) {
    if (!t) return;
    if (t->have_aligner) pmt_aligner_free(&t->aligner);
    pmt_translator_free(&t->tr);
    free(t);
}

const char *projmt_translator_compute(const projmt_translator *t) { return t ? t->compute : ""; }

projmt_status projmt_translator_set_shortlist(projmt_translator *t, int candidates) {
    if (!t) {
        set_error("projmt_translator_set_shortlist: the translator is NULL");
        return PROJMT_ERROR_ARGUMENT;
    }
    pmt_decode_options opt = t->base;
    opt.shortlist = candidates;
    char err[400];
    if (pmt_search_check_shortlist(&t->tr.model, &opt, err, sizeof err) != 0) {
        set_error("projmt_translator_set_shortlist: %s", err);
        return PROJMT_ERROR_ARGUMENT;
    }
    t->base.shortlist = candidates;
    return PROJMT_OK;
}

/* A call's options, whichever API it came through. */
typedef struct call_options {
    int beam_size, num_hypotheses, return_scores, return_alignment;
    double length_penalty;
    int max_decoding_length;
    projmt_abort_callback abort_callback;
    void *abort_user_data;
} call_options;

/* The translator's search options for a call's options. 0, or -1 (error set). */
static int search_options(const projmt_translator *t, const call_options *o, pmt_decode_options *opt) {
    *opt = t->base;
    opt->beam_size = o->beam_size;
    opt->n_best = o->num_hypotheses;
    opt->normalize = o->length_penalty;
    if (o->max_decoding_length > 0) {
        opt->max_length_factor = 0.0;
        opt->max_length_const = o->max_decoding_length;
    }
    if (opt->beam_size < 1 || opt->beam_size > 64 || opt->n_best < 1 || opt->n_best > opt->beam_size ||
        o->max_decoding_length < 0 || !(o->length_penalty >= 0.0 && o->length_penalty <= 100.0)) {
        set_error("projmt_translate: need 1 <= beam_size <= 64, 1 <= num_hypotheses <= beam_size, "
                  "max_decoding_length >= 0 and 0 <= length_penalty <= 100 (got %d, %d, %d, %g)", opt->beam_size,
                  opt->n_best, o->max_decoding_length, o->length_penalty);
        return -1;
    }
    return 0;
}

/* The caller's abort callback as the search's should_stop: asked from the
 * lanes' threads, so calls are serialised here (the header promises never
 * two at once), and once it has said stop every lane stops. */
typedef struct stop_check {
    projmt_abort_callback fn;
    void *user_data;
    pthread_mutex_t lock;
    int fired;
} stop_check;

static int should_stop(void *ctx) {
    stop_check *c = ctx;
    pthread_mutex_lock(&c->lock);
    if (!c->fired && c->fn(c->user_data)) c->fired = 1;
    const int fired = c->fired;
    pthread_mutex_unlock(&c->lock);
    return fired;
}

static char *copy_string(const char *s) {
    const size_t n = strlen(s) + 1;
    char *c = malloc(n);
    if (c) memcpy(c, s, n);
    return c;
}

static void alignment_free(projmt_alignment *a) {
    if (!a) return;
    for (int i = 0; a->source_pieces && i < a->n_source; i++) free((char *)a->source_pieces[i]);
    for (int i = 0; a->target_pieces && i < a->n_target; i++) free((char *)a->target_pieces[i]);
    free((void *)a->source_pieces);
    free((void *)a->target_pieces);
    free((void *)a->weights);
    free(a);
}

/* Piece strings of ids[0..n) (copies). NULL when out of memory. */
static const char *const *pieces_of(const pmt_spm *spm, const int32_t *ids, int n) {
    char **p = calloc((size_t)n, sizeof *p);
    for (int i = 0; p && i < n; i++) {
        const char *piece = pmt_spm_id_to_piece(spm, ids[i]);
        if (!(p[i] = copy_string(piece ? piece : "?"))) {
            for (int j = 0; j < i; j++) free(p[j]);
            free(p);
            return NULL;
        }
    }
    return (const char *const *)p;
}

/* The head-averaged cross-attention of sentence `text`'s best hypothesis. */
static projmt_alignment *align(projmt_translator *t, const char *text, const pmt_hypothesis *best,
                               projmt_status *status) {
    char err[512];
    if (!t->have_aligner) {
        if (pmt_aligner_init(&t->aligner, &t->tr.model, err, sizeof err) != 0) {
            set_error("alignment: %s", err);
            *status = PROJMT_ERROR_MEMORY;
            return NULL;
        }
        t->have_aligner = 1;
    }
    const int max_src = t->tr.model.max_len - 1;
    int32_t *ids = malloc((size_t)(max_src + 1) * sizeof *ids);
    projmt_alignment *a = calloc(1, sizeof *a);
    pmt_alignment al = {0};
    *status = PROJMT_ERROR_MEMORY;
    if (!ids || !a) {
        set_error("alignment: out of memory");
        goto fail;
    }
    int n = pmt_spm_encode(t->tr.spm, text, ids, max_src);
    if (n < 0) {
        set_error("alignment: tokenizing failed");
        *status = PROJMT_ERROR_RUNTIME;
        goto fail;
    }
    if (pmt_aligner_run(&t->aligner, ids, n < max_src ? n : max_src, best->ids, best->len, &al, err, sizeof err) !=
        0) {
        set_error("alignment: %s", err);
        *status = PROJMT_ERROR_RUNTIME;
        goto fail;
    }
    a->n_source = al.src_len;
    a->n_target = al.tgt_len;
    float *w = calloc((size_t)al.src_len * al.tgt_len, sizeof *w);
    a->weights = w;
    a->source_pieces = pieces_of(t->tr.spm, al.src_ids, al.src_len);
    a->target_pieces = pieces_of(t->tr.spm, al.tgt_ids, al.tgt_len);
    if (!w || !a->source_pieces || !a->target_pieces) {
        set_error("alignment: out of memory");
        goto fail;
    }
    const size_t cells = (size_t)al.src_len * al.tgt_len;
    for (int h = 0; h < al.n_heads; h++)
        for (size_t i = 0; i < cells; i++) w[i] += al.weights[(size_t)h * cells + i] / (float)al.n_heads;
    pmt_alignment_free(&al);
    free(ids);
    *status = PROJMT_OK;
    return a;
fail:
    pmt_alignment_free(&al);
    alignment_free(a);
    free(ids);
    return NULL;
}

/* Copies translation r of `text` into out. */
static projmt_status copy_result(projmt_translator *t, const pmt_translation *r, const char *text,
                                 const call_options *o, projmt_result *out) {
    char **hyps = r->n ? calloc((size_t)r->n, sizeof *hyps) : NULL;
    float *scores = o->return_scores && r->n ? malloc((size_t)r->n * sizeof *scores) : NULL;
    out->hypotheses = (const char *const *)hyps;
    out->scores = scores;
    if ((r->n && !hyps) || (o->return_scores && r->n && !scores)) {
        set_error("projmt_translate_batch: out of memory");
        return PROJMT_ERROR_MEMORY;
    }
    for (int h = 0; h < r->n; h++) {
        if (!(hyps[h] = copy_string(r->text[h]))) {
            set_error("projmt_translate_batch: out of memory");
            return PROJMT_ERROR_MEMORY;
        }
        out->n_hypotheses = h + 1;
        if (scores) scores[h] = (float)r->hyp[h].score;
    }
    projmt_status status = PROJMT_OK;
    if (o->return_alignment && r->n) out->alignment = align(t, text, &r->hyp[0], &status);
    return status;
}

/* The one translation path (both APIs): sentences[0..n) into out[0..n)
 * (zeroed by the caller), with each sentence's repair flags and source
 * pieces when flags / pieces are not NULL. On failure out holds what was
 * copied so far, for the caller to free. */
static projmt_status translate_into(projmt_translator *t, const char *const *sentences, size_t n,
                                    const call_options *o, projmt_result *out, unsigned *flags, int *pieces) {
    if (!t || (!sentences && n > 0)) {
        set_error("projmt_translate: %s is NULL", t ? "sentences" : "the translator");
        return PROJMT_ERROR_ARGUMENT;
    }
    for (size_t i = 0; i < n; i++)
        if (!sentences[i]) {
            set_error("projmt_translate: sentence %zu is NULL", i);
            return PROJMT_ERROR_ARGUMENT;
        }
    pmt_decode_options opt;
    if (search_options(t, o, &opt) != 0) return PROJMT_ERROR_ARGUMENT;
    char err[768];
    /* Argument errors first: what set_options can fail on past them is
     * growing the search for a larger beam, i.e. memory. */
    if (pmt_search_check_shortlist(&t->tr.model, &opt, err, sizeof err) != 0) {
        set_error("projmt_translate: %s", err);
        return PROJMT_ERROR_ARGUMENT;
    }
    if (pmt_translator_set_options(&t->tr, &opt, err, sizeof err) != 0) {
        set_error("projmt_translate: %s", err);
        return PROJMT_ERROR_MEMORY;
    }
    stop_check stop = {o->abort_callback, o->abort_user_data, PTHREAD_MUTEX_INITIALIZER, 0};
    if (o->abort_callback) {
        t->tr.opt.should_stop = should_stop;
        t->tr.opt.should_stop_ctx = &stop;
    }
    pmt_set_threads(t->threads);
    projmt_status status = PROJMT_OK;
    for (size_t start = 0; status == PROJMT_OK && start < n; start += (size_t)t->tr.max_batch) {
        const int count = n - start < (size_t)t->tr.max_batch ? (int)(n - start) : t->tr.max_batch;
        pmt_translation *r = t->tr.results;
        const int rc = pmt_translator_translate(&t->tr, sentences + start, count, r, err, sizeof err);
        if (rc != 0) {
            set_error("projmt_translate: %s", rc == PMT_SEARCH_STOPPED ? "cancelled by the abort callback" : err);
            status = rc == PMT_SEARCH_STOPPED ? PROJMT_ERROR_CANCELLED : PROJMT_ERROR_RUNTIME;
            break;
        }
        for (int i = 0; status == PROJMT_OK && i < count; i++) {
            status = copy_result(t, &r[i], sentences[start + i], o, &out[start + i]);
            if (flags)
                flags[start + i] = (r[i].cut ? PROJMT_RESULT_INPUT_CUT : 0u) |
                                   (r[i].replaced_bytes ? PROJMT_RESULT_BYTES_REPLACED : 0u);
            if (pieces) pieces[start + i] = r[i].source_tokens;
        }
    }
    t->tr.opt.should_stop = NULL;   /* stop lives on this frame only */
    t->tr.opt.should_stop_ctx = NULL;
    pthread_mutex_destroy(&stop.lock);
    if (status == PROJMT_OK) last_error[0] = '\0';
    return status;
}

projmt_status projmt_translate_batch(projmt_translator *t, const char *const *sentences, size_t n,
                                     const projmt_translate_options *options, projmt_result **results) {
    static const projmt_translate_options defaults = {0, 0, 0, 0, -1.0, 0};
    const projmt_translate_options *o = options ? options : &defaults;
    if (!results) {
        set_error("projmt_translate_batch: results is NULL");
        return PROJMT_ERROR_ARGUMENT;
    }
    *results = NULL;
    /* The first API's zeros and negatives mean the defaults. */
    const call_options call = {o->beam_size ? o->beam_size : DEFAULT_BEAM, o->num_hypotheses ? o->num_hypotheses : 1,
                               o->return_scores, o->return_alignment, o->length_penalty < 0 ? 1.0 : o->length_penalty,
                               o->max_decoding_length, NULL, NULL};
    projmt_result *out = calloc(n ? n : 1, sizeof *out);
    if (!out) {
        set_error("projmt_translate_batch: out of memory");
        return PROJMT_ERROR_MEMORY;
    }
    const projmt_status status = translate_into(t, sentences, n, &call, out, NULL, NULL);
    if (status != PROJMT_OK) {
        projmt_results_free(out, n);
        return status;
    }
    *results = out;
    return PROJMT_OK;
}

void projmt_translation_options_init(projmt_translation_options *options, size_t struct_size) {
    if (!options) return;
    const projmt_translation_options defaults = {struct_size, DEFAULT_BEAM, 1, 0, 0, 1.0, 0, NULL, NULL};
    memcpy(options, &defaults, struct_size < sizeof defaults ? struct_size : sizeof defaults);
    options->struct_size = struct_size;
}

struct projmt_results {
    size_t n;
    projmt_result *items;        /* [n] */
    unsigned *flags;             /* [n] PROJMT_RESULT_* */
    int *source_pieces;          /* [n] */
};

projmt_status projmt_translate(projmt_translator *t, const char *const *sentences, size_t n,
                               const projmt_translation_options *options, projmt_results **results) {
    if (!results) {
        set_error("projmt_translate: results is NULL");
        return PROJMT_ERROR_ARGUMENT;
    }
    *results = NULL;
    projmt_translation_options o;
    projmt_translation_options_init(&o, sizeof o);
    if (options &&
        read_options(&o, sizeof o, options, sizeof(projmt_translation_options), "projmt_translation_options") != 0)
        return PROJMT_ERROR_ARGUMENT;
    const call_options call = {o.beam_size, o.num_hypotheses, o.return_scores, o.return_alignment, o.length_penalty,
                               o.max_decoding_length, o.abort_callback, o.abort_callback_user_data};
    projmt_results *r = calloc(1, sizeof *r);
    const size_t slots = n ? n : 1;
    if (r) {
        r->n = n;
        r->items = calloc(slots, sizeof *r->items);
        r->flags = calloc(slots, sizeof *r->flags);
        r->source_pieces = calloc(slots, sizeof *r->source_pieces);
    }
    if (!r || !r->items || !r->flags || !r->source_pieces) {
        projmt_results_destroy(r);
        set_error("projmt_translate: out of memory");
        return PROJMT_ERROR_MEMORY;
    }
    const projmt_status status = translate_into(t, sentences, n, &call, r->items, r->flags, r->source_pieces);
    if (status != PROJMT_OK) {
        projmt_results_destroy(r);
        return status;
    }
    *results = r;
    return PROJMT_OK;
}

static const projmt_result *result_at(const projmt_results *r, size_t i) {
    return r && i < r->n ? &r->items[i] : NULL;
}

size_t projmt_results_count(const projmt_results *results) { return results ? results->n : 0; }

int projmt_results_num_hypotheses(const projmt_results *results, size_t i) {
    const projmt_result *r = result_at(results, i);
    return r ? r->n_hypotheses : 0;
}

const char *projmt_results_hypothesis(const projmt_results *results, size_t i, int k) {
    const projmt_result *r = result_at(results, i);
    return r && k >= 0 && k < r->n_hypotheses ? r->hypotheses[k] : NULL;
}

float projmt_results_score(const projmt_results *results, size_t i, int k) {
    const projmt_result *r = result_at(results, i);
    return r && r->scores && k >= 0 && k < r->n_hypotheses ? r->scores[k] : NAN;
}

const projmt_alignment *projmt_results_alignment(const projmt_results *results, size_t i) {
    const projmt_result *r = result_at(results, i);
    return r ? r->alignment : NULL;
}

unsigned projmt_results_flags(const projmt_results *results, size_t i) {
    return result_at(results, i) ? results->flags[i] : 0u;
}

int projmt_results_source_pieces(const projmt_results *results, size_t i) {
    return result_at(results, i) ? results->source_pieces[i] : 0;
}

void projmt_results_destroy(projmt_results *results) {
    if (!results) return;
    if (results->items) projmt_results_free(results->items, results->n);
    free(results->flags);
    free(results->source_pieces);
    free(results);
}

void projmt_results_free(projmt_result *results, size_t n) {
    if (!results) return;
    for (size_t i = 0; i < n; i++) {
        for (int h = 0; h < results[i].n_hypotheses; h++) free((char *)results[i].hypotheses[h]);
        free((void *)results[i].hypotheses);
        free((void *)results[i].scores);
        alignment_free((projmt_alignment *)results[i].alignment);
    }
    free(results);
}

projmt_status projmt_split_sentences(const char *text, size_t length, projmt_span *spans, size_t max_spans,
                                     size_t *count) {
    if (!count || (!text && length > 0) || (!spans && max_spans > 0)) {
        set_error("projmt_split_sentences: %s is NULL", !count ? "count" : !text ? "text" : "spans");
        return PROJMT_ERROR_ARGUMENT;
    }
    const int n = text ? pmt_sentence_split(text, length, NULL, 0) : 0;
    *count = (size_t)n;
    const size_t fill = max_spans < (size_t)n ? max_spans : (size_t)n;
    if (fill > 0) {
        pmt_span *found = malloc((size_t)n * sizeof *found);
        if (!found) {
            set_error("projmt_split_sentences: out of memory");
            return PROJMT_ERROR_MEMORY;
        }
        pmt_sentence_split(text, length, found, n);
        for (size_t i = 0; i < fill; i++) spans[i] = (projmt_span){found[i].start, found[i].end};
        free(found);
    }
    last_error[0] = '\0';
    return PROJMT_OK;
}

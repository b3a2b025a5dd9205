/*
 * projmt.c — the C API of include/projmt.h over the translator
 * (translate/translator.h) and the aligner (translate/alignment.h).
 *
 * Why a layer of its own: the public header must stay small and stable
 * (opaque handles, plain arrays, CTranslate2's option names) while the
 * internals change; and the library must never print (the translator's
 * warning stream is switched off) nor leave an error unreported (every
 * failure sets the thread's last error and returns NULL or a status).
 * Results are copied out of the translator's storage, which the next call
 * reuses, into memory the caller frees with projmt_results_free.
 */
#include <projmt.h>   /* the public header (include/), as users include it */

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/build_info.h"
#include "core/config.h"
#include "core/cpu_check.h"
#include "core/threads.h"
#include "model/checkpoint.h"
#include "nn/gemm.h"
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
int projmt_api_version(void) { return PROJMT_API_VERSION; }
const char *projmt_last_error(void) { return last_error; }
const char *projmt_cpu_isa(void) { return pmt_cpu_isa_name(); }

/* "auto", "fp32", "bf16", "int8" → pmt_compute_type, or -1. */
static int compute_type_of(const char *name) {
    for (int i = 0; i < PMT_COMPUTE_TYPES; i++)
        if (!strcmp(name, pmt_compute_type_name(i))) return i;
    return -1;
}

projmt_translator *projmt_translator_new(const char *model_path, const projmt_load_options *options) {
    const projmt_load_options defaults = {"auto", 0, 0};
    const projmt_load_options *o = options ? options : &defaults;
    if (!model_path) {
        set_error("projmt_translator_new: model_path is NULL");
        return NULL;
    }
    char cpu_err[400];
    if (pmt_cpu_check(cpu_err, sizeof cpu_err) != 0) {
        set_error("projmt_translator_new: %s", cpu_err);
        return NULL;
    }
    const int compute_type = compute_type_of(o->compute_type ? o->compute_type : "auto");
    if (compute_type < 0 || o->threads < 0 || o->max_batch < 0) {
        set_error("projmt_translator_new: bad options (compute_type '%s': auto, fp32, bf16 or int8; threads %d and "
                  "max_batch %d must be >= 0)", o->compute_type, o->threads, o->max_batch);
        return NULL;
    }
    projmt_translator *t = calloc(1, sizeof *t);
    if (!t) {
        set_error("projmt_translator_new: out of memory");
        return NULL;
    }
    t->threads = o->threads;
    pmt_set_threads(t->threads);
    pmt_config cfg;
    pmt_config_defaults(&cfg);
    pmt_decode_options opt;
    pmt_decode_options_from_config(&opt, &cfg);
    opt.compute_type = compute_type;
    opt.beam_size = DEFAULT_BEAM;
    t->base = opt;
    char err[768];
    if (pmt_translator_load(&t->tr, model_path, &opt, o->max_batch ? o->max_batch : DEFAULT_BATCH, err, sizeof err) !=
        0) {
        set_error("%s", err);
        free(t);
        return NULL;
    }
    t->tr.warn = NULL;   /* the library never prints: input repairs are silent */
    pmt_model_describe_compute(&t->tr.model, t->compute, sizeof t->compute);
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

/* The translator's search options for these API options. 0, or -1 (error set). */
static int search_options(const projmt_translator *t, const projmt_translate_options *o, pmt_decode_options *opt) {
    *opt = t->base;
    opt->beam_size = o->beam_size ? o->beam_size : DEFAULT_BEAM;
    opt->n_best = o->num_hypotheses ? o->num_hypotheses : 1;
    opt->normalize = o->length_penalty < 0 ? 1.0 : o->length_penalty;
    if (o->max_decoding_length > 0) {
        opt->max_length_factor = 0.0;
        opt->max_length_const = o->max_decoding_length;
    }
    if (opt->beam_size < 1 || opt->beam_size > 64 || opt->n_best < 1 || opt->n_best > opt->beam_size ||
        o->max_decoding_length < 0) {
        set_error("projmt_translate_batch: need 1 <= beam_size <= 64, 1 <= num_hypotheses <= beam_size and "
                  "max_decoding_length >= 0 (got %d, %d, %d)", opt->beam_size, opt->n_best, o->max_decoding_length);
        return -1;
    }
    return 0;
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
                                 const projmt_translate_options *o, projmt_result *out) {
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

projmt_status projmt_translate_batch(projmt_translator *t, const char *const *sentences, size_t n,
                                     const projmt_translate_options *options, projmt_result **results) {
    static const projmt_translate_options defaults = {0, 0, 0, 0, -1.0, 0};
    const projmt_translate_options *o = options ? options : &defaults;
    if (!results) {
        set_error("projmt_translate_batch: results is NULL");
        return PROJMT_ERROR_ARGUMENT;
    }
    *results = NULL;
    if (!t || (!sentences && n > 0)) {
        set_error("projmt_translate_batch: %s is NULL", t ? "sentences" : "the translator");
        return PROJMT_ERROR_ARGUMENT;
    }
    for (size_t i = 0; i < n; i++)
        if (!sentences[i]) {
            set_error("projmt_translate_batch: sentence %zu is NULL", i);
            return PROJMT_ERROR_ARGUMENT;
        }
    pmt_decode_options opt;
    if (search_options(t, o, &opt) != 0) return PROJMT_ERROR_ARGUMENT;
    char err[768];
    if (pmt_translator_set_options(&t->tr, &opt, err, sizeof err) != 0) {
        set_error("%s", err);
        return PROJMT_ERROR_ARGUMENT;
    }
    projmt_result *out = calloc(n ? n : 1, sizeof *out);
    if (!out) {
        set_error("projmt_translate_batch: out of memory");
        return PROJMT_ERROR_MEMORY;
    }
    pmt_set_threads(t->threads);
    projmt_status status = PROJMT_OK;
    for (size_t start = 0; status == PROJMT_OK && start < n; start += (size_t)t->tr.max_batch) {
        const int count = n - start < (size_t)t->tr.max_batch ? (int)(n - start) : t->tr.max_batch;
        pmt_translation *r = t->tr.results;
        if (pmt_translator_translate(&t->tr, sentences + start, count, r, err, sizeof err) != 0) {
            set_error("%s", err);
            status = PROJMT_ERROR_RUNTIME;
            break;
        }
        for (int i = 0; status == PROJMT_OK && i < count; i++)
            status = copy_result(t, &r[i], sentences[start + i], o, &out[start + i]);
    }
    if (status != PROJMT_OK) {
        projmt_results_free(out, n);
        return status;
    }
    *results = out;
    last_error[0] = '\0';
    return PROJMT_OK;
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

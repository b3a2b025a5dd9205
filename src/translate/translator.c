/*
 * translator.c — see translator.h. The only function that knows about
 * checkpoint files is pmt_translator_load; everything else works on a model
 * and a tokenizer, so tests can build both in memory.
 */
#include "translate/translator.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/utf8.h"
#include "model/checkpoint.h"
#include "translate/segment.h"

/* Encoder arena of a translation model, in source tokens per encoder call:
 * e.g. 85 sentences of 12 tokens. Larger only saves sub-batch iterations,
 * while the model's arena also holds [rows, V] training logits that
 * translation never touches (they stay virtual memory). */
enum { ENCODER_ROWS = 1024 };

static void free_texts(pmt_translator *t) {
    for (int i = 0; i < t->n_texts; i++) free(t->texts[i]);
    t->n_texts = 0;
}

static void free_joined(pmt_translator *t) {
    for (int i = 0; i < t->n_joined; i++) free(t->joined[i]);
    free(t->joined);
    free(t->joined_hyp);
    t->joined = NULL;
    t->joined_hyp = NULL;
    t->n_joined = 0;
}

int pmt_translator_init(pmt_translator *t, pmt_model *model, pmt_spm *spm, const pmt_decode_options *opt,
                        int max_batch, char *err, size_t errlen) {
    memset(t, 0, sizeof *t);
    t->model = *model;          /* the translator now owns the model's buffers */
    memset(model, 0, sizeof *model);
    t->spm = spm;
    t->opt = *opt;
    t->max_batch = max_batch < 1 ? 1 : max_batch;
    const size_t nb = (size_t)t->max_batch;
    if (pmt_search_check_shortlist(&t->model, opt, err, errlen) != 0) {
        pmt_translator_free(t);
        return -1;
    }
    if (pmt_search_init(&t->search, &t->model, t->max_batch, opt->beam_size, err, errlen) != 0)
        goto fail;   /* its sizes are valid here: what fails is memory */
    t->ids = malloc(nb * (size_t)t->model.max_len * sizeof *t->ids);
    t->lens = calloc(nb, sizeof *t->lens);
    t->ptrs = calloc(nb, sizeof *t->ptrs);
    t->slot = calloc(nb, sizeof *t->slot);
    t->nbest = calloc(nb, sizeof *t->nbest);
    t->results = calloc(nb, sizeof *t->results);
    t->texts = calloc(nb * (size_t)opt->beam_size, sizeof *t->texts);
    if (!t->ids || !t->lens || !t->ptrs || !t->slot || !t->nbest || !t->results || !t->texts) {
        snprintf(err, errlen, "translator: out of memory");
        goto fail;
    }
    return 0;
fail:
    pmt_translator_free(t);
    return PMT_OUT_OF_MEMORY;
}

int pmt_translator_load(pmt_translator *t, const char *model_path, const pmt_decode_options *opt, int max_batch,
                        char *err, size_t errlen) {
    pmt_model model;
    pmt_spm *spm = NULL;
    memset(t, 0, sizeof *t);
    const int rc = pmt_checkpoint_load_model(model_path, &model, ENCODER_ROWS, 0, &spm, err, errlen);
    if (rc != 0) return rc;
    if (pmt_model_set_compute_type(&model, opt->compute_type, err, errlen) != 0) {
        pmt_model_free(&model);
        pmt_spm_free(spm);
        return PMT_TRANSLATOR_UNSUPPORTED;
    }
    return pmt_translator_init(t, &model, spm, opt, max_batch, err, errlen);
}

void pmt_translator_free(pmt_translator *t) {
    if (t->texts) free_texts(t);
    free_joined(t);
    if (t->search.pool) pmt_search_free(&t->search);
    if (t->model.params) pmt_model_free(&t->model);
    if (t->spm) pmt_spm_free(t->spm);
    free(t->ids); free(t->lens); free(t->ptrs); free(t->slot); free(t->nbest); free(t->results); free(t->texts);
    free(t->clean);
    memset(t, 0, sizeof *t);
}

int pmt_translator_set_options(pmt_translator *t, const pmt_decode_options *opt, char *err, size_t errlen) {
    if (opt->n_best < 1 || opt->n_best > opt->beam_size) {
        snprintf(err, errlen, "n-best (%d) must be in [1, beam size (%d)]", opt->n_best, opt->beam_size);
        return -1;
    }
    if (pmt_search_check_shortlist(&t->model, opt, err, errlen) != 0) return -1;
    if (opt->beam_size > t->search.max_beam) {
        pmt_search bigger;
        char **texts = calloc((size_t)t->max_batch * opt->beam_size, sizeof *texts);
        if (!texts || pmt_search_init(&bigger, &t->model, t->max_batch, opt->beam_size, err, errlen) != 0) {
            if (!texts) snprintf(err, errlen, "translator: out of memory");
            free(texts);
            return -1;
        }
        free_texts(t);
        free(t->texts);
        t->texts = texts;
        pmt_search_free(&t->search);
        t->search = bigger;
    }
    t->opt = *opt;
    return 0;
}

void pmt_translator_warn_file(void *file, int line, const char *message) {
    fprintf(file, "projmt translate: warning: line %d: %s\n", line, message);
}

static void warn(const pmt_translator *t, int line, const char *fmt, ...) {
    if (!t->warn) return;
    char message[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(message, sizeof message, fmt, ap);
    va_end(ap);
    t->warn(t->warn_ctx, line, message);
}

/* Sanitizes and encodes a line into t->ids row k; returns its length, or -1.
 * line_no only labels warnings; *r gets what was repaired. */
static int encode_line(pmt_translator *t, const char *line, int line_no, int k, pmt_translation *r) {
    size_t n = strlen(line), need = 3 * n + 1;
    if (need > t->clean_cap) {
        char *p = realloc(t->clean, need);
        if (!p) return -1;
        t->clean = p;
        t->clean_cap = need;
    }
    int bad = pmt_utf8_sanitize(line, n, t->clean);
    r->replaced_bytes = bad;
    if (bad) warn(t, line_no, "%d invalid UTF-8 byte(s) replaced by U+FFFD", bad);
    const int max_src = t->model.max_len - 1;
    int32_t *ids = t->ids + (size_t)k * t->model.max_len;
    int total = pmt_spm_encode(t->spm, t->clean, ids, max_src);
    if (total < 0) return -1;
    r->source_tokens = total;
    r->cut = total > max_src;
    if (total > max_src) {
        warn(t, line_no, "%d source tokens, truncated to the model's limit of %d", total, max_src);
        total = max_src;
    }
    return total;
}

int pmt_translator_translate(pmt_translator *t, const char *const *lines, int n, pmt_translation *out,
                             char *err, size_t errlen) {
    if (n > t->max_batch) {
        snprintf(err, errlen, "translator: %d lines exceed the batch size %d", n, t->max_batch);
        return -1;
    }
    double start = pmt_now_seconds();
    free_texts(t);
    int m = 0;   /* non-empty sentences */
    for (int i = 0; i < n; i++) {
        out[i] = (pmt_translation){0};
        int len = encode_line(t, lines[i], (int)t->totals.sentences + i + 1, m, &out[i]);
        if (len < 0) {
            snprintf(err, errlen, "translator: tokenizing line %d failed: %s", i + 1, pmt_spm_last_error(t->spm));
            return -1;
        }
        if (len == 0) continue;
        t->lens[m] = len;
        t->ptrs[m] = t->ids + (size_t)m * t->model.max_len;
        t->slot[m] = i;
        t->totals.src_tokens += len;
        m++;
    }
    const int rc = m > 0 ? pmt_search_run(&t->search, &t->opt, t->ptrs, t->lens, m, t->nbest, err, errlen) : 0;
    if (rc != 0) return rc;
    for (int j = 0; j < m; j++) {
        pmt_translation *r = &out[t->slot[j]];
        r->n = t->nbest[j].n;
        r->hyp = t->nbest[j].hyp;
        r->text = t->texts + t->n_texts;
        for (int k = 0; k < r->n; k++) {
            char *s = pmt_spm_decode(t->spm, r->hyp[k].ids, r->hyp[k].len);
            if (!s) {
                snprintf(err, errlen, "translator: detokenizing failed: %s", pmt_spm_last_error(t->spm));
                return -1;
            }
            t->texts[t->n_texts++] = s;
        }
        t->totals.out_tokens += r->hyp[0].len;
    }
    t->totals.sentences += n;
    t->totals.seconds += pmt_now_seconds() - start;
    return 0;
}

/* One sentence's translation, copied out of the translator's storage. */
typedef struct {
    int n;
    char **text;                 /* [n] */
    pmt_hypothesis *hyp;         /* [n], ids NULL */
    int replaced_bytes, source_tokens, cut;   /* pmt_translation's */
} sentence_result;

static void free_sentence_results(sentence_result *r, int n) {
    for (int i = 0; r && i < n; i++) {
        for (int k = 0; k < r[i].n; k++) free(r[i].text[k]);
        free(r[i].text);
        free(r[i].hyp);
    }
    free(r);
}

static int keep_sentence(sentence_result *dst, const pmt_translation *src) {
    dst->n = 0;
    dst->replaced_bytes = src->replaced_bytes;
    dst->source_tokens = src->source_tokens;
    dst->cut = src->cut;
    dst->text = calloc((size_t)(src->n ? src->n : 1), sizeof *dst->text);
    dst->hyp = calloc((size_t)(src->n ? src->n : 1), sizeof *dst->hyp);
    if (!dst->text || !dst->hyp) return -1;
    for (int k = 0; k < src->n; k++) {
        if (!(dst->text[k] = strdup(src->text[k]))) return -1;
        dst->hyp[k] = src->hyp[k];
        dst->hyp[k].ids = NULL;
        dst->n = k + 1;
    }
    return 0;
}

/* Line i's hypothesis k from its sentences [first, first + count). */
static char *join_sentences(const sentence_result *r, int count, int k, pmt_hypothesis *hyp) {
    size_t total = 1;
    *hyp = (pmt_hypothesis){NULL, 0, 0.0, 0.0};
    for (int s = 0; s < count; s++)
        if (r[s].n) total += strlen(r[s].text[k < r[s].n ? k : 0]) + 1;
    char *out = malloc(total), *p = out;
    if (!out) return NULL;
    for (int s = 0; s < count; s++) {
        if (!r[s].n) continue;
        const int j = k < r[s].n ? k : 0;
        const size_t len = strlen(r[s].text[j]);
        if (p > out && len) *p++ = ' ';
        memcpy(p, r[s].text[j], len);
        p += len;
        hyp->len += r[s].hyp[j].len;
        hyp->logprob += r[s].hyp[j].logprob;
        hyp->score += r[s].hyp[j].score;
    }
    *p = '\0';
    return out;
}

int pmt_translator_translate_sentences(pmt_translator *t, const char *const *lines, int n, pmt_translation *out,
                                       char *err, size_t errlen) {
    free_joined(t);
    int rc = -1;
    /* Sentence slots: line i's are [first[i], first[i + 1]), one empty one
     * for a line of white space (it translates to an empty line). */
    int *count = calloc((size_t)(n ? n : 1), sizeof *count), *first = calloc((size_t)n + 1, sizeof *first);
    if (!count || !first) {
        free(count);
        free(first);
        snprintf(err, errlen, "translator: out of memory");
        return -1;
    }
    for (int i = 0; i < n; i++) {
        count[i] = pmt_sentence_split(lines[i], strlen(lines[i]), NULL, 0);
        first[i + 1] = first[i] + (count[i] ? count[i] : 1);
    }
    const int total = first[n];
    char **sentences = calloc((size_t)(total ? total : 1), sizeof *sentences);
    pmt_span *spans = calloc((size_t)(total ? total : 1), sizeof *spans);
    sentence_result *res = calloc((size_t)(total ? total : 1), sizeof *res);
    t->joined = calloc((size_t)(n ? n : 1) * t->opt.beam_size, sizeof *t->joined);
    t->joined_hyp = calloc((size_t)(n ? n : 1) * t->opt.beam_size, sizeof *t->joined_hyp);
    if (!sentences || !spans || !res || !t->joined || !t->joined_hyp) goto oom;
    for (int i = 0; i < n; i++) {
        pmt_span *line_spans = spans + first[i];
        pmt_sentence_split(lines[i], strlen(lines[i]), line_spans, count[i]);
        for (int c = 0; c < count[i]; c++)
            if (!(sentences[first[i] + c] =
                      strndup(lines[i] + line_spans[c].start, line_spans[c].end - line_spans[c].start)))
                goto oom;
        if (!count[i] && !(sentences[first[i]] = strdup(""))) goto oom;
    }
    /* The translator's line numbers in warnings count sentences here. */
    for (int done = 0; done < total; done += t->max_batch) {
        const int chunk = total - done < t->max_batch ? total - done : t->max_batch;
        const int status = pmt_translator_translate(t, (const char *const *)sentences + done, chunk, t->results, err,
                                                    errlen);
        if (status != 0) {
            rc = status;
            goto cleanup;
        }
        for (int j = 0; j < chunk; j++)
            if (keep_sentence(&res[done + j], &t->results[j]) != 0) goto oom;
    }
    for (int i = 0; i < n; i++) {
        const int slots = first[i + 1] - first[i];
        int most = 0;
        for (int s = first[i]; s < first[i + 1]; s++) most = res[s].n > most ? res[s].n : most;
        out[i] = (pmt_translation){most, t->joined + t->n_joined, t->joined_hyp + t->n_joined, 0, 0, 0};
        for (int s = first[i]; s < first[i + 1]; s++) {   /* a line's repairs are its sentences' */
            out[i].replaced_bytes += res[s].replaced_bytes;
            out[i].source_tokens += res[s].source_tokens;
            out[i].cut |= res[s].cut;
        }
        for (int k = 0; k < most; k++) {
            char *joined = join_sentences(res + first[i], slots, k, &t->joined_hyp[t->n_joined]);
            if (!joined) goto oom;
            t->joined[t->n_joined++] = joined;
        }
    }
    rc = 0;
    goto cleanup;
oom:
    snprintf(err, errlen, "translator: out of memory");
cleanup:
    for (int s = 0; sentences && s < total; s++) free(sentences[s]);
    free(sentences);
    free(count);
    free(first);
    free(spans);
    free_sentence_results(res, total);
    return rc;
}

int pmt_translator_translate_all(pmt_translator *t, const char *const *lines, size_t n, pmt_best_fn each,
                                 void *user, char *err, size_t errlen) {
    for (size_t first = 0; first < n; first += (size_t)t->max_batch) {
        int chunk = n - first < (size_t)t->max_batch ? (int)(n - first) : t->max_batch;
        if (pmt_translator_translate(t, lines + first, chunk, t->results, err, errlen) != 0) return -1;
        for (int i = 0; i < chunk; i++) {
            const pmt_translation *r = &t->results[i];
            if (each(user, first + (size_t)i, r->n > 0 ? r->text[0] : "", err, errlen) != 0) return -1;
        }
    }
    return 0;
}

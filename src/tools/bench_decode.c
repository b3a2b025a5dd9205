/* bench_decode.c — see bench_decode.h. */
#include "tools/bench_decode.h"

#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/rng.h"
#include "model/model_file.h"
#include "translate/beam_search.h"

/* The source sentences of a benchmark: ids packed row by row. */
typedef struct bench_sources {
    int n;
    int32_t *ids;            /* [n * stride] */
    int *len;                /* [n] */
    const int32_t **ptr;     /* [n] */
} bench_sources;


static void sources_free(bench_sources *s) {
    free(s->ids);
    free(s->len);
    free(s->ptr);
    memset(s, 0, sizeof *s);
}

static int sources_alloc(bench_sources *s, int n, int stride) {
    s->ids = calloc((size_t)n * stride, sizeof *s->ids);
    s->len = calloc((size_t)n, sizeof *s->len);
    s->ptr = calloc((size_t)n, sizeof *s->ptr);
    for (int i = 0; s->ptr && i < n; i++) s->ptr[i] = s->ids + (size_t)i * stride;
    return s->ids && s->len && s->ptr ? 0 : -1;
}

/* Whitespace-separated words of a line (the unit of "source words/s"). */
static long count_words(const char *line) {
    long n = 0;
    for (int in_word = 0; *line; line++) {
        const int space = *line == ' ' || *line == '\t';
        n += !space && !in_word;
        in_word = !space;
    }
    return n;
}

/* Reads and encodes up to n lines, adding their words to *words; returns the
 * count (0 if unreadable). */
static int sources_from_text(bench_sources *s, const pmt_spm *spm, const char *path, int n, int max_src,
                             long *words) {
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    char *line = NULL;
    size_t cap = 0;
    ssize_t got;
    int count = 0;
    while (count < n && (got = getline(&line, &cap, f)) >= 0) {
        while (got > 0 && (line[got - 1] == '\n' || line[got - 1] == '\r')) line[--got] = '\0';
        int len = pmt_spm_encode(spm, line, s->ids + (size_t)count * max_src, max_src);
        if (len <= 0) continue;
        s->len[count++] = len < max_src ? len : max_src;
        *words += count_words(line);
    }
    free(line);
    fclose(f);
    return count;
}

static void sources_synthetic(bench_sources *s, int n, int V, int max_src) {
    pmt_rng rng = {12345};
    for (int i = 0; i < n; i++) {
        int len = 3 + (int)pmt_rng_below(&rng, 12);
        if (len > max_src) len = max_src;
        int32_t *row = s->ids + (size_t)i * max_src;
        for (int j = 0; j < len; j++) row[j] = 4 + (int32_t)pmt_rng_below(&rng, (uint64_t)(V - 4));
        s->len[i] = len;
    }
    s->n = n;
}

/* Times one search configuration over all sources. */
static int time_run(pmt_search *search, const pmt_decode_options *opt, const bench_sources *src, int batch,
                    pmt_nbest *out, pmt_bench_decode_run *run, char *err, size_t errlen) {
    run->out_tokens = 0;
    double start = pmt_now_seconds();
    for (int i = 0; i < src->n; i += batch) {
        int n = src->n - i < batch ? src->n - i : batch;
        if (pmt_search_run(search, opt, src->ptr + i, src->len + i, n, out, err, errlen) != 0) return -1;
        for (int j = 0; j < n; j++) run->out_tokens += out[j].hyp[0].len;
    }
    run->seconds = pmt_now_seconds() - start;
    run->sentences_per_s = src->n / run->seconds;
    run->tokens_per_s = run->out_tokens / run->seconds;
    return 0;
}

int pmt_bench_decode(pmt_model *m, const pmt_spm *spm, const char *src_text, int n_sentences, int batch,
                     int shortlist, pmt_bench_decode_report *rep, char *err, size_t errlen) {
    enum { BEAM = 4 };
    memset(rep, 0, sizeof *rep);
    if (n_sentences < 1 || batch < 1) {
        snprintf(err, errlen, "bench decode: need at least one sentence and batch >= 1");
        return -1;
    }
    const int max_src = m->max_len - 1;
    bench_sources src = {0};
    pmt_search search = {0};
    pmt_nbest *out = calloc((size_t)batch, sizeof *out);
    if (!out || sources_alloc(&src, n_sentences, max_src) != 0) {
        snprintf(err, errlen, "bench decode: out of memory");
        goto fail;
    }
    src.n = spm && src_text ? sources_from_text(&src, spm, src_text, n_sentences, max_src, &rep->src_words) : 0;
    if (src.n > 0) {
        snprintf(rep->source, sizeof rep->source, "first %d lines of %s", src.n, src_text);
    } else {
        sources_synthetic(&src, n_sentences, m->V, max_src);
        snprintf(rep->source, sizeof rep->source, "%d synthetic sentences of 3..14 ids", src.n);
    }
    rep->sentences = src.n;
    rep->batch = batch;
    rep->weights = pmt_weight_type_name((pmt_weight_type)m->decode_weights);
    for (int i = 0; i < src.n; i++) rep->src_tokens += src.len[i];
    if (rep->src_words == 0) rep->src_words = rep->src_tokens;
    if (pmt_search_init(&search, m, batch, BEAM, err, errlen) != 0) goto fail;

    pmt_decode_options limits;
    pmt_decode_options_from_config(&limits, &m->cfg);
    limits.n_best = 1;
    limits.shortlist = shortlist;
    rep->shortlist = shortlist;
    pmt_decode_options capped = limits;
    capped.max_length_factor = 1.1;
    capped.max_length_const = 2;
    const pmt_decode_options *which[2] = {&capped, &limits};

    /* Warm-up: page in the caches and spin up the thread pool. */
    pmt_decode_options warm = capped;
    warm.beam_size = BEAM;
    int n_warm = src.n < batch ? src.n : batch;
    if (pmt_search_run(&search, &warm, src.ptr, src.len, n_warm, out, err, errlen) != 0) goto fail;

    for (int k = 0; k < PMT_BENCH_DECODE_RUNS; k++) {
        pmt_bench_decode_run *run = &rep->run[k];
        pmt_decode_options opt = *which[k / 2];
        opt.beam_size = k % 2 ? BEAM : 1;
        run->beam = opt.beam_size;
        run->capped = k < 2;
        snprintf(run->label, sizeof run->label, "%s, %s", run->beam == 1 ? "greedy" : "beam 4",
                 run->capped ? "capped" : "limits");
        if (time_run(&search, &opt, &src, batch, out, run, err, errlen) != 0) goto fail;
        run->src_words_per_s = (double)rep->src_words / run->seconds;
    }
    pmt_search_free(&search);
    sources_free(&src);
    free(out);
    return 0;
fail:
    if (search.pool) pmt_search_free(&search);
    sources_free(&src);
    free(out);
    return -1;
}

void pmt_bench_decode_print(FILE *out, const char *title, const pmt_bench_decode_report *rep) {
    char shortlist[48] = "";
    if (rep->shortlist > 0) snprintf(shortlist, sizeof shortlist, ", shortlist %d", rep->shortlist);
    fprintf(out, "decode %s (%s weights%s): %s (%ld source words, %ld source tokens), batch %d\n", title, rep->weights,
            shortlist, rep->source, rep->src_words, rep->src_tokens, rep->batch);
    for (int k = 0; k < PMT_BENCH_DECODE_RUNS; k++) {
        const pmt_bench_decode_run *r = &rep->run[k];
        fprintf(out, "  %-16s %8.1f sentences/s %9.0f source words/s %9.0f output tokens/s  (%ld tokens, %.2f s)\n",
                r->label, r->sentences_per_s, r->src_words_per_s, r->tokens_per_s, r->out_tokens, r->seconds);
    }
}

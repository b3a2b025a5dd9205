/*
 * metrics.c — sacreBLEU-compatible corpus BLEU and chrF (see metrics.h).
 *
 * Both metrics reduce a sentence to a sequence of 32-bit symbols (BLEU: word
 * ids after 13a tokenization; chrF: Unicode code points without whitespace)
 * and count clipped n-gram matches by sorting the n-grams of each side and
 * looking hypothesis n-grams up in the sorted reference n-grams. Sorting
 * instead of hashing keeps the code small and the result independent of
 * any hash seed. The final formulas copy sacreBLEU's operation order so the
 * floating-point results agree to the last bit.
 */
#include "eval/metrics.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/utf8.h"

#define NGRAM_MAX_ORDER PMT_CHRF_CHAR_ORDER

/* ------------------------------------------------------ n-gram counting -- */

typedef struct ngram {
    uint32_t sym[NGRAM_MAX_ORDER];   /* unused tail is zero so whole keys compare */
} ngram;

typedef struct symbol_seq {
    uint32_t *sym;
    size_t len;
} symbol_seq;

static int compare_ngrams(const void *a, const void *b) {
    return memcmp(a, b, sizeof(ngram));
}

static size_t ngram_count_of_order(size_t len, int n) {
    return len >= (size_t)n ? len - (size_t)n + 1 : 0;
}

/* The n-grams of order n of seq, sorted; 0, or -1 when out of memory. */
static int sorted_ngrams(const symbol_seq *seq, int n, ngram **out, size_t *count) {
    *count = ngram_count_of_order(seq->len, n);
    *out = NULL;
    if (*count == 0) return 0;
    ngram *grams = calloc(*count, sizeof *grams);
    if (!grams) return -1;
    for (size_t i = 0; i < *count; i++) memcpy(grams[i].sym, seq->sym + i, (size_t)n * sizeof(uint32_t));
    qsort(grams, *count, sizeof *grams, compare_ngrams);
    *out = grams;
    return 0;
}

/* Occurrences of key in a sorted n-gram array (two binary searches). */
static size_t occurrences(const ngram *sorted, size_t count, const ngram *key) {
    size_t lo = 0, hi = count;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (compare_ngrams(&sorted[mid], key) < 0) lo = mid + 1; else hi = mid;
    }
    size_t first = lo;
    hi = count;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (compare_ngrams(&sorted[mid], key) <= 0) lo = mid + 1; else hi = mid;
    }
    return lo - first;
}

/* Sums, over the distinct hypothesis n-grams, min(count in hyp, highest count
 * in any one reference) — BLEU's and chrF's clipped matches. */
static size_t clip_group_matches(const ngram *hyp, size_t hyp_count,
                                 ngram *const *refs, const size_t *ref_counts, int n_refs) {
    size_t matches = 0;
    for (size_t start = 0; start < hyp_count; ) {
        size_t end = start + 1;
        while (end < hyp_count && compare_ngrams(&hyp[start], &hyp[end]) == 0) end++;
        size_t best_ref = 0;
        for (int r = 0; r < n_refs; r++) {
            size_t in_ref = occurrences(refs[r], ref_counts[r], &hyp[start]);
            if (in_ref > best_ref) best_ref = in_ref;
        }
        size_t in_hyp = end - start;
        matches += in_hyp < best_ref ? in_hyp : best_ref;
        start = end;
    }
    return matches;
}

/* Clipped matches of order n between hyp and refs; 0, or -1 when out of memory. */
static int clipped_matches(const symbol_seq *hyp, const symbol_seq *refs, int n_refs, int n,
                           int64_t *matches) {
    ngram *hyp_grams = NULL;
    size_t hyp_count = 0;
    ngram **ref_grams = calloc((size_t)n_refs, sizeof *ref_grams);
    size_t *ref_counts = calloc((size_t)n_refs, sizeof *ref_counts);
    int status = (ref_grams && ref_counts) ? sorted_ngrams(hyp, n, &hyp_grams, &hyp_count) : -1;
    for (int r = 0; r < n_refs && status == 0; r++)
        status = sorted_ngrams(&refs[r], n, &ref_grams[r], &ref_counts[r]);
    if (status == 0)
        *matches = (int64_t)clip_group_matches(hyp_grams, hyp_count, ref_grams, ref_counts, n_refs);
    for (int r = 0; ref_grams && r < n_refs; r++) free(ref_grams[r]);
    free(ref_grams);
    free(ref_counts);
    free(hyp_grams);
    return status;
}

/* ------------------------------------------------------------- words ----- */

/* One 13a-tokenized sentence: the tokenized text cut into words in place. */
typedef struct word_seq {
    char *text;
    char **words;
    symbol_seq ids;
} word_seq;

static void word_seq_free(word_seq *w) {
    free(w->text);
    free(w->words);
    free(w->ids.sym);
    memset(w, 0, sizeof *w);
}

/* Length of s without trailing Unicode whitespace (Python's str.rstrip()). */
static size_t rstripped_length(const char *s) {
    size_t keep = 0;
    for (const char *p = s; *p; ) {
        uint32_t cp = pmt_utf8_next(&p);
        if (!pmt_unicode_is_space(cp)) keep = (size_t)(p - s);
    }
    return keep;
}

/* sacreBLEU's BLEU preprocessing: rstrip, tokenize 13a, split on spaces.
 * 0, or -1 when out of memory. */
static int word_seq_init(word_seq *w, const char *sentence) {
    memset(w, 0, sizeof *w);
    size_t keep = rstripped_length(sentence);
    char *stripped = malloc(keep + 1);
    if (!stripped) return -1;
    memcpy(stripped, sentence, keep);
    stripped[keep] = '\0';
    w->text = pmt_tok13a(stripped);
    free(stripped);
    if (!w->text) return -1;

    size_t n_words = *w->text ? 1 : 0;
    for (const char *c = w->text; *c; c++) n_words += *c == ' ';
    w->words = calloc(n_words + 1, sizeof *w->words);
    w->ids.sym = calloc(n_words + 1, sizeof *w->ids.sym);
    if (!w->words || !w->ids.sym) { word_seq_free(w); return -1; }
    w->ids.len = n_words;
    char *cursor = w->text;
    for (size_t i = 0; i < n_words; i++) {
        w->words[i] = cursor;
        char *space = strchr(cursor, ' ');
        if (space) { *space = '\0'; cursor = space + 1; }
    }
    return 0;
}

typedef struct word_slot {
    const char *word;
    uint32_t *id;
} word_slot;

static int compare_word_slots(const void *a, const void *b) {
    return strcmp(((const word_slot *)a)->word, ((const word_slot *)b)->word);
}

/* Gives equal words in all the sequences the same id, distinct words distinct
 * ids; 0, or -1 when out of memory. */
static int assign_word_ids(word_seq *seqs, int n_seqs) {
    size_t total = 0;
    for (int s = 0; s < n_seqs; s++) total += seqs[s].ids.len;
    if (total == 0) return 0;
    word_slot *slots = malloc(total * sizeof *slots);
    if (!slots) return -1;
    size_t k = 0;
    for (int s = 0; s < n_seqs; s++)
        for (size_t i = 0; i < seqs[s].ids.len; i++)
            slots[k++] = (word_slot){seqs[s].words[i], &seqs[s].ids.sym[i]};
    qsort(slots, total, sizeof *slots, compare_word_slots);
    uint32_t id = 1;
    for (size_t i = 0; i < total; i++) {
        if (i > 0 && strcmp(slots[i - 1].word, slots[i].word) != 0) id++;
        *slots[i].id = id;
    }
    free(slots);
    return 0;
}

/* ------------------------------------------------------------- BLEU ------ */

void pmt_bleu_stats_init(pmt_bleu_stats *stats) {
    memset(stats, 0, sizeof *stats);
}

/* Tracks the reference count: the common one, or -1 ("var") when it varies. */
static int merge_ref_count(int so_far, int added) {
    if (so_far == 0) return added;
    if (added == 0) return so_far;
    return so_far == added ? so_far : -1;
}

/* sacreBLEU's _get_closest_ref_len: nearest length, the shorter on a tie. */
static int64_t closest_ref_len(int64_t hyp_len, const word_seq *refs, int n_refs) {
    int64_t best_len = -1, best_diff = -1;
    for (int r = 0; r < n_refs; r++) {
        int64_t len = (int64_t)refs[r].ids.len;
        int64_t diff = len > hyp_len ? len - hyp_len : hyp_len - len;
        if (best_diff < 0 || diff < best_diff || (diff == best_diff && len < best_len)) {
            best_diff = diff;
            best_len = len;
        }
    }
    return best_len;
}

/* Fills one sentence's statistics from tokenized, id-mapped sequences. */
static int bleu_sentence_stats(const word_seq *hyp, const word_seq *refs, int n_refs,
                               pmt_bleu_stats *sentence) {
    pmt_bleu_stats_init(sentence);
    symbol_seq *ref_ids = malloc((size_t)n_refs * sizeof *ref_ids);
    if (!ref_ids) return -1;
    for (int r = 0; r < n_refs; r++) ref_ids[r] = refs[r].ids;
    sentence->hyp_len = (int64_t)hyp->ids.len;
    sentence->ref_len = closest_ref_len(sentence->hyp_len, refs, n_refs);
    sentence->n_sentences = 1;
    sentence->n_refs = n_refs;
    int status = 0;
    for (int n = 1; n <= PMT_BLEU_MAX_ORDER && status == 0; n++) {
        sentence->total[n - 1] = (int64_t)ngram_count_of_order(hyp->ids.len, n);
        status = clipped_matches(&hyp->ids, ref_ids, n_refs, n, &sentence->correct[n - 1]);
    }
    free(ref_ids);
    return status;
}

int pmt_bleu_stats_add_multi(pmt_bleu_stats *stats, const char *hyp,
                             const char *const *refs, int n_refs) {
    if (n_refs < 1) return -1;
    word_seq *seqs = calloc((size_t)n_refs + 1, sizeof *seqs);
    if (!seqs) return -1;
    int status = 0;
    for (int s = 0; s <= n_refs && status == 0; s++)
        status = word_seq_init(&seqs[s], s == 0 ? hyp : refs[s - 1]);
    if (status == 0) status = assign_word_ids(seqs, n_refs + 1);
    pmt_bleu_stats sentence;
    if (status == 0) status = bleu_sentence_stats(&seqs[0], seqs + 1, n_refs, &sentence);
    if (status == 0) pmt_bleu_stats_merge(stats, &sentence);
    for (int s = 0; s <= n_refs; s++) word_seq_free(&seqs[s]);
    free(seqs);
    return status;
}

int pmt_bleu_stats_add(pmt_bleu_stats *stats, const char *hyp, const char *ref) {
    return pmt_bleu_stats_add_multi(stats, hyp, &ref, 1);
}

void pmt_bleu_stats_merge(pmt_bleu_stats *into, const pmt_bleu_stats *from) {
    into->hyp_len += from->hyp_len;
    into->ref_len += from->ref_len;
    for (int n = 0; n < PMT_BLEU_MAX_ORDER; n++) {
        into->correct[n] += from->correct[n];
        into->total[n] += from->total[n];
    }
    into->n_sentences += from->n_sentences;
    into->n_refs = merge_ref_count(into->n_refs, from->n_refs);
}

/* sacreBLEU's my_log: log(0) is a large negative number, not -inf. */
static double sacrebleu_log(double x) {
    return x == 0.0 ? -9999999999.0 : log(x);
}

static double brevity_penalty(int64_t hyp_len, int64_t ref_len) {
    if (hyp_len >= ref_len) return 1.0;
    return hyp_len > 0 ? exp(1.0 - (double)ref_len / (double)hyp_len) : 0.0;
}

/* sacreBLEU's BLEU.compute_bleu with smooth_method='exp', effective_order off. */
pmt_bleu_score pmt_bleu_compute(const pmt_bleu_stats *stats) {
    pmt_bleu_score out;
    memset(&out, 0, sizeof out);
    out.hyp_len = stats->hyp_len;
    out.ref_len = stats->ref_len;
    out.n_refs = stats->n_refs;
    out.bp = brevity_penalty(stats->hyp_len, stats->ref_len);
    out.ratio = stats->ref_len ? (double)stats->hyp_len / (double)stats->ref_len : 0.0;

    int any_correct = 0;
    for (int n = 0; n < PMT_BLEU_MAX_ORDER; n++) any_correct |= stats->correct[n] != 0;
    if (!any_correct) return out;

    /* Each order without matches halves its pseudo-count: 1/2, 1/4, ... (NIST). */
    double smooth = 1.0;
    for (int n = 0; n < PMT_BLEU_MAX_ORDER; n++) {
        if (stats->total[n] == 0) break;
        if (stats->correct[n] == 0) {
            smooth *= 2;
            out.precisions[n] = 100.0 / (smooth * (double)stats->total[n]);
        } else {
            out.precisions[n] = 100.0 * (double)stats->correct[n] / (double)stats->total[n];
        }
    }
    double log_sum = 0.0;
    for (int n = 0; n < PMT_BLEU_MAX_ORDER; n++) log_sum += sacrebleu_log(out.precisions[n]);
    out.score = out.bp * exp(log_sum / PMT_BLEU_MAX_ORDER);
    return out;
}

/* "nrefs:N" as sacreBLEU writes it ("var" when the count varies). */
static void format_nrefs(int n_refs, char *buf, size_t len) {
    if (n_refs < 0) snprintf(buf, len, "nrefs:var");
    else snprintf(buf, len, "nrefs:%d", n_refs > 0 ? n_refs : 1);
}

void pmt_bleu_signature(int n_refs, char *buf, size_t len) {
    char nrefs[32];
    format_nrefs(n_refs, nrefs, sizeof nrefs);
    snprintf(buf, len, "%s|case:mixed|eff:no|tok:13a|smooth:exp|version:%s", nrefs, PMT_METRICS_VERSION);
}

void pmt_bleu_format(const pmt_bleu_score *score, char *buf, size_t len) {
    char signature[PMT_METRICS_LINE_MAX];
    pmt_bleu_signature(score->n_refs, signature, sizeof signature);
    snprintf(buf, len,
             "BLEU|%s = %.2f %.1f/%.1f/%.1f/%.1f (BP = %.3f ratio = %.3f hyp_len = %lld ref_len = %lld)",
             signature, score->score, score->precisions[0], score->precisions[1],
             score->precisions[2], score->precisions[3], score->bp, score->ratio,
             (long long)score->hyp_len, (long long)score->ref_len);
}

double pmt_bleu_sentence(const char *hyp, const char *ref) {
    pmt_bleu_stats stats;
    pmt_bleu_stats_init(&stats);
    if (pmt_bleu_stats_add(&stats, hyp, ref) != 0) return -1.0;
    return pmt_bleu_compute(&stats).score;
}

/* ------------------------------------------------------------- chrF ------ */

void pmt_chrf_stats_init(pmt_chrf_stats *stats) {
    memset(stats, 0, sizeof *stats);
}

/* The code points of s with all Unicode whitespace removed; 0, or -1 when out of memory. */
static int chars_without_spaces(const char *s, symbol_seq *out) {
    out->len = 0;
    out->sym = malloc((strlen(s) + 1) * sizeof *out->sym);
    if (!out->sym) return -1;
    for (const char *p = s; *p; ) {
        uint32_t cp = pmt_utf8_next(&p);
        if (!pmt_unicode_is_space(cp)) out->sym[out->len++] = cp;
    }
    return 0;
}

/* sacreBLEU's CHRF._compute_f_score with eps_smoothing off, in 0..100. */
static double chrf_f_score(const int64_t *hyp, const int64_t *ref, const int64_t *match) {
    const double factor = (double)(PMT_CHRF_BETA * PMT_CHRF_BETA);
    double avg_prec = 0.0, avg_rec = 0.0;
    int effective_order = 0;
    for (int n = 0; n < PMT_CHRF_CHAR_ORDER; n++) {
        if (hyp[n] > 0 && ref[n] > 0) {
            avg_prec += (double)match[n] / (double)hyp[n];
            avg_rec += (double)match[n] / (double)ref[n];
            effective_order++;
        }
    }
    if (effective_order == 0) return 0.0;
    avg_prec /= effective_order;
    avg_rec /= effective_order;
    if (avg_prec + avg_rec == 0.0) return 0.0;
    double score = (1 + factor) * avg_prec * avg_rec;
    score /= (factor * avg_prec) + avg_rec;
    return 100 * score;
}

/* One sentence against one reference, as sacreBLEU's _get_match_statistics:
 * hypothesis n-grams only count for orders the reference has n-grams of. */
static int chrf_pair_stats(const symbol_seq *hyp, const symbol_seq *ref, pmt_chrf_stats *pair) {
    pmt_chrf_stats_init(pair);
    for (int n = 1; n <= PMT_CHRF_CHAR_ORDER; n++) {
        size_t ref_count = ngram_count_of_order(ref->len, n);
        pair->ref[n - 1] = (int64_t)ref_count;
        pair->hyp[n - 1] = ref_count ? (int64_t)ngram_count_of_order(hyp->len, n) : 0;
        if (clipped_matches(hyp, ref, 1, n, &pair->match[n - 1]) != 0) return -1;
    }
    pair->n_sentences = 1;
    return 0;
}

int pmt_chrf_stats_add_multi(pmt_chrf_stats *stats, const char *hyp,
                             const char *const *refs, int n_refs) {
    if (n_refs < 1) return -1;
    symbol_seq hyp_chars;
    if (chars_without_spaces(hyp, &hyp_chars) != 0) return -1;
    pmt_chrf_stats best;
    pmt_chrf_stats_init(&best);
    double best_f = -1.0;
    int status = 0;
    for (int r = 0; r < n_refs && status == 0; r++) {
        symbol_seq ref_chars;
        pmt_chrf_stats pair;
        status = chars_without_spaces(refs[r], &ref_chars);
        if (status == 0) status = chrf_pair_stats(&hyp_chars, &ref_chars, &pair);
        if (status == 0) {
            double f = chrf_f_score(pair.hyp, pair.ref, pair.match);
            if (f > best_f) { best_f = f; best = pair; }
        }
        free(ref_chars.sym);
    }
    free(hyp_chars.sym);
    if (status != 0) return status;
    best.n_refs = n_refs;
    pmt_chrf_stats_merge(stats, &best);
    return 0;
}

int pmt_chrf_stats_add(pmt_chrf_stats *stats, const char *hyp, const char *ref) {
    return pmt_chrf_stats_add_multi(stats, hyp, &ref, 1);
}

void pmt_chrf_stats_merge(pmt_chrf_stats *into, const pmt_chrf_stats *from) {
    for (int n = 0; n < PMT_CHRF_CHAR_ORDER; n++) {
        into->hyp[n] += from->hyp[n];
        into->ref[n] += from->ref[n];
        into->match[n] += from->match[n];
    }
    into->n_sentences += from->n_sentences;
    into->n_refs = merge_ref_count(into->n_refs, from->n_refs);
}

double pmt_chrf_compute(const pmt_chrf_stats *stats) {
    return chrf_f_score(stats->hyp, stats->ref, stats->match);
}

void pmt_chrf_signature(int n_refs, char *buf, size_t len) {
    char nrefs[32];
    format_nrefs(n_refs, nrefs, sizeof nrefs);
    snprintf(buf, len, "%s|case:mixed|eff:yes|nc:%d|nw:0|space:no|version:%s",
             nrefs, PMT_CHRF_CHAR_ORDER, PMT_METRICS_VERSION);
}

void pmt_chrf_format(double score, int n_refs, char *buf, size_t len) {
    char signature[PMT_METRICS_LINE_MAX];
    pmt_chrf_signature(n_refs, signature, sizeof signature);
    snprintf(buf, len, "chrF%d|%s = %.2f", PMT_CHRF_BETA, signature, score);
}

/* ------------------------------------------------- scoring whole files -- */

/* Case-insensitive comparison of a list item s[0..len) with a metric name. */
static int item_is(const char *s, size_t len, const char *name) {
    if (strlen(name) != len) return 0;
    for (size_t i = 0; i < len; i++)
        if (tolower((unsigned char)s[i]) != name[i]) return 0;
    return 1;
}

int pmt_metrics_parse_list(const char *list, unsigned *metrics, char *err, size_t errlen) {
    *metrics = 0;
    for (const char *item = list; ; ) {
        size_t len = strcspn(item, ",");
        if (item_is(item, len, "bleu")) *metrics |= PMT_METRIC_BLEU;
        else if (item_is(item, len, "chrf")) *metrics |= PMT_METRIC_CHRF;
        else {
            snprintf(err, errlen, "unknown metric '%.*s' in '%s' (known: bleu, chrf)", (int)len, item, list);
            return -1;
        }
        if (item[len] == '\0') break;
        item += len + 1;
    }
    return 0;
}

int pmt_metrics_score_lines(const char *const *hyps, const char *const *refs, size_t n,
                            unsigned metrics, pmt_metrics_report *report,
                            char *err, size_t errlen) {
    memset(report, 0, sizeof *report);
    if ((metrics & PMT_METRIC_ALL) == 0) {
        snprintf(err, errlen, "no metric selected (choose from bleu, chrf)");
        return -1;
    }
    pmt_bleu_stats bleu;
    pmt_chrf_stats chrf;
    pmt_bleu_stats_init(&bleu);
    pmt_chrf_stats_init(&chrf);
    for (size_t i = 0; i < n; i++) {
        int failed = ((metrics & PMT_METRIC_BLEU) && pmt_bleu_stats_add(&bleu, hyps[i], refs[i]) != 0) ||
                     ((metrics & PMT_METRIC_CHRF) && pmt_chrf_stats_add(&chrf, hyps[i], refs[i]) != 0);
        if (failed) {
            snprintf(err, errlen, "out of memory scoring sentence %zu", i + 1);
            return -1;
        }
    }
    report->metrics = metrics & PMT_METRIC_ALL;
    report->n_sentences = (int64_t)n;
    report->bleu = pmt_bleu_compute(&bleu);
    report->chrf = pmt_chrf_compute(&chrf);
    report->chrf_n_refs = chrf.n_refs;
    return 0;
}

/* Appends formatted text at *used; keeps *used <= len and flags overflow. */
__attribute__((format(printf, 5, 6)))
static void json_append(char *buf, size_t len, size_t *used, int *overflow, const char *fmt, ...) {
    if (*overflow) return;
    va_list args;
    va_start(args, fmt);
    int wrote = vsnprintf(buf + *used, len - *used, fmt, args);
    va_end(args);
    if (wrote < 0 || (size_t)wrote >= len - *used) { *overflow = 1; return; }
    *used += (size_t)wrote;
}

int pmt_metrics_report_json(const pmt_metrics_report *report, char *buf, size_t len) {
    if (len == 0) return -1;
    size_t used = 0;
    int overflow = 0;
    char signature[PMT_METRICS_LINE_MAX];
    json_append(buf, len, &used, &overflow, "{\"sentences\": %lld", (long long)report->n_sentences);
    if (report->metrics & PMT_METRIC_BLEU) {
        const pmt_bleu_score *b = &report->bleu;
        pmt_bleu_signature(b->n_refs, signature, sizeof signature);
        json_append(buf, len, &used, &overflow,
                    ", \"bleu\": {\"score\": %.17g, \"precisions\": [%.17g, %.17g, %.17g, %.17g], "
                    "\"bp\": %.17g, \"ratio\": %.17g, \"hyp_len\": %lld, \"ref_len\": %lld, \"signature\": \"%s\"}",
                    b->score, b->precisions[0], b->precisions[1], b->precisions[2], b->precisions[3],
                    b->bp, b->ratio, (long long)b->hyp_len, (long long)b->ref_len, signature);
    }
    if (report->metrics & PMT_METRIC_CHRF) {
        pmt_chrf_signature(report->chrf_n_refs, signature, sizeof signature);
        json_append(buf, len, &used, &overflow, ", \"chrf\": {\"score\": %.17g, \"signature\": \"%s\"}",
                    report->chrf, signature);
    }
    json_append(buf, len, &used, &overflow, "}");
    return overflow ? -1 : 0;
}

/* ------------------------------------------------------------ files ------ */

void pmt_text_lines_free(pmt_text_lines *text) {
    for (size_t i = 0; text->lines && i < text->n; i++) free(text->lines[i]);
    free(text->lines);
    text->lines = NULL;
    text->n = 0;
}

/* The whole file as a NUL-terminated string; 0, or -1 with err. */
static int read_whole_file(const char *path, char **data, size_t *size, char *err, size_t errlen) {
    *data = NULL;
    *size = 0;
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, errlen, "cannot open '%s': %s", path, strerror(errno));
        return -1;
    }
    size_t cap = 1 << 16;
    char *buf = malloc(cap);
    int status = buf ? 0 : -1;
    while (status == 0) {
        if (*size + 1 >= cap) {
            char *grown = realloc(buf, 2 * cap);
            if (!grown) { status = -1; break; }
            buf = grown;
            cap *= 2;
        }
        size_t got = fread(buf + *size, 1, cap - 1 - *size, f);
        *size += got;
        if (got == 0) break;
    }
    if (status != 0) snprintf(err, errlen, "out of memory reading '%s'", path);
    else if (ferror(f)) { status = -1; snprintf(err, errlen, "error reading '%s': %s", path, strerror(errno)); }
    if (fclose(f) != 0 && status == 0) {
        status = -1;
        snprintf(err, errlen, "error closing '%s': %s", path, strerror(errno));
    }
    if (status != 0) { free(buf); return -1; }
    buf[*size] = '\0';
    *data = buf;
    return 0;
}

/* Copies data[start, end) without a trailing '\r' into a new string. */
static char *copy_line(const char *start, const char *end) {
    if (end > start && end[-1] == '\r') end--;
    size_t n = (size_t)(end - start);
    char *line = malloc(n + 1);
    if (!line) return NULL;
    memcpy(line, start, n);
    line[n] = '\0';
    return line;
}

int pmt_text_lines_load(pmt_text_lines *text, const char *path, char *err, size_t errlen) {
    text->lines = NULL;
    text->n = 0;
    char *data;
    size_t size;
    if (read_whole_file(path, &data, &size, err, errlen) != 0) return -1;
    size_t n_lines = 0;
    for (size_t i = 0; i < size; i++) n_lines += data[i] == '\n';
    if (size > 0 && data[size - 1] != '\n') n_lines++;
    text->lines = calloc(n_lines + 1, sizeof *text->lines);
    int status = text->lines ? 0 : -1;
    const char *start = data, *end_of_data = data + size;
    for (size_t k = 0; k < n_lines && status == 0; k++) {
        const char *end = memchr(start, '\n', (size_t)(end_of_data - start));
        if (!end) end = end_of_data;
        text->lines[k] = copy_line(start, end);
        if (!text->lines[k]) status = -1;
        text->n = k + 1;
        start = end + 1;
    }
    free(data);
    if (status != 0) {
        pmt_text_lines_free(text);
        snprintf(err, errlen, "out of memory splitting '%s' into lines", path);
    }
    return status;
}

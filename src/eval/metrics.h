/*
 * metrics.h — corpus BLEU and chrF computed exactly as sacreBLEU 2.x does
 * with its default settings, so scores printed by projmt can be compared
 * with published numbers and with `sacrebleu` itself.
 *
 * BLEU: tokenizer 13a (mteval-v13a), mixed case, max order 4, clipped n-gram
 * counts summed over the corpus, smoothing 'exp', brevity penalty against the
 * closest reference length. chrF: character orders 1..6, no word n-grams,
 * beta 2, whitespace removed, counts summed over the corpus, precision/recall
 * averaged over the orders that have n-grams on both sides (sacreBLEU's
 * "effective order", eps_smoothing off). Characters are Unicode code points
 * of UTF-8 text.
 *
 * Usage: statistics are plain values that are summed. Initialise an
 * accumulator, add (hypothesis, references) pairs one by one (training-time
 * validation) or score whole line arrays at once (`projmt eval`), then compute
 * the score from the sums. Accumulators from separate workers may be merged.
 *
 * Known difference from sacreBLEU: an empty reference line is scored as an
 * empty reference (sacreBLEU refuses the whole corpus).
 *
 * Ownership: pmt_bleu_stats, pmt_chrf_stats, pmt_bleu_score and
 * pmt_metrics_report are plain values (no free). Strings returned by
 * pmt_tok13a are malloc'd and owned by the caller. pmt_text_lines owns its
 * lines; release it with pmt_text_lines_free.
 */
#ifndef PROJMT_METRICS_H
#define PROJMT_METRICS_H

#include <stddef.h>
#include <stdint.h>

#define PMT_BLEU_MAX_ORDER 4
#define PMT_CHRF_CHAR_ORDER 6
#define PMT_CHRF_BETA 2
/* Follows sacreBLEU 2.3.1 semantics; the suffix says which implementation produced it. */
#define PMT_METRICS_VERSION "2.3.1-projmt"
/* Room for any signature or formatted score line produced here. */
#define PMT_METRICS_LINE_MAX 256

/* ---------------------------------------------------------------- text -- */

/* True for the code points Python's str.split() splits on (str.isspace). */
int pmt_unicode_is_space(uint32_t cp);
/* The mteval-v13a tokenization sacreBLEU applies before BLEU: tokens joined by
 * single spaces, no leading/trailing space. Returns a malloc'd string (caller
 * frees) or NULL when out of memory. */
char *pmt_tok13a(const char *line);

/* ---------------------------------------------------------------- BLEU -- */

typedef struct pmt_bleu_stats {
    int64_t hyp_len, ref_len;                 /* tokens; ref_len uses the closest reference */
    int64_t correct[PMT_BLEU_MAX_ORDER];      /* clipped n-gram matches, order n at [n-1] */
    int64_t total[PMT_BLEU_MAX_ORDER];        /* hypothesis n-grams */
    int64_t n_sentences;
    int n_refs;                               /* references per sentence (0 before the first add) */
} pmt_bleu_stats;

typedef struct pmt_bleu_score {
    double score;                             /* 0..100 */
    double precisions[PMT_BLEU_MAX_ORDER];    /* 0..100, smoothed as sacreBLEU's 'exp' */
    double bp;                                /* brevity penalty */
    double ratio;                             /* hyp_len / ref_len (0 when ref_len is 0) */
    int64_t hyp_len, ref_len;
    int n_refs;
} pmt_bleu_score;

void pmt_bleu_stats_init(pmt_bleu_stats *stats);
/* Adds one sentence with one reference; 0, or -1 when out of memory. */
int pmt_bleu_stats_add(pmt_bleu_stats *stats, const char *hyp, const char *ref);
/* Adds one sentence with n_refs >= 1 references (counts clipped by the
 * reference with most occurrences); 0, or -1 when out of memory. */
int pmt_bleu_stats_add_multi(pmt_bleu_stats *stats, const char *hyp,
                             const char *const *refs, int n_refs);
void pmt_bleu_stats_merge(pmt_bleu_stats *into, const pmt_bleu_stats *from);
pmt_bleu_score pmt_bleu_compute(const pmt_bleu_stats *stats);
/* sacreBLEU's signature: "nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:...". */
void pmt_bleu_signature(int n_refs, char *buf, size_t len);
/* "BLEU|<signature> = 34.12 65.1/40.2/27.3/19.0 (BP = 0.981 ratio = 0.981 hyp_len = 1234 ref_len = 1258)",
 * sacreBLEU's text format. */
void pmt_bleu_format(const pmt_bleu_score *score, char *buf, size_t len);
/* Corpus BLEU of a single sentence pair, for quick checks and logs. -1 when out of memory. */
double pmt_bleu_sentence(const char *hyp, const char *ref);

/* ---------------------------------------------------------------- chrF -- */

typedef struct pmt_chrf_stats {
    int64_t hyp[PMT_CHRF_CHAR_ORDER];         /* hypothesis character n-grams, order n at [n-1] */
    int64_t ref[PMT_CHRF_CHAR_ORDER];         /* reference character n-grams */
    int64_t match[PMT_CHRF_CHAR_ORDER];       /* clipped matches */
    int64_t n_sentences;
    int n_refs;
} pmt_chrf_stats;

void pmt_chrf_stats_init(pmt_chrf_stats *stats);
/* Adds one sentence with one reference; 0, or -1 when out of memory. */
int pmt_chrf_stats_add(pmt_chrf_stats *stats, const char *hyp, const char *ref);
/* With several references the one giving the best sentence chrF counts. */
int pmt_chrf_stats_add_multi(pmt_chrf_stats *stats, const char *hyp,
                             const char *const *refs, int n_refs);
void pmt_chrf_stats_merge(pmt_chrf_stats *into, const pmt_chrf_stats *from);
/* chrF2 in 0..100. */
double pmt_chrf_compute(const pmt_chrf_stats *stats);
/* "nrefs:1|case:mixed|eff:yes|nc:6|nw:0|space:no|version:...". */
void pmt_chrf_signature(int n_refs, char *buf, size_t len);
/* "chrF2|<signature> = 55.43". */
void pmt_chrf_format(double score, int n_refs, char *buf, size_t len);

/* ------------------------------------------------- scoring whole files -- */

enum { PMT_METRIC_BLEU = 1u, PMT_METRIC_CHRF = 2u, PMT_METRIC_ALL = 3u };

typedef struct pmt_metrics_report {
    unsigned metrics;                         /* PMT_METRIC_* bits that are filled in */
    int64_t n_sentences;
    pmt_bleu_score bleu;
    double chrf;
    int chrf_n_refs;
} pmt_metrics_report;

/* Parses "bleu,chrf" (any order, case-insensitive) into PMT_METRIC_* bits;
 * 0, or -1 with a message naming the unknown metric. */
int pmt_metrics_parse_list(const char *list, unsigned *metrics, char *err, size_t errlen);
/* Scores n hypothesis lines against n reference lines (one reference each)
 * with the selected metrics; 0, or -1 with a message in err. */
int pmt_metrics_score_lines(const char *const *hyps, const char *const *refs, size_t n,
                            unsigned metrics, pmt_metrics_report *report,
                            char *err, size_t errlen);
/* The report as one JSON object on one line (no newline); -1 if it does not fit. */
int pmt_metrics_report_json(const pmt_metrics_report *report, char *buf, size_t len);

/* The lines of a UTF-8 text file, without their "\n" or "\r\n". A final line
 * without a newline counts; a trailing newline does not start another line. */
typedef struct pmt_text_lines {
    char **lines;
    size_t n;
} pmt_text_lines;

/* Reads path; 0, or -1 with a message naming the file in err. */
int pmt_text_lines_load(pmt_text_lines *text, const char *path, char *err, size_t errlen);
void pmt_text_lines_free(pmt_text_lines *text);

#endif

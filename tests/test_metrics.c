/*
 * test_metrics.c — BLEU, chrF and the 13a tokenizer against values worked out
 * by hand from sacreBLEU 2.x's definitions (the arithmetic is in the comments),
 * plus the line loader and report formatting used by `projmt eval`.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "eval/metrics.h"
#include "core/utf8.h"
#include "testutil.h"

#define EXACT 1e-9

static void check_tokenized(const char *line, const char *expected) {
    char *got = pmt_tok13a(line);
    CHECK_MSG(got && strcmp(got, expected) == 0, "tok13a(\"%s\") = \"%s\", expected \"%s\"",
              line, got ? got : "(null)", expected);
    free(got);
}

static void test_tok13a(void) {
    check_tokenized("3.5", "3.5");                /* '.' between digits stays */
    check_tokenized("a,b", "a , b");              /* comma after a non-digit is split */
    check_tokenized("end.", "end .");
    check_tokenized("1,000.5 km", "1,000.5 km");
    check_tokenized("It costs $3.50, ok?", "It costs $ 3.50 , ok ?");  /* ',' before a space splits */
    check_tokenized("a.5", "a . 5");              /* preceded by non-digit wins */
    check_tokenized("U.S.A.", "U . S . A .");
    check_tokenized("x.,y", "x . , y");
    check_tokenized("pages 1-2", "pages 1 - 2");  /* dash after a digit */
    check_tokenized("well-known", "well-known");
    check_tokenized("don't (hi)", "don't ( hi )");
    check_tokenized("&quot;Hola&quot; &amp; &lt;b&gt;", "\" Hola \" & < b >");
    check_tokenized("<skipped>x", "x");
    check_tokenized("line-\nbreak\nnext", "linebreak next");
    check_tokenized("  many   spaces\t", "many spaces");
    check_tokenized("", "");
    /* ¿ and ¡ are not ASCII: 13a leaves them attached to the word. */
    check_tokenized("¿Dónde está el baño?", "¿Dónde está el baño ?");
    check_tokenized("¡Hola, señor!", "¡Hola , señor !");
    /* U+00A0 and U+3000 are whitespace to Python's str.split(). */
    check_tokenized("a\xc2\xa0" "b\xe3\x80\x80" "c", "a b c");
}

static void test_utf8(void) {
    const char *s = "a\xc3\xb1\xe2\x82\xac\xf0\x9f\x98\x80\xff";   /* a ñ € 😀 and a stray byte */
    const char *p = s;
    CHECK(pmt_utf8_next(&p) == 'a');
    CHECK(pmt_utf8_next(&p) == 0xF1);
    CHECK(pmt_utf8_next(&p) == 0x20AC);
    CHECK(pmt_utf8_next(&p) == 0x1F600);
    CHECK(pmt_utf8_next(&p) == 0xDCFF);
    CHECK(*p == '\0');
    CHECK(pmt_unicode_is_space(' ') && pmt_unicode_is_space(0xA0) && pmt_unicode_is_space(0x3000));
    CHECK(!pmt_unicode_is_space('x') && !pmt_unicode_is_space(0xBF) && !pmt_unicode_is_space(0x200B));
}

static pmt_bleu_score bleu_of(const char *hyp, const char *ref) {
    pmt_bleu_stats stats;
    pmt_bleu_stats_init(&stats);
    CHECK(pmt_bleu_stats_add(&stats, hyp, ref) == 0);
    return pmt_bleu_compute(&stats);
}

static void test_bleu_identical(void) {
    pmt_bleu_score s = bleu_of("the cat sat on the mat.", "the cat sat on the mat.");
    CHECK_NEAR(s.score, 100.0, EXACT);
    for (int n = 0; n < 4; n++) CHECK_NEAR(s.precisions[n], 100.0, EXACT);
    CHECK_NEAR(s.bp, 1.0, EXACT);
    CHECK(s.hyp_len == 7 && s.ref_len == 7);   /* "." is its own token */
}

static void test_bleu_empty_hypothesis(void) {
    /* hyp_len 0 < ref_len 2: BP = 0; no matches: score 0, precisions 0. */
    pmt_bleu_score s = bleu_of("", "the cat");
    CHECK(s.score == 0.0 && !isnan(s.score));
    CHECK(s.bp == 0.0);
    CHECK(s.hyp_len == 0 && s.ref_len == 2);
    CHECK_NEAR(s.ratio, 0.0, EXACT);
    /* Both empty: BP = 1 (0 is not < 0), ratio 0 (ref_len 0), score 0. */
    s = bleu_of("", "");
    CHECK(s.score == 0.0 && s.bp == 1.0 && s.ratio == 0.0);
    /* No sentences at all. */
    pmt_bleu_stats none;
    pmt_bleu_stats_init(&none);
    s = pmt_bleu_compute(&none);
    CHECK(s.score == 0.0 && !isnan(s.bp) && !isnan(s.ratio));
}

static void test_bleu_exp_smoothing(void) {
    /* hyp a b c d e / ref a b c x e:
     *   1-grams 4/5 -> 80;  2-grams {ab,bc} of {ab,bc,cd,de} 2/4 -> 50;
     *   3-grams {abc} of 3 -> 100/3;  4-grams 0 of 2 -> first zero order: 100 / (2 * 2) = 25.
     *   BP 1 -> BLEU = (80 * 50 * 33.33 * 25)^(1/4). */
    pmt_bleu_score s = bleu_of("a b c d e", "a b c x e");
    CHECK_NEAR(s.precisions[0], 80.0, EXACT);
    CHECK_NEAR(s.precisions[1], 50.0, EXACT);
    CHECK_NEAR(s.precisions[2], 100.0 / 3, EXACT);
    CHECK_NEAR(s.precisions[3], 25.0, EXACT);
    CHECK_NEAR(s.score, pow(80.0 * 50.0 * (100.0 / 3) * 25.0, 0.25), EXACT);

    /* hyp a b c d / ref a c b d: 1-grams 4/4 -> 100; then three zero orders,
     * each doubling the divisor: 2-grams 100/(2*3), 3-grams 100/(4*2), 4-grams 100/(8*1). */
    s = bleu_of("a b c d", "a c b d");
    CHECK_NEAR(s.precisions[1], 100.0 / 6, EXACT);
    CHECK_NEAR(s.precisions[2], 12.5, EXACT);
    CHECK_NEAR(s.precisions[3], 12.5, EXACT);
    CHECK_NEAR(s.score, pow(100.0 * (100.0 / 6) * 12.5 * 12.5, 0.25), EXACT);
}

static void test_bleu_short_sentence_is_zero(void) {
    /* Two tokens: no 3-grams at all, so sacreBLEU stops at order 3 and log(0)
     * counts as -9999999999: BLEU 0 although the pair is identical. */
    pmt_bleu_score s = bleu_of("hola amigo", "hola amigo");
    CHECK_NEAR(s.precisions[0], 100.0, EXACT);
    CHECK_NEAR(s.precisions[1], 100.0, EXACT);
    CHECK(s.precisions[2] == 0.0 && s.precisions[3] == 0.0);
    CHECK(s.score == 0.0);
}

static void test_bleu_brevity_penalty(void) {
    /* hyp 6 tokens all matching, ref 8: BP = exp(1 - 8/6) = exp(-1/3), ratio 0.75. */
    pmt_bleu_score s = bleu_of("a b c d e f", "a b c d e f g h");
    CHECK_NEAR(s.bp, exp(-1.0 / 3), EXACT);
    CHECK_NEAR(s.ratio, 0.75, EXACT);
    CHECK_NEAR(s.score, 100.0 * exp(-1.0 / 3), EXACT);
    /* Longer hypothesis: no penalty. 1-grams 6/8 = 75, 2-grams 5/7, 3-grams 4/6, 4-grams 3/5. */
    s = bleu_of("a b c d e f g h", "a b c d e f");
    CHECK_NEAR(s.bp, 1.0, EXACT);
    CHECK_NEAR(s.score, pow(75.0 * (500.0 / 7) * (400.0 / 6) * 60.0, 0.25), EXACT);
}

static void test_bleu_clipping_and_corpus_sums(void) {
    /* hyp "the the the the" / ref "the cat": 'the' clipped to 1 -> 1-grams 1/4 = 25;
     * 2..4-grams have no match: 100/(2*3), 100/(4*2), 100/(8*1). hyp longer: BP 1. */
    pmt_bleu_score s = bleu_of("the the the the", "the cat");
    CHECK_NEAR(s.precisions[0], 25.0, EXACT);
    CHECK_NEAR(s.score, pow(25.0 * (100.0 / 6) * 12.5 * 12.5, 0.25), EXACT);

    /* Corpus: "a b c d"=="a b c d" and "x y z w" vs "p q r s". Counts are summed
     * first: 1-grams 4/8, 2-grams 3/6, 3-grams 2/4, 4-grams 1/2 -> all 50 -> BLEU 50
     * (the mean of the sentence scores would be (100 + 0) / 2 as well, so also
     * check the summed statistics directly). */
    pmt_bleu_stats stats;
    pmt_bleu_stats_init(&stats);
    CHECK(pmt_bleu_stats_add(&stats, "a b c d", "a b c d") == 0);
    CHECK(pmt_bleu_stats_add(&stats, "x y z w", "p q r s") == 0);
    CHECK(stats.correct[0] == 4 && stats.total[0] == 8 && stats.correct[3] == 1 && stats.total[3] == 2);
    CHECK(stats.n_sentences == 2 && stats.hyp_len == 8 && stats.ref_len == 8);
    CHECK_NEAR(pmt_bleu_compute(&stats).score, 50.0, EXACT);

    /* Merging two accumulators equals adding to one. */
    pmt_bleu_stats first, second;
    pmt_bleu_stats_init(&first);
    pmt_bleu_stats_init(&second);
    CHECK(pmt_bleu_stats_add(&first, "a b c d", "a b c d") == 0);
    CHECK(pmt_bleu_stats_add(&second, "x y z w", "p q r s") == 0);
    pmt_bleu_stats_merge(&first, &second);
    CHECK(memcmp(&first, &stats, sizeof stats) == 0);
}

static void test_bleu_spanish(void) {
    /* Tokens ¿Dónde esta el baño ? vs ¿Dónde está el baño ?: 1-grams 4/5, 2-grams
     * {el baño, baño ?} 2/4, 3-grams {el baño ?} 1/3, 4-grams 0/2 -> 100/(2*2):
     * the same numbers as the a b c d e case. */
    pmt_bleu_score s = bleu_of("¿Dónde esta el baño?", "¿Dónde está el baño?");
    CHECK(s.hyp_len == 5 && s.ref_len == 5);
    CHECK_NEAR(s.score, pow(80.0 * 50.0 * (100.0 / 3) * 25.0, 0.25), EXACT);
    CHECK_NEAR(pmt_bleu_sentence("¡Qué día tan bonito hace hoy!", "¡Qué día tan bonito hace hoy!"), 100.0, EXACT);
}

static void test_bleu_multiple_references(void) {
    /* hyp a b c d, refs "a b x y" and "x b c d": 1-grams 4/4, 2-grams ab,bc,cd 3/3,
     * 3-grams bcd 1/2 = 50, 4-grams 0/1 -> 100/(2*1) = 50; both refs length 4.
     * BLEU = (100 * 100 * 50 * 50)^(1/4) = sqrt(5000). */
    const char *refs[2] = {"a b x y", "x b c d"};
    pmt_bleu_stats stats;
    pmt_bleu_stats_init(&stats);
    CHECK(pmt_bleu_stats_add_multi(&stats, "a b c d", refs, 2) == 0);
    pmt_bleu_score s = pmt_bleu_compute(&stats);
    CHECK_NEAR(s.score, sqrt(5000.0), EXACT);
    CHECK(s.n_refs == 2);
    /* Closest reference length, the shorter on a tie: hyp 4, refs 3 and 5 -> 3. */
    const char *tied[2] = {"a b c d e", "a b c"};
    pmt_bleu_stats_init(&stats);
    CHECK(pmt_bleu_stats_add_multi(&stats, "a b c d", tied, 2) == 0);
    CHECK(stats.ref_len == 3);
}

static void test_bleu_format(void) {
    pmt_bleu_score s = bleu_of("the cat sat on the mat", "the cat sat on the mat");
    char line[PMT_METRICS_LINE_MAX];
    pmt_bleu_format(&s, line, sizeof line);
    CHECK_MSG(strcmp(line, "BLEU|nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2.3.1-projmt = 100.00 "
                           "100.0/100.0/100.0/100.0 (BP = 1.000 ratio = 1.000 hyp_len = 6 ref_len = 6)") == 0,
              "got %s", line);
}

static double chrf_of(const char *hyp, const char *ref) {
    pmt_chrf_stats stats;
    pmt_chrf_stats_init(&stats);
    CHECK(pmt_chrf_stats_add(&stats, hyp, ref) == 0);
    return pmt_chrf_compute(&stats);
}

static void test_chrf_values(void) {
    /* Identical: orders 1..3 have P = R = 1; orders 4..6 have no reference n-grams. */
    CHECK_NEAR(chrf_of("abc", "abc"), 100.0, EXACT);
    /* Empty hypothesis or both empty: no order counts -> 0, not NaN. */
    CHECK(chrf_of("", "abc") == 0.0);
    CHECK(chrf_of("", "") == 0.0);
    CHECK(chrf_of("abc", "") == 0.0);
    /* ab / ac: order 1 match 1 of 2 each side, order 2 0 of 1: P = R = (1/2 + 0)/2 = 1/4;
     * F2 = 5 P R / (4 P + R) = 1/4 -> 25. */
    CHECK_NEAR(chrf_of("ab", "ac"), 25.0, EXACT);
    /* abcd / ab: P = (2/4 + 1/3)/2 = 5/12, R = (2/2 + 1/1)/2 = 1 (order 3+: no ref n-grams);
     * F2 = 5 (5/12) / (20/12 + 1) = 25/32. */
    CHECK_NEAR(chrf_of("abcd", "ab"), 100.0 * 25 / 32, EXACT);
    /* ab / abcd: order 3 has reference n-grams but no hypothesis ones -> skipped.
     * P = 1, R = (2/4 + 1/3)/2 = 5/12; F2 = 5 (5/12) / (4 + 5/12) = 25/53. */
    CHECK_NEAR(chrf_of("ab", "abcd"), 100.0 * 25 / 53, EXACT);
    /* Whitespace is removed before extracting n-grams. */
    CHECK_NEAR(chrf_of("a b", " ab\t"), 100.0, EXACT);
}

static void test_chrf_unicode(void) {
    /* Code points, not bytes: año / ano: order 1 2/3, orders 2 and 3 no match,
     * orders 4..6 none in the reference: P = R = (2/3)/3 = 2/9 -> F2 = 2/9. */
    CHECK_NEAR(chrf_of("año", "ano"), 100.0 * 2 / 9, EXACT);
    /* ¿Qué? / ¿Que?: order 1 4/5, order 2 2/4, order 3 1/3, orders 4, 5 0, order 6 none:
     * P = R = (4/5 + 1/2 + 1/3)/5 = 49/150. */
    CHECK_NEAR(chrf_of("¿Qué?", "¿Que?"), 100.0 * 49 / 150, EXACT);
    CHECK_NEAR(chrf_of("¡Señor, mañana!", "¡Señor, mañana!"), 100.0, EXACT);
}

static void test_chrf_corpus_sums(void) {
    /* abc/abc and ab/ac summed: order 1 4/5, order 2 2/3, order 3 1/1 (the second
     * reference has no 3-grams): P = R = (4/5 + 2/3 + 1)/3 = 37/45. The mean of
     * sentence scores would be (100 + 25)/2 = 62.5 instead. */
    pmt_chrf_stats stats;
    pmt_chrf_stats_init(&stats);
    CHECK(pmt_chrf_stats_add(&stats, "abc", "abc") == 0);
    CHECK(pmt_chrf_stats_add(&stats, "ab", "ac") == 0);
    CHECK_NEAR(pmt_chrf_compute(&stats), 100.0 * 37 / 45, EXACT);
    /* With two references the better one counts: ab vs {ac, ab} -> 100. */
    const char *refs[2] = {"ac", "ab"};
    pmt_chrf_stats_init(&stats);
    CHECK(pmt_chrf_stats_add_multi(&stats, "ab", refs, 2) == 0);
    CHECK_NEAR(pmt_chrf_compute(&stats), 100.0, EXACT);
    char line[PMT_METRICS_LINE_MAX];
    pmt_chrf_format(55.4321, 1, line, sizeof line);
    CHECK_MSG(strcmp(line, "chrF2|nrefs:1|case:mixed|eff:yes|nc:6|nw:0|space:no|version:2.3.1-projmt = 55.43") == 0,
              "got %s", line);
}

/* The number that follows key in a JSON text, or NaN when key is absent. */
static double json_number_after(const char *json, const char *key) {
    const char *at = strstr(json, key);
    return at ? strtod(at + strlen(key), NULL) : NAN;
}

static void test_score_lines_and_json(void) {
    const char *hyps[2] = {"the cat sat on the mat", "¿Dónde está?"};
    const char *refs[2] = {"the cat sat on the mat", "¿Dónde está?"};
    pmt_metrics_report report;
    char err[256];
    CHECK(pmt_metrics_score_lines(hyps, refs, 2, PMT_METRIC_ALL, &report, err, sizeof err) == 0);
    CHECK(report.n_sentences == 2);
    CHECK_NEAR(report.bleu.score, 100.0, EXACT);
    CHECK_NEAR(report.chrf, 100.0, EXACT);
    char json[1024];
    CHECK(pmt_metrics_report_json(&report, json, sizeof json) == 0);
    /* Numbers are printed with 17 digits so they round-trip: exp(4 log(100) / 4) is 100.00000000000004. */
    CHECK_NEAR(json_number_after(json, "\"bleu\": {\"score\": "), report.bleu.score, 0.0);
    CHECK_NEAR(json_number_after(json, "\"chrf\": {\"score\": "), report.chrf, 0.0);
    CHECK_NEAR(json_number_after(json, "\"hyp_len\": "), 9.0, 0.0);
    CHECK(json[0] == '{' && json[strlen(json) - 1] == '}' && strchr(json, '\n') == NULL);
    CHECK(pmt_metrics_report_json(&report, json, 20) == -1);

    CHECK(pmt_metrics_score_lines(hyps, refs, 2, PMT_METRIC_CHRF, &report, err, sizeof err) == 0);
    CHECK(pmt_metrics_report_json(&report, json, sizeof json) == 0);
    CHECK(strstr(json, "bleu") == NULL && strstr(json, "chrf") != NULL);
    CHECK(pmt_metrics_score_lines(hyps, refs, 2, 0, &report, err, sizeof err) == -1);

    unsigned metrics = 0;
    CHECK(pmt_metrics_parse_list("bleu,chrf", &metrics, err, sizeof err) == 0 && metrics == PMT_METRIC_ALL);
    CHECK(pmt_metrics_parse_list("chrF", &metrics, err, sizeof err) == 0 && metrics == PMT_METRIC_CHRF);
    CHECK(pmt_metrics_parse_list("bleu,ter", &metrics, err, sizeof err) == -1);
    CHECK_MSG(strstr(err, "'ter'") != NULL, "err: %s", err);
}

static void test_text_lines(void) {
    const char *dir = test_tmpdir("metrics");
    char path[4096];
    char err[512];
    pmt_text_lines text;
    snprintf(path, sizeof path, "%s/crlf.txt", dir);
    CHECK(test_write_file(path, "a\r\nb\n\nc") == 0);
    CHECK(pmt_text_lines_load(&text, path, err, sizeof err) == 0);
    CHECK(text.n == 4);
    CHECK(text.n == 4 && !strcmp(text.lines[0], "a") && !strcmp(text.lines[1], "b") &&
          !strcmp(text.lines[2], "") && !strcmp(text.lines[3], "c"));
    pmt_text_lines_free(&text);
    CHECK(text.lines == NULL && text.n == 0);

    snprintf(path, sizeof path, "%s/empty.txt", dir);
    CHECK(test_write_file(path, "") == 0);
    CHECK(pmt_text_lines_load(&text, path, err, sizeof err) == 0 && text.n == 0);
    pmt_text_lines_free(&text);

    snprintf(path, sizeof path, "%s/one.txt", dir);
    CHECK(test_write_file(path, "sólo una\n") == 0);
    CHECK(pmt_text_lines_load(&text, path, err, sizeof err) == 0 && text.n == 1);
    pmt_text_lines_free(&text);

    snprintf(path, sizeof path, "%s/missing.txt", dir);
    CHECK(pmt_text_lines_load(&text, path, err, sizeof err) == -1);
    CHECK_MSG(strstr(err, "missing.txt") != NULL, "err: %s", err);
}

int main(void) {
    test_tok13a();
    test_utf8();
    test_bleu_identical();
    test_bleu_empty_hypothesis();
    test_bleu_exp_smoothing();
    test_bleu_short_sentence_is_zero();
    test_bleu_brevity_penalty();
    test_bleu_clipping_and_corpus_sums();
    test_bleu_spanish();
    test_bleu_multiple_references();
    test_bleu_format();
    test_chrf_values();
    test_chrf_unicode();
    test_chrf_corpus_sums();
    test_score_lines_and_json();
    test_text_lines();
    return test_finish();
}

/*
 * test_api.c — the C API of include/projmt.h (libprojmt), on the shipped
 * model: a translation as the program gives it; n-best lists with scores,
 * best first; the alignment's pieces and rows (each a distribution); an
 * empty line; option errors, a missing file and a damaged file reported
 * through projmt_last_error with the right status and nothing leaked (the
 * ASan pass runs this); the shipped file's shortlist used, and one a model
 * does not carry refused; several threads, each with its own translator,
 * giving what one thread gives. SKIPs without the shipped model.
 */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "projmt.h"
#include "testutil.h"

static char model_path[1024];
static const char *const SENTENCES[] = {"Where is the station?", "", "I like green tea.", "Tom is reading a book."};
enum { N_SENT = 4, THREADS = 3 };

static void test_translate(projmt_translator *t) {
    projmt_result *res = NULL;
    CHECK_MSG(projmt_translate_batch(t, SENTENCES, N_SENT, NULL, &res) == PROJMT_OK, "%s", projmt_last_error());
    if (!res) return;
    CHECK(res[0].n_hypotheses == 1 && !strcmp(res[0].hypotheses[0], "¿Dónde está la estación?"));
    CHECK_MSG(res[1].n_hypotheses == 0, "an empty line has no hypothesis");
    CHECK(res[2].n_hypotheses == 1 && !strcmp(res[2].hypotheses[0], "Me gusta el té verde."));
    CHECK(res[0].scores == NULL && res[0].alignment == NULL);
    projmt_results_free(res, N_SENT);

    projmt_translate_options opt = {.beam_size = 4, .num_hypotheses = 3, .return_scores = 1, .return_alignment = 1,
                                    .length_penalty = 1.0};
    CHECK_MSG(projmt_translate_batch(t, SENTENCES, N_SENT, &opt, &res) == PROJMT_OK, "%s", projmt_last_error());
    if (!res) return;
    CHECK(res[0].n_hypotheses == 3 && !strcmp(res[0].hypotheses[0], "¿Dónde está la estación?"));
    CHECK(res[0].scores && res[0].scores[0] >= res[0].scores[1] && res[0].scores[1] >= res[0].scores[2]);
    CHECK(res[0].scores && res[0].scores[0] < 0.0f);
    const projmt_alignment *a = res[0].alignment;
    CHECK(a != NULL && res[1].alignment == NULL);
    if (a) {
        CHECK(a->n_source > 2 && a->n_target > 2);
        CHECK(!strcmp(a->source_pieces[a->n_source - 1], "</s>") && !strcmp(a->target_pieces[a->n_target - 1], "</s>"));
        for (int r = 0; r < a->n_target; r++) {
            double sum = 0;
            for (int s = 0; s < a->n_source; s++) sum += a->weights[r * a->n_source + s];
            CHECK_MSG(fabs(sum - 1.0) < 1e-4, "alignment row %d sums to %g", r, sum);
        }
    }
    projmt_results_free(res, N_SENT);
}

static void test_errors(projmt_translator *t) {
    projmt_result *res = (projmt_result *)1;
    projmt_translate_options bad = {.beam_size = 2, .num_hypotheses = 3};
    CHECK(projmt_translate_batch(t, SENTENCES, 1, &bad, &res) == PROJMT_ERROR_ARGUMENT && res == NULL);
    CHECK_MSG(strstr(projmt_last_error(), "num_hypotheses") != NULL, "%s", projmt_last_error());
    const char *with_null[] = {"fine", NULL};
    CHECK(projmt_translate_batch(t, with_null, 2, NULL, &res) == PROJMT_ERROR_ARGUMENT);
    CHECK(strstr(projmt_last_error(), "sentence 1 is NULL") != NULL);
    CHECK(projmt_translate_batch(NULL, SENTENCES, 1, NULL, &res) == PROJMT_ERROR_ARGUMENT);
    CHECK(projmt_translate_batch(t, SENTENCES, 0, NULL, &res) == PROJMT_OK && res != NULL);
    projmt_results_free(res, 0);
    projmt_results_free(NULL, 3);

    CHECK(projmt_translator_new("/nonexistent/model.pmt", NULL) == NULL);
    CHECK_MSG(strstr(projmt_last_error(), "/nonexistent/model.pmt") != NULL, "%s", projmt_last_error());
    const char *dir = test_tmpdir("api");
    char bad_path[1100];
    snprintf(bad_path, sizeof bad_path, "%s/bad.pmt", dir);
    CHECK(test_write_file(bad_path, "this is not a model\n") == 0);
    CHECK(projmt_translator_new(bad_path, NULL) == NULL);
    CHECK_MSG(strstr(projmt_last_error(), "bad.pmt") != NULL, "%s", projmt_last_error());
    const projmt_load_options wrong = {"fp16", 0, 0};
    CHECK(projmt_translator_new(model_path, &wrong) == NULL && strstr(projmt_last_error(), "fp16") != NULL);

    /* The shipped file carries a vocabulary shortlist (train_release.sh
     * exports one): with K = 50 candidates per source piece the translation
     * stays; K < 0 is refused; 0 (the whole vocabulary) is always fine. */
    CHECK_MSG(projmt_translator_set_shortlist(t, 50) == PROJMT_OK, "%s", projmt_last_error());
    CHECK(projmt_translate_batch(t, SENTENCES, 1, NULL, &res) == PROJMT_OK && res &&
          !strcmp(res[0].hypotheses[0], "¿Dónde está la estación?"));
    projmt_results_free(res, 1);
    CHECK(projmt_translator_set_shortlist(t, -1) == PROJMT_ERROR_ARGUMENT);
    CHECK(projmt_translator_set_shortlist(NULL, 0) == PROJMT_ERROR_ARGUMENT);
    CHECK(projmt_translator_set_shortlist(t, 0) == PROJMT_OK);
    CHECK(projmt_translate_batch(t, SENTENCES, 1, NULL, &res) == PROJMT_OK && res &&
          !strcmp(res[0].hypotheses[0], "¿Dónde está la estación?"));
    projmt_results_free(res, 1);

    /* A model without a shortlist (a checkpoint made here) refuses K > 0,
     * naming why, and goes on translating; 0 is fine. */
    char plain_path[1100];
    snprintf(plain_path, sizeof plain_path, "%s/no-shortlist.ckpt", dir);
    CHECK(test_made_up_model(model_path, plain_path) == 0);
    projmt_translator *plain = projmt_translator_new(plain_path, NULL);
    CHECK_MSG(plain != NULL, "%s", projmt_last_error());
    if (!plain) return;
    CHECK(projmt_translator_set_shortlist(plain, 50) == PROJMT_ERROR_ARGUMENT);
    CHECK_MSG(strstr(projmt_last_error(), "no vocabulary shortlist") != NULL, "%s", projmt_last_error());
    CHECK(projmt_translator_set_shortlist(plain, 0) == PROJMT_OK);
    CHECK(projmt_translate_batch(plain, SENTENCES, 1, NULL, &res) == PROJMT_OK && res && res[0].n_hypotheses == 1);
    projmt_results_free(res, 1);
    projmt_translator_free(plain);
}

/* Each thread its own translator, the same lines: what one thread got. */
typedef struct {
    char best[N_SENT][256];
    int ok;
} thread_out;

static void *translate_thread(void *arg) {
    thread_out *out = arg;
    const projmt_load_options opt = {"auto", 1, 0};
    projmt_translator *t = projmt_translator_new(model_path, &opt);
    projmt_result *res = NULL;
    out->ok = t && projmt_translate_batch(t, SENTENCES, N_SENT, NULL, &res) == PROJMT_OK;
    for (int i = 0; out->ok && i < N_SENT; i++)
        snprintf(out->best[i], sizeof out->best[i], "%s", res[i].n_hypotheses ? res[i].hypotheses[0] : "");
    projmt_results_free(res, N_SENT);
    projmt_translator_free(t);
    return NULL;
}

static void test_threads(void) {
    static thread_out alone, each[THREADS];
    translate_thread(&alone);
    CHECK(alone.ok);
    pthread_t th[THREADS];
    for (int i = 0; i < THREADS; i++) CHECK(pthread_create(&th[i], NULL, translate_thread, &each[i]) == 0);
    for (int i = 0; i < THREADS; i++) pthread_join(th[i], NULL);
    for (int i = 0; i < THREADS; i++) {
        CHECK_MSG(each[i].ok, "thread %d failed", i);
        CHECK_MSG(!memcmp(each[i].best, alone.best, sizeof alone.best), "thread %d translated differently", i);
    }
}

/* projmt_split_sentences: spans, the sizing call, a short array, errors;
 * and a paragraph cut this way translates as its sentences do alone. */
static void test_split(projmt_translator *t) {
    const char *text = "  I like cats. Mr. Smith lives in the U.S. Where is the station?  ";
    size_t count = 99;
    /* "U.S. Where": an acronym's full stop does not end a sentence. */
    const char *want[2] = {"I like cats.", "Mr. Smith lives in the U.S. Where is the station?"};
    CHECK(projmt_split_sentences(text, strlen(text), NULL, 0, &count) == PROJMT_OK && count == 2);
    projmt_span spans[4], one[1];
    CHECK(projmt_split_sentences(text, strlen(text), spans, 4, &count) == PROJMT_OK && count == 2);
    for (int i = 0; i < 2 && count == 2; i++)
        CHECK_MSG(strlen(want[i]) == spans[i].end - spans[i].start &&
                      !strncmp(text + spans[i].start, want[i], spans[i].end - spans[i].start),
                  "sentence %d is \"%.*s\"", i, (int)(spans[i].end - spans[i].start), text + spans[i].start);
    CHECK(spans[0].start == 2);
    CHECK(projmt_split_sentences(text, strlen(text), one, 1, &count) == PROJMT_OK && count == 2 &&
          one[0].start == spans[0].start && one[0].end == spans[0].end);
    CHECK(projmt_split_sentences("", 0, NULL, 0, &count) == PROJMT_OK && count == 0);
    CHECK(projmt_split_sentences(NULL, 0, NULL, 0, &count) == PROJMT_OK && count == 0);
    CHECK(projmt_split_sentences(NULL, 5, NULL, 0, &count) == PROJMT_ERROR_ARGUMENT &&
          strstr(projmt_last_error(), "text") != NULL);
    CHECK(projmt_split_sentences(text, strlen(text), NULL, 2, &count) == PROJMT_ERROR_ARGUMENT);
    CHECK(projmt_split_sentences(text, strlen(text), spans, 4, NULL) == PROJMT_ERROR_ARGUMENT);

    const char *para = "I like cats. Where is the station?";
    CHECK(projmt_split_sentences(para, strlen(para), spans, 4, &count) == PROJMT_OK && count == 2);
    char first[64], second[64];
    snprintf(first, sizeof first, "%.*s", (int)(spans[0].end - spans[0].start), para + spans[0].start);
    snprintf(second, sizeof second, "%.*s", (int)(spans[1].end - spans[1].start), para + spans[1].start);
    CHECK(!strcmp(first, "I like cats.") && !strcmp(second, "Where is the station?"));
    const char *sentences[2] = {first, second};
    projmt_result *r = NULL;
    CHECK(projmt_translate_batch(t, sentences, 2, NULL, &r) == PROJMT_OK);
    if (r) {
        CHECK(r[0].n_hypotheses == 1 && !strcmp(r[0].hypotheses[0], "Me gustan los gatos."));
        CHECK(r[1].n_hypotheses == 1 && !strcmp(r[1].hypotheses[0], "¿Dónde está la estación?"));
    }
    projmt_results_free(r, 2);
}

/* ---- the 0.2.0 API ---- */

static int stop_after;   /* the abort callback says stop once it has been asked this many times */
static int asked;

static int abort_after(void *user) {
    (void)user;
    return ++asked > stop_after;
}

static char api_logged[512];

static void keep_api_log(projmt_log_level level, const char *message, void *user) {
    snprintf(api_logged, sizeof api_logged, "%d %s %s", (int)level, message, (const char *)user);
}

static void test_api_v2(void) {
    CHECK(projmt_version_number() == PROJMT_VERSION_NUMBER && PROJMT_VERSION_NUMBER == 2000);
    projmt_translator *t = (projmt_translator *)1;
    /* Statuses that say what kind of failure it was. */
    CHECK(projmt_translator_open("/nonexistent/model.pmt", NULL, &t) == PROJMT_ERROR_MODEL && t == NULL);
    CHECK(projmt_translator_open(model_path, NULL, NULL) == PROJMT_ERROR_ARGUMENT);
    projmt_translator_options lo;
    projmt_translator_options_init(&lo, sizeof lo);
    CHECK(lo.struct_size == sizeof lo && !strcmp(lo.compute_type, "auto") && lo.threads == 0 && lo.max_batch == 0);
    lo.compute_type = "fp16";
    CHECK(projmt_translator_open(model_path, &lo, &t) == PROJMT_ERROR_ARGUMENT && strstr(projmt_last_error(), "fp16"));
    lo.compute_type = "auto";
    lo.struct_size = sizeof(size_t);   /* not initialised for this struct */
    CHECK(projmt_translator_open(model_path, &lo, &t) == PROJMT_ERROR_ARGUMENT &&
          strstr(projmt_last_error(), "struct_size"));
    /* A newer caller's larger struct: zeros past the known fields are
     * fine, a set byte there (a field this library lacks) is refused. */
    struct {
        projmt_translator_options known;
        int future_field;
    } newer;
    memset(&newer, 0, sizeof newer);
    projmt_translator_options_init(&newer.known, sizeof newer);
    newer.known.threads = 1;
    newer.future_field = 7;
    CHECK(projmt_translator_open(model_path, &newer.known, &t) == PROJMT_ERROR_ARGUMENT &&
          strstr(projmt_last_error(), "does not know"));
    newer.future_field = 0;
    CHECK_MSG(projmt_translator_open(model_path, &newer.known, &t) == PROJMT_OK && t, "%s", projmt_last_error());
    if (!t) return;

    /* Accessors, scores only when asked, flags for what was repaired. */
    char long_line[6000] = "";
    for (int i = 0; i < 400; i++) strcat(long_line, "house ");
    const char *lines[] = {"Where is the station?", "", "I like gr\xff" "een tea.", long_line};
    projmt_results *res = (projmt_results *)1;
    CHECK(projmt_translate(t, lines, 4, NULL, NULL) == PROJMT_ERROR_ARGUMENT);
    CHECK_MSG(projmt_translate(t, lines, 4, NULL, &res) == PROJMT_OK && res, "%s", projmt_last_error());
    if (res) {
        CHECK(projmt_results_count(res) == 4);
        CHECK(projmt_results_num_hypotheses(res, 0) == 1 &&
              !strcmp(projmt_results_hypothesis(res, 0, 0), "¿Dónde está la estación?"));
        CHECK(isnan(projmt_results_score(res, 0, 0)) && projmt_results_alignment(res, 0) == NULL);
        CHECK(projmt_results_num_hypotheses(res, 1) == 0 && projmt_results_hypothesis(res, 1, 0) == NULL);
        CHECK(projmt_results_flags(res, 0) == 0 && projmt_results_flags(res, 1) == 0);
        CHECK_MSG(projmt_results_flags(res, 2) == PROJMT_RESULT_BYTES_REPLACED, "flags %u", projmt_results_flags(res, 2));
        CHECK_MSG(projmt_results_flags(res, 3) == PROJMT_RESULT_INPUT_CUT && projmt_results_source_pieces(res, 3) >= 400,
                  "flags %u, %d pieces", projmt_results_flags(res, 3), projmt_results_source_pieces(res, 3));
        CHECK(projmt_results_source_pieces(res, 0) > 3);
        CHECK(projmt_results_hypothesis(res, 9, 0) == NULL && projmt_results_flags(res, 9) == 0 &&
              isnan(projmt_results_score(res, 0, 5)) && projmt_results_num_hypotheses(NULL, 0) == 0);
        projmt_results_destroy(res);
    }
    projmt_results_destroy(NULL);

    projmt_translation_options to;
    projmt_translation_options_init(&to, sizeof to);
    CHECK(to.struct_size == sizeof to && to.beam_size == 4 && to.num_hypotheses == 1 && to.length_penalty == 1.0 &&
          to.abort_callback == NULL);
    to.num_hypotheses = 2;
    to.return_scores = 1;
    to.return_alignment = 1;
    CHECK_MSG(projmt_translate(t, lines, 1, &to, &res) == PROJMT_OK, "%s", projmt_last_error());
    float best = NAN;
    if (res) {
        best = projmt_results_score(res, 0, 0);
        CHECK(projmt_results_num_hypotheses(res, 0) == 2 && best < 0.0f && best >= projmt_results_score(res, 0, 1));
        const projmt_alignment *a = projmt_results_alignment(res, 0);
        CHECK(a && a->n_source > 2 && !strcmp(a->target_pieces[a->n_target - 1], "</s>"));
        projmt_results_destroy(res);
    }
    to.length_penalty = -1.0;
    CHECK(projmt_translate(t, lines, 1, &to, &res) == PROJMT_ERROR_ARGUMENT && res == NULL &&
          strstr(projmt_last_error(), "length_penalty"));
    to.length_penalty = 1.0;

    /* Cancellation: stopped at once, and part-way through a search (the
     * callback is asked before each batch and at every step); nothing is
     * returned, and the translator works as before afterwards. */
    to.abort_callback = abort_after;
    for (int when = 0; when <= 5; when += 5) {
        stop_after = when;
        asked = 0;
        res = (projmt_results *)1;
        CHECK_MSG(projmt_translate(t, lines, 4, &to, &res) == PROJMT_ERROR_CANCELLED && res == NULL,
                  "stop after %d: %s", when, projmt_last_error());
        CHECK(asked == when + 1 && strstr(projmt_last_error(), "cancelled"));
    }
    stop_after = 1 << 30;
    asked = 0;
    CHECK(projmt_translate(t, lines, 1, &to, &res) == PROJMT_OK && res && asked > 3 &&
          projmt_results_score(res, 0, 0) == best);
    projmt_results_destroy(res);

    /* The first API on a translator opened by the second gives the same. */
    projmt_result *old = NULL;
    CHECK(projmt_translate_batch(t, lines, 1, NULL, &old) == PROJMT_OK && old &&
          !strcmp(old[0].hypotheses[0], "¿Dónde está la estación?"));
    projmt_results_free(old, 1);
    projmt_translator_free(t);

    /* Warnings reach the caller's callback; NULL silences them again. */
    char tag[] = "mine";
    projmt_set_log_callback(keep_api_log, tag);
    pmt_log(PMT_LOG_WARNING, "from %s", "core");
    CHECK_MSG(!strcmp(api_logged, "1 from core mine"), "logged '%s'", api_logged);
    projmt_set_log_callback(NULL, NULL);
    api_logged[0] = '\0';
    pmt_log(PMT_LOG_WARNING, "dropped");
    CHECK(api_logged[0] == '\0');
}

int main(void) {
    snprintf(model_path, sizeof model_path, "%s/models/en-es.int8.pmt", test_source_dir());
    FILE *f = fopen(model_path, "rb");
    if (!f) test_skip("no shipped model (models/en-es.int8.pmt)");
    fclose(f);
    CHECK(projmt_api_version() == PROJMT_API_VERSION && !strcmp(projmt_version(), "0.2.0"));
    CHECK(strlen(projmt_cpu_isa()) > 0);
    projmt_translator *t = projmt_translator_new(model_path, NULL);
    CHECK_MSG(t != NULL, "%s", projmt_last_error());
    if (!t) return test_finish();
    CHECK(strstr(projmt_translator_compute(t), "compute type") != NULL);
    test_translate(t);
    test_errors(t);
    test_split(t);
    projmt_translator_free(t);
    test_threads();
    test_api_v2();
    return test_finish();
}

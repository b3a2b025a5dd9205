/*
 * test_api_threads.c — translators of libprojmt used at the same time from
 * several threads give exactly what each gives alone (include/projmt.h:
 * translators on different threads are independent).
 *
 * Why this shape: the bug it guards against (issue 43) was process-wide
 * scratch in the attention kernels, sliced by OpenMP thread number, so two
 * teams' thread 0 shared a slice, and a translator with longer sentences
 * grew (freed) it under the others. It showed only when the work really
 * overlapped and the teams differed, so this test runs
 *   - TRANSLATORS translators on as many threads, over two models of
 *     different sizes (the shipped int8 model, and a random fp32 model with
 *     another width, head size and max_len, made here from the shipped
 *     model's SentencePiece model),
 *   - with mixed OpenMP thread counts (1, 2 and 0 = all cores),
 *   - ROUNDS rounds, each started by every thread at a barrier, alternating
 *     greedy search and beam 4 with n-best, scores and alignments,
 * and compares every hypothesis, score and alignment weight bit for bit
 * with the same translator's sequential run before the threads started.
 * It fails on the process-wide scratch (wrong scores or a crash; the ASan
 * and TSan passes see the use-after-free and the race) and passes with
 * thread-local scratch. SKIPs without the shipped model.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "projmt.h"
#include "testutil.h"

enum { TRANSLATORS = 5, ROUNDS = 6, N_SENT = 24, OPTION_SETS = 2 };

static const char *const SENTENCES[N_SENT] = {
    "Where is the station?",
    "I like green tea.",
    "Tom is reading a book in the garden while his sister cooks dinner for the whole family.",
    "Hello, how are you?",
    "We should leave before it starts to rain, because the road to the village is long and dark.",
    "She doesn't know where she put her keys.",
    "The children were playing football in the park when the teacher called them back to school.",
    "Can you help me?",
    "My father has worked at the same hospital for more than thirty years and he still enjoys it.",
    "It's cold today.",
    "I would like to buy two tickets for the train that leaves tomorrow morning at eight o'clock.",
    "Do you speak English?",
    "Although he was very tired after the long journey, he stayed up late to finish writing his letter.",
    "The cat is sleeping.",
    "If you want to learn a language well, you have to practise a little every day and read a lot.",
    "Thank you very much.",
    "They asked me whether I had seen the film that everybody was talking about at work last week.",
    "I'm hungry.",
    "The old man who lives next door gave us some apples from the tree behind his house yesterday.",
    "What time is it?",
    "Nobody told me that the meeting had been moved to Thursday afternoon, so I missed it completely.",
    "Good night.",
    "When I was a child, we used to spend every summer at my grandparents' farm near the mountains.",
    "",
};

static const projmt_translate_options OPTIONS[OPTION_SETS] = {
    {.beam_size = 1, .num_hypotheses = 1, .return_scores = 1, .length_penalty = 1.0},
    {.beam_size = 4, .num_hypotheses = 2, .return_scores = 1, .return_alignment = 1, .length_penalty = 1.0},
};

/* One translator's outputs of one option set, flattened: every hypothesis
 * (NUL-separated), score and alignment weight in order. */
typedef struct {
    char *bytes;
    size_t len, cap;
} flat;

static int flat_add(flat *f, const void *p, size_t n) {
    if (f->len + n > f->cap) {
        size_t cap = f->cap ? f->cap * 2 : 4096;
        while (cap < f->len + n) cap *= 2;
        char *b = realloc(f->bytes, cap);
        if (!b) return -1;
        f->bytes = b;
        f->cap = cap;
    }
    memcpy(f->bytes + f->len, p, n);
    f->len += n;
    return 0;
}

/* Translates SENTENCES with option set o into *out. 0, or -1 (message printed). */
static int translate_flat(projmt_translator *t, int o, flat *out) {
    projmt_result *res = NULL;
    out->len = 0;
    if (projmt_translate_batch(t, SENTENCES, N_SENT, &OPTIONS[o], &res) != PROJMT_OK) {
        fprintf(stderr, "translate: %s\n", projmt_last_error());
        return -1;
    }
    int rc = 0;
    for (int i = 0; rc == 0 && i < N_SENT; i++) {
        const projmt_result *r = &res[i];
        rc |= flat_add(out, &r->n_hypotheses, sizeof r->n_hypotheses);
        for (int h = 0; h < r->n_hypotheses; h++) {
            rc |= flat_add(out, r->hypotheses[h], strlen(r->hypotheses[h]) + 1);
            if (r->scores) rc |= flat_add(out, &r->scores[h], sizeof r->scores[h]);
        }
        const projmt_alignment *a = r->alignment;
        if (a) rc |= flat_add(out, a->weights, sizeof(float) * (size_t)a->n_source * a->n_target);
    }
    projmt_results_free(res, N_SENT);
    return rc;
}

typedef struct {
    projmt_translator *t;
    int id;
    flat want[OPTION_SETS];
    int mismatches, failures;
} worker;

static pthread_barrier_t round_start;

static void *work(void *arg) {
    worker *w = arg;
    flat got = {0};
    for (int round = 0; round < ROUNDS; round++) {
        pthread_barrier_wait(&round_start);   /* every translator starts each round together */
        const int o = (round + w->id) % OPTION_SETS;   /* neighbours run different searches at once */
        if (translate_flat(w->t, o, &got) != 0) {
            w->failures++;
            continue;
        }
        if (got.len != w->want[o].len || memcmp(got.bytes, w->want[o].bytes, got.len) != 0) w->mismatches++;
    }
    free(got.bytes);
    return NULL;
}

int main(void) {
    char shipped[1024], other[1200];
    snprintf(shipped, sizeof shipped, "%s/models/en-es.int8.pmt", test_source_dir());
    FILE *f = fopen(shipped, "rb");
    if (!f) test_skip("no shipped model (models/en-es.int8.pmt)");
    fclose(f);
    snprintf(other, sizeof other, "%s/other.ckpt", test_tmpdir("api_threads"));
    if (test_made_up_model(shipped, other) != 0) {
        CHECK_MSG(0, "could not make the second model");
        return test_finish();
    }
    /* Two models, mixed thread counts: 0 is all cores. */
    const struct { const char *path; int threads; } spec[TRANSLATORS] = {
        {shipped, 1}, {shipped, 2}, {other, 0}, {other, 1}, {shipped, 0},
    };
    static worker workers[TRANSLATORS];
    for (int i = 0; i < TRANSLATORS; i++) {
        const projmt_load_options lo = {"auto", spec[i].threads, 16};
        workers[i].id = i;
        workers[i].t = projmt_translator_new(spec[i].path, &lo);
        CHECK_MSG(workers[i].t != NULL, "translator %d: %s", i, projmt_last_error());
        if (!workers[i].t) return test_finish();
    }
    /* The sequential reference: each translator alone, on this thread. */
    for (int i = 0; i < TRANSLATORS; i++)
        for (int o = 0; o < OPTION_SETS; o++)
            CHECK_MSG(translate_flat(workers[i].t, o, &workers[i].want[o]) == 0, "translator %d alone", i);
    CHECK(pthread_barrier_init(&round_start, NULL, TRANSLATORS) == 0);
    pthread_t th[TRANSLATORS];
    for (int i = 0; i < TRANSLATORS; i++) CHECK(pthread_create(&th[i], NULL, work, &workers[i]) == 0);
    for (int i = 0; i < TRANSLATORS; i++) pthread_join(th[i], NULL);
    pthread_barrier_destroy(&round_start);
    for (int i = 0; i < TRANSLATORS; i++) {
        CHECK_MSG(workers[i].failures == 0, "translator %d (threads %d): %d of %d rounds failed", i,
                  spec[i].threads, workers[i].failures, ROUNDS);
        CHECK_MSG(workers[i].mismatches == 0,
                  "translator %d (%s, threads %d): %d of %d concurrent rounds differ from its sequential run", i,
                  spec[i].path == shipped ? "shipped" : "other", spec[i].threads, workers[i].mismatches, ROUNDS);
        for (int o = 0; o < OPTION_SETS; o++) free(workers[i].want[o].bytes);
        projmt_translator_free(workers[i].t);
    }
    return test_finish();
}

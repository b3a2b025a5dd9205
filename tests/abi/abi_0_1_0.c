/*
 * abi_0_1_0.c — a program built against libprojmt 0.1.0's header, as
 * released (tests/abi/0.1.0/projmt.h, never edited), linked with today's
 * libprojmt.so.0: every function of the first API, its structs read and
 * written with 0.1.0's layouts and sizeof, gives what it gave then. This is
 * what the PROJMT_0 symbol-version node and the kept first API promise
 * (include/projmt.h, "Growing without breaking"). Exit 77 (skip) without
 * the shipped model.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "projmt.h"   /* 0.1.0's */

static int failures;
#define EXPECT(cond)                                                              \
    do {                                                                          \
        if (!(cond)) {                                                            \
            fprintf(stderr, "FAIL %s:%d: %s (%s)\n", __FILE__, __LINE__, #cond,   \
                    projmt_last_error());                                         \
            failures++;                                                           \
        }                                                                         \
    } while (0)

int main(void) {
    const char *root = getenv("PROJMT_SOURCE_DIR");
    char path[1024];
    snprintf(path, sizeof path, "%s/models/en-es.int8.pmt", root ? root : ".");
    FILE *f = fopen(path, "rb");
    if (!f) {
        printf("SKIP: no shipped model (models/en-es.int8.pmt)\n");
        return 77;
    }
    fclose(f);
    EXPECT(projmt_api_version() == PROJMT_API_VERSION);
    EXPECT(!strncmp(projmt_version(), "0.", 2));
    const projmt_load_options lo = {"auto", 1, 8};
    projmt_translator *t = projmt_translator_new(path, &lo);
    EXPECT(t != NULL);
    if (!t) return 1;
    EXPECT(strstr(projmt_translator_compute(t), "compute type") != NULL);
    const char *src[] = {"Where is the station?", "", "I like green tea."};
    projmt_result *res = NULL;
    const projmt_translate_options opt = {.beam_size = 4, .num_hypotheses = 2, .return_scores = 1,
                                          .return_alignment = 1, .length_penalty = -1.0};
    EXPECT(projmt_translate_batch(t, src, 3, &opt, &res) == PROJMT_OK && res);
    if (res) {
        /* res[i] with 0.1.0's sizeof(projmt_result) */
        EXPECT(res[0].n_hypotheses == 2 && !strcmp(res[0].hypotheses[0], "¿Dónde está la estación?"));
        EXPECT(res[0].scores && res[0].scores[0] >= res[0].scores[1]);
        EXPECT(res[1].n_hypotheses == 0 && res[1].alignment == NULL);
        EXPECT(res[2].n_hypotheses == 2 && !strcmp(res[2].hypotheses[0], "Me gusta el té verde."));
        const projmt_alignment *a = res[2].alignment;
        EXPECT(a && a->n_source > 2 && !strcmp(a->source_pieces[a->n_source - 1], "</s>"));
        for (int r = 0; a && r < a->n_target; r++) {
            double sum = 0;
            for (int s = 0; s < a->n_source; s++) sum += a->weights[r * a->n_source + s];
            EXPECT(fabs(sum - 1.0) < 1e-4);
        }
        projmt_results_free(res, 3);
    }
    EXPECT(projmt_translator_set_shortlist(t, 0) == PROJMT_OK);
    const projmt_translate_options bad = {.beam_size = 2, .num_hypotheses = 3};
    EXPECT(projmt_translate_batch(t, src, 1, &bad, &res) == PROJMT_ERROR_ARGUMENT && res == NULL);
    size_t count = 0;
    EXPECT(projmt_split_sentences("Hi. How are you?", 16, NULL, 0, &count) == PROJMT_OK && count == 2);
    projmt_translator_free(t);
    EXPECT(projmt_translator_new("/nonexistent.pmt", NULL) == NULL && strstr(projmt_last_error(), "/nonexistent.pmt"));
    printf("%s\n", failures ? "FAILED" : "ok");
    return failures ? 1 : 0;
}

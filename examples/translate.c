/* translate.c — libprojmt from C: translate the command-line arguments.
 *   cc translate.c $(pkg-config --cflags --libs projmt) -o translate
 *   ./translate models/en-es.int8.pmt "Where is the station?" "I like tea."  */
#include <stdio.h>

#include <projmt.h>

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s MODEL SENTENCE...\n", argv[0]);
        return 2;
    }
    projmt_translator *t = projmt_translator_new(argv[1], NULL);
    if (!t) {
        fprintf(stderr, "translate: %s\n", projmt_last_error());
        return 1;
    }
    const size_t n = (size_t)(argc - 2);
    projmt_translate_options opt = {.beam_size = 4, .num_hypotheses = 1, .return_scores = 1, .length_penalty = 1.0};
    projmt_result *res;
    if (projmt_translate_batch(t, (const char *const *)argv + 2, n, &opt, &res) != PROJMT_OK) {
        fprintf(stderr, "translate: %s\n", projmt_last_error());
        projmt_translator_free(t);
        return 1;
    }
    for (size_t i = 0; i < n; i++)
        printf("%s\t%.4f\n", res[i].n_hypotheses ? res[i].hypotheses[0] : "", res[i].n_hypotheses ? res[i].scores[0] : 0.0f);
    projmt_results_free(res, n);
    projmt_translator_free(t);
    return 0;
}

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
    projmt_translator *t;
    if (projmt_translator_open(argv[1], NULL, &t) != PROJMT_OK) {   /* NULL: compute type auto, all cores */
        fprintf(stderr, "translate: %s\n", projmt_last_error());
        return 1;
    }
    const size_t n = (size_t)(argc - 2);
    projmt_translation_options opt;
    projmt_translation_options_init(&opt, sizeof opt);   /* beam 4, one hypothesis */
    opt.return_scores = 1;
    projmt_results *res;
    if (projmt_translate(t, (const char *const *)argv + 2, n, &opt, &res) != PROJMT_OK) {
        fprintf(stderr, "translate: %s\n", projmt_last_error());
        projmt_translator_free(t);
        return 1;
    }
    for (size_t i = 0; i < n; i++) {
        const char *best = projmt_results_hypothesis(res, i, 0);
        printf("%s\t%.4f%s\n", best ? best : "", best ? projmt_results_score(res, i, 0) : 0.0f,
               projmt_results_flags(res, i) & PROJMT_RESULT_INPUT_CUT ? "\t(input cut)" : "");
    }
    projmt_results_destroy(res);
    projmt_translator_free(t);
    return 0;
}

/*
 * cmd_eval.c — `projmt eval`: scores translations, or a checkpoint.
 *
 * Scoring mode: `projmt eval --hyp HYP --ref REF [--metrics bleu,chrf] [--json]`
 * reads a detokenized hypothesis file and the raw references (one sentence
 * per line, aligned) and prints sacreBLEU's text lines with signatures; with
 * --json one JSON object follows on the last line. The scoring itself lives
 * in the library (pmt_metrics_score_lines) so training-time validation and
 * the model modes below print the same numbers.
 *
 * Model modes score a checkpoint (library side: evaluate.h):
 *   `projmt eval --model M --split valid|test [--data-dir D] [--json]`
 *     teacher-forced loss, perplexity and token accuracy on a prepared split;
 *   `projmt eval --model M --src S --ref R [--beam-size N] [--hyp-out F] [--json]`
 *     translates S and scores the translations against R with BLEU and chrF.
 * Their JSON objects carry the numbers compare.sh puts into report.md.
 *
 * Exit status: 0 scored, 1 unreadable or mismatched input, 2 bad usage.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "cli/commands.h"
#include "core/config.h"
#include "core/json.h"
#include "core/path.h"
#include "eval/evaluate.h"
#include "eval/metrics.h"
#include "core/clock.h"
#include "core/threads.h"
#include "translate/translator.h"

enum { OPT_HYP, OPT_REF, OPT_METRICS, OPT_JSON, OPT_MODEL, OPT_SPLIT, OPT_SRC, OPT_HYP_OUT, N_EVAL_OPTIONS };
static const char *const eval_options[N_EVAL_OPTIONS + 1] = {"hyp=", "ref=",   "metrics=", "json",
                                                             "model=", "split=", "src=",   "hyp-out=", NULL};

/* Sentences per translator call: enough to fill the batched search. */
enum { EVAL_BATCH = 64 };

typedef enum { MODE_SCORE, MODE_FORCED, MODE_TRANSLATE } eval_mode;

typedef struct eval_request {
    eval_mode mode;
    const char *hyp_path, *ref_path;
    const char *model_path, *split, *src_path, *hyp_out;
    unsigned metrics;
    int json;
} eval_request;

static void print_usage(FILE *out) {
    fprintf(out,
            "usage: projmt eval --hyp HYP --ref REF [--metrics bleu,chrf] [--json]\n"
            "       projmt eval --model CKPT --split valid|test [--data-dir D] [--json]\n"
            "       projmt eval --model CKPT --src SRC --ref REF [--beam-size N] [--hyp-out FILE] [--json]\n\n"
            "Scores a detokenized hypothesis file against raw references (one sentence per\n"
            "line, same number of lines) with sacreBLEU-compatible corpus BLEU (13a, exp\n"
            "smoothing) and chrF2, printing sacreBLEU's text lines with signatures.\n"
            "With --model: --split gives the checkpoint's teacher-forced loss, perplexity\n"
            "and token accuracy on <data-dir>/<split>.tok (as training validates);\n"
            "--src translates SRC with the checkpoint and scores it against REF.\n\n"
            "  --hyp FILE        system output, one detokenized sentence per line\n"
            "  --ref FILE        references, one sentence per line\n"
            "  --metrics LIST    comma-separated, from bleu, chrf (default: bleu,chrf)\n"
            "  --model CKPT      checkpoint or exported model file to evaluate\n"
            "  --split NAME      prepared split: train, valid or test\n"
            "  --data-dir DIR    prepared data (default: the config's data_dir)\n"
            "  --src FILE        English sentences to translate, one per line\n"
            "  --beam-size N     beam width for --src (1 = greedy)\n"
            "  --compute-type T  weights --src is decoded with: auto (the file's own if fast here, else fp32) | fp32 | bf16 | int8\n"
            "  --shortlist K     decode --src over the model's vocabulary shortlist, K candidates per source\n"
            "                    piece (a model exported with --shortlist; default 0: the whole vocabulary)\n"
            "  --hyp-out FILE    also write the translations of --src there\n"
            "  --threads N       threads (0 = all cores)\n"
            "  --json            also print one JSON object on the last line\n");
}

/* Writes text and a newline to stdout; 0, or -1 after reporting the failure. */
static int print_line(const char *text) {
    if (fputs(text, stdout) == EOF || fputc('\n', stdout) == EOF) {
        perror("projmt eval: writing to standard output");
        return -1;
    }
    return 0;
}

/* What a model-based run adds to the JSON object (NULL when scoring files). */
typedef struct translation_info {
    const char *model;
    int beam_size;
    double seconds;              /* translating, model loading excluded */
} translation_info;

/* The report's JSON object, with the translation fields first when given. */
static int print_json(const pmt_metrics_report *report, const translation_info *info) {
    char object[2048];
    if (pmt_metrics_report_json(report, object, sizeof object) != 0) {
        fprintf(stderr, "projmt eval: JSON report does not fit its buffer\n");
        return -1;
    }
    if (!info) return print_line(object);
    fputs("{\"model\": ", stdout);
    pmt_json_string(stdout, info->model);
    printf(", \"beam_size\": %d, \"seconds\": %.3f, ", info->beam_size, info->seconds);
    return print_line(object + 1);
}

/* Prints the report in sacreBLEU's text format, then JSON when asked. */
static int print_report(const pmt_metrics_report *report, int json, const translation_info *info) {
    char line[PMT_METRICS_LINE_MAX];
    if (report->metrics & PMT_METRIC_BLEU) {
        pmt_bleu_format(&report->bleu, line, sizeof line);
        if (print_line(line) != 0) return -1;
    }
    if (report->metrics & PMT_METRIC_CHRF) {
        pmt_chrf_format(report->chrf, report->chrf_n_refs, line, sizeof line);
        if (print_line(line) != 0) return -1;
    }
    if (json && print_json(report, info) != 0) return -1;
    if (fflush(stdout) != 0) {
        perror("projmt eval: writing to standard output");
        return -1;
    }
    return 0;
}

/* Loads two line files that must align (what_a/what_b name them in
 * messages); 0, or -1 after printing why, with nothing left allocated. */
static int load_aligned(const char *path_a, const char *what_a, pmt_text_lines *a, const char *path_b,
                        const char *what_b, pmt_text_lines *b) {
    char err[1024];
    if (pmt_text_lines_load(a, path_a, err, sizeof err) != 0) {
        fprintf(stderr, "projmt eval: %s: %s\n", what_a, err);
        return -1;
    }
    if (pmt_text_lines_load(b, path_b, err, sizeof err) != 0) {
        fprintf(stderr, "projmt eval: %s: %s\n", what_b, err);
        pmt_text_lines_free(a);
        return -1;
    }
    if (a->n != b->n) {
        fprintf(stderr, "projmt eval: '%s' has %zu lines but '%s' has %zu; they must align line by line\n", path_a,
                a->n, path_b, b->n);
        pmt_text_lines_free(a);
        pmt_text_lines_free(b);
        return -1;
    }
    return 0;
}

/* Scores aligned hypotheses and references and prints; returns the exit status. */
static int score_lines(const char *const *hyps, const char *const *refs, size_t n, const eval_request *request,
                       const translation_info *info) {
    char err[1024];
    pmt_metrics_report report;
    if (pmt_metrics_score_lines(hyps, refs, n, request->metrics, &report, err, sizeof err) != 0) {
        fprintf(stderr, "projmt eval: %s\n", err);
        return 1;
    }
    return print_report(&report, request->json, info) == 0 ? 0 : 1;
}

/* Loads both files, checks they align, scores and prints; returns the exit status. */
static int score_files(const eval_request *request) {
    pmt_text_lines hyps, refs;
    if (load_aligned(request->hyp_path, "hypotheses", &hyps, request->ref_path, "references", &refs) != 0) return 1;
    int status = score_lines((const char *const *)hyps.lines, (const char *const *)refs.lines, hyps.n, request, NULL);
    pmt_text_lines_free(&hyps);
    pmt_text_lines_free(&refs);
    return status;
}

/* Writes one line per hypothesis to path; 0, or -1 after printing why. */
static int write_hyps(const char *path, char *const *hyps, size_t n) {
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "projmt eval: cannot write '%s': %s\n", path, strerror(errno));
        return -1;
    }
    for (size_t i = 0; i < n; i++) fprintf(f, "%s\n", hyps[i]);
    int failed = ferror(f);
    if (fclose(f) != 0) failed = 1;
    if (failed) {
        fprintf(stderr, "projmt eval: writing '%s' failed\n", path);
        return -1;
    }
    return 0;
}

/* Translates src with the model, writes and scores; returns the exit status. */
static int translate_and_score(const eval_request *request, const pmt_config *cfg, const pmt_text_lines *src,
                               const pmt_text_lines *refs) {
    char err[1024];
    pmt_decode_options opt;
    pmt_decode_options_from_config(&opt, cfg);
    opt.n_best = 1;
    pmt_translator t;
    if (pmt_translator_load(&t, request->model_path, &opt, EVAL_BATCH, err, sizeof err) != 0) {
        fprintf(stderr, "projmt eval: %s\n", err);
        return 1;
    }
    t.warn = pmt_translator_warn_file;
    t.warn_ctx = stderr;
    cmd_note_compute("eval", &t.model);
    char **hyps = NULL;
    int status = 1;
    double t0 = pmt_now_seconds();
    if (pmt_eval_translate_lines(&t, (const char *const *)src->lines, src->n, &hyps, err, sizeof err) != 0) {
        fprintf(stderr, "projmt eval: translating '%s': %s\n", request->src_path, err);
    } else if (!request->hyp_out || write_hyps(request->hyp_out, hyps, src->n) == 0) {
        translation_info info = {request->model_path, opt.beam_size, pmt_now_seconds() - t0};
        status = score_lines((const char *const *)hyps, (const char *const *)refs->lines, src->n, request, &info);
    }
    pmt_eval_hyps_free(hyps, src->n);
    cmd_note_fallbacks("eval");
    pmt_translator_free(&t);
    return status;
}

/* Translates --src, scores against --ref; returns the exit status. */
static int score_translations(const eval_request *request, const pmt_config *cfg) {
    pmt_text_lines src, refs;
    if (load_aligned(request->src_path, "sources", &src, request->ref_path, "references", &refs) != 0) return 1;
    pmt_set_threads(cfg->threads);
    int status = translate_and_score(request, cfg, &src, &refs);
    pmt_text_lines_free(&src);
    pmt_text_lines_free(&refs);
    return status;
}

/* Teacher-forced scores of a checkpoint on a split; returns the exit status. */
static int score_forced(const eval_request *request, const pmt_config *cfg) {
    char err[2048];
    pmt_eval_forced_result r;
    if (pmt_path_check("--data-dir", cfg->data_dir, 0, err, sizeof err) != 0) {
        fprintf(stderr, "projmt eval: %s\n", err);
        return 2;
    }
    pmt_set_threads(cfg->threads);
    if (pmt_eval_forced_split(request->model_path, cfg->data_dir, request->split, &r, err, sizeof err) != 0) {
        fprintf(stderr, "projmt eval: %s\n", err);
        return 1;
    }
    printf("%s: loss %.4f | perplexity %.3f | accuracy %.2f%% | %ld target tokens in %d pairs", request->split,
           r.loss, r.perplexity, 100.0 * r.accuracy, r.tokens, r.pairs);
    if (r.truncated > 0) printf(" (%d truncated to max_len)", r.truncated);
    putchar('\n');
    if (request->json) {
        printf("{\"model\": ");
        pmt_json_string(stdout, request->model_path);
        printf(", \"split\": \"%s\", \"pairs\": %d, \"tokens\": %ld, \"truncated\": %d, \"loss\": %.6f, "
               "\"nll\": %.6f, \"perplexity\": %.6f, \"accuracy\": %.6f, \"params\": %zu, \"train_flops_per_token\": %.0f}\n",
               request->split, r.pairs, r.tokens, r.truncated, r.loss, r.nll, r.perplexity, r.accuracy, r.params,
               r.train_flops_per_token);
    }
    if (fflush(stdout) != 0) {
        perror("projmt eval: writing to standard output");
        return 1;
    }
    return 0;
}

/* Which mode the options ask for; -1 after printing why they conflict. */
static int choose_mode(const eval_request *r, eval_mode *mode) {
    if (r->model_path && r->hyp_path) {
        fprintf(stderr, "projmt eval: --model and --hyp exclude each other: score a model or a file (see --help)\n");
        return -1;
    }
    if (!r->model_path) {
        if (r->split || r->src_path || r->hyp_out) {
            fprintf(stderr, "projmt eval: --split, --src and --hyp-out need --model CKPT (see --help)\n");
            return -1;
        }
        if (!r->hyp_path || !r->ref_path) {
            fprintf(stderr, "projmt eval: both --hyp FILE and --ref FILE are required (see --help)\n");
            return -1;
        }
        *mode = MODE_SCORE;
        return 0;
    }
    if (!r->split == !r->src_path) {
        fprintf(stderr, "projmt eval: --model needs exactly one of --split NAME or --src FILE (see --help)\n");
        return -1;
    }
    if (r->split && !pmt_eval_split_name_ok(r->split)) {
        fprintf(stderr, "projmt eval: unknown --split '%s' (train | valid | test)\n", r->split);
        return -1;
    }
    if (r->src_path && !r->ref_path) {
        fprintf(stderr, "projmt eval: --src needs --ref FILE with the reference translations\n");
        return -1;
    }
    *mode = r->split ? MODE_FORCED : MODE_TRANSLATE;
    return 0;
}

/* Turns parsed option values into a request; 0, or -1 after printing why. */
static int build_request(const char *const *values, eval_request *request) {
    char err[512];
    request->hyp_path = values[OPT_HYP];
    request->ref_path = values[OPT_REF];
    request->model_path = values[OPT_MODEL];
    request->split = values[OPT_SPLIT];
    request->src_path = values[OPT_SRC];
    request->hyp_out = values[OPT_HYP_OUT];
    request->json = values[OPT_JSON] != NULL;
    static const int path_options[] = {OPT_HYP, OPT_REF, OPT_MODEL, OPT_SRC, OPT_HYP_OUT};
    for (size_t i = 0; i < sizeof path_options / sizeof *path_options; i++) {
        const char *value = values[path_options[i]];
        char what[64];
        snprintf(what, sizeof what, "--%.*s", (int)strcspn(eval_options[path_options[i]], "="),
                 eval_options[path_options[i]]);
        if (value && pmt_path_check(what, value, 0, err, sizeof err) != 0) {
            fprintf(stderr, "projmt eval: %s\n", err);
            return -1;
        }
    }
    if (choose_mode(request, &request->mode) != 0) return -1;
    const char *metrics = values[OPT_METRICS] ? values[OPT_METRICS] : "bleu,chrf";
    if (pmt_metrics_parse_list(metrics, &request->metrics, err, sizeof err) != 0) {
        fprintf(stderr, "projmt eval: --metrics: %s\n", err);
        return -1;
    }
    return 0;
}

int cmd_eval(int argc, char **argv) {
    pmt_config cfg;
    const char *values[N_EVAL_OPTIONS];
    int dump = 0;
    int parsed = cmd_parse_args("eval", argc, argv, eval_options, values, print_usage, &cfg, &dump);
    if (parsed != CMD_CONTINUE) return parsed;
    if (dump) {
        pmt_config_dump(&cfg, stdout);
        return fflush(stdout) == 0 ? 0 : 1;
    }
    eval_request request;
    if (build_request(values, &request) != 0) return 2;
    switch (request.mode) {
    case MODE_FORCED: return score_forced(&request, &cfg);
    case MODE_TRANSLATE: return score_translations(&request, &cfg);
    default: return score_files(&request);
    }
}

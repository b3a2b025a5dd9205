/*
 * cmd_eval.c — `projmt eval`: scores translations.
 *
 * Scoring mode: `projmt eval --hyp HYP --ref REF [--metrics bleu,chrf] [--json]`
 * reads a detokenized hypothesis file and the raw references (one sentence
 * per line, aligned) and prints sacreBLEU's text lines with signatures; with
 * --json one JSON object follows on the last line. The scoring itself lives
 * in the library (pmt_metrics_score_lines) so training-time validation and
 * later model-based modes print the same numbers.
 *
 * Exit status: 0 scored, 1 unreadable or mismatched input, 2 bad usage.
 */
#include <stdio.h>
#include <string.h>

#include "commands.h"
#include "config.h"
#include "metrics.h"

enum { OPT_HYP, OPT_REF, OPT_METRICS, OPT_JSON, N_EVAL_OPTIONS };
static const char *const eval_options[N_EVAL_OPTIONS + 1] = {"hyp=", "ref=", "metrics=", "json", NULL};

typedef struct eval_request {
    const char *hyp_path, *ref_path;
    unsigned metrics;
    int json;
} eval_request;

static void print_usage(FILE *out) {
    fprintf(out,
            "usage: projmt eval --hyp HYP --ref REF [--metrics bleu,chrf] [--json]\n\n"
            "Scores a detokenized hypothesis file against raw references (one sentence per\n"
            "line, same number of lines) with sacreBLEU-compatible corpus BLEU (13a, exp\n"
            "smoothing) and chrF2, printing sacreBLEU's text lines with signatures.\n\n"
            "  --hyp FILE        system output, one detokenized sentence per line\n"
            "  --ref FILE        references, one sentence per line\n"
            "  --metrics LIST    comma-separated, from bleu, chrf (default: bleu,chrf)\n"
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

/* Prints the report in sacreBLEU's text format, then JSON when asked. */
static int print_report(const pmt_metrics_report *report, int json) {
    char line[PMT_METRICS_LINE_MAX];
    if (report->metrics & PMT_METRIC_BLEU) {
        pmt_bleu_format(&report->bleu, line, sizeof line);
        if (print_line(line) != 0) return -1;
    }
    if (report->metrics & PMT_METRIC_CHRF) {
        pmt_chrf_format(report->chrf, report->chrf_n_refs, line, sizeof line);
        if (print_line(line) != 0) return -1;
    }
    if (json) {
        char object[2048];
        if (pmt_metrics_report_json(report, object, sizeof object) != 0) {
            fprintf(stderr, "projmt eval: JSON report does not fit its buffer\n");
            return -1;
        }
        if (print_line(object) != 0) return -1;
    }
    if (fflush(stdout) != 0) {
        perror("projmt eval: writing to standard output");
        return -1;
    }
    return 0;
}

/* Loads both files, checks they align, scores and prints; returns the exit status. */
static int score_files(const eval_request *request) {
    pmt_text_lines hyps, refs;
    char err[1024];
    if (pmt_text_lines_load(&hyps, request->hyp_path, err, sizeof err) != 0) {
        fprintf(stderr, "projmt eval: hypotheses: %s\n", err);
        return 1;
    }
    if (pmt_text_lines_load(&refs, request->ref_path, err, sizeof err) != 0) {
        fprintf(stderr, "projmt eval: references: %s\n", err);
        pmt_text_lines_free(&hyps);
        return 1;
    }
    int status = 1;
    pmt_metrics_report report;
    if (hyps.n != refs.n) {
        fprintf(stderr, "projmt eval: '%s' has %zu lines but '%s' has %zu; they must align line by line\n",
                request->hyp_path, hyps.n, request->ref_path, refs.n);
    } else if (pmt_metrics_score_lines((const char *const *)hyps.lines, (const char *const *)refs.lines,
                                       hyps.n, request->metrics, &report, err, sizeof err) != 0) {
        fprintf(stderr, "projmt eval: %s\n", err);
    } else {
        status = print_report(&report, request->json) == 0 ? 0 : 1;
    }
    pmt_text_lines_free(&hyps);
    pmt_text_lines_free(&refs);
    return status;
}

/* Turns parsed option values into a request; 0, or -1 after printing why. */
static int build_request(const char *const *values, eval_request *request) {
    char err[512];
    request->hyp_path = values[OPT_HYP];
    request->ref_path = values[OPT_REF];
    request->json = values[OPT_JSON] != NULL;
    if (!request->hyp_path || !request->ref_path) {
        fprintf(stderr, "projmt eval: both --hyp FILE and --ref FILE are required (see --help)\n");
        return -1;
    }
    const char *metrics = values[OPT_METRICS] ? values[OPT_METRICS] : "bleu,chrf";
    if (pmt_metrics_parse_list(metrics, &request->metrics, err, sizeof err) != 0) {
        fprintf(stderr, "projmt eval: --metrics: %s\n", err);
        return -1;
    }
    return 0;
}

int cmd_eval(int argc, char **argv) {
    pmt_config cfg;
    pmt_config_defaults(&cfg);
    const char *values[N_EVAL_OPTIONS];
    int help = 0, dump = 0;
    char err[1024];
    if (pmt_config_parse_args(&cfg, argc, argv, eval_options, values, &help, &dump, err, sizeof err) != 0) {
        fprintf(stderr, "projmt eval: %s\n", err);
        return 2;
    }
    if (help) { print_usage(stdout); return 0; }
    if (dump) {
        pmt_config_dump(&cfg, stdout);
        return fflush(stdout) == 0 ? 0 : 1;
    }
    eval_request request;
    if (build_request(values, &request) != 0) return 2;
    return score_files(&request);
}

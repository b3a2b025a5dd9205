/*
 * cmd_bench.c — `projmt bench`: training speed of the attention forms on the
 * same batches in one process, against this machine's sgemm peak measured in
 * the same run.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tools/bench.h"
#include "tools/bench_decode.h"
#include "nn/gemm.h"
#include "nn/gemm.h"
#include "model/checkpoint.h"
#include "cli/commands.h"
#include "core/config.h"
#include "core/json.h"
#include "data/corpus.h"
#include "core/threads.h"
#include "data/spm.h"

static void usage(FILE *out) {
    fprintf(out, "usage: projmt bench [--config FILE] [--steps N] [--warmup N] [--modes LIST] [--precisions LIST] [--synthetic] [--json] [options]\n"
           "       projmt bench --decode [--model CKPT] [--compute-type T] [--shortlist K] [--sentences N] [--decode-batch N] [--modes LIST]\n"
           "  Trains --steps timed optimizer steps (after --warmup untimed ones) per attention mode on the\n"
           "  same batches (the first batches of <data-dir>/train.tok, or synthetic spa-eng-like batches),\n"
           "  and prints parameters, FLOPs per token, ms per step (median), tokens/s, GFLOP/s, %% of the\n"
           "  sgemm peak measured in the same run, peak resident memory, and the time ratio to the first mode.\n"
           "  --modes: comma-separated from standard, projection, proj-self, proj-cross, learned, and the\n"
           "           pooling family boxcar, constant, epanechnikov (kernels, fixed sigma), diagonal, cosine,\n"
           "           dot (gaussian with that metric, fixed sigma), or a site code: three letters s|p for the\n"
           "           encoder self, decoder self and cross sites (e.g. pps: projection in both self-attentions;\n"
           "           projection sites take --kernel, --proj-metric, --sigma) (default standard,projection)\n"
           "  --precisions: comma-separated fp32, bf16: each mode is run in each precision, one after the other,\n"
           "           and the bf16/fp32 tokens/s ratio is printed per mode (default: --precision alone)\n"
           "  --decode: sentences/s, source words/s and output tokens/s of batched greedy and beam-4 search over\n"
           "           the first --sentences (1000) lines of <data-dir>/test.en, per mode with randomly initialised\n"
           "           models, or with the trained checkpoint or exported model file given by --model, whose\n"
           "           weights --compute-type chooses: auto (the file's own if fast here, else fp32) | fp32 | bf16 | int8,\n"
           "           over its vocabulary shortlist with --shortlist K (a model exported with --shortlist)\n\n");
    pmt_config_print_help(out, "model,train");
}

/* The pooling-family modes (projection at every site), named as
 * scripts/compare.sh names them: a kernel (fixed σ) or a metric (gaussian,
 * fixed σ). Sets kernel and metric; 0 if mode is not one of them. */
static int pooling_mode(pmt_config *cfg, const char *mode) {
    static const struct { const char *name; int kernel, metric; } modes[] = {
        {"boxcar", PMT_KERNEL_BOXCAR, PMT_METRIC_EUCLIDEAN},
        {"constant", PMT_KERNEL_CONSTANT, PMT_METRIC_EUCLIDEAN},
        {"epanechnikov", PMT_KERNEL_EPANECHNIKOV, PMT_METRIC_EUCLIDEAN},
        {"diagonal", PMT_KERNEL_GAUSSIAN, PMT_METRIC_DIAGONAL},
        {"cosine", PMT_KERNEL_GAUSSIAN, PMT_METRIC_COSINE},
        {"dot", PMT_KERNEL_GAUSSIAN, PMT_METRIC_DOT},
    };
    for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++)
        if (!strcmp(mode, modes[i].name)) {
            cfg->proj_kernel = modes[i].kernel;
            cfg->proj_metric = modes[i].metric;
            return 1;
        }
    return 0;
}

/* A site code: one letter per site (encoder self, decoder self, cross), s
 * standard or p projection, the kernel, metric and σ those of the config
 * (the per-site front of the attention study). 1 when mode is one. */
static int site_code_mode(pmt_config *cfg, const char *mode) {
    if (strlen(mode) != PMT_SITES) return 0;
    for (int i = 0; i < PMT_SITES; i++)
        if (mode[i] != 's' && mode[i] != 'p') return 0;
    for (int i = 0; i < PMT_SITES; i++) cfg->site_kind[i] = mode[i] == 'p' ? PMT_ATTN_PROJECTION : PMT_ATTN_STANDARD;
    return 1;
}

/* Applies a mode name to a config; -1 if unknown. */
static int apply_mode(pmt_config *cfg, const char *mode) {
    int std = PMT_ATTN_STANDARD, proj = PMT_ATTN_PROJECTION;
    int kinds[PMT_SITES];
    int learned = 0;
    if (site_code_mode(cfg, mode)) return 0;
    if (!strcmp(mode, "standard")) { kinds[0] = kinds[1] = kinds[2] = std; }
    else if (!strcmp(mode, "projection")) { kinds[0] = kinds[1] = kinds[2] = proj; }
    else if (!strcmp(mode, "proj-self")) { kinds[0] = kinds[1] = proj; kinds[2] = std; }
    else if (!strcmp(mode, "proj-cross")) { kinds[0] = kinds[1] = std; kinds[2] = proj; }
    else if (!strcmp(mode, "learned")) { kinds[0] = kinds[1] = kinds[2] = proj; learned = 1; }
    else if (pooling_mode(cfg, mode)) { kinds[0] = kinds[1] = kinds[2] = proj; }
    else return -1;
    memcpy(cfg->site_kind, kinds, sizeof kinds);
    cfg->sigma_learned = learned;
    return 0;
}

static void print_result(const pmt_bench_result *r, double base_ms) {
    printf("%-34s params %9zu | %7.2f MFLOP/tok | %8.1f ms/step | %8.0f tok/s | %6.1f GFLOP/s = %5.1f%% of peak | "
           "peak RSS %6.0f MiB | time ratio %.3f\n",
           r->mode, r->params, r->flops_per_token / 1e6, r->ms_per_step, r->tokens_per_s, r->gflops, r->pct_of_peak,
           r->peak_rss_mib, r->ms_per_step / base_ms);
    printf("%-34s step time:", "");
    for (int k = 0; k < PMT_BENCH_PHASES; k++)
        printf("%s %s %.1f%%", k ? " |" : "", pmt_bench_phase_names[k], r->phase_pct[k]);
    printf(" | CPU %.1f ms/step\n", r->cpu_ms_per_step);
    printf("%-34s products alone: %.1f GFLOP/s = %.1f%% of the %s peak\n", "", r->product_gflops,
           r->product_pct_of_peak, strstr(r->mode, " bf16") ? "bf16 (rounded operands)" : "sgemm");
}

static void print_json(const pmt_bench_result *r, int n, const pmt_bench_peaks *peaks, int threads, int synthetic) {
    printf("{\"cpu_isa\":\"%s\",\"gemm_backend\":\"%s\",\"sgemm_peak_gflops\":%.2f,\"sgemm_peaks\":{", pmt_cpu_isa_name(),
           pmt_gemm_name(pmt_gemm_active()), peaks->sgemm[pmt_gemm_active()]);
    for (int be = 0; be < PMT_GEMM_BACKENDS; be++)
        printf("%s\"%s\":%.2f", be ? "," : "", pmt_gemm_name((pmt_gemm_backend)be), peaks->sgemm[be]);
    printf("},\"bf16_peak_gflops\":%.2f,\"bf16_peak_rounded_gflops\":%.2f,\"threads\":%d,\"batches\":\"%s\","
           "\"modes\":[", peaks->bf16_convert, peaks->bf16, threads, synthetic ? "synthetic" : "corpus");
    static const char *const keys[PMT_BENCH_PHASES] = {"gemm",      "bf16_rounding", "attention", "layernorm",
                                                       "loss",      "elementwise",   "optimizer"};
    for (int i = 0; i < n; i++) {
        printf("%s{\"mode\":\"%s\",\"params\":%zu,\"flops_per_token\":%.0f,\"ms_per_step\":%.3f,\"cpu_ms_per_step\":%.3f,"
               "\"tokens_per_s\":%.1f,\"gflops\":%.3f,\"pct_of_peak\":%.2f,\"product_gflops\":%.3f,"
               "\"product_pct_of_peak\":%.2f,\"peak_rss_mib\":%.1f,\"time_ratio\":%.4f,\"phase_pct\":{",
               i ? "," : "", r[i].mode, r[i].params, r[i].flops_per_token, r[i].ms_per_step, r[i].cpu_ms_per_step,
               r[i].tokens_per_s, r[i].gflops, r[i].pct_of_peak, r[i].product_gflops, r[i].product_pct_of_peak,
               r[i].peak_rss_mib, r[i].ms_per_step / r[0].ms_per_step);
        for (int k = 0; k < PMT_BENCH_PHASES; k++) printf("%s\"%s\":%.2f", k ? "," : "", keys[k], r[i].phase_pct[k]);
        printf("}}");
    }
    printf("]}\n");
}

/* --precisions LIST (fp32,bf16) into precisions[], or the config's
 * precision alone when list is NULL; auto becomes this CPU's
 * (pmt_gemm_precision_auto). 0, or -1 with err. */
static int parse_precisions(const pmt_config *cfg, const char *list, int *precisions, int *n, char *err,
                            size_t errlen) {
    *n = 0;
    if (!list) {
        precisions[(*n)++] = cfg->precision == PMT_PRECISION_AUTO ? pmt_gemm_precision_auto() : cfg->precision;
        return 0;
    }
    char buf[64];
    snprintf(buf, sizeof buf, "%s", list);
    for (char *save = NULL, *name = strtok_r(buf, ",", &save); name; name = strtok_r(NULL, ",", &save)) {
        pmt_config probe = *cfg;
        char inner[256];
        if (pmt_config_set(&probe, "precision", name, inner, sizeof inner) != 0) {
            snprintf(err, errlen, "--precisions: %s", inner);
            return -1;
        }
        if (probe.precision == PMT_PRECISION_AUTO) probe.precision = pmt_gemm_precision_auto();
        for (int i = 0; i < *n; i++)
            if (precisions[i] == probe.precision) {
                snprintf(err, errlen, "--precisions: '%s' is listed twice", name);
                return -1;
            }
        precisions[(*n)++] = probe.precision;
    }
    if (*n == 0) {
        snprintf(err, errlen, "--precisions: empty list (use fp32, bf16 or fp32,bf16)");
        return -1;
    }
    return 0;
}

/* The prepared data's SentencePiece model, or NULL when there is none. */
static pmt_spm *data_spm(const pmt_config *cfg) {
    char path[PMT_PATH_MAX + 16], err[256];
    snprintf(path, sizeof path, "%s/spm.model", cfg->data_dir);
    return access(path, R_OK) == 0 ? pmt_spm_load_file(path, err, sizeof err) : NULL;
}

/* Vocabulary size from the prepared data's spm.model, or the config's. */
static int vocab_size(const pmt_config *cfg) {
    pmt_spm *spm = data_spm(cfg);
    if (!spm) return cfg->vocab_size;
    int V = pmt_spm_vocab_size(spm);
    pmt_spm_free(spm);
    return V;
}

/* Decodes with one model and prints its report. */
static int decode_one(pmt_model *m, const pmt_spm *spm, const char *text, int n, int batch, int shortlist,
                      const char *title, int json) {
    pmt_bench_decode_report rep;
    char err[512];
    if (pmt_bench_decode(m, spm, text, n, batch, shortlist, &rep, err, sizeof err) != 0) {
        fprintf(stderr, "projmt bench: %s\n", err);
        return 1;
    }
    pmt_bench_decode_print(stdout, title, &rep);
    if (json) {
        printf("{\"decode\":");
        pmt_json_string(stdout, title);
        printf(",\"sentences\":%d,\"batch\":%d,\"shortlist\":%d,\"runs\":[", rep.sentences, rep.batch, rep.shortlist);
        for (int i = 0; i < PMT_BENCH_DECODE_RUNS; i++)
            printf("%s{\"run\":\"%s\",\"sentences_per_s\":%.1f,\"src_words_per_s\":%.1f,\"tokens_per_s\":%.1f}",
                   i ? "," : "", rep.run[i].label, rep.run[i].sentences_per_s, rep.run[i].src_words_per_s,
                   rep.run[i].tokens_per_s);
        printf("]}\n");
    }
    fflush(stdout);
    return 0;
}

/* `projmt bench --decode`: a trained checkpoint, or random models per mode. */
static int bench_decode(const pmt_config *cfg, const char *modes, int n, int batch, int json) {
    char err[512], text[PMT_PATH_MAX + 16];
    snprintf(text, sizeof text, "%s/test.en", cfg->data_dir);
    const char *src_text = access(text, R_OK) == 0 ? text : NULL;
    int rc = 0;
    if (cfg->model[0]) {
        pmt_model m;
        pmt_spm *spm = NULL;
        if (pmt_checkpoint_load_model(cfg->model, &m, cfg->max_len * batch, cfg->max_len, &spm, err, sizeof err) != 0) {
            fprintf(stderr, "projmt bench: %s\n", err);
            return 1;
        }
        if (pmt_model_set_compute_type(&m, cfg->compute_type, err, sizeof err) != 0) {
            fprintf(stderr, "projmt bench: %s\n", err);
            pmt_spm_free(spm);
            pmt_model_free(&m);
            return 1;
        }
        char compute[512];
        pmt_model_describe_compute(&m, compute, sizeof compute);
        printf("model %s: %s\n", cfg->model, compute);
        rc = decode_one(&m, spm, src_text, n, batch, cfg->shortlist, cfg->model, json);
        pmt_spm_free(spm);
        pmt_model_free(&m);
        return rc;
    }
    pmt_spm *spm = data_spm(cfg);
    int V = spm ? pmt_spm_vocab_size(spm) : cfg->vocab_size;
    char list[256];
    snprintf(list, sizeof list, "%s", modes);
    for (char *save = NULL, *mode = strtok_r(list, ",", &save); mode && rc == 0; mode = strtok_r(NULL, ",", &save)) {
        pmt_config mcfg = *cfg;
        pmt_model m;
        if (apply_mode(&mcfg, mode) != 0) { fprintf(stderr, "projmt bench: unknown mode '%s'\n", mode); rc = 2; break; }
        if (pmt_model_init(&m, &mcfg, V, mcfg.max_len * batch, mcfg.max_len, err, sizeof err) != 0) {
            fprintf(stderr, "projmt bench: %s\n", err);
            rc = 1;
            break;
        }
        pmt_model_init_params(&m, mcfg.seed);
        rc = decode_one(&m, spm, src_text, n, batch, 0, mode, json);
        pmt_model_free(&m);
    }
    pmt_spm_free(spm);
    return rc;
}

int cmd_bench(int argc, char **argv) {
    pmt_config cfg;
    char err[512];
    int dump = 0;
    const char *extra[] = {"steps=", "warmup=", "modes=", "synthetic", "json", "decode", "sentences=", "decode-batch=",
                           "precisions=", NULL};
    const char *val[9];
    int parsed = cmd_parse_args("bench", argc, argv, extra, val, usage, &cfg, &dump);
    if (parsed != CMD_CONTINUE) return parsed;
    if (dump) { pmt_config_dump(&cfg, stdout); return 0; }
    int steps = 10, warmup = 2;
    if ((val[0] && pmt_parse_int_option("--steps", val[0], 1, 1 << 30, &steps, err, sizeof err) != 0) ||
        (val[1] && pmt_parse_int_option("--warmup", val[1], 0, 1 << 30, &warmup, err, sizeof err) != 0)) {
        fprintf(stderr, "projmt bench: %s\n", err);
        return 2;
    }
    const char *modes = val[2] ? val[2] : "standard,projection";
    int synthetic = val[3] != NULL, json = val[4] != NULL;
    if (steps < 1 || warmup < 0) { fprintf(stderr, "projmt bench: --steps must be >= 1 and --warmup >= 0\n"); return 2; }
    if (pmt_config_validate(&cfg, err, sizeof err) != 0) { fprintf(stderr, "projmt bench: %s\n", err); return 2; }

    int threads = pmt_set_threads(cfg.threads);
    if (val[5]) {
        int n = 1000, batch = 64;
        if ((val[6] && pmt_parse_int_option("--sentences", val[6], 1, 1 << 30, &n, err, sizeof err) != 0) ||
            (val[7] && pmt_parse_int_option("--decode-batch", val[7], 1, 1 << 20, &batch, err, sizeof err) != 0)) {
            fprintf(stderr, "projmt bench: %s\n", err);
            return 2;
        }
        if (n < 1 || batch < 1) { fprintf(stderr, "projmt bench: --sentences and --decode-batch must be >= 1\n"); return 2; }
        printf("projmt bench --decode: CPU %s (oneDNN's effective ISA), %d threads, %d sentences, batch %d\n",
               pmt_cpu_isa_name(), threads, n, batch);
        return bench_decode(&cfg, modes, n, batch, json);
    }
    pmt_corpus corpus;
    int have_corpus = 0;
    if (!synthetic) {
        char path[PMT_PATH_MAX + 16];
        snprintf(path, sizeof path, "%s/train.tok", cfg.data_dir);
        if (access(path, R_OK) == 0) {
            if (pmt_corpus_load(&corpus, path, err, sizeof err) != 0) { fprintf(stderr, "projmt bench: %s\n", err); return 1; }
            have_corpus = 1;
        } else {
            fprintf(stderr, "projmt bench: %s not found; using synthetic batches (run projmt prepare for real ones)\n", path);
        }
    }
    int precisions[PMT_PRECISIONS], n_precisions = 0, want_bf16 = 0;
    if (parse_precisions(&cfg, val[8], precisions, &n_precisions, err, sizeof err) != 0) {
        fprintf(stderr, "projmt bench: %s\n", err);
        if (have_corpus) pmt_corpus_free(&corpus);
        return 2;
    }
    for (int p = 0; p < n_precisions; p++) want_bf16 |= precisions[p] == PMT_PRECISION_BF16;
    if (want_bf16 && pmt_gemm_bf16_check(pmt_cpu_has_bf16(), err, sizeof err) != 0) {
        fprintf(stderr, "projmt bench: %s\n", err);
        if (have_corpus) pmt_corpus_free(&corpus);
        return 1;
    }
    int V = vocab_size(&cfg);
    /* Both backends' peaks, side by side in this run; % of peak is of the
     * higher one (a step's fp32 products may use both), or of the bf16
     * product's peak for bf16 steps. */
    pmt_bench_peaks peaks;
    memset(&peaks, 0, sizeof peaks);
    for (int be = 0; be < PMT_GEMM_BACKENDS; be++)
        peaks.sgemm[be] = pmt_bench_sgemm_peak((pmt_gemm_backend)be, PMT_PRECISION_FP32, 0, 2048, 7);
    if (want_bf16) {
        peaks.bf16_convert = pmt_bench_sgemm_peak(pmt_gemm_active(), PMT_PRECISION_BF16, 0, 2048, 7);
        peaks.bf16 = pmt_bench_sgemm_peak(pmt_gemm_active(), PMT_PRECISION_BF16, 1, 2048, 7);
    }
    const pmt_gemm_backend active = pmt_gemm_active();
    char routed[96] = "";
    if (pmt_gemm_fp32_backend(1) != active)
        snprintf(routed, sizeof routed, " (fp32 weight gradients, A transposed, by %s on this CPU)",
                 pmt_gemm_name(pmt_gemm_fp32_backend(1)));
    printf("projmt bench: CPU %s (oneDNN's effective ISA), %d threads, matrix products by %s%s; sgemm peak "
           "(2048^3, median of 7):", pmt_cpu_isa_name(), threads, pmt_gemm_name(active), routed);
    for (int be = 0; be < PMT_GEMM_BACKENDS; be++) {
        if (pmt_gemm_available((pmt_gemm_backend)be))
            printf(" %s %.1f GFLOP/s%s", pmt_gemm_name((pmt_gemm_backend)be), peaks.sgemm[be], be == (int)active ? " (active)" : "");
        else
            printf(" %s not built in", pmt_gemm_name((pmt_gemm_backend)be));
        printf(be + 1 < PMT_GEMM_BACKENDS ? "," : "");
    }
    if (want_bf16)
        printf(", bf16 matmul %.1f GFLOP/s (with conversion), %.1f GFLOP/s (operands already bf16)", peaks.bf16_convert,
               peaks.bf16);
    printf("\n");
    printf("  batch %d tokens, %s batches, vocab %d, %d timed steps after %d warm-up\n",
           cfg.batch_tokens, have_corpus ? "corpus" : "synthetic", V, steps, warmup);

    enum { MAX_MODES = 16 };   /* every named mode fits */
    pmt_bench_result results[MAX_MODES];
    int n = 0, rc = 0;
    char list[512];
    snprintf(list, sizeof list, "%s", modes);
    /* Refused before anything runs. */
    int runs = 0;
    for (const char *c = modes; *c; c++) runs += *c == ',';
    runs = (runs + 1) * n_precisions;
    if (runs > MAX_MODES) {
        fprintf(stderr, "projmt bench: at most %d modes per run (counting each precision; got %d in '%s')\n",
                MAX_MODES, runs, modes);
        if (have_corpus) pmt_corpus_free(&corpus);
        return 2;
    }
    for (char *save = NULL, *mode = strtok_r(list, ",", &save); mode && rc == 0; mode = strtok_r(NULL, ",", &save)) {
        for (int p = 0; p < n_precisions && rc == 0; p++) {
            pmt_config mcfg = cfg;
            mcfg.precision = precisions[p];
            if (apply_mode(&mcfg, mode) != 0) { fprintf(stderr, "projmt bench: unknown mode '%s'\n", mode); rc = 2; break; }
            if (pmt_bench_train(&mcfg, have_corpus ? &corpus : NULL, V, warmup, steps, &peaks, &results[n], err,
                                sizeof err) != 0) {
                fprintf(stderr, "projmt bench: %s\n", err);
                rc = 1;
                break;
            }
            print_result(&results[n], results[0].ms_per_step);
            if (p > 0)
                printf("%-34s tokens/s ratio %s / %s = %.3f (CPU time per step ratio %s / %s = %.3f)\n", "",
                       pmt_precision_name(precisions[p]), pmt_precision_name(precisions[0]),
                       results[n].tokens_per_s / results[n - p].tokens_per_s, pmt_precision_name(precisions[0]),
                       pmt_precision_name(precisions[p]), results[n - p].cpu_ms_per_step / results[n].cpu_ms_per_step);
            fflush(stdout);
            n++;
        }
    }
    if (rc == 0 && n > n_precisions)
        printf("time ratio %s / %s = %.3f (FLOP ratio %.3f)\n", results[n_precisions].mode, results[0].mode,
               results[n_precisions].ms_per_step / results[0].ms_per_step,
               results[n_precisions].flops_per_token / results[0].flops_per_token);
    if (rc == 0 && json) print_json(results, n, &peaks, threads, !have_corpus);
    if (have_corpus) pmt_corpus_free(&corpus);
    return rc;
}

/*
 * cmd_serve.c — `projmt serve --model CKPT [--host 127.0.0.1] [--port 8080]`:
 * the translation server (serve/server.h) until SIGTERM or SIGINT, which
 * stop it gracefully (requests already received are answered first).
 *
 * Signals are blocked in every thread before any is created, and the main
 * thread waits for them with sigwait: no handler runs inside a library call.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h"
#include "core/config.h"
#include "core/threads.h"
#include "serve/server.h"

static void usage(FILE *out) {
    fprintf(out,
            "usage: projmt serve --model CKPT [options]\n\n"
            "HTTP translation server: LibreTranslate-compatible POST /translate, GET /languages,\n"
            "/health, /metrics (Prometheus), /info, and a web page at /. Stops on SIGTERM/SIGINT\n"
            "after answering the requests it has received.\n\n"
            "  --model FILE         checkpoint to load (required)\n"
            "  --host ADDR          address to bind (default 127.0.0.1; 0.0.0.0 = every interface)\n"
            "  --port N             port (default 8080; 0 = any free port, printed at start)\n"
            "  --api-key KEY        require this key (api_key field or 'Authorization: Bearer KEY')\n"
            "  --card FILE          model card whose BLEU/chrF lines the page shows\n"
            "                       (default: README.md beside the model, if present)\n"
            "  --max-batch N        sentences decoded together (default 32)\n"
            "  --max-wait-ms N      wait for a batch to fill (default 5)\n"
            "  --max-beam N         largest beam_size a request may ask for (default 8)\n"
            "  --max-sentences N    lines per request (default 128)\n"
            "  --max-chars N        characters per line (default 1000)\n"
            "  --max-body N         bytes per request body (default 65536)\n"
            "  --timeout S          close connections idle for S seconds (default 10)\n"
            "  --max-connections N  concurrent connections (default 256)\n\n");
    pmt_config_print_help(out, "translate");
}

/* Parses a positive integer option; -1 when malformed. */
static long option_int(const char *value, long fallback) {
    if (!value) return fallback;
    char *end;
    long v = strtol(value, &end, 10);
    return end != value && *end == '\0' ? v : -1;
}

int cmd_serve(int argc, char **argv) {
    static const char *const extra[] = {"host=", "port=", "api-key=", "card=", "max-batch=", "max-wait-ms=",
                                        "max-beam=", "max-sentences=", "max-chars=", "max-body=", "timeout=",
                                        "max-connections=", NULL};
    const char *val[12];
    pmt_config cfg;
    char err[512];
    int dump = 0;
    int parsed = cmd_parse_args("serve", argc, argv, extra, val, usage, &cfg, &dump);
    if (parsed != CMD_CONTINUE) return parsed;
    if (dump) { pmt_config_dump(&cfg, stdout); return 0; }
    if (!cfg.model[0]) {
        fprintf(stderr, "projmt serve: --model FILE is required (see --help)\n");
        return 2;
    }
    pmt_serve_options opt = {
        .model_path = cfg.model,
        .host = val[0] ? val[0] : "127.0.0.1",
        .port = (int)option_int(val[1], 8080),
        .api_key = val[2],
        .card_path = val[3],
        .max_batch = (int)option_int(val[4], 32),
        .max_wait_ms = (int)option_int(val[5], 5),
        .timeout_s = (int)option_int(val[10], 10),
        .max_connections = (int)option_int(val[11], 256),
        .threads = cfg.threads,
        .limits = {.max_beam = (int)option_int(val[6], 8),
                   .max_sentences = (int)option_int(val[7], 128),
                   .max_chars = (int)option_int(val[8], 1000),
                   .max_body = (size_t)option_int(val[9], 65536),
                   .default_beam = cfg.beam_size},
    };
    if (val[9] && option_int(val[9], 0) < 16) opt.limits.max_body = 0;
    if (opt.api_key && !opt.api_key[0]) {
        fprintf(stderr, "projmt serve: --api-key must not be empty\n");
        return 2;
    }
    pmt_decode_options_from_config(&opt.decode, &cfg);
    pmt_set_threads(cfg.threads);

    sigset_t stop_signals;
    sigemptyset(&stop_signals);
    sigaddset(&stop_signals, SIGTERM);
    sigaddset(&stop_signals, SIGINT);
    pthread_sigmask(SIG_BLOCK, &stop_signals, NULL);
    signal(SIGPIPE, SIG_IGN);

    pmt_server server;
    if (pmt_server_start(&server, &opt, err, sizeof err) != 0) {
        fprintf(stderr, "projmt serve: %s\n", err);
        return 1;
    }
    const int ipv6 = strchr(opt.host, ':') != NULL;
    fprintf(stderr, "projmt serve: listening on http://%s%s%s:%d/ (model %s, %zu parameters, max batch %d, max wait %d ms)\n",
            ipv6 ? "[" : "", opt.host, ipv6 ? "]" : "", server.port, opt.model_path, server.tr.model.n_params,
            opt.max_batch, opt.max_wait_ms);
    fflush(stderr);
    int sig = 0;
    sigwait(&stop_signals, &sig);
    fprintf(stderr, "projmt serve: %s received, answering the requests in flight, then stopping\n",
            sig == SIGTERM ? "SIGTERM" : "SIGINT");
    long sentences = server.metrics.sentences;
    pmt_server_stop(&server);
    fprintf(stderr, "projmt serve: stopped (%ld sentences translated)\n", sentences);
    return 0;
}

/*
 * cmd_serve.c — `projmt serve --model CKPT [--host 127.0.0.1] [--port 8080]`:
 * the translation server (serve/server.h) until SIGTERM or SIGINT, which
 * stop it gracefully (requests already received are answered first).
 *
 * Signals are blocked in every thread before any is created, and the main
 * thread waits for them with sigwait: no handler runs inside a library call.
 * After the first, a thread waits for a second one and exits at once (the
 * drain may take up to --drain-timeout; a user pressing Ctrl-C again means
 * now).
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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
            "  --model FILE         checkpoint or exported model file to load (required)\n"
            "  --api-key KEY        require this key (api_key field or 'Authorization: Bearer KEY');\n"
            "                       shown by ps: prefer --api-key-file or PROJMT_API_KEY\n\n"
            "The server's settings below are also config keys (--config FILE, --dump-config).\n\n");
    pmt_config_print_help(out, "translate,serve");
}

/* Reads the API key from --api-key, --api-key-file or PROJMT_API_KEY (in
 * that order of preference; the first two exclude each other) into key.
 * 0 with key "" when none is given; -1 with err. */
static int read_api_key(const char *arg, const char *file, char *key, size_t keylen, char *err, size_t errlen) {
    key[0] = '\0';
    if (arg && file[0]) {
        snprintf(err, errlen, "give the API key once: --api-key or --api-key-file, not both");
        return -1;
    }
    const char *env = getenv("PROJMT_API_KEY");
    if (file[0]) {
        FILE *f = fopen(file, "r");
        if (!f) {
            snprintf(err, errlen, "cannot read the API key file '%s': %s", file, strerror(errno));
            return -1;
        }
        const int got = fgets(key, (int)keylen, f) != NULL;
        fclose(f);
        key[got ? strcspn(key, "\r\n") : 0] = '\0';
        if (!key[0]) {
            snprintf(err, errlen, "the API key file '%s' has an empty first line", file);
            return -1;
        }
    } else if (arg || env) {
        snprintf(key, keylen, "%s", arg ? arg : env);
        if (!key[0]) {
            snprintf(err, errlen, "%s must not be empty", arg ? "--api-key" : "PROJMT_API_KEY");
            return -1;
        }
    }
    return 0;
}

/* Waits for a second stop signal and exits at once, whatever the drain is doing. */
static void *exit_on_second_signal(void *signals) {
    int sig = 0;
    sigwait(signals, &sig);
    static const char message[] = "projmt serve: second signal, exiting without waiting for the drain\n";
    ssize_t written = write(STDERR_FILENO, message, sizeof message - 1);
    (void)written;
    _exit(128 + sig);
}

int cmd_serve(int argc, char **argv) {
    static const char *const extra[] = {"api-key=", NULL};
    const char *val[1];
    pmt_config cfg;
    char err[PMT_PATH_MAX + 512];
    int dump = 0;
    int parsed = cmd_parse_args("serve", argc, argv, extra, val, usage, &cfg, &dump);
    if (parsed != CMD_CONTINUE) return parsed;
    if (dump) { pmt_config_dump(&cfg, stdout); return 0; }
    if (!cfg.model[0]) {
        fprintf(stderr, "projmt serve: --model FILE is required (see --help)\n");
        return 2;
    }
    char api_key[4096];
    if (read_api_key(val[0], cfg.api_key_file, api_key, sizeof api_key, err, sizeof err) != 0) {
        fprintf(stderr, "projmt serve: %s\n", err);
        return 2;
    }
    if (val[0])
        fprintf(stderr, "projmt serve: warning: --api-key is visible to every user of this machine (ps); "
                        "prefer --api-key-file or PROJMT_API_KEY\n");
    pmt_serve_options opt = {
        .model_path = cfg.model,
        .host = cfg.host,
        .port = cfg.port,
        .api_key = api_key[0] ? api_key : NULL,
        .card_path = cfg.card[0] ? cfg.card : NULL,
        .max_batch = cfg.max_batch,
        .max_wait_ms = cfg.max_wait_ms,
        .timeout_s = cfg.timeout,
        .request_timeout_s = cfg.request_timeout,
        .drain_timeout_s = cfg.drain_timeout,
        .max_connections = cfg.max_connections,
        .max_connections_per_ip = cfg.max_connections_per_ip,
        .threads = cfg.threads,
        .limits = {.max_beam = cfg.max_beam,
                   .max_sentences = cfg.max_sentences,
                   .max_chars = cfg.max_chars,
                   .split_sentences = cfg.split_sentences,
                   .max_body = (size_t)cfg.max_body,
                   .default_beam = cfg.beam_size},
    };
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
    cmd_note_compute("serve", &server.tr.model);
    const int ipv6 = strchr(opt.host, ':') != NULL;
    fprintf(stderr, "projmt serve: listening on http://%s%s%s:%d/ (model %s, %zu parameters, max batch %d, max wait %d ms)\n",
            ipv6 ? "[" : "", opt.host, ipv6 ? "]" : "", server.port, opt.model_path, server.tr.model.n_params,
            opt.max_batch, opt.max_wait_ms);
    fflush(stderr);
    int sig = 0;
    sigwait(&stop_signals, &sig);
    fprintf(stderr, "projmt serve: %s received, answering the requests in flight (at most %d s), then stopping\n",
            sig == SIGTERM ? "SIGTERM" : "SIGINT", opt.drain_timeout_s);
    fflush(stderr);
    pthread_t second;
    if (pthread_create(&second, NULL, exit_on_second_signal, &stop_signals) == 0) pthread_detach(second);
    const long sentences = pmt_server_stop(&server);
    fprintf(stderr, "projmt serve: stopped (%ld sentences translated)\n", sentences);
    return 0;
}

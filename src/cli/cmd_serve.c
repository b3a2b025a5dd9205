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
            "  --model FILE         checkpoint to load (required)\n"
            "  --host ADDR          address to bind (default 127.0.0.1; 0.0.0.0 = every interface)\n"
            "  --port N             port (default 8080; 0 = any free port, printed at start)\n"
            "  --api-key KEY        require this key (api_key field or 'Authorization: Bearer KEY');\n"
            "                       shown by ps: prefer --api-key-file or PROJMT_API_KEY\n"
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
    pmt_config_print_help(out, "translate,serve");
}

/* The command's own integer options: name, index in val[], default and range. */
typedef struct { const char *flag; int index, fallback, min, max; } int_option;

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
    static const char *const extra[] = {"host=", "port=", "api-key=", "card=", "max-batch=", "max-wait-ms=",
                                        "max-beam=", "max-sentences=", "max-chars=", "max-body=", "timeout=",
                                        "max-connections=", NULL};
    const char *val[12];
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
    enum { PORT, MAX_BATCH, MAX_WAIT_MS, MAX_BEAM, MAX_SENTENCES, MAX_CHARS, MAX_BODY, TIMEOUT, MAX_CONNECTIONS,
           N_INT_OPTIONS };
    /* Ranges: a value outside is refused, never wrapped into another one. */
    static const int_option int_options[N_INT_OPTIONS] = {
        [PORT] = {"--port", 1, 8080, 0, 65535},
        [MAX_BATCH] = {"--max-batch", 4, 32, 1, 4096},
        [MAX_WAIT_MS] = {"--max-wait-ms", 5, 5, 0, 60000},
        [MAX_BEAM] = {"--max-beam", 6, 8, 1, 256},
        [MAX_SENTENCES] = {"--max-sentences", 7, 128, 1, 1 << 20},
        [MAX_CHARS] = {"--max-chars", 8, 1000, 1, 1 << 24},
        [MAX_BODY] = {"--max-body", 9, 65536, 16, 1 << 30},
        [TIMEOUT] = {"--timeout", 10, 10, 1, 86400},
        [MAX_CONNECTIONS] = {"--max-connections", 11, 256, 1, 1 << 16},
    };
    int num[N_INT_OPTIONS];
    for (int i = 0; i < N_INT_OPTIONS; i++) {
        const int_option *o = &int_options[i];
        num[i] = o->fallback;
        if (val[o->index] && pmt_parse_int_option(o->flag, val[o->index], o->min, o->max, &num[i], err, sizeof err) != 0) {
            fprintf(stderr, "projmt serve: %s\n", err);
            return 2;
        }
    }
    /* The serve settings of the config table (a --config file may set them too). */
    const struct { const char *name; int value, min, max; } settings[] = {
        {"drain_timeout", cfg.drain_timeout, 0, 86400},
        {"request_timeout", cfg.request_timeout, 1, 86400},
        {"max_connections_per_ip", cfg.max_connections_per_ip, 1, 1 << 16},
    };
    for (size_t i = 0; i < sizeof settings / sizeof settings[0]; i++)
        if (settings[i].value < settings[i].min || settings[i].value > settings[i].max) {
            fprintf(stderr, "projmt serve: %s must be from %d to %d (got %d)\n", settings[i].name, settings[i].min,
                    settings[i].max, settings[i].value);
            return 2;
        }
    char api_key[4096];
    if (read_api_key(val[2], cfg.api_key_file, api_key, sizeof api_key, err, sizeof err) != 0) {
        fprintf(stderr, "projmt serve: %s\n", err);
        return 2;
    }
    if (val[2])
        fprintf(stderr, "projmt serve: warning: --api-key is visible to every user of this machine (ps); "
                        "prefer --api-key-file or PROJMT_API_KEY\n");
    pmt_serve_options opt = {
        .model_path = cfg.model,
        .host = val[0] ? val[0] : "127.0.0.1",
        .port = num[PORT],
        .api_key = api_key[0] ? api_key : NULL,
        .card_path = val[3],
        .max_batch = num[MAX_BATCH],
        .max_wait_ms = num[MAX_WAIT_MS],
        .timeout_s = num[TIMEOUT],
        .request_timeout_s = cfg.request_timeout,
        .drain_timeout_s = cfg.drain_timeout,
        .max_connections = num[MAX_CONNECTIONS],
        .max_connections_per_ip = cfg.max_connections_per_ip,
        .threads = cfg.threads,
        .limits = {.max_beam = num[MAX_BEAM],
                   .max_sentences = num[MAX_SENTENCES],
                   .max_chars = num[MAX_CHARS],
                   .max_body = (size_t)num[MAX_BODY],
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

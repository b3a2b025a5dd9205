/*
 * fuzz_request.c — the LibreTranslate request parser of `projmt serve`
 * (serve/request.c) on arbitrary bodies: pmt_serve_parse_json, then
 * pmt_serve_request_from_json under small limits, so mutations reach the
 * limits on sentences, characters, beam and alternatives.
 *
 * Property: the parser answers 0 or an HTTP status (400, 500) with a
 * message; the message is well-formed UTF-8 that jansson accepts (the
 * server sends it as {"error": message}, and a message jansson refuses
 * drops the connection with no answer); an accepted request's lines are
 * well-formed UTF-8 without '\n', within the character limit, and the text
 * boundaries cover them in order (q may be an empty array: no lines).
 */
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "core/utf8.h"
#include "fuzz_common.h"
#include "serve/request.h"

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    json_object_seed(1);   /* jansson's hash seed: the same input takes the same path */
    return 0;
}

static void check_error_text(const char *err) {
    if (!err[0] || !pmt_utf8_valid(err, strlen(err))) abort();
    json_t *answer = json_pack("{s:s}", "error", err);
    if (!answer) abort();
    json_decref(answer);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const pmt_serve_limits limits = {.max_body = 4096, .max_sentences = 4, .max_chars = 40, .max_beam = 4,
                                     .default_beam = 2, .split_sentences = 1};
    char err[512] = "";
    json_t *obj = NULL;
    int replaced = 0;
    int status = pmt_serve_parse_json((const char *)data, size, &obj, &replaced, err, sizeof err);
    if (status) {
        if (status != 400 && status != 500) abort();
        check_error_text(err);
        return 0;
    }
    pmt_serve_request req;
    status = pmt_serve_request_from_json(obj, &limits, replaced, &req, err, sizeof err);
    json_decref(obj);
    if (status) {
        if (status != 400 && status != 500) abort();
        check_error_text(err);
    } else {
        if (req.n_texts < 0 || req.n_lines > limits.max_sentences || req.first_line[0] != 0 ||
            req.first_line[req.n_texts] != req.n_lines || req.beam_size < req.alternatives + 1 ||
            req.beam_size > limits.max_beam)
            abort();
        for (int i = 0; i < req.n_texts; i++) {
            if (req.first_line[i] > req.first_line[i + 1]) abort();
            /* A text's first sentence follows nothing; the others a line break or a space. */
            for (int l = req.first_line[i]; l < req.first_line[i + 1]; l++)
                if (l == req.first_line[i] ? req.joiner[l] != '\0' : req.joiner[l] != '\n' && req.joiner[l] != ' ')
                    abort();
        }
        for (int l = 0; l < req.n_lines; l++) {
            const char *line = req.lines[l];
            size_t chars = 0;
            if (strchr(line, '\n') || (line[0] && !pmt_utf8_valid(line, strlen(line)))) abort();
            for (const char *p = line; *p; chars++) pmt_utf8_next(&p);
            if (chars > (size_t)limits.max_chars) abort();
        }
    }
    pmt_serve_request_free(&req);
    return 0;
}

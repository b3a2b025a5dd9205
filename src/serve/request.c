/*
 * request.c — see request.h. jansson parses; this file only checks fields
 * and applies the limits, with LibreTranslate's error wording where it has one.
 */
#include "serve/request.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/utf8.h"
#include "translate/segment.h"

/* Ends well-formed UTF-8 text cut short at its last whole character. */
static void end_at_character(char *text) {
    size_t n = 0, len = strlen(text), step;
    while (n < len && (step = pmt_utf8_decode(text + n, len - n, NULL)) > 0) n += step;
    text[n] = '\0';
}

int pmt_serve_parse_json(const char *body, size_t len, json_t **obj, int *replaced, char *err, size_t errlen) {
    *obj = NULL;
    char *clean = malloc(3 * len + 1);
    if (!clean) {
        snprintf(err, errlen, "out of memory");
        return 500;
    }
    /* Raw invalid bytes inside strings become U+FFFD (jansson refuses
     * invalid UTF-8); outside strings they still make the JSON invalid. */
    *replaced = pmt_utf8_sanitize(body, len, clean);
    json_error_t jerr;
    json_t *root = json_loads(clean, 0, &jerr);
    free(clean);
    if (!root) {
        /* jansson's text quotes the bytes near the error and may end inside
         * a character ("invalid escape near '"a\\<first byte of U+FFFD>'"). */
        char text[3 * sizeof jerr.text + 1];
        pmt_utf8_sanitize(jerr.text, strlen(jerr.text), text);
        snprintf(err, errlen, "Invalid request: bad JSON at line %d, column %d: %s", jerr.line, jerr.column, text);
        end_at_character(err);   /* snprintf may have cut the message inside a character */
        return 400;
    }
    if (!json_is_object(root)) {
        json_decref(root);
        snprintf(err, errlen, "Invalid request: the body must be a JSON object");
        return 400;
    }
    *obj = root;
    return 0;
}

/* Integer field: a JSON integer or a decimal string (form values, and
 * clients that send numbers as strings). 1 found, 0 absent, -1 malformed. */
static int get_int(const json_t *obj, const char *key, long *value) {
    const json_t *v = json_object_get(obj, key);
    if (!v || json_is_null(v)) return 0;
    if (json_is_integer(v)) {
        *value = (long)json_integer_value(v);
        return 1;
    }
    if (json_is_string(v)) {
        const char *s = json_string_value(v);
        char *end;
        long x = strtol(s, &end, 10);
        if (end != s && *end == '\0') {
            *value = x;
            return 1;
        }
    }
    return -1;
}

/* Boolean field: JSON true/false or the strings "true"/"false"/"1"/"0". */
static int get_bool(const json_t *obj, const char *key, int *value) {
    const json_t *v = json_object_get(obj, key);
    if (!v || json_is_null(v)) return 0;
    if (json_is_boolean(v)) {
        *value = json_is_true(v);
        return 1;
    }
    const char *s = json_string_value(v);
    if (s && (!strcmp(s, "true") || !strcmp(s, "1"))) { *value = 1; return 1; }
    if (s && (!strcmp(s, "false") || !strcmp(s, "0"))) { *value = 0; return 1; }
    return -1;
}

static size_t code_points(const char *s, size_t n) {
    size_t count = 0;
    for (const char *p = s; p < s + n; count++) pmt_utf8_next(&p);
    return count;
}

/* Appends sentence s[0..len) to req->lines, joined after what precedes it
 * by joiner. 0, or 400 / 500 with err. */
static int add_sentence(pmt_serve_request *req, const char *s, size_t len, char joiner, int cap,
                        const pmt_serve_limits *lim, char *err, size_t errlen) {
    if (req->n_lines >= cap) {
        snprintf(err, errlen, "Invalid request: more than %d sentences in one request", lim->max_sentences);
        return 400;
    }
    size_t chars = code_points(s, len);
    if (chars > (size_t)lim->max_chars) {
        snprintf(err, errlen, "Invalid request: a sentence of %zu characters exceeds the limit of %d", chars,
                 lim->max_chars);
        return 400;
    }
    char *line = strndup(s, len);
    if (!line) {
        snprintf(err, errlen, "out of memory");
        return 500;
    }
    req->joiner[req->n_lines] = joiner;
    req->lines[req->n_lines++] = line;
    return 0;
}

/* Splits text (valid UTF-8) at '\n' into lines (a trailing '\r' is
 * dropped) and, with lim->split_sentences, each line into its sentences,
 * appended to req->lines. 0, or 400 / 500 with err. */
static int add_lines(pmt_serve_request *req, const char *text, int cap, const pmt_serve_limits *lim, char *err,
                     size_t errlen) {
    char joiner = '\0';
    for (const char *p = text;; joiner = '\n') {
        const char *nl = strchr(p, '\n');
        size_t len = nl ? (size_t)(nl - p) : strlen(p);
        if (len > 0 && p[len - 1] == '\r') len--;
        const int count = lim->split_sentences ? pmt_sentence_split(p, len, NULL, 0) : 0;
        int status = 0;
        if (count <= 1) {
            /* One sentence, or none: the line as it is (a blank line stays). */
            status = add_sentence(req, p, len, joiner, cap, lim, err, errlen);
        } else {
            pmt_span *spans = malloc((size_t)count * sizeof *spans);
            if (!spans) {
                snprintf(err, errlen, "out of memory");
                return 500;
            }
            pmt_sentence_split(p, len, spans, count);
            for (int k = 0; !status && k < count; k++)
                status = add_sentence(req, p + spans[k].start, spans[k].end - spans[k].start, k == 0 ? joiner : ' ',
                                      cap, lim, err, errlen);
            free(spans);
        }
        if (status) return status;
        if (!nl) return 0;
        p = nl + 1;
    }
}

/* Client text quoted in an error message: at most QUOTE_BYTES bytes of it,
 * cut before a character, never inside one (a cut inside a character makes
 * the message invalid UTF-8, which jansson refuses to send). */
enum { QUOTE_BYTES = 16 };
static const char *quote(const char *s, char out[QUOTE_BYTES + 1]) {
    size_t n = 0, len = strlen(s);
    while (n < len) {
        size_t step = pmt_utf8_decode(s + n, len - n, NULL);
        if (step == 0 || n + step > QUOTE_BYTES) break;
        n += step;
    }
    memcpy(out, s, n);
    out[n] = '\0';
    return out;
}

static int check_language(const json_t *obj, const char *key, char *err, size_t errlen, const char **value) {
    const json_t *v = json_object_get(obj, key);
    *value = json_string_value(v);
    if (!*value) {
        snprintf(err, errlen, "Invalid request: missing %s parameter", key);
        return 400;
    }
    return 0;
}

int pmt_serve_request_from_json(const json_t *obj, const pmt_serve_limits *lim, int replaced,
                                pmt_serve_request *req, char *err, size_t errlen) {
    memset(req, 0, sizeof *req);
    req->replaced = replaced;
    const json_t *q = json_object_get(obj, "q");
    if (!q || !(json_is_string(q) || json_is_array(q))) {
        snprintf(err, errlen, q ? "Invalid request: q must be a string or an array of strings"
                                : "Invalid request: missing q parameter");
        return 400;
    }
    const char *source, *target, *format = "text";
    if (check_language(obj, "source", err, errlen, &source) || check_language(obj, "target", err, errlen, &target))
        return 400;
    req->auto_source = !strcmp(source, "auto");
    if (!(req->auto_source || !strcmp(source, "en")) || strcmp(target, "es")) {
        char source_quote[QUOTE_BYTES + 1], target_quote[QUOTE_BYTES + 1];
        snprintf(err, errlen, "Invalid request: language pair %s -> %s is not supported (this model translates en -> es)",
                 quote(source, source_quote), quote(target, target_quote));
        return 400;
    }
    const json_t *fmt = json_object_get(obj, "format");
    if (fmt && !json_is_null(fmt) && !(format = json_string_value(fmt))) format = "";
    if (strcmp(format, "text")) {
        char format_quote[QUOTE_BYTES + 1];
        snprintf(err, errlen, "Invalid request: format '%s' is not supported (only text)", quote(format, format_quote));
        return 400;
    }
    long alternatives = 0, beam = lim->default_beam;
    int found = get_int(obj, "alternatives", &alternatives);
    if (found < 0 || alternatives < 0 || alternatives > lim->max_beam - 1) {
        snprintf(err, errlen, "Invalid request: alternatives must be an integer in [0, %d]", lim->max_beam - 1);
        return 400;
    }
    found = get_int(obj, "beam_size", &beam);
    if (found < 0 || beam < 1 || beam > lim->max_beam) {
        snprintf(err, errlen, "Invalid request: beam_size must be an integer in [1, %d]", lim->max_beam);
        return 400;
    }
    if (beam < alternatives + 1) beam = alternatives + 1;
    req->beam_size = (int)beam;
    req->alternatives = (int)alternatives;
    if (get_bool(obj, "attention", &req->attention) < 0) {
        snprintf(err, errlen, "Invalid request: attention must be true or false");
        return 400;
    }
    req->q_is_array = json_is_array(q);
    if (req->q_is_array && req->attention) {
        snprintf(err, errlen, "Invalid request: attention needs q to be one string");
        return 400;
    }
    req->n_texts = req->q_is_array ? (int)json_array_size(q) : 1;
    if (req->n_texts > lim->max_sentences) {
        snprintf(err, errlen, "Invalid request: %d texts exceed the limit of %d sentences per request", req->n_texts,
                 lim->max_sentences);
        return 400;
    }
    req->lines = calloc((size_t)lim->max_sentences, sizeof *req->lines);
    req->joiner = calloc((size_t)lim->max_sentences, sizeof *req->joiner);
    req->first_line = calloc((size_t)req->n_texts + 1, sizeof *req->first_line);
    if (!req->lines || !req->joiner || !req->first_line) {
        snprintf(err, errlen, "out of memory");
        return 500;
    }
    for (int i = 0; i < req->n_texts; i++) {
        const char *text = json_string_value(req->q_is_array ? json_array_get(q, (size_t)i) : q);
        if (!text) {
            snprintf(err, errlen, "Invalid request: q[%d] is not a string", i);
            return 400;
        }
        req->first_line[i] = req->n_lines;
        int status = add_lines(req, text, lim->max_sentences, lim, err, errlen);
        if (status) return status;
    }
    req->first_line[req->n_texts] = req->n_lines;
    return 0;
}

void pmt_serve_request_free(pmt_serve_request *req) {
    for (int i = 0; req->lines && i < req->n_lines; i++) free(req->lines[i]);
    free(req->lines);
    free(req->joiner);
    free(req->first_line);
    memset(req, 0, sizeof *req);
}

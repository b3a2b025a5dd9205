/*
 * request.h — a POST /translate request, LibreTranslate's shape, parsed and
 * checked against the server's limits.
 *
 * Fields (JSON body, or form-encoded where every value is a string):
 *   q            string, or array of strings (form: the key repeated)
 *   source       "en" (or "auto", answered as en: the only source language)
 *   target       "es"
 *   format       "text" (the default; "html" is refused)
 *   alternatives extra hypotheses per text, 0..max_beam-1 (default 0)
 *   beam_size    projmt: 1..max_beam (default the model's; raised to
 *                alternatives+1 when smaller)
 *   attention    projmt: true adds the last decoder layer's cross-attention (q must be
 *                one string), one block per sentence the server cut the text into:
 *                  "attention": {"layer": L, "site": "decoder_cross", "sentences": [
 *                    {"source": [pieces..., "</s>"], "target": [pieces..., "</s>"],
 *                     "weights": [head][target row][source column]}, ...]}
 *                in the text's order; an empty sentence has no block. Weights are
 *                rounded to 4 decimals (trailing zeros dropped); each row sums to 1. Each block is its
 *                sentence's own matrix: a text's blocks are never joined into one
 *                (that matrix grows with the square of the text: 40 long sentences
 *                once gave a 44 MB answer and 800 MB of server memory).
 *                The cells (heads x target rows x source columns) summed over the
 *                sentences may be at most PMT_SERVE_MAX_ATTENTION_CELLS; a request
 *                past it gets 413 with an error naming the limit (send fewer
 *                sentences, or ask without attention). Without attention the
 *                answer is LibreTranslate's, unchanged.
 *   api_key      LibreTranslate's key field (also "Authorization: Bearer KEY"),
 *                checked by the server before this parser (server.h)
 * Each text is split at '\n' into lines and, with split_sentences (the
 * default), each line into sentences (translate/segment.h); they are
 * translated as one batch and joined again, with '\n' between lines and a
 * space between the sentences of one. The limits count these sentences.
 *
 * Ownership: pmt_serve_request owns its strings (pmt_serve_request_free).
 */
#ifndef PROJMT_SERVE_REQUEST_H
#define PROJMT_SERVE_REQUEST_H

#include <stddef.h>

#include <jansson.h>

/* The most attention cells one request may get. At most 7 bytes a cell in
 * the answer ("0.1234,"), written as text (a buffer that doubles) beside
 * 4-byte floats, it bounds an answer with attention to about 3.7 MB and
 * the memory it takes to build to about 13 MB; 40 long sentences (7 KB of
 * English, about 30 pieces each) fit, a 64 KB body of them does not. */
enum { PMT_SERVE_MAX_ATTENTION_CELLS = 524288 };

typedef struct pmt_serve_limits {
    size_t max_body;             /* bytes of a request body (413 above) */
    int max_sentences;           /* sentences per request (400 above) */
    int max_chars;               /* characters (code points) per sentence (400 above) */
    int split_sentences;         /* 1: lines cut into sentences; 0: a line is one sentence */
    int max_beam;                /* largest beam_size */
    int default_beam;
} pmt_serve_limits;

typedef struct pmt_serve_request {
    int n_texts;                 /* q entries */
    int q_is_array;
    int auto_source;             /* source was "auto" */
    int n_lines;                 /* sentences over all texts */
    char **lines;                /* [n_lines] valid UTF-8, no '\n' */
    char *joiner;                /* [n_lines] what goes before sentence l when its text is joined: '\n' after
                                  * a line break, ' ' inside a line ('\0' for a text's first) */
    int *first_line;             /* [n_texts + 1] text i is lines first_line[i]..first_line[i+1]-1 */
    int beam_size, alternatives, attention;
    int replaced;                /* invalid UTF-8 bytes replaced by U+FFFD */
} pmt_serve_request;

/* Replaces invalid UTF-8 in body[0..len) and parses it as a JSON object into
 * *obj (new reference). Returns 0, or 400 with err. *replaced counts the
 * replaced bytes. Out of memory gives 500. */
int pmt_serve_parse_json(const char *body, size_t len, json_t **obj, int *replaced, char *err, size_t errlen);

/* Checks the fields of obj (from JSON or a form) and fills req. Returns 0,
 * or the HTTP status (400; 500 when out of memory) with err. */
int pmt_serve_request_from_json(const json_t *obj, const pmt_serve_limits *lim, int replaced,
                                pmt_serve_request *req, char *err, size_t errlen);
void pmt_serve_request_free(pmt_serve_request *req);

#endif

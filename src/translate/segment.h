/*
 * segment.h — English text cut into sentences before translation.
 *
 * Why: the models learn from Tatoeba, one or two short sentences a line, so
 * a paragraph given as one input is far outside what they saw: they drop
 * whole sentences of it ("I like cats. Where is the station? Tom went home
 * early because ..." came back as two garbled sentences). LibreTranslate
 * (argos-translate) cuts its input into sentences for the same reason, and
 * `projmt serve`, which speaks its API, does too; `projmt translate
 * --split-sentences` offers it for pipes (docs/serve.md has the figures).
 *
 * The rule is Moses' split-sentences.perl in small: a sentence ends after
 * a run of . ? ! or … and any closing quotes or brackets, where white space
 * follows and the next word starts with an upper-case letter, a digit, or an
 * opening quote, bracket, ¿ or ¡ before one. A full stop does not end a
 * sentence after a known abbreviation (Mr. Dr. St. ...), after a single
 * capital (an initial: "J. Smith"), after a word with a full stop inside
 * ("U.S.", "e.g."), or after No./Art./pp. and the like before a number. No
 * other rule is guessed at; a text that breaks none comes back whole.
 */
#ifndef PROJMT_SEGMENT_H
#define PROJMT_SEGMENT_H

#include <stddef.h>

/* A sentence: bytes [start, end) of the text, without the white space
 * around it (end > start). */
typedef struct pmt_span {
    size_t start, end;
} pmt_span;

/* The sentences of text[0..len) (UTF-8; white space is ASCII's), in order:
 * spans[0..min(count, max_spans)) are filled and the count is returned,
 * so a call with max_spans 0 sizes the array. 0 for a text of white space
 * only. */
int pmt_sentence_split(const char *text, size_t len, pmt_span *spans, int max_spans);

#endif

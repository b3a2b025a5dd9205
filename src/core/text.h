/*
 * text.h — small text helpers for corpus cleaning (used by prepare); UTF-8
 * validation is core/utf8.h.
 *
 * Why here and not in prepare.c: they are pure functions over byte strings,
 * testable on their own, and the translator's input path can reuse them to
 * normalize user text the same way the training data was normalized.
 *
 * Ownership: every function works on caller-owned memory; nothing allocates.
 */
#ifndef PROJMT_TEXT_H
#define PROJMT_TEXT_H

#include <stddef.h>

/* Normalizes whitespace in place: trims both ends and turns every run of
 * whitespace (ASCII space/tab/CR/LF/VT/FF, NO-BREAK SPACE, the U+2000..U+200A
 * spaces, U+202F, U+205F, U+3000) into one ASCII space. s holds valid
 * UTF-8 of length n and s[n] must be writable: the result is NUL-terminated
 * there or earlier. Returns the new length. */
size_t pmt_text_normalize_space(char *s, size_t n);

/* Number of space-separated words in whitespace-normalized text. */
int pmt_text_word_count(const char *s);

#endif

/*
 * utf8.h — the one UTF-8 decoder of projmt, and what is built on it:
 * validation (prepare drops ill-formed lines), sanitizing (the translator
 * replaces bad bytes by U+FFFD) and code-point iteration (the metrics'
 * tokenizers and chrF).
 *
 * Well-formed means Unicode's Table 3-7: no overlong forms, no surrogates
 * (U+D800..DFFF), nothing above U+10FFFF, no truncated sequence. NUL is
 * treated as ill-formed too: no projmt text may contain it.
 *
 * Ownership: every function works on caller-owned memory; nothing allocates.
 */
#ifndef PROJMT_UTF8_H
#define PROJMT_UTF8_H

#include <stddef.h>
#include <stdint.h>

/* Length (1..4) of the well-formed sequence at the start of s[0..n), with
 * its code point in *cp (may be NULL); 0 when s does not start with one.
 * Reads no byte past the first one that breaks the sequence, so a
 * NUL-terminated string may pass its strnlen(s, 4) as n. */
size_t pmt_utf8_decode(const char *s, size_t n, uint32_t *cp);

/* 1 if s[0..n) is well-formed UTF-8 without NUL bytes, else 0. */
int pmt_utf8_valid(const char *s, size_t n);

/* Copies src[0..n) into dst replacing every byte that does not start or
 * belong to a well-formed sequence (and NUL) by U+FFFD; dst needs 3n+1
 * bytes and is NUL-terminated. Returns the number of replacements. */
int pmt_utf8_sanitize(const char *src, size_t n, char *dst);

/* Decodes the code point at *p and advances *p past it. A byte that does
 * not start a well-formed sequence decodes to 0xDC00 + byte (one byte, as
 * Python's surrogateescape), so any input gets a deterministic result.
 * Must not be called at the terminating NUL. */
uint32_t pmt_utf8_next(const char **p);

#endif

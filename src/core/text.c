/*
 * text.c — see text.h. Byte-level code: cleaning runs over every corpus line,
 * so it avoids locale-dependent libc calls (isspace, mbrtowc) whose answers
 * would change with the user's environment.
 */
#include "core/text.h"

#include <stdint.h>

/* Length of the UTF-8 sequence starting at s[i] if well formed, else 0. */
static size_t utf8_sequence_length(const unsigned char *s, size_t n, size_t i) {
    unsigned char c = s[i];
    if (c == 0) return 0;
    if (c < 0x80) return 1;
    size_t len;
    uint32_t cp;
    if (c >= 0xC2 && c <= 0xDF) { len = 2; cp = c & 0x1F; }
    else if (c >= 0xE0 && c <= 0xEF) { len = 3; cp = c & 0x0F; }
    else if (c >= 0xF0 && c <= 0xF4) { len = 4; cp = c & 0x07; }
    else return 0;
    if (i + len > n) return 0;
    for (size_t k = 1; k < len; k++) {
        if ((s[i + k] & 0xC0) != 0x80) return 0;
        cp = (cp << 6) | (s[i + k] & 0x3F);
    }
    if ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10FFFF))) return 0;
    if (cp >= 0xD800 && cp <= 0xDFFF) return 0;
    return len;
}

int pmt_utf8_valid(const char *s, size_t n) {
    const unsigned char *u = (const unsigned char *)s;
    for (size_t i = 0; i < n;) {
        size_t len = utf8_sequence_length(u, n, i);
        if (len == 0) return 0;
        i += len;
    }
    return 1;
}

/* Byte length of the whitespace character at s[i] (0 if none). */
static size_t whitespace_length(const unsigned char *s, size_t n, size_t i) {
    unsigned char c = s[i];
    if (c == ' ' || (c >= '\t' && c <= '\r')) return 1;
    if (c == 0xC2 && i + 1 < n && s[i + 1] == 0xA0) return 2;                   /* U+00A0 */
    if (c == 0xE2 && i + 2 < n) {
        unsigned char b1 = s[i + 1], b2 = s[i + 2];
        if (b1 == 0x80 && (b2 <= 0x8A || b2 == 0xAF)) return 3;                /* U+2000..200A, U+202F */
        if (b1 == 0x81 && b2 == 0x9F) return 3;                                /* U+205F */
    }
    if (c == 0xE3 && i + 2 < n && s[i + 1] == 0x80 && s[i + 2] == 0x80) return 3; /* U+3000 */
    return 0;
}

size_t pmt_text_normalize_space(char *s, size_t n) {
    unsigned char *u = (unsigned char *)s;
    size_t out = 0;
    int pending_space = 0;
    for (size_t i = 0; i < n;) {
        size_t ws = whitespace_length(u, n, i);
        if (ws) { pending_space = out > 0; i += ws; continue; }
        if (pending_space) { u[out++] = ' '; pending_space = 0; }
        u[out++] = u[i++];
    }
    u[out] = '\0';
    return out;
}

int pmt_text_word_count(const char *s) {
    int words = 0, in_word = 0;
    for (; *s; s++) {
        if (*s == ' ') in_word = 0;
        else if (!in_word) { in_word = 1; words++; }
    }
    return words;
}

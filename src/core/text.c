/*
 * text.c — see text.h. Byte-level code: cleaning runs over every corpus line,
 * so it avoids locale-dependent libc calls (isspace, mbrtowc) whose answers
 * would change with the user's environment.
 */
#include "core/text.h"

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

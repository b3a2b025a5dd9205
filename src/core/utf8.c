/*
 * utf8.c — see utf8.h. The decoder follows Unicode's Table 3-7 of
 * well-formed byte sequences: the lead byte fixes the length and the range
 * of the second byte (which excludes overlongs, surrogates and code points
 * above U+10FFFF); later bytes are plain continuation bytes 80..BF.
 */
#include "core/utf8.h"

#include <string.h>

size_t pmt_utf8_decode(const char *s, size_t n, uint32_t *cp) {
    const unsigned char *u = (const unsigned char *)s;
    if (n == 0 || u[0] == 0) return 0;
    unsigned char c = u[0];
    if (c < 0x80) {
        if (cp) *cp = c;
        return 1;
    }
    size_t len;
    uint32_t v;
    unsigned char lo = 0x80, hi = 0xBF;   /* range of the second byte */
    if (c >= 0xC2 && c <= 0xDF) { len = 2; v = c & 0x1F; }
    else if (c >= 0xE0 && c <= 0xEF) { len = 3; v = c & 0x0F; if (c == 0xE0) lo = 0xA0; if (c == 0xED) hi = 0x9F; }
    else if (c >= 0xF0 && c <= 0xF4) { len = 4; v = c & 0x07; if (c == 0xF0) lo = 0x90; if (c == 0xF4) hi = 0x8F; }
    else return 0;
    for (size_t k = 1; k < len; k++) {
        if (k >= n || u[k] < lo || u[k] > hi) return 0;
        v = (v << 6) | (u[k] & 0x3F);
        lo = 0x80;
        hi = 0xBF;
    }
    if (cp) *cp = v;
    return len;
}

int pmt_utf8_valid(const char *s, size_t n) {
    for (size_t i = 0; i < n;) {
        size_t len = pmt_utf8_decode(s + i, n - i, NULL);
        if (len == 0) return 0;
        i += len;
    }
    return 1;
}

int pmt_utf8_sanitize(const char *src, size_t n, char *dst) {
    size_t o = 0;
    int replaced = 0;
    for (size_t i = 0; i < n;) {
        size_t len = pmt_utf8_decode(src + i, n - i, NULL);
        if (len) {
            memcpy(dst + o, src + i, len);
            o += len;
            i += len;
        } else {
            memcpy(dst + o, "\xEF\xBF\xBD", 3);   /* U+FFFD, one per bad byte */
            o += 3;
            i++;
            replaced++;
        }
    }
    dst[o] = '\0';
    return replaced;
}

uint32_t pmt_utf8_next(const char **p) {
    uint32_t cp;
    size_t len = pmt_utf8_decode(*p, strnlen(*p, 4), &cp);
    if (len == 0) {
        cp = 0xDC00u + (unsigned char)**p;
        len = 1;
    }
    *p += len;
    return cp;
}

/*
 * test_text.c — the cleaning helpers behind prepare: UTF-8 validation
 * (overlongs, surrogates, truncation, NUL) and the one decoder under it,
 * validation, sanitizing and code-point iteration; whitespace normalization
 * (ASCII and Unicode spaces, trimming), word counts, and the string map used
 * for dedup and grouping (growth keeps every key, values stick).
 */
#include <string.h>

#include "core/strmap.h"
#include "testutil.h"
#include "core/text.h"
#include "core/utf8.h"

static int valid(const char *s) { return pmt_utf8_valid(s, strlen(s)); }

static void test_utf8(void) {
    CHECK(valid("plain ASCII"));
    CHECK(valid("¿Dónde está el niño? ¡Sí! año"));
    CHECK(valid("€ 中文 😀"));
    CHECK(valid(""));
    CHECK(!valid("\xff"));
    CHECK(!valid("caf\xe9"));                 /* Latin-1 é */
    CHECK(!valid("\xc3"));                    /* truncated 2-byte sequence */
    CHECK(!valid("\xe2\x82"));                /* truncated 3-byte sequence */
    CHECK(!valid("\xc0\xaf"));                /* overlong '/' */
    CHECK(!valid("\xe0\x80\xaf"));            /* overlong, 3 bytes */
    CHECK(!valid("\xed\xa0\x80"));            /* UTF-16 surrogate */
    CHECK(!valid("\xf4\x90\x80\x80"));        /* above U+10FFFF */
    CHECK(!valid("\x80 continuation first"));
    CHECK(!pmt_utf8_valid("a\0b", 3));        /* NUL inside a line */
}

/* The one decoder: lengths and code points at the edges of Table 3-7; what
 * it rejects, validation, sanitizing and iteration reject alike. */
static void test_utf8_decoder(void) {
    static const struct { const char *s; size_t len; uint32_t cp; } ok[] = {
        {"A", 1, 0x41}, {"\x7f", 1, 0x7F}, {"\xc2\x80", 2, 0x80}, {"\xdf\xbf", 2, 0x7FF},
        {"\xe0\xa0\x80", 3, 0x800}, {"\xed\x9f\xbf", 3, 0xD7FF}, {"\xee\x80\x80", 3, 0xE000},
        {"\xef\xbf\xbf", 3, 0xFFFF}, {"\xf0\x90\x80\x80", 4, 0x10000}, {"\xf4\x8f\xbf\xbf", 4, 0x10FFFF},
    };
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        uint32_t cp = 0;
        size_t n = strlen(ok[i].s);
        CHECK_MSG(pmt_utf8_decode(ok[i].s, n, &cp) == ok[i].len && cp == ok[i].cp, "case %zu: cp %x", i, cp);
        CHECK(valid(ok[i].s));
        const char *p = ok[i].s;
        CHECK(pmt_utf8_next(&p) == ok[i].cp && p == ok[i].s + ok[i].len);
    }
    static const char *bad[] = {"\xc0\x80", "\xc1\xbf", "\xe0\x9f\xbf", "\xed\xa0\x80", "\xed\xbf\xbf",
                                "\xf0\x8f\xbf\xbf", "\xf4\x90\x80\x80", "\xf5\x80\x80\x80", "\x80", "\xbf",
                                "\xe2\x28\xa1", "\xf0\x9f\x98"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        size_t n = strlen(bad[i]);
        char out[32];
        CHECK_MSG(pmt_utf8_decode(bad[i], n, NULL) == 0, "bad case %zu decoded", i);
        CHECK(!valid(bad[i]));
        CHECK(pmt_utf8_sanitize(bad[i], n, out) >= 1);
        const char *p = bad[i];
        CHECK(pmt_utf8_next(&p) == 0xDC00u + (unsigned char)bad[i][0] && p == bad[i] + 1);
    }
    CHECK(pmt_utf8_decode("\xc3\xb1", 1, NULL) == 0);   /* n cuts the sequence */
    CHECK(pmt_utf8_decode("", 1, NULL) == 0);            /* NUL */
}

static void check_normalized(const char *input, const char *expected) {
    char buf[256];
    size_t n = strlen(input);
    memcpy(buf, input, n + 1);
    size_t len = pmt_text_normalize_space(buf, n);
    CHECK_MSG(len == strlen(expected) && strcmp(buf, expected) == 0, "normalize('%s') = '%s', want '%s'",
              input, buf, expected);
}

static void test_normalize(void) {
    check_normalized("  Hello   world  ", "Hello world");
    check_normalized("\tA\t\tB\r\n", "A B");
    check_normalized("no change", "no change");
    check_normalized("   ", "");
    check_normalized("", "");
    check_normalized("a\xc2\xa0" "b", "a b");                 /* NO-BREAK SPACE */
    check_normalized("\xe2\x80\xaf" "x \xe3\x80\x80 y", "x y"); /* U+202F, U+3000 */
    check_normalized("¿Qué\xe2\x80\x89tal?", "¿Qué tal?");     /* THIN SPACE */
    check_normalized("\xe2\x80\x8b", "\xe2\x80\x8b");           /* ZERO WIDTH SPACE is not whitespace */
    check_normalized("ñ \xc2\xa0 ñ", "ñ ñ");
}

static void test_word_count(void) {
    CHECK(pmt_text_word_count("") == 0);
    CHECK(pmt_text_word_count("one") == 1);
    CHECK(pmt_text_word_count("¿Dónde está el niño?") == 4);
}

static void test_strmap(void) {
    pmt_strmap m;
    CHECK(pmt_strmap_init(&m, 2) == 0);
    static char keys[1000][16];
    int inserted = 0;
    for (int i = 0; i < 1000; i++) {
        snprintf(keys[i], sizeof keys[i], "key-%d", i);
        int *v = pmt_strmap_get_or_insert(&m, keys[i], strlen(keys[i]), i, &inserted);
        CHECK(v && inserted && *v == i);
    }
    CHECK(m.count == 1000 && m.capacity >= 2000);
    int all_found = 1;
    for (int i = 0; i < 1000; i++) {
        char probe[16];
        snprintf(probe, sizeof probe, "key-%d", i);
        int *v = pmt_strmap_get_or_insert(&m, probe, strlen(probe), -1, &inserted);
        all_found &= v && !inserted && *v == i;
    }
    CHECK(all_found);
    CHECK(m.count == 1000);
    /* Length is part of the key: "key-1" and "key-10" prefix don't collide. */
    int *v = pmt_strmap_get_or_insert(&m, "key-10", 5, 77, &inserted);
    CHECK(v && !inserted && *v == 1);
    pmt_strmap_free(&m);
    CHECK(m.slots == NULL && m.count == 0);
}

int main(void) {
    test_utf8();
    test_utf8_decoder();
    test_normalize();
    test_word_count();
    test_strmap();
    return test_finish();
}

/*
 * segment.c — see segment.h. One pass over the bytes: at each run of
 * terminators, look back at the word it ends and ahead at the next one.
 */
#include "translate/segment.h"

#include <string.h>

static int is_space(unsigned char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }
static int is_upper_ascii(unsigned char c) { return c >= 'A' && c <= 'Z'; }
static int is_digit(unsigned char c) { return c >= '0' && c <= '9'; }

/* Abbreviations after which a full stop does not end a sentence (Moses'
 * English nonbreaking prefixes, the common part). */
static const char *const ABBREVIATIONS[] = {
    "Mr", "Mrs", "Ms", "Mx", "Dr", "Prof", "Sr", "Jr", "St", "Mt", "Ft", "Messrs", "Mmes", "Rev", "Hon", "Gen",
    "Col", "Maj", "Lt", "Capt", "Cpt", "Sgt", "Cmdr", "Adm", "Gov", "Sen", "Rep", "Pres", "Supt", "Insp", "vs",
    "Jan", "Feb", "Mar", "Apr", "Jun", "Jul", "Aug", "Sep", "Sept", "Oct", "Nov", "Dec", "Mon", "Tue", "Tues",
    "Wed", "Thu", "Thurs", "Fri", "Sat", "Sun", "approx", "dept", "est", "Inc", "Ltd", "Co", "Corp", "Bros", "cf",
    "al", "ca", "Ave", "Blvd", "Rd",
};
/* ... and those that hold only before a number ("No. 5", "pp. 12"). */
static const char *const BEFORE_NUMBERS[] = {"No", "Nos", "Art", "Nr", "pp", "p", "Fig", "Vol", "Ch", "Eq", "Sec"};

static int in_list(const char *word, size_t n, const char *const *list, size_t count) {
    for (size_t i = 0; i < count; i++)
        if (strlen(list[i]) == n && !memcmp(list[i], word, n)) return 1;
    return 0;
}

/* Length of the closing quote or bracket at s (ASCII " ' ) ], or ” ’ »
 * in UTF-8), or 0. */
static size_t closer_len(const unsigned char *s, const unsigned char *end) {
    if (s >= end) return 0;
    if (*s == '"' || *s == '\'' || *s == ')' || *s == ']') return 1;
    if (end - s >= 3 && s[0] == 0xE2 && s[1] == 0x80 && (s[2] == 0x9D || s[2] == 0x99)) return 3; /* ” ’ */
    if (end - s >= 2 && s[0] == 0xC2 && s[1] == 0xBB) return 2;                                  /* » */
    return 0;
}

/* Length of the opening quote, bracket, ¿ or ¡ at s, or 0. */
static size_t opener_len(const unsigned char *s, const unsigned char *end) {
    if (s >= end) return 0;
    if (*s == '"' || *s == '\'' || *s == '(' || *s == '[') return 1;
    if (end - s >= 3 && s[0] == 0xE2 && s[1] == 0x80 && (s[2] == 0x9C || s[2] == 0x98)) return 3; /* “ ‘ */
    if (end - s >= 2 && s[0] == 0xC2 && (s[1] == 0xAB || s[1] == 0xBF || s[1] == 0xA1)) return 2; /* « ¿ ¡ */
    return 0;
}

/* Does a sentence start at s: an upper-case letter (ASCII, or Latin-1's
 * À–Þ but ×) or a digit, after any openers? */
static int starts_sentence(const unsigned char *s, const unsigned char *end) {
    for (size_t k; (k = opener_len(s, end)) > 0;) s += k;
    if (s >= end) return 0;
    if (is_upper_ascii(*s) || is_digit(*s)) return 1;
    return end - s >= 2 && s[0] == 0xC3 && s[1] >= 0x80 && s[1] <= 0x9E && s[1] != 0x97;
}

/* Length of the terminator at s (. ? ! or …), or 0. */
static size_t terminator_len(const unsigned char *s, const unsigned char *end) {
    if (s >= end) return 0;
    if (*s == '.' || *s == '?' || *s == '!') return 1;
    if (end - s >= 3 && s[0] == 0xE2 && s[1] == 0x80 && s[2] == 0xA6) return 3; /* … */
    return 0;
}

static int letters_and_dots(const char *w, size_t n) {
    for (size_t i = 0; i < n; i++) {
        const unsigned char c = (unsigned char)w[i];
        if (c != '.' && !is_upper_ascii(c) && !(c >= 'a' && c <= 'z')) return 0;
    }
    return 1;
}

/* A lone full stop at text[dot] after word [word, dot): does it keep the
 * sentence going? next: the first byte of the following word. */
static int full_stop_continues(const unsigned char *text, size_t word, size_t dot, const unsigned char *next,
                               const unsigned char *end) {
    for (size_t k; word < dot && (k = opener_len(text + word, text + dot)) > 0;) word += k;   /* "(Mr." */
    const size_t n = dot - word;
    const char *w = (const char *)text + word;
    if (n == 0) return 0;
    if (n == 1 && is_upper_ascii((unsigned char)w[0])) return 1;   /* an initial */
    if (memchr(w, '.', n) && letters_and_dots(w, n)) return 1;    /* U.S. e.g. a.m., not 3.14 */
    if (in_list(w, n, ABBREVIATIONS, sizeof ABBREVIATIONS / sizeof *ABBREVIATIONS)) return 1;
    return next < end && is_digit(*next) && in_list(w, n, BEFORE_NUMBERS, sizeof BEFORE_NUMBERS / sizeof *BEFORE_NUMBERS);
}

int pmt_sentence_split(const char *text_in, size_t len, pmt_span *spans, int max_spans) {
    const unsigned char *text = (const unsigned char *)text_in, *end = text + len;
    int count = 0;
    size_t i = 0;
    while (i < len && is_space(text[i])) i++;
    size_t start = i, word = i;   /* the sentence's first byte; the current word's */
    while (i < len) {
        if (is_space(text[i])) {
            while (i < len && is_space(text[i])) i++;
            word = i;
            continue;
        }
        size_t t = terminator_len(text + i, end);
        if (!t) {
            i++;
            continue;
        }
        /* The whole run of terminators, then closers. */
        const size_t first_terminator = i;
        int only_full_stop = 1, terminators = 0;
        for (size_t k; (k = terminator_len(text + i, end)) > 0; i += k, terminators++)
            if (text[i] != '.') only_full_stop = 0;
        for (size_t k; (k = closer_len(text + i, end)) > 0;) i += k;
        if (i >= len || !is_space(text[i])) continue;   /* "3.5", "e.g.,": inside a word */
        size_t next = i;
        while (next < len && is_space(text[next])) next++;
        if (next >= len || !starts_sentence(text + next, end)) continue;
        if (only_full_stop && terminators == 1 && full_stop_continues(text, word, first_terminator, text + next, end))
            continue;
        if (count < max_spans) spans[count] = (pmt_span){start, i};
        count++;
        start = word = i = next;
    }
    size_t stop = len;
    while (stop > start && is_space(text[stop - 1])) stop--;
    if (stop > start) {
        if (count < max_spans) spans[count] = (pmt_span){start, stop};
        count++;
    }
    return count;
}

/*
 * metrics_tok13a.c — UTF-8 decoding, Python's notion of whitespace, and the
 * mteval-v13a tokenizer exactly as sacreBLEU 2.x applies it before BLEU.
 *
 * sacreBLEU runs a fixed sequence of string replacements and four regular
 * expression substitutions, each over the whole line, then splits on Unicode
 * whitespace. Every pattern only tests ASCII characters and UTF-8 never puts
 * ASCII bytes inside a multi-byte character, so each substitution is done as a
 * byte scanner that reproduces re.sub's left-to-right, non-overlapping
 * matching: the result is byte-identical to sacreBLEU's on valid UTF-8.
 */
#include "eval/metrics.h"

#include <stdlib.h>
#include <string.h>

#include "core/utf8.h"

/* Growable output string for one tokenizer pass. */
typedef struct text_buf {
    char *data;
    size_t len, cap;
    int failed;   /* an allocation failed; later appends are ignored */
} text_buf;

static void buf_init(text_buf *b, size_t hint) {
    b->len = 0;
    b->cap = hint + 1;
    b->data = malloc(b->cap);
    b->failed = b->data == NULL;
    if (b->data) b->data[0] = '\0';
}

static void buf_append(text_buf *b, const char *s, size_t n) {
    if (b->failed) return;
    if (b->len + n + 1 > b->cap) {
        size_t cap = 2 * b->cap + n + 1;
        char *grown = realloc(b->data, cap);
        if (!grown) { b->failed = 1; return; }
        b->data = grown;
        b->cap = cap;
    }
    memcpy(b->data + b->len, s, n);
    b->len += n;
    b->data[b->len] = '\0';
}

static void buf_putc(text_buf *b, char c) { buf_append(b, &c, 1); }

/* Hands the finished string to the caller (NULL if any allocation failed). */
static char *buf_finish(text_buf *b) {
    if (b->failed) { free(b->data); b->data = NULL; }
    return b->data;
}

int pmt_unicode_is_space(uint32_t cp) {
    return (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x20) || cp == 0x85 || cp == 0xA0 ||
           cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 ||
           cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

/* Python's str.replace(from, to) over the whole string; NULL when out of memory. */
static char *replace_all(const char *text, const char *from, const char *to) {
    size_t from_len = strlen(from), to_len = strlen(to);
    text_buf out;
    buf_init(&out, strlen(text));
    for (const char *hit; (hit = strstr(text, from)) != NULL; text = hit + from_len) {
        buf_append(&out, text, (size_t)(hit - text));
        buf_append(&out, to, to_len);
    }
    buf_append(&out, text, strlen(text));
    return buf_finish(&out);
}

/* Applies one replacement, consuming the input string. */
static char *replace_step(char *text, const char *from, const char *to) {
    if (!text) return NULL;
    char *next = replace_all(text, from, to);
    free(text);
    return next;
}

static int is_digit(char c) { return c >= '0' && c <= '9'; }
static int is_period_or_comma(char c) { return c == '.' || c == ','; }

/* The class [\{-\~\[-\` -\&\(-\+\:-\@\/] of mteval-v13a's first regex. */
static int is_spaced_symbol(char c) {
    return (c >= '{' && c <= '~') || (c >= '[' && c <= '`') || (c >= ' ' && c <= '&') ||
           (c >= '(' && c <= '+') || (c >= ':' && c <= '@') || c == '/';
}

/* re.sub(r'([\{-\~\[-\` -\&\(-\+\:-\@\/])', r' \1 ', text). */
static char *space_symbols(const char *text) {
    text_buf out;
    buf_init(&out, 3 * strlen(text));
    for (const char *c = text; *c; c++) {
        if (is_spaced_symbol(*c)) {
            char spaced[3] = {' ', *c, ' '};
            buf_append(&out, spaced, 3);
        } else {
            buf_putc(&out, *c);
        }
    }
    return buf_finish(&out);
}

/* The three two-character substitutions of mteval-v13a. */
typedef enum {
    SPLIT_PUNCT_AFTER_NON_DIGIT,   /* ([^0-9])([\.,])  -> \1 \2 (space after) */
    SPLIT_PUNCT_BEFORE_NON_DIGIT,  /* ([\.,])([^0-9])  ->  \1 \2 (space before) */
    SPLIT_DASH_AFTER_DIGIT         /* ([0-9])(-)       -> \1 \2 (space after)  */
} pair_rule;

static int pair_matches(pair_rule rule, char first, char second) {
    switch (rule) {
    case SPLIT_PUNCT_AFTER_NON_DIGIT:  return !is_digit(first) && is_period_or_comma(second);
    case SPLIT_PUNCT_BEFORE_NON_DIGIT: return is_period_or_comma(first) && !is_digit(second);
    case SPLIT_DASH_AFTER_DIGIT:       return is_digit(first) && second == '-';
    }
    return 0;
}

/* re.sub for one two-character rule: scan left to right, and after a match
 * resume after both characters, as Python's non-overlapping matching does. */
static char *apply_pair_rule(const char *text, pair_rule rule) {
    text_buf out;
    buf_init(&out, 2 * strlen(text));
    for (const char *c = text; *c; ) {
        if (c[1] && pair_matches(rule, c[0], c[1])) {
            if (rule == SPLIT_PUNCT_BEFORE_NON_DIGIT) {
                char spaced[4] = {' ', c[0], ' ', c[1]};
                buf_append(&out, spaced, 4);
            } else {
                char spaced[4] = {c[0], ' ', c[1], ' '};
                buf_append(&out, spaced, 4);
            }
            c += 2;
        } else {
            buf_putc(&out, *c++);
        }
    }
    return buf_finish(&out);
}

/* Applies a rewriting pass, consuming the input string. */
static char *pass_step(char *text, char *(*pass)(const char *)) {
    if (!text) return NULL;
    char *next = pass(text);
    free(text);
    return next;
}

static char *pair_step(char *text, pair_rule rule) {
    if (!text) return NULL;
    char *next = apply_pair_rule(text, rule);
    free(text);
    return next;
}

/* ' '.join(text.split()): Unicode whitespace runs become one space, trimmed. */
static char *normalize_spaces(const char *text) {
    text_buf out;
    buf_init(&out, strlen(text));
    int pending_space = 0;
    for (const char *p = text; *p; ) {
        const char *start = p;
        uint32_t cp = pmt_utf8_next(&p);
        if (pmt_unicode_is_space(cp)) {
            pending_space = out.len > 0;
            continue;
        }
        if (pending_space) buf_putc(&out, ' ');
        pending_space = 0;
        buf_append(&out, start, (size_t)(p - start));
    }
    return buf_finish(&out);
}

/* The language-independent part: SGML leftovers, hyphenated line breaks, entities. */
static char *unescape_markup(const char *line) {
    char *text = replace_all(line, "<skipped>", "");
    text = replace_step(text, "-\n", "");
    text = replace_step(text, "\n", " ");
    if (text && strchr(text, '&')) {
        text = replace_step(text, "&quot;", "\"");
        text = replace_step(text, "&amp;", "&");
        text = replace_step(text, "&lt;", "<");
        text = replace_step(text, "&gt;", ">");
    }
    return text;
}

char *pmt_tok13a(const char *line) {
    char *text = unescape_markup(line);
    if (!text) return NULL;
    /* The padding lets the two-character rules see a neighbour at both ends. */
    size_t n = strlen(text);
    char *padded = malloc(n + 3);
    if (!padded) { free(text); return NULL; }
    padded[0] = ' ';
    memcpy(padded + 1, text, n);
    padded[n + 1] = ' ';
    padded[n + 2] = '\0';
    free(text);

    text = pass_step(padded, space_symbols);
    text = pair_step(text, SPLIT_PUNCT_AFTER_NON_DIGIT);
    text = pair_step(text, SPLIT_PUNCT_BEFORE_NON_DIGIT);
    text = pair_step(text, SPLIT_DASH_AFTER_DIGIT);
    return pass_step(text, normalize_spaces);
}

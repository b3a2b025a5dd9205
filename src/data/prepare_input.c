/*
 * prepare_input.c — reading and cleaning the parallel corpora for prepare.
 *
 * Why whole-file buffers: each corpus is a few MB (tens once inflated), so
 * reading each input file into one buffer and cutting it in place (NUL at
 * tabs/newlines, whitespace normalized in place) gives every pair two
 * pointers and no per-line allocation. A .gz file (found by its magic bytes,
 * whatever its name) is inflated by zlib into the same kind of buffer.
 *
 * Why these errors: bad input lines (invalid UTF-8, a TSV line without the
 * chosen columns) are counted and reported with file:line, never fatal: one
 * broken line in 10^5 should not stop a run. A missing file, a damaged or
 * truncated .gz (the rest of the file is unknown), aligned files of
 * different lengths and a source left empty are fatal, with a message
 * saying what to do.
 *
 * Why one dedup map over all sources: a pair is kept once, by the first
 * source that has it (the primary first, then the order given), so an
 * upsampled source never re-adds what another one had.
 */
#include "data/prepare_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "core/strmap.h"
#include "core/text.h"
#include "core/utf8.h"

enum { REPORT_FIRST = 5 };  /* bad lines reported individually (per source) before just counting */
enum { GZ_BUFFER_BYTES = 1 << 18 };

/* Appends the bytes of an open stdio or zlib stream to a growing buffer. */
typedef struct {
    char *buf;
    size_t len, cap;
} byte_buffer;

/* Makes room for at least one more chunk; -1 when out of memory. */
static int buffer_room(byte_buffer *b) {
    if (b->cap - b->len >= (1 << 16)) return 0;
    size_t cap = b->cap ? 2 * b->cap : 1 << 20;
    char *bigger = realloc(b->buf, cap + 1);
    if (!bigger) return -1;
    b->buf = bigger;
    b->cap = cap;
    return 0;
}

/* Inflates the gzip file path whole; NULL with err naming the file and
 * zlib's reason (a truncated or corrupt file is an error, not a short read). */
static char *read_gzip_file(const char *path, size_t *size, char *err, size_t errlen) {
    errno = 0;
    gzFile gz = gzopen(path, "rb");
    if (!gz) {
        snprintf(err, errlen, "cannot open input '%s': %s", path, errno ? strerror(errno) : "out of memory");
        return NULL;
    }
    byte_buffer b = {NULL, 0, 0};
    int ok = gzbuffer(gz, GZ_BUFFER_BYTES) == 0, oom = 0;
    while (ok) {
        if (buffer_room(&b) != 0) { ok = 0; oom = 1; break; }
        size_t room = b.cap - b.len;
        int got = gzread(gz, b.buf + b.len, (unsigned)(room < (1u << 30) ? room : (1u << 30)));
        if (got < 0) { ok = 0; break; }
        if (got == 0) break;
        b.len += (size_t)got;
    }
    /* A truncated member ends gzread like the end of the file; zlib keeps
     * the error (Z_BUF_ERROR, "unexpected end of file"), which gzclose_r
     * returns too. */
    int zerr = Z_OK;
    const char *reason = gzerror(gz, &zerr);
    char why[256];
    snprintf(why, sizeof why, "%s", zerr != Z_OK && reason && reason[0] ? reason : "read error");
    int close_rc = gzclose_r(gz);
    if (zerr != Z_OK || close_rc != Z_OK) ok = 0;
    if (!ok) {
        if (oom) snprintf(err, errlen, "out of memory inflating '%s'", path);
        else snprintf(err, errlen, "input '%s' is a damaged or truncated gzip file (%s); fetch or compress it again",
                      path, why);
        free(b.buf);
        return NULL;
    }
    if (!b.buf && buffer_room(&b) != 0) { snprintf(err, errlen, "out of memory reading '%s'", path); return NULL; }
    b.buf[b.len] = '\0';
    *size = b.len;
    return b.buf;
}

/* Reads a whole file (inflated when it starts with the gzip magic) into a
 * malloc'd NUL-terminated buffer. */
static char *read_whole_file(const char *path, size_t *size, char *err, size_t errlen) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, errlen, "cannot open input '%s': %s (see scripts/get_data.sh to fetch the corpus)",
                 path, strerror(errno));
        return NULL;
    }
    byte_buffer b = {NULL, 0, 0};
    int oom = 0;
    for (;;) {
        if (buffer_room(&b) != 0) { oom = 1; break; }
        size_t got = fread(b.buf + b.len, 1, b.cap - b.len, f);
        b.len += got;
        if (got == 0) break;
        if (b.len >= 2 && (unsigned char)b.buf[0] == 0x1f && (unsigned char)b.buf[1] == 0x8b) break;
    }
    int read_failed = ferror(f);
    if (fclose(f) != 0) read_failed = 1;
    if (oom) { free(b.buf); snprintf(err, errlen, "out of memory reading '%s'", path); return NULL; }
    if (read_failed) {
        snprintf(err, errlen, "read error in input '%s'", path);
        free(b.buf);
        return NULL;
    }
    if (b.len >= 2 && (unsigned char)b.buf[0] == 0x1f && (unsigned char)b.buf[1] == 0x8b) {
        free(b.buf);
        return read_gzip_file(path, size, err, errlen);
    }
    b.buf[b.len] = '\0';
    *size = b.len;
    return b.buf;
}

/* Cursor over the lines of a buffer; cuts each line in place (the newline
 * becomes NUL, a CR before it is dropped, a UTF-8 BOM at the start skipped). */
typedef struct {
    char *pos, *end;
    long line_no;
} line_cursor;

static void cursor_init(line_cursor *c, char *buf, size_t size) {
    c->pos = buf;
    c->end = buf + size;
    c->line_no = 0;
    if (size >= 3 && memcmp(buf, "\xEF\xBB\xBF", 3) == 0) c->pos += 3;
}

/* Next line and its length; 0 at the end. */
static int cursor_next(line_cursor *c, char **line, size_t *len) {
    if (c->pos >= c->end) return 0;
    char *start = c->pos;
    char *nl = memchr(start, '\n', (size_t)(c->end - start));
    char *stop = nl ? nl : c->end;
    c->pos = nl ? nl + 1 : c->end;
    if (stop > start && stop[-1] == '\r') stop--;
    *stop = '\0';
    *line = start;
    *len = (size_t)(stop - start);
    c->line_no++;
    return 1;
}

/* Lines as the cursor sees them: a last line without '\n' counts. */
static long count_lines(const char *buf, size_t size) {
    long n = 0;
    for (const char *p = buf; (p = memchr(p, '\n', (size_t)(buf + size - p))) != NULL; p++) n++;
    if (size > 0 && buf[size - 1] != '\n') n++;
    return n;
}

/* State of the cleaning passes over every source: the dedup set (shared,
 * so an earlier source wins) with its key arenas, the output list, and the
 * current source's rules, counters and reporting of skipped lines. */
typedef struct {
    FILE *log;
    pmt_strmap seen;
    int seen_ready;
    char *key_arena[PMT_MAX_SOURCES + 1];  /* "en\tes" keys, one arena per source */
    int n_arenas;
    size_t key_used;                       /* in the newest arena */
    pmt_pair_list *list;
    const pmt_source_spec *spec;
    pmt_source_stats *row;
    long reported_invalid, reported_malformed;
} cleaner;

/* Reports one skipped line (file:line: why) until REPORT_FIRST were shown. */
static void report_bad_line(cleaner *cl, long *reported, const char *file, long line_no, const char *what) {
    if (cl->log && (*reported)++ < REPORT_FIRST)
        fprintf(cl->log, "prepare: warning: %s:%ld: %s; line skipped\n", file, line_no, what);
}

/* After a source's pass: how many more bad lines were skipped without a report. */
static void report_bad_line_totals(cleaner *cl) {
    if (!cl->log) return;
    long more_invalid = cl->row->dropped.invalid_utf8 - REPORT_FIRST;
    long more_malformed = cl->row->dropped.malformed - REPORT_FIRST;
    if (more_invalid > 0)
        fprintf(cl->log, "prepare: warning: %ld more lines with invalid UTF-8 skipped in %s\n", more_invalid,
                cl->spec->path);
    if (more_malformed > 0)
        fprintf(cl->log, "prepare: warning: %ld more lines without the English/Spanish columns skipped in %s\n",
                more_malformed, cl->spec->path);
}

/* 1 if the pair (already normalized) was seen before; remembers it if not. */
static int is_duplicate(cleaner *cl, const char *en, size_t en_len, const char *es, size_t es_len, int *oom) {
    char *key = cl->key_arena[cl->n_arenas - 1] + cl->key_used;
    memcpy(key, en, en_len);
    key[en_len] = '\t';
    memcpy(key + en_len + 1, es, es_len);
    size_t key_len = en_len + 1 + es_len;
    int inserted = 0;
    if (!pmt_strmap_get_or_insert(&cl->seen, key, key_len, 0, &inserted)) { *oom = 1; return 0; }
    if (inserted) cl->key_used += key_len;
    return !inserted;
}

/* Applies the source's cleaning rules to one raw pair; appends it when it
 * survives. The dev set keeps every well-formed pair (no length, markup or
 * dedup rule: it is the user's chosen yardstick). -1 only when out of memory. */
static int clean_pair(cleaner *cl, char *en, size_t en_len, char *es, size_t es_len, const char *file, long line_no) {
    pmt_drop_counts *drop = &cl->row->dropped;
    const pmt_source_spec *spec = cl->spec;
    if (!pmt_utf8_valid(en, en_len) || !pmt_utf8_valid(es, es_len)) {
        drop->invalid_utf8++;
        report_bad_line(cl, &cl->reported_invalid, file, line_no, "invalid UTF-8");
        return 0;
    }
    en_len = pmt_text_normalize_space(en, en_len);
    es_len = pmt_text_normalize_space(es, es_len);
    if (en_len == 0 || es_len == 0) { drop->empty++; return 0; }
    if (!spec->is_dev) {
        int en_words = pmt_text_word_count(en), es_words = pmt_text_word_count(es);
        if (en_words > spec->max_words || es_words > spec->max_words) { drop->too_long++; return 0; }
        int longer = en_words > es_words ? en_words : es_words, shorter = en_words > es_words ? es_words : en_words;
        if ((double)longer > spec->max_ratio * (double)shorter) { drop->length_ratio++; return 0; }
    }
    if (spec->drop_markup && (pmt_looks_like_markup(en) || pmt_looks_like_markup(es))) { drop->markup++; return 0; }
    if (!spec->is_dev) {
        int oom = 0;
        if (is_duplicate(cl, en, en_len, es, es_len, &oom)) { drop->duplicate++; return 0; }
        if (oom) return -1;
    }
    pmt_pair *p = &cl->list->pairs[cl->list->n++];
    p->side[PMT_SIDE_EN] = en;
    p->side[PMT_SIDE_ES] = es;
    return 0;
}

/* The field'th (1-based) tab-separated field of line[0..len): start and
 * length, or -1 when the line has fewer fields. */
static int tsv_field(char *line, size_t len, int field, char **start, size_t *flen) {
    char *p = line, *end = line + len;
    for (int f = 1; f < field; f++) {
        char *tab = memchr(p, '\t', (size_t)(end - p));
        if (!tab) return -1;
        p = tab + 1;
    }
    char *tab = memchr(p, '\t', (size_t)(end - p));
    *start = p;
    *flen = (size_t)((tab ? tab : end) - p);
    return 0;
}

/* TSV mode: English and Spanish in the spec's columns, other columns ignored. */
static int clean_tsv(cleaner *cl, char *buf, size_t size, const char *path) {
    line_cursor cur;
    cursor_init(&cur, buf, size);
    char *line;
    size_t len;
    int en_col = cl->spec->en_col, es_col = cl->spec->es_col;
    char why[96];
    if (en_col == 1 && es_col == 2) snprintf(why, sizeof why, "no tab between English and Spanish");
    else snprintf(why, sizeof why, "fewer than %d tab-separated columns (English %d, Spanish %d)",
                  en_col > es_col ? en_col : es_col, en_col, es_col);
    while (cursor_next(&cur, &line, &len)) {
        cl->row->input_lines++;
        char *en, *es;
        size_t en_len, es_len;
        if (tsv_field(line, len, en_col, &en, &en_len) != 0 || tsv_field(line, len, es_col, &es, &es_len) != 0) {
            if (len == 0) { cl->row->dropped.empty++; continue; }
            cl->row->dropped.malformed++;
            report_bad_line(cl, &cl->reported_malformed, path, cur.line_no, why);
            continue;
        }
        en[en_len] = '\0';
        es[es_len] = '\0';
        if (clean_pair(cl, en, en_len, es, es_len, path, cur.line_no) != 0) return -1;
    }
    return 0;
}

/* Aligned mode: line i of the English file pairs with line i of the Spanish. */
static int clean_aligned(cleaner *cl, char *bufs[2], size_t sizes[2], const char *paths[2]) {
    line_cursor cur[2];
    cursor_init(&cur[0], bufs[0], sizes[0]);
    cursor_init(&cur[1], bufs[1], sizes[1]);
    char *line[2];
    size_t len[2];
    while (cursor_next(&cur[0], &line[0], &len[0]) && cursor_next(&cur[1], &line[1], &len[1])) {
        cl->row->input_lines++;
        const char *bad_file = pmt_utf8_valid(line[0], len[0]) ? paths[1] : paths[0];
        if (clean_pair(cl, line[0], len[0], line[1], len[1], bad_file, cur[0].line_no) != 0) return -1;
    }
    return 0;
}

/* Grows the pair list and the dedup state for a source of up to max_pairs
 * pairs in input_bytes bytes; -1 when out of memory. */
static int cleaner_reserve(cleaner *cl, long max_pairs, size_t input_bytes) {
    pmt_pair_list *list = cl->list;
    if (list->n + max_pairs > list->cap) {
        long cap = list->n + (max_pairs > 0 ? max_pairs : 1);
        pmt_pair *pairs = realloc(list->pairs, (size_t)cap * sizeof *pairs);
        if (!pairs) return -1;
        list->pairs = pairs;
        list->cap = cap;
    }
    if (!cl->seen_ready) {
        if (pmt_strmap_init(&cl->seen, (size_t)max_pairs) != 0) return -1;
        cl->seen_ready = 1;
    }
    /* every key is one line's two sides and a tab: never more than the
     * input bytes plus one per line, so the arena is sized once */
    if (!(cl->key_arena[cl->n_arenas] = malloc(input_bytes + (size_t)max_pairs + 1))) return -1;
    cl->n_arenas++;
    cl->key_used = 0;
    return 0;
}

/* Frees the dedup state (the pair list lives on in the caller). */
static void cleaner_free(cleaner *cl) {
    if (cl->seen_ready) pmt_strmap_free(&cl->seen);
    for (int i = 0; i < cl->n_arenas; i++) free(cl->key_arena[i]);
}

/* Keeps a loaded file buffer in the list (the pairs point into it). */
static void keep_buffer(pmt_pair_list *list, char *buf) {
    list->buffers[list->n_buffers++] = buf;
}

/* Reads and cleans one source into the list and its row of the table. */
static int read_source(cleaner *cl, const pmt_source_spec *spec, pmt_source_stats *row, char *err, size_t errlen) {
    pmt_pair_list *list = cl->list;
    int aligned = spec->es_path[0] != '\0';
    const char *paths[2] = {spec->path, aligned ? spec->es_path : NULL};
    char *bufs[2] = {NULL, NULL};
    size_t sizes[2] = {0, 0};
    for (int f = 0; f < 1 + aligned; f++) {
        if (!(bufs[f] = read_whole_file(paths[f], &sizes[f], err, errlen))) return -1;
        keep_buffer(list, bufs[f]);
    }
    long n_lines = count_lines(bufs[0], sizes[0]);
    if (aligned) {
        long n_es = count_lines(bufs[1], sizes[1]);
        if (n_lines != n_es) {
            snprintf(err, errlen, "aligned files differ in length: '%s' has %ld lines but '%s' has %ld; "
                     "line i of one must translate line i of the other", paths[0], n_lines, paths[1], n_es);
            return -1;
        }
    }
    snprintf(row->name, sizeof row->name, "%s", spec->name);
    row->role = spec->is_dev ? "dev" : spec->primary ? "primary" : "extra";
    row->weight = spec->weight;
    cl->spec = spec;
    cl->row = row;
    cl->reported_invalid = cl->reported_malformed = 0;
    if (cleaner_reserve(cl, n_lines, sizes[0] + sizes[1]) != 0) {
        snprintf(err, errlen, "out of memory while cleaning '%s'", spec->path);
        return -1;
    }
    int rc = aligned ? clean_aligned(cl, bufs, sizes, paths) : clean_tsv(cl, bufs[0], sizes[0], paths[0]);
    if (rc != 0) {
        snprintf(err, errlen, "out of memory while cleaning '%s'", spec->path);
        return -1;
    }
    report_bad_line_totals(cl);
    return 0;
}

/* Adds the drop counts of one source to the totals. */
static void add_drops(pmt_drop_counts *total, const pmt_drop_counts *d) {
    total->invalid_utf8 += d->invalid_utf8;
    total->malformed += d->malformed;
    total->empty += d->empty;
    total->duplicate += d->duplicate;
    total->too_long += d->too_long;
    total->length_ratio += d->length_ratio;
    total->markup += d->markup;
    total->held_out += d->held_out;
}

int pmt_prepare_read_pairs(const pmt_config *cfg, FILE *log, pmt_pair_list *list,
                           pmt_prepare_stats *stats, char *err, size_t errlen) {
    memset(list, 0, sizeof *list);
    if (!(list->sources = malloc(sizeof *list->sources))) { snprintf(err, errlen, "out of memory"); return -1; }
    if (pmt_source_set_from_config(cfg, list->sources, err, errlen) != 0) goto fail;
    const pmt_source_set *set = list->sources;
    cleaner cl;
    memset(&cl, 0, sizeof cl);
    cl.log = log;
    cl.list = list;
    int rc = 0;
    for (int s = 0; rc == 0 && s < set->n + set->has_dev; s++) {
        const pmt_source_spec *spec = s < set->n ? &set->spec[s] : &set->dev;
        pmt_source_stats *row = &stats->source[s];
        list->first[s] = list->n;
        rc = read_source(&cl, spec, row, err, errlen);
        list->first[s + 1] = list->n;
        row->kept_pairs = list->n - list->first[s];
        stats->n_sources = s + 1;
        stats->input_lines += row->input_lines;
        stats->kept_pairs += row->kept_pairs;
        add_drops(&stats->dropped, &row->dropped);
        /* nothing usable is a mistake (format, columns, limits) unless an
         * extra source only repeated what an earlier one had */
        if (rc == 0 && row->kept_pairs == 0 && (s == 0 || spec->is_dev || row->dropped.duplicate == 0)) {
            snprintf(err, errlen, "no sentence pairs left after cleaning %s (%ld input lines): check the input "
                     "format (English<TAB>Spanish per line, or the source's en=/es= columns) and "
                     "--max-words/--max-ratio", spec->path, row->input_lines);
            rc = -1;
        } else if (rc == 0 && row->kept_pairs == 0 && log) {
            fprintf(log, "prepare: warning: %s adds nothing: all its %ld usable pairs are in earlier sources\n",
                    spec->path, row->dropped.duplicate);
        }
    }
    cleaner_free(&cl);
    if (rc != 0) goto fail;
    list->n_sources = set->n;
    list->has_dev = set->has_dev;
    return 0;
fail:
    pmt_pair_list_free(list);
    return -1;
}

void pmt_pair_list_free(pmt_pair_list *list) {
    free(list->pairs);
    free(list->sources);
    for (int i = 0; i < list->n_buffers; i++) free(list->buffers[i]);
    memset(list, 0, sizeof *list);
}

/*
 * prepare_input.c — reading and cleaning the parallel corpora for prepare.
 *
 * Why line by line: a corpus may be larger than memory (issue 44: 10M pairs
 * are gigabytes of text), so each file is read through zlib in 256 KB
 * chunks (gzread reads a plain file as it is, so a .gz is found by its magic
 * bytes, whatever its name), cut into lines, cleaned, and each kept pair
 * appended to a spill file; memory keeps 16 bytes a pair (its place in the
 * spill and the hash of its English side) and the dedup set 8-16.
 *
 * Why these errors: bad input lines (invalid UTF-8, a TSV line without the
 * chosen columns) are counted and reported with file:line, never fatal: one
 * broken line in 10^5 should not stop a run. A missing file, a damaged or
 * truncated .gz (the rest of the file is unknown), aligned files of
 * different lengths and a source left empty are fatal, with a message
 * saying what to do.
 *
 * Why one dedup set over all sources: a pair is kept once, by the first
 * source that has it (the primary first, then the order given), so an
 * upsampled source never re-adds what another one had. It holds 64-bit
 * hashes of the normalised "English<TAB>Spanish" (collision odds in
 * prepare_internal.h).
 */
#include "data/prepare_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "core/text.h"
#include "core/utf8.h"

enum { REPORT_FIRST = 5 };  /* bad lines reported individually (per source) before just counting */
enum { READ_CHUNK = 1 << 18 };

/* ---- 64-bit hashes ---------------------------------------------------- */

static uint64_t mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

uint64_t pmt_hash_bytes(const void *data, size_t n, uint64_t seed) {
    const unsigned char *p = data;
    uint64_t h = mix64(seed ^ (0x9E3779B97F4A7C15ULL * (n + 1)));
    for (; n >= 8; p += 8, n -= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        h = mix64(h ^ w) + 0x9E3779B97F4A7C15ULL;
    }
    uint64_t tail = 0;
    for (size_t k = 0; k < n; k++) tail |= (uint64_t)p[k] << (8 * k);
    return mix64(h ^ tail ^ ((uint64_t)n << 56));
}

int pmt_hash_map_init(pmt_hash_map *m, size_t expected) {
    memset(m, 0, sizeof *m);
    size_t cap = 1024;
    while (cap * 7 / 10 < expected) cap *= 2;
    m->key = calloc(cap, sizeof *m->key);
    m->value = malloc(cap * sizeof *m->value);
    if (!m->key || !m->value) { pmt_hash_map_free(m); return -1; }
    m->cap = cap;
    return 0;
}

void pmt_hash_map_free(pmt_hash_map *m) {
    free(m->key);
    free(m->value);
    memset(m, 0, sizeof *m);
}

/* The slot of key: where it is, or the empty slot where it would go. */
static size_t hash_slot(const pmt_hash_map *m, uint64_t key) {
    size_t i = (size_t)mix64(key) & (m->cap - 1);
    while (m->key[i] != 0 && m->key[i] != key) i = (i + 1) & (m->cap - 1);
    return i;
}

/* Doubles the table (keys re-placed); -1 when out of memory. */
static int hash_map_grow(pmt_hash_map *m) {
    pmt_hash_map bigger = {calloc(2 * m->cap, sizeof(uint64_t)), malloc(2 * m->cap * sizeof(int)), 2 * m->cap, m->n};
    if (!bigger.key || !bigger.value) { pmt_hash_map_free(&bigger); return -1; }
    for (size_t i = 0; i < m->cap; i++)
        if (m->key[i]) {
            size_t j = hash_slot(&bigger, m->key[i]);
            bigger.key[j] = m->key[i];
            bigger.value[j] = m->value[i];
        }
    pmt_hash_map_free(m);
    *m = bigger;
    return 0;
}

int *pmt_hash_map_get_or_insert(pmt_hash_map *m, uint64_t key, int value, int *inserted) {
    if (key == 0) key = 1;
    size_t i = hash_slot(m, key);
    *inserted = m->key[i] == 0;
    if (!*inserted) return &m->value[i];
    if ((m->n + 1) * 10 > m->cap * 7) {
        if (hash_map_grow(m) != 0) return NULL;
        i = hash_slot(m, key);
    }
    m->key[i] = key;
    m->value[i] = value;
    m->n++;
    return &m->value[i];
}

const int *pmt_hash_map_find(const pmt_hash_map *m, uint64_t key) {
    if (key == 0) key = 1;
    size_t i = hash_slot(m, key);
    return m->key[i] ? &m->value[i] : NULL;
}

/* ---- line reader ------------------------------------------------------ */

/* Lines of one input file read through zlib chunk by chunk; each line is
 * cut as the whole-file reader of earlier builds cut it (the newline
 * dropped, a CR before it too, a UTF-8 BOM at the start skipped; a last
 * line without newline counts) into a growable buffer with room for a NUL. */
typedef struct {
    gzFile gz;
    const char *path;
    char *chunk;
    size_t pos, len;
    char *line;
    size_t line_cap;
    long line_no;
    int at_end, failed;
} line_reader;

static int reader_open(line_reader *r, const char *path, char *err, size_t errlen) {
    memset(r, 0, sizeof *r);
    r->path = path;
    FILE *probe = fopen(path, "rb");   /* fopen's errno is the one to report */
    if (!probe) {
        snprintf(err, errlen, "cannot open input '%s': %s (see scripts/get_data.sh to fetch the corpus)", path,
                 strerror(errno));
        return -1;
    }
    fclose(probe);
    errno = 0;
    r->gz = gzopen(path, "rb");
    r->chunk = malloc(READ_CHUNK);
    if (!r->gz || !r->chunk || gzbuffer(r->gz, READ_CHUNK) != 0) {
        snprintf(err, errlen, "cannot open input '%s': %s", path, errno ? strerror(errno) : "out of memory");
        if (r->gz) gzclose_r(r->gz);
        free(r->chunk);
        r->gz = NULL;
        r->chunk = NULL;
        return -1;
    }
    return 0;
}

/* Refills the chunk; 0 (len may be 0 at the end) or -1 (zlib failed). */
static int reader_fill(line_reader *r) {
    int got = gzread(r->gz, r->chunk, READ_CHUNK);
    if (got < 0) { r->failed = 1; return -1; }
    r->pos = 0;
    r->len = (size_t)got;
    if (got == 0) {
        /* a truncated member ends gzread like the end of the file; zlib
         * keeps the error (Z_BUF_ERROR, "unexpected end of file") */
        int zerr = Z_OK;
        gzerror(r->gz, &zerr);
        if (zerr != Z_OK) { r->failed = 1; return -1; }
        r->at_end = 1;
    }
    return 0;
}

/* Appends n bytes to the line being built; -1 when out of memory. */
static int line_append(line_reader *r, size_t *used, const char *data, size_t n) {
    if (*used + n + 1 > r->line_cap) {
        size_t cap = r->line_cap ? r->line_cap : 4096;
        while (cap < *used + n + 1) cap *= 2;
        char *bigger = realloc(r->line, cap);
        if (!bigger) return -1;
        r->line = bigger;
        r->line_cap = cap;
    }
    memcpy(r->line + *used, data, n);
    *used += n;
    return 0;
}

/* Next line and its length: 1, 0 at the end, -1 on a read error or out of
 * memory (r->failed tells which). */
static int reader_next(line_reader *r, char **line, size_t *len) {
    size_t used = 0;
    int any = 0;
    for (;;) {
        if (r->pos == r->len) {
            if (r->at_end) break;
            if (reader_fill(r) != 0) return -1;
            if (r->at_end) break;
            if (r->line_no == 0 && !any && r->len >= 3 && memcmp(r->chunk, "\xEF\xBB\xBF", 3) == 0) r->pos = 3;
            continue;
        }
        any = 1;
        char *start = r->chunk + r->pos, *nl = memchr(start, '\n', r->len - r->pos);
        size_t n = (size_t)((nl ? nl : r->chunk + r->len) - start);
        if (line_append(r, &used, start, n) != 0) return -1;
        r->pos += n + (nl != NULL);
        if (nl) goto done;
    }
    if (!any) return 0;
done:
    if (used > 0 && r->line[used - 1] == '\r') used--;
    r->line[used] = '\0';
    *line = r->line;
    *len = used;
    r->line_no++;
    return 1;
}

/* Closes the reader; -1 when zlib reports the stream damaged. */
static int reader_close(line_reader *r) {
    int rc = 0;
    if (r->gz && gzclose_r(r->gz) != Z_OK) rc = -1;
    free(r->chunk);
    free(r->line);
    memset(r, 0, sizeof *r);
    return rc;
}

/* The message for a reader that failed: damaged gzip, or out of memory. */
static void reader_error(line_reader *r, char *err, size_t errlen) {
    int zerr = Z_OK;
    const char *reason = r->gz ? gzerror(r->gz, &zerr) : NULL;
    if (!r->failed)
        snprintf(err, errlen, "out of memory reading '%s'", r->path);
    else
        snprintf(err, errlen, "input '%s' is a damaged or truncated gzip file (%s); fetch or compress it again",
                 r->path, zerr != Z_OK && reason && reason[0] ? reason : "read error");
}

/* State of the cleaning pass over every source: the dedup set (shared, so
 * an earlier source wins), the output list, and the current source's rules,
 * counters and reporting of skipped lines. */
typedef struct {
    FILE *log;
    pmt_hash_map seen;
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

/* 1 if the pair (already normalized) was seen before; remembers it if not.
 * The key is the hash of "en<TAB>es" (normalised text holds no tab). */
static int is_duplicate(cleaner *cl, const char *en, size_t en_len, const char *es, size_t es_len, int *oom) {
    uint64_t h = pmt_hash_bytes(en, en_len, 0x7072657061697231ULL);
    h = pmt_hash_bytes(es, es_len, h);
    int inserted = 0;
    if (!pmt_hash_map_get_or_insert(&cl->seen, h, 0, &inserted)) { *oom = 1; return 0; }
    return !inserted;
}

/* Appends a kept pair to the spill and its place and English hash to the
 * list; -1 when out of memory or the spill cannot be written (errno). */
static int keep_pair(pmt_pair_list *list, const char *en, size_t en_len, const char *es, size_t es_len) {
    if (list->n + 1 >= list->cap) {
        long cap = list->cap ? 2 * list->cap : 1 << 16;
        uint64_t *offset = realloc(list->offset, (size_t)(cap + 1) * sizeof *offset);
        if (offset) list->offset = offset;
        uint64_t *en_hash = offset ? realloc(list->en_hash, (size_t)cap * sizeof *en_hash) : NULL;
        if (!offset || !en_hash) { errno = ENOMEM; return -1; }
        list->en_hash = en_hash;
        list->cap = cap;
    }
    if (fwrite(en, 1, en_len + 1, list->spill) != en_len + 1 || fwrite(es, 1, es_len + 1, list->spill) != es_len + 1)
        return -1;
    list->en_hash[list->n] = pmt_hash_bytes(en, en_len, 0);
    list->offset[list->n + 1] = list->offset[list->n] + en_len + es_len + 2;
    list->n++;
    return 0;
}

/* Applies the source's cleaning rules to one raw pair; keeps it when it
 * survives. The dev set keeps every well-formed pair (no length, markup or
 * dedup rule: it is the user's chosen yardstick). -1 only when out of
 * memory or the spill cannot be written. */
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
        if (oom) { errno = ENOMEM; return -1; }
    }
    return keep_pair(cl->list, en, en_len, es, es_len);
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

/* A failed pass: the reader's fault, or the spill's (errno). */
static int pass_failed(cleaner *cl, line_reader *r, char *err, size_t errlen) {
    if (r && (r->failed || errno == ENOMEM)) reader_error(r, err, errlen);
    else if (errno == ENOMEM) snprintf(err, errlen, "out of memory while cleaning '%s'", cl->spec->path);
    else snprintf(err, errlen, "cannot write prepare's spill file in the data dir: %s", strerror(errno));
    return -1;
}

/* TSV mode: English and Spanish in the spec's columns, other columns ignored. */
static int clean_tsv(cleaner *cl, line_reader *r, char *err, size_t errlen) {
    char *line;
    size_t len;
    int en_col = cl->spec->en_col, es_col = cl->spec->es_col, got;
    char why[96];
    if (en_col == 1 && es_col == 2) snprintf(why, sizeof why, "no tab between English and Spanish");
    else snprintf(why, sizeof why, "fewer than %d tab-separated columns (English %d, Spanish %d)",
                  en_col > es_col ? en_col : es_col, en_col, es_col);
    while ((got = reader_next(r, &line, &len)) == 1) {
        cl->row->input_lines++;
        char *en, *es;
        size_t en_len, es_len;
        if (tsv_field(line, len, en_col, &en, &en_len) != 0 || tsv_field(line, len, es_col, &es, &es_len) != 0) {
            if (len == 0) { cl->row->dropped.empty++; continue; }
            cl->row->dropped.malformed++;
            report_bad_line(cl, &cl->reported_malformed, r->path, r->line_no, why);
            continue;
        }
        en[en_len] = '\0';
        es[es_len] = '\0';
        errno = 0;
        if (clean_pair(cl, en, en_len, es, es_len, r->path, r->line_no) != 0) return pass_failed(cl, NULL, err, errlen);
    }
    return got == 0 ? 0 : pass_failed(cl, r, err, errlen);
}

/* Lines left in a reader (the longer of two aligned files); -1 on failure. */
static long lines_left(line_reader *r) {
    char *line;
    size_t len;
    long n = 0;
    int got;
    while ((got = reader_next(r, &line, &len)) == 1) n++;
    return got == 0 ? n : -1;
}

/* Aligned mode: line i of the English file pairs with line i of the Spanish. */
static int clean_aligned(cleaner *cl, line_reader r[2], char *err, size_t errlen) {
    char *line[2];
    size_t len[2];
    int got[2];
    for (;;) {
        got[0] = reader_next(&r[0], &line[0], &len[0]);
        if (got[0] < 0) return pass_failed(cl, &r[0], err, errlen);
        got[1] = reader_next(&r[1], &line[1], &len[1]);
        if (got[1] < 0) return pass_failed(cl, &r[1], err, errlen);
        if (got[0] == 0 || got[1] == 0) break;
        cl->row->input_lines++;
        const char *bad_file = pmt_utf8_valid(line[0], len[0]) ? r[1].path : r[0].path;
        errno = 0;
        if (clean_pair(cl, line[0], len[0], line[1], len[1], bad_file, r[0].line_no) != 0)
            return pass_failed(cl, NULL, err, errlen);
    }
    if (got[0] != got[1]) {
        int longer = got[0] ? 0 : 1;
        long extra = lines_left(&r[longer]);
        if (extra < 0) return pass_failed(cl, &r[longer], err, errlen);
        long n[2];
        n[longer] = r[longer].line_no;
        n[1 - longer] = r[1 - longer].line_no;
        snprintf(err, errlen, "aligned files differ in length: '%s' has %ld lines but '%s' has %ld; "
                 "line i of one must translate line i of the other", r[0].path, n[0], r[1].path, n[1]);
        return -1;
    }
    return 0;
}

/* Reads and cleans one source into the list and its row of the table. */
static int read_source(cleaner *cl, const pmt_source_spec *spec, pmt_source_stats *row, char *err, size_t errlen) {
    int aligned = spec->es_path[0] != '\0';
    snprintf(row->name, sizeof row->name, "%s", spec->name);
    row->role = spec->is_dev ? "dev" : spec->primary ? "primary" : "extra";
    row->weight = spec->weight;
    cl->spec = spec;
    cl->row = row;
    cl->reported_invalid = cl->reported_malformed = 0;
    line_reader r[2];
    memset(r, 0, sizeof r);
    if (reader_open(&r[0], spec->path, err, errlen) != 0) return -1;
    if (aligned && reader_open(&r[1], spec->es_path, err, errlen) != 0) {
        reader_close(&r[0]);
        return -1;
    }
    int rc = aligned ? clean_aligned(cl, r, err, errlen) : clean_tsv(cl, &r[0], err, errlen);
    for (int f = 0; f < 1 + aligned; f++) {
        if (reader_close(&r[f]) != 0 && rc == 0) {
            snprintf(err, errlen, "input '%s' is a damaged or truncated gzip file; fetch or compress it again",
                     f ? spec->es_path : spec->path);
            rc = -1;
        }
    }
    if (rc == 0) report_bad_line_totals(cl);
    return rc;
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

/* Creates the list's spill file in dir, unlinked at once: it lives as long
 * as its stream and never outlives the process. */
static int open_spill(pmt_pair_list *list, const char *dir, char *err, size_t errlen) {
    char path[PMT_PATH_MAX + 64];
    snprintf(path, sizeof path, "%s/.prepare-pairs.tmp", dir);
    list->spill = fopen(path, "w+b");
    if (!list->spill) {
        snprintf(err, errlen, "cannot create prepare's spill file '%s': %s; choose another --data-dir", path,
                 strerror(errno));
        return -1;
    }
    remove(path);
    if (!(list->offset = malloc(sizeof *list->offset))) { snprintf(err, errlen, "out of memory"); return -1; }
    list->offset[0] = 0;
    return 0;
}

int pmt_prepare_read_pairs(const pmt_config *cfg, FILE *log, pmt_pair_list *list,
                           pmt_prepare_stats *stats, char *err, size_t errlen) {
    memset(list, 0, sizeof *list);
    if (!(list->sources = malloc(sizeof *list->sources))) { snprintf(err, errlen, "out of memory"); return -1; }
    if (pmt_source_set_from_config(cfg, list->sources, err, errlen) != 0) goto fail;
    if (open_spill(list, cfg->data_dir, err, errlen) != 0) goto fail;
    const pmt_source_set *set = list->sources;
    cleaner cl;
    memset(&cl, 0, sizeof cl);
    cl.log = log;
    cl.list = list;
    if (pmt_hash_map_init(&cl.seen, 1 << 16) != 0) { snprintf(err, errlen, "out of memory"); goto fail; }
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
    pmt_hash_map_free(&cl.seen);
    if (rc == 0 && fflush(list->spill) != 0) {
        snprintf(err, errlen, "cannot write prepare's spill file in '%s': %s", cfg->data_dir, strerror(errno));
        rc = -1;
    }
    if (rc != 0) goto fail;
    list->n_sources = set->n;
    list->has_dev = set->has_dev;
    return 0;
fail:
    pmt_pair_list_free(list);
    return -1;
}

int pmt_pair_list_get(pmt_pair_list *list, long i, const char **en, const char **es, char *err, size_t errlen) {
    size_t n = (size_t)(list->offset[i + 1] - list->offset[i]);
    if (n > list->text_cap) {
        char *bigger = realloc(list->text, n);
        if (!bigger) { snprintf(err, errlen, "out of memory"); return -1; }
        list->text = bigger;
        list->text_cap = n;
    }
    int fd = fileno(list->spill);
    size_t done = 0;
    while (done < n) {
        ssize_t got = pread(fd, list->text + done, n - done, (off_t)(list->offset[i] + done));
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0) {
            snprintf(err, errlen, "cannot read back prepare's spill file: %s", got < 0 ? strerror(errno) : "it ended early");
            return -1;
        }
        done += (size_t)got;
    }
    *en = list->text;
    *es = list->text + strlen(list->text) + 1;
    return 0;
}

void pmt_pair_list_free(pmt_pair_list *list) {
    if (list->spill) fclose(list->spill);
    free(list->offset);
    free(list->en_hash);
    free(list->sources);
    free(list->text);
    memset(list, 0, sizeof *list);
}

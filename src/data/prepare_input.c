/*
 * prepare_input.c — reading and cleaning the parallel corpus for prepare.
 *
 * Why whole-file buffers: the corpus is a few MB, so reading each input file
 * into one buffer and cutting it in place (NUL at tabs/newlines, whitespace
 * normalized in place) gives every pair two pointers and no per-line
 * allocation. Bad input (invalid UTF-8, a TSV line without a tab) is counted
 * and reported with its line number, never fatal: one broken line in 10^5
 * should not stop a run. Missing files, misaligned files and an empty result
 * are fatal, with a message saying what to do.
 */
#include "data/prepare_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/strmap.h"
#include "core/text.h"
#include "core/utf8.h"

enum { REPORT_FIRST = 5 };  /* bad lines reported individually before just counting */

/* Reads a whole file into a malloc'd NUL-terminated buffer. */
static char *read_whole_file(const char *path, size_t *size, char *err, size_t errlen) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, errlen, "cannot open input '%s': %s (see scripts/get_data.sh to fetch the corpus)",
                 path, strerror(errno));
        return NULL;
    }
    size_t cap = 1 << 20, len = 0;
    char *buf = malloc(cap + 1);
    while (buf) {
        size_t got = fread(buf + len, 1, cap - len, f);
        len += got;
        if (len < cap) break;
        char *bigger = realloc(buf, 2 * cap + 1);
        if (!bigger) { free(buf); buf = NULL; break; }
        buf = bigger;
        cap *= 2;
    }
    int read_failed = ferror(f);
    if (fclose(f) != 0) read_failed = 1;
    if (!buf) { snprintf(err, errlen, "out of memory reading '%s'", path); return NULL; }
    if (read_failed) {
        snprintf(err, errlen, "read error in input '%s'", path);
        free(buf);
        return NULL;
    }
    buf[len] = '\0';
    *size = len;
    return buf;
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

/* State of one cleaning pass: the config limits, the dedup set, the output
 * list and the counters/reporting of skipped lines. */
typedef struct {
    const pmt_config *cfg;
    FILE *log;
    pmt_strmap seen;
    char *key_arena;        /* "en\tes" keys for dedup, sized for the input */
    size_t key_used;
    pmt_pair_list *list;
    pmt_prepare_stats *stats;
    long reported_invalid, reported_malformed;
} cleaner;

/* Reports one skipped line (file:line: why) until REPORT_FIRST were shown. */
static void report_bad_line(cleaner *cl, long *reported, const char *file, long line_no, const char *what) {
    if (cl->log && (*reported)++ < REPORT_FIRST)
        fprintf(cl->log, "prepare: warning: %s:%ld: %s; line skipped\n", file, line_no, what);
}

/* After the pass: how many more bad lines were skipped without a report. */
static void report_bad_line_totals(cleaner *cl) {
    if (!cl->log) return;
    long more_invalid = cl->stats->dropped.invalid_utf8 - REPORT_FIRST;
    long more_malformed = cl->stats->dropped.malformed - REPORT_FIRST;
    if (more_invalid > 0) fprintf(cl->log, "prepare: warning: %ld more lines with invalid UTF-8 skipped\n", more_invalid);
    if (more_malformed > 0) fprintf(cl->log, "prepare: warning: %ld more lines without a tab skipped\n", more_malformed);
}

/* 1 if the pair (already normalized) was seen before; remembers it if not. */
static int is_duplicate(cleaner *cl, const char *en, size_t en_len, const char *es, size_t es_len, int *oom) {
    char *key = cl->key_arena + cl->key_used;
    memcpy(key, en, en_len);
    key[en_len] = '\t';
    memcpy(key + en_len + 1, es, es_len);
    size_t key_len = en_len + 1 + es_len;
    int inserted = 0;
    if (!pmt_strmap_get_or_insert(&cl->seen, key, key_len, 0, &inserted)) { *oom = 1; return 0; }
    if (inserted) cl->key_used += key_len;
    return !inserted;
}

/* Applies every cleaning rule to one raw pair; appends it when it survives.
 * Returns -1 only when out of memory. */
static int clean_pair(cleaner *cl, char *en, size_t en_len, char *es, size_t es_len, const char *file, long line_no) {
    pmt_drop_counts *drop = &cl->stats->dropped;
    if (!pmt_utf8_valid(en, en_len) || !pmt_utf8_valid(es, es_len)) {
        drop->invalid_utf8++;
        report_bad_line(cl, &cl->reported_invalid, file, line_no, "invalid UTF-8");
        return 0;
    }
    en_len = pmt_text_normalize_space(en, en_len);
    es_len = pmt_text_normalize_space(es, es_len);
    if (en_len == 0 || es_len == 0) { drop->empty++; return 0; }
    int en_words = pmt_text_word_count(en), es_words = pmt_text_word_count(es);
    if (en_words > cl->cfg->max_words || es_words > cl->cfg->max_words) { drop->too_long++; return 0; }
    int longer = en_words > es_words ? en_words : es_words, shorter = en_words > es_words ? es_words : en_words;
    if ((double)longer > cl->cfg->max_ratio * (double)shorter) { drop->length_ratio++; return 0; }
    int oom = 0;
    if (is_duplicate(cl, en, en_len, es, es_len, &oom)) { drop->duplicate++; return 0; }
    if (oom) return -1;
    pmt_pair *p = &cl->list->pairs[cl->list->n++];
    p->side[PMT_SIDE_EN] = en;
    p->side[PMT_SIDE_ES] = es;
    return 0;
}

/* Allocates the output pairs, the dedup map and its key arena; the arena
 * holds every "en\tes" key, which never exceed the input bytes plus one
 * tab per line, so it is sized once and keys never move. */
static int cleaner_init(cleaner *cl, const pmt_config *cfg, FILE *log, pmt_pair_list *list,
                        pmt_prepare_stats *stats, long max_pairs, size_t input_bytes) {
    memset(cl, 0, sizeof *cl);
    cl->cfg = cfg;
    cl->log = log;
    cl->list = list;
    cl->stats = stats;
    list->pairs = malloc((size_t)(max_pairs > 0 ? max_pairs : 1) * sizeof *list->pairs);
    cl->key_arena = malloc(input_bytes + (size_t)max_pairs + 1);
    if (!list->pairs || !cl->key_arena || pmt_strmap_init(&cl->seen, (size_t)max_pairs) != 0) return -1;
    return 0;
}

/* Frees the dedup state (the pair list lives on in the caller). */
static void cleaner_free(cleaner *cl) {
    pmt_strmap_free(&cl->seen);
    free(cl->key_arena);
}

/* TSV mode: English<TAB>Spanish[<TAB>ignored...]. */
static int clean_tsv(cleaner *cl, char *buf, size_t size, const char *path) {
    line_cursor cur;
    cursor_init(&cur, buf, size);
    char *line;
    size_t len;
    while (cursor_next(&cur, &line, &len)) {
        cl->stats->input_lines++;
        char *tab = memchr(line, '\t', len);
        if (!tab) {
            if (len == 0) { cl->stats->dropped.empty++; continue; }
            cl->stats->dropped.malformed++;
            report_bad_line(cl, &cl->reported_malformed, path, cur.line_no, "no tab between English and Spanish");
            continue;
        }
        char *es = tab + 1;
        char *es_end = memchr(es, '\t', (size_t)(line + len - es));
        if (!es_end) es_end = line + len;
        *tab = '\0';
        *es_end = '\0';
        if (clean_pair(cl, line, (size_t)(tab - line), es, (size_t)(es_end - es), path, cur.line_no) != 0) return -1;
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
        cl->stats->input_lines++;
        const char *bad_file = pmt_utf8_valid(line[0], len[0]) ? paths[1] : paths[0];
        if (clean_pair(cl, line[0], len[0], line[1], len[1], bad_file, cur[0].line_no) != 0) return -1;
    }
    return 0;
}

/* One cleaning pass over the loaded input in TSV or aligned mode. */
static int run_cleaner(const pmt_config *cfg, FILE *log, pmt_pair_list *list, pmt_prepare_stats *stats,
                       int aligned, size_t sizes[2], const char *paths[2], char *err, size_t errlen) {
    long max_pairs = count_lines(list->buffers[0], sizes[0]);
    cleaner cl;
    int rc = cleaner_init(&cl, cfg, log, list, stats, max_pairs, sizes[0] + sizes[1]);
    if (rc == 0) rc = aligned ? clean_aligned(&cl, list->buffers, sizes, paths)
                              : clean_tsv(&cl, list->buffers[0], sizes[0], paths[0]);
    if (rc != 0) snprintf(err, errlen, "out of memory while cleaning the corpus");
    else report_bad_line_totals(&cl);
    cleaner_free(&cl);
    return rc;
}

/* Decides TSV or aligned mode from cfg; fills paths. 0 or -1 with err. */
static int input_paths(const pmt_config *cfg, int *aligned, const char *paths[2], char *err, size_t errlen) {
    int have_src = cfg->src_file[0] != '\0', have_tgt = cfg->tgt_file[0] != '\0';
    if (have_src != have_tgt) {
        snprintf(err, errlen, "aligned input needs both --src-file (English) and --tgt-file (Spanish); only %s was given",
                 have_src ? "--src-file" : "--tgt-file");
        return -1;
    }
    if (have_src && cfg->corpus[0]) {
        snprintf(err, errlen, "give either --corpus FILE or --src-file/--tgt-file, not both");
        return -1;
    }
    if (!have_src && !cfg->corpus[0]) {
        snprintf(err, errlen, "no input: give --corpus spa.txt (English<TAB>Spanish lines; scripts/get_data.sh "
                 "finds or downloads it) or --src-file EN --tgt-file ES");
        return -1;
    }
    *aligned = have_src;
    paths[0] = have_src ? cfg->src_file : cfg->corpus;
    paths[1] = have_src ? cfg->tgt_file : NULL;
    return 0;
}

int pmt_prepare_read_pairs(const pmt_config *cfg, FILE *log, pmt_pair_list *list,
                           pmt_prepare_stats *stats, char *err, size_t errlen) {
    memset(list, 0, sizeof *list);
    int aligned = 0;
    const char *paths[2];
    size_t sizes[2] = {0, 0};
    if (input_paths(cfg, &aligned, paths, err, errlen) != 0) return -1;
    for (int f = 0; f < 1 + aligned; f++)
        if (!(list->buffers[f] = read_whole_file(paths[f], &sizes[f], err, errlen))) goto fail;
    if (aligned) {
        long n_en = count_lines(list->buffers[0], sizes[0]), n_es = count_lines(list->buffers[1], sizes[1]);
        if (n_en != n_es) {
            snprintf(err, errlen, "aligned files differ in length: '%s' has %ld lines but '%s' has %ld; "
                     "line i of one must translate line i of the other", paths[0], n_en, paths[1], n_es);
            goto fail;
        }
    }
    if (run_cleaner(cfg, log, list, stats, aligned, sizes, paths, err, errlen) != 0) goto fail;
    stats->kept_pairs = list->n;
    if (list->n == 0) {
        snprintf(err, errlen, "no sentence pairs left after cleaning %s (%ld input lines): check the input "
                 "format (English<TAB>Spanish per line) and --max-words/--max-ratio", paths[0], stats->input_lines);
        goto fail;
    }
    return 0;
fail:
    pmt_pair_list_free(list);
    return -1;
}

void pmt_pair_list_free(pmt_pair_list *list) {
    free(list->pairs);
    free(list->buffers[0]);
    free(list->buffers[1]);
    memset(list, 0, sizeof *list);
}

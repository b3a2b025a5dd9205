/*
 * prepare_sources.c — which corpora `projmt prepare` reads: the settings
 * (corpus / src_file+tgt_file, each `source` line, dev_file) turned into
 * source specs, and the markup rule a source can ask for.
 *
 * Why one spec syntax for --source and --dev-file: a dev set is just another
 * source with a different role, so the same columns, pair and .gz forms
 * apply (syntax in prepare_internal.h). Why the existing flags stay the
 * primary source: the quick start and every prepared data dir so far use
 * them, and a run with only them must give the same files as before.
 */
#include "data/prepare_internal.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>


/* Copies src[0..n) into dst[cap] as a string; -1 when it does not fit. */
static int copy_part(char *dst, size_t cap, const char *src, size_t n) {
    if (n >= cap) return -1;
    memcpy(dst, src, n);
    dst[n] = '\0';
    return 0;
}

/* The default row name: the file's base name without .gz/.tsv/.txt and,
 * for a pair, without the language suffix. */
static void default_name(pmt_source_spec *spec) {
    const char *slash = strrchr(spec->path, '/');
    const char *base = slash ? slash + 1 : spec->path;
    snprintf(spec->name, sizeof spec->name, "%.63s", base);
    static const char *const suffixes[] = {".gz", ".tsv", ".txt", ".en", ".en-es", ".es-en"};
    for (int again = 1; again;) {
        again = 0;
        for (size_t i = 0; i < sizeof suffixes / sizeof suffixes[0]; i++) {
            size_t n = strlen(spec->name), k = strlen(suffixes[i]);
            if (n > k && !strcmp(spec->name + n - k, suffixes[i])) { spec->name[n - k] = '\0'; again = 1; }
        }
    }
}

/* Applies one OPTION ("key=value" or "primary") to spec. 0 or -1 with err. */
static int apply_option(pmt_source_spec *spec, const char *text, const char *opt, size_t len, char *err,
                        size_t errlen) {
    char item[256];
    if (copy_part(item, sizeof item, opt, len) != 0) {
        snprintf(err, errlen, "source '%s': option '%.*s...' is too long", text, 40, opt);
        return -1;
    }
    char *value = strchr(item, '=');
    if (value) *value++ = '\0';
    const char *key = item;
    if (!strcmp(key, "primary") && !value) { spec->primary = 1; return 0; }
    if (!value) {
        snprintf(err, errlen, "source '%s': option '%s' needs a value (key=value; see --help)", text, key);
        return -1;
    }
    char what[512];
    snprintf(what, sizeof what, "%s= in source '%.200s'", key, text);
    if (!strcmp(key, "en")) return pmt_parse_int_option(what, value, 1, 1000, &spec->en_col, err, errlen);
    if (!strcmp(key, "es")) return pmt_parse_int_option(what, value, 1, 1000, &spec->es_col, err, errlen);
    if (!strcmp(key, "weight")) return pmt_parse_int_option(what, value, 1, 100, &spec->weight, err, errlen);
    if (!strcmp(key, "max_words"))
        return pmt_parse_int_option(what, value, 1, 1000000, &spec->max_words, err, errlen);
    if (!strcmp(key, "max_ratio")) {
        char *end = NULL;
        double v = strtod(value, &end);
        if (end == value || *end || !(v >= 1.0 && v <= 1e6)) {
            snprintf(err, errlen, "invalid value '%s' for %s: need a number >= 1", value, what);
            return -1;
        }
        spec->max_ratio = v;
        return 0;
    }
    if (!strcmp(key, "markup")) {
        if (strcmp(value, "drop") && strcmp(value, "keep")) {
            snprintf(err, errlen, "invalid value '%s' for %s: need drop or keep", value, what);
            return -1;
        }
        spec->drop_markup = !strcmp(value, "drop");
        return 0;
    }
    if (!strcmp(key, "name")) {
        if (!value[0] || copy_part(spec->name, sizeof spec->name, value, strlen(value)) != 0) {
            snprintf(err, errlen, "invalid value '%s' for %s: need 1 to %zu characters", value, what,
                     sizeof spec->name - 1);
            return -1;
        }
        return 0;
    }
    snprintf(err, errlen, "source '%s': unknown option '%s' (known: en, es, weight, name, max_words, max_ratio, "
             "markup, primary)", text, key);
    return -1;
}

/* A spec with every option at its default (cfg's global limits). */
static void spec_defaults(pmt_source_spec *spec, const pmt_config *cfg) {
    memset(spec, 0, sizeof *spec);
    spec->en_col = 1;
    spec->es_col = 2;
    spec->weight = 1;
    spec->max_words = cfg->max_words;
    spec->max_ratio = cfg->max_ratio;
}

int pmt_source_spec_parse(const char *text, const pmt_config *cfg, pmt_source_spec *spec, char *err,
                          size_t errlen) {
    spec_defaults(spec, cfg);
    const char *colon = strrchr(text, ':');
    if (colon && strchr(colon, '/')) colon = NULL;   /* a ':' inside a folder name */
    size_t path_len = colon ? (size_t)(colon - text) : strlen(text);
    const char *plus = memchr(text, '+', path_len);
    size_t en_len = plus ? (size_t)(plus - text) : path_len;
    if (en_len == 0 || (plus && plus + 1 == text + path_len)) {
        snprintf(err, errlen, "source '%s' names no file (PATH[:OPTIONS] or EN_PATH+ES_PATH[:OPTIONS])", text);
        return -1;
    }
    if (copy_part(spec->path, sizeof spec->path, text, en_len) != 0 ||
        (plus && copy_part(spec->es_path, sizeof spec->es_path, plus + 1, (size_t)(text + path_len - plus - 1)) != 0)) {
        snprintf(err, errlen, "source '%.100s...': path too long", text);
        return -1;
    }
    default_name(spec);
    for (const char *opt = colon ? colon + 1 : ""; *opt;) {
        size_t len = strcspn(opt, ",");
        if (len > 0 && apply_option(spec, text, opt, len, err, errlen) != 0) return -1;
        opt += len + (opt[len] == ',');
    }
    int columns_given = spec->en_col != 1 || spec->es_col != 2;
    if (plus && columns_given) {
        snprintf(err, errlen, "source '%s': en=/es= choose TSV columns; an EN+ES file pair has none", text);
        return -1;
    }
    if (spec->en_col == spec->es_col) {
        snprintf(err, errlen, "source '%s': en= and es= name the same column %d", text, spec->en_col);
        return -1;
    }
    return 0;
}

int pmt_source_set_from_config(const pmt_config *cfg, pmt_source_set *set, char *err, size_t errlen) {
    memset(set, 0, sizeof *set);
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
    if (have_src || cfg->corpus[0]) {
        /* the paths are taken as they are: no OPTIONS, no '+' */
        pmt_source_spec *p = &set->spec[set->n++];
        spec_defaults(p, cfg);
        snprintf(p->path, sizeof p->path, "%s", have_src ? cfg->src_file : cfg->corpus);
        if (have_src) snprintf(p->es_path, sizeof p->es_path, "%s", cfg->tgt_file);
        p->primary = 1;
        default_name(p);
    }
    int primaries = set->n;
    for (const char *line = cfg->sources; *line;) {
        size_t len = strcspn(line, "\n");
        char text[PMT_SOURCES_TEXT];
        memcpy(text, line, len);
        text[len] = '\0';
        line += len + (line[len] == '\n');
        if (len == 0) continue;
        if (set->n == PMT_MAX_SOURCES) {
            snprintf(err, errlen, "too many sources: at most %d in one run (with the primary)", PMT_MAX_SOURCES);
            return -1;
        }
        pmt_source_spec *s = &set->spec[set->n];
        if (pmt_source_spec_parse(text, cfg, s, err, errlen) != 0) return -1;
        if (s->primary && primaries++ > 0) {
            snprintf(err, errlen, "source '%s' is marked primary, but %s is already the primary source (valid/test "
                     "come from one source only)", text, set->spec[0].path);
            return -1;
        }
        if (s->primary && set->n > 0) {   /* the primary goes first: it wins dedup and gives valid/test */
            pmt_source_spec primary = *s;
            memmove(&set->spec[1], &set->spec[0], (size_t)set->n * sizeof *s);
            set->spec[0] = primary;
        }
        set->n++;
    }
    if (set->n == 0) {
        snprintf(err, errlen, "no input: give --corpus spa.txt (English<TAB>Spanish lines; scripts/get_data.sh "
                 "finds or downloads it), --src-file EN --tgt-file ES, or --source SPEC");
        return -1;
    }
    set->spec[0].primary = 1;
    if (cfg->dev_file[0]) {
        if (pmt_source_spec_parse(cfg->dev_file, cfg, &set->dev, err, errlen) != 0) return -1;
        if (set->dev.weight != 1 || set->dev.primary) {
            snprintf(err, errlen, "dev_file '%s': weight= and primary do not apply to the dev set", cfg->dev_file);
            return -1;
        }
        if (!strstr(cfg->dev_file, "name=")) snprintf(set->dev.name, sizeof set->dev.name, "dev");
        set->dev.is_dev = 1;
        set->has_dev = 1;
    }
    return 0;
}

/* ---- markup ----------------------------------------------------------- */

/* A reST role ends at colon (the ':' of ":`"): ":name:`" (":dom:name:`"
 * ends the same way). */
static int role_before(const char *text, const char *colon) {
    const char *p = colon;
    while (p > text && (islower((unsigned char)p[-1]) || isdigit((unsigned char)p[-1]) || p[-1] == '-' ||
                        p[-1] == '_'))
        p--;
    return p < colon && p > text && p[-1] == ':';
}

int pmt_looks_like_markup(const char *text) {
    if (strstr(text, "``") || strstr(text, ">>>") || !strncmp(text, ".. ", 3)) return 1;
    for (const char *p = text; (p = strstr(p, ":`")) != NULL; p++)
        if (role_before(text, p)) return 1;
    const char *link = strstr(text, "`_");
    if (link && memchr(text, '`', (size_t)(link - text))) return 1;
    for (const char *p = text; (p = strchr(p, '<')) != NULL; p++)
        if ((isalpha((unsigned char)p[1]) || p[1] == '/') && strchr(p, '>')) return 1;
    return 0;
}

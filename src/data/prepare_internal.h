/*
 * prepare_internal.h — the pieces of `projmt prepare` shared between its
 * source files (prepare.c runs the pipeline, prepare_sources.c turns the
 * settings into source specs, prepare_input.c reads and cleans,
 * prepare_manifest.c reports). Not part of the public API.
 *
 * Source spec syntax (--source, --dev-file; cfg->sources holds one a line):
 *
 *   PATH[:OPTIONS]            a TSV file, English in column 1, Spanish in 2
 *   EN_PATH+ES_PATH[:OPTIONS] two line-aligned files (Moses form)
 *
 * OPTIONS, comma-separated: en=COL,es=COL (1-based TSV columns), weight=N
 * (training copies of each kept pair, 1..100), name=NAME (the table's row),
 * max_words=N and max_ratio=X (this source's limits; default the global
 * ones), markup=drop|keep (drop pairs with reST roles, ``literals``,
 * `links`_, ".. " directives, ">>>" prompts or <tags>), primary (this source
 * is the primary one: valid/test come from it). Everything after the last
 * ':' is OPTIONS unless it holds a '/'; a path with a ':' in its last part
 * needs a trailing ':'. Any file may be gzip'd (found by its magic bytes).
 *
 * Ownership: pmt_pair_list owns the raw file buffers; every pmt_pair points
 * into them, so pairs stay valid until pmt_pair_list_free.
 */
#ifndef PROJMT_PREPARE_INTERNAL_H
#define PROJMT_PREPARE_INTERNAL_H

#include <stdio.h>
#include "core/config.h"
#include "core/fileio.h"
#include "data/prepare.h"

/* One input source as the user described it. */
typedef struct pmt_source_spec {
    char name[64];
    char path[PMT_PATH_MAX];       /* the TSV, or the English file of a pair */
    char es_path[PMT_PATH_MAX];    /* the Spanish file of a pair; "" for a TSV */
    int en_col, es_col;            /* 1-based TSV columns */
    int weight;
    int max_words;
    double max_ratio;
    int drop_markup;
    int primary;                   /* marked with the option "primary" */
    int is_dev;                    /* the dev set: no length limits, no dedup */
} pmt_source_spec;

/* Every source of a run: spec[0] is the primary, dev the optional dev set. */
typedef struct pmt_source_set {
    pmt_source_spec spec[PMT_MAX_SOURCES];
    int n;
    pmt_source_spec dev;
    int has_dev;
} pmt_source_set;

/* Parses one spec (syntax above) with cfg's limits as defaults. 0 or -1
 * with err naming the spec and what is wrong. */
int pmt_source_spec_parse(const char *text, const pmt_config *cfg, pmt_source_spec *spec, char *err,
                          size_t errlen);
/* The sources cfg names (corpus or src_file/tgt_file first, then each
 * `source` line; the one marked primary moved to the front) and the dev
 * set. 0 or -1 with err. */
int pmt_source_set_from_config(const pmt_config *cfg, pmt_source_set *set, char *err, size_t errlen);
/* 1 if text looks like markup or code (the markup=drop rule). */
int pmt_looks_like_markup(const char *text);

/* One cleaned sentence pair (NUL-terminated, whitespace-normalized). */
typedef struct pmt_pair {
    const char *side[PMT_SIDES];
} pmt_pair;

enum { PMT_MAX_BUFFERS = 2 * (PMT_MAX_SOURCES + 1) };

/* The cleaned pairs of every source, in source order: source s (the dev set
 * is s = n_sources) holds pairs [first[s], first[s + 1]). */
typedef struct pmt_pair_list {
    pmt_pair *pairs;
    long n, cap;
    long first[PMT_MAX_SOURCES + 2];
    int n_sources;                    /* training sources */
    int has_dev;
    pmt_source_set *sources;          /* owned: what was read */
    char *buffers[PMT_MAX_BUFFERS];   /* file contents the pairs point into */
    int n_buffers;
} pmt_pair_list;

/* Reads every input named by cfg (sources and dev set), cleans it, and
 * fills list plus the input/drop counts of stats (totals and per source).
 * Skipped invalid lines are reported to log (may be NULL). 0, or -1 with
 * err (a missing file, a damaged .gz, aligned files of different lengths,
 * a source left empty). */
int pmt_prepare_read_pairs(const pmt_config *cfg, FILE *log, pmt_pair_list *list,
                           pmt_prepare_stats *stats, char *err, size_t errlen);
void pmt_pair_list_free(pmt_pair_list *list);

/* Writes manifest.json describing the run into the open temporary af and
 * closes (syncs) it; the caller renames it into place. 0 or -1 with err. */
int pmt_prepare_write_manifest(pmt_atomic_file *af, const pmt_config *cfg, const pmt_prepare_stats *stats,
                               char *err, size_t errlen);

#endif

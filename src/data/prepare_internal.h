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
 * Ownership: pmt_pair_list owns its spill file and arrays until
 * pmt_pair_list_free; pmt_hash_map its two arrays.
 */
#ifndef PROJMT_PREPARE_INTERNAL_H
#define PROJMT_PREPARE_INTERNAL_H

#include <stdint.h>
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

/* A map from 64-bit hashes to int (open addressing, linear probing): the
 * dedup set of pass 1 and the English-sentence groups of the split hold a
 * hash per pair instead of its text, so their memory is 8-16 bytes a pair
 * whatever the sentences' length. Hash 0 is stored as 1 (0 marks an empty
 * slot). Two different keys share a 64-bit hash with probability about
 * n^2 / 2^65: 3e-6 for 10M pairs, 4e-10 for spa.txt. */
typedef struct pmt_hash_map {
    uint64_t *key;
    int *value;
    size_t cap, n;      /* cap a power of two; n <= 0.7 cap */
} pmt_hash_map;

/* An empty map sized for about expected keys; 0 or -1 (out of memory). */
int pmt_hash_map_init(pmt_hash_map *m, size_t expected);
/* The value of key, inserting it with value when absent (*inserted = 1);
 * NULL when out of memory (growing). */
int *pmt_hash_map_get_or_insert(pmt_hash_map *m, uint64_t key, int value, int *inserted);
/* The value of key, or NULL when absent. */
const int *pmt_hash_map_find(const pmt_hash_map *m, uint64_t key);
void pmt_hash_map_free(pmt_hash_map *m);
/* A 64-bit hash of bytes (the same on every machine: splits repeat). */
uint64_t pmt_hash_bytes(const void *data, size_t n, uint64_t seed);

/* The cleaned pairs of every source, in source order: source s (the dev set
 * is s = n_sources) holds pairs [first[s], first[s + 1]). The text waits in
 * a spill file (unlinked at creation: it disappears with the process), so
 * memory holds 16 bytes a pair: where its text is, and the hash of its
 * English side (grouping and the held-out rule). */
typedef struct pmt_pair_list {
    FILE *spill;                      /* "en\0es\0" per pair */
    uint64_t *offset;                 /* [n + 1]: pair i is spill bytes [offset[i], offset[i + 1]) */
    uint64_t *en_hash;                /* [n] */
    long n, cap;
    long first[PMT_MAX_SOURCES + 2];
    int n_sources;                    /* training sources */
    int has_dev;
    pmt_source_set *sources;          /* owned: what was read */
    char *text;                       /* pmt_pair_list_get's buffer */
    size_t text_cap;
} pmt_pair_list;

/* Reads every input named by cfg (sources and dev set) line by line,
 * cleans it, and fills list (spill file in cfg->data_dir) plus the
 * input/drop counts of stats (totals and per source). Skipped invalid lines
 * are reported to log (may be NULL). 0, or -1 with err (a missing file, a
 * damaged .gz, aligned files of different lengths, a source left empty). */
int pmt_prepare_read_pairs(const pmt_config *cfg, FILE *log, pmt_pair_list *list,
                           pmt_prepare_stats *stats, char *err, size_t errlen);
/* Pair i's two sides (valid until the next call); 0, or -1 with err. */
int pmt_pair_list_get(pmt_pair_list *list, long i, const char **en, const char **es, char *err, size_t errlen);
void pmt_pair_list_free(pmt_pair_list *list);

/* Writes manifest.json describing the run into the open temporary af and
 * closes (syncs) it; the caller renames it into place. 0 or -1 with err. */
int pmt_prepare_write_manifest(pmt_atomic_file *af, const pmt_config *cfg, const pmt_prepare_stats *stats,
                               char *err, size_t errlen);

#endif

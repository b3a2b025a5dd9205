/*
 * prepare.h — `projmt prepare`: clean, split and tokenize a parallel corpus.
 *
 * Input: the primary corpus, an Anki/Tatoeba TSV (cfg->corpus,
 * `English<TAB>Spanish[<TAB>...]`) or two line-aligned text files
 * (cfg->src_file English, cfg->tgt_file Spanish), plus any further sources
 * (cfg->sources, one spec a line, syntax in prepare_internal.h: TSV with a
 * column choice or an aligned file pair, either possibly gzip'd, each with a
 * weight and its own cleaning limits) and optionally a dev set
 * (cfg->dev_file). Pipeline: read + clean every source (trim, collapse
 * whitespace, drop invalid UTF-8 / malformed / empty / duplicate — also of a
 * pair an earlier source had — / too long / bad length ratio / markup) →
 * seeded shuffle of the primary source alone and split into
 * train/valid/test exactly as with that source alone (all translations of
 * one English sentence land in the same split) → other sources to training
 * only, weight times each, without any pair whose English sentence is in
 * valid/test → one joint SentencePiece model trained on the training split
 * only → every split encoded.
 *
 * Outputs in cfg->data_dir: spm.model, spm.vocab, {train,valid,test}.tok
 * (format in corpus.h), {train,valid,test}.{en,es} (cleaned text, one
 * sentence per line) and manifest.json (statistics, written last). Every file
 * is written under a temporary name and renamed only when all succeeded, so
 * a failed or interrupted run never leaves a complete-looking data dir.
 *
 * Ownership: the caller owns cfg, log and stats; nothing is retained.
 */
#ifndef PROJMT_PREPARE_H
#define PROJMT_PREPARE_H

#include <stdio.h>
#include "core/config.h"

enum { PMT_SPLIT_TRAIN = 0, PMT_SPLIT_VALID = 1, PMT_SPLIT_TEST = 2, PMT_SPLITS = 3 };
enum { PMT_SIDE_EN = 0, PMT_SIDE_ES = 1, PMT_SIDES = 2 };
/* Training sources of one run (the primary included), besides a dev set. */
enum { PMT_MAX_SOURCES = 16 };

/* Why each dropped input line was dropped (one count per reason). */
typedef struct pmt_drop_counts {
    long invalid_utf8;   /* a side is not well-formed UTF-8 (or holds a NUL) */
    long malformed;      /* TSV line without a tab / without the chosen columns */
    long empty;          /* a side is empty after whitespace cleanup */
    long duplicate;      /* exact repeat of an earlier (English, Spanish) pair */
    long too_long;       /* a side has more than max_words words */
    long length_ratio;   /* longer side / shorter side (in words) > max_ratio */
    long markup;         /* a side looks like markup or code (source option markup=drop) */
    long held_out;       /* training pair whose English sentence is in valid/test */
} pmt_drop_counts;

/* One source's row of the per-source table (summary and manifest.json). */
typedef struct pmt_source_stats {
    char name[64];
    const char *role;    /* "primary", "extra" or "dev" (static strings) */
    int weight;          /* training copies of each kept pair */
    long input_lines;
    pmt_drop_counts dropped;
    long kept_pairs;     /* distinct pairs used (input_lines = kept + dropped) */
    long split_pairs[PMT_SPLITS]; /* pairs in train (weighted copies counted), valid, test */
} pmt_source_stats;

/* Sentence length distribution in SentencePiece tokens (nearest-rank). */
typedef struct pmt_length_stats {
    int p50, p90, p99, max;
} pmt_length_stats;

typedef struct pmt_split_stats {
    long pairs;
    long tokens[PMT_SIDES];
    long unk_tokens[PMT_SIDES];
    pmt_length_stats length[PMT_SIDES];
} pmt_split_stats;

typedef struct pmt_prepare_stats {
    long input_lines;          /* totals over every source (the dev set included) */
    pmt_drop_counts dropped;
    long kept_pairs;
    int n_sources;             /* rows of source: training sources, primary first, then the dev set */
    pmt_source_stats source[PMT_MAX_SOURCES + 1];
    pmt_split_stats split[PMT_SPLITS];
    int vocab_size;            /* actual size of the trained model */
    int vocab_used_in_train;   /* distinct ids occurring in the encoded train split */
    /* Wall-clock seconds per phase. seconds_write (manifest + renames) is in
     * the printed summary only: the manifest is written during that phase. */
    double seconds_read, seconds_split, seconds_spm, seconds_encode, seconds_write, seconds_total;
} pmt_prepare_stats;

/*
 * Runs the whole pipeline for cfg (fields corpus, src_file, tgt_file,
 * sources, dev_file, data_dir, valid_size, test_size, max_words, max_ratio, vocab_size,
 * spm_model_type, character_coverage, seed). Warnings (invalid UTF-8 lines
 * with their line numbers, first few then a count) go to log (may be NULL).
 * Returns 0 with stats filled, or -1 with a message in err and no new output
 * left behind.
 */
int pmt_prepare(const pmt_config *cfg, FILE *log, pmt_prepare_stats *stats, char *err, size_t errlen);

/* Prints the short human summary of a finished run. */
void pmt_prepare_print_summary(FILE *out, const pmt_config *cfg, const pmt_prepare_stats *stats);

#endif

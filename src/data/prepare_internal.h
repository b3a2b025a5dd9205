/*
 * prepare_internal.h — the pieces of `projmt prepare` shared between its
 * source files (prepare.c runs the pipeline, prepare_input.c reads and
 * cleans, prepare_manifest.c reports). Not part of the public API.
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

/* One cleaned sentence pair (NUL-terminated, whitespace-normalized). */
typedef struct pmt_pair {
    const char *side[PMT_SIDES];
} pmt_pair;

typedef struct pmt_pair_list {
    pmt_pair *pairs;
    long n;
    char *buffers[2];   /* file contents the pairs point into */
} pmt_pair_list;

/* Reads the input named by cfg (TSV corpus or aligned src/tgt files),
 * cleans it, and fills list plus the input/drop counts of stats. Skipped
 * invalid lines are reported to log (may be NULL). 0, or -1 with err. */
int pmt_prepare_read_pairs(const pmt_config *cfg, FILE *log, pmt_pair_list *list,
                           pmt_prepare_stats *stats, char *err, size_t errlen);
void pmt_pair_list_free(pmt_pair_list *list);

/* Writes manifest.json describing the run into the open temporary af and
 * closes (syncs) it; the caller renames it into place. 0 or -1 with err. */
int pmt_prepare_write_manifest(pmt_atomic_file *af, const pmt_config *cfg, const pmt_prepare_stats *stats,
                               char *err, size_t errlen);

#endif

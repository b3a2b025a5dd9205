/*
 * strmap.h — a hash map from byte strings to int, for corpus deduplication
 * and for grouping pairs by their English side during the split.
 *
 * Why its own: C has none, and prepare needs one that is fast on ~10^5 short
 * keys and deterministic (no per-process hash seed), so splits repeat.
 *
 * Ownership: the map owns its slot table only. Keys are NOT copied: the
 * caller keeps every inserted key alive (e.g. the loaded corpus buffer)
 * until pmt_strmap_free.
 */
#ifndef PROJMT_STRMAP_H
#define PROJMT_STRMAP_H

#include <stddef.h>
#include <stdint.h>

typedef struct pmt_strmap_slot {
    const char *key;   /* NULL = empty slot */
    size_t len;
    uint64_t hash;
    int value;
} pmt_strmap_slot;

typedef struct pmt_strmap {
    pmt_strmap_slot *slots;
    size_t capacity;   /* power of two */
    size_t count;
} pmt_strmap;

/* 0, or -1 when out of memory. */
int pmt_strmap_init(pmt_strmap *m, size_t expected_keys);
void pmt_strmap_free(pmt_strmap *m);
/* Finds key; if absent inserts it with `value`. Returns the slot's value
 * pointer (existing or new) and sets *inserted; NULL when out of memory. */
int *pmt_strmap_get_or_insert(pmt_strmap *m, const char *key, size_t len, int value, int *inserted);

#endif

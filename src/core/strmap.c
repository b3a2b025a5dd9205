/*
 * strmap.c — see strmap.h. Open addressing with linear probing, FNV-1a
 * hashes, kept at most half full so probes stay short.
 */
#include "core/strmap.h"

#include <stdlib.h>
#include <string.h>

static uint64_t fnv1a(const char *s, size_t n) {
    uint64_t h = 1469598103934665603ULL;
    for (size_t i = 0; i < n; i++) { h ^= (unsigned char)s[i]; h *= 1099511628211ULL; }
    return h;
}

int pmt_strmap_init(pmt_strmap *m, size_t expected_keys) {
    size_t cap = 16;
    while (cap < 2 * expected_keys) cap *= 2;
    m->slots = calloc(cap, sizeof *m->slots);
    m->capacity = m->slots ? cap : 0;
    m->count = 0;
    return m->slots ? 0 : -1;
}

void pmt_strmap_free(pmt_strmap *m) {
    free(m->slots);
    memset(m, 0, sizeof *m);
}

/* The slot holding key, or the empty slot where it belongs. */
static pmt_strmap_slot *find_slot(pmt_strmap_slot *slots, size_t cap, const char *key, size_t len, uint64_t h) {
    for (size_t i = (size_t)h & (cap - 1);; i = (i + 1) & (cap - 1)) {
        pmt_strmap_slot *s = &slots[i];
        if (!s->key || (s->hash == h && s->len == len && memcmp(s->key, key, len) == 0)) return s;
    }
}

static int grow(pmt_strmap *m) {
    size_t cap = m->capacity * 2;
    pmt_strmap_slot *slots = calloc(cap, sizeof *slots);
    if (!slots) return -1;
    for (size_t i = 0; i < m->capacity; i++) {
        pmt_strmap_slot *old = &m->slots[i];
        if (old->key) *find_slot(slots, cap, old->key, old->len, old->hash) = *old;
    }
    free(m->slots);
    m->slots = slots;
    m->capacity = cap;
    return 0;
}

int *pmt_strmap_get_or_insert(pmt_strmap *m, const char *key, size_t len, int value, int *inserted) {
    if (2 * (m->count + 1) > m->capacity && grow(m) != 0) return NULL;
    uint64_t h = fnv1a(key, len);
    pmt_strmap_slot *s = find_slot(m->slots, m->capacity, key, len, h);
    *inserted = s->key == NULL;
    if (*inserted) {
        s->key = key;
        s->len = len;
        s->hash = h;
        s->value = value;
        m->count++;
    }
    return &s->value;
}

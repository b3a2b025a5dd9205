/*
 * fake_corpus.h — a made-up English/Spanish sentence generator for the data
 * tests (spm, prepare). The test data rules forbid copying corpus sentences,
 * so tests build their own from small word lists; the Spanish side carries
 * accents and ¿ ¡ ñ so tokenization of non-ASCII text is exercised.
 *
 * Header-only (static inline functions): each test binary links only testutil.c.
 * Ownership: callers provide the output buffers.
 */
#ifndef PROJMT_TEST_FAKE_CORPUS_H
#define PROJMT_TEST_FAKE_CORPUS_H

#include <stdio.h>

typedef struct { const char *en, *es; } fake_word;

static const fake_word fake_subjects[] = {
    {"I", "Yo"}, {"You", "Tú"}, {"The boy", "El niño"}, {"The girl", "La niña"}, {"My mother", "Mi madre"},
    {"Tom", "Tom"}, {"The teacher", "El profesor"}, {"Our neighbour", "Nuestro vecino"},
};
static const fake_word fake_verbs[] = {
    {"sees", "ve"}, {"wants", "quiere"}, {"enjoys", "disfruta"}, {"buys", "compra"},
    {"finds", "encuentra"}, {"remembers", "recuerda"}, {"paints", "pinta"},
};
static const fake_word fake_objects[] = {
    {"the apple", "la manzana"}, {"the year", "el año"}, {"the coffee", "el café"},
    {"the song", "la canción"}, {"the train", "el tren"}, {"the mountain", "la montaña"},
    {"the bread", "el pan"}, {"the water", "el agua"}, {"the book", "el libro"},
    {"the house", "la casa"}, {"the city", "la ciudad"}, {"the music", "la música"},
    {"the beach", "la playa"},
};
enum {
    FAKE_N_SUBJECTS = sizeof fake_subjects / sizeof fake_subjects[0],
    FAKE_N_VERBS = sizeof fake_verbs / sizeof fake_verbs[0],
    FAKE_N_OBJECTS = sizeof fake_objects / sizeof fake_objects[0],
    /* distinct pairs fake_pair can make before repeating */
    FAKE_N_PAIRS = FAKE_N_SUBJECTS * FAKE_N_VERBS * FAKE_N_OBJECTS + 2 * FAKE_N_OBJECTS,
};

/* The i-th made-up pair (distinct for i < FAKE_N_PAIRS): mostly
 * "Subject verb object." plus "Where is X?" and "What a X!" forms. */
static inline void fake_pair(int i, char *en, size_t en_len, char *es, size_t es_len) {
    i %= FAKE_N_PAIRS;
    int svo = FAKE_N_SUBJECTS * FAKE_N_VERBS * FAKE_N_OBJECTS;
    if (i < svo) {
        const fake_word *s = &fake_subjects[i % FAKE_N_SUBJECTS];
        const fake_word *v = &fake_verbs[(i / FAKE_N_SUBJECTS) % FAKE_N_VERBS];
        const fake_word *o = &fake_objects[i / (FAKE_N_SUBJECTS * FAKE_N_VERBS)];
        snprintf(en, en_len, "%s %s %s.", s->en, v->en, o->en);
        snprintf(es, es_len, "%s %s %s.", s->es, v->es, o->es);
    } else if (i < svo + FAKE_N_OBJECTS) {
        const fake_word *o = &fake_objects[i - svo];
        snprintf(en, en_len, "Where is %s?", o->en);
        snprintf(es, es_len, "¿Dónde está %s?", o->es);
    } else {
        const fake_word *o = &fake_objects[i - svo - FAKE_N_OBJECTS];
        snprintf(en, en_len, "What a day for %s!", o->en);
        snprintf(es, es_len, "¡Qué día para %s!", o->es);
    }
}

/* Writes pairs [first, first + n) as TSV lines to f; 0 or -1. */
static inline int fake_write_tsv(FILE *f, int first, int n) {
    char en[256], es[256];
    for (int i = first; i < first + n; i++) {
        fake_pair(i, en, sizeof en, es, sizeof es);
        if (fprintf(f, "%s\t%s\n", en, es) < 0) return -1;
    }
    return 0;
}

#endif

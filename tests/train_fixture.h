/*
 * train_fixture.h — shared by the test_train_* tests: a made-up parallel
 * corpus built in memory (a learnable "translation": the target is the
 * source with every id shifted), and a small model config.
 * Header-only (static functions) because CMake links each test with
 * testutil.c only.
 */
#ifndef PROJMT_TRAIN_FIXTURE_H
#define PROJMT_TRAIN_FIXTURE_H

#include <stdlib.h>
#include <string.h>

#include "core/config.h"
#include "data/corpus.h"
#include "model/model.h"
#include "core/rng.h"

enum { FIX_VOCAB = 24 };
static const char FIX_SPM[] = "spm bytes stand-in";

/* n pairs with source lengths in [min_len, max_len]; target = the
 * source with id k -> 4 + (k - 4 + 5) % (V - 4). Ids are never pad/unk/bos/eos. */
static void fixture_corpus(pmt_corpus *c, int n, int min_len, int max_len, uint64_t seed) {
    pmt_rng r = {seed};
    int *len = malloc((size_t)n * sizeof *len);
    c->n_pairs = n;
    c->src_off = malloc((size_t)(n + 1) * sizeof(uint64_t));
    c->tgt_off = malloc((size_t)(n + 1) * sizeof(uint64_t));
    c->src_off[0] = c->tgt_off[0] = 0;
    for (int i = 0; i < n; i++) {
        len[i] = min_len + (int)pmt_rng_below(&r, (uint64_t)(max_len - min_len + 1));
        c->src_off[i + 1] = c->src_off[i] + (uint64_t)len[i];
        c->tgt_off[i + 1] = c->tgt_off[i] + (uint64_t)len[i];
    }
    c->src_ids = malloc(c->src_off[n] * sizeof(int32_t) + 1);
    c->tgt_ids = malloc(c->tgt_off[n] * sizeof(int32_t) + 1);
    for (int i = 0; i < n; i++) {
        int32_t *s = c->src_ids + c->src_off[i], *t = c->tgt_ids + c->tgt_off[i];
        for (int k = 0; k < len[i]; k++) s[k] = 4 + (int32_t)pmt_rng_below(&r, FIX_VOCAB - 4);
        for (int k = 0; k < len[i]; k++) t[k] = 4 + (s[k] - 4 + 5) % (FIX_VOCAB - 4);
    }
    free(len);
}

static void fixture_corpus_free(pmt_corpus *c) {
    free(c->src_off);
    free(c->tgt_off);
    free(c->src_ids);
    free(c->tgt_ids);
    memset(c, 0, sizeof *c);
}

/* A model small enough to train for a few hundred steps in seconds. */
static void fixture_config(pmt_config *cfg, int kind, const char *save_dir) {
    pmt_config_defaults(cfg);
    cfg->d_model = 32;
    cfg->n_heads = 2;
    cfg->d_ff = 64;
    cfg->enc_layers = 1;
    cfg->dec_layers = 1;
    cfg->max_len = 16;
    cfg->dropout = 0.0;
    cfg->label_smoothing = 0.0;
    for (int s = 0; s < PMT_SITES; s++) cfg->site_kind[s] = kind;
    cfg->batch_tokens = 256;
    cfg->lr = 3e-3;
    cfg->warmup = 20;
    cfg->clip_norm = 1.0;
    cfg->epochs = 0;
    cfg->max_steps = 100;
    cfg->log_every = 10;
    cfg->valid_every = 50;
    cfg->threads = 1;
    snprintf(cfg->save_dir, sizeof cfg->save_dir, "%s", save_dir);
}

#endif

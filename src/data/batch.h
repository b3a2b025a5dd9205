/*
 * batch.h — the padded batch of sentence pairs that the batcher produces and
 * the model consumes (teacher forcing).
 *
 * Ownership: a pmt_batch holds pointers only; its arrays belong to whoever
 * filled it (the batcher, or a test).
 */
#ifndef PROJMT_BATCH_H
#define PROJMT_BATCH_H

#include <stdint.h>

#include "data/vocab.h"

/* A teacher-forced batch: B sentence pairs padded to S and T with PMT_PAD_ID. */
typedef struct pmt_batch {
    int B, S, T;
    int32_t *src;        /* [B*S] source ids (no bos, eos appended) */
    int32_t *src_len;    /* [B] non-pad source tokens */
    int32_t *tgt_in;     /* [B*T] bos y1 .. yn */
    int32_t *tgt_out;    /* [B*T] y1 .. yn eos (pad after) */
    int32_t *tgt_len;    /* [B] non-pad target tokens (n + 1) */
} pmt_batch;

#endif

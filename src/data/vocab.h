/*
 * vocab.h — the special token ids of projmt's vocabulary.
 *
 * Why fixed numbers: prepare trains the SentencePiece model with exactly these
 * ids (data/spm.cc), and the batcher, the model (padding, loss masking) and
 * the search (BOS/EOS) all rely on them without consulting the model file.
 */
#ifndef PROJMT_VOCAB_H
#define PROJMT_VOCAB_H

#define PMT_PAD_ID 0
#define PMT_UNK_ID 1
#define PMT_BOS_ID 2
#define PMT_EOS_ID 3

#endif

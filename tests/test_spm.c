/*
 * test_spm.c — the SentencePiece C API (spm.h): training on a small made-up
 * English/Spanish corpus, encode/decode round trips with accents and ¿ ¡ ñ,
 * special ids, loading from file and buffer, repeatable training, and clean
 * errors (missing files, garbage models, bad ids) instead of crashes.
 */
#include <stdlib.h>
#include <string.h>

#include "fake_corpus.h"
#include "data/spm.h"
#include "testutil.h"

/* Writes each side of the fake corpus to its own file (a joint model sees both). */
static void write_training_text(const char *dir, char en_path[], char es_path[], size_t len) {
    snprintf(en_path, len, "%s/train.en", dir);
    snprintf(es_path, len, "%s/train.es", dir);
    FILE *en = fopen(en_path, "wb"), *es = fopen(es_path, "wb");
    CHECK(en && es);
    char a[256], b[256];
    for (int i = 0; i < 400 && en && es; i++) {
        fake_pair(i * 7, a, sizeof a, b, sizeof b);
        CHECK(fprintf(en, "%s\n", a) > 0 && fprintf(es, "%s\n", b) > 0);
    }
    CHECK(en && fclose(en) == 0);
    CHECK(es && fclose(es) == 0);
}

static char *read_file(const char *path, size_t *size) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *buf = malloc(1 << 22);
    *size = buf ? fread(buf, 1, 1 << 22, f) : 0;
    if (fclose(f) != 0) { free(buf); return NULL; }
    return buf;
}

static void check_round_trip(const pmt_spm *spm, const char *text) {
    int32_t ids[256];
    int n = pmt_spm_encode(spm, text, ids, 256);
    CHECK_MSG(n > 0 && n <= 256, "encode('%s') gave %d ids", text, n);
    if (n <= 0 || n > 256) return;
    for (int i = 0; i < n; i++) {
        CHECK_MSG(ids[i] > pmt_spm_eos_id(spm) && ids[i] < pmt_spm_vocab_size(spm),
                  "id %d of '%s' is special or out of range", ids[i], text);
    }
    char *back = pmt_spm_decode(spm, ids, n);
    CHECK_MSG(back && strcmp(back, text) == 0, "round trip of '%s' gave '%s'", text, back ? back : "(null)");
    free(back);
}

static void test_special_ids(const pmt_spm *spm) {
    CHECK(pmt_spm_pad_id(spm) == 0);
    CHECK(pmt_spm_unk_id(spm) == 1);
    CHECK(pmt_spm_bos_id(spm) == 2);
    CHECK(pmt_spm_eos_id(spm) == 3);
    CHECK(pmt_spm_piece_to_id(spm, "<pad>") == 0);
    CHECK(pmt_spm_piece_to_id(spm, "</s>") == 3);
    CHECK(pmt_spm_piece_to_id(spm, "no-such-piece-in-this-vocab") == 1);
    const char *pad = pmt_spm_id_to_piece(spm, 0);
    CHECK(pad && strcmp(pad, "<pad>") == 0);
    CHECK(pmt_spm_id_to_piece(spm, -1) == NULL);
    CHECK(pmt_spm_id_to_piece(spm, pmt_spm_vocab_size(spm)) == NULL);
    /* Every piece maps back to its own id. */
    for (int id = 4; id < pmt_spm_vocab_size(spm); id++) {
        const char *piece = pmt_spm_id_to_piece(spm, id);
        CHECK_MSG(piece && pmt_spm_piece_to_id(spm, piece) == id, "piece %d does not map back", id);
    }
}

static void test_encode_decode(const pmt_spm *spm) {
    check_round_trip(spm, "¿Dónde está la montaña?");
    check_round_trip(spm, "¡Qué día para el año!");
    check_round_trip(spm, "El niño compra la canción.");
    check_round_trip(spm, "Mi madre recuerda el café.");
    check_round_trip(spm, "The girl paints the beach.");

    /* A short buffer gets a prefix; the return value is the full length. */
    int32_t full[64], part[3] = {-7, -7, -7};
    int n = pmt_spm_encode(spm, "Our neighbour remembers the mountain.", full, 64);
    CHECK(n > 3);
    CHECK(pmt_spm_encode(spm, "Our neighbour remembers the mountain.", part, 2) == n);
    CHECK(part[0] == full[0] && part[1] == full[1] && part[2] == -7);
    CHECK(pmt_spm_encode(spm, "", full, 64) == 0);

    /* Characters never seen in training become unk, not a failure. */
    n = pmt_spm_encode(spm, "Ж", full, 64);
    int has_unk = 0;
    for (int i = 0; i < n; i++) has_unk |= full[i] == pmt_spm_unk_id(spm);
    CHECK(n > 0 && has_unk);

    /* pad/bos/eos are skipped when decoding. */
    int32_t with_specials[64];
    n = pmt_spm_encode(spm, "Tom sees the train.", with_specials + 1, 60);
    with_specials[0] = pmt_spm_bos_id(spm);
    with_specials[n + 1] = pmt_spm_eos_id(spm);
    with_specials[n + 2] = pmt_spm_pad_id(spm);
    char *text = pmt_spm_decode(spm, with_specials, n + 3);
    CHECK_MSG(text && strcmp(text, "Tom sees the train.") == 0, "got '%s'", text ? text : "(null)");
    free(text);

    int32_t bad[2] = {5, 1 << 20};
    CHECK(pmt_spm_decode(spm, bad, 2) == NULL);
    CHECK(strstr(pmt_spm_last_error(spm), "outside the vocabulary") != NULL);
}

/* The buffer loader must give the same model as the file loader. */
static void test_load_buffer(const pmt_spm *from_file, const char *model_path) {
    size_t size = 0, ser_size = 0;
    char *bytes = read_file(model_path, &size);
    CHECK(bytes && size > 0);
    const void *ser = pmt_spm_serialized(from_file, &ser_size);
    CHECK(ser_size == size && memcmp(ser, bytes, size) == 0);
    char err[512];
    pmt_spm *from_buf = pmt_spm_load_buffer(bytes, size, err, sizeof err);
    CHECK_MSG(from_buf != NULL, "%s", err);
    if (from_buf) {
        CHECK(pmt_spm_vocab_size(from_buf) == pmt_spm_vocab_size(from_file));
        int32_t a[64], b[64];
        const char *text = "¿Dónde está el libro?";
        int na = pmt_spm_encode(from_file, text, a, 64), nb = pmt_spm_encode(from_buf, text, b, 64);
        CHECK(na == nb && na > 0 && memcmp(a, b, (size_t)na * sizeof a[0]) == 0);
        pmt_spm_free(from_buf);
    }
    free(bytes);
}

static void test_errors(const char dir[1024]) {
    char err[512] = "", path[1100];
    snprintf(path, sizeof path, "%s/missing.model", dir);
    CHECK(pmt_spm_load_file(path, err, sizeof err) == NULL);
    CHECK_MSG(strstr(err, "missing.model") != NULL, "message: %s", err);

    err[0] = '\0';
    const char garbage[] = "this is not a protobuf model";
    CHECK(pmt_spm_load_buffer(garbage, sizeof garbage, err, sizeof err) == NULL);
    CHECK_MSG(err[0] != '\0', "no message for a garbage model");

    pmt_spm_train_options opt;
    pmt_spm_train_options_default(&opt);
    opt.vocab_size = 100;
    const char *inputs[1] = {path};
    char prefix[1100];
    snprintf(prefix, sizeof prefix, "%s/never", dir);
    err[0] = '\0';
    CHECK(pmt_spm_train(inputs, 1, prefix, &opt, err, sizeof err) == -1);
    CHECK_MSG(strstr(err, "missing.model") != NULL, "message: %s", err);
}

static void train_model(const char *const inputs[2], const char *prefix, int vocab) {
    pmt_spm_train_options opt;
    pmt_spm_train_options_default(&opt);
    CHECK(opt.vocab_size == 8000 && strcmp(opt.model_type, "unigram") == 0 && opt.character_coverage == 1.0);
    opt.vocab_size = vocab;
    opt.num_threads = 2;
    char err[1024] = "";
    CHECK_MSG(pmt_spm_train(inputs, 2, prefix, &opt, err, sizeof err) == 0, "train: %s", err);
}

int main(void) {
    const char *dir_tmp = test_tmpdir("spm");
    char dir[1024], en[1100], es[1100], prefix[1100], model[1200], prefix2[1100], model2[1200];
    snprintf(dir, sizeof dir, "%s", dir_tmp);
    write_training_text(dir, en, es, sizeof en);
    snprintf(prefix, sizeof prefix, "%s/m", dir);
    snprintf(model, sizeof model, "%s.model", prefix);
    const char *inputs[2] = {en, es};
    train_model(inputs, prefix, 150);

    char err[512] = "";
    pmt_spm *spm = pmt_spm_load_file(model, err, sizeof err);
    CHECK_MSG(spm != NULL, "load: %s", err);
    if (!spm) return test_finish();
    CHECK(pmt_spm_vocab_size(spm) > 50 && pmt_spm_vocab_size(spm) <= 150);
    CHECK(strcmp(pmt_spm_last_error(spm), "") == 0);
    test_special_ids(spm);
    test_encode_decode(spm);
    test_load_buffer(spm, model);
    test_errors(dir);

    /* Same data and options, second run: byte-identical model. */
    snprintf(prefix2, sizeof prefix2, "%s/m2", dir);
    snprintf(model2, sizeof model2, "%s.model", prefix2);
    train_model(inputs, prefix2, 150);
    size_t n1 = 0, n2 = 0;
    char *b1 = read_file(model, &n1), *b2 = read_file(model2, &n2);
    CHECK(b1 && b2 && n1 == n2 && memcmp(b1, b2, n1) == 0);
    free(b1);
    free(b2);

    pmt_spm_free(spm);
    return test_finish();
}

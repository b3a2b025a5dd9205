/*
 * prepare_manifest.c — manifest.json and the stdout summary of prepare.
 *
 * Why JSON by hand: the manifest is a fixed, small shape, and a JSON library
 * would be a new dependency for one writer. Strings (paths, model type) are
 * escaped by core/json.h; rates are written with enough digits to compare runs.
 */
#include <string.h>

#include "core/json.h"
#include "data/prepare_internal.h"

static const char *const split_names[PMT_SPLITS] = {"train", "valid", "test"};
static const char *const side_names[PMT_SIDES] = {"en", "es"};

/* part / whole, 0 for an empty whole (no NaN in the manifest). */
static double ratio(long part, long whole) { return whole > 0 ? (double)part / (double)whole : 0.0; }

/* One split's object: pairs, tokens, unk rates, length percentiles. */
static void write_split(FILE *f, const pmt_split_stats *st) {
    fprintf(f, "{\"pairs\": %ld, \"tokens\": {\"en\": %ld, \"es\": %ld},\n", st->pairs,
            st->tokens[PMT_SIDE_EN], st->tokens[PMT_SIDE_ES]);
    fprintf(f, "      \"unk_rate\": {\"en\": %.6g, \"es\": %.6g},\n",
            ratio(st->unk_tokens[PMT_SIDE_EN], st->tokens[PMT_SIDE_EN]),
            ratio(st->unk_tokens[PMT_SIDE_ES], st->tokens[PMT_SIDE_ES]));
    fprintf(f, "      \"length_tokens\": {");
    for (int s = 0; s < PMT_SIDES; s++) {
        const pmt_length_stats *l = &st->length[s];
        fprintf(f, "%s\"%s\": {\"p50\": %d, \"p90\": %d, \"p99\": %d, \"max\": %d}", s ? ", " : "",
                side_names[s], l->p50, l->p90, l->p99, l->max);
    }
    fprintf(f, "}}");
}

/* One drop-count object (the same keys in the totals and each source row). */
static void write_drops(FILE *f, const pmt_drop_counts *d) {
    fprintf(f, "{\"invalid_utf8\": %ld, \"malformed\": %ld, \"empty\": %ld, \"duplicate\": %ld, "
            "\"too_long\": %ld, \"length_ratio\": %ld, \"markup\": %ld, \"held_out\": %ld}",
            d->invalid_utf8, d->malformed, d->empty, d->duplicate, d->too_long, d->length_ratio, d->markup,
            d->held_out);
}

/* The per-source table: one object per source, primary first, dev last. */
static void write_sources(FILE *f, const pmt_prepare_stats *st) {
    fprintf(f, "  \"sources\": [\n");
    for (int i = 0; i < st->n_sources; i++) {
        const pmt_source_stats *r = &st->source[i];
        fprintf(f, "    {\"name\": ");
        pmt_json_string(f, r->name);
        fprintf(f, ", \"role\": \"%s\", \"weight\": %d, \"input_lines\": %ld, \"kept_pairs\": %ld,\n",
                r->role ? r->role : "", r->weight, r->input_lines, r->kept_pairs);
        fprintf(f, "     \"split_pairs\": {\"train\": %ld, \"valid\": %ld, \"test\": %ld},\n     \"dropped\": ",
                r->split_pairs[PMT_SPLIT_TRAIN], r->split_pairs[PMT_SPLIT_VALID], r->split_pairs[PMT_SPLIT_TEST]);
        write_drops(f, &r->dropped);
        fprintf(f, "}%s\n", i + 1 < st->n_sources ? "," : "");
    }
    fprintf(f, "  ],\n");
}

/* The data settings of the run, so the manifest alone explains the files. */
static void write_config(FILE *f, const pmt_config *cfg) {
    fprintf(f, "  \"config\": {\"corpus\": ");
    pmt_json_string(f, cfg->corpus);
    fprintf(f, ", \"src_file\": ");
    pmt_json_string(f, cfg->src_file);
    fprintf(f, ", \"tgt_file\": ");
    pmt_json_string(f, cfg->tgt_file);
    fprintf(f, ", \"sources\": [");
    for (const char *line = cfg->sources; *line;) {
        size_t len = strcspn(line, "\n");
        char spec[PMT_SOURCES_TEXT];
        memcpy(spec, line, len);
        spec[len] = '\0';
        fprintf(f, "%s", line == cfg->sources ? "" : ", ");
        pmt_json_string(f, spec);
        line += len + (line[len] == '\n');
    }
    fprintf(f, "], \"dev_file\": ");
    pmt_json_string(f, cfg->dev_file);
    fprintf(f, ", \"data_dir\": ");
    pmt_json_string(f, cfg->data_dir);
    fprintf(f, ",\n    \"valid_size\": %d, \"test_size\": %d, \"max_words\": %d, \"max_ratio\": %.17g,\n",
            cfg->valid_size, cfg->test_size, cfg->max_words, cfg->max_ratio);
    fprintf(f, "    \"vocab_size\": %d, \"spm_model_type\": ", cfg->vocab_size);
    pmt_json_string(f, cfg->spm_model_type);
    fprintf(f, ", \"character_coverage\": %.17g, \"spm_sample_sentences\": %d, \"spm_model\": ",
            cfg->character_coverage, cfg->spm_sample_sentences);
    pmt_json_string(f, cfg->spm_model);
    fprintf(f, ", \"seed\": %lu}\n", cfg->seed);
}

/* The whole manifest; I/O errors are caught by the caller via ferror/fclose. */
static void write_manifest_body(FILE *f, const pmt_config *cfg, const pmt_prepare_stats *st) {
    fprintf(f, "{\n  \"format\": \"projmt-prepare\", \"version\": 1,\n");
    fprintf(f, "  \"input_lines\": %ld,\n", st->input_lines);
    fprintf(f, "  \"dropped\": ");
    write_drops(f, &st->dropped);
    fprintf(f, ",\n");
    fprintf(f, "  \"kept_pairs\": %ld,\n", st->kept_pairs);
    fprintf(f, "  \"split_rule\": \"seeded shuffle; all translations of one English sentence share a split\",\n");
    fprintf(f, "  \"splits\": {\n");
    for (int k = 0; k < PMT_SPLITS; k++) {
        fprintf(f, "    \"%s\": ", split_names[k]);
        write_split(f, &st->split[k]);
        fprintf(f, "%s\n", k + 1 < PMT_SPLITS ? "," : "");
    }
    fprintf(f, "  },\n");
    fprintf(f, "  \"vocab\": {\"size\": %d, \"used_in_train\": %d, \"coverage\": %.6g},\n", st->vocab_size,
            st->vocab_used_in_train, ratio(st->vocab_used_in_train, st->vocab_size));
    fprintf(f, "  \"files\": {\"spm_model\": \"spm.model\", \"spm_vocab\": \"spm.vocab\", "
            "\"tokens\": [\"train.tok\", \"valid.tok\", \"test.tok\"], "
            "\"text\": [\"train.en\", \"train.es\", \"valid.en\", \"valid.es\", \"test.en\", \"test.es\"]},\n");
    fprintf(f, "  \"seconds\": {\"read\": %.3f, \"split\": %.3f, \"spm\": %.3f, \"encode\": %.3f, \"total\": %.3f},\n",
            st->seconds_read, st->seconds_split, st->seconds_spm, st->seconds_encode, st->seconds_total);
    write_sources(f, st);
    write_config(f, cfg);
    fprintf(f, "}\n");
}

int pmt_prepare_write_manifest(pmt_atomic_file *af, const pmt_config *cfg, const pmt_prepare_stats *stats,
                               char *err, size_t errlen) {
    write_manifest_body(af->f, cfg, stats);
    return pmt_atomic_close(af, err, errlen);
}

void pmt_prepare_print_summary(FILE *out, const pmt_config *cfg, const pmt_prepare_stats *st) {
    const pmt_drop_counts *d = &st->dropped;
    fprintf(out, "prepare: %ld input lines -> %ld pairs kept (dropped: %ld invalid UTF-8, %ld malformed, %ld empty, "
            "%ld duplicate, %ld too long, %ld length ratio, %ld markup, %ld held out)\n", st->input_lines,
            st->kept_pairs, d->invalid_utf8, d->malformed, d->empty, d->duplicate, d->too_long, d->length_ratio,
            d->markup, d->held_out);
    for (int k = 0; k < PMT_SPLITS; k++) {
        const pmt_split_stats *s = &st->split[k];
        fprintf(out, "  %-5s %7ld pairs  tokens en %8ld es %8ld  len p50/p90/p99/max en %d/%d/%d/%d es %d/%d/%d/%d"
                "  unk %.4f%%\n", split_names[k], s->pairs, s->tokens[0], s->tokens[1],
                s->length[0].p50, s->length[0].p90, s->length[0].p99, s->length[0].max,
                s->length[1].p50, s->length[1].p90, s->length[1].p99, s->length[1].max,
                100.0 * ratio(s->unk_tokens[0] + s->unk_tokens[1], s->tokens[0] + s->tokens[1]));
    }
    fprintf(out, "  per source (dropped: utf8 = invalid UTF-8, held = English sentence in valid/test):\n");
    fprintf(out, "    %-12s %-7s %6s %8s %8s %8s %6s %6s | %6s %6s %6s %6s %6s %6s %6s %6s\n", "source", "role",
            "weight", "read", "kept", "train", "valid", "test", "utf8", "malfrm", "empty", "dup", "long", "ratio",
            "markup", "held");
    for (int i = 0; i < st->n_sources; i++) {
        const pmt_source_stats *r = &st->source[i];
        const pmt_drop_counts *x = &r->dropped;
        fprintf(out, "    %-12s %-7s %6d %8ld %8ld %8ld %6ld %6ld | %6ld %6ld %6ld %6ld %6ld %6ld %6ld %6ld\n", r->name,
                r->role ? r->role : "", r->weight, r->input_lines, r->kept_pairs, r->split_pairs[PMT_SPLIT_TRAIN],
                r->split_pairs[PMT_SPLIT_VALID], r->split_pairs[PMT_SPLIT_TEST], x->invalid_utf8, x->malformed,
                x->empty, x->duplicate, x->too_long, x->length_ratio, x->markup, x->held_out);
    }
    fprintf(out, "  vocab %d (%s%s), %d ids used in train (%.1f%%)\n", st->vocab_size,
            cfg->spm_model[0] ? "given: " : "", cfg->spm_model[0] ? cfg->spm_model : cfg->spm_model_type,
            st->vocab_used_in_train, 100.0 * ratio(st->vocab_used_in_train, st->vocab_size));
    fprintf(out, "  time: read %.2fs, split %.2fs, spm %.2fs, encode %.2fs, write %.2fs, total %.2fs\n",
            st->seconds_read, st->seconds_split, st->seconds_spm, st->seconds_encode, st->seconds_write,
            st->seconds_total);
    fprintf(out, "  wrote %s/{spm.model,spm.vocab,train.tok,valid.tok,test.tok,*.en,*.es,manifest.json}\n", cfg->data_dir);
}

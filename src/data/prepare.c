/*
 * prepare.c — the `projmt prepare` pipeline (see prepare.h): read + clean,
 * seeded split, SentencePiece training, encoding, atomic output.
 *
 * Why the output registry: every file goes to "<name>.tmp" first (synced,
 * core/fileio.h) and is recorded; only when every phase succeeded are they
 * renamed into place, manifest.json last (an older manifest is removed
 * before the renames begin). On any failure all temporaries are deleted.
 * A data dir with a manifest.json is therefore always complete and
 * consistent.
 *
 * Why our own PRNG: rand() differs between libcs; splitmix64 + Fisher–Yates
 * with rejection sampling gives the same split for the same seed everywhere.
 *
 * Why only the primary source is split: valid/test are carved from it by
 * the same seeded shuffle as when it is the only source, so adding corpora
 * (or a dev file) never changes the test set and scores stay comparable.
 * Every other source goes to training, weight times, minus any pair whose
 * English sentence is held out (valid/test), so no test sentence is
 * trained on through another corpus.
 */
#include "data/prepare.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/fileio.h"
#include "data/corpus.h"
#include "data/prepare_internal.h"
#include "data/spm.h"
#include "data/vocab.h"

static const char *const split_names[PMT_SPLITS] = {"train", "valid", "test"};
static const char *const side_names[PMT_SIDES] = {"en", "es"};

enum { MAX_OUTPUTS = 16, OUT_PATH = PMT_PATH_MAX + 64 };

/* Files written under temporary names (core/fileio.h), renamed together at
 * the end. */
typedef struct {
    pmt_atomic_file file[MAX_OUTPUTS];
    int n;
} output_set;

/* Registers <dir>/<name>, whose temporary (tmp, NULL: <name>.tmp) another
 * atomic writer fills; returns the temporary's path, or NULL with err. */
static const char *output_expect(output_set *o, const char *dir, const char *name, const char *tmp, char *err,
                                 size_t errlen) {
    char path[OUT_PATH];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    pmt_atomic_file *af = &o->file[o->n];
    if (pmt_atomic_name(af, path, tmp, err, errlen) != 0) return NULL;
    o->n++;
    return af->tmp;
}

/* Registers <dir>/<name> and opens its temporary for writing; NULL with err. */
static pmt_atomic_file *output_open(output_set *o, const char *dir, const char *name, char *err, size_t errlen) {
    char path[OUT_PATH];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    pmt_atomic_file *af = &o->file[o->n];
    if (pmt_atomic_open(af, path, err, errlen) != 0) return NULL;
    o->n++;
    return af;
}

/* Deletes every temporary written so far (the failure path). */
static void output_discard(output_set *o) {
    for (int i = 0; i < o->n; i++) pmt_atomic_discard(&o->file[i]);
}

/* Renames every temporary into place, the last registered (the manifest)
 * last, after removing any previous manifest so a crash between renames
 * leaves no complete-looking directory. */
static int output_commit(output_set *o, char *err, size_t errlen) {
    const char *manifest = o->file[o->n - 1].path;
    if (remove(manifest) != 0 && errno != ENOENT) {
        snprintf(err, errlen, "cannot replace '%s': %s", manifest, strerror(errno));
        return -1;
    }
    for (int i = 0; i < o->n; i++)
        if (pmt_atomic_rename(&o->file[i], err, errlen) != 0) return -1;
    return 0;
}

/* mkdir -p, then a write probe: fails early, before minutes of work. */
static int make_output_dir(const char *dir, char *err, size_t errlen) {
    char path[OUT_PATH];
    if (pmt_make_dirs(dir, path, sizeof path) != 0) {
        if (errno == EEXIST)
            snprintf(err, errlen, "output path '%s' is not a directory; choose another --data-dir", dir);
        else
            snprintf(err, errlen, "cannot create output directory '%s': %s; choose another --data-dir", path,
                     strerror(errno));
        return -1;
    }
    snprintf(path, sizeof path, "%s/.prepare-write-test.tmp", dir);
    FILE *probe = fopen(path, "wb");
    if (!probe || fclose(probe) != 0) {
        snprintf(err, errlen, "cannot write into output directory '%s': %s; choose another --data-dir", dir, strerror(errno));
        return -1;
    }
    remove(path);
    return 0;
}

/* Checks the data settings prepare uses, before any work is done. */
static int validate_options(const pmt_config *cfg, char *err, size_t errlen) {
#define REQUIRE(cond, ...) do { if (!(cond)) { snprintf(err, errlen, __VA_ARGS__); return -1; } } while (0)
    REQUIRE(cfg->data_dir[0], "data_dir is empty; give --data-dir DIR");
    REQUIRE(cfg->valid_size >= 0 && cfg->test_size >= 0, "valid_size (%d) and test_size (%d) must be >= 0",
            cfg->valid_size, cfg->test_size);
    REQUIRE(cfg->max_words >= 1, "max_words must be >= 1 (got %d)", cfg->max_words);
    REQUIRE(cfg->max_ratio >= 1.0, "max_ratio must be >= 1 (got %g)", cfg->max_ratio);
    REQUIRE(cfg->vocab_size >= 16, "vocab_size must be >= 16 (got %d)", cfg->vocab_size);
    REQUIRE(cfg->character_coverage > 0 && cfg->character_coverage <= 1,
            "character_coverage must be in (0, 1] (got %g)", cfg->character_coverage);
    REQUIRE(!strcmp(cfg->spm_model_type, "unigram") || !strcmp(cfg->spm_model_type, "bpe"),
            "spm_model_type must be unigram or bpe (got '%s')", cfg->spm_model_type);
#undef REQUIRE
    return 0;
}

/* ---- split ------------------------------------------------------------ */

/* splitmix64: one 64-bit state word, good statistical quality, same everywhere. */
static uint64_t splitmix64_next(uint64_t *state) {
    uint64_t z = (*state += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

/* Uniform in [0, n) without modulo bias (rejection of the short tail). */
static uint64_t uniform_below(uint64_t *state, uint64_t n) {
    uint64_t limit = UINT64_MAX - UINT64_MAX % n, r;
    do r = splitmix64_next(state); while (r >= limit);
    return r % n;
}

/* Fisher–Yates shuffle of idx[0..n) driven by seed. */
static void shuffle_indices(int32_t *idx, long n, unsigned long seed) {
    uint64_t state = (uint64_t)seed;
    for (long i = n - 1; i > 0; i--) {
        long j = (long)uniform_below(&state, (uint64_t)i + 1);
        int32_t t = idx[i]; idx[i] = idx[j]; idx[j] = t;
    }
}

/* The pairs of each split, as indices into the pair list, in shuffled
 * order (4 bytes a pair: the list is limited to 2^31 - 1 pairs). */
typedef struct {
    int32_t *idx[PMT_SPLITS];
    long n[PMT_SPLITS];
} split_plan;

/* Releases the index lists (safe on a partly built plan). */
static void split_plan_free(split_plan *s) {
    for (int k = 0; k < PMT_SPLITS; k++) free(s->idx[k]);
    memset(s, 0, sizeof *s);
}

/* Chooses the split of every English sentence's group of pairs: groups are
 * taken in shuffled order and go to valid, else test, when they still fit
 * there, else to train. Groups are found by the hash of the English side. */
static int assign_splits(const pmt_pair_list *list, long n, const int32_t *order, const pmt_config *cfg,
                         split_plan *plan) {
    pmt_hash_map groups;
    int32_t *group_of = malloc((size_t)n * sizeof *group_of);
    int32_t *group_size = calloc((size_t)n, sizeof *group_size);
    signed char *group_split = malloc((size_t)n);
    int ready = pmt_hash_map_init(&groups, (size_t)n) == 0;
    int ok = group_of && group_size && group_split && ready;
    long n_groups = 0;
    for (long i = 0; ok && i < n; i++) {
        int inserted;
        int *g = pmt_hash_map_get_or_insert(&groups, list->en_hash[i], (int)n_groups, &inserted);
        if (!g) { ok = 0; break; }
        if (inserted) group_split[n_groups++] = -1;
        group_of[i] = *g;
        group_size[*g]++;
    }
    if (ready) pmt_hash_map_free(&groups);   /* before the plan grows: the map is the largest part */
    long capacity[PMT_SPLITS] = {0, cfg->valid_size, cfg->test_size}, used[PMT_SPLITS] = {0, 0, 0};
    for (long i = 0; ok && i < n; i++) {
        int g = group_of[order[i]];
        if (group_split[g] < 0) {
            int k = PMT_SPLIT_TRAIN;
            if (used[PMT_SPLIT_VALID] + group_size[g] <= capacity[PMT_SPLIT_VALID]) k = PMT_SPLIT_VALID;
            else if (used[PMT_SPLIT_TEST] + group_size[g] <= capacity[PMT_SPLIT_TEST]) k = PMT_SPLIT_TEST;
            group_split[g] = (signed char)k;
            used[k] += group_size[g];
        }
        int k = group_split[g];
        plan->idx[k][plan->n[k]++] = order[i];
    }
    free(group_of);
    free(group_size);
    free(group_split);
    return ok ? 0 : -1;
}

/* Shuffles the primary source's cleaned pairs (the list's first n) and
 * assigns them to splits; refuses sizes that would leave nothing to train on. */
static int make_split_plan(const pmt_pair_list *list, long n, const pmt_config *cfg, split_plan *plan, char *err,
                           size_t errlen) {
    memset(plan, 0, sizeof *plan);
    if ((long)cfg->valid_size + cfg->test_size >= n) {
        snprintf(err, errlen, "valid_size (%d) + test_size (%d) leaves no training pairs out of %ld cleaned pairs; "
                 "lower --valid-size/--test-size", cfg->valid_size, cfg->test_size, n);
        return -1;
    }
    if (list->n > INT32_MAX) {
        snprintf(err, errlen, "%ld cleaned pairs: prepare takes at most %d in one run", list->n, INT32_MAX);
        return -1;
    }
    /* train holds at most the primary's pairs; valid and test their sizes */
    const long capacity[PMT_SPLITS] = {n, cfg->valid_size, cfg->test_size};
    int32_t *order = malloc((size_t)n * sizeof *order);
    int ok = order != NULL;
    for (int k = 0; ok && k < PMT_SPLITS; k++)
        ok = (plan->idx[k] = malloc((size_t)(capacity[k] > 0 ? capacity[k] : 1) * sizeof(int32_t))) != NULL;
    if (ok) {
        for (long i = 0; i < n; i++) order[i] = (int32_t)i;
        shuffle_indices(order, n, cfg->seed);
        ok = assign_splits(list, n, order, cfg, plan) == 0;
    }
    free(order);
    if (!ok) {
        split_plan_free(plan);
        snprintf(err, errlen, "out of memory while splitting the corpus");
        return -1;
    }
    return 0;
}

/* ---- the other sources ------------------------------------------------ */

/* 1 if the English side of pair i is held out (its hash in held). */
static int held_out(const pmt_hash_map *held, const pmt_pair_list *list, long i) {
    return pmt_hash_map_find(held, list->en_hash[i]) != NULL;
}

/* Completes the plan from the primary's split: with a dev set, valid is the
 * dev set and the primary's carved valid pairs train (so test is what it
 * would be without it); then the training list is rebuilt as the primary's
 * training pairs and every other source's pairs, each weight times, without
 * pairs whose English sentence is held out. Fills the per-source rows. */
static int add_sources_to_plan(const pmt_pair_list *list, split_plan *plan, pmt_prepare_stats *stats, char *err,
                               size_t errlen) {
    const pmt_source_set *set = list->sources;
    long first_dev = list->first[list->n_sources], n_dev = list->has_dev ? list->n - first_dev : 0;
    int32_t *dev_idx = NULL;
    if (list->has_dev) {
        /* the carved valid pairs join the primary's training pairs (the
         * train array holds the primary's n pairs, so they fit) */
        for (long i = 0; i < plan->n[PMT_SPLIT_VALID]; i++)
            plan->idx[PMT_SPLIT_TRAIN][plan->n[PMT_SPLIT_TRAIN]++] = plan->idx[PMT_SPLIT_VALID][i];
        if (!(dev_idx = malloc((size_t)(n_dev > 0 ? n_dev : 1) * sizeof *dev_idx))) goto oom;
        for (long i = 0; i < n_dev; i++) dev_idx[i] = (int32_t)(first_dev + i);
        free(plan->idx[PMT_SPLIT_VALID]);
        plan->idx[PMT_SPLIT_VALID] = dev_idx;
        plan->n[PMT_SPLIT_VALID] = n_dev;
    }
    pmt_hash_map held;
    if (pmt_hash_map_init(&held, (size_t)(plan->n[PMT_SPLIT_VALID] + plan->n[PMT_SPLIT_TEST]) + 1) != 0) goto oom;
    int inserted, oom = 0;
    for (int k = PMT_SPLIT_VALID; k <= PMT_SPLIT_TEST; k++)
        for (long i = 0; i < plan->n[k]; i++)
            if (!pmt_hash_map_get_or_insert(&held, list->en_hash[plan->idx[k][i]], 1, &inserted)) oom = 1;
    long total = 0;
    for (int s = 0; s < list->n_sources; s++)
        total += (s == 0 ? plan->n[PMT_SPLIT_TRAIN] : list->first[s + 1] - list->first[s]) * set->spec[s].weight;
    if (total > INT32_MAX) {
        pmt_hash_map_free(&held);
        snprintf(err, errlen, "%ld training pairs (weights counted): prepare takes at most %d in one run", total,
                 INT32_MAX);
        return -1;
    }
    int32_t *train = malloc((size_t)(total > 0 ? total : 1) * sizeof *train);
    long n_train = 0;
    if (!train) oom = 1;
    for (int s = 0; !oom && s < list->n_sources; s++) {
        pmt_source_stats *row = &stats->source[s];
        long start = n_train;
        if (s == 0) {
            for (long i = 0; i < plan->n[PMT_SPLIT_TRAIN]; i++) {
                int32_t p = plan->idx[PMT_SPLIT_TRAIN][i];
                if (list->has_dev && held_out(&held, list, p)) row->dropped.held_out++;
                else train[n_train++] = p;
            }
            row->split_pairs[PMT_SPLIT_VALID] = list->has_dev ? 0 : plan->n[PMT_SPLIT_VALID];
            row->split_pairs[PMT_SPLIT_TEST] = plan->n[PMT_SPLIT_TEST];
        } else {
            for (long p = list->first[s]; p < list->first[s + 1]; p++) {
                if (held_out(&held, list, p)) row->dropped.held_out++;
                else train[n_train++] = (int32_t)p;
            }
        }
        long once = n_train - start;
        for (int w = 1; w < set->spec[s].weight; w++)
            for (long i = 0; i < once; i++) train[n_train++] = train[start + i];
        row->kept_pairs -= row->dropped.held_out;
        row->split_pairs[PMT_SPLIT_TRAIN] = n_train - start;
        stats->dropped.held_out += row->dropped.held_out;
        stats->kept_pairs -= row->dropped.held_out;
    }
    if (list->has_dev) {
        pmt_source_stats *row = &stats->source[list->n_sources];
        row->split_pairs[PMT_SPLIT_VALID] = n_dev;
    }
    pmt_hash_map_free(&held);
    if (oom) { free(train); goto oom; }
    free(plan->idx[PMT_SPLIT_TRAIN]);
    plan->idx[PMT_SPLIT_TRAIN] = train;
    plan->n[PMT_SPLIT_TRAIN] = n_train;
    return 0;
oom:
    snprintf(err, errlen, "out of memory while adding the sources to the training split");
    return -1;
}

/* ---- text outputs ----------------------------------------------------- */

/* Writes the pairs idx[0..n) as <split>.en and <split>.es lines (text read
 * back from the spill), both closed (synced) under their temporary names. */
static int write_split_text(pmt_pair_list *list, const int32_t *idx, long n, pmt_atomic_file *af[PMT_SIDES],
                            char *err, size_t errlen) {
    for (long i = 0; i < n; i++) {
        const char *side[PMT_SIDES];
        if (pmt_pair_list_get(list, idx[i], &side[PMT_SIDE_EN], &side[PMT_SIDE_ES], err, errlen) != 0) return -1;
        for (int s = 0; s < PMT_SIDES; s++)
            if (fputs(side[s], af[s]->f) < 0 || fputc('\n', af[s]->f) == EOF) {
                snprintf(err, errlen, "cannot write '%s': %s", af[s]->tmp, strerror(errno));
                return -1;
            }
    }
    for (int s = 0; s < PMT_SIDES; s++)
        if (pmt_atomic_close(af[s], err, errlen) != 0) return -1;
    return 0;
}

/* Writes <split>.{en,es} and remembers their temporaries: SentencePiece
 * trains on train's, and every split is encoded from its own. */
static int write_split_texts(const pmt_config *cfg, pmt_pair_list *list, const split_plan *plan, output_set *out,
                             char text[PMT_SPLITS][PMT_SIDES][OUT_PATH], char *err, size_t errlen) {
    for (int k = 0; k < PMT_SPLITS; k++) {
        pmt_atomic_file *af[PMT_SIDES];
        for (int s = 0; s < PMT_SIDES; s++) {
            char name[32];
            snprintf(name, sizeof name, "%s.%s", split_names[k], side_names[s]);
            if (!(af[s] = output_open(out, cfg->data_dir, name, err, errlen))) return -1;
            snprintf(text[k][s], OUT_PATH, "%s", af[s]->tmp);
        }
        if (write_split_text(list, plan->idx[k], plan->n[k], af, err, errlen) != 0) return -1;
    }
    return 0;
}

/* ---- SentencePiece ---------------------------------------------------- */

/* spm.{model,vocab}.tmp, the temporaries of spm.model and spm.vocab, into
 * prefix ("<data_dir>/spm.tmp": SentencePiece writes <prefix>.model and
 * .vocab) and model_path; registered with out. 0 or -1 with err. */
static int expect_spm_outputs(const pmt_config *cfg, output_set *out, char *prefix, size_t prefix_size,
                              char *model_path, char *err, size_t errlen) {
    char vocab_path[OUT_PATH];
    snprintf(prefix, prefix_size, "%s/spm.tmp", cfg->data_dir);
    snprintf(model_path, OUT_PATH, "%s.model", prefix);
    snprintf(vocab_path, sizeof vocab_path, "%s.vocab", prefix);
    if (!output_expect(out, cfg->data_dir, "spm.model", model_path, err, errlen) ||
        !output_expect(out, cfg->data_dir, "spm.vocab", vocab_path, err, errlen))
        return -1;
    return 0;
}

/* Trains the joint model on the training texts (train_lines lines in all)
 * into spm.{model,vocab}.tmp. */
static int train_spm(const pmt_config *cfg, const char *train_text[PMT_SIDES], long train_lines, output_set *out,
                     char *model_path, char *err, size_t errlen) {
    char prefix[PMT_PATH_MAX + 16];
    if (expect_spm_outputs(cfg, out, prefix, sizeof prefix, model_path, err, errlen) != 0) return -1;

    pmt_spm_train_options opt;
    pmt_spm_train_options_default(&opt);
    opt.vocab_size = cfg->vocab_size;
    opt.model_type = cfg->spm_model_type;
    opt.character_coverage = cfg->character_coverage;
    opt.seed = cfg->seed;
    /* A bounded sample (SentencePiece's reservoir sampling, seeded): its
     * memory then stays the same whatever the corpus size. A corpus with no
     * more lines than the sample is given whole with the flags of earlier
     * builds, so its spm.model is byte for byte what it was. */
    if (cfg->spm_sample_sentences > 0 && train_lines > cfg->spm_sample_sentences)
        opt.input_sentence_size = cfg->spm_sample_sentences;
    char inner[1024];
    if (pmt_spm_train(train_text, PMT_SIDES, prefix, &opt, inner, sizeof inner) != 0) {
        snprintf(err, errlen, "SentencePiece training on %s failed: %s", train_text[0], inner);
        return -1;
    }
    return 0;
}

/* A given model (spm_model) must use the special ids the batcher, the model
 * and the search hard-wire (data/vocab.h): one trained elsewhere with other
 * ids would encode without error and train on garbage. Loaded once before
 * any input is read, so a wrong file fails at once, and again to copy it.
 * The model, or NULL with err. */
static pmt_spm *load_given_spm(const pmt_config *cfg, char *err, size_t errlen) {
    char inner[1024];
    pmt_spm *spm = pmt_spm_load_file(cfg->spm_model, inner, sizeof inner);
    if (!spm) {
        snprintf(err, errlen, "spm_model: %s", inner);
        return NULL;
    }
    if (pmt_spm_pad_id(spm) == PMT_PAD_ID && pmt_spm_unk_id(spm) == PMT_UNK_ID && pmt_spm_bos_id(spm) == PMT_BOS_ID &&
        pmt_spm_eos_id(spm) == PMT_EOS_ID)
        return spm;
    snprintf(err, errlen, "spm_model '%s' has special ids pad %d, unk %d, bos %d, eos %d; projmt needs %d, %d, %d, "
             "%d (use the spm.model of a data dir projmt prepared)", cfg->spm_model, pmt_spm_pad_id(spm),
             pmt_spm_unk_id(spm), pmt_spm_bos_id(spm), pmt_spm_eos_id(spm), PMT_PAD_ID, PMT_UNK_ID, PMT_BOS_ID,
             PMT_EOS_ID);
    pmt_spm_free(spm);
    return NULL;
}

/* spm_model given: its bytes become spm.{model,vocab}.tmp, in place of a
 * trained model, so the data dir's ids are those of the model it names. */
static int copy_given_spm(const pmt_config *cfg, output_set *out, char *model_path, char *err, size_t errlen) {
    char prefix[PMT_PATH_MAX + 16], inner[1024];
    if (expect_spm_outputs(cfg, out, prefix, sizeof prefix, model_path, err, errlen) != 0) return -1;
    pmt_spm *spm = load_given_spm(cfg, err, errlen);
    if (!spm) return -1;
    int rc = pmt_spm_save(spm, prefix, inner, sizeof inner);
    if (rc != 0) snprintf(err, errlen, "%s", inner);
    pmt_spm_free(spm);
    return rc;
}

/* ---- encoding --------------------------------------------------------- */

/* A growable id buffer for one sentence. */
typedef struct {
    int32_t *ids;
    size_t n, cap;
} id_buffer;

/* Encodes text into b (replacing what it held); -1 with err on failure. */
static int encode_sentence(const pmt_spm *spm, const char *text, id_buffer *b, char *err, size_t errlen) {
    size_t need = strlen(text) + 2;   /* a piece covers >= 1 byte, plus a leading "▁" */
    for (int attempt = 0; attempt < 2; attempt++) {
        if (need > b->cap) {
            int32_t *ids = realloc(b->ids, need * sizeof *ids);
            if (!ids) { snprintf(err, errlen, "out of memory while encoding"); return -1; }
            b->ids = ids;
            b->cap = need;
        }
        int n = pmt_spm_encode(spm, text, b->ids, (int)(b->cap < INT32_MAX ? b->cap : INT32_MAX));
        if (n < 0) { snprintf(err, errlen, "SentencePiece: %s", pmt_spm_last_error(spm)); return -1; }
        if ((size_t)n <= b->cap) { b->n = (size_t)n; return 0; }
        need = (size_t)n;
    }
    snprintf(err, errlen, "SentencePiece returned inconsistent lengths for one sentence");
    return -1;
}

/* Sentence lengths counted by value (index = length), so percentiles need
 * no per-pair array whatever the corpus size. */
typedef struct {
    long *count;
    size_t cap;
} length_histogram;

static int histogram_add(length_histogram *h, size_t len) {
    if (len >= h->cap) {
        size_t cap = h->cap ? h->cap : 256;
        while (cap <= len) cap *= 2;
        long *count = realloc(h->count, cap * sizeof *count);
        if (!count) return -1;
        memset(count + h->cap, 0, (cap - h->cap) * sizeof *count);
        h->count = count;
        h->cap = cap;
    }
    h->count[len]++;
    return 0;
}

/* Nearest-rank percentile of n lengths (the value whose rank is
 * ceil(pct * n / 100), as a sort would give). */
static int histogram_percentile(const length_histogram *h, long n, int pct) {
    if (n == 0) return 0;
    long rank = (long)((pct * n + 99) / 100), seen = 0;
    if (rank < 1) rank = 1;
    for (size_t len = 0; len < h->cap; len++)
        if ((seen += h->count[len]) >= rank) return (int)len;
    return 0;
}

static void histogram_stats(const length_histogram *h, long n, pmt_length_stats *out) {
    out->p50 = histogram_percentile(h, n, 50);
    out->p90 = histogram_percentile(h, n, 90);
    out->p99 = histogram_percentile(h, n, 99);
    out->max = 0;
    for (size_t len = 0; len < h->cap; len++)
        if (h->count[len]) out->max = (int)len;
}

/* Encodes one split pair by pair straight into its .tok file (corpus.h's
 * writer), reading its n pairs back from its .en and .es text, and
 * gathering the token, unk and length statistics on the way; used (may be
 * NULL) marks the ids that occur. */
static int encode_split(const pmt_spm *spm, const char *text[PMT_SIDES], long n, const char *tmp,
                        uint32_t spm_checksum, unsigned char *used, pmt_split_stats *st, char *err, size_t errlen) {
    int vocab = pmt_spm_vocab_size(spm), unk = pmt_spm_unk_id(spm);
    FILE *in[PMT_SIDES] = {NULL, NULL};
    for (int s = 0; s < PMT_SIDES; s++)
        if (!(in[s] = fopen(text[s], "rb"))) {
            snprintf(err, errlen, "cannot read back '%s': %s", text[s], strerror(errno));
            if (s) fclose(in[0]);
            return -1;
        }
    pmt_corpus_writer *w = pmt_corpus_writer_open(tmp, n, vocab, spm_checksum, err, errlen);
    id_buffer side[PMT_SIDES] = {{NULL, 0, 0}, {NULL, 0, 0}};
    length_histogram hist[PMT_SIDES] = {{NULL, 0}, {NULL, 0}};
    char *line[PMT_SIDES] = {NULL, NULL};
    size_t line_cap[PMT_SIDES] = {0, 0};
    int rc = w ? 0 : -1;
    st->pairs = n;
    for (long i = 0; rc == 0 && i < n; i++) {
        for (int s = 0; rc == 0 && s < PMT_SIDES; s++) {
            ssize_t len = getline(&line[s], &line_cap[s], in[s]);
            if (len <= 0 || line[s][len - 1] != '\n') {
                snprintf(err, errlen, "'%s' ended at line %ld of %ld while encoding it", text[s], i + 1, n);
                rc = -1;
                break;
            }
            line[s][len - 1] = '\0';
            rc = encode_sentence(spm, line[s], &side[s], err, errlen);
            if (rc != 0) break;
            st->tokens[s] += (long)side[s].n;
            for (size_t k = 0; k < side[s].n; k++) {
                st->unk_tokens[s] += side[s].ids[k] == unk;
                if (used && side[s].ids[k] >= 0 && side[s].ids[k] < vocab) used[side[s].ids[k]] = 1;
            }
            if (histogram_add(&hist[s], side[s].n) != 0) {
                snprintf(err, errlen, "out of memory computing statistics");
                rc = -1;
            }
        }
        if (rc == 0)
            rc = pmt_corpus_writer_add(w, side[PMT_SIDE_EN].ids, side[PMT_SIDE_EN].n, side[PMT_SIDE_ES].ids,
                                       side[PMT_SIDE_ES].n, err, errlen);
    }
    for (int s = 0; s < PMT_SIDES; s++) {
        if (rc == 0) histogram_stats(&hist[s], n, &st->length[s]);
        free(side[s].ids);
        free(hist[s].count);
        free(line[s]);
        fclose(in[s]);   /* read only: nothing to lose */
    }
    if (rc != 0) {
        pmt_corpus_writer_discard(w);
        return -1;
    }
    return pmt_corpus_writer_finish(w, NULL, err, errlen);
}

/* Encodes every split into <split>.tok and fills the token statistics. */
static int encode_splits(const pmt_config *cfg, const char *model_path, const long n_pairs[PMT_SPLITS],
                         char text[PMT_SPLITS][PMT_SIDES][OUT_PATH], output_set *out, pmt_prepare_stats *stats,
                         char *err, size_t errlen) {
    pmt_spm *spm = pmt_spm_load_file(model_path, err, errlen);
    if (!spm) return -1;
    stats->vocab_size = pmt_spm_vocab_size(spm);
    size_t spm_size;
    const void *spm_bytes = pmt_spm_serialized(spm, &spm_size);
    uint32_t spm_checksum = pmt_corpus_spm_checksum(spm_bytes, spm_size);
    unsigned char *used = calloc((size_t)stats->vocab_size, 1);
    int rc = used ? 0 : -1;
    if (!used) snprintf(err, errlen, "out of memory while encoding");
    for (int k = 0; rc == 0 && k < PMT_SPLITS; k++) {
        char name[32];
        snprintf(name, sizeof name, "%s.tok", split_names[k]);
        const char *tmp = output_expect(out, cfg->data_dir, name, NULL, err, errlen);
        const char *sides[PMT_SIDES] = {text[k][PMT_SIDE_EN], text[k][PMT_SIDE_ES]};
        rc = tmp ? encode_split(spm, sides, n_pairs[k], tmp, spm_checksum, k == PMT_SPLIT_TRAIN ? used : NULL,
                                &stats->split[k], err, errlen)
                 : -1;
    }
    if (rc == 0)
        for (int i = 0; i < stats->vocab_size; i++) stats->vocab_used_in_train += used[i];
    free(used);
    pmt_spm_free(spm);
    return rc;
}

/* ---- pipeline --------------------------------------------------------- */

/* The phases after reading, each timed; outputs registered in out. The
 * pair list (its spill and arrays) is released once the split texts are
 * written: SentencePiece and the encoder read those, so the list's memory
 * is not held alongside theirs. */
static int run_phases(const pmt_config *cfg, pmt_pair_list *list, output_set *out, pmt_prepare_stats *stats,
                      char *err, size_t errlen) {
    double t = pmt_now_seconds();
    split_plan plan;
    if (make_split_plan(list, list->first[1], cfg, &plan, err, errlen) != 0) {
        pmt_pair_list_free(list);
        return -1;
    }
    int rc = add_sources_to_plan(list, &plan, stats, err, errlen);
    char (*text)[PMT_SIDES][OUT_PATH] = malloc(sizeof(char[PMT_SPLITS][PMT_SIDES][OUT_PATH]));
    if (rc == 0 && !text) { snprintf(err, errlen, "out of memory"); rc = -1; }
    if (rc == 0) rc = write_split_texts(cfg, list, &plan, out, text, err, errlen);
    long n_pairs[PMT_SPLITS];
    for (int k = 0; k < PMT_SPLITS; k++) n_pairs[k] = plan.n[k];
    split_plan_free(&plan);
    pmt_pair_list_free(list);
    stats->seconds_split = pmt_now_seconds() - t;

    char model_path[OUT_PATH];
    t = pmt_now_seconds();
    if (rc == 0) {
        const char *train_text[PMT_SIDES] = {text[PMT_SPLIT_TRAIN][PMT_SIDE_EN], text[PMT_SPLIT_TRAIN][PMT_SIDE_ES]};
        rc = cfg->spm_model[0] ? copy_given_spm(cfg, out, model_path, err, errlen)
                               : train_spm(cfg, train_text, 2 * n_pairs[PMT_SPLIT_TRAIN], out, model_path, err, errlen);
    }
    stats->seconds_spm = pmt_now_seconds() - t;

    t = pmt_now_seconds();
    if (rc == 0) rc = encode_splits(cfg, model_path, n_pairs, text, out, stats, err, errlen);
    stats->seconds_encode = pmt_now_seconds() - t;
    free(text);
    return rc;
}

int pmt_prepare(const pmt_config *cfg, FILE *log, pmt_prepare_stats *stats, char *err, size_t errlen) {
    double start = pmt_now_seconds();
    memset(stats, 0, sizeof *stats);
    if (validate_options(cfg, err, errlen) != 0) return -1;
    if (cfg->spm_model[0]) {
        pmt_spm *given = load_given_spm(cfg, err, errlen);
        if (!given) return -1;
        pmt_spm_free(given);
    }
    if (make_output_dir(cfg->data_dir, err, errlen) != 0) return -1;

    pmt_pair_list list;
    if (pmt_prepare_read_pairs(cfg, log, &list, stats, err, errlen) != 0) return -1;
    stats->seconds_read = pmt_now_seconds() - start;

    output_set *out = calloc(1, sizeof *out);
    if (!out) { pmt_pair_list_free(&list); snprintf(err, errlen, "out of memory"); return -1; }
    int rc = run_phases(cfg, &list, out, stats, err, errlen);   /* frees list */

    double t = pmt_now_seconds();
    if (rc == 0) {
        pmt_atomic_file *manifest = output_open(out, cfg->data_dir, "manifest.json", err, errlen);
        /* The manifest reports the total, so it is measured up to here. */
        stats->seconds_total = pmt_now_seconds() - start;
        rc = manifest ? pmt_prepare_write_manifest(manifest, cfg, stats, err, errlen) : -1;
    }
    if (rc == 0) rc = output_commit(out, err, errlen);
    if (rc != 0) output_discard(out);
    stats->seconds_write = pmt_now_seconds() - t;
    stats->seconds_total = pmt_now_seconds() - start;
    free(out);
    return rc;
}

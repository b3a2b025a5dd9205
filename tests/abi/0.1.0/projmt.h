/*
 * projmt.h — the C API of libprojmt: load an English→Spanish translation
 * model (a checkpoint or an exported .pmt file) and translate batches of
 * sentences with it.
 *
 *     projmt_translator *t = projmt_translator_new("models/en-es.int8.pmt", NULL);
 *     if (!t) { fprintf(stderr, "%s\n", projmt_last_error()); return 1; }
 *     const char *src[] = {"Where is the station?"};
 *     projmt_result *res;
 *     if (projmt_translate_batch(t, src, 1, NULL, &res) != PROJMT_OK) { ... projmt_last_error() ... }
 *     printf("%s\n", res[0].hypotheses[0]);
 *     projmt_results_free(res, 1);
 *     projmt_translator_free(t);
 *
 * Errors: functions that can fail return NULL or a projmt_status; the
 * calling thread's projmt_last_error() then says why. The library never
 * prints, exits or aborts.
 *
 * Threads: a translator may be used by one thread at a time; translators on
 * different threads are independent (each its own model and buffers). A
 * translator's products run on `threads` OpenMP threads of the thread that
 * calls it.
 *
 * Ownership: a translator owns its model; projmt_translate_batch's results
 * belong to the caller until projmt_results_free.
 *
 * Versioning: PROJMT_API_VERSION changes when this header changes in a way
 * that breaks callers; the shared library's SONAME carries its major.
 */
#ifndef PROJMT_H
#define PROJMT_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define PROJMT_VERSION_MAJOR 0
#define PROJMT_VERSION_MINOR 1
#define PROJMT_VERSION_PATCH 0
#define PROJMT_API_VERSION 1

typedef enum projmt_status {
    PROJMT_OK = 0,
    PROJMT_ERROR_ARGUMENT = 1,   /* a bad argument or option value */
    PROJMT_ERROR_MODEL = 2,      /* the model file is missing, unreadable, damaged or foreign */
    PROJMT_ERROR_RUNTIME = 3,    /* decoding failed (e.g. a product this CPU cannot run) */
    PROJMT_ERROR_MEMORY = 4      /* out of memory */
} projmt_status;

/* "0.1.0" */
const char *projmt_version(void);
/* PROJMT_API_VERSION of the library (to check a header against a library). */
int projmt_api_version(void);
/* Why the calling thread's last failed call failed ("" when none failed). */
const char *projmt_last_error(void);
/* The CPU as the library sees it (oneDNN's effective ISA: "avx2",
 * "avx512_core_vnni", "avx512_core_amx", ...). */
const char *projmt_cpu_isa(void);

typedef struct projmt_translator projmt_translator;

typedef struct projmt_load_options {
    const char *compute_type;    /* "auto" (default), "fp32", "bf16" or "int8" (CTranslate2's names) */
    int threads;                 /* OpenMP threads of each call (0: all cores) */
    int max_batch;               /* sentences per internal batch (0: 64) */
} projmt_load_options;

/* Loads a checkpoint or exported model file. NULL on failure. options may
 * be NULL (the defaults above). */
projmt_translator *projmt_translator_new(const char *model_path, const projmt_load_options *options);
void projmt_translator_free(projmt_translator *t);

/* What the translator multiplies with on this CPU, e.g.
 * "compute type int8 on avx512_core_vnni (...)". Valid while t lives. */
const char *projmt_translator_compute(const projmt_translator *t);

/* From the next projmt_translate_batch on, each batch's output vocabulary
 * is the model's vocabulary shortlist for its sentences: `candidates`
 * target pieces per source piece and the most frequent pieces (as
 * CTranslate2's use_vmap and Marian's --shortlist): faster, and close to
 * but not exactly the full vocabulary's translations. 0 goes back to the
 * whole vocabulary. PROJMT_ERROR_ARGUMENT when candidates < 0 or the model
 * carries no shortlist (`projmt export --shortlist DATA_DIR` stores one). */
projmt_status projmt_translator_set_shortlist(projmt_translator *t, int candidates);

typedef struct projmt_translate_options {
    int beam_size;               /* 1 = greedy (0: 4) */
    int num_hypotheses;          /* n-best per sentence, <= beam_size (0: 1) */
    int return_scores;           /* fill projmt_result.scores */
    int return_alignment;        /* fill projmt_result.alignment for the best hypothesis */
    double length_penalty;       /* α of score = logprob / (length + 1)^α (< 0: 1.0) */
    int max_decoding_length;     /* longest output in pieces (0: 1.5 · source + 10, capped by the model) */
} projmt_translate_options;

/* The cross-attention of the best hypothesis (the last decoder layer,
 * averaged over heads): weights[t * n_source + s] is target piece t's
 * attention to source piece s (each row sums to 1); both piece lists end
 * with "</s>". */
typedef struct projmt_alignment {
    int n_source, n_target;
    const char *const *source_pieces;    /* [n_source] */
    const char *const *target_pieces;    /* [n_target] */
    const float *weights;                /* [n_target * n_source] */
} projmt_alignment;

typedef struct projmt_result {
    int n_hypotheses;                    /* best first; 0 for an empty line */
    const char *const *hypotheses;       /* [n_hypotheses] UTF-8 */
    const float *scores;                 /* [n_hypotheses] or NULL (return_scores) */
    const projmt_alignment *alignment;   /* or NULL (return_alignment, non-empty line) */
} projmt_result;

/* Translates sentences[0..n) (UTF-8, one sentence each; invalid bytes are
 * read as U+FFFD, sentences longer than the model takes are cut) and sets
 * *results to an array of n results in input order. options may be NULL
 * (the defaults above). */
projmt_status projmt_translate_batch(projmt_translator *t, const char *const *sentences, size_t n,
                                     const projmt_translate_options *options, projmt_result **results);
/* Frees what projmt_translate_batch returned (NULL is a no-op). */
void projmt_results_free(projmt_result *results, size_t n);

/* A sentence of a text: bytes [start, end), without the white space
 * around it. */
typedef struct projmt_span {
    size_t start, end;
} projmt_span;

/* Cuts text[0..length) (UTF-8) into sentences as `projmt serve` does before
 * translating: after . ? ! or … (and closing quotes or brackets) where the
 * next word starts with a capital, a digit or an opening quote; never after
 * an abbreviation (Mr. Dr. ...), an initial, an acronym (U.S.) or inside a
 * number. The models learn from one or two sentences a line, so a paragraph
 * translates better cut this way, one sentence per projmt_translate_batch
 * string. Sets *count to the number of sentences and fills spans[0 ..
 * min(*count, max_spans)) (spans may be NULL when max_spans is 0, to size
 * the array). */
projmt_status projmt_split_sentences(const char *text, size_t length, projmt_span *spans, size_t max_spans,
                                     size_t *count);

#ifdef __cplusplus
}
#endif

#endif

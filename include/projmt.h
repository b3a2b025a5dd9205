/*
 * projmt.h — the C API of libprojmt: load an English→Spanish translation
 * model (a checkpoint or an exported .pmt file) and translate batches of
 * sentences with it.
 *
 *     projmt_translator_options lo;
 *     projmt_translator_options_init(&lo, sizeof lo);
 *     projmt_translator *t;
 *     if (projmt_translator_open("models/en-es.int8.pmt", &lo, &t) != PROJMT_OK) {
 *         fprintf(stderr, "%s\n", projmt_last_error());
 *         return 1;
 *     }
 *     const char *src[] = {"Where is the station?"};
 *     projmt_results *res;
 *     if (projmt_translate(t, src, 1, NULL, &res) != PROJMT_OK) { ... projmt_last_error() ... }
 *     printf("%s\n", projmt_results_hypothesis(res, 0, 0));
 *     projmt_results_destroy(res);
 *     projmt_translator_free(t);
 *
 * Errors: functions that can fail return a projmt_status (or NULL); the
 * calling thread's projmt_last_error() then says why. The library never
 * prints, exits or aborts: its warnings go to the log callback
 * (projmt_set_log_callback; none by default), and what it repaired in an
 * input is in that result's flags.
 *
 * Threads: translators are independent — any number may translate at the
 * same time, each on its own thread (each its own model, buffers and
 * OpenMP team; the library keeps no mutable state of the process but the
 * log callback). One translator is used by one thread at a time: calls on
 * the same translator from two threads at once must be serialised by the
 * caller (the Python package does). A translator's products run on
 * `threads` OpenMP threads of the thread that calls it.
 *
 * Ownership: a translator owns its model; results belong to the caller
 * until projmt_results_destroy (projmt_results_free for the first API's
 * arrays).
 *
 * Growing without breaking (sqlite3 and whisper.h are the models): option
 * structs begin with struct_size, which their init function sets from the
 * caller's sizeof, so a newer library reads an older caller's struct and
 * the reverse (a field the library does not know must be zero); results
 * are an opaque object read through accessor functions; symbols carry a
 * version node per release (PROJMT_0 for 0.1.0, PROJMT_0.2 for 0.2.0:
 * src/api/libprojmt.map), so a program built against 0.1.0 runs on any
 * later 0.x library. PROJMT_VERSION_NUMBER / projmt_version_number()
 * compare versions; PROJMT_API_VERSION changes only when the API breaks.
 * The first API (projmt_translator_new, projmt_translate_batch and the
 * projmt_result array) stays for programs built against it; new code uses
 * the functions above, which can grow.
 */
#ifndef PROJMT_H
#define PROJMT_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define PROJMT_VERSION_MAJOR 0
#define PROJMT_VERSION_MINOR 2
#define PROJMT_VERSION_PATCH 0
/* MAJOR · 1000000 + MINOR · 1000 + PATCH (sqlite3's SQLITE_VERSION_NUMBER form). */
#define PROJMT_VERSION_NUMBER (PROJMT_VERSION_MAJOR * 1000000 + PROJMT_VERSION_MINOR * 1000 + PROJMT_VERSION_PATCH)
#define PROJMT_API_VERSION 1

typedef enum projmt_status {
    PROJMT_OK = 0,
    PROJMT_ERROR_ARGUMENT = 1,   /* a bad argument or option value */
    PROJMT_ERROR_MODEL = 2,      /* the model file is missing, unreadable, damaged or foreign */
    PROJMT_ERROR_RUNTIME = 3,    /* decoding failed (e.g. a product this CPU cannot run) */
    PROJMT_ERROR_MEMORY = 4,     /* out of memory */
    PROJMT_ERROR_CANCELLED = 5   /* the abort callback stopped the call (0.2.0) */
} projmt_status;

/* "0.2.0" */
const char *projmt_version(void);
/* PROJMT_VERSION_NUMBER of the library: 2000 for 0.2.0 (since 0.2.0). */
int projmt_version_number(void);
/* PROJMT_API_VERSION of the library (to check a header against a library). */
int projmt_api_version(void);
/* Why the calling thread's last failed call failed ("" when none failed). */
const char *projmt_last_error(void);
/* The CPU as the library sees it (oneDNN's effective ISA: "avx2",
 * "avx512_core_vnni", "avx512_core_amx", ...). */
const char *projmt_cpu_isa(void);

/* ---- warnings (0.2.0) ---- */
typedef enum projmt_log_level { PROJMT_LOG_WARNING = 1, PROJMT_LOG_INFO = 2 } projmt_log_level;
/* message: one line without a newline, valid during the call. Called from
 * whichever thread the library works on; it must not call back into the
 * library's log functions. */
typedef void (*projmt_log_callback)(projmt_log_level level, const char *message, void *user_data);
/* Where the library's warnings go, for the whole process (NULL: nowhere,
 * the default), e.g. a checkpoint written by a newer projmt whose settings
 * this library skips. Safe to call at any time from any thread. */
void projmt_set_log_callback(projmt_log_callback callback, void *user_data);

typedef struct projmt_translator projmt_translator;

/* ---- opening a model (0.2.0) ---- */
typedef struct projmt_translator_options {
    size_t struct_size;          /* sizeof(projmt_translator_options) as the caller compiled it (the init sets it) */
    const char *compute_type;    /* "auto" (default), "fp32", "bf16" or "int8" (CTranslate2's names) */
    int threads;                 /* OpenMP threads of each call (0: all cores) */
    int max_batch;               /* sentences per internal batch (0: 64) */
} projmt_translator_options;

/* Sets *options to the defaults, struct_size = struct_size (pass sizeof
 * *options). */
void projmt_translator_options_init(projmt_translator_options *options, size_t struct_size);

/* Loads a checkpoint or exported model file into *translator (NULL on
 * failure). options may be NULL (the defaults). PROJMT_ERROR_ARGUMENT (bad
 * options), PROJMT_ERROR_MODEL (missing, unreadable, damaged, foreign or
 * out-of-limits file), PROJMT_ERROR_MEMORY, or PROJMT_ERROR_RUNTIME (this
 * CPU cannot run the build or the compute type). */
projmt_status projmt_translator_open(const char *model_path, const projmt_translator_options *options,
                                     projmt_translator **translator);
/* Frees t and its model (NULL is a no-op). Not during a call on t. */
void projmt_translator_free(projmt_translator *t);

/* What the translator multiplies with on this CPU, e.g.
 * "compute type int8 on avx512_core_vnni (...)". Valid while t lives. */
const char *projmt_translator_compute(const projmt_translator *t);

/* From the next call on, each batch's output vocabulary
 * is the model's vocabulary shortlist for its sentences: `candidates`
 * target pieces per source piece and the most frequent pieces (as
 * CTranslate2's use_vmap and Marian's --shortlist): faster, and close to
 * but not exactly the full vocabulary's translations. 0 goes back to the
 * whole vocabulary. PROJMT_ERROR_ARGUMENT when candidates < 0 or the model
 * carries no shortlist (`projmt export --shortlist DATA_DIR` stores one). */
projmt_status projmt_translator_set_shortlist(projmt_translator *t, int candidates);

/* ---- translating (0.2.0) ---- */
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

/* Polled before each internal batch and at every search step; non-zero
 * stops the call, which returns PROJMT_ERROR_CANCELLED (whisper.h's
 * abort_callback). Called from the translating threads — the caller's or
 * its OpenMP workers', never two at once — so it must not assume the
 * caller's thread. */
typedef int (*projmt_abort_callback)(void *user_data);

typedef struct projmt_translation_options {
    size_t struct_size;          /* sizeof(projmt_translation_options) as the caller compiled it (the init sets it) */
    int beam_size;               /* 1 = greedy (default 4) */
    int num_hypotheses;          /* n-best per sentence, <= beam_size (default 1) */
    int return_scores;           /* fill the scores (default 0) */
    int return_alignment;        /* fill the best hypothesis's alignment (default 0) */
    double length_penalty;       /* α of score = logprob / (length + 1)^α (default 1.0) */
    int max_decoding_length;     /* longest output in pieces (0, the default: 1.5 · source + 10, capped by the model) */
    projmt_abort_callback abort_callback;   /* NULL (default): never stopped */
    void *abort_callback_user_data;
} projmt_translation_options;

/* Sets *options to the defaults, struct_size = struct_size (pass sizeof
 * *options). */
void projmt_translation_options_init(projmt_translation_options *options, size_t struct_size);

/* A call's results: opaque, read through the accessors below (valid until
 * projmt_results_destroy; an index out of range gives 0, NULL or NaN). */
typedef struct projmt_results projmt_results;

/* Result flags: what the library repaired in a sentence's input. */
#define PROJMT_RESULT_INPUT_CUT 1u        /* more pieces than the model takes: only the first were translated */
#define PROJMT_RESULT_BYTES_REPLACED 2u   /* invalid UTF-8 bytes were read as U+FFFD */

/* Translates sentences[0..n) (UTF-8, one sentence each) and sets *results
 * (NULL on failure). options may be NULL (the defaults).
 * PROJMT_ERROR_ARGUMENT, PROJMT_ERROR_MEMORY, PROJMT_ERROR_RUNTIME or
 * PROJMT_ERROR_CANCELLED; nothing is returned on failure. */
projmt_status projmt_translate(projmt_translator *t, const char *const *sentences, size_t n,
                               const projmt_translation_options *options, projmt_results **results);
size_t projmt_results_count(const projmt_results *results);
/* Hypotheses of sentence i, best first (0 for an empty line). */
int projmt_results_num_hypotheses(const projmt_results *results, size_t i);
const char *projmt_results_hypothesis(const projmt_results *results, size_t i, int k);
/* Score of hypothesis k (NaN unless return_scores). */
float projmt_results_score(const projmt_results *results, size_t i, int k);
/* The best hypothesis's alignment (NULL unless return_alignment, or for an
 * empty line). Fields may be added at its end: never copy one by value. */
const projmt_alignment *projmt_results_alignment(const projmt_results *results, size_t i);
/* PROJMT_RESULT_* bits of sentence i. */
unsigned projmt_results_flags(const projmt_results *results, size_t i);
/* Pieces of sentence i's input (before any cut). */
int projmt_results_source_pieces(const projmt_results *results, size_t i);
void projmt_results_destroy(projmt_results *results);

/* ---- the first API (0.1.0): kept for programs built against it ---- */
typedef struct projmt_load_options {
    const char *compute_type;    /* "auto" (default), "fp32", "bf16" or "int8" (CTranslate2's names) */
    int threads;                 /* OpenMP threads of each call (0: all cores) */
    int max_batch;               /* sentences per internal batch (0: 64) */
} projmt_load_options;

/* projmt_translator_open's work (NULL on failure; projmt_last_error says why). */
projmt_translator *projmt_translator_new(const char *model_path, const projmt_load_options *options);

typedef struct projmt_translate_options {
    int beam_size;               /* 1 = greedy (0: 4) */
    int num_hypotheses;          /* n-best per sentence, <= beam_size (0: 1) */
    int return_scores;           /* fill projmt_result.scores */
    int return_alignment;        /* fill projmt_result.alignment for the best hypothesis */
    double length_penalty;       /* α of score = logprob / (length + 1)^α (< 0: 1.0) */
    int max_decoding_length;     /* longest output in pieces (0: 1.5 · source + 10, capped by the model) */
} projmt_translate_options;

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

/* ---- sentences ---- */
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
 * translates better cut this way, one sentence per string given to
 * projmt_translate. Sets *count to the number of sentences and fills spans[0 ..
 * min(*count, max_spans)) (spans may be NULL when max_spans is 0, to size
 * the array). */
projmt_status projmt_split_sentences(const char *text, size_t length, projmt_span *spans, size_t max_spans,
                                     size_t *count);

#ifdef __cplusplus
}
#endif

#endif

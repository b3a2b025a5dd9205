/*
 * average.c — see average.h. One double accumulator of n_params values; the
 * checkpoints are read one at a time, so memory is that of two models.
 */
#include "model/average.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/checkpoint.h"

void pmt_step_checkpoint_path(char *buf, size_t len, const char *dir, int64_t step) {
    snprintf(buf, len, "%s/step-%" PRId64 ".ckpt", dir, step);
}

/* The step of a name "step-<digits>.ckpt", or -1. */
static int64_t step_of_name(const char *name) {
    if (strncmp(name, "step-", 5) != 0) return -1;
    char *end = NULL;
    errno = 0;
    long long v = strtoll(name + 5, &end, 10);
    if (errno || end == name + 5 || v < 0 || strcmp(end, ".ckpt") != 0 || name[5] < '0' || name[5] > '9') return -1;
    return (int64_t)v;
}

static int compare_steps(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

int pmt_step_checkpoints(const char *dir, int64_t **steps, int *n, char *err, size_t errlen) {
    *steps = NULL;
    *n = 0;
    DIR *d = opendir(dir);
    if (!d) {
        snprintf(err, errlen, "cannot read directory '%s': %s", dir, strerror(errno));
        return -1;
    }
    int cap = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        int64_t step = step_of_name(e->d_name);
        if (step < 0) continue;
        if (*n == cap) {
            cap = cap ? 2 * cap : 16;
            int64_t *grown = realloc(*steps, (size_t)cap * sizeof *grown);
            if (!grown) {
                closedir(d);
                free(*steps);
                *steps = NULL;
                snprintf(err, errlen, "out of memory listing '%s'", dir);
                return -1;
            }
            *steps = grown;
        }
        (*steps)[(*n)++] = step;
    }
    closedir(d);
    if (*n) qsort(*steps, (size_t)*n, sizeof **steps, compare_steps);
    return 0;
}

/* Same tensor names, shapes and offsets. */
static int same_table(const pmt_checkpoint *a, const pmt_checkpoint *b) {
    if (a->n_tensors != b->n_tensors || a->n_params != b->n_params || a->vocab_size != b->vocab_size) return 0;
    for (int i = 0; i < a->n_tensors; i++) {
        const pmt_tensor *x = &a->tensors[i], *y = &b->tensors[i];
        if (strcmp(x->name, y->name) || x->rows != y->rows || x->cols != y->cols || x->offset != y->offset) return 0;
    }
    return 1;
}

/* The first [model] setting in which a and b differ, as "kernel: gaussian
 * vs epanechnikov" in diff; 1 when they agree. Dropout and label smoothing
 * may differ: they shape training only, not what the weights compute. */
static int same_model_config(const pmt_checkpoint *a, const pmt_checkpoint *b, char *diff, size_t len) {
    char *text_a = pmt_config_to_string(&a->cfg), *text_b = pmt_config_to_string(&b->cfg);
    int same = text_a && text_b;
    snprintf(diff, len, "%s", same ? "" : "out of memory comparing the configs");
    char *save_a = NULL, *save_b = NULL;
    int in_model = 0;
    /* Both texts list the same keys in the same order (one config table). */
    for (char *la = same ? strtok_r(text_a, "\n", &save_a) : NULL, *lb = same ? strtok_r(text_b, "\n", &save_b) : NULL;
         la && lb && same; la = strtok_r(NULL, "\n", &save_a), lb = strtok_r(NULL, "\n", &save_b)) {
        if (la[0] == '[') { in_model = !strcmp(la, "[model]"); continue; }
        if (!in_model || !strncmp(la, "dropout =", 9) || !strncmp(la, "label_smoothing =", 17) || !strcmp(la, lb))
            continue;
        const char *eq = strstr(lb, " = ");
        snprintf(diff, len, "%s vs%s", la, eq ? eq + 2 : lb);
        same = 0;
    }
    free(text_a);
    free(text_b);
    return same;
}

/* What may keep two files from being averaged, in err: another model
 * (table, config, tokenizer), or moving averages mixed with raw weights. */
static int compatible(const pmt_checkpoint *first, const pmt_checkpoint *ck, const char *first_path,
                      const char *path, char *err, size_t errlen) {
    char diff[PMT_PATH_MAX + 64];
    if (!same_table(first, ck)) {
        snprintf(err, errlen, "'%s' holds another model than '%s' (tensor table differs); average checkpoints "
                 "of one training run", path, first_path);
        return 0;
    }
    if (!same_model_config(first, ck, diff, sizeof diff)) {
        snprintf(err, errlen, "'%s' holds another model than '%s' (config differs: %s); average checkpoints of "
                 "one training run", path, first_path, diff);
        return 0;
    }
    if (first->spm_size != ck->spm_size || memcmp(first->spm, ck->spm, ck->spm_size)) {
        snprintf(err, errlen, "'%s' holds another model than '%s' (its SentencePiece model differs); average "
                 "checkpoints of one training run", path, first_path);
        return 0;
    }
    if (first->params_are_ema != ck->params_are_ema) {
        snprintf(err, errlen, "'%s' gives its %s and '%s' its %s: averaging would mix moving averages with raw "
                 "weights; average files that all have a moving average (--ema) or none",
                 first_path, first->params_are_ema ? "moving average" : "raw weights (no moving average)", path,
                 ck->params_are_ema ? "moving average" : "raw weights (no moving average)");
        return 0;
    }
    return 1;
}

/* Loads the first file into *first, the others one by one, summing their
 * inference weights into sum. */
static int accumulate(const char *const *paths, int n, pmt_checkpoint *first, double **sum, char *err,
                      size_t errlen) {
    if (pmt_checkpoint_load(first, paths[0], err, errlen) != 0) return -1;
    pmt_checkpoint_use_ema(first);
    *sum = malloc(first->n_params * sizeof **sum);
    if (!*sum) {
        snprintf(err, errlen, "averaging: out of memory for %zu parameters", first->n_params);
        return -1;
    }
    for (size_t i = 0; i < first->n_params; i++) (*sum)[i] = first->params[i];
    for (int k = 1; k < n; k++) {
        pmt_checkpoint ck;
        if (pmt_checkpoint_load(&ck, paths[k], err, errlen) != 0) return -1;
        pmt_checkpoint_use_ema(&ck);
        const int same = compatible(first, &ck, paths[0], paths[k], err, errlen);
        if (same)
            for (size_t i = 0; i < ck.n_params; i++) (*sum)[i] += ck.params[i];
        pmt_checkpoint_free(&ck);
        if (!same) return -1;
    }
    return 0;
}

int pmt_checkpoint_average(const char *const *paths, int n, const char *out, char *err, size_t errlen) {
    if (n < 1) {
        snprintf(err, errlen, "averaging: no checkpoints given");
        return -1;
    }
    pmt_checkpoint first;
    double *sum = NULL;
    int rc = accumulate(paths, n, &first, &sum, err, errlen);
    if (rc == 0) {
        for (size_t i = 0; i < first.n_params; i++) first.params[i] = (float)(sum[i] / n);
        /* The model shell pmt_checkpoint_save reads: config, table, parameters. */
        pmt_model shell;
        memset(&shell, 0, sizeof shell);
        shell.cfg = first.cfg;
        shell.V = first.vocab_size;
        shell.tensors = first.tensors;
        shell.n_tensors = first.n_tensors;
        shell.n_params = first.n_params;
        shell.params = first.params;
        rc = pmt_checkpoint_save(out, &shell, first.spm, first.spm_size, NULL, NULL, NULL, err, errlen);
    }
    free(sum);
    pmt_checkpoint_free(&first);
    return rc;
}

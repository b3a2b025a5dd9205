/*
 * test_reference.c — the C model against an independent implementation.
 *
 * tests/reference/make_fixture.py rebuilds the tiny model in PyTorch (float64,
 * torch autograd) and writes, per attention configuration, the weights (in our
 * tensor-table order), one padded batch, the output probabilities, the loss and
 * every parameter gradient (in the tensor layout before the fused Q/K/V
 * projection, which this test converts). Here we load the same weights into pmt_model, run
 * forward and backward in fp32, and compare. Tolerances reflect fp32 vs fp64
 * arithmetic on O(1) values.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model/model.h"
#include "testutil.h"

typedef struct fixture {
    char kinds[3][16], sigma[16];
    int V, C, NH, F, layers;
    double label_smoothing;
    double *shape, *src_len, *tgt_len, *src, *tgt_in, *tgt_out, *params, *probs, *loss, *grads;
    size_t n_params, n_probs, n_grads;
} fixture;

/* Reads "name count\nvalues...\n" sections; returns a malloc'd array. */
static double *read_section(FILE *f, const char *want, size_t *count) {
    char name[64];
    size_t n;
    if (fscanf(f, "%63s %zu", name, &n) != 2 || strcmp(name, want) != 0) {
        fprintf(stderr, "fixture: expected section '%s'\n", want);
        return NULL;
    }
    double *v = malloc((n ? n : 1) * sizeof *v);
    for (size_t i = 0; i < n; i++)
        if (fscanf(f, "%lf", &v[i]) != 1) { free(v); return NULL; }
    if (count) *count = n;
    return v;
}

static int load_fixture(fixture *fx, const char *path) {
    memset(fx, 0, sizeof *fx);
    FILE *f = fopen(path, "r");
    if (!f) { fprintf(stderr, "cannot open fixture %s (regenerate with tests/reference/make_fixture.py)\n", path); return -1; }
    char line[1024];
    int ok = fgets(line, sizeof line, f) != NULL && fgets(line, sizeof line, f) != NULL;
    ok = ok && sscanf(line, "config V=%d C=%d NH=%d F=%d layers=%d label_smoothing=%lf encoder_self=%15s "
                            "decoder_self=%15s decoder_cross=%15s sigma=%15s",
                      &fx->V, &fx->C, &fx->NH, &fx->F, &fx->layers, &fx->label_smoothing, fx->kinds[0],
                      fx->kinds[1], fx->kinds[2], fx->sigma) == 10;
    ok = ok && (fx->shape = read_section(f, "shape", NULL)) && (fx->src_len = read_section(f, "src_len", NULL)) &&
         (fx->tgt_len = read_section(f, "tgt_len", NULL)) && (fx->src = read_section(f, "src", NULL)) &&
         (fx->tgt_in = read_section(f, "tgt_in", NULL)) && (fx->tgt_out = read_section(f, "tgt_out", NULL)) &&
         (fx->params = read_section(f, "params", &fx->n_params)) &&
         (fx->probs = read_section(f, "probs", &fx->n_probs)) && (fx->loss = read_section(f, "loss", NULL)) &&
         (fx->grads = read_section(f, "grads", &fx->n_grads));
    fclose(f);
    return ok ? 0 : -1;
}

static void free_fixture(fixture *fx) {
    double *all[] = {fx->shape, fx->src_len, fx->tgt_len, fx->src, fx->tgt_in, fx->tgt_out, fx->params, fx->probs, fx->loss, fx->grads};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) free(all[i]);
}

static int32_t *to_ids(const double *v, int n) {
    int32_t *ids = malloc((size_t)n * sizeof *ids);
    for (int i = 0; i < n; i++) ids[i] = (int32_t)v[i];
    return ids;
}

static void run_case(const char *name) {
    char path[1200], err[256];
    snprintf(path, sizeof path, "%s/tests/fixtures/reference_%s.txt", test_source_dir(), name);
    fixture fx;
    if (load_fixture(&fx, path) != 0) { CHECK_MSG(0, "cannot read fixture %s", path); return; }
    pmt_config cfg;
    pmt_config_defaults(&cfg);
    cfg.d_model = fx.C;
    cfg.n_heads = fx.NH;
    cfg.d_ff = fx.F;
    cfg.enc_layers = cfg.dec_layers = fx.layers;
    cfg.dropout = 0;
    cfg.label_smoothing = fx.label_smoothing;
    cfg.max_len = 16;
    cfg.batch_tokens = 64;
    CHECK(pmt_config_set(&cfg, "encoder_self", fx.kinds[0], err, sizeof err) == 0);
    CHECK(pmt_config_set(&cfg, "decoder_self", fx.kinds[1], err, sizeof err) == 0);
    CHECK(pmt_config_set(&cfg, "decoder_cross", fx.kinds[2], err, sizeof err) == 0);
    CHECK(pmt_config_set(&cfg, "sigma", fx.sigma, err, sizeof err) == 0);

    pmt_model m;
    if (pmt_model_init(&m, &cfg, fx.V, 64, 16, err, sizeof err) != 0) { CHECK_MSG(0, "%s", err); free_fixture(&fx); return; }
    CHECK_MSG(m.n_params == fx.n_params, "%s: C model has %zu params, fixture %zu", name, m.n_params, fx.n_params);
    if (m.n_params != fx.n_params) { pmt_model_free(&m); free_fixture(&fx); return; }
    /* The fixture is in the layout before the fused Q/K/V projection (the
     * script writes wq, bq, wk, bk, wv, bv per site): it is converted by
     * the loader's converter, parameters and gradients alike. */
    float *params = malloc(m.n_params * sizeof *params), *grads = malloc(m.n_params * sizeof *grads);
    pmt_tensor *table = calloc((size_t)m.n_tensors * 3, sizeof *table);
    for (size_t i = 0; i < m.n_params; i++) {
        params[i] = (float)fx.params[i];
        grads[i] = (float)fx.grads[i];
    }
    int n_table = test_legacy_qkv_table(&m, table), sites = 0;
    for (int i = 0; i < m.n_tensors; i++) sites += strstr(m.tensors[i].name, ".wqkv") != NULL;
    float *const arrays[] = {params, grads};
    CHECK_MSG(pmt_model_fuse_legacy_qkv(table, &n_table, arrays, 2, err, sizeof err) == sites, "%s", err);
    CHECK(n_table == m.n_tensors);
    for (int i = 0; i < m.n_tensors && i < n_table; i++)
        CHECK_MSG(!strcmp(table[i].name, m.tensors[i].name) && table[i].offset == m.tensors[i].offset &&
                  table[i].rows == m.tensors[i].rows && table[i].cols == m.tensors[i].cols,
                  "%s: converted tensor %d is '%s', the model's '%s'", name, i, table[i].name, m.tensors[i].name);
    memcpy(m.params, params, m.n_params * sizeof *params);

    int B = (int)fx.shape[0], S = (int)fx.shape[1], T = (int)fx.shape[2];
    int32_t *src = to_ids(fx.src, B * S), *tin = to_ids(fx.tgt_in, B * T), *tout = to_ids(fx.tgt_out, B * T);
    int32_t *slen = to_ids(fx.src_len, B), *tlen = to_ids(fx.tgt_len, B);
    pmt_batch b = {B, S, T, src, slen, tin, tout, tlen};
    pmt_stats st;
    pmt_model_zero_grad(&m);
    double loss = pmt_model_forward(&m, &b, 0, 0, &st);
    pmt_model_backward(&m, &b, st.tokens);

    /* Backward turns the probabilities into dlogits in place, so the
     * probabilities are read after a second forward pass. */
    CHECK_NEAR(loss, fx.loss[0], 1e-5 * fabs(fx.loss[0]) + 1e-6);
    double max_grad_err = 0, max_grad = 0;
    for (size_t i = 0; i < m.n_params; i++) {
        double e = fabs((double)m.grads[i] - grads[i]);
        if (e > max_grad_err) max_grad_err = e;
        if (fabs(grads[i]) > max_grad) max_grad = fabs(grads[i]);
    }
    CHECK_MSG(max_grad_err <= 1e-4 * max_grad + 1e-6, "%s: max gradient error %.3g (max |grad| %.3g)", name,
              max_grad_err, max_grad);
    float *probs = malloc(fx.n_probs * sizeof(float));
    double max_prob_err = 0;
    pmt_model_forward(&m, &b, 0, 0, &st);
    pmt_model_output_probs(&m, probs);
    for (size_t i = 0; i < fx.n_probs; i++) {
        double e = fabs((double)probs[i] - fx.probs[i]);
        if (e > max_prob_err) max_prob_err = e;
    }
    CHECK_MSG(max_prob_err <= 1e-5, "%s: max probability error %.3g", name, max_prob_err);
    printf("%-20s loss C %.9f torch %.9f | max |dprob| %.2e | max |dgrad| %.2e (max |grad| %.2e)\n", name, loss,
           fx.loss[0], max_prob_err, max_grad_err, max_grad);
    free(probs);
    free(params);
    free(grads);
    free(table);
    free(src); free(tin); free(tout); free(slen); free(tlen);
    pmt_model_free(&m);
    free_fixture(&fx);
}

int main(void) {
    run_case("standard");
    run_case("projection");
    run_case("projection_learned");
    run_case("mixed");
    return test_finish();
}

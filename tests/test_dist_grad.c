/*
 * test_dist_grad.c — the MPI layer (dist.h) and the data-parallel gradient.
 *
 * Run alone (ctest) it is one process: it checks the single-process no-op
 * path (rank 0 of 1, collectives leave buffers untouched) and that a
 * "sharded" step with one shard is bitwise the whole-batch step.
 * Run by tests/test_dist_mpi.sh under `mpirun -np 2` it checks the real
 * thing: every collective's result, and that the all-reduced gradient of a
 * global batch split across the ranks (rank r takes sentences r, r+N, ...,
 * each padded only to its own longest sentence, all scaled by the GLOBAL
 * target-token count obtained by an all-reduce) equals the gradient of the
 * whole batch in one process to 1e-5 relative per tensor. Every rank
 * computes that reference itself: the model is tiny.
 *
 * `--die` / `--abort` (used by the script only): rank 1 kills itself with
 * SIGKILL, or calls pmt_dist_abort, while rank 0 waits in an all-reduce; the
 * script checks that mpirun then ends the job with a message, not a hang.
 */
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include <omp.h>

#include "train/dist.h"
#include "model/model.h"
#include "testutil.h"

enum { V = 29, GB = 7, GS = 9, GT = 8 };  /* global batch: GB pairs padded to GS, GT */

/* A padded batch with its own buffers (sized for the global batch). */
typedef struct {
    pmt_batch b;
    int32_t src[GB * GS], src_len[GB], tin[GB * GT], tout[GB * GT], tlen[GB];
} owned_batch;

static void bind(owned_batch *o, int B, int S, int T) {
    o->b = (pmt_batch){B, S, T, o->src, o->src_len, o->tin, o->tout, o->tlen};
}

/* Seven pairs of different lengths, so padding and masks matter and the two
 * shards have different shapes. */
static void make_global(owned_batch *g) {
    static const int slen[GB] = {9, 3, 6, 1, 8, 4, 2}, ylen[GB] = {5, 8, 2, 4, 3, 7, 1};
    unsigned seed = 11;
    bind(g, GB, GS, GT);
    for (int i = 0; i < GB; i++) {
        g->src_len[i] = slen[i];
        g->tlen[i] = ylen[i];
        for (int s = 0; s < GS; s++) g->src[i * GS + s] = s < slen[i] ? 4 + (int)((seed = seed * 1103515245u + 12345u) >> 16) % (V - 4) : PMT_PAD_ID;
        for (int t = 0; t < GT; t++) {
            int32_t y = t < ylen[i] - 1 ? 4 + (int)((seed = seed * 1103515245u + 12345u) >> 16) % (V - 4)
                                        : (t == ylen[i] - 1 ? PMT_EOS_ID : PMT_PAD_ID);
            g->tout[i * GT + t] = y;
            g->tin[i * GT + t] = t == 0 ? PMT_BOS_ID : (t < ylen[i] ? g->tout[i * GT + t - 1] : PMT_PAD_ID);
        }
    }
}

/* Rows part, part + parts, ... of g, padded only to their own longest row. */
static void make_shard(const owned_batch *g, int part, int parts, owned_batch *o) {
    int B = 0, S = 1, T = 1;
    for (int r = part; r < GB; r += parts, B++) {
        if (g->src_len[r] > S) S = g->src_len[r];
        if (g->tlen[r] > T) T = g->tlen[r];
    }
    bind(o, B, S, T);
    for (int k = 0, r = part; r < GB; r += parts, k++) {
        memcpy(o->src + k * S, g->src + r * GS, (size_t)S * sizeof(int32_t));
        memcpy(o->tin + k * T, g->tin + r * GT, (size_t)T * sizeof(int32_t));
        memcpy(o->tout + k * T, g->tout + r * GT, (size_t)T * sizeof(int32_t));
        o->src_len[k] = g->src_len[r];
        o->tlen[k] = g->tlen[r];
    }
}

static int init_model(pmt_model *m, int enc_self_kind, uint64_t seed) {
    pmt_config cfg;
    char err[256];
    pmt_config_defaults(&cfg);
    cfg.d_model = 16;
    cfg.n_heads = 2;
    cfg.d_ff = 24;
    cfg.enc_layers = 2;
    cfg.dec_layers = 2;
    cfg.dropout = 0.0;  /* dropout masks depend on a row's place in its batch: off for exact comparison */
    cfg.label_smoothing = 0.1;
    cfg.max_len = 16;
    cfg.site_kind[PMT_SITE_ENC_SELF] = enc_self_kind;
    if (pmt_model_init(m, &cfg, V, GB * GS, 16, err, sizeof err) != 0) {
        CHECK_MSG(0, "model init: %s", err);
        return -1;
    }
    pmt_model_init_params(m, seed);
    return 0;
}

static double norm2(const float *a, const float *b, size_t n) {
    double s = 0;
    for (size_t i = 0; i < n; i++) {
        double d = (double)a[i] - (b ? (double)b[i] : 0.0);
        s += d * d;
    }
    return sqrt(s);
}

/* The data-parallel step: this rank's shard, global denominator, summed
 * gradients and statistics. sums = {loss_sum, tokens, correct}. */
static void sharded_step(pmt_model *m, const owned_batch *g, double sums[3]) {
    owned_batch shard;
    make_shard(g, pmt_dist_rank(), pmt_dist_size(), &shard);
    double local_tokens = 0;
    for (int k = 0; k < shard.b.B; k++) local_tokens += shard.b.tgt_len[k];
    double denominator = local_tokens;
    pmt_dist_allreduce_sum_doubles(&denominator, 1);
    pmt_model_zero_grad(m);
    pmt_stats st = {0, 0, 0, 0};
    if (shard.b.B > 0) {
        pmt_model_forward(m, &shard.b, 0, 0, &st);
        pmt_model_backward(m, &shard.b, denominator);
    }
    pmt_dist_allreduce_sum_floats(m->grads, m->n_params);
    sums[0] = st.loss_sum;
    sums[1] = st.tokens;
    sums[2] = st.correct;
    pmt_dist_allreduce_sum_doubles(sums, 3);
    CHECK_NEAR(sums[1], denominator, 0);
}

static void check_gradient(const char *label, int enc_self_kind) {
    pmt_model m;
    /* Ranks start from different parameters: the broadcast must make them equal. */
    if (init_model(&m, enc_self_kind, 42 + (uint64_t)pmt_dist_rank()) != 0) return;
    pmt_dist_broadcast_floats(m.params, m.n_params);
    CHECK(pmt_dist_same_on_all_ranks(m.params, m.n_params * sizeof(float)));
    if (pmt_dist_is_root()) {
        pmt_model seed42;
        if (init_model(&seed42, enc_self_kind, 42) != 0) return;
        CHECK(memcmp(seed42.params, m.params, m.n_params * sizeof(float)) == 0);
        pmt_model_free(&seed42);
    }

    owned_batch g;
    make_global(&g);
    pmt_stats ref;
    pmt_model_zero_grad(&m);
    pmt_model_forward(&m, &g.b, 0, 0, &ref);
    pmt_model_backward(&m, &g.b, ref.tokens);
    float *want = malloc(m.n_params * sizeof(float));
    memcpy(want, m.grads, m.n_params * sizeof(float));

    double sums[3];
    sharded_step(&m, &g, sums);
    CHECK_NEAR(sums[0], ref.loss_sum, 1e-5 * fabs(ref.loss_sum));
    CHECK_NEAR(sums[1], ref.tokens, 0);
    CHECK_NEAR(sums[2], ref.correct, 0);
    CHECK(pmt_dist_same_on_all_ranks(m.grads, m.n_params * sizeof(float)));
    if (pmt_dist_size() == 1)
        CHECK_MSG(memcmp(want, m.grads, m.n_params * sizeof(float)) == 0, "one shard must be the whole batch, bitwise");

    /* Per tensor, norm-wise: robust to the elements that cancel to ~0; the
     * floor (1e-3 of the whole gradient) covers tensors that are zero by
     * construction (the key bias). */
    const double floor = 1e-3 * norm2(want, NULL, m.n_params);
    double worst = 0;
    const char *worst_name = "";
    for (int i = 0; i < m.n_tensors; i++) {
        const pmt_tensor *t = &m.tensors[i];
        double ref_norm = norm2(want + t->offset, NULL, t->size);
        double rel = norm2(m.grads + t->offset, want + t->offset, t->size) / fmax(ref_norm, floor);
        CHECK_MSG(rel <= 1e-5, "%s: tensor %s differs by %.3g relative", label, t->name, rel);
        if (rel > worst) worst = rel, worst_name = t->name;
    }
    printf("rank %d of %d: %-28s %zu params, worst tensor %-18s rel err %.2e\n", pmt_dist_rank(), pmt_dist_size(),
           label, m.n_params, worst_name, worst);
    free(want);
    pmt_model_free(&m);
}

/* Every collective's result, on data that differs per rank. */
static void check_collectives(void) {
    const int r = pmt_dist_rank(), n = pmt_dist_size();
    CHECK(r >= 0 && r < n);
    CHECK(pmt_dist_is_root() == (r == 0));
    CHECK(pmt_dist_local_size() >= 1 && pmt_dist_local_size() <= n);
    CHECK(pmt_dist_default_threads() >= 1);
    CHECK(pmt_dist_default_threads() <= omp_get_num_procs());

    float f[5];
    for (int i = 0; i < 5; i++) f[i] = (float)(i + 1) * (float)(r + 1);
    pmt_dist_allreduce_sum_floats(f, 5);
    for (int i = 0; i < 5; i++) CHECK_NEAR(f[i], (i + 1) * n * (n + 1) / 2.0, 0);
    CHECK(pmt_dist_allreduce_calls() == (n > 1 ? 1 : 0));
    CHECK(pmt_dist_allreduce_seconds() >= 0);

    double d[2] = {0.5 + r, -1.0};
    pmt_dist_allreduce_sum_doubles(d, 2);
    CHECK_NEAR(d[0], n * 0.5 + n * (n - 1) / 2.0, 0);
    CHECK_NEAR(d[1], -n, 0);

    int mx[2] = {r, -r};
    pmt_dist_allreduce_max_ints(mx, 2);
    CHECK(mx[0] == n - 1 && mx[1] == 0);

    unsigned char bytes[3] = {(unsigned char)(7 + r), 1, 2};
    CHECK(pmt_dist_same_on_all_ranks(bytes, sizeof bytes) == (n == 1));
    pmt_dist_broadcast_bytes(bytes, sizeof bytes);
    CHECK(bytes[0] == 7 && bytes[1] == 1 && bytes[2] == 2);
    CHECK(pmt_dist_same_on_all_ranks(bytes, sizeof bytes));
    pmt_dist_barrier();
    CHECK(pmt_dist_wtime() > 0);
}

/* Rank 1 fails while rank 0 waits in a collective: the job must end. */
static int fail_rank1(const char *how) {
    if (pmt_dist_size() < 2) {
        fprintf(stderr, "%s needs at least 2 ranks\n", how);
        return 2;
    }
    if (pmt_dist_rank() == 1) {
        if (!strcmp(how, "--die")) raise(SIGKILL);
        pmt_dist_abort("deliberate abort from the test");
    }
    float x = 1;
    pmt_dist_allreduce_sum_floats(&x, 1);
    fprintf(stderr, "rank %d: all-reduce returned although rank 1 failed\n", pmt_dist_rank());
    return 1;
}

int main(int argc, char **argv) {
    char err[256];
    if (pmt_dist_init(&argc, &argv, err, sizeof err) != 0) {
        fprintf(stderr, "pmt_dist_init: %s\n", err);
        return 1;
    }
    if (argc > 1) return fail_rank1(argv[1]);
    /* Fixed thread count: the reference and the shards use the same kernels. */
    omp_set_num_threads(1);
    check_collectives();
    check_gradient("standard attention", PMT_ATTN_STANDARD);
    check_gradient("projection encoder self", PMT_ATTN_PROJECTION);
    printf("rank %d of %d: ", pmt_dist_rank(), pmt_dist_size());
    int rc = test_finish();
    pmt_dist_finalize();
    return rc;
}

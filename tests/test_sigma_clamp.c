/*
 * test_sigma_clamp.c — projection attention with a learned σ driven to
 * extremes. A log σ of −60 once made 1/(2σ²) overflow to +inf and the
 * self-attention diagonal (distance 0) inf · 0 = NaN. Now log σ is clamped
 * to [PMT_LOG_SIGMA_MIN, PMT_LOG_SIGMA_MAX]:
 *   - forward (both kernels) and backward stay finite for log σ = −60, −1e4, +1e4;
 *   - beyond the clamp the result equals the result at the bound exactly;
 *   - beyond the clamp the gradient of log σ is 0; inside it is not.
 */
#include "nn/ops.h"
#include "ops_testutil.h"
#include "testutil.h"

enum { B = 2, T = 5, C = 8, NH = 2 };

static int all_finite(const float *x, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (!isfinite(x[i])) return 0;
    return 1;
}

/* Self-attention (k = q), causal, with the given log σ for both heads. */
static void run(float log_sigma_value, float *out, float *out_few, float *dq, float *dls) {
    float q[B * T * C], probs[B * NH * T * T], probs_few[B * NH * T * T], dout[B * T * C];
    const float log_sigma[NH] = {log_sigma_value, log_sigma_value};
    const int32_t klen[B] = {T, T - 2};
    tu_seed(42);
    tu_fill(q, B * T * C, -1, 1);
    tu_fill(dout, B * T * C, -1, 1);
    projattn_forward(out, probs, q, q, log_sigma, klen, 1, B, T, T, C, NH);
    projattn_forward_few_queries(out_few, probs_few, q, q, log_sigma, klen, 1, B, T, T, C, NH);
    memset(dq, 0, sizeof(float) * B * T * C);
    memset(dls, 0, sizeof(float) * NH);
    projattn_backward(dq, dq, dls, dout, probs, q, q, log_sigma, klen, 1, B, T, T, C, NH);
}

int main(void) {
    const size_t N = B * T * C;
    float out[B * T * C], few[B * T * C], dq[B * T * C], dls[NH];
    float out_b[B * T * C], few_b[B * T * C], dq_b[B * T * C], dls_b[NH];

    const float low[] = {-60.0f, -1e4f};
    run((float)PMT_LOG_SIGMA_MIN, out_b, few_b, dq_b, dls_b);
    for (int i = 0; i < 2; i++) {
        run(low[i], out, few, dq, dls);
        CHECK_MSG(all_finite(out, N) && all_finite(few, N), "forward at log sigma %g", low[i]);
        CHECK_MSG(all_finite(dq, N) && all_finite(dls, NH), "backward at log sigma %g", low[i]);
        CHECK(!memcmp(out, out_b, sizeof out) && !memcmp(few, few_b, sizeof few) && !memcmp(dq, dq_b, sizeof dq));
        CHECK(dls[0] == 0.0f && dls[1] == 0.0f);
    }
    run((float)PMT_LOG_SIGMA_MAX, out_b, few_b, dq_b, dls_b);
    run(1e4f, out, few, dq, dls);
    CHECK(all_finite(out, N) && all_finite(few, N) && all_finite(dq, N));
    CHECK(!memcmp(out, out_b, sizeof out) && !memcmp(dq, dq_b, sizeof dq));
    CHECK(dls[0] == 0.0f && dls[1] == 0.0f);

    /* Inside the range the gradient flows (the clamp is not always on). */
    run(0.5f, out, few, dq, dls);
    CHECK(all_finite(dls, NH) && (dls[0] != 0.0f || dls[1] != 0.0f));
    return test_finish();
}

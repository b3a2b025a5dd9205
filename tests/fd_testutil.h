/*
 * fd_testutil.h — the central finite-difference check shared by the kernel
 * gradient tests (test_ops_grad.c, test_poolattn.c); the method and the
 * choice of h and tolerances are explained at the top of test_ops_grad.c.
 * Header-only because CMake links each test with testutil.c only.
 */
#ifndef PROJMT_FD_TESTUTIL_H
#define PROJMT_FD_TESTUTIL_H

#include "ops_testutil.h"
#include "testutil.h"

#define FD_H 1e-2
#define FD_RTOL 1e-2
#define FD_ATOL 1e-3

typedef double (*loss_fn)(void *ctx);

/* One differentiable input: its buffer, its gradient buffer, and the
 * gradient's contents before backward (NULL for ops that SET gradients). */
typedef struct {
    const char *name;
    float *x;
    const float *grad;
    const float *grad0;
    size_t n;
} fd_param;

/* Compares analytic and numeric gradients of every element; prints the max
 * error per parameter. Returns the worst |ana − num| / tolerance (≤ 1 passes). */
static inline double fd_check(const char *op, loss_fn f, void *ctx, const fd_param *ps, int np) {
    double worst_ratio = 0.0;
    for (int k = 0; k < np; k++) {
        const fd_param *p = &ps[k];
        double max_abs = 0.0, max_ratio = 0.0, wa = 0.0, wn = 0.0;
        size_t wi = 0;
        for (size_t i = 0; i < p->n; i++) {
            const float x0 = p->x[i];
            const double h = FD_H * fmax(1.0, fabs(x0));
            const float xp = (float)(x0 + h), xm = (float)(x0 - h);
            p->x[i] = xp;
            const double lp = f(ctx);
            p->x[i] = xm;
            const double lm = f(ctx);
            p->x[i] = x0;
            const double num = (lp - lm) / ((double)xp - (double)xm);
            const double ana = (double)p->grad[i] - (p->grad0 ? (double)p->grad0[i] : 0.0);
            const double err = fabs(ana - num);
            const double ratio = err / (FD_ATOL + FD_RTOL * fmax(fabs(ana), fabs(num)));
            if (err > max_abs) max_abs = err;
            if (ratio > max_ratio) { max_ratio = ratio; wi = i; wa = ana; wn = num; }
        }
        printf("  %-52s d%-10s max|ana-num| = %.3e  worst/tol = %.3f\n", op, p->name, max_abs, max_ratio);
        CHECK_MSG(max_ratio <= 1.0, "%s d%s[%zu]: analytic %.6g vs numeric %.6g", op, p->name, wi, wa, wn);
        if (max_ratio > worst_ratio) worst_ratio = max_ratio;
    }
    return worst_ratio;
}

/* Pre-fills a gradient buffer with random values and returns a copy of them. */
static inline float *prefill(float *g, size_t n) {
    tu_fill(g, n, -0.5, 0.5);
    return tu_copy(g, n);
}

#endif

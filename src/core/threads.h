/*
 * threads.h — the thread count of the one OpenMP pool.
 *
 * Why one pool: projmt's loops and the matrix products (nn/gemm.c: oneDNN
 * and the OpenMP build of OpenBLAS, both on libgomp) draw from the same
 * OpenMP threads, and each GEMM call runs on omp_get_max_threads() of them;
 * two pools would spin against each other on the same cores.
 */
#ifndef PROJMT_THREADS_H
#define PROJMT_THREADS_H

/* Sets the OpenMP thread count (0 = all cores); returns the count used. */
int pmt_set_threads(int threads);

#endif

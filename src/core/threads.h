/*
 * threads.h — one thread count for OpenMP and OpenBLAS together.
 *
 * Why together: with the OpenMP build of OpenBLAS (the default, see
 * CMakeLists.txt) both draw from one pool; setting one and not the other
 * leaves two pools spinning on the same cores.
 */
#ifndef PROJMT_THREADS_H
#define PROJMT_THREADS_H

/* Sets OpenMP and OpenBLAS thread counts (0 = all cores); returns the count used. */
int pmt_set_threads(int threads);

#endif

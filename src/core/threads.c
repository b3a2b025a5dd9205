/* threads.c — see threads.h. */
#include "core/threads.h"

#include <omp.h>

int pmt_set_threads(int threads) {
    int n = threads > 0 ? threads : omp_get_num_procs();
    omp_set_num_threads(n);
    return n;
}

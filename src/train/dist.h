/*
 * dist.h — the MPI layer of data-parallel training: which process am I, how
 * many are there, and the few collectives the training loop needs.
 *
 * Why a layer: the rest of projmt never includes <mpi.h>. The same calls work
 *   - in a build without MPI (PROJMT_HAVE_MPI unset),
 *   - in an MPI build started without a launcher (`projmt train`), and
 *   - under `mpirun -np 1`,
 * as a single process: rank 0 of 1, every collective a no-op that leaves its
 * buffer untouched, so single-process training is byte-identical to a build
 * without MPI. MPI is initialised only when a launcher started us (its
 * environment: OMPI_COMM_WORLD_SIZE, PMI_SIZE or PMIX_RANK), so a plain run
 * never pays for, or depends on, MPI start-up.
 *
 * Errors: the world communicator uses MPI_ERRORS_RETURN and every MPI_* return
 * code is checked. A failed collective leaves the ranks in unknown, different
 * states, so there is nothing to recover: the layer prints
 * "projmt: rank R of N: MPI_X failed: <MPI's reason>" and aborts the whole job
 * (MPI_Abort), which makes mpirun kill every rank and exit non-zero. If a rank
 * dies (crash, kill -9, OOM), Open MPI's runtime notices and kills the job too;
 * no rank is left waiting forever in a collective.
 *
 * Threads: MPI is initialised with MPI_THREAD_FUNNELED: only the thread that
 * called pmt_dist_init makes MPI calls (OpenMP/OpenBLAS workers never do).
 *
 * Ownership: the layer owns MPI's global state between pmt_dist_init and
 * pmt_dist_finalize; buffers passed in are the caller's and are only read or
 * overwritten in place.
 */
#ifndef PROJMT_DIST_H
#define PROJMT_DIST_H

#include <stddef.h>

/* Joins the job if a launcher started this process, else becomes the only
 * rank. Idempotent. Returns 0, or -1 with a message in err (MPI_Init failed,
 * or the MPI library lacks MPI_THREAD_FUNNELED). May remove MPI's own
 * arguments from argc/argv. */
int pmt_dist_init(int *argc, char ***argv, char *err, size_t errlen);
/* Leaves the job (MPI_Finalize, which waits for every rank); a no-op when not in one. */
void pmt_dist_finalize(void);

int pmt_dist_rank(void);            /* 0 .. size-1; 0 before init */
int pmt_dist_size(void);            /* ranks in the job; 1 before init */
int pmt_dist_is_root(void);         /* rank 0: the one that logs and writes files */
int pmt_dist_local_size(void);      /* ranks of this job on this machine (1 alone) */
/* Threads per rank when the user gave none: this machine's cores divided
 * among its ranks (at least 1), and no more than this process may run on
 * (its CPU affinity), so ranks x threads <= cores. */
int pmt_dist_default_threads(void);

/* Rank 0's contents of buf replace every other rank's. */
void pmt_dist_broadcast_floats(float *buf, size_t n);
void pmt_dist_broadcast_bytes(void *buf, size_t n);
/* In-place element-wise sum over all ranks; every rank gets the same sums.
 * The float version is the gradient all-reduce: its wall time is added to
 * pmt_dist_allreduce_seconds. */
void pmt_dist_allreduce_sum_floats(float *buf, size_t n);
void pmt_dist_allreduce_sum_doubles(double *buf, int n);
/* In-place element-wise maximum over all ranks (collective decisions). */
void pmt_dist_allreduce_max_ints(int *buf, int n);
/* 1 if buf holds the same bytes on every rank (compares a 64-bit hash). */
int pmt_dist_same_on_all_ranks(const void *buf, size_t n);
void pmt_dist_barrier(void);

/* Seconds spent inside pmt_dist_allreduce_sum_floats so far (waiting for
 * slower ranks included), and how many calls that was. */
double pmt_dist_allreduce_seconds(void);
long pmt_dist_allreduce_calls(void);
/* Wall-clock seconds (MPI_Wtime in a job, else a monotonic clock). */
double pmt_dist_wtime(void);

/* Prints "projmt: rank R of N: msg" and ends the whole job with status 1
 * (MPI_Abort in a job, exit(1) alone). */
void pmt_dist_abort(const char *msg) __attribute__((noreturn));

#endif

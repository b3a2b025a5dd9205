/*
 * dist.c — see dist.h. Everything MPI lives between #ifdef PROJMT_HAVE_MPI
 * guards; without them (or outside a job) the state below stays "rank 0 of 1"
 * and every collective returns at its first line.
 */
#include "train/dist.h"

#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/clock.h"

#ifdef PROJMT_HAVE_MPI
#include <mpi.h>
#endif

static struct {
    int active;                  /* MPI initialised by us and not yet finalised */
    int rank, size, local_size;
    double allreduce_seconds;
    long allreduce_calls;
} g = {0, 0, 1, 1, 0.0, 0};

int pmt_dist_rank(void) { return g.rank; }
int pmt_dist_size(void) { return g.size; }
int pmt_dist_is_root(void) { return g.rank == 0; }
int pmt_dist_local_size(void) { return g.local_size; }
double pmt_dist_allreduce_seconds(void) { return g.allreduce_seconds; }
long pmt_dist_allreduce_calls(void) { return g.allreduce_calls; }

int pmt_dist_default_threads(void) {
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    int share = online > 0 ? (int)(online / g.local_size) : 1;
    /* omp_get_num_procs honours the affinity mask a launcher may have set
     * (mpirun binds each of 2 ranks to one core by default). */
    int allowed = omp_get_num_procs();
    int n = share < allowed ? share : allowed;
    return n > 0 ? n : 1;
}

double pmt_dist_wtime(void) {
#ifdef PROJMT_HAVE_MPI
    if (g.active) return MPI_Wtime();
#endif
    return pmt_now_seconds();
}

void pmt_dist_abort(const char *msg) {
    fprintf(stderr, "projmt: rank %d of %d: %s\n", g.rank, g.size, msg);
    fflush(stderr);
#ifdef PROJMT_HAVE_MPI
    /* MPI_Abort only returns if it could not kill the job; exit below then
     * still ends this rank, and the runtime notices the lost process. */
    if (g.active) (void)MPI_Abort(MPI_COMM_WORLD, 1);
#endif
    exit(1);
}

#ifdef PROJMT_HAVE_MPI

/* 64-bit FNV-1a: enough to tell identical parameter buffers from drifted ones. */
static uint64_t fnv1a(const void *buf, size_t n) {
    const unsigned char *p = buf;
    uint64_t h = 1469598103934665603ULL;
    for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 1099511628211ULL;
    return h;
}

/* Turns a failed MPI call into a message and the end of the job. */
static void check(int rc, const char *what) {
    if (rc == MPI_SUCCESS) return;
    char reason[MPI_MAX_ERROR_STRING], msg[MPI_MAX_ERROR_STRING + 128];
    int len = 0;
    if (MPI_Error_string(rc, reason, &len) != MPI_SUCCESS) snprintf(reason, sizeof reason, "error code %d", rc);
    snprintf(msg, sizeof msg, "%s failed: %s; stopping the job", what, reason);
    pmt_dist_abort(msg);
}

/* MPI counts are int: larger buffers go in chunks of this many elements. */
enum { CHUNK = 1 << 28 };

static void allreduce(void *buf, size_t n, size_t elem, MPI_Datatype type, MPI_Op op, const char *what) {
    for (char *p = buf; n > 0;) {
        int c = n > CHUNK ? CHUNK : (int)n;
        check(MPI_Allreduce(MPI_IN_PLACE, p, c, type, op, MPI_COMM_WORLD), what);
        p += (size_t)c * elem;
        n -= (size_t)c;
    }
}

static void broadcast(void *buf, size_t n, size_t elem, MPI_Datatype type) {
    for (char *p = buf; n > 0;) {
        int c = n > CHUNK ? CHUNK : (int)n;
        check(MPI_Bcast(p, c, type, 0, MPI_COMM_WORLD), "MPI_Bcast");
        p += (size_t)c * elem;
        n -= (size_t)c;
    }
}

/* A launcher (Open MPI's mpirun, Hydra/MPICH, Slurm's PMI/PMIx) started us. */
static int under_launcher(void) {
    return getenv("OMPI_COMM_WORLD_SIZE") || getenv("PMI_SIZE") || getenv("PMIX_RANK");
}

/* Ranks sharing this machine's memory: the split a thread budget divides among. */
static void count_local_ranks(void) {
    MPI_Comm local;
    check(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, g.rank, MPI_INFO_NULL, &local),
          "MPI_Comm_split_type");
    check(MPI_Comm_size(local, &g.local_size), "MPI_Comm_size");
    check(MPI_Comm_free(&local), "MPI_Comm_free");
}

int pmt_dist_init(int *argc, char ***argv, char *err, size_t errlen) {
    if (g.active || !under_launcher()) return 0;
    int provided = 0;
    /* Until an error handler is set MPI_Init's failures are fatal by default;
     * the check stays for libraries that return instead. */
    int rc = MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided);
    if (rc != MPI_SUCCESS) {
        snprintf(err, errlen, "MPI_Init_thread failed (error %d)", rc);
        return -1;
    }
    g.active = 1;
    check(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
    check(MPI_Comm_rank(MPI_COMM_WORLD, &g.rank), "MPI_Comm_rank");
    check(MPI_Comm_size(MPI_COMM_WORLD, &g.size), "MPI_Comm_size");
    if (provided < MPI_THREAD_FUNNELED) {
        snprintf(err, errlen, "the MPI library offers thread level %d, projmt needs MPI_THREAD_FUNNELED (%d)",
                 provided, MPI_THREAD_FUNNELED);
        pmt_dist_finalize();
        return -1;
    }
    count_local_ranks();
    return 0;
}

void pmt_dist_finalize(void) {
    if (!g.active) return;
    g.active = 0;
    int rc = MPI_Finalize();
    if (rc != MPI_SUCCESS) fprintf(stderr, "projmt: rank %d of %d: MPI_Finalize failed (error %d)\n", g.rank, g.size, rc);
    g.rank = 0;
    g.size = g.local_size = 1;
}

void pmt_dist_broadcast_floats(float *buf, size_t n) {
    if (g.size > 1) broadcast(buf, n, sizeof *buf, MPI_FLOAT);
}

void pmt_dist_broadcast_bytes(void *buf, size_t n) {
    if (g.size > 1) broadcast(buf, n, 1, MPI_BYTE);
}

void pmt_dist_allreduce_sum_floats(float *buf, size_t n) {
    if (g.size <= 1) return;
    double start = MPI_Wtime();
    allreduce(buf, n, sizeof *buf, MPI_FLOAT, MPI_SUM, "MPI_Allreduce (gradients)");
    g.allreduce_seconds += MPI_Wtime() - start;
    g.allreduce_calls++;
}

void pmt_dist_allreduce_sum_doubles(double *buf, int n) {
    if (g.size > 1) allreduce(buf, (size_t)n, sizeof *buf, MPI_DOUBLE, MPI_SUM, "MPI_Allreduce (sums)");
}

void pmt_dist_allreduce_max_ints(int *buf, int n) {
    if (g.size > 1) allreduce(buf, (size_t)n, sizeof *buf, MPI_INT, MPI_MAX, "MPI_Allreduce (max)");
}

int pmt_dist_same_on_all_ranks(const void *buf, size_t n) {
    if (g.size <= 1) return 1;
    /* max(h) and max(~h) = ~min(h) in one call: equal everywhere iff max == min. */
    uint64_t h = fnv1a(buf, n), v[2] = {h, ~h};
    allreduce(v, 2, sizeof *v, MPI_UINT64_T, MPI_MAX, "MPI_Allreduce (hash)");
    return v[0] == ~v[1];
}

void pmt_dist_barrier(void) {
    if (g.size > 1) check(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier");
}

#else /* no MPI in this build: one process, every collective a no-op */

int pmt_dist_init(int *argc, char ***argv, char *err, size_t errlen) {
    (void)argc, (void)argv, (void)err, (void)errlen;
    return 0;
}
void pmt_dist_finalize(void) {}
void pmt_dist_broadcast_floats(float *buf, size_t n) { (void)buf, (void)n; }
void pmt_dist_broadcast_bytes(void *buf, size_t n) { (void)buf, (void)n; }
void pmt_dist_allreduce_sum_floats(float *buf, size_t n) { (void)buf, (void)n; }
void pmt_dist_allreduce_sum_doubles(double *buf, int n) { (void)buf, (void)n; }
void pmt_dist_allreduce_max_ints(int *buf, int n) { (void)buf, (void)n; }
int pmt_dist_same_on_all_ranks(const void *buf, size_t n) {
    (void)buf, (void)n;
    return 1;
}
void pmt_dist_barrier(void) {}

#endif

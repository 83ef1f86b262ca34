/*
 * distc's mpi backend against a plain MPI_Allreduce loop, in the same
 * processes and on the same buffer (run it under mpirun), float32 sum in
 * place. Rounds alternate between the two; each row is the median round.
 *
 *   mpirun -np 2 distc-mpi-bench [-b 8] [-e 64M] [-f 4] [-r 5] [-d NS]
 *
 * -d NS adds a third loop, the plain one with NS nanoseconds of busy work
 * before each call: what any per-call cost of that size (a library's
 * checks, a wrapper) costs at each size on this machine.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <distc.h>

#include "size_arg.h"

static volatile unsigned g_sink;
static double g_spins_per_ns;

/* About `ns` nanoseconds of work that touches no shared memory. */
static void busy(double ns) {
    unsigned n = (unsigned)(ns * g_spins_per_ns);
    for (unsigned i = 0; i < n; ++i) g_sink += i;
}

static void calibrate(void) {
    unsigned n = 1u << 24;
    double t0 = MPI_Wtime();
    for (unsigned i = 0; i < n; ++i) g_sink += i;
    g_spins_per_ns = n / ((MPI_Wtime() - t0) * 1e9);
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
    size_t minb = 8, maxb = 64u << 20;
    int factor = 4, rounds = 5;
    double delay_ns = 0;
    int provided;
    /* The level distc's mpi backend initialises MPI with. */
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    for (int i = 1; i < argc; ++i) {
        if (!strcmp(argv[i], "-b") && i + 1 < argc)
            minb = (size_t)size_arg_or_exit(argv[++i]);
        else if (!strcmp(argv[i], "-e") && i + 1 < argc)
            maxb = (size_t)size_arg_or_exit(argv[++i]);
        else if (!strcmp(argv[i], "-f") && i + 1 < argc)
            factor = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-r") && i + 1 < argc)
            rounds = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-d") && i + 1 < argc)
            delay_ns = atof(argv[++i]);
    }
    calibrate();
    int loops = delay_ns > 0 ? 3 : 2; /* mpi, distc, mpi + delay */
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    distc_pg_options po = DISTC_PG_OPTIONS_INIT;
    po.backend = "mpi";
    distc_pg *pg = NULL;
    if (distc_pg_new_from_url(&pg, "mpi://", NULL, &po) != 0) {
        fprintf(stderr, "distc: %s\n", distc_error_last());
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    float *buf = calloc(maxb / 4 + 1, 4);
    double *tl[3];
    for (int l = 0; l < 3; ++l) tl[l] = calloc((size_t)rounds, sizeof(double));
    char delay_col[32];
    snprintf(delay_col, sizeof delay_col, "mpi+%gns(us)", delay_ns);
    if (rank == 0) {
        printf(
            "# distc mpi backend vs plain MPI_Allreduce, %d ranks, float32 sum in place; median of %d alternating "
            "rounds\n",
            size, rounds);
        printf("%12s %12s %8s %14s %14s %10s", "size(B)", "count", "iters", "mpi(us)", "distc(us)", "ratio");
        if (loops == 3) printf(" %14s %10s", delay_col, "ratio");
        printf("\n");
    }
    {
        /* Warm-up, untimed: both paths' first calls (lazy set-up, page faults) stay out of the first row. */
        int64_t one = 1;
        DLTensor t = {buf, {kDLCPU, 0}, 1, {kDLFloat, 32, 1}, &one, NULL, 0};
        for (int i = 0; i < 2000; ++i) {
            MPI_Allreduce(MPI_IN_PLACE, buf, 1, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
            if (distc_allreduce(NULL, pg, &t, DISTC_SUM, NULL) != 0) {
                fprintf(stderr, "distc: %s\n", distc_error_last());
                MPI_Abort(MPI_COMM_WORLD, 1);
            }
        }
    }
    for (size_t bytes = minb; bytes <= maxb; bytes *= (size_t)factor) {
        int count = (int)(bytes / 4 ? bytes / 4 : 1);
        int iters = bytes <= 65536 ? 2000 : bytes <= (1u << 20) ? 200 : 20;
        int64_t shape = count;
        DLTensor t = {buf, {kDLCPU, 0}, 1, {kDLFloat, 32, 1}, &shape, NULL, 0};
        for (int r = 0; r < rounds; ++r) {
            for (int pass = 0; pass < loops; ++pass) {
                int loop = (pass + r) % loops; /* 0 mpi, 1 distc, 2 mpi + delay */
                MPI_Barrier(MPI_COMM_WORLD);
                double t0 = MPI_Wtime();
                for (int i = 0; i < iters; ++i) {
                    if (loop == 1) {
                        if (distc_allreduce(NULL, pg, &t, DISTC_SUM, NULL) != 0) {
                            fprintf(stderr, "distc: %s\n", distc_error_last());
                            MPI_Abort(MPI_COMM_WORLD, 1);
                        }
                    } else {
                        if (loop == 2) busy(delay_ns);
                        MPI_Allreduce(MPI_IN_PLACE, buf, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
                    }
                }
                double us = (MPI_Wtime() - t0) / iters * 1e6, worst;
                MPI_Allreduce(&us, &worst, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);  // the slowest rank's time
                tl[loop][r] = worst;
            }
        }
        double med[3];
        for (int l = 0; l < loops; ++l) {
            qsort(tl[l], (size_t)rounds, sizeof(double), cmp);
            med[l] = tl[l][rounds / 2];
        }
        if (rank == 0) {
            printf("%12zu %12d %8d %14.3f %14.3f %10.3f", bytes, count, iters, med[0], med[1], med[1] / med[0]);
            if (loops == 3) printf(" %14.3f %10.3f", med[2], med[2] / med[0]);
            printf("\n");
            fflush(stdout);
        }
    }
    distc_pg_free(pg);
    free(buf);
    for (int l = 0; l < 3; ++l) free(tl[l]);
    MPI_Finalize();
    return 0;
}

/*
 * The mpi backend when one rank (of 2, under mpirun) does not take part, in
 * MPI calls that have no timeout of their own. Each must fail on the rank
 * that waits, within the group's timeout, as on gloo, never hang:
 * - a group freed with an asynchronous allreduce its peer never joined
 *   returns at once (the work reports DISTC_EABORTED), not after the
 *   operation's timeout;
 * - a subgroup its peer never makes (MPI_Comm_split) is DISTC_ETIMEOUT;
 * - a second mpi:// group its peer never makes (MPI_Comm_dup) is
 *   DISTC_ETIMEOUT.
 * Exits 0 when every check held.
 */
#include <mpi.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <distc.h>

#include "mpi_expect.h"

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* Took at most `limit` seconds (far more than it needs: only a hang or a
 * wait for another timeout reaches it). */
static void within(double start, double limit, const char *what) {
    double took = now() - start;
    if (took <= limit) return;
    fprintf(stderr, "%s took %.1f s, more than %.0f s\n", what, took, limit);
    ++mpi_fails;
}

int main(int argc, char **argv) {
    int provided = 0, rank = 0;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    float f[4] = {1, 2, 3, 4};
    int64_t n4 = 4;
    DLTensor t4 = {f, {kDLCPU, 0}, 1, {kDLFloat, 32, 1}, &n4, NULL, 0};

    /* A free with an allreduce in flight that rank 1 never joins. */
    distc_pg *pg = mpi_group(60000, 0);
    if (!pg) return 1;
    if (rank == 0) {
        distc_work *w = NULL;
        expect(distc_allreduce(&w, pg, &t4, DISTC_SUM, NULL), 0, NULL, "an allreduce rank 1 never joins");
        double start = now();
        distc_pg_free(pg);
        within(start, 20, "freeing the group");
        expect(distc_work_wait(w, -1), DISTC_EABORTED, "freed", "its work after the free");
        distc_work_free(w);
    } else {
        distc_pg_free(pg);
    }
    MPI_Barrier(MPI_COMM_WORLD);

    /* A subgroup rank 1 never makes. */
    pg = mpi_group(1500, 0);
    if (!pg) return 1;
    if (rank == 0) {
        int32_t ranks[2] = {0, 1};
        distc_pg *sub = NULL;
        distc_pg_options o = DISTC_PG_OPTIONS_INIT;
        o.timeout_ms = 1500;
        double start = now();
        expect(distc_pg_new_subgroup(&sub, pg, ranks, 2, &o), DISTC_ETIMEOUT, "not every rank of the group joined",
               "a subgroup rank 1 never makes");
        within(start, 20, "the subgroup's failure");
        expect(distc_barrier(NULL, pg, NULL), DISTC_EABORTED, NULL, "the group after it");
    }
    distc_pg_free(pg);
    MPI_Barrier(MPI_COMM_WORLD);

    /* A second group rank 1 never makes (last: MPI_COMM_WORLD keeps the dup pending on rank 0). */
    pg = mpi_group(1500, 0);
    if (!pg) return 1;
    if (rank == 0) {
        distc_pg_options o = mpi_options(1500, 0);
        distc_pg *second = NULL;
        double start = now();
        expect(distc_pg_new_from_url(&second, "mpi://", NULL, &o), DISTC_ETIMEOUT,
               "not every rank made its mpi:// group", "a second group rank 1 never makes");
        within(start, 20, "the second group's failure");
    }
    distc_pg_free(pg);
    MPI_Finalize();
    return mpi_fails != 0;
}

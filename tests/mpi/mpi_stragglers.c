/*
 * The mpi backend when one rank (of 2, under mpirun) is late or never takes
 * part, in MPI calls that have no timeout of their own. The rank that waits
 * fails within the group's timeout, and a rank that comes after its peer
 * gave up fails too, instead of going on alone; nothing hangs:
 * - a group freed with an asynchronous allreduce in flight waits for it:
 *   a peer 300 ms late completes it on both ranks, and MPI writes nothing
 *   into the buffer after its work completed; one that never joins makes
 *   it DISTC_ETIMEOUT at the operation's timeout;
 * - a subgroup (MPI_Comm_split) or a second mpi:// group (MPI_Comm_dup)
 *   that the peer never makes, or makes after the other gave up, is
 *   DISTC_ETIMEOUT on both;
 * - in debug mode an asynchronous allreduce the peer never joins is
 *   DISTC_ETIMEOUT from its check (MPI's blocking allgather there would
 *   have ended the job).
 * Exits 0 when every check held.
 */
#include <mpi.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

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

static DLTensor vec4(float *f) {
    static int64_t n4 = 4;
    DLTensor t = {f, {kDLCPU, 0}, 1, {kDLFloat, 32, 1}, &n4, NULL, 0};
    return t;
}

/* Rank 0 frees the group right after issuing an allreduce that rank 1 joins
 * `late_us` later (-1: never; the group's timeout is 1.5 s then). */
static void free_in_flight(int rank, int late_us) {
    distc_pg *pg = mpi_group(late_us < 0 ? 1500 : 60000, 0);
    if (!pg) return;
    float f[4] = {1, 1, 1, 1};
    DLTensor t = vec4(f);
    distc_work *w = NULL;
    if (rank == 0) {
        expect(distc_allreduce(&w, pg, &t, DISTC_SUM, NULL), 0, NULL, "an allreduce, then the free");
        double start = now();
        distc_pg_free(pg);
        within(start, 20, "freeing the group");
        if (late_us < 0) {
            expect(distc_work_wait(w, -1), DISTC_ETIMEOUT, "timed out", "its work, rank 1 absent");
        } else {
            expect(distc_work_wait(w, -1), 0, NULL, "its work, rank 1 late");
            for (int i = 0; i < 4; ++i) f[i] = -7; /* the caller's again */
        }
    } else {
        if (late_us >= 0) {
            usleep((useconds_t)late_us);
            expect(distc_allreduce(&w, pg, &t, DISTC_SUM, NULL), 0, NULL, "the late allreduce");
            expect(distc_work_wait(w, -1), 0, NULL, "its work");
        }
        distc_pg_free(pg);
    }
    distc_work_free(w);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Barrier(MPI_COMM_WORLD);
    if (late_us >= 0 && f[0] != (rank == 0 ? -7 : 2)) {
        fprintf(stderr, "rank %d: the buffer holds %g after its work completed\n", rank, f[0]);
        ++mpi_fails;
    }
}

/* A subgroup rank 1 makes `late_s` seconds after rank 0 gave up (-1: never). */
static void late_subgroup(int rank, int late_s) {
    distc_pg *pg = mpi_group(1500, 0);
    if (!pg) return;
    int32_t ranks[2] = {0, 1};
    distc_pg_options o = mpi_options(1500, 0);
    distc_pg *sub = NULL;
    if (rank == 0 || late_s >= 0) {
        if (rank == 1) sleep((unsigned)late_s);
        double start = now();
        expect(distc_pg_new_subgroup(&sub, pg, ranks, 2, &o), DISTC_ETIMEOUT, "not every rank of the group joined",
               late_s < 0 ? "a subgroup rank 1 never makes" : "a subgroup rank 1 makes late");
        within(start, 20, "the subgroup's failure");
        expect(distc_barrier(NULL, pg, NULL), DISTC_EABORTED, NULL, "the group after it");
    }
    distc_pg_free(sub);
    distc_pg_free(pg);
    MPI_Barrier(MPI_COMM_WORLD);
}

/* Debug mode: an asynchronous allreduce rank 1 never joins. */
static void debug_absent(int rank) {
    distc_pg *pg = mpi_group(1500, 1);
    if (!pg) return;
    if (rank == 0) {
        float f[4] = {1, 1, 1, 1};
        DLTensor t = vec4(f);
        distc_work *w = NULL;
        expect(distc_allreduce(&w, pg, &t, DISTC_SUM, NULL), DISTC_ETIMEOUT, "check of allreduce #1",
               "debug mode: an allreduce rank 1 never joins");
        distc_work_free(w);
    }
    distc_pg_free(pg);
    MPI_Barrier(MPI_COMM_WORLD);
}

/* A second mpi:// group rank 1 makes `late_s` seconds after rank 0 gave up (-1: never). */
static void late_group(int rank, int late_s) {
    distc_pg *pg = mpi_group(1500, 0);
    if (!pg) return;
    if (rank == 0 || late_s >= 0) {
        if (rank == 1) sleep((unsigned)late_s);
        distc_pg_options o = mpi_options(1500, 0);
        distc_pg *second = NULL;
        double start = now();
        expect(distc_pg_new_from_url(&second, "mpi://", NULL, &o), DISTC_ETIMEOUT,
               "not every rank made its mpi:// group",
               late_s < 0 ? "a second group rank 1 never makes" : "a second group rank 1 makes late");
        within(start, 20, "the second group's failure");
        distc_pg_free(second);
    }
    distc_pg_free(pg);
}

int main(int argc, char **argv) {
    int provided = 0, rank = 0;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    free_in_flight(rank, 300000);
    free_in_flight(rank, -1);
    late_subgroup(rank, -1);
    late_subgroup(rank, 3);
    debug_absent(rank);
    late_group(rank, 3);
    MPI_Barrier(MPI_COMM_WORLD);
    /* Last: MPI_COMM_WORLD keeps the dup rank 0 gave up on pending. */
    late_group(rank, -1);
    MPI_Finalize();
    return mpi_fails != 0;
}

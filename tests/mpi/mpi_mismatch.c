/*
 * A mismatched asynchronous allreduce (4 elements on rank 0, 5 on rank 1)
 * on the mpi backend without debug mode, in a program that leaves MPI to
 * distc (it never calls MPI_Init). Open MPI raises the error where no
 * group's communicator is at hand, on MPI_COMM_WORLD, whose handler ended
 * the job; distc set it to return errors. Both ranks now get an error
 * (one from MPI, the other at its timeout), and the group then fails at
 * once on both instead of hanging. Exits 0 when every check held.
 */
#include <stdio.h>

#include <distc.h>

#include "mpi_expect.h"

int main(void) {
    distc_pg *pg = mpi_group(1500, 0);
    if (!pg) return 1;
    int32_t rank = 0;
    distc_pg_rank(&rank, pg);
    float f[5] = {1, 2, 3, 4, 5};
    int64_t n = rank == 0 ? 4 : 5;
    DLTensor t = {f, {kDLCPU, 0}, 1, {kDLFloat, 32, 1}, &n, NULL, 0};
    distc_work *w = NULL;
    expect(distc_allreduce(&w, pg, &t, DISTC_SUM, NULL), 0, NULL, "issuing the mismatched allreduce");
    int rc = distc_work_wait(w, -1);
    if (rc == 0) {
        fprintf(stderr, "rank %d: the mismatched allreduce reported success\n", (int)rank);
        ++mpi_fails;
    }
    distc_work_free(w);
    expect(distc_barrier(NULL, pg, NULL), DISTC_EABORTED, "the group was aborted", "the group after it");
    distc_pg_free(pg);
    return mpi_fails != 0;
}

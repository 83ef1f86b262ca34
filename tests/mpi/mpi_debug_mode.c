/*
 * Debug mode on the mpi backend, in a group from mpi:// (no store the ranks
 * share: the check gathers through MPI itself), 3 ranks under mpirun. Ranks
 * that call collectives differently all get DISTC_EINVAL naming who calls
 * what, before MPI sees the call (it would take a mismatched call's bytes as
 * data, or end the job with MPI_ERR_TRUNCATE), and the group goes on: count,
 * operation, root, reduce op, an asynchronous call, an uneven all-to-all's
 * split sizes, and a subgroup split by MPI. Exits 0 when every check held.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <distc.h>

#include "mpi_expect.h"

static DLTensor vec(float *data, int64_t *n) {
    DLTensor t = {data, {kDLCPU, 0}, 1, {kDLFloat, 32, 1}, n, NULL, 0};
    return t;
}

static void mismatches(distc_pg *pg, int rank, const char *where) {
    char what[128];
    float a[6] = {1, 2, 3, 4, 5, 6};
    int64_t n4 = 4, n5 = 5;
    DLTensor t4 = vec(a, &n4), t5 = vec(a, &n5);
    DLTensor *mine = rank == 1 ? &t5 : &t4;

    snprintf(what, sizeof what, "%s: agreeing allreduce", where);
    expect(distc_allreduce(NULL, pg, &t4, DISTC_SUM, NULL), 0, NULL, what);
    snprintf(what, sizeof what, "%s: another count on rank 1", where);
    expect(distc_allreduce(NULL, pg, mine, DISTC_SUM, NULL), DISTC_EINVAL,
           rank == 1 ? "ranks 0,2 call allreduce(float32, 4 elements, SUM)"
                     : "rank 1 call allreduce(float32, 5 elements, SUM)",
           what);
    snprintf(what, sizeof what, "%s: another operation on rank 0", where);
    expect(rank == 0 ? distc_broadcast(NULL, pg, &t4, 0, NULL) : distc_allreduce(NULL, pg, &t4, DISTC_SUM, NULL),
           DISTC_EINVAL, "rank 0 call broadcast(float32, 4 elements, root 0)", what);
    snprintf(what, sizeof what, "%s: another root on rank 2", where);
    expect(distc_broadcast(NULL, pg, &t4, rank == 2 ? 1 : 0, NULL), DISTC_EINVAL,
           "rank 2 call broadcast(float32, 4 "
           "elements, root 1)",
           what);
    snprintf(what, sizeof what, "%s: another reduce op on rank 1", where);
    expect(distc_allreduce(NULL, pg, &t4, rank == 1 ? DISTC_MAX : DISTC_SUM, NULL), DISTC_EINVAL,
           "rank 1 call allreduce(float32, 4 elements, MAX)", what);

    distc_work *w = NULL;
    snprintf(what, sizeof what, "%s: asynchronous, another count on rank 1", where);
    int rc = distc_allreduce(&w, pg, mine, DISTC_SUM, NULL);
    if (rc == 0) rc = distc_work_wait(w, -1);
    expect(rc, DISTC_EINVAL, "ranks disagree on collective", what);
    distc_work_free(w);

    /* Rank 1 expects 3 elements from rank 0, which sends it 1. */
    int32_t in[3] = {0}, out[5] = {0};
    int64_t n3 = 3, nout = rank == 1 ? 5 : 3;
    int64_t in_splits[3] = {1, 1, 1}, out_splits[3] = {rank == 1 ? 3 : 1, 1, 1};
    DLTensor ti = {in, {kDLCPU, 0}, 1, {kDLInt, 32, 1}, &n3, NULL, 0};
    DLTensor to = {out, {kDLCPU, 0}, 1, {kDLInt, 32, 1}, &nout, NULL, 0};
    snprintf(what, sizeof what, "%s: all-to-all split sizes that disagree", where);
    expect(distc_alltoall_single(NULL, pg, &to, &ti, out_splits, in_splits, NULL), DISTC_EINVAL, "split sizes disagree",
           what);

    snprintf(what, sizeof what, "%s: the group after them", where);
    expect(distc_allreduce(NULL, pg, &t4, DISTC_SUM, NULL), 0, NULL, what);
}

int main(int argc, char **argv) {
    int provided = 0;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    distc_pg *pg = mpi_group(20000, 1);
    if (!pg) return 1;
    int32_t rank = 0, size = 0;
    distc_pg_rank(&rank, pg);
    distc_pg_size(&size, pg);
    if (size != 3) {
        fprintf(stderr, "run with 3 ranks (got %d)\n", size);
        return 1;
    }
    mismatches(pg, rank, "world");
    /* A subgroup MPI splits off (all three ranks, reversed) checks its calls too. */
    distc_pg *sub = NULL;
    if (distc_pg_split(&sub, pg, 0, 2 - rank, NULL) != 0) {
        fprintf(stderr, "split: %s\n", distc_error_last());
        return 1;
    }
    int32_t sub_rank = 0;
    distc_pg_rank(&sub_rank, sub);
    mismatches(sub, sub_rank, "subgroup");
    distc_pg_free(sub);
    distc_pg_free(pg);
    MPI_Finalize();
    return mpi_fails != 0;
}

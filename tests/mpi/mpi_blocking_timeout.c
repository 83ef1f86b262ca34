/*
 * Under mpirun -np 2: rank 1 never joins an allreduce that rank 0 makes as a
 * blocking call with a 500 ms timeout. MPI cannot cancel a blocking
 * collective, so the mpi backend ends the job with a message naming the
 * operation (blocking_timeout.sh checks it); with
 * DISTC_MPI_BLOCKING_COLLECTIVES=interruptible the call returns DISTC_ETIMEOUT
 * instead (this program then exits 3 on rank 0, which the script checks too).
 */
#include <distc.h>
#include <stdio.h>
#include <unistd.h>

int main(void) {
    distc_pg_options o = DISTC_PG_OPTIONS_INIT;
    o.backend = "mpi";
    distc_pg *pg = NULL;
    if (distc_pg_new_from_url(&pg, "mpi://", NULL, &o) != 0) {
        fprintf(stderr, "distc_pg_new_from_url: %s\n", distc_error_last());
        return 1;
    }
    int32_t rank = -1;
    distc_pg_rank(&rank, pg);
    if (rank != 0) {
        sleep(3); /* alive, but never calls */
        return 0;
    }
    float x[4] = {1, 2, 3, 4};
    int64_t shape = 4;
    DLTensor t = {x, {kDLCPU, 0}, 1, {kDLFloat, 32, 1}, &shape, NULL, 0};
    distc_op_options oo = DISTC_OP_OPTIONS_INIT;
    oo.timeout_ms = 500;
    int rc = distc_allreduce(NULL, pg, &t, DISTC_SUM, &oo);
    printf("rank 0: allreduce returned %d: %s\n", rc, distc_error_last());
    fflush(stdout);
    return rc == DISTC_ETIMEOUT ? 3 : 0;
}

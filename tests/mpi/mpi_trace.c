/*
 * The flight recorder over the mpi backend, under mpirun -np 3 (trace.sh):
 * rank 1 skips the third allreduce. It writes its trace on demand
 * (distc_trace_dump_all, as a live query would) and stays alive; ranks 0
 * and 2 time out in the third allreduce and write theirs into
 * DISTC_TRACE_DIR by themselves: with DISTC_MPI_BLOCKING_COLLECTIVES=
 * interruptible as the call fails, otherwise just before the backend ends
 * the job (MPI cannot cancel a blocking call). trace.sh then runs
 * distc-trace over the directory.
 */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <distc.h>

int main(void) {
    const char *dir = getenv("DISTC_TRACE_DIR");
    distc_pg_options o = DISTC_PG_OPTIONS_INIT;
    o.backend = "mpi";
    o.timeout_ms = 1000;
    distc_pg *pg = NULL;
    if (!dir || distc_pg_new_from_url(&pg, NULL, NULL, &o) != 0) {
        fprintf(stderr, "mpi_trace: %s\n", dir ? distc_error_last() : "DISTC_TRACE_DIR is not set");
        return 1;
    }
    int32_t rank = -1;
    distc_pg_rank(&rank, pg);
    float x[16] = {0};
    int64_t shape = 16;
    DLTensor t = {x, {kDLCPU, 0}, 1, {kDLFloat, 32, 1}, &shape, NULL, 0};
    for (int i = 0; i < 2; ++i)
        if (distc_allreduce(NULL, pg, &t, DISTC_SUM, NULL) != 0) {
            fprintf(stderr, "mpi_trace: rank %d: allreduce: %s\n", (int)rank, distc_error_last());
            return 1;
        }
    if (rank == 1) {
        if (distc_trace_dump_all(dir) != 0) {
            fprintf(stderr, "mpi_trace: rank 1: %s\n", distc_error_last());
            return 1;
        }
        sleep(4); /* alive, never calling; the job ends around it */
        return 0;
    }
    int rc = distc_allreduce(NULL, pg, &t, DISTC_SUM, NULL);
    printf("mpi_trace: rank %d: the third allreduce returned %d\n", (int)rank, rc);
    fflush(stdout);
    return rc == DISTC_ETIMEOUT ? 3 : 1;
}

/*
 * The mpi backend with MPI initialised by the program (run under mpirun):
 *   mpi_thread_levels serialized   MPI_THREAD_SERIALIZED: distc serialises its
 *                                  MPI calls through one lock; blocking and
 *                                  asynchronous collectives work
 *   mpi_thread_levels funneled     MPI_THREAD_FUNNELED: refused with a message
 *                                  naming the level
 * Exits 0 when the backend behaved as described.
 */
#include <mpi.h>
#include <stdio.h>
#include <string.h>

#include <distc.h>

int main(int argc, char **argv) {
    int serialized = argc > 1 && strcmp(argv[1], "serialized") == 0;
    int provided = 0;
    MPI_Init_thread(&argc, &argv, serialized ? MPI_THREAD_SERIALIZED : MPI_THREAD_FUNNELED, &provided);
    distc_pg_options o = DISTC_PG_OPTIONS_INIT;
    o.backend = "mpi";
    distc_pg *pg = NULL;
    int rc = distc_pg_new_from_url(&pg, "mpi://", NULL, &o);
    int ok = 0;
    if (!serialized) {
        ok = rc == DISTC_EBACKEND && strstr(distc_error_last(), "MPI_THREAD_FUNNELED") != NULL;
        if (!ok)
            fprintf(stderr, "funneled: expected DISTC_EBACKEND naming the level, got %d: %s\n", rc, distc_error_last());
    } else if (rc != 0) {
        fprintf(stderr, "serialized: %s\n", distc_error_last());
    } else {
        int32_t size = 0;
        distc_pg_size(&size, pg);
        double x[3] = {1, 2, 3};
        int64_t shape = 3;
        DLTensor t = {x, {kDLCPU, 0}, 1, {kDLFloat, 64, 1}, &shape, NULL, 0};
        distc_work *w = NULL;
        ok = distc_allreduce(NULL, pg, &t, DISTC_SUM, NULL) == 0 && x[2] == 3.0 * size &&
             distc_allreduce(&w, pg, &t, DISTC_AVG, NULL) == 0 && distc_work_wait(w, 10000) == 0 && x[2] == 3.0 * size;
        if (!ok) fprintf(stderr, "serialized: %s (x[2] = %g)\n", distc_error_last(), x[2]);
        distc_work_free(w);
        distc_pg_free(pg);
    }
    MPI_Finalize();
    return ok ? 0 : 1;
}

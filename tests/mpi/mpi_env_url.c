/*
 * Under mpirun or srun --mpi=pmix, backend "mpi" with env:// (and with no
 * URL) and no MASTER_ADDR: the group is MPI's world, as c10d's
 * init_process_group("mpi") needs nothing either. The same call with the
 * built-in backend fails under mpirun, naming what env:// lacks, and under
 * srun meets through Slurm's variables. Exit 0 on success.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <distc.h>

static int check(const char *url) {
    distc_pg_options o = DISTC_PG_OPTIONS_INIT;
    o.backend = "mpi";
    distc_pg *pg = NULL;
    if (distc_pg_new_from_url(&pg, url, NULL, &o) != 0) {
        fprintf(stderr, "%s: %s\n", url ? url : "(no url)", distc_error_last());
        return 1;
    }
    int32_t rank = -1, size = -1;
    const char *backend = NULL;
    distc_pg_rank(&rank, pg);
    distc_pg_size(&size, pg);
    distc_pg_backend(&backend, pg);
    const char *want = getenv("OMPI_COMM_WORLD_SIZE");
    if (!want) want = getenv("SLURM_NTASKS"); /* srun --mpi=pmix */
    int ok = want && size == atoi(want) && strcmp(backend, "mpi") == 0;
    float x = (float)rank;
    int64_t shape = 1;
    DLTensor t = {&x, {kDLCPU, 0}, 1, {kDLFloat, 32, 1}, &shape, NULL, 0};
    ok = ok && distc_allreduce(NULL, pg, &t, DISTC_SUM, NULL) == 0 && x == (float)(size * (size - 1) / 2);
    if (!ok)
        fprintf(stderr, "%s: rank %d of %d (%s), allreduce gave %g\n", url ? url : "(no url)", rank, size, backend, x);
    distc_pg_free(pg);
    return !ok;
}

int main(void) {
    unsetenv("MASTER_ADDR");
    unsetenv("MASTER_PORT");
    if (check("env://") || check(NULL)) return 1;
    /* gloo has no world of its own: under mpirun, env:// still says what it
     * needs; under srun, Slurm's variables name the store's host and port. */
    distc_pg_options o = DISTC_PG_OPTIONS_INIT;
    distc_rendezvous_options rv = DISTC_RENDEZVOUS_OPTIONS_INIT;
    rv.timeout_ms = getenv("SLURM_PROCID") ? 30000 : 2000;
    distc_pg *pg = NULL;
    int made = distc_pg_new_from_url(&pg, "env://", &rv, &o) == 0;
    if (getenv("SLURM_PROCID")) {
        int32_t size = -1;
        if (!made || distc_pg_size(&size, pg) != 0 || size != atoi(getenv("SLURM_NTASKS"))) {
            fprintf(stderr, "gloo with env:// under srun: %s\n", made ? "the wrong size" : distc_error_last());
            return 1;
        }
        distc_barrier(NULL, pg, NULL); /* rank 0 hosts the store: nobody leaves before all have joined */
        distc_pg_free(pg);
        return 0;
    }
    if (made || !strstr(distc_error_last(), "MASTER_ADDR")) {
        fprintf(stderr, "gloo with env:// and no MASTER_ADDR: %s\n", pg ? "a group" : distc_error_last());
        return 1;
    }
    return 0;
}

/*
 * The mpi backend with a caller that gets sizes or MPI's life wrong (2 ranks
 * under mpirun, MPI initialised by the program), as gloo reports them:
 * - a receive larger than the message is DISTC_EINVAL naming both sizes (MPI
 *   takes a shorter message silently: it once reported success with half the
 *   buffer untouched);
 * - a receive smaller than the message is DISTC_EINVAL too (MPI says only
 *   MPI_ERR_IN_STATUS), blocking, asynchronous and batched;
 * - a receive that times out is withdrawn (MPI_Cancel): the group goes on,
 *   and the message that comes late stays for the next receive instead of
 *   landing in the buffer the caller has back;
 * - once the program finalized MPI, calls are DISTC_ESTATE, where MPI would
 *   abort the process;
 * - with the argument "finalized-first", the program finalizes MPI before
 *   distc ever loads the mpi backend: making a group is DISTC_ESTATE too
 *   (loading MPI's C++ bindings with the plugin once aborted the process).
 * Exits 0 when every check held.
 */
#include <mpi.h>
#include <stdio.h>
#include <string.h>

#include <distc.h>

#include "mpi_expect.h"

int main(int argc, char **argv) {
    int provided = 0;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    if (argc > 1 && strcmp(argv[1], "finalized-first") == 0) {
        MPI_Finalize();
        distc_pg_options o = mpi_options(20000, -1);
        distc_pg *none = NULL;
        expect(distc_pg_new_from_url(&none, "mpi://", NULL, &o), DISTC_ESTATE, "finalized MPI",
               "a group made after MPI_Finalize");
        return mpi_fails != 0;
    }
    distc_pg *pg = mpi_group(20000, -1);
    if (!pg) return 1;
    int32_t rank = 0;
    distc_pg_rank(&rank, pg);
    float four[4] = {1, 2, 3, 4}, eight[8] = {0};
    int64_t n4 = 4, n8 = 8;
    DLTensor t4 = {four, {kDLCPU, 0}, 1, {kDLFloat, 32, 1}, &n4, NULL, 0};
    DLTensor t8 = {eight, {kDLCPU, 0}, 1, {kDLFloat, 32, 1}, &n8, NULL, 0};
    if (rank == 0) {
        expect(distc_send(NULL, pg, &t4, 1, 7, NULL), 0, NULL, "send 16 bytes");
        expect(distc_send(NULL, pg, &t8, 1, 8, NULL), 0, NULL, "send 32 bytes");
        expect(distc_send(NULL, pg, &t8, 1, 9, NULL), 0, NULL, "send 32 bytes again");
    } else {
        expect(distc_recv(NULL, pg, &t8, 0, 7, NULL), DISTC_EINVAL, "sent 16 bytes with tag 7; this receive takes 32",
               "a receive larger than the message");
        expect(distc_recv(NULL, pg, &t4, 0, 8, NULL), DISTC_EINVAL, "more than the 16 bytes this receive takes",
               "a receive smaller than the message");
        distc_work *w = NULL;
        expect(distc_recv(&w, pg, &t4, 0, 9, NULL), 0, NULL, "an asynchronous receive");
        expect(distc_work_wait(w, 20000), DISTC_EINVAL, "more than the 16 bytes", "its wait");
        distc_work_free(w);
    }
    expect(distc_barrier(NULL, pg, NULL), 0, NULL, "the group after them");

    distc_op_options quick = DISTC_OP_OPTIONS_INIT;
    quick.timeout_ms = 300;
    float late[4] = {0};
    DLTensor tl = {late, {kDLCPU, 0}, 1, {kDLFloat, 32, 1}, &n4, NULL, 0};
    if (rank == 1) {
        expect(distc_recv(NULL, pg, &tl, 0, 11, &quick), DISTC_ETIMEOUT, "withdrawn", "a receive nobody sends to");
        for (int i = 0; i < 4; ++i) late[i] = 42;
    }
    expect(distc_barrier(NULL, pg, NULL), 0, NULL, "the group after a withdrawn receive");
    if (rank == 0) expect(distc_send(NULL, pg, &t4, 1, 11, NULL), 0, NULL, "the late send");
    expect(distc_barrier(NULL, pg, NULL), 0, NULL, "the group after the late send");
    if (rank == 1) {
        if (late[0] != 42) {
            fprintf(stderr, "the late message landed in the withdrawn receive's buffer (%g)\n", late[0]);
            ++mpi_fails;
        }
        expect(distc_recv(NULL, pg, &tl, 0, 11, NULL), 0, NULL, "the next receive of that tag");
        if (late[3] != 4) {
            fprintf(stderr, "the next receive got %g, not the late message\n", late[3]);
            ++mpi_fails;
        }
    }
    MPI_Finalize();
    expect(distc_allreduce(NULL, pg, &t4, DISTC_SUM, NULL), DISTC_ESTATE, "finalized MPI", "allreduce after it");
    expect(distc_send(NULL, pg, &t4, 1 - rank, 0, NULL), DISTC_ESTATE, "finalized MPI", "send after it");
    distc_pg_free(pg);
    return mpi_fails != 0;
}

/* test_pg_processes' hierarchical path at the chunked algorithms' sizes:
 * the same bits on every rank, roots inside hosts, a size mismatch. */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "job.h"
#include "tests.h"

/* The hierarchical path at sizes that take the chunked algorithms, on
 * non-integer floats: every rank must hold the same bits (compared through
 * an allgather of a checksum), close to the exact sum; AVG and a broadcast
 * from a root that is not its host's first rank; then a rank that calls
 * another size makes every rank fail, none hang. */
static uint64_t checksum(const float *x, size_t n) {
    uint64_t h = 1469598103934665603ULL;
    const unsigned char *b = (const unsigned char *)x;
    for (size_t i = 0; i < n * sizeof *x; ++i) h = (h ^ b[i]) * 1099511628211ULL;
    return h;
}

static int hierarchy_child(int rank, int n, void *arg) {
    const struct job *j = arg;
    distc_pg *pg = join(rank, n, j);
    CHILD_CHECK(pg, "rank %d could not join", rank);
    enum { N = 1 << 20 };
    float *x = malloc(N * sizeof *x);
    int64_t shape[1] = {N};
    DLTensor t = f32(x, shape);
    for (int i = 0; i < N; ++i) x[i] = 0.1f * (float)(rank + 1) + 0.001f * (float)(i % 97);
    CHILD_CHECK(distc_allreduce(NULL, pg, &t, DISTC_SUM, NULL) == 0, "allreduce: %s", distc_error_last());
    for (int i = 0; i < N; i += 4099) {
        double want = 0.1 * n * (n + 1) / 2 + 0.001 * n * (i % 97);
        CHILD_CHECK(x[i] > want - 1e-3 && x[i] < want + 1e-3, "rank %d: element %d is %g, not %g", rank, i, x[i], want);
    }
    int64_t sums[8] = {0}, mine = (int64_t)checksum(x, N), one = 1, eight = n;
    DLTensor st = {&mine, {kDLCPU, 0}, 1, {kDLInt, 64, 1}, &one, NULL, 0};
    DLTensor all = {sums, {kDLCPU, 0}, 1, {kDLInt, 64, 1}, &eight, NULL, 0};
    CHILD_CHECK(distc_allgather_into_tensor(NULL, pg, &all, &st, NULL) == 0, "allgather: %s", distc_error_last());
    for (int q = 1; q < n; ++q) CHILD_CHECK(sums[q] == sums[0], "rank %d: rank %d's sum has other bits", rank, q);
    for (int i = 0; i < N; ++i) x[i] = (float)(2 * rank);
    CHILD_CHECK(distc_allreduce(NULL, pg, &t, DISTC_AVG, NULL) == 0, "avg: %s", distc_error_last());
    CHILD_CHECK(x[N - 1] == (float)(n - 1), "rank %d: avg is %g", rank, x[N - 1]);
    for (int i = 0; i < N; ++i) x[i] = rank == 3 ? (float)(i % 1001) : -1.0f;
    CHILD_CHECK(distc_broadcast(NULL, pg, &t, 3, NULL) == 0, "broadcast: %s", distc_error_last());
    CHILD_CHECK(x[1234] == (float)(1234 % 1001) && x[N - 1] == (float)((N - 1) % 1001), "rank %d: broadcast wrong",
                rank);
    CHILD_CHECK(distc_barrier(NULL, pg, NULL) == 0, "barrier: %s", distc_error_last());
    /* Small: a broadcast and a scatter from rank 3 and from rank 0, which
     * with 4 ranks on a host and a core each go down a tree inside the host. */
    for (int root = 3; root >= 0; root -= 3) {
        float small[7], got[3], whole[8 * 3];
        int64_t seven[1] = {7}, three[1] = {3};
        for (int i = 0; i < 7; ++i) small[i] = rank == root ? (float)(root * 10 + i) : -1.0f;
        DLTensor st = f32(small, seven);
        CHILD_CHECK(distc_broadcast(NULL, pg, &st, root, NULL) == 0, "small broadcast: %s", distc_error_last());
        CHILD_CHECK(small[6] == (float)(root * 10 + 6), "rank %d: small broadcast from %d wrong", rank, root);
        DLTensor parts[8], *ptrs[8];
        for (int q = 0; q < n; ++q) {
            for (int i = 0; i < 3; ++i) whole[q * 3 + i] = (float)(q * 100 + root * 10 + i);
            parts[q] = f32(whole + q * 3, three);
            ptrs[q] = &parts[q];
        }
        DLTensor out = f32(got, three);
        CHILD_CHECK(distc_scatter(NULL, pg, &out, rank == root ? (const DLTensor *const *)ptrs : NULL, root, NULL) == 0,
                    "scatter: %s", distc_error_last());
        CHILD_CHECK(got[0] == (float)(rank * 100 + root * 10) && got[2] == (float)(rank * 100 + root * 10 + 2),
                    "rank %d: scatter from %d gave %g", rank, root, got[0]);
    }
    /* reduce to a host's second rank and to rank 0: the root gets the sum,
     * the others keep their tensors. */
    for (int root = 3; root >= 0; root -= 3) {
        for (int i = 0; i < N; ++i) x[i] = (float)(rank + i % 5);
        CHILD_CHECK(distc_reduce(NULL, pg, &t, root, DISTC_SUM, NULL) == 0, "reduce: %s", distc_error_last());
        for (int i = 0; i < N; i += 997) {
            float w = rank == root ? (float)(n * (n - 1) / 2 + n * (i % 5)) : (float)(rank + i % 5);
            CHILD_CHECK(x[i] == w, "rank %d: reduce to %d: element %d is %g, not %g", rank, root, i, x[i], w);
        }
    }
    /* allgather of 64 Ki floats from each rank, in rank order. */
    enum { P = 1 << 16 };
    float *parts = malloc((size_t)n * P * sizeof *parts);
    int64_t pshape[1] = {P}, ashape[1] = {(int64_t)n * P};
    for (int i = 0; i < P; ++i) x[i] = (float)(rank * 100000 + i);
    DLTensor pin = f32(x, pshape), pall = f32(parts, ashape);
    CHILD_CHECK(distc_allgather_into_tensor(NULL, pg, &pall, &pin, NULL) == 0, "allgather: %s", distc_error_last());
    for (int q = 0; q < n; ++q)
        for (int i = 0; i < P; i += 4093)
            CHILD_CHECK(parts[(size_t)q * P + (size_t)i] == (float)(q * 100000 + i), "rank %d: allgather part %d wrong",
                        rank, q);
    free(parts);
    /* Rank 2 (a host's first rank) calls another size: everyone fails
     * (Gloo's pairs, DISTC_MESH_BYTES=0, carry no call to check). */
    const char *mesh = getenv("DISTC_MESH_BYTES");
    if (mesh && strcmp(mesh, "0") == 0) {
        distc_pg_free(pg);
        free(x);
        return 0;
    }
    /* Everyone done with the allgather first: over TCP a rank that fails
     * resets its connections, and a reset drops what a slower peer has not
     * read yet of the call before (see README, the mesh's faults). */
    CHILD_CHECK(distc_barrier(NULL, pg, NULL) == 0, "barrier: %s", distc_error_last());
    usleep(200 * 1000);
    shape[0] = rank == 2 ? 5 : 4;
    int64_t t0 = dt_now_ms();
    int rc = distc_allreduce(NULL, pg, &t, DISTC_SUM, NULL);
    CHILD_CHECK(rc != 0, "rank %d: an allreduce of mismatched sizes succeeded", rank);
    CHILD_CHECK(dt_now_ms() - t0 < j->timeout_ms + 1000, "rank %d: the mismatch took too long", rank);
    distc_pg_free(pg);
    free(x);
    return 0;
}

void test_hierarchy(void **state) {
    (void)state;
    struct job j = {dt_free_port(), 5000, -1, 2, -1, 0};
    assert_int_equal(dt_run_procs(4, hierarchy_child, &j, 60), 0);
    struct job uneven = {dt_free_port(), 5000, -1, 2, -1, 0};
    assert_int_equal(dt_run_procs(5, hierarchy_child, &uneven, 60), 0);
    struct job interleaved = {dt_free_port(), 5000, -1, -2, -1, 0}; /* hosts {0, 2} and {1, 3} */
    assert_int_equal(dt_run_procs(4, hierarchy_child, &interleaved, 60), 0);
    /* Two hosts of 4 ranks, each with a core per rank (said so): inside a
     * host, small broadcasts and scatters go down a tree. */
    char cores[32];
    dt_cores_say(cores, "64");
    struct job fours = {dt_free_port(), 5000, -1, 4, -1, 0};
    int rc = dt_run_procs(8, hierarchy_child, &fours, 120);
    dt_cores_restore(cores);
    assert_int_equal(rc, 0);
}

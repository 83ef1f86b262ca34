/*
 * The mpi backend against the gloo backend on the same inputs, in the same
 * processes (under mpirun, tests/mpi/run.sh): every collective, dtype and
 * op, p2p and byte collectives. Inputs are small integers (halves for
 * PREMUL_SUM), so every result is exact and the two must agree byte for
 * byte, whatever order each backend reduces in.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pg_harness.h"
#include "test_util.h"

static distc_pg *g_mpi, *g_gloo;
static int g_rank, g_size, g_cases;

static void fill(DLTensor *t, int seed) {
    for (int64_t i = 0; i < dt_numel(t); ++i) {
        double v =
            dt_is_bool(t->dtype) ? (double)((i + seed + g_rank) % 2) : (double)((i * 7 + seed + 3 * g_rank) % 9 + 1);
        if (dt_is_int(t->dtype) && !dt_is_unsigned(t->dtype) && (i % 3 == 0)) v = -v;
        dt_set_complex(t, i, v, dt_is_complex(t->dtype) ? v - 2 : 0);
    }
}

static size_t bytes_of(const DLTensor *t) { return (size_t)dt_numel(t) * dt_dtype_size(t->dtype); }

/* Runs `call` on both groups with identical inputs and compares the tensors' bytes afterwards. */
/* Each call runs once (an in-place call run twice would undo itself). */
#define BOTH(what, a, b, rc_a, rc_b)                                                                        \
    do {                                                                                                    \
        int ra_ = (rc_a), rb_ = (rc_b);                                                                     \
        if (ra_ != rb_) fail_msg("%s: mpi returned %d, gloo %d (%s)", what, ra_, rb_, distc_error_last());  \
        if (ra_ == 0 && memcmp((a)->data, (b)->data, bytes_of(a)) != 0) {                                   \
            for (int64_t i_ = 0; i_ < dt_numel(a); ++i_)                                                    \
                fprintf(stderr, "[%d] %lld: %g %g\n", g_rank, (long long)i_, dt_get(a, i_), dt_get(b, i_)); \
            fail_msg("%s: mpi and gloo results differ (line %d)", what, __LINE__);                          \
        }                                                                                                   \
        ++g_cases;                                                                                          \
    } while (0)

static const char *op_names[] = {"SUM", "AVG", "PRODUCT", "MIN", "MAX", "BAND", "BOR", "BXOR", "PREMUL_SUM"};

static void test_allreduce_and_reduce(void **state) {
    (void)state;
    for (size_t d = 0; d < dt_num_dtypes; ++d) {
        DLDataType dt = dt_all_dtypes[d];
        for (int op = DISTC_SUM; op <= DISTC_PREMUL_SUM; ++op) {
            char what[80];
            snprintf(what, sizeof what, "allreduce %s %s", dt_dtype_name(dt), op_names[op]);
            DLTensor *a = dt_tensor_1d(dt, 37), *b = dt_tensor_1d(dt, 37);
            fill(a, op);
            fill(b, op);
            distc_op_options oo = DISTC_OP_OPTIONS_INIT;
            oo.premul_factor = 0.5;
            int ra = distc_allreduce(NULL, g_mpi, a, (distc_reduce_op)op, &oo);
            int rb = distc_allreduce(NULL, g_gloo, b, (distc_reduce_op)op, &oo);
            BOTH(what, a, b, ra, rb);
            snprintf(what, sizeof what, "reduce %s %s", dt_dtype_name(dt), op_names[op]);
            fill(a, op + 1);
            fill(b, op + 1);
            ra = distc_reduce(NULL, g_mpi, a, g_size - 1, (distc_reduce_op)op, &oo);
            rb = distc_reduce(NULL, g_gloo, b, g_size - 1, (distc_reduce_op)op, &oo);
            BOTH(what, a, b, ra, rb);
            dt_tensor_free(a);
            dt_tensor_free(b);
        }
    }
}

static void test_data_movement(void **state) {
    (void)state;
    for (size_t d = 0; d < dt_num_dtypes; ++d) {
        DLDataType dt = dt_all_dtypes[d];
        const char *name = dt_dtype_name(dt);
        DLTensor *a = dt_tensor_1d(dt, 11), *b = dt_tensor_1d(dt, 11);
        DLTensor *oa = dt_tensor_1d(dt, 11 * g_size), *ob = dt_tensor_1d(dt, 11 * g_size);
        fill(a, 5);
        fill(b, 5);
        BOTH(name, a, b, distc_broadcast(NULL, g_mpi, a, 1 % g_size, NULL),
             distc_broadcast(NULL, g_gloo, b, 1 % g_size, NULL));
        fill(a, 6);
        fill(b, 6);
        BOTH(name, oa, ob, distc_allgather_into_tensor(NULL, g_mpi, oa, a, NULL),
             distc_allgather_into_tensor(NULL, g_gloo, ob, b, NULL));
        memset(oa->data, 0, bytes_of(oa));
        memset(ob->data, 0, bytes_of(ob));
        /* scatter from the gathered tensor's parts, then reduce_scatter of it */
        DLTensor *pa[8], *pb[8];
        for (int r = 0; r < g_size; ++r) {
            pa[r] = dt_tensor_1d(dt, 11);
            pb[r] = dt_tensor_1d(dt, 11);
            fill(pa[r], r);
            fill(pb[r], r);
        }
        BOTH(name, a, b, distc_scatter(NULL, g_mpi, a, (const DLTensor *const *)pa, 0, NULL),
             distc_scatter(NULL, g_gloo, b, (const DLTensor *const *)pb, 0, NULL));
        BOTH(name, pa[0], pb[0], distc_gather(NULL, g_mpi, pa, a, g_size - 1, NULL),
             distc_gather(NULL, g_gloo, pb, b, g_size - 1, NULL));
        if (!dt_is_bool(dt))
            BOTH(name, a, b, distc_reduce_scatter(NULL, g_mpi, a, (const DLTensor *const *)pa, DISTC_SUM, NULL),
                 distc_reduce_scatter(NULL, g_gloo, b, (const DLTensor *const *)pb, DISTC_SUM, NULL));
        DLTensor *qa[8], *qb[8];
        for (int r = 0; r < g_size; ++r) {
            qa[r] = dt_tensor_1d(dt, 11);
            qb[r] = dt_tensor_1d(dt, 11);
        }
        int rca = distc_alltoall(NULL, g_mpi, qa, (const DLTensor *const *)pa, NULL);
        int rcb = distc_alltoall(NULL, g_gloo, qb, (const DLTensor *const *)pb, NULL);
        for (int r = 0; r < g_size; ++r) {
            BOTH(name, qa[r], qb[r], rca, rcb);
            dt_tensor_free(qa[r]);
            dt_tensor_free(qb[r]);
        }
        for (int r = 0; r < g_size; ++r) {
            dt_tensor_free(pa[r]);
            dt_tensor_free(pb[r]);
        }
        dt_tensor_free(a);
        dt_tensor_free(b);
        dt_tensor_free(oa);
        dt_tensor_free(ob);
    }
}

/* alltoall_single with uneven splits: rank r sends (r + j) % 3 + 1 rows to rank j. */
static void test_alltoall_uneven(void **state) {
    (void)state;
    int64_t in_splits[8], out_splits[8], in_rows = 0, out_rows = 0;
    for (int j = 0; j < g_size; ++j) {
        in_splits[j] = (g_rank + j) % 3 + 1;
        out_splits[j] = (j + g_rank) % 3 + 1;
        in_rows += in_splits[j];
        out_rows += out_splits[j];
    }
    DLTensor *ia = dt_tensor_2d(DT_F64, in_rows, 3), *ib = dt_tensor_2d(DT_F64, in_rows, 3);
    DLTensor *oa = dt_tensor_2d(DT_F64, out_rows, 3), *ob = dt_tensor_2d(DT_F64, out_rows, 3);
    fill(ia, 9);
    fill(ib, 9);
    BOTH("alltoall_single uneven", oa, ob, distc_alltoall_single(NULL, g_mpi, oa, ia, out_splits, in_splits, NULL),
         distc_alltoall_single(NULL, g_gloo, ob, ib, out_splits, in_splits, NULL));
    dt_tensor_free(ia);
    dt_tensor_free(ib);
    dt_tensor_free(oa);
    dt_tensor_free(ob);
}

/* alltoall_single in place (output = input, as torch allows): uneven parts
 * alike both ways between a pair (rank r and j move (r + j) % 3 + 1 rows
 * each way), and even ones of 2 rows and of 40000 (where MPI copies large
 * messages in one go, from the buffer it writes too unless it sends from a copy). */
static void test_alltoall_in_place(void **state) {
    (void)state;
    int64_t splits[8], rows = 0;
    for (int j = 0; j < g_size; ++j) rows += splits[j] = (g_rank + j) % 3 + 1;
    for (int even = 0; even < 3; ++even) {
        int64_t n = even == 2 ? 40000 * g_size : even ? 2 * g_size : rows;
        DLTensor *a = dt_tensor_2d(DT_F64, n, 3), *b = dt_tensor_2d(DT_F64, n, 3);
        fill(a, 11 + even);
        fill(b, 11 + even);
        const int64_t *s = even ? NULL : splits;
        BOTH(even == 2 ? "alltoall_single in place, large"
             : even    ? "alltoall_single in place, even"
                       : "alltoall_single in place, uneven",
             a, b, distc_alltoall_single(NULL, g_mpi, a, a, s, s, NULL),
             distc_alltoall_single(NULL, g_gloo, b, b, s, s, NULL));
        dt_tensor_free(a);
        dt_tensor_free(b);
    }
}

static void test_p2p_and_bytes(void **state) {
    (void)state;
    int next = (g_rank + 1) % g_size, prev = (g_rank + g_size - 1) % g_size;
    DLTensor *s = dt_tensor_1d(DT_I32, 9), *ra = dt_tensor_1d(DT_I32, 9), *rb = dt_tensor_1d(DT_I32, 9);
    fill(s, 1);
    distc_p2p_op ops[2] = {{DISTC_P2P_SEND, s, next, 4}, {DISTC_P2P_RECV, ra, prev, 4}};
    int a = distc_batch_isend_irecv(NULL, g_mpi, ops, 2, NULL);
    ops[1].tensor = rb;
    int b = distc_batch_isend_irecv(NULL, g_gloo, ops, 2, NULL);
    BOTH("batch_isend_irecv ring", ra, rb, a, b);
    /* recv from any source on rank 0, everyone else sends */
    for (int k = 0; k < 2; ++k) {
        distc_pg *pg = k ? g_gloo : g_mpi;
        if (g_rank == 0) {
            for (int i = 1; i < g_size; ++i) {
                distc_work *w = NULL;
                ASSERT_OK(distc_recv(&w, pg, ra, DISTC_ANY_SOURCE, 8, NULL));
                ASSERT_OK(distc_work_wait(w, -1));
                int32_t src = -1;
                ASSERT_OK(distc_work_source_rank(&src, w));
                assert_true(src >= 1 && src < g_size && dt_get(ra, 0) == 100 + src);
                distc_work_free(w);
            }
        } else {
            dt_set(s, 0, 100 + g_rank);
            ASSERT_OK(distc_send(NULL, pg, s, 0, 8, NULL));
        }
    }
    char mine[64];
    int len = snprintf(mine, sizeof mine, "rank %d says %.*s", g_rank, g_rank * 3, "abcdefghijklmnopqrstuvwxyz");
    distc_buf xa[8], xb[8];
    ASSERT_OK(distc_all_gather_bytes(xa, g_mpi, mine, (size_t)len, NULL));
    ASSERT_OK(distc_all_gather_bytes(xb, g_gloo, mine, (size_t)len, NULL));
    for (int r = 0; r < g_size; ++r) {
        assert_int_equal(xa[r].size, xb[r].size);
        assert_memory_equal(xa[r].data, xb[r].data, xa[r].size);
        distc_buf_dispose(&xa[r]);
        distc_buf_dispose(&xb[r]);
    }
    ++g_cases;
    dt_tensor_free(s);
    dt_tensor_free(ra);
    dt_tensor_free(rb);
}

static int setup(void **state) {
    (void)state;
    distc_pg_options o = DISTC_PG_OPTIONS_INIT;
    o.backend = "mpi";
    if (distc_pg_new_from_url(&g_mpi, "mpi://", NULL, &o) != 0) {
        fprintf(stderr, "mpi group: %s\n", distc_error_last());
        return -1;
    }
    distc_pg_rank(&g_rank, g_mpi);
    distc_pg_size(&g_size, g_mpi);
    distc_store *st = NULL;
    const char *path = getenv("DT_STORE_FILE");
    if (!path || g_size > 8 || distc_store_new_file(&st, path, g_size) != 0) {
        fprintf(stderr, "run under tests/mpi/run.sh with at most 8 ranks (DT_STORE_FILE): %s\n", distc_error_last());
        return -1;
    }
    distc_pg_options go = DISTC_PG_OPTIONS_INIT;
    go.group_name = "conformance_gloo";
    int rc = distc_pg_new(&g_gloo, st, g_rank, g_size, &go);
    distc_store_free(st);
    if (rc != 0) fprintf(stderr, "gloo group: %s\n", distc_error_last());
    return rc;
}

static int teardown(void **state) {
    (void)state;
    if (g_rank == 0) printf("mpi vs gloo: %d cases identical on %d ranks\n", g_cases, g_size);
    distc_barrier(NULL, g_gloo, NULL);
    distc_pg_free(g_gloo);
    distc_pg_free(g_mpi);
    return 0;
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_allreduce_and_reduce), cmocka_unit_test(test_data_movement),
        cmocka_unit_test(test_alltoall_uneven),      cmocka_unit_test(test_alltoall_in_place),
        cmocka_unit_test(test_p2p_and_bytes),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}

/*
 * Sparse gradients in the reducer (threads as ranks, 1 to 4; and processes):
 * an embedding-like gradient whose rows each rank gives as (indices, values),
 * reduced by row next to dense buckets, unused on some ranks or on all, and
 * the errors of the sparse calls.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pg_harness.h"
#include "test_util.h"

#define ROWS 10
#define COLS 3

/* Rank r's rows in iteration `it`: r, r + 1, 7, and r again (repeats add up). */
#define NNZ 4
static void rank_rows(int r, int64_t *idx) {
    idx[0] = r;
    idx[1] = r + 1;
    idx[2] = 7;
    idx[3] = r;
}
static double rank_val(int r, int it, int k, int c) { return (double)(r + 1) * (k + 1) + c + it; }

/* The expected average of row `row`, column `c`: every listed rank's contributions summed, / size. */
static double expect_row(int size, int it, int row, int c, int skip_rank, int *present) {
    double sum = 0;
    *present = 0;
    for (int r = 0; r < size; ++r) {
        if (r == skip_rank) continue;
        int64_t idx[NNZ];
        rank_rows(r, idx);
        for (int k = 0; k < NNZ; ++k)
            if (idx[k] == row) {
                sum += rank_val(r, it, k, c);
                *present = 1;
            }
    }
    return sum / size;
}

static int check_sparse(distc_reducer *r, int size, int it, int skip_rank) {
    const int64_t *idx = NULL;
    const void *vals = NULL;
    size_t nnz = 0;
    if (!RK_OK(distc_reducer_sparse_grad(&idx, &vals, &nnz, r, 1))) return 0;
    size_t k = 0;
    for (int row = 0; row < ROWS; ++row) {
        int present = 0;
        expect_row(size, it, row, 0, skip_rank, &present);
        if (!present) continue;
        if (!RK_CHECKF(k < nnz && idx[k] == row, "iteration %d: row %d missing (entry %zu of %zu)", it, row, k, nnz))
            return 0;
        for (int c = 0; c < COLS; ++c) {
            double want = expect_row(size, it, row, c, skip_rank, &present);
            double got = ((const float *)vals)[k * COLS + c];
            if (!RK_CHECKF(fabs(got - want) <= 1e-5 * (1 + fabs(want)), "iteration %d row %d col %d: %g, expected %g",
                           it, row, c, got, want))
                return 0;
        }
        ++k;
    }
    return RK_CHECKF(k == nnz, "iteration %d: %zu rows, expected %zu", it, nnz, k);
}

/* A bucket hook whose division runs in a continuation: the reducer hands it the
 * next bucket only once that is done, the sparse bucket between them included. */
struct divide {
    DLTensor buf;
    int64_t numel;
    int32_t size;
};

static int divide_cont(distc_work **next, distc_work *done, void *payload) {
    (void)next;
    struct divide *d = payload;
    int st = distc_work_test(done);
    for (int64_t i = 0; st == 0 && i < d->numel; ++i) dt_set(&d->buf, i, dt_get(&d->buf, i) / d->size);
    free(d);
    return st < 0 ? st : 0;
}

static int sum_then_divide(distc_work **out, distc_pg *pg, const distc_reducer_bucket *b, void *payload) {
    (void)payload;
    struct divide *d = malloc(sizeof *d);
    d->buf = *b->buffer;
    d->numel = b->buffer->shape[0];
    d->buf.shape = &d->numel;
    distc_pg_size(&d->size, pg);
    distc_work *sum = NULL;
    int rc = distc_allreduce(&sum, pg, &d->buf, DISTC_SUM, NULL);
    if (rc == 0) rc = distc_work_then(out, sum, divide_cont, d);
    if (rc != 0 && !sum) free(d);
    distc_work_free(sum);
    return rc;
}

static void rank_sparse(distc_pg *pg, int rank, int size, void *arg) {
    DLTensor *g[3] = {dt_tensor_1d(DT_F32, 5), dt_tensor_2d(DT_F32, ROWS, COLS), dt_tensor_1d(DT_F64, 4)};
    int32_t sparse[3] = {0, 1, 0};
    distc_reducer_options o = DISTC_REDUCER_OPTIONS_INIT;
    o.expect_sparse = sparse;
    o.bucket_cap_bytes = 8;
    o.first_bucket_bytes = 8;
    distc_reducer *r = NULL;
    if (!RK_OK(distc_reducer_new(&r, pg, g, 3, &o))) goto out;
    size_t nb = 0;
    RK_OK(distc_reducer_num_buckets(&nb, r));
    RK_EQ_INT((long long)nb, 3);
    if (arg) RK_OK(distc_reducer_register_bucket_hook(r, sum_then_divide, NULL, NULL));
    DLTensor *ix = dt_tensor_1d(DT_I64, NNZ), *vs = dt_tensor_2d(DT_F32, NNZ, COLS);
    for (int it = 0; it < 3; ++it) {
        /* iteration 1: rank 0 has no rows (listed unused); iteration 2: nobody has (found unused fails: see errors) */
        int skip = it == 1 ? 0 : -1;
        int32_t unused[1] = {1};
        RK_OK(distc_reducer_prepare_for_backward(r, rank == skip ? unused : NULL, rank == skip ? 1 : 0));
        for (int j = 0; j < 4; ++j) dt_set(g[2], j, rank + j);
        RK_OK(distc_reducer_mark_ready(r, 2));
        if (rank != skip) {
            rank_rows(rank, (int64_t *)ix->data);
            for (int k = 0; k < NNZ; ++k)
                for (int c = 0; c < COLS; ++c) dt_set(vs, k * COLS + c, rank_val(rank, it, k, c));
            RK_OK(distc_reducer_mark_ready_sparse(r, 1, ix, vs));
        }
        for (int j = 0; j < 5; ++j) dt_set(g[0], j, rank * 2 + it);
        RK_OK(distc_reducer_mark_ready(r, 0));
        RK_OK(distc_reducer_finalize(r));
        check_sparse(r, size, it, skip);
        RK_EQ_DBL(dt_get(g[0], 4), (double)(size - 1) + it);
        RK_EQ_DBL(dt_get(g[2], 1), (size - 1) / 2.0 + 1);
    }
    uint64_t bytes = 0;
    int64_t launch = 0, took = 0;
    int32_t b = -1;
    RK_OK(distc_reducer_bucket_of(&b, r, 1));
    RK_OK(distc_reducer_bucket_stats(&bytes, &launch, &took, r, (size_t)b));
    RK_CHECKF(took >= 0 && launch >= 0, "sparse bucket stats: launch %lld, took %lld", (long long)launch,
              (long long)took);
    dt_tensor_free(ix);
    dt_tensor_free(vs);
    distc_reducer_free(r);
out:
    for (int i = 0; i < 3; ++i) dt_tensor_free(g[i]);
}

static void test_sparse_rows_average(void **state) {
    (void)state;
    for (int size = 1; size <= 4; ++size) dt_run_ranks(size, rank_sparse, NULL);
    int hooked = 1; /* a bucket hook on the dense buckets, before and after the sparse one */
    for (int size = 2; size <= 3; ++size) dt_run_ranks(size, rank_sparse, &hooked);
}

/* Found unused on every rank: nnz 0, and the dense neighbours still average. */
static void rank_all_unused(distc_pg *pg, int rank, int size, void *arg) {
    (void)arg;
    (void)size;
    DLTensor *g[2] = {dt_tensor_2d(DT_F64, ROWS, COLS), dt_tensor_1d(DT_F32, 3)};
    int32_t sparse[2] = {1, 0};
    distc_reducer_options o = DISTC_REDUCER_OPTIONS_INIT;
    o.expect_sparse = sparse;
    o.find_unused_parameters = 1;
    distc_reducer *r = NULL;
    if (RK_OK(distc_reducer_new(&r, pg, g, 2, &o))) {
        RK_OK(distc_reducer_prepare_for_backward(r, NULL, 0));
        dt_set(g[1], 0, rank);
        RK_OK(distc_reducer_mark_ready(r, 1));
        RK_OK(distc_reducer_finalize(r));
        const int64_t *idx = NULL;
        const void *vals = NULL;
        size_t nnz = 99;
        RK_OK(distc_reducer_sparse_grad(&idx, &vals, &nnz, r, 0));
        RK_EQ_INT((long long)nnz, 0);
    }
    distc_reducer_free(r);
    dt_tensor_free(g[0]);
    dt_tensor_free(g[1]);
}

static void test_sparse_unused_everywhere(void **state) {
    (void)state;
    dt_run_ranks(2, rank_all_unused, NULL);
}

static void rank_errors(distc_pg *pg, int rank, int size, void *arg) {
    (void)arg;
    (void)rank;
    (void)size;
    DLTensor *g[2] = {dt_tensor_2d(DT_F32, ROWS, COLS), dt_tensor_1d(DT_F32, 3)};
    int32_t sparse[2] = {1, 0};
    distc_reducer_options o = DISTC_REDUCER_OPTIONS_INIT;
    o.expect_sparse = sparse;
    o.gradient_as_bucket_view = 1;
    distc_reducer *r = NULL;
    /* an explicit assignment that puts the sparse gradient with another */
    int32_t together[2] = {0, 0};
    o.bucket_of = together;
    RK_ERR(distc_reducer_new(&r, pg, g, 2, &o), DISTC_EINVAL, "bucket of its own");
    o.bucket_of = NULL;
    if (!RK_OK(distc_reducer_new(&r, pg, g, 2, &o))) goto out;
    void *view = NULL;
    RK_ERR(distc_reducer_grad_view(&view, r, 0), DISTC_EINVAL, "sparse");
    DLTensor *ix = dt_tensor_1d(DT_I64, 2), *vs = dt_tensor_2d(DT_F32, 2, COLS);
    DLTensor *ix32 = dt_tensor_1d(DT_I32, 2), *vs64 = dt_tensor_2d(DT_F64, 2, COLS), *vshort = dt_tensor_1d(DT_F32, 5);
    RK_ERR(distc_reducer_mark_ready_sparse(r, 0, ix, vs), DISTC_ESTATE, "prepare_for_backward");
    RK_OK(distc_reducer_prepare_for_backward(r, NULL, 0));
    RK_ERR(distc_reducer_mark_ready(r, 0), DISTC_EINVAL, "mark_ready_sparse");
    RK_ERR(distc_reducer_mark_ready_sparse(r, 1, ix, vs), DISTC_EINVAL, "dense");
    RK_ERR(distc_reducer_mark_ready_sparse(r, 0, ix32, vs), DISTC_EINVAL, "int64");
    RK_ERR(distc_reducer_mark_ready_sparse(r, 0, ix, vs64), DISTC_EINVAL, "float64");
    RK_ERR(distc_reducer_mark_ready_sparse(r, 0, ix, vshort), DISTC_EINVAL, "rows of 3");
    ((int64_t *)ix->data)[1] = ROWS;
    RK_ERR(distc_reducer_mark_ready_sparse(r, 0, ix, vs), DISTC_EINVAL, "outside 0..9");
    RK_ERR(distc_reducer_mark_ready_sparse(r, 0, NULL, vs), DISTC_EINVAL, "indices");
    ((int64_t *)ix->data)[1] = 2;
    RK_OK(distc_reducer_mark_ready_sparse(r, 0, ix, vs));
    RK_ERR(distc_reducer_mark_ready_sparse(r, 0, ix, vs), DISTC_ESTATE, "twice");
    RK_OK(distc_reducer_mark_ready(r, 1));
    RK_OK(distc_reducer_finalize(r));
    const int64_t *idx = NULL;
    const void *vals = NULL;
    size_t nnz = 0;
    RK_ERR(distc_reducer_sparse_grad(&idx, &vals, &nnz, r, 1), DISTC_EINVAL, "dense");
    RK_ERR(distc_reducer_sparse_grad(NULL, &vals, &nnz, r, 0), DISTC_EINVAL, "indices_out");
    RK_ERR(distc_reducer_sparse_grad(&idx, &vals, &nnz, r, 2), DISTC_EINVAL, "outside");
    dt_tensor_free(ix);
    dt_tensor_free(vs);
    dt_tensor_free(ix32);
    dt_tensor_free(vs64);
    dt_tensor_free(vshort);
    distc_reducer_free(r);
out:
    dt_tensor_free(g[0]);
    dt_tensor_free(g[1]);
}

static void test_sparse_errors(void **state) {
    (void)state;
    dt_run_ranks(1, rank_errors, NULL);
}

/* Callers built against older versions of the options: init writes nothing past their struct. */
static void test_options_older_versions(void **state) {
    (void)state;
    const size_t ends[] = {offsetof(distc_reducer_options, expect_sparse), offsetof(distc_reducer_options, stream)};
    for (unsigned v = 1; v <= 2; ++v) {
        struct {
            distc_reducer_options o;
            unsigned char canary[16];
        } s;
        memset(&s, 0xab, sizeof s);
        assert_int_equal(distc_reducer_options_init(&s.o, v), 0);
        const unsigned char *after = (const unsigned char *)&s.o + ends[v - 1];
        for (size_t k = 0; k < sizeof(void *); ++k) assert_int_equal(after[k], 0xab);
        assert_int_equal(s.o.version, v);
    }
    distc_reducer_options o;
    assert_int_equal(distc_reducer_options_init(&o, DISTC_REDUCER_OPTIONS_VERSION + 1), DISTC_EINVAL);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sparse_rows_average),
        cmocka_unit_test(test_sparse_unused_everywhere),
        cmocka_unit_test(test_sparse_errors),
        cmocka_unit_test(test_options_older_versions),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/*
 * distc_compute_bucket_assignment_by_size against c10d's semantics: the
 * cases of PyTorch's own tests (one limit and several, one dtype and
 * several), sparse gradients alone, devices never mixed, and bad arguments.
 */
#include <stdlib.h>
#include <string.h>

#include "pg_harness.h"
#include "test_util.h"

typedef struct spec {
    DLDataType dt;
    int64_t numel;
    int device_id;
} spec;

/* Runs the assignment and compares it with `want` written as bucket-of-each-tensor. */
static void check(const spec *s, size_t n, const uint64_t *limits, size_t nl, const int32_t *sparse,
                  const int32_t *want, size_t want_buckets) {
    DLTensor t[16];
    const DLTensor *ptrs[16];
    int64_t shapes[16];
    for (size_t i = 0; i < n; ++i) {
        shapes[i] = s[i].numel;
        /* The data is never read, but a tensor without any is refused. */
        t[i] = (DLTensor){&shapes[i], {kDLCPU, s[i].device_id}, 1, s[i].dt, &shapes[i], NULL, 0};
        ptrs[i] = &t[i];
    }
    int32_t got[16];
    size_t nb = 0;
    ASSERT_OK(distc_compute_bucket_assignment_by_size(got, &nb, ptrs, n, limits, nl, sparse));
    assert_int_equal(nb, want_buckets);
    for (size_t i = 0; i < n; ++i) {
        if (got[i] != want[i]) fail_msg("tensor %zu is in bucket %d, expected %d", i, got[i], want[i]);
    }
}

/* torch: [[0], [1], [2], [3]] */
static void test_single_limit_single_dtype(void **state) {
    (void)state;
    spec s[] = {{DT_F32, 100, 0}, {DT_F32, 200, 0}, {DT_F32, 100, 0}, {DT_F32, 50, 0}};
    uint64_t lim[] = {400};
    int32_t want[] = {0, 1, 2, 3};
    check(s, 4, lim, 1, NULL, want, 4);
}

/* torch: [[0, 2], [1, 3], [4], [5]] */
static void test_single_limit_multi_dtype(void **state) {
    (void)state;
    spec s[] = {{DT_F32, 50, 0}, {DT_F64, 25, 0}, {DT_F32, 50, 0}, {DT_F64, 25, 0}, {DT_F32, 50, 0}, {DT_F64, 25, 0}};
    uint64_t lim[] = {400};
    int32_t want[] = {0, 1, 0, 1, 2, 3};
    check(s, 6, lim, 1, NULL, want, 4);
}

/* torch: [[0], [1, 2], [3]] */
static void test_multi_limit_single_dtype(void **state) {
    (void)state;
    spec s[] = {{DT_F32, 10, 0}, {DT_F32, 10, 0}, {DT_F32, 10, 0}, {DT_F32, 10, 0}};
    uint64_t lim[] = {40, 80};
    int32_t want[] = {0, 1, 1, 2};
    check(s, 4, lim, 2, NULL, want, 3);
}

/* torch: [[0], [1], [2, 4], [3, 5]] */
static void test_multi_limit_multi_dtype(void **state) {
    (void)state;
    spec s[] = {{DT_F32, 50, 0}, {DT_F64, 25, 0}, {DT_F32, 50, 0}, {DT_F64, 25, 0}, {DT_F32, 50, 0}, {DT_F64, 25, 0}};
    uint64_t lim[] = {200, 400};
    int32_t want[] = {0, 1, 2, 3, 2, 3};
    check(s, 6, lim, 2, NULL, want, 4);
}

/* The last limit stays once the list is used up; a sparse gradient is alone wherever it is. */
static void test_last_limit_and_sparse(void **state) {
    (void)state;
    spec s[] = {{DT_F32, 10, 0}, {DT_F32, 10, 0}, {DT_F32, 10, 0}, {DT_F32, 10, 0}, {DT_F32, 10, 0}, {DT_F32, 10, 0}};
    uint64_t lim[] = {40, 80};
    int32_t sparse[] = {0, 0, 1, 0, 0, 0};
    /* 0 closes at 40; 2 is alone; then 1+3 reach 80, 4+5 reach 80 again */
    int32_t want[] = {0, 1, 2, 1, 3, 3};
    check(s, 6, lim, 2, sparse, want, 4);
}

/* Buckets never span devices, even of one dtype. */
static void test_devices_apart(void **state) {
    (void)state;
    spec s[] = {{DT_F32, 10, 0}, {DT_F32, 10, 1}, {DT_F32, 10, 0}, {DT_F32, 10, 1}};
    uint64_t lim[] = {1000};
    int32_t want[] = {0, 1, 0, 1};
    check(s, 4, lim, 1, NULL, want, 2);
}

static void test_bad_arguments(void **state) {
    (void)state;
    int64_t shape = 4;
    DLTensor t = {&shape, {kDLCPU, 0}, 1, DT_F32, &shape, NULL, 0};
    const DLTensor *one[1] = {&t}, *none[1] = {NULL};
    uint64_t lim[] = {100}, zero[] = {0};
    int32_t out[1];
    size_t nb;
    ASSERT_ERR(distc_compute_bucket_assignment_by_size(NULL, &nb, one, 1, lim, 1, NULL), DISTC_EINVAL, "bucket_of");
    ASSERT_ERR(distc_compute_bucket_assignment_by_size(out, NULL, one, 1, lim, 1, NULL), DISTC_EINVAL, "n_buckets");
    ASSERT_ERR(distc_compute_bucket_assignment_by_size(out, &nb, NULL, 1, lim, 1, NULL), DISTC_EINVAL, "tensors");
    ASSERT_ERR(distc_compute_bucket_assignment_by_size(out, &nb, one, 0, lim, 1, NULL), DISTC_EINVAL, "no tensors");
    ASSERT_ERR(distc_compute_bucket_assignment_by_size(out, &nb, one, 1, NULL, 1, NULL), DISTC_EINVAL, "limits");
    ASSERT_ERR(distc_compute_bucket_assignment_by_size(out, &nb, one, 1, lim, 0, NULL), DISTC_EINVAL, "limits");
    ASSERT_ERR(distc_compute_bucket_assignment_by_size(out, &nb, one, 1, zero, 1, NULL), DISTC_EINVAL,
               "limits[0] is 0");
    ASSERT_ERR(distc_compute_bucket_assignment_by_size(out, &nb, none, 1, lim, 1, NULL), DISTC_EINVAL,
               "tensors[0] is NULL");
    shape = -1;
    ASSERT_ERR(distc_compute_bucket_assignment_by_size(out, &nb, one, 1, lim, 1, NULL), DISTC_EINVAL, "negative");
    shape = 4;
    t.dtype.bits = 4;
    ASSERT_ERR(distc_compute_bucket_assignment_by_size(out, &nb, one, 1, lim, 1, NULL), DISTC_EINVAL,
               "unsupported dtype");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_single_limit_single_dtype),
        cmocka_unit_test(test_single_limit_multi_dtype),
        cmocka_unit_test(test_multi_limit_single_dtype),
        cmocka_unit_test(test_multi_limit_multi_dtype),
        cmocka_unit_test(test_last_limit_and_sparse),
        cmocka_unit_test(test_devices_apart),
        cmocka_unit_test(test_bad_arguments),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

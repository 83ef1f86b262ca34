/*
 * Hostile arguments: sizes that overflow, offsets that wrap, byte lengths
 * near SIZE_MAX, enum values outside their range. Each is DISTC_EINVAL with
 * a message naming what is wrong, nothing is read or written out of bounds,
 * and the group works afterwards. Byte collectives exchange their lengths
 * first, so a length that is too long fails the call on every rank alike.
 * Run under the sanitizer preset, an out-of-bounds access or an enum read
 * out of range fails the test too.
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pg_harness.h"
#include "test_util.h"

/* An allreduce and a broadcast with exact results: the group is in step. */
static void check_group_works(distc_pg *pg, int rank, int size) {
    int32_t v[3] = {rank, rank + 1, rank + 2};
    int64_t three = 3;
    DLTensor t = {v, {kDLCPU, 0}, 1, DT_I32, &three, NULL, 0};
    if (RK_OK(distc_allreduce(NULL, pg, &t, DISTC_SUM, NULL)))
        for (int i = 0; i < 3; ++i) RK_EQ_INT(v[i], size * i + size * (size - 1) / 2);
    RK_OK(distc_broadcast(NULL, pg, &t, size - 1, NULL));
}

/* -------------------------------------------------------------- tensors */

static void rank_huge_tensors(distc_pg *pg, int rank, int size, void *arg) {
    (void)arg;
    float data[64] = {0};
    int64_t huge = INT64_C(1) << 62;                   /* 2^64 bytes of float32: wraps to 0 */
    int64_t wraps[2] = {1024, (INT64_C(1) << 54) + 1}; /* 2^64 + 1024 elements: wraps to 1024 */
    int64_t over[1] = {(INT64_C(1) << 46) + 1};        /* fits in 64 bits, over 2^48 bytes */
    int64_t max1 = INT64_MAX, sixteen = 16;
    DLTensor t = {data, {kDLCPU, 0}, 1, DT_F32, &huge, NULL, 0};
    RK_ERR2(distc_allreduce(NULL, pg, &t, DISTC_SUM, NULL), DISTC_EINVAL, "tensor", "DISTC_TENSOR_MAX_BYTES");
    t.ndim = 2;
    t.shape = wraps;
    RK_ERR2(distc_allreduce(NULL, pg, &t, DISTC_SUM, NULL), DISTC_EINVAL, "{1024, 18014398509481985}",
            "DISTC_TENSOR_MAX_BYTES");
    t.ndim = 1;
    t.shape = over;
    RK_ERR2(distc_broadcast(NULL, pg, &t, 0, NULL), DISTC_EINVAL, "tensor", "DISTC_TENSOR_MAX_BYTES");
    t.shape = &max1;
    DLTensor *list[2] = {&t, &t};
    RK_ERR2(distc_allreduce_coalesced(NULL, pg, list, 2, DISTC_SUM, NULL), DISTC_EINVAL, "tensors[0]",
            "DISTC_TENSOR_MAX_BYTES");

    /* byte_offset: near 2^64, and one whose end wraps the address space. */
    t.shape = &sixteen;
    t.byte_offset = UINT64_MAX - 8;
    RK_ERR2(distc_allreduce(NULL, pg, &t, DISTC_SUM, NULL), DISTC_EINVAL, "byte_offset", "DISTC_TENSOR_MAX_BYTES");
    DLTensor high = {(void *)(UINTPTR_MAX - 32), {kDLCPU, 0}, 1, DT_F32, &sixteen, NULL, 16};
    RK_ERR2(distc_allreduce(NULL, pg, &high, DISTC_SUM, NULL), DISTC_EINVAL, "byte_offset", "past the end");

    /* Data that is not aligned to its elements (the kernels read them as their type). */
    t.byte_offset = 2;
    RK_ERR2(distc_allreduce(NULL, pg, &t, DISTC_SUM, NULL), DISTC_EINVAL, "not aligned", "4 bytes");
    t.byte_offset = 0;

    /* Every dimension's product overflows, but one is 0: an empty tensor, which is fine. */
    int64_t empty[3] = {INT64_C(1) << 62, INT64_C(1) << 62, 0};
    DLTensor e = {data, {kDLCPU, 0}, 3, DT_F32, empty, NULL, 0};
    RK_OK(distc_allreduce(NULL, pg, &e, DISTC_SUM, NULL));

    /* A device type far outside DLDeviceType (read as an int, not as the enum). */
    t = (DLTensor){data, {(DLDeviceType)999, 0}, 1, DT_F32, &sixteen, NULL, 0};
    RK_ERR2(distc_allreduce(NULL, pg, &t, DISTC_SUM, NULL), DISTC_EINVAL, "tensor", "999");
    t.device.device_type = kDLCPU;
    RK_ERR2(distc_allreduce(NULL, pg, &t, (distc_reduce_op)99, NULL), DISTC_EINVAL, "op 99", "distc_reduce_op");
    RK_ERR2(distc_allreduce(NULL, pg, &t, (distc_reduce_op)INT32_MIN, NULL), DISTC_EINVAL, "distc_reduce_op", "");

    /* Split sizes whose sum overflows int64. */
    int64_t splits[2] = {INT64_MAX, 2};
    if (size == 2) {
        RK_ERR2(distc_alltoall_single(NULL, pg, &t, &t, splits, NULL, NULL), DISTC_EINVAL, "output_splits",
                "more than the first dimension");
        RK_ERR2(distc_alltoall_single(NULL, pg, &t, &t, NULL, splits, NULL), DISTC_EINVAL, "input_splits",
                "more than the first dimension");
    }

    /* allgather_into_tensor: an input over the limit is refused before its product with the group size. */
    int64_t part = INT64_C(1) << 62, whole = 0;
    DLTensor in = {data, {kDLCPU, 0}, 1, DT_U8, &part, NULL, 0}, out = {data, {kDLCPU, 0}, 1, DT_U8, &whole, NULL, 0};
    RK_ERR2(distc_allgather_into_tensor(NULL, pg, &out, &in, NULL), DISTC_EINVAL, "input", "DISTC_TENSOR_MAX_BYTES");

    check_group_works(pg, rank, size);
}

static void test_huge_tensors(void **state) {
    (void)state;
    for (int size = 1; size <= 2; ++size)
        if (size <= dt_backend_max_size()) dt_run_ranks(size, rank_huge_tensors, NULL);
}

/* ------------------------------------------------------ byte collectives */

/* Rank `liar` passes SIZE_MAX bytes (with a small buffer): every rank must fail. */
static void rank_huge_byte_lengths(distc_pg *pg, int rank, int size, void *arg) {
    (void)arg;
    const int liar = size - 1;
    char small[8] = "abcdefg";
    size_t len = rank == liar ? SIZE_MAX : sizeof small;
    distc_buf outs[4] = {{0}};
    distc_buf one = {0};

    RK_ERR2(distc_all_gather_bytes(outs, pg, small, len, NULL), DISTC_EINVAL, "all_gather_bytes",
            "DISTC_STORE_MAX_VALUE_SIZE");
    RK_ERR2(distc_gather_bytes(outs, pg, small, len, 0, NULL), DISTC_EINVAL, "gather_bytes",
            "DISTC_STORE_MAX_VALUE_SIZE");
    RK_ERR2(distc_broadcast_bytes(&one, pg, small, len, liar, NULL), DISTC_EINVAL, "broadcast_bytes",
            "DISTC_STORE_MAX_VALUE_SIZE");
    const void *data[4] = {small, small, small, small};
    size_t lens[4] = {SIZE_MAX, 3, (size_t)1 << 31, 4};
    RK_ERR2(distc_scatter_bytes(&one, pg, data, lens, 0, NULL), DISTC_EINVAL, "scatter_bytes",
            "18446744073709551615 bytes for rank 0");

    /* The same calls with honest lengths still work, so every rank stayed in step. */
    if (RK_OK(distc_all_gather_bytes(outs, pg, small, (size_t)rank + 1, NULL)))
        for (int r = 0; r < size; ++r) {
            RK_EQ_INT(outs[r].size, r + 1);
            distc_buf_dispose(&outs[r]);
        }
    check_group_works(pg, rank, size);
}

static void test_huge_byte_lengths(void **state) {
    (void)state;
    for (int size = 1; size <= 3; ++size)
        if (size <= dt_backend_max_size()) dt_run_ranks(size, rank_huge_byte_lengths, NULL);
}

/* ------------------------------------------------------- bucket planning */

static void test_bucket_assignment_checks_tensors(void **state) {
    (void)state;
    float data[4] = {0};
    int64_t four = 4, shape2[2] = {2, 2}, bad_strides[2] = {1, 2}, huge = INT64_C(1) << 62;
    DLTensor good = {data, {kDLCPU, 0}, 1, DT_F32, &four, NULL, 0};
    const DLTensor *ts[2] = {&good, &good};
    uint64_t limit = 1024;
    int32_t bucket_of[2];
    size_t nb = 0;
    ASSERT_OK(distc_compute_bucket_assignment_by_size(bucket_of, &nb, ts, 2, &limit, 1, NULL));

    DLTensor t = good;
    ts[1] = &t;
    t.dtype = (DLDataType){77, 32, 1};
    ASSERT_ERR(distc_compute_bucket_assignment_by_size(bucket_of, &nb, ts, 2, &limit, 1, NULL), DISTC_EINVAL,
               "distc_compute_bucket_assignment_by_size");
    dt_assert_contains(distc_error_last(), "tensors[1]");
    dt_assert_contains(distc_error_last(), "dtype");
    t = good;
    t.data = NULL;
    ASSERT_ERR(distc_compute_bucket_assignment_by_size(bucket_of, &nb, ts, 2, &limit, 1, NULL), DISTC_EINVAL,
               "distc_compute_bucket_assignment_by_size");
    dt_assert_contains(distc_error_last(), "no data");
    t = good;
    t.ndim = 2;
    t.shape = shape2;
    t.strides = bad_strides;
    ASSERT_ERR(distc_compute_bucket_assignment_by_size(bucket_of, &nb, ts, 2, &limit, 1, NULL), DISTC_EINVAL,
               "distc_compute_bucket_assignment_by_size");
    dt_assert_contains(distc_error_last(), "not contiguous");
    t = good;
    t.shape = &huge;
    ASSERT_ERR(distc_compute_bucket_assignment_by_size(bucket_of, &nb, ts, 2, &limit, 1, NULL), DISTC_EINVAL,
               "distc_compute_bucket_assignment_by_size");
    dt_assert_contains(distc_error_last(), "DISTC_TENSOR_MAX_BYTES");
    t = good;
    t.device.device_type = (DLDeviceType)999;
    ASSERT_ERR(distc_compute_bucket_assignment_by_size(bucket_of, &nb, ts, 2, &limit, 1, NULL), DISTC_EINVAL,
               "distc_compute_bucket_assignment_by_size");
    dt_assert_contains(distc_error_last(), "999");
}

/* An explicit bucket assignment whose bucket numbers no gradients can fill
 * (INT32_MAX once overflowed the count of buckets and wrote out of bounds). */
static void rank_bucket_of(distc_pg *pg, int rank, int size, void *arg) {
    (void)arg;
    float a[2] = {0}, b[2] = {0};
    int64_t two = 2;
    DLTensor ta = {a, {kDLCPU, 0}, 1, DT_F32, &two, NULL, 0}, tb = ta;
    tb.data = b;
    DLTensor *grads[2] = {&ta, &tb};
    distc_reducer_options o = DISTC_REDUCER_OPTIONS_INIT;
    int32_t bad[][2] = {{INT32_MAX, 0}, {2, 0}, {0, 1000000}};
    distc_reducer *r = NULL;
    for (int k = 0; k < 3; ++k) {
        o.bucket_of = bad[k];
        RK_ERR(distc_reducer_new(&r, pg, grads, 2, &o), DISTC_EINVAL, "buckets 0..1 at most");
    }
    check_group_works(pg, rank, size);
}

static void test_bucket_of_out_of_range(void **state) {
    (void)state;
    dt_run_ranks(2, rank_bucket_of, NULL);
}

/* Counts of SIZE_MAX (a -1 passed as a size_t): refused as sizes too large,
 * not reported as a bug of distc's. */
static void test_count_of_size_max(void **state) {
    (void)state;
    distc_store *s = NULL;
    ASSERT_OK(distc_store_new_hash(&s));
    const char *k[1] = {"k"};
    int32_t found = 0;
    ASSERT_ERR(distc_store_check(&found, s, k, SIZE_MAX), DISTC_ENOMEM, "too large");
    ASSERT_ERR(distc_store_wait(s, k, SIZE_MAX, 10), DISTC_ENOMEM, "too large");
    distc_store_free(s);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bucket_of_out_of_range),
        cmocka_unit_test(test_count_of_size_max),
        cmocka_unit_test(test_huge_tensors),
        cmocka_unit_test(test_huge_byte_lengths),
        cmocka_unit_test(test_bucket_assignment_checks_tensors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

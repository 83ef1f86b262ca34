/*
 * Bad arguments to every function of distc/pg.h and distc/work.h: each gives
 * DISTC_EINVAL (DISTC_ENOTFOUND for an unknown backend) with a message naming
 * the function and the argument, sends nothing (the group works afterwards)
 * and hands out no work. Also the group queries and the options initializers.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pg_harness.h"
#include "test_util.h"

#define MAX_SIZE 4

/*
 * Calls `call` (which uses OUT as its distc_work **) twice: blocking (OUT is
 * NULL) and asynchronous (OUT is &w): both must fail with `code` and a message
 * holding `fn` and `needle`, and no handle may come out.
 */
#define BAD(code, fn, needle, call)                                              \
    do {                                                                         \
        if (skip_bad) break;                                                     \
        distc_work *w_ = NULL;                                                   \
        distc_work **OUT = NULL;                                                 \
        RK_ERR2(call, code, fn, needle);                                         \
        OUT = &w_;                                                               \
        RK_ERR2(call, code, fn, needle);                                         \
        RK_CHECKF(w_ == NULL, "%s handed out a work handle for a bad call", fn); \
        (void)OUT;                                                               \
    } while (0)
#define EINVAL_(fn, needle, call) BAD(DISTC_EINVAL, fn, needle, call)

/* Set in rank threads that leave the bad calls to rank 0. */
static __thread int skip_bad;

/* The same on the main thread (cmocka assertions). */
#define MAIN_BAD(code, fn, needle, call)                \
    do {                                                \
        distc_work *w_ = NULL;                          \
        distc_work **OUT = NULL;                        \
        ASSERT_ERR(call, code, fn);                     \
        dt_assert_contains(distc_error_last(), needle); \
        OUT = &w_;                                      \
        ASSERT_ERR(call, code, fn);                     \
        dt_assert_contains(distc_error_last(), needle); \
        assert_null(w_);                                \
        (void)OUT;                                      \
    } while (0)

static void fill_seq(DLTensor *t, int base) {
    for (int64_t i = 0; i < dt_numel(t); ++i) dt_set(t, i, base + (double)i);
}

/*
 * The group still works: an int32 allreduce SUM and a broadcast give exact
 * results, and the bad calls before took no sequence number (*ops counts the
 * collectives that ran on this group).
 */
static void check_group_works(distc_pg *pg, int rank, int size, int *ops) {
    DLTensor *t = dt_tensor_1d(DT_I32, 5);
    fill_seq(t, rank);
    distc_work *w = NULL;
    if (RK_OK(distc_allreduce(&w, pg, t, DISTC_SUM, NULL))) {
        if (RK_OK(distc_work_wait(w, -1)))
            for (int i = 0; i < 5; ++i)
                if (!RK_EQ_DBL(dt_get(t, i), (double)size * i + size * (size - 1) / 2.0)) break;
        uint64_t seq = 0;
        RK_OK(distc_work_seq(&seq, w));
        RK_CHECKF(seq == (uint64_t)*ops + 1, "the allreduce after bad calls has seq %llu, expected %d",
                  (unsigned long long)seq, *ops + 1);
        distc_work_free(w);
    }
    *ops += 3;
    fill_seq(t, 10 * rank);
    if (RK_OK(distc_broadcast(NULL, pg, t, size - 1, NULL)))
        for (int i = 0; i < 5; ++i)
            if (!RK_EQ_DBL(dt_get(t, i), 10.0 * (size - 1) + i)) break;
    RK_OK(distc_barrier(NULL, pg, NULL));
    dt_tensor_free(t);
}

static DLTensor **new_list(DLDataType dt, int n, int64_t len) {
    DLTensor **l = calloc((size_t)n, sizeof *l);
    for (int i = 0; i < n; ++i) l[i] = dt_tensor_1d(dt, len);
    return l;
}

static void free_list(DLTensor **l, int n) {
    for (int i = 0; i < n; ++i) dt_tensor_free(l[i]);
    free(l);
}

/* ------------------------------------------------- tensor checks (allreduce) */

static void bad_tensors(distc_pg *pg) {
    int64_t shape5 = 5, neg = -2;
    float data[8] = {0};
    const DLTensor good = {data, {kDLCPU, 0}, 1, DT_F32, &shape5, NULL, 0};
    DLTensor t;

    EINVAL_("distc_allreduce", "tensor", distc_allreduce(OUT, pg, NULL, DISTC_SUM, NULL));
    t = good;
    t.device.device_type = kDLCUDA; /* 2 */
    EINVAL_("distc_allreduce", "tensor", distc_allreduce(OUT, pg, &t, DISTC_SUM, NULL));
    EINVAL_("distc_allreduce", "CPU", distc_allreduce(OUT, pg, &t, DISTC_SUM, NULL));
    t = good;
    t.shape = NULL;
    EINVAL_("distc_allreduce", "tensor", distc_allreduce(OUT, pg, &t, DISTC_SUM, NULL));
    t = good;
    t.shape = &neg;
    EINVAL_("distc_allreduce", "tensor", distc_allreduce(OUT, pg, &t, DISTC_SUM, NULL));
    t = good;
    t.ndim = -1;
    EINVAL_("distc_allreduce", "tensor", distc_allreduce(OUT, pg, &t, DISTC_SUM, NULL));
    t = good;
    t.data = NULL;
    EINVAL_("distc_allreduce", "tensor", distc_allreduce(OUT, pg, &t, DISTC_SUM, NULL));
    t = good;
    t.dtype.lanes = 4; /* a vector dtype */
    EINVAL_("distc_allreduce", "tensor", distc_allreduce(OUT, pg, &t, DISTC_SUM, NULL));
    t = good;
    t.dtype.bits = 8; /* float8: not supported */
    EINVAL_("distc_allreduce", "dtype", distc_allreduce(OUT, pg, &t, DISTC_SUM, NULL));
    t = good;
    t.dtype = (DLDataType){kDLOpaqueHandle, 64, 1};
    EINVAL_("distc_allreduce", "dtype", distc_allreduce(OUT, pg, &t, DISTC_SUM, NULL));
    t = good;
    t.dtype = (DLDataType){kDLUInt, 32, 1}; /* uint32: not a torch dtype here */
    EINVAL_("distc_allreduce", "dtype", distc_allreduce(OUT, pg, &t, DISTC_SUM, NULL));
    t = good;
    t.dtype = (DLDataType){DT_KDLBOOL, 1, 1}; /* bool must be 8 bits */
    EINVAL_("distc_allreduce", "dtype", distc_allreduce(OUT, pg, &t, DISTC_SUM, NULL));
    t = good;
    int64_t shape2[2] = {2, 4}, strides_t[2] = {1, 2};
    t.ndim = 2;
    t.shape = shape2;
    t.strides = strides_t;
    EINVAL_("distc_allreduce", "not contiguous", distc_allreduce(OUT, pg, &t, DISTC_SUM, NULL));

    /* Reduce ops and options. */
    t = good;
    EINVAL_("distc_allreduce", "op 42", distc_allreduce(OUT, pg, &t, (distc_reduce_op)42, NULL));
    EINVAL_("distc_allreduce", "op -1", distc_allreduce(OUT, pg, &t, (distc_reduce_op)-1, NULL));
    EINVAL_("distc_allreduce", "op 9", distc_allreduce(OUT, pg, &t, (distc_reduce_op)9, NULL));
    distc_op_options oo = DISTC_OP_OPTIONS_INIT;
    oo.version = 99;
    EINVAL_("distc_allreduce", "version", distc_allreduce(OUT, pg, &t, DISTC_SUM, &oo));
    oo.version = 0;
    EINVAL_("distc_allreduce", "version", distc_allreduce(OUT, pg, &t, DISTC_SUM, &oo));
    oo = (distc_op_options)DISTC_OP_OPTIONS_INIT;
    oo.timeout_ms = -5;
    EINVAL_("distc_allreduce", "timeout_ms", distc_allreduce(OUT, pg, &t, DISTC_SUM, &oo));
    oo.timeout_ms = -1000000;
    EINVAL_("distc_allreduce", "timeout_ms", distc_allreduce(OUT, pg, &t, DISTC_SUM, &oo));
    /* Unsupported combinations name the op and the dtype. */
    t.dtype = DT_F32;
    EINVAL_("distc_allreduce", "BAND", distc_allreduce(OUT, pg, &t, DISTC_BAND, NULL));
    EINVAL_("distc_allreduce", "float32", distc_allreduce(OUT, pg, &t, DISTC_BXOR, NULL));
    t.dtype = DT_C64;
    EINVAL_("distc_allreduce", "MAX", distc_allreduce(OUT, pg, &t, DISTC_MAX, NULL));
    t.dtype = DT_BOOL;
    EINVAL_("distc_allreduce", "AVG", distc_allreduce(OUT, pg, &t, DISTC_AVG, NULL));
    EINVAL_("distc_allreduce", "bool", distc_allreduce(OUT, pg, &t, DISTC_PREMUL_SUM, NULL));
}

/* ------------------------------------------------- every collective, size N */

/* arg != NULL: only rank 0 makes the bad calls (a stray message would then desync the group). */
static void rank_bad_collective_args(distc_pg *pg, int rank, int size, void *arg) {
    skip_bad = arg != NULL && rank != 0;
    int ops = 0;
    char root_msg[64], root_neg_msg[64];
    snprintf(root_msg, sizeof root_msg, "root 7 is outside 0..%d", size - 1);
    snprintf(root_neg_msg, sizeof root_neg_msg, "root -1 is outside 0..%d", size - 1);
    const int64_t n = 5;
    DLTensor *t = dt_tensor_1d(DT_F32, n), *ti = dt_tensor_1d(DT_I32, n);
    DLTensor *big = dt_tensor_1d(DT_F32, n * size), *wrong = dt_tensor_1d(DT_F32, n * size + 1);
    DLTensor *bigi = dt_tensor_1d(DT_I32, n * size);
    DLTensor **list = new_list(DT_F32, size, n), **list2 = new_list(DT_F32, size, n);
    DLTensor **mixed = new_list(DT_F32, size, n), **uneven = new_list(DT_F32, size, n);
    DLTensor **holed = new_list(DT_F32, size, n);
    int last = size - 1;
    dt_tensor_free(mixed[last]);
    mixed[last] = dt_tensor_1d(DT_I32, n);
    dt_tensor_free(uneven[last]);
    uneven[last] = dt_tensor_1d(DT_F32, n + 2);
    dt_tensor_free(holed[last]);
    holed[last] = NULL;
    char holed_name[32];
    const DLTensor *const *cl = (const DLTensor *const *)list;

    bad_tensors(pg);
    check_group_works(pg, rank, size, &ops);

    /* allreduce_coalesced */
    EINVAL_("distc_allreduce_coalesced", "tensors", distc_allreduce_coalesced(OUT, pg, NULL, 2, DISTC_SUM, NULL));
    EINVAL_("distc_allreduce_coalesced", "n", distc_allreduce_coalesced(OUT, pg, list, 0, DISTC_SUM, NULL));
    snprintf(holed_name, sizeof holed_name, "tensors[%d]", last);
    if (size > 1) {
        EINVAL_("distc_allreduce_coalesced", holed_name,
                distc_allreduce_coalesced(OUT, pg, holed, (size_t)size, DISTC_SUM, NULL));
        EINVAL_("distc_allreduce_coalesced", holed_name,
                distc_allreduce_coalesced(OUT, pg, mixed, (size_t)size, DISTC_SUM, NULL));
    }
    EINVAL_("distc_allreduce_coalesced", "op 42",
            distc_allreduce_coalesced(OUT, pg, list, (size_t)size, (distc_reduce_op)42, NULL));
    EINVAL_("distc_allreduce_coalesced", "BOR",
            distc_allreduce_coalesced(OUT, pg, list, (size_t)size, DISTC_BOR, NULL));

    /* broadcast */
    EINVAL_("distc_broadcast", "tensor", distc_broadcast(OUT, pg, NULL, 0, NULL));
    EINVAL_("distc_broadcast", root_msg, distc_broadcast(OUT, pg, t, 7, NULL));
    EINVAL_("distc_broadcast", root_neg_msg, distc_broadcast(OUT, pg, t, -1, NULL));
    EINVAL_("distc_broadcast", "root", distc_broadcast(OUT, pg, t, size, NULL));
    distc_op_options bad_version = DISTC_OP_OPTIONS_INIT, bad_timeout = DISTC_OP_OPTIONS_INIT;
    bad_version.version = DISTC_OP_OPTIONS_VERSION + 1;
    bad_timeout.timeout_ms = -5;
    EINVAL_("distc_broadcast", "version", distc_broadcast(OUT, pg, t, 0, &bad_version));
    EINVAL_("distc_broadcast", "timeout_ms", distc_broadcast(OUT, pg, t, 0, &bad_timeout));

    /* reduce */
    EINVAL_("distc_reduce", "tensor", distc_reduce(OUT, pg, NULL, 0, DISTC_SUM, NULL));
    EINVAL_("distc_reduce", root_msg, distc_reduce(OUT, pg, t, 7, DISTC_SUM, NULL));
    EINVAL_("distc_reduce", root_neg_msg, distc_reduce(OUT, pg, t, -1, DISTC_SUM, NULL));
    EINVAL_("distc_reduce", "op 42", distc_reduce(OUT, pg, t, 0, (distc_reduce_op)42, NULL));
    EINVAL_("distc_reduce", "BXOR", distc_reduce(OUT, pg, t, 0, DISTC_BXOR, NULL));
    EINVAL_("distc_reduce", "timeout_ms", distc_reduce(OUT, pg, t, 0, DISTC_SUM, &bad_timeout));
    check_group_works(pg, rank, size, &ops);

    /* allgather */
    snprintf(holed_name, sizeof holed_name, "outputs[%d]", last);
    EINVAL_("distc_allgather", "outputs", distc_allgather(OUT, pg, NULL, t, NULL));
    EINVAL_("distc_allgather", "input", distc_allgather(OUT, pg, list, NULL, NULL));
    EINVAL_("distc_allgather", holed_name, distc_allgather(OUT, pg, holed, t, NULL));
    EINVAL_("distc_allgather", holed_name, distc_allgather(OUT, pg, mixed, t, NULL));   /* dtype mismatch */
    EINVAL_("distc_allgather", holed_name, distc_allgather(OUT, pg, uneven, t, NULL));  /* size mismatch */
    EINVAL_("distc_allgather", "outputs[0]", distc_allgather(OUT, pg, list, ti, NULL)); /* int32 input */
    EINVAL_("distc_allgather", "version", distc_allgather(OUT, pg, list, t, &bad_version));

    /* allgather_into_tensor */
    EINVAL_("distc_allgather_into_tensor", "output", distc_allgather_into_tensor(OUT, pg, NULL, t, NULL));
    EINVAL_("distc_allgather_into_tensor", "input", distc_allgather_into_tensor(OUT, pg, big, NULL, NULL));
    EINVAL_("distc_allgather_into_tensor", "output", distc_allgather_into_tensor(OUT, pg, wrong, t, NULL));
    if (size > 1) EINVAL_("distc_allgather_into_tensor", "output", distc_allgather_into_tensor(OUT, pg, t, big, NULL));
    EINVAL_("distc_allgather_into_tensor", "int32", distc_allgather_into_tensor(OUT, pg, bigi, t, NULL));
    EINVAL_("distc_allgather_into_tensor", "timeout_ms", distc_allgather_into_tensor(OUT, pg, big, t, &bad_timeout));
    check_group_works(pg, rank, size, &ops);

    /* gather and scatter: checks every rank makes alike (the root-only ones: rank_bad_root_lists) */
    EINVAL_("distc_gather", root_msg, distc_gather(OUT, pg, list, t, 7, NULL));
    EINVAL_("distc_gather", root_neg_msg, distc_gather(OUT, pg, list, t, -1, NULL));
    EINVAL_("distc_gather", "input", distc_gather(OUT, pg, list, NULL, 0, NULL));
    EINVAL_("distc_gather", "version", distc_gather(OUT, pg, list, t, 0, &bad_version));
    EINVAL_("distc_scatter", root_msg, distc_scatter(OUT, pg, t, cl, 7, NULL));
    EINVAL_("distc_scatter", root_neg_msg, distc_scatter(OUT, pg, t, cl, -1, NULL));
    EINVAL_("distc_scatter", "output", distc_scatter(OUT, pg, NULL, cl, 0, NULL));
    EINVAL_("distc_scatter", "timeout_ms", distc_scatter(OUT, pg, t, cl, 0, &bad_timeout));
    check_group_works(pg, rank, size, &ops);

    /* reduce_scatter */
    snprintf(holed_name, sizeof holed_name, "inputs[%d]", last);
    EINVAL_("distc_reduce_scatter", "output", distc_reduce_scatter(OUT, pg, NULL, cl, DISTC_SUM, NULL));
    EINVAL_("distc_reduce_scatter", "inputs", distc_reduce_scatter(OUT, pg, t, NULL, DISTC_SUM, NULL));
    EINVAL_("distc_reduce_scatter", holed_name,
            distc_reduce_scatter(OUT, pg, t, (const DLTensor *const *)holed, DISTC_SUM, NULL));
    EINVAL_("distc_reduce_scatter", holed_name,
            distc_reduce_scatter(OUT, pg, t, (const DLTensor *const *)mixed, DISTC_SUM, NULL));
    EINVAL_("distc_reduce_scatter", holed_name,
            distc_reduce_scatter(OUT, pg, t, (const DLTensor *const *)uneven, DISTC_SUM, NULL));
    EINVAL_("distc_reduce_scatter", "op 42", distc_reduce_scatter(OUT, pg, t, cl, (distc_reduce_op)42, NULL));
    EINVAL_("distc_reduce_scatter", "BAND", distc_reduce_scatter(OUT, pg, t, cl, DISTC_BAND, NULL));
    EINVAL_("distc_reduce_scatter", "version", distc_reduce_scatter(OUT, pg, t, cl, DISTC_SUM, &bad_version));

    /* reduce_scatter_tensor */
    EINVAL_("distc_reduce_scatter_tensor", "output", distc_reduce_scatter_tensor(OUT, pg, NULL, big, DISTC_SUM, NULL));
    EINVAL_("distc_reduce_scatter_tensor", "input", distc_reduce_scatter_tensor(OUT, pg, t, NULL, DISTC_SUM, NULL));
    EINVAL_("distc_reduce_scatter_tensor", "input", distc_reduce_scatter_tensor(OUT, pg, t, wrong, DISTC_SUM, NULL));
    if (size > 1)
        EINVAL_("distc_reduce_scatter_tensor", "input", distc_reduce_scatter_tensor(OUT, pg, big, t, DISTC_SUM, NULL));
    EINVAL_("distc_reduce_scatter_tensor", "int32", distc_reduce_scatter_tensor(OUT, pg, t, bigi, DISTC_SUM, NULL));
    EINVAL_("distc_reduce_scatter_tensor", "op 42",
            distc_reduce_scatter_tensor(OUT, pg, t, big, (distc_reduce_op)42, NULL));
    {
        DLTensor *co = dt_tensor_1d(DT_C64, n), *ci = dt_tensor_1d(DT_C64, n * size);
        EINVAL_("distc_reduce_scatter_tensor", "MIN", distc_reduce_scatter_tensor(OUT, pg, co, ci, DISTC_MIN, NULL));
        dt_tensor_free(co);
        dt_tensor_free(ci);
    }
    check_group_works(pg, rank, size, &ops);

    /* alltoall */
    EINVAL_("distc_alltoall", "inputs", distc_alltoall(OUT, pg, list2, NULL, NULL));
    EINVAL_("distc_alltoall", "outputs", distc_alltoall(OUT, pg, NULL, cl, NULL));
    snprintf(holed_name, sizeof holed_name, "inputs[%d]", last);
    EINVAL_("distc_alltoall", holed_name, distc_alltoall(OUT, pg, list2, (const DLTensor *const *)holed, NULL));
    snprintf(holed_name, sizeof holed_name, "outputs[%d]", last);
    EINVAL_("distc_alltoall", holed_name, distc_alltoall(OUT, pg, holed, cl, NULL));
    if (size > 1) {
        snprintf(holed_name, sizeof holed_name, "inputs[%d]", last);
        EINVAL_("distc_alltoall", holed_name, distc_alltoall(OUT, pg, list2, (const DLTensor *const *)mixed, NULL));
    }
    snprintf(holed_name, sizeof holed_name, "outputs[%d]", last);
    EINVAL_("distc_alltoall", holed_name, distc_alltoall(OUT, pg, mixed, cl, NULL));
    /* This rank's own part differs in size between input and output. */
    {
        DLTensor **own = new_list(DT_F32, size, n);
        dt_tensor_free(own[rank]);
        own[rank] = dt_tensor_1d(DT_F32, n + 1);
        char own_name[32];
        snprintf(own_name, sizeof own_name, "[%d]", rank);
        EINVAL_("distc_alltoall", own_name, distc_alltoall(OUT, pg, own, cl, NULL));
        free_list(own, size);
    }
    EINVAL_("distc_alltoall", "timeout_ms", distc_alltoall(OUT, pg, list2, cl, &bad_timeout));

    /* alltoall_single */
    {
        const int64_t rows = 2 * size;
        DLTensor *in = dt_tensor_1d(DT_F32, rows), *out = dt_tensor_1d(DT_F32, rows);
        DLTensor *outi = dt_tensor_1d(DT_I32, rows), *odd = dt_tensor_1d(DT_F32, rows + 1);
        DLTensor *in2 = dt_tensor_2d(DT_F32, rows, 3), *out2 = dt_tensor_2d(DT_F32, rows, 2);
        int64_t even[MAX_SIZE], short_[MAX_SIZE], negative[MAX_SIZE];
        for (int j = 0; j < size; ++j) {
            even[j] = 2;
            short_[j] = j == last ? 1 : 2;            /* adds up to rows - 1 */
            negative[j] = j == 0 ? 3 * size - 1 : -1; /* adds up to rows, one part negative */
        }
        EINVAL_("distc_alltoall_single", "input", distc_alltoall_single(OUT, pg, out, NULL, NULL, NULL, NULL));
        EINVAL_("distc_alltoall_single", "output", distc_alltoall_single(OUT, pg, NULL, in, NULL, NULL, NULL));
        EINVAL_("distc_alltoall_single", "input_splits", distc_alltoall_single(OUT, pg, out, in, even, short_, NULL));
        EINVAL_("distc_alltoall_single", "output_splits", distc_alltoall_single(OUT, pg, out, in, short_, even, NULL));
        if (size > 1)
            EINVAL_("distc_alltoall_single", "negative", distc_alltoall_single(OUT, pg, out, in, even, negative, NULL));
        EINVAL_("distc_alltoall_single", "int32", distc_alltoall_single(OUT, pg, outi, in, NULL, NULL, NULL));
        EINVAL_("distc_alltoall_single", "rows", distc_alltoall_single(OUT, pg, out2, in2, NULL, NULL, NULL));
        if (size > 1)
            EINVAL_("distc_alltoall_single", "divide", distc_alltoall_single(OUT, pg, odd, odd, NULL, NULL, NULL));
        EINVAL_("distc_alltoall_single", "version", distc_alltoall_single(OUT, pg, out, in, NULL, NULL, &bad_version));
        dt_tensor_free(in);
        dt_tensor_free(out);
        dt_tensor_free(outi);
        dt_tensor_free(odd);
        dt_tensor_free(in2);
        dt_tensor_free(out2);
    }

    /* barrier */
    EINVAL_("distc_barrier", "version", distc_barrier(OUT, pg, &bad_version));
    EINVAL_("distc_barrier", "timeout_ms", distc_barrier(OUT, pg, &bad_timeout));
    check_group_works(pg, rank, size, &ops);

    /* send and recv: checked locally, so each rank on its own */
    char dst_msg[64], src_msg[64];
    snprintf(dst_msg, sizeof dst_msg, "dst 7 is outside 0..%d", size - 1);
    snprintf(src_msg, sizeof src_msg, "src 7 is outside 0..%d", size - 1);
    const int peer = (rank + 1) % size;
    EINVAL_("distc_send", "tensor", distc_send(OUT, pg, NULL, peer, 0, NULL));
    EINVAL_("distc_send", dst_msg, distc_send(OUT, pg, t, 7, 0, NULL));
    EINVAL_("distc_send", "dst -1", distc_send(OUT, pg, t, -1, 0, NULL));
    EINVAL_("distc_send", "dst", distc_send(OUT, pg, t, rank, 0, NULL)); /* itself */
    if (size > 1) EINVAL_("distc_send", "tag", distc_send(OUT, pg, t, peer, -1, NULL));
    EINVAL_("distc_send", "version", distc_send(OUT, pg, t, peer, 0, &bad_version));
    EINVAL_("distc_recv", "tensor", distc_recv(OUT, pg, NULL, peer, 0, NULL));
    EINVAL_("distc_recv", src_msg, distc_recv(OUT, pg, t, 7, 0, NULL));
    EINVAL_("distc_recv", "src -2", distc_recv(OUT, pg, t, -2, 0, NULL));
    EINVAL_("distc_recv", "src", distc_recv(OUT, pg, t, rank, 0, NULL)); /* itself */
    if (size > 1) EINVAL_("distc_recv", "tag", distc_recv(OUT, pg, t, peer, -3, NULL));
    EINVAL_("distc_recv", "tag", distc_recv(OUT, pg, t, DISTC_ANY_SOURCE, -3, NULL));
    EINVAL_("distc_recv", "timeout_ms", distc_recv(OUT, pg, t, peer, 0, &bad_timeout));
    {
        DLTensor cuda = *t;
        cuda.device.device_type = kDLCUDA;
        EINVAL_("distc_send", "CPU", distc_send(OUT, pg, &cuda, peer, 0, NULL));
        EINVAL_("distc_recv", "CPU", distc_recv(OUT, pg, &cuda, peer, 0, NULL));
    }
    check_group_works(pg, rank, size, &ops);

    dt_tensor_free(t);
    dt_tensor_free(ti);
    dt_tensor_free(big);
    dt_tensor_free(wrong);
    dt_tensor_free(bigi);
    free_list(list, size);
    free_list(list2, size);
    free_list(mixed, size);
    free_list(uneven, size);
    free_list(holed, size);
}

static void test_bad_collective_args(void **state) {
    (void)state;
    static int only_rank0 = 1;
    dt_run_ranks(4, rank_bad_collective_args, NULL);
    dt_run_ranks(4, rank_bad_collective_args, &only_rank0);
    dt_run_ranks(3, rank_bad_collective_args, &only_rank0);
    dt_run_ranks(2, rank_bad_collective_args, NULL);
    dt_run_ranks(1, rank_bad_collective_args, NULL);
}

/* Lists only the root reads: checked on a group of one (its only rank is the root). */
static void rank_bad_root_lists(distc_pg *pg, int rank, int size, void *arg) {
    (void)arg;
    int ops = 0;
    DLTensor *t = dt_tensor_1d(DT_F32, 5), *ti = dt_tensor_1d(DT_I32, 5), *t6 = dt_tensor_1d(DT_F32, 6);
    DLTensor *holed[1] = {NULL};
    const DLTensor *choled[1] = {NULL};
    const DLTensor *cti[1] = {ti}, *ct6[1] = {t6};
    EINVAL_("distc_gather", "outputs", distc_gather(OUT, pg, NULL, t, 0, NULL));
    EINVAL_("distc_gather", "outputs[0]", distc_gather(OUT, pg, holed, t, 0, NULL));
    EINVAL_("distc_gather", "outputs[0]", distc_gather(OUT, pg, &ti, t, 0, NULL));
    EINVAL_("distc_gather", "outputs[0]", distc_gather(OUT, pg, &t6, t, 0, NULL));
    EINVAL_("distc_scatter", "inputs", distc_scatter(OUT, pg, t, NULL, 0, NULL));
    EINVAL_("distc_scatter", "inputs[0]", distc_scatter(OUT, pg, t, choled, 0, NULL));
    EINVAL_("distc_scatter", "inputs[0]", distc_scatter(OUT, pg, t, cti, 0, NULL));
    EINVAL_("distc_scatter", "inputs[0]", distc_scatter(OUT, pg, t, ct6, 0, NULL));
    check_group_works(pg, rank, size, &ops);
    dt_tensor_free(t);
    dt_tensor_free(ti);
    dt_tensor_free(t6);
}

static void test_bad_root_lists(void **state) {
    (void)state;
    dt_run_ranks(1, rank_bad_root_lists, NULL);
}

/* ------------------------------------------------------------- group queries */

static void rank_queries(distc_pg *pg, int rank, int size, void *arg) {
    (void)arg;
    int32_t r = -1, s = -1;
    const char *be = NULL, *name = NULL;
    int64_t tmo = 0;
    if (RK_OK(distc_pg_rank(&r, pg))) RK_EQ_INT(r, rank);
    if (RK_OK(distc_pg_size(&s, pg))) RK_EQ_INT(s, size);
    if (RK_OK(distc_pg_backend(&be, pg))) RK_EQ_STR(be, dt_backend());
    if (RK_OK(distc_pg_name(&name, pg))) RK_EQ_STR(name, dt_rank_group());
    if (RK_OK(distc_pg_timeout(&tmo, pg))) RK_EQ_INT(tmo, DT_PG_TIMEOUT_MS);
    RK_ERR2(distc_pg_rank(NULL, pg), DISTC_EINVAL, "distc_pg_rank", "out");
    RK_ERR2(distc_pg_size(NULL, pg), DISTC_EINVAL, "distc_pg_size", "out");
    RK_ERR2(distc_pg_backend(NULL, pg), DISTC_EINVAL, "distc_pg_backend", "out");
    RK_ERR2(distc_pg_name(NULL, pg), DISTC_EINVAL, "distc_pg_name", "out");
    RK_ERR2(distc_pg_timeout(NULL, pg), DISTC_EINVAL, "distc_pg_timeout", "out");
    const char *tr = NULL;
    if (RK_OK(distc_pg_transport(&tr, pg, rank))) RK_EQ_STR(tr, "self");
    if (size > 1 && RK_OK(distc_pg_transport(&tr, pg, (rank + 1) % size))) {
        /* The ranks share this host: shared memory on the built-in backend, unless turned off. */
        const char *off = getenv("DISTC_SHM"), *mesh = getenv("DISTC_MESH_BYTES");
        const char *want = strcmp(dt_backend(), "gloo") != 0 ? dt_backend()
                           : mesh && strcmp(mesh, "0") == 0  ? "gloo"
                           : off && strcmp(off, "0") == 0    ? "tcp"
                                                             : "shm";
        if (!mesh || strcmp(mesh, "0") == 0) RK_EQ_STR(tr, want);
    }
    RK_ERR2(distc_pg_transport(NULL, pg, 0), DISTC_EINVAL, "distc_pg_transport", "out");
    RK_ERR2(distc_pg_transport(&tr, pg, -1), DISTC_EINVAL, "distc_pg_transport", "peer -1 is not a rank");
    RK_ERR2(distc_pg_transport(&tr, pg, size), DISTC_EINVAL, "distc_pg_transport", "not a rank of the group");
    RK_ERR2(distc_pg_transport(&tr, NULL, 0), DISTC_EINVAL, "distc_pg_transport", "pg");
}

static void test_queries(void **state) {
    (void)state;
    for (int size = 1; size <= MAX_SIZE; ++size) dt_run_ranks(size, rank_queries, NULL);
}

static void test_queries_null_pg(void **state) {
    (void)state;
    int32_t i32;
    const char *str;
    int64_t i64;
    ASSERT_ERR(distc_pg_rank(&i32, NULL), DISTC_EINVAL, "distc_pg_rank");
    dt_assert_contains(distc_error_last(), "pg");
    ASSERT_ERR(distc_pg_size(&i32, NULL), DISTC_EINVAL, "distc_pg_size");
    ASSERT_ERR(distc_pg_backend(&str, NULL), DISTC_EINVAL, "distc_pg_backend");
    ASSERT_ERR(distc_pg_name(&str, NULL), DISTC_EINVAL, "distc_pg_name");
    ASSERT_ERR(distc_pg_timeout(&i64, NULL), DISTC_EINVAL, "distc_pg_timeout");
    dt_assert_contains(distc_error_last(), "pg is NULL");
    ASSERT_ERR(distc_pg_abort(NULL), DISTC_EINVAL, "distc_pg_abort");
    dt_assert_contains(distc_error_last(), "pg");
    /* No-ops. */
    distc_pg_free(NULL);
    distc_work_free(NULL);
}

/* Defaults: NULL options give "gloo", "default_pg" and 30 minutes. */
static void test_defaults(void **state) {
    (void)state;
    distc_store *st = NULL;
    ASSERT_OK(distc_store_new_hash(&st));
    distc_pg *pg = NULL;
    ASSERT_OK(distc_pg_new(&pg, st, 0, 1, NULL));
    int32_t r = -1, s = -1;
    const char *be = NULL, *name = NULL;
    int64_t tmo = 0;
    ASSERT_OK(distc_pg_rank(&r, pg));
    ASSERT_OK(distc_pg_size(&s, pg));
    ASSERT_OK(distc_pg_backend(&be, pg));
    ASSERT_OK(distc_pg_name(&name, pg));
    ASSERT_OK(distc_pg_timeout(&tmo, pg));
    assert_int_equal(r, 0);
    assert_int_equal(s, 1);
    assert_string_equal(be, "gloo");
    assert_string_equal(name, "default_pg");
    assert_int_equal(tmo, DISTC_PG_DEFAULT_TIMEOUT_MS);
    assert_int_equal(DISTC_PG_DEFAULT_TIMEOUT_MS, 1800000);
    distc_pg_free(pg);

    /* Explicit options, backend named. */
    distc_pg_options o = DISTC_PG_OPTIONS_INIT;
    o.backend = "gloo";
    o.timeout_ms = 1234;
    o.group_name = "my_group";
    ASSERT_OK(distc_pg_new(&pg, st, 0, 1, &o));
    ASSERT_OK(distc_pg_name(&name, pg));
    assert_string_equal(name, "my_group");
    ASSERT_OK(distc_pg_timeout(&tmo, pg));
    assert_int_equal(tmo, 1234);
    ASSERT_OK(distc_pg_backend(&be, pg));
    assert_string_equal(be, "gloo");
    distc_pg_free(pg);
    distc_store_free(st);
}

static void test_options_init(void **state) {
    (void)state;
    distc_pg_options po;
    memset(&po, 0x5a, sizeof po);
    ASSERT_OK(distc_pg_options_init(&po, DISTC_PG_OPTIONS_VERSION));
    assert_int_equal(po.version, DISTC_PG_OPTIONS_VERSION);
    assert_null(po.backend);
    assert_int_equal(po.timeout_ms, -1);
    assert_null(po.group_name);
    assert_int_equal(po.device, -1);
    /* A version-1 caller's struct ends before `device`: nothing past it is written. */
    memset(&po, 0x5a, sizeof po);
    ASSERT_OK(distc_pg_options_init(&po, 1));
    assert_int_equal(po.version, 1);
    assert_int_equal(po.timeout_ms, -1);
    assert_int_equal(po.device, 0x5a5a5a5a);
    ASSERT_ERR(distc_pg_options_init(&po, DISTC_PG_OPTIONS_VERSION + 1), DISTC_EINVAL, "distc_pg_options_init");
    dt_assert_contains(distc_error_last(), "version");
    ASSERT_ERR(distc_pg_options_init(NULL, DISTC_PG_OPTIONS_VERSION), DISTC_EINVAL, "opts");

    distc_op_options oo;
    memset(&oo, 0x5a, sizeof oo);
    ASSERT_OK(distc_op_options_init(&oo, DISTC_OP_OPTIONS_VERSION));
    assert_int_equal(oo.version, DISTC_OP_OPTIONS_VERSION);
    assert_int_equal(oo.timeout_ms, -1);
    assert_true(oo.premul_factor == 1.0);
    assert_null(oo.stream);
    memset(&oo, 0x5a, sizeof oo);
    ASSERT_OK(distc_op_options_init(&oo, 1));
    assert_int_equal(oo.version, 1);
    assert_true(oo.premul_factor == 1.0);
    assert_true(oo.stream == (void *)(uintptr_t)0x5a5a5a5a5a5a5a5aull);
    ASSERT_ERR(distc_op_options_init(&oo, 0), DISTC_EINVAL, "distc_op_options_init");
    dt_assert_contains(distc_error_last(), "version");
    ASSERT_ERR(distc_op_options_init(NULL, DISTC_OP_OPTIONS_VERSION), DISTC_EINVAL, "opts");
}

/* ------------------------------------------------------------- distc_pg_new */

static void test_pg_new_bad_args(void **state) {
    (void)state;
    distc_store *st = NULL;
    ASSERT_OK(distc_store_new_hash(&st));
    distc_pg *pg = NULL;
    ASSERT_ERR(distc_pg_new(NULL, st, 0, 1, NULL), DISTC_EINVAL, "distc_pg_new");
    dt_assert_contains(distc_error_last(), "out");
    ASSERT_ERR(distc_pg_new(&pg, NULL, 0, 1, NULL), DISTC_EINVAL, "store");
    assert_null(pg);
    ASSERT_ERR(distc_pg_new(&pg, st, 4, 4, NULL), DISTC_EINVAL, "rank 4 is outside 0..3");
    dt_assert_contains(distc_error_last(), "distc_pg_new");
    ASSERT_ERR(distc_pg_new(&pg, st, 7, 4, NULL), DISTC_EINVAL, "rank 7 is outside 0..3");
    ASSERT_ERR(distc_pg_new(&pg, st, -1, 4, NULL), DISTC_EINVAL, "rank -1");
    ASSERT_ERR(distc_pg_new(&pg, st, 0, 0, NULL), DISTC_EINVAL, "size");
    ASSERT_ERR(distc_pg_new(&pg, st, 0, -3, NULL), DISTC_EINVAL, "size");
    assert_null(pg);

    distc_pg_options o = DISTC_PG_OPTIONS_INIT;
    o.backend = "nope";
    ASSERT_ERR(distc_pg_new(&pg, st, 0, 1, &o), DISTC_ENOTFOUND, "nope");
    dt_assert_contains(distc_error_last(), "distc_pg_new");
    o = (distc_pg_options)DISTC_PG_OPTIONS_INIT;
    o.version = 9;
    ASSERT_ERR(distc_pg_new(&pg, st, 0, 1, &o), DISTC_EINVAL, "version");
    o = (distc_pg_options)DISTC_PG_OPTIONS_INIT;
    o.timeout_ms = -5;
    ASSERT_ERR(distc_pg_new(&pg, st, 0, 1, &o), DISTC_EINVAL, "timeout_ms");
    o = (distc_pg_options)DISTC_PG_OPTIONS_INIT;
    o.group_name = "";
    ASSERT_ERR(distc_pg_new(&pg, st, 0, 1, &o), DISTC_EINVAL, "group_name");
    assert_null(pg);

    /* The failures left the store usable: a group of one meets in it. */
    ASSERT_OK(distc_pg_new(&pg, st, 0, 1, NULL));
    assert_non_null(pg);
    ASSERT_OK(distc_barrier(NULL, pg, NULL));
    distc_pg_free(pg);
    pg = NULL;

    ASSERT_ERR(distc_pg_new_from_url(NULL, "env://", NULL, NULL), DISTC_EINVAL, "distc_pg_new_from_url");
    dt_assert_contains(distc_error_last(), "out");
    ASSERT_ERR(distc_pg_new_from_url(&pg, NULL, NULL, NULL), DISTC_EINVAL, "url");
    o = (distc_pg_options)DISTC_PG_OPTIONS_INIT;
    o.version = 9;
    ASSERT_ERR(distc_pg_new_from_url(&pg, "env://", NULL, &o), DISTC_EINVAL, "version");
    assert_null(pg);
    distc_store_free(st);
}

/* -------------------------------------------------- NULL pg, on every call */

static void test_null_pg_everywhere(void **state) {
    (void)state;
    DLTensor *t = dt_tensor_1d(DT_F32, 4);
    DLTensor *list[1] = {t};
    const DLTensor *cl[1] = {t};
    int64_t splits[1] = {4};
#define NULL_PG(fn, call) MAIN_BAD(DISTC_EINVAL, fn, "pg is NULL", call)
    NULL_PG("distc_allreduce", distc_allreduce(OUT, NULL, t, DISTC_SUM, NULL));
    NULL_PG("distc_allreduce_coalesced", distc_allreduce_coalesced(OUT, NULL, list, 1, DISTC_SUM, NULL));
    NULL_PG("distc_broadcast", distc_broadcast(OUT, NULL, t, 0, NULL));
    NULL_PG("distc_reduce", distc_reduce(OUT, NULL, t, 0, DISTC_SUM, NULL));
    NULL_PG("distc_allgather", distc_allgather(OUT, NULL, list, t, NULL));
    NULL_PG("distc_allgather_into_tensor", distc_allgather_into_tensor(OUT, NULL, t, t, NULL));
    NULL_PG("distc_gather", distc_gather(OUT, NULL, list, t, 0, NULL));
    NULL_PG("distc_scatter", distc_scatter(OUT, NULL, t, cl, 0, NULL));
    NULL_PG("distc_reduce_scatter", distc_reduce_scatter(OUT, NULL, t, cl, DISTC_SUM, NULL));
    NULL_PG("distc_reduce_scatter_tensor", distc_reduce_scatter_tensor(OUT, NULL, t, t, DISTC_SUM, NULL));
    NULL_PG("distc_alltoall", distc_alltoall(OUT, NULL, list, cl, NULL));
    NULL_PG("distc_alltoall_single", distc_alltoall_single(OUT, NULL, t, t, splits, splits, NULL));
    NULL_PG("distc_barrier", distc_barrier(OUT, NULL, NULL));
    NULL_PG("distc_send", distc_send(OUT, NULL, t, 1, 0, NULL));
    NULL_PG("distc_recv", distc_recv(OUT, NULL, t, 1, 0, NULL));
    NULL_PG("distc_recv", distc_recv(OUT, NULL, t, DISTC_ANY_SOURCE, 0, NULL));
#undef NULL_PG
    dt_tensor_free(t);
}

/* ------------------------------------------------------------- work handles */

static void noop_cb(distc_work *w, void *payload) {
    (void)w;
    (void)payload;
}

static void test_work_null_and_bad_args(void **state) {
    (void)state;
    int32_t i32;
    int64_t i64;
    uint64_t u64;
    const char *msg;
    ASSERT_ERR(distc_work_test(NULL), DISTC_EINVAL, "distc_work_test");
    dt_assert_contains(distc_error_last(), "work");
    ASSERT_ERR(distc_work_wait(NULL, -1), DISTC_EINVAL, "distc_work_wait");
    dt_assert_contains(distc_error_last(), "work");
    ASSERT_ERR(distc_work_error(NULL, &msg), DISTC_EINVAL, "distc_work_error");
    dt_assert_contains(distc_error_last(), "work");
    ASSERT_ERR(distc_work_source_rank(&i32, NULL), DISTC_EINVAL, "distc_work_source_rank");
    dt_assert_contains(distc_error_last(), "work");
    ASSERT_ERR(distc_work_duration_ns(&i64, NULL), DISTC_EINVAL, "distc_work_duration_ns");
    dt_assert_contains(distc_error_last(), "work");
    ASSERT_ERR(distc_work_seq(&u64, NULL), DISTC_EINVAL, "distc_work_seq");
    dt_assert_contains(distc_error_last(), "work");
    ASSERT_ERR(distc_work_on_complete(NULL, noop_cb, NULL), DISTC_EINVAL, "distc_work_on_complete");
    dt_assert_contains(distc_error_last(), "work");

    /* A real handle, from a group of one. */
    distc_store *st = NULL;
    ASSERT_OK(distc_store_new_hash(&st));
    distc_pg *pg = NULL;
    ASSERT_OK(distc_pg_new(&pg, st, 0, 1, NULL));
    distc_work *w = NULL;
    ASSERT_OK(distc_barrier(&w, pg, NULL));
    assert_non_null(w);
    ASSERT_ERR(distc_work_wait(w, -5), DISTC_EINVAL, "distc_work_wait");
    dt_assert_contains(distc_error_last(), "timeout_ms");
    ASSERT_ERR(distc_work_wait(w, INT64_MIN), DISTC_EINVAL, "timeout_ms");
    ASSERT_OK(distc_work_wait(w, -1));
    ASSERT_ERR(distc_work_source_rank(NULL, w), DISTC_EINVAL, "distc_work_source_rank");
    dt_assert_contains(distc_error_last(), "out");
    ASSERT_ERR(distc_work_duration_ns(NULL, w), DISTC_EINVAL, "distc_work_duration_ns");
    dt_assert_contains(distc_error_last(), "out");
    ASSERT_ERR(distc_work_seq(NULL, w), DISTC_EINVAL, "distc_work_seq");
    dt_assert_contains(distc_error_last(), "out");
    ASSERT_ERR(distc_work_on_complete(w, NULL, NULL), DISTC_EINVAL, "distc_work_on_complete");
    dt_assert_contains(distc_error_last(), "cb");
    /* The bad calls did not use up the handle's one callback. */
    ASSERT_OK(distc_work_on_complete(w, noop_cb, NULL));
    ASSERT_OK(distc_work_error(w, NULL));
    /* The handle outlives its group (and the store). */
    distc_pg_free(pg);
    distc_store_free(st);
    ASSERT_OK(distc_work_test(w));
    ASSERT_OK(distc_work_seq(&u64, w));
    assert_int_equal(u64, 1);
    distc_work_free(w);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bad_collective_args),
        cmocka_unit_test(test_bad_root_lists),
        cmocka_unit_test(test_queries),
        cmocka_unit_test(test_queries_null_pg),
        cmocka_unit_test(test_defaults),
        cmocka_unit_test(test_options_init),
        cmocka_unit_test(test_pg_new_bad_args),
        cmocka_unit_test(test_null_pg_everywhere),
        cmocka_unit_test(test_work_null_and_bad_args),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

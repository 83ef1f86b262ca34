/* test_pg_args' bad arguments to the collectives (collectives.h): each fails
 * blocking and asynchronous alike, hands out no work, and the group still
 * works afterwards with no sequence number taken. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pg_harness.h"
#include "test_util.h"

#include "collectives.h"

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

void test_bad_collective_args(void **state) {
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

void test_bad_root_lists(void **state) {
    (void)state;
    dt_run_ranks(1, rank_bad_root_lists, NULL);
}

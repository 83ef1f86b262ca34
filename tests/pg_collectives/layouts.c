/* test_pg_collectives' tensor layouts: zero elements, 2-D tensors,
 * byte_offset, and strides (compact ones accepted, others refused). */
#define _GNU_SOURCE
#include <stdio.h>

#include "expect.h"
#include "tests.h"

/* ------------------------------------------------------------- zero elements */

static void rank_zero_elements(distc_pg *pg, int rank, int size, void *arg) {
    (void)arg;
    for (size_t d = 0; d < dt_num_dtypes; d += 3) {
        DLDataType dt = dt_all_dtypes[d];
        DLTensor *z = dt_tensor_1d(dt, 0), *z2 = dt_tensor_1d(dt, 0);
        DLTensor *list[MAX_SIZE], *list2[MAX_SIZE];
        for (int j = 0; j < size; ++j) {
            list[j] = dt_tensor_1d(dt, 0);
            list2[j] = dt_tensor_1d(dt, 0);
        }
        RK_OK(distc_allreduce(NULL, pg, z, DISTC_SUM, NULL));
        RK_OK(distc_allreduce_coalesced(NULL, pg, list, (size_t)size, DISTC_MAX, NULL));
        RK_OK(distc_broadcast(NULL, pg, z, size - 1, NULL));
        RK_OK(distc_reduce(NULL, pg, z, 0, DISTC_SUM, NULL));
        RK_OK(distc_allgather(NULL, pg, list, z, NULL));
        RK_OK(distc_allgather_into_tensor(NULL, pg, z2, z, NULL));
        RK_OK(distc_gather(NULL, pg, list, z, 0, NULL));
        RK_OK(distc_scatter(NULL, pg, z, (const DLTensor *const *)list, size - 1, NULL));
        RK_OK(distc_reduce_scatter(NULL, pg, z, (const DLTensor *const *)list, DISTC_SUM, NULL));
        RK_OK(distc_reduce_scatter_tensor(NULL, pg, z, z2, DISTC_SUM, NULL));
        RK_OK(distc_alltoall(NULL, pg, list2, (const DLTensor *const *)list, NULL));
        RK_OK(distc_alltoall_single(NULL, pg, z2, z, NULL, NULL, NULL));
        if (size > 1) {
            int next = (rank + 1) % size, prev = (rank + size - 1) % size;
            distc_work *w = NULL;
            if (RK_OK(distc_send(&w, pg, z, next, 3, NULL))) {
                RK_OK(distc_recv(NULL, pg, z2, prev, 3, NULL));
                RK_OK(distc_work_wait(w, -1));
                distc_work_free(w);
            }
        }
        free_list(list, size);
        free_list(list2, size);
        dt_tensor_free(z);
        dt_tensor_free(z2);
    }
    /* No elements and no data pointer at all. */
    int64_t zero = 0;
    DLTensor nul = {NULL, {kDLCPU, 0}, 1, DT_F32, &zero, NULL, 0};
    RK_OK(distc_allreduce(NULL, pg, &nul, DISTC_SUM, NULL));
    RK_OK(distc_broadcast(NULL, pg, &nul, 0, NULL));
    /* A 2-D tensor with a zero dimension. */
    DLTensor *e2 = dt_tensor_2d(DT_I32, 3, 0);
    RK_OK(distc_allreduce(NULL, pg, e2, DISTC_PRODUCT, NULL));
    dt_tensor_free(e2);
    check_group_works(pg, rank, size);
}

void test_zero_elements(void **state) {
    (void)state;
    for_sizes(rank_zero_elements, NULL);
}

/* ---------------------------------------------------------- 2-D tensors */

static void rank_two_dim(distc_pg *pg, int rank, int size, void *arg) {
    (void)arg;
    DLTensor *t = dt_tensor_2d(DT_I32, 3, 4);
    fill_small(t, rank, 2);
    if (RK_OK(distc_allreduce(NULL, pg, t, DISTC_SUM, NULL))) CHECK_REDUCED("2-D allreduce", t, DISTC_SUM, size, 2);
    dt_tensor_free(t);

    DLTensor *b = dt_tensor_2d(DT_F32, 2, 3);
    fill_uniq(b, rank, 0);
    if (RK_OK(distc_broadcast(NULL, pg, b, size - 1, NULL))) CHECK_UNIQ("2-D broadcast", b, size - 1, 0);

    DLTensor *ag = dt_tensor_2d(DT_F32, 2 * size, 3);
    if (RK_OK(distc_allgather_into_tensor(NULL, pg, ag, b, NULL)))
        for (int64_t i = 0; i < dt_numel(ag); ++i)
            if (!CHECK_ELEM("2-D allgather_into_tensor", ag, i, uniq_re(DT_F32, size - 1, 0, (int)(i % 6)), 0, 0))
                break;
    dt_tensor_free(ag);

    /* reduce_scatter_tensor: a (size*2) x 3 input, a 2 x 3 output. */
    DLTensor *rin = dt_tensor_2d(DT_F64, 2 * size, 3);
    for (int j = 0; j < size; ++j)
        for (int i = 0; i < 6; ++i) dt_set(rin, j * 6 + i, small_re(DT_F64, rank, i, j));
    DLTensor *rout = dt_tensor_2d(DT_F64, 2, 3);
    if (RK_OK(distc_reduce_scatter_tensor(NULL, pg, rout, rin, DISTC_MAX, NULL)))
        CHECK_REDUCED("2-D reduce_scatter_tensor", rout, DISTC_MAX, size, rank);
    dt_tensor_free(rin);
    dt_tensor_free(rout);

    /* A 2-D allgather list and gather with 2-D outputs. */
    DLTensor *outs[MAX_SIZE];
    for (int j = 0; j < size; ++j) outs[j] = dt_tensor_2d(DT_F32, 2, 3);
    fill_uniq(b, rank, 1);
    if (RK_OK(distc_allgather(NULL, pg, outs, b, NULL)))
        for (int j = 0; j < size; ++j) CHECK_UNIQ("2-D allgather", outs[j], j, 1);
    free_list(outs, size);
    dt_tensor_free(b);
    check_group_works(pg, rank, size);
}

void test_two_dim(void **state) {
    (void)state;
    for_sizes(rank_two_dim, NULL);
}

/* ------------------------------------------------- byte_offset and strides */

static void rank_byte_offset(distc_pg *pg, int rank, int size, void *arg) {
    (void)arg;
    static const DLDataType dts[] = {DT_I32, DT_F64, DT_F16, DT_C64};
    for (size_t d = 0; d < sizeof dts / sizeof dts[0]; ++d) {
        DLDataType dt = dts[d];
        char what[96];
        snprintf(what, sizeof what, "byte_offset %s size %d", dt_dtype_name(dt), size);
        /* A buffer of 3 + 6 elements; the tensor is the last 6 (byte_offset 3 elements). */
        DLTensor *buf = dt_tensor_1d(dt, 9);
        for (int i = 0; i < 3; ++i) dt_set(buf, i, 99);
        DLTensor t = *buf;
        int64_t six = 6;
        t.shape = &six;
        t.byte_offset = 3 * dt_dtype_size(dt);
        fill_small(&t, rank, 5);
        if (RK_OK(distc_allreduce(NULL, pg, &t, DISTC_SUM, NULL))) CHECK_REDUCED(what, &t, DISTC_SUM, size, 5);
        for (int i = 0; i < 3; ++i) CHECK_ELEM(what, buf, i, 99, 0, 0); /* before the offset: untouched */

        fill_uniq(&t, rank, 0);
        if (RK_OK(distc_broadcast(NULL, pg, &t, 0, NULL))) CHECK_UNIQ(what, &t, 0, 0);
        for (int i = 0; i < 3; ++i) CHECK_ELEM(what, buf, i, 99, 0, 0);

        /* An allgather_into_tensor output with an offset too. */
        DLTensor *obuf = dt_tensor_1d(dt, 2 + 6 * size);
        dt_set(obuf, 0, 99);
        dt_set(obuf, 1, 99);
        DLTensor o = *obuf;
        int64_t on = 6 * size;
        o.shape = &on;
        o.byte_offset = 2 * dt_dtype_size(dt);
        fill_uniq(&t, rank, 1);
        if (RK_OK(distc_allgather_into_tensor(NULL, pg, &o, &t, NULL)))
            for (int j = 0; j < size; ++j)
                for (int i = 0; i < 6; ++i)
                    if (!CHECK_ELEM(what, &o, j * 6 + i, uniq_re(dt, j, 1, i), uniq_im(dt, j, 1, i), 0)) break;
        CHECK_ELEM(what, obuf, 0, 99, 0, 0);
        CHECK_ELEM(what, obuf, 1, 99, 0, 0);
        dt_tensor_free(obuf);
        dt_tensor_free(buf);
    }
    check_group_works(pg, rank, size);
}

void test_byte_offset(void **state) {
    (void)state;
    for_sizes(rank_byte_offset, NULL);
}

static void rank_strides(distc_pg *pg, int rank, int size, void *arg) {
    (void)arg;
    DLTensor *t = dt_tensor_2d(DT_F32, 3, 4);
    /* Compact strides given explicitly: accepted. */
    int64_t compact[2] = {4, 1};
    t->strides = compact;
    fill_small(t, rank, 0);
    if (RK_OK(distc_allreduce(NULL, pg, t, DISTC_SUM, NULL)))
        CHECK_REDUCED("explicit compact strides", t, DISTC_SUM, size, 0);
    /* A dimension of size 1 may have any stride. */
    DLTensor *col = dt_tensor_2d(DT_I64, 5, 1);
    int64_t odd[2] = {1, 77};
    col->strides = odd;
    fill_small(col, rank, 1);
    if (RK_OK(distc_allreduce(NULL, pg, col, DISTC_MAX, NULL)))
        CHECK_REDUCED("size-1 dimension with any stride", col, DISTC_MAX, size, 1);
    /* Not contiguous: transposed, or rows with padding. DISTC_EINVAL on every rank, nothing sent. */
    int64_t transposed[2] = {1, 3};
    t->strides = transposed;
    fill_small(t, rank, 0);
    RK_ERR2(distc_allreduce(NULL, pg, t, DISTC_SUM, NULL), DISTC_EINVAL, "distc_allreduce", "not contiguous");
    CHECK_SMALL("rejected tensor left alone", t, rank, 0);
    int64_t padded[2] = {5, 1};
    t->strides = padded;
    RK_ERR2(distc_broadcast(NULL, pg, t, 0, NULL), DISTC_EINVAL, "tensor", "not contiguous");
    DLTensor *outs[MAX_SIZE];
    for (int j = 0; j < size; ++j) outs[j] = dt_tensor_2d(DT_F32, 3, 4);
    RK_ERR2(distc_allgather(NULL, pg, outs, t, NULL), DISTC_EINVAL, "input", "not contiguous");
    outs[size - 1]->strides = transposed;
    t->strides = NULL;
    RK_ERR2(distc_allgather(NULL, pg, outs, t, NULL), DISTC_EINVAL, "outputs[", "not contiguous");
    outs[size - 1]->strides = NULL;
    free_list(outs, size);
    dt_tensor_free(t);
    dt_tensor_free(col);
    check_group_works(pg, rank, size);
}

void test_strides(void **state) {
    (void)state;
    for_sizes(rank_strides, NULL);
}

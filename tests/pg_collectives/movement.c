/* test_pg_collectives' data movement: broadcast, allgather, gather, scatter,
 * alltoall (lists and single tensors, even and uneven), and the barrier. */
#define _GNU_SOURCE
#include <stdio.h>

#include "expect.h"
#include "tests.h"

/* ----------------------------------------------------------------- broadcast */

static void rank_broadcast(distc_pg *pg, int rank, int size, void *arg) {
    (void)arg;
    for (size_t d = 0; d < dt_num_dtypes; ++d) {
        DLDataType dt = dt_all_dtypes[d];
        for (int root = 0; root < size; ++root) {
            char what[96];
            snprintf(what, sizeof what, "broadcast %s root %d size %d", dt_dtype_name(dt), root, size);
            DLTensor *t = dt_tensor_1d(dt, 7 + (int64_t)d % 5);
            fill_uniq(t, rank, 1);
            if (RK_OK(distc_broadcast(NULL, pg, t, root, NULL))) CHECK_UNIQ(what, t, root, 1);
            dt_tensor_free(t);
        }
    }
    check_group_works(pg, rank, size);
}

void test_broadcast(void **state) {
    (void)state;
    for_sizes(rank_broadcast, NULL);
    /* From 4 ranks, with a core per rank (test_pg_collectives_procs_cores),
     * down a binomial tree: for_sizes has 4, and 6 and 7 leave parts of it
     * short; every root turns it. */
    for (int size = 6; size <= MAX_RANKS; ++size) dt_run_ranks(size, rank_broadcast, NULL);
}

/* ----------------------------------------------------------------- allgather */

static void rank_allgather(distc_pg *pg, int rank, int size, void *arg) {
    (void)arg;
    for (size_t d = 0; d < dt_num_dtypes; ++d) {
        DLDataType dt = dt_all_dtypes[d];
        const int64_t n = 5 + (int64_t)d % 4;
        char what[96];
        DLTensor *in = dt_tensor_1d(dt, n);
        fill_uniq(in, rank, 2);

        /* The list form. */
        DLTensor *outs[MAX_SIZE];
        for (int j = 0; j < size; ++j) {
            outs[j] = dt_tensor_1d(dt, n);
            fill_uniq(outs[j], 3, 3); /* garbage to be overwritten */
        }
        snprintf(what, sizeof what, "allgather %s size %d", dt_dtype_name(dt), size);
        if (RK_OK(distc_allgather(NULL, pg, outs, in, NULL)))
            for (int j = 0; j < size; ++j) CHECK_UNIQ(what, outs[j], j, 2);
        CHECK_UNIQ(what, in, rank, 2); /* the input is left alone */
        free_list(outs, size);

        /* Into one tensor, in rank order. */
        DLTensor *flat = dt_tensor_1d(dt, n * size);
        snprintf(what, sizeof what, "allgather_into_tensor %s size %d", dt_dtype_name(dt), size);
        if (RK_OK(distc_allgather_into_tensor(NULL, pg, flat, in, NULL)))
            for (int j = 0; j < size; ++j)
                if (!check_uniq(__FILE__, __LINE__, what, flat, j, 2, j * n, n)) break;
        dt_tensor_free(flat);
        dt_tensor_free(in);
    }
    check_group_works(pg, rank, size);
}

void test_allgather(void **state) {
    (void)state;
    for_sizes(rank_allgather, NULL);
}

/* -------------------------------------------------------- gather and scatter */

static void rank_gather(distc_pg *pg, int rank, int size, void *arg) {
    (void)arg;
    for (size_t d = 0; d < dt_num_dtypes; ++d) {
        DLDataType dt = dt_all_dtypes[d];
        const int64_t n = 5 + (int64_t)d % 3;
        for (int root = 0; root < size; ++root) {
            char what[96];
            snprintf(what, sizeof what, "gather %s root %d size %d", dt_dtype_name(dt), root, size);
            DLTensor *in = dt_tensor_1d(dt, n);
            fill_uniq(in, rank, root);
            DLTensor *outs[MAX_SIZE];
            /* Non-roots pass NULL for even dtypes, an ignored list (left alone) for odd ones. */
            int pass_list = rank == root || d % 2 == 1;
            for (int j = 0; j < size; ++j) {
                outs[j] = dt_tensor_1d(dt, n);
                fill_uniq(outs[j], 3, 3);
            }
            if (RK_OK(distc_gather(NULL, pg, pass_list ? outs : NULL, in, root, NULL))) {
                for (int j = 0; j < size; ++j) {
                    if (rank == root)
                        CHECK_UNIQ(what, outs[j], j, root);
                    else
                        CHECK_UNIQ(what, outs[j], 3, 3);
                }
            }
            CHECK_UNIQ(what, in, rank, root);
            free_list(outs, size);
            dt_tensor_free(in);
        }
    }
    check_group_works(pg, rank, size);
}

void test_gather(void **state) {
    (void)state;
    for_sizes(rank_gather, NULL);
}

static void rank_scatter(distc_pg *pg, int rank, int size, void *arg) {
    (void)arg;
    for (size_t d = 0; d < dt_num_dtypes; ++d) {
        DLDataType dt = dt_all_dtypes[d];
        const int64_t n = 5 + (int64_t)d % 3;
        for (int root = 0; root < size; ++root) {
            char what[96];
            snprintf(what, sizeof what, "scatter %s root %d size %d", dt_dtype_name(dt), root, size);
            DLTensor *ins[MAX_RANKS];
            for (int j = 0; j < size; ++j) {
                ins[j] = dt_tensor_1d(dt, n);
                fill_uniq(ins[j], rank == root ? root : 3, rank == root ? j : 3);
            }
            DLTensor *out = dt_tensor_1d(dt, n);
            fill_uniq(out, 3, 2);
            int pass_list = rank == root || d % 2 == 1;
            if (RK_OK(distc_scatter(NULL, pg, out, pass_list ? (const DLTensor *const *)ins : NULL, root, NULL)))
                CHECK_UNIQ(what, out, root, rank);
            for (int j = 0; j < size; ++j) CHECK_UNIQ(what, ins[j], rank == root ? root : 3, rank == root ? j : 3);
            free_list(ins, size);
            dt_tensor_free(out);
        }
    }
    check_group_works(pg, rank, size);
}

void test_scatter(void **state) {
    (void)state;
    for_sizes(rank_scatter, NULL);
    /* Down a tree, as broadcast: a root past 0 makes subtrees wrap past the last rank. */
    for (int size = 6; size <= MAX_RANKS; ++size) dt_run_ranks(size, rank_scatter, NULL);
}

/* ------------------------------------------------------------------ alltoall */

/* Elements rank src sends to rank dst: uneven, the same for (r, r) on both sides. */
static int64_t a2a_len(int variant, int src, int dst) {
    return variant == 0 ? 1 + (src + 2 * dst) % 3 : (src * 2 + dst) % 3;
}

static void rank_alltoall(distc_pg *pg, int rank, int size, void *arg) {
    (void)arg;
    for (int variant = 0; variant < 2; ++variant) {
        for (size_t d = 0; d < dt_num_dtypes; ++d) {
            DLDataType dt = dt_all_dtypes[d];
            if (variant == 1 && !dt_dtype_eq(dt, DT_I32) && !dt_dtype_eq(dt, DT_C128)) continue;
            char what[112];
            snprintf(what, sizeof what, "alltoall %s%s size %d", dt_dtype_name(dt),
                     variant ? " (with empty parts)" : "", size);
            DLTensor *ins[MAX_SIZE], *outs[MAX_SIZE];
            for (int j = 0; j < size; ++j) {
                ins[j] = dt_tensor_1d(dt, a2a_len(variant, rank, j));
                fill_uniq(ins[j], rank, j);
                outs[j] = dt_tensor_1d(dt, a2a_len(variant, j, rank));
                fill_uniq(outs[j], 3, 3);
            }
            if (RK_OK(distc_alltoall(NULL, pg, outs, (const DLTensor *const *)ins, NULL)))
                for (int j = 0; j < size; ++j) CHECK_UNIQ(what, outs[j], j, rank);
            for (int j = 0; j < size; ++j) CHECK_UNIQ(what, ins[j], rank, j);
            free_list(ins, size);
            free_list(outs, size);
        }
    }
    check_group_works(pg, rank, size);
}

void test_alltoall(void **state) {
    (void)state;
    for_sizes(rank_alltoall, NULL);
}

/* alltoall_single with even splits (NULL), 1-D and 2-D. */
static void rank_alltoall_single_even(distc_pg *pg, int rank, int size, void *arg) {
    (void)arg;
    const int64_t rows_per = 2;
    for (int ndim = 1; ndim <= 2; ++ndim) {
        for (size_t d = 0; d < dt_num_dtypes; ++d) {
            DLDataType dt = dt_all_dtypes[d];
            const int64_t cols = ndim == 1 ? 1 : 3;
            const int64_t block = rows_per * cols;
            char what[112];
            snprintf(what, sizeof what, "alltoall_single even %dd %s size %d", ndim, dt_dtype_name(dt), size);
            DLTensor *in = ndim == 1 ? dt_tensor_1d(dt, rows_per * size) : dt_tensor_2d(dt, rows_per * size, cols);
            DLTensor *out = ndim == 1 ? dt_tensor_1d(dt, rows_per * size) : dt_tensor_2d(dt, rows_per * size, cols);
            for (int j = 0; j < size; ++j)
                for (int64_t i = 0; i < block; ++i)
                    dt_set_complex(in, j * block + i, uniq_re(dt, rank, j, (int)i), uniq_im(dt, rank, j, (int)i));
            if (RK_OK(distc_alltoall_single(NULL, pg, out, in, NULL, NULL, NULL))) {
                for (int j = 0; j < size; ++j)
                    for (int64_t i = 0; i < block; ++i)
                        if (!CHECK_ELEM(what, out, j * block + i, uniq_re(dt, j, rank, (int)i),
                                        uniq_im(dt, j, rank, (int)i), 0))
                            break;
            }
            dt_tensor_free(in);
            dt_tensor_free(out);
        }
    }
    /* torch's docstring example: input arange(4) + rank * 4 on 4 ranks gives [rank, rank+4, rank+8, rank+12]. */
    if (size == 4) {
        DLTensor *in = dt_tensor_1d(DT_I64, 4), *out = dt_tensor_1d(DT_I64, 4);
        for (int i = 0; i < 4; ++i) dt_set(in, i, i + rank * 4);
        if (RK_OK(distc_alltoall_single(NULL, pg, out, in, NULL, NULL, NULL)))
            for (int i = 0; i < 4; ++i) RK_EQ_INT(((int64_t *)out->data)[i], rank + 4 * i);
        dt_tensor_free(in);
        dt_tensor_free(out);
    }
    check_group_works(pg, rank, size);
}

void test_alltoall_single_even(void **state) {
    (void)state;
    for_sizes(rank_alltoall_single_even, NULL);
}

/* Uneven splits: rows rank src sends to rank dst. */
static int64_t split_rows(int src, int dst) { return (src + 2 * dst) % 3; }

static void rank_alltoall_single_uneven(distc_pg *pg, int rank, int size, void *arg) {
    (void)arg;
    for (size_t d = 0; d < dt_num_dtypes; ++d) {
        DLDataType dt = dt_all_dtypes[d];
        for (int ndim = 1; ndim <= 2; ++ndim) {
            const int64_t cols = ndim == 1 ? 1 : 2;
            int64_t in_splits[MAX_SIZE], out_splits[MAX_SIZE], in_rows = 0, out_rows = 0;
            for (int j = 0; j < size; ++j) {
                in_splits[j] = split_rows(rank, j);
                out_splits[j] = split_rows(j, rank);
                in_rows += in_splits[j];
                out_rows += out_splits[j];
            }
            char what[112];
            snprintf(what, sizeof what, "alltoall_single uneven %dd %s size %d", ndim, dt_dtype_name(dt), size);
            DLTensor *in = ndim == 1 ? dt_tensor_1d(dt, in_rows) : dt_tensor_2d(dt, in_rows, cols);
            DLTensor *out = ndim == 1 ? dt_tensor_1d(dt, out_rows) : dt_tensor_2d(dt, out_rows, cols);
            int64_t pos = 0;
            for (int j = 0; j < size; ++j)
                for (int64_t i = 0; i < in_splits[j] * cols; ++i, ++pos)
                    dt_set_complex(in, pos, uniq_re(dt, rank, j, (int)i), uniq_im(dt, rank, j, (int)i));
            if (RK_OK(distc_alltoall_single(NULL, pg, out, in, out_splits, in_splits, NULL))) {
                pos = 0;
                for (int j = 0; j < size; ++j)
                    for (int64_t i = 0; i < out_splits[j] * cols; ++i, ++pos)
                        if (!CHECK_ELEM(what, out, pos, uniq_re(dt, j, rank, (int)i), uniq_im(dt, j, rank, (int)i), 0))
                            break;
            }
            dt_tensor_free(in);
            dt_tensor_free(out);
        }
    }
    check_group_works(pg, rank, size);
}

void test_alltoall_single_uneven(void **state) {
    (void)state;
    for_sizes(rank_alltoall_single_uneven, NULL);
}

/* The uneven example of all_to_all_single's docstring in torch.distributed, exactly. */
static void rank_alltoall_single_torch_example(distc_pg *pg, int rank, int size, void *arg) {
    (void)arg;
    (void)size;
    static const int64_t in_len[4] = {6, 9, 5, 7};
    static const int64_t in_splits[4][4] = {{2, 2, 1, 1}, {3, 2, 2, 2}, {2, 1, 1, 1}, {2, 2, 2, 1}};
    static const int64_t out_splits[4][4] = {{2, 3, 2, 2}, {2, 2, 1, 2}, {1, 2, 1, 2}, {1, 2, 1, 1}};
    static const int64_t expect[4][9] = {
        {0, 1, 10, 11, 12, 20, 21, 30, 31},
        {2, 3, 13, 14, 22, 32, 33},
        {4, 15, 16, 23, 34, 35},
        {5, 17, 18, 24, 36},
    };
    static const int64_t out_len[4] = {9, 7, 6, 5};
    static const DLDataType dts[] = {DT_I64, DT_I32, DT_F32, DT_F64, DT_I16, DT_F16};
    for (size_t d = 0; d < sizeof dts / sizeof dts[0]; ++d) {
        DLTensor *in = dt_tensor_1d(dts[d], in_len[rank]);
        DLTensor *out = dt_tensor_1d(dts[d], out_len[rank]);
        for (int64_t i = 0; i < in_len[rank]; ++i) dt_set(in, i, (double)(rank * 10 + i));
        if (RK_OK(distc_alltoall_single(NULL, pg, out, in, out_splits[rank], in_splits[rank], NULL)))
            for (int64_t i = 0; i < out_len[rank]; ++i)
                if (!CHECK_ELEM(dt_dtype_name(dts[d]), out, i, (double)expect[rank][i], 0, 0)) break;
        dt_tensor_free(in);
        dt_tensor_free(out);
    }
}

void test_alltoall_single_torch_example(void **state) {
    (void)state;
    dt_run_ranks(4, rank_alltoall_single_torch_example, NULL);
}

/* ------------------------------------------------------------------- barrier */

/* After the barrier, every rank's key (set before it) is in the store. */
static void rank_barrier(distc_pg *pg, int rank, int size, void *arg) {
    (void)arg;
    distc_store *st = dt_rank_store();
    for (int round = 0; round < 3; ++round) {
        char key[128];
        snprintf(key, sizeof key, "test_barrier/%s/%d/%d", dt_rank_group(), round, rank);
        RK_OK(distc_store_set(st, key, "x", 1));
        if (!RK_OK(distc_barrier(NULL, pg, NULL))) continue;
        for (int r = 0; r < size; ++r) {
            snprintf(key, sizeof key, "test_barrier/%s/%d/%d", dt_rank_group(), round, r);
            const char *k = key;
            int32_t present = 0;
            if (RK_OK(distc_store_check(&present, st, &k, 1)))
                RK_CHECKF(present == 1, "round %d: rank %d left the barrier before rank %d entered it", round, rank, r);
        }
    }
    /* With options (a per-op timeout). */
    distc_op_options oo = DISTC_OP_OPTIONS_INIT;
    oo.timeout_ms = 15000;
    RK_OK(distc_barrier(NULL, pg, &oo));
}

void test_barrier(void **state) {
    (void)state;
    for_sizes(rank_barrier, NULL);
    /* From 6 ranks, with a core per rank (test_pg_collectives_procs_cores), in rounds. */
    for (int size = 6; size <= MAX_RANKS; size += 2) dt_run_ranks(size, rank_barrier, NULL);
}

/* test_pg_collectives' reductions: allreduce (integer AVG, both reduction
 * paths, coalesced), reduce and reduce_scatter, every dtype x op x root. */
#define _GNU_SOURCE
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "expect.h"
#include "tests.h"

/* ----------------------------------------------------------------- allreduce */

static void rank_allreduce(distc_pg *pg, int rank, int size, void *arg) {
    (void)arg;
    int ops = 0;
    for (size_t d = 0; d < dt_num_dtypes; ++d) {
        DLDataType dt = dt_all_dtypes[d];
        for (size_t o = 0; o < NUM_OPS; ++o) {
            distc_reduce_op op = all_ops[o];
            char what[96];
            snprintf(what, sizeof what, "allreduce %s %s size %d", dt_dtype_name(dt), op_name(op), size);
            DLTensor *t = dt_tensor_1d(dt, 5 + (int64_t)(d % 3) * 6);
            fill_small(t, rank, 0);
            distc_op_options oo;
            if (!op_supported(dt, op)) {
                CHECK_UNSUPPORTED("distc_allreduce", distc_allreduce(NULL, pg, t, op, op_opts(&oo, dt, op)), op);
                CHECK_SMALL(what, t, rank, 0);
            } else if (RK_OK(distc_allreduce(NULL, pg, t, op, op_opts(&oo, dt, op)))) {
                CHECK_REDUCED(what, t, op, size, 0);
                ++ops;
            }
            dt_tensor_free(t);
        }
    }
    /* PREMUL_SUM without options: the default factor 1, a plain sum. */
    DLTensor *t = dt_tensor_1d(DT_F32, 6);
    fill_small(t, rank, 0);
    if (RK_OK(distc_allreduce(NULL, pg, t, DISTC_PREMUL_SUM, NULL)))
        CHECK_REDUCED("allreduce PREMUL_SUM default factor", t, DISTC_SUM, size, 0);
    dt_tensor_free(t);
    check_next_seq(pg, ops + 2);
    check_group_works(pg, rank, size);
}

void test_allreduce(void **state) {
    (void)state;
    for_sizes(rank_allreduce, NULL);
}

/* AVG on integers: the sum divided by the size, truncated toward zero (7/2 = 3, -7/2 = -3). */
static void rank_avg_int(distc_pg *pg, int rank, int size, void *arg) {
    (void)arg;
    static const int64_t sums[] = {7, -7, 8, -8, 1, -1, 5, -5, 0, 3, -3, 11, -11};
    const int n = (int)(sizeof sums / sizeof sums[0]);
    static const DLDataType ints[] = {DT_I8, DT_I16, DT_I32, DT_I64};
    for (int d = 0; d < 4; ++d) {
        DLTensor *t = dt_tensor_1d(ints[d], n);
        /* Rank 0 holds the whole sum, the others hold 0 except a +1/-1 pair when size > 2. */
        for (int i = 0; i < n; ++i) {
            double v = rank == 0 ? (double)sums[i] : 0;
            if (size > 2 && rank == 1) v += 1;
            if (size > 2 && rank == 2) v -= 1;
            dt_set(t, i, v);
        }
        if (RK_OK(distc_allreduce(NULL, pg, t, DISTC_AVG, NULL)))
            for (int i = 0; i < n; ++i)
                if (!CHECK_ELEM("allreduce AVG truncates toward zero", t, i, (double)(sums[i] / size), 0, 0)) break;
        dt_tensor_free(t);
    }
    /* uint8 up to 255, and int64 without losing bits. */
    DLTensor *u = dt_tensor_1d(DT_U8, 3);
    DLTensor *l = dt_tensor_1d(DT_I64, 3);
    uint8_t *pu = u->data;
    int64_t *pl = l->data;
    for (int i = 0; i < 3; ++i) {
        pu[i] = rank == 0 ? (uint8_t)(255 - i * 100) : 0;
        pl[i] = rank == 0 ? INT64_MAX - i : (rank == 1 ? -(int64_t)i : 0);
    }
    if (RK_OK(distc_allreduce(NULL, pg, u, DISTC_AVG, NULL)))
        for (int i = 0; i < 3; ++i) RK_EQ_INT(pu[i], (255 - i * 100) / size);
    if (RK_OK(distc_allreduce(NULL, pg, l, DISTC_AVG, NULL)))
        for (int i = 0; i < 3; ++i) RK_EQ_INT(pl[i], (INT64_MAX - (size > 1 ? 2 * i : i)) / size);
    dt_tensor_free(u);
    dt_tensor_free(l);
}

void test_allreduce_avg_int_truncates(void **state) {
    (void)state;
    for_sizes(rank_avg_int, NULL);
}

/* One division of exact integers: a single rounding, the same bits in the
 * fill and in the expected sum whatever the compiler contracts. */
static float path_value(int rank, int64_t i) { return (float)((rank + 1) * 1000 + (int)(i % 97)) / 7919.0f; }

/* Whether every rank reaches all its peers the same way (agreed by the
 * ranks): not a group that spans hosts, which reduces through one leader
 * per host, even where a rank alone on its host sees only TCP. */
static int flat_group(distc_pg *pg, int rank, int size) {
    const char *first = NULL;
    int32_t mixed = 0;
    for (int p = 0; p < size; ++p) {
        const char *name = NULL;
        if (p == rank) continue;
        if (distc_pg_transport(&name, pg, p) != DISTC_OK || (first && strcmp(first, name) != 0)) mixed = 1;
        first = name;
    }
    DLTensor *m = dt_tensor_1d(DT_I32, 1);
    *(int32_t *)m->data = mixed;
    if (RK_OK(distc_allreduce(NULL, pg, m, DISTC_MAX, NULL))) mixed = *(int32_t *)m->data;
    dt_tensor_free(m);
    return !mixed;
}

/* Reductions on both sides of where the direct path (every rank's data to
 * every rank) gives way to the chunked one (reduce-scatter, then allgather),
 * which moves with the world size over shared memory with a core per rank
 * (CTest test_pg_collectives_procs_cores): 12 KiB at 3 ranks, 5461 bytes
 * at 4; 64 KiB at 2, over TCP and where ranks outnumber cores. The float32
 * values are fractions, so the sum's bits depend on the order: both paths
 * of distc's own engine must reduce in rank order, as the expected value is
 * summed here. Gloo's algorithms (DISTC_MESH_BYTES set), MPI's and a group
 * that spans hosts (each host's sum first) keep no such order: there the
 * sum need only be close. Every rank must hold the same bits either way. */
static void rank_reduce_paths(distc_pg *pg, int rank, int size, void *arg) {
    (void)arg;
    static const int64_t counts[] = {1, 3, 5, 9, 1365, 1366, 1367, 3072, 3073, 16384, 16385};
    const int rank_order =
        strcmp(dt_backend(), "gloo") == 0 && !getenv("DISTC_MESH_BYTES") && flat_group(pg, rank, size);
    for (size_t c = 0; c < sizeof counts / sizeof counts[0]; ++c) {
        const int64_t n = counts[c];
        const int root = (int)(c % (size_t)size);
        DLTensor *t = dt_tensor_1d(DT_F32, n);
        float *p = t->data;
        for (int step = 0; step < 2; ++step) { /* allreduce, then reduce to `root` */
            for (int64_t i = 0; i < n; ++i) p[i] = path_value(rank, i);
            int err = step == 0 ? distc_allreduce(NULL, pg, t, DISTC_SUM, NULL)
                                : distc_reduce(NULL, pg, t, root, DISTC_SUM, NULL);
            if (!RK_OK(err)) break;
            for (int64_t i = 0; i < n; ++i) {
                float want = path_value(0, i);
                for (int r = 1; r < size; ++r) want += path_value(r, i);
                if (step == 1 && rank != root) want = path_value(rank, i);
                const int same =
                    rank_order ? memcmp(&p[i], &want, sizeof want) == 0 : fabsf(p[i] - want) <= 1e-5f * fabsf(want);
                if (!RK_CHECKF(same, "%s of %lld float32, size %d: element %lld is %.9g, not %.9g (%s)",
                               step == 0 ? "allreduce" : "reduce", (long long)n, size, (long long)i, p[i], want,
                               rank_order ? "summed in rank order" : "or within 1e-5"))
                    break;
            }
            if (step == 0) dt_same_everywhere(pg, p, (size_t)n * sizeof *p, "allreduce across the paths");
        }
        dt_tensor_free(t);
    }
}

void test_reduce_paths(void **state) {
    (void)state;
    for_sizes(rank_reduce_paths, NULL);
}

/* Coalesced: three tensors of different lengths, separate or back to back in one buffer. */
static void rank_allreduce_coalesced(distc_pg *pg, int rank, int size, void *arg) {
    (void)arg;
    int ops = 0;
    static const int64_t lens[3] = {3, 7, 1};
    for (int layout = 0; layout < 2; ++layout) {
        for (size_t d = 0; d < dt_num_dtypes; ++d) {
            DLDataType dt = dt_all_dtypes[d];
            for (size_t o = 0; o < NUM_OPS; ++o) {
                distc_reduce_op op = all_ops[o];
                if (layout == 1 && op != DISTC_SUM && op != DISTC_MAX) continue;
                char what[128];
                snprintf(what, sizeof what, "allreduce_coalesced (%s) %s %s size %d",
                         layout ? "one buffer" : "separate", dt_dtype_name(dt), op_name(op), size);
                DLTensor *ts[3];
                DLTensor *whole = NULL;
                DLTensor views[3];
                if (layout == 0) {
                    for (int j = 0; j < 3; ++j) ts[j] = dt_tensor_1d(dt, lens[j]);
                } else {
                    whole = dt_tensor_1d(dt, lens[0] + lens[1] + lens[2]);
                    uint64_t off = 0;
                    for (int j = 0; j < 3; ++j) {
                        views[j] = *whole;
                        views[j].shape = (int64_t *)&lens[j];
                        views[j].byte_offset = off;
                        off += (uint64_t)lens[j] * dt_dtype_size(dt);
                        ts[j] = &views[j];
                    }
                }
                for (int j = 0; j < 3; ++j) fill_small(ts[j], rank, j);
                distc_op_options oo;
                if (!op_supported(dt, op)) {
                    CHECK_UNSUPPORTED("distc_allreduce_coalesced",
                                      distc_allreduce_coalesced(NULL, pg, ts, 3, op, op_opts(&oo, dt, op)), op);
                    for (int j = 0; j < 3; ++j) CHECK_SMALL(what, ts[j], rank, j);
                } else if (RK_OK(distc_allreduce_coalesced(NULL, pg, ts, 3, op, op_opts(&oo, dt, op)))) {
                    for (int j = 0; j < 3; ++j) CHECK_REDUCED(what, ts[j], op, size, j);
                    ++ops;
                }
                if (layout == 0) free_list(ts, 3);
                dt_tensor_free(whole);
            }
        }
    }
    /* A single tensor in the list. */
    DLTensor *one = dt_tensor_1d(DT_F64, 4);
    fill_small(one, rank, 4);
    if (RK_OK(distc_allreduce_coalesced(NULL, pg, &one, 1, DISTC_MIN, NULL)))
        CHECK_REDUCED("allreduce_coalesced of one tensor", one, DISTC_MIN, size, 4);
    dt_tensor_free(one);
    check_next_seq(pg, ops + 2);
    check_group_works(pg, rank, size);
}

void test_allreduce_coalesced(void **state) {
    (void)state;
    for_sizes(rank_allreduce_coalesced, NULL);
}

/* -------------------------------------------------------------------- reduce */

static void rank_reduce(distc_pg *pg, int rank, int size, void *arg) {
    (void)arg;
    int ops = 0;
    for (size_t d = 0; d < dt_num_dtypes; ++d) {
        DLDataType dt = dt_all_dtypes[d];
        for (size_t o = 0; o < NUM_OPS; ++o) {
            distc_reduce_op op = all_ops[o];
            for (int root = 0; root < size; ++root) {
                char what[112];
                snprintf(what, sizeof what, "reduce %s %s root %d size %d", dt_dtype_name(dt), op_name(op), root, size);
                DLTensor *t = dt_tensor_1d(dt, 5 + (int64_t)(d + o) % 4);
                fill_small(t, rank, 1);
                distc_op_options oo;
                if (!op_supported(dt, op)) {
                    CHECK_UNSUPPORTED("distc_reduce", distc_reduce(NULL, pg, t, root, op, op_opts(&oo, dt, op)), op);
                    CHECK_SMALL(what, t, rank, 1);
                } else if (RK_OK(distc_reduce(NULL, pg, t, root, op, op_opts(&oo, dt, op)))) {
                    ++ops;
                    if (rank == root)
                        CHECK_REDUCED(what, t, op, size, 1);
                    else
                        CHECK_SMALL(what, t, rank, 1); /* non-roots: left as they were */
                }
                dt_tensor_free(t);
            }
        }
    }
    check_next_seq(pg, ops + 1);
    check_group_works(pg, rank, size);
}

void test_reduce(void **state) {
    (void)state;
    for_sizes(rank_reduce, NULL);
}

/* ------------------------------------------------------------ reduce_scatter */

static void rank_reduce_scatter(distc_pg *pg, int rank, int size, void *arg) {
    (void)arg;
    int ops = 0;
    for (size_t d = 0; d < dt_num_dtypes; ++d) {
        DLDataType dt = dt_all_dtypes[d];
        const int64_t n = 5 + (int64_t)d % 3;
        for (size_t o = 0; o < NUM_OPS; ++o) {
            distc_reduce_op op = all_ops[o];
            distc_op_options oo;
            char what[112];

            /* The list form: rank r's output reduces everyone's inputs[r]. */
            snprintf(what, sizeof what, "reduce_scatter %s %s size %d", dt_dtype_name(dt), op_name(op), size);
            DLTensor *ins[MAX_SIZE];
            for (int j = 0; j < size; ++j) {
                ins[j] = dt_tensor_1d(dt, n);
                fill_small(ins[j], rank, j);
            }
            DLTensor *out = dt_tensor_1d(dt, n);
            fill_uniq(out, 3, 3);
            if (!op_supported(dt, op)) {
                CHECK_UNSUPPORTED(
                    "distc_reduce_scatter",
                    distc_reduce_scatter(NULL, pg, out, (const DLTensor *const *)ins, op, op_opts(&oo, dt, op)), op);
                CHECK_UNIQ(what, out, 3, 3);
            } else if (RK_OK(distc_reduce_scatter(NULL, pg, out, (const DLTensor *const *)ins, op,
                                                  op_opts(&oo, dt, op)))) {
                CHECK_REDUCED(what, out, op, size, rank);
                ++ops;
            }
            for (int j = 0; j < size; ++j) CHECK_SMALL(what, ins[j], rank, j); /* inputs left alone */
            free_list(ins, size);

            /* The tensor form: one flat input of size x n elements. */
            snprintf(what, sizeof what, "reduce_scatter_tensor %s %s size %d", dt_dtype_name(dt), op_name(op), size);
            DLTensor *flat = dt_tensor_1d(dt, n * size);
            for (int j = 0; j < size; ++j)
                for (int64_t i = 0; i < n; ++i)
                    dt_set_complex(flat, j * n + i, small_re(dt, rank, (int)i, j), small_im(dt, rank, (int)i, j));
            fill_uniq(out, 3, 3);
            if (!op_supported(dt, op)) {
                CHECK_UNSUPPORTED("distc_reduce_scatter_tensor",
                                  distc_reduce_scatter_tensor(NULL, pg, out, flat, op, op_opts(&oo, dt, op)), op);
                CHECK_UNIQ(what, out, 3, 3);
            } else if (RK_OK(distc_reduce_scatter_tensor(NULL, pg, out, flat, op, op_opts(&oo, dt, op)))) {
                CHECK_REDUCED(what, out, op, size, rank);
                ++ops;
            }
            for (int j = 0; j < size; ++j)
                for (int64_t i = 0; i < n; ++i)
                    if (!CHECK_ELEM(what, flat, j * n + i, small_re(dt, rank, (int)i, j), small_im(dt, rank, (int)i, j),
                                    0))
                        break;
            dt_tensor_free(flat);
            dt_tensor_free(out);
        }
    }
    check_next_seq(pg, ops + 1);
    check_group_works(pg, rank, size);
}

void test_reduce_scatter(void **state) {
    (void)state;
    for_sizes(rank_reduce_scatter, NULL);
}

/*
 * Collective correctness with threads as ranks (util/pg_harness.h): every
 * collective of distc/pg.h x every dtype x every reduce op x every root, for
 * world sizes 1 to 4, against results computed here. Inputs are small
 * integers (and halves for floating types) so that results are exact.
 */
#define _GNU_SOURCE
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pg_harness.h"
#include "test_util.h"

#define MAX_SIZE 4
/* The most ranks a test runs beyond for_sizes (broadcast, scatter, barrier). */
#define MAX_RANKS 8

/* ---------------------------------------------------------------- reduce ops */

static const distc_reduce_op all_ops[] = {DISTC_SUM,  DISTC_AVG, DISTC_PRODUCT, DISTC_MIN,       DISTC_MAX,
                                          DISTC_BAND, DISTC_BOR, DISTC_BXOR,    DISTC_PREMUL_SUM};
#define NUM_OPS (sizeof all_ops / sizeof all_ops[0])

static const char *op_name(distc_reduce_op op) {
    static const char *names[] = {"SUM", "AVG", "PRODUCT", "MIN", "MAX", "BAND", "BOR", "BXOR", "PREMUL_SUM"};
    return (unsigned)op < 9 ? names[op] : "?";
}

/* The combinations torch.distributed defines. */
static int op_supported(DLDataType dt, distc_reduce_op op) {
    if (dt_is_complex(dt)) return op == DISTC_SUM || op == DISTC_AVG || op == DISTC_PREMUL_SUM;
    if (dt_is_float(dt)) return op != DISTC_BAND && op != DISTC_BOR && op != DISTC_BXOR;
    if (dt_is_bool(dt)) return op != DISTC_AVG && op != DISTC_PREMUL_SUM;
    return 1;
}

/* 0.5 for floating types; an integer factor for integers, whose product is then exact. */
static double premul_factor(DLDataType dt) { return dt_is_float(dt) || dt_is_complex(dt) ? 0.5 : 3.0; }

/* Options for `op` on `dt`: a premul factor for PREMUL_SUM, else NULL (defaults). */
static const distc_op_options *op_opts(distc_op_options *o, DLDataType dt, distc_reduce_op op) {
    if (op != DISTC_PREMUL_SUM) return NULL;
    distc_op_options d = DISTC_OP_OPTIONS_INIT;
    d.premul_factor = premul_factor(dt);
    *o = d;
    return o;
}

/* ------------------------------------------------------------------ inputs */

/*
 * Inputs of reductions: element i of input k of rank r. bool: every pattern
 * of up to 4 ranks; unsigned {0,1,2}; signed {-1,0,1,2}; floating
 * {-1,0,0.5,1,2}; complex: such a real part and an imaginary part in {-1..2}.
 */
static double small_re(DLDataType dt, int r, int i, int k) {
    static const double fv[5] = {-1, 0, 0.5, 1, 2};
    if (dt_is_bool(dt)) return (((i + 3 * k) % 16) >> r) & 1;
    if (dt_is_unsigned(dt)) return (r * 2 + i + k * 3) % 3;
    if (dt_is_int(dt)) return (r * 3 + i * 5 + k * 7) % 4 - 1;
    return fv[(r * 3 + i * 7 + k * 11) % 5];
}

static double small_im(DLDataType dt, int r, int i, int k) {
    if (!dt_is_complex(dt)) return 0;
    return (r + i * 3 + k * 5) % 4 - 1;
}

/* Inputs of data movement: distinct for each (a, b) pair of ranks, exact in every dtype. */
static double uniq_re(DLDataType dt, int a, int b, int i) {
    if (dt_is_bool(dt)) return ((a * 7 + b * 3 + i) % 3) == 0;
    int v = a * 32 + b * 8 + i % 8; /* 0..127 for a and b below 4 */
    if (dt.bits == 8) v %= 128;     /* more ranks: still fits, if less unique */
    return dt_is_unsigned(dt) ? v : v - 64;
}

static double uniq_im(DLDataType dt, int a, int b, int i) {
    if (!dt_is_complex(dt)) return 0;
    return -(a * 5 + b * 3 + i);
}

static void fill_small(DLTensor *t, int r, int k) {
    for (int64_t i = 0; i < dt_numel(t); ++i)
        dt_set_complex(t, i, small_re(t->dtype, r, (int)i, k), small_im(t->dtype, r, (int)i, k));
}

static void fill_uniq(DLTensor *t, int a, int b) {
    for (int64_t i = 0; i < dt_numel(t); ++i)
        dt_set_complex(t, i, uniq_re(t->dtype, a, b, (int)i), uniq_im(t->dtype, a, b, (int)i));
}

/* ---------------------------------------------------------- expected values */

/*
 * The reduction over ranks 0..size-1 of small(r, i, k) by `op`: its real and
 * imaginary parts as stored in `dt`, and whether the result is only
 * approximately representable (floating AVG: a division by the group size).
 */
static void expect_reduce(DLDataType dt, distc_reduce_op op, int size, int i, int k, double *re, double *im,
                          int *approx) {
    *im = 0;
    *approx = 0;
    if (dt_is_bool(dt)) {
        int any = 0, all = 1, par = 0;
        for (int r = 0; r < size; ++r) {
            int v = small_re(dt, r, i, k) != 0;
            any |= v;
            all &= v;
            par ^= v;
        }
        switch (op) {
            case DISTC_SUM:
            case DISTC_MAX:
            case DISTC_BOR: *re = any; break;
            case DISTC_PRODUCT:
            case DISTC_MIN:
            case DISTC_BAND: *re = all; break;
            case DISTC_BXOR: *re = par; break;
            default: *re = NAN;
        }
        return;
    }
    if (dt_is_int(dt)) {
        int64_t acc = 0;
        for (int r = 0; r < size; ++r) {
            int64_t v = (int64_t)small_re(dt, r, i, k);
            if (r == 0) {
                acc = op == DISTC_PREMUL_SUM ? v * 3 : v;
                continue;
            }
            switch (op) {
                case DISTC_SUM:
                case DISTC_AVG: acc += v; break;
                case DISTC_PREMUL_SUM: acc += v * 3; break;
                case DISTC_PRODUCT: acc *= v; break;
                case DISTC_MIN: acc = v < acc ? v : acc; break;
                case DISTC_MAX: acc = v > acc ? v : acc; break;
                case DISTC_BAND: acc &= v; break;
                case DISTC_BOR: acc |= v; break;
                case DISTC_BXOR: acc ^= v; break;
            }
        }
        if (op == DISTC_AVG) acc /= size; /* C division truncates toward zero, like torch's */
        *re = dt_round(dt, (double)acc);
        return;
    }
    /* floating and complex: exact sums and products of small values */
    double acc = 0, acci = 0;
    double f = premul_factor(dt);
    for (int r = 0; r < size; ++r) {
        double v = small_re(dt, r, i, k), vi = small_im(dt, r, i, k);
        if (r == 0) {
            acc = op == DISTC_PREMUL_SUM ? v * f : v;
            acci = op == DISTC_PREMUL_SUM ? vi * f : vi;
            continue;
        }
        switch (op) {
            case DISTC_SUM:
            case DISTC_AVG:
                acc += v;
                acci += vi;
                break;
            case DISTC_PREMUL_SUM:
                acc += v * f;
                acci += vi * f;
                break;
            case DISTC_PRODUCT: acc *= v; break;
            case DISTC_MIN: acc = fmin(acc, v); break;
            case DISTC_MAX: acc = fmax(acc, v); break;
            default: acc = NAN;
        }
    }
    if (op == DISTC_AVG) {
        acc /= size;
        acci /= size;
        *approx = size == 3;
    }
    *re = *approx ? acc : dt_round(dt, acc);
    *im = *approx ? acci : dt_round(dt, acci);
}

/* One unit in the last place at 1.0 of dt's (real) format. */
static double dt_eps(DLDataType dt) {
    if (dt.code == kDLBfloat) return ldexp(1, -7);
    if (dt.code == kDLFloat && dt.bits == 16) return ldexp(1, -10);
    if ((dt.code == kDLFloat && dt.bits == 32) || (dt.code == kDLComplex && dt.bits == 64)) return ldexp(1, -23);
    return ldexp(1, -52);
}

static int close_to(DLDataType dt, double got, double exp, int approx) {
    if (!approx) return got == exp;
    return fabs(got - exp) <= dt_eps(dt) * fmax(1.0, fabs(exp));
}

/* Element i of t is (re, im); reports a failure (with `what`) and returns 0 if not. */
#define CHECK_ELEM(what, t, i, re, im, approx) check_elem(__FILE__, __LINE__, what, t, i, re, im, approx)
static int check_elem(const char *file, int line, const char *what, const DLTensor *t, int64_t i, double re, double im,
                      int approx) {
    double g = dt_get(t, i), gi = dt_get_imag(t, i);
    if (close_to(t->dtype, g, re, approx) && close_to(t->dtype, gi, im, approx)) return 1;
    if (dt_is_complex(t->dtype))
        dt_rank_fail(file, line, "%s: element %lld is %.17g%+.17gi, expected %.17g%+.17gi", what, (long long)i, g, gi,
                     re, im);
    else
        dt_rank_fail(file, line, "%s: element %lld is %.17g, expected %.17g", what, (long long)i, g, re);
    return 0;
}

#define CHECK_SMALL(what, t, r, k) check_small(__FILE__, __LINE__, what, t, r, k)
static int check_small(const char *file, int line, const char *what, const DLTensor *t, int r, int k) {
    for (int64_t i = 0; i < dt_numel(t); ++i)
        if (!check_elem(file, line, what, t, i, small_re(t->dtype, r, (int)i, k), small_im(t->dtype, r, (int)i, k), 0))
            return 0;
    return 1;
}

/* Elements [from, from + count) of t (count < 0: to the end) are uniq(a, b, 0..). */
#define CHECK_UNIQ(what, t, a, b) check_uniq(__FILE__, __LINE__, what, t, a, b, 0, -1)
static int check_uniq(const char *file, int line, const char *what, const DLTensor *t, int a, int b, int64_t from,
                      int64_t count) {
    if (count < 0) count = dt_numel(t) - from;
    for (int64_t i = 0; i < count; ++i)
        if (!check_elem(file, line, what, t, from + i, uniq_re(t->dtype, a, b, (int)i), uniq_im(t->dtype, a, b, (int)i),
                        0))
            return 0;
    return 1;
}

#define CHECK_REDUCED(what, t, op, size, k) check_reduced(__FILE__, __LINE__, what, t, op, size, k, 0)
static int check_reduced(const char *file, int line, const char *what, const DLTensor *t, distc_reduce_op op, int size,
                         int k, int64_t from) {
    for (int64_t i = 0; i < dt_numel(t) - from; ++i) {
        double re, im;
        int approx;
        expect_reduce(t->dtype, op, size, (int)i, k, &re, &im, &approx);
        if (!check_elem(file, line, what, t, from + i, re, im, approx)) return 0;
    }
    return 1;
}

/* An unsupported (dtype, op): DISTC_EINVAL naming the function and the op. */
#define CHECK_UNSUPPORTED(fn, expr, op) RK_ERR2(expr, DISTC_EINVAL, fn, op_name(op))

static void free_list(DLTensor **ts, int n) {
    for (int i = 0; i < n; ++i) dt_tensor_free(ts[i]);
}

/* The group still works: an int32 allreduce SUM gives the exact sum. */
static void check_group_works(distc_pg *pg, int rank, int size) {
    DLTensor *t = dt_tensor_1d(DT_I32, 5);
    fill_small(t, rank, 9);
    if (RK_OK(distc_allreduce(NULL, pg, t, DISTC_SUM, NULL))) CHECK_REDUCED("group still works", t, DISTC_SUM, size, 9);
    RK_OK(distc_barrier(NULL, pg, NULL));
    dt_tensor_free(t);
}

/* The next collective gets sequence number `expect`: rejected calls took none. */
static void check_next_seq(distc_pg *pg, int expect) {
    distc_work *w = NULL;
    if (!RK_OK(distc_barrier(&w, pg, NULL))) return;
    uint64_t seq = 0;
    RK_OK(distc_work_seq(&seq, w));
    RK_CHECKF(seq == (uint64_t)expect, "the barrier after %d collectives has seq %llu (rejected calls took one?)",
              expect - 1, (unsigned long long)seq);
    RK_OK(distc_work_wait(w, -1));
    distc_work_free(w);
}

static void for_sizes(dt_rank_fn fn, void *arg) {
    for (int size = 1; size <= MAX_SIZE; ++size) dt_run_ranks(size, fn, arg);
}

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

static void test_allreduce(void **state) {
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

static void test_allreduce_avg_int_truncates(void **state) {
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

static void test_reduce_paths(void **state) {
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

static void test_allreduce_coalesced(void **state) {
    (void)state;
    for_sizes(rank_allreduce_coalesced, NULL);
}

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

static void test_broadcast(void **state) {
    (void)state;
    for_sizes(rank_broadcast, NULL);
    /* From 4 ranks, with a core per rank (test_pg_collectives_procs_cores),
     * down a binomial tree: for_sizes has 4, and 6 and 7 leave parts of it
     * short; every root turns it. */
    for (int size = 6; size <= MAX_RANKS; ++size) dt_run_ranks(size, rank_broadcast, NULL);
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

static void test_reduce(void **state) {
    (void)state;
    for_sizes(rank_reduce, NULL);
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

static void test_allgather(void **state) {
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

static void test_gather(void **state) {
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

static void test_scatter(void **state) {
    (void)state;
    for_sizes(rank_scatter, NULL);
    /* Down a tree, as broadcast: a root past 0 makes subtrees wrap past the last rank. */
    for (int size = 6; size <= MAX_RANKS; ++size) dt_run_ranks(size, rank_scatter, NULL);
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

static void test_reduce_scatter(void **state) {
    (void)state;
    for_sizes(rank_reduce_scatter, NULL);
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

static void test_alltoall(void **state) {
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

static void test_alltoall_single_even(void **state) {
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

static void test_alltoall_single_uneven(void **state) {
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

static void test_alltoall_single_torch_example(void **state) {
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

static void test_barrier(void **state) {
    (void)state;
    for_sizes(rank_barrier, NULL);
    /* From 6 ranks, with a core per rank (test_pg_collectives_procs_cores), in rounds. */
    for (int size = 6; size <= MAX_RANKS; size += 2) dt_run_ranks(size, rank_barrier, NULL);
}

/* ---------------------------------------------------------- point-to-point */

static void rank_send_recv_ring(distc_pg *pg, int rank, int size, void *arg) {
    (void)arg;
    if (size < 2) return;
    const int next = (rank + 1) % size, prev = (rank + size - 1) % size;
    for (size_t d = 0; d < dt_num_dtypes; ++d) {
        DLDataType dt = dt_all_dtypes[d];
        char what[96];
        snprintf(what, sizeof what, "ring %s size %d", dt_dtype_name(dt), size);
        const int64_t n = 5 + (int64_t)d % 4;
        DLTensor *s = dt_tensor_1d(dt, n), *r = dt_tensor_1d(dt, n);
        fill_uniq(s, rank, next);

        /* An asynchronous send, a blocking receive. */
        distc_work *w = NULL;
        if (RK_OK(distc_send(&w, pg, s, next, (int32_t)(100 + d), NULL))) {
            if (RK_OK(distc_recv(NULL, pg, r, prev, (int32_t)(100 + d), NULL))) CHECK_UNIQ(what, r, prev, rank);
            RK_OK(distc_work_wait(w, -1));
            distc_work_free(w);
        }

        /* Both blocking: even ranks send first, odd ranks receive first. */
        fill_uniq(r, 3, 3);
        if (rank % 2 == 0) {
            RK_OK(distc_send(NULL, pg, s, next, 7, NULL));
            if (RK_OK(distc_recv(NULL, pg, r, prev, 7, NULL))) CHECK_UNIQ(what, r, prev, rank);
        } else {
            if (RK_OK(distc_recv(NULL, pg, r, prev, 7, NULL))) CHECK_UNIQ(what, r, prev, rank);
            RK_OK(distc_send(NULL, pg, s, next, 7, NULL));
        }
        CHECK_UNIQ(what, s, rank, next); /* the sent tensor is left alone */
        dt_tensor_free(s);
        dt_tensor_free(r);
    }

    /* Point-to-point does not disturb collectives around it. */
    check_group_works(pg, rank, size);
}

static void test_send_recv_ring(void **state) {
    (void)state;
    for_sizes(rank_send_recv_ring, NULL);
}

/*
 * Asynchronous point-to-point is posted, not serialized: torch's isend/irecv
 * hand the buffer to gloo at once and only wait() blocks. A short per-op
 * timeout keeps a failure quick; the group is not used afterwards.
 */
static void rank_p2p_tags_out_of_order(distc_pg *pg, int rank, int size, void *arg) {
    (void)arg;
    if (size < 2) return;
    const int next = (rank + 1) % size, prev = (rank + size - 1) % size;
    distc_op_options oo = DISTC_OP_OPTIONS_INIT;
    oo.timeout_ms = 3000;
    /* Two sends (tags 1 and 2) received in the other order. */
    DLTensor *a = dt_tensor_1d(DT_I32, 6), *b = dt_tensor_1d(DT_I32, 6);
    DLTensor *ra = dt_tensor_1d(DT_I32, 6), *rb = dt_tensor_1d(DT_I32, 6);
    fill_uniq(a, rank, 0);
    fill_uniq(b, rank, 1);
    distc_work *wa = NULL, *wb = NULL;
    RK_OK(distc_send(&wa, pg, a, next, 1, &oo));
    RK_OK(distc_send(&wb, pg, b, next, 2, &oo));
    /* Both isends are posted at once (as torch does), so receiving tag 2 first works. */
    if (RK_OK(distc_recv(NULL, pg, rb, prev, 2, &oo))) CHECK_UNIQ("tag 2", rb, prev, 1);
    if (RK_OK(distc_recv(NULL, pg, ra, prev, 1, &oo))) CHECK_UNIQ("tag 1", ra, prev, 0);
    if (wa) RK_OK(distc_work_wait(wa, -1));
    if (wb) RK_OK(distc_work_wait(wb, -1));
    distc_work_free(wa);
    distc_work_free(wb);
    dt_tensor_free(a);
    dt_tensor_free(b);
    dt_tensor_free(ra);
    dt_tensor_free(rb);
}

static void test_p2p_tags_out_of_order(void **state) {
    (void)state;
    dt_run_ranks(2, rank_p2p_tags_out_of_order, NULL);
}

/* irecv from prev, then isend to next, then wait both: the usual ring exchange in torch. */
static void rank_p2p_irecv_then_isend(distc_pg *pg, int rank, int size, void *arg) {
    (void)arg;
    if (size < 2) return;
    const int next = (rank + 1) % size, prev = (rank + size - 1) % size;
    distc_op_options oo = DISTC_OP_OPTIONS_INIT;
    oo.timeout_ms = 3000;
    DLTensor *s = dt_tensor_1d(DT_F32, 6), *r = dt_tensor_1d(DT_F32, 6);
    fill_uniq(s, rank, next);
    distc_work *wr = NULL, *ws = NULL;
    RK_OK(distc_recv(&wr, pg, r, prev, 4, &oo));
    RK_OK(distc_send(&ws, pg, s, next, 4, &oo));
    /* irecv then isend on every rank: both are posted at once, so this completes. */
    if (wr && RK_OK(distc_work_wait(wr, -1))) CHECK_UNIQ("irecv then isend", r, prev, rank);
    if (ws) RK_OK(distc_work_wait(ws, -1));
    distc_work_free(wr);
    distc_work_free(ws);
    dt_tensor_free(s);
    dt_tensor_free(r);
}

static void test_p2p_irecv_then_isend(void **state) {
    (void)state;
    dt_run_ranks(2, rank_p2p_irecv_then_isend, NULL);
    dt_run_ranks(3, rank_p2p_irecv_then_isend, NULL);
}

/* Rank 0 receives from DISTC_ANY_SOURCE; the work handle names each sender. */
static void rank_recv_any_source(distc_pg *pg, int rank, int size, void *arg) {
    (void)arg;
    if (size < 2) return;
    for (int round = 0; round < 2; ++round) {
        DLDataType dt = round == 0 ? DT_F32 : DT_I64;
        if (rank == 0) {
            int seen[MAX_SIZE] = {0};
            for (int k = 1; k < size; ++k) {
                DLTensor *t = dt_tensor_1d(dt, 5);
                distc_work *w = NULL;
                if (RK_OK(distc_recv(&w, pg, t, DISTC_ANY_SOURCE, 7 + round, NULL))) {
                    int32_t src = -9;
                    if (RK_OK(distc_work_wait(w, -1)) && RK_OK(distc_work_source_rank(&src, w))) {
                        if (RK_CHECKF(src >= 1 && src < size, "source rank %d", src)) {
                            RK_CHECKF(!seen[src], "rank %d seen twice", src);
                            seen[src] = 1;
                            CHECK_UNIQ("recv from any source", t, src, 0);
                        }
                    }
                    distc_work_free(w);
                }
                dt_tensor_free(t);
            }
        } else {
            DLTensor *t = dt_tensor_1d(dt, 5);
            fill_uniq(t, rank, 0);
            RK_OK(distc_send(NULL, pg, t, 0, 7 + round, NULL));
            dt_tensor_free(t);
        }
    }
    check_group_works(pg, rank, size);
}

static void test_recv_any_source(void **state) {
    (void)state;
    for_sizes(rank_recv_any_source, NULL);
}

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

static void test_zero_elements(void **state) {
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

static void test_two_dim(void **state) {
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

static void test_byte_offset(void **state) {
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

static void test_strides(void **state) {
    (void)state;
    for_sizes(rank_strides, NULL);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_allreduce),
        cmocka_unit_test(test_allreduce_avg_int_truncates),
        cmocka_unit_test(test_allreduce_coalesced),
        cmocka_unit_test(test_reduce_paths),
        cmocka_unit_test(test_broadcast),
        cmocka_unit_test(test_reduce),
        cmocka_unit_test(test_allgather),
        cmocka_unit_test(test_gather),
        cmocka_unit_test(test_scatter),
        cmocka_unit_test(test_reduce_scatter),
        cmocka_unit_test(test_alltoall),
        cmocka_unit_test(test_alltoall_single_even),
        cmocka_unit_test(test_alltoall_single_uneven),
        cmocka_unit_test(test_alltoall_single_torch_example),
        cmocka_unit_test(test_barrier),
        cmocka_unit_test(test_send_recv_ring),
        cmocka_unit_test(test_p2p_tags_out_of_order),
        cmocka_unit_test(test_p2p_irecv_then_isend),
        cmocka_unit_test(test_recv_any_source),
        cmocka_unit_test(test_zero_elements),
        cmocka_unit_test(test_two_dim),
        cmocka_unit_test(test_byte_offset),
        cmocka_unit_test(test_strides),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

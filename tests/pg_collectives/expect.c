/* test_pg_collectives' shared parts (expect.h): the reduce ops, the inputs,
 * the expected values and their checks, and the helpers every part's ranks use. */
#define _GNU_SOURCE
#include "expect.h"

#include <math.h>

/* ---------------------------------------------------------------- reduce ops */

const distc_reduce_op all_ops[] = {DISTC_SUM,  DISTC_AVG, DISTC_PRODUCT, DISTC_MIN,       DISTC_MAX,
                                   DISTC_BAND, DISTC_BOR, DISTC_BXOR,    DISTC_PREMUL_SUM};

const char *op_name(distc_reduce_op op) {
    static const char *names[] = {"SUM", "AVG", "PRODUCT", "MIN", "MAX", "BAND", "BOR", "BXOR", "PREMUL_SUM"};
    return (unsigned)op < 9 ? names[op] : "?";
}

int op_supported(DLDataType dt, distc_reduce_op op) {
    if (dt_is_complex(dt)) return op == DISTC_SUM || op == DISTC_AVG || op == DISTC_PREMUL_SUM;
    if (dt_is_float(dt)) return op != DISTC_BAND && op != DISTC_BOR && op != DISTC_BXOR;
    if (dt_is_bool(dt)) return op != DISTC_AVG && op != DISTC_PREMUL_SUM;
    return 1;
}

/* 0.5 for floating types; an integer factor for integers, whose product is then exact. */
static double premul_factor(DLDataType dt) { return dt_is_float(dt) || dt_is_complex(dt) ? 0.5 : 3.0; }

const distc_op_options *op_opts(distc_op_options *o, DLDataType dt, distc_reduce_op op) {
    if (op != DISTC_PREMUL_SUM) return NULL;
    distc_op_options d = DISTC_OP_OPTIONS_INIT;
    d.premul_factor = premul_factor(dt);
    *o = d;
    return o;
}

/* ------------------------------------------------------------------ inputs */

double small_re(DLDataType dt, int r, int i, int k) {
    static const double fv[5] = {-1, 0, 0.5, 1, 2};
    if (dt_is_bool(dt)) return (((i + 3 * k) % 16) >> r) & 1;
    if (dt_is_unsigned(dt)) return (r * 2 + i + k * 3) % 3;
    if (dt_is_int(dt)) return (r * 3 + i * 5 + k * 7) % 4 - 1;
    return fv[(r * 3 + i * 7 + k * 11) % 5];
}

double small_im(DLDataType dt, int r, int i, int k) {
    if (!dt_is_complex(dt)) return 0;
    return (r + i * 3 + k * 5) % 4 - 1;
}

double uniq_re(DLDataType dt, int a, int b, int i) {
    if (dt_is_bool(dt)) return ((a * 7 + b * 3 + i) % 3) == 0;
    int v = a * 32 + b * 8 + i % 8; /* 0..127 for a and b below 4 */
    if (dt.bits == 8) v %= 128;     /* more ranks: still fits, if less unique */
    return dt_is_unsigned(dt) ? v : v - 64;
}

double uniq_im(DLDataType dt, int a, int b, int i) {
    if (!dt_is_complex(dt)) return 0;
    return -(a * 5 + b * 3 + i);
}

void fill_small(DLTensor *t, int r, int k) {
    for (int64_t i = 0; i < dt_numel(t); ++i)
        dt_set_complex(t, i, small_re(t->dtype, r, (int)i, k), small_im(t->dtype, r, (int)i, k));
}

void fill_uniq(DLTensor *t, int a, int b) {
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

int check_elem(const char *file, int line, const char *what, const DLTensor *t, int64_t i, double re, double im,
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

int check_small(const char *file, int line, const char *what, const DLTensor *t, int r, int k) {
    for (int64_t i = 0; i < dt_numel(t); ++i)
        if (!check_elem(file, line, what, t, i, small_re(t->dtype, r, (int)i, k), small_im(t->dtype, r, (int)i, k), 0))
            return 0;
    return 1;
}

int check_uniq(const char *file, int line, const char *what, const DLTensor *t, int a, int b, int64_t from,
               int64_t count) {
    if (count < 0) count = dt_numel(t) - from;
    for (int64_t i = 0; i < count; ++i)
        if (!check_elem(file, line, what, t, from + i, uniq_re(t->dtype, a, b, (int)i), uniq_im(t->dtype, a, b, (int)i),
                        0))
            return 0;
    return 1;
}

int check_reduced(const char *file, int line, const char *what, const DLTensor *t, distc_reduce_op op, int size, int k,
                  int64_t from) {
    for (int64_t i = 0; i < dt_numel(t) - from; ++i) {
        double re, im;
        int approx;
        expect_reduce(t->dtype, op, size, (int)i, k, &re, &im, &approx);
        if (!check_elem(file, line, what, t, from + i, re, im, approx)) return 0;
    }
    return 1;
}

void free_list(DLTensor **ts, int n) {
    for (int i = 0; i < n; ++i) dt_tensor_free(ts[i]);
}

void check_group_works(distc_pg *pg, int rank, int size) {
    DLTensor *t = dt_tensor_1d(DT_I32, 5);
    fill_small(t, rank, 9);
    if (RK_OK(distc_allreduce(NULL, pg, t, DISTC_SUM, NULL))) CHECK_REDUCED("group still works", t, DISTC_SUM, size, 9);
    RK_OK(distc_barrier(NULL, pg, NULL));
    dt_tensor_free(t);
}

void check_next_seq(distc_pg *pg, int expect) {
    distc_work *w = NULL;
    if (!RK_OK(distc_barrier(&w, pg, NULL))) return;
    uint64_t seq = 0;
    RK_OK(distc_work_seq(&seq, w));
    RK_CHECKF(seq == (uint64_t)expect, "the barrier after %d collectives has seq %llu (rejected calls took one?)",
              expect - 1, (unsigned long long)seq);
    RK_OK(distc_work_wait(w, -1));
    distc_work_free(w);
}

void for_sizes(dt_rank_fn fn, void *arg) {
    for (int size = 1; size <= MAX_SIZE; ++size) dt_run_ranks(size, fn, arg);
}

/*
 * Training with the reducer: logistic regression with a hand-written
 * backward pass, data sharded by rank, 2 and 4 ranks (threads, processes or
 * mpirun). After every step the parameters are bitwise identical on every
 * rank, and after all steps they match single-process training on the whole
 * batch within 1e-5 (float32 sums in another order; 5e-3 with the float16
 * compression hook). Runs with several bucket caps, an unused parameter, an
 * explicit assignment, gradients as bucket views and float16 compression.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "pg_harness.h"
#include "test_util.h"

#define N 64 /* samples */
#define D 12 /* features, split over three weight tensors of 4 */
#define STEPS 25
#define LR 0.5f

typedef struct variant {
    uint64_t cap;  /* bucket cap and first bucket, bytes */
    int unused;    /* a fifth parameter nobody uses, listed unused */
    int explicit_; /* explicit buckets instead of sizes */
    int views;     /* gradients live in the buckets (gradient_as_bucket_view) */
    int fp16;      /* buckets travel as float16 (the built-in compression hook) */
} variant;

static float feature(int s, int d) { return (float)sin(0.7 * s + 1.3 * d); }
static float label(int s) {
    float z = 0;
    for (int d = 0; d < D; ++d) z += feature(s, d) * (float)((d % 3) - 1);
    return z > 0 ? 1.0f : 0.0f;
}

/* Mean gradient of the logistic loss over samples s with s % stride == offset. */
static void gradient(const float *w, float b, int offset, int stride, float *gw, float *gb) {
    memset(gw, 0, D * sizeof *gw);
    *gb = 0;
    int count = 0;
    for (int s = offset; s < N; s += stride) {
        float z = b;
        for (int d = 0; d < D; ++d) z += w[d] * feature(s, d);
        float e = 1.0f / (1.0f + expf(-z)) - label(s);
        for (int d = 0; d < D; ++d) gw[d] += e * feature(s, d);
        *gb += e;
        ++count;
    }
    for (int d = 0; d < D; ++d) gw[d] /= (float)count;
    *gb /= (float)count;
}

static void rank_train(distc_pg *pg, int rank, int size, void *arg) {
    const variant *v = arg;
    /* Parameters and their gradient buffers: w0, w1, w2 (4 each), b, and maybe an unused one. */
    float w[D] = {0}, b = 0, spare = 0;
    float gw[D], gb, gspare = 0;
    int64_t four = 4, one = 1;
    DLTensor g[5] = {
        {gw, {kDLCPU, 0}, 1, DT_F32, &four, NULL, 0},     {gw + 4, {kDLCPU, 0}, 1, DT_F32, &four, NULL, 0},
        {gw + 8, {kDLCPU, 0}, 1, DT_F32, &four, NULL, 0}, {&gb, {kDLCPU, 0}, 1, DT_F32, &one, NULL, 0},
        {&gspare, {kDLCPU, 0}, 1, DT_F32, &one, NULL, 0},
    };
    DLTensor *gp[5] = {&g[0], &g[1], &g[2], &g[3], &g[4]};
    int n = v->unused ? 5 : 4;
    distc_reducer_options o = DISTC_REDUCER_OPTIONS_INIT;
    o.bucket_cap_bytes = o.first_bucket_bytes = v->cap;
    int32_t explicit_buckets[5] = {1, 0, 1, 0, 1};
    if (v->explicit_) o.bucket_of = explicit_buckets;
    o.gradient_as_bucket_view = v->views;
    distc_reducer *r = NULL;
    if (!RK_OK(distc_reducer_new(&r, pg, gp, (size_t)n, &o))) return;
    int32_t unused_list[1] = {4};
    if (v->fp16) RK_OK(distc_reducer_register_comm_hook(r, NULL, NULL, DISTC_HOOK_FP16_COMPRESS));
    float *view[5] = {NULL};
    if (v->views)
        for (int i = 0; i < n; ++i) RK_OK(distc_reducer_grad_view((void **)&view[i], r, i));

    for (int step = 0; step < STEPS; ++step) {
        RK_OK(distc_reducer_prepare_for_backward(r, v->unused ? unused_list : NULL, v->unused ? 1 : 0));
        gradient(w, b, rank, size, gw, &gb);
        if (v->views) { /* the backward pass writes into the buckets */
            for (int k = 0; k < 3; ++k) memcpy(view[k], gw + 4 * k, 4 * sizeof(float));
            *view[3] = gb;
        }
        for (int i = 3; i >= 0; --i) RK_OK(distc_reducer_mark_ready(r, i)); /* bias first, as backward goes */
        if (!RK_OK(distc_reducer_finalize(r))) break;
        if (v->views) { /* the averages are where the gradients were written */
            for (int k = 0; k < 3; ++k) memcpy(gw + 4 * k, view[k], 4 * sizeof(float));
            gb = *view[3];
            if (n == 5) gspare = *view[4];
        }
        for (int d = 0; d < D; ++d) w[d] -= LR * gw[d];
        b -= LR * gb;
        spare -= LR * gspare;
        /* Every rank holds the same bits. */
        float mine[D + 2];
        memcpy(mine, w, sizeof w);
        mine[D] = b;
        mine[D + 1] = spare;
        char what[48];
        snprintf(what, sizeof what, "step %d: parameters", step);
        dt_same_everywhere(pg, mine, sizeof mine, what);
    }
    distc_reducer_free(r);

    /* The same steps on one process with the whole batch. */
    float w1[D] = {0}, b1 = 0, gw1[D], gb1;
    for (int step = 0; step < STEPS; ++step) {
        gradient(w1, b1, 0, 1, gw1, &gb1);
        for (int d = 0; d < D; ++d) w1[d] -= LR * gw1[d];
        b1 -= LR * gb1;
    }
    /* float32 sums in another order: 1e-5; gradients rounded to float16 on the wire: 5e-3. */
    float tol = v->fp16 ? 5e-3f : 1e-5f;
    for (int d = 0; d < D; ++d) RK_CHECKF(fabsf(w[d] - w1[d]) <= tol, "w[%d] = %g, one process: %g", d, w[d], w1[d]);
    RK_CHECKF(fabsf(b - b1) <= tol, "b = %g, one process: %g", b, b1);
    RK_CHECKF(spare == 0.0f, "the unused parameter moved: %g", spare);
    RK_CHECKF(fabsf(w1[0]) > 1e-3f, "the model did not train (w[0] = %g)", w1[0]); /* the test can fail */
}

static void run_variant(variant v) {
    dt_run_ranks(2, rank_train, &v);
    dt_run_ranks(4, rank_train, &v);
}

static void test_one_bucket(void **state) {
    (void)state;
    run_variant((variant){1u << 20, 0, 0, 0, 0});
}

static void test_small_buckets(void **state) {
    (void)state;
    run_variant((variant){16, 0, 0, 0, 0}); /* one tensor per bucket */
    run_variant((variant){20, 0, 0, 0, 0});
}

static void test_unused_parameter(void **state) {
    (void)state;
    run_variant((variant){16, 1, 0, 0, 0});
}

static void test_explicit_buckets(void **state) {
    (void)state;
    run_variant((variant){0, 1, 1, 0, 0});
}

static void test_fp16_compression(void **state) {
    (void)state;
    run_variant((variant){16, 0, 0, 0, 1});
}

static void test_bucket_views(void **state) {
    (void)state;
    run_variant((variant){16, 1, 0, 1, 0});
    run_variant((variant){1u << 20, 0, 0, 1, 0});
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_one_bucket),       cmocka_unit_test(test_small_buckets),
        cmocka_unit_test(test_unused_parameter), cmocka_unit_test(test_explicit_buckets),
        cmocka_unit_test(test_bucket_views),     cmocka_unit_test(test_fp16_compression),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

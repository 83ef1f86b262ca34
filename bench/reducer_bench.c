/*
 * The reducer's cost and overlap (run it under a launcher: distc-run -n 2).
 *
 *   distc-reducer-bench [--params 48] [--kib 256] [--compute-us 2000] [--compute busy|idle]
 *                       [--cap-kib 25600] [--iters 5]
 *
 * 1. mark_ready overhead: a reducer over 4096 four-byte gradients in one
 *    bucket, so marking launches nothing: the mean time of one mark_ready.
 * 2. A synthetic backward pass over --params float32 gradients of --kib KiB,
 *    each preceded by --compute-us of compute, timed four ways: compute
 *    alone; one big allreduce alone (all gradients flat); compute then that
 *    allreduce; and compute with the reducer (buckets launched as gradients
 *    become ready; DDP's 1 MiB first bucket, --cap-kib after). The goal is the
 *    reducer within 10% of max(compute, allreduce). Rank 0 prints; times are
 *    the slowest rank's median over --iters.
 *
 * 3. Unused parameters: the same pass with every fourth gradient unused
 *    (so most buckets hold one), three ways: find_unused_parameters (the
 *    unused are found at finalize, so their buckets wait for it, and the
 *    used map is one more allreduce), static_graph (found in the first
 *    iteration, then marked at prepare: buckets start as their used
 *    gradients arrive), and the unused listed by hand in
 *    prepare_for_backward (what static_graph should reach).
 *
 * --compute busy (the default) spins the CPU: a backward pass on the host,
 * which competes with communication for the cores. --compute idle sleeps:
 * a backward pass whose kernels run elsewhere (a GPU), leaving the CPU free
 * for the buckets, as in most DDP training.
 */
#define _POSIX_C_SOURCE 200809L
#include <distc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static int g_idle; /* --compute idle */

static void spin(double us) {
    double end = now_us() + us;
    if (g_idle) {
        struct timespec ts = {(time_t)(us / 1e6), (long)((us - (double)(time_t)(us / 1e6) * 1e6) * 1e3)};
        nanosleep(&ts, NULL);
        return;
    }
    while (now_us() < end) {}
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static distc_pg *g_pg;

static double slowest(double v) {
    int64_t one = 1;
    DLTensor t = {&v, {kDLCPU, 0}, 1, {kDLFloat, 64, 1}, &one, NULL, 0};
    distc_allreduce(NULL, g_pg, &t, DISTC_MAX, NULL);
    return v;
}

#define CHECK(x)                                                                      \
    do {                                                                              \
        if ((x) != 0) {                                                               \
            fprintf(stderr, "distc-reducer-bench: %s: %s\n", #x, distc_error_last()); \
            exit(1);                                                                  \
        }                                                                             \
    } while (0)

int main(int argc, char **argv) {
    int params = 48, kib = 256, iters = 5, cap_kib = 25 * 1024;
    double compute_us = 2000;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--params"))
            params = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--kib"))
            kib = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--compute-us"))
            compute_us = atof(argv[i + 1]);
        else if (!strcmp(argv[i], "--iters"))
            iters = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--cap-kib"))
            cap_kib = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--compute"))
            g_idle = !strcmp(argv[i + 1], "idle") ? 1 : strcmp(argv[i + 1], "busy") ? -1 : 0;
    }
    if (params < 1 || kib < 1 || iters < 1 || compute_us < 0 || cap_kib < 1 || g_idle < 0) {
        fprintf(stderr,
                "usage: distc-reducer-bench [--params N] [--kib K] [--compute-us US] [--compute busy|idle] "
                "[--cap-kib K] [--iters N]\n");
        return 2;
    }
    CHECK(distc_pg_new_from_url(&g_pg, "env://", NULL, NULL));
    int32_t rank, size;
    distc_pg_rank(&rank, g_pg);
    distc_pg_size(&size, g_pg);

    /* 1. mark_ready overhead */
    enum { SMALL = 4096 };
    float *tiny = calloc(SMALL, sizeof *tiny);
    DLTensor *tt = calloc(SMALL, sizeof *tt), **tp = calloc(SMALL, sizeof *tp);
    int64_t one = 1;
    for (int i = 0; i < SMALL; ++i) {
        tt[i] = (DLTensor){&tiny[i], {kDLCPU, 0}, 1, {kDLFloat, 32, 1}, &one, NULL, 0};
        tp[i] = &tt[i];
    }
    distc_reducer_options o = DISTC_REDUCER_OPTIONS_INIT;
    o.bucket_cap_bytes = o.first_bucket_bytes = 1u << 30; /* one bucket: marking launches nothing */
    distc_reducer *r;
    CHECK(distc_reducer_new(&r, g_pg, tp, SMALL, &o));
    double mark = 1e30;
    for (int it = 0; it < iters; ++it) {
        CHECK(distc_reducer_prepare_for_backward(r, NULL, 0));
        double t0 = now_us();
        for (int i = SMALL - 1; i > 0; --i) CHECK(distc_reducer_mark_ready(r, i));
        double t = (now_us() - t0) / (SMALL - 1);
        if (t < mark) mark = t;
        CHECK(distc_reducer_mark_ready(r, 0));
        CHECK(distc_reducer_finalize(r));
    }
    distc_reducer_free(r);
    mark = slowest(mark);

    /* 2. the synthetic backward pass */
    size_t n = (size_t)kib * 1024 / 4;
    float *flat = calloc((size_t)params * n, sizeof *flat);
    DLTensor *gt = calloc((size_t)params, sizeof *gt), **gp = calloc((size_t)params, sizeof *gp);
    int64_t shape = (int64_t)n, flat_shape = (int64_t)(n * (size_t)params);
    for (int i = 0; i < params; ++i) {
        gt[i] = (DLTensor){flat + (size_t)i * n, {kDLCPU, 0}, 1, {kDLFloat, 32, 1}, &shape, NULL, 0};
        gp[i] = &gt[i];
    }
    DLTensor whole = {flat, {kDLCPU, 0}, 1, {kDLFloat, 32, 1}, &flat_shape, NULL, 0};
    o = (distc_reducer_options)DISTC_REDUCER_OPTIONS_INIT;
    o.bucket_cap_bytes = (uint64_t)cap_kib * 1024;
    CHECK(distc_reducer_new(&r, g_pg, gp, (size_t)params, &o));
    size_t nb = 0;
    distc_reducer_num_buckets(&nb, r);
    double *t[4];
    for (int m = 0; m < 4; ++m) t[m] = calloc((size_t)iters, sizeof(double));
    for (int it = 0; it < iters; ++it) {
        for (int m = 0; m < 4; ++m) {
            CHECK(distc_barrier(NULL, g_pg, NULL));
            double t0 = now_us();
            if (m == 0) {
                for (int i = 0; i < params; ++i) spin(compute_us);
            } else if (m == 1) {
                CHECK(distc_allreduce(NULL, g_pg, &whole, DISTC_AVG, NULL));
            } else if (m == 2) {
                for (int i = 0; i < params; ++i) spin(compute_us);
                CHECK(distc_allreduce(NULL, g_pg, &whole, DISTC_AVG, NULL));
            } else {
                CHECK(distc_reducer_prepare_for_backward(r, NULL, 0));
                for (int i = params - 1; i >= 0; --i) {
                    spin(compute_us);
                    CHECK(distc_reducer_mark_ready(r, i));
                }
                CHECK(distc_reducer_finalize(r));
            }
            t[m][it] = slowest(now_us() - t0);
        }
    }
    for (int m = 0; m < 4; ++m) qsort(t[m], (size_t)iters, sizeof(double), cmp);
    double compute = t[0][iters / 2], comm = t[1][iters / 2], serial = t[2][iters / 2], red = t[3][iters / 2];
    double bound = compute > comm ? compute : comm;
    if (rank == 0) {
        printf(
            "# distc-reducer-bench: %d ranks, %d float32 gradients of %d KiB (%.1f MiB), %.0f us %s compute each, "
            "%zu buckets (1 MiB first, %d KiB cap); median of %d, slowest rank\n",
            size, params, kib, params * kib / 1024.0, compute_us, g_idle ? "idle" : "busy", nb, cap_kib, iters);
        printf("mark_ready overhead            %10.3f us per call (goal <= 1 us)\n", mark);
        printf("compute alone                  %10.1f ms\n", compute / 1e3);
        printf("one allreduce alone            %10.1f ms\n", comm / 1e3);
        printf("compute, then one allreduce    %10.1f ms\n", serial / 1e3);
        printf(
            "compute with the reducer       %10.1f ms   = %.2f x max(compute, allreduce) (goal <= 1.10), "
            "%.2f x compute-then-allreduce\n",
            red / 1e3, red / bound, red / serial);
    }
    distc_reducer_free(r);

    /* 3. unused parameters: find_unused, static_graph, listed by hand */
    int32_t *unused = calloc((size_t)params, sizeof *unused);
    size_t n_unused = 0;
    for (int i = 0; i < params; ++i)
        if (i % 4 == 1) unused[n_unused++] = i;
    /* The three reducers take turns, iteration by iteration, so that all see the same machine. */
    distc_reducer *ur[3];
    double *ts[3];
    for (int mode = 0; mode < 3; ++mode) {
        o = (distc_reducer_options)DISTC_REDUCER_OPTIONS_INIT;
        o.bucket_cap_bytes = (uint64_t)cap_kib * 1024;
        o.find_unused_parameters = mode == 0;
        o.static_graph = mode == 1;
        CHECK(distc_reducer_new(&ur[mode], g_pg, gp, (size_t)params, &o));
        ts[mode] = calloc((size_t)iters + 1, sizeof(double));
    }
    for (int it = 0; it <= iters; ++it) /* the first: static_graph learns; not timed */
        for (int mode = 0; mode < 3; ++mode) {
            CHECK(distc_barrier(NULL, g_pg, NULL));
            double t0 = now_us();
            CHECK(distc_reducer_prepare_for_backward(ur[mode], mode == 2 ? unused : NULL, mode == 2 ? n_unused : 0));
            for (int i = params - 1; i >= 0; --i) {
                spin(compute_us);
                if (i % 4 != 1) CHECK(distc_reducer_mark_ready(ur[mode], i));
            }
            CHECK(distc_reducer_finalize(ur[mode]));
            ts[mode][it] = slowest(now_us() - t0);
        }
    double u[3];
    for (int mode = 0; mode < 3; ++mode) {
        qsort(ts[mode] + 1, (size_t)iters, sizeof(double), cmp);
        u[mode] = ts[mode][1 + iters / 2];
        free(ts[mode]);
        distc_reducer_free(ur[mode]);
    }
    if (rank == 0) {
        printf("every 4th gradient unused:\n");
        printf("  find_unused_parameters       %10.1f ms   = %.2f x listed by hand\n", u[0] / 1e3, u[0] / u[2]);
        printf("  static_graph                 %10.1f ms   = %.2f x listed by hand, %.2f x find_unused\n", u[1] / 1e3,
               u[1] / u[2], u[1] / u[0]);
        printf("  listed by hand               %10.1f ms\n", u[2] / 1e3);
    }
    free(unused);
    distc_pg_free(g_pg);
    return 0;
}

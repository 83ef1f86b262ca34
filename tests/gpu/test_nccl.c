/*
 * The nccl backend on a real GPU, world size 1 (one device): every
 * collective and dtype with results checked against the host, the list and
 * flat forms, streams and work handles, engine splits, byte collectives, bad
 * arguments, debug mode's check, the watchdog's timeout and distc_pg_abort with a stream that
 * never gets to the operation, and the flight recorder's dump. Exits 77 (CTest: skipped) without a GPU.
 */
#define _GNU_SOURCE
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pg_harness.h"
#include "test_util.h"

#define CUDA_OK(expr)                                                             \
    do {                                                                          \
        cudaError_t e_ = (expr);                                                  \
        if (e_ != cudaSuccess) fail_msg("%s: %s", #expr, cudaGetErrorString(e_)); \
    } while (0)

static distc_pg *g_pg;

/* `debug`: distc_pg_options.debug. */
static distc_pg *nccl_group(const char *name, int64_t timeout_ms, int debug) {
    distc_store *st = NULL;
    ASSERT_OK(distc_store_new_hash(&st));
    distc_pg_options o = DISTC_PG_OPTIONS_INIT;
    o.backend = "nccl";
    o.group_name = name;
    o.timeout_ms = timeout_ms;
    o.device = 0;
    o.debug = debug;
    distc_pg *pg = NULL;
    ASSERT_OK(distc_pg_new(&pg, st, 0, 1, &o));
    distc_store_free(st);
    return pg;
}

/* A device tensor mirroring a host one (same dtype and shape). */
static DLTensor *dev_like(const DLTensor *h) {
    DLTensor *d = calloc(1, sizeof *d);
    *d = *h;
    d->shape = malloc(sizeof(int64_t) * (size_t)(h->ndim ? h->ndim : 1));
    memcpy(d->shape, h->shape, sizeof(int64_t) * (size_t)h->ndim);
    d->device.device_type = kDLCUDA;
    d->device.device_id = 0;
    size_t bytes = (size_t)dt_numel(h) * dt_dtype_size(h->dtype);
    CUDA_OK(cudaMalloc(&d->data, bytes ? bytes : 1));
    CUDA_OK(cudaMemcpy(d->data, h->data, bytes, cudaMemcpyHostToDevice));
    return d;
}

static void download(DLTensor *h, const DLTensor *d) {
    CUDA_OK(cudaDeviceSynchronize());
    CUDA_OK(cudaMemcpy(h->data, d->data, (size_t)dt_numel(h) * dt_dtype_size(h->dtype), cudaMemcpyDeviceToHost));
}

static void dev_free(DLTensor *d) {
    if (!d) return;
    cudaFree(d->data);
    free(d->shape);
    free(d);
}

static void fill(DLTensor *t, int seed) {
    for (int64_t i = 0; i < dt_numel(t); ++i) {
        double v = dt_is_bool(t->dtype) ? (double)((i + seed) % 2) : (double)((i + seed) % 5 + 1);
        dt_set_complex(t, i, v, dt_is_complex(t->dtype) ? v + 1 : 0);
    }
}

/* Every element of `got` equals `want`'s times `factor` (exact: small integers and powers of two). */
static void expect_scaled(const char *what, const DLTensor *got, const DLTensor *want, double factor) {
    for (int64_t i = 0; i < dt_numel(want); ++i) {
        double re = dt_get(want, i) * factor, im = dt_get_imag(want, i) * factor;
        if (dt_get(got, i) != re || dt_get_imag(got, i) != im)
            fail_msg("%s: element %lld is (%g, %g), expected (%g, %g)", what, (long long)i, dt_get(got, i),
                     dt_get_imag(got, i), re, im);
    }
}

static const char *op_name(int op) {
    static const char *names[] = {"SUM", "AVG", "PRODUCT", "MIN", "MAX", "BAND", "BOR", "BXOR", "PREMUL_SUM"};
    return names[op];
}

/* What the core refuses for every backend (distc's rules: pg.h). */
static int core_rejects(DLDataType dt, int op) {
    int bitwise = op == DISTC_BAND || op == DISTC_BOR || op == DISTC_BXOR;
    if (dt_is_complex(dt)) return op == DISTC_MIN || op == DISTC_MAX || op == DISTC_PRODUCT || bitwise;
    if (dt_is_float(dt)) return bitwise;
    if (dt_is_bool(dt)) return op == DISTC_AVG || op == DISTC_PREMUL_SUM;
    return 0;
}

/* What NCCL cannot do (DISTC_ENOTSUP with a reason). */
static int nccl_lacks(DLDataType dt, int op) {
    if (dt_dtype_eq(dt, DT_I16)) return 1;
    if (dt_is_bool(dt)) return op == DISTC_BXOR;
    if (dt_is_int(dt)) return op == DISTC_BAND || op == DISTC_BOR || op == DISTC_BXOR || op == DISTC_PREMUL_SUM;
    return 0;
}

static void test_allreduce_every_dtype_and_op(void **state) {
    (void)state;
    int ran = 0;
    for (size_t d = 0; d < dt_num_dtypes; ++d) {
        DLDataType dt = dt_all_dtypes[d];
        for (int op = DISTC_SUM; op <= DISTC_PREMUL_SUM; ++op) {
            char what[96];
            snprintf(what, sizeof what, "allreduce %s %s", dt_dtype_name(dt), op_name(op));
            DLTensor *h = dt_tensor_1d(dt, 1000 + (int64_t)d), *want = dt_tensor_1d(dt, 1000 + (int64_t)d);
            fill(h, op);
            fill(want, op);
            DLTensor *dv = dev_like(h);
            distc_op_options oo = DISTC_OP_OPTIONS_INIT;
            oo.premul_factor = 2.0;
            int rc = distc_allreduce(NULL, g_pg, dv, (distc_reduce_op)op, &oo);
            if (core_rejects(dt, op)) {
                if (rc != DISTC_EINVAL) fail_msg("%s -> %d, expected DISTC_EINVAL: %s", what, rc, distc_error_last());
            } else if (nccl_lacks(dt, op)) {
                if (rc != DISTC_ENOTSUP) fail_msg("%s -> %d, expected DISTC_ENOTSUP: %s", what, rc, distc_error_last());
                dt_assert_contains(distc_error_last(), "NCCL");
            } else {
                if (rc != 0) fail_msg("%s -> %d: %s", what, rc, distc_error_last());
                download(h, dv);
                expect_scaled(what, h, want, op == DISTC_PREMUL_SUM ? 2.0 : 1.0);
                ++ran;
            }
            dev_free(dv);
            dt_tensor_free(h);
            dt_tensor_free(want);
        }
    }
    printf("allreduce: %d dtype x op combinations checked on the GPU\n", ran);
}

static void test_rooted_and_data_movement(void **state) {
    (void)state;
    for (size_t d = 0; d < dt_num_dtypes; ++d) {
        DLDataType dt = dt_all_dtypes[d];
        const char *name = dt_dtype_name(dt);
        DLTensor *h = dt_tensor_1d(dt, 257), *want = dt_tensor_1d(dt, 257);
        fill(h, 3);
        fill(want, 3);

        DLTensor *dv = dev_like(h);
        ASSERT_OK(distc_broadcast(NULL, g_pg, dv, 0, NULL));
        download(h, dv);
        expect_scaled(name, h, want, 1);
        if (!dt_dtype_eq(dt, DT_I16)) {
            ASSERT_OK(distc_reduce(NULL, g_pg, dv, 0, DISTC_SUM, NULL));
            download(h, dv);
            expect_scaled(name, h, want, 1);
        }

        /* allgather into a list (separate buffers) and into one flat tensor */
        DLTensor *out_h = dt_tensor_1d(dt, 257), *out_d = dev_like(out_h);
        DLTensor *list[1] = {out_d};
        ASSERT_OK(distc_allgather(NULL, g_pg, list, dv, NULL));
        download(out_h, out_d);
        expect_scaled(name, out_h, want, 1);
        CUDA_OK(cudaMemset(out_d->data, 0, 257 * dt_dtype_size(dt)));
        ASSERT_OK(distc_allgather_into_tensor(NULL, g_pg, out_d, dv, NULL));
        download(out_h, out_d);
        expect_scaled(name, out_h, want, 1);

        CUDA_OK(cudaMemset(out_d->data, 0, 257 * dt_dtype_size(dt)));
        ASSERT_OK(distc_gather(NULL, g_pg, list, dv, 0, NULL));
        download(out_h, out_d);
        expect_scaled(name, out_h, want, 1);
        CUDA_OK(cudaMemset(out_d->data, 0, 257 * dt_dtype_size(dt)));
        const DLTensor *ins[1] = {dv};
        ASSERT_OK(distc_scatter(NULL, g_pg, out_d, ins, 0, NULL));
        download(out_h, out_d);
        expect_scaled(name, out_h, want, 1);

        CUDA_OK(cudaMemset(out_d->data, 0, 257 * dt_dtype_size(dt)));
        ASSERT_OK(distc_alltoall(NULL, g_pg, list, ins, NULL));
        download(out_h, out_d);
        expect_scaled(name, out_h, want, 1);
        CUDA_OK(cudaMemset(out_d->data, 0, 257 * dt_dtype_size(dt)));
        int64_t split = 257;
        ASSERT_OK(distc_alltoall_single(NULL, g_pg, out_d, dv, &split, &split, NULL));
        download(out_h, out_d);
        expect_scaled(name, out_h, want, 1);

        if (!dt_dtype_eq(dt, DT_I16) && !dt_is_bool(dt)) {
            CUDA_OK(cudaMemset(out_d->data, 0, 257 * dt_dtype_size(dt)));
            ASSERT_OK(distc_reduce_scatter(NULL, g_pg, out_d, ins, DISTC_SUM, NULL));
            download(out_h, out_d);
            expect_scaled(name, out_h, want, 1);
            CUDA_OK(cudaMemset(out_d->data, 0, 257 * dt_dtype_size(dt)));
            ASSERT_OK(distc_reduce_scatter_tensor(NULL, g_pg, out_d, dv, DISTC_AVG, NULL));
            download(out_h, out_d);
            expect_scaled(name, out_h, want, 1);
        }
        dev_free(out_d);
        dt_tensor_free(out_h);
        dev_free(dv);
        dt_tensor_free(h);
        dt_tensor_free(want);
    }
    ASSERT_OK(distc_barrier(NULL, g_pg, NULL));
    CUDA_OK(cudaDeviceSynchronize());
}

static void test_coalesced_and_empty(void **state) {
    (void)state;
    DLTensor *h[3], *d[3], *want[3];
    for (int i = 0; i < 3; ++i) {
        h[i] = dt_tensor_1d(DT_BF16, 100 * (i + 1));
        want[i] = dt_tensor_1d(DT_BF16, 100 * (i + 1));
        fill(h[i], i);
        fill(want[i], i);
        d[i] = dev_like(h[i]);
    }
    distc_op_options oo = DISTC_OP_OPTIONS_INIT;
    oo.premul_factor = 0.5;
    ASSERT_OK(distc_allreduce_coalesced(NULL, g_pg, d, 3, DISTC_PREMUL_SUM, &oo));
    for (int i = 0; i < 3; ++i) {
        download(h[i], d[i]);
        expect_scaled("allreduce_coalesced bfloat16 PREMUL_SUM", h[i], want[i], 0.5);
        dev_free(d[i]);
        dt_tensor_free(h[i]);
        dt_tensor_free(want[i]);
    }
    DLTensor *e = dt_tensor_1d(DT_F32, 0), *ed = dev_like(e);
    ASSERT_OK(distc_allreduce(NULL, g_pg, ed, DISTC_SUM, NULL));
    ASSERT_OK(distc_broadcast(NULL, g_pg, ed, 0, NULL));
    CUDA_OK(cudaDeviceSynchronize());
    dev_free(ed);
    dt_tensor_free(e);
}

static void test_streams_and_work(void **state) {
    (void)state;
    cudaStream_t s1, s2;
    CUDA_OK(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));
    CUDA_OK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
    DLTensor *h = dt_tensor_1d(DT_F32, 1 << 20), *want = dt_tensor_1d(DT_F32, 1 << 20);
    fill(h, 1);
    fill(want, 1);
    DLTensor *dv = dev_like(h);
    distc_op_options oo = DISTC_OP_OPTIONS_INIT;
    oo.stream = s1;
    oo.premul_factor = 4.0;
    distc_work *w = NULL;
    ASSERT_OK(distc_allreduce(&w, g_pg, dv, DISTC_PREMUL_SUM, &oo));
    /* s2 waits for the operation without the host waiting; the copy runs after it. */
    ASSERT_OK(distc_work_wait_stream(w, s2));
    CUDA_OK(cudaMemcpyAsync(h->data, dv->data, (size_t)(1 << 20) * 4, cudaMemcpyDeviceToHost, s2));
    CUDA_OK(cudaStreamSynchronize(s2));
    expect_scaled("allreduce on s1, read on s2", h, want, 4.0);
    ASSERT_OK(distc_work_wait(w, -1));
    assert_int_equal(distc_work_test(w), 0);
    uint64_t seq = 0;
    ASSERT_OK(distc_work_seq(&seq, w));
    assert_true(seq > 0);
    distc_work_free(w);

    /* Many in flight on one stream, waited for in any order. */
    distc_work *ws[16];
    for (int i = 0; i < 16; ++i) ASSERT_OK(distc_allreduce(&ws[i], g_pg, dv, DISTC_SUM, &oo));
    for (int i = 15; i >= 0; --i) {
        ASSERT_OK(distc_work_wait(ws[i], -1));
        distc_work_free(ws[i]);
    }
    dev_free(dv);
    dt_tensor_free(h);
    dt_tensor_free(want);
    cudaStreamDestroy(s1);
    cudaStreamDestroy(s2);
}

/* The reducer over CUDA gradients: buckets on the GPU, copies and the AVG allreduce on the caller's
 * stream, several buckets (rebuilt at the second iteration), views, an unused gradient. */
static void test_reducer_on_device(void **state) {
    (void)state;
    enum { N = 4 };
    static const int64_t sizes[N] = {3, 70000, 7, 300000};
    cudaStream_t s;
    CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    for (int views = 0; views <= 1; ++views) {
        DLTensor *h[N], *d[N];
        for (int i = 0; i < N; ++i) {
            h[i] = dt_tensor_1d(DT_F32, sizes[i]);
            d[i] = dev_like(h[i]);
        }
        distc_reducer_options o = DISTC_REDUCER_OPTIONS_INIT;
        o.first_bucket_bytes = 64 * 1024;
        o.bucket_cap_bytes = 256 * 1024;
        o.gradient_as_bucket_view = views;
        o.stream = s;
        distc_reducer *r = NULL;
        ASSERT_OK(distc_reducer_new(&r, g_pg, d, N, &o));
        void *where[N];
        for (int i = 0; i < N; ++i)
            if (views)
                ASSERT_OK(distc_reducer_grad_view(&where[i], r, i));
            else
                where[i] = d[i]->data;
        for (int it = 0; it < 3; ++it) {
            int32_t unused[1] = {2};
            ASSERT_OK(distc_reducer_prepare_for_backward(r, unused, it == 2));
            for (int i = N - 1; i >= 0; --i) {
                if (it == 2 && i == 2) continue;
                fill(h[i], it + i);
                CUDA_OK(cudaMemcpyAsync(where[i], h[i]->data, (size_t)sizes[i] * 4, cudaMemcpyHostToDevice, s));
                ASSERT_OK(distc_reducer_mark_ready(r, i));
            }
            ASSERT_OK(distc_reducer_finalize(r));
            CUDA_OK(cudaStreamSynchronize(s));
            for (int i = 0; i < N; ++i) {
                DLTensor *want = dt_tensor_1d(DT_F32, sizes[i]), *got = dt_tensor_1d(DT_F32, sizes[i]);
                fill(want, it + i);
                CUDA_OK(cudaMemcpy(got->data, where[i], (size_t)sizes[i] * 4, cudaMemcpyDeviceToHost));
                expect_scaled(views ? "reducer (views) on CUDA" : "reducer on CUDA", got, want,
                              it == 2 && i == 2 ? 0.0 : 1.0);
                dt_tensor_free(want);
                dt_tensor_free(got);
            }
        }
        distc_reducer_free(r);
        for (int i = 0; i < N; ++i) {
            dev_free(d[i]);
            dt_tensor_free(h[i]);
        }
    }
    cudaStreamDestroy(s);
}

static void test_bad_arguments(void **state) {
    (void)state;
    DLTensor *h = dt_tensor_1d(DT_F32, 8);
    ASSERT_ERR(distc_allreduce(NULL, g_pg, h, DISTC_SUM, NULL), DISTC_EINVAL, "takes CUDA");
    DLTensor *dv = dev_like(h);
    dv->device.device_id = 3;
    ASSERT_ERR(distc_allreduce(NULL, g_pg, dv, DISTC_SUM, NULL), DISTC_EINVAL, "device 3");
    dv->device.device_id = 0;
    ASSERT_ERR(distc_recv(NULL, g_pg, dv, DISTC_ANY_SOURCE, 0, NULL), DISTC_ENOTSUP, "any source");
    ASSERT_ERR(distc_send(NULL, g_pg, dv, 0, 0, NULL), DISTC_EINVAL, "this rank");
    dev_free(dv);
    dt_tensor_free(h);
}

/* Debug mode on nccl: the calls are compared in a host group of the check's
 * own (call_check.hpp) before NCCL sees them; agreeing calls go through,
 * async and stream-ordered ones included, with the right results. */
static void test_debug_mode(void **state) {
    (void)state;
    distc_pg *pg = nccl_group("debug", 60000, 1);
    DLTensor *h = dt_tensor_1d(DT_F32, 16), *want = dt_tensor_1d(DT_F32, 16);
    fill(h, 3);
    fill(want, 3);
    DLTensor *d = dev_like(h);
    ASSERT_OK(distc_allreduce(NULL, pg, d, DISTC_SUM, NULL));
    distc_work *w = NULL;
    ASSERT_OK(distc_allreduce(&w, pg, d, DISTC_MAX, NULL));
    ASSERT_OK(distc_work_wait(w, -1));
    distc_work_free(w);
    int64_t splits[1] = {16};
    DLTensor *out = dev_like(h);
    ASSERT_OK(distc_alltoall_single(NULL, pg, out, d, splits, splits, NULL));
    download(h, out);
    expect_scaled("debug mode's alltoall_single", h, want, 1);
    dev_free(out);
    dev_free(d);
    dt_tensor_free(h);
    dt_tensor_free(want);
    distc_pg_free(pg);
}

static void test_split_and_bytes(void **state) {
    (void)state;
    distc_pg *sub = NULL;
    ASSERT_OK(distc_pg_split(&sub, g_pg, 0, 0, NULL));
    assert_non_null(sub);
    DLTensor *h = dt_tensor_1d(DT_F64, 33), *want = dt_tensor_1d(DT_F64, 33);
    fill(h, 2);
    fill(want, 2);
    DLTensor *dv = dev_like(h);
    ASSERT_OK(distc_allreduce(NULL, sub, dv, DISTC_MAX, NULL));
    download(h, dv);
    expect_scaled("allreduce on a split", h, want, 1);
    distc_pg *none = NULL;
    ASSERT_OK(distc_pg_split(&none, g_pg, DISTC_SPLIT_NOCOLOR, 0, NULL));
    assert_null(none);
    distc_buf out[1];
    ASSERT_OK(distc_all_gather_bytes(out, sub, "gpu", 3, NULL));
    assert_int_equal(out[0].size, 3);
    distc_buf_dispose(&out[0]);
    distc_pg_free(sub);
    dev_free(dv);
    dt_tensor_free(h);
    dt_tensor_free(want);
}

static void CUDART_CB sleep_host(void *arg) { usleep((useconds_t)(intptr_t)arg); }

/* A group, a stream of its own and 64 floats on the device: what the
 * watchdog tests hold up. */
typedef struct watched {
    distc_pg *pg;
    cudaStream_t s;
    DLTensor *h, *dv;
    distc_op_options oo; /* on s */
} watched;

static watched watched_open(const char *name) {
    watched w;
    w.pg = nccl_group(name, 60000, -1);
    CUDA_OK(cudaStreamCreateWithFlags(&w.s, cudaStreamNonBlocking));
    w.h = dt_tensor_1d(DT_F32, 64);
    w.dv = dev_like(w.h);
    w.oo = (distc_op_options)DISTC_OP_OPTIONS_INIT;
    w.oo.stream = w.s;
    return w;
}

/* The stream is held for `us` on the host. */
static void hold_stream(watched *w, long us) { CUDA_OK(cudaLaunchHostFunc(w->s, sleep_host, (void *)(intptr_t)us)); }

static void watched_close(watched *w) {
    CUDA_OK(cudaStreamSynchronize(w->s));
    distc_pg_free(w->pg);
    cudaStreamDestroy(w->s);
    dev_free(w->dv);
    dt_tensor_free(w->h);
}

static void test_watchdog_timeout(void **state) {
    (void)state;
    watched x = watched_open("timeout_pg");
    distc_pg *pg = x.pg;
    DLTensor *dv = x.dv;
    /* The stream is held for 3 s; the allreduce behind it has 300 ms. */
    hold_stream(&x, 3000000);
    distc_op_options oo = x.oo;
    oo.timeout_ms = 300;
    distc_work *w = NULL;
    ASSERT_OK(distc_allreduce(&w, pg, dv, DISTC_SUM, &oo));
    ASSERT_ERR(distc_work_wait(w, 10000), DISTC_ETIMEOUT, "timed out");
    dt_assert_contains(distc_error_last(), "aborted");
    distc_work_free(w);
    ASSERT_ERR(distc_allreduce(NULL, pg, dv, DISTC_SUM, &oo), DISTC_EABORTED, "aborted");
    watched_close(&x);
}

/* Blocking calls return once enqueued; one stuck behind a stream still trips
 * the watchdog, and the next call says what timed out. */
static void test_blocking_calls_are_watched(void **state) {
    (void)state;
    watched x = watched_open("detached_pg");
    distc_pg *pg = x.pg;
    DLTensor *dv = x.dv;
    distc_op_options oo = x.oo;
    for (int i = 0; i < 50; ++i) ASSERT_OK(distc_allreduce(NULL, pg, dv, DISTC_SUM, &oo));
    CUDA_OK(cudaStreamSynchronize(x.s));
    hold_stream(&x, 2500000);
    oo.timeout_ms = 300;
    for (int i = 0; i < 3; ++i) ASSERT_OK(distc_allreduce(NULL, pg, dv, DISTC_SUM, &oo));
    int rc = 0;
    for (int i = 0; i < 200 && rc == 0; ++i) { /* up to 2 s for the watchdog */
        usleep(10000);
        rc = distc_barrier(NULL, pg, NULL);
    }
    assert_int_equal(rc, DISTC_EABORTED);
    dt_assert_contains(distc_error_last(), "timed out");
    watched_close(&x);
}

/* The flight recorder on nccl: completed collectives are recorded, and one
 * the watchdog times out writes the trace into DISTC_TRACE_DIR by itself. */
static void test_flight_recorder(void **state) {
    (void)state;
    char *dir = dt_temp_path("nccl-trace");
    assert_int_equal(mkdir(dir, 0700), 0);
    setenv("DISTC_TRACE_DIR", dir, 1);
    watched x = watched_open("traced_pg");
    distc_pg *pg = x.pg;
    DLTensor *dv = x.dv;
    distc_op_options oo = x.oo;
    for (int i = 0; i < 3; ++i) ASSERT_OK(distc_allreduce(NULL, pg, dv, DISTC_SUM, &oo));
    CUDA_OK(cudaStreamSynchronize(x.s));
    hold_stream(&x, 2000000);
    oo.timeout_ms = 300;
    distc_work *w = NULL;
    ASSERT_OK(distc_allreduce(&w, pg, dv, DISTC_SUM, &oo));
    ASSERT_ERR(distc_work_wait(w, 10000), DISTC_ETIMEOUT, "timed out");
    distc_work_free(w);
    unsetenv("DISTC_TRACE_DIR");
    char cmd[4200], text[1 << 16] = {0};
    size_t len = 0;
    /* The failure is seen before the dump is written (a waiter may spin on
     * the work): up to 5 s for the file. */
    snprintf(cmd, sizeof cmd, "cat %s/distc-trace-rank0-*.jsonl 2>/dev/null", dir);
    for (int i = 0; i < 50 && len == 0; ++i) {
        FILE *p = popen(cmd, "r");
        assert_non_null(p);
        len = fread(text, 1, sizeof text - 1, p);
        pclose(p);
        if (!len) usleep(100000);
    }
    text[len] = 0;
    dt_assert_contains(text, "\"group\":\"traced_pg\"");
    dt_assert_contains(text, "\"backend\":\"nccl\"");
    dt_assert_contains(text, "\"op\":\"allreduce\",\"dtype\":\"float32\",\"numel\":64");
    dt_assert_contains(text, "\"state\":\"completed\"");
    dt_assert_contains(text, "\"state\":\"failed\"");
    dt_assert_contains(text, "timed out");
    watched_close(&x);
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
    free(dir);
}

static void test_abort_wakes_waiters(void **state) {
    (void)state;
    distc_pg *pg = nccl_group("abort_pg", 60000, -1);
    cudaStream_t s;
    CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    DLTensor *h = dt_tensor_1d(DT_F32, 64);
    DLTensor *dv = dev_like(h);
    CUDA_OK(cudaLaunchHostFunc(s, sleep_host, (void *)(intptr_t)2000000));
    distc_op_options oo = DISTC_OP_OPTIONS_INIT;
    oo.stream = s;
    distc_work *w = NULL;
    ASSERT_OK(distc_allreduce(&w, pg, dv, DISTC_SUM, &oo));
    ASSERT_OK(distc_pg_abort(pg));
    ASSERT_ERR(distc_work_wait(w, 10000), DISTC_EABORTED, "distc_pg_abort");
    distc_work_free(w);
    CUDA_OK(cudaStreamSynchronize(s));
    distc_pg_free(pg);
    cudaStreamDestroy(s);
    dev_free(dv);
    dt_tensor_free(h);
}

static int setup(void **state) {
    (void)state;
    g_pg = nccl_group("gpu_tests", 60000, -1);
    return 0;
}

static int teardown(void **state) {
    (void)state;
    distc_pg_free(g_pg);
    return 0;
}

int main(void) {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
        /* Without a device the plugin still loads and says why it cannot start. */
        distc_store *st = NULL;
        distc_pg_options o = DISTC_PG_OPTIONS_INIT;
        o.backend = "nccl";
        distc_pg *pg = NULL;
        int rc = distc_store_new_hash(&st) == 0 ? distc_pg_new(&pg, st, 0, 1, &o) : -999;
        distc_store_free(st);
        if (rc != DISTC_EBACKEND || !strstr(distc_error_last(), "no CUDA device")) {
            printf("FAIL: an nccl group without a GPU gave %d: %s\n", rc, distc_error_last());
            distc_pg_free(pg);
            return 1;
        }
        printf("SKIP: no CUDA device here (the nccl backend says: %s); its GPU tests run where one is present\n",
               distc_error_last());
        return 77;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_allreduce_every_dtype_and_op),
        cmocka_unit_test(test_rooted_and_data_movement),
        cmocka_unit_test(test_coalesced_and_empty),
        cmocka_unit_test(test_streams_and_work),
        cmocka_unit_test(test_reducer_on_device),
        cmocka_unit_test(test_bad_arguments),
        cmocka_unit_test(test_split_and_bytes),
        cmocka_unit_test(test_debug_mode),
        cmocka_unit_test(test_watchdog_timeout),
        cmocka_unit_test(test_blocking_calls_are_watched),
        cmocka_unit_test(test_abort_wakes_waiters),
        cmocka_unit_test(test_flight_recorder),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}

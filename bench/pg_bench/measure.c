/* distc-pg-bench's procedure for one (op, size) row (steps 1 to 5 of
 * pg_bench.c's comment) with the call it times, and the memcpy anchor. */
#define _POSIX_C_SOURCE 200809L
#include "bench.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* One initializer, not a memset and then the fields: a compiler made that a
 * load of bytes the stores before it had not finished writing, which waits
 * for every store this rank made before, the last call's into a ring whose
 * line the reader holds too (a cache-line trip charged to each call). */
static DLTensor tensor_f32(float *data, int64_t *shape) {
    DLTensor t = {.data = data,
                  .device = {.device_type = kDLCPU, .device_id = 0},
                  .ndim = 1,
                  .dtype = {.code = kDLFloat, .bits = 32, .lanes = 1},
                  .shape = shape,
                  .strides = NULL,
                  .byte_offset = 0};
    return t;
}

/* One call of `op` on `count` floats (per rank for allgather). */
static int one(bench *b, int op, int64_t count) {
#ifdef PG_BENCH_MPI
    int c = (int)count;
    /* --in-place: MPI_IN_PLACE where MPI has it (the input is already where
     * fill_check put it: the rank's slot of the output, the root's, or the output). */
    const int ip = b->cfg->in_place;
    const void *send_in = ip ? MPI_IN_PLACE : (const void *)b->buf;
    switch (op) {
        case OP_ALLREDUCE:
            return MPI_Allreduce(MPI_IN_PLACE, b->buf, c, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD) != MPI_SUCCESS;
        case OP_BROADCAST: return MPI_Bcast(b->buf, c, MPI_FLOAT, 0, MPI_COMM_WORLD) != MPI_SUCCESS;
        case OP_ALLGATHER:
            return MPI_Allgather(send_in, c, MPI_FLOAT, b->out, c, MPI_FLOAT, MPI_COMM_WORLD) != MPI_SUCCESS;
        case OP_REDUCE_SCATTER:
            return MPI_Reduce_scatter_block(ip ? MPI_IN_PLACE : (const void *)b->out, ip ? b->out : b->buf, c,
                                            MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD) != MPI_SUCCESS;
        case OP_ALLTOALL:
            return MPI_Alltoall(ip ? MPI_IN_PLACE : (const void *)b->out, c, MPI_FLOAT, b->buf, c, MPI_FLOAT,
                                MPI_COMM_WORLD) != MPI_SUCCESS;
        case OP_GATHER:
            return MPI_Gather(ip && b->rank == 0 ? MPI_IN_PLACE : (const void *)b->buf, c, MPI_FLOAT, b->out, c,
                              MPI_FLOAT, 0, MPI_COMM_WORLD) != MPI_SUCCESS;
        case OP_SCATTER:
            return MPI_Scatter(b->out, c, MPI_FLOAT, ip && b->rank == 0 ? MPI_IN_PLACE : (void *)b->buf, c, MPI_FLOAT,
                               0, MPI_COMM_WORLD) != MPI_SUCCESS;
        case OP_SENDRECV:
            return MPI_Sendrecv(b->buf, c, MPI_FLOAT, (b->rank + 1) % b->size, 0, b->out, c, MPI_FLOAT,
                                (b->rank + b->size - 1) % b->size, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE) != MPI_SUCCESS;
        default: return MPI_Barrier(MPI_COMM_WORLD) != MPI_SUCCESS;
    }
#endif
    switch (op) {
        case OP_ALLREDUCE: {
            b->shape = count;
            DLTensor t = tensor_f32(b->buf, &b->shape);
            return distc_allreduce(NULL, b->pg, &t, DISTC_SUM, NULL);
        }
        case OP_BROADCAST: {
            b->shape = count;
            DLTensor t = tensor_f32(b->buf, &b->shape);
            return distc_broadcast(NULL, b->pg, &t, 0, NULL);
        }
        case OP_ALLGATHER:
        case OP_GATHER:
        case OP_SCATTER: { /* the list of parts: views of one buffer, distc's zero-copy case */
            b->shape = count;
            b->view_shape = count;
            DLTensor mine = tensor_f32(in_place_output(b, op, count, in_place_input(b, op, count, b->buf)), &b->shape);
            for (int32_t r = 0; r < b->size; ++r) {
                b->views[r] = tensor_f32(b->out + (size_t)r * (size_t)count, &b->view_shape);
                b->view_ptrs[r] = &b->views[r];
            }
            if (op == OP_ALLGATHER) return distc_allgather(NULL, b->pg, b->view_ptrs, &mine, NULL);
            return op == OP_GATHER ? distc_gather(NULL, b->pg, b->view_ptrs, &mine, 0, NULL)
                                   : distc_scatter(NULL, b->pg, &mine, (const DLTensor *const *)b->view_ptrs, 0, NULL);
        }
        case OP_REDUCE_SCATTER: {
            b->shape = count;
            b->view_shape = count * b->size;
            DLTensor out = tensor_f32(in_place_output(b, op, count, b->buf), &b->shape),
                     in = tensor_f32(b->out, &b->view_shape);
            return distc_reduce_scatter_tensor(NULL, b->pg, &out, &in, DISTC_SUM, NULL);
        }
        case OP_ALLTOALL: {
            b->shape = count * b->size;
            DLTensor out = tensor_f32(b->buf, &b->shape),
                     in = tensor_f32(b->cfg->in_place ? b->buf : b->out, &b->shape);
            return distc_alltoall_single(NULL, b->pg, &out, &in, NULL, NULL, NULL);
        }
        case OP_SENDRECV: {
            b->shape = count;
            if (b->size == 1) { /* nobody to send to: the copy stands for it */
                memcpy(b->out, b->buf, (size_t)count * sizeof(float));
                return 0;
            }
            DLTensor snd = tensor_f32(b->buf, &b->shape), rcv = tensor_f32(b->out, &b->shape);
            distc_p2p_op ops[2] = {{DISTC_P2P_SEND, &snd, (b->rank + 1) % b->size, 0},
                                   {DISTC_P2P_RECV, &rcv, (b->rank + b->size - 1) % b->size, 0}};
            return distc_batch_isend_irecv(NULL, b->pg, ops, 2, NULL);
        }
        default: return distc_barrier(NULL, b->pg, NULL);
    }
}

static int barrier(bench *b) {
#ifdef PG_BENCH_MPI
    (void)b;
    return MPI_Barrier(MPI_COMM_WORLD) != MPI_SUCCESS;
#else
    return distc_barrier(NULL, b->pg, NULL);
#endif
}

/* A 1-d float64 tensor of *n elements at v (the timings the ranks agree on). */
static DLTensor f64_tensor(double *v, int64_t *n) {
    DLTensor t;
    memset(&t, 0, sizeof t);
    t.data = v;
    t.device.device_type = kDLCPU;
    t.ndim = 1;
    t.dtype.code = kDLFloat;
    t.dtype.bits = 64;
    t.dtype.lanes = 1;
    t.shape = n;
    return t;
}

/* Every rank gets rank 0's `*v`. */
static int agree(bench *b, double *v) {
#ifdef PG_BENCH_MPI
    return MPI_Bcast(v, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD) != MPI_SUCCESS;
#endif
    int64_t one_ = 1;
    DLTensor t = f64_tensor(v, &one_);
    CHECK(distc_broadcast(NULL, b->pg, &t, 0, NULL));
    return 0;
}

/* v[0] = max over ranks of v[0], v[1] = min over ranks of v[1]. */
static int max_min(bench *b, double v[2]) {
    int64_t two = 2;
    double w[2] = {v[0], -v[1]};
#ifdef PG_BENCH_MPI
    (void)two;
    if (MPI_Allreduce(MPI_IN_PLACE, w, 2, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD) != MPI_SUCCESS) return 1;
    v[0] = w[0];
    v[1] = -w[1];
    return 0;
#endif
    DLTensor t = f64_tensor(w, &two);
    CHECK(distc_allreduce(NULL, b->pg, &t, DISTC_MAX, NULL));
    v[0] = w[0];
    v[1] = -w[1];
    return 0;
}

static int64_t clamp64(double x, int64_t lo, int64_t hi) {
    if (!(x >= (double)lo)) return lo; /* NaN too */
    if (x >= (double)hi) return hi;
    return (int64_t)x;
}

int run_one(bench *b, int op, int64_t count, int64_t size_bytes, result *r) {
    const config *cfg = b->cfg;
    int64_t n = b->size;
    size_t all = (size_t)(count * n);
    size_t n_out = per_peer(op) ? all : op == OP_SENDRECV ? (size_t)count : 0;
    if (op != OP_BARRIER && reserve(b, op == OP_ALLTOALL ? all : (size_t)count, n_out)) return 1;

    /* 1. check */
    fill_check(b, op, count);
    CHECK(one(b, op, count));
    int bad = verify(b, op, count, size_bytes);
    if (bad) return bad;

    /* The timed calls work on zeros. */
    if (op != OP_BARRIER) memset(b->buf, 0, (op == OP_ALLTOALL ? all : (size_t)count) * sizeof(float));
    if (n_out) memset(b->out, 0, n_out * sizeof(float));

    /* 2. probe (after a barrier: rank 0 must not time its peers' checking) */
    CHECK(barrier(b));
    double t0 = now_s();
    CHECK(one(b, op, count));
    double probe = now_s() - t0;
    if (agree(b, &probe)) return 1;
    if (probe < 1e-7) probe = 1e-7;

    /* 3. warm-up, 4. timed loop */
    double box = cfg->time_ms / 1e3;
    int64_t warmup = cfg->time_ms > 0 ? clamp64(box / 4 / probe, 0, cfg->warmup) : cfg->warmup;
    int64_t iters = cfg->time_ms > 0 ? clamp64(box / probe, cfg->min_iters, cfg->iters) : cfg->iters;
    if (iters > cfg->iters) iters = cfg->iters;
    if (warmup > 0) { /* a better estimate than one call: the warm-up's mean, rank 0's again */
        t0 = now_s();
        for (int64_t i = 0; i < warmup; ++i) CHECK(one(b, op, count));
        double est = (now_s() - t0) / (double)warmup;
        if (agree(b, &est)) return 1;
        if (cfg->time_ms > 0) iters = clamp64(box / (est < 1e-7 ? 1e-7 : est), cfg->min_iters, cfg->iters);
        /* A few first calls can be far slower than the rest (a peer that
         * slept, pages faulted in): calls for an eighth of the box at that
         * estimate, then their mean, so that the timed window fills the box. */
        int64_t settle = cfg->time_ms > 0 ? clamp64(box / 8 / (est < 1e-7 ? 1e-7 : est), 0, cfg->iters) : 0;
        if (settle > warmup) {
            t0 = now_s();
            for (int64_t i = 0; i < settle; ++i) CHECK(one(b, op, count));
            est = (now_s() - t0) / (double)settle;
            if (agree(b, &est)) return 1;
            iters = clamp64(box / (est < 1e-7 ? 1e-7 : est), cfg->min_iters, cfg->iters);
            warmup += settle;
        }
    }
    /* --reps windows; the median window's mean resists this VM's bimodal latency. */
    double win[16];
    int64_t reps = cfg->reps;
    for (int64_t w = 0; w < reps; ++w) {
        CHECK(barrier(b));
        t0 = now_s();
        for (int64_t i = 0; i < iters; ++i) CHECK(one(b, op, count));
        win[w] = (now_s() - t0) / (double)iters;
    }
    for (int64_t i = 1; i < reps; ++i) /* insertion sort: at most 16 windows */
        for (int64_t j = i; j > 0 && win[j - 1] > win[j]; --j) {
            double tmp = win[j];
            win[j] = win[j - 1];
            win[j - 1] = tmp;
        }
    double avg = win[reps / 2];

    /* 5. the slowest and fastest rank */
    double mm[2] = {avg, avg};
    if (max_min(b, mm)) return 1;

    r->size_bytes = size_bytes;
    r->count = per_peer(op) ? count * n : (op == OP_BARRIER ? 0 : count);
    r->iters = iters;
    r->warmup = warmup;
    r->time_us = mm[0] * 1e6;
    r->time_us_min = mm[1] * 1e6;
    double factor = op == OP_ALLREDUCE ? 2.0 * (double)(n - 1) / (double)n
                    : per_peer(op)     ? (double)(n - 1) / (double)n
                                       : 1.0;
    r->algbw = op == OP_BARRIER ? 0.0 : (double)size_bytes / mm[0] / 1e9;
    r->busbw = r->algbw * factor;
    return 0;
}

/* ------------------------------------------------------------------ memcpy */

/* The anchor for bandwidth: one core's memcpy of each size, between two
 * buffers touched before (no page faults), timed as the collectives are
 * (a probe, then the median of --reps windows of calls within --time-ms). */
static volatile unsigned char g_sink;

int memcpy_rows(const config *cfg) {
    size_t max = (size_t)cfg->max_bytes;
    unsigned char *src = page_alloc(max), *dst = page_alloc(max);
    if (!src || !dst) return 1;
    memset(src, 1, max);
    memset(dst, 0, max);
    for (int64_t s = cfg->min_bytes;;) {
        size_t n = (size_t)s;
        double t0 = now_s();
        memcpy(dst, src, n);
        double probe = now_s() - t0;
        if (probe < 1e-8) probe = 1e-8;
        int64_t iters = cfg->time_ms > 0 ? clamp64(cfg->time_ms / 1e3 / probe, cfg->min_iters, cfg->iters) : cfg->iters;
        double win[16];
        for (int64_t w = 0; w < cfg->reps; ++w) {
            t0 = now_s();
            for (int64_t i = 0; i < iters; ++i) {
                memcpy(dst, src, n);
                g_sink = dst[i % (int64_t)n]; /* the copy must happen */
            }
            win[w] = (now_s() - t0) / (double)iters;
        }
        for (int64_t i = 1; i < cfg->reps; ++i)
            for (int64_t j = i; j > 0 && win[j - 1] > win[j]; --j) {
                double tmp = win[j];
                win[j] = win[j - 1];
                win[j - 1] = tmp;
            }
        double t = win[cfg->reps / 2];
        if (cfg->json)
            printf(
                "{\"impl\": \"memcpy\", \"op\": \"memcpy\", \"size_bytes\": %lld, \"count\": %lld, \"ranks\": 1, "
                "\"iters\": %lld, \"time_us\": %.4f, \"time_us_min\": %.4f, \"algbw_gbps\": %.6f, "
                "\"busbw_gbps\": %.6f}\n",
                (long long)s, (long long)(s / 4), (long long)iters, t * 1e6, t * 1e6, (double)s / t / 1e9,
                (double)s / t / 1e9);
        else
            printf("%-9s %12lld %12lld %8lld %11.3f %11s %9.4f\n", "memcpy", (long long)s, (long long)(s / 4),
                   (long long)iters, t * 1e6, "", (double)s / t / 1e9);
        fflush(stdout);
        if (s >= cfg->max_bytes) break;
        s = s > cfg->max_bytes / cfg->factor ? cfg->max_bytes : s * cfg->factor;
    }
    free(src);
    free(dst);
    return 0;
}

/* distc-pg-bench: one rank of a collective benchmark over a distc process group.
 *
 *   distc-pg-bench [--rank R --size N --port P [--host ADDR]]
 *                  [-o allreduce|broadcast|allgather|reduce_scatter|alltoall|gather|scatter|sendrecv|barrier|all[,...]]
 *                  [-b 8] [-e 64M] [-f 2] [--iters N] [--warmup N]
 *                  [--time-ms T] [--min-iters N] [--reps R] [--timeout-ms MS] [--json]
 *
 * Start one process per rank. Without --rank/--size/--port the ranks meet
 * through distc_pg_new_from_url("env://") (RANK, WORLD_SIZE, MASTER_ADDR,
 * MASTER_PORT, as torchrun sets them; rank 0 serves the TCP store); with
 * them through "tcp://ADDR:P?rank=R&world_size=N" (rank 0 serves on P).
 * bench/compare starts the ranks and compares distc with raw Gloo
 * (bench/gloo_bench.cpp) and torch.distributed (bench/pg_torch.py), which
 * follow exactly this procedure.
 *
 * Sizes go from -b to -e (K, M, G: powers of 1024), times -f each step, and
 * -e itself when the steps miss it. Data is float32; as in nccl-tests, the
 * size of allgather and gather is the gathered output (size / ranks from each
 * rank), of scatter the root's input (size / ranks to each rank), of
 * reduce_scatter the input (size / ranks to each rank), of alltoall what
 * each rank sends in all, rounded down to whole floats per rank (at least
 * one), of sendrecv what each rank sends to the next rank (in one batch with
 * its receive from the previous), and sizes that round to the one before are skipped. broadcast's, gather's and scatter's root is rank 0. Every call is
 * blocking (out == NULL): the operation runs on the calling thread. Collectives
 * up to DISTC_MESH_BYTES (a library setting, every size by default; 0 turns
 * it off) take distc's own TCP mesh, larger ones Gloo's algorithms; the
 * allgather outputs are views of one buffer, distc's zero-copy case.
 *
 * For each (op, size):
 *   1. check: one call on rank-dependent data, verified element by element
 *      on every rank (a wrong element exits 3);
 *   2. probe: a barrier, then one call, timed; rank 0's time is broadcast (a float64 tensor)
 *      so that every rank derives the same iteration counts from it;
 *   3. warm-up: min(--warmup, time-ms / 4 / probe) calls; when there are
 *      any, rank 0's mean of them is broadcast and replaces the probe; then,
 *      with --time-ms, as many more as that estimate fits in time-ms / 8,
 *      whose mean replaces it again (a few slow first calls must not
 *      shorten the timed window);
 *   4. a barrier, then iters = min(--iters, max(--min-iters, time-ms / probe))
 *      timed calls back to back (--time-ms 0: always --iters);
 *   5. time_us = the per-call average of the slowest rank (an allreduce MAX
 *      of every rank's own average; time_us_min is the fastest rank's).
 * The timed loops run on zeroed buffers (nothing to overflow or denormalise).
 * algbw = size / time, busbw = algbw x nccl-tests' factor: allreduce
 * 2(n-1)/n, allgather, reduce_scatter, alltoall, gather and scatter (n-1)/n, broadcast and sendrecv 1
 * (GB = 1e9 bytes). barrier has one
 * row of size 0 and no bandwidth.
 *
 * Rank 0 prints the rows (nccl-tests-like columns, or one JSON object per row
 * with --json); other ranks print only errors. Timings are printed, never
 * judged: the exit status is 0, 1 (a call failed), 2 (usage) or 3 (a wrong
 * result).
 *
 * --backend NAME runs distc over another backend ("mpi": start it with
 * mpirun; the ranks come from mpi://). Built with PG_BENCH_MPI this file is
 * mpi-raw-bench instead: the same procedure on plain MPI calls, the anchor
 * for distc's mpi backend. */
#define _POSIX_C_SOURCE 200809L
#include <distc.h>
#ifdef PG_BENCH_MPI
#include <mpi.h>
#define BENCH_NAME "mpi-raw-bench"
#else
#define BENCH_NAME "distc-pg-bench"
#endif

#include "json_out.h"
#include "size_arg.h"
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

enum {
    OP_ALLREDUCE,
    OP_BROADCAST,
    OP_ALLGATHER,
    OP_REDUCE_SCATTER,
    OP_ALLTOALL,
    OP_GATHER,
    OP_SCATTER,
    OP_SENDRECV,
    OP_BARRIER,
    N_OPS
};
static const char *const op_names[N_OPS] = {"allreduce", "broadcast", "allgather", "reduce_scatter", "alltoall",
                                            "gather",    "scatter",   "sendrecv",  "barrier"};
/* Sized by what a rank holds in all (its output, or its input; gather's and
 * scatter's root): `count` floats per peer. */
static int per_peer(int op) {
    return op == OP_ALLGATHER || op == OP_REDUCE_SCATTER || op == OP_ALLTOALL || op == OP_GATHER || op == OP_SCATTER;
}

typedef struct config {
    int32_t rank, size, port; /* -1: from the environment */
    const char *host;
    const char *backend; /* distc's backend: gloo, mpi, ... */
    int ops[N_OPS];
    int n_ops;
    int64_t min_bytes, max_bytes, factor;
    int64_t iters, warmup, min_iters, reps;
    double time_ms;
    int64_t timeout_ms;
    int json;
    int memcpy_only; /* --memcpy: time memcpy of each size instead, one process */
} config;

static double now_s(void) {
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

/* ------------------------------------------------------------------ state */

typedef struct bench {
    const config *cfg;
    distc_pg *pg;
    int32_t rank, size;
    /* buf: allreduce/broadcast tensor, allgather input, reduce_scatter and alltoall output, what sendrecv sends;
     * out: allgather output, reduce_scatter and alltoall input (`size` blocks), what sendrecv receives */
    float *buf, *out;
    size_t cap_buf, cap_out;
    DLTensor *views; /* allgather outputs: views of `out` */
    DLTensor **view_ptrs;
    int64_t view_shape;
    int64_t shape;
} bench;

#define CHECK(call)                                                                                            \
    do {                                                                                                       \
        if ((call) != 0) {                                                                                     \
            fprintf(stderr, BENCH_NAME ": rank %d: %s failed: %s\n", (int)b->rank, #call, distc_error_last()); \
            return 1;                                                                                          \
        }                                                                                                      \
    } while (0)

/* Buffers start on a page, as OSU's benchmarks do. With plain malloc, which
 * a process got depended on what it had freed before: from the heap, two
 * buffers lie 16 bytes off each other's cache-line alignment, from mmap
 * they line up, and a copy between buffers that do not line up loads across
 * lines (bench/results/buffer_alignment.txt). The implementations compared
 * must see the same alignment: here distc's ranks had heap buffers and
 * Open MPI's mmap'd ones. */
static void *page_alloc(size_t n) {
    void *p = NULL;
    return posix_memalign(&p, 4096, n ? n : 1) == 0 ? p : NULL;
}

static int reserve(bench *b, size_t n_buf, size_t n_out) {
    if (n_buf > b->cap_buf) {
        free(b->buf);
        b->buf = (float *)page_alloc(n_buf * sizeof(float));
        b->cap_buf = b->buf ? n_buf : 0;
    }
    if (n_out > b->cap_out) {
        free(b->out);
        b->out = (float *)page_alloc(n_out * sizeof(float));
        b->cap_out = b->out ? n_out : 0;
    }
    if ((n_buf && !b->buf) || (n_out && !b->out)) {
        fprintf(stderr, "distc-pg-bench: rank %d: out of memory\n", (int)b->rank);
        return 1;
    }
    return 0;
}

/* One call of `op` on `count` floats (per rank for allgather). */
static int one(bench *b, int op, int64_t count) {
#ifdef PG_BENCH_MPI
    int c = (int)count;
    switch (op) {
        case OP_ALLREDUCE:
            return MPI_Allreduce(MPI_IN_PLACE, b->buf, c, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD) != MPI_SUCCESS;
        case OP_BROADCAST: return MPI_Bcast(b->buf, c, MPI_FLOAT, 0, MPI_COMM_WORLD) != MPI_SUCCESS;
        case OP_ALLGATHER:
            return MPI_Allgather(b->buf, c, MPI_FLOAT, b->out, c, MPI_FLOAT, MPI_COMM_WORLD) != MPI_SUCCESS;
        case OP_REDUCE_SCATTER:
            return MPI_Reduce_scatter_block(b->out, b->buf, c, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD) != MPI_SUCCESS;
        case OP_ALLTOALL:
            return MPI_Alltoall(b->out, c, MPI_FLOAT, b->buf, c, MPI_FLOAT, MPI_COMM_WORLD) != MPI_SUCCESS;
        case OP_GATHER: return MPI_Gather(b->buf, c, MPI_FLOAT, b->out, c, MPI_FLOAT, 0, MPI_COMM_WORLD) != MPI_SUCCESS;
        case OP_SCATTER:
            return MPI_Scatter(b->out, c, MPI_FLOAT, b->buf, c, MPI_FLOAT, 0, MPI_COMM_WORLD) != MPI_SUCCESS;
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
            DLTensor mine = tensor_f32(b->buf, &b->shape);
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
            DLTensor out = tensor_f32(b->buf, &b->shape), in = tensor_f32(b->out, &b->view_shape);
            return distc_reduce_scatter_tensor(NULL, b->pg, &out, &in, DISTC_SUM, NULL);
        }
        case OP_ALLTOALL: {
            b->shape = count * b->size;
            DLTensor out = tensor_f32(b->buf, &b->shape), in = tensor_f32(b->out, &b->shape);
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

/* Rank-dependent inputs of the check call. Small integers: exact in float. */
static void fill_check(bench *b, int op, int64_t count) {
    if (op == OP_SCATTER) { /* the root's part for rank r: as if r had it (allgather's values) */
        for (int64_t j = 0; j < count * b->size; ++j)
            b->out[j] = b->rank == 0 ? (float)((j / count) * 1000) + (float)((j % count) % 13) : -2.0f;
        for (int64_t i = 0; i < count; ++i) b->buf[i] = -1.0f;
        return;
    }
    if (op == OP_REDUCE_SCATTER || op == OP_ALLTOALL) {
        for (int64_t j = 0; j < count * b->size; ++j) {
            b->out[j] =
                op == OP_ALLTOALL ? (float)(b->rank * 1000) + (float)(j % 13) : (float)(b->rank + 1) + (float)(j % 7);
            if (op == OP_ALLTOALL) b->buf[j] = -1.0f;
        }
        return;
    }
    float *x = b->buf;
    for (int64_t i = 0; i < count; ++i) {
        switch (op) {
            case OP_ALLREDUCE: x[i] = (float)(b->rank + 1) + (float)(i % 7); break;
            case OP_BROADCAST: x[i] = b->rank == 0 ? (float)(i % 251) + 1.0f : -1.0f; break;
            case OP_ALLGATHER:
            case OP_GATHER:
            case OP_SENDRECV: x[i] = (float)(b->rank * 1000) + (float)(i % 13); break;
            default: break;
        }
    }
    if (op == OP_ALLGATHER || op == OP_GATHER || op == OP_SENDRECV)
        for (int64_t i = 0; i < (op == OP_SENDRECV ? count : count * b->size); ++i) b->out[i] = -1.0f;
}

static int verify(bench *b, int op, int64_t count, int64_t size_bytes) {
    int64_t n = b->size;
    int64_t check = op == OP_ALLGATHER || op == OP_ALLTOALL ? count * n : count;
    if (op == OP_GATHER) check = b->rank == 0 ? count * n : 0; /* only the root gets anything */
    for (int64_t i = 0; i < check; ++i) {
        float got, want;
        switch (op) {
            case OP_ALLREDUCE:
                got = b->buf[i];
                want = (float)(n * (n + 1) / 2) + (float)(n * (i % 7));
                break;
            case OP_BROADCAST:
                got = b->buf[i];
                want = (float)(i % 251) + 1.0f;
                break;
            case OP_ALLGATHER:
            case OP_GATHER:
                got = b->out[i];
                want = (float)((i / count) * 1000) + (float)((i % count) % 13);
                break;
            case OP_REDUCE_SCATTER: /* element i of this rank's block of the input */
                got = b->buf[i];
                want = (float)(n * (n + 1) / 2) + (float)(n * ((b->rank * count + i) % 7));
                break;
            case OP_ALLTOALL: /* from rank i / count: its block for this rank */
                got = b->buf[i];
                want = (float)((i / count) * 1000) + (float)((b->rank * count + i % count) % 13);
                break;
            case OP_SCATTER: /* the root's part for this rank */
                got = b->buf[i];
                want = (float)(b->rank * 1000) + (float)(i % 13);
                break;
            case OP_SENDRECV: /* from the previous rank */
                got = b->out[i];
                want = (float)(((b->rank + n - 1) % n) * 1000) + (float)(i % 13);
                break;
            default: return 0;
        }
        if (got != want) {
            fprintf(stderr,
                    "distc-pg-bench: rank %d: WRONG RESULT: %s of %lld B over %d ranks: element %lld is %g, "
                    "expected %g\n",
                    (int)b->rank, op_names[op], (long long)size_bytes, (int)n, (long long)i, (double)got, (double)want);
            return 3;
        }
    }
    return 0;
}

static int barrier(bench *b) {
#ifdef PG_BENCH_MPI
    (void)b;
    return MPI_Barrier(MPI_COMM_WORLD) != MPI_SUCCESS;
#else
    return distc_barrier(NULL, b->pg, NULL);
#endif
}

/* Every rank gets rank 0's `*v`. */
static int agree(bench *b, double *v) {
#ifdef PG_BENCH_MPI
    return MPI_Bcast(v, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD) != MPI_SUCCESS;
#endif
    int64_t one_ = 1;
    DLTensor t;
    memset(&t, 0, sizeof t);
    t.data = v;
    t.device.device_type = kDLCPU;
    t.ndim = 1;
    t.dtype.code = kDLFloat;
    t.dtype.bits = 64;
    t.dtype.lanes = 1;
    t.shape = &one_;
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
    DLTensor t;
    memset(&t, 0, sizeof t);
    t.data = w;
    t.device.device_type = kDLCPU;
    t.ndim = 1;
    t.dtype.code = kDLFloat;
    t.dtype.bits = 64;
    t.dtype.lanes = 1;
    t.shape = &two;
    CHECK(distc_allreduce(NULL, b->pg, &t, DISTC_MAX, NULL));
    v[0] = w[0];
    v[1] = -w[1];
    return 0;
}

typedef struct result {
    int64_t size_bytes, count, iters, warmup;
    double time_us, time_us_min, algbw, busbw;
} result;

static int64_t clamp64(double x, int64_t lo, int64_t hi) {
    if (!(x >= (double)lo)) return lo; /* NaN too */
    if (x >= (double)hi) return hi;
    return (int64_t)x;
}

static int run_one(bench *b, int op, int64_t count, int64_t size_bytes, result *r) {
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

/* ------------------------------------------------------------------ options */

static int parse_size(const char *s, int64_t *out) {
    uint64_t v;
    if (size_arg(s, &v)) return -1;
    *out = (int64_t)v;
    return 0;
}

static int parse_int(const char *s, int64_t *out) {
    char *end = NULL;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s || *end) return -1;
    *out = v;
    return 0;
}

static int parse_ops(config *cfg, const char *s) {
    cfg->n_ops = 0;
    char tmp[256];
    snprintf(tmp, sizeof tmp, "%s", s);
    for (char *save = NULL, *tok = strtok_r(tmp, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        if (!strcmp(tok, "all")) {
            for (int op = 0; op < N_OPS; ++op) cfg->ops[op] = op;
            cfg->n_ops = N_OPS;
            continue;
        }
        int found = -1;
        for (int op = 0; op < N_OPS; ++op)
            if (!strcmp(tok, op_names[op])) found = op;
        if (found < 0) return -1;
        int dup = 0;
        for (int i = 0; i < cfg->n_ops; ++i) dup |= cfg->ops[i] == found;
        if (!dup && cfg->n_ops < N_OPS) cfg->ops[cfg->n_ops++] = found;
    }
    return cfg->n_ops ? 0 : -1;
}

static void usage(const char *argv0, FILE *f) {
    fprintf(f,
            "usage: %s [--rank R --size N --port P [--host ADDR]] [-o OPS] [-b MIN] [-e MAX] [-f FACTOR]\n"
            "          [--iters N] [--warmup N] [--min-iters N] [--reps R] [--time-ms T] [--timeout-ms MS] [--json]\n"
            "          [--memcpy]  (one process: memcpy of each size, the bandwidth anchor)\n"
            "  One rank of a collective benchmark; without --rank/--size/--port: env:// (RANK, WORLD_SIZE,\n"
            "  MASTER_ADDR, MASTER_PORT). OPS: allreduce,broadcast,allgather,reduce_scatter,alltoall,\n"
            "  gather, scatter, sendrecv, barrier or all (default all).\n"
            "  Sizes -b 8 to -e 64M (K/M/G = 1024^n), x -f 2 each step. Per size: one checked call, one probe,\n"
            "  then up to --warmup (5) and --iters (1000) calls within --time-ms (100; 0: no time box),\n"
            "  at least --min-iters (2) timed.\n",
            argv0);
}

static int parse_args(config *cfg, int argc, char **argv) {
    memset(cfg, 0, sizeof *cfg);
    cfg->rank = cfg->size = cfg->port = -1;
    cfg->host = "127.0.0.1";
    cfg->backend = "gloo";
    parse_ops(cfg, "all");
    cfg->min_bytes = 8;
    cfg->max_bytes = 64 << 20;
    cfg->factor = 2;
    cfg->iters = 1000;
    cfg->warmup = 5;
    cfg->min_iters = 2;
    cfg->reps = 3;
    cfg->time_ms = 100;
    cfg->timeout_ms = 120000;
    for (int i = 1; i < argc; ++i) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(argv[0], stdout);
            return 1;
        }
        if (!strcmp(a, "--version")) {
            printf("%s\n", distc_version());
            return 1;
        }
        if (!strcmp(a, "--json")) {
            cfg->json = 1;
            continue;
        }
        if (!strcmp(a, "--memcpy")) {
            cfg->memcpy_only = 1;
            continue;
        }
        if (i + 1 >= argc) {
            usage(argv[0], stderr);
            return 2;
        }
        const char *v = argv[++i];
        int64_t x = 0;
        if (!strcmp(a, "--rank") || !strcmp(a, "--size") || !strcmp(a, "--port")) {
            if (parse_int(v, &x) || x < 0 || x > 65535 || (!strcmp(a, "--size") && x < 1)) goto bad;
            if (a[2] == 'r')
                cfg->rank = (int32_t)x;
            else if (a[2] == 's')
                cfg->size = (int32_t)x;
            else
                cfg->port = (int32_t)x;
        } else if (!strcmp(a, "--host")) {
            cfg->host = v;
        } else if (!strcmp(a, "--backend")) {
            cfg->backend = v;
        } else if (!strcmp(a, "-o") || !strcmp(a, "--op") || !strcmp(a, "--ops")) {
            if (parse_ops(cfg, v)) goto bad;
        } else if (!strcmp(a, "-b") || !strcmp(a, "--minbytes")) {
            if (parse_size(v, &cfg->min_bytes) || cfg->min_bytes < 1) goto bad;
        } else if (!strcmp(a, "-e") || !strcmp(a, "--maxbytes")) {
            if (parse_size(v, &cfg->max_bytes) || cfg->max_bytes < 1) goto bad;
        } else if (!strcmp(a, "-f") || !strcmp(a, "--stepfactor")) {
            if (parse_int(v, &cfg->factor) || cfg->factor < 2) goto bad;
        } else if (!strcmp(a, "-n") || !strcmp(a, "--iters")) {
            if (parse_int(v, &cfg->iters) || cfg->iters < 1) goto bad;
        } else if (!strcmp(a, "-w") || !strcmp(a, "--warmup")) {
            if (parse_int(v, &cfg->warmup) || cfg->warmup < 0) goto bad;
        } else if (!strcmp(a, "--min-iters")) {
            if (parse_int(v, &cfg->min_iters) || cfg->min_iters < 1) goto bad;
        } else if (!strcmp(a, "--reps")) {
            if (parse_int(v, &cfg->reps) || cfg->reps < 1 || cfg->reps > 16) goto bad;
        } else if (!strcmp(a, "--time-ms")) {
            char *end = NULL;
            cfg->time_ms = strtod(v, &end);
            if (end == v || *end || !(cfg->time_ms >= 0)) goto bad;
        } else if (!strcmp(a, "--timeout-ms")) {
            if (parse_int(v, &cfg->timeout_ms) || cfg->timeout_ms < 1) goto bad;
        } else {
            usage(argv[0], stderr);
            return 2;
        }
        continue;
    bad:
        fprintf(stderr, "distc-pg-bench: bad %s '%s'\n", a, v);
        return 2;
    }
    if (cfg->max_bytes < cfg->min_bytes) {
        fprintf(stderr, "distc-pg-bench: -e is below -b\n");
        return 2;
    }
    int given = (cfg->rank >= 0) + (cfg->size >= 0) + (cfg->port >= 0);
    if (given != 0 && given != 3) {
        fprintf(stderr, "distc-pg-bench: give all of --rank, --size and --port, or none (env://)\n");
        return 2;
    }
    if (given && cfg->rank >= cfg->size) {
        fprintf(stderr, "distc-pg-bench: --rank must be below --size\n");
        return 2;
    }
    return 0;
}

/* ------------------------------------------------------------------ memcpy */

/* The anchor for bandwidth: one core's memcpy of each size, between two
 * buffers touched before (no page faults), timed as the collectives are
 * (a probe, then the median of --reps windows of calls within --time-ms). */
static volatile unsigned char g_sink;

static int memcpy_rows(const config *cfg) {
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

/* ------------------------------------------------------------------ main */

int main(int argc, char **argv) {
    config cfg;
    int rc = parse_args(&cfg, argc, argv);
    if (rc) return rc == 1 ? 0 : rc;
    if (cfg.memcpy_only) return memcpy_rows(&cfg);

    bench bs;
    bench *b = &bs;
    memset(b, 0, sizeof *b);
    b->cfg = &cfg;
    b->rank = cfg.rank;

    char url[512];
    double t_join = now_s();
#ifdef PG_BENCH_MPI
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided); /* the level distc's mpi backend uses */
    MPI_Comm_rank(MPI_COMM_WORLD, &b->rank);
    MPI_Comm_size(MPI_COMM_WORLD, &b->size);
    snprintf(url, sizeof url, "MPI_COMM_WORLD");
    const char *impl = "mpi";
    char version[MPI_MAX_LIBRARY_VERSION_STRING];
    int vlen = 0;
    MPI_Get_library_version(version, &vlen);
    version[strcspn(version, ",\n")] = 0;
#else
    if (cfg.port >= 0)
        snprintf(url, sizeof url, "tcp://%s:%d?rank=%d&world_size=%d", cfg.host, (int)cfg.port, (int)cfg.rank,
                 (int)cfg.size);
    else
        snprintf(url, sizeof url, strcmp(cfg.backend, "mpi") ? "env://" : "mpi://");
    distc_rendezvous_options ro = DISTC_RENDEZVOUS_OPTIONS_INIT;
    ro.timeout_ms = cfg.timeout_ms;
    distc_pg_options po = DISTC_PG_OPTIONS_INIT;
    po.timeout_ms = cfg.timeout_ms;
    po.group_name = "distc-pg-bench";
    po.backend = cfg.backend;
    if (distc_pg_new_from_url(&b->pg, url, &ro, &po) != 0) {
        fprintf(stderr, "distc-pg-bench: cannot join the group (%s): %s\n", url, distc_error_last());
        return 1;
    }
    CHECK(distc_pg_rank(&b->rank, b->pg));
    CHECK(distc_pg_size(&b->size, b->pg));
    char impl_buf[64];
    snprintf(impl_buf, sizeof impl_buf, strcmp(cfg.backend, "gloo") ? "distc-%s" : "distc", cfg.backend);
    const char *impl = impl_buf;
    const char *version = distc_version();
    const char *transport = "";
    CHECK(distc_pg_transport(&transport, b->pg, (b->rank + 1) % b->size));
#endif
    t_join = now_s() - t_join;
    b->views = (DLTensor *)calloc((size_t)b->size, sizeof *b->views);
    b->view_ptrs = (DLTensor **)calloc((size_t)b->size, sizeof *b->view_ptrs);
    if (!b->views || !b->view_ptrs) return 1;

    long nproc = sysconf(_SC_NPROCESSORS_ONLN);
    int leader = b->rank == 0;
    if (leader && !cfg.json) {
#ifdef PG_BENCH_MPI
        const char *transport = "mpi";
#endif
        printf("# " BENCH_NAME " %s: %d ranks (%s, %s, transport %s), joined in %.0f ms; nproc %ld\n", version,
               (int)b->size, impl, url, transport, t_join * 1e3, nproc);
        printf(
            "# float32 sum; root 0; allgather and gather size = gathered output, scatter's = root's input; time = "
            "slowest rank's mean per "
            "call; up to %lld warm-up and %lld timed calls within %.0f ms per size (at least %lld)\n",
            (long long)cfg.warmup, (long long)cfg.iters, cfg.time_ms, (long long)cfg.min_iters);
        printf("%-9s %12s %12s %8s %11s %11s %9s %9s\n", "op", "size(B)", "count", "iters", "time(us)", "min(us)",
               "algbw", "busbw");
        printf("%-9s %12s %12s %8s %11s %11s %9s %9s\n", "", "", "(elements)", "", "slowest", "fastest", "(GB/s)",
               "(GB/s)");
        fflush(stdout);
    }

    for (int oi = 0; oi < cfg.n_ops && !rc; ++oi) {
        int op = cfg.ops[oi];
        int64_t last = -1;
        int64_t s = cfg.min_bytes;
        for (;;) {
            int64_t size = s, count;
            if (op == OP_BARRIER) {
                count = 0, size = 0;
            } else if (per_peer(op)) {
                count = size / (4 * (int64_t)b->size); /* per rank */
                if (count < 1) count = 1;
                size = count * 4 * b->size;
            } else {
                count = size / 4;
                if (count < 1) count = 1;
                size = count * 4;
            }
            if (size != last) {
                result r;
                memset(&r, 0, sizeof r);
                rc = run_one(b, op, count, size, &r);
                if (rc) break;
                last = size;
                if (leader && cfg.json) {
                    printf(
                        "{\"impl\": \"%s\", \"op\": \"%s\", \"size_bytes\": %lld, \"count\": %lld, "
                        "\"dtype\": \"float32\", \"ranks\": %d, \"root\": %d, \"iters\": %lld, \"warmup\": %lld, "
                        "\"time_us\": %.3f, \"time_us_min\": %.3f, \"algbw_gbps\": %.6f, \"busbw_gbps\": %.6f, "
                        "\"nproc\": %ld, \"version\": ",
                        impl, op_names[op], (long long)r.size_bytes, (long long)r.count, (int)b->size,
                        op == OP_BROADCAST ? 0 : -1, (long long)r.iters, (long long)r.warmup, r.time_us, r.time_us_min,
                        r.algbw, r.busbw, nproc);
                    print_json_str(version);
                    printf("}\n");
                } else if (leader) {
                    printf("%-9s %12lld %12lld %8lld %11.2f %11.2f %9.4f %9.4f\n", op_names[op],
                           (long long)r.size_bytes, (long long)r.count, (long long)r.iters, r.time_us, r.time_us_min,
                           r.algbw, r.busbw);
                }
                fflush(stdout);
            }
            if (op == OP_BARRIER || s >= cfg.max_bytes) break;
            s = s > cfg.max_bytes / cfg.factor ? cfg.max_bytes : s * cfg.factor;
        }
    }

#ifdef PG_BENCH_MPI
    if (rc) MPI_Abort(MPI_COMM_WORLD, rc);
    MPI_Finalize();
#else
    if (rc) distc_pg_abort(b->pg); /* peers fail fast instead of waiting out their timeout */
    distc_pg_free(b->pg);
#endif
    free(b->buf);
    free(b->out);
    free(b->views);
    free(b->view_ptrs);
    return rc;
}

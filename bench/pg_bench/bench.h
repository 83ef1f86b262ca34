/* distc-pg-bench's (and mpi-raw-bench's) shared parts: the ops, the
 * configuration, a rank's state and result row, and what each part defines. */
#ifndef DISTC_BENCH_PG_BENCH_H
#define DISTC_BENCH_PG_BENCH_H

#include <distc.h>
#ifdef PG_BENCH_MPI
#include <mpi.h>
#define BENCH_NAME "mpi-raw-bench"
#else
#define BENCH_NAME "distc-pg-bench"
#endif

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

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
extern const char *const op_names[N_OPS];
/* Sized by what a rank holds in all (its output, or its input; gather's and
 * scatter's root): `count` floats per peer. */
int per_peer(int op);

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
    int shared_mem;  /* --shared-memory: the ops' buffers from distc_mem_alloc */
    int in_place;    /* --in-place: each op's input and output in one buffer, as nccl-tests' in-place rows */
    int huge_pages;  /* --huge-pages: ordinary buffers on 2 MiB boundaries, madvise(MADV_HUGEPAGE) */
} config;

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

typedef struct result {
    int64_t size_bytes, count, iters, warmup;
    double time_us, time_us_min, algbw, busbw;
} result;

/* measure.c */
double now_s(void);
int run_one(bench *b, int op, int64_t count, int64_t size_bytes, result *r);
int memcpy_rows(const config *cfg);

/* ops.c */
/* Buffers start on a page, as OSU's benchmarks do. With plain malloc, which
 * a process got depended on what it had freed before: from the heap, two
 * buffers lie 16 bytes off each other's cache-line alignment, from mmap
 * they line up, and a copy between buffers that do not line up loads across
 * lines (bench/results/buffer_alignment.txt). The implementations compared
 * must see the same alignment: here distc's ranks had heap buffers and
 * Open MPI's mmap'd ones. */
void *page_alloc(size_t n);
/* The ops' buffers: page_alloc, or distc_mem_alloc with --shared-memory;
 * with --huge-pages on 2 MiB boundaries and advised to the kernel as
 * transparent huge pages (what a host with THP "always" gives every large
 * buffer). */
void *buf_alloc(const config *cfg, size_t n);
void buf_free(const config *cfg, void *p);
int reserve(bench *b, size_t n_buf, size_t n_out);

/* Rank-dependent inputs of the check call. Small integers: exact in float. */
void fill_check(bench *b, int op, int64_t count);
int verify(bench *b, int op, int64_t count, int64_t size_bytes);
/* With --in-place, where an op's input (its output) lies: a slot of the
 * other buffer, or the other buffer itself (alltoall); `own` otherwise. */
float *in_place_input(const bench *b, int op, int64_t count, float *own);
float *in_place_output(const bench *b, int op, int64_t count, float *own);

/* options.c */
int parse_args(config *cfg, int argc, char **argv);

#endif

/* distc-pg-bench's ops: their names, which are sized per peer, the buffers a
 * rank runs them on, and their checked call's inputs and verification. */
#define _GNU_SOURCE /* madvise, MADV_HUGEPAGE */
#include "bench.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

const char *const op_names[N_OPS] = {"allreduce", "broadcast", "allgather", "reduce_scatter", "alltoall",
                                     "gather",    "scatter",   "sendrecv",  "barrier"};

int per_peer(int op) {
    return op == OP_ALLGATHER || op == OP_REDUCE_SCATTER || op == OP_ALLTOALL || op == OP_GATHER || op == OP_SCATTER;
}

/* ------------------------------------------------------------------ state */

void *page_alloc(size_t n) {
    void *p = NULL;
    return posix_memalign(&p, 4096, n ? n : 1) == 0 ? p : NULL;
}

void *buf_alloc(const config *cfg, size_t n) {
    void *p = NULL;
    if (!cfg->shared_mem && cfg->huge_pages) {
        const size_t huge = (size_t)2 << 20, len = (n + huge - 1) / huge * huge;
        if (posix_memalign(&p, huge, len ? len : huge) != 0) return NULL;
        madvise(p, len ? len : huge, MADV_HUGEPAGE); /* advice: a kernel without THP ignores it */
        return p;
    }
    if (!cfg->shared_mem) return page_alloc(n);
    return distc_mem_alloc(&p, n ? n : 1) == 0 ? p : NULL;
}

void buf_free(const config *cfg, void *p) {
    if (cfg->shared_mem)
        distc_mem_free(p);
    else
        free(p);
}

int reserve(bench *b, size_t n_buf, size_t n_out) {
    if (n_buf > b->cap_buf) {
        buf_free(b->cfg, b->buf);
        b->buf = (float *)buf_alloc(b->cfg, n_buf * sizeof(float));
        b->cap_buf = b->buf ? n_buf : 0;
    }
    if (n_out > b->cap_out) {
        buf_free(b->cfg, b->out);
        b->out = (float *)buf_alloc(b->cfg, n_out * sizeof(float));
        b->cap_out = b->out ? n_out : 0;
    }
    if ((n_buf && !b->buf) || (n_out && !b->out)) {
        fprintf(stderr, "distc-pg-bench: rank %d: out of memory\n", (int)b->rank);
        return 1;
    }
    return 0;
}

void fill_check(bench *b, int op, int64_t count) {
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
            /* In place, alltoall's input is its output buffer. */
            if (op == OP_ALLTOALL) b->buf[j] = b->cfg->in_place ? b->out[j] : -1.0f;
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
    float *in = in_place_input(b, op, count, b->buf);
    if (in != b->buf) memcpy(in, b->buf, (size_t)count * sizeof(float));
}

float *in_place_input(const bench *b, int op, int64_t count, float *own) {
    if (!b->cfg->in_place) return own;
    switch (op) {
        case OP_ALLGATHER: return b->out + (size_t)b->rank * (size_t)count;
        case OP_GATHER: return b->rank == 0 ? b->out : own;
        default: return own;
    }
}

float *in_place_output(const bench *b, int op, int64_t count, float *own) {
    (void)count; /* MPI's in-place reduce_scatter does not need it */
    if (!b->cfg->in_place) return own;
    switch (op) {
#ifdef PG_BENCH_MPI
        case OP_REDUCE_SCATTER: return b->out; /* MPI_IN_PLACE: the result at the start of the input */
#else
        case OP_REDUCE_SCATTER: return b->out + (size_t)b->rank * (size_t)count;
#endif
        case OP_SCATTER: return b->rank == 0 ? b->out : own;
        default: return own;
    }
}

int verify(bench *b, int op, int64_t count, int64_t size_bytes) {
    int64_t n = b->size;
    int64_t check = op == OP_ALLGATHER || op == OP_ALLTOALL ? count * n : count;
    const float *res = in_place_output(b, op, count, b->buf);
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
                got = res[i];
                want = (float)(n * (n + 1) / 2) + (float)(n * ((b->rank * count + i) % 7));
                break;
            case OP_ALLTOALL: /* from rank i / count: its block for this rank */
                got = b->buf[i];
                want = (float)((i / count) * 1000) + (float)((b->rank * count + i % count) % 13);
                break;
            case OP_SCATTER: /* the root's part for this rank */
                got = res[i];
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

/*
 * distc-perf's operations as a table (perf_ops.c): how each is launched,
 * which forms it has, its nccl-tests bus-bandwidth factor and how a rank
 * checks its result. Adding an operation is adding a row.
 */
#ifndef DISTC_PERF_OPS_H
#define DISTC_PERF_OPS_H

#include <distc.h>
#include <stdint.h>

/* One launch of an operation on one rank. */
typedef struct perf_call {
    distc_pg *pg;
    int rank, size, root;
    DLDataType dt;
    distc_reduce_op rop;
    int64_t count; /* elements per rank-part (see perf_op.spread) */
    int in_place;
    uint8_t *in, *out; /* the benchmark's memory (host or device) */
    DLDevice dev;
    /* size entries each, for the list forms (gather, scatter): the caller's heap, no rank limit */
    DLTensor *parts;
    const DLTensor **part_ptrs;
    int64_t *part_shapes;
} perf_call;

typedef struct perf_op {
    const char *name;
    int spread;   /* sizes are of size parts (nccl-tests' total): count x size elements */
    int fill_all; /* each rank contributes count x size elements (reducescatter, alltoall, scatter) */
    int rooted, reduces;
    int forms; /* bit 0: out of place, bit 1: in place */
    int bus;   /* busbw = algbw x 1, (n-1)/n or 2(n-1)/n: 0, 1, 2 */
    int (*launch)(const perf_call *c);
    /* Elements of this rank's result (on the host copy `out`) that differ from what they must be. */
    long (*wrong)(const perf_call *c, const uint8_t *out);
} perf_op;

extern const perf_op perf_ops[];
extern const int perf_num_ops;

double perf_busbw_factor(const perf_op *op, int n);
/* What rank `rank` contributes at element i: 1..4, exact in every dtype and op. */
double perf_value(int rank, int64_t i);
void perf_set_elem(void *base, DLDataType dt, int64_t i, double v);

#endif

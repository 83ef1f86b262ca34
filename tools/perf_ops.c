/* distc-perf's operations (perf_ops.h): one row each, launch and check. */
#include "perf_ops.h"

#include "perf_memory.h"

#include <math.h>
#include <string.h>

/* Values small enough that every op is exact in every dtype: 1..4, by rank and index. */
double perf_value(int rank, int64_t i) { return (double)((rank + i) % 4 + 1); }

void perf_set_elem(void *base, DLDataType dt, int64_t i, double v) {
    switch (dt.code) {
        case kDLInt:
            if (dt.bits == 8)
                ((int8_t *)base)[i] = (int8_t)(int64_t)v;
            else if (dt.bits == 32)
                ((int32_t *)base)[i] = (int32_t)(int64_t)v;
            else
                ((int64_t *)base)[i] = (int64_t)v;
            break;
        case kDLUInt: ((uint8_t *)base)[i] = (uint8_t)(int64_t)v; break;
        case kDLFloat:
            if (dt.bits == 32)
                ((float *)base)[i] = (float)v;
            else if (dt.bits == 64)
                ((double *)base)[i] = v;
            else { /* binary16 of a small integer: exact */
                float f = (float)v;
                uint32_t x;
                memcpy(&x, &f, 4);
                uint32_t e = ((x >> 23) & 0xff), m = x & 0x7fffff;
                ((uint16_t *)base)[i] = f == 0 ? 0 : (uint16_t)(((x >> 16) & 0x8000) | ((e - 112) << 10) | (m >> 13));
            }
            break;
        case kDLBfloat: {
            float f = (float)v;
            uint32_t x;
            memcpy(&x, &f, 4);
            ((uint16_t *)base)[i] = (uint16_t)(x >> 16);
            break;
        }
    }
}

static double get_elem(const void *base, DLDataType dt, int64_t i) {
    switch (dt.code) {
        case kDLInt:
            return dt.bits == 8    ? ((const int8_t *)base)[i]
                   : dt.bits == 32 ? ((const int32_t *)base)[i]
                                   : (double)((const int64_t *)base)[i];
        case kDLUInt: return ((const uint8_t *)base)[i];
        case kDLFloat:
            if (dt.bits == 32) return ((const float *)base)[i];
            if (dt.bits == 64) return ((const double *)base)[i];
            {
                uint16_t h = ((const uint16_t *)base)[i];
                uint32_t e = (h >> 10) & 0x1f, m = h & 0x3ff,
                         x = e ? ((uint32_t)(h & 0x8000) << 16) | ((e + 112) << 23) | (m << 13) : 0;
                float f;
                memcpy(&f, &x, 4);
                return f;
            }
        case kDLBfloat: {
            uint32_t x = (uint32_t)((const uint16_t *)base)[i] << 16;
            float f;
            memcpy(&f, &x, 4);
            return f;
        }
    }
    return 0;
}

/* `v` as an element of `dt` holds it (integers wrap, as the reduction does). */
static double as_dtype(DLDataType dt, double v) {
    uint8_t tmp[8];
    perf_set_elem(tmp, dt, 0, v);
    return get_elem(tmp, dt, 0);
}

/* Whether `got` misses `want`: exactly for integers; for floating types
 * within a few units in the last place (AVG divides by the group size,
 * which is inexact for 3 ranks; backends may multiply by 1/size instead). */
static int differs(DLDataType dt, double got, double want) {
    if (dt.code == kDLInt || dt.code == kDLUInt) return got != want;
    int mant = dt.code == kDLBfloat ? 7 : dt.bits == 16 ? 10 : dt.bits == 32 ? 23 : 52;
    return fabs(got - want) > 4.0 * ldexp(fabs(want), -mant);
}

/* The reduction over ranks of perf_value(r, i). */
static double reduced(distc_reduce_op op, int64_t i, int is_int, int size) {
    double acc = perf_value(0, i);
    for (int r = 1; r < size; ++r) {
        double v = perf_value(r, i);
        if (op == DISTC_SUM || op == DISTC_AVG)
            acc += v;
        else if (op == DISTC_PRODUCT)
            acc *= v;
        else if (op == DISTC_MIN)
            acc = v < acc ? v : acc;
        else
            acc = v > acc ? v : acc;
    }
    if (op == DISTC_AVG) acc = is_int ? trunc(acc / size) : acc / size;
    return acc;
}

/* ------------------------------------------------------------- the operations */

static DLTensor tensor(const perf_call *c, void *data, int64_t *shape, int64_t n) {
    *shape = n;
    DLTensor t = {data, c->dev, 1, c->dt, shape, NULL, 0};
    return t;
}

static size_t esize(const perf_call *c) { return c->dt.bits / 8; }
static int is_int(const perf_call *c) { return c->dt.code == kDLInt || c->dt.code == kDLUInt; }
static long reduced_wrong(const perf_call *c, const uint8_t *base, int64_t first) {
    long w = 0;
    for (int64_t i = 0; i < c->count; ++i)
        w += differs(c->dt, get_elem(base, c->dt, i), as_dtype(c->dt, reduced(c->rop, first + i, is_int(c), c->size)));
    return w;
}
static long parts_wrong(const perf_call *c, const uint8_t *out, int64_t offset_per_rank) {
    long w = 0;
    for (int r = 0; r < c->size; ++r)
        for (int64_t i = 0; i < c->count; ++i)
            w += get_elem(out, c->dt, r * c->count + i) != perf_value(r, offset_per_rank * c->rank + i);
    return w;
}

static int allreduce_launch(const perf_call *c) {
    int64_t s;
    DLTensor t = tensor(c, c->out, &s, c->count);
    return distc_allreduce(NULL, c->pg, &t, c->rop, NULL);
}
static long allreduce_wrong(const perf_call *c, const uint8_t *out) { return reduced_wrong(c, out, 0); }

static int broadcast_launch(const perf_call *c) {
    int64_t s;
    DLTensor t = tensor(c, c->out, &s, c->count);
    return distc_broadcast(NULL, c->pg, &t, c->root, NULL);
}
static long root_value_wrong(const perf_call *c, const uint8_t *out, int64_t first) {
    long w = 0;
    for (int64_t i = 0; i < c->count; ++i) w += get_elem(out, c->dt, i) != perf_value(c->root, first + i);
    return w;
}
static long broadcast_wrong(const perf_call *c, const uint8_t *out) { return root_value_wrong(c, out, 0); }

static int reduce_launch(const perf_call *c) {
    int64_t s;
    DLTensor t = tensor(c, c->out, &s, c->count);
    return distc_reduce(NULL, c->pg, &t, c->root, c->rop, NULL);
}
static long reduce_wrong(const perf_call *c, const uint8_t *out) {
    return c->rank == c->root ? reduced_wrong(c, out, 0) : 0;
}

static int allgather_launch(const perf_call *c) {
    int64_t si, so;
    /* in place, the contribution sits in this rank's part of the output */
    uint8_t *src = c->in_place ? c->out + (size_t)c->count * esize(c) * (size_t)c->rank : c->in;
    DLTensor in = tensor(c, src, &si, c->count), out = tensor(c, c->out, &so, c->count * c->size);
    return distc_allgather_into_tensor(NULL, c->pg, &out, &in, NULL);
}
static long allgather_wrong(const perf_call *c, const uint8_t *out) { return parts_wrong(c, out, 0); }

static int reducescatter_launch(const perf_call *c) {
    int64_t si, so;
    uint8_t *all = c->in_place ? c->out : c->in;
    uint8_t *mine = c->in_place ? c->out + (size_t)c->count * esize(c) * (size_t)c->rank : c->out;
    DLTensor in = tensor(c, all, &si, c->count * c->size), out = tensor(c, mine, &so, c->count);
    return distc_reduce_scatter_tensor(NULL, c->pg, &out, &in, c->rop, NULL);
}
static long reducescatter_wrong(const perf_call *c, const uint8_t *out) {
    const uint8_t *mine = c->in_place ? out + (size_t)c->count * esize(c) * (size_t)c->rank : out;
    return reduced_wrong(c, mine, (int64_t)c->rank * c->count);
}

static int alltoall_launch(const perf_call *c) {
    int64_t si, so;
    DLTensor in = tensor(c, c->in, &si, c->count * c->size), out = tensor(c, c->out, &so, c->count * c->size);
    return distc_alltoall_single(NULL, c->pg, &out, &in, NULL, NULL, NULL);
}
static long alltoall_wrong(const perf_call *c, const uint8_t *out) { return parts_wrong(c, out, c->count); }

/* The list forms: one tensor per rank, over consecutive parts of `base`. */
static const DLTensor *const *parts_of(const perf_call *c, uint8_t *base) {
    for (int r = 0; r < c->size; ++r) {
        c->parts[r] = tensor(c, base + (size_t)r * (size_t)c->count * esize(c), &c->part_shapes[r], c->count);
        c->part_ptrs[r] = &c->parts[r];
    }
    return c->part_ptrs;
}

static int gather_launch(const perf_call *c) {
    int64_t s;
    DLTensor in = tensor(c, c->in, &s, c->count);
    return distc_gather(NULL, c->pg, (DLTensor *const *)parts_of(c, c->out), &in, c->root, NULL);
}
static long gather_wrong(const perf_call *c, const uint8_t *out) {
    return c->rank == c->root ? parts_wrong(c, out, 0) : 0;
}

static int scatter_launch(const perf_call *c) {
    int64_t s;
    DLTensor out = tensor(c, c->out, &s, c->count);
    return distc_scatter(NULL, c->pg, &out, parts_of(c, c->in), c->root, NULL);
}
static long scatter_wrong(const perf_call *c, const uint8_t *out) {
    return root_value_wrong(c, out, (int64_t)c->rank * c->count);
}

/* A ring: every rank sends to the next and receives from the previous. */
static int sendrecv_launch(const perf_call *c) {
    if (c->size == 1) { /* nobody to send to: the copy stands for it */
        mem_copy(c->out, c->in, (size_t)c->count * esize(c));
        return 0;
    }
    int64_t si, so;
    DLTensor in = tensor(c, c->in, &si, c->count), out = tensor(c, c->out, &so, c->count);
    distc_p2p_op ops[2] = {{DISTC_P2P_SEND, &in, (c->rank + 1) % c->size, 0},
                           {DISTC_P2P_RECV, &out, (c->rank + c->size - 1) % c->size, 0}};
    return distc_batch_isend_irecv(NULL, c->pg, ops, 2, NULL);
}
static long sendrecv_wrong(const perf_call *c, const uint8_t *out) {
    int prev = c->size == 1 ? c->rank : (c->rank + c->size - 1) % c->size;
    long w = 0;
    for (int64_t i = 0; i < c->count; ++i) w += get_elem(out, c->dt, i) != perf_value(prev, i);
    return w;
}

enum { OOP = 1, IP = 2 };
const perf_op perf_ops[] = {
    /* name            spread fill_all rooted reduces forms     bus */
    {"allreduce", 0, 0, 0, 1, IP, 2, allreduce_launch, allreduce_wrong},
    {"broadcast", 0, 0, 1, 0, IP, 0, broadcast_launch, broadcast_wrong},
    {"reduce", 0, 0, 1, 1, IP, 0, reduce_launch, reduce_wrong},
    {"allgather", 1, 0, 0, 0, OOP | IP, 1, allgather_launch, allgather_wrong},
    {"reducescatter", 1, 1, 0, 1, OOP | IP, 1, reducescatter_launch, reducescatter_wrong},
    {"alltoall", 1, 1, 0, 0, OOP, 1, alltoall_launch, alltoall_wrong},
    {"gather", 1, 0, 1, 0, OOP, 1, gather_launch, gather_wrong},
    {"scatter", 1, 1, 1, 0, OOP, 1, scatter_launch, scatter_wrong},
    {"sendrecv", 0, 0, 0, 0, OOP, 0, sendrecv_launch, sendrecv_wrong},
};
const int perf_num_ops = (int)(sizeof perf_ops / sizeof perf_ops[0]);

double perf_busbw_factor(const perf_op *op, int n) {
    return op->bus == 2 ? 2.0 * (n - 1) / n : op->bus == 1 ? (double)(n - 1) / n : 1.0;
}

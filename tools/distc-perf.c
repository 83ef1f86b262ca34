/*
 * distc-perf: how fast are collectives here, for any backend, in the shape of
 * nccl-tests' output (size, count, type, redop, root, then time, algbw, busbw
 * and #wrong for the out-of-place and the in-place form).
 *
 *   distc-run -n 4 distc-perf -o allreduce -b 8 -e 64M -f 2 -d float32 -r sum --backend gloo
 *
 * Sizes are nccl-tests': the whole buffer a rank sends or receives (for
 * allgather and reducescatter the gathered / scattered total). busbw uses
 * nccl-tests' factors (its doc/PERFORMANCE.md). Times are the slowest rank's
 * mean over -n iterations after -w warm-up ones. Forms a collective does not
 * have in distc (an out-of-place allreduce, an in-place all-to-all) show "-".
 *
 * --backend nccl (or --device cuda) puts the buffers in CUDA memory: the
 * CUDA runtime is loaded at run time, so distc-perf itself needs no CUDA.
 * Each rank uses the device LOCAL_RANK modulo the device count, as the nccl
 * backend does; times then include the GPU finishing the calls.
 */
#define _GNU_SOURCE
#include <distc.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "perf_memory.h"
#include "size_arg.h"

enum {
    OP_ALLREDUCE,
    OP_BROADCAST,
    OP_REDUCE,
    OP_ALLGATHER,
    OP_REDUCESCATTER,
    OP_ALLTOALL,
    OP_GATHER,
    OP_SCATTER,
    OP_SENDRECV,
    NUM_OPS
};
static const char *const op_names[NUM_OPS] = {"allreduce", "broadcast", "reduce",  "allgather", "reducescatter",
                                              "alltoall",  "gather",    "scatter", "sendrecv"};

typedef struct dtype_info {
    const char *name;  /* nccl-tests' spelling */
    const char *alias; /* distc's / torch's */
    DLDataType dl;
} dtype_info;

static const dtype_info dtypes[] = {
    {"int8", "int8", {kDLInt, 8, 1}},        {"uint8", "uint8", {kDLUInt, 8, 1}},
    {"int32", "int32", {kDLInt, 32, 1}},     {"int64", "int64", {kDLInt, 64, 1}},
    {"half", "float16", {kDLFloat, 16, 1}},  {"bfloat16", "bf16", {kDLBfloat, 16, 1}},
    {"float", "float32", {kDLFloat, 32, 1}}, {"double", "float64", {kDLFloat, 64, 1}},
};
#define NUM_DTYPES (sizeof dtypes / sizeof dtypes[0])

static const char *const redop_names[] = {"sum", "avg", "prod", "min", "max"};
static const distc_reduce_op redop_values[] = {DISTC_SUM, DISTC_AVG, DISTC_PRODUCT, DISTC_MIN, DISTC_MAX};
#define NUM_REDOPS 5

/* nccl-tests' bus-bandwidth factor for `op` on n ranks (doc/PERFORMANCE.md). */
static double busbw_factor(int op, int n) {
    switch (op) {
        case OP_ALLREDUCE: return 2.0 * (n - 1) / n;
        case OP_ALLGATHER:
        case OP_REDUCESCATTER:
        case OP_ALLTOALL:
        case OP_GATHER:
        case OP_SCATTER: return (double)(n - 1) / n;
        default: return 1.0; /* broadcast, reduce, sendrecv */
    }
}

typedef struct cfg {
    int ops[NUM_OPS], nops;
    int dts[NUM_DTYPES], ndts;
    int rops[NUM_REDOPS], nrops;
    size_t minb, maxb, incr;
    int factor, iters, warmup, root, check, json, csv, factors_only, corrupt;
    const char *backend, *url, *device;
} cfg;

static int usage(int code) {
    fprintf(code ? stderr : stdout,
            "usage: distc-perf [options]   (start it with distc-run -n N, mpirun, ...)\n"
            "  -o, --op OP          allreduce broadcast reduce allgather reducescatter alltoall gather\n"
            "                       scatter sendrecv, or all (default allreduce)\n"
            "  -b, --minbytes B     smallest size (default 8; K, M, G suffixes)\n"
            "  -e, --maxbytes B     largest size (default 64M)\n"
            "  -f, --stepfactor F   multiply the size by F (default 2)\n"
            "  -i, --stepbytes B    or add B each step\n"
            "  -n, --iters N        timed iterations per size (default 20)\n"
            "  -w, --warmup_iters N warm-up iterations (default 5)\n"
            "  -d, --datatype T     int8 uint8 int32 int64 half bfloat16 float double, or all (default float)\n"
            "  -r, --redop R        sum avg prod min max, or all (default sum)\n"
            "  --root R             root of rooted collectives (default 0)\n"
            "  -c, --check 0|1      check every result; #wrong counts mismatches (default 1)\n"
            "  --backend NAME       gloo, mpi, ... (default gloo)\n"
            "  --url URL            rendezvous (default env://; mpi:// for --backend mpi)\n"
            "  --device cpu|cuda    where the buffers live (default cuda for --backend nccl, else cpu)\n"
            "  --json, --csv        one record per row for machines, instead of the table\n");
    return code;
}

static size_t parse_size(const char *s, int *ok) {
    uint64_t v = 0;
    *ok = size_arg(s, &v) == 0;
    return (size_t)v;
}

static int lookup(const char *v, const char *const *names, int n) {
    for (int i = 0; i < n; ++i)
        if (!strcmp(v, names[i])) return i;
    return -1;
}

static int parse(int argc, char **argv, cfg *c) {
    memset(c, 0, sizeof *c);
    c->minb = 8, c->maxb = 64u << 20, c->factor = 2, c->iters = 20, c->warmup = 5, c->check = 1;
    c->backend = "gloo";
    c->ops[c->nops++] = OP_ALLREDUCE;
    c->dts[c->ndts++] = 6; /* float */
    c->rops[c->nrops++] = 0;
    for (int i = 1; i < argc; ++i) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int ok = 1;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) return usage(0) - 1;
        if (!strcmp(a, "--json")) {
            c->json = 1;
            continue;
        }
        if (!strcmp(a, "--csv")) {
            c->csv = 1;
            continue;
        }
        if (!strcmp(a, "--busbw-factors")) {
            c->factors_only = 1;
            continue;
        }
        /* For distc-perf's own test: rank 0 spoils one element of each checked result. */
        if (!strcmp(a, "--corrupt-for-test")) {
            c->corrupt = 1;
            continue;
        }
        if (!v) {
            fprintf(stderr, "distc-perf: %s needs a value\n", a);
            return usage(2);
        }
        ++i;
        if (!strcmp(a, "-o") || !strcmp(a, "--op")) {
            c->nops = 0;
            if (!strcmp(v, "all"))
                for (int k = 0; k < NUM_OPS; ++k) c->ops[c->nops++] = k;
            else if ((c->ops[0] = lookup(v, op_names, NUM_OPS)) >= 0)
                c->nops = 1;
            else
                ok = 0;
        } else if (!strcmp(a, "-d") || !strcmp(a, "--datatype")) {
            c->ndts = 0;
            for (int k = 0; k < (int)NUM_DTYPES; ++k)
                if (!strcmp(v, "all") || !strcmp(v, dtypes[k].name) || !strcmp(v, dtypes[k].alias))
                    c->dts[c->ndts++] = k;
            ok = c->ndts > 0;
        } else if (!strcmp(a, "-r") || !strcmp(a, "--redop")) {
            c->nrops = 0;
            if (!strcmp(v, "all"))
                for (int k = 0; k < NUM_REDOPS; ++k) c->rops[c->nrops++] = k;
            else if ((c->rops[0] = lookup(v, redop_names, NUM_REDOPS)) >= 0)
                c->nrops = 1;
            else
                ok = 0;
        } else if (!strcmp(a, "-b") || !strcmp(a, "--minbytes"))
            c->minb = parse_size(v, &ok);
        else if (!strcmp(a, "-e") || !strcmp(a, "--maxbytes"))
            c->maxb = parse_size(v, &ok);
        else if (!strcmp(a, "-i") || !strcmp(a, "--stepbytes"))
            c->incr = parse_size(v, &ok), c->factor = 0;
        else if (!strcmp(a, "-f") || !strcmp(a, "--stepfactor"))
            ok = (c->factor = atoi(v)) >= 2;
        else if (!strcmp(a, "-n") || !strcmp(a, "--iters"))
            ok = (c->iters = atoi(v)) >= 1;
        else if (!strcmp(a, "-w") || !strcmp(a, "--warmup_iters"))
            ok = (c->warmup = atoi(v)) >= 0 && strspn(v, "0123456789") == strlen(v);
        else if (!strcmp(a, "--root"))
            ok = (c->root = atoi(v)) >= 0 && strspn(v, "0123456789") == strlen(v);
        else if (!strcmp(a, "-c") || !strcmp(a, "--check"))
            ok = ((c->check = atoi(v)) == 0 || c->check == 1) && strlen(v) == 1;
        else if (!strcmp(a, "--backend"))
            c->backend = v;
        else if (!strcmp(a, "--url"))
            c->url = v;
        else if (!strcmp(a, "--device"))
            ok = !strcmp(c->device = v, "cpu") || !strcmp(v, "cuda");
        else {
            fprintf(stderr, "distc-perf: unknown option %s\n", a);
            return usage(2);
        }
        if (!ok) {
            fprintf(stderr, "distc-perf: bad value '%s' for %s\n", v, a);
            return usage(2);
        }
    }
    if (c->minb > c->maxb) {
        fprintf(stderr, "distc-perf: -b is larger than -e\n");
        return usage(2);
    }
    if (!c->factor && !c->incr) {
        fprintf(stderr, "distc-perf: -i must be > 0\n");
        return usage(2);
    }
    if (!c->url) c->url = !strcmp(c->backend, "mpi") ? "mpi://" : "env://";
    if (!c->device) c->device = !strcmp(c->backend, "nccl") ? "cuda" : "cpu";
    return 0;
}

/* ----------------------------------------------------------------- buffers */

static int g_rank, g_size;
static distc_pg *g_pg;

static DLTensor make_tensor(void *data, DLDataType dt, int64_t *shape, int64_t n) {
    *shape = n;
    DLDevice dev = {g_cuda < 0 ? kDLCPU : kDLCUDA, g_cuda < 0 ? 0 : g_cuda};
    DLTensor t = {data, dev, 1, dt, shape, NULL, 0};
    return t;
}

/* Values small enough that every op is exact in every dtype: 1..4, by rank and index. */
static double value(int rank, int64_t i) { return (double)((rank + i) % 4 + 1); }

static void set_elem(void *base, DLDataType dt, int64_t i, double v) {
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
    set_elem(tmp, dt, 0, v);
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

/* The reduction over ranks of value(r, i). */
static double reduced(distc_reduce_op op, int64_t i, int is_int) {
    double acc = value(0, i);
    for (int r = 1; r < g_size; ++r) {
        double v = value(r, i);
        if (op == DISTC_SUM || op == DISTC_AVG)
            acc += v;
        else if (op == DISTC_PRODUCT)
            acc *= v;
        else if (op == DISTC_MIN)
            acc = v < acc ? v : acc;
        else
            acc = v > acc ? v : acc;
    }
    if (op == DISTC_AVG) acc = is_int ? trunc(acc / g_size) : acc / g_size;
    return acc;
}

/* ---------------------------------------------------------------- one size */

typedef struct result {
    double us; /* -1: this form does not exist */
    long wrong;
} result;

typedef struct buffers {
    void *in, *out;   /* the benchmark's memory (host or device) */
    void *hin, *hout; /* host copies to fill and check (the same buffers on the host) */
    size_t bytes;     /* of each */
} buffers;

/*
 * Runs `op` on `count` elements per rank-part (see sizes()), in place or
 * not, `iters` times after `warmup`, and checks the last result.
 */
static int g_corrupt;

static int run_op(int op, DLDataType dt, distc_reduce_op rop, int root, int64_t count, int in_place, buffers *b,
                  int check, int iters, int warmup, result *res) {
    int n = g_size;
    size_t es = dt.bits / 8;
    int is_int = dt.code == kDLInt || dt.code == kDLUInt;
    int64_t total =
        (op == OP_ALLGATHER || op == OP_REDUCESCATTER || op == OP_ALLTOALL || op == OP_GATHER || op == OP_SCATTER)
            ? count * n
            : count;
    int64_t s_in = 0, s_out = 0;
    DLTensor *outs[1024], *ins[1024], part_o[64], part_i[64];
    int64_t shapes[130];
    int has_form = in_place ? (op == OP_ALLREDUCE || op == OP_BROADCAST || op == OP_REDUCE || op == OP_ALLGATHER ||
                               op == OP_REDUCESCATTER)
                            : !(op == OP_ALLREDUCE || op == OP_BROADCAST || op == OP_REDUCE);
    if (!has_form) {
        res->us = -1;
        res->wrong = 0;
        return 0;
    }
    uint8_t *in = b->in, *out = b->out, *hin = b->hin, *hout = b->hout;
    /* Fill: what each rank contributes (in place: the contribution sits in the output). */
    int64_t fill_n = op == OP_REDUCESCATTER || op == OP_ALLTOALL || op == OP_SCATTER ? total : count;
    /* in place, the contribution sits in the output (allgather: in this rank's part) */
    size_t src_off = in_place && op == OP_ALLGATHER ? (size_t)count * es * (size_t)g_rank : 0;
    uint8_t *src = (in_place ? out : in) + src_off, *hsrc = (in_place ? hout : hin) + src_off;
    DLTensor tin, tout;
    int rc = 0;
    double t0 = 0;
    /* The pass at warmup + iters reads the clock; with the check on it also runs once more and checks. */
    for (int it = 0; it <= warmup + iters; ++it) {
        int checking = check && it == warmup + iters;
        /* In-place operations overwrite their input: the checked run starts from a fresh one. */
        if (it == 0 || checking) {
            for (int64_t i = 0; i < fill_n; ++i) set_elem(hsrc, dt, i, value(g_rank, i));
            mem_put(src, hsrc, (size_t)fill_n * es);
        }
        if (it == warmup) {
            distc_barrier(NULL, g_pg, NULL);
            mem_sync();
            struct timespec ts;
            clock_gettime(CLOCK_MONOTONIC, &ts);
            t0 = ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
        }
        if (it == warmup + iters) {
            mem_sync();
            struct timespec ts;
            clock_gettime(CLOCK_MONOTONIC, &ts);
            res->us = (ts.tv_sec * 1e6 + ts.tv_nsec / 1e3 - t0) / iters;
        }
        if (it >= warmup + iters && !checking) break;
        switch (op) {
            case OP_ALLREDUCE:
                tout = make_tensor(out, dt, &s_out, count);
                rc = distc_allreduce(NULL, g_pg, &tout, rop, NULL);
                break;
            case OP_BROADCAST:
                tout = make_tensor(out, dt, &s_out, count);
                rc = distc_broadcast(NULL, g_pg, &tout, root, NULL);
                break;
            case OP_REDUCE:
                tout = make_tensor(out, dt, &s_out, count);
                rc = distc_reduce(NULL, g_pg, &tout, root, rop, NULL);
                break;
            case OP_ALLGATHER:
                tin = make_tensor(src, dt, &s_in, count);
                tout = make_tensor(out, dt, &s_out, total);
                rc = distc_allgather_into_tensor(NULL, g_pg, &tout, &tin, NULL);
                break;
            case OP_REDUCESCATTER:
                tin = make_tensor(in_place ? out : in, dt, &s_in, total);
                tout = make_tensor(in_place ? out + (size_t)count * es * (size_t)g_rank : out, dt, &s_out, count);
                rc = distc_reduce_scatter_tensor(NULL, g_pg, &tout, &tin, rop, NULL);
                break;
            case OP_ALLTOALL:
                tin = make_tensor(in, dt, &s_in, total);
                tout = make_tensor(out, dt, &s_out, total);
                rc = distc_alltoall_single(NULL, g_pg, &tout, &tin, NULL, NULL, NULL);
                break;
            case OP_GATHER:
            case OP_SCATTER:
                for (int r = 0; r < n && r < 64; ++r) {
                    part_o[r] = make_tensor(out + (size_t)r * (size_t)count * es, dt, &shapes[r], count);
                    part_i[r] = make_tensor(in + (size_t)r * (size_t)count * es, dt, &shapes[64 + r], count);
                    outs[r] = &part_o[r];
                    ins[r] = &part_i[r];
                }
                if (op == OP_GATHER) {
                    tin = make_tensor(in, dt, &s_in, count);
                    rc = distc_gather(NULL, g_pg, outs, &tin, root, NULL);
                } else {
                    tout = make_tensor(out, dt, &s_out, count);
                    rc = distc_scatter(NULL, g_pg, &tout, (const DLTensor *const *)ins, root, NULL);
                }
                break;
            case OP_SENDRECV: {
                tin = make_tensor(in, dt, &s_in, count);
                tout = make_tensor(out, dt, &s_out, count);
                if (n == 1) {
                    mem_copy(out, in, (size_t)count * es);
                    break;
                }
                distc_p2p_op ops[2] = {{DISTC_P2P_SEND, &tin, (g_rank + 1) % n, 0},
                                       {DISTC_P2P_RECV, &tout, (g_rank + n - 1) % n, 0}};
                rc = distc_batch_isend_irecv(NULL, g_pg, ops, 2, NULL);
                break;
            }
        }
        if (rc != 0) return rc;
        if (!checking) continue;
        mem_sync();
        mem_get(hout, out, b->bytes);
        out = hout;                   /* the check reads the host copy */
        if (g_corrupt && g_rank == 0) /* the first element rank 0 checks, whatever the op */
            set_elem(out, dt, 0, 99.0);
        /* Check what this rank holds against what it must. */
        long wrong = 0;
        int prev = (g_rank + n - 1) % n;
        for (int64_t i = 0; i < count; ++i) {
            switch (op) {
                case OP_ALLREDUCE:
                    wrong += differs(dt, get_elem(out, dt, i), as_dtype(dt, reduced(rop, i, is_int)));
                    break;
                case OP_BROADCAST: wrong += get_elem(out, dt, i) != value(root, i); break;
                case OP_REDUCE:
                    if (g_rank == root)
                        wrong += differs(dt, get_elem(out, dt, i), as_dtype(dt, reduced(rop, i, is_int)));
                    break;
                case OP_ALLGATHER:
                    for (int r = 0; r < n; ++r) wrong += get_elem(out, dt, r * count + i) != value(r, i);
                    break;
                case OP_REDUCESCATTER: {
                    const uint8_t *mine = in_place ? out + (size_t)count * es * (size_t)g_rank : out;
                    wrong += differs(dt, get_elem(mine, dt, i),
                                     as_dtype(dt, reduced(rop, (int64_t)g_rank * count + i, is_int)));
                    break;
                }
                case OP_ALLTOALL:
                    for (int r = 0; r < n; ++r)
                        wrong += get_elem(out, dt, r * count + i) != value(r, (int64_t)g_rank * count + i);
                    break;
                case OP_GATHER:
                    if (g_rank == root)
                        for (int r = 0; r < n; ++r) wrong += get_elem(out, dt, r * count + i) != value(r, i);
                    break;
                case OP_SCATTER: wrong += get_elem(out, dt, i) != value(root, (int64_t)g_rank * count + i); break;
                case OP_SENDRECV: wrong += get_elem(out, dt, i) != value(n == 1 ? g_rank : prev, i); break;
            }
        }
        res->wrong = wrong;
    }
    return 0;
}

/* One 8-byte value reduced (or broadcast from rank 0 with op < 0) over the group, in the benchmark's memory. */
static void reduce_scalar(void *v, DLDataType dt, int op) {
    static void *dev;
    if (!dev) dev = mem_alloc(8);
    int64_t one = 1;
    mem_put(dev, v, 8);
    DLTensor t = make_tensor(dev, dt, &one, 1);
    if (op < 0)
        distc_broadcast(NULL, g_pg, &t, 0, NULL);
    else
        distc_allreduce(NULL, g_pg, &t, (distc_reduce_op)op, NULL);
    mem_sync();
    mem_get(v, dev, 8);
}

/* The slowest rank's time and everyone's mismatches. */
static void combine(result *r) {
    double t = r->us;
    int64_t w = r->wrong;
    reduce_scalar(&t, (DLDataType){kDLFloat, 64, 1}, DISTC_MAX);
    reduce_scalar(&w, (DLDataType){kDLInt, 64, 1}, DISTC_SUM);
    r->us = t;
    r->wrong = (long)w;
}

int main(int argc, char **argv) {
    cfg c;
    int rc = parse(argc, argv, &c);
    if (rc) return rc < 0 ? 0 : rc;
    if (c.factors_only) { /* nccl-tests' busbw factors, for tests and for the curious */
        int n = 4;
        const char *ws = getenv("WORLD_SIZE");
        if (ws) n = atoi(ws);
        for (int k = 0; k < NUM_OPS; ++k) printf("%s %.6f\n", op_names[k], busbw_factor(k, n));
        return 0;
    }
    g_corrupt = c.corrupt;
    if (!strcmp(c.device, "cuda") && load_cuda() != 0) return 1;
    distc_pg_options po = DISTC_PG_OPTIONS_INIT;
    po.backend = c.backend;
    if (distc_pg_new_from_url(&g_pg, c.url, NULL, &po) != 0) {
        fprintf(stderr, "distc-perf: cannot join the group: %s\n", distc_error_last());
        return 1;
    }
    distc_pg_rank(&g_rank, g_pg);
    distc_pg_size(&g_size, g_pg);
    if (g_size > 64) {
        if (g_rank == 0) fprintf(stderr, "distc-perf: at most 64 ranks\n");
        distc_pg_free(g_pg);
        return 2;
    }
    if (c.root >= g_size) {
        if (g_rank == 0) fprintf(stderr, "distc-perf: --root %d is not below the group size %d\n", c.root, g_size);
        distc_pg_free(g_pg);
        return 2;
    }
    int tty = g_rank == 0 && isatty(2) && !c.json && !c.csv;
    if (g_rank == 0 && !c.json) {
        if (c.csv) {
            printf(
                "op,size,count,type,redop,root,oop_time_us,oop_algbw,oop_busbw,oop_wrong,ip_time_us,ip_algbw,ip_busbw,"
                "ip_wrong\n");
        } else {
            printf("# distc-perf: backend %s, %d ranks, %d iterations after %d warm-up, check %s\n", c.backend, g_size,
                   c.iters, c.warmup, c.check ? "on" : "off");
        }
    }
    long total_wrong = 0;
    double peak_busbw = 0;
    int rows = 0;
    for (int oi = 0; oi < c.nops; ++oi) {
        int op = c.ops[oi];
        int rooted = op == OP_BROADCAST || op == OP_REDUCE || op == OP_GATHER || op == OP_SCATTER;
        int reduces = op == OP_ALLREDUCE || op == OP_REDUCE || op == OP_REDUCESCATTER;
        if (g_rank == 0 && !c.json && !c.csv) {
            printf("#\n# %s\n#%65s%35s\n", op_names[op], "out-of-place", "in-place");
            printf("#%11s %12s %8s %6s %5s %9s %7s %7s %6s %9s %7s %7s %6s\n", "size", "count", "type", "redop", "root",
                   "time", "algbw", "busbw", "#wrong", "time", "algbw", "busbw", "#wrong");
            printf("#%11s %12s %8s %6s %5s %9s %7s %7s %6s %9s %7s %7s %6s\n", "(B)", "(elements)", "", "", "", "(us)",
                   "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "");
        }
        for (int di = 0; di < c.ndts; ++di) {
            const dtype_info *d = &dtypes[c.dts[di]];
            size_t es = d->dl.bits / 8;
            for (int ri = 0; ri < (reduces ? c.nrops : 1); ++ri) {
                distc_reduce_op rop = redop_values[c.rops[ri]];
                for (size_t bytes = c.minb; bytes <= c.maxb;
                     bytes = c.factor ? bytes * (size_t)c.factor : bytes + c.incr) {
                    /* nccl-tests' sizes: for allgather/reducescatter/alltoall/gather/scatter the total. */
                    int spread = op == OP_ALLGATHER || op == OP_REDUCESCATTER || op == OP_ALLTOALL || op == OP_GATHER ||
                                 op == OP_SCATTER;
                    int64_t count = (int64_t)(bytes / es / (spread ? (size_t)g_size : 1));
                    size_t shown = (size_t)count * es * (spread ? (size_t)g_size : 1);
                    if (count == 0) { /* too small to give every rank an element, as nccl-tests skips it */
                        if (c.factor && bytes == 0) break;
                        continue;
                    }
                    buffers b;
                    b.bytes = shown ? shown : es;
                    b.in = mem_alloc(b.bytes);
                    b.out = mem_alloc(b.bytes);
                    b.hin = g_cuda < 0 ? b.in : calloc(1, b.bytes);
                    b.hout = g_cuda < 0 ? b.out : calloc(1, b.bytes);
                    if (!b.in || !b.out || !b.hin || !b.hout) {
                        fprintf(stderr, "distc-perf: rank %d: cannot allocate %zu bytes\n", g_rank, b.bytes);
                        distc_pg_free(g_pg);
                        return 1;
                    }
                    result r[2];
                    if (tty) fprintf(stderr, "\r[distc-perf] %s %s %zu B ...   ", op_names[op], d->name, shown);
                    for (int ip = 0; ip < 2; ++ip) {
                        rc = run_op(op, d->dl, rop, c.root, count, ip, &b, c.check, c.iters, c.warmup, &r[ip]);
                        if (rc != 0) {
                            fprintf(stderr, "distc-perf: rank %d: %s %s %zu B failed: %s\n", g_rank, op_names[op],
                                    d->name, shown, distc_error_last());
                            distc_pg_free(g_pg);
                            return 1;
                        }
                        if (r[ip].us >= 0) combine(&r[ip]);
                    }
                    if (g_cuda >= 0) {
                        free(b.hin);
                        free(b.hout);
                    }
                    mem_free(b.in);
                    mem_free(b.out);
                    if (tty) fprintf(stderr, "\r%60s\r", "");
                    if (g_rank != 0) continue;
                    double algbw[2], busbw[2];
                    for (int ip = 0; ip < 2; ++ip) {
                        algbw[ip] = r[ip].us > 0 ? (double)shown / r[ip].us / 1e3 : 0;
                        busbw[ip] = algbw[ip] * busbw_factor(op, g_size);
                        if (r[ip].us >= 0) {
                            total_wrong += r[ip].wrong;
                            if (busbw[ip] > peak_busbw) peak_busbw = busbw[ip];
                        }
                    }
                    ++rows;
                    const char *redop = reduces ? redop_names[c.rops[ri]] : "none";
                    int root = rooted ? c.root : -1;
                    if (c.json) {
                        printf(
                            "{\"op\":\"%s\",\"size\":%zu,\"count\":%lld,\"type\":\"%s\",\"redop\":\"%s\",\"root\":%d,"
                            "\"ranks\":%d,\"backend\":\"%s\"",
                            op_names[op], shown, (long long)count, d->name, redop, root, g_size, c.backend);
                        for (int ip = 0; ip < 2; ++ip) {
                            const char *p = ip ? "ip" : "oop";
                            if (r[ip].us < 0)
                                printf(",\"%s_time_us\":null", p);
                            else
                                printf(",\"%s_time_us\":%.3f,\"%s_algbw\":%.4f,\"%s_busbw\":%.4f,\"%s_wrong\":%ld", p,
                                       r[ip].us, p, algbw[ip], p, busbw[ip], p, r[ip].wrong);
                        }
                        printf("}\n");
                    } else if (c.csv) {
                        printf("%s,%zu,%lld,%s,%s,%d", op_names[op], shown, (long long)count, d->name, redop, root);
                        for (int ip = 0; ip < 2; ++ip)
                            if (r[ip].us < 0)
                                printf(",,,,");
                            else
                                printf(",%.3f,%.4f,%.4f,%ld", r[ip].us, algbw[ip], busbw[ip], r[ip].wrong);
                        printf("\n");
                    } else {
                        printf("%12zu %12lld %8s %6s %5d", shown, (long long)count, d->name, redop, root);
                        for (int ip = 0; ip < 2; ++ip)
                            if (r[ip].us < 0)
                                printf(" %9s %7s %7s %6s", "-", "-", "-", "-");
                            else
                                printf(" %9.2f %7.2f %7.2f %6ld", r[ip].us, algbw[ip], busbw[ip], r[ip].wrong);
                        printf("\n");
                    }
                    fflush(stdout);
                    if (c.factor == 0 && c.incr == 0) break;
                    if (bytes == 0 && c.factor) break;
                }
            }
        }
    }
    if (g_rank == 0 && !c.json && !c.csv) {
        if (!c.check)
            printf("#\n# DONE (results not checked): %d collective(s), %d rows, peak busbw %.2f GB/s\n", c.nops, rows,
                   peak_busbw);
        else if (total_wrong)
            printf("#\n# FAILED: %ld wrong results in %d rows of %d collective(s), peak busbw %.2f GB/s\n", total_wrong,
                   rows, c.nops, peak_busbw);
        else
            printf("#\n# OK: all results correct, %d collective(s), %d rows, peak busbw %.2f GB/s\n", c.nops, rows,
                   peak_busbw);
    }
    /* Out before the verdict reaches the others: a launcher stops this rank once one of them exits 1. */
    fflush(stdout);
    /* Everyone agrees on the verdict (rank 0 summed it). */
    int64_t w = total_wrong;
    reduce_scalar(&w, (DLDataType){kDLInt, 64, 1}, -1);
    distc_pg_free(g_pg);
    return w ? 1 : 0;
}

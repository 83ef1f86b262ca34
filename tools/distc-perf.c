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
 * backend does; times then include the GPU finishing the calls. --device
 * shared puts them in host memory from distc_mem_alloc instead.
 */
#define _GNU_SOURCE
#include <distc.h>
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "perf_memory.h"
#include "perf_ops.h"
#include "size_arg.h"

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

typedef struct cfg {
    int ops[64], nops; /* indices into perf_ops */
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
            "  --device cpu|cuda|shared  where the buffers live (default cuda for --backend nccl, else cpu;\n"
            "                       shared: host memory from distc_mem_alloc, which the host's ranks map)\n"
            "  --json, --csv        one record per row for machines, instead of the table\n"
            "  -h, --help           this text\n");
    return code;
}

static size_t parse_size(const char *s, int *ok) {
    uint64_t v = 0;
    *ok = size_arg(s, &v) == 0;
    return (size_t)v;
}

/* A whole number in [lo, hi], all of `s` (no junk, no wrap-around); 1 when it is one. */
static int int_arg(const char *s, long lo, long hi, int *out) {
    char *end = NULL;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi) return 0;
    *out = (int)v;
    return 1;
}

static int lookup(const char *v, const char *const *names, int n) {
    for (int i = 0; i < n; ++i)
        if (!strcmp(v, names[i])) return i;
    return -1;
}

static int find_op(const char *v) {
    for (int k = 0; k < perf_num_ops; ++k)
        if (!strcmp(v, perf_ops[k].name)) return k;
    return -1;
}

static int parse(int argc, char **argv, cfg *c) {
    memset(c, 0, sizeof *c);
    c->minb = 8, c->maxb = 64u << 20, c->factor = 2, c->iters = 20, c->warmup = 5, c->check = 1;
    c->backend = "gloo";
    c->ops[c->nops++] = 0; /* allreduce */
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
        /* The options below take a value; one given none is told so once the
         * chain has matched it (an unknown one falls through to its end). */
        const int missing = !v;
        if (missing) v = "";
        ++i;
        if (!strcmp(a, "-o") || !strcmp(a, "--op")) {
            c->nops = 0;
            if (!strcmp(v, "all"))
                for (int k = 0; k < perf_num_ops; ++k) c->ops[c->nops++] = k;
            else if ((c->ops[0] = find_op(v)) >= 0)
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
            ok = int_arg(v, 2, 1 << 20, &c->factor);
        else if (!strcmp(a, "-n") || !strcmp(a, "--iters")) /* with -w, their sum stays an int */
            ok = int_arg(v, 1, 1000000000, &c->iters);
        else if (!strcmp(a, "-w") || !strcmp(a, "--warmup_iters"))
            ok = int_arg(v, 0, 1000000000, &c->warmup);
        else if (!strcmp(a, "--root"))
            ok = int_arg(v, 0, INT32_MAX, &c->root);
        else if (!strcmp(a, "-c") || !strcmp(a, "--check"))
            ok = int_arg(v, 0, 1, &c->check);
        else if (!strcmp(a, "--backend"))
            c->backend = v;
        else if (!strcmp(a, "--url"))
            c->url = v;
        else if (!strcmp(a, "--device"))
            ok = !strcmp(c->device = v, "cpu") || !strcmp(v, "cuda") || !strcmp(v, "shared");
        else {
            fprintf(stderr, "distc-perf: unknown option %s\n", a);
            return usage(2);
        }
        if (missing) {
            fprintf(stderr, "distc-perf: %s needs a value\n", a);
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

/* "# rank 0 reaches ranks 1-3 by shm": the transport to each peer, runs of one transport joined. */
static void print_transports(void) {
    printf("# rank 0 reaches");
    int from = 1;
    for (int p = 1; p <= g_size; ++p) {
        const char *a = NULL, *b = NULL;
        if (p < g_size) distc_pg_transport(&b, g_pg, p);
        if (from < p) distc_pg_transport(&a, g_pg, from);
        if (p < g_size && (from == p || (a && b && strcmp(a, b) == 0))) continue;
        if (from < p) {
            if (from == p - 1)
                printf("%s rank %d by %s", from > 1 ? "," : "", from, a ? a : "?");
            else
                printf("%s ranks %d-%d by %s", from > 1 ? "," : "", from, p - 1, a ? a : "?");
        }
        from = p;
    }
    printf(g_size == 1 ? " no peer\n" : "\n");
}

static DLTensor make_tensor(void *data, DLDataType dt, int64_t *shape, int64_t n) {
    *shape = n;
    DLDevice dev = {g_cuda < 0 ? kDLCPU : kDLCUDA, g_cuda < 0 ? 0 : g_cuda};
    DLTensor t = {data, dev, 1, dt, shape, NULL, 0};
    return t;
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
    /* the list forms' tensors, one per rank */
    DLTensor *parts;
    const DLTensor **part_ptrs;
    int64_t *part_shapes;
} buffers;

/*
 * Runs `op` on `count` elements per rank-part (see sizes()), in place or
 * not, `iters` times after `warmup`, and checks the last result.
 */
static int g_corrupt;

static int run_op(const perf_op *op, DLDataType dt, distc_reduce_op rop, int root, int64_t count, int in_place,
                  buffers *b, int check, int iters, int warmup, result *res) {
    res->wrong = 0; /* unchecked, nothing is counted */
    if (!(op->forms & (in_place ? 2 : 1))) {
        res->us = -1;
        return 0;
    }
    size_t es = dt.bits / 8;
    perf_call call = {g_pg,
                      g_rank,
                      g_size,
                      root,
                      dt,
                      rop,
                      count,
                      in_place,
                      b->out,
                      b->out,
                      {g_cuda < 0 ? kDLCPU : kDLCUDA, g_cuda < 0 ? 0 : g_cuda},
                      b->parts,
                      b->part_ptrs,
                      b->part_shapes};
    call.in = b->in;
    /* What each rank contributes; in place it sits in the output (allgather: in this rank's part). */
    int64_t fill_n = op->fill_all ? count * g_size : count;
    size_t src_off = in_place && op->spread && !op->fill_all ? (size_t)count * es * (size_t)g_rank : 0;
    uint8_t *src = (uint8_t *)(in_place ? b->out : b->in) + src_off;
    uint8_t *hsrc = (uint8_t *)(in_place ? b->hout : b->hin) + src_off;
    double t0 = 0;
    /* The pass at warmup + iters reads the clock; with the check on it also runs once more and checks. */
    for (int it = 0; it <= warmup + iters; ++it) {
        int checking = check && it == warmup + iters;
        /* In-place operations overwrite their input: the checked run starts from a fresh one. */
        if (it == 0 || checking) {
            for (int64_t i = 0; i < fill_n; ++i) perf_set_elem(hsrc, dt, i, perf_value(g_rank, i));
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
        int rc = op->launch(&call);
        if (rc != 0) return rc;
        if (!checking) continue;
        mem_sync();
        mem_get(b->hout, b->out, b->bytes); /* the check reads the host copy */
        if (g_corrupt && g_rank == 0)       /* the first element rank 0 checks, whatever the op */
            perf_set_elem(b->hout, dt, 0, 99.0);
        res->wrong = op->wrong(&call, b->hout);
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
        if (ws && !int_arg(ws, 1, INT32_MAX, &n)) {
            fprintf(stderr, "distc-perf: WORLD_SIZE=%s is not a number of ranks\n", ws);
            return 2;
        }
        for (int k = 0; k < perf_num_ops; ++k)
            printf("%s %.6f\n", perf_ops[k].name, perf_busbw_factor(&perf_ops[k], n));
        return 0;
    }
    g_corrupt = c.corrupt;
    if (!strcmp(c.device, "cuda") && load_cuda() != 0) return 1;
    g_shared = !strcmp(c.device, "shared");
    distc_pg_options po = DISTC_PG_OPTIONS_INIT;
    po.backend = c.backend;
    if (distc_pg_new_from_url(&g_pg, c.url, NULL, &po) != 0) {
        fprintf(stderr, "distc-perf: cannot join the group: %s\n", distc_error_last());
        return 1;
    }
    distc_pg_rank(&g_rank, g_pg);
    distc_pg_size(&g_size, g_pg);
    /* The list forms' tensors, one per rank, on the heap: any group size. */
    DLTensor *parts = calloc((size_t)g_size, sizeof *parts);
    const DLTensor **part_ptrs = calloc((size_t)g_size, sizeof *part_ptrs);
    int64_t *part_shapes = calloc((size_t)g_size, sizeof *part_shapes);
    if (!parts || !part_ptrs || !part_shapes) {
        fprintf(stderr, "distc-perf: rank %d: out of memory\n", g_rank);
        distc_pg_free(g_pg);
        return 1;
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
            print_transports();
        }
    }
    long total_wrong = 0;
    double peak_busbw = 0;
    int rows = 0;
    for (int oi = 0; oi < c.nops; ++oi) {
        const perf_op *op = &perf_ops[c.ops[oi]];
        int rooted = op->rooted, reduces = op->reduces;
        if (g_rank == 0 && !c.json && !c.csv) {
            printf("#\n# %s\n#%65s%35s\n", op->name, "out-of-place", "in-place");
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
                    int spread = op->spread;
                    int64_t count = (int64_t)(bytes / es / (spread ? (size_t)g_size : 1));
                    size_t shown = (size_t)count * es * (spread ? (size_t)g_size : 1);
                    if (count == 0) { /* too small to give every rank an element, as nccl-tests skips it */
                        if (c.factor && bytes == 0) break;
                        continue;
                    }
                    buffers b = {.parts = parts, .part_ptrs = part_ptrs, .part_shapes = part_shapes};
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
                    if (tty) fprintf(stderr, "\r[distc-perf] %s %s %zu B ...   ", op->name, d->name, shown);
                    for (int ip = 0; ip < 2; ++ip) {
                        rc = run_op(op, d->dl, rop, c.root, count, ip, &b, c.check, c.iters, c.warmup, &r[ip]);
                        if (rc != 0) {
                            fprintf(stderr, "distc-perf: rank %d: %s %s %zu B failed: %s\n", g_rank, op->name, d->name,
                                    shown, distc_error_last());
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
                        busbw[ip] = algbw[ip] * perf_busbw_factor(op, g_size);
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
                            op->name, shown, (long long)count, d->name, redop, root, g_size, c.backend);
                        for (int ip = 0; ip < 2; ++ip) {
                            const char *p = ip ? "ip" : "oop";
                            if (r[ip].us < 0)
                                printf(",\"%s_time_us\":null", p);
                            else if (!c.check)
                                printf(",\"%s_time_us\":%.3f,\"%s_algbw\":%.4f,\"%s_busbw\":%.4f,\"%s_wrong\":null", p,
                                       r[ip].us, p, algbw[ip], p, busbw[ip], p);
                            else
                                printf(",\"%s_time_us\":%.3f,\"%s_algbw\":%.4f,\"%s_busbw\":%.4f,\"%s_wrong\":%ld", p,
                                       r[ip].us, p, algbw[ip], p, busbw[ip], p, r[ip].wrong);
                        }
                        printf("}\n");
                    } else if (c.csv) {
                        printf("%s,%zu,%lld,%s,%s,%d", op->name, shown, (long long)count, d->name, redop, root);
                        for (int ip = 0; ip < 2; ++ip)
                            if (r[ip].us < 0)
                                printf(",,,,");
                            else if (!c.check)
                                printf(",%.3f,%.4f,%.4f,", r[ip].us, algbw[ip], busbw[ip]);
                            else
                                printf(",%.3f,%.4f,%.4f,%ld", r[ip].us, algbw[ip], busbw[ip], r[ip].wrong);
                        printf("\n");
                    } else {
                        printf("%12zu %12lld %8s %6s %5d", shown, (long long)count, d->name, redop, root);
                        for (int ip = 0; ip < 2; ++ip)
                            if (r[ip].us < 0)
                                printf(" %9s %7s %7s %6s", "-", "-", "-", "-");
                            else if (!c.check)
                                printf(" %9.2f %7.2f %7.2f %6s", r[ip].us, algbw[ip], busbw[ip], "N/A");
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
    free(parts);
    free(part_ptrs);
    free(part_shapes);
    distc_pg_free(g_pg);
    return w ? 1 : 0;
}

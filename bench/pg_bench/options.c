/* distc-pg-bench's command line: sizes, counts, the ops to run, usage. */
#define _POSIX_C_SOURCE 200809L
#include "bench.h"

#include "size_arg.h"
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
            "          [--shared-memory]  (the buffers from distc_mem_alloc: shared with the host's ranks)\n"
            "          [--in-place]  (allgather's and gather's input in the output, reduce_scatter's and scatter's\n"
            "                         output in the input, alltoall's input and output one buffer)\n"
            "          [--huge-pages]  (ordinary buffers advised as transparent huge pages, MADV_HUGEPAGE)\n"
            "  One rank of a collective benchmark; without --rank/--size/--port: env:// (RANK, WORLD_SIZE,\n"
            "  MASTER_ADDR, MASTER_PORT). OPS: allreduce,broadcast,allgather,reduce_scatter,alltoall,\n"
            "  gather, scatter, sendrecv, barrier or all (default all).\n"
            "  Sizes -b 8 to -e 64M (K/M/G = 1024^n), x -f 2 each step. Per size: one checked call, one probe,\n"
            "  then up to --warmup (5) and --iters (1000) calls within --time-ms (100; 0: no time box),\n"
            "  at least --min-iters (2) timed.\n",
            argv0);
}

/* The option's switch in cfg where `a` names one that takes no value; NULL otherwise. */
static int *switch_of(config *cfg, const char *a) {
    static const struct {
        const char *name;
        size_t offset;
    } switches[] = {{"--json", offsetof(config, json)},
                    {"--memcpy", offsetof(config, memcpy_only)},
                    {"--shared-memory", offsetof(config, shared_mem)},
                    {"--in-place", offsetof(config, in_place)},
                    {"--huge-pages", offsetof(config, huge_pages)}};
    for (size_t i = 0; i < sizeof switches / sizeof switches[0]; ++i)
        if (!strcmp(a, switches[i].name)) return (int *)((char *)cfg + switches[i].offset);
    return NULL;
}

int parse_args(config *cfg, int argc, char **argv) {
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
        int *flag = switch_of(cfg, a);
        if (flag) {
            *flag = 1;
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

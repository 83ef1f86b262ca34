/* distc-trace-cost: what the flight recorder costs a small collective.
 *
 *   distc-run -n N distc-trace-cost [--rounds R] [--iters I] [--bytes B ...] [--control]
 *
 * Each rank creates two subgroups of all ranks, alike but for the recorder: one with the recorder
 * off (DISTC_TRACE_BUFFER=0) and one with it on (the default buffer, or
 * what DISTC_TRACE_BUFFER says when set). The two are timed in alternating
 * rounds of I blocking allreduces of float32 in one run, so that both see the
 * same machine; rank 0 prints, per size, the median of the rounds' per-call
 * times (the slowest rank's) for each group, their ratio and the difference
 * in nanoseconds; and the median of each round pair's difference, which
 * the machine's slower swings (both rounds of a pair see the same) leave
 * out. --control turns the recorder off in both: what the table
 * then shows is the noise of the measurement. Timings are printed, never
 * judged. */
#define _POSIX_C_SOURCE 200809L
#include <distc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_ROUNDS 1001

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static DLTensor tensor(void *data, int64_t *shape, uint8_t code, uint8_t bits) {
    DLTensor t;
    memset(&t, 0, sizeof t);
    t.data = data;
    t.device.device_type = kDLCPU;
    t.ndim = 1;
    t.dtype.code = code;
    t.dtype.bits = bits;
    t.dtype.lanes = 1;
    t.shape = shape;
    return t;
}

static void check(int rc, const char *what) {
    if (rc != 0) {
        fprintf(stderr, "distc-trace-cost: %s failed: %s\n", what, distc_error_last());
        exit(1);
    }
}

/* The slowest rank's seconds per call over `iters` allreduces of `t`. */
static double timed(distc_pg *pg, DLTensor *t, long iters) {
    check(distc_barrier(NULL, pg, NULL), "barrier");
    double t0 = now_s();
    for (long i = 0; i < iters; ++i) check(distc_allreduce(NULL, pg, t, DISTC_SUM, NULL), "allreduce");
    double per = (now_s() - t0) / (double)iters;
    int64_t one = 1;
    DLTensor p = tensor(&per, &one, kDLFloat, 64);
    check(distc_allreduce(NULL, pg, &p, DISTC_MAX, NULL), "allreduce of the times");
    return per;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp);
    return v[n / 2];
}

int main(int argc, char **argv) {
    int rounds = 21;
    long iters = 20000;
    long sizes[16];
    int nsizes = 0, control = 0;
    for (int i = 1; i < argc; ++i) {
        if (!strcmp(argv[i], "--rounds") && i + 1 < argc) {
            rounds = atoi(argv[++i]);
        } else if (!strcmp(argv[i], "--iters") && i + 1 < argc) {
            iters = atol(argv[++i]);
        } else if (!strcmp(argv[i], "--control")) {
            control = 1;
        } else if (!strcmp(argv[i], "--bytes") && i + 1 < argc && nsizes < 16) {
            sizes[nsizes++] = atol(argv[++i]);
        } else {
            fprintf(stderr, "usage: distc-trace-cost [--rounds R] [--iters I] [--bytes B ...] [--control]\n");
            return 2;
        }
    }
    if (rounds < 1 || rounds > MAX_ROUNDS || iters < 1) {
        fprintf(stderr, "distc-trace-cost: --rounds 1..%d, --iters at least 1\n", MAX_ROUNDS);
        return 2;
    }
    if (!nsizes) {
        sizes[nsizes++] = 8;
        sizes[nsizes++] = 4096;
    }

    const char *asked = getenv("DISTC_TRACE_BUFFER");
    char on[32];
    snprintf(on, sizeof on, "%s", control ? "0" : asked && *asked && strcmp(asked, "0") ? asked : "1000");
    distc_pg *world = NULL, *off_pg = NULL, *on_pg = NULL;
    check(distc_pg_new_from_url(&world, "env://", NULL, NULL), "the group");
    int32_t rank, size;
    check(distc_pg_rank(&rank, world), "rank");
    check(distc_pg_size(&size, world), "size");
    int32_t *all = malloc(sizeof *all * (size_t)size);
    for (int32_t r = 0; r < size; ++r) all[r] = r;
    /* Both timed groups are subgroups of the world, made alike but for the recorder. */
    setenv("DISTC_TRACE_BUFFER", "0", 1);
    check(distc_pg_new_subgroup(&off_pg, world, all, (size_t)size, NULL), "the group without recorder");
    setenv("DISTC_TRACE_BUFFER", on, 1);
    check(distc_pg_new_subgroup(&on_pg, world, all, (size_t)size, NULL), "the group with recorder");
    const char *transport = "self";
    if (size > 1) check(distc_pg_transport(&transport, off_pg, (rank + 1) % size), "transport");

    if (rank == 0) {
        printf("# distc-trace-cost: %d rank(s) over %s, %d alternating rounds of %ld blocking allreduces (float32)\n",
               size, transport, rounds, iters);
        printf("# the recorder off (DISTC_TRACE_BUFFER=0) and on (DISTC_TRACE_BUFFER=%s); medians of the rounds,\n",
               on);
        printf("# and of the rounds' paired differences (on - off, each pair run back to back)\n");
        printf("# %10s %12s %12s %8s %10s %12s %13s\n", "bytes", "off (us)", "on (us)", "on/off", "cost (ns)",
               "paired (ns)", "paired/off");
    }
    for (int s = 0; s < nsizes; ++s) {
        int64_t n = sizes[s] / 4 > 0 ? sizes[s] / 4 : 1;
        float *buf = calloc((size_t)n, sizeof *buf);
        DLTensor t = tensor(buf, &n, kDLFloat, 32);
        static double off_t[MAX_ROUNDS], on_t[MAX_ROUNDS], diff[MAX_ROUNDS];
        timed(off_pg, &t, iters / 10 + 1); /* warm both up */
        timed(on_pg, &t, iters / 10 + 1);
        for (int r = 0; r < rounds; ++r) {
            /* Alternate which goes first, so that neither always follows the other. */
            if (r % 2) {
                on_t[r] = timed(on_pg, &t, iters);
                off_t[r] = timed(off_pg, &t, iters);
            } else {
                off_t[r] = timed(off_pg, &t, iters);
                on_t[r] = timed(on_pg, &t, iters);
            }
        }
        for (int r = 0; r < rounds; ++r) diff[r] = on_t[r] - off_t[r];
        double a = median(off_t, rounds), b = median(on_t, rounds), d = median(diff, rounds);
        if (rank == 0)
            printf("  %10ld %12.3f %12.3f %8.3f %10.1f %12.1f %12.2f%%\n", (long)(n * 4), a * 1e6, b * 1e6, b / a,
                   (b - a) * 1e9, d * 1e9, 100 * d / a);
        free(buf);
    }
    fflush(stdout);
    distc_pg_free(on_pg);
    distc_pg_free(off_pg);
    distc_pg_free(world);
    free(all);
    return 0;
}

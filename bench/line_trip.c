/* How long a cache line takes to go from one core to another, the cost
 * under every small message between ranks on one host: a shared-memory
 * message is a line that its writer stores and its reader then loads.
 * Two threads on two cores pass two lines back and forth; half a round
 * trip is printed, the median of several runs.
 *
 *   distc-line-trip [--cores A,B] [--trips N] [--runs R] [--json]
 *
 * On a VM the host may move the virtual cores while a benchmark runs: the
 * same two cores then take two or three times as long, and every small
 * collective with them (bench/compare and bench/ab print this at their start
 * and end, so that a table says which it met). */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "size_arg.h"

struct line {
    _Alignas(64) atomic_uint_fast64_t v;
    char pad[64 - sizeof(atomic_uint_fast64_t)];
};

static struct line ping, pong;
static long trips = 100000;
static int runs = 5;
static atomic_int start_run;
static atomic_int pinned; /* the other thread: 1 on its core, -1 when it could not be */

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int pin(int cpu) {
    cpu_set_t s;
    CPU_ZERO(&s);
    CPU_SET(cpu, &s);
    return pthread_setaffinity_np(pthread_self(), sizeof s, &s);
}

/* The other side: answers each ping with the same value. */
static void *answer(void *arg) {
    if (pin(*(const int *)arg) != 0) {
        atomic_store(&pinned, -1);
        return NULL;
    }
    atomic_store(&pinned, 1);
    uint64_t base = 0;
    for (int r = 0; r < runs; ++r) {
        while (atomic_load_explicit(&start_run, memory_order_acquire) <= r) {}
        for (long i = 1; i <= trips; ++i) {
            while (atomic_load_explicit(&ping.v, memory_order_acquire) != base + (uint64_t)i) {}
            atomic_store_explicit(&pong.v, base + (uint64_t)i, memory_order_release);
        }
        base += (uint64_t)trips;
    }
    return NULL;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static int usage(const char *prog) {
    fprintf(stderr, "usage: %s [--cores A,B] [--trips N] [--runs R] [--json]\n", prog);
    return 2;
}

int main(int argc, char **argv) {
    int cores[2] = {-1, -1}, json = 0;
    for (int i = 1; i < argc; ++i) {
        if (!strcmp(argv[i], "--cores") && i + 1 < argc) {
            if (sscanf(argv[++i], "%d,%d", &cores[0], &cores[1]) != 2 || cores[0] < 0 || cores[1] < 0 ||
                cores[0] == cores[1] || cores[0] >= CPU_SETSIZE || cores[1] >= CPU_SETSIZE)
                return usage(argv[0]);
        } else if (!strcmp(argv[i], "--trips") && i + 1 < argc) {
            uint64_t v = 0;
            if (size_arg(argv[++i], &v) != 0 || v < 1 || v > 100000000) return usage(argv[0]);
            trips = (long)v;
        } else if (!strcmp(argv[i], "--runs") && i + 1 < argc) {
            runs = atoi(argv[++i]);
            if (runs < 1 || runs > 1000) return usage(argv[0]);
        } else if (!strcmp(argv[i], "--json")) {
            json = 1;
        } else {
            return usage(argv[0]);
        }
    }
    if (cores[0] < 0) { /* the first two this process may run on */
        cpu_set_t s;
        if (sched_getaffinity(0, sizeof s, &s) != 0) return perror("sched_getaffinity"), 1;
        int k = 0;
        for (int c = 0; c < CPU_SETSIZE && k < 2; ++c)
            if (CPU_ISSET(c, &s)) cores[k++] = c;
        if (k < 2) {
            printf(json ? "{\"line_trip_ns\": null, \"why\": \"one core\"}\n" : "one core: no trip to measure\n");
            return 0;
        }
    }
    if (pin(cores[0]) != 0) return fprintf(stderr, "%s: cannot run on core %d\n", argv[0], cores[0]), 1;
    pthread_t t;
    if (pthread_create(&t, NULL, answer, &cores[1]) != 0) return perror("pthread_create"), 1;
    while (atomic_load(&pinned) == 0) sched_yield();
    if (atomic_load(&pinned) < 0) {
        pthread_join(t, NULL);
        return fprintf(stderr, "%s: cannot run on core %d\n", argv[0], cores[1]), 1;
    }
    double *ns = calloc((size_t)runs, sizeof *ns);
    if (!ns) return perror("calloc"), 1;
    uint64_t base = 0;
    for (int r = 0; r < runs; ++r) {
        atomic_store_explicit(&start_run, r + 1, memory_order_release);
        double t0 = now();
        for (long i = 1; i <= trips; ++i) {
            atomic_store_explicit(&ping.v, base + (uint64_t)i, memory_order_release);
            while (atomic_load_explicit(&pong.v, memory_order_acquire) != base + (uint64_t)i) {}
        }
        ns[r] = (now() - t0) / (double)trips / 2 * 1e9;
        base += (uint64_t)trips;
    }
    pthread_join(t, NULL);
    qsort(ns, (size_t)runs, sizeof *ns, cmp_double);
    double med = ns[runs / 2];
    if (json)
        printf(
            "{\"line_trip_ns\": %.1f, \"cores\": [%d, %d], \"min_ns\": %.1f, \"max_ns\": %.1f, \"trips\": %ld, "
            "\"runs\": %d}\n",
            med, cores[0], cores[1], ns[0], ns[runs - 1], trips, runs);
    else
        printf(
            "cache-line trip between cores %d and %d: %.1f ns one way (median of %d runs of %ld round trips; "
            "%.1f-%.1f)\n",
            cores[0], cores[1], med, runs, trips, ns[0], ns[runs - 1]);
    free(ns);
    return 0;
}

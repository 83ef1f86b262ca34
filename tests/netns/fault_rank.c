/* One rank of a multi-host fault test (tests/netns/test_multihost.sh).
 *
 *   fault_rank loop        allreduce 64 KiB again and again, checking each
 *                          result, until one fails; says READY once the
 *                          group works (the test then cuts a link)
 *   fault_rank rendezvous  join the job (env://) and make a group
 *   fault_rank hang        allreduce like loop, but the last rank skips
 *                          the third and then sleeps: a hung job
 *
 * FAULT_TIMEOUT_MS bounds the rendezvous and the group's operations. A
 * failure prints "FAILED after MS ms: MESSAGE", MS being how long the
 * failing call took, and exits 3; success exits 0. */
#define _GNU_SOURCE
#include <distc.h>
#include <stdio.h>
#include "pg_harness.h"
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int failed(double since, const char *what) {
    printf("FAILED after %.0f ms: %s: %s\n", now_ms() - since, what, distc_error_last());
    fflush(stdout);
    return 3;
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "loop";
    const char *t = getenv("FAULT_TIMEOUT_MS");
    int64_t timeout = t ? atoll(t) : 5000;
    distc_rendezvous_options rv = DISTC_RENDEZVOUS_OPTIONS_INIT;
    rv.timeout_ms = timeout;
    distc_pg_options o = DISTC_PG_OPTIONS_INIT;
    o.timeout_ms = timeout;
    distc_pg *pg = NULL;
    double start = now_ms();
    if (distc_pg_new_from_url(&pg, "env://", &rv, &o) != 0) return failed(start, "joining the job");
    int32_t rank = -1, size = 0;
    distc_pg_rank(&rank, pg);
    distc_pg_size(&size, pg);
    if (strcmp(mode, "rendezvous") == 0) {
        printf("JOINED rank %d of %d\n", rank, size);
        distc_pg_free(pg);
        return 0;
    }
    enum { N = 16384 };
    DLTensor *d = dt_tensor_1d(DT_F32, N);
    float *x = d->data;
    int hang = strcmp(mode, "hang") == 0;
    for (long it = 0; it < 10000000; ++it) {
        if (hang && rank == size - 1 && it == 2) {
            printf("SKIPPING rank %d\n", rank);
            fflush(stdout);
            for (;;) sleep(600); /* a signal (a trace request) only cuts one sleep short */
        }
        for (int i = 0; i < N; ++i) x[i] = (float)(rank + i % 7);
        double call = now_ms();
        if (distc_allreduce(NULL, pg, d, DISTC_SUM, NULL) != 0) {
            int rc = failed(call, "allreduce");
            dt_tensor_free(d);
            distc_pg_free(pg);
            return rc;
        }
        for (int i = 0; i < N; ++i)
            if (x[i] != (float)(size * (i % 7) + size * (size - 1) / 2)) {
                printf("FAILED after 0 ms: allreduce #%ld gave %g at %d\n", it, x[i], i);
                dt_tensor_free(d);
                distc_pg_free(pg);
                return 4;
            }
        if (it == 20) {
            printf("READY rank %d\n", rank);
            fflush(stdout);
        }
    }
    dt_tensor_free(d);
    distc_pg_free(pg);
    return 0;
}

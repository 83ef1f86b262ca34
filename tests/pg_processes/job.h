/* test_pg_processes' jobs (job.c): how ranks lie on (fake) hosts, and a rank
 * joining its group with the transports the layout must give. */
#ifndef DISTC_TEST_PG_PROCESSES_JOB_H
#define DISTC_TEST_PG_PROCESSES_JOB_H

#include <stdio.h>

#include "test_util.h"

struct job {
    int port;
    int64_t timeout_ms;
    int victim;     /* the rank that misbehaves, or -1 */
    int fake_hosts; /* ranks per fake host (DISTC_HOST_ID); -k: rank % k is the host; 0: none */
    int shm_off;    /* the rank that sets DISTC_SHM=0, or -1 */
    int odd_ring;   /* 1 + the rank that wants rings of another size (its segment fails), or 0 */
};

DLTensor f32(float *p, int64_t *shape);

#define CHILD_CHECK(cond, ...)            \
    do {                                  \
        if (!(cond)) {                    \
            fprintf(stderr, __VA_ARGS__); \
            fprintf(stderr, "\n");        \
            return 1;                     \
        }                                 \
    } while (0)

distc_pg *join(int rank, int n, const struct job *j);

#endif

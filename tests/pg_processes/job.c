/* test_pg_processes' jobs (job.h): how ranks lie on (fake) hosts, which
 * transport each pair must take, and a rank joining its group by URL. */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>

#include "job.h"

DLTensor f32(float *p, int64_t *shape) {
    DLTensor t;
    memset(&t, 0, sizeof t);
    t.data = p;
    t.device.device_type = kDLCPU;
    t.ndim = 1;
    t.dtype.code = kDLFloat;
    t.dtype.bits = 32;
    t.dtype.lanes = 1;
    t.shape = shape;
    return t;
}

/* Which host a rank is on in this job: fake hosts of `fake_hosts` ranks, or
 * one host with the `shm_off` rank apart. */
static int host_of(int rank, const struct job *j) {
    if (j->fake_hosts > 0) return rank / j->fake_hosts;
    if (j->fake_hosts < 0) return rank % -j->fake_hosts;
    return rank == j->shm_off ? -1 : 0;
}

/* What a rank's collectives must take to `peer`: shared memory to a peer on
 * its host (when any host has two ranks and none turned it all off), else
 * the TCP mesh. */
static const char *expected_transport(int rank, int peer, int n, const struct job *j) {
    const char *off = getenv("DISTC_SHM"), *mesh = getenv("DISTC_MESH_BYTES");
    if (mesh && strcmp(mesh, "0") == 0) return "gloo";
    if (off && strcmp(off, "0") == 0) return "tcp";
    if (j->odd_ring) return "tcp"; /* a segment that cannot be made sends every rank to TCP */
    int sharing = 0;
    for (int a = 0; a < n; ++a)
        for (int b = a + 1; b < n; ++b) sharing |= host_of(a, j) == host_of(b, j) && host_of(a, j) >= 0;
    return sharing && host_of(rank, j) == host_of(peer, j) && host_of(rank, j) >= 0 ? "shm" : "tcp";
}

distc_pg *join(int rank, int n, const struct job *j) {
    if (j->fake_hosts != 0) {
        char id[32];
        snprintf(id, sizeof id, "host-%d", host_of(rank, j));
        setenv("DISTC_HOST_ID", id, 1);
    }
    if (rank == j->shm_off) setenv("DISTC_SHM", "0", 1);
    if (rank + 1 == j->odd_ring) setenv("DISTC_SHM_RING_BYTES", "65536", 1);
    char url[128];
    snprintf(url, sizeof url, "tcp://127.0.0.1:%d?rank=%d&world_size=%d", j->port, rank, n);
    distc_pg_options o = DISTC_PG_OPTIONS_INIT;
    o.timeout_ms = j->timeout_ms;
    distc_rendezvous_options rv = DISTC_RENDEZVOUS_OPTIONS_INIT;
    rv.timeout_ms = 20000;
    distc_pg *pg = NULL;
    if (distc_pg_new_from_url(&pg, url, &rv, &o) != 0) {
        fprintf(stderr, "rank %d: %s\n", rank, distc_error_last());
        return NULL;
    }
    const char *want = expected_transport(rank, (rank + 1) % n, n, j), *self = NULL, *peer = NULL;
    if (distc_pg_transport(&self, pg, rank) != 0 || distc_pg_transport(&peer, pg, (rank + 1) % n) != 0 ||
        strcmp(self, "self") != 0 || strcmp(peer, want) != 0) {
        fprintf(stderr, "rank %d: transports %s (self), %s (peer), expected %s\n", rank, self ? self : "?",
                peer ? peer : "?", want);
        distc_pg_free(pg);
        return NULL;
    }
    return pg;
}

/* Process groups across real processes: rendezvous by URL, collectives, and
 * what survivors get when a rank dies, stalls, or when a rank aborts. */
#define _GNU_SOURCE
#include <dirent.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "test_util.h"

struct job {
    int port;
    int64_t timeout_ms;
    int victim;     /* the rank that misbehaves, or -1 */
    int fake_hosts; /* ranks per fake host (DISTC_HOST_ID); -k: rank % k is the host; 0: none */
    int shm_off;    /* the rank that sets DISTC_SHM=0, or -1 */
    int odd_ring;   /* 1 + the rank that wants rings of another size (its segment fails), or 0 */
};

static DLTensor f32(float *p, int64_t *shape) {
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

#define CHILD_CHECK(cond, ...)            \
    do {                                  \
        if (!(cond)) {                    \
            fprintf(stderr, __VA_ARGS__); \
            fprintf(stderr, "\n");        \
            return 1;                     \
        }                                 \
    } while (0)

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

static distc_pg *join(int rank, int n, const struct job *j) {
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

/* Nothing the library made is left under /dev/shm (its segments are memfds). */
static int dev_shm_clean(void) {
    DIR *d = opendir("/dev/shm");
    if (!d) return 1;
    int clean = 1;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        if (strstr(e->d_name, "distc")) {
            fprintf(stderr, "left in /dev/shm: %s\n", e->d_name);
            clean = 0;
        }
    closedir(d);
    return clean;
}

/* gather to the last rank and scatter from rank 1 (each, on fake hosts of
 * two, a host's second rank: the root is not its host's leader),
 * reduce_scatter (small: through the hosts' leaders; large: the flat mesh)
 * and an uneven alltoall: parts that differ by sender and receiver, in
 * every layout of ranks on hosts. */
static int spread_collectives(distc_pg *pg, int rank, int n) {
    enum { P = 5, MAXR = 8 };
    float part[P], parts[MAXR][P], all[MAXR * P];
    int64_t pshape[1] = {P}, ashape[1] = {(int64_t)n * P};
    DLTensor pt = f32(part, pshape), at = f32(all, ashape), pts[MAXR];
    DLTensor *list[MAXR];
    for (int q = 0; q < n; ++q) {
        pts[q] = f32(parts[q], pshape);
        list[q] = &pts[q];
    }
    for (int root = n - 1; root >= 0; root -= n - 1) {
        for (int i = 0; i < P; ++i) part[i] = (float)(rank * 10 + i);
        memset(parts, 0, sizeof parts);
        CHILD_CHECK(distc_gather(NULL, pg, rank == root ? list : NULL, &pt, root, NULL) == 0, "gather: %s",
                    distc_error_last());
        for (int q = 0; rank == root && q < n; ++q)
            for (int i = 0; i < P; ++i)
                CHILD_CHECK(parts[q][i] == (float)(q * 10 + i), "rank %d: gather to %d: part %d[%d] is %g", rank, root,
                            q, i, parts[q][i]);
        if (n == 1) break;
    }
    int sroot = n > 1 ? 1 : 0;
    for (int q = 0; q < n; ++q)
        for (int i = 0; i < P; ++i) parts[q][i] = rank == sroot ? (float)(q * 100 + i) : -1.0f;
    CHILD_CHECK(distc_scatter(NULL, pg, &pt, rank == sroot ? (const DLTensor *const *)list : NULL, sroot, NULL) == 0,
                "scatter: %s", distc_error_last());
    for (int i = 0; i < P; ++i)
        CHILD_CHECK(part[i] == (float)(rank * 100 + i), "rank %d: scatter part[%d] is %g", rank, i, part[i]);
    for (int q = 0; q < n * P; ++q) all[q] = (float)(rank + q);
    CHILD_CHECK(distc_reduce_scatter_tensor(NULL, pg, &pt, &at, DISTC_SUM, NULL) == 0, "reduce_scatter: %s",
                distc_error_last());
    for (int i = 0; i < P; ++i) {
        float want = (float)(n * (n - 1) / 2 + n * (rank * P + i));
        CHILD_CHECK(part[i] == want, "rank %d: reduce_scatter[%d] is %g, not %g", rank, i, part[i], want);
    }
    /* Past kHierReduceScatterBytes (64 KiB of input) reduce_scatter takes the flat mesh across hosts. */
    enum { BIG = 16384 };
    float *big_in = malloc(sizeof(float) * BIG * (size_t)n), *big_out = malloc(sizeof(float) * BIG);
    int64_t bshape[1] = {BIG}, binshape[1] = {(int64_t)n * BIG};
    DLTensor bo = f32(big_out, bshape), bi = f32(big_in, binshape);
    for (int q = 0; q < n * BIG; ++q) big_in[q] = (float)(rank + q % 1000);
    int big_ok = distc_reduce_scatter_tensor(NULL, pg, &bo, &bi, DISTC_SUM, NULL) == 0;
    for (int i = 0; big_ok && i < BIG; ++i)
        big_ok = big_out[i] == (float)(n * (n - 1) / 2 + n * ((rank * BIG + i) % 1000));
    CHILD_CHECK(big_ok, "rank %d: a reduce_scatter of %d floats per rank is wrong: %s", rank, BIG, distc_error_last());
    /* Past kHierAlltoallBytes between two hosts, all-to-all takes the flat mesh: rank r sends q its block r*n+q. */
    float *got = malloc(sizeof(float) * BIG * (size_t)n);
    DLTensor go = f32(got, binshape);
    for (int q = 0; q < n * BIG; ++q) big_in[q] = (float)((rank * n + q / BIG) * 7 + q % BIG);
    big_ok = distc_alltoall_single(NULL, pg, &go, &bi, NULL, NULL, NULL) == 0;
    for (int q = 0; big_ok && q < n * BIG; ++q) big_ok = got[q] == (float)(((q / BIG) * n + rank) * 7 + q % BIG);
    free(got);
    free(big_in);
    free(big_out);
    CHILD_CHECK(big_ok, "rank %d: an all-to-all of %d floats per rank is wrong: %s", rank, n * BIG, distc_error_last());
    /* Parts of 256 KiB: gather and scatter in place among a host's ranks (views of one buffer at the root). */
    enum { HUGE = 65536 };
    float *mine = malloc(sizeof(float) * HUGE), *whole = malloc(sizeof(float) * HUGE * (size_t)n);
    int64_t hshape[1] = {HUGE};
    DLTensor ht = f32(mine, hshape), hviews[MAXR], *hlist[MAXR];
    for (int q = 0; q < n; ++q) {
        hviews[q] = f32(whole + (size_t)q * HUGE, hshape);
        hlist[q] = &hviews[q];
    }
    const int groot = n - 1;
    for (int i = 0; i < HUGE; ++i) mine[i] = (float)(rank * 3 + i % 1001);
    for (int q = 0; q < n * HUGE; ++q) whole[q] = -1.0f;
    big_ok = distc_gather(NULL, pg, rank == groot ? hlist : NULL, &ht, groot, NULL) == 0;
    for (int q = 0; big_ok && rank == groot && q < n * HUGE; ++q)
        big_ok = whole[q] == (float)((q / HUGE) * 3 + (q % HUGE) % 1001);
    CHILD_CHECK(big_ok, "rank %d: a gather of %d floats per rank is wrong: %s", rank, HUGE, distc_error_last());
    for (int q = 0; q < n * HUGE; ++q) whole[q] = rank == sroot ? (float)((q / HUGE) * 5 + (q % HUGE) % 997) : -1.0f;
    big_ok = distc_scatter(NULL, pg, &ht, rank == sroot ? (const DLTensor *const *)hlist : NULL, sroot, NULL) == 0;
    for (int i = 0; big_ok && i < HUGE; ++i) big_ok = mine[i] == (float)(rank * 5 + i % 997);
    CHILD_CHECK(big_ok, "rank %d: a scatter of %d floats per rank is wrong: %s", rank, HUGE, distc_error_last());
    free(mine);
    free(whole);
    /* Rank r sends (r + q) % 3 + 1 elements to rank q, valued r*100 + q*10 + k. */
    float in[MAXR * 3], out[MAXR * 3];
    int64_t isplit[MAXR], osplit[MAXR], ilen = 0, olen = 0;
    for (int q = 0; q < n; ++q) {
        isplit[q] = (rank + q) % 3 + 1;
        osplit[q] = (q + rank) % 3 + 1;
        for (int k = 0; k < isplit[q]; ++k) in[ilen++] = (float)(rank * 100 + q * 10 + k);
        olen += osplit[q];
    }
    int64_t ishape[1] = {ilen}, oshape[1] = {olen};
    DLTensor it = f32(in, ishape), ot = f32(out, oshape);
    CHILD_CHECK(distc_alltoall_single(NULL, pg, &ot, &it, osplit, isplit, NULL) == 0, "alltoall: %s",
                distc_error_last());
    int64_t o = 0;
    for (int q = 0; q < n; ++q)
        for (int k = 0; k < osplit[q]; ++k, ++o)
            CHILD_CHECK(out[o] == (float)(q * 100 + rank * 10 + k), "rank %d: alltoall from %d [%d] is %g", rank, q, k,
                        out[o]);
    return 0;
}

static int collectives_child(int rank, int n, void *arg) {
    distc_pg *pg = join(rank, n, arg);
    CHILD_CHECK(pg, "rank %d could not join", rank);
    int32_t r = -1, s = -1;
    distc_pg_rank(&r, pg);
    distc_pg_size(&s, pg);
    CHILD_CHECK(r == rank && s == n, "rank %d: pg says %d/%d", rank, r, s);
    enum { M = 1000 };
    float x[M], all[8 * M];
    int64_t shape[1] = {M}, ashape[1] = {(int64_t)n * M};
    for (int i = 0; i < M; ++i) x[i] = (float)(rank + i);
    DLTensor t = f32(x, shape), a = f32(all, ashape);
    CHILD_CHECK(distc_allreduce(NULL, pg, &t, DISTC_SUM, NULL) == 0, "allreduce: %s", distc_error_last());
    for (int i = 0; i < M; ++i)
        CHILD_CHECK(x[i] == (float)(n * i + n * (n - 1) / 2), "rank %d allreduce[%d] = %g", rank, i, x[i]);
    for (int i = 0; i < M; ++i) x[i] = (float)(rank * 1000 + i);
    CHILD_CHECK(distc_allgather_into_tensor(NULL, pg, &a, &t, NULL) == 0, "allgather: %s", distc_error_last());
    for (int q = 0; q < n; ++q)
        CHILD_CHECK(all[q * M + 7] == (float)(q * 1000 + 7), "rank %d allgather from %d wrong", rank, q);
    CHILD_CHECK(distc_broadcast(NULL, pg, &t, n - 1, NULL) == 0, "broadcast: %s", distc_error_last());
    CHILD_CHECK(x[3] == (float)((n - 1) * 1000 + 3), "rank %d broadcast wrong", rank);
    if (spread_collectives(pg, rank, n) != 0) return 1;
    /* Async: queue two, then wait. */
    distc_work *w1 = NULL, *w2 = NULL;
    CHILD_CHECK(distc_allreduce(&w1, pg, &t, DISTC_MAX, NULL) == 0, "async: %s", distc_error_last());
    CHILD_CHECK(distc_barrier(&w2, pg, NULL) == 0, "async barrier: %s", distc_error_last());
    CHILD_CHECK(distc_work_wait(w1, -1) == 0 && distc_work_wait(w2, -1) == 0, "wait: %s", distc_error_last());
    distc_work_free(w1);
    distc_work_free(w2);
    /* A ring of sends and receives. */
    float in = -1, outv = (float)rank;
    int64_t one[1] = {1};
    DLTensor ti = f32(&in, one), to = f32(&outv, one);
    distc_work *ws = NULL;
    CHILD_CHECK(distc_send(&ws, pg, &to, (rank + 1) % n, 3, NULL) == 0, "send: %s", distc_error_last());
    CHILD_CHECK(distc_recv(NULL, pg, &ti, (rank + n - 1) % n, 3, NULL) == 0, "recv: %s", distc_error_last());
    CHILD_CHECK(distc_work_wait(ws, -1) == 0, "send wait: %s", distc_error_last());
    distc_work_free(ws);
    CHILD_CHECK(in == (float)((rank + n - 1) % n), "rank %d got %g in the ring", rank, in);
    /* Rank 0 receives from any source: two messages of one tag from every
     * other rank, whatever carries them (shared memory from its host, TCP
     * from the others), each rank's in the order sent. */
    if (rank == 0) {
        int next[8] = {0};
        for (int k = 0; k < 2 * (n - 1); ++k) {
            distc_work *w = NULL;
            int32_t src = -1;
            CHILD_CHECK(distc_recv(&w, pg, &ti, DISTC_ANY_SOURCE, 9, NULL) == 0 && distc_work_wait(w, -1) == 0 &&
                            distc_work_source_rank(&src, w) == 0,
                        "recv from any source: %s", distc_error_last());
            distc_work_free(w);
            CHILD_CHECK(src >= 1 && src < n && in == (float)(src * 10 + next[src]), "message %g from %d", in, src);
            ++next[src];
        }
    } else {
        for (int k = 0; k < 2; ++k) {
            outv = (float)(rank * 10 + k);
            CHILD_CHECK(distc_send(NULL, pg, &to, 0, 9, NULL) == 0, "send to 0: %s", distc_error_last());
        }
    }
    CHILD_CHECK(distc_barrier(NULL, pg, NULL) == 0, "barrier: %s", distc_error_last());
    distc_pg_free(pg);
    return 0;
}

static void run_collectives(int n) {
    struct job j = {dt_free_port(), 20000, -1, 0, -1, 0};
    assert_int_equal(dt_run_procs(n, collectives_child, &j, 60), 0);
}

/* Ranks on several (fake) hosts: every collective goes hierarchically,
 * shared memory inside each host and the mesh between them, with roots that
 * are not their host's first rank; point-to-point takes shared memory or
 * the mesh by peer. Then one rank off shared memory, a host of its own. */
static void test_mixed_hosts(void **state) {
    (void)state;
    struct job j = {dt_free_port(), 20000, -1, 2, -1, 0};
    assert_int_equal(dt_run_procs(4, collectives_child, &j, 60), 0);
    struct job uneven = {dt_free_port(), 20000, -1, 2, -1, 0}; /* hosts of 2, 2 and 1 ranks */
    assert_int_equal(dt_run_procs(5, collectives_child, &uneven, 60), 0);
    struct job strided = {dt_free_port(), 20000, -1, -2, -1, 0}; /* hosts {0, 2, 4} and {1, 3} */
    assert_int_equal(dt_run_procs(5, collectives_child, &strided, 60), 0);
    struct job k = {dt_free_port(), 20000, -1, 0, 1, 0};
    assert_int_equal(dt_run_procs(3, collectives_child, &k, 60), 0);
}

/* An all-to-all whose split sizes disagree across hosts (rank 3 expects two
 * elements from rank 0, which sends it one): host 1's leader finds it in
 * the counts the leaders exchange, names both ranks, and every rank fails.
 * On the flat mesh (DISTC_SHM=0) rank 3 finds it in the message's header;
 * ranks 1 and 2 may have all their bytes by then and succeed, and then
 * their next call fails (the group is broken). */
static int split_mismatch_child(int rank, int n, void *arg) {
    const char *off = getenv("DISTC_SHM");
    const int names = off && strcmp(off, "0") == 0 ? 3 : 2;
    distc_pg *pg = join(rank, n, arg);
    CHILD_CHECK(pg, "rank %d could not join", rank);
    float in[4] = {0}, out[5] = {0};
    int64_t isplit[4] = {1, 1, 1, 1}, osplit[4] = {1, 1, 1, 1}, ilen = 4, olen = rank == 3 ? 5 : 4;
    if (rank == 3) osplit[0] = 2;
    int64_t ishape[1] = {ilen}, oshape[1] = {olen};
    DLTensor it = f32(in, ishape), ot = f32(out, oshape);
    /* Every rank is done joining (and so done with rank 0's store) before
     * rank 0 fails, leaves and takes the store with it. */
    CHILD_CHECK(distc_barrier(NULL, pg, NULL) == 0, "barrier: %s", distc_error_last());
    int rc = distc_alltoall_single(NULL, pg, &ot, &it, osplit, isplit, NULL);
    const char *msg = distc_error_last();
    if (rc == 0 && names == 3 && (rank == 1 || rank == 2))
        CHILD_CHECK(distc_barrier(NULL, pg, NULL) != 0, "rank %d: the call after a failed one succeeded", rank);
    else
        CHILD_CHECK(rc != 0, "rank %d: an all-to-all with disagreeing splits succeeded", rank);
    CHILD_CHECK(rank != names || (rc == DISTC_EINVAL && strstr(msg, "split sizes disagree") &&
                                  (names == 3 || strstr(msg, "rank 0 sends 4 bytes to rank 3, which expects 8"))),
                "rank %d: %d %s", rank, rc, msg);
    distc_pg_free(pg);
    return 0;
}

static void test_split_mismatch_across_hosts(void **state) {
    const char *m = getenv("DISTC_MESH_BYTES");
    if (m && atoll(m) == 0) skip(); /* Gloo cannot tell: it moves what each side names */
    (void)state;
    struct job j = {dt_free_port(), 20000, -1, 2, -1, 0};
    assert_int_equal(dt_run_procs(4, split_mismatch_child, &j, 60), 0);
}

/* One rank lays its segment out otherwise (its own DISTC_SHM_RING_BYTES): it
 * cannot use the one rank 0 made, says so, and every rank agrees on TCP. */
static void test_segment_fails_everyone_on_tcp(void **state) {
    (void)state;
    struct job j = {dt_free_port(), 20000, -1, 0, -1, 2};
    assert_int_equal(dt_run_procs(3, collectives_child, &j, 60), 0);
}

static void test_two_processes(void **state) {
    (void)state;
    run_collectives(2);
}

static void test_four_processes(void **state) {
    (void)state;
    run_collectives(4);
}

/* The hierarchical path at sizes that take the chunked algorithms, on
 * non-integer floats: every rank must hold the same bits (compared through
 * an allgather of a checksum), close to the exact sum; AVG and a broadcast
 * from a root that is not its host's first rank; then a rank that calls
 * another size makes every rank fail, none hang. */
static uint64_t checksum(const float *x, size_t n) {
    uint64_t h = 1469598103934665603ULL;
    const unsigned char *b = (const unsigned char *)x;
    for (size_t i = 0; i < n * sizeof *x; ++i) h = (h ^ b[i]) * 1099511628211ULL;
    return h;
}

static int hierarchy_child(int rank, int n, void *arg) {
    const struct job *j = arg;
    distc_pg *pg = join(rank, n, j);
    CHILD_CHECK(pg, "rank %d could not join", rank);
    enum { N = 1 << 20 };
    float *x = malloc(N * sizeof *x);
    int64_t shape[1] = {N};
    DLTensor t = f32(x, shape);
    for (int i = 0; i < N; ++i) x[i] = 0.1f * (float)(rank + 1) + 0.001f * (float)(i % 97);
    CHILD_CHECK(distc_allreduce(NULL, pg, &t, DISTC_SUM, NULL) == 0, "allreduce: %s", distc_error_last());
    for (int i = 0; i < N; i += 4099) {
        double want = 0.1 * n * (n + 1) / 2 + 0.001 * n * (i % 97);
        CHILD_CHECK(x[i] > want - 1e-3 && x[i] < want + 1e-3, "rank %d: element %d is %g, not %g", rank, i, x[i], want);
    }
    int64_t sums[8] = {0}, mine = (int64_t)checksum(x, N), one = 1, eight = n;
    DLTensor st = {&mine, {kDLCPU, 0}, 1, {kDLInt, 64, 1}, &one, NULL, 0};
    DLTensor all = {sums, {kDLCPU, 0}, 1, {kDLInt, 64, 1}, &eight, NULL, 0};
    CHILD_CHECK(distc_allgather_into_tensor(NULL, pg, &all, &st, NULL) == 0, "allgather: %s", distc_error_last());
    for (int q = 1; q < n; ++q) CHILD_CHECK(sums[q] == sums[0], "rank %d: rank %d's sum has other bits", rank, q);
    for (int i = 0; i < N; ++i) x[i] = (float)(2 * rank);
    CHILD_CHECK(distc_allreduce(NULL, pg, &t, DISTC_AVG, NULL) == 0, "avg: %s", distc_error_last());
    CHILD_CHECK(x[N - 1] == (float)(n - 1), "rank %d: avg is %g", rank, x[N - 1]);
    for (int i = 0; i < N; ++i) x[i] = rank == 3 ? (float)(i % 1001) : -1.0f;
    CHILD_CHECK(distc_broadcast(NULL, pg, &t, 3, NULL) == 0, "broadcast: %s", distc_error_last());
    CHILD_CHECK(x[1234] == (float)(1234 % 1001) && x[N - 1] == (float)((N - 1) % 1001), "rank %d: broadcast wrong",
                rank);
    CHILD_CHECK(distc_barrier(NULL, pg, NULL) == 0, "barrier: %s", distc_error_last());
    /* Small: a broadcast and a scatter from rank 3 and from rank 0, which
     * with 4 ranks on a host and a core each go down a tree inside the host. */
    for (int root = 3; root >= 0; root -= 3) {
        float small[7], got[3], whole[8 * 3];
        int64_t seven[1] = {7}, three[1] = {3};
        for (int i = 0; i < 7; ++i) small[i] = rank == root ? (float)(root * 10 + i) : -1.0f;
        DLTensor st = f32(small, seven);
        CHILD_CHECK(distc_broadcast(NULL, pg, &st, root, NULL) == 0, "small broadcast: %s", distc_error_last());
        CHILD_CHECK(small[6] == (float)(root * 10 + 6), "rank %d: small broadcast from %d wrong", rank, root);
        DLTensor parts[8], *ptrs[8];
        for (int q = 0; q < n; ++q) {
            for (int i = 0; i < 3; ++i) whole[q * 3 + i] = (float)(q * 100 + root * 10 + i);
            parts[q] = f32(whole + q * 3, three);
            ptrs[q] = &parts[q];
        }
        DLTensor out = f32(got, three);
        CHILD_CHECK(distc_scatter(NULL, pg, &out, rank == root ? (const DLTensor *const *)ptrs : NULL, root, NULL) == 0,
                    "scatter: %s", distc_error_last());
        CHILD_CHECK(got[0] == (float)(rank * 100 + root * 10) && got[2] == (float)(rank * 100 + root * 10 + 2),
                    "rank %d: scatter from %d gave %g", rank, root, got[0]);
    }
    /* reduce to a host's second rank and to rank 0: the root gets the sum,
     * the others keep their tensors. */
    for (int root = 3; root >= 0; root -= 3) {
        for (int i = 0; i < N; ++i) x[i] = (float)(rank + i % 5);
        CHILD_CHECK(distc_reduce(NULL, pg, &t, root, DISTC_SUM, NULL) == 0, "reduce: %s", distc_error_last());
        for (int i = 0; i < N; i += 997) {
            float w = rank == root ? (float)(n * (n - 1) / 2 + n * (i % 5)) : (float)(rank + i % 5);
            CHILD_CHECK(x[i] == w, "rank %d: reduce to %d: element %d is %g, not %g", rank, root, i, x[i], w);
        }
    }
    /* allgather of 64 Ki floats from each rank, in rank order. */
    enum { P = 1 << 16 };
    float *parts = malloc((size_t)n * P * sizeof *parts);
    int64_t pshape[1] = {P}, ashape[1] = {(int64_t)n * P};
    for (int i = 0; i < P; ++i) x[i] = (float)(rank * 100000 + i);
    DLTensor pin = f32(x, pshape), pall = f32(parts, ashape);
    CHILD_CHECK(distc_allgather_into_tensor(NULL, pg, &pall, &pin, NULL) == 0, "allgather: %s", distc_error_last());
    for (int q = 0; q < n; ++q)
        for (int i = 0; i < P; i += 4093)
            CHILD_CHECK(parts[(size_t)q * P + (size_t)i] == (float)(q * 100000 + i), "rank %d: allgather part %d wrong",
                        rank, q);
    free(parts);
    /* Rank 2 (a host's first rank) calls another size: everyone fails
     * (Gloo's pairs, DISTC_MESH_BYTES=0, carry no call to check). */
    const char *mesh = getenv("DISTC_MESH_BYTES");
    if (mesh && strcmp(mesh, "0") == 0) {
        distc_pg_free(pg);
        free(x);
        return 0;
    }
    /* Everyone done with the allgather first: over TCP a rank that fails
     * resets its connections, and a reset drops what a slower peer has not
     * read yet of the call before (see README, the mesh's faults). */
    CHILD_CHECK(distc_barrier(NULL, pg, NULL) == 0, "barrier: %s", distc_error_last());
    usleep(200 * 1000);
    shape[0] = rank == 2 ? 5 : 4;
    int64_t t0 = dt_now_ms();
    int rc = distc_allreduce(NULL, pg, &t, DISTC_SUM, NULL);
    CHILD_CHECK(rc != 0, "rank %d: an allreduce of mismatched sizes succeeded", rank);
    CHILD_CHECK(dt_now_ms() - t0 < j->timeout_ms + 1000, "rank %d: the mismatch took too long", rank);
    distc_pg_free(pg);
    free(x);
    return 0;
}

static void test_hierarchy(void **state) {
    (void)state;
    struct job j = {dt_free_port(), 5000, -1, 2, -1, 0};
    assert_int_equal(dt_run_procs(4, hierarchy_child, &j, 60), 0);
    struct job uneven = {dt_free_port(), 5000, -1, 2, -1, 0};
    assert_int_equal(dt_run_procs(5, hierarchy_child, &uneven, 60), 0);
    struct job interleaved = {dt_free_port(), 5000, -1, -2, -1, 0}; /* hosts {0, 2} and {1, 3} */
    assert_int_equal(dt_run_procs(4, hierarchy_child, &interleaved, 60), 0);
    /* Two hosts of 4 ranks, each with a core per rank (said so): inside a
     * host, small broadcasts and scatters go down a tree. */
    char cores[32];
    dt_cores_say(cores, "64");
    struct job fours = {dt_free_port(), 5000, -1, 4, -1, 0};
    int rc = dt_run_procs(8, hierarchy_child, &fours, 120);
    dt_cores_restore(cores);
    assert_int_equal(rc, 0);
}

/* The victim dies (SIGKILL) right after joining; the others run an allreduce
 * and must get an error within the timeout, then free the group and exit 0. */
static int dead_peer_child(int rank, int n, void *arg) {
    const struct job *j = arg;
    distc_pg *pg = join(rank, n, j);
    CHILD_CHECK(pg, "rank %d could not join", rank);
    CHILD_CHECK(distc_barrier(NULL, pg, NULL) == 0, "barrier: %s", distc_error_last());
    if (rank == j->victim) raise(SIGKILL);
    usleep(100 * 1000);
    float x[64] = {0};
    int64_t shape[1] = {64};
    DLTensor t = f32(x, shape);
    int64_t t0 = dt_now_ms();
    int rc = distc_allreduce(NULL, pg, &t, DISTC_SUM, NULL);
    int64_t took = dt_now_ms() - t0;
    CHILD_CHECK(rc == DISTC_EREMOTE || rc == DISTC_ETIMEOUT, "rank %d: allreduce with a dead peer gave %d (%s)", rank,
                rc, distc_error_last());
    CHILD_CHECK(strstr(distc_error_last(), "allreduce #2") != NULL, "rank %d: message lacks the op and seq: %s", rank,
                distc_error_last());
    CHILD_CHECK(took < j->timeout_ms + 1000, "rank %d: the error took %lld ms", rank, (long long)took);
    /* Later operations fail too (promptly or within the timeout), and nothing hangs. */
    rc = distc_barrier(NULL, pg, NULL);
    CHILD_CHECK(rc != 0, "rank %d: barrier with a dead peer succeeded", rank);
    distc_pg_free(pg);
    return 0;
}

/* The victim sends one message, then dies while the others wait for its
 * second: the first arrives, the wait for the second fails at once (long
 * before its 60 s timeout) with the victim named. */
static int dead_sender_child(int rank, int n, void *arg) {
    const struct job *j = arg;
    distc_pg *pg = join(rank, n, j);
    CHILD_CHECK(pg, "rank %d could not join", rank);
    float v = (float)rank;
    int64_t one[1] = {1};
    DLTensor t = f32(&v, one);
    if (rank == j->victim) {
        for (int p = 0; p < n; ++p)
            if (p != rank) CHILD_CHECK(distc_send(NULL, pg, &t, p, 1, NULL) == 0, "send: %s", distc_error_last());
        usleep(200 * 1000);
        raise(SIGKILL);
    }
    CHILD_CHECK(distc_recv(NULL, pg, &t, j->victim, 1, NULL) == 0 && v == (float)j->victim, "first message: %s",
                distc_error_last());
    distc_op_options o = DISTC_OP_OPTIONS_INIT;
    o.timeout_ms = 60000;
    int64_t t0 = dt_now_ms();
    int rc = distc_recv(NULL, pg, &t, j->victim, 2, &o);
    int64_t took = dt_now_ms() - t0;
    char victim[16];
    snprintf(victim, sizeof victim, "rank %d", j->victim);
    CHILD_CHECK(rc == DISTC_EREMOTE && strstr(distc_error_last(), victim),
                "rank %d: receive from the dead gave %d (%s)", rank, rc, distc_error_last());
    CHILD_CHECK(took < 5000, "rank %d: the error took %lld ms", rank, (long long)took);
    distc_pg_free(pg);
    return 0;
}

static void test_killed_rank(void **state) {
    (void)state;
    struct job j = {dt_free_port(), 3000, 2, 0, -1, 0};
    /* The victim exits by signal: exactly one failed child. */
    assert_int_equal(dt_run_procs(3, dead_peer_child, &j, 60), 1);
    assert_true(dev_shm_clean());
    struct job p2p = {dt_free_port(), 3000, 1, 0, -1, 0};
    assert_int_equal(dt_run_procs(3, dead_sender_child, &p2p, 60), 1);
    struct job mixed = {dt_free_port(), 3000, 1, 2, -1, 0}; /* the victim shares a host with rank 0, not rank 2 */
    assert_int_equal(dt_run_procs(3, dead_sender_child, &mixed, 60), 1);
    assert_true(dev_shm_clean());
}

/* The victim dies (SIGKILL from a thread) while 16 MiB allreduces and
 * broadcasts (from every root in turn) are on the wire, mid-message: the
 * others' sends, receives and copies break off, they get an error within the
 * timeout, and free the group. */
static void *kill_soon(void *arg) {
    (void)arg;
    usleep(150 * 1000);
    raise(SIGKILL);
    return NULL;
}

static int midway_child(int rank, int n, void *arg) {
    const struct job *j = arg;
    distc_pg *pg = join(rank, n, j);
    CHILD_CHECK(pg, "rank %d could not join", rank);
    enum { N = 4 << 20 };
    float *x = calloc(N, sizeof *x);
    int64_t shape[1] = {N};
    DLTensor t = f32(x, shape);
    CHILD_CHECK(distc_allreduce(NULL, pg, &t, DISTC_SUM, NULL) == 0, "first allreduce: %s", distc_error_last());
    pthread_t killer;
    if (rank == j->victim) pthread_create(&killer, NULL, kill_soon, NULL);
    int rc = 0;
    int64_t took = 0;
    for (int i = 0; i < 10000 && rc == 0; ++i) {
        int64_t t0 = dt_now_ms();
        rc = i % 2 ? distc_broadcast(NULL, pg, &t, i / 2 % n, NULL) : distc_allreduce(NULL, pg, &t, DISTC_SUM, NULL);
        took = dt_now_ms() - t0;
    }
    CHILD_CHECK(rc == DISTC_EREMOTE || rc == DISTC_ETIMEOUT,
                "rank %d: a collective with a peer killed midway gave %d (%s)", rank, rc, distc_error_last());
    CHILD_CHECK(strstr(distc_error_last(), "allreduce #") || strstr(distc_error_last(), "broadcast #"),
                "rank %d: message lacks the op: %s", rank, distc_error_last());
    CHILD_CHECK(took < j->timeout_ms + 1000, "rank %d: the error took %lld ms", rank, (long long)took);
    distc_pg_free(pg);
    free(x);
    return 0;
}

static void test_rank_killed_mid_message(void **state) {
    (void)state;
    struct job j = {dt_free_port(), 3000, 1, 0, -1, 0};
    assert_int_equal(dt_run_procs(3, midway_child, &j, 60), 1);
    assert_true(dev_shm_clean());
}

/* The victim stays alive but stops calling: the others time out. */
static int stalled_peer_child(int rank, int n, void *arg) {
    const struct job *j = arg;
    distc_pg *pg = join(rank, n, j);
    CHILD_CHECK(pg, "rank %d could not join", rank);
    if (rank == j->victim) {
        sleep((unsigned)(j->timeout_ms / 1000 + 2));
        distc_pg_free(pg);
        return 0;
    }
    int64_t t0 = dt_now_ms();
    int rc = distc_barrier(NULL, pg, NULL);
    int64_t took = dt_now_ms() - t0;
    CHILD_CHECK(rc == DISTC_ETIMEOUT, "rank %d: barrier with a stalled peer gave %d (%s)", rank, rc,
                distc_error_last());
    CHILD_CHECK(took >= j->timeout_ms - 100 && took < j->timeout_ms + 3000, "rank %d: timed out after %lld ms", rank,
                (long long)took);
    distc_pg_free(pg);
    return 0;
}

static void test_stalled_rank(void **state) {
    (void)state;
    struct job j = {dt_free_port(), 1500, 1, 0, -1, 0};
    assert_int_equal(dt_run_procs(3, stalled_peer_child, &j, 60), 0);
}

/* distc_pg_abort from another thread wakes a rank blocked in a collective. */
struct aborter {
    distc_pg *pg;
};

static void *abort_later(void *arg) {
    usleep(300 * 1000);
    distc_pg_abort(((struct aborter *)arg)->pg);
    return NULL;
}

static int abort_child(int rank, int n, void *arg) {
    const struct job *j = arg;
    distc_pg *pg = join(rank, n, j);
    CHILD_CHECK(pg, "rank %d could not join", rank);
    if (rank == 1) {
        /* Never joins the collective; leaves once rank 0 is done. */
        sleep(3);
        distc_pg_free(pg);
        return 0;
    }
    struct aborter a = {pg};
    pthread_t t;
    pthread_create(&t, NULL, abort_later, &a);
    int64_t t0 = dt_now_ms();
    int rc = distc_barrier(NULL, pg, NULL);
    int64_t took = dt_now_ms() - t0;
    pthread_join(t, NULL);
    CHILD_CHECK(rc == DISTC_EABORTED, "abort gave %d (%s)", rc, distc_error_last());
    CHILD_CHECK(took < 5000, "abort took %lld ms", (long long)took);
    CHILD_CHECK(distc_barrier(NULL, pg, NULL) == DISTC_EABORTED, "after abort: %s", distc_error_last());
    distc_pg_free(pg);
    return 0;
}

static void test_abort_wakes_blocked_collective(void **state) {
    (void)state;
    struct job j = {dt_free_port(), 60000, -1, 0, -1, 0};
    assert_int_equal(dt_run_procs(2, abort_child, &j, 60), 0);
}

/* SIGPIPE: Gloo writes to its sockets with writev, which raises SIGPIPE
 * on the writing thread when a peer has died (and kills the process unless
 * blocked). Every thread the library starts (the store server, Gloo's loop
 * threads, the worker and p2p threads) must block it; the caller's own
 * thread must come back from every call with its mask as it was and
 * nothing pending. */
static int sigpipe_state(pid_t tid, unsigned long long *blocked, unsigned long long *pending) {
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/self/task/%d/status", (int)tid);
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    int got = 0;
    while (fgets(line, sizeof line, f)) {
        if (sscanf(line, "SigBlk: %llx", blocked) == 1) got |= 1;
        if (sscanf(line, "SigPnd: %llx", pending) == 1) got |= 2;
    }
    fclose(f);
    return got == 3 ? 0 : -1;
}

static int sigpipe_child(int rank, int n, void *arg) {
    const struct job *j = arg;
    distc_pg *pg = join(rank, n, j);
    CHILD_CHECK(pg, "rank %d could not join", rank);
    float x[1024] = {0};
    int64_t shape[1] = {1024};
    DLTensor t = f32(x, shape);
    distc_work *w = NULL;
    CHILD_CHECK(distc_allreduce(NULL, pg, &t, DISTC_SUM, NULL) == 0, "allreduce: %s", distc_error_last());
    CHILD_CHECK(distc_allreduce(&w, pg, &t, DISTC_SUM, NULL) == 0, "async allreduce: %s", distc_error_last());
    CHILD_CHECK(distc_work_wait(w, DISTC_TIMEOUT_DEFAULT) == 0, "async allreduce: %s", distc_error_last());
    distc_work_free(w);
    int rc = rank == 0 ? distc_send(&w, pg, &t, 1, 7, NULL) : distc_recv(&w, pg, &t, 0, 7, NULL);
    CHILD_CHECK(rc == 0 && distc_work_wait(w, DISTC_TIMEOUT_DEFAULT) == 0, "p2p: %s", distc_error_last());
    distc_work_free(w);

    const unsigned long long pipe_bit = 1ULL << (SIGPIPE - 1);
    pid_t me = (pid_t)syscall(SYS_gettid);
    unsigned long long blk = 0, pnd = 0;
    CHILD_CHECK(sigpipe_state(me, &blk, &pnd) == 0, "cannot read this thread's signal state");
    CHILD_CHECK(!(blk & pipe_bit) && !(pnd & pipe_bit), "rank %d: the caller's thread came back with SIGPIPE %s", rank,
                blk & pipe_bit ? "blocked" : "pending");
    DIR *d = opendir("/proc/self/task");
    CHILD_CHECK(d, "cannot list this process's threads");
    int others = 0, unblocked = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        pid_t tid = (pid_t)atoi(e->d_name);
        if (tid <= 0 || tid == me) continue;
        if (sigpipe_state(tid, &blk, &pnd) != 0) continue; /* gone meanwhile */
        ++others;
        if (!(blk & pipe_bit)) ++unblocked;
    }
    closedir(d);
    /* Gloo's loop thread, the worker and the p2p thread at least. */
    CHILD_CHECK(others >= 3, "rank %d: only %d library threads found", rank, others);
    CHILD_CHECK(unblocked == 0, "rank %d: %d of the library's %d threads take SIGPIPE", rank, unblocked, others);
    distc_pg_free(pg);
    return 0;
}

static void test_library_threads_block_sigpipe(void **state) {
    (void)state;
    struct job j = {dt_free_port(), 20000, -1, 0, -1, 0};
    assert_int_equal(dt_run_procs(2, sigpipe_child, &j, 60), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_two_processes),
        cmocka_unit_test(test_four_processes),
        cmocka_unit_test(test_mixed_hosts),
        cmocka_unit_test(test_split_mismatch_across_hosts),
        cmocka_unit_test(test_hierarchy),
        cmocka_unit_test(test_segment_fails_everyone_on_tcp),
        cmocka_unit_test(test_killed_rank),
        cmocka_unit_test(test_rank_killed_mid_message),
        cmocka_unit_test(test_stalled_rank),
        cmocka_unit_test(test_abort_wakes_blocked_collective),
        cmocka_unit_test(test_library_threads_block_sigpipe),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

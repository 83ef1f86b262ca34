/* test_pg_processes' failures: a rank killed after joining or mid-message,
 * a stalled rank, and an abort that wakes a blocked collective. */
#define _GNU_SOURCE
#include <dirent.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "job.h"
#include "tests.h"

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

void test_killed_rank(void **state) {
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
 * timeout, and free the group; on one host and across fake hosts. */
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

void test_rank_killed_mid_message(void **state) {
    (void)state;
    struct job j = {dt_free_port(), 3000, 1, 0, -1, 0};
    assert_int_equal(dt_run_procs(3, midway_child, &j, 60), 1);
    assert_true(dev_shm_clean());
    /* Two fake hosts of two ranks, so the collectives go the hierarchical
     * way: a host's leader (rank 2), then a rank that only shares memory
     * (rank 1), dies mid-message. */
    for (int victim = 2; victim >= 1; --victim) {
        struct job h = {dt_free_port(), 3000, victim, 2, -1, 0};
        assert_int_equal(dt_run_procs(4, midway_child, &h, 60), 1);
        assert_true(dev_shm_clean());
    }
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
    /* A rank that waited on the stalled one times out; one that waited on
     * a rank that timed out loses that link, and names the timeout. */
    CHILD_CHECK(rc == DISTC_ETIMEOUT || (rc == DISTC_EREMOTE && strstr(distc_error_last(), "first failure") &&
                                         strstr(distc_error_last(), "timed out")),
                "rank %d: barrier with a stalled peer gave %d (%s)", rank, rc, distc_error_last());
    /* Its own timeout runs from its call; a peer's, which it learns of, from
     * the peer's call, which may have come first (ranks start apart, more
     * so under the sanitizers): no lower bound then. */
    const int64_t least = rc == DISTC_ETIMEOUT ? j->timeout_ms - 100 : 0;
    CHILD_CHECK(took >= least && took < j->timeout_ms + 3000, "rank %d: %s after %lld ms", rank,
                rc == DISTC_ETIMEOUT ? "timed out" : "heard of a timeout", (long long)took);
    if (rank == 0) usleep(500 * 1000); /* it serves the store, where the others read the note */
    distc_pg_free(pg);
    return 0;
}

void test_stalled_rank(void **state) {
    (void)state;
    struct job j = {dt_free_port(), 1500, 1, 0, -1, 0};
    assert_int_equal(dt_run_procs(3, stalled_peer_child, &j, 60), 0);
    /* On two fake hosts: the stalled rank shares memory with its host's
     * leader, which waits for it before the hosts' leaders meet. */
    struct job h = {dt_free_port(), 1500, 3, 2, -1, 0};
    assert_int_equal(dt_run_procs(4, stalled_peer_child, &h, 60), 0);
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

void test_abort_wakes_blocked_collective(void **state) {
    (void)state;
    struct job j = {dt_free_port(), 60000, -1, 0, -1, 0};
    assert_int_equal(dt_run_procs(2, abort_child, &j, 60), 0);
}

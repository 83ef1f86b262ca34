/*
 * A failure is a failure everywhere: a rank whose collective fails breaks the
 * group, so that no peer completes that collective or a later one as if
 * nothing happened. The late-rank case: rank 0 times out on allreduce #1
 * before rank 1 arrives; rank 1 must then fail #1 too (not complete it from
 * what rank 0 sent before giving up), naming rank 0's timeout, and both fail
 * every later collective with a message naming where the group broke.
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pg_harness.h"
#include "test_util.h"

/* Four floats of the calling rank's own (ranks are threads here, or processes). */
static __thread float t_v[4];
static __thread int64_t t_four;
static DLTensor f32_4(void) {
    for (int i = 0; i < 4; ++i) t_v[i] = (float)(i + 1);
    t_four = 4;
    return (DLTensor){t_v, {kDLCPU, 0}, 1, DT_F32, &t_four, NULL, 0};
}

/* The late ranks arrive only once rank 0 has given up (through the store: threads or processes alike). */
static void gave_up(const char *key) { RK_OK(distc_store_set(dt_rank_store(), key, "1", 1)); }
static void wait_until_given_up(const char *key) {
    distc_buf b = {0};
    RK_OK(distc_store_get(&b, dt_rank_store(), key));
    distc_buf_dispose(&b);
}
static distc_op_options short_timeout(void) {
    distc_op_options o = DISTC_OP_OPTIONS_INIT;
    o.timeout_ms = 300;
    return o;
}

static void rank_late(distc_pg *pg, int rank, int size, void *arg) {
    (void)arg;
    DLTensor t = f32_4();
    if (rank == 0) {
        distc_op_options o = short_timeout();
        RK_ERR2(distc_allreduce(NULL, pg, &t, DISTC_SUM, &o), DISTC_ETIMEOUT, "allreduce #1", "");
        gave_up("late/gave_up");
    } else {
        wait_until_given_up("late/gave_up");
        int rc = distc_allreduce(NULL, pg, &t, DISTC_SUM, NULL);
        RK_CHECKF(rc == DISTC_EREMOTE || rc == DISTC_EABORTED,
                  "the late rank's allreduce #1 gave %d (%s), expected it to fail", rc, distc_error_last());
        /* The mesh names the rank; Gloo's pairs know only its address. */
        const char *mesh = getenv("DISTC_MESH_BYTES");
        if (size == 2 && !(mesh && strcmp(mesh, "0") == 0))
            RK_CHECKF(strstr(distc_error_last(), "rank 0"), "no word of rank 0: %s", distc_error_last());
        RK_CHECKF(strstr(distc_error_last(), "gave up"), "no word of a rank giving up: %s", distc_error_last());
        /* The lost link's message names why the group broke, as rank 0 left it in the store. */
        if (rc == DISTC_EREMOTE)
            RK_CHECKF(strstr(distc_error_last(), "the group's first failure: allreduce #1") &&
                          strstr(distc_error_last(), "failed on rank 0: ") &&
                          strstr(distc_error_last(), "imed out"), /* Gloo: "Timed out" */
                      "no word of rank 0's timeout: %s", distc_error_last());
    }
    /* Every later collective fails at once on every rank, saying where the group broke. */
    RK_ERR2(distc_allreduce(NULL, pg, &t, DISTC_SUM, NULL), DISTC_EABORTED, "the group is broken", "allreduce #1");
    distc_work *w = NULL;
    RK_ERR(distc_barrier(&w, pg, NULL), DISTC_EABORTED, "the group is broken");
    RK_CHECK(w == NULL);
    RK_ERR(distc_broadcast(NULL, pg, &t, 0, NULL), DISTC_EABORTED, "the group is broken");
}

static void test_late_rank_after_a_timeout(void **state) {
    (void)state;
    for (int size = 2; size <= 3; ++size) dt_run_ranks(size, rank_late, NULL);
}

/* An asynchronous collective that fails breaks the group too: what was queued behind it is dropped. */
static void rank_late_async(distc_pg *pg, int rank, int size, void *arg) {
    (void)arg, (void)size;
    DLTensor t = f32_4();
    if (rank == 0) {
        distc_op_options o = short_timeout();
        distc_work *w1 = NULL, *w2 = NULL;
        RK_OK(distc_allreduce(&w1, pg, &t, DISTC_SUM, &o));
        RK_OK(distc_allreduce(&w2, pg, &t, DISTC_SUM, NULL));
        RK_ERR(distc_work_wait(w1, -1), DISTC_ETIMEOUT, "allreduce #1");
        RK_ERR2(distc_work_wait(w2, -1), DISTC_EABORTED, "allreduce #2", "allreduce #1");
        distc_work_free(w1);
        distc_work_free(w2);
        gave_up("late_async/gave_up");
    } else {
        wait_until_given_up("late_async/gave_up");
        distc_work *w = NULL;
        if (RK_OK(distc_allreduce(&w, pg, &t, DISTC_SUM, NULL))) {
            int rc = distc_work_wait(w, -1);
            RK_CHECKF(rc == DISTC_EREMOTE || rc == DISTC_EABORTED, "the late rank's allreduce #1 gave %d (%s)", rc,
                      distc_error_last());
            distc_work_free(w);
        }
    }
    RK_ERR(distc_allreduce(NULL, pg, &t, DISTC_SUM, NULL), DISTC_EABORTED, "the group is broken");
}

static void test_late_rank_after_an_async_timeout(void **state) {
    (void)state;
    dt_run_ranks(2, rank_late_async, NULL);
}

/* A rank that breaks the group right after a call it completed (its part
 * taken by the kernel, not yet read by the peer) does not fail that call on
 * the peer: what it sent gets there before its links go (a peer that reads
 * within 0.1 s; TCP used to drop it with the reset). */
static void rank_break_after_send(distc_pg *pg, int rank, int size, void *arg) {
    (void)arg, (void)size;
    enum { N = 1 << 20 };
    float *x = malloc(N * sizeof *x);
    int64_t n = N;
    DLTensor t = {x, {kDLCPU, 0}, 1, DT_F32, &n, NULL, 0};
    memset(x, 0, N * sizeof *x);
    /* The first one grows TCP's buffers; for the second, rank 1 comes a
     * moment later, so that rank 0's part is still in the kernel (on a TCP
     * link) when it breaks the group. */
    RK_OK(distc_broadcast(NULL, pg, &t, 0, NULL));
    for (int i = 0; i < N; ++i) x[i] = rank == 0 ? (float)(i % 251) : -1.0f;
    if (rank == 1) usleep(20 * 1000);
    int rc = distc_broadcast(NULL, pg, &t, 0, NULL);
    RK_CHECKF(rc == 0, "rank %d: broadcast #2, which rank 0 completed, gave %d (%s)", rank, rc, distc_error_last());
    if (rank == 0) {
        distc_op_options o = DISTC_OP_OPTIONS_INIT;
        o.timeout_ms = 1;
        RK_ERR(distc_barrier(NULL, pg, &o), DISTC_ETIMEOUT, "barrier #3");
        gave_up("sent/gave_up");
    } else {
        RK_CHECKF(x[N - 1] == (float)((N - 1) % 251), "rank 1: the broadcast's last element is %g", x[N - 1]);
        wait_until_given_up("sent/gave_up");
        RK_CHECKF(distc_barrier(NULL, pg, NULL) != 0, "rank 1: a barrier after rank 0 broke the group succeeded");
    }
    free(x);
}

static void test_break_after_a_completed_send(void **state) {
    (void)state;
    for (int i = 0; i < 5; ++i) dt_run_ranks(2, rank_break_after_send, NULL);
}

/* A point-to-point call breaks nothing, but one waiting on a peer that
 * broke the group names why it broke: the peer's note in the store. */
static void rank_recv_from_breaker(distc_pg *pg, int rank, int size, void *arg) {
    (void)arg, (void)size;
    DLTensor t = f32_4();
    if (rank == 0) {
        int rc = distc_recv(NULL, pg, &t, 1, 0, NULL);
        const char *mesh = getenv("DISTC_MESH_BYTES");
        if (!(mesh && strcmp(mesh, "0") == 0)) /* Gloo's pairs carry point-to-point there */
            RK_CHECKF(rc == DISTC_EREMOTE && strstr(distc_error_last(), "the group's first failure: barrier #1") &&
                          strstr(distc_error_last(), "failed on rank 1"),
                      "a receive from a rank that broke the group gave %d (%s)", rc, distc_error_last());
        else
            RK_CHECKF(rc != 0, "a receive from a rank that broke the group succeeded");
    } else {
        distc_op_options o = short_timeout();
        RK_ERR(distc_barrier(NULL, pg, &o), DISTC_ETIMEOUT, "barrier #1");
    }
}

static void test_recv_names_why_the_group_broke(void **state) {
    (void)state;
    dt_run_ranks(2, rank_recv_from_breaker, NULL);
}

/* ------------------------------------------------ mismatched collectives */

/* Each rank's call in one scenario of a 2-rank mismatch, without debug mode. */
typedef enum { COUNTS, DTYPES, SPLITS, BCAST_VS_ALLREDUCE } mismatch;

static int mismatched_call(distc_pg *pg, int rank, mismatch m) {
    float f[5] = {1, 2, 3, 4, 5};
    int32_t i[4] = {1, 2, 3, 4};
    int64_t four = 4, five = 5;
    DLTensor t = {f, {kDLCPU, 0}, 1, DT_F32, &four, NULL, 0};
    switch (m) {
        case COUNTS: /* 4 floats against 5 */
            if (rank == 1) t.shape = &five;
            return distc_allreduce(NULL, pg, &t, DISTC_SUM, NULL);
        case DTYPES: /* float32 against int32 */
            if (rank == 1) t = (DLTensor){i, {kDLCPU, 0}, 1, DT_I32, &four, NULL, 0};
            return distc_allreduce(NULL, pg, &t, DISTC_SUM, NULL);
        case SPLITS: { /* rank 1 expects 3 elements from rank 0, which sends it 2 */
            int64_t in_splits[2] = {2, 2}, out_splits[2] = {2, 2}, n5 = 5;
            if (rank == 1) out_splits[0] = 3;
            DLTensor in = {i, {kDLCPU, 0}, 1, DT_I32, &four, NULL, 0};
            int32_t o[5];
            DLTensor out = {o, {kDLCPU, 0}, 1, DT_I32, rank == 1 ? &n5 : &four, NULL, 0};
            return distc_alltoall_single(NULL, pg, &out, &in, out_splits, in_splits, NULL);
        }
        case BCAST_VS_ALLREDUCE:
            return rank == 0 ? distc_broadcast(NULL, pg, &t, 0, NULL) : distc_allreduce(NULL, pg, &t, DISTC_SUM, NULL);
    }
    return -1;
}

/* arg: the scenario, plus kWarm where both ranks first make rank 0's call
 * together: the mismatch then comes in a header that the one before it on
 * the link does (rank 0's repeated header, a first word alone) or does not
 * (rank 1's) repeat. */
enum { kWarm = 0x100 };

static void rank_mismatch(distc_pg *pg, int rank, int size, void *arg) {
    (void)size;
    mismatch m = (mismatch)((intptr_t)arg & 0xff);
    const int warm = ((intptr_t)arg & kWarm) != 0;
    if (warm) RK_OK(mismatched_call(pg, 0, m));
    const char *which = warm ? "ranks disagree on collective #2" : "ranks disagree on collective #1";
    int rc = mismatched_call(pg, rank, m);
    const char *msg = distc_error_last();
    if (m == BCAST_VS_ALLREDUCE && rank == 0) {
        /* The root only sends: it cannot see rank 1's call in this one. Its next call fails. */
        RK_CHECKF(distc_barrier(NULL, pg, NULL) != 0, "the root's next call succeeded after a mismatch");
        return;
    }
    RK_CHECKF(rc == DISTC_EINVAL, "scenario %d: rank %d got %d (%s), expected DISTC_EINVAL", (int)m, rank, rc, msg);
    if (m == SPLITS)
        RK_CHECKF(strstr(msg, "split sizes disagree") != NULL, "scenario %d: %s", (int)m, msg);
    else
        RK_CHECKF(strstr(msg, which) && strstr(msg, rank == 0 ? "rank 1 calls" : "rank 0 calls"),
                  "scenario %d: rank %d: %s", (int)m, rank, msg);
    if (m == BCAST_VS_ALLREDUCE)
        RK_CHECKF(strstr(msg, warm ? "broadcast #2" : "broadcast #1") != NULL, "the peer's call is not named: %s", msg);
    if (m == COUNTS) /* both sides' calls in full, whichever header form carried the peer's */
        RK_CHECKF(strstr(msg, "4 elements") && strstr(msg, "5 elements"), "scenario %d: rank %d: %s", (int)m, rank,
                  msg);
    /* The group is broken for both now. */
    RK_CHECKF(distc_barrier(NULL, pg, NULL) != 0, "a call after the mismatch succeeded");
}

/* Every frame of the mesh carries its call: ranks calling different things fail instead of mixing bytes. */
static void test_mismatched_collectives(void **state) {
    (void)state;
    const char *mesh = getenv("DISTC_MESH_BYTES");
    if (mesh && strcmp(mesh, "0") == 0) skip(); /* Gloo's pairs carry no call: only DISTC_DEBUG=detail tells */
    for (int warm = 0; warm <= kWarm; warm += kWarm)
        for (int m = COUNTS; m <= BCAST_VS_ALLREDUCE; ++m) dt_run_ranks(2, rank_mismatch, (void *)(intptr_t)(m | warm));
}

/* A rank that waits for a peer that never sends (it runs a third call) still
 * sees, in what the other peers sent, that they run another call: rank 2
 * expects rank 1's broadcast, rank 1 and rank 0 broadcast from rank 0. Rank
 * 2 fails with DISTC_EINVAL, not at the timeout; the others, whose
 * broadcast went through, fail their next call. */
static void rank_third_call(distc_pg *pg, int rank, int size, void *arg) {
    (void)size;
    (void)arg;
    DLTensor t = f32_4();
    distc_op_options o = DISTC_OP_OPTIONS_INIT;
    o.timeout_ms = 60000; /* what the look spares: long enough to fail the check below if it waits it out */
    int rc = distc_broadcast(NULL, pg, &t, rank == 2 ? 1 : 0, &o);
    if (rank == 2) {
        RK_CHECKF(rc == DISTC_EINVAL && strstr(distc_error_last(), "rank 0 calls broadcast #1") &&
                      strstr(distc_error_last(), "root 0"),
                  "rank 2 got %d (%s), expected DISTC_EINVAL naming rank 0's broadcast", rc, distc_error_last());
        gave_up("third/gave_up");
    } else {
        /* Nothing more from here until rank 2 is done: a message of a later call would tell it too. */
        wait_until_given_up("third/gave_up");
    }
    RK_CHECKF(distc_barrier(NULL, pg, NULL) != 0, "rank %d's call after the mismatch succeeded", rank);
}

/* A broadcast of 4 floats from `root` in which rank 2 expects 5 (a
 * mismatch it finds at once), with a timeout long enough that waiting it
 * out fails the checks. */
static int broadcast_rank2_expects_five(distc_pg *pg, int rank, int root) {
    DLTensor t = f32_4();
    int64_t five = 5;
    float f5[5] = {0};
    if (rank == 2) t = (DLTensor){f5, {kDLCPU, 0}, 1, DT_F32, &five, NULL, 0};
    distc_op_options o = DISTC_OP_OPTIONS_INIT;
    o.timeout_ms = 60000;
    return distc_broadcast(NULL, pg, &t, root, &o);
}

/* A rank whose link breaks still reports the mismatch that a peer it
 * receives nothing from sent: rank 0 broadcasts 4 floats from rank 0, rank 2
 * expects 5 from rank 0 and gives up at once (breaking its links), and rank
 * 1, waiting for rank 2's broadcast, finds rank 0's message beside the loss. */
static void rank_loss_beside_mismatch(distc_pg *pg, int rank, int size, void *arg) {
    (void)size;
    (void)arg;
    int rc = broadcast_rank2_expects_five(pg, rank, rank == 1 ? 2 : 0);
    if (rank == 1) {
        RK_CHECKF(rc == DISTC_EINVAL && strstr(distc_error_last(), "rank 0 calls broadcast #1"),
                  "rank 1 got %d (%s), expected DISTC_EINVAL naming rank 0's broadcast", rc, distc_error_last());
        gave_up("loss/gave_up");
    } else if (rank == 2) {
        RK_CHECKF(rc == DISTC_EINVAL, "rank 2 got %d (%s), expected DISTC_EINVAL", rc, distc_error_last());
    } else {
        wait_until_given_up("loss/gave_up"); /* rank 0's later messages would tell rank 1 too */
    }
    RK_CHECKF(distc_barrier(NULL, pg, NULL) != 0, "rank %d's call after the mismatch succeeded", rank);
}

/* The same where the barrier goes in rounds (6 ranks with a core each): rank
 * 3 waits in a broadcast from rank 0, which sends it nothing in the
 * barrier; the barrier's first message to rank 3 comes from rank 2. */
static void rank_barrier_against_broadcast(distc_pg *pg, int rank, int size, void *arg) {
    (void)size;
    (void)arg;
    DLTensor t = f32_4();
    distc_op_options o = DISTC_OP_OPTIONS_INIT;
    o.timeout_ms = 60000;
    int rc = rank == 3 ? distc_broadcast(NULL, pg, &t, 0, &o) : distc_barrier(NULL, pg, &o);
    RK_CHECKF(rc != 0, "rank %d's %s succeeded", rank, rank == 3 ? "broadcast" : "barrier");
    if (rank == 3)
        RK_CHECKF(rc == DISTC_EINVAL && strstr(distc_error_last(), "calls barrier #1"),
                  "rank 3 got %d (%s), expected DISTC_EINVAL naming a barrier", rc, distc_error_last());
    RK_CHECKF(distc_barrier(NULL, pg, NULL) != 0, "rank %d's call after the mismatch succeeded", rank);
}

/* Down the broadcast's tree (4 ranks with a core each), a rank that passes
 * the data on fails: rank 2, which forwards rank 0's broadcast to rank 3,
 * expects 5 floats where the others send 4. It fails at once naming rank
 * 0's call, and rank 3, which now gets nothing, fails too as rank 2 breaks
 * its links, not at the timeout. Ranks 0 and 1, whose part of the tree
 * went through, may finish (and over TCP, where the root sends to every
 * rank, rank 3 too); every rank's next call fails. */
static void rank_tree_relay_mismatch(distc_pg *pg, int rank, int size, void *arg) {
    (void)size;
    (void)arg;
    int rc = broadcast_rank2_expects_five(pg, rank, 0);
    if (rank == 2)
        RK_CHECKF(rc == DISTC_EINVAL && strstr(distc_error_last(), "rank 0 calls broadcast #1"),
                  "rank 2 got %d (%s), expected DISTC_EINVAL naming rank 0's broadcast", rc, distc_error_last());
    const char *shm = getenv("DISTC_SHM");
    if (rank == 3 && !(shm && strcmp(shm, "0") == 0)) /* over TCP the root sends to every rank itself */
        RK_CHECKF(rc == DISTC_EREMOTE || rc == DISTC_EINVAL, "rank 3 got %d (%s), expected its parent's loss", rc,
                  distc_error_last());
    RK_CHECKF(distc_barrier(NULL, pg, NULL) != 0, "rank %d's call after the mismatch succeeded", rank);
}

static void test_waiting_rank_sees_other_calls(void **state) {
    (void)state;
    const char *mesh = getenv("DISTC_MESH_BYTES");
    if (mesh && strcmp(mesh, "0") == 0) skip();
    dt_run_ranks(3, rank_third_call, NULL);
    dt_run_ranks(3, rank_loss_beside_mismatch, NULL);
    /* Rounds only where each rank has a core: say it has. */
    char cores[32];
    dt_cores_say(cores, "64");
    dt_run_ranks(6, rank_barrier_against_broadcast, NULL);
    dt_run_ranks(4, rank_tree_relay_mismatch, NULL);
    dt_cores_restore(cores);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_late_rank_after_a_timeout),      cmocka_unit_test(test_late_rank_after_an_async_timeout),
        cmocka_unit_test(test_break_after_a_completed_send),   cmocka_unit_test(test_mismatched_collectives),
        cmocka_unit_test(test_recv_names_why_the_group_broke), cmocka_unit_test(test_waiting_rank_sees_other_calls),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/*
 * Futures on work handles (distc/work.h): works the program completes
 * (distc_work_new / distc_work_complete), second handles (distc_work_ref)
 * and continuations (distc_work_then): chains of collectives, failures
 * passed along, continuations that block or wait for each other, and abort.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pg_harness.h"
#include "test_util.h"

static void sleep_ms(int ms) {
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* ------------------------------------------------------------ promises, no group */

static int count_cont(distc_work **next, distc_work *done, void *payload) {
    (void)next;
    __atomic_add_fetch((int *)payload, 1, __ATOMIC_SEQ_CST);
    int st = distc_work_test(done);
    return st < 0 ? st : 0; /* passes a failure on, with its message */
}

static int fail_cont(distc_work **next, distc_work *done, void *payload) {
    (void)next, (void)done, (void)payload;
    return distc_error_set(DISTC_EREMOTE, "the codec gave up (test)");
}

/* Returns the code in *payload, distc_status or not. */
static int code_cont(distc_work **next, distc_work *done, void *payload) {
    (void)next, (void)done;
    return *(const int *)payload;
}

static int hand_back_done(distc_work **next, distc_work *done, void *payload) {
    (void)payload;
    return distc_work_ref(next, done);
}

static int hand_back_payload(distc_work **next, distc_work *done, void *payload) {
    (void)done;
    return distc_work_ref(next, (distc_work *)payload);
}

struct completer {
    distc_work *w;
    int delay_ms, code;
};

static void *complete_later(void *arg) {
    struct completer *c = arg;
    sleep_ms(c->delay_ms);
    (void)distc_work_complete(c->w, c->code, c->code ? "remote codec failed (test)" : NULL);
    return NULL;
}

static void test_promises(void **state) {
    (void)state;
    distc_work *p = NULL, *q = NULL, *t = NULL;
    assert_int_equal(distc_work_new(&p), 0);
    assert_int_equal(distc_work_test(p), DISTC_INPROGRESS);
    assert_int_equal(distc_work_wait(p, 10), DISTC_ETIMEOUT);
    uint64_t seq = 9;
    int32_t src = 9;
    assert_int_equal(distc_work_seq(&seq, p), 0);
    assert_int_equal(distc_work_source_rank(&src, p), 0);
    assert_true(seq == 0 && src == -1);

    /* A second handle: the same operation, freed on its own. */
    assert_int_equal(distc_work_ref(&q, p), 0);
    int ran = 0;
    assert_int_equal(distc_work_then(&t, q, count_cont, &ran), 0);
    distc_work_free(q);
    assert_int_equal(distc_work_test(t), DISTC_INPROGRESS);
    assert_int_equal(ran, 0);

    /* Completed from another thread while this one waits. */
    struct completer c = {p, 50, 0};
    pthread_t th;
    pthread_create(&th, NULL, complete_later, &c);
    assert_int_equal(distc_work_wait(p, 10000), 0);
    pthread_join(th, NULL);
    assert_int_equal(distc_work_wait(t, 10000), 0);
    assert_int_equal(__atomic_load_n(&ran, __ATOMIC_SEQ_CST), 1);
    distc_work_free(t);

    /* A second completion, a positive code, NULL handles. */
    assert_int_equal(distc_work_complete(p, 0, NULL), DISTC_ESTATE);
    dt_assert_contains(distc_error_last(), "already completed");
    distc_work *p2 = NULL;
    assert_int_equal(distc_work_new(&p2), 0);
    assert_int_equal(distc_work_complete(p2, 1, NULL), DISTC_EINVAL);
    dt_assert_contains(distc_error_last(), "negative distc error code");
    /* Nor a negative code that is no distc_status: its waiters could not tell what it means. */
    assert_int_equal(distc_work_complete(p2, -1000, NULL), DISTC_EINVAL);
    dt_assert_contains(distc_error_last(), "not -1000");
    assert_int_equal(distc_work_complete(p2, INT32_MIN, NULL), DISTC_EINVAL);
    assert_int_equal(distc_work_test(p2), DISTC_INPROGRESS); /* refused: still to complete */
    assert_int_equal(distc_work_complete(NULL, 0, NULL), DISTC_EINVAL);
    assert_int_equal(distc_work_new(NULL), DISTC_EINVAL);
    assert_int_equal(distc_work_ref(NULL, p), DISTC_EINVAL);
    distc_work *r = (distc_work *)0x1;
    assert_int_equal(distc_work_ref(&r, NULL), DISTC_EINVAL);
    assert_null(r);
    assert_int_equal(distc_work_then(NULL, p, count_cont, &ran), DISTC_EINVAL);
    r = (distc_work *)0x1;
    assert_int_equal(distc_work_then(&r, p, NULL, NULL), DISTC_EINVAL);
    dt_assert_contains(distc_error_last(), "fn");
    assert_null(r);
    assert_int_equal(distc_work_then(&r, NULL, count_cont, &ran), DISTC_EINVAL);

    /* Continuing a completed work runs at once (on a continuation thread); any number may follow one work. */
    ran = 0;
    distc_work *ts[3] = {NULL, NULL, NULL};
    for (int i = 0; i < 3; ++i) assert_int_equal(distc_work_then(&ts[i], p, count_cont, &ran), 0);
    for (int i = 0; i < 3; ++i) {
        assert_int_equal(distc_work_wait(ts[i], 10000), 0);
        distc_work_free(ts[i]);
    }
    assert_int_equal(__atomic_load_n(&ran, __ATOMIC_SEQ_CST), 3);

    /* A failure: the continuation still runs (it may release its payload) and passes it on. */
    ran = 0;
    assert_int_equal(distc_work_then(&t, p2, count_cont, &ran), 0);
    struct completer c2 = {p2, 20, DISTC_EREMOTE};
    pthread_create(&th, NULL, complete_later, &c2);
    assert_int_equal(distc_work_wait(t, 10000), DISTC_EREMOTE);
    dt_assert_contains(distc_error_last(), "remote codec failed");
    pthread_join(th, NULL);
    assert_int_equal(ran, 1);
    const char *msg = NULL;
    assert_int_equal(distc_work_error(p2, &msg), DISTC_EREMOTE);
    dt_assert_contains(msg, "remote codec failed (test)");
    distc_work_free(t);

    /* A continuation that fails, one that hands back the work it continues, and one that hands back another's. */
    assert_int_equal(distc_work_then(&t, p, fail_cont, NULL), 0);
    assert_int_equal(distc_work_wait(t, 10000), DISTC_EREMOTE);
    dt_assert_contains(distc_error_last(), "a continuation failed: the codec gave up (test)");
    distc_work_free(t);
    assert_int_equal(distc_work_then(&t, p2, hand_back_done, NULL), 0);
    assert_int_equal(distc_work_wait(t, 10000), DISTC_EREMOTE);
    dt_assert_contains(distc_error_last(), "remote codec failed");
    distc_work_free(t);
    /* A continuation that returns a positive code or one that is no distc_status fails its work, as such. */
    static const int bogus[] = {7, -1000, INT32_MIN};
    for (int i = 0; i < 3; ++i) {
        assert_int_equal(distc_work_then(&t, p, code_cont, (void *)&bogus[i]), 0);
        assert_int_equal(distc_work_wait(t, 10000), DISTC_EINTERNAL);
        dt_assert_contains(distc_error_last(), bogus[i] > 0 ? "a positive code" : "not a distc_status");
        distc_work_free(t);
    }
    /* A promise whose every handle is freed before it completes fails, so what
     * continues it runs (it once waited for ever); one handle left is enough. */
    distc_work *orphan = NULL, *kept = NULL;
    assert_int_equal(distc_work_new(&orphan), 0);
    assert_int_equal(distc_work_then(&t, orphan, count_cont, &ran), 0);
    assert_int_equal(distc_work_ref(&kept, orphan), 0);
    distc_work_free(orphan);
    assert_int_equal(distc_work_test(t), DISTC_INPROGRESS); /* `kept` may still complete it */
    distc_work_free(kept);
    assert_int_equal(distc_work_wait(t, 10000), DISTC_EABORTED);
    dt_assert_contains(distc_error_last(), "freed before it was completed");
    distc_work_free(t);
    /* A timeout too long for the clock waits, as long ones do (it once timed out at once). */
    distc_work *slow = NULL;
    assert_int_equal(distc_work_new(&slow), 0);
    struct completer cs = {slow, 50, 0};
    pthread_create(&th, NULL, complete_later, &cs);
    assert_int_equal(distc_work_wait(slow, INT64_MAX), 0);
    pthread_join(th, NULL);
    distc_work_free(slow);
    distc_work *later = NULL;
    assert_int_equal(distc_work_new(&later), 0);
    assert_int_equal(distc_work_then(&t, p, hand_back_payload, later), 0);
    sleep_ms(20);
    assert_int_equal(distc_work_test(t), DISTC_INPROGRESS); /* chained: waits for `later` */
    assert_int_equal(distc_work_complete(later, 0, NULL), 0);
    assert_int_equal(distc_work_wait(t, 10000), 0);
    distc_work_free(t);
    distc_work_free(later);
    distc_work_free(p);
    distc_work_free(p2);
}

/* A continuation that waits for a work another continuation completes later:
 * the pool gives the second one a thread while the first is blocked. */
struct waiter {
    distc_work *wait_for;
    int64_t waited_ms;
};

static int wait_cont(distc_work **next, distc_work *done, void *payload) {
    (void)next, (void)done;
    struct waiter *w = payload;
    int64_t t0 = dt_now_ms();
    int rc = distc_work_wait(w->wait_for, 20000);
    w->waited_ms = dt_now_ms() - t0;
    return rc;
}

static int complete_cont(distc_work **next, distc_work *done, void *payload) {
    (void)next, (void)done;
    return distc_work_complete((distc_work *)payload, 0, NULL);
}

static void test_waiting_continuations(void **state) {
    (void)state;
    for (int round = 0; round < 20; ++round) {
        distc_work *a = NULL, *b = NULL, *gate = NULL, *ta = NULL, *tb = NULL;
        assert_int_equal(distc_work_new(&a), 0);
        assert_int_equal(distc_work_new(&b), 0);
        assert_int_equal(distc_work_new(&gate), 0);
        struct waiter w = {gate, -1};
        assert_int_equal(distc_work_then(&ta, a, wait_cont, &w), 0);
        assert_int_equal(distc_work_then(&tb, b, complete_cont, gate), 0);
        assert_int_equal(distc_work_complete(a, 0, NULL), 0);
        if (round % 2) sleep_ms(5); /* the first continuation already blocked, or not yet */
        assert_int_equal(distc_work_complete(b, 0, NULL), 0);
        assert_int_equal(distc_work_wait(ta, 20000), 0);
        assert_int_equal(distc_work_wait(tb, 20000), 0);
        assert_true(w.waited_ms >= 0 && w.waited_ms < 10000);
        distc_work *ws[] = {a, b, gate, ta, tb};
        for (int i = 0; i < 5; ++i) distc_work_free(ws[i]);
    }
}

/* ------------------------------------------------------------ chains of collectives */

/* allreduce(SUM) of x, then an allgather of every rank's x[0] (started by a
 * continuation and handed back), then a continuation that divides x by the
 * size and checks the gathered values, then one that runs a blocking barrier. */
struct chain {
    distc_pg *pg;
    DLTensor *x, *one, *all;
    int size, divided, checked_bad;
};

static int gather_cont(distc_work **next, distc_work *done, void *payload) {
    struct chain *c = payload;
    int st = distc_work_test(done);
    if (st < 0) return st;
    dt_set(c->one, 0, dt_get(c->x, 0));
    return distc_allgather_into_tensor(next, c->pg, c->all, c->one, NULL);
}

static int divide_cont(distc_work **next, distc_work *done, void *payload) {
    (void)next;
    struct chain *c = payload;
    int st = distc_work_test(done);
    if (st < 0) return st;
    for (int64_t i = 0; i < dt_numel(c->x); ++i) dt_set(c->x, i, dt_get(c->x, i) / c->size);
    for (int r = 0; r < c->size; ++r) c->checked_bad += dt_get(c->all, r) != dt_get(c->all, 0);
    c->divided = 1;
    return 0;
}

static int barrier_cont(distc_work **next, distc_work *done, void *payload) {
    (void)next;
    struct chain *c = payload;
    int st = distc_work_test(done);
    if (st < 0) return st;
    return distc_barrier(NULL, c->pg, NULL); /* blocking: allowed off the group's worker */
}

static void rank_chain(distc_pg *pg, int rank, int size, void *arg) {
    (void)arg;
    struct chain c = {pg, dt_tensor_1d(DT_F64, 8), dt_tensor_1d(DT_F64, 1), dt_tensor_1d(DT_F64, size), size, 0, 0};
    /* A group's work is its backend's to complete, not the program's. */
    distc_work *bw = NULL;
    if (RK_OK(distc_barrier(&bw, pg, NULL))) {
        RK_ERR(distc_work_complete(bw, 0, NULL), DISTC_EINVAL, "group's operation");
        RK_OK(distc_work_wait(bw, 30000));
        distc_work_free(bw);
    }
    for (int round = 0; round < 5; ++round) {
        for (int i = 0; i < 8; ++i) dt_set(c.x, i, rank + i + round);
        c.divided = 0;
        distc_work *ar = NULL, *g = NULL, *d = NULL, *b = NULL;
        if (!RK_OK(distc_allreduce(&ar, pg, c.x, DISTC_SUM, NULL))) break;
        RK_OK(distc_work_then(&g, ar, gather_cont, &c));
        RK_OK(distc_work_then(&d, g, divide_cont, &c));
        RK_OK(distc_work_then(&b, d, barrier_cont, &c));
        distc_work_free(ar);
        distc_work_free(g);
        distc_work_free(d);
        RK_EQ_INT(distc_work_wait(b, 30000), 0);
        distc_work_free(b);
        RK_EQ_INT(c.divided, 1);
        RK_EQ_INT(c.checked_bad, 0);
        for (int i = 0; i < 8; ++i) RK_EQ_DBL(dt_get(c.x, i), (size - 1) / 2.0 + i + round);
        RK_EQ_DBL(dt_get(c.all, size - 1), (size * (size - 1) / 2.0 + size * round));
    }
    dt_tensor_free(c.x);
    dt_tensor_free(c.one);
    dt_tensor_free(c.all);
}

static void test_chains(void **state) {
    (void)state;
    for (int size = 1; size <= 4; ++size) dt_run_ranks(size, rank_chain, NULL);
}

/* An aborted group fails every link of a chain in flight, and no continuation is lost. */
static void rank_chain_abort(distc_pg *pg, int rank, int size, void *arg) {
    (void)arg, (void)size;
    struct chain c = {pg, dt_tensor_1d(DT_F64, 8), dt_tensor_1d(DT_F64, 1), dt_tensor_1d(DT_F64, size), size, 0, 0};
    distc_work *ar = NULL, *g = NULL, *d = NULL;
    if (rank == 0) {
        /* Rank 1 never joins: abort wakes the allreduce, and the chain fails behind it. */
        if (RK_OK(distc_allreduce(&ar, pg, c.x, DISTC_SUM, NULL))) {
            RK_OK(distc_work_then(&g, ar, gather_cont, &c));
            RK_OK(distc_work_then(&d, g, divide_cont, &c));
            sleep_ms(50);
            RK_EQ_INT(distc_work_test(d), DISTC_INPROGRESS);
            int64_t t0 = dt_now_ms();
            RK_OK(distc_pg_abort(pg));
            RK_ERR(distc_work_wait(d, 10000), DISTC_EABORTED, "allreduce");
            RK_CHECKF(dt_now_ms() - t0 < 5000, "the chain failed %lld ms after the abort",
                      (long long)(dt_now_ms() - t0));
            RK_EQ_INT(c.divided, 0);
        }
    } else {
        sleep_ms(500); /* after rank 0's abort */
        RK_OK(distc_pg_abort(pg));
    }
    distc_work_free(ar);
    distc_work_free(g);
    distc_work_free(d);
    dt_tensor_free(c.x);
    dt_tensor_free(c.one);
    dt_tensor_free(c.all);
}

static void test_chain_abort(void **state) {
    (void)state;
    dt_run_ranks(2, rank_chain_abort, NULL);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_promises),
        cmocka_unit_test(test_waiting_continuations),
        cmocka_unit_test(test_chains),
        cmocka_unit_test(test_chain_abort),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

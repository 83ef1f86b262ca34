/*
 * Asynchronous work handles (distc/work.h) with threads as ranks: wait, test,
 * error, seq, duration, source rank, completion callbacks, detaching, queues
 * of operations, timeouts and distc_pg_abort.
 *
 * The timeouts and aborts are in pg_work/aborts.c; this file holds the rest.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pg_harness.h"
#include "test_util.h"

#include "pg_work/pg_work.h"

void sleep_ms(int ms) {
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static void fill_i32(DLTensor *t, int base) {
    for (int64_t i = 0; i < dt_numel(t); ++i) dt_set(t, i, base + (double)i);
}

/* Element i of t is `base + i` for every i. */
#define CHECK_I32(what, t, base)                                                                              \
    do {                                                                                                      \
        for (int64_t i_ = 0; i_ < dt_numel(t); ++i_)                                                          \
            if (!RK_CHECKF(dt_get(t, i_) == (base) + (double)i_, "%s: element %lld is %g, expected %g", what, \
                           (long long)i_, dt_get(t, i_), (base) + (double)i_))                                \
                break;                                                                                        \
    } while (0)

/* Sum over ranks of (r + i): size * i + size * (size - 1) / 2. */
static double ring_sum(int size, int i) { return (double)size * i + size * (size - 1) / 2.0; }

uint64_t seq_of(distc_work *w) {
    uint64_t s = 999;
    RK_OK(distc_work_seq(&s, w));
    return s;
}

static int32_t src_of(distc_work *w) {
    int32_t s = -99;
    RK_OK(distc_work_source_rank(&s, w));
    return s;
}

int64_t duration_of(distc_work *w) {
    int64_t d = -1;
    RK_OK(distc_work_duration_ns(&d, w));
    return d;
}

/* Store-side signals between rank threads (no group traffic). */
static void signal_key(const char *name) {
    char key[160];
    snprintf(key, sizeof key, "work_test/%s/%s", dt_rank_group(), name);
    RK_OK(distc_store_set(dt_rank_store(), key, "1", 1));
}

static void wait_key(const char *name) {
    char key[160];
    snprintf(key, sizeof key, "work_test/%s/%s", dt_rank_group(), name);
    const char *k = key;
    RK_OK(distc_store_wait(dt_rank_store(), &k, 1, 15000));
}

/* ------------------------------------------------------------------- basics */

static void rank_basics(distc_pg *pg, int rank, int size, void *arg) {
    (void)arg;
    DLTensor *t = dt_tensor_1d(DT_I32, 6);
    fill_i32(t, rank);
    distc_work *w = NULL;
    if (RK_OK(distc_allreduce(&w, pg, t, DISTC_SUM, NULL)) && RK_CHECK(w != NULL)) {
        RK_EQ_INT(distc_work_wait(w, DISTC_TIMEOUT_DEFAULT), 0);
        RK_EQ_INT(distc_work_test(w), 0);
        const char *msg = NULL;
        RK_EQ_INT(distc_work_error(w, &msg), 0);
        RK_EQ_STR(msg, "");
        RK_EQ_INT(distc_work_error(w, NULL), 0);
        RK_EQ_INT(seq_of(w), 1);
        RK_EQ_INT(src_of(w), -1);
        int64_t d = duration_of(w);
        RK_CHECKF(size == 1 ? d >= 0 : d > 0, "duration %lld ns", (long long)d);
        RK_CHECKF(d < 20000000000LL, "duration %lld ns", (long long)d);
        /* Waiting again, with any timeout, gives the same status. */
        RK_EQ_INT(distc_work_wait(w, 0), 0);
        RK_EQ_INT(distc_work_wait(w, 10), 0);
        for (int i = 0; i < 6; ++i) RK_EQ_DBL(dt_get(t, i), ring_sum(size, i));
        distc_work_free(w);
    }

    /* A blocking collective counts in the sequence too. */
    RK_OK(distc_broadcast(NULL, pg, t, size - 1, NULL));

    w = NULL;
    if (RK_OK(distc_barrier(&w, pg, NULL)) && RK_CHECK(w != NULL)) {
        RK_EQ_INT(distc_work_wait(w, -1), 0);
        RK_EQ_INT(seq_of(w), 3);
        RK_EQ_INT(src_of(w), -1);
        distc_work_free(w);
    }

    /* Point-to-point: seq 0, source rank = the peer. Even ranks send first. */
    if (size > 1) {
        const int next = (rank + 1) % size, prev = (rank + size - 1) % size;
        DLTensor *s = dt_tensor_1d(DT_I32, 4), *r = dt_tensor_1d(DT_I32, 4);
        fill_i32(s, 100 * rank);
        for (int step = 0; step < 2; ++step) {
            int sending = (step == 0) == (rank % 2 == 0);
            distc_work *p = NULL;
            if (sending) {
                if (RK_OK(distc_send(&p, pg, s, next, 11, NULL)) && RK_CHECK(p != NULL)) {
                    RK_EQ_INT(distc_work_wait(p, -1), 0);
                    RK_EQ_INT(seq_of(p), 0);
                    RK_EQ_INT(src_of(p), next);
                    distc_work_free(p);
                }
            } else {
                if (RK_OK(distc_recv(&p, pg, r, prev, 11, NULL)) && RK_CHECK(p != NULL)) {
                    RK_EQ_INT(distc_work_wait(p, -1), 0);
                    RK_EQ_INT(seq_of(p), 0);
                    RK_EQ_INT(src_of(p), prev);
                    CHECK_I32("recv", r, 100 * prev);
                    distc_work_free(p);
                }
            }
        }
        dt_tensor_free(s);
        dt_tensor_free(r);
    }

    /* Point-to-point did not advance the sequence. */
    DLTensor *all = dt_tensor_1d(DT_I32, 6 * size);
    fill_i32(t, 10 * rank);
    w = NULL;
    if (RK_OK(distc_allgather_into_tensor(&w, pg, all, t, NULL)) && RK_CHECK(w != NULL)) {
        RK_EQ_INT(distc_work_wait(w, -1), 0);
        RK_EQ_INT(seq_of(w), 4);
        for (int j = 0; j < size; ++j)
            for (int i = 0; i < 6; ++i) RK_EQ_DBL(dt_get(all, j * 6 + i), 10 * j + i);
        distc_work_free(w);
    }
    dt_tensor_free(all);
    dt_tensor_free(t);
}

static void test_work_basics(void **state) {
    (void)state;
    for (int size = 1; size <= 3; ++size) dt_run_ranks(size, rank_basics, NULL);
}

/* ---------------------------------------------------------------- callbacks */
void on_done(distc_work *w, void *payload) {
    struct cb_state *s = payload;
    s->thread = pthread_self();
    s->status = distc_work_test(w);
    s->source = -99;
    distc_work_source_rank(&s->source, w);
    distc_work_seq(&s->seq, w);
    s->work_seen = w;
    __atomic_add_fetch(&s->calls, 1, __ATOMIC_SEQ_CST);
}

static int calls_of(struct cb_state *s) { return __atomic_load_n(&s->calls, __ATOMIC_SEQ_CST); }

int wait_calls(struct cb_state *s, int n) {
    for (int i = 0; i < 500 && calls_of(s) < n; ++i) sleep_ms(10);
    return calls_of(s);
}

static void rank_callbacks(distc_pg *pg, int rank, int size, void *arg) {
    (void)arg;
    (void)size;
    DLTensor *t = dt_tensor_1d(DT_I32, 5);

    /* Set before completion: rank 1's recv completes only after rank 0 is told to send. */
    if (rank == 1) {
        struct cb_state s;
        memset(&s, 0, sizeof s);
        distc_work *w = NULL;
        if (RK_OK(distc_recv(&w, pg, t, 0, 5, NULL))) {
            RK_EQ_INT(distc_work_test(w), DISTC_INPROGRESS);
            RK_OK(distc_work_on_complete(w, on_done, &s));
            RK_EQ_INT(calls_of(&s), 0);
            RK_ERR2(distc_work_on_complete(w, on_done, &s), DISTC_ESTATE, "distc_work_on_complete", "callback");
            signal_key("send5");
            RK_EQ_INT(distc_work_wait(w, -1), 0);
            RK_EQ_INT(wait_calls(&s, 1), 1);
            RK_CHECKF(!pthread_equal(s.thread, pthread_self()), "the callback ran on the caller's thread");
            RK_EQ_INT(s.status, 0);
            RK_EQ_INT(s.source, 0);
            RK_EQ_INT(s.seq, 0);
            CHECK_I32("recv with callback", t, 50);
            /* Still one callback per operation after completion. */
            RK_ERR(distc_work_on_complete(w, on_done, &s), DISTC_ESTATE, "distc_work_on_complete");
            distc_work_free(w);
        }
        sleep_ms(20);
        RK_EQ_INT(calls_of(&s), 1);
    } else if (rank == 0) {
        wait_key("send5");
        fill_i32(t, 50);
        RK_OK(distc_send(NULL, pg, t, 1, 5, NULL));
    }

    /* Set after completion: called at once, on the calling thread. */
    {
        struct cb_state s;
        memset(&s, 0, sizeof s);
        distc_work *w = NULL;
        if (RK_OK(distc_barrier(&w, pg, NULL))) {
            RK_EQ_INT(distc_work_wait(w, -1), 0);
            RK_OK(distc_work_on_complete(w, on_done, &s));
            RK_EQ_INT(calls_of(&s), 1);
            RK_CHECKF(pthread_equal(s.thread, pthread_self()), "a late callback did not run at once on the caller");
            RK_EQ_INT(s.status, 0);
            RK_EQ_INT(s.seq, 1);
            RK_EQ_INT(s.source, -1);
            RK_ERR2(distc_work_on_complete(w, on_done, &s), DISTC_ESTATE, "distc_work_on_complete", "callback");
            RK_ERR2(distc_work_on_complete(w, NULL, &s), DISTC_EINVAL, "distc_work_on_complete", "cb");
            distc_work_free(w);
            RK_EQ_INT(calls_of(&s), 1);
        }
    }

    /* Set, then the handle freed before completion: the callback still runs, once. */
    if (rank == 1) {
        struct cb_state s;
        memset(&s, 0, sizeof s);
        distc_work *w = NULL;
        if (RK_OK(distc_recv(&w, pg, t, 0, 6, NULL))) {
            RK_OK(distc_work_on_complete(w, on_done, &s));
            distc_work_free(w);
            signal_key("send6");
            RK_EQ_INT(wait_calls(&s, 1), 1);
            RK_EQ_INT(s.status, 0);
            RK_EQ_INT(s.source, 0);
            RK_CHECK(s.work_seen != NULL);
            RK_OK(distc_barrier(NULL, pg, NULL));
            CHECK_I32("recv of a freed handle", t, 60);
        }
        RK_EQ_INT(calls_of(&s), 1);
    } else if (rank == 0) {
        wait_key("send6");
        fill_i32(t, 60);
        RK_OK(distc_send(NULL, pg, t, 1, 6, NULL));
        RK_OK(distc_barrier(NULL, pg, NULL));
    } else {
        RK_OK(distc_barrier(NULL, pg, NULL));
    }

    /* A callback on a collective set before it could complete (rank 0 enters late). */
    {
        struct cb_state s;
        memset(&s, 0, sizeof s);
        distc_work *w = NULL;
        if (rank == 0) sleep_ms(50);
        fill_i32(t, rank);
        if (RK_OK(distc_allreduce(&w, pg, t, DISTC_SUM, NULL))) {
            RK_OK(distc_work_on_complete(w, on_done, &s));
            RK_EQ_INT(distc_work_wait(w, -1), 0);
            RK_EQ_INT(wait_calls(&s, 1), 1);
            RK_EQ_INT(s.status, 0);
            RK_EQ_INT(s.seq, 3);
            distc_work_free(w);
        }
        for (int i = 0; i < 5; ++i) RK_EQ_DBL(dt_get(t, i), ring_sum(size, i));
    }
    dt_tensor_free(t);
}

static void test_work_callbacks(void **state) {
    (void)state;
    dt_run_ranks(2, rank_callbacks, NULL);
    dt_run_ranks(3, rank_callbacks, NULL);
}

/* ------------------------------------------------------------------- detach */

static void rank_detach(distc_pg *pg, int rank, int size, void *arg) {
    (void)arg;
    DLTensor *a = dt_tensor_1d(DT_I32, 7), *b = dt_tensor_1d(DT_F64, 9);

    /* Freed before completion, then an asynchronous barrier (queued behind it). */
    fill_i32(a, rank);
    distc_work *w = NULL;
    if (RK_OK(distc_allreduce(&w, pg, a, DISTC_SUM, NULL))) distc_work_free(w);
    w = NULL;
    if (RK_OK(distc_barrier(&w, pg, NULL))) {
        RK_EQ_INT(distc_work_wait(w, -1), 0);
        distc_work_free(w);
    }
    for (int i = 0; i < 7; ++i) RK_EQ_DBL(dt_get(a, i), ring_sum(size, i));

    /* Freed before completion, then a blocking barrier: as in torch (whose
     * barrier waits for the work issued before it), the data is there after it. */
    for (int round = 0; round < 5; ++round) {
        fill_i32(a, rank + round);
        for (int i = 0; i < 9; ++i) dt_set(b, i, rank == size - 1 ? 1000 + i + round : -1);
        w = NULL;
        if (RK_OK(distc_allreduce(&w, pg, a, DISTC_SUM, NULL))) distc_work_free(w);
        w = NULL;
        if (RK_OK(distc_broadcast(&w, pg, b, size - 1, NULL))) distc_work_free(w);
        RK_OK(distc_barrier(NULL, pg, NULL));
        int bad_a = 0, bad_b = 0;
        for (int i = 0; i < 7; ++i) bad_a += dt_get(a, i) != ring_sum(size, i) + size * round;
        for (int i = 0; i < 9; ++i) bad_b += dt_get(b, i) != 1000 + i + round;
        /* A blocking collective lets the asynchronous ones queued before it finish
         * first (torch's gloo barrier waits for all prior work too). */
        RK_CHECKF(bad_a == 0 && bad_b == 0,
                  "round %d: after a blocking barrier, %d of 7 elements of a detached allreduce and %d of 9 of a "
                  "detached broadcast are not done yet",
                  round, bad_a, bad_b);
        /* Drain the worker (its queue is FIFO) before the buffers are reused. */
        w = NULL;
        if (RK_OK(distc_barrier(&w, pg, NULL))) {
            RK_EQ_INT(distc_work_wait(w, -1), 0);
            distc_work_free(w);
        }
    }
    dt_tensor_free(a);
    dt_tensor_free(b);
}

static void test_work_detach(void **state) {
    (void)state;
    for (int size = 1; size <= MAX_SIZE; ++size) dt_run_ranks(size, rank_detach, NULL);
}

/* Freeing the group: queued and running work ends with DISTC_EABORTED; the handles stay valid. */
static void rank_free_group_with_work(distc_pg *pg, int rank, int size, void *arg) {
    (void)arg;
    (void)pg;
    char name[128];
    snprintf(name, sizeof name, "%s_second", dt_rank_group());
    distc_pg_options o = DISTC_PG_OPTIONS_INIT;
    o.group_name = name;
    o.timeout_ms = 20000;
    distc_pg *pg2 = NULL;
    if (!RK_OK(distc_pg_new(&pg2, dt_rank_store(), rank, size, &o))) return;
    if (rank == 0) {
        DLTensor *t = dt_tensor_1d(DT_F32, 5), *u = dt_tensor_1d(DT_F32, 5);
        distc_work *w1 = NULL, *w2 = NULL;
        RK_OK(distc_recv(&w1, pg2, t, 1, 77, NULL));          /* nobody sends */
        RK_OK(distc_allreduce(&w2, pg2, u, DISTC_SUM, NULL)); /* queued behind it */
        sleep_ms(20);
        int64_t t0 = dt_now_ms();
        distc_pg_free(pg2);
        int64_t took = dt_now_ms() - t0;
        RK_CHECKF(took < 5000, "distc_pg_free took %lld ms", (long long)took);
        if (w1) {
            RK_ERR(distc_work_wait(w1, 5000), DISTC_EABORTED, "distc_work_wait");
            RK_EQ_INT(distc_work_test(w1), DISTC_EABORTED);
            const char *msg = NULL;
            RK_EQ_INT(distc_work_error(w1, &msg), DISTC_EABORTED);
            RK_CHECK(msg != NULL && msg[0] != '\0');
            RK_EQ_INT(seq_of(w1), 0);
        }
        if (w2) {
            RK_ERR(distc_work_wait(w2, 5000), DISTC_EABORTED, "distc_work_wait");
            RK_EQ_INT(seq_of(w2), 1);
        }
        distc_work_free(w1);
        distc_work_free(w2);
        dt_tensor_free(t);
        dt_tensor_free(u);
        signal_key("freed");
    } else {
        wait_key("freed");
        distc_pg_free(pg2);
    }
}

static void test_work_outlives_group(void **state) {
    (void)state;
    dt_run_ranks(2, rank_free_group_with_work, NULL);
}

/* -------------------------------------------------------------- queue order */

static void rank_queue(distc_pg *pg, int rank, int size, void *arg) {
    (void)arg;
    enum { N = 6 };
    DLTensor *ar = dt_tensor_1d(DT_I32, 5), *bc = dt_tensor_1d(DT_I64, 6), *in = dt_tensor_1d(DT_F32, 3);
    DLTensor *ag = dt_tensor_1d(DT_F32, 3 * size), *rs = dt_tensor_1d(DT_I16, 2);
    DLTensor *rsin = dt_tensor_1d(DT_I16, 2 * size), *a2a_in = dt_tensor_1d(DT_I32, size),
             *a2a_out = dt_tensor_1d(DT_I32, size);
    fill_i32(ar, rank);
    fill_i32(bc, rank == 0 ? 500 : -1);
    fill_i32(in, 10 * rank);
    fill_i32(rsin, rank);
    for (int j = 0; j < size; ++j) dt_set(a2a_in, j, 10 * rank + j);
    distc_work *w[N] = {NULL};
    RK_OK(distc_allreduce(&w[0], pg, ar, DISTC_SUM, NULL));
    RK_OK(distc_broadcast(&w[1], pg, bc, 0, NULL));
    RK_OK(distc_allgather_into_tensor(&w[2], pg, ag, in, NULL));
    RK_OK(distc_reduce_scatter_tensor(&w[3], pg, rs, rsin, DISTC_SUM, NULL));
    RK_OK(distc_alltoall_single(&w[4], pg, a2a_out, a2a_in, NULL, NULL, NULL));
    RK_OK(distc_barrier(&w[5], pg, NULL));
    for (int k = 0; k < N; ++k) {
        if (!w[k]) continue;
        RK_EQ_INT(distc_work_wait(w[k], -1), 0);
        RK_EQ_INT(seq_of(w[k]), k + 1);
    }
    for (int i = 0; i < 5; ++i) RK_EQ_DBL(dt_get(ar, i), ring_sum(size, i));
    CHECK_I32("queued broadcast", bc, 500);
    for (int j = 0; j < size; ++j)
        for (int i = 0; i < 3; ++i) RK_EQ_DBL(dt_get(ag, j * 3 + i), 10 * j + i);
    for (int i = 0; i < 2; ++i) RK_EQ_DBL(dt_get(rs, i), ring_sum(size, rank * 2 + i));
    for (int j = 0; j < size; ++j) RK_EQ_DBL(dt_get(a2a_out, j), 10 * j + rank);
    for (int k = 0; k < N; ++k) distc_work_free(w[k]);

    /* Five allreduces queued, waited in reverse order, polled with distc_work_test. */
    DLTensor *ts[5];
    distc_work *v[5] = {NULL};
    for (int k = 0; k < 5; ++k) {
        ts[k] = dt_tensor_1d(DT_F64, 4);
        fill_i32(ts[k], rank + k);
        RK_OK(distc_allreduce(&v[k], pg, ts[k], k % 2 ? DISTC_MAX : DISTC_SUM, NULL));
    }
    for (int k = 4; k >= 0; --k) {
        if (!v[k]) continue;
        int st = DISTC_INPROGRESS;
        for (int i = 0; i < 20000 && st == DISTC_INPROGRESS; ++i) {
            st = distc_work_test(v[k]);
            if (st == DISTC_INPROGRESS) sleep_ms(1);
        }
        RK_EQ_INT(st, 0);
        RK_EQ_INT(distc_work_wait(v[k], 1000), 0);
        RK_EQ_INT(seq_of(v[k]), N + 1 + k);
        for (int i = 0; i < 4; ++i)
            RK_EQ_DBL(dt_get(ts[k], i), k % 2 ? size - 1 + k + i : ring_sum(size, i) + size * k);
        distc_work_free(v[k]);
        dt_tensor_free(ts[k]);
    }
    DLTensor *all[] = {ar, bc, in, ag, rs, rsin, a2a_in, a2a_out};
    for (size_t k = 0; k < sizeof all / sizeof all[0]; ++k) dt_tensor_free(all[k]);
}

static void test_work_queue_order(void **state) {
    (void)state;
    for (int size = 1; size <= MAX_SIZE; ++size) dt_run_ranks(size, rank_queue, NULL);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_work_basics),
        cmocka_unit_test(test_work_callbacks),
        cmocka_unit_test(test_work_queue_order),
        cmocka_unit_test(test_work_detach),
        cmocka_unit_test(test_work_outlives_group),
        cmocka_unit_test(test_work_timeout_then_abort),
        cmocka_unit_test(test_abort_wakes_blocking_call),
        cmocka_unit_test(test_op_timeout),
        cmocka_unit_test(test_group_timeout),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

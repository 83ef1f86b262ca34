/* test_pg_work's timeouts and aborts: a wait that times out then an abort,
 * an abort that wakes a blocking call, per-operation and group timeouts,
 * and every call failing once the group is aborted. */
#define _GNU_SOURCE
#include <pthread.h>
#include <string.h>

#include "test_util.h"

#include "pg_work.h"

/* ---------------------------------------------------------- timeout, abort */

/* After abort, every operation (blocking or not) fails with DISTC_EABORTED and hands out no work. */
static void check_everything_aborted(distc_pg *pg, int rank, int size) {
    DLTensor *t = dt_tensor_1d(DT_F32, 4), *big = dt_tensor_1d(DT_F32, 4 * size);
    DLTensor *list[MAX_SIZE], *list2[MAX_SIZE];
    for (int j = 0; j < size; ++j) {
        list[j] = dt_tensor_1d(DT_F32, 4);
        list2[j] = dt_tensor_1d(DT_F32, 4);
    }
    const DLTensor *const *clist = (const DLTensor *const *)list;
    const int peer = (rank + 1) % size;
    for (int async = 0; async < 2; ++async) {
        distc_work *w = NULL;
        distc_work **out = async ? &w : NULL;
#define ABORTED(fn, call)                                                    \
    do {                                                                     \
        RK_ERR(call, DISTC_EABORTED, fn);                                    \
        RK_CHECKF(w == NULL, "%s handed out a work handle after abort", fn); \
    } while (0)
        ABORTED("distc_allreduce", distc_allreduce(out, pg, t, DISTC_SUM, NULL));
        ABORTED("distc_allreduce_coalesced", distc_allreduce_coalesced(out, pg, list, (size_t)size, DISTC_SUM, NULL));
        ABORTED("distc_broadcast", distc_broadcast(out, pg, t, 0, NULL));
        ABORTED("distc_reduce", distc_reduce(out, pg, t, 0, DISTC_MAX, NULL));
        ABORTED("distc_allgather", distc_allgather(out, pg, list, t, NULL));
        ABORTED("distc_allgather_into_tensor", distc_allgather_into_tensor(out, pg, big, t, NULL));
        ABORTED("distc_gather", distc_gather(out, pg, list, t, 0, NULL));
        ABORTED("distc_scatter", distc_scatter(out, pg, t, clist, 0, NULL));
        ABORTED("distc_reduce_scatter", distc_reduce_scatter(out, pg, t, clist, DISTC_SUM, NULL));
        ABORTED("distc_reduce_scatter_tensor", distc_reduce_scatter_tensor(out, pg, t, big, DISTC_SUM, NULL));
        ABORTED("distc_alltoall", distc_alltoall(out, pg, list2, clist, NULL));
        ABORTED("distc_alltoall_single", distc_alltoall_single(out, pg, big, big, NULL, NULL, NULL));
        ABORTED("distc_barrier", distc_barrier(out, pg, NULL));
        ABORTED("distc_send", distc_send(out, pg, t, peer, 1, NULL));
        ABORTED("distc_recv", distc_recv(out, pg, t, peer, 1, NULL));
        ABORTED("distc_recv", distc_recv(out, pg, t, DISTC_ANY_SOURCE, 1, NULL));
#undef ABORTED
    }
    /* Aborting again never hangs. */
    int rc = distc_pg_abort(pg);
    RK_CHECKF(rc == 0 || rc == DISTC_EABORTED, "second distc_pg_abort -> %d", rc);
    for (int j = 0; j < size; ++j) {
        dt_tensor_free(list[j]);
        dt_tensor_free(list2[j]);
    }
    dt_tensor_free(t);
    dt_tensor_free(big);
}

static void timeout_then_abort(distc_pg *pg, int rank, int size, distc_work *w, distc_work **w2p, DLTensor *u,
                               struct cb_state *ps) {
    int64_t t0 = dt_now_ms();
    RK_ERR2(distc_work_wait(w, 50), DISTC_ETIMEOUT, "distc_work_wait", "recv");
    int64_t waited = dt_now_ms() - t0;
    RK_CHECKF(waited >= 40 && waited < 3000, "distc_work_wait(50) took %lld ms", (long long)waited);
    RK_EQ_INT(distc_work_wait(w, 0), DISTC_ETIMEOUT);
    RK_EQ_INT(distc_work_test(w), DISTC_INPROGRESS);
    const char *msg = "x";
    RK_EQ_INT(distc_work_error(w, &msg), DISTC_INPROGRESS);
    RK_EQ_STR(msg, "");
    RK_EQ_INT(duration_of(w), 0);
    RK_OK(distc_work_on_complete(w, on_done, ps));
    RK_OK(distc_allreduce(w2p, pg, u, DISTC_SUM, NULL)); /* queued behind the recv */

    t0 = dt_now_ms();
    RK_OK(distc_pg_abort(pg));
    RK_ERR2(distc_work_wait(w, 5000), DISTC_EABORTED, "distc_work_wait", "abort");
    int64_t took = dt_now_ms() - t0;
    RK_CHECKF(took < 2000, "the aborted recv completed after %lld ms", (long long)took);
    RK_EQ_INT(distc_work_test(w), DISTC_EABORTED);
    msg = NULL;
    RK_EQ_INT(distc_work_error(w, &msg), DISTC_EABORTED);
    RK_CHECKF(msg && strstr(msg, "abort"), "message \"%s\"", msg ? msg : "(null)");
    RK_CHECK(duration_of(w) > 0);
    RK_EQ_INT(wait_calls(ps, 1), 1);
    RK_EQ_INT(ps->status, DISTC_EABORTED);
    if (*w2p) {
        RK_ERR(distc_work_wait(*w2p, 5000), DISTC_EABORTED, "distc_work_wait");
        RK_EQ_INT(seq_of(*w2p), 1);
    }
    check_everything_aborted(pg, rank, size);
}

static void rank_timeout_then_abort(distc_pg *pg, int rank, int size, void *arg) {
    (void)arg;
    if (rank != 0) return; /* the others stay alive (the harness holds them until rank 0 is done) */
    DLTensor *t = dt_tensor_1d(DT_I32, 5), *u = dt_tensor_1d(DT_I32, 5);
    struct cb_state s;
    memset(&s, 0, sizeof s);
    distc_work *w = NULL, *w2 = NULL;
    if (RK_OK(distc_recv(&w, pg, t, 1, 99, NULL))) /* nobody sends */
        timeout_then_abort(pg, rank, size, w, &w2, u, &s);
    distc_work_free(w);
    distc_work_free(w2);
    dt_tensor_free(t);
    dt_tensor_free(u);
}

void test_work_timeout_then_abort(void **state) {
    (void)state;
    dt_run_ranks(2, rank_timeout_then_abort, NULL);
    dt_run_ranks(3, rank_timeout_then_abort, NULL);
}

/* distc_pg_abort from another thread wakes a blocking call. */
struct aborter {
    distc_pg *pg;
    int delay_ms;
    int rc;
};

static void *abort_later(void *p) {
    struct aborter *a = p;
    sleep_ms(a->delay_ms);
    a->rc = distc_pg_abort(a->pg);
    return NULL;
}

static void rank_abort_blocking(distc_pg *pg, int rank, int size, void *arg) {
    (void)arg;
    (void)size;
    if (rank != 0) return;
    DLTensor *t = dt_tensor_1d(DT_F64, 5);
    struct aborter a = {pg, 100, -99};
    pthread_t th;
    if (!RK_CHECK(pthread_create(&th, NULL, abort_later, &a) == 0)) return;
    int64_t t0 = dt_now_ms();
    RK_ERR2(distc_recv(NULL, pg, t, 1, 42, NULL), DISTC_EABORTED, "distc_recv", "abort");
    int64_t took = dt_now_ms() - t0;
    pthread_join(th, NULL);
    RK_EQ_INT(a.rc, 0);
    RK_CHECKF(took < 3000, "the blocking recv returned %lld ms after the abort", (long long)took);
    check_everything_aborted(pg, rank, size);
    dt_tensor_free(t);
}

void test_abort_wakes_blocking_call(void **state) {
    (void)state;
    dt_run_ranks(2, rank_abort_blocking, NULL);
}

/* A per-operation timeout: a blocking recv nobody sends fails with DISTC_ETIMEOUT in about that time. */
static void rank_op_timeout(distc_pg *pg, int rank, int size, void *arg) {
    (void)arg;
    (void)size;
    if (rank != 0) return;
    DLTensor *t = dt_tensor_1d(DT_I32, 5);
    distc_op_options oo = DISTC_OP_OPTIONS_INIT;
    oo.timeout_ms = 200;
    int64_t t0 = dt_now_ms();
    RK_ERR(distc_recv(NULL, pg, t, 1, 3, &oo), DISTC_ETIMEOUT, "distc_recv");
    int64_t took = dt_now_ms() - t0;
    RK_CHECKF(took >= 150 && took < 5000, "a 200 ms recv timeout took %lld ms", (long long)took);
    dt_tensor_free(t);
}

void test_op_timeout(void **state) {
    (void)state;
    dt_run_ranks(2, rank_op_timeout, NULL);
}

/* A collective a peer never joins fails with DISTC_ETIMEOUT after the group's timeout. */
static void rank_group_timeout(distc_pg *pg, int rank, int size, void *arg) {
    (void)arg;
    (void)size;
    if (rank != 0) return;
    int64_t tmo = 0;
    RK_OK(distc_pg_timeout(&tmo, pg));
    RK_EQ_INT(tmo, 1000);
    DLTensor *t = dt_tensor_1d(DT_F32, 5);
    distc_work *w = NULL;
    int64_t t0 = dt_now_ms();
    if (RK_OK(distc_allreduce(&w, pg, t, DISTC_SUM, NULL))) {
        RK_ERR(distc_work_wait(w, 10000), DISTC_ETIMEOUT, "allreduce");
        int64_t took = dt_now_ms() - t0;
        RK_CHECKF(took >= 900 && took < 8000, "a 1000 ms group timeout took %lld ms", (long long)took);
        RK_EQ_INT(distc_work_test(w), DISTC_ETIMEOUT);
        distc_work_free(w);
    }
    dt_tensor_free(t);
}

void test_group_timeout(void **state) {
    (void)state;
    dt_run_ranks_timeout(2, 1000, rank_group_timeout, NULL);
}

/* Subgroups, split, rank translation, the monitored barrier, byte
 * collectives, batched point-to-point and the debug-mode cross-check, with
 * threads as ranks. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pg_harness.h"
#include "test_util.h"

/* Sum of `v` over the group, as int64. */
static int64_t group_sum(distc_pg *pg, int64_t v) {
    DLTensor *t = dt_tensor_1d(DT_I64, 1);
    dt_set(t, 0, (double)v);
    RK_OK(distc_allreduce(NULL, pg, t, DISTC_SUM, NULL));
    int64_t s = (int64_t)dt_get(t, 0);
    dt_tensor_free(t);
    return s;
}

static void subgroups_body(distc_pg *pg, int rank, int size, void *arg) {
    (void)arg;
    /* Odd ranks, listed in reverse: group rank 0 is the highest odd rank. */
    int32_t odd[4];
    size_t n = 0;
    for (int r = size - 1; r >= 0; --r)
        if (r % 2) odd[n++] = r;
    distc_pg *sub = NULL;
    RK_OK(distc_pg_new_subgroup(&sub, pg, odd, n, NULL));
    if (rank % 2 == 0) {
        RK_CHECKF(sub == NULL, "rank %d is not a member but got a group", rank);
    } else if (RK_CHECK(sub != NULL)) {
        int32_t sr = -1, ss = -1, g = -1, back = -2;
        RK_OK(distc_pg_rank(&sr, sub));
        RK_OK(distc_pg_size(&ss, sub));
        RK_EQ_INT(ss, (int)n);
        RK_OK(distc_pg_global_rank(&g, sub, sr));
        RK_EQ_INT(g, rank);
        RK_OK(distc_pg_group_rank(&back, sub, rank));
        RK_EQ_INT(back, sr);
        RK_OK(distc_pg_group_rank(&back, sub, 0));
        RK_EQ_INT(back, -1); /* rank 0 is even: not a member */
        RK_ERR(distc_pg_global_rank(&g, sub, 99), DISTC_EINVAL, "group_rank 99");
        int64_t expect = 0;
        for (size_t i = 0; i < n; ++i) expect += odd[i];
        RK_EQ_INT(group_sum(sub, rank), expect);
        const char *name = NULL;
        RK_OK(distc_pg_name(&name, sub));
        RK_CHECKF(name && strstr(name, "/sub1"), "subgroup name %s", name ? name : "(null)");
        const char *prefix = NULL;
        RK_OK(distc_pg_store_prefix(&prefix, sub));
        RK_CHECKF(prefix && strncmp(prefix, name, strlen(name)) == 0 && strcmp(prefix + strlen(name), "/0/") == 0,
                  "store prefix %s of %s", prefix ? prefix : "(null)", name);
        RK_ERR(distc_pg_store_prefix(NULL, sub), DISTC_EINVAL, "out");
        /* A subgroup of the subgroup: global ranks compose. */
        int32_t first = 0;
        distc_pg *subsub = NULL;
        RK_OK(distc_pg_new_subgroup(&subsub, sub, &first, 1, NULL));
        if (sr == 0 && RK_CHECK(subsub != NULL)) {
            RK_OK(distc_pg_global_rank(&g, subsub, 0));
            RK_EQ_INT(g, odd[0]);
        }
        distc_pg_free(subsub);
    }
    /* The parent still works, and the subgroup can outlive it being used. */
    RK_EQ_INT(group_sum(pg, 1), size);
    distc_pg_free(sub);

    int32_t bad[2] = {0, 0};
    RK_ERR(distc_pg_new_subgroup(&sub, pg, bad, 2, NULL), DISTC_EINVAL, "listed twice");
    bad[1] = size;
    RK_ERR(distc_pg_new_subgroup(&sub, pg, bad, 2, NULL), DISTC_EINVAL, "outside");
    RK_ERR(distc_pg_new_subgroup(&sub, pg, bad, 0, NULL), DISTC_EINVAL, "n is 0");
    RK_ERR(distc_pg_new_subgroup(NULL, pg, bad, 1, NULL), DISTC_EINVAL, "out");
}

static void test_subgroups(void **state) {
    (void)state;
    for (int size = 2; size <= 4; ++size) dt_run_ranks(size, subgroups_body, NULL);
}

static void split_body(distc_pg *pg, int rank, int size, void *arg) {
    (void)arg;
    /* Two colors by parity, ordered by descending parent rank; rank 1 opts out. */
    int color = rank == 1 ? DISTC_SPLIT_NOCOLOR : rank % 2;
    distc_pg *g = NULL;
    RK_OK(distc_pg_split(&g, pg, color, -rank, NULL));
    if (color < 0) {
        RK_CHECK(g == NULL);
        return;
    }
    if (!RK_CHECK(g != NULL)) return;
    int32_t gr = -1, gs = -1;
    RK_OK(distc_pg_rank(&gr, g));
    RK_OK(distc_pg_size(&gs, g));
    int members = 0, before = 0;
    for (int r = 0; r < size; ++r) {
        int c = r == 1 ? -1 : r % 2;
        if (c == color) {
            ++members;
            if (r > rank) ++before; /* keys are -rank: higher ranks first */
        }
    }
    RK_EQ_INT(gs, members);
    RK_EQ_INT(gr, before);
    int64_t expect = 0;
    for (int r = 0; r < size; ++r)
        if (r != 1 && r % 2 == color) expect += r;
    RK_EQ_INT(group_sum(g, rank), expect);
    distc_pg_free(g);
}

/* Subgroups the caller gives one name: every color of a split, and
 * new_group on disjoint rank sets. Each must still meet only its own ranks
 * (the name once was their key space too, and the colors' ranks paired up
 * by arrival), and keep the name it was given. */
static void named_split_body(distc_pg *pg, int rank, int size, void *arg) {
    (void)arg;
    distc_pg_options o;
    RK_OK(distc_pg_options_init(&o, DISTC_PG_OPTIONS_VERSION));
    o.group_name = "named";
    for (int round = 0; round < 8; ++round) {
        /* Uneven colors too: rank 0 alone, the rest together. */
        int color = round % 2 ? rank % 2 : rank > 0;
        distc_pg *g = NULL;
        RK_OK(distc_pg_split(&g, pg, color, 0, &o));
        if (!RK_CHECK(g != NULL)) return;
        const char *name = NULL;
        RK_OK(distc_pg_name(&name, g));
        RK_CHECKF(name && strcmp(name, "named") == 0, "split's name %s", name ? name : "(null)");
        int64_t expect = 0;
        for (int r = 0; r < size; ++r)
            if ((round % 2 ? r % 2 : r > 0) == color) expect += r;
        RK_EQ_INT(group_sum(g, rank), expect);
        distc_pg_free(g);
    }
    /* Two subgroups of one name, one after the other, of disjoint ranks. */
    int32_t low[2] = {0, 1}, high[2] = {2, 3};
    distc_pg *a = NULL, *b = NULL;
    RK_OK(distc_pg_new_subgroup(&a, pg, low, 2, &o));
    RK_OK(distc_pg_new_subgroup(&b, pg, high, (size_t)(size - 2), &o));
    distc_pg *mine = rank < 2 ? a : b;
    if (RK_CHECK(mine != NULL)) RK_EQ_INT(group_sum(mine, rank), rank < 2 ? 1 : (size == 4 ? 5 : 2));
    distc_pg_free(a);
    distc_pg_free(b);
}

static void test_named_subgroups(void **state) {
    (void)state;
    for (int size = 3; size <= 4; ++size) dt_run_ranks(size, named_split_body, NULL);
}

/* Bad arguments of the group-level calls: an error, and the parent still works. */
static void group_args_body(distc_pg *pg, int rank, int size, void *arg) {
    (void)arg;
    distc_pg *g = NULL;
    RK_ERR(distc_pg_split(&g, pg, -5, 0, NULL), DISTC_EINVAL, "color is -5");
    RK_ERR(distc_pg_split(NULL, pg, 0, 0, NULL), DISTC_EINVAL, "out");
    RK_ERR(distc_pg_split(&g, NULL, 0, 0, NULL), DISTC_EINVAL, "pg");
    RK_ERR(distc_monitored_barrier(pg, -5, 1), DISTC_EINVAL, "timeout_ms");
    RK_ERR(distc_monitored_barrier(NULL, 100, 1), DISTC_EINVAL, "pg");
    RK_ERR(distc_pg_group_rank(NULL, pg, 0), DISTC_EINVAL, "out");
    int32_t r;
    RK_ERR(distc_pg_global_rank(&r, NULL, 0), DISTC_EINVAL, "pg");
    distc_buf b = {0};
    RK_ERR(distc_gather_bytes(&b, pg, "x", 1, size, NULL), DISTC_EINVAL, "root");
    if (rank == 0) {
        /* Checked on the root before anything is sent. */
        RK_ERR(distc_scatter_bytes(&b, pg, NULL, NULL, 0, NULL), DISTC_EINVAL, "data or lens is NULL");
    }
    RK_ERR(distc_broadcast_bytes(NULL, pg, "x", 1, 0, NULL), DISTC_EINVAL, "out");
    RK_EQ_INT(group_sum(pg, rank), size * (size - 1) / 2);
}

static void test_group_call_args(void **state) {
    (void)state;
    dt_run_ranks(2, group_args_body, NULL);
}

/* A completion callback may free the group it runs on (its last handle). */
struct freeing_cb {
    distc_pg *pg;
    volatile int done;
};

static void free_group_cb(distc_work *w, void *payload) {
    (void)w;
    struct freeing_cb *f = payload;
    distc_pg_free(f->pg);
    __atomic_store_n(&f->done, 1, __ATOMIC_SEQ_CST);
}

static void free_in_callback_body(distc_pg *pg, int rank, int size, void *arg) {
    (void)pg;
    (void)arg;
    distc_pg_options o = DISTC_PG_OPTIONS_INIT;
    char name[96];
    snprintf(name, sizeof name, "%s-cb", dt_rank_group());
    o.group_name = name;
    o.timeout_ms = 10000;
    struct freeing_cb f = {NULL, 0};
    if (!RK_OK(distc_pg_new(&f.pg, dt_rank_store(), rank, size, &o))) return;
    DLTensor *t = dt_tensor_1d(DT_F32, 3);
    dt_set(t, 0, 1);
    distc_work *w = NULL;
    if (RK_OK(distc_allreduce(&w, f.pg, t, DISTC_SUM, NULL))) {
        RK_OK(distc_work_on_complete(w, free_group_cb, &f));
        RK_OK(distc_work_wait(w, -1));
        while (!__atomic_load_n(&f.done, __ATOMIC_SEQ_CST)) usleep(1000);
        RK_EQ_DBL(dt_get(t, 0), size);
        distc_work_free(w);
    }
    dt_tensor_free(t);
}

static void test_free_group_in_callback(void **state) {
    (void)state;
    dt_run_ranks(2, free_in_callback_body, NULL);
}

/* A completion callback runs on the group's thread, before the group's next
 * collective: a blocking collective there, or a wait for an asynchronous
 * one, would wait for the callback itself. Both are refused at once. */
struct blocking_cb {
    distc_pg *pg;
    DLTensor *t;    /* what the callback's asynchronous allreduce reduces, after it */
    distc_work *w2; /* that allreduce */
    pthread_t caller;
    int inline_; /* the work was done before its callback was set: it ran on the caller's thread */
    int blocking_rc, wait_rc;
    char blocking_msg[512], wait_msg[512];
    volatile int done;
};

static void blocking_cb(distc_work *w, void *payload) {
    (void)w;
    struct blocking_cb *b = payload;
    /* On the caller's own thread nothing waits for the callback, and a
     * blocking call would be allowed: only the asynchronous one, so that
     * both ranks issue the same collectives. */
    b->inline_ = pthread_equal(pthread_self(), b->caller);
    if (!b->inline_) {
        b->blocking_rc = distc_allreduce(NULL, b->pg, b->t, DISTC_SUM, NULL);
        snprintf(b->blocking_msg, sizeof b->blocking_msg, "%s", distc_error_last());
    }
    b->wait_rc = distc_allreduce(&b->w2, b->pg, b->t, DISTC_SUM, NULL);
    if (b->wait_rc == 0 && !b->inline_) b->wait_rc = distc_work_wait(b->w2, -1);
    snprintf(b->wait_msg, sizeof b->wait_msg, "%s", distc_error_last());
    __atomic_store_n(&b->done, 1, __ATOMIC_SEQ_CST);
}

static void blocking_in_callback_body(distc_pg *pg, int rank, int size, void *arg) {
    (void)arg, (void)rank;
    DLTensor *t = dt_tensor_1d(DT_F32, 3);
    int on_group_thread = 0;
    /* A few rounds: a collective may complete before its callback is set
     * (then the callback runs at once, on this thread); every rank runs as
     * many, and must see its callback on the group's thread at least once. */
    for (int round = 0; round < 5; ++round) {
        struct blocking_cb b = {pg, dt_tensor_1d(DT_F32, 1), NULL, pthread_self(), 0, 0, 0, "", "", 0};
        dt_set(b.t, 0, 1);
        distc_work *w = NULL;
        if (RK_OK(distc_allreduce(&w, pg, t, DISTC_SUM, NULL))) {
            RK_OK(distc_work_on_complete(w, blocking_cb, &b));
            RK_OK(distc_work_wait(w, -1));
            while (!__atomic_load_n(&b.done, __ATOMIC_SEQ_CST)) usleep(1000);
            if (!b.inline_) {
                ++on_group_thread;
                RK_EQ_INT(b.blocking_rc, DISTC_ESTATE);
                RK_CHECKF(strstr(b.blocking_msg, "completion callback"), "blocking: %s", b.blocking_msg);
                RK_EQ_INT(b.wait_rc, DISTC_ESTATE);
                RK_CHECKF(strstr(b.wait_msg, "cannot be waited for from a completion callback"), "wait: %s",
                          b.wait_msg);
            }
            /* The asynchronous one the callback issued runs once it returned, on
             * every rank: waited for here, and the ranks still agree on what comes next. */
            if (RK_CHECK(b.w2 != NULL)) {
                RK_OK(distc_work_wait(b.w2, -1));
                RK_EQ_DBL(dt_get(b.t, 0), size);
            }
            distc_work_free(b.w2);
            distc_work_free(w);
        }
        dt_tensor_free(b.t);
    }
    RK_CHECKF(on_group_thread > 0, "no callback of 5 ran on the group's thread");
    dt_tensor_free(t);
    RK_EQ_INT(group_sum(pg, 1), size);
}

static void test_blocking_in_callback(void **state) {
    (void)state;
    dt_run_ranks(2, blocking_in_callback_body, NULL);
}

static void test_split(void **state) {
    (void)state;
    for (int size = 2; size <= 4; ++size) dt_run_ranks(size, split_body, NULL);
}

static void monitored_body(distc_pg *pg, int rank, int size, void *arg) {
    int absent = *(int *)arg;
    /* Everyone arrives. */
    RK_OK(distc_monitored_barrier(pg, 5000, 1));
    if (rank == absent) {
        usleep(1500 * 1000); /* sits out the next one */
        return;
    }
    int64_t t0 = dt_now_ms();
    char needle[32];
    snprintf(needle, sizeof needle, "rank %d did not", absent);
    RK_ERR(distc_monitored_barrier(pg, 500, 1), DISTC_ETIMEOUT, needle);
    RK_CHECKF(dt_now_ms() - t0 < 4000, "rank %d waited %lld ms", rank, (long long)(dt_now_ms() - t0));
    (void)size;
}

static void test_monitored_barrier(void **state) {
    (void)state;
    int absent = 2;
    dt_run_ranks(3, monitored_body, &absent);
}

static void bytes_body(distc_pg *pg, int rank, int size, void *arg) {
    (void)arg;
    char mine[64];
    int len = snprintf(mine, sizeof mine, "rank %d says %.*s", rank, rank * 3, "xxxxxxxxxxxxxxxxxx");
    distc_buf all[4];
    RK_OK(distc_all_gather_bytes(all, pg, mine, (size_t)len, NULL));
    for (int r = 0; r < size; ++r) {
        char expect[64];
        int el = snprintf(expect, sizeof expect, "rank %d says %.*s", r, r * 3, "xxxxxxxxxxxxxxxxxx");
        RK_CHECKF(all[r].size == (size_t)el && memcmp(all[r].data, expect, (size_t)el) == 0, "all_gather_bytes[%d]", r);
        distc_buf_dispose(&all[r]);
    }
    for (int root = 0; root < size; ++root) {
        distc_buf got[4];
        RK_OK(distc_gather_bytes(rank == root ? got : NULL, pg, mine, (size_t)len, root, NULL));
        if (rank == root)
            for (int r = 0; r < size; ++r) {
                RK_CHECK(got[r].size > 0 && got[r].data[5] == (uint8_t)('0' + r));
                distc_buf_dispose(&got[r]);
            }
        distc_buf b = {0};
        RK_OK(distc_broadcast_bytes(&b, pg, rank == root ? mine : NULL, rank == root ? (size_t)len : 0, root, NULL));
        RK_CHECKF(b.size > 5 && b.data[5] == (uint8_t)('0' + root), "broadcast_bytes from %d", root);
        distc_buf_dispose(&b);
        const void *parts[4];
        size_t lens[4];
        char text[4][16];
        for (int r = 0; r < size; ++r) {
            lens[r] = (size_t)snprintf(text[r], sizeof text[r], "to %d%.*s", r, r, "!!!!");
            parts[r] = text[r];
        }
        RK_OK(distc_scatter_bytes(&b, pg, rank == root ? parts : NULL, rank == root ? lens : NULL, root, NULL));
        RK_CHECKF(b.size == (size_t)(4 + rank) && b.data[3] == (uint8_t)('0' + rank), "scatter_bytes to %d", rank);
        distc_buf_dispose(&b);
    }
    /* Empty values are fine. */
    RK_OK(distc_all_gather_bytes(all, pg, NULL, 0, NULL));
    for (int r = 0; r < size; ++r) {
        RK_EQ_INT((int)all[r].size, 0);
        distc_buf_dispose(&all[r]);
    }
    RK_ERR(distc_all_gather_bytes(NULL, pg, mine, 1, NULL), DISTC_EINVAL, "out");
    RK_ERR(distc_broadcast_bytes(&all[0], pg, mine, 1, size, NULL), DISTC_EINVAL, "root");
}

static void test_bytes_collectives(void **state) {
    (void)state;
    for (int size = 1; size <= 4; ++size) dt_run_ranks(size, bytes_body, NULL);
}

static void batch_body(distc_pg *pg, int rank, int size, void *arg) {
    (void)arg;
    /* Everyone sends to both neighbours and receives from both, in one batch:
     * issued one by one with blocking calls, this would deadlock. */
    int next = (rank + 1) % size, prev = (rank + size - 1) % size;
    DLTensor *s = dt_tensor_1d(DT_F32, 3), *r1 = dt_tensor_1d(DT_F32, 3), *r2 = dt_tensor_1d(DT_F32, 3);
    for (int i = 0; i < 3; ++i) dt_set(s, i, rank * 10 + i);
    distc_p2p_op ops[4] = {{DISTC_P2P_RECV, r1, prev, 5},
                           {DISTC_P2P_RECV, r2, next, 6},
                           {DISTC_P2P_SEND, s, next, 5},
                           {DISTC_P2P_SEND, s, prev, 6}};
    distc_work *w = NULL;
    RK_OK(distc_batch_isend_irecv(&w, pg, ops, 4, NULL));
    RK_OK(distc_work_wait(w, -1));
    distc_work_free(w);
    RK_EQ_DBL(dt_get(r1, 2), prev * 10 + 2);
    RK_EQ_DBL(dt_get(r2, 0), next * 10);
    distc_p2p_op bad = {DISTC_P2P_SEND, s, rank, 0};
    RK_ERR(distc_batch_isend_irecv(NULL, pg, &bad, 1, NULL), DISTC_EINVAL, "ops[0].peer is this rank");
    bad.peer = next;
    bad.kind = 7;
    RK_ERR(distc_batch_isend_irecv(NULL, pg, &bad, 1, NULL), DISTC_EINVAL, "ops[0].kind");
    bad.kind = DISTC_P2P_SEND;
    bad.tag = -1;
    RK_ERR(distc_batch_isend_irecv(NULL, pg, &bad, 1, NULL), DISTC_EINVAL, "ops[0].tag");
    RK_ERR(distc_batch_isend_irecv(NULL, pg, ops, 0, NULL), DISTC_EINVAL, "n is 0");
    dt_tensor_free(s);
    dt_tensor_free(r1);
    dt_tensor_free(r2);
}

static void test_batch_isend_irecv(void **state) {
    (void)state;
    for (int size = 2; size <= 4; ++size) dt_run_ranks(size, batch_body, NULL);
}

/* Debug mode: ranks calling different collectives all get DISTC_EINVAL
 * naming who calls what, on every backend (an engine's through the check
 * of call_check.hpp, before the engine sees the call). */
static void debug_body(distc_pg *pg, int rank, int size, void *arg) {
    (void)pg;
    distc_pg_options o = DISTC_PG_OPTIONS_INIT;
    char name[96];
    snprintf(name, sizeof name, "%s-debug", dt_rank_group());
    o.group_name = name;
    o.backend = dt_backend();
    o.debug = arg ? -1 : 1; /* arg: from the environment */
    o.timeout_ms = 10000;
    distc_pg *g = NULL;
    if (!RK_OK(distc_pg_new(&g, dt_rank_store(), rank, size, &o))) return;
    DLTensor *t = dt_tensor_1d(DT_F32, rank == 1 ? 5 : 4);
    /* Agreeing calls pass the check. */
    DLTensor *u = dt_tensor_1d(DT_F32, 4);
    RK_OK(distc_allreduce(NULL, g, u, DISTC_SUM, NULL));
    /* Rank 1 passes 5 elements, the others 4: everyone learns of it instead of hanging. */
    RK_ERR2(distc_allreduce(NULL, g, t, DISTC_SUM, NULL), DISTC_EINVAL, "rank 1 call allreduce(float32, 5 elements",
            "call allreduce(float32, 4 elements");
    /* Different operations. */
    if (rank == 0)
        RK_ERR(distc_broadcast(NULL, g, u, 0, NULL), DISTC_EINVAL, "ranks disagree");
    else
        RK_ERR(distc_allreduce(NULL, g, u, DISTC_MAX, NULL), DISTC_EINVAL,
               "rank 0 call broadcast(float32, 4 elements, root 0)");
    /* Asynchronous: the same verdict, from the call or from its work. */
    distc_work *w = NULL;
    DLTensor *v = dt_tensor_1d(DT_F32, rank == size - 1 ? 6 : 4);
    int rc = distc_allreduce(&w, g, v, DISTC_SUM, NULL);
    if (rc == 0) rc = distc_work_wait(w, -1);
    RK_CHECKF(rc == DISTC_EINVAL && strstr(distc_error_last(), "ranks disagree"), "async: %d (%s)", rc,
              distc_error_last());
    distc_work_free(w);
    dt_tensor_free(v);
    /* An uneven all-to-all whose split sizes disagree between ranks 0 and 1. */
    int64_t *in_splits = calloc((size_t)size, sizeof *in_splits),
            *out_splits = calloc((size_t)size, sizeof *out_splits);
    for (int p = 0; p < size; ++p) in_splits[p] = out_splits[p] = 1;
    if (rank == 1) out_splits[0] = 3;
    DLTensor *ai = dt_tensor_1d(DT_I32, size), *ao = dt_tensor_1d(DT_I32, size + (rank == 1 ? 2 : 0));
    /* On gloo the transport catches it (or DISTC_EREMOTE where a peer failed
     * and closed its links first); elsewhere the check, before the engine. */
    const int engine = strcmp(dt_backend(), "gloo") != 0;
    rc = distc_alltoall_single(NULL, g, ao, ai, out_splits, in_splits, NULL);
    RK_CHECKF(
        (rc == DISTC_EINVAL && strstr(distc_error_last(), "split sizes disagree")) || (!engine && rc == DISTC_EREMOTE),
        "alltoall: %d (%s)", rc, distc_error_last());
    dt_tensor_free(ai);
    dt_tensor_free(ao);
    free(in_splits);
    free(out_splits);
    distc_pg_free(g);
    /* And a group goes on after a mismatch. */
    g = NULL;
    snprintf(name, sizeof name, "%s-debug2", dt_rank_group());
    if (RK_OK(distc_pg_new(&g, dt_rank_store(), rank, size, &o))) {
        RK_ERR(distc_allreduce(NULL, g, t, DISTC_SUM, NULL), DISTC_EINVAL, "ranks disagree");
        RK_OK(distc_allreduce(NULL, g, u, DISTC_SUM, NULL));
        RK_OK(distc_barrier(NULL, g, NULL));
        distc_pg_free(g);
    }
    dt_tensor_free(t);
    dt_tensor_free(u);
}

static void test_debug_mode(void **state) {
    (void)state;
    for (int size = 2; size <= 4; ++size) dt_run_ranks(size, debug_body, NULL);
    /* torch's variable turns it on too, when DISTC_DEBUG is unset. */
    const char *had = getenv("DISTC_DEBUG");
    if (!had) {
        setenv("TORCH_DISTRIBUTED_DEBUG", "DETAIL", 1);
        dt_run_ranks(3, debug_body, "env");
        unsetenv("TORCH_DISTRIBUTED_DEBUG");
    }
}

/* ------------------------------------------- what freed groups leave behind */

static void keys_rank(distc_store *store, int rank, int size, void *arg) {
    (void)arg;
    distc_pg_options o = DISTC_PG_OPTIONS_INIT;
    o.group_name = "left_behind";
    distc_pg *pg = NULL;
    if (RK_OK(distc_pg_new(&pg, store, rank, size, &o))) {
        RK_OK(distc_barrier(NULL, pg, NULL));
        distc_pg_free(pg);
    }
}

/* Groups created and freed again and again leave one key per rank: its count of attempts at the name. */
static void test_freed_groups_leave_no_keys(void **state) {
    (void)state;
    if (strcmp(dt_backend(), "gloo") != 0) skip();
    for (int size = 2; size <= 3; ++size) {
        distc_store *st = NULL;
        ASSERT_OK(distc_store_new_hash(&st));
        for (int round = 0; round < 3; ++round) {
            assert_int_equal(dt_run_threads(st, size, keys_rank, NULL), 0);
            int64_t n = -1;
            ASSERT_OK(distc_store_num_keys(&n, st));
            if (n != size)
                fail_msg("%d groups of %d ranks left %lld keys, expected %d", round + 1, size, (long long)n, size);
        }
        distc_store_free(st);
    }
}

/* ------------------------------------------- a named interface that is not there */

static void missing_interface_rank(distc_store *store, int rank, int size, void *arg) {
    (void)arg;
    distc_pg_options o = DISTC_PG_OPTIONS_INIT;
    o.group_name = "no_such_interface";
    o.timeout_ms = 10000;
    distc_pg *pg = NULL;
    RK_ERR2(distc_pg_new(&pg, store, rank, size, &o), DISTC_EINVAL, "DISTC_IFNAME=no-such-if0", "names no interface");
}

/* DISTC_IFNAME naming an interface this host lacks fails group creation
 * with that name, instead of quietly taking another address. */
static void test_missing_interface_is_an_error(void **state) {
    (void)state;
    if (strcmp(dt_backend(), "gloo") != 0) skip();
    setenv("DISTC_IFNAME", "no-such-if0", 1);
    distc_store *st = NULL;
    ASSERT_OK(distc_store_new_hash(&st));
    int failures = dt_run_threads(st, 2, missing_interface_rank, NULL);
    unsetenv("DISTC_IFNAME");
    distc_store_free(st);
    assert_int_equal(failures, 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_subgroups),
        cmocka_unit_test(test_split),
        cmocka_unit_test(test_named_subgroups),
        cmocka_unit_test(test_monitored_barrier),
        cmocka_unit_test(test_bytes_collectives),
        cmocka_unit_test(test_batch_isend_irecv),
        cmocka_unit_test(test_debug_mode),
        cmocka_unit_test(test_group_call_args),
        cmocka_unit_test(test_free_group_in_callback),
        cmocka_unit_test(test_blocking_in_callback),
        cmocka_unit_test(test_freed_groups_leave_no_keys),
        cmocka_unit_test(test_missing_interface_is_an_error),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

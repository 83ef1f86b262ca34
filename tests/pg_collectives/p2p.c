/* test_pg_collectives' point-to-point: a send/receive ring, tags out of
 * order, irecv before isend, receives from any source. */
#define _GNU_SOURCE
#include <stdio.h>

#include "expect.h"
#include "tests.h"

/* ---------------------------------------------------------- point-to-point */

static void rank_send_recv_ring(distc_pg *pg, int rank, int size, void *arg) {
    (void)arg;
    if (size < 2) return;
    const int next = (rank + 1) % size, prev = (rank + size - 1) % size;
    for (size_t d = 0; d < dt_num_dtypes; ++d) {
        DLDataType dt = dt_all_dtypes[d];
        char what[96];
        snprintf(what, sizeof what, "ring %s size %d", dt_dtype_name(dt), size);
        const int64_t n = 5 + (int64_t)d % 4;
        DLTensor *s = dt_tensor_1d(dt, n), *r = dt_tensor_1d(dt, n);
        fill_uniq(s, rank, next);

        /* An asynchronous send, a blocking receive. */
        distc_work *w = NULL;
        if (RK_OK(distc_send(&w, pg, s, next, (int32_t)(100 + d), NULL))) {
            if (RK_OK(distc_recv(NULL, pg, r, prev, (int32_t)(100 + d), NULL))) CHECK_UNIQ(what, r, prev, rank);
            RK_OK(distc_work_wait(w, -1));
            distc_work_free(w);
        }

        /* Both blocking: even ranks send first, odd ranks receive first. */
        fill_uniq(r, 3, 3);
        if (rank % 2 == 0) {
            RK_OK(distc_send(NULL, pg, s, next, 7, NULL));
            if (RK_OK(distc_recv(NULL, pg, r, prev, 7, NULL))) CHECK_UNIQ(what, r, prev, rank);
        } else {
            if (RK_OK(distc_recv(NULL, pg, r, prev, 7, NULL))) CHECK_UNIQ(what, r, prev, rank);
            RK_OK(distc_send(NULL, pg, s, next, 7, NULL));
        }
        CHECK_UNIQ(what, s, rank, next); /* the sent tensor is left alone */
        dt_tensor_free(s);
        dt_tensor_free(r);
    }

    /* Point-to-point does not disturb collectives around it. */
    check_group_works(pg, rank, size);
}

void test_send_recv_ring(void **state) {
    (void)state;
    for_sizes(rank_send_recv_ring, NULL);
}

/*
 * Asynchronous point-to-point is posted, not serialized: torch's isend/irecv
 * hand the buffer to gloo at once and only wait() blocks. A short per-op
 * timeout keeps a failure quick; the group is not used afterwards.
 */
static void rank_p2p_tags_out_of_order(distc_pg *pg, int rank, int size, void *arg) {
    (void)arg;
    if (size < 2) return;
    const int next = (rank + 1) % size, prev = (rank + size - 1) % size;
    distc_op_options oo = DISTC_OP_OPTIONS_INIT;
    oo.timeout_ms = 3000;
    /* Two sends (tags 1 and 2) received in the other order. */
    DLTensor *a = dt_tensor_1d(DT_I32, 6), *b = dt_tensor_1d(DT_I32, 6);
    DLTensor *ra = dt_tensor_1d(DT_I32, 6), *rb = dt_tensor_1d(DT_I32, 6);
    fill_uniq(a, rank, 0);
    fill_uniq(b, rank, 1);
    distc_work *wa = NULL, *wb = NULL;
    RK_OK(distc_send(&wa, pg, a, next, 1, &oo));
    RK_OK(distc_send(&wb, pg, b, next, 2, &oo));
    /* Both isends are posted at once (as torch does), so receiving tag 2 first works. */
    if (RK_OK(distc_recv(NULL, pg, rb, prev, 2, &oo))) CHECK_UNIQ("tag 2", rb, prev, 1);
    if (RK_OK(distc_recv(NULL, pg, ra, prev, 1, &oo))) CHECK_UNIQ("tag 1", ra, prev, 0);
    if (wa) RK_OK(distc_work_wait(wa, -1));
    if (wb) RK_OK(distc_work_wait(wb, -1));
    distc_work_free(wa);
    distc_work_free(wb);
    dt_tensor_free(a);
    dt_tensor_free(b);
    dt_tensor_free(ra);
    dt_tensor_free(rb);
}

void test_p2p_tags_out_of_order(void **state) {
    (void)state;
    dt_run_ranks(2, rank_p2p_tags_out_of_order, NULL);
}

/* irecv from prev, then isend to next, then wait both: the usual ring exchange in torch. */
static void rank_p2p_irecv_then_isend(distc_pg *pg, int rank, int size, void *arg) {
    (void)arg;
    if (size < 2) return;
    const int next = (rank + 1) % size, prev = (rank + size - 1) % size;
    distc_op_options oo = DISTC_OP_OPTIONS_INIT;
    oo.timeout_ms = 3000;
    DLTensor *s = dt_tensor_1d(DT_F32, 6), *r = dt_tensor_1d(DT_F32, 6);
    fill_uniq(s, rank, next);
    distc_work *wr = NULL, *ws = NULL;
    RK_OK(distc_recv(&wr, pg, r, prev, 4, &oo));
    RK_OK(distc_send(&ws, pg, s, next, 4, &oo));
    /* irecv then isend on every rank: both are posted at once, so this completes. */
    if (wr && RK_OK(distc_work_wait(wr, -1))) CHECK_UNIQ("irecv then isend", r, prev, rank);
    if (ws) RK_OK(distc_work_wait(ws, -1));
    distc_work_free(wr);
    distc_work_free(ws);
    dt_tensor_free(s);
    dt_tensor_free(r);
}

void test_p2p_irecv_then_isend(void **state) {
    (void)state;
    dt_run_ranks(2, rank_p2p_irecv_then_isend, NULL);
    dt_run_ranks(3, rank_p2p_irecv_then_isend, NULL);
}

/* Rank 0 receives from DISTC_ANY_SOURCE; the work handle names each sender. */
static void rank_recv_any_source(distc_pg *pg, int rank, int size, void *arg) {
    (void)arg;
    if (size < 2) return;
    for (int round = 0; round < 2; ++round) {
        DLDataType dt = round == 0 ? DT_F32 : DT_I64;
        if (rank == 0) {
            int seen[MAX_SIZE] = {0};
            for (int k = 1; k < size; ++k) {
                DLTensor *t = dt_tensor_1d(dt, 5);
                distc_work *w = NULL;
                if (RK_OK(distc_recv(&w, pg, t, DISTC_ANY_SOURCE, 7 + round, NULL))) {
                    int32_t src = -9;
                    if (RK_OK(distc_work_wait(w, -1)) && RK_OK(distc_work_source_rank(&src, w))) {
                        if (RK_CHECKF(src >= 1 && src < size, "source rank %d", src)) {
                            RK_CHECKF(!seen[src], "rank %d seen twice", src);
                            seen[src] = 1;
                            CHECK_UNIQ("recv from any source", t, src, 0);
                        }
                    }
                    distc_work_free(w);
                }
                dt_tensor_free(t);
            }
        } else {
            DLTensor *t = dt_tensor_1d(dt, 5);
            fill_uniq(t, rank, 0);
            RK_OK(distc_send(NULL, pg, t, 0, 7 + round, NULL));
            dt_tensor_free(t);
        }
    }
    check_group_works(pg, rank, size);
}

void test_recv_any_source(void **state) {
    (void)state;
    for_sizes(rank_recv_any_source, NULL);
}

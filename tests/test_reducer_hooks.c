/*
 * Bucket hooks (distc_reducer_register_bucket_hook): what a hook sees of each
 * bucket (index, last, buffer, gradients, offsets, shaped views), and a hook
 * that chains collectives with continuations (allreduce, then an allgather,
 * then a division) whose result the reducer writes back. Threads as ranks.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pg_harness.h"
#include "test_util.h"

#define NG 5
static const int64_t rows[NG] = {4, 30, 1, 17, 6}, cols[NG] = {3, 10, 5, 1, 8};

static double gval(int rank, int it, int i, int64_t j) { return (double)((rank * 5 + it * 3 + i + (int)(j % 7)) % 16); }

/* What every rank's hook checks and counts, per rank. */
struct hooks {
    distc_pg *pg;
    int rank, size, it, calls, bad;
    size_t nb, next_index;
    int32_t bucket_of[NG];
    DLTensor *g[NG];
    int64_t gathered; /* over the last iteration's buckets: the allgathered element counts */
};

/* One bucket's chain: its buffer (copied: the hook's DLTensor is valid only during the call) and scratch. */
struct chain {
    struct hooks *h;
    DLTensor buf;
    int64_t numel;
    DLTensor *count, *counts;
};

static void check_bucket(struct hooks *h, const distc_reducer_bucket *b) {
    int bad = 0;
    bad += b->index != h->next_index;
    bad += (b->is_last != 0) != (b->index + 1 == h->nb);
    bad += b->buffer == NULL || b->buffer->ndim != 1 || b->num_grads == 0;
    size_t expect_offset = 0;
    for (size_t k = 0; k < b->num_grads && !bad; ++k) {
        int32_t i = b->grads[k];
        bad += i < 0 || i >= NG || h->bucket_of[i] != (int32_t)b->index;
        if (bad) break;
        bad += b->offsets[k] != expect_offset;
        const DLTensor *v = &b->views[k];
        bad += v->ndim != 2 || v->shape[0] != rows[i] || v->shape[1] != cols[i];
        bad += v->data != b->buffer->data || v->byte_offset != b->offsets[k] * 8;
        /* The view holds this rank's gradient as marked ready. */
        const double *d = (const double *)((const char *)v->data + v->byte_offset);
        for (int64_t j = 0; j < rows[i] * cols[i]; ++j) bad += d[j] != gval(h->rank, h->it, i, j);
        expect_offset += (size_t)(rows[i] * cols[i]);
    }
    bad += b->buffer->shape[0] != (int64_t)expect_offset;
    RK_CHECKF(!bad, "iteration %d: bucket %zu (is_last %d, %zu gradients) is not as expected (next index %zu)", h->it,
              b->index, b->is_last, b->num_grads, h->next_index);
    h->bad += bad;
    h->next_index = b->index + 1;
}

static int gather_counts(distc_work **next, distc_work *done, void *payload) {
    struct chain *c = payload;
    int st = distc_work_test(done);
    if (st < 0) return st;
    dt_set(c->count, 0, (double)c->numel);
    return distc_allgather_into_tensor(next, c->h->pg, c->counts, c->count, NULL);
}

static int divide_and_free(distc_work **next, distc_work *done, void *payload) {
    (void)next;
    struct chain *c = payload;
    int st = distc_work_test(done);
    if (st == 0) {
        double *d = c->buf.data;
        for (int64_t j = 0; j < c->numel; ++j) d[j] /= c->h->size;
        int64_t s = 0;
        for (int r = 0; r < c->h->size; ++r) s += (int64_t)dt_get(c->counts, r);
        /* Every rank's bucket has the same size; continuations of several buckets may run at once. */
        __atomic_fetch_add(&c->h->gathered, s / c->h->size, __ATOMIC_SEQ_CST);
    }
    dt_tensor_free(c->count);
    dt_tensor_free(c->counts);
    free(c);
    return st < 0 ? st : 0; /* the payload is freed also when the chain failed */
}

static int chain_hook(distc_work **out, distc_pg *pg, const distc_reducer_bucket *bucket, void *payload) {
    struct hooks *h = payload;
    ++h->calls;
    check_bucket(h, bucket);
    struct chain *c = calloc(1, sizeof *c);
    c->h = h;
    c->buf = *bucket->buffer;
    c->numel = bucket->buffer->shape[0];
    c->buf.shape = &c->numel;
    c->count = dt_tensor_1d(DT_F64, 1);
    c->counts = dt_tensor_1d(DT_F64, h->size);
    distc_work *ar = NULL, *g = NULL;
    int rc = distc_allreduce(&ar, pg, &c->buf, DISTC_SUM, NULL);
    if (rc == 0) rc = distc_work_then(&g, ar, gather_counts, c);
    if (rc == 0) rc = distc_work_then(out, g, divide_and_free, c);
    distc_work_free(ar);
    distc_work_free(g);
    return rc;
}

static int refusing_hook(distc_work **out, distc_pg *pg, const distc_reducer_bucket *bucket, void *payload) {
    (void)out, (void)pg, (void)bucket, (void)payload;
    return distc_error_set(DISTC_EBACKEND, "no codec for this bucket (test)");
}

/* A hook's future that the program completes, with an error: finalize returns it. */
static int failing_future_hook(distc_work **out, distc_pg *pg, const distc_reducer_bucket *bucket, void *payload) {
    (void)pg, (void)bucket, (void)payload;
    int rc = distc_work_new(out);
    if (rc == 0) rc = distc_work_complete(*out, DISTC_EREMOTE, "the compressor's peer went away (test)");
    return rc;
}

static void count_release(void *payload) { __atomic_add_fetch((int *)payload, 1, __ATOMIC_SEQ_CST); }

static void run_iteration(distc_reducer *r, struct hooks *h) {
    h->next_index = 0;
    h->gathered = 0;
    RK_OK(distc_reducer_prepare_for_backward(r, NULL, 0));
    /* Buckets made by size are rebuilt in the second iteration's prepare, in arrival order. */
    RK_OK(distc_reducer_num_buckets(&h->nb, r));
    for (int i = 0; i < NG; ++i) RK_OK(distc_reducer_bucket_of(&h->bucket_of[i], r, i));
    for (int i = NG - 1; i >= 0; --i) {
        for (int64_t j = 0; j < rows[i] * cols[i]; ++j) dt_set(h->g[i], j, gval(h->rank, h->it, i, j));
        RK_OK(distc_reducer_mark_ready(r, i));
    }
}

static void rank_bucket_hook(distc_pg *pg, int rank, int size, void *arg) {
    int views = *(int *)arg;
    struct hooks h = {pg, rank, size, 0, 0, 0, 0, 0, {0}, {NULL}, 0};
    (void)h.bad;
    for (int i = 0; i < NG; ++i) h.g[i] = dt_tensor_2d(DT_F64, rows[i], cols[i]);
    distc_reducer_options o = DISTC_REDUCER_OPTIONS_INIT;
    o.first_bucket_bytes = o.bucket_cap_bytes = 400; /* several buckets, some with several gradients */
    o.gradient_as_bucket_view = views;
    distc_reducer *r = NULL;
    if (!RK_OK(distc_reducer_new(&r, pg, h.g, NG, &o))) return;
    RK_OK(distc_reducer_register_bucket_hook(r, chain_hook, &h, NULL));
    void *own[NG];
    for (int i = 0; i < NG; ++i) {
        own[i] = h.g[i]->data;
        if (views) RK_OK(distc_reducer_grad_view(&h.g[i]->data, r, i)); /* the gradients are the buckets' memory */
    }
    for (h.it = 0; h.it < 3; ++h.it) {
        run_iteration(r, &h);
        RK_ERR(distc_reducer_register_bucket_hook(r, NULL, NULL, NULL), DISTC_ESTATE, "during");
        RK_OK(distc_reducer_finalize(r));
        RK_EQ_INT(h.next_index, h.nb);
        int64_t total = 0;
        for (int i = 0; i < NG; ++i) total += rows[i] * cols[i];
        RK_EQ_INT(__atomic_load_n(&h.gathered, __ATOMIC_SEQ_CST), total);
        int bad = 0;
        for (int i = 0; i < NG; ++i)
            for (int64_t j = 0; j < rows[i] * cols[i]; ++j) {
                double want = 0;
                for (int q = 0; q < size; ++q) want += gval(q, h.it, i, j);
                bad += dt_get(h.g[i], j) != want / size;
            }
        RK_CHECKF(bad == 0, "iteration %d: %d gradient elements are not the average", h.it, bad);
    }
    /* 2 buckets at first; without views they are rebuilt into 3 (the largest gradient comes second). */
    int want_calls = views ? 3 * 2 : 2 + 2 * 3;
    RK_EQ_INT((int)h.nb, views ? 2 : 3);
    RK_EQ_INT(h.calls, want_calls);
    /* Taking the hook away restores the default allreduce. */
    RK_OK(distc_reducer_register_bucket_hook(r, NULL, NULL, NULL));
    run_iteration(r, &h);
    RK_OK(distc_reducer_finalize(r));
    RK_EQ_INT(h.calls, want_calls);

    /* A hook that refuses, and one whose future fails: the launching call, or finalize, says so. */
    RK_OK(distc_reducer_register_bucket_hook(r, refusing_hook, NULL, NULL));
    RK_OK(distc_reducer_prepare_for_backward(r, NULL, 0));
    int rc = 0;
    for (int i = NG - 1; i >= 0 && rc == 0; --i) rc = distc_reducer_mark_ready(r, i);
    if (rc == 0) rc = distc_reducer_finalize(r);
    RK_CHECKF(rc == DISTC_EBACKEND && strstr(distc_error_last(), "bucket hook failed: no codec"),
              "a refusing hook gave %d: %s", rc, distc_error_last());
    if (rc != 0) (void)distc_reducer_finalize(r);
    RK_OK(distc_reducer_register_bucket_hook(r, failing_future_hook, NULL, NULL));
    RK_OK(distc_reducer_prepare_for_backward(r, NULL, 0));
    for (int i = NG - 1; i >= 0; --i) RK_OK(distc_reducer_mark_ready(r, i));
    RK_ERR(distc_reducer_finalize(r), DISTC_EREMOTE, "peer went away");
    /* A hook's payload is released once the hook goes: replaced, refused, or with the reducer. */
    int released = 0;
    RK_ERR(distc_reducer_register_bucket_hook(NULL, chain_hook, &released, count_release), DISTC_EINVAL, "r");
    RK_EQ_INT(released, 1);
    RK_OK(distc_reducer_register_bucket_hook(r, chain_hook, &released, count_release));
    RK_EQ_INT(released, 1);
    RK_OK(distc_reducer_register_bucket_hook(r, refusing_hook, &released, count_release));
    RK_EQ_INT(released, 2);
    distc_reducer_free(r);
    RK_EQ_INT(released, 3);
    for (int i = 0; i < NG; ++i) {
        h.g[i]->data = own[i];
        dt_tensor_free(h.g[i]);
    }
}

static void test_bucket_hook(void **state) {
    (void)state;
    int views = 0;
    for (int size = 1; size <= 4; size += 1 + (size == 2)) dt_run_ranks(size, rank_bucket_hook, &views);
    views = 1;
    dt_run_ranks(2, rank_bucket_hook, &views);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bucket_hook),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

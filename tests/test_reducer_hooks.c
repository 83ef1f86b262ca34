/*
 * Bucket hooks (distc_reducer_register_bucket_hook): what a hook sees of each
 * bucket (index, last, buffer, gradients, offsets, shaped views), and a hook
 * that chains collectives with continuations (allreduce, then an allgather,
 * then a division) whose result the reducer writes back. Threads as ranks.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <math.h>
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

/* ------------------------------------------------------------ the built-in PowerSGD */

/* Gradients: a 6 x 10 matrix, a bias of 6, a 3 x 8 matrix, float64; rank r's matrix i is
 * (r + 1) times a fixed rank-1 matrix u v^T, so their average has rank 1 too. */
#define PS_N 3
static const int64_t ps_rows[PS_N] = {6, 6, 3}, ps_cols[PS_N] = {10, 1, 8};
static double ps_val(int rank, int it, int i, int64_t j) {
    int64_t row = j / ps_cols[i], col = j % ps_cols[i];
    if (ps_cols[i] == 1) return rank + it + (double)row; /* the bias: plain */
    return (rank + 1) * (1.0 + it) * (1.0 + (double)row) * (0.5 + (double)((col * 7 + i) % 5));
}

static void rank_powersgd(distc_pg *pg, int rank, int size, void *arg) {
    int full_rank = *(int *)arg; /* rank 8 >= every matrix's smaller side: exact for any gradients */
    DLTensor *g[PS_N];
    for (int i = 0; i < PS_N; ++i) g[i] = dt_tensor_2d(DT_F64, ps_rows[i], ps_cols[i]);
    distc_reducer *r = NULL;
    if (!RK_OK(distc_reducer_new(&r, pg, g, PS_N, NULL))) return;
    RK_ERR(distc_reducer_powersgd_stats(NULL, NULL, NULL, r), DISTC_ESTATE, "not this reducer's hook");
    distc_powersgd_options o;
    RK_OK(distc_powersgd_options_init(&o, DISTC_POWERSGD_OPTIONS_VERSION));
    RK_EQ_INT(o.matrix_approximation_rank, 1);
    RK_EQ_INT(o.start_powersgd_iter, 1000);
    o.start_powersgd_iter = 1;
    RK_ERR(distc_reducer_register_powersgd(r, &o), DISTC_EINVAL, "at least 2");
    o.start_powersgd_iter = 2;
    o.matrix_approximation_rank = 0;
    RK_ERR(distc_reducer_register_powersgd(r, &o), DISTC_EINVAL, "at least 1");
    o.matrix_approximation_rank = 1;
    o.min_compression_rate = -1;
    RK_ERR(distc_reducer_register_powersgd(r, &o), DISTC_EINVAL, "min_compression_rate");
    o.min_compression_rate = 2;
    o.orthogonalization_epsilon = -1e-8;
    RK_ERR(distc_reducer_register_powersgd(r, &o), DISTC_EINVAL, "orthogonalization_epsilon");
    o.orthogonalization_epsilon = 0;
    o.matrix_approximation_rank = full_rank ? 8 : 1;
    o.min_compression_rate = full_rank ? 0.2 : 2;
    o.random_seed = 42;
    RK_OK(distc_reducer_register_powersgd(r, &o));
    for (int it = 0; it < 6; ++it) {
        RK_OK(distc_reducer_prepare_for_backward(r, NULL, 0));
        if (it == 0) RK_ERR(distc_reducer_register_powersgd(r, &o), DISTC_ESTATE, "during");
        for (int i = PS_N - 1; i >= 0; --i) {
            for (int64_t j = 0; j < ps_rows[i] * ps_cols[i]; ++j) dt_set(g[i], j, ps_val(rank, it, i, j));
            RK_OK(distc_reducer_mark_ready(r, i));
        }
        RK_OK(distc_reducer_finalize(r));
        /* Plain before iteration 2, compressed after: exact either way for these gradients
         * (rank 1 and rank 1, or full rank), up to rounding. */
        double worst = 0;
        for (int i = 0; i < PS_N; ++i)
            for (int64_t j = 0; j < ps_rows[i] * ps_cols[i]; ++j) {
                double want = 0;
                for (int q = 0; q < size; ++q) want += ps_val(q, it, i, j);
                want /= size;
                double err = fabs(dt_get(g[i], j) - want) / (1 + fabs(want));
                worst = err > worst ? err : worst;
            }
        RK_CHECKF(worst < 1e-9, "iteration %d: relative error %g", it, worst);
    }
    int64_t iters = 0;
    uint64_t before = 0, after = 0;
    RK_OK(distc_reducer_powersgd_stats(&iters, &before, &after, r));
    RK_EQ_INT(iters, 6);
    /* 4 compressed iterations of 60 + 6 + 24 elements: (6 + 10) r + 6 + (3 + 8) r after, the
     * bias plain; with min_compression_rate 0.2 the bias is worth it too, as 6 x 1 at rank 1. */
    RK_EQ_INT(before, 4 * 90);
    int64_t rk6 = full_rank ? 6 : 1, rk3 = full_rank ? 3 : 1, bias = full_rank ? 6 + 1 : 6;
    RK_EQ_INT(after, (uint64_t)(4 * ((6 + 10) * rk6 + bias + (3 + 8) * rk3)));
    /* Another hook replaces it. */
    RK_OK(distc_reducer_register_comm_hook(r, NULL, NULL, DISTC_HOOK_ALLREDUCE));
    RK_ERR(distc_reducer_powersgd_stats(&iters, NULL, NULL, r), DISTC_ESTATE, "not");
    RK_ERR(distc_reducer_register_powersgd(NULL, NULL), DISTC_EINVAL, "r");
    o.version = 99;
    RK_ERR(distc_reducer_register_powersgd(r, &o), DISTC_EINVAL, "version");
    distc_reducer_free(r);
    for (int i = 0; i < PS_N; ++i) dt_tensor_free(g[i]);
}

/* A generic (full-rank) gradient compressed to rank 1, the same every step on every rank:
 * without error feedback every step gives the same rank-1 approximation; with it the
 * running mean of the steps approaches the gradient itself (what error feedback is for;
 * torch's hook, through distc.ddp_comm_hooks, gives the same 0.68 and 0.24 here). */
static void rank_error_feedback(distc_pg *pg, int rank, int size, void *arg) {
    (void)rank, (void)size, (void)arg;
    DLTensor *g = dt_tensor_2d(DT_F64, 8, 8);
    double err[2];
    for (int feedback = 0; feedback < 2; ++feedback) {
        distc_reducer *r = NULL;
        if (!RK_OK(distc_reducer_new(&r, pg, &g, 1, NULL))) break;
        distc_powersgd_options o = DISTC_POWERSGD_OPTIONS_INIT;
        o.start_powersgd_iter = 2;
        o.use_error_feedback = feedback;
        RK_OK(distc_reducer_register_powersgd(r, &o));
        double sum[64] = {0}, grad[64];
        for (int j = 0; j < 64; ++j) grad[j] = sin(1.0 + j * 0.7) + ((j % 9) == 0);
        const int steps = 42;
        for (int it = 0; it < steps; ++it) {
            RK_OK(distc_reducer_prepare_for_backward(r, NULL, 0));
            for (int j = 0; j < 64; ++j) dt_set(g, j, grad[j]);
            RK_OK(distc_reducer_mark_ready(r, 0));
            RK_OK(distc_reducer_finalize(r));
            if (it >= 2)
                for (int j = 0; j < 64; ++j) sum[j] += dt_get(g, j);
        }
        double e = 0, n = 0;
        for (int j = 0; j < 64; ++j) {
            double d = sum[j] / (steps - 2) - grad[j];
            e += d * d;
            n += grad[j] * grad[j];
        }
        err[feedback] = sqrt(e / n);
        distc_reducer_free(r);
    }
    RK_CHECKF(err[1] < err[0] / 2, "error feedback: mean's relative error %g, without it %g", err[1], err[0]);
    dt_tensor_free(g);
}

static void test_powersgd(void **state) {
    (void)state;
    int full = 0;
    for (int size = 1; size <= 4; size += 1 + (size == 2)) dt_run_ranks(size, rank_powersgd, &full);
    full = 1;
    dt_run_ranks(2, rank_powersgd, &full);
    dt_run_ranks(3, rank_powersgd, &full);
    dt_run_ranks(2, rank_error_feedback, NULL);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bucket_hook),
        cmocka_unit_test(test_powersgd),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

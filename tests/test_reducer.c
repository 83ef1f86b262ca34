/*
 * The DDP reducer with threads as ranks (1 to 4): averages over several
 * buckets and iterations, unused gradients listed or found, an explicit
 * assignment, the state machine's errors, and a reducer freed in a
 * completion callback of its group's collectives.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pg_harness.h"
#include "test_util.h"

#define NGRADS 6
static const int64_t sizes[NGRADS] = {3, 1000, 7, 300, 50, 16};

/* Gradient j of tensor i on `rank` in iteration `it`: small integers, so averages are exact halves/quarters. */
static double gval(int rank, int it, int i, int64_t j) { return (double)((rank * 3 + it + i + (int)(j % 5)) % 8); }

static void make_grads(DLTensor **g) {
    for (int i = 0; i < NGRADS; ++i) g[i] = dt_tensor_1d(i == 5 ? DT_F64 : DT_F32, sizes[i]);
}

static void free_grads(DLTensor **g) {
    for (int i = 0; i < NGRADS; ++i) dt_tensor_free(g[i]);
}

static void fill(DLTensor *t, int rank, int it, int i) {
    for (int64_t j = 0; j < dt_numel(t); ++j) dt_set(t, j, gval(rank, it, i, j));
}

static int check_mean(DLTensor *t, int size, int it, int i, int zero) {
    for (int64_t j = 0; j < dt_numel(t); ++j) {
        double sum = 0;
        if (!zero)
            for (int r = 0; r < size; ++r) sum += gval(r, it, i, j);
        double want = sum / size; /* exact for 1, 2, 4 ranks; float32's rounding for 3 */
        if (!RK_CHECKF(fabs(dt_get(t, j) - want) <= 1e-6 * (1 + fabs(want)),
                       "iteration %d gradient %d element %lld is %g, expected %g", it, i, (long long)j, dt_get(t, j),
                       want))
            return 0;
    }
    return 1;
}

static void rank_average(distc_pg *pg, int rank, int size, void *arg) {
    (void)arg;
    DLTensor *g[NGRADS];
    make_grads(g);
    distc_reducer_options o = DISTC_REDUCER_OPTIONS_INIT;
    o.first_bucket_bytes = 64;
    o.bucket_cap_bytes = 1024;
    distc_reducer *r = NULL;
    if (!RK_OK(distc_reducer_new(&r, pg, g, NGRADS, &o))) return;
    size_t nb = 0;
    RK_OK(distc_reducer_num_buckets(&nb, r));
    RK_CHECKF(nb >= 3, "only %zu buckets", nb);
    int32_t b_last = -1, b_first = -1;
    RK_OK(distc_reducer_bucket_of(&b_last, r, NGRADS - 2));
    RK_OK(distc_reducer_bucket_of(&b_first, r, 0));
    RK_CHECKF(b_last < b_first, "the last gradients' bucket (%d) should launch before the first's (%d)", b_last,
              b_first);
    for (int it = 0; it < 3; ++it) {
        RK_OK(distc_reducer_prepare_for_backward(r, NULL, 0));
        for (int i = NGRADS - 1; i >= 0; --i) { /* a backward pass: last layer first */
            fill(g[i], rank, it, i);
            RK_OK(distc_reducer_mark_ready(r, i));
        }
        RK_OK(distc_reducer_finalize(r));
        for (int i = 0; i < NGRADS; ++i) check_mean(g[i], size, it, i, 0);
    }
    int32_t used = -1;
    RK_OK(distc_reducer_grad_used(&used, r, 0));
    RK_CHECKF(used == 1, "without find_unused_parameters, grad_used is %d", used);
    distc_reducer_free(r);
    free_grads(g);
}

static void test_average(void **state) {
    (void)state;
    for (int size = 1; size <= 4; ++size) dt_run_ranks(size, rank_average, NULL);
}

/* A reducer over `g` with `o` and small buckets (several of them); NULL after a failure. */
static distc_reducer *small_buckets(distc_pg *pg, DLTensor **g, distc_reducer_options o, uint64_t first) {
    o.bucket_cap_bytes = 512;
    o.first_bucket_bytes = first;
    distc_reducer *r = NULL;
    return RK_OK(distc_reducer_new(&r, pg, g, NGRADS, &o)) ? r : NULL;
}

static void rank_unused(distc_pg *pg, int rank, int size, void *arg) {
    (void)arg;
    DLTensor *g[NGRADS];
    make_grads(g);
    distc_reducer_options o = DISTC_REDUCER_OPTIONS_INIT;
    o.find_unused_parameters = 1;
    distc_reducer *r = small_buckets(pg, g, o, 512);
    if (!r) return;
    int32_t unused[1] = {1};
    RK_OK(distc_reducer_prepare_for_backward(r, unused, 1));
    for (int i = 0; i < NGRADS; ++i) {
        fill(g[i], rank, 0, i);
        if (i != 1 && i != 4) RK_OK(distc_reducer_mark_ready(r, i)); /* 4: found unused at finalize */
    }
    int32_t used = -1;
    RK_OK(distc_reducer_grad_used(&used, r, 1));
    RK_CHECKF(used == 1, "before the first finalize, grad_used is %d", used);
    RK_OK(distc_reducer_finalize(r));
    for (int i = 0; i < NGRADS; ++i) check_mean(g[i], size, 0, i, i == 1 || i == 4);
    /* No rank used 1 and 4: the allreduced map says so. */
    for (int i = 0; i < NGRADS; ++i) {
        RK_OK(distc_reducer_grad_used(&used, r, i));
        RK_CHECKF(used == (i != 1 && i != 4), "gradient %d: grad_used %d", i, used);
    }
    /* Only rank 0 uses gradient 4 now: used, and averaged with the others' zeros. */
    RK_OK(distc_reducer_prepare_for_backward(r, NULL, 0));
    for (int i = 0; i < NGRADS; ++i) {
        fill(g[i], rank, 1, i);
        if (i != 4 || rank == 0) RK_OK(distc_reducer_mark_ready(r, i));
    }
    RK_OK(distc_reducer_finalize(r));
    for (int i = 0; i < NGRADS; ++i) {
        RK_OK(distc_reducer_grad_used(&used, r, i));
        RK_CHECKF(used == 1, "iteration 1, gradient %d: grad_used %d", i, used);
    }
    for (int64_t j = 0; j < dt_numel(g[4]); ++j)
        if (!RK_CHECKF(fabs(dt_get(g[4], j) - gval(0, 1, 4, j) / size) <= 1e-6, "gradient 4 element %lld is %g",
                       (long long)j, dt_get(g[4], j)))
            break;
    RK_ERR(distc_reducer_grad_used(NULL, r, 0), DISTC_EINVAL, "out");
    RK_ERR(distc_reducer_grad_used(&used, r, NGRADS), DISTC_EINVAL, "index");
    distc_reducer_free(r);
    free_grads(g);
}

static void test_unused(void **state) {
    (void)state;
    dt_run_ranks(2, rank_unused, NULL);
    dt_run_ranks(3, rank_unused, NULL);
}

/* Uneven inputs: rank r has 2 + r iterations; a rank out of them joins (the
 * protocol in reducer.h) until every rank is, and the active ranks' averages
 * count the joined ones as zeros. */
static void rank_join(distc_pg *pg, int rank, int size, void *arg) {
    (void)arg;
    DLTensor *g[NGRADS];
    make_grads(g);
    distc_reducer *r = small_buckets(pg, g, (distc_reducer_options)DISTC_REDUCER_OPTIONS_INIT, 256);
    if (!r) return;
    int iterations = 0, joins = 0;
    for (int it = 0;; ++it) {
        int32_t active = it < 2 + rank;
        DLTensor *c = dt_tensor_1d(DT_I32, 1);
        ((int32_t *)c->data)[0] = active;
        RK_OK(distc_allreduce(NULL, pg, c, DISTC_SUM, NULL));
        int32_t n = ((int32_t *)c->data)[0];
        dt_tensor_free(c);
        if (n == 0) break;
        if (!active) {
            RK_OK(distc_reducer_join(r));
            ++joins;
            continue;
        }
        RK_OK(distc_reducer_prepare_for_backward(r, NULL, 0));
        for (int i = NGRADS - 1; i >= 0; --i) {
            fill(g[i], rank, it, i);
            RK_OK(distc_reducer_mark_ready(r, i));
        }
        RK_OK(distc_reducer_finalize(r));
        ++iterations;
        for (int i = 0; i < NGRADS; ++i)
            for (int64_t j = 0; j < dt_numel(g[i]); ++j) {
                double sum = 0;
                for (int q = 0; q < size; ++q)
                    if (it < 2 + q) sum += gval(q, it, i, j);
                if (!RK_CHECKF(fabs(dt_get(g[i], j) - sum / size) <= 1e-6 * (1 + sum), "iteration %d gradient %d", it,
                               i))
                    break;
            }
    }
    RK_CHECKF(iterations == 2 + rank && joins == size - 1 - rank, "rank %d: %d iterations, %d joins", rank, iterations,
              joins);
    /* Inside an iteration, join is a state error. */
    RK_OK(distc_reducer_prepare_for_backward(r, NULL, 0));
    RK_ERR(distc_reducer_join(r), DISTC_ESTATE, "not finalized");
    RK_ERR(distc_reducer_join(NULL), DISTC_EINVAL, "");
    distc_reducer_free(r);
    free_grads(g);
}

/* static_graph: the first iteration finds 1 and 4 unused (without
 * find_unused_parameters); later ones need not mark them, may not mark them,
 * and must mark every other. */
static void rank_static(distc_pg *pg, int rank, int size, void *arg) {
    (void)arg;
    DLTensor *g[NGRADS];
    make_grads(g);
    distc_reducer_options o = DISTC_REDUCER_OPTIONS_INIT;
    o.static_graph = 1;
    distc_reducer *r = small_buckets(pg, g, o, 256);
    if (!r) return;
    for (int it = 0; it < 4; ++it) {
        RK_OK(distc_reducer_prepare_for_backward(r, NULL, 0));
        for (int i = NGRADS - 1; i >= 0; --i) {
            fill(g[i], rank, it, i);
            if (i != 1 && i != 4) RK_OK(distc_reducer_mark_ready(r, i));
        }
        RK_OK(distc_reducer_finalize(r));
        for (int i = 0; i < NGRADS; ++i)
            if (i != 1 && i != 4) check_mean(g[i], size, it, i, 0);
        int32_t used = -1;
        RK_OK(distc_reducer_grad_used(&used, r, 4));
        RK_CHECKF(used == 0, "iteration %d: gradient 4 counted as used", it);
    }
    /* Marking a gradient the first iteration left unused: it is marked already. */
    RK_OK(distc_reducer_prepare_for_backward(r, NULL, 0));
    RK_ERR(distc_reducer_mark_ready(r, 1), DISTC_ESTATE, "twice");
    /* Leaving out one it used: the graph changed. */
    for (int i = NGRADS - 1; i >= 0; --i)
        if (i != 1 && i != 4 && i != 2) RK_OK(distc_reducer_mark_ready(r, i));
    RK_ERR(distc_reducer_finalize(r), DISTC_ESTATE, "static_graph");
    distc_reducer_free(r);
    free_grads(g);
}

static void test_static_graph(void **state) {
    (void)state;
    dt_run_ranks(2, rank_static, NULL);
    dt_run_ranks(3, rank_static, NULL);
}

static void test_join(void **state) {
    (void)state;
    dt_run_ranks(3, rank_join, NULL);
}

static void rank_explicit(distc_pg *pg, int rank, int size, void *arg) {
    (void)arg;
    DLTensor *g[NGRADS];
    make_grads(g);
    int32_t bucket_of[NGRADS] = {1, 0, 1, 0, 1, 2};
    distc_reducer_options o = DISTC_REDUCER_OPTIONS_INIT;
    o.bucket_of = bucket_of;
    distc_reducer *r = NULL;
    if (!RK_OK(distc_reducer_new(&r, pg, g, NGRADS, &o))) return;
    size_t nb = 0;
    RK_OK(distc_reducer_num_buckets(&nb, r));
    RK_EQ_INT(nb, 3);
    RK_OK(distc_reducer_prepare_for_backward(r, NULL, 0));
    static const int order[NGRADS] = {2, 5, 0, 3, 4, 1};
    for (int k = 0; k < NGRADS; ++k) {
        fill(g[order[k]], rank, 1, order[k]);
        RK_OK(distc_reducer_mark_ready(r, order[k]));
    }
    RK_OK(distc_reducer_finalize(r));
    for (int i = 0; i < NGRADS; ++i) check_mean(g[i], size, 1, i, 0);
    distc_reducer_free(r);
    free_grads(g);
}

static void test_explicit_assignment(void **state) {
    (void)state;
    dt_run_ranks(2, rank_explicit, NULL);
    dt_run_ranks(4, rank_explicit, NULL);
}

/* Overlap is real: with compute between gradients, the first bucket is reducing
 * before the last gradient exists. And the statistics add up. */
static void rank_overlap(distc_pg *pg, int rank, int size, void *arg) {
    (void)arg, (void)size;
    DLTensor *g[NGRADS];
    make_grads(g);
    distc_reducer_options o = DISTC_REDUCER_OPTIONS_INIT;
    o.first_bucket_bytes = o.bucket_cap_bytes = 1; /* one gradient per bucket */
    distc_reducer *r = NULL;
    if (!RK_OK(distc_reducer_new(&r, pg, g, NGRADS, &o))) return;
    int32_t unused[1] = {2};
    RK_OK(distc_reducer_prepare_for_backward(r, unused, 1));
    for (int i = NGRADS - 1; i >= 0; --i) {
        if (i == 2) continue;
        fill(g[i], rank, 0, i);
        struct timespec ts = {0, 20 * 1000000L}; /* the next layer's backward */
        nanosleep(&ts, NULL);
        RK_OK(distc_reducer_mark_ready(r, i));
    }
    RK_OK(distc_reducer_finalize(r));
    size_t nb = 0;
    RK_OK(distc_reducer_num_buckets(&nb, r));
    RK_EQ_INT(nb, NGRADS);
    int64_t last_ready = -1, unused_ready = 0;
    RK_OK(distc_reducer_ready_ns(&last_ready, r, 0)); /* marked last */
    RK_OK(distc_reducer_ready_ns(&unused_ready, r, 2));
    RK_EQ_INT(unused_ready, -1);
    uint64_t total = 0;
    for (size_t b = 0; b < nb; ++b) {
        uint64_t bytes = 0;
        int64_t launch = -1, reduce = -1;
        RK_OK(distc_reducer_bucket_stats(&bytes, &launch, &reduce, r, b));
        total += bytes;
        RK_CHECKF(launch >= 0 && reduce >= 0, "bucket %zu: launch %lld, reduce %lld", b, (long long)launch,
                  (long long)reduce);
    }
    uint64_t want = 0;
    for (int i = 0; i < NGRADS; ++i) want += (uint64_t)dt_numel(g[i]) * dt_dtype_size(g[i]->dtype);
    RK_EQ_INT(total, want);
    int64_t first_launch = -1;
    RK_OK(distc_reducer_bucket_stats(NULL, &first_launch, NULL, r, 0));
    RK_CHECKF(first_launch >= 0 && first_launch < last_ready,
              "the first bucket started at %lld ns, not before the last gradient at %lld ns", (long long)first_launch,
              (long long)last_ready);
    RK_ERR(distc_reducer_bucket_stats(NULL, NULL, NULL, r, nb), DISTC_EINVAL, "outside");
    RK_ERR(distc_reducer_ready_ns(NULL, r, 0), DISTC_EINVAL, "out");
    distc_reducer_free(r);
    free_grads(g);
}

static void test_overlap_and_stats(void **state) {
    (void)state;
    dt_run_ranks(2, rank_overlap, NULL);
}

/* A communication hook of the caller's: called once per bucket and iteration; here it does what the default does. */
static int avg_hook(distc_work **out, distc_pg *pg, DLTensor *bucket, void *payload) {
    __atomic_add_fetch((int *)payload, 1, __ATOMIC_SEQ_CST);
    return distc_allreduce(out, pg, bucket, DISTC_AVG, NULL);
}

static int failing_hook(distc_work **out, distc_pg *pg, DLTensor *bucket, void *payload) {
    (void)out, (void)pg, (void)bucket, (void)payload;
    return distc_error_set(DISTC_EBACKEND, "compression codec missing (test)");
}

/* A hook that calls back into its reducer (which it runs under the lock of):
 * refused, where it once waited for itself for ever. */
struct reentry {
    distc_reducer *r;
    int rc;
    char msg[256];
};

static int reentrant_hook(distc_work **out, distc_pg *pg, DLTensor *bucket, void *payload) {
    struct reentry *e = payload;
    e->rc = distc_reducer_mark_ready(e->r, 0);
    snprintf(e->msg, sizeof e->msg, "%s", distc_error_last());
    return distc_allreduce(out, pg, bucket, DISTC_AVG, NULL);
}

static void rank_hooks(distc_pg *pg, int rank, int size, void *arg) {
    (void)arg;
    DLTensor *g[NGRADS];
    make_grads(g);
    distc_reducer_options o = DISTC_REDUCER_OPTIONS_INIT;
    o.first_bucket_bytes = o.bucket_cap_bytes = 1024;
    distc_reducer *r = NULL;
    if (!RK_OK(distc_reducer_new(&r, pg, g, NGRADS, &o))) return;
    size_t nb = 0;
    RK_OK(distc_reducer_num_buckets(&nb, r));
    int calls = 0;
    RK_OK(distc_reducer_register_comm_hook(r, avg_hook, &calls, 0));
    for (int it = 0; it < 2; ++it) {
        RK_OK(distc_reducer_prepare_for_backward(r, NULL, 0));
        RK_ERR(distc_reducer_register_comm_hook(r, NULL, NULL, DISTC_HOOK_FP16_COMPRESS), DISTC_ESTATE, "during");
        for (int i = NGRADS - 1; i >= 0; --i) {
            fill(g[i], rank, it, i);
            RK_OK(distc_reducer_mark_ready(r, i));
        }
        RK_OK(distc_reducer_finalize(r));
        for (int i = 0; i < NGRADS; ++i) check_mean(g[i], size, it, i, 0);
    }
    RK_EQ_INT(calls, 2 * (int)nb);
    /* fp16 compression: small integers and their averages over 1-4 ranks are exact in float16. */
    RK_OK(distc_reducer_register_comm_hook(r, NULL, NULL, DISTC_HOOK_FP16_COMPRESS));
    RK_OK(distc_reducer_prepare_for_backward(r, NULL, 0));
    for (int i = NGRADS - 1; i >= 0; --i) {
        fill(g[i], rank, 2, i);
        RK_OK(distc_reducer_mark_ready(r, i));
    }
    RK_OK(distc_reducer_finalize(r));
    for (int i = 0; i < NGRADS; ++i)
        if (size != 3) check_mean(g[i], size, 2, i, 0);
    RK_ERR(distc_reducer_register_comm_hook(r, NULL, NULL, 7), DISTC_EINVAL, "builtin 7");
    /* A hook that fails: the call that launched the bucket says so, and a new iteration can start. */
    RK_OK(distc_reducer_register_comm_hook(r, failing_hook, NULL, 0));
    RK_OK(distc_reducer_prepare_for_backward(r, NULL, 0));
    int rc = 0;
    for (int i = NGRADS - 1; i >= 0 && rc == 0; --i) rc = distc_reducer_mark_ready(r, i);
    if (rc == 0) rc = distc_reducer_finalize(r);
    RK_CHECKF(rc == DISTC_EBACKEND && strstr(distc_error_last(), "codec missing"), "a failing hook gave %d: %s", rc,
              distc_error_last());
    if (rc != 0) (void)distc_reducer_finalize(r); /* ends the iteration if mark_ready failed */
    struct reentry e = {r, 0, ""};
    RK_OK(distc_reducer_register_comm_hook(r, reentrant_hook, &e, 0));
    RK_OK(distc_reducer_prepare_for_backward(r, NULL, 0));
    for (int i = 0; i < NGRADS; ++i) RK_OK(distc_reducer_mark_ready(r, i));
    RK_OK(distc_reducer_finalize(r));
    RK_EQ_INT(e.rc, DISTC_ESTATE);
    RK_CHECKF(strstr(e.msg, "communication hook"), "a hook's mark_ready: %s", e.msg);
    RK_OK(distc_reducer_register_comm_hook(r, NULL, NULL, DISTC_HOOK_ALLREDUCE));
    RK_OK(distc_reducer_prepare_for_backward(r, NULL, 0));
    for (int i = 0; i < NGRADS; ++i) RK_OK(distc_reducer_mark_ready(r, i));
    RK_OK(distc_reducer_finalize(r));
    distc_reducer_free(r);
    free_grads(g);
}

static void test_comm_hooks(void **state) {
    (void)state;
    dt_run_ranks(1, rank_hooks, NULL);
    dt_run_ranks(2, rank_hooks, NULL);
    dt_run_ranks(4, rank_hooks, NULL);
}

/* Bucket rebuild: after the first iteration the buckets follow rank 0's arrival order, on every rank. */
static void rank_rebuild(distc_pg *pg, int rank, int size, void *arg) {
    (void)arg;
    DLTensor *g[NGRADS];
    make_grads(g);
    distc_reducer_options o = DISTC_REDUCER_OPTIONS_INIT;
    o.first_bucket_bytes = o.bucket_cap_bytes = 8; /* one gradient per bucket */
    distc_reducer *r = NULL;
    if (!RK_OK(distc_reducer_new(&r, pg, g, NGRADS, &o))) return;
    static const int order0[NGRADS] = {2, 0, 5, 4, 1, 3}, other[NGRADS] = {5, 4, 3, 2, 1, 0};
    const int *order = rank == 0 ? order0 : other;
    for (int it = 0; it < 3; ++it) {
        RK_OK(distc_reducer_prepare_for_backward(r, NULL, 0));
        if (it >= 1) { /* rebuilt: rank 0's first-arrived gradient is in the first bucket, on every rank */
            int32_t b2 = -1, b3 = -1;
            RK_OK(distc_reducer_bucket_of(&b2, r, 2));
            RK_OK(distc_reducer_bucket_of(&b3, r, 3));
            RK_EQ_INT(b2, 0);
            RK_EQ_INT(b3, NGRADS - 1);
        }
        for (int k = 0; k < NGRADS; ++k) {
            fill(g[order[k]], rank, it, order[k]);
            RK_OK(distc_reducer_mark_ready(r, order[k]));
        }
        RK_OK(distc_reducer_finalize(r));
        for (int i = 0; i < NGRADS; ++i) check_mean(g[i], size, it, i, 0);
    }
    int32_t used = -1;
    RK_OK(distc_reducer_grad_used(&used, r, 0));
    RK_CHECKF(used == 1, "without find_unused_parameters, grad_used is %d", used);
    distc_reducer_free(r);
    free_grads(g);
}

static void test_bucket_rebuild(void **state) {
    (void)state;
    dt_run_ranks(1, rank_rebuild, NULL);
    dt_run_ranks(3, rank_rebuild, NULL);
}

static void rank_errors(distc_pg *pg, int rank, int size, void *arg) {
    (void)arg, (void)rank, (void)size;
    DLTensor *g[NGRADS];
    make_grads(g);
    distc_reducer *r = NULL;
    RK_ERR(distc_reducer_new(NULL, pg, g, NGRADS, NULL), DISTC_EINVAL, "out");
    RK_ERR(distc_reducer_new(&r, NULL, g, NGRADS, NULL), DISTC_EINVAL, "pg");
    RK_ERR(distc_reducer_new(&r, pg, g, 0, NULL), DISTC_EINVAL, "no gradients");
    RK_ERR(distc_reducer_new(&r, pg, NULL, NGRADS, NULL), DISTC_EINVAL, "grads");
    distc_reducer_options o;
    memset(&o, 0xab, sizeof o);
    RK_OK(distc_reducer_options_init(&o, DISTC_REDUCER_OPTIONS_VERSION));
    RK_CHECKF(o.version == DISTC_REDUCER_OPTIONS_VERSION && o.bucket_of == NULL, "options_init left version %u",
              o.version);
    RK_ERR(distc_reducer_options_init(&o, 9), DISTC_EINVAL, "version 9");
    RK_ERR(distc_reducer_options_init(NULL, DISTC_REDUCER_OPTIONS_VERSION), DISTC_EINVAL, "opts");
    o.version = 9;
    RK_ERR(distc_reducer_new(&r, pg, g, NGRADS, &o), DISTC_EINVAL, "version");
    int32_t mixed[NGRADS] = {0, 0, 0, 0, 0, 0}; /* gradient 5 is float64 */
    o = (distc_reducer_options)DISTC_REDUCER_OPTIONS_INIT;
    o.bucket_of = mixed;
    RK_ERR(distc_reducer_new(&r, pg, g, NGRADS, &o), DISTC_EINVAL, "mixes float32");
    int32_t gap[NGRADS] = {0, 0, 0, 0, 2, 3};
    o.bucket_of = gap;
    RK_ERR(distc_reducer_new(&r, pg, g, NGRADS, &o), DISTC_EINVAL, "bucket 1 is empty");
    DLTensor dev = *g[0];
    dev.device.device_type = kDLCUDA;
    DLTensor *gd[1] = {&dev};
    RK_ERR(distc_reducer_new(&r, pg, gd, 1, NULL), DISTC_EINVAL, "grads[0]");
    /* The same gradient twice (as bucket views or not), or two that overlap: refused. */
    DLTensor *twice[3] = {g[0], g[1], g[0]};
    RK_ERR(distc_reducer_new(&r, pg, twice, 3, NULL), DISTC_EINVAL, "grads[0] and grads[2] share memory");
    o = (distc_reducer_options)DISTC_REDUCER_OPTIONS_INIT;
    o.gradient_as_bucket_view = 1;
    RK_ERR(distc_reducer_new(&r, pg, twice, 3, &o), DISTC_EINVAL, "share memory");
    DLTensor tail = *g[1];
    tail.byte_offset = 4; /* starts inside g[1], runs past its end */
    DLTensor *overlap[2] = {g[1], &tail};
    RK_ERR(distc_reducer_new(&r, pg, overlap, 2, NULL), DISTC_EINVAL, "grads[0] and grads[1] share memory");

    if (!RK_OK(distc_reducer_new(&r, pg, g, NGRADS, NULL))) return;
    RK_ERR(distc_reducer_mark_ready(r, 0), DISTC_ESTATE, "prepare_for_backward first");
    RK_ERR(distc_reducer_finalize(r), DISTC_ESTATE, "no iteration");
    int32_t bad_unused[2] = {1, 1};
    RK_ERR(distc_reducer_prepare_for_backward(r, bad_unused, 2), DISTC_EINVAL, "listed twice");
    bad_unused[0] = NGRADS;
    RK_ERR(distc_reducer_prepare_for_backward(r, bad_unused, 1), DISTC_EINVAL, "outside");
    RK_ERR(distc_reducer_prepare_for_backward(r, NULL, 1), DISTC_EINVAL, "unused is NULL");
    RK_OK(distc_reducer_prepare_for_backward(r, NULL, 0));
    RK_ERR(distc_reducer_prepare_for_backward(r, NULL, 0), DISTC_ESTATE, "not finalized");
    RK_ERR(distc_reducer_mark_ready(r, NGRADS), DISTC_EINVAL, "outside");
    RK_ERR(distc_reducer_mark_ready(r, -1), DISTC_EINVAL, "outside");
    RK_OK(distc_reducer_mark_ready(r, 3));
    RK_ERR(distc_reducer_mark_ready(r, 3), DISTC_ESTATE, "twice");
    /* Not every gradient marked, no find_unused: finalize names them, and a new iteration may start. */
    RK_ERR(distc_reducer_finalize(r), DISTC_ESTATE, "gradients 0, 1, 2, 4, 5 were not marked");
    RK_OK(distc_reducer_prepare_for_backward(r, NULL, 0));
    for (int i = 0; i < NGRADS; ++i) RK_OK(distc_reducer_mark_ready(r, i));
    RK_OK(distc_reducer_finalize(r));
    int32_t b;
    RK_ERR(distc_reducer_bucket_of(&b, r, 99), DISTC_EINVAL, "outside");
    void *view = NULL;
    RK_ERR(distc_reducer_grad_view(&view, r, 0), DISTC_ESTATE, "gradient_as_bucket_view");
    RK_ERR(distc_reducer_grad_view(NULL, r, 0), DISTC_EINVAL, "view");
    RK_ERR(distc_reducer_num_buckets(NULL, r), DISTC_EINVAL, "out");
    RK_ERR(distc_reducer_finalize(NULL), DISTC_EINVAL, "r");
    distc_reducer_free(r);
    distc_reducer_free(NULL);

    /* A failing group reaches the caller, nothing hangs. */
    if (RK_OK(distc_reducer_new(&r, pg, g, NGRADS, NULL))) {
        RK_OK(distc_pg_abort(pg));
        RK_OK(distc_reducer_prepare_for_backward(r, NULL, 0));
        int rc = 0;
        for (int i = NGRADS - 1; i >= 0 && rc == 0; --i) rc = distc_reducer_mark_ready(r, i);
        if (rc == 0) rc = distc_reducer_finalize(r);
        RK_CHECKF(rc == DISTC_EABORTED, "an aborted group gave %d: %s", rc, distc_error_last());
        distc_reducer_free(r);
    }
    free_grads(g);
}

static void test_errors(void **state) {
    (void)state;
    dt_run_ranks(2, rank_errors, NULL);
}

/* A reducer freed in a completion callback of one of its group's collectives
 * while its buckets' allreduces are queued behind that callback (where a
 * wait is refused): the allreduces still run on their buffers, which go
 * once they completed (ASan's leak check holds), and the peer's result is
 * right. */
struct freed {
    distc_reducer *r;
    int ran;
};

static void free_reducer(distc_work *w, void *payload) {
    (void)w;
    struct freed *f = payload;
    distc_reducer_free(f->r);
    f->ran = 1;
}

static void rank_freed_in_callback(distc_pg *pg, int rank, int size, void *arg) {
    (void)arg;
    DLTensor *g[NGRADS];
    make_grads(g);
    distc_reducer *r = NULL;
    if (!RK_OK(distc_reducer_new(&r, pg, g, NGRADS, NULL))) return;
    RK_OK(distc_reducer_prepare_for_backward(r, NULL, 0));
    char key[128];
    snprintf(key, sizeof key, "%s/freed/queued", dt_rank_group());
    const char *keys[1] = {key};
    if (rank == 0) {
        struct freed f = {r, 0};
        distc_work *w = NULL;
        /* It cannot complete before rank 1 joins, which waits for the key. */
        RK_OK(distc_barrier(&w, pg, NULL));
        RK_OK(distc_work_on_complete(w, free_reducer, &f));
        for (int i = NGRADS - 1; i >= 0; --i) {
            fill(g[i], rank, 0, i);
            RK_OK(distc_reducer_mark_ready(r, i)); /* the buckets' allreduces queue behind the barrier */
        }
        RK_OK(distc_store_set(dt_rank_store(), key, "1", 1));
        RK_OK(distc_work_wait(w, -1));
        distc_work_free(w);
        RK_OK(distc_barrier(NULL, pg, NULL)); /* after the allreduces, and so after the callback */
        RK_CHECKF(f.ran, "the callback did not run");
    } else {
        RK_OK(distc_store_wait(dt_rank_store(), keys, 1, 30000));
        RK_OK(distc_barrier(NULL, pg, NULL));
        for (int i = NGRADS - 1; i >= 0; --i) {
            fill(g[i], rank, 0, i);
            RK_OK(distc_reducer_mark_ready(r, i));
        }
        RK_OK(distc_reducer_finalize(r));
        for (int i = 0; i < NGRADS; ++i) check_mean(g[i], size, 0, i, 0);
        RK_OK(distc_barrier(NULL, pg, NULL));
        distc_reducer_free(r);
    }
    free_grads(g);
}

static void test_freed_in_callback(void **state) {
    (void)state;
    dt_run_ranks(2, rank_freed_in_callback, NULL);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_average),
        cmocka_unit_test(test_unused),
        cmocka_unit_test(test_join),
        cmocka_unit_test(test_static_graph),
        cmocka_unit_test(test_explicit_assignment),
        cmocka_unit_test(test_overlap_and_stats),
        cmocka_unit_test(test_comm_hooks),
        cmocka_unit_test(test_bucket_rebuild),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_freed_in_callback),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/*
 * Collectives on messages of megabytes, for world sizes 1-4: the sizes where
 * the mesh reduces in segments (reduce-scatter then allgather, a window of
 * segments in flight) and where every peer's sends and receives must
 * interleave or deadlock. Element counts are odd and not multiples of the
 * world size, so chunks and segments end unevenly. Run with the mesh (the
 * default) and with DISTC_MESH_BYTES=0 (every size on Gloo), as threads and as
 * processes (CMake). Values are integers, so float sums are exact and every
 * result is checked element by element.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "pg_large/large.h"

/* ------------------------------------------------------------------ reductions */

static void rank_allreduce(distc_pg *pg, int rank, int size, void *arg) {
    (void)arg;
    /* int32 over 6 MB: many segments per chunk, more than the window. */
    const int64_t n = 1500007;
    DLTensor *t = filled(DT_I32, n, rank);
    if (RK_OK(distc_allreduce(NULL, pg, t, DISTC_SUM, NULL))) CHECK_ALL("int32 sum", t, n, sum_of(size, i));
    dt_tensor_free(t);
    /* float32, asynchronous: the group's worker drives the mesh. */
    t = filled(DT_F32, n, rank);
    distc_work *w = NULL;
    if (RK_OK(distc_allreduce(&w, pg, t, DISTC_SUM, NULL)) && RK_OK(distc_work_wait(w, -1)))
        CHECK_ALL("float32 sum (async)", t, n, sum_of(size, i));
    distc_work_free(w);
    dt_tensor_free(t);
    /* float16 MAX, 600 KB: a few segments. */
    const int64_t h = 300001;
    t = filled(DT_F16, h, rank);
    if (RK_OK(distc_allreduce(NULL, pg, t, DISTC_MAX, NULL))) CHECK_ALL("float16 max", t, h, max_of(size, i));
    dt_tensor_free(t);
    /* float64 AVG: the sum times 1/size, as distc (and c10d) divide. */
    const int64_t d = 200003;
    t = filled(DT_F64, d, rank);
    if (RK_OK(distc_allreduce(NULL, pg, t, DISTC_AVG, NULL)))
        for (int64_t i = 0; i < d; ++i)
            if (!RK_CHECKF(dt_get(t, i) == (double)sum_of(size, i) * (1.0 / size), "float64 avg: element %lld is %.17g",
                           (long long)i, dt_get(t, i)))
                break;
    dt_tensor_free(t);
}

static void test_allreduce(void **state) {
    (void)state;
    for_sizes(rank_allreduce);
}

static void rank_reduce(distc_pg *pg, int rank, int size, void *arg) {
    (void)arg;
    const int64_t n = 400009; /* int64: 3.2 MB */
    for (int root = 0; root < size; ++root) {
        DLTensor *t = filled(DT_I64, n, rank);
        if (RK_OK(distc_reduce(NULL, pg, t, root, DISTC_SUM, NULL))) {
            if (rank == root)
                CHECK_ALL("reduce sum on the root", t, n, sum_of(size, i));
            else
                CHECK_ALL("reduce leaves a non-root's tensor alone", t, n, val(rank, i));
        }
        dt_tensor_free(t);
    }
}

static void test_reduce(void **state) {
    (void)state;
    for_sizes(rank_reduce);
}

static void rank_reduce_scatter(distc_pg *pg, int rank, int size, void *arg) {
    (void)arg;
    const int64_t part = 200003; /* int32: 800 KB per rank */
    DLTensor *in = filled(DT_I32, part * size, rank);
    DLTensor *out = dt_tensor_1d(DT_I32, part);
    if (RK_OK(distc_reduce_scatter_tensor(NULL, pg, out, in, DISTC_SUM, NULL)))
        CHECK_ALL("reduce_scatter sum", out, part, sum_of(size, part * rank + i));
    CHECK_ALL("reduce_scatter leaves the input alone", in, part * size, val(rank, i));
    /* The output inside the input: as this rank's own part (in place), and
     * as the next rank's part, which the others still read. */
    for (int at = 0; at < 2 && size > 1; ++at) {
        DLTensor *again = filled(DT_I32, part * size, rank);
        DLTensor view = *again;
        int64_t shape = part;
        view.shape = &shape;
        view.byte_offset = (uint64_t)(part * ((rank + at) % size)) * sizeof(int32_t);
        if (RK_OK(distc_reduce_scatter_tensor(NULL, pg, &view, again, DISTC_SUM, NULL)))
            CHECK_ALL(at ? "reduce_scatter into another part of the input" : "reduce_scatter in place", &view, part,
                      sum_of(size, part * rank + i));
        dt_tensor_free(again);
    }
    dt_tensor_free(in);
    dt_tensor_free(out);
}

static void test_reduce_scatter(void **state) {
    (void)state;
    for_sizes(rank_reduce_scatter);
}

/* ------------------------------------------------------------------ data movement */

static void rank_broadcast(distc_pg *pg, int rank, int size, void *arg) {
    (void)arg;
    /* uint8, no size whole pages; 3 and 4 ranks: through the rings in
     * chunks, then in place, where each starts copying the root's buffer at
     * a page of its own and wraps around; the smallest, with a core per rank
     * (test_pg_large_procs_cores), down a tree of 4 ranks, a rank passing it
     * on only once all of it is in */
    static const int64_t sizes[] = {300007, 3000001, 6000011};
    for (int k = 0; k < 3; ++k)
        for (int root = 0; root < size; ++root) {
            const int64_t n = sizes[k];
            DLTensor *t = dt_tensor_1d(DT_U8, n);
            uint8_t *p = t->data;
            for (int64_t i = 0; i < n; ++i) p[i] = (uint8_t)(rank == root ? (i * 31 + root) : 0);
            if (RK_OK(distc_broadcast(NULL, pg, t, root, NULL)))
                for (int64_t i = 0; i < n; ++i)
                    if (!RK_CHECKF(p[i] == (uint8_t)(i * 31 + root), "broadcast from %d: byte %lld", root,
                                   (long long)i))
                        break;
            dt_tensor_free(t);
        }
}

static void test_broadcast(void **state) {
    (void)state;
    for_sizes(rank_broadcast);
}

static void rank_allgather(distc_pg *pg, int rank, int size, void *arg) {
    (void)arg;
    /* int32: 1.2 MB per rank, and 4.4 MB (a rank's own part streamed, copy_streaming) */
    const int64_t sizes[] = {300007, 1100003};
    for (int k = 0; k < 2; ++k) {
        const int64_t n = sizes[k];
        DLTensor *in = filled(DT_I32, n, rank);
        DLTensor *out = dt_tensor_1d(DT_I32, n * size);
        if (RK_OK(distc_allgather_into_tensor(NULL, pg, out, in, NULL)))
            CHECK_ALL("allgather", out, n * size, val((int)(i / n), i % n));
        /* In place: the input is this rank's slot of the output. */
        DLTensor *fresh = dt_tensor_1d(DT_I32, n * size);
        for (int64_t i = 0; i < n; ++i) dt_set(fresh, rank * n + i, (double)val(rank, i));
        int64_t shape[1] = {n};
        DLTensor slot = *fresh;
        slot.shape = shape;
        slot.byte_offset = (uint64_t)(rank * n) * sizeof(int32_t);
        if (RK_OK(distc_allgather_into_tensor(NULL, pg, fresh, &slot, NULL)))
            CHECK_ALL("allgather in place", fresh, n * size, val((int)(i / n), i % n));
        dt_tensor_free(fresh);
        dt_tensor_free(in);
        dt_tensor_free(out);
    }
}

static void test_allgather(void **state) {
    (void)state;
    for_sizes(rank_allgather);
}

static void rank_gather_scatter(distc_pg *pg, int rank, int size, void *arg) {
    (void)arg;
    /* float32: 1 MB per rank, then 4.4 MB (the root's own part streamed) with the last rank as root */
    for (int step = 0; step <= size; ++step) {
        const int root = step < size ? step : size - 1;
        const int64_t n = step < size ? 250001 : 1100003;
        DLTensor *in = filled(DT_F32, n, rank);
        DLTensor *outs[MAX_SIZE] = {0};
        for (int r = 0; r < size; ++r) outs[r] = dt_tensor_1d(DT_F32, n);
        if (RK_OK(distc_gather(NULL, pg, rank == root ? outs : NULL, in, root, NULL)) && rank == root)
            for (int r = 0; r < size; ++r) CHECK_ALL("gather", outs[r], n, val(r, i));
        /* Scatter back what was gathered, each part plus its rank. */
        DLTensor *mine = dt_tensor_1d(DT_F32, n);
        if (rank == root)
            for (int r = 0; r < size; ++r)
                for (int64_t i = 0; i < n; ++i) dt_set(outs[r], i, dt_get(outs[r], i) + r);
        if (RK_OK(distc_scatter(NULL, pg, mine, rank == root ? (const DLTensor *const *)outs : NULL, root, NULL)))
            CHECK_ALL("scatter", mine, n, val(rank, i) + rank);
        for (int r = 0; r < size; ++r) dt_tensor_free(outs[r]);
        dt_tensor_free(mine);
        dt_tensor_free(in);
    }
}

static void test_gather_scatter(void **state) {
    (void)state;
    for_sizes(rank_gather_scatter);
}

/* The root's parts as views of one buffer, and its own part of the
 * gather's input or the scatter's output in that buffer: at its own slot,
 * and at the next rank's, which that rank writes (gather) or reads
 * (scatter) meanwhile. */
static void rank_gather_scatter_aliased(distc_pg *pg, int rank, int size, void *arg) {
    (void)arg;
    const int64_t n = 100003; /* float32: 400 KB per rank */
    int64_t shape[1] = {n};
    DLTensor *all = dt_tensor_1d(DT_F32, n * size);
    DLTensor views[MAX_SIZE], *parts[MAX_SIZE];
    for (int r = 0; r < size; ++r) {
        views[r] = *all;
        views[r].shape = shape;
        views[r].byte_offset = (uint64_t)(r * n) * sizeof(float);
        parts[r] = &views[r];
    }
    for (int root = 0; root < size; ++root)
        for (int at = 0; at < (size > 1 ? 2 : 1); ++at) {
            const int slot = (root + at) % size; /* where the root's own part lies */
            DLTensor *in = filled(DT_F32, n, rank), *mine = in;
            if (rank == root) {
                for (int64_t i = 0; i < n * size; ++i) dt_set(all, i, -1);
                for (int64_t i = 0; i < n; ++i) dt_set(all, slot * n + i, (double)val(rank, i));
                mine = parts[slot];
            }
            if (RK_OK(distc_gather(NULL, pg, rank == root ? parts : NULL, mine, root, NULL)) && rank == root)
                CHECK_ALL(at ? "gather from the next rank's slot" : "gather from the root's own slot", all, n * size,
                          val((int)(i / n), i % n));
            if (rank == root)
                for (int64_t i = 0; i < n * size; ++i) dt_set(all, i, (double)(val((int)(i / n), i % n) + i / n));
            DLTensor *out = rank == root ? parts[slot] : in;
            if (RK_OK(distc_scatter(NULL, pg, out, rank == root ? (const DLTensor *const *)parts : NULL, root, NULL)))
                CHECK_ALL(at ? "scatter into the next rank's part" : "scatter into the root's own part", out, n,
                          val(rank, i) + rank);
            dt_tensor_free(in);
        }
    dt_tensor_free(all);
}

static void test_gather_scatter_aliased(void **state) {
    (void)state;
    for_sizes(rank_gather_scatter_aliased);
}

/* One rank of 4 broadcasts another size than the others. The non-roots all
 * fail. In place (shared memory, single copy) the root fails too, and no
 * rank reads the root's buffer first: the root frees it as soon as its call
 * fails (ASan would see the read; every rank hears from every other before
 * anyone reads). Through the rings or TCP the root only sends,
 * and may finish. */
static void rank_broadcast_bystander(distc_pg *pg, int rank, int size, void *arg) {
    (void)size;
    (void)arg;
    const int in_place = !env_is("DISTC_SHM", "0") && !env_is("DISTC_SHM_CMA_BYTES", "0");
    const int64_t n = 5000011 + (rank == 3 ? 4096 : 0); /* in place from 4 MiB */
    DLTensor *t = dt_tensor_1d(DT_U8, n);
    int rc = distc_broadcast(NULL, pg, t, 0, NULL);
    RK_CHECKF(rc == DISTC_EINVAL || rc == DISTC_EREMOTE || (rc == 0 && rank == 0 && !in_place),
              "rank %d: a broadcast of another size gave %d (%s)", rank, rc, distc_error_last());
    dt_tensor_free(t);
}

static void test_broadcast_bystander(void **state) {
    if (gloo_only()) skip(); /* Gloo cannot tell */
    (void)state;
    for (int k = 0; k < 3; ++k) dt_run_ranks(4, rank_broadcast_bystander, NULL);
}

/* Every rank's call returns although its peers call nothing more: each
 * rank then says so through the store and waits there for all the others.
 * A reader that read a piece offered in place must tell its writer at once
 * (the writer's call waits for that), not at its own next call, which here
 * would never come (shm_links.hpp). */
static void all_returned(int rank, int size, const char *op) {
    char key[64];
    static _Thread_local int round; /* keys of one store: new ones for each call */
    ++round;
    snprintf(key, sizeof key, "returned/%s/%d/%d/%d", op, size, round, rank);
    RK_OK(distc_store_set(dt_rank_store(), key, "1", 1));
    for (int r = 0; r < size; ++r) {
        distc_buf b = {0};
        snprintf(key, sizeof key, "returned/%s/%d/%d/%d", op, size, round, r);
        if (RK_OK(distc_store_get(&b, dt_rank_store(), key))) distc_buf_dispose(&b);
    }
}

static void rank_returns_alone(distc_pg *pg, int rank, int size, void *arg) {
    const int64_t part = *(const int64_t *)arg;
    const size_t total = (size_t)part * (size_t)size;
    DLTensor *in = dt_tensor_1d(DT_U8, part * size), *out = dt_tensor_1d(DT_U8, part * size);
    DLTensor ins[MAX_SIZE], outs[MAX_SIZE], *in_parts[MAX_SIZE], *out_parts[MAX_SIZE];
    int64_t shape[1] = {part};
    for (int r = 0; r < size; ++r) {
        ins[r] = *in;
        outs[r] = *out;
        ins[r].shape = outs[r].shape = shape;
        ins[r].byte_offset = outs[r].byte_offset = (uint64_t)(r * part);
        in_parts[r] = &ins[r];
        out_parts[r] = &outs[r];
    }
    uint8_t *p = in->data;
    for (int64_t i = 0; i < part * size; ++i) p[i] = (uint8_t)(i * 7 + rank);
    const uint8_t *q = out->data;
    RK_OK(distc_allreduce(NULL, pg, in, DISTC_MAX, NULL));
    all_returned(rank, size, "allreduce");
    for (int64_t i = 0; i < part * size; ++i) {
        uint8_t m = 0;
        for (int r = 0; r < size; ++r) m = (uint8_t)(i * 7 + r) > m ? (uint8_t)(i * 7 + r) : m;
        if (!RK_CHECKF(p[i] == m, "allreduce: byte %lld", (long long)i)) break;
    }
    for (int64_t i = 0; i < part * size; ++i) p[i] = (uint8_t)(i * 7 + rank);
    RK_OK(distc_broadcast(NULL, pg, in, 0, NULL));
    all_returned(rank, size, "broadcast");
    for (int64_t i = 0; i < part * size; ++i)
        if (!RK_CHECKF(p[i] == (uint8_t)(i * 7), "broadcast: byte %lld", (long long)i)) break;
    for (int64_t i = 0; i < part * size; ++i) p[i] = (uint8_t)(i * 7 + rank);
    RK_OK(distc_allgather(NULL, pg, out_parts, in_parts[rank], NULL));
    all_returned(rank, size, "allgather");
    for (int64_t i = 0; i < part * size; ++i)
        if (!RK_CHECKF(q[i] == (uint8_t)(i * 7 + i / part), "allgather: byte %lld", (long long)i)) break;
    memset(out->data, 0, total);
    RK_OK(distc_alltoall(NULL, pg, out_parts, (const DLTensor *const *)in_parts, NULL));
    all_returned(rank, size, "alltoall");
    for (int64_t i = 0; i < part * size; ++i) {
        int64_t from = i / part, at = rank * part + i % part;
        if (!RK_CHECKF(q[i] == (uint8_t)(at * 7 + from), "alltoall: byte %lld", (long long)i)) break;
    }
    RK_OK(distc_scatter(NULL, pg, out_parts[0], rank == 0 ? (const DLTensor *const *)in_parts : NULL, 0, NULL));
    all_returned(rank, size, "scatter");
    for (int64_t i = 0; i < part; ++i)
        if (!RK_CHECKF(q[i] == (uint8_t)((rank * part + i) * 7), "scatter: byte %lld", (long long)i)) break;
    RK_OK(distc_gather(NULL, pg, rank == 0 ? out_parts : NULL, in_parts[rank], 0, NULL));
    all_returned(rank, size, "gather");
    if (rank == 0)
        for (int64_t i = 0; i < part * size; ++i)
            if (!RK_CHECKF(q[i] == (uint8_t)(i * 7 + i / part), "gather: byte %lld", (long long)i)) break;
    dt_tensor_free(in);
    dt_tensor_free(out);
}

static void test_returns_alone(void **state) {
    (void)state;
    /* Parts read in place, and parts that go through the rings (offered in
     * place there with DISTC_SHM_CMA_BYTES=4096) */
    static const int64_t parts[] = {6000011, 20011};
    for (size_t k = 0; k < 2; ++k)
        for (int size = 2; size <= MAX_SIZE; ++size) dt_run_ranks(size, rank_returns_alone, (void *)&parts[k]);
}

/* A rank aborted (from another thread) while a peer copies into or out of
 * its buffer in place: the root of a broadcast writing its share into the
 * rank's buffer (each non-root's last 1/size), a gather's non-root writing
 * its part into the rank's, the root's, output, or a scatter's non-root
 * reading its part out of the root's input. The rank's call returns only
 * once no piece of that is under way, and the rank frees its buffer at
 * once, which ASan, or a fault where the freed buffer was unmapped, would
 * catch being used later. The peer fails, or had finished. Aborts at
 * several points of the call. */
enum { COPY_BROADCAST, COPY_GATHER, COPY_SCATTER };
struct aborter {
    distc_pg *pg;
    unsigned delay_us;
};
static void *abort_later(void *p) {
    const struct aborter *a = p;
    usleep(a->delay_us);
    distc_pg_abort(a->pg);
    return NULL;
}
struct abort_case {
    unsigned delay_us;
    int op;
};
static void rank_abort_while_written(distc_pg *pg, int rank, int size, void *arg) {
    const struct abort_case *c = arg;
    const int64_t n = 64 << 20, part = n / size;
    DLTensor *t = dt_tensor_1d(DT_U8, n), *mine = dt_tensor_1d(DT_U8, part);
    DLTensor views[MAX_SIZE], *parts[MAX_SIZE];
    int64_t shape[1] = {part};
    for (int r = 0; r < size; ++r) {
        views[r] = *t;
        views[r].shape = shape;
        views[r].byte_offset = (uint64_t)(r * part);
        parts[r] = &views[r];
    }
    struct aborter a = {pg, c->delay_us};
    pthread_t th;
    const int victim = rank == 1; /* rank 1: the broadcast's non-root, the gather's and scatter's root */
    if (victim && !RK_CHECKF(pthread_create(&th, NULL, abort_later, &a) == 0, "pthread_create")) return;
    /* The root's own part is in place already: it goes straight to waiting
     * for the peer's copy, which the abort then cuts short. */
    DLTensor *own = victim ? parts[1] : mine;
    int rc = c->op == COPY_BROADCAST ? distc_broadcast(NULL, pg, t, 0, NULL)
             : c->op == COPY_GATHER
                 ? distc_gather(NULL, pg, victim ? parts : NULL, own, 1, NULL)
                 : distc_scatter(NULL, pg, own, victim ? (const DLTensor *const *)parts : NULL, 1, NULL);
    RK_CHECKF(rc == 0 || rc == DISTC_EABORTED || rc == DISTC_EREMOTE, "rank %d: a %s aborted midway gave %d (%s)", rank,
              c->op == COPY_BROADCAST ? "broadcast"
              : c->op == COPY_GATHER  ? "gather"
                                      : "scatter",
              rc, distc_error_last());
    dt_tensor_free(t);
    dt_tensor_free(mine);
    if (victim) pthread_join(th, NULL);
}

static void test_abort_while_written(void **state) {
    if (gloo_only()) skip();
    (void)state;
    static const unsigned delays_us[] = {0, 300, 1000, 2000, 4000};
    for (int op = COPY_BROADCAST; op <= COPY_SCATTER; ++op)
        for (size_t k = 0; k < sizeof delays_us / sizeof delays_us[0]; ++k) {
            struct abort_case c = {delays_us[k], op};
            dt_run_ranks(2, rank_abort_while_written, &c);
        }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_allreduce),           cmocka_unit_test(test_reduce),
        cmocka_unit_test(test_reduce_scatter),      cmocka_unit_test(test_broadcast),
        cmocka_unit_test(test_broadcast_bystander), cmocka_unit_test(test_allgather),
        cmocka_unit_test(test_gather_scatter),      cmocka_unit_test(test_gather_scatter_aliased),
        cmocka_unit_test(test_alltoall_uneven),     cmocka_unit_test(test_alltoall_in_place),
        cmocka_unit_test(test_alltoall_disagree),   cmocka_unit_test(test_alltoall_bystander),
        cmocka_unit_test(test_abort_while_written), cmocka_unit_test(test_returns_alone),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/*
 * Bad arguments to every function of distc/pg.h and distc/work.h: each gives
 * DISTC_EINVAL (DISTC_ENOTFOUND for an unknown backend) with a message naming
 * the function and the argument, sends nothing (the group works afterwards)
 * and hands out no work. Also the group queries and the options initializers.
 *
 * The bad arguments to the collectives are in pg_args/collectives.c; this
 * file holds the rest: queries, options, creation, NULL pg, work handles.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pg_harness.h"
#include "test_util.h"

#include "pg_args/collectives.h"

/* The same as BAD (pg_args/collectives.c) on the main thread (cmocka assertions). */
#define MAIN_BAD(code, fn, needle, call)                \
    do {                                                \
        distc_work *w_ = NULL;                          \
        distc_work **OUT = NULL;                        \
        ASSERT_ERR(call, code, fn);                     \
        dt_assert_contains(distc_error_last(), needle); \
        OUT = &w_;                                      \
        ASSERT_ERR(call, code, fn);                     \
        dt_assert_contains(distc_error_last(), needle); \
        assert_null(w_);                                \
        (void)OUT;                                      \
    } while (0)

/* ------------------------------------------------------------- group queries */

static void rank_queries(distc_pg *pg, int rank, int size, void *arg) {
    (void)arg;
    int32_t r = -1, s = -1;
    const char *be = NULL, *name = NULL;
    int64_t tmo = 0;
    if (RK_OK(distc_pg_rank(&r, pg))) RK_EQ_INT(r, rank);
    if (RK_OK(distc_pg_size(&s, pg))) RK_EQ_INT(s, size);
    if (RK_OK(distc_pg_backend(&be, pg))) RK_EQ_STR(be, dt_backend());
    if (RK_OK(distc_pg_name(&name, pg))) RK_EQ_STR(name, dt_rank_group());
    if (RK_OK(distc_pg_timeout(&tmo, pg))) RK_EQ_INT(tmo, DT_PG_TIMEOUT_MS);
    RK_ERR2(distc_pg_rank(NULL, pg), DISTC_EINVAL, "distc_pg_rank", "out");
    RK_ERR2(distc_pg_size(NULL, pg), DISTC_EINVAL, "distc_pg_size", "out");
    RK_ERR2(distc_pg_backend(NULL, pg), DISTC_EINVAL, "distc_pg_backend", "out");
    RK_ERR2(distc_pg_name(NULL, pg), DISTC_EINVAL, "distc_pg_name", "out");
    RK_ERR2(distc_pg_timeout(NULL, pg), DISTC_EINVAL, "distc_pg_timeout", "out");
    const char *tr = NULL;
    if (RK_OK(distc_pg_transport(&tr, pg, rank))) RK_EQ_STR(tr, "self");
    if (size > 1 && RK_OK(distc_pg_transport(&tr, pg, (rank + 1) % size))) {
        /* The ranks share this host: shared memory on the built-in backend, unless turned off. */
        const char *off = getenv("DISTC_SHM"), *mesh = getenv("DISTC_MESH_BYTES");
        const char *want = strcmp(dt_backend(), "gloo") != 0 ? dt_backend()
                           : mesh && strcmp(mesh, "0") == 0  ? "gloo"
                           : off && strcmp(off, "0") == 0    ? "tcp"
                                                             : "shm";
        if (!mesh || strcmp(mesh, "0") == 0) RK_EQ_STR(tr, want);
    }
    RK_ERR2(distc_pg_transport(NULL, pg, 0), DISTC_EINVAL, "distc_pg_transport", "out");
    RK_ERR2(distc_pg_transport(&tr, pg, -1), DISTC_EINVAL, "distc_pg_transport", "peer -1 is not a rank");
    RK_ERR2(distc_pg_transport(&tr, pg, size), DISTC_EINVAL, "distc_pg_transport", "not a rank of the group");
    RK_ERR2(distc_pg_transport(&tr, NULL, 0), DISTC_EINVAL, "distc_pg_transport", "pg");
}

void test_queries(void **state) {
    (void)state;
    for (int size = 1; size <= MAX_SIZE; ++size) dt_run_ranks(size, rank_queries, NULL);
}

void test_queries_null_pg(void **state) {
    (void)state;
    int32_t i32;
    const char *str;
    int64_t i64;
    ASSERT_ERR(distc_pg_rank(&i32, NULL), DISTC_EINVAL, "distc_pg_rank");
    dt_assert_contains(distc_error_last(), "pg");
    ASSERT_ERR(distc_pg_size(&i32, NULL), DISTC_EINVAL, "distc_pg_size");
    ASSERT_ERR(distc_pg_backend(&str, NULL), DISTC_EINVAL, "distc_pg_backend");
    ASSERT_ERR(distc_pg_name(&str, NULL), DISTC_EINVAL, "distc_pg_name");
    ASSERT_ERR(distc_pg_timeout(&i64, NULL), DISTC_EINVAL, "distc_pg_timeout");
    dt_assert_contains(distc_error_last(), "pg is NULL");
    ASSERT_ERR(distc_pg_abort(NULL), DISTC_EINVAL, "distc_pg_abort");
    dt_assert_contains(distc_error_last(), "pg");
    /* No-ops. */
    distc_pg_free(NULL);
    distc_work_free(NULL);
}

/* Defaults: NULL options give "gloo", "default_pg" and 30 minutes. */
void test_defaults(void **state) {
    (void)state;
    distc_store *st = NULL;
    ASSERT_OK(distc_store_new_hash(&st));
    distc_pg *pg = NULL;
    ASSERT_OK(distc_pg_new(&pg, st, 0, 1, NULL));
    int32_t r = -1, s = -1;
    const char *be = NULL, *name = NULL;
    int64_t tmo = 0;
    ASSERT_OK(distc_pg_rank(&r, pg));
    ASSERT_OK(distc_pg_size(&s, pg));
    ASSERT_OK(distc_pg_backend(&be, pg));
    ASSERT_OK(distc_pg_name(&name, pg));
    ASSERT_OK(distc_pg_timeout(&tmo, pg));
    assert_int_equal(r, 0);
    assert_int_equal(s, 1);
    assert_string_equal(be, "gloo");
    assert_string_equal(name, "default_pg");
    assert_int_equal(tmo, DISTC_PG_DEFAULT_TIMEOUT_MS);
    assert_int_equal(DISTC_PG_DEFAULT_TIMEOUT_MS, 1800000);
    distc_pg_free(pg);

    /* Explicit options, backend named. */
    distc_pg_options o = DISTC_PG_OPTIONS_INIT;
    o.backend = "gloo";
    o.timeout_ms = 1234;
    o.group_name = "my_group";
    ASSERT_OK(distc_pg_new(&pg, st, 0, 1, &o));
    ASSERT_OK(distc_pg_name(&name, pg));
    assert_string_equal(name, "my_group");
    ASSERT_OK(distc_pg_timeout(&tmo, pg));
    assert_int_equal(tmo, 1234);
    ASSERT_OK(distc_pg_backend(&be, pg));
    assert_string_equal(be, "gloo");
    distc_pg_free(pg);
    distc_store_free(st);
}

void test_options_init(void **state) {
    (void)state;
    distc_pg_options po;
    memset(&po, 0x5a, sizeof po);
    ASSERT_OK(distc_pg_options_init(&po, DISTC_PG_OPTIONS_VERSION));
    assert_int_equal(po.version, DISTC_PG_OPTIONS_VERSION);
    assert_null(po.backend);
    assert_int_equal(po.timeout_ms, -1);
    assert_null(po.group_name);
    assert_int_equal(po.device, -1);
    /* A version-1 caller's struct ends before `device`: nothing past it is written. */
    memset(&po, 0x5a, sizeof po);
    ASSERT_OK(distc_pg_options_init(&po, 1));
    assert_int_equal(po.version, 1);
    assert_int_equal(po.timeout_ms, -1);
    assert_int_equal(po.device, 0x5a5a5a5a);
    ASSERT_ERR(distc_pg_options_init(&po, DISTC_PG_OPTIONS_VERSION + 1), DISTC_EINVAL, "distc_pg_options_init");
    dt_assert_contains(distc_error_last(), "version");
    ASSERT_ERR(distc_pg_options_init(NULL, DISTC_PG_OPTIONS_VERSION), DISTC_EINVAL, "opts");

    distc_op_options oo;
    memset(&oo, 0x5a, sizeof oo);
    ASSERT_OK(distc_op_options_init(&oo, DISTC_OP_OPTIONS_VERSION));
    assert_int_equal(oo.version, DISTC_OP_OPTIONS_VERSION);
    assert_int_equal(oo.timeout_ms, -1);
    assert_true(oo.premul_factor == 1.0);
    assert_null(oo.stream);
    memset(&oo, 0x5a, sizeof oo);
    ASSERT_OK(distc_op_options_init(&oo, 1));
    assert_int_equal(oo.version, 1);
    assert_true(oo.premul_factor == 1.0);
    assert_true(oo.stream == (void *)(uintptr_t)0x5a5a5a5a5a5a5a5aull);
    ASSERT_ERR(distc_op_options_init(&oo, 0), DISTC_EINVAL, "distc_op_options_init");
    dt_assert_contains(distc_error_last(), "version");
    ASSERT_ERR(distc_op_options_init(NULL, DISTC_OP_OPTIONS_VERSION), DISTC_EINVAL, "opts");
}

/* ------------------------------------------------------------- distc_pg_new */

void test_pg_new_bad_args(void **state) {
    (void)state;
    distc_store *st = NULL;
    ASSERT_OK(distc_store_new_hash(&st));
    distc_pg *pg = NULL;
    ASSERT_ERR(distc_pg_new(NULL, st, 0, 1, NULL), DISTC_EINVAL, "distc_pg_new");
    dt_assert_contains(distc_error_last(), "out");
    ASSERT_ERR(distc_pg_new(&pg, NULL, 0, 1, NULL), DISTC_EINVAL, "store");
    assert_null(pg);
    ASSERT_ERR(distc_pg_new(&pg, st, 4, 4, NULL), DISTC_EINVAL, "rank 4 is outside 0..3");
    dt_assert_contains(distc_error_last(), "distc_pg_new");
    ASSERT_ERR(distc_pg_new(&pg, st, 7, 4, NULL), DISTC_EINVAL, "rank 7 is outside 0..3");
    ASSERT_ERR(distc_pg_new(&pg, st, -1, 4, NULL), DISTC_EINVAL, "rank -1");
    ASSERT_ERR(distc_pg_new(&pg, st, 0, 0, NULL), DISTC_EINVAL, "size");
    ASSERT_ERR(distc_pg_new(&pg, st, 0, -3, NULL), DISTC_EINVAL, "size");
    assert_null(pg);

    distc_pg_options o = DISTC_PG_OPTIONS_INIT;
    o.backend = "nope";
    ASSERT_ERR(distc_pg_new(&pg, st, 0, 1, &o), DISTC_ENOTFOUND, "nope");
    dt_assert_contains(distc_error_last(), "distc_pg_new");
    o = (distc_pg_options)DISTC_PG_OPTIONS_INIT;
    o.version = 9;
    ASSERT_ERR(distc_pg_new(&pg, st, 0, 1, &o), DISTC_EINVAL, "version");
    o = (distc_pg_options)DISTC_PG_OPTIONS_INIT;
    o.timeout_ms = -5;
    ASSERT_ERR(distc_pg_new(&pg, st, 0, 1, &o), DISTC_EINVAL, "timeout_ms");
    o = (distc_pg_options)DISTC_PG_OPTIONS_INIT;
    o.group_name = "";
    ASSERT_ERR(distc_pg_new(&pg, st, 0, 1, &o), DISTC_EINVAL, "group_name");
    assert_null(pg);

    /* The failures left the store usable: a group of one meets in it. */
    ASSERT_OK(distc_pg_new(&pg, st, 0, 1, NULL));
    assert_non_null(pg);
    ASSERT_OK(distc_barrier(NULL, pg, NULL));
    distc_pg_free(pg);
    pg = NULL;

    ASSERT_ERR(distc_pg_new_from_url(NULL, "env://", NULL, NULL), DISTC_EINVAL, "distc_pg_new_from_url");
    dt_assert_contains(distc_error_last(), "out");
    ASSERT_ERR(distc_pg_new_from_url(&pg, NULL, NULL, NULL), DISTC_EINVAL, "url");
    o = (distc_pg_options)DISTC_PG_OPTIONS_INIT;
    o.version = 9;
    ASSERT_ERR(distc_pg_new_from_url(&pg, "env://", NULL, &o), DISTC_EINVAL, "version");
    assert_null(pg);
    distc_store_free(st);
}

/* -------------------------------------------------- NULL pg, on every call */

void test_null_pg_everywhere(void **state) {
    (void)state;
    DLTensor *t = dt_tensor_1d(DT_F32, 4);
    DLTensor *list[1] = {t};
    const DLTensor *cl[1] = {t};
    int64_t splits[1] = {4};
#define NULL_PG(fn, call) MAIN_BAD(DISTC_EINVAL, fn, "pg is NULL", call)
    NULL_PG("distc_allreduce", distc_allreduce(OUT, NULL, t, DISTC_SUM, NULL));
    NULL_PG("distc_allreduce_coalesced", distc_allreduce_coalesced(OUT, NULL, list, 1, DISTC_SUM, NULL));
    NULL_PG("distc_broadcast", distc_broadcast(OUT, NULL, t, 0, NULL));
    NULL_PG("distc_reduce", distc_reduce(OUT, NULL, t, 0, DISTC_SUM, NULL));
    NULL_PG("distc_allgather", distc_allgather(OUT, NULL, list, t, NULL));
    NULL_PG("distc_allgather_into_tensor", distc_allgather_into_tensor(OUT, NULL, t, t, NULL));
    NULL_PG("distc_gather", distc_gather(OUT, NULL, list, t, 0, NULL));
    NULL_PG("distc_scatter", distc_scatter(OUT, NULL, t, cl, 0, NULL));
    NULL_PG("distc_reduce_scatter", distc_reduce_scatter(OUT, NULL, t, cl, DISTC_SUM, NULL));
    NULL_PG("distc_reduce_scatter_tensor", distc_reduce_scatter_tensor(OUT, NULL, t, t, DISTC_SUM, NULL));
    NULL_PG("distc_alltoall", distc_alltoall(OUT, NULL, list, cl, NULL));
    NULL_PG("distc_alltoall_single", distc_alltoall_single(OUT, NULL, t, t, splits, splits, NULL));
    NULL_PG("distc_barrier", distc_barrier(OUT, NULL, NULL));
    NULL_PG("distc_send", distc_send(OUT, NULL, t, 1, 0, NULL));
    NULL_PG("distc_recv", distc_recv(OUT, NULL, t, 1, 0, NULL));
    NULL_PG("distc_recv", distc_recv(OUT, NULL, t, DISTC_ANY_SOURCE, 0, NULL));
#undef NULL_PG
    dt_tensor_free(t);
}

/* ------------------------------------------------------------- work handles */

static void noop_cb(distc_work *w, void *payload) {
    (void)w;
    (void)payload;
}

void test_work_null_and_bad_args(void **state) {
    (void)state;
    int32_t i32;
    int64_t i64;
    uint64_t u64;
    const char *msg;
    ASSERT_ERR(distc_work_test(NULL), DISTC_EINVAL, "distc_work_test");
    dt_assert_contains(distc_error_last(), "work");
    ASSERT_ERR(distc_work_wait(NULL, -1), DISTC_EINVAL, "distc_work_wait");
    dt_assert_contains(distc_error_last(), "work");
    ASSERT_ERR(distc_work_error(NULL, &msg), DISTC_EINVAL, "distc_work_error");
    dt_assert_contains(distc_error_last(), "work");
    ASSERT_ERR(distc_work_source_rank(&i32, NULL), DISTC_EINVAL, "distc_work_source_rank");
    dt_assert_contains(distc_error_last(), "work");
    ASSERT_ERR(distc_work_duration_ns(&i64, NULL), DISTC_EINVAL, "distc_work_duration_ns");
    dt_assert_contains(distc_error_last(), "work");
    ASSERT_ERR(distc_work_seq(&u64, NULL), DISTC_EINVAL, "distc_work_seq");
    dt_assert_contains(distc_error_last(), "work");
    ASSERT_ERR(distc_work_on_complete(NULL, noop_cb, NULL), DISTC_EINVAL, "distc_work_on_complete");
    dt_assert_contains(distc_error_last(), "work");

    /* A real handle, from a group of one. */
    distc_store *st = NULL;
    ASSERT_OK(distc_store_new_hash(&st));
    distc_pg *pg = NULL;
    ASSERT_OK(distc_pg_new(&pg, st, 0, 1, NULL));
    distc_work *w = NULL;
    ASSERT_OK(distc_barrier(&w, pg, NULL));
    assert_non_null(w);
    ASSERT_ERR(distc_work_wait(w, -5), DISTC_EINVAL, "distc_work_wait");
    dt_assert_contains(distc_error_last(), "timeout_ms");
    ASSERT_ERR(distc_work_wait(w, INT64_MIN), DISTC_EINVAL, "timeout_ms");
    ASSERT_OK(distc_work_wait(w, -1));
    ASSERT_ERR(distc_work_source_rank(NULL, w), DISTC_EINVAL, "distc_work_source_rank");
    dt_assert_contains(distc_error_last(), "out");
    ASSERT_ERR(distc_work_duration_ns(NULL, w), DISTC_EINVAL, "distc_work_duration_ns");
    dt_assert_contains(distc_error_last(), "out");
    ASSERT_ERR(distc_work_seq(NULL, w), DISTC_EINVAL, "distc_work_seq");
    dt_assert_contains(distc_error_last(), "out");
    ASSERT_ERR(distc_work_on_complete(w, NULL, NULL), DISTC_EINVAL, "distc_work_on_complete");
    dt_assert_contains(distc_error_last(), "cb");
    /* The bad calls did not use up the handle's one callback. */
    ASSERT_OK(distc_work_on_complete(w, noop_cb, NULL));
    ASSERT_OK(distc_work_error(w, NULL));
    /* The handle outlives its group (and the store). */
    distc_pg_free(pg);
    distc_store_free(st);
    ASSERT_OK(distc_work_test(w));
    ASSERT_OK(distc_work_seq(&u64, w));
    assert_int_equal(u64, 1);
    distc_work_free(w);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bad_collective_args),
        cmocka_unit_test(test_bad_root_lists),
        cmocka_unit_test(test_queries),
        cmocka_unit_test(test_queries_null_pg),
        cmocka_unit_test(test_defaults),
        cmocka_unit_test(test_options_init),
        cmocka_unit_test(test_pg_new_bad_args),
        cmocka_unit_test(test_null_pg_everywhere),
        cmocka_unit_test(test_work_null_and_bad_args),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/*
 * The backend plugin ABI (distc/sys/backend.h): registration and its checks,
 * plugin libraries found through DISTC_PLUGIN_PATH and the clear failures of
 * broken ones, work completed by a backend from any thread (hooks, failure
 * messages, stream-ordered blocking calls, a backend that never completes),
 * memory kinds, splits through the engine, and the host helpers.
 *
 * CTest sets DISTC_PLUGIN_PATH to the directory of the test plugins.
 *
 * The backend under the test's control is in backend_plugin/controlled.c.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "loopback_backend.h"
#include "pg_harness.h"
#include "test_util.h"

#include "backend_plugin/backend_plugin.h"

distc_pg *new_group(const char *backend, int expect_rc, const char *needle) {
    distc_store *st = NULL;
    ASSERT_OK(distc_store_new_hash(&st));
    distc_pg_options o = DISTC_PG_OPTIONS_INIT;
    o.backend = backend;
    o.timeout_ms = 5000;
    distc_pg *pg = NULL;
    if (expect_rc == 0)
        ASSERT_OK(distc_pg_new(&pg, st, 0, 1, &o));
    else
        ASSERT_ERR(distc_pg_new(&pg, st, 0, 1, &o), expect_rc, needle);
    distc_store_free(st);
    return pg;
}

DLTensor tensor_f32(float *data, int64_t *shape) {
    DLTensor t = {data, {kDLCPU, 0}, 1, {kDLFloat, 32, 1}, shape, NULL, 0};
    return t;
}

/* ------------------------------------------------------------ registration */

int ok_create(void **g, const distc_backend_group_info *info, void *payload) {
    (void)info;
    *g = payload ? payload : (void *)1;
    return 0;
}
void ok_destroy(void *g) { (void)g; }

static void test_register_checks(void **state) {
    (void)state;
    distc_backend_ops ops = {.version = DISTC_BACKEND_OPS_VERSION,
                             .device_types = DISTC_DEVICE_BIT(kDLCPU),
                             .create = ok_create,
                             .destroy = ok_destroy};
    ASSERT_ERR(distc_backend_register(NULL, &ops, NULL), DISTC_EINVAL, "name");
    ASSERT_ERR(distc_backend_register("reg_a", NULL, NULL), DISTC_EINVAL, "ops");
    ASSERT_ERR(distc_backend_register("Bad Name", &ops, NULL), DISTC_EINVAL, "[a-z0-9_-]");
    ASSERT_ERR(distc_backend_register("", &ops, NULL), DISTC_EINVAL, "backend name");
    ASSERT_ERR(distc_backend_register("gloo", &ops, NULL), DISTC_ESTATE, "already exists");
    distc_backend_ops bad = ops;
    bad.version = 0;
    ASSERT_ERR(distc_backend_register("reg_a", &bad, NULL), DISTC_EINVAL, "version");
    bad.version = DISTC_BACKEND_OPS_VERSION + 1;
    ASSERT_ERR(distc_backend_register("reg_a", &bad, NULL), DISTC_EINVAL, "rebuild");
    bad = ops;
    bad.create = NULL;
    ASSERT_ERR(distc_backend_register("reg_a", &bad, NULL), DISTC_EINVAL, "create");
    bad = ops;
    bad.device_types = 0;
    ASSERT_ERR(distc_backend_register("reg_a", &bad, NULL), DISTC_EINVAL, "device_types");
    ASSERT_OK(distc_backend_register("reg_a", &ops, NULL));
    ASSERT_ERR(distc_backend_register("reg_a", &ops, NULL), DISTC_ESTATE, "reg_a");

    /* Every operation it lacks is DISTC_ENOTSUP naming the backend and the operation. */
    distc_pg *pg = new_group("reg_a", 0, NULL);
    const char *be = NULL;
    ASSERT_OK(distc_pg_backend(&be, pg));
    assert_string_equal(be, "reg_a");
    float x[4] = {1, 2, 3, 4};
    int64_t shape = 4;
    DLTensor t = tensor_f32(x, &shape);
    ASSERT_ERR(distc_allreduce(NULL, pg, &t, DISTC_SUM, NULL), DISTC_ENOTSUP, "reg_a");
    dt_assert_contains(distc_error_last(), "allreduce");
    ASSERT_ERR(distc_barrier(NULL, pg, NULL), DISTC_ENOTSUP, "barrier");
    DLTensor *list[1] = {&t};
    ASSERT_ERR(distc_allgather(NULL, pg, list, &t, NULL), DISTC_ENOTSUP, "allgather");
    distc_pg_free(pg);
}

static void test_unknown_backend(void **state) {
    (void)state;
    new_group("nosuch", DISTC_ENOTFOUND, "libdistc-nosuch.so");
    dt_assert_contains(distc_error_last(), "DISTC_PLUGIN_PATH");
    new_group("No/Such", DISTC_EINVAL, "backend name");
}

/* "<backend>://": rank and size from the engine; refused for a backend without a world of its own. */
static void test_engine_world_urls(void **state) {
    (void)state;
    distc_pg *pg = NULL;
    ASSERT_ERR(distc_pg_new_from_url(&pg, "looptest://", NULL, NULL), DISTC_ENOTSUP, "no world of its own");
    ASSERT_ERR(distc_pg_new_from_url(&pg, "nosuch://", NULL, NULL), DISTC_ENOTFOUND, "libdistc-nosuch.so");
    distc_pg_options o = DISTC_PG_OPTIONS_INIT;
    o.backend = "gloo";
    ASSERT_ERR(distc_pg_new_from_url(&pg, "looptest://", NULL, &o), DISTC_EINVAL, "names the looptest backend");
    assert_null(pg);
}

/* ----------------------------------------------------------------- plugins */

static void test_plugin_from_path(void **state) {
    (void)state;
    distc_pg *pg = new_group("looptest", 0, NULL);
    const char *be = NULL;
    ASSERT_OK(distc_pg_backend(&be, pg));
    assert_string_equal(be, "looptest");
    float x[3] = {1, 2, 3};
    int64_t shape = 3;
    DLTensor t = tensor_f32(x, &shape);
    distc_op_options oo = DISTC_OP_OPTIONS_INIT;
    oo.premul_factor = 2.0;
    ASSERT_OK(distc_allreduce(NULL, pg, &t, DISTC_PREMUL_SUM, &oo));
    assert_true(x[0] == 2 && x[1] == 4 && x[2] == 6);
    distc_work *w = NULL;
    ASSERT_OK(distc_allreduce(&w, pg, &t, DISTC_AVG, NULL));
    ASSERT_OK(distc_work_wait(w, -1));
    /* Host work: waiting "on a stream" waits on the host. */
    ASSERT_OK(distc_work_wait_stream(w, NULL));
    distc_work_free(w);
    /* A second group reuses the loaded library. */
    distc_pg *pg2 = new_group("looptest", 0, NULL);
    distc_pg_free(pg2);
    distc_pg_free(pg);
}

/* The test's plugin directory: the last entry of DISTC_PLUGIN_PATH (CTest sets it). */
static void plugin_file(char *out, size_t n, const char *file) {
    const char *p = getenv("DISTC_PLUGIN_PATH");
    if (!p) fail_msg("DISTC_PLUGIN_PATH must be set (CTest sets it)");
    const char *dir = strrchr(p, ':') ? strrchr(p, ':') + 1 : p;
    snprintf(out, n, "%s/%s", dir, file);
}

/* A plugin loaded from a file under a name of the program's choosing. */
static void test_plugin_load(void **state) {
    (void)state;
    char path[4096], noinit[4096];
    plugin_file(path, sizeof path, "libdistc-looptest.so");
    plugin_file(noinit, sizeof noinit, "libdistc-noinit.so");
    ASSERT_OK(distc_plugin_load("my-loop", path));
    distc_pg *pg = new_group("my-loop", 0, NULL);
    const char *be = NULL;
    ASSERT_OK(distc_pg_backend(&be, pg));
    assert_string_equal(be, "my-loop");
    float x[3] = {1, 2, 3};
    int64_t shape = 3;
    DLTensor t = tensor_f32(x, &shape);
    ASSERT_OK(distc_allreduce(NULL, pg, &t, DISTC_SUM, NULL));
    assert_true(x[0] == 1 && x[2] == 3);
    distc_pg_free(pg);
    ASSERT_ERR(distc_plugin_load("my-loop", path), DISTC_ESTATE, "already exists");
    ASSERT_ERR(distc_plugin_load("gloo", path), DISTC_ESTATE, "already exists");
    ASSERT_ERR(distc_plugin_load("other", "/nonexistent/libx.so"), DISTC_ENOTFOUND, "/nonexistent/libx.so");
    ASSERT_ERR(distc_plugin_load("other", noinit), DISTC_EBACKEND, "not a distc plugin");
    ASSERT_ERR(distc_plugin_load("Bad Name", path), DISTC_EINVAL, "name");
    ASSERT_ERR(distc_plugin_load(NULL, path), DISTC_EINVAL, "name");
    ASSERT_ERR(distc_plugin_load("other", NULL), DISTC_EINVAL, "path");
    ASSERT_ERR(distc_plugin_load("other", ""), DISTC_EINVAL, "empty");
    /* A failed load leaves the name free. */
    ASSERT_OK(distc_plugin_load("other", path));
}

static void test_broken_plugins(void **state) {
    (void)state;
    new_group("badversion", DISTC_EBACKEND, "vtable version");
    dt_assert_contains(distc_error_last(), "libdistc-badversion.so");
    new_group("refuse", DISTC_EBACKEND, "refused to start");
    dt_assert_contains(distc_error_last(), "no engine device found");
    new_group("noinit", DISTC_EBACKEND, "not a distc plugin");
    new_group("needsmissing", DISTC_EBACKEND, "libdistc_test_gone.so");
    dt_assert_contains(distc_error_last(), "cannot load");
}

/* -------------------------------------------- creation that fails, then a retry */

/* Rank 0 fails at once (no device, say); the others wait in the store for
 * what rank 0 would have published (an NCCL unique id): without the
 * failure announced, they would wait out the store's timeout. */
static int half_create(void **g, const distc_backend_group_info *info, void *payload) {
    (void)payload;
    if (info->rank == 0) return distc_error_set(DISTC_EBACKEND, "no device on rank 0 (test)");
    distc_buf id = {0};
    int rc = distc_store_get(&id, info->store, "unique_id");
    distc_buf_dispose(&id);
    if (rc < 0) return rc;
    *g = (void *)1;
    return 0;
}

static void retry_rank(distc_store *store, int rank, int size, void *arg) {
    (void)arg;
    distc_pg_options o = DISTC_PG_OPTIONS_INIT;
    o.group_name = "retried";
    o.backend = "half_fails";
    distc_pg *pg = NULL;
    int rc = distc_pg_new(&pg, store, rank, size, &o);
    if (rank == 0)
        RK_CHECKF(rc == DISTC_EBACKEND && strstr(distc_error_last(), "no device on rank 0"),
                  "rank 0's own failure: %d %s", rc, distc_error_last());
    else
        RK_CHECKF(rc == DISTC_EREMOTE && strstr(distc_error_last(), "rank 0: ") &&
                      strstr(distc_error_last(), "no device on rank 0"),
                  "rank %d did not learn of rank 0's failure: %d %s", rank, rc, distc_error_last());
    RK_CHECK(pg == NULL);
    /* The same name again, on gloo: every rank must land on the same instance. */
    o.backend = "gloo";
    if (RK_OK(distc_pg_new(&pg, store, rank, size, &o))) {
        int32_t v = rank + 1;
        int64_t one = 1;
        DLTensor t = {&v, {kDLCPU, 0}, 1, {kDLInt, 32, 1}, &one, NULL, 0};
        if (RK_OK(distc_allreduce(NULL, pg, &t, DISTC_SUM, NULL))) RK_EQ_INT(v, size * (size + 1) / 2);
        distc_pg_free(pg);
    }
}

/* "Try the engine, fall back to gloo" on one group name, 20 times at 2 and at 4 ranks: never a hang. */
static void test_failed_creation_then_retry(void **state) {
    (void)state;
    distc_backend_ops ops = {.version = DISTC_BACKEND_OPS_VERSION,
                             .device_types = DISTC_DEVICE_BIT(kDLCPU),
                             .create = half_create,
                             .destroy = ok_destroy};
    ASSERT_OK(distc_backend_register("half_fails", &ops, NULL));
    for (int size = 2; size <= 4; size += 2) {
        distc_store *st = NULL;
        ASSERT_OK(distc_store_new_hash(&st));
        for (int rep = 0; rep < 20; ++rep) {
            if (dt_run_threads(st, size, retry_rank, NULL) != 0)
                fail_msg("repetition %d at %d ranks failed", rep, size);
        }
        distc_store_free(st);
    }
}

/* -------------------------------------------------------------- splitting */

static void test_split_through_engine(void **state) {
    (void)state;
    ASSERT_OK(loopback_backend_register("loopback"));
    distc_pg *pg = new_group("loopback", 0, NULL);
    int before = loopback_splits;
    distc_pg *sub = NULL;
    ASSERT_OK(distc_pg_split(&sub, pg, 3, 0, NULL));
    assert_non_null(sub);
    assert_int_equal(loopback_splits, before + 1);
    const char *be = NULL;
    ASSERT_OK(distc_pg_backend(&be, sub));
    assert_string_equal(be, "loopback");
    float x[2] = {1, 2};
    int64_t shape = 2;
    DLTensor t = tensor_f32(x, &shape);
    ASSERT_OK(distc_allreduce(NULL, sub, &t, DISTC_MAX, NULL));
    distc_pg *none = (distc_pg *)&none;
    ASSERT_OK(distc_pg_split(&none, pg, DISTC_SPLIT_NOCOLOR, 0, NULL));
    assert_null(none);
    assert_int_equal(loopback_splits, before + 2);
    int32_t ranks[1] = {0};
    distc_pg *nsub = NULL;
    ASSERT_OK(distc_pg_new_subgroup(&nsub, pg, ranks, 1, NULL));
    assert_non_null(nsub);
    assert_int_equal(loopback_splits, before + 3);
    /* Byte collectives of a host-memory plugin backend go through its own collectives. */
    distc_buf out[1];
    ASSERT_OK(distc_all_gather_bytes(out, nsub, "abc", 3, NULL));
    assert_int_equal(out[0].size, 3);
    assert_memory_equal(out[0].data, "abc", 3);
    distc_buf_dispose(&out[0]);
    distc_pg_free(nsub);
    distc_pg_free(sub);
    distc_pg_free(pg);
}

/* ----------------------------------------------------------- host helpers */

static void test_host_helpers(void **state) {
    (void)state;
    assert_int_equal(distc_dtype_size(DISTC_DTYPE_BFLOAT16), 2);
    assert_int_equal(distc_dtype_size(DISTC_DTYPE_COMPLEX128), 16);
    assert_int_equal(distc_dtype_size(99), 0);
    assert_string_equal(distc_dtype_name(DISTC_DTYPE_FLOAT32), "float32");
    assert_string_equal(distc_dtype_name(-1), "unknown");

    int32_t a[3] = {1, 5, -2}, b[3] = {4, 2, -3};
    ASSERT_OK(distc_backend_combine(a, b, 3, DISTC_DTYPE_INT32, DISTC_MAX));
    assert_true(a[0] == 4 && a[1] == 5 && a[2] == -2);
    uint16_t h[2] = {dt_float_to_half(65504.0f), dt_float_to_half(1.5f)};
    uint16_t k[2] = {dt_float_to_half(-65504.0f), dt_float_to_half(2.25f)};
    ASSERT_OK(distc_backend_combine(h, k, 2, DISTC_DTYPE_FLOAT16, DISTC_SUM));
    assert_true(dt_half_to_float(h[0]) == 0.0f && dt_half_to_float(h[1]) == 3.75f);
    float c[2] = {1, 2};
    ASSERT_ERR(distc_backend_combine(c, c, 1, DISTC_DTYPE_COMPLEX64, DISTC_MIN), DISTC_EINVAL, "complex");
    ASSERT_ERR(distc_backend_combine(c, c, 2, DISTC_DTYPE_FLOAT32, DISTC_BXOR), DISTC_EINVAL, "integer or bool");
    ASSERT_ERR(distc_backend_combine(c, c, 2, 42, DISTC_SUM), DISTC_EINVAL, "dtype");
    ASSERT_ERR(distc_backend_combine(c, c, 2, DISTC_DTYPE_FLOAT32, 77), DISTC_EINVAL, "op");
    ASSERT_ERR(distc_backend_combine(NULL, c, 2, DISTC_DTYPE_FLOAT32, DISTC_SUM), DISTC_EINVAL, "NULL");
    ASSERT_OK(distc_backend_combine(NULL, NULL, 0, DISTC_DTYPE_FLOAT32, DISTC_SUM));

    int64_t v[2] = {7, -7};
    ASSERT_OK(distc_backend_scale(v, 2, DISTC_DTYPE_INT64, 0.5));
    assert_true(v[0] == 3 && v[1] == -3); /* toward zero, as torch's AVG */
    uint8_t flag = 1;
    ASSERT_ERR(distc_backend_scale(&flag, 1, DISTC_DTYPE_BOOL, 2.0), DISTC_EINVAL, "bool");
    ASSERT_ERR(distc_backend_scale(NULL, 1, DISTC_DTYPE_INT64, 2.0), DISTC_EINVAL, "NULL");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_register_checks),
        cmocka_unit_test(test_unknown_backend),
        cmocka_unit_test(test_engine_world_urls),
        cmocka_unit_test(test_plugin_from_path),
        cmocka_unit_test(test_plugin_load),
        cmocka_unit_test(test_broken_plugins),
        cmocka_unit_test(test_work_completed_by_backend),
        cmocka_unit_test(test_blocking_calls_completed_racing_thread_exit),
        cmocka_unit_test(test_failed_creation_then_retry),
        cmocka_unit_test(test_backend_never_completes),
        cmocka_unit_test(test_stream_ordered_and_devices),
        cmocka_unit_test(test_split_through_engine),
        cmocka_unit_test(test_host_helpers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

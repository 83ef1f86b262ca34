/* Custom stores (distc/sys/store.h): a small vtable store implemented here, run
 * through the whole store suite natively and through distc's emulations.
 * The store is in custom_store/cstore.c; this file holds the tests. */
#define _GNU_SOURCE
#include "store_suite.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "custom_store/cstore.h"

/* ------------------------------------------------------------------------ */

static int setup_full(void **state) {
    struct cstore *c = cstore_new(NULL);
    distc_store *s = NULL;
    if (distc_store_new_custom(&s, &full_vt, c) != 0) return -1;
    *state = s;
    return 0;
}

static int setup_emulated(void **state) {
    struct cstore *c = cstore_new(NULL);
    distc_store *s = NULL;
    if (distc_store_new_custom(&s, &emulated_vt, c) != 0) return -1;
    *state = s;
    return 0;
}

static int teardown(void **state) {
    distc_store_free(*state);
    return 0;
}

/* Every public operation reaches its own callback when the vtable has it. */
static void test_every_op_goes_through(void **state) {
    (void)state;
    struct cstore *c;
    int freed = 0;
    distc_store *s = make(&full_vt, &c, &freed);
    int32_t i32;
    int64_t i64;
    distc_buf b = {NULL, 0};
    const char *keys[] = {"a", "b"};
    const void *vals[] = {"1", "2"};
    const size_t lens[] = {1, 1};
    distc_buf out[2];
    memset(out, 0, sizeof out);

    ASSERT_OK(distc_store_set(s, "k", "v", 1));
    assert_int_equal(calls(c, OP_SET), 1);
    ASSERT_OK(distc_store_get(&b, s, "k"));
    assert_int_equal(calls(c, OP_GET), 1);
    assert_memory_equal(b.data, "v", 1);
    distc_buf_dispose(&b);
    ASSERT_OK(distc_store_add(&i64, s, "n", 3));
    assert_int_equal(calls(c, OP_ADD), 1);
    assert_int_equal(i64, 3);
    ASSERT_OK(distc_store_compare_set(&b, s, "k", "v", 1, "w", 1));
    assert_int_equal(calls(c, OP_CAS), 1);
    assert_memory_equal(b.data, "w", 1);
    distc_buf_dispose(&b);
    ASSERT_OK(distc_store_check(&i32, s, keys, 1));
    assert_int_equal(calls(c, OP_CHECK), 1);
    assert_int_equal(i32, 0);
    ASSERT_OK(distc_store_multi_set(s, keys, vals, lens, 2));
    assert_int_equal(calls(c, OP_MULTI_SET), 1);
    assert_int_equal(calls(c, OP_SET), 1); /* native: no per-key set */
    ASSERT_OK(distc_store_wait(s, keys, 2, 1000));
    assert_int_equal(calls(c, OP_WAIT), 1);
    assert_int_equal(calls(c, OP_CHECK), 1); /* native: no polling */
    ASSERT_OK(distc_store_multi_get(out, s, keys, 2));
    assert_int_equal(calls(c, OP_MULTI_GET), 1);
    assert_int_equal(calls(c, OP_GET), 1);
    assert_memory_equal(out[1].data, "2", 1);
    distc_buf_dispose(&out[0]);
    distc_buf_dispose(&out[1]);
    ASSERT_OK(distc_store_append(s, "k", "x", 1));
    assert_int_equal(calls(c, OP_APPEND), 1);
    assert_int_equal(calls(c, OP_CAS), 1); /* native: no compare_set loop */
    ASSERT_OK(distc_store_delete_key(&i32, s, "k"));
    assert_int_equal(calls(c, OP_DELETE), 1);
    assert_int_equal(i32, 1);
    ASSERT_OK(distc_store_num_keys(&i64, s));
    assert_int_equal(calls(c, OP_NUM_KEYS), 1);
    assert_int_equal(i64, 3); /* n, a, b */

    /* The default timeout reaches get, wait and multi_get. */
    ASSERT_OK(distc_store_set_timeout(s, 150));
    int64_t t0 = dt_now_ms();
    ASSERT_ERR(distc_store_get(&b, s, "nope"), DISTC_ETIMEOUT, "nope");
    const char *nope = "nope";
    ASSERT_ERR(distc_store_wait(s, &nope, 1, DISTC_TIMEOUT_DEFAULT), DISTC_ETIMEOUT, "nope");
    ASSERT_ERR(distc_store_multi_get(out, s, &nope, 1), DISTC_ETIMEOUT, "nope");
    assert_true(dt_now_ms() - t0 < 5000);

    distc_store_free(s);
    assert_int_equal(freed, 1);
}

/* Without the optional entries distc emulates them through the required ones. */
static void test_emulations(void **state) {
    (void)state;
    struct cstore *c;
    distc_store *s = make(&emulated_vt, &c, NULL);
    const char *keys[] = {"a", "b", "c"};
    const void *vals[] = {"1", "2", "3"};
    const size_t lens[] = {1, 1, 1};

    /* multi_set via set. */
    ASSERT_OK(distc_store_multi_set(s, keys, vals, lens, 3));
    assert_int_equal(calls(c, OP_SET), 3);
    /* multi_get via get. */
    distc_buf out[3];
    memset(out, 0, sizeof out);
    ASSERT_OK(distc_store_multi_get(out, s, keys, 3));
    assert_int_equal(calls(c, OP_GET), 3);
    for (int i = 0; i < 3; ++i) {
        assert_int_equal(out[i].size, 1);
        assert_memory_equal(out[i].data, vals[i], 1);
        distc_buf_dispose(&out[i]);
    }
    /* append via check + get + compare_set. */
    int cas0 = calls(c, OP_CAS);
    ASSERT_OK(distc_store_append(s, "log", "ab", 2));
    ASSERT_OK(distc_store_append(s, "log", "cd", 2));
    assert_true(calls(c, OP_CAS) >= cas0 + 2);
    dt_expect_str(s, "log", "abcd");
    /* wait via polling check. */
    int check0 = calls(c, OP_CHECK);
    ASSERT_OK(distc_store_wait(s, keys, 3, 1000));
    assert_true(calls(c, OP_CHECK) > check0);
    const char *missing = "missing_one";
    int64_t t0 = dt_now_ms();
    ASSERT_ERR(distc_store_wait(s, &missing, 1, 200), DISTC_ETIMEOUT, "missing_one");
    assert_true(dt_now_ms() - t0 < 5000);
    assert_true(calls(c, OP_CHECK) > check0 + 1);
    /* A failing get in the middle of an emulated multi_get leaves nothing allocated. */
    const char *k2[] = {"a", "b", "c"};
    memset(out, 0, sizeof out);
    inject(c, OP_GET, DISTC_EREMOTE, "a get fails");
    ASSERT_ERR(distc_store_multi_get(out, s, k2, 3), DISTC_EREMOTE, "a get fails");
    for (int i = 0; i < 3; ++i) assert_null(out[i].data);
    /* A failing set in an emulated multi_set is reported. */
    inject(c, OP_SET, DISTC_EIO, "disk full");
    ASSERT_ERR(distc_store_multi_set(s, keys, vals, lens, 3), DISTC_EIO, "disk full");
    distc_store_free(s);
}

/* Missing optional entries that cannot be emulated give DISTC_ENOTSUP. */
static void test_minimal_vtable(void **state) {
    (void)state;
    struct cstore *c;
    distc_store *s = make(&minimal_vt, &c, NULL);
    int32_t i32;
    int64_t i64;
    const char *keys[] = {"a", "b"};
    dt_set_str(s, "a", "1");
    dt_expect_str(s, "a", "1");
    ASSERT_OK(distc_store_add(&i64, s, "n", 2));

    ASSERT_ERR(distc_store_compare_set(NULL, s, "a", "1", 1, "2", 1), DISTC_ENOTSUP, "compare_set");
    dt_assert_contains(distc_error_last(), "distc_store_compare_set");
    ASSERT_ERR(distc_store_check(&i32, s, keys, 1), DISTC_ENOTSUP, "check");
    ASSERT_ERR(distc_store_delete_key(&i32, s, "a"), DISTC_ENOTSUP, "delete_key");
    ASSERT_ERR(distc_store_num_keys(&i64, s), DISTC_ENOTSUP, "num_keys");
    ASSERT_ERR(distc_store_append(s, "a", "x", 1), DISTC_ENOTSUP, "append");
    ASSERT_ERR(distc_store_wait(s, keys, 1, 100), DISTC_ENOTSUP, "wait");
    dt_expect_str(s, "a", "1"); /* nothing changed */

    /* multi_get and multi_set still work, through get and set. */
    const void *vals[] = {"x", "y"};
    const size_t lens[] = {1, 1};
    ASSERT_OK(distc_store_multi_set(s, keys, vals, lens, 2));
    distc_buf out[2];
    memset(out, 0, sizeof out);
    ASSERT_OK(distc_store_multi_get(out, s, keys, 2));
    assert_memory_equal(out[0].data, "x", 1);
    assert_memory_equal(out[1].data, "y", 1);
    distc_buf_dispose(&out[0]);
    distc_buf_dispose(&out[1]);
    distc_store_free(s);
}

/* An error code and a distc_error_set message from a callback reach the caller. */
static void test_callback_errors(void **state) {
    (void)state;
    struct cstore *c;
    distc_store *s = make(&full_vt, &c, NULL);
    distc_buf b = {NULL, 0};
    int32_t i32;
    int64_t i64 = 99;
    const char *keys[] = {"a"};
    const void *vals[] = {"1"};
    const size_t lens[] = {1};
    distc_buf out[1] = {{NULL, 0}};

    inject(c, OP_SET, DISTC_EREMOTE, "etcd is down");
    ASSERT_ERR(distc_store_set(s, "k", "v", 1), DISTC_EREMOTE, "etcd is down");
    dt_assert_contains(distc_error_last(), "distc_store_set");
    assert_int_equal(distc_error_last_code(), DISTC_EREMOTE);

    dt_set_str(s, "k", "v");
    inject(c, OP_GET, DISTC_EIO, "read failed");
    ASSERT_ERR(distc_store_get(&b, s, "k"), DISTC_EIO, "read failed");
    assert_null(b.data);
    inject(c, OP_ADD, DISTC_EABORTED, "add aborted");
    ASSERT_ERR(distc_store_add(&i64, s, "n", 1), DISTC_EABORTED, "add aborted");
    assert_int_equal(i64, 99);
    inject(c, OP_CAS, DISTC_EPROTO, "cas broke");
    ASSERT_ERR(distc_store_compare_set(&b, s, "k", "v", 1, "w", 1), DISTC_EPROTO, "cas broke");
    assert_null(b.data);
    inject(c, OP_CHECK, DISTC_ESTATE, "check state");
    ASSERT_ERR(distc_store_check(&i32, s, keys, 1), DISTC_ESTATE, "check state");
    inject(c, OP_WAIT, DISTC_EBACKEND, "wait backend");
    ASSERT_ERR(distc_store_wait(s, keys, 1, 10), DISTC_EBACKEND, "wait backend");
    inject(c, OP_DELETE, DISTC_ENOTFOUND, "delete nf");
    ASSERT_ERR(distc_store_delete_key(&i32, s, "k"), DISTC_ENOTFOUND, "delete nf");
    inject(c, OP_NUM_KEYS, DISTC_EIO, "count io");
    ASSERT_ERR(distc_store_num_keys(&i64, s), DISTC_EIO, "count io");
    inject(c, OP_APPEND, DISTC_ENOMEM, "append full");
    ASSERT_ERR(distc_store_append(s, "k", "x", 1), DISTC_ENOMEM, "append full");
    inject(c, OP_MULTI_SET, DISTC_EREMOTE, "mset remote");
    ASSERT_ERR(distc_store_multi_set(s, keys, vals, lens, 1), DISTC_EREMOTE, "mset remote");
    dt_set_str(s, "a", "1");
    inject(c, OP_MULTI_GET, DISTC_EREMOTE, "mget remote");
    ASSERT_ERR(distc_store_multi_get(out, s, keys, 1), DISTC_EREMOTE, "mget remote");
    assert_null(out[0].data);

    /* A native multi_get that hands back a partial result and then fails:
     * distc releases what it got and gives the caller nothing. */
    ASSERT_OK(distc_store_set_timeout(s, 50));
    const char *k2[] = {"a", "missing"};
    distc_buf out2[2];
    memset(out2, 0, sizeof out2);
    ASSERT_ERR(distc_store_multi_get(out2, s, k2, 2), DISTC_ETIMEOUT, "missing");
    assert_null(out2[0].data);
    assert_null(out2[1].data);

    /* A failure without a message still gives a code and a message. */
    inject(c, OP_SET, DISTC_EIO, NULL);
    ASSERT_ERR(distc_store_set(s, "k", "v", 1), DISTC_EIO, "distc_store_set");
    assert_true(strlen(distc_error_last()) > strlen("distc_store_set: "));
    /* A stale message of another code is not reported as this failure's. */
    distc_error_set(DISTC_EPROTO, "stale message");
    inject(c, OP_SET, DISTC_EIO, NULL);
    ASSERT_ERR(distc_store_set(s, "k", "v", 1), DISTC_EIO, "distc_store_set");
    assert_null(strstr(distc_error_last(), "stale message"));
    /* A positive code from a callback is a bug in the callback, reported as such. */
    inject(c, OP_SET, 7, NULL);
    ASSERT_ERR(distc_store_set(s, "k", "v", 1), DISTC_EINTERNAL, "positive");

    /* After all that the store works. */
    dt_set_str(s, "k", "fine");
    dt_expect_str(s, "k", "fine");
    distc_store_free(s);
}

/* A get callback that times out without a message: distc still names the key. */
static int quiet_get(void *payload, const char *key, int64_t timeout_ms, distc_buf *outb) {
    (void)payload, (void)key, (void)timeout_ms, (void)outb;
    return DISTC_ETIMEOUT;
}

static void test_quiet_timeout_names_key(void **state) {
    (void)state;
    distc_store_vtable vt = minimal_vt;
    vt.get = quiet_get;
    struct cstore *c = cstore_new(NULL);
    distc_store *s = NULL;
    ASSERT_OK(distc_store_new_custom(&s, &vt, c));
    distc_buf b = {NULL, 0};
    ASSERT_ERR(distc_store_get(&b, s, "quiet_key"), DISTC_ETIMEOUT, "quiet_key");
    distc_store_free(s);
}

static int noop_set(void *p, const char *k, const void *v, size_t l) {
    (void)p, (void)k, (void)v, (void)l;
    return 0;
}

static void test_bad_vtable(void **state) {
    (void)state;
    int freed = 0;
    struct cstore *c = cstore_new(&freed);
    distc_store *s = NULL;
    distc_store_vtable vt = full_vt;

    ASSERT_EINVAL(distc_store_new_custom(NULL, &vt, c), "distc_store_new_custom", "out");
    ASSERT_EINVAL(distc_store_new_custom(&s, NULL, c), "distc_store_new_custom", "vtable");
    vt.version = 0;
    ASSERT_EINVAL(distc_store_new_custom(&s, &vt, c), "distc_store_new_custom", "version");
    vt.version = DISTC_STORE_VTABLE_VERSION + 1;
    ASSERT_EINVAL(distc_store_new_custom(&s, &vt, c), "distc_store_new_custom", "version");
    vt = full_vt;
    vt.set = NULL;
    ASSERT_EINVAL(distc_store_new_custom(&s, &vt, c), "distc_store_new_custom", "set");
    vt = full_vt;
    vt.get = NULL;
    ASSERT_EINVAL(distc_store_new_custom(&s, &vt, c), "distc_store_new_custom", "get");
    vt = full_vt;
    vt.add = NULL;
    ASSERT_EINVAL(distc_store_new_custom(&s, &vt, c), "distc_store_new_custom", "add");
    assert_null(s);
    /* A refused vtable never takes ownership of the payload. */
    assert_int_equal(freed, 0);

    /* A NULL payload and a NULL free are fine. */
    distc_store_vtable bare = {
        DISTC_STORE_VTABLE_VERSION, noop_set, quiet_get, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL};
    ASSERT_EINVAL(distc_store_new_custom(&s, &bare, NULL), "distc_store_new_custom", "add");
    bare.add = cs_add;
    ASSERT_OK(distc_store_new_custom(&s, &bare, NULL));
    ASSERT_OK(distc_store_set(s, "k", "v", 1));
    distc_store_free(s);

    cs_free(c);
    assert_int_equal(freed, 1);
}

/* Callbacks that break their contract: a code that is no distc_status, bytes
 * handed back at NULL, a compare_set that never takes (the emulated append
 * would retry it for ever). Each is an error naming the callback, in time. */
static int bogus_set(void *p, const char *k, const void *v, size_t l) {
    (void)p, (void)k, (void)v, (void)l;
    return -1000;
}

static int null_data_get(void *p, const char *k, int64_t t, distc_buf *out) {
    (void)p, (void)k, (void)t;
    out->data = NULL; /* set by hand, not with distc_buf_set */
    out->size = 16;
    return 0;
}

static int stubborn_compare_set(void *p, const char *k, const void *e, size_t el, const void *d, size_t dl,
                                distc_buf *out) {
    (void)p, (void)k, (void)e, (void)el, (void)d, (void)dl;
    return distc_buf_set(out, "other", 5); /* never what was asked for */
}

static int always_there(void *p, const char *const *keys, size_t n, int32_t *out) {
    (void)p, (void)keys, (void)n;
    *out = 1;
    return 0;
}

static int old_value_get(void *p, const char *k, int64_t t, distc_buf *out) {
    (void)p, (void)k, (void)t;
    return distc_buf_set(out, "old", 3);
}

static void test_broken_callbacks(void **state) {
    (void)state;
    distc_store *s = NULL;
    distc_store_vtable vt = {DISTC_STORE_VTABLE_VERSION,
                             bogus_set,
                             null_data_get,
                             cs_add,
                             NULL,
                             NULL,
                             NULL,
                             NULL,
                             NULL,
                             NULL,
                             NULL,
                             NULL,
                             NULL};
    ASSERT_OK(distc_store_new_custom(&s, &vt, NULL));
    ASSERT_ERR(distc_store_set(s, "k", "v", 1), DISTC_EINTERNAL, "returned -1000, which is not a distc_status");
    distc_buf b = {0};
    ASSERT_ERR(distc_store_get(&b, s, "k"), DISTC_EINTERNAL, "16 bytes at NULL");
    assert_null(b.data);
    distc_store_free(s);

    vt.set = noop_set;
    vt.get = old_value_get;
    vt.compare_set = stubborn_compare_set;
    vt.check = always_there;
    ASSERT_OK(distc_store_new_custom(&s, &vt, NULL));
    ASSERT_OK(distc_store_set_timeout(s, 200));
    int64_t t0 = dt_now_ms();
    ASSERT_ERR(distc_store_append(s, "k", "x", 1), DISTC_ETIMEOUT, "compare_set did not take within 200 ms");
    assert_true(dt_now_ms() - t0 < 5000);
    distc_store_free(s);
}

/* The free callback runs once, when the last handle goes, prefixes included. */
static void test_free_once(void **state) {
    (void)state;
    int freed = 0;
    distc_store *s = make(&full_vt, NULL, &freed);
    distc_store *p1 = NULL, *p2 = NULL;
    ASSERT_OK(distc_store_new_prefix(&p1, "one", s));
    ASSERT_OK(distc_store_new_prefix(&p2, "two", p1));
    distc_store_free(s);
    assert_int_equal(freed, 0);
    dt_set_str(p2, "k", "v");
    distc_store_free(p1);
    assert_int_equal(freed, 0);
    dt_expect_str(p2, "k", "v");
    distc_store_free(p2);
    assert_int_equal(freed, 1);

    /* Plain handle. */
    freed = 0;
    s = make(&minimal_vt, NULL, &freed);
    distc_store_free(s);
    assert_int_equal(freed, 1);

    /* The prefix freed first, then the store. */
    freed = 0;
    s = make(&emulated_vt, NULL, &freed);
    ASSERT_OK(distc_store_new_prefix(&p1, "p", s));
    distc_store_free(p1);
    assert_int_equal(freed, 0);
    distc_store_free(s);
    assert_int_equal(freed, 1);
}

/* Keys of a prefix over a custom store reach the callbacks prefixed. */
static void test_prefix_over_custom(void **state) {
    (void)state;
    struct cstore *c;
    distc_store *s = make(&full_vt, &c, NULL);
    distc_store *p = NULL;
    ASSERT_OK(distc_store_new_prefix(&p, "grp", s));
    dt_set_str(p, "k", "v");
    pthread_mutex_lock(&c->mu);
    int found = find(c, "grp/k") != NULL;
    pthread_mutex_unlock(&c->mu);
    assert_true(found);
    distc_store_free(p);
    distc_store_free(s);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        DT_STORE_SUITE(setup_full, teardown),
        DT_STORE_SUITE(setup_emulated, teardown),
        cmocka_unit_test(test_every_op_goes_through),
        cmocka_unit_test(test_emulations),
        cmocka_unit_test(test_minimal_vtable),
        cmocka_unit_test(test_callback_errors),
        cmocka_unit_test(test_quiet_timeout_names_key),
        cmocka_unit_test(test_bad_vtable),
        cmocka_unit_test(test_free_once),
        cmocka_unit_test(test_broken_callbacks),
        cmocka_unit_test(test_prefix_over_custom),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

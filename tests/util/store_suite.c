/* The store conformance suite (see store_suite.h); its waits and timeouts
 * are in store_suite/waits.c. */
#define _GNU_SOURCE
#include "store_suite.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "store_suite/internal.h"

void dt_set_str(distc_store *s, const char *key, const char *value) {
    ASSERT_OK(distc_store_set(s, key, value, strlen(value)));
}

void dt_expect_value(distc_store *s, const char *key, const void *value, size_t len) {
    distc_buf b = {NULL, 0};
    ASSERT_OK(distc_store_get(&b, s, key));
    assert_non_null(b.data);
    if (b.size != len) fail_msg("key '%s' holds %zu bytes, expected %zu", key, b.size, len);
    if (len) assert_memory_equal(b.data, value, len);
    distc_buf_dispose(&b);
}

void dt_expect_str(distc_store *s, const char *key, const char *value) {
    dt_expect_value(s, key, value, strlen(value));
}

int dt_has_key(distc_store *s, const char *key) {
    int32_t ok = -1;
    ASSERT_OK(distc_store_check(&ok, s, &key, 1));
    assert_true(ok == 0 || ok == 1);
    return ok;
}

/* ------------------------------------------------------------------------ */

void dt_store_test_set_get(void **state) {
    distc_store *s = STORE(state);
    const uint8_t v[] = {'a', 0, 'b', 0, 0, 0xff, 'c'};
    ASSERT_OK(distc_store_set(s, "k1", v, sizeof v));
    dt_expect_value(s, "k1", v, sizeof v);
    /* Keys are distinct, including ones that share a prefix. */
    dt_set_str(s, "k", "short");
    dt_set_str(s, "k1/sub", "deeper");
    dt_expect_value(s, "k1", v, sizeof v);
    dt_expect_str(s, "k", "short");
    dt_expect_str(s, "k1/sub", "deeper");
    /* Keys with odd characters. */
    dt_set_str(s, "with space/and:colon?&=", "odd");
    dt_expect_str(s, "with space/and:colon?&=", "odd");
}

void dt_store_test_set_overwrite_and_empty(void **state) {
    distc_store *s = STORE(state);
    dt_set_str(s, "k", "first value");
    dt_set_str(s, "k", "2nd");
    dt_expect_str(s, "k", "2nd");
    /* An empty value: NULL with len 0 is allowed, and get gives non-NULL data. */
    ASSERT_OK(distc_store_set(s, "empty", NULL, 0));
    distc_buf b = {NULL, 0};
    ASSERT_OK(distc_store_get(&b, s, "empty"));
    assert_non_null(b.data);
    assert_int_equal(b.size, 0);
    distc_buf_dispose(&b);
    assert_int_equal(dt_has_key(s, "empty"), 1);
    ASSERT_OK(distc_store_set(s, "empty2", "ignored", 0));
    dt_expect_value(s, "empty2", "", 0);
}

void dt_store_test_large_value(void **state) {
    distc_store *s = STORE(state);
    size_t n = (size_t)1 << 20;
    uint8_t *v = malloc(n);
    assert_non_null(v);
    for (size_t i = 0; i < n; ++i) v[i] = (uint8_t)(i * 131 + (i >> 8));
    ASSERT_OK(distc_store_set(s, "big", v, n));
    dt_expect_value(s, "big", v, n);
    free(v);
}

void dt_store_test_add(void **state) {
    distc_store *s = STORE(state);
    int64_t v = -1;
    /* A missing key counts as 0. */
    ASSERT_OK(distc_store_add(&v, s, "c", 5));
    assert_int_equal(v, 5);
    /* Stored as decimal text, as PyTorch does. */
    dt_expect_str(s, "c", "5");
    ASSERT_OK(distc_store_add(&v, s, "c", -7));
    assert_int_equal(v, -2);
    dt_expect_str(s, "c", "-2");
    ASSERT_OK(distc_store_add(&v, s, "c", 0));
    assert_int_equal(v, -2);
    /* out may be NULL. */
    ASSERT_OK(distc_store_add(NULL, s, "c", 12));
    dt_expect_str(s, "c", "10");
    /* Adding 0 to a missing key creates it at 0. */
    ASSERT_OK(distc_store_add(&v, s, "zero", 0));
    assert_int_equal(v, 0);
    dt_expect_str(s, "zero", "0");
    /* A counter set by hand as text is a counter. */
    dt_set_str(s, "manual", "41");
    ASSERT_OK(distc_store_add(&v, s, "manual", 1));
    assert_int_equal(v, 42);
    /* Large values. */
    ASSERT_OK(distc_store_add(&v, s, "big", INT64_C(1) << 40));
    assert_true(v == (INT64_C(1) << 40));
    dt_expect_str(s, "big", "1099511627776");
    ASSERT_OK(distc_store_add(&v, s, "neg", INT64_C(-9000000000)));
    dt_expect_str(s, "neg", "-9000000000");
}

void dt_store_test_add_not_integer(void **state) {
    distc_store *s = STORE(state);
    dt_set_str(s, "text", "hello");
    int64_t v = 77;
    ASSERT_ERR(distc_store_add(&v, s, "text", 1), DISTC_EINVAL, "distc_store_add");
    assert_int_equal(v, 77); /* untouched on failure */
    dt_expect_str(s, "text", "hello");
    const char bin[] = {'1', 0, '2'};
    ASSERT_OK(distc_store_set(s, "bin", bin, sizeof bin));
    ASSERT_ERR(distc_store_add(&v, s, "bin", 1), DISTC_EINVAL, "distc_store_add");
    dt_set_str(s, "trailing", "12abc");
    ASSERT_ERR(distc_store_add(&v, s, "trailing", 1), DISTC_EINVAL, "distc_store_add");
    /* int64 overflow is an error, not a wrap-around. */
    ASSERT_OK(distc_store_add(&v, s, "big", INT64_MAX));
    ASSERT_ERR(distc_store_add(&v, s, "big", 1), DISTC_EINVAL, "distc_store_add");
    ASSERT_OK(distc_store_add(&v, s, "big", -1));
    assert_int_equal(v, INT64_MAX - 1);
}

static void expect_buf(distc_buf *b, const char *value, size_t len) {
    assert_non_null(b->data);
    if (b->size != len) fail_msg("buffer holds %zu bytes, expected %zu", b->size, len);
    if (len) assert_memory_equal(b->data, value, len);
    distc_buf_dispose(b);
}

void dt_store_test_compare_set(void **state) {
    distc_store *s = STORE(state);
    distc_buf b = {NULL, 0};

    /* Missing key, empty expected: sets desired and returns it. */
    ASSERT_OK(distc_store_compare_set(&b, s, "a", NULL, 0, "one", 3));
    expect_buf(&b, "one", 3);
    dt_expect_str(s, "a", "one");

    /* Missing key, non-empty expected: returns expected, sets nothing. */
    ASSERT_OK(distc_store_compare_set(&b, s, "missing", "exp", 3, "des", 3));
    expect_buf(&b, "exp", 3);
    assert_int_equal(dt_has_key(s, "missing"), 0);

    /* Match: sets desired. */
    ASSERT_OK(distc_store_compare_set(&b, s, "a", "one", 3, "two", 3));
    expect_buf(&b, "two", 3);
    dt_expect_str(s, "a", "two");

    /* Mismatch: returns the current value, sets nothing. */
    ASSERT_OK(distc_store_compare_set(&b, s, "a", "one", 3, "three", 5));
    expect_buf(&b, "two", 3);
    dt_expect_str(s, "a", "two");
    /* A prefix of the current value is a mismatch too. */
    ASSERT_OK(distc_store_compare_set(&b, s, "a", "tw", 2, "x", 1));
    expect_buf(&b, "two", 3);
    /* Empty expected against an existing non-empty value: mismatch. */
    ASSERT_OK(distc_store_compare_set(&b, s, "a", NULL, 0, "x", 1));
    expect_buf(&b, "two", 3);

    /* An existing empty value matches an empty expected. */
    ASSERT_OK(distc_store_set(s, "e", NULL, 0));
    ASSERT_OK(distc_store_compare_set(&b, s, "e", NULL, 0, "filled", 6));
    expect_buf(&b, "filled", 6);
    dt_expect_str(s, "e", "filled");

    /* NUL bytes compare as bytes. */
    const char x1[] = {'x', 0, '1'}, x2[] = {'x', 0, '2'}, y[] = {0, 0};
    ASSERT_OK(distc_store_set(s, "nul", x1, sizeof x1));
    ASSERT_OK(distc_store_compare_set(&b, s, "nul", x2, sizeof x2, y, sizeof y));
    expect_buf(&b, x1, sizeof x1);
    ASSERT_OK(distc_store_compare_set(&b, s, "nul", x1, sizeof x1, y, sizeof y));
    expect_buf(&b, y, sizeof y);
    dt_expect_value(s, "nul", y, sizeof y);

    /* Setting to an empty value. */
    ASSERT_OK(distc_store_compare_set(&b, s, "nul", y, sizeof y, NULL, 0));
    expect_buf(&b, "", 0);
    dt_expect_value(s, "nul", "", 0);

    /* out may be NULL. */
    ASSERT_OK(distc_store_compare_set(NULL, s, "a", "two", 3, "four", 4));
    dt_expect_str(s, "a", "four");
}

void dt_store_test_check(void **state) {
    distc_store *s = STORE(state);
    int32_t ok = -1;
    const char *keys[] = {"c1", "c2", "c3"};
    ASSERT_OK(distc_store_check(&ok, s, keys, 3));
    assert_int_equal(ok, 0);
    dt_set_str(s, "c1", "1");
    dt_set_str(s, "c3", "3");
    ASSERT_OK(distc_store_check(&ok, s, keys, 3));
    assert_int_equal(ok, 0);
    ASSERT_OK(distc_store_check(&ok, s, keys, 1));
    assert_int_equal(ok, 1);
    ASSERT_OK(distc_store_check(&ok, s, keys + 2, 1));
    assert_int_equal(ok, 1);
    dt_set_str(s, "c2", "2");
    ASSERT_OK(distc_store_check(&ok, s, keys, 3));
    assert_int_equal(ok, 1);
    /* No keys: all of them exist. keys may be NULL then. */
    ok = -1;
    ASSERT_OK(distc_store_check(&ok, s, NULL, 0));
    assert_int_equal(ok, 1);
    /* A counter made by add exists. */
    ASSERT_OK(distc_store_add(NULL, s, "cnt", 1));
    assert_int_equal(dt_has_key(s, "cnt"), 1);
}

void dt_store_test_delete_key(void **state) {
    distc_store *s = STORE(state);
    int32_t d = -1;
    dt_set_str(s, "del", "x");
    ASSERT_OK(distc_store_delete_key(&d, s, "del"));
    assert_int_equal(d, 1);
    assert_int_equal(dt_has_key(s, "del"), 0);
    ASSERT_OK(distc_store_delete_key(&d, s, "del"));
    assert_int_equal(d, 0);
    ASSERT_OK(distc_store_delete_key(&d, s, "never_existed"));
    assert_int_equal(d, 0);
    /* out may be NULL. */
    dt_set_str(s, "del2", "y");
    ASSERT_OK(distc_store_delete_key(NULL, s, "del2"));
    assert_int_equal(dt_has_key(s, "del2"), 0);
    ASSERT_OK(distc_store_delete_key(NULL, s, "del2"));
    /* A deleted key can be set again; a deleted counter restarts at 0. */
    dt_set_str(s, "del", "again");
    dt_expect_str(s, "del", "again");
    int64_t v;
    ASSERT_OK(distc_store_add(&v, s, "cnt", 5));
    ASSERT_OK(distc_store_delete_key(&d, s, "cnt"));
    assert_int_equal(d, 1);
    ASSERT_OK(distc_store_add(&v, s, "cnt", 1));
    assert_int_equal(v, 1);
    /* get of a deleted key waits (and times out). */
    ASSERT_OK(distc_store_delete_key(&d, s, "del"));
    ASSERT_OK(distc_store_set_timeout(s, 100));
    distc_buf b = {NULL, 0};
    ASSERT_ERR(distc_store_get(&b, s, "del"), DISTC_ETIMEOUT, "del");
}

void dt_store_test_num_keys(void **state) {
    distc_store *s = STORE(state);
    int64_t n = -1;
    ASSERT_OK(distc_store_num_keys(&n, s));
    assert_int_equal(n, 0);
    dt_set_str(s, "a", "1");
    dt_set_str(s, "b", "2");
    ASSERT_OK(distc_store_add(NULL, s, "c", 1));
    ASSERT_OK(distc_store_num_keys(&n, s));
    assert_int_equal(n, 3);
    dt_set_str(s, "a", "overwrite");
    ASSERT_OK(distc_store_num_keys(&n, s));
    assert_int_equal(n, 3);
    ASSERT_OK(distc_store_delete_key(NULL, s, "b"));
    ASSERT_OK(distc_store_num_keys(&n, s));
    assert_int_equal(n, 2);
    ASSERT_OK(distc_store_append(s, "d", "x", 1));
    const char *ks[] = {"e", "f"};
    const void *vs[] = {"1", "2"};
    const size_t ls[] = {1, 1};
    ASSERT_OK(distc_store_multi_set(s, ks, vs, ls, 2));
    ASSERT_OK(distc_store_num_keys(&n, s));
    assert_int_equal(n, 5);
}

void dt_store_test_append(void **state) {
    distc_store *s = STORE(state);
    /* Creates the key. */
    ASSERT_OK(distc_store_append(s, "log", "ab", 2));
    dt_expect_str(s, "log", "ab");
    /* Then appends, NUL bytes included. */
    const char more[] = {'c', 0, 'd'};
    ASSERT_OK(distc_store_append(s, "log", more, sizeof more));
    const char all[] = {'a', 'b', 'c', 0, 'd'};
    dt_expect_value(s, "log", all, sizeof all);
    /* Appending nothing changes nothing. */
    ASSERT_OK(distc_store_append(s, "log", NULL, 0));
    dt_expect_value(s, "log", all, sizeof all);
    /* Appending to a value set by set. */
    dt_set_str(s, "set_then_append", "12");
    ASSERT_OK(distc_store_append(s, "set_then_append", "3", 1));
    dt_expect_str(s, "set_then_append", "123");
    /* ... and to a counter: the text grows. */
    ASSERT_OK(distc_store_add(NULL, s, "cnt", 4));
    ASSERT_OK(distc_store_append(s, "cnt", "2", 1));
    int64_t v;
    ASSERT_OK(distc_store_add(&v, s, "cnt", 0));
    assert_int_equal(v, 42);
}

void dt_store_test_multi_get(void **state) {
    distc_store *s = STORE(state);
    const char z[] = {0, 'z', 0};
    dt_set_str(s, "m1", "one");
    dt_set_str(s, "m2", "");
    ASSERT_OK(distc_store_set(s, "m3", z, sizeof z));
    const char *keys[] = {"m3", "m1", "m2", "m1"};
    distc_buf out[4];
    memset(out, 0, sizeof out);
    ASSERT_OK(distc_store_multi_get(out, s, keys, 4));
    expect_buf(&out[0], z, sizeof z);
    expect_buf(&out[1], "one", 3);
    expect_buf(&out[2], "", 0);
    expect_buf(&out[3], "one", 3);
    /* n == 0: nothing to do; out and keys may be NULL. */
    ASSERT_OK(distc_store_multi_get(NULL, s, NULL, 0));

    /* multi_get waits for keys set later. */
    struct delayed_set d = {s, "m_late", "late", 100};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, delayed_set_fn, &d), 0);
    ASSERT_OK(distc_store_set_timeout(s, 10000));
    const char *k2[] = {"m1", "m_late"};
    ASSERT_OK(distc_store_multi_get(out, s, k2, 2));
    expect_buf(&out[0], "one", 3);
    expect_buf(&out[1], "late", 4);
    pthread_join(t, NULL);
}

void dt_store_test_multi_set(void **state) {
    distc_store *s = STORE(state);
    const char z[] = {'a', 0, 'b'};
    const char *keys[] = {"s1", "s2", "s3"};
    const void *vals[] = {"first", z, NULL};
    const size_t lens[] = {5, sizeof z, 0};
    ASSERT_OK(distc_store_multi_set(s, keys, vals, lens, 3));
    dt_expect_str(s, "s1", "first");
    dt_expect_value(s, "s2", z, sizeof z);
    dt_expect_value(s, "s3", "", 0);
    /* Overwrites. */
    const void *vals2[] = {"1", "2", "3"};
    const size_t lens2[] = {1, 1, 1};
    ASSERT_OK(distc_store_multi_set(s, keys, vals2, lens2, 3));
    dt_expect_str(s, "s1", "1");
    dt_expect_str(s, "s3", "3");
    /* n == 0: nothing; every array may be NULL. */
    ASSERT_OK(distc_store_multi_set(s, NULL, NULL, NULL, 0));
    /* Round trip with multi_get. */
    distc_buf out[3];
    memset(out, 0, sizeof out);
    ASSERT_OK(distc_store_multi_get(out, s, keys, 3));
    expect_buf(&out[0], "1", 1);
    expect_buf(&out[1], "2", 1);
    expect_buf(&out[2], "3", 1);
}

void dt_store_test_bad_args(void **state) {
    distc_store *s = STORE(state);
    distc_buf b = {NULL, 0};
    int64_t i64 = 0;
    int32_t i32 = 0;
    const char *keys[] = {"a", NULL, "c"};
    const char *good[] = {"a", "b"};
    const void *vals[] = {"x", "y"};
    const void *vals_null[] = {"x", NULL};
    const size_t lens[] = {1, 1};

    ASSERT_EINVAL(distc_store_set(NULL, "k", "v", 1), "distc_store_set", "store");
    ASSERT_EINVAL(distc_store_set(s, NULL, "v", 1), "distc_store_set", "key");
    ASSERT_EINVAL(distc_store_set(s, "k", NULL, 1), "distc_store_set", "value");
    assert_int_equal(dt_has_key(s, "k"), 0);

    ASSERT_EINVAL(distc_store_get(NULL, s, "k"), "distc_store_get", "out");
    ASSERT_EINVAL(distc_store_get(&b, NULL, "k"), "distc_store_get", "store");
    ASSERT_EINVAL(distc_store_get(&b, s, NULL), "distc_store_get", "key");
    assert_null(b.data);

    ASSERT_EINVAL(distc_store_add(&i64, NULL, "k", 1), "distc_store_add", "store");
    ASSERT_EINVAL(distc_store_add(&i64, s, NULL, 1), "distc_store_add", "key");

    ASSERT_EINVAL(distc_store_compare_set(&b, NULL, "k", "e", 1, "d", 1), "distc_store_compare_set", "store");
    ASSERT_EINVAL(distc_store_compare_set(&b, s, NULL, "e", 1, "d", 1), "distc_store_compare_set", "key");
    ASSERT_EINVAL(distc_store_compare_set(&b, s, "k", NULL, 1, "d", 1), "distc_store_compare_set", "expected");
    ASSERT_EINVAL(distc_store_compare_set(&b, s, "k", NULL, 0, NULL, 1), "distc_store_compare_set", "desired");
    assert_null(b.data);
    assert_int_equal(dt_has_key(s, "k"), 0);

    ASSERT_EINVAL(distc_store_check(NULL, s, good, 2), "distc_store_check", "out");
    ASSERT_EINVAL(distc_store_check(&i32, NULL, good, 2), "distc_store_check", "store");
    ASSERT_EINVAL(distc_store_check(&i32, s, NULL, 2), "distc_store_check", "keys");
    ASSERT_EINVAL(distc_store_check(&i32, s, keys, 3), "distc_store_check", "keys[1]");

    ASSERT_EINVAL(distc_store_wait(NULL, good, 2, 10), "distc_store_wait", "store");
    ASSERT_EINVAL(distc_store_wait(s, NULL, 2, 10), "distc_store_wait", "keys");
    ASSERT_EINVAL(distc_store_wait(s, keys, 3, 10), "distc_store_wait", "keys[1]");
    ASSERT_EINVAL(distc_store_wait(s, good, 2, -2), "distc_store_wait", "timeout_ms");
    ASSERT_EINVAL(distc_store_wait(s, good, 2, INT64_MIN), "distc_store_wait", "timeout_ms");

    ASSERT_EINVAL(distc_store_delete_key(&i32, NULL, "k"), "distc_store_delete_key", "store");
    ASSERT_EINVAL(distc_store_delete_key(&i32, s, NULL), "distc_store_delete_key", "key");

    ASSERT_EINVAL(distc_store_num_keys(NULL, s), "distc_store_num_keys", "out");
    ASSERT_EINVAL(distc_store_num_keys(&i64, NULL), "distc_store_num_keys", "store");

    ASSERT_EINVAL(distc_store_append(NULL, "k", "v", 1), "distc_store_append", "store");
    ASSERT_EINVAL(distc_store_append(s, NULL, "v", 1), "distc_store_append", "key");
    ASSERT_EINVAL(distc_store_append(s, "k", NULL, 1), "distc_store_append", "value");
    assert_int_equal(dt_has_key(s, "k"), 0);

    distc_buf out[3];
    memset(out, 0, sizeof out);
    ASSERT_EINVAL(distc_store_multi_get(NULL, s, good, 2), "distc_store_multi_get", "out");
    ASSERT_EINVAL(distc_store_multi_get(out, NULL, good, 2), "distc_store_multi_get", "store");
    ASSERT_EINVAL(distc_store_multi_get(out, s, NULL, 2), "distc_store_multi_get", "keys");
    ASSERT_EINVAL(distc_store_multi_get(out, s, keys, 3), "distc_store_multi_get", "keys[1]");
    for (int i = 0; i < 3; ++i) assert_null(out[i].data);

    ASSERT_EINVAL(distc_store_multi_set(NULL, good, vals, lens, 2), "distc_store_multi_set", "store");
    ASSERT_EINVAL(distc_store_multi_set(s, NULL, vals, lens, 2), "distc_store_multi_set", "keys");
    ASSERT_EINVAL(distc_store_multi_set(s, keys, vals, lens, 2), "distc_store_multi_set", "keys[1]");
    ASSERT_EINVAL(distc_store_multi_set(s, good, NULL, lens, 2), "distc_store_multi_set", "values");
    ASSERT_EINVAL(distc_store_multi_set(s, good, vals, NULL, 2), "distc_store_multi_set", "lens");
    ASSERT_EINVAL(distc_store_multi_set(s, good, vals_null, lens, 2), "distc_store_multi_set", "values[1]");
    /* A refused multi_set sets nothing. */
    assert_int_equal(dt_has_key(s, "a"), 0);

    ASSERT_EINVAL(distc_store_set_timeout(NULL, 100), "distc_store_set_timeout", "store");
    ASSERT_EINVAL(distc_store_get_timeout(NULL, s), "distc_store_get_timeout", "out");
    ASSERT_EINVAL(distc_store_get_timeout(&i64, NULL), "distc_store_get_timeout", "store");

    /* Only a TCP store has a port. */
    ASSERT_EINVAL(distc_store_tcp_port(&i32, s), "distc_store_tcp_port", "store");
    ASSERT_EINVAL(distc_store_tcp_port(NULL, s), "distc_store_tcp_port", "out");
    ASSERT_EINVAL(distc_store_tcp_port(&i32, NULL), "distc_store_tcp_port", "store");

    /* A prefix store needs its arguments. */
    distc_store *p = NULL;
    ASSERT_EINVAL(distc_store_new_prefix(NULL, "p", s), "distc_store_new_prefix", "out");
    ASSERT_EINVAL(distc_store_new_prefix(&p, NULL, s), "distc_store_new_prefix", "prefix");
    ASSERT_EINVAL(distc_store_new_prefix(&p, "p", NULL), "distc_store_new_prefix", "inner");
    assert_null(p);

    /* The store still works after all that. */
    int64_t n = -1;
    ASSERT_OK(distc_store_num_keys(&n, s));
    assert_int_equal(n, 0);
    distc_store_free(NULL);
}

#define N_THREADS 8
#define N_ADDS 1000

struct hammer {
    distc_store *s;
    int id;
    int rc;
};

static void *hammer_fn(void *arg) {
    struct hammer *h = arg;
    char key[32];
    for (int i = 0; i < N_ADDS; ++i) {
        if ((h->rc = distc_store_add(NULL, h->s, "shared_counter", 1)) != 0) return NULL;
        if (i % 100 == 0) {
            snprintf(key, sizeof key, "t%d/%d", h->id, i);
            if ((h->rc = distc_store_set(h->s, key, key, strlen(key))) != 0) return NULL;
            /* Each thread appends its own byte: with identical bytes, append emulated
             * through compare_set (custom stores, PyTorch 1.x servers) cannot tell its
             * own success from another thread's identical append, as in c10d. */
            char mine = (char)('a' + h->id);
            if ((h->rc = distc_store_append(h->s, "shared_log", &mine, 1)) != 0) return NULL;
        }
    }
    return NULL;
}

void dt_store_test_threads(void **state) {
    distc_store *s = STORE(state);
    pthread_t t[N_THREADS];
    struct hammer h[N_THREADS];
    for (int i = 0; i < N_THREADS; ++i) {
        h[i].s = s;
        h[i].id = i;
        h[i].rc = 0;
        assert_int_equal(pthread_create(&t[i], NULL, hammer_fn, &h[i]), 0);
    }
    for (int i = 0; i < N_THREADS; ++i) pthread_join(t[i], NULL);
    for (int i = 0; i < N_THREADS; ++i) assert_int_equal(h[i].rc, 0);
    int64_t v = -1;
    ASSERT_OK(distc_store_add(&v, s, "shared_counter", 0));
    assert_int_equal(v, N_THREADS * N_ADDS);
    char expect[16];
    snprintf(expect, sizeof expect, "%d", N_THREADS * N_ADDS);
    dt_expect_str(s, "shared_counter", expect);
    /* Appends are atomic too. */
    distc_buf b = {NULL, 0};
    ASSERT_OK(distc_store_get(&b, s, "shared_log"));
    size_t size = b.size, per_thread[N_THREADS] = {0};
    for (size_t i = 0; i < b.size; ++i)
        if (b.data[i] >= 'a' && b.data[i] < 'a' + N_THREADS) ++per_thread[b.data[i] - 'a'];
    distc_buf_dispose(&b);
    assert_int_equal(size, N_THREADS * (N_ADDS / 100));
    for (int i = 0; i < N_THREADS; ++i) assert_int_equal(per_thread[i], N_ADDS / 100);
    dt_expect_str(s, "t7/900", "t7/900");
}

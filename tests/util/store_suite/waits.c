/* The store suite's waits and timeouts (see store_suite.h): wait, get and
 * multi_get for keys set later or never, the store's timeout and "forever". */
#define _GNU_SOURCE
#include "internal.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

void *delayed_set_fn(void *arg) {
    struct delayed_set *d = arg;
    usleep((useconds_t)d->delay_ms * 1000);
    distc_store_set(d->s, d->key, d->value, strlen(d->value));
    return NULL;
}

void dt_store_test_wait_later(void **state) {
    distc_store *s = STORE(state);
    /* Nothing to wait for, and keys already there: immediate. */
    ASSERT_OK(distc_store_wait(s, NULL, 0, 100));
    dt_set_str(s, "there", "1");
    const char *there = "there";
    ASSERT_OK(distc_store_wait(s, &there, 1, 100));
    ASSERT_OK(distc_store_wait(s, &there, 1, 0)); /* 0 ms: check only */

    /* Another thread sets the keys later. */
    struct delayed_set d1 = {s, "late1", "v1", 100}, d2 = {s, "late2", "v2", 200};
    pthread_t t1, t2;
    assert_int_equal(pthread_create(&t1, NULL, delayed_set_fn, &d1), 0);
    assert_int_equal(pthread_create(&t2, NULL, delayed_set_fn, &d2), 0);
    const char *keys[] = {"late1", "there", "late2"};
    int64_t t0 = dt_now_ms();
    ASSERT_OK(distc_store_wait(s, keys, 3, 10000));
    assert_true(dt_now_ms() - t0 < 9000);
    pthread_join(t1, NULL);
    pthread_join(t2, NULL);
    dt_expect_str(s, "late2", "v2");

    /* get waits the same way. */
    struct delayed_set d3 = {s, "late3", "v3", 100};
    assert_int_equal(pthread_create(&t1, NULL, delayed_set_fn, &d3), 0);
    ASSERT_OK(distc_store_set_timeout(s, 10000));
    dt_expect_str(s, "late3", "v3");
    pthread_join(t1, NULL);
}

void dt_store_test_wait_timeout(void **state) {
    distc_store *s = STORE(state);
    dt_set_str(s, "present", "1");
    const char *keys[] = {"present", "absent_key_xyz"};
    int64_t t0 = dt_now_ms();
    ASSERT_ERR(distc_store_wait(s, keys, 2, 300), DISTC_ETIMEOUT, "absent_key_xyz");
    dt_assert_contains(distc_error_last(), "distc_store_wait");
    assert_int_equal(distc_error_last_code(), DISTC_ETIMEOUT);
    assert_true(dt_now_ms() - t0 < 5000);
    /* 0 ms with a missing key times out at once. */
    ASSERT_ERR(distc_store_wait(s, keys + 1, 1, 0), DISTC_ETIMEOUT, "absent_key_xyz");
}

void dt_store_test_wait_default_timeout(void **state) {
    distc_store *s = STORE(state);
    ASSERT_OK(distc_store_set_timeout(s, 300));
    const char *key = "never_set";
    int64_t t0 = dt_now_ms();
    ASSERT_ERR(distc_store_wait(s, &key, 1, DISTC_TIMEOUT_DEFAULT), DISTC_ETIMEOUT, "never_set");
    assert_true(dt_now_ms() - t0 < 5000);
}

void dt_store_test_get_timeout(void **state) {
    distc_store *s = STORE(state);
    ASSERT_OK(distc_store_set_timeout(s, 300));
    distc_buf b = {NULL, 0};
    int64_t t0 = dt_now_ms();
    ASSERT_ERR(distc_store_get(&b, s, "nobody_sets_this"), DISTC_ETIMEOUT, "nobody_sets_this");
    dt_assert_contains(distc_error_last(), "distc_store_get");
    assert_true(dt_now_ms() - t0 < 5000);
    assert_null(b.data);
    assert_int_equal(b.size, 0);
}

void dt_store_test_multi_get_timeout(void **state) {
    distc_store *s = STORE(state);
    dt_set_str(s, "g1", "one");
    dt_set_str(s, "g3", "three");
    ASSERT_OK(distc_store_set_timeout(s, 300));
    const char *keys[] = {"g1", "g2_missing", "g3"};
    distc_buf out[3];
    memset(out, 0, sizeof out);
    int64_t t0 = dt_now_ms();
    ASSERT_ERR(distc_store_multi_get(out, s, keys, 3), DISTC_ETIMEOUT, "g2_missing");
    dt_assert_contains(distc_error_last(), "distc_store_multi_get");
    assert_true(dt_now_ms() - t0 < 5000);
    /* Nothing is left allocated. */
    for (int i = 0; i < 3; ++i) {
        assert_null(out[i].data);
        assert_int_equal(out[i].size, 0);
    }
}

void dt_store_test_timeouts(void **state) {
    distc_store *s = STORE(state);
    int64_t t = -1;
    ASSERT_OK(distc_store_get_timeout(&t, s));
    assert_true(t > 0);
    ASSERT_OK(distc_store_set_timeout(s, 1234));
    ASSERT_OK(distc_store_get_timeout(&t, s));
    assert_int_equal(t, 1234);
    ASSERT_EINVAL(distc_store_set_timeout(s, 0), "distc_store_set_timeout", "timeout_ms");
    ASSERT_EINVAL(distc_store_set_timeout(s, -1), "distc_store_set_timeout", "timeout_ms");
    ASSERT_EINVAL(distc_store_set_timeout(s, -1000), "distc_store_set_timeout", "timeout_ms");
    ASSERT_OK(distc_store_get_timeout(&t, s));
    assert_int_equal(t, 1234); /* unchanged by the refused calls */
    ASSERT_OK(distc_store_set_timeout(s, 1));
    ASSERT_OK(distc_store_get_timeout(&t, s));
    assert_int_equal(t, 1);
    ASSERT_OK(distc_store_set_timeout(s, INT64_C(86400000) * 365));
    ASSERT_OK(distc_store_get_timeout(&t, s));
    assert_true(t == INT64_C(86400000) * 365);
}

/* "Forever" as FFIs spell it (INT64_MAX) waits, rather than overflowing into an immediate timeout. */
void dt_store_test_huge_timeouts(void **state) {
    distc_store *s = STORE(state);
    const int64_t huge[] = {INT64_MAX, INT64_MAX / 1000, INT64_C(1) << 53};
    for (size_t i = 0; i < sizeof huge / sizeof huge[0]; ++i) {
        char key[32];
        snprintf(key, sizeof key, "forever%zu", i);
        int64_t t = 0;
        ASSERT_OK(distc_store_set_timeout(s, huge[i]));
        ASSERT_OK(distc_store_get_timeout(&t, s));
        assert_true(t >= INT64_C(86400000) * 365 * 10); /* at least ten years */
        struct delayed_set d = {s, key, "x", 50};
        pthread_t th;
        assert_int_equal(pthread_create(&th, NULL, delayed_set_fn, &d), 0);
        const char *k = key;
        ASSERT_OK(distc_store_wait(s, &k, 1, huge[i]));
        pthread_join(th, NULL);
        ASSERT_OK(distc_store_delete_key(NULL, s, key));
        assert_int_equal(pthread_create(&th, NULL, delayed_set_fn, &d), 0);
        dt_expect_str(s, key, "x"); /* get with the store's huge timeout */
        pthread_join(th, NULL);
        ASSERT_OK(distc_store_delete_key(NULL, s, key));
        assert_int_equal(pthread_create(&th, NULL, delayed_set_fn, &d), 0);
        distc_buf out = {NULL, 0};
        ASSERT_OK(distc_store_multi_get(&out, s, &k, 1));
        distc_buf_dispose(&out);
        pthread_join(th, NULL);
    }
}

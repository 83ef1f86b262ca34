/* Status codes, the thread-local last error, versions and distc_buf. */
#define _GNU_SOURCE
#include "test_util.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void test_strerror_every_code(void **state) {
    (void)state;
    static const struct {
        int code;
        const char *text;
    } codes[] = {
        {DISTC_OK, "success"},
        {DISTC_INPROGRESS, "in progress"},
        {DISTC_EINVAL, "invalid argument"},
        {DISTC_ETIMEOUT, "timed out"},
        {DISTC_ENOTFOUND, "not found"},
        {DISTC_ENOTSUP, "not supported"},
        {DISTC_EREMOTE, "remote"},
        {DISTC_EABORTED, "aborted"},
        {DISTC_ESTATE, "state"},
        {DISTC_ENOMEM, "memory"},
        {DISTC_EBACKEND, "backend"},
        {DISTC_EINTERNAL, "internal"},
        {DISTC_EIO, "I/O"},
        {DISTC_EPROTO, "protocol"},
    };
    const size_t n = sizeof codes / sizeof codes[0];
    for (size_t i = 0; i < n; ++i) {
        const char *s = distc_strerror(codes[i].code);
        assert_non_null(s);
        assert_true(strlen(s) > 0);
        dt_assert_contains(s, codes[i].text);
        /* Every code has its own text, distinct from the unknown one. */
        assert_string_not_equal(s, distc_strerror(-9999));
        for (size_t j = 0; j < i; ++j) assert_string_not_equal(s, distc_strerror(codes[j].code));
    }
    /* Codes are part of the ABI: never renumbered. */
    assert_int_equal(DISTC_OK, 0);
    assert_int_equal(DISTC_INPROGRESS, 1);
    assert_int_equal(DISTC_EINVAL, -1);
    assert_int_equal(DISTC_ETIMEOUT, -2);
    assert_int_equal(DISTC_ENOTFOUND, -3);
    assert_int_equal(DISTC_ENOTSUP, -4);
    assert_int_equal(DISTC_EREMOTE, -5);
    assert_int_equal(DISTC_EABORTED, -6);
    assert_int_equal(DISTC_ESTATE, -7);
    assert_int_equal(DISTC_ENOMEM, -8);
    assert_int_equal(DISTC_EBACKEND, -9);
    assert_int_equal(DISTC_EINTERNAL, -10);
    assert_int_equal(DISTC_EIO, -11);
    assert_int_equal(DISTC_EPROTO, -12);
}

static void test_strerror_unknown(void **state) {
    (void)state;
    const int unknown[] = {-13, -9999, 2, 12345, -2147483647 - 1, 2147483647};
    for (size_t i = 0; i < sizeof unknown / sizeof unknown[0]; ++i) {
        const char *s = distc_strerror(unknown[i]);
        assert_non_null(s);
        dt_assert_contains(s, "unknown");
    }
}

static void test_error_last_never_null(void **state) {
    (void)state;
    distc_error_clear();
    assert_non_null(distc_error_last());
    assert_string_equal(distc_error_last(), "");
    assert_int_equal(distc_error_last_code(), 0);

    /* A failure leaves a message naming the function and the argument. */
    assert_int_equal(distc_store_new_hash(NULL), DISTC_EINVAL);
    assert_int_equal(distc_error_last_code(), DISTC_EINVAL);
    dt_assert_contains(distc_error_last(), "distc_store_new_hash");
    dt_assert_contains(distc_error_last(), "out");
    assert_null(strchr(distc_error_last(), '\n'));

    /* A successful call forgets it. */
    distc_store *s = NULL;
    ASSERT_OK(distc_store_new_hash(&s));
    assert_non_null(distc_error_last());
    assert_string_equal(distc_error_last(), "");
    assert_int_equal(distc_error_last_code(), 0);
    distc_store_free(s);
}

static void test_error_clear(void **state) {
    (void)state;
    assert_int_equal(distc_error_set(DISTC_EIO, "disk on fire"), DISTC_EIO);
    assert_int_equal(distc_error_last_code(), DISTC_EIO);
    distc_error_clear();
    assert_int_equal(distc_error_last_code(), 0);
    assert_non_null(distc_error_last());
    assert_string_equal(distc_error_last(), "");
    distc_error_clear(); /* twice is fine */
    assert_string_equal(distc_error_last(), "");
}

static void test_error_set(void **state) {
    (void)state;
    assert_int_equal(distc_error_set(DISTC_ETIMEOUT, "custom message 42"), DISTC_ETIMEOUT);
    assert_int_equal(distc_error_last_code(), DISTC_ETIMEOUT);
    assert_string_equal(distc_error_last(), "custom message 42");

    /* A later set replaces the message. */
    assert_int_equal(distc_error_set(DISTC_EPROTO, "second"), DISTC_EPROTO);
    assert_int_equal(distc_error_last_code(), DISTC_EPROTO);
    assert_string_equal(distc_error_last(), "second");

    /* A NULL message is allowed and gives "", never NULL. */
    assert_int_equal(distc_error_set(DISTC_EINTERNAL, NULL), DISTC_EINTERNAL);
    assert_int_equal(distc_error_last_code(), DISTC_EINTERNAL);
    assert_non_null(distc_error_last());
    assert_string_equal(distc_error_last(), "");

    /* A long message survives intact. */
    char big[4096];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    distc_error_set(DISTC_EIO, big);
    assert_string_equal(distc_error_last(), big);
    distc_error_clear();
}

struct thread_probe {
    const char *seen_msg_at_start;
    int seen_code_at_start;
    char own_msg[64];
    int own_code;
};

static void *thread_probe_fn(void *arg) {
    struct thread_probe *p = arg;
    p->seen_code_at_start = distc_error_last_code();
    p->seen_msg_at_start = distc_error_last()[0] ? "non-empty" : "";
    distc_error_set(DISTC_ENOTFOUND, "from the other thread");
    snprintf(p->own_msg, sizeof p->own_msg, "%s", distc_error_last());
    p->own_code = distc_error_last_code();
    return NULL;
}

static void test_error_thread_local(void **state) {
    (void)state;
    distc_error_set(DISTC_EABORTED, "main thread message");
    struct thread_probe p;
    memset(&p, 0, sizeof p);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, thread_probe_fn, &p), 0);
    assert_int_equal(pthread_join(t, NULL), 0);
    /* The other thread started clean and saw its own message. */
    assert_int_equal(p.seen_code_at_start, 0);
    assert_string_equal(p.seen_msg_at_start, "");
    assert_string_equal(p.own_msg, "from the other thread");
    assert_int_equal(p.own_code, DISTC_ENOTFOUND);
    /* The main thread's message is untouched. */
    assert_int_equal(distc_error_last_code(), DISTC_EABORTED);
    assert_string_equal(distc_error_last(), "main thread message");
    distc_error_clear();
}

static void test_version(void **state) {
    (void)state;
    assert_non_null(distc_version());
    assert_string_equal(distc_version(), DISTC_VERSION_STRING);
    assert_int_equal(distc_version_number(), DISTC_VERSION_NUMBER);
    assert_int_equal(DISTC_VERSION_NUMBER,
                     DISTC_VERSION_MAJOR * 10000 + DISTC_VERSION_MINOR * 100 + DISTC_VERSION_PATCH);
    char expect[32];
    snprintf(expect, sizeof expect, "%d.%d.%d", DISTC_VERSION_MAJOR, DISTC_VERSION_MINOR, DISTC_VERSION_PATCH);
    assert_string_equal(distc_version(), expect);
}

static void test_version_check(void **state) {
    (void)state;
    assert_true(DISTC_VERSION_CHECK(0, 0, 0));
    assert_true(DISTC_VERSION_CHECK(DISTC_VERSION_MAJOR, DISTC_VERSION_MINOR, DISTC_VERSION_PATCH));
    assert_false(DISTC_VERSION_CHECK(DISTC_VERSION_MAJOR, DISTC_VERSION_MINOR, DISTC_VERSION_PATCH + 1));
    assert_false(DISTC_VERSION_CHECK(DISTC_VERSION_MAJOR, DISTC_VERSION_MINOR + 1, 0));
    assert_false(DISTC_VERSION_CHECK(DISTC_VERSION_MAJOR + 1, 0, 0));
#if DISTC_VERSION_MAJOR > 0 || DISTC_VERSION_MINOR > 0
    assert_true(DISTC_VERSION_CHECK(0, 0, 1));
#endif
    /* Usable in the preprocessor. */
#if !DISTC_VERSION_CHECK(0, 1, 0)
    fail_msg("DISTC_VERSION_CHECK(0, 1, 0) is false in #if");
#endif
}

static void test_buf_set_dispose(void **state) {
    (void)state;
    distc_buf_dispose(NULL); /* no-op */

    distc_buf b = {NULL, 0};
    const char data[] = {'a', '\0', 'b', '\0'};
    ASSERT_OK(distc_buf_set(&b, data, sizeof data));
    assert_non_null(b.data);
    assert_int_equal(b.size, sizeof data);
    assert_memory_equal(b.data, data, sizeof data);
    distc_buf_dispose(&b);
    assert_null(b.data);
    assert_int_equal(b.size, 0);
    distc_buf_dispose(&b); /* already disposed: no-op */
    assert_null(b.data);

    /* Zero length, with or without data, gives non-NULL data. */
    ASSERT_OK(distc_buf_set(&b, NULL, 0));
    assert_non_null(b.data);
    assert_int_equal(b.size, 0);
    distc_buf_dispose(&b);
    ASSERT_OK(distc_buf_set(&b, data, 0));
    assert_non_null(b.data);
    assert_int_equal(b.size, 0);
    distc_buf_dispose(&b);

    /* NULL data with len > 0, and a NULL out, are refused. */
    ASSERT_ERR(distc_buf_set(&b, NULL, 3), DISTC_EINVAL, "distc_buf_set");
    dt_assert_contains(distc_error_last(), "data");
    assert_null(b.data);
    ASSERT_ERR(distc_buf_set(NULL, data, 1), DISTC_EINVAL, "out");
    dt_assert_contains(distc_error_last(), "distc_buf_set");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_strerror_every_code),
        cmocka_unit_test(test_strerror_unknown),
        cmocka_unit_test(test_error_last_never_null),
        cmocka_unit_test(test_error_clear),
        cmocka_unit_test(test_error_set),
        cmocka_unit_test(test_error_thread_local),
        cmocka_unit_test(test_version),
        cmocka_unit_test(test_version_check),
        cmocka_unit_test(test_buf_set_dispose),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

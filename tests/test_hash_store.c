/* The in-process hash store: the whole store suite, plus what is particular to it. */
#define _GNU_SOURCE
#include "store_suite.h"

#include <pthread.h>
#include <string.h>
#include <unistd.h>

static int setup(void **state) {
    distc_store *s = NULL;
    if (distc_store_new_hash(&s) != 0) return -1;
    *state = s;
    return 0;
}

static int teardown(void **state) {
    distc_store_free(*state);
    return 0;
}

static void test_new_and_free(void **state) {
    (void)state;
    distc_store_free(NULL); /* no-op */
    ASSERT_EINVAL(distc_store_new_hash(NULL), "distc_store_new_hash", "out");
    distc_store *a = NULL, *b = NULL;
    ASSERT_OK(distc_store_new_hash(&a));
    ASSERT_OK(distc_store_new_hash(&b));
    assert_non_null(a);
    assert_true(a != b);
    /* Two hash stores are independent. */
    dt_set_str(a, "k", "in a");
    assert_int_equal(dt_has_key(b, "k"), 0);
    int64_t t = 0;
    ASSERT_OK(distc_store_get_timeout(&t, a));
    assert_int_equal(t, DISTC_STORE_DEFAULT_TIMEOUT_MS);
    distc_store_free(a);
    distc_store_free(b);
}

static void test_size_limit(void **state) {
    distc_store *s = *state;
    /* Over the 1 GiB limit: refused before anything is read or allocated. */
    char small[4] = "abc";
    size_t over = (size_t)DISTC_STORE_MAX_VALUE_SIZE + 1;
    ASSERT_ERR(distc_store_set(s, "huge", small, over), DISTC_ENOMEM, "distc_store_set");
    ASSERT_ERR(distc_store_append(s, "huge", small, over), DISTC_ENOMEM, "distc_store_append");
    ASSERT_ERR(distc_store_compare_set(NULL, s, "huge", small, over, small, 1), DISTC_ENOMEM, "expected");
    assert_int_equal(dt_has_key(s, "huge"), 0);
}

/* A waiter blocked in get is woken by add, append, compare_set and multi_set, not only set. */
struct waker {
    distc_store *s;
    int which;
};

static void *waker_fn(void *arg) {
    struct waker *w = arg;
    usleep(50 * 1000);
    switch (w->which) {
        case 0: distc_store_add(NULL, w->s, "w0", 1); break;
        case 1: distc_store_append(w->s, "w1", "a", 1); break;
        case 2: distc_store_compare_set(NULL, w->s, "w2", NULL, 0, "c", 1); break;
        default: {
            const char *k = "w3";
            const void *v = "m";
            size_t l = 1;
            distc_store_multi_set(w->s, &k, &v, &l, 1);
        }
    }
    return NULL;
}

static void test_every_writer_wakes_waiters(void **state) {
    distc_store *s = *state;
    static const char *keys[] = {"w0", "w1", "w2", "w3"};
    static const char *expect[] = {"1", "a", "c", "m"};
    ASSERT_OK(distc_store_set_timeout(s, 10000));
    for (int i = 0; i < 4; ++i) {
        struct waker w = {s, i};
        pthread_t t;
        assert_int_equal(pthread_create(&t, NULL, waker_fn, &w), 0);
        int64_t t0 = dt_now_ms();
        dt_expect_str(s, keys[i], expect[i]);
        assert_true(dt_now_ms() - t0 < 9000);
        pthread_join(t, NULL);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        DT_STORE_SUITE(setup, teardown),
        cmocka_unit_test(test_new_and_free),
        cmocka_unit_test_setup_teardown(test_size_limit, setup, teardown),
        cmocka_unit_test_setup_teardown(test_every_writer_wakes_waiters, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

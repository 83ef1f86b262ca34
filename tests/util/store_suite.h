/*
 * The store conformance suite: every operation of distc/store.h, run against
 * any store kind. Each test gets a fresh, empty store in *state (a
 * `distc_store *` made by the caller's setup) and leaves it to the teardown.
 *
 *   const struct CMUnitTest tests[] = { DT_STORE_SUITE(setup, teardown), ... };
 */
#ifndef DISTC_STORE_SUITE_H
#define DISTC_STORE_SUITE_H

#include "test_util.h"

/* Asserts DISTC_EINVAL with a message naming the function `fn` and the argument `arg`. */
#define ASSERT_EINVAL(expr, fn, arg)                 \
    do {                                             \
        ASSERT_ERR(expr, DISTC_EINVAL, fn);          \
        dt_assert_contains(distc_error_last(), arg); \
    } while (0)

/* Small helpers shared by the store tests. */
void dt_set_str(distc_store *s, const char *key, const char *value);
/* Asserts that `key` holds exactly `len` bytes equal to `value`. */
void dt_expect_value(distc_store *s, const char *key, const void *value, size_t len);
void dt_expect_str(distc_store *s, const char *key, const char *value);
/* 1 if `key` exists, else 0. */
int dt_has_key(distc_store *s, const char *key);

void dt_store_test_set_get(void **state);
void dt_store_test_set_overwrite_and_empty(void **state);
void dt_store_test_large_value(void **state);
void dt_store_test_add(void **state);
void dt_store_test_add_not_integer(void **state);
void dt_store_test_compare_set(void **state);
void dt_store_test_check(void **state);
void dt_store_test_wait_later(void **state);
void dt_store_test_wait_timeout(void **state);
void dt_store_test_wait_default_timeout(void **state);
void dt_store_test_get_timeout(void **state);
void dt_store_test_delete_key(void **state);
void dt_store_test_num_keys(void **state);
void dt_store_test_append(void **state);
void dt_store_test_multi_get(void **state);
void dt_store_test_multi_get_timeout(void **state);
void dt_store_test_multi_set(void **state);
void dt_store_test_timeouts(void **state);
void dt_store_test_huge_timeouts(void **state);
void dt_store_test_bad_args(void **state);
void dt_store_test_threads(void **state);

#define DT_STORE_SUITE(setup, teardown)                                                          \
    cmocka_unit_test_setup_teardown(dt_store_test_set_get, setup, teardown),                     \
        cmocka_unit_test_setup_teardown(dt_store_test_set_overwrite_and_empty, setup, teardown), \
        cmocka_unit_test_setup_teardown(dt_store_test_large_value, setup, teardown),             \
        cmocka_unit_test_setup_teardown(dt_store_test_add, setup, teardown),                     \
        cmocka_unit_test_setup_teardown(dt_store_test_add_not_integer, setup, teardown),         \
        cmocka_unit_test_setup_teardown(dt_store_test_compare_set, setup, teardown),             \
        cmocka_unit_test_setup_teardown(dt_store_test_check, setup, teardown),                   \
        cmocka_unit_test_setup_teardown(dt_store_test_wait_later, setup, teardown),              \
        cmocka_unit_test_setup_teardown(dt_store_test_wait_timeout, setup, teardown),            \
        cmocka_unit_test_setup_teardown(dt_store_test_wait_default_timeout, setup, teardown),    \
        cmocka_unit_test_setup_teardown(dt_store_test_get_timeout, setup, teardown),             \
        cmocka_unit_test_setup_teardown(dt_store_test_delete_key, setup, teardown),              \
        cmocka_unit_test_setup_teardown(dt_store_test_num_keys, setup, teardown),                \
        cmocka_unit_test_setup_teardown(dt_store_test_append, setup, teardown),                  \
        cmocka_unit_test_setup_teardown(dt_store_test_multi_get, setup, teardown),               \
        cmocka_unit_test_setup_teardown(dt_store_test_multi_get_timeout, setup, teardown),       \
        cmocka_unit_test_setup_teardown(dt_store_test_multi_set, setup, teardown),               \
        cmocka_unit_test_setup_teardown(dt_store_test_timeouts, setup, teardown),                \
        cmocka_unit_test_setup_teardown(dt_store_test_huge_timeouts, setup, teardown),           \
        cmocka_unit_test_setup_teardown(dt_store_test_bad_args, setup, teardown),                \
        cmocka_unit_test_setup_teardown(dt_store_test_threads, setup, teardown)

#endif

/* The prefix store: the whole store suite through a prefix, and key mapping and lifetime. */
#define _GNU_SOURCE
#include "store_suite.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The suite runs on a prefix store whose inner handle is already freed:
 * the prefix keeps the inner store alive. */
static int setup(void **state) {
    distc_store *inner = NULL, *p = NULL;
    if (distc_store_new_hash(&inner) != 0) return -1;
    if (distc_store_new_prefix(&p, "suite", inner) != 0) return -1;
    distc_store_free(inner);
    *state = p;
    return 0;
}

static int teardown(void **state) {
    distc_store_free(*state);
    return 0;
}

static void test_keys_land_prefixed(void **state) {
    (void)state;
    distc_store *inner = NULL, *p = NULL;
    ASSERT_OK(distc_store_new_hash(&inner));
    ASSERT_OK(distc_store_new_prefix(&p, "pre", inner));

    dt_set_str(p, "k", "v");
    dt_expect_str(inner, "pre/k", "v");
    assert_int_equal(dt_has_key(inner, "k"), 0);

    ASSERT_OK(distc_store_add(NULL, p, "cnt", 5));
    dt_expect_str(inner, "pre/cnt", "5");

    ASSERT_OK(distc_store_append(p, "log", "ab", 2));
    dt_expect_str(inner, "pre/log", "ab");

    ASSERT_OK(distc_store_compare_set(NULL, p, "cas", NULL, 0, "x", 1));
    dt_expect_str(inner, "pre/cas", "x");

    const char *ks[] = {"m1", "m2"};
    const void *vs[] = {"1", "2"};
    const size_t ls[] = {1, 1};
    ASSERT_OK(distc_store_multi_set(p, ks, vs, ls, 2));
    dt_expect_str(inner, "pre/m1", "1");
    dt_expect_str(inner, "pre/m2", "2");

    /* Reads map the same way. */
    dt_set_str(inner, "pre/from_inner", "hi");
    dt_expect_str(p, "from_inner", "hi");
    distc_buf out[2];
    memset(out, 0, sizeof out);
    ASSERT_OK(distc_store_multi_get(out, p, ks, 2));
    assert_memory_equal(out[1].data, "2", 1);
    distc_buf_dispose(&out[0]);
    distc_buf_dispose(&out[1]);
    const char *w = "from_inner";
    ASSERT_OK(distc_store_wait(p, &w, 1, 100));
    assert_int_equal(dt_has_key(p, "from_inner"), 1);
    /* A key outside the prefix is invisible through it. */
    dt_set_str(inner, "outside", "o");
    assert_int_equal(dt_has_key(p, "outside"), 0);
    const char *o = "outside";
    ASSERT_ERR(distc_store_wait(p, &o, 1, 50), DISTC_ETIMEOUT, "outside");

    int32_t d = 0;
    ASSERT_OK(distc_store_delete_key(&d, p, "k"));
    assert_int_equal(d, 1);
    assert_int_equal(dt_has_key(inner, "pre/k"), 0);
    ASSERT_OK(distc_store_delete_key(&d, p, "outside"));
    assert_int_equal(d, 0);
    assert_int_equal(dt_has_key(inner, "outside"), 1);

    /* num_keys counts the inner store's keys, as c10d does. */
    int64_t n_inner = 0, n_p = 0;
    ASSERT_OK(distc_store_num_keys(&n_inner, inner));
    ASSERT_OK(distc_store_num_keys(&n_p, p));
    assert_int_equal(n_inner, n_p);

    distc_store_free(p);
    distc_store_free(inner);
}

static void test_nested_and_siblings(void **state) {
    (void)state;
    distc_store *inner = NULL, *a = NULL, *ab = NULL, *c = NULL;
    ASSERT_OK(distc_store_new_hash(&inner));
    ASSERT_OK(distc_store_new_prefix(&a, "a", inner));
    ASSERT_OK(distc_store_new_prefix(&ab, "b", a));
    ASSERT_OK(distc_store_new_prefix(&c, "c", inner));
    dt_set_str(ab, "k", "nested");
    dt_expect_str(inner, "a/b/k", "nested");
    dt_expect_str(a, "b/k", "nested");
    /* Sibling prefixes do not see each other's keys. */
    dt_set_str(c, "k", "sibling");
    dt_expect_str(inner, "c/k", "sibling");
    dt_expect_str(ab, "k", "nested");
    assert_int_equal(dt_has_key(a, "k"), 0);
    /* Free in an arbitrary order: parents first. */
    distc_store_free(inner);
    distc_store_free(a);
    dt_expect_str(ab, "k", "nested");
    ASSERT_OK(distc_store_add(NULL, ab, "n", 2));
    distc_store_free(ab);
    dt_expect_str(c, "k", "sibling");
    distc_store_free(c);
}

static void test_free_inner_first(void **state) {
    (void)state;
    distc_store *inner = NULL, *p = NULL;
    ASSERT_OK(distc_store_new_hash(&inner));
    dt_set_str(inner, "p/before", "kept");
    ASSERT_OK(distc_store_new_prefix(&p, "p", inner));
    distc_store_free(inner);
    /* The prefix keeps the inner store alive, data included. */
    dt_expect_str(p, "before", "kept");
    dt_set_str(p, "after", "ok");
    dt_expect_str(p, "after", "ok");
    distc_store_free(p);
}

static void test_timeout_inherited(void **state) {
    (void)state;
    distc_store *inner = NULL, *p = NULL;
    ASSERT_OK(distc_store_new_hash(&inner));
    ASSERT_OK(distc_store_set_timeout(inner, 4321));
    ASSERT_OK(distc_store_new_prefix(&p, "p", inner));
    int64_t t = 0;
    ASSERT_OK(distc_store_get_timeout(&t, p));
    assert_int_equal(t, 4321);
    /* The prefix's own timeout governs its gets. */
    ASSERT_OK(distc_store_set_timeout(p, 200));
    distc_buf b = {NULL, 0};
    int64_t t0 = dt_now_ms();
    ASSERT_ERR(distc_store_get(&b, p, "missing_key"), DISTC_ETIMEOUT, "missing_key");
    assert_true(dt_now_ms() - t0 < 4000);
    distc_store_free(p);
    distc_store_free(inner);
}

static void test_over_file_store(void **state) {
    (void)state;
    char *path = dt_temp_path("prefix");
    distc_store *f1 = NULL, *f2 = NULL, *p = NULL;
    ASSERT_OK(distc_store_new_file(&f1, path, 2));
    ASSERT_OK(distc_store_new_file(&f2, path, 2));
    ASSERT_OK(distc_store_new_prefix(&p, "grp", f1));
    distc_store_free(f1);
    dt_set_str(p, "k", "through the file");
    ASSERT_OK(distc_store_add(NULL, p, "n", 3));
    dt_expect_str(f2, "grp/k", "through the file");
    dt_expect_str(f2, "grp/n", "3");
    distc_store_free(p); /* the first user is done */
    assert_int_equal(access(path, F_OK), 0);
    distc_store_free(f2); /* the second: the file goes */
    assert_int_not_equal(access(path, F_OK), 0);
    free(path);
}

static void test_bad_args(void **state) {
    (void)state;
    distc_store *inner = NULL, *p = NULL;
    ASSERT_OK(distc_store_new_hash(&inner));
    ASSERT_EINVAL(distc_store_new_prefix(NULL, "p", inner), "distc_store_new_prefix", "out");
    ASSERT_EINVAL(distc_store_new_prefix(&p, NULL, inner), "distc_store_new_prefix", "prefix");
    ASSERT_EINVAL(distc_store_new_prefix(&p, "p", NULL), "distc_store_new_prefix", "inner");
    assert_null(p);
    distc_store_free(inner);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        DT_STORE_SUITE(setup, teardown),
        cmocka_unit_test(test_keys_land_prefixed),
        cmocka_unit_test(test_nested_and_siblings),
        cmocka_unit_test(test_free_inner_first),
        cmocka_unit_test(test_timeout_inherited),
        cmocka_unit_test(test_over_file_store),
        cmocka_unit_test(test_bad_args),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

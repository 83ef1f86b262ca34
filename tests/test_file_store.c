/* The file store: the whole store suite, plus processes sharing one file,
 * big values, cleanup by num_workers and files that are not stores. */
#define _GNU_SOURCE
#include "store_suite.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The suite runs on a file store with num_workers = 1: freeing it removes the file. */
static int setup(void **state) {
    char *path = dt_temp_path("fs-suite");
    distc_store *s = NULL;
    int rc = distc_store_new_file(&s, path, 1);
    free(path);
    if (rc != 0) return -1;
    *state = s;
    return 0;
}

static int teardown(void **state) {
    distc_store_free(*state);
    return 0;
}

static int exists(const char *path) { return access(path, F_OK) == 0; }

static void write_file(const char *path, const void *data, size_t len) {
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    if (len) assert_int_equal(fwrite(data, 1, len, f), len);
    fclose(f);
}

/* ------------------------------------------------------------------------ */

static void test_two_handles_share(void **state) {
    (void)state;
    char *path = dt_temp_path("fs-share");
    distc_store *a = NULL, *b = NULL;
    ASSERT_OK(distc_store_new_file(&a, path, 0));
    ASSERT_OK(distc_store_new_file(&b, path, 0));
    dt_set_str(a, "k", "from a");
    dt_expect_str(b, "k", "from a");
    ASSERT_OK(distc_store_add(NULL, b, "n", 2));
    ASSERT_OK(distc_store_add(NULL, a, "n", 3));
    dt_expect_str(b, "n", "5");
    ASSERT_OK(distc_store_append(a, "log", "x", 1));
    ASSERT_OK(distc_store_append(b, "log", "y", 1));
    dt_expect_str(a, "log", "xy");
    int32_t d = 0;
    ASSERT_OK(distc_store_delete_key(&d, b, "k"));
    assert_int_equal(d, 1);
    assert_int_equal(dt_has_key(a, "k"), 0);
    ASSERT_OK(distc_store_delete_key(&d, a, "k"));
    assert_int_equal(d, 0);
    distc_buf r = {NULL, 0};
    ASSERT_OK(distc_store_compare_set(&r, a, "cas", NULL, 0, "1", 1));
    distc_buf_dispose(&r);
    ASSERT_OK(distc_store_compare_set(&r, b, "cas", "1", 1, "2", 1));
    assert_memory_equal(r.data, "2", 1);
    distc_buf_dispose(&r);
    dt_expect_str(a, "cas", "2");

    /* The data outlives every handle when num_workers <= 0. */
    distc_store_free(a);
    distc_store_free(b);
    assert_true(exists(path));
    ASSERT_OK(distc_store_new_file(&a, path, 0));
    dt_expect_str(a, "n", "5");
    dt_expect_str(a, "log", "xy");
    /* Internal bookkeeping (the cleanup counter) is not a user key. */
    int64_t n = -1;
    ASSERT_OK(distc_store_num_keys(&n, a));
    assert_int_equal(n, 3); /* n, log, cas */
    distc_store_free(a);
    unlink(path);
    free(path);
}

#define N_PROCS 4
#define N_PROC_ADDS 500

static int add_child(int rank, int n, void *arg) {
    (void)n;
    const char *path = arg;
    distc_store *s = NULL;
    if (distc_store_new_file(&s, path, N_PROCS + 1) != 0) {
        fprintf(stderr, "rank %d: %s\n", rank, distc_error_last());
        return 1;
    }
    for (int i = 0; i < N_PROC_ADDS; ++i) {
        if (distc_store_add(NULL, s, "counter", 1) != 0) {
            fprintf(stderr, "rank %d: add: %s\n", rank, distc_error_last());
            return 1;
        }
    }
    char key[32];
    snprintf(key, sizeof key, "done/%d", rank);
    if (distc_store_set(s, key, "1", 1) != 0) return 1;
    distc_store_free(s);
    return 0;
}

static void test_processes_add(void **state) {
    (void)state;
    char *path = dt_temp_path("fs-procs");
    distc_store *s = NULL;
    /* The parent is the fifth user. */
    ASSERT_OK(distc_store_new_file(&s, path, N_PROCS + 1));
    assert_int_equal(dt_run_procs(N_PROCS, add_child, path, 60), 0);
    int64_t v = 0;
    ASSERT_OK(distc_store_add(&v, s, "counter", 0));
    assert_int_equal(v, N_PROCS * N_PROC_ADDS);
    dt_expect_str(s, "counter", "2000");
    const char *done[] = {"done/0", "done/1", "done/2", "done/3"};
    int32_t ok = 0;
    ASSERT_OK(distc_store_check(&ok, s, done, 4));
    assert_int_equal(ok, 1);
    /* Four children have freed their handles: the file stays until the fifth. */
    assert_true(exists(path));
    distc_store_free(s);
    assert_false(exists(path));
    free(path);
}

static int wait_child(int rank, int n, void *arg) {
    (void)n;
    const char *path = arg;
    distc_store *s = NULL;
    if (distc_store_new_file(&s, path, 0) != 0) return 1;
    distc_store_set_timeout(s, 20000);
    distc_buf b = {NULL, 0};
    int rc = 0;
    if (rank == 0) {
        /* Waits for a key another process sets later, then answers. */
        const char *k = "ping";
        if (distc_store_wait(s, &k, 1, 20000) != 0) rc = 1;
        if (!rc && distc_store_get(&b, s, "ping") != 0) rc = 1;
        if (!rc && (b.size != 4 || memcmp(b.data, "ping", 4) != 0)) rc = 1;
        if (!rc && distc_store_set(s, "pong", "pong", 4) != 0) rc = 1;
    } else {
        usleep(200 * 1000);
        if (distc_store_set(s, "ping", "ping", 4) != 0) rc = 1;
        /* get waits across processes too. */
        if (!rc && distc_store_get(&b, s, "pong") != 0) rc = 1;
        if (!rc && (b.size != 4 || memcmp(b.data, "pong", 4) != 0)) rc = 1;
    }
    if (rc) fprintf(stderr, "rank %d: %s\n", rank, distc_error_last());
    distc_buf_dispose(&b);
    distc_store_free(s);
    return rc;
}

static void test_processes_wait(void **state) {
    (void)state;
    char *path = dt_temp_path("fs-wait");
    assert_int_equal(dt_run_procs(2, wait_child, path, 30), 0);
    distc_store *s = NULL;
    ASSERT_OK(distc_store_new_file(&s, path, 0));
    dt_expect_str(s, "pong", "pong");
    distc_store_free(s);
    unlink(path);
    free(path);
}

static void test_big_value(void **state) {
    (void)state;
    char *path = dt_temp_path("fs-big");
    size_t n = (size_t)64 << 20;
    uint8_t *v = malloc(n);
    assert_non_null(v);
    for (size_t i = 0; i < n; ++i) v[i] = (uint8_t)((i * 2654435761u) >> 24);
    distc_store *a = NULL, *b = NULL;
    ASSERT_OK(distc_store_new_file(&a, path, 2));
    ASSERT_OK(distc_store_set(a, "big", v, n));
    dt_expect_value(a, "big", v, n);
    /* A second handle reads it back from the file. */
    ASSERT_OK(distc_store_new_file(&b, path, 2));
    dt_expect_value(b, "big", v, n);
    distc_store_free(a);
    distc_store_free(b);
    assert_false(exists(path));
    free(v);
    free(path);
}

static void test_cleanup(void **state) {
    (void)state;
    char *path = dt_temp_path("fs-clean");
    distc_store *a = NULL, *b = NULL;

    /* num_workers = 2: the second free removes the file. */
    ASSERT_OK(distc_store_new_file(&a, path, 2));
    ASSERT_OK(distc_store_new_file(&b, path, 2));
    dt_set_str(a, "k", "v");
    assert_true(exists(path));
    distc_store_free(a);
    assert_true(exists(path));
    dt_expect_str(b, "k", "v");
    distc_store_free(b);
    assert_false(exists(path));

    /* num_workers <= 0: never removed. */
    for (int nw = 0; nw >= -1; --nw) {
        ASSERT_OK(distc_store_new_file(&a, path, nw));
        ASSERT_OK(distc_store_new_file(&b, path, nw));
        distc_store_free(a);
        distc_store_free(b);
        assert_true(exists(path));
        ASSERT_OK(distc_store_new_file(&a, path, nw));
        distc_store_free(a);
        assert_true(exists(path));
        assert_int_equal(unlink(path), 0);
    }

    /* num_workers = 1: removed with its only handle, and a later store at the same path starts empty. */
    ASSERT_OK(distc_store_new_file(&a, path, 1));
    dt_set_str(a, "old", "1");
    distc_store_free(a);
    assert_false(exists(path));
    ASSERT_OK(distc_store_new_file(&a, path, 1));
    assert_int_equal(dt_has_key(a, "old"), 0);
    distc_store_free(a);
    assert_false(exists(path));
    free(path);
}

static void test_missing_directory(void **state) {
    (void)state;
    char *dir = dt_temp_path("fs-nodir");
    char *path = NULL;
    assert_true(asprintf(&path, "%s/sub/store", dir) > 0);
    distc_store *s = NULL;
    ASSERT_ERR(distc_store_new_file(&s, path, 1), DISTC_EIO, "distc_store_new_file");
    dt_assert_contains(distc_error_last(), path);
    assert_null(s);
    free(path);
    free(dir);
}

static void test_not_a_store(void **state) {
    (void)state;
    char *path = dt_temp_path("fs-foreign");
    distc_store *s = NULL;

    write_file(path, "hello", 5);
    ASSERT_ERR(distc_store_new_file(&s, path, 1), DISTC_EPROTO, "not a distc file store");
    dt_assert_contains(distc_error_last(), "distc_store_new_file");
    assert_null(s);
    /* The foreign file is left as it was. */
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_size, 5);

    /* Longer than the magic, still foreign. */
    write_file(path, "hello, this is a text file\n", 27);
    ASSERT_ERR(distc_store_new_file(&s, path, 1), DISTC_EPROTO, "not a distc file store");
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_size, 27);

    /* The magic followed by a cut-off record. */
    const char cut[] = {'D', 'I', 'S', 'T', 'C', 'F', 'S', '1', 1, 3, 0};
    write_file(path, cut, sizeof cut);
    ASSERT_ERR(distc_store_new_file(&s, path, 1), DISTC_EPROTO, path);

    /* The magic followed by an unknown record type. */
    const char bad_op[] = {'D', 'I', 'S', 'T', 'C', 'F', 'S', '1', 9, 1, 0, 0, 0,
                           0,   0,   0,   0,   'k', 0,   0,   0,   0, 0, 0, 0, 0};
    write_file(path, bad_op, sizeof bad_op);
    ASSERT_ERR(distc_store_new_file(&s, path, 1), DISTC_EPROTO, "malformed");

    /* An existing empty file becomes a store. */
    write_file(path, NULL, 0);
    ASSERT_OK(distc_store_new_file(&s, path, 1));
    dt_set_str(s, "k", "v");
    distc_store_free(s);
    unlink(path);
    free(path);
}

static void test_bad_args(void **state) {
    (void)state;
    distc_store *s = NULL;
    ASSERT_EINVAL(distc_store_new_file(NULL, "/tmp/x", 1), "distc_store_new_file", "out");
    ASSERT_EINVAL(distc_store_new_file(&s, NULL, 1), "distc_store_new_file", "path");
    ASSERT_EINVAL(distc_store_new_file(&s, "", 1), "distc_store_new_file", "path");
    assert_null(s);
    /* A directory is not a file. */
    ASSERT_ERR(distc_store_new_file(&s, "/tmp", 1), DISTC_EIO, "/tmp");
    assert_null(s);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        DT_STORE_SUITE(setup, teardown),          cmocka_unit_test(test_two_handles_share),
        cmocka_unit_test(test_processes_add),     cmocka_unit_test(test_processes_wait),
        cmocka_unit_test(test_big_value),         cmocka_unit_test(test_cleanup),
        cmocka_unit_test(test_missing_directory), cmocka_unit_test(test_not_a_store),
        cmocka_unit_test(test_bad_args),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

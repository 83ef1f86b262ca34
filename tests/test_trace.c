/* The flight recorder: what groups record, the dumps (on demand and by
 * themselves on a failure), and distc-trace naming the rank at fault. */
#define _GNU_SOURCE
#include <dirent.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "pg_harness.h"
#include "test_util.h"

static char *make_dir(const char *tag) {
    char *d = dt_temp_path(tag);
    assert_int_equal(mkdir(d, 0700), 0);
    return d;
}

static void remove_dir(char *d) {
    DIR *dir = opendir(d);
    struct dirent *e;
    while (dir && (e = readdir(dir)) != NULL) {
        if (e->d_name[0] == '.') continue;
        char p[4096];
        snprintf(p, sizeof p, "%s/%s", d, e->d_name);
        unlink(p);
    }
    if (dir) closedir(dir);
    rmdir(d);
    free(d);
}

/* Files whose name contains `part`. */
static int count_named(const char *d, const char *part) {
    DIR *dir = opendir(d);
    struct dirent *e;
    int n = 0;
    while (dir && (e = readdir(dir)) != NULL) n += strstr(e->d_name, part) != NULL;
    if (dir) closedir(dir);
    return n;
}

/* distc-trace's report on `dir` (its exit status in *status). */
static char *analyse(const char *dir, int *status) {
    const char *tool = getenv("DISTC_TRACE_TOOL"), *py = getenv("DISTC_TEST_PYTHON");
    if (!tool || !py) fail_msg("DISTC_TRACE_TOOL and DISTC_TEST_PYTHON must be set (CTest sets them)");
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "%s %s %s 2>&1", py, tool, dir);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    size_t cap = 1 << 16, len = 0;
    char *out = calloc(1, cap);
    size_t got;
    while ((got = fread(out + len, 1, cap - 1 - len, p)) > 0) len += got;
    int rc = pclose(p);
    *status = WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
    printf("%s", out);
    return out;
}

/* distc-trace on `dir` exits 1 (a divergence) and says each of `needles`. */
static void expect_report(const char *dir, const char *const *needles) {
    int status = -1;
    char *out = analyse(dir, &status);
    assert_int_equal(status, 1);
    for (; *needles; ++needles)
        if (!strstr(out, *needles)) fail_msg("distc-trace did not say '%s'", *needles);
    free(out);
}

/* ----------------------------------------------------- a rank skips one */

struct skip_arg {
    const char *dir;    /* explicit dumps, one file per rank */
    const char *victim; /* "skip" or "other-op" */
};

static void rank_skips(distc_pg *pg, int rank, int size, void *arg) {
    struct skip_arg *a = arg;
    (void)size;
    DLTensor *t = dt_tensor_1d(DT_F32, 16);
    distc_op_options o = DISTC_OP_OPTIONS_INIT;
    o.timeout_ms = 1500;
    for (int i = 0; i < 2; ++i) RK_OK(distc_allreduce(NULL, pg, t, DISTC_SUM, &o));
    if (rank != 1) {
        RK_CHECK(distc_allreduce(NULL, pg, t, DISTC_SUM, &o) != 0);
    } else if (strcmp(a->victim, "other-op") == 0) {
        RK_CHECK(distc_broadcast(NULL, pg, t, 0, &o) != 0);
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/rank%d.jsonl", a->dir, rank);
    RK_OK(distc_pg_trace_dump(pg, path));
    dt_tensor_free(t);
}

/* Rank 1 never calls the third allreduce: its peers time out, write their
 * traces into DISTC_TRACE_DIR by themselves, every rank dumps on demand
 * too, and distc-trace names rank 1 and the sequence number. */
static void test_rank_skips_one(void **state) {
    (void)state;
    char *auto_dir = make_dir("trace-auto"), *dir = make_dir("trace");
    setenv("DISTC_TRACE_DIR", auto_dir, 1);
    struct skip_arg a = {dir, "skip"};
    dt_run_ranks(3, rank_skips, &a);
    unsetenv("DISTC_TRACE_DIR");
    assert_true(count_named(auto_dir, ".jsonl") >= 1);
    assert_int_equal(count_named(auto_dir, ".tmp"), 0); /* every dump was renamed into place */
    const char *const said[] = {"rank 1 never called allreduce #3 of group", "ranks 0, 2 waited", NULL};
    expect_report(dir, said);
    /* The automatic dump holds the same story (one file for this process's ranks). */
    const char *const also[] = {"#3", NULL};
    expect_report(auto_dir, also);
    remove_dir(dir);
    remove_dir(auto_dir);
}

/* Rank 1 calls broadcast where the others call allreduce: named with both. */
static void test_rank_calls_another_op(void **state) {
    (void)state;
    char *dir = make_dir("trace-op");
    struct skip_arg a = {dir, "other-op"};
    dt_run_ranks(3, rank_skips, &a);
    const char *const said[] = {"ranks disagree on #3 of group", "rank 1 called broadcast(float32[16], root 0)",
                                "ranks 0, 2 called allreduce(float32[16], SUM)", NULL};
    expect_report(dir, said);
    remove_dir(dir);
}

/* ------------------------------------ point-to-point among collectives */

static void rank_mixed(distc_pg *pg, int rank, int size, void *arg) {
    (void)size;
    const char *dir = arg;
    DLTensor *t = dt_tensor_1d(DT_F32, 4);
    for (int i = 0; i < 20; ++i) {
        RK_OK(distc_barrier(NULL, pg, NULL));
        if (rank == 0)
            RK_OK(distc_send(NULL, pg, t, 1, i, NULL));
        else
            RK_OK(distc_recv(NULL, pg, t, 0, i, NULL));
    }
    RK_OK(distc_barrier(NULL, pg, NULL));
    if (rank == 0) { /* rank 1 never sends tag 99 */
        distc_op_options o = DISTC_OP_OPTIONS_INIT;
        o.timeout_ms = 100;
        RK_CHECK(distc_recv(NULL, pg, t, 1, 99, &o) == DISTC_ETIMEOUT);
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/rank%d.jsonl", dir, rank);
    RK_OK(distc_pg_trace_dump(pg, path));
    dt_tensor_free(t);
}

/* Collectives and point-to-point operations keep a ring of 8 each; the dump
 * holds the last 8 of each, every send after the barrier before it, and the
 * failed receive with its code and message. */
static void test_p2p_among_collectives(void **state) {
    (void)state;
    char *dir = make_dir("trace-p2p");
    setenv("DISTC_TRACE_BUFFER", "8", 1);
    dt_run_ranks(2, rank_mixed, dir);
    unsetenv("DISTC_TRACE_BUFFER");
    char path[4096];
    snprintf(path, sizeof path, "%s/rank0.jsonl", dir);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    char line[4096], order[64] = {0};
    int ops = 0, last_seq = 0, last_tag = -1;
    while (fgets(line, sizeof line, f)) {
        if (strstr(line, "\"type\":\"group\"")) assert_non_null(strstr(line, "\"capacity\":8,\"recorded\":42"));
        if (!strstr(line, "\"type\":\"op\"")) continue;
        char *seq = strstr(line, "\"seq\":");
        assert_non_null(seq);
        if (strstr(line, "\"op\":\"barrier\"")) {
            last_seq = atoi(seq + 6);
            order[ops] = 'b';
        } else if (strstr(line, "\"op\":\"send\"")) {
            assert_int_equal(atoi(seq + 6), 0);
            char *tag = strstr(line, "\"peer\":1,\"tag\":");
            assert_non_null(tag);
            last_tag = atoi(tag + 15);
            /* Send i follows barrier i + 1. */
            assert_int_equal(last_tag + 1, last_seq);
            assert_non_null(strstr(line, "\"state\":\"completed\""));
            order[ops] = 's';
        } else {
            assert_non_null(strstr(line, "\"op\":\"recv\",\"dtype\":\"float32\",\"numel\":4,\"peer\":1,\"tag\":99"));
            assert_non_null(strstr(line, "\"state\":\"failed\""));
            assert_non_null(strstr(line, "\"code\":-2,\"error\":\""));
            assert_int_equal(last_seq, 21);
            order[ops] = 'r';
        }
        ++ops;
    }
    fclose(f);
    /* Barriers 14-21 and sends 13-19 with the receive, interleaved as they ran. */
    assert_string_equal(order, "bsbsbsbsbsbsbsbr");
    assert_int_equal(last_tag, 19);
    remove_dir(dir);
}

/* ------------------------------------------------------ the ring wraps */

static void rank_many(distc_pg *pg, int rank, int size, void *arg) {
    (void)rank;
    (void)size;
    const char *path = arg;
    for (int i = 0; i < 100000; ++i) RK_OK(distc_barrier(NULL, pg, NULL));
    RK_OK(distc_pg_trace_dump(pg, path));
}

/* 100k operations through a ring of 100: the last 100, in order, complete. */
static void test_ring_wraps(void **state) {
    (void)state;
    char *dir = make_dir("trace-wrap");
    char path[4096];
    snprintf(path, sizeof path, "%s/one.jsonl", dir);
    setenv("DISTC_TRACE_BUFFER", "100", 1);
    dt_run_ranks(1, rank_many, path);
    unsetenv("DISTC_TRACE_BUFFER");
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    char line[4096];
    long expect = 100000 - 100 + 1, ops = 0;
    int header = 0, group = 0;
    while (fgets(line, sizeof line, f)) {
        if (strstr(line, "\"type\":\"distc-trace\",\"version\":1")) header = 1;
        if (strstr(line, "\"type\":\"group\"")) {
            group = 1;
            assert_non_null(strstr(line, "\"capacity\":100,\"recorded\":100000"));
        }
        char *s = strstr(line, "\"seq\":");
        if (!strstr(line, "\"type\":\"op\"") || !s) continue;
        assert_int_equal(atol(s + 6), expect);
        assert_non_null(strstr(line, "\"op\":\"barrier\""));
        assert_non_null(strstr(line, "\"state\":\"completed\""));
        ++expect;
        ++ops;
    }
    fclose(f);
    assert_true(header && group);
    assert_int_equal(ops, 100);
    remove_dir(dir);
}

/* ------------------------------------------------- a rank that is killed */

/* A process's group of `n` ranks meeting in the file store `dir`/store; NULL on failure. */
static distc_pg *file_group(const char *dir, int rank, int n, int64_t timeout_ms, distc_store **st) {
    char path[4096];
    snprintf(path, sizeof path, "%s/store", dir);
    if (distc_store_new_file(st, path, n) != 0) return NULL;
    distc_pg_options o = DISTC_PG_OPTIONS_INIT;
    o.timeout_ms = timeout_ms;
    distc_pg *pg = NULL;
    return distc_pg_new(&pg, *st, rank, n, &o) == 0 ? pg : NULL;
}

static int killed_child(int rank, int n, void *arg) {
    const char *dir = arg;
    setenv("DISTC_TRACE_DIR", dir, 1);
    distc_store *st = NULL;
    distc_pg *pg = file_group(dir, rank, n, 2000, &st);
    if (!pg) return 1;
    DLTensor *t = dt_tensor_1d(DT_F32, 16);
    for (int i = 0; i < 4; ++i) distc_allreduce(NULL, pg, t, DISTC_SUM, NULL);
    if (rank == 2) _exit(9); /* dies before the fifth, with no trace */
    int rc = distc_allreduce(NULL, pg, t, DISTC_SUM, NULL) != 0 ? 0 : 1;
    dt_tensor_free(t);
    distc_pg_free(pg);
    distc_store_free(st);
    return rc;
}

/* Rank 2's process dies: the others fail, dump by themselves, and
 * distc-trace names rank 2 as the one that left no trace. */
static void test_killed_rank(void **state) {
    (void)state;
    char *dir = make_dir("trace-killed");
    dt_run_procs(3, killed_child, dir, 60);
    assert_int_equal(count_named(dir, ".jsonl"), 2);
    const char *const said[] = {"rank 2 left no trace", "#5", NULL};
    expect_report(dir, said);
    char path[4096];
    snprintf(path, sizeof path, "%s/store", dir);
    unlink(path);
    remove_dir(dir);
}

/* ------------------------------------------- a hang inside a subgroup */

static void *dump_later(void *dir) {
    usleep(2500 * 1000);
    distc_trace_dump_all(dir); /* what a live query does, from another thread */
    return NULL;
}

struct sub_arg {
    const char *dir;
    int gives_up; /* rank 1's subgroup times out first, and it dumps then */
};

/* Ranks 1 and 2 form a subgroup. Rank 2 skips the subgroup's second
 * allreduce, so rank 1 hangs there and never reaches the world's third
 * allreduce, where ranks 0 and 2 time out and dump by themselves. Rank 1
 * is dumped while it hangs (a long timeout), or when it gives up. */
static int subgroup_child(int rank, int n, void *arg) {
    const struct sub_arg *a = arg;
    const char *dir = a->dir;
    if (rank != 1 || a->gives_up) setenv("DISTC_TRACE_DIR", dir, 1);
    distc_store *st = NULL;
    distc_pg *world = file_group(dir, rank, n, 1500, &st), *sub = NULL;
    if (!world) return 1;
    distc_pg_options o = DISTC_PG_OPTIONS_INIT;
    o.timeout_ms = a->gives_up ? 500 : 8000;
    const int32_t pair[] = {1, 2};
    if (distc_pg_new_subgroup(&sub, world, pair, 2, &o) != 0) return 1;
    DLTensor *t = dt_tensor_1d(DT_F32, 16);
    int rc = 0;
    for (int i = 0; i < 2; ++i) rc |= distc_allreduce(NULL, world, t, DISTC_SUM, NULL);
    if (sub) rc |= distc_allreduce(NULL, sub, t, DISTC_SUM, NULL);
    if (rc) return 1;
    if (rank == 1) {
        pthread_t th;
        if (!a->gives_up) pthread_create(&th, NULL, dump_later, (void *)dir);
        if (distc_allreduce(NULL, sub, t, DISTC_SUM, NULL) == 0) rc = 1; /* its peer never comes */
        if (!a->gives_up) pthread_join(th, NULL);
    } else {
        if (distc_allreduce(NULL, world, t, DISTC_SUM, NULL) == 0) rc = 1; /* rank 1 never comes */
        usleep(4000 * 1000);                                               /* outlive rank 1's dump */
    }
    dt_tensor_free(t);
    if (sub) distc_pg_free(sub);
    distc_pg_free(world);
    distc_store_free(st);
    return rc;
}

static void run_subgroup_hang(int gives_up, const char *held) {
    char *dir = make_dir("trace-sub");
    struct sub_arg a = {dir, gives_up};
    assert_int_equal(dt_run_procs(3, subgroup_child, &a, 60), 0);
    assert_int_equal(count_named(dir, ".jsonl"), 3);
    const char *const said[] = {"rank 1 never called allreduce #3 of group default_pg", held,
                                "rank 2 never called allreduce #2 of group", NULL};
    expect_report(dir, said);
    char path[4096];
    snprintf(path, sizeof path, "%s/store", dir);
    unlink(path);
    remove_dir(dir);
}

static void test_subgroup_hang(void **state) {
    (void)state;
    run_subgroup_hang(0, "(rank 1 waits in allreduce #2 of group default_pg/sub1)");
    run_subgroup_hang(1, "(rank 1 was held in allreduce #2 of group default_pg/sub1, which failed)");
}

/* ---------------------------------------------------------- the clock */

static int64_t wall_us(void) {
    struct timeval tv;
    gettimeofday(&tv, NULL);
    return (int64_t)tv.tv_sec * 1000000 + tv.tv_usec;
}

/* The number after the n-th `"key":` in the file `path`, or -1. */
static int64_t field_at(const char *path, const char *key, int n) {
    FILE *f = fopen(path, "r");
    char line[4096], quoted[64];
    snprintf(quoted, sizeof quoted, "\"%s\":", key);
    int64_t at = -1;
    while (f && at < 0 && fgets(line, sizeof line, f)) {
        char *q = strstr(line, quoted);
        if (q && n-- == 0) at = atoll(q + strlen(quoted));
    }
    if (f) fclose(f);
    return at;
}

/* Records carry the wall clock: an operation after a pause is stamped
 * after it, both within the time around them. Also in a forked child,
 * whose records name its own thread, not the one that forked it (the main
 * thread's id is the pid). */
static int clock_check(const char *dir) {
    char path[4096];
    snprintf(path, sizeof path, "%s/store-%d", dir, (int)getpid());
    distc_store *st = NULL;
    distc_pg *pg = NULL;
    if (distc_store_new_file(&st, path, 1) != 0 || distc_pg_new(&pg, st, 0, 1, NULL) != 0) return 1;
    int64_t before = wall_us();
    int rc = distc_barrier(NULL, pg, NULL);
    usleep(200 * 1000);
    rc |= distc_barrier(NULL, pg, NULL);
    int64_t after = wall_us();
    snprintf(path, sizeof path, "%s/clock-%d.jsonl", dir, (int)getpid());
    rc |= distc_pg_trace_dump(pg, path);
    int64_t a = field_at(path, "queued_us", 0), b = field_at(path, "queued_us", 1);
    int64_t t0 = field_at(path, "thread", 0), t1 = field_at(path, "thread", 1);
    if (t0 != getpid() || t1 != getpid()) {
        fprintf(stderr, "thread: %lld and %lld, not this process's main thread %ld\n", (long long)t0, (long long)t1,
                (long)getpid());
        rc = 1;
    }
    distc_pg_free(pg);
    distc_store_free(st);
    if (rc || a < 0 || b < 0) return 1;
    /* The recorder's clock lags the real one by up to a kernel tick: allow 20 ms. */
    if (a < before - 20000 || b > after || b - a < 200 * 1000 - 20000) {
        fprintf(stderr, "clock: before %lld, %lld, %lld, after %lld\n", (long long)before, (long long)a, (long long)b,
                (long long)after);
        return 1;
    }
    return 0;
}

#ifndef __SANITIZE_THREAD__ /* TSan: no threads in a multi-threaded process's fork */
static int clock_child(int rank, int n, void *dir) {
    (void)rank;
    (void)n;
    return clock_check(dir);
}
#endif

static void test_clock(void **state) {
    (void)state;
    char *dir = make_dir("trace-clock");
    assert_int_equal(clock_check(dir), 0);
#ifndef __SANITIZE_THREAD__ /* TSan: no threads in a multi-threaded process's fork */
    assert_int_equal(dt_run_procs(1, clock_child, dir, 30), 0); /* a fork of a process that recorded */
#endif
    remove_dir(dir);
}

/* ------------------------------------------------------------- arguments */

static void test_arguments(void **state) {
    (void)state;
    ASSERT_ERR(distc_pg_trace_dump(NULL, "/tmp/x"), DISTC_EINVAL, "pg");
    ASSERT_ERR(distc_trace_dump_all(NULL), DISTC_EINVAL, "dir");
    ASSERT_ERR(distc_trace_dump_all(""), DISTC_EINVAL, "empty");
    ASSERT_ERR(distc_trace_dump_all("/nonexistent/dir"), DISTC_EIO, "cannot write");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        /* Processes first: TSan cannot start threads in the child of a
         * process that has some, and the recorder's clock thread, once
         * started, stays. */
        cmocka_unit_test(test_arguments),      cmocka_unit_test(test_killed_rank),
        cmocka_unit_test(test_subgroup_hang),  cmocka_unit_test(test_clock),
        cmocka_unit_test(test_rank_skips_one), cmocka_unit_test(test_rank_calls_another_op),
        cmocka_unit_test(test_ring_wraps),     cmocka_unit_test(test_p2p_among_collectives),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* distc_rendezvous: file://, tcp:// and env:// across forked processes, and every malformed URL. */
#define _GNU_SOURCE
#include "store_suite.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

/* Where calls that test something else put the rank and world size. */
static int32_t g_rank, g_world;

#define WORLD 3

/* The variables rendezvous reads; the test process starts without them. */
static const char *const rdzv_env[] = {
    "RANK",
    "WORLD_SIZE",
    "OMPI_COMM_WORLD_RANK",
    "OMPI_COMM_WORLD_SIZE",
    "SLURM_PROCID",
    "SLURM_NTASKS",
    "MASTER_ADDR",
    "MASTER_PORT",
    "TORCHELASTIC_USE_AGENT_STORE",
    "TORCHELASTIC_RESTART_COUNT",
    "SLURM_JOB_NODELIST",
    "SLURM_NODELIST",
    "SLURM_JOB_ID",
};

static void clear_env(void) {
    for (size_t i = 0; i < sizeof rdzv_env / sizeof rdzv_env[0]; ++i) unsetenv(rdzv_env[i]);
}

static void setenv_int(const char *name, int v) {
    char buf[16];
    snprintf(buf, sizeof buf, "%d", v);
    setenv(name, buf, 1);
}

/* env:// finds the store at MASTER_ADDR:MASTER_PORT. */
static void set_master(int port) {
    setenv("MASTER_ADDR", "127.0.0.1", 1);
    setenv_int("MASTER_PORT", port);
}

/* Runs `fn` on n forked ranks that share a free port (passed as *arg). */
static void run_on_free_port(int n, dt_child_fn fn) {
    int port = dt_free_port();
    assert_int_equal(dt_run_procs(n, fn, &port, 30), 0);
}

static int setup(void **state) {
    (void)state;
    clear_env();
    distc_error_clear();
    return 0;
}

/* ------------------------------------------------------------------------ */
/* What every rank does once it has a store: check rank and world size, share keys,
 * and leave only when everyone has read everyone's key (rank 0 may host the store). */

#define CHILD_CHECK(cond, what)                                                          \
    do {                                                                                 \
        if (!(cond)) {                                                                   \
            fprintf(stderr, "rank %d: %s failed: %s\n", rank, what, distc_error_last()); \
            return 1;                                                                    \
        }                                                                                \
    } while (0)

static int exchange(distc_store *s, int rank, int n, int got_rank, int got_world) {
    CHILD_CHECK(got_rank == rank, "rank");
    CHILD_CHECK(got_world == n, "world_size");
    char key[32], val[32];
    snprintf(key, sizeof key, "rank/%d", rank);
    snprintf(val, sizeof val, "hello from %d", rank);
    /* Count first: whoever reads this rank's key then sees the count too. */
    CHILD_CHECK(distc_store_add(NULL, s, "joined", 1) == 0, "add");
    CHILD_CHECK(distc_store_set(s, key, val, strlen(val)) == 0, "set");
    for (int r = 0; r < n; ++r) {
        distc_buf b = {NULL, 0};
        snprintf(key, sizeof key, "rank/%d", r);
        snprintf(val, sizeof val, "hello from %d", r);
        CHILD_CHECK(distc_store_get(&b, s, key) == 0, "get");
        CHILD_CHECK(b.size == strlen(val) && memcmp(b.data, val, b.size) == 0, "value");
        distc_buf_dispose(&b);
    }
    int64_t joined = 0;
    CHILD_CHECK(distc_store_add(&joined, s, "joined", 0) == 0, "add 0");
    CHILD_CHECK(joined == n, "joined count");
    /* Everyone has read everything; rank 0 leaves last since it may serve. */
    snprintf(key, sizeof key, "done/%d", rank);
    CHILD_CHECK(distc_store_set(s, key, "1", 1) == 0, "set done");
    if (rank == 0) {
        for (int r = 1; r < n; ++r) {
            snprintf(key, sizeof key, "done/%d", r);
            const char *k = key;
            CHILD_CHECK(distc_store_wait(s, &k, 1, 20000) == 0, "wait done");
        }
    }
    return 0;
}

static int rendezvous_child(int rank, int n, const char *url, const distc_rendezvous_options *opts) {
    distc_rendezvous_options o = DISTC_RENDEZVOUS_OPTIONS_INIT;
    if (!opts) {
        o.timeout_ms = 20000;
        opts = &o;
    }
    distc_store *s = NULL;
    int32_t r = -1, w = -1;
    CHILD_CHECK(distc_rendezvous(&s, &r, &w, url, opts) == 0, url);
    int64_t t = 0;
    CHILD_CHECK(distc_store_get_timeout(&t, s) == 0 && t == opts->timeout_ms, "store timeout");
    int rc = exchange(s, rank, n, r, w);
    distc_store_free(s);
    return rc;
}

/* ------------------------------------------------------------------------ */

static int file_child(int rank, int n, void *arg) {
    char url[512];
    snprintf(url, sizeof url, "file://%s?rank=%d&world_size=%d", (const char *)arg, rank, n);
    return rendezvous_child(rank, n, url, NULL);
}

static void test_file(void **state) {
    (void)state;
    char *path = dt_temp_path("rdzv-file");
    assert_int_equal(dt_run_procs(WORLD, file_child, path, 30), 0);
    /* Every rank freed its store: the last one removed the file. */
    assert_int_not_equal(access(path, F_OK), 0);
    free(path);
}

static int tcp_child(int rank, int n, void *arg) {
    int port = *(int *)arg;
    if (rank == 0) usleep(100 * 1000); /* the others connect before the server is up */
    char url[128];
    /* Parameters in either order. */
    if (rank % 2)
        snprintf(url, sizeof url, "tcp://127.0.0.1:%d?world_size=%d&rank=%d", port, n, rank);
    else
        snprintf(url, sizeof url, "tcp://127.0.0.1:%d?rank=%d&world_size=%d", port, rank, n);
    return rendezvous_child(rank, n, url, NULL);
}

static void test_tcp(void **state) {
    (void)state;
    run_on_free_port(WORLD, tcp_child);
}

static int env_child(int rank, int n, void *arg) {
    int port = *(int *)arg;
    setenv_int("RANK", rank);
    setenv_int("WORLD_SIZE", n);
    set_master(port);
    return rendezvous_child(rank, n, "env://", NULL);
}

static void test_env(void **state) {
    (void)state;
    run_on_free_port(WORLD, env_child);
}

static int ompi_child(int rank, int n, void *arg) {
    int port = *(int *)arg;
    setenv_int("OMPI_COMM_WORLD_RANK", rank);
    setenv_int("OMPI_COMM_WORLD_SIZE", n);
    /* SLURM's variables lose to Open MPI's. */
    setenv_int("SLURM_PROCID", n - 1 - rank);
    setenv_int("SLURM_NTASKS", n + 5);
    set_master(port);
    return rendezvous_child(rank, n, "env://", NULL);
}

static void test_env_ompi(void **state) {
    (void)state;
    run_on_free_port(WORLD, ompi_child);
}

static int slurm_child(int rank, int n, void *arg) {
    int port = *(int *)arg;
    setenv_int("SLURM_PROCID", rank);
    setenv_int("SLURM_NTASKS", n);
    set_master(port);
    return rendezvous_child(rank, n, "env://", NULL);
}

static void test_env_slurm(void **state) {
    (void)state;
    run_on_free_port(WORLD, slurm_child);
}

/* Under srun with no MASTER_ADDR/MASTER_PORT: the node list's first host,
 * and port 20000 + SLURM_JOB_ID % 10000 (a job id whose port is free). */
static int slurm_nodes_child(int rank, int n, void *arg) {
    int port = *(int *)arg;
    setenv_int("SLURM_PROCID", rank);
    setenv_int("SLURM_NTASKS", n);
    setenv("SLURM_JOB_NODELIST", "127.0.0.[1-3,7],127.0.0.9", 1);
    setenv_int("SLURM_JOB_ID", 70000 + port - 20000);
    return rendezvous_child(rank, n, "env://", NULL);
}

static void expect_url_error(const char *url, const char *needle);

static int free_port_between(int lo, int hi) {
    for (int p = lo; p < hi; ++p) {
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        struct sockaddr_in a;
        memset(&a, 0, sizeof a);
        a.sin_family = AF_INET;
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        a.sin_port = htons((uint16_t)p);
        int ok = fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof a) == 0;
        if (fd >= 0) close(fd);
        if (ok) return p;
    }
    fail_msg("no free port in %d..%d", lo, hi);
    return -1;
}

static void test_env_slurm_nodelist(void **state) {
    (void)state;
    int port = free_port_between(20000 + getpid() % 9000, 30000);
    assert_int_equal(dt_run_procs(WORLD, slurm_nodes_child, &port, 30), 0);
    /* A node list Slurm would never write is refused, saying so. */
    setenv("SLURM_PROCID", "0", 1);
    setenv("SLURM_NTASKS", "1", 1);
    setenv("SLURM_JOB_NODELIST", "node[01-04", 1);
    setenv("SLURM_JOB_ID", "5", 1);
    expect_url_error("env://", "unclosed");
    clear_env();
}

/* Options beat the URL and the environment. */
static int override_child(int rank, int n, void *arg) {
    int port = *(int *)arg;
    setenv("RANK", "7", 1);
    setenv("WORLD_SIZE", "9", 1);
    set_master(port);
    distc_rendezvous_options o = DISTC_RENDEZVOUS_OPTIONS_INIT;
    o.timeout_ms = 15000;
    o.rank = rank;
    o.world_size = n;
    return rendezvous_child(rank, n, "env://", &o);
}

static void test_options_override(void **state) {
    (void)state;
    run_on_free_port(2, override_child);

    /* In one process: a URL's rank and world_size lose to the options. */
    char *path = dt_temp_path("rdzv-override");
    char url[512];
    snprintf(url, sizeof url, "file://%s?rank=5&world_size=9", path);
    distc_rendezvous_options o = DISTC_RENDEZVOUS_OPTIONS_INIT;
    o.rank = 0;
    o.world_size = 1;
    o.timeout_ms = 2500;
    distc_store *s = NULL;
    int32_t r = -1, w = -1;
    ASSERT_OK(distc_rendezvous(&s, &r, &w, url, &o));
    assert_int_equal(r, 0);
    assert_int_equal(w, 1);
    int64_t t = 0;
    ASSERT_OK(distc_store_get_timeout(&t, s));
    assert_int_equal(t, 2500);
    dt_set_str(s, "k", "v");
    distc_store_free(s);
    assert_int_not_equal(access(path, F_OK), 0);

    /* Options alone, with a URL that has no query; the rank and world_size outputs are required. */
    snprintf(url, sizeof url, "file://%s", path);
    int32_t r0 = -5, w0 = -5;
    ASSERT_EINVAL(distc_rendezvous(&s, NULL, &w0, url, &o), "distc_rendezvous", "rank");
    ASSERT_EINVAL(distc_rendezvous(&s, &r0, NULL, url, &o), "distc_rendezvous", "world_size");
    assert_int_equal(w0, -5);
    ASSERT_OK(distc_rendezvous(&s, &r0, &w0, url, &o));
    distc_store_free(s);

    /* A huge timeout is a long one, not an overflow. */
    o.timeout_ms = INT64_MAX;
    ASSERT_OK(distc_rendezvous(&s, &r0, &w0, url, &o));
    ASSERT_OK(distc_store_get_timeout(&t, s));
    assert_true(t >= INT64_C(86400000) * 365 * 10);
    distc_store_free(s);

    /* NULL options: everything from the URL. */
    snprintf(url, sizeof url, "file://%s?rank=0&world_size=1", path);
    ASSERT_OK(distc_rendezvous(&s, &r, &w, url, NULL));
    assert_int_equal(r, 0);
    assert_int_equal(w, 1);
    ASSERT_OK(distc_store_get_timeout(&t, s));
    assert_int_equal(t, DISTC_STORE_DEFAULT_TIMEOUT_MS);
    distc_store_free(s);
    assert_int_not_equal(access(path, F_OK), 0);
    free(path);
}

/* A launcher that hosts the store (TORCHELASTIC_USE_AGENT_STORE): rank 0 only
 * connects, and keys live under /worker/attempt_<TORCHELASTIC_RESTART_COUNT>
 * as torch's env:// puts them, so each restart starts clean. */
static void test_env_agent_store(void **state) {
    (void)state;
    int32_t port = 0;
    distc_store *server = dt_tcp_server(&port, 10000);
    setenv("RANK", "0", 1);
    setenv("WORLD_SIZE", "1", 1);
    set_master(port);
    setenv("TORCHELASTIC_USE_AGENT_STORE", "True", 1);
    distc_rendezvous_options o = DISTC_RENDEZVOUS_OPTIONS_INIT;
    o.timeout_ms = 5000;
    distc_store *s = NULL;
    int32_t r = -1, w = -1;
    ASSERT_OK(distc_rendezvous(&s, &r, &w, "env://", &o));
    assert_int_equal(r, 0);
    assert_int_equal(w, 1);
    dt_set_str(s, "via_agent", "yes");
    dt_expect_str(server, "/worker/attempt_0/via_agent", "yes");
    distc_store_free(s);
    setenv("TORCHELASTIC_RESTART_COUNT", "3", 1);
    ASSERT_OK(distc_rendezvous(&s, &r, &w, "env://", &o));
    dt_set_str(s, "via_agent", "again");
    dt_expect_str(server, "/worker/attempt_3/via_agent", "again");
    distc_store_free(s);
    distc_store_free(server);
    clear_env();
}

static void test_options_init(void **state) {
    (void)state;
    distc_rendezvous_options o;
    memset(&o, 0x5a, sizeof o);
    ASSERT_OK(distc_rendezvous_options_init(&o, DISTC_RENDEZVOUS_OPTIONS_VERSION));
    assert_int_equal(o.version, DISTC_RENDEZVOUS_OPTIONS_VERSION);
    assert_int_equal(o.timeout_ms, -1);
    assert_int_equal(o.rank, -1);
    assert_int_equal(o.world_size, -1);
    distc_rendezvous_options m = DISTC_RENDEZVOUS_OPTIONS_INIT;
    assert_int_equal(o.version, m.version);
    assert_int_equal(o.timeout_ms, m.timeout_ms);
    assert_int_equal(o.rank, m.rank);
    assert_int_equal(o.world_size, m.world_size);
    ASSERT_EINVAL(distc_rendezvous_options_init(NULL, DISTC_RENDEZVOUS_OPTIONS_VERSION),
                  "distc_rendezvous_options_init", "opts");
    ASSERT_EINVAL(distc_rendezvous_options_init(&o, 0), "distc_rendezvous_options_init", "version");
    ASSERT_EINVAL(distc_rendezvous_options_init(&o, DISTC_RENDEZVOUS_OPTIONS_VERSION + 1),
                  "distc_rendezvous_options_init", "version");
}

/* ------------------------------------------------------------------------ */
/* Errors */

static void expect_url_error(const char *url, const char *needle) {
    distc_store *s = NULL;
    int32_t r = -5, w = -5;
    distc_rendezvous_options o = DISTC_RENDEZVOUS_OPTIONS_INIT;
    o.timeout_ms = 1000;
    ASSERT_EINVAL(distc_rendezvous(&s, &r, &w, url, &o), "distc_rendezvous", needle);
    assert_null(s);
    assert_int_equal(r, -5);
    assert_int_equal(w, -5);
}

static void test_bad_urls(void **state) {
    (void)state;
    char *path = dt_temp_path("rdzv-bad");
    char url[512];

    distc_store *s = NULL;
    ASSERT_EINVAL(distc_rendezvous(&s, NULL, NULL, NULL, NULL), "distc_rendezvous", "url");
    ASSERT_EINVAL(distc_rendezvous(NULL, NULL, NULL, "env://", NULL), "distc_rendezvous", "out");

    expect_url_error("", "scheme");
    expect_url_error("127.0.0.1:29500", "no scheme");
    expect_url_error("://127.0.0.1:29500?rank=0&world_size=1", "no scheme");
    expect_url_error("http://127.0.0.1:29500?rank=0&world_size=1", "unknown scheme 'http'");
    expect_url_error("TCP://127.0.0.1:29500?rank=0&world_size=1", "unknown scheme");

    expect_url_error("tcp://127.0.0.1?rank=0&world_size=1", "HOST:PORT");
    expect_url_error("tcp://:29500?rank=0&world_size=1", "HOST:PORT");
    expect_url_error("tcp://127.0.0.1:abc?rank=0&world_size=1", "port");
    expect_url_error("tcp://127.0.0.1:abc?rank=0&world_size=1", "'abc'");
    expect_url_error("tcp://127.0.0.1:?rank=0&world_size=1", "port");
    expect_url_error("tcp://127.0.0.1:0?rank=0&world_size=1", "port");
    expect_url_error("tcp://127.0.0.1:65536?rank=0&world_size=1", "port");
    expect_url_error("tcp://127.0.0.1:12x?rank=0&world_size=1", "port");

    expect_url_error("tcp://127.0.0.1:29500?rank=2&world_size=2", "rank 2 is not below world_size 2");
    expect_url_error("tcp://127.0.0.1:29500?rank=0", "world_size is missing");
    expect_url_error("tcp://127.0.0.1:29500?world_size=2", "rank is missing");
    expect_url_error("tcp://127.0.0.1:29500", "missing");
    expect_url_error("tcp://127.0.0.1:29500?rank=-1&world_size=2", "rank");
    expect_url_error("tcp://127.0.0.1:29500?rank=x&world_size=2", "rank is 'x'");
    expect_url_error("tcp://127.0.0.1:29500?rank=0&world_size=0", "world_size");
    expect_url_error("tcp://127.0.0.1:29500?rank=0&world_size=1&color=red", "unknown parameter 'color'");
    expect_url_error("tcp://127.0.0.1:29500?rank=0&world_size", "malformed");

    snprintf(url, sizeof url, "file://%s?rank=3&world_size=3", path);
    expect_url_error(url, "rank 3 is not below world_size 3");
    snprintf(url, sizeof url, "file://%s?world_size=3", path);
    expect_url_error(url, "rank is missing");
    snprintf(url, sizeof url, "file://%s?rank=0", path);
    expect_url_error(url, "world_size is missing");
    snprintf(url, sizeof url, "file://%s?rank=0&world_size=1&timeout=5", path);
    expect_url_error(url, "unknown parameter 'timeout'");
    expect_url_error("file://relative/path?rank=0&world_size=1", "absolute path");
    expect_url_error("file://?rank=0&world_size=1", "absolute path");
    /* None of that touched the file system. */
    assert_int_not_equal(access(path, F_OK), 0);

    /* Bad options. */
    distc_rendezvous_options o = DISTC_RENDEZVOUS_OPTIONS_INIT;
    snprintf(url, sizeof url, "file://%s?rank=0&world_size=1", path);
    o.version = 99;
    ASSERT_EINVAL(distc_rendezvous(&s, &g_rank, &g_world, url, &o), "distc_rendezvous", "version");
    o = (distc_rendezvous_options)DISTC_RENDEZVOUS_OPTIONS_INIT;
    o.timeout_ms = 0;
    ASSERT_EINVAL(distc_rendezvous(&s, &g_rank, &g_world, url, &o), "distc_rendezvous", "timeout_ms");
    o.timeout_ms = -2;
    ASSERT_EINVAL(distc_rendezvous(&s, &g_rank, &g_world, url, &o), "distc_rendezvous", "timeout_ms");
    o = (distc_rendezvous_options)DISTC_RENDEZVOUS_OPTIONS_INIT;
    o.rank = -2;
    ASSERT_EINVAL(distc_rendezvous(&s, &g_rank, &g_world, url, &o), "distc_rendezvous", "rank");
    o = (distc_rendezvous_options)DISTC_RENDEZVOUS_OPTIONS_INIT;
    o.world_size = 0;
    ASSERT_EINVAL(distc_rendezvous(&s, &g_rank, &g_world, url, &o), "distc_rendezvous", "world_size");
    o = (distc_rendezvous_options)DISTC_RENDEZVOUS_OPTIONS_INIT;
    o.rank = 4;
    o.world_size = 2;
    ASSERT_EINVAL(distc_rendezvous(&s, &g_rank, &g_world, url, &o), "distc_rendezvous", "not below");
    assert_null(s);
    assert_int_not_equal(access(path, F_OK), 0);
    free(path);
}

static void test_bad_env(void **state) {
    (void)state;
    /* Nothing set: the rank and world size are missing, and the message says where to put them. */
    expect_url_error("env://", "missing");
    expect_url_error("env://", "RANK");
    setenv("WORLD_SIZE", "2", 1);
    expect_url_error("env://", "rank is missing");
    setenv("RANK", "2", 1);
    expect_url_error("env://", "rank 2 is not below world_size 2");
    setenv("RANK", "zero", 1);
    expect_url_error("env://", "RANK");
    setenv("RANK", "0", 1);
    setenv("WORLD_SIZE", "-3", 1);
    expect_url_error("env://", "WORLD_SIZE");
    setenv("WORLD_SIZE", "1", 1);

    /* Rank and world size are fine: now MASTER_ADDR and MASTER_PORT. */
    setenv("MASTER_PORT", "29500", 1);
    expect_url_error("env://", "MASTER_ADDR");
    setenv("MASTER_ADDR", "", 1);
    expect_url_error("env://", "MASTER_ADDR");
    setenv("MASTER_ADDR", "127.0.0.1", 1);
    unsetenv("MASTER_PORT");
    expect_url_error("env://", "MASTER_PORT");
    setenv("MASTER_PORT", "port", 1);
    expect_url_error("env://", "MASTER_PORT");
    setenv("MASTER_PORT", "70000", 1);
    expect_url_error("env://", "MASTER_PORT");

    /* env:// takes nothing after the slashes, and no unknown query parameters. */
    setenv_int("MASTER_PORT", dt_free_port());
    expect_url_error("env://127.0.0.1:29500", "env://");
    expect_url_error("env://?backend=gloo", "unknown parameter 'backend'");
    clear_env();
}

static void test_timeout_file(void **state) {
    (void)state;
    char *path = dt_temp_path("rdzv-timeout");
    char url[512];
    snprintf(url, sizeof url, "file://%s?rank=0&world_size=2", path);
    distc_rendezvous_options o = DISTC_RENDEZVOUS_OPTIONS_INIT;
    o.timeout_ms = 500;
    distc_store *s = NULL;
    int64_t t0 = dt_now_ms();
    ASSERT_ERR(distc_rendezvous(&s, &g_rank, &g_world, url, &o), DISTC_ETIMEOUT, "only 1 of 2");
    dt_assert_contains(distc_error_last(), "distc_rendezvous");
    assert_true(dt_now_ms() - t0 < 5000);
    assert_null(s);
    unlink(path);
    free(path);
}

static void test_timeout_tcp(void **state) {
    (void)state;
    char url[128];
    snprintf(url, sizeof url, "tcp://127.0.0.1:%d?rank=0&world_size=2", dt_free_port());
    distc_rendezvous_options o = DISTC_RENDEZVOUS_OPTIONS_INIT;
    o.timeout_ms = 500;
    distc_store *s = NULL;
    int64_t t0 = dt_now_ms();
    ASSERT_ERR(distc_rendezvous(&s, &g_rank, &g_world, url, &o), DISTC_ETIMEOUT, "only 1 of 2");
    dt_assert_contains(distc_error_last(), "distc_rendezvous");
    assert_true(dt_now_ms() - t0 < 5000);
    assert_null(s);

    /* A rank other than 0 with nobody serving: a timeout as well, not a hang. */
    snprintf(url, sizeof url, "tcp://127.0.0.1:%d?rank=1&world_size=2", dt_free_port());
    t0 = dt_now_ms();
    ASSERT_ERR(distc_rendezvous(&s, &g_rank, &g_world, url, &o), DISTC_ETIMEOUT, "distc_rendezvous");
    assert_true(dt_now_ms() - t0 < 5000);
    assert_null(s);
}

/* The port is taken by something else: rank 0 cannot serve. */
static void test_port_in_use(void **state) {
    (void)state;
    int32_t port = 0;
    distc_store *other = dt_tcp_server(&port, 5000);
    char url[128];
    snprintf(url, sizeof url, "tcp://127.0.0.1:%d?rank=0&world_size=1", port);
    distc_rendezvous_options o = DISTC_RENDEZVOUS_OPTIONS_INIT;
    o.timeout_ms = 1000;
    distc_store *s = NULL;
    ASSERT_ERR(distc_rendezvous(&s, &g_rank, &g_world, url, &o), DISTC_EIO, "distc_rendezvous");
    assert_null(s);
    distc_store_free(other);
}

int main(void) {
    clear_env();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_file, setup),
        cmocka_unit_test_setup(test_tcp, setup),
        cmocka_unit_test_setup(test_env, setup),
        cmocka_unit_test_setup(test_env_ompi, setup),
        cmocka_unit_test_setup(test_env_slurm, setup),
        cmocka_unit_test_setup(test_env_slurm_nodelist, setup),
        cmocka_unit_test_setup(test_options_override, setup),
        cmocka_unit_test_setup(test_env_agent_store, setup),
        cmocka_unit_test_setup(test_options_init, setup),
        cmocka_unit_test_setup(test_bad_urls, setup),
        cmocka_unit_test_setup(test_bad_env, setup),
        cmocka_unit_test_setup(test_timeout_file, setup),
        cmocka_unit_test_setup(test_timeout_tcp, setup),
        cmocka_unit_test_setup(test_port_in_use, setup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* The TCP store: every operation over the wire, the dialects, many clients,
 * processes hammering one counter, and what bad peers and dead servers get. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <sys/wait.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "test_util.h"

static distc_store *client_proto(int32_t port, int64_t timeout_ms, int protocol) {
    distc_tcp_store_options o = DISTC_TCP_STORE_OPTIONS_INIT;
    o.host = "127.0.0.1";
    o.port = port;
    o.timeout_ms = timeout_ms;
    o.protocol = protocol;
    distc_store *s = NULL;
    ASSERT_OK(distc_store_new_tcp(&s, &o));
    return s;
}

static void check_value(distc_store *s, const char *key, const void *val, size_t len) {
    distc_buf b = {0};
    ASSERT_OK(distc_store_get(&b, s, key));
    assert_int_equal(b.size, len);
    if (len) assert_memory_equal(b.data, val, len);
    distc_buf_dispose(&b);
}

/* Every operation, through one server and a client of each dialect. */
static void all_ops(distc_store *srv, distc_store *c) {
    ASSERT_OK(distc_store_set(c, "bin", "a\0b\0", 4));
    check_value(srv, "bin", "a\0b\0", 4);
    ASSERT_OK(distc_store_set(c, "empty", NULL, 0));
    check_value(c, "empty", "", 0);

    int64_t v = 0;
    ASSERT_OK(distc_store_add(&v, c, "ctr", 5));
    assert_int_equal(v, 5);
    ASSERT_OK(distc_store_add(&v, srv, "ctr", -7));
    assert_int_equal(v, -2);
    check_value(c, "ctr", "-2", 2);
    ASSERT_ERR(distc_store_add(&v, c, "bin", 1), DISTC_EINVAL, "ADD");
    ASSERT_OK(distc_store_add(&v, c, "ctr", 0)); /* usable after the server dropped us */
    ASSERT_OK(distc_store_add(&v, c, "huge", INT64_MAX));
    ASSERT_ERR(distc_store_add(&v, c, "huge", 1), DISTC_EINVAL, "overflow");
    ASSERT_OK(distc_store_delete_key(NULL, c, "huge"));

    distc_buf b = {0};
    ASSERT_OK(distc_store_compare_set(&b, c, "cs", "x", 1, "y", 1)); /* missing, expected non-empty */
    assert_int_equal(b.size, 1);
    assert_memory_equal(b.data, "x", 1);
    distc_buf_dispose(&b);
    int32_t ok = 1;
    const char *cs[] = {"cs"};
    ASSERT_OK(distc_store_check(&ok, c, cs, 1));
    assert_int_equal(ok, 0);
    ASSERT_OK(distc_store_compare_set(&b, c, "cs", NULL, 0, "y", 1)); /* missing, expected empty: set */
    assert_memory_equal(b.data, "y", 1);
    distc_buf_dispose(&b);
    ASSERT_OK(distc_store_compare_set(&b, c, "cs", "y", 1, "zz", 2));
    assert_int_equal(b.size, 2);
    distc_buf_dispose(&b);
    ASSERT_OK(distc_store_compare_set(&b, c, "cs", "q", 1, "w", 1)); /* mismatch: current */
    assert_memory_equal(b.data, "zz", 2);
    distc_buf_dispose(&b);

    const char *both[] = {"cs", "bin"};
    ASSERT_OK(distc_store_check(&ok, c, both, 2));
    assert_int_equal(ok, 1);
    ASSERT_OK(distc_store_wait(c, both, 2, 1000));

    ASSERT_OK(distc_store_append(c, "log", "ab", 2));
    ASSERT_OK(distc_store_append(c, "log", "cd", 2));
    check_value(srv, "log", "abcd", 4);

    const char *mk[] = {"m1", "m2", "m3"};
    const void *mv[] = {"1", "22", ""};
    size_t ml[] = {1, 2, 0};
    ASSERT_OK(distc_store_multi_set(c, mk, mv, ml, 3));
    distc_buf out[3];
    ASSERT_OK(distc_store_multi_get(out, c, mk, 3));
    for (int i = 0; i < 3; ++i) {
        assert_int_equal(out[i].size, ml[i]);
        if (ml[i]) assert_memory_equal(out[i].data, mv[i], ml[i]);
        distc_buf_dispose(&out[i]);
    }

    int64_t before = 0, after = 0;
    ASSERT_OK(distc_store_num_keys(&before, c));
    int32_t deleted = 0;
    ASSERT_OK(distc_store_delete_key(&deleted, c, "log"));
    assert_int_equal(deleted, 1);
    ASSERT_OK(distc_store_delete_key(&deleted, c, "log"));
    assert_int_equal(deleted, 0);
    ASSERT_OK(distc_store_num_keys(&after, c));
    assert_int_equal(after, before - 1);

    /* A timed-out get names the key and leaves the client usable. */
    ASSERT_OK(distc_store_set_timeout(c, 200));
    ASSERT_ERR(distc_store_get(&b, c, "never"), DISTC_ETIMEOUT, "'never'");
    const char *nv[] = {"bin", "never"};
    ASSERT_ERR(distc_store_wait(c, nv, 2, 100), DISTC_ETIMEOUT, "never");
    ASSERT_ERR(distc_store_multi_get(out, c, nv, 2), DISTC_ETIMEOUT, "never");
    check_value(c, "bin", "a\0b\0", 4);
    ASSERT_OK(distc_store_set_timeout(c, 10000));

    /* Cleanup so the next dialect starts from the same keys. */
    const char *all[] = {"bin", "empty", "ctr", "cs", "m1", "m2", "m3"};
    for (size_t i = 0; i < sizeof all / sizeof *all; ++i) ASSERT_OK(distc_store_delete_key(NULL, c, all[i]));
}

static void test_ops_every_dialect(void **state) {
    (void)state;
    int32_t port;
    distc_store *srv = dt_tcp_server(&port, 10000);
    const int protos[] = {DISTC_TCP_PROTOCOL_AUTO, DISTC_TCP_PROTOCOL_DISTC, DISTC_TCP_PROTOCOL_TORCH1,
                          DISTC_TCP_PROTOCOL_TORCH2};
    for (size_t i = 0; i < 4; ++i) {
        distc_store *c = client_proto(port, 10000, protos[i]);
        all_ops(srv, c);
        distc_store_free(c);
    }
    all_ops(srv, srv); /* the serving process is a client too */
    distc_store_free(srv);
}

struct setter {
    distc_store *s;
    int delay_ms;
};

static void *set_later(void *arg) {
    struct setter *st = arg;
    usleep((useconds_t)st->delay_ms * 1000);
    distc_store_set(st->s, "late", "v", 1);
    return NULL;
}

static void test_get_waits_for_key(void **state) {
    (void)state;
    int32_t port;
    distc_store *srv = dt_tcp_server(&port, 10000);
    distc_store *c = dt_tcp_client(port, 10000);
    struct setter st = {srv, 100};
    pthread_t t;
    pthread_create(&t, NULL, set_later, &st);
    check_value(c, "late", "v", 1);
    pthread_join(t, NULL);
    distc_store_free(c);
    distc_store_free(srv);
}

/* One handle shared by threads: a get blocked in one thread must not stop
 * another thread's set on the same handle (the client opens a second connection). */
static void test_one_handle_two_threads(void **state) {
    (void)state;
    int32_t port;
    distc_store *srv = dt_tcp_server(&port, 10000);
    distc_store *c = dt_tcp_client(port, 10000);
    struct setter st = {c, 100};
    pthread_t t;
    pthread_create(&t, NULL, set_later, &st);
    int64_t t0 = dt_now_ms();
    check_value(c, "late", "v", 1);
    assert_true(dt_now_ms() - t0 < 5000);
    pthread_join(t, NULL);
    distc_store_free(c);
    distc_store_free(srv);
}

static void test_large_value(void **state) {
    (void)state;
    int32_t port;
    distc_store *srv = dt_tcp_server(&port, 30000);
    distc_store *c = dt_tcp_client(port, 30000);
    size_t n = 64u << 20;
    uint8_t *big = malloc(n);
    for (size_t i = 0; i < n; ++i) big[i] = (uint8_t)(i * 2654435761u >> 24);
    ASSERT_OK(distc_store_set(c, "big", big, n));
    check_value(srv, "big", big, n);
    check_value(c, "big", big, n);
    free(big);
    distc_store_free(c);
    distc_store_free(srv);
}

static int hammer_child(int rank, int n, void *arg) {
    (void)rank;
    (void)n;
    int32_t port = *(int32_t *)arg;
    distc_store *c = dt_tcp_client(port, 30000);
    for (int i = 0; i < 1000; ++i)
        if (distc_store_add(NULL, c, "hammer", 1) != 0) return 1;
    distc_store_free(c);
    return 0;
}

static void test_processes_hammer_add(void **state) {
    (void)state;
    int32_t port;
    distc_store *srv = dt_tcp_server(&port, 30000);
    assert_int_equal(dt_run_procs(4, hammer_child, &port, 60), 0);
    check_value(srv, "hammer", "4000", 4);
    distc_store_free(srv);
}

static int raw_connect(int32_t port) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) fail_msg("raw connect failed");
    return fd;
}

/* The server drops a connection (read returns 0) within a second. */
static void expect_dropped(int fd) {
    struct timeval tv = {2, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    char b[16];
    ssize_t r = recv(fd, b, sizeof b, 0);
    if (r > 0) fail_msg("server answered garbage with %zd bytes", r);
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) fail_msg("server kept a garbage connection open");
    close(fd);
}

static void test_malformed_clients(void **state) {
    (void)state;
    int32_t port;
    distc_store *srv = dt_tcp_server(&port, 5000);
    distc_store *good = dt_tcp_client(port, 5000);
    ASSERT_OK(distc_store_set(good, "keep", "me", 2));

    /* An unknown query type. */
    int fd = raw_connect(port);
    uint8_t junk[] = {0xEE, 1, 2, 3, 4, 5, 6, 7, 8, 9};
    assert_int_equal(send(fd, junk, sizeof junk, 0), (ssize_t)sizeof junk);
    expect_dropped(fd);

    /* A SET whose key claims 2^40 bytes: refused, not allocated. */
    fd = raw_connect(port);
    uint8_t huge[9] = {0};
    uint64_t len = (uint64_t)1 << 40;
    memcpy(huge + 1, &len, 8);
    send(fd, huge, sizeof huge, 0);
    expect_dropped(fd);

    /* A 2.x client (VALIDATE + magic) that then sends a query 2.x does not have. */
    fd = raw_connect(port);
    uint8_t val[6] = {0, 0xCE, 0xF7, 0x85, 0x3C, 0x30};
    send(fd, val, sizeof val, 0);
    expect_dropped(fd);

    /* A truncated message, then a hang-up; and a connect/disconnect storm. */
    fd = raw_connect(port);
    uint8_t part[] = {0 /* SET */, 5, 0, 0};
    send(fd, part, sizeof part, 0);
    close(fd);
    for (int i = 0; i < 300; ++i) close(raw_connect(port));

    /* The well-behaved client saw none of it. */
    check_value(good, "keep", "me", 2);
    int64_t v;
    ASSERT_OK(distc_store_add(&v, good, "after", 1));
    assert_int_equal(v, 1);
    distc_store_free(good);
    distc_store_free(srv);
}

struct killer {
    distc_store *srv;
    int delay_ms;
};

static void *free_server_later(void *arg) {
    struct killer *k = arg;
    usleep((useconds_t)k->delay_ms * 1000);
    distc_store_free(k->srv);
    return NULL;
}

static void test_server_death(void **state) {
    (void)state;
    int32_t port;
    distc_store *srv = dt_tcp_server(&port, 60000);
    distc_store *c = dt_tcp_client(port, 60000);
    ASSERT_OK(distc_store_set(c, "x", "1", 1));
    /* A get blocked on the server when it goes away fails at once, not after 60 s. */
    struct killer k = {srv, 200};
    pthread_t t;
    pthread_create(&t, NULL, free_server_later, &k);
    int64_t t0 = dt_now_ms();
    distc_buf b = {0};
    ASSERT_ERR(distc_store_get(&b, c, "never"), DISTC_EREMOTE, "closed");
    pthread_join(t, NULL);
    assert_true(dt_now_ms() - t0 < 5000);
    /* Later calls fail promptly too (one reconnect attempt, refused). */
    t0 = dt_now_ms();
    int rc = distc_store_set(c, "x", "1", 1);
    assert_true(rc == DISTC_EREMOTE || rc == DISTC_ETIMEOUT);
    rc = distc_store_add(NULL, c, "x", 1);
    assert_true(rc == DISTC_EREMOTE || rc == DISTC_ETIMEOUT);
    assert_true(dt_now_ms() - t0 < 5000);
    distc_store_free(c);
}

static void test_set_after_server_death(void **state) {
    (void)state;
    int32_t port;
    distc_store *srv = dt_tcp_server(&port, 5000);
    distc_store *c = dt_tcp_client(port, 5000);
    ASSERT_OK(distc_store_set(c, "x", "1", 1));
    distc_store_free(srv);
    usleep(50 * 1000);
    /* SET has no reply; the client notices the closed connection before sending. */
    ASSERT_ERR(distc_store_set(c, "x", "2", 1), DISTC_EREMOTE, "store server");
    distc_store_free(c);
}

static void test_thousand_clients(void **state) {
    (void)state;
    struct rlimit rl;
    getrlimit(RLIMIT_NOFILE, &rl);
    if (rl.rlim_max < 2200) {
        skip(); /* needs 2 fds per client in one process */
    }
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
    enum { N = 1000 };
    int32_t port;
    distc_store *srv = dt_tcp_server(&port, 30000);
    distc_store **cs = calloc(N, sizeof *cs);
    for (int i = 0; i < N; ++i) cs[i] = dt_tcp_client(port, 30000);
    /* All connected at once; each one is served. */
    for (int i = 0; i < N; ++i) {
        char key[32];
        snprintf(key, sizeof key, "k%d", i);
        ASSERT_OK(distc_store_set(cs[i], key, &i, sizeof i));
        ASSERT_OK(distc_store_add(NULL, cs[i], "count", 1));
    }
    for (int i = 0; i < N; i += 97) {
        char key[32];
        snprintf(key, sizeof key, "k%d", i);
        check_value(cs[(i + 1) % N], key, &i, sizeof i);
    }
    check_value(srv, "count", "1000", 4);
    for (int i = 0; i < N; ++i) distc_store_free(cs[i]);
    free(cs);
    distc_store_free(srv);
}

static int worker_child(int rank, int n, void *arg) {
    (void)rank;
    (void)n;
    distc_tcp_store_options o = DISTC_TCP_STORE_OPTIONS_INIT;
    o.host = "127.0.0.1";
    o.port = *(int32_t *)arg;
    o.world_size = 3;
    o.timeout_ms = 10000;
    distc_store *s = NULL;
    if (distc_store_new_tcp(&s, &o) != 0) return 1;
    distc_store_free(s);
    return 0;
}

static void test_wait_for_workers(void **state) {
    (void)state;
    int32_t port = dt_free_port();
    pid_t pid = fork();
    if (pid == 0) {
        usleep(100 * 1000);
        _exit(dt_run_procs(2, worker_child, &port, 20));
    }
    distc_tcp_store_options o = DISTC_TCP_STORE_OPTIONS_INIT;
    o.host = "127.0.0.1";
    o.port = port;
    o.is_server = 1;
    o.world_size = 3;
    o.timeout_ms = 10000;
    distc_store *s = NULL;
    ASSERT_OK(distc_store_new_tcp(&s, &o)); /* returns once both workers joined */
    int st;
    waitpid(pid, &st, 0);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    distc_store_free(s);

    /* Nobody comes: a timeout saying how many did. */
    o.port = 0;
    o.world_size = 2;
    o.timeout_ms = 300;
    ASSERT_ERR(distc_store_new_tcp(&s, &o), DISTC_ETIMEOUT, "only 1 of 2");
}

static void test_connect_failures(void **state) {
    (void)state;
    int32_t port = dt_free_port(); /* nobody listens */
    distc_tcp_store_options o = DISTC_TCP_STORE_OPTIONS_INIT;
    o.host = "127.0.0.1";
    o.port = port;
    o.timeout_ms = 300;
    distc_store *s = NULL;
    int64_t t0 = dt_now_ms();
    int rc = distc_store_new_tcp(&s, &o);
    assert_true(rc == DISTC_ETIMEOUT || rc == DISTC_EREMOTE);
    dt_assert_contains(distc_error_last(), "127.0.0.1");
    assert_true(dt_now_ms() - t0 < 5000);
    o.timeout_ms = 60000;
    o.connect_retries = 0; /* one attempt: fails at once */
    t0 = dt_now_ms();
    ASSERT_ERR(distc_store_new_tcp(&s, &o), DISTC_EREMOTE, "cannot connect");
    assert_true(dt_now_ms() - t0 < 5000);

    /* A DISTC-only client refuses a server that is not ours: a raw listener that closes. */
    o.host = "no-such-host.invalid";
    o.connect_retries = 0;
    ASSERT_ERR(distc_store_new_tcp(&s, &o), DISTC_EINVAL, "resolve");
}

static void test_port_in_use(void **state) {
    (void)state;
    int32_t port;
    distc_store *srv = dt_tcp_server(&port, 5000);
    distc_tcp_store_options o = DISTC_TCP_STORE_OPTIONS_INIT;
    o.host = "127.0.0.1";
    o.port = port;
    o.is_server = 1;
    distc_store *s2 = NULL;
    ASSERT_ERR(distc_store_new_tcp(&s2, &o), DISTC_EIO, "cannot listen");
    assert_null(s2);
    distc_store_free(srv);
}

static void test_bad_options(void **state) {
    (void)state;
    distc_store *s = NULL;
    distc_tcp_store_options o;
    ASSERT_ERR(distc_tcp_store_options_init(NULL, DISTC_TCP_STORE_OPTIONS_VERSION), DISTC_EINVAL, "opts");
    ASSERT_ERR(distc_tcp_store_options_init(&o, 99), DISTC_EINVAL, "version");
    ASSERT_OK(distc_tcp_store_options_init(&o, DISTC_TCP_STORE_OPTIONS_VERSION));
    assert_int_equal(o.timeout_ms, -1);
    ASSERT_ERR(distc_store_new_tcp(NULL, &o), DISTC_EINVAL, "distc_store_new_tcp: out");
    ASSERT_ERR(distc_store_new_tcp(&s, NULL), DISTC_EINVAL, "opts is NULL");
    o.version = 7;
    ASSERT_ERR(distc_store_new_tcp(&s, &o), DISTC_EINVAL, "opts->version");
    o.version = DISTC_TCP_STORE_OPTIONS_VERSION;
    o.host = "127.0.0.1";
    o.port = 70000;
    ASSERT_ERR(distc_store_new_tcp(&s, &o), DISTC_EINVAL, "opts->port");
    o.port = 0;
    ASSERT_ERR(distc_store_new_tcp(&s, &o), DISTC_EINVAL, "only a server picks a port");
    o.port = 1234;
    o.host = NULL;
    ASSERT_ERR(distc_store_new_tcp(&s, &o), DISTC_EINVAL, "opts->host");
    o.host = "127.0.0.1";
    o.timeout_ms = -5;
    ASSERT_ERR(distc_store_new_tcp(&s, &o), DISTC_EINVAL, "opts->timeout_ms");
    o.timeout_ms = -1;
    o.protocol = 42;
    ASSERT_ERR(distc_store_new_tcp(&s, &o), DISTC_EINVAL, "opts->protocol");
    o.protocol = 0;
    o.world_size = 0;
    ASSERT_ERR(distc_store_new_tcp(&s, &o), DISTC_EINVAL, "opts->world_size");
    o.world_size = -1;
    o.connect_retries = -3;
    ASSERT_ERR(distc_store_new_tcp(&s, &o), DISTC_EINVAL, "opts->connect_retries");
    o.connect_retries = -1;
    o.max_request_bytes = 4095;
    ASSERT_ERR(distc_store_new_tcp(&s, &o), DISTC_EINVAL, "opts->max_request_bytes");
    o.max_request_bytes = -1;
    o.max_unread_reply_bytes = 0;
    ASSERT_ERR(distc_store_new_tcp(&s, &o), DISTC_EINVAL, "opts->max_unread_reply_bytes");
    assert_null(s);

    /* A version-1 struct ends before the limits: init leaves them alone, a server uses the defaults. */
    distc_tcp_store_options v1;
    memset(&v1, 0x55, sizeof v1);
    ASSERT_OK(distc_tcp_store_options_init(&v1, 1));
    assert_int_equal(v1.version, 1);
    assert_int_equal(v1.max_request_bytes, 0x5555555555555555);
    v1.host = "127.0.0.1";
    v1.is_server = 1;
    ASSERT_OK(distc_store_new_tcp(&s, &v1));
    ASSERT_OK(distc_store_set(s, "k", "v", 1));
    distc_store_free(s);
    s = NULL;

    int32_t port;
    ASSERT_ERR(distc_store_tcp_port(&port, NULL), DISTC_EINVAL, "store");
    distc_store *h = NULL;
    ASSERT_OK(distc_store_new_hash(&h));
    ASSERT_ERR(distc_store_tcp_port(&port, h), DISTC_EINVAL, "not a TCP store");
    ASSERT_ERR(distc_store_tcp_port(NULL, h), DISTC_EINVAL, "out");
    distc_store_free(h);
}

/* A prefix store over TCP: keys of two groups do not collide. */
static void test_prefix_over_tcp(void **state) {
    (void)state;
    int32_t port;
    distc_store *srv = dt_tcp_server(&port, 5000);
    distc_store *a = NULL, *b = NULL;
    ASSERT_OK(distc_store_new_prefix(&a, "g0", srv));
    ASSERT_OK(distc_store_new_prefix(&b, "g1", srv));
    distc_store_free(srv); /* the prefixes keep the server alive */
    ASSERT_OK(distc_store_set(a, "k", "A", 1));
    ASSERT_OK(distc_store_set(b, "k", "B", 1));
    check_value(a, "k", "A", 1);
    check_value(b, "k", "B", 1);
    distc_store_free(a);
    distc_store_free(b);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ops_every_dialect),
        cmocka_unit_test(test_get_waits_for_key),
        cmocka_unit_test(test_one_handle_two_threads),
        cmocka_unit_test(test_large_value),
        cmocka_unit_test(test_processes_hammer_add),
        cmocka_unit_test(test_malformed_clients),
        cmocka_unit_test(test_server_death),
        cmocka_unit_test(test_set_after_server_death),
        cmocka_unit_test(test_thousand_clients),
        cmocka_unit_test(test_wait_for_workers),
        cmocka_unit_test(test_connect_failures),
        cmocka_unit_test(test_port_in_use),
        cmocka_unit_test(test_bad_options),
        cmocka_unit_test(test_prefix_over_tcp),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

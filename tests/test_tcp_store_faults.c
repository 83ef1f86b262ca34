/* The TCP store server against hostile clients and under exhausted
 * resources, and what clients of a dead server get. Servers that may run out
 * of memory or descriptors run in a forked child with lowered limits, so a
 * failure costs the child, never this process or the machine. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test_util.h"

/* A server in a forked child: `limit` (may be NULL) runs in the child first.
 * The child serves until it is killed. */
typedef void (*limit_fn)(void);

typedef struct child_server {
    pid_t pid;
    int32_t port;
} child_server;

static child_server start_child_server(limit_fn limit) {
    child_server cs;
    int ready[2];
    assert_int_equal(pipe(ready), 0);
    cs.port = dt_free_port();
    cs.pid = fork();
    assert_true(cs.pid >= 0);
    if (cs.pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL); /* a failed test leaves no server behind */
        close(ready[0]);
        if (limit) limit();
        distc_tcp_store_options o = DISTC_TCP_STORE_OPTIONS_INIT;
        o.host = "127.0.0.1";
        o.port = cs.port;
        o.is_server = 1;
        distc_store *s = NULL;
        if (distc_store_new_tcp(&s, &o) != 0) {
            fprintf(stderr, "child server: %s\n", distc_error_last());
            _exit(1);
        }
        if (write(ready[1], "r", 1) != 1) _exit(1);
        for (;;) pause();
    }
    close(ready[1]);
    char c;
    assert_int_equal(read(ready[0], &c, 1), 1);
    close(ready[0]);
    return cs;
}

/* Kills the child; returns whether it was still alive (not crashed) until then. */
static int stop_child_server(child_server cs) {
    int st = 0;
    int alive = waitpid(cs.pid, &st, WNOHANG) == 0;
    if (alive) {
        kill(cs.pid, SIGKILL);
        waitpid(cs.pid, &st, 0);
    } else {
        fprintf(stderr, "child server died: %s %d\n", WIFSIGNALED(st) ? "signal" : "exit code",
                WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
    }
    return alive;
}

/* The child may map what it has now plus this much: enough to serve 1 MiB
 * values, not enough for a reply of hundreds of MiB. */
static void limit_memory(void) {
    struct rlimit rl;
    rl.rlim_cur = rl.rlim_max = dt_vm_size() + (320u << 20);
    if (setrlimit(RLIMIT_AS, &rl) != 0) _exit(3);
}

static const char **repeated(const char *key, size_t n) {
    const char **keys = malloc(n * sizeof *keys);
    for (size_t i = 0; i < n; ++i) keys[i] = key;
    return keys;
}

/* A 100 KB MULTI_GET naming one 1 MiB key 8192 times asks for an 8 GiB reply:
 * refused with DISTC_ENOMEM, the connection and the server stay usable. */
static void test_multi_get_amplification(void **state) {
    (void)state;
    child_server cs = start_child_server(limit_memory);
    distc_store *c = dt_tcp_client(cs.port, 10000);
    size_t n = 1u << 20;
    uint8_t *big = calloc(1, n);
    ASSERT_OK(distc_store_set(c, "big", big, n));
    enum { K = 8192 };
    const char **keys = repeated("big", K);
    distc_buf *out = calloc(K, sizeof *out);
    ASSERT_ERR(distc_store_multi_get(out, c, keys, K), DISTC_ENOMEM, "refused MULTI_GET");
    dt_assert_contains(distc_error_last(), "1 GiB limit");
    distc_buf b = {0};
    ASSERT_OK(distc_store_get(&b, c, "big"));
    assert_int_equal(b.size, n);
    distc_buf_dispose(&b);
    ASSERT_OK(distc_store_multi_get(out, c, keys, 3)); /* repeats within the limit are fine */
    for (int i = 0; i < 3; ++i) {
        assert_int_equal(out[i].size, n);
        distc_buf_dispose(&out[i]);
    }

    /* A PyTorch 2.x client's MULTI_GET has no error reply: it is dropped, the server serves on. */
    distc_tcp_store_options o = DISTC_TCP_STORE_OPTIONS_INIT;
    o.host = "127.0.0.1";
    o.port = cs.port;
    o.timeout_ms = 10000;
    o.protocol = DISTC_TCP_PROTOCOL_TORCH2;
    distc_store *t = NULL;
    ASSERT_OK(distc_store_new_tcp(&t, &o));
    ASSERT_ERR(distc_store_multi_get(out, t, keys, K), DISTC_EREMOTE,
               "store server 127.0.0.1"); /* a close, or a reset if unread */
    ASSERT_OK(distc_store_get(&b, t, "big"));
    distc_buf_dispose(&b);
    distc_store_free(t);

    distc_store_free(c);
    free(out);
    free(keys);
    free(big);
    assert_true(stop_child_server(cs));
}

/* A reply within the limits that the server cannot allocate (the child's
 * address space is capped) costs that connection only. */
static void test_server_survives_out_of_memory(void **state) {
    (void)state;
#ifdef __SANITIZE_ADDRESS__
    skip(); /* AddressSanitizer's operator new aborts when out of memory instead of throwing */
#endif
    child_server cs = start_child_server(limit_memory);
    distc_store *c = dt_tcp_client(cs.port, 10000);
    size_t n = 1u << 20;
    uint8_t *big = calloc(1, n);
    ASSERT_OK(distc_store_set(c, "big", big, n));
    enum { K = 700 }; /* 700 MiB: under the reply limit, over what the child may map */
    const char **keys = repeated("big", K);
    distc_buf *out = calloc(K, sizeof *out);
    ASSERT_ERR(distc_store_multi_get(out, c, keys, K), DISTC_EREMOTE,
               "store server 127.0.0.1"); /* a close, or a reset if unread */
    distc_store *c2 = dt_tcp_client(cs.port, 10000);
    distc_buf b = {0};
    ASSERT_OK(distc_store_get(&b, c2, "big"));
    assert_int_equal(b.size, n);
    distc_buf_dispose(&b);
    int64_t v = 0;
    ASSERT_OK(distc_store_add(&v, c, "after", 1)); /* the first client reconnects */
    distc_store_free(c2);
    distc_store_free(c);
    free(out);
    free(keys);
    free(big);
    assert_true(stop_child_server(cs));
}

static int raw_connect(int32_t port) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) fail_msg("raw connect failed");
    struct timeval tv = {10, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    return fd;
}

/* Whether the server closed `fd` (rather than answering or keeping it open). */
static int closed_by_server(int fd) {
    char b;
    ssize_t r = recv(fd, &b, 1, 0);
    return r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK);
}

/* max_request_bytes through the C API: a PyTorch 1.x SET over it is dropped. */
static void test_max_request_bytes_option(void **state) {
    (void)state;
    distc_tcp_store_options o = DISTC_TCP_STORE_OPTIONS_INIT;
    o.host = "127.0.0.1";
    o.is_server = 1;
    o.max_request_bytes = 4096;
    distc_store *srv = NULL;
    ASSERT_OK(distc_store_new_tcp(&srv, &o));
    int32_t port;
    ASSERT_OK(distc_store_tcp_port(&port, srv));
    int fd = raw_connect(port);
    uint8_t msg[1 + 8 + 1 + 8 + 8192] = {0}; /* SET (1.x: 0), key "k", an 8 KiB value */
    uint64_t one = 1, len = 8192;
    memcpy(msg + 1, &one, 8);
    msg[9] = 'k';
    memcpy(msg + 10, &len, 8);
    send(fd, msg, sizeof msg, MSG_NOSIGNAL);
    assert_true(closed_by_server(fd));
    close(fd);
    ASSERT_OK(distc_store_set(srv, "small", msg, 1024));
    distc_buf b = {0};
    ASSERT_OK(distc_store_get(&b, srv, "small"));
    distc_buf_dispose(&b);
    distc_store_free(srv);
}

/* The child may open 16 more descriptors: its server's own (listener, epoll,
 * wake-up, spare, a connection to itself) and about ten clients. */
static void limit_descriptors(void) {
    static char open_fd[4096];
    DIR *d = opendir("/proc/self/fd");
    struct dirent *e;
    while (d && (e = readdir(d)))
        if (atoi(e->d_name) < (int)sizeof open_fd) open_fd[atoi(e->d_name)] = 1;
    if (d) closedir(d);
    rlim_t limit = 0;
    for (int free_fds = 0; free_fds < 16; ++limit)
        if (limit >= sizeof open_fd || !open_fd[limit]) ++free_fds;
    struct rlimit rl;
    getrlimit(RLIMIT_NOFILE, &rl);
    rl.rlim_cur = limit;
    if (setrlimit(RLIMIT_NOFILE, &rl) != 0) _exit(3);
}

struct busy {
    distc_store *s;
    volatile int stop;
    int failures;
};

static void *keep_busy(void *arg) {
    struct busy *b = arg;
    while (!b->stop) {
        if (distc_store_add(NULL, b->s, "busy", 1) != 0) ++b->failures;
        usleep(2000);
    }
    return NULL;
}

/* A server out of descriptors refuses new clients at once instead of leaving
 * them queued, and takes new ones again as descriptors come free, also while
 * another client keeps it busy all the time. */
static void test_accept_after_descriptors_run_out(void **state) {
    (void)state;
    child_server cs = start_child_server(limit_descriptors);
    distc_store *probe = dt_tcp_client(cs.port, 10000);
    struct busy b = {dt_tcp_client(cs.port, 10000), 0, 0};
    pthread_t t;
    pthread_create(&t, NULL, keep_busy, &b);

    enum { N = 40 };
    int fds[N];
    for (int i = 0; i < N; ++i) fds[i] = raw_connect(cs.port);
    ASSERT_OK(distc_store_add(NULL, probe, "sync", 1)); /* the server has seen every connect */
    ASSERT_OK(distc_store_add(NULL, probe, "sync", 1));
    int refused = 0;
    for (int i = 0; i < N; ++i) {
        char c;
        if (recv(fds[i], &c, 1, MSG_DONTWAIT) == 0) ++refused;
    }
    assert_true(refused > 0 && refused < N);
    for (int i = 0; i < N; ++i) close(fds[i]);

    /* Descriptors freed: a new client gets in while `busy` keeps the loop awake. */
    distc_tcp_store_options o = DISTC_TCP_STORE_OPTIONS_INIT;
    o.host = "127.0.0.1";
    o.port = cs.port;
    o.timeout_ms = 5000;
    distc_store *late = NULL;
    ASSERT_OK(distc_store_new_tcp(&late, &o));
    int64_t v = 0;
    ASSERT_OK(distc_store_add(&v, late, "late", 1));
    assert_int_equal(v, 1);
    b.stop = 1;
    pthread_join(t, NULL);
    assert_int_equal(b.failures, 0);
    distc_store_free(late);
    distc_store_free(b.s);
    distc_store_free(probe);
    assert_true(stop_child_server(cs));
}

/* A dead server is DISTC_EREMOTE for ADD too, not a bad argument: the client
 * tells a dropped ADD from a dead server by whether the server still accepts. */
static void test_add_after_server_killed(void **state) {
    (void)state;
    child_server cs = start_child_server(NULL);
    distc_store *c = dt_tcp_client(cs.port, 5000);
    int64_t v = 0;
    ASSERT_OK(distc_store_add(&v, c, "n", 1)); /* leaves a pooled connection */
    kill(cs.pid, SIGKILL);
    waitpid(cs.pid, NULL, 0);
    ASSERT_ERR(distc_store_add(&v, c, "n", 1), DISTC_EREMOTE, "store server");
    distc_store_free(c);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_add_after_server_killed),          cmocka_unit_test(test_multi_get_amplification),
        cmocka_unit_test(test_server_survives_out_of_memory),    cmocka_unit_test(test_max_request_bytes_option),
        cmocka_unit_test(test_accept_after_descriptors_run_out),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

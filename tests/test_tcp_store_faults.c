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
        cmocka_unit_test(test_add_after_server_killed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

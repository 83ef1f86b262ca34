#define _GNU_SOURCE
#include "test_util.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

void dt_assert_contains(const char *haystack, const char *needle) {
    if (!haystack || !strstr(haystack, needle))
        fail_msg("message \"%s\" lacks \"%s\"", haystack ? haystack : "(null)", needle);
}

int dt_free_port(void) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) != 0 || getsockname(fd, (struct sockaddr *)&a, &len) != 0)
        fail_msg("cannot find a free port");
    close(fd);
    return ntohs(a.sin_port);
}

char *dt_temp_path(const char *tag) {
    static int counter = 0;
    char *p = NULL;
    const char *dir = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    if (asprintf(&p, "%s/distc-test-%s-%d-%d-%ld", dir, tag, (int)getpid(), counter++, (long)dt_now_ms()) < 0)
        return NULL;
    unlink(p);
    return p;
}

void dt_cores_say(char *saved, const char *cores) {
    const char *e = getenv("DISTC_SHM_CORES");
    snprintf(saved, 32, "%s", e ? e : "");
    setenv("DISTC_SHM_CORES", cores, 1);
}

void dt_cores_restore(const char *saved) {
    if (*saved)
        setenv("DISTC_SHM_CORES", saved, 1);
    else
        unsetenv("DISTC_SHM_CORES");
}

int64_t dt_now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

uint64_t dt_vm_size(void) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    uint64_t kb = 0;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "VmSize: %lu kB", &kb) == 1) break;
    if (f) fclose(f);
    return kb * 1024;
}

int dt_run_procs(int n, dt_child_fn fn, void *arg, int timeout_s) {
    pid_t *pids = calloc((size_t)n, sizeof *pids);
    fflush(stdout);
    fflush(stderr);
    for (int i = 0; i < n; ++i) {
        pid_t p = fork();
        if (p == 0) {
            alarm((unsigned)timeout_s + 5); /* a hung child must not hang the test */
            int rc = fn(i, n, arg);
            fflush(stdout);
            fflush(stderr);
            _exit(rc == 0 ? 0 : 1);
        }
        pids[i] = p;
    }
    int failures = 0;
    int64_t deadline = dt_now_ms() + (int64_t)timeout_s * 1000;
    for (int done = 0; done < n;) {
        for (int i = 0; i < n; ++i) {
            if (!pids[i]) continue;
            int st;
            pid_t r = waitpid(pids[i], &st, WNOHANG);
            if (r == pids[i]) {
                if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
                    fprintf(stderr, "child %d failed (status 0x%x)\n", i, st);
                    ++failures;
                }
                pids[i] = 0;
                ++done;
            }
        }
        if (done < n && dt_now_ms() > deadline) {
            for (int i = 0; i < n; ++i)
                if (pids[i]) {
                    fprintf(stderr, "child %d timed out; killing it\n", i);
                    kill(pids[i], SIGKILL);
                    waitpid(pids[i], NULL, 0);
                    pids[i] = 0;
                    ++failures;
                    ++done;
                }
        }
        if (done < n) usleep(1000);
    }
    free(pids);
    return failures;
}

distc_store *dt_tcp_server(int32_t *port, int64_t timeout_ms) {
    distc_tcp_store_options o = DISTC_TCP_STORE_OPTIONS_INIT;
    o.host = "127.0.0.1";
    o.is_server = 1;
    o.timeout_ms = timeout_ms;
    distc_store *s = NULL;
    ASSERT_OK(distc_store_new_tcp(&s, &o));
    ASSERT_OK(distc_store_tcp_port(port, s));
    return s;
}

distc_store *dt_tcp_client(int32_t port, int64_t timeout_ms) {
    distc_tcp_store_options o = DISTC_TCP_STORE_OPTIONS_INIT;
    o.host = "127.0.0.1";
    o.port = port;
    o.timeout_ms = timeout_ms;
    distc_store *s = NULL;
    ASSERT_OK(distc_store_new_tcp(&s, &o));
    return s;
}

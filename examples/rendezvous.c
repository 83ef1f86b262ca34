/* rendezvous: N processes find each other through a distc TCP store.
 *
 *   distc-rendezvous-demo [-n N]
 *
 * The parent plays the launcher: it hosts the store server on a free port and
 * starts N ranks with the variables torchrun sets (RANK, WORLD_SIZE,
 * MASTER_ADDR, MASTER_PORT, TORCHELASTIC_USE_AGENT_STORE). Each rank joins
 * with distc_rendezvous("env://"), publishes its address, counts arrivals
 * with add, elects a leader with compare_set, waits for the others and
 * measures the store's round trip. The parent prints what each rank saw. */
#define _GNU_SOURCE
#include <distc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define CHECK(call)                                                                       \
    do {                                                                                  \
        if ((call) != 0) {                                                                \
            fprintf(stderr, "rank %d: %s failed: %s\n", rank, #call, distc_error_last()); \
            return 1;                                                                     \
        }                                                                                 \
    } while (0)

static double now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static int run_rank(void) {
    int rank = -1;
    int32_t world = 0;
    distc_store *store = NULL;
    double t0 = now_us();
    distc_rendezvous_options ro = DISTC_RENDEZVOUS_OPTIONS_INIT;
    ro.timeout_ms = 30000;
    int32_t r32;
    if (distc_rendezvous(&store, &r32, &world, "env://", &ro) != 0) {
        fprintf(stderr, "rendezvous failed: %s\n", distc_error_last());
        return 1;
    }
    rank = r32;
    double joined_ms = (now_us() - t0) / 1e3;

    /* Publish who we are; count arrivals; elect a leader (first compare_set wins). */
    char key[64], val[256];
    snprintf(key, sizeof key, "addr/%d", rank);
    snprintf(val, sizeof val, "pid %d", (int)getpid());
    CHECK(distc_store_set(store, key, val, strlen(val)));
    int64_t order = 0;
    CHECK(distc_store_add(&order, store, "arrivals", 1));
    distc_buf leader = {0};
    char me[32];
    snprintf(me, sizeof me, "rank %d", rank);
    CHECK(distc_store_compare_set(&leader, store, "leader", NULL, 0, me, strlen(me)));

    /* Wait for every peer's address, then read them all at once. */
    const char **keys = calloc((size_t)world, sizeof *keys);
    char(*names)[64] = calloc((size_t)world, sizeof *names);
    for (int i = 0; i < world; ++i) {
        snprintf(names[i], sizeof names[i], "addr/%d", i);
        keys[i] = names[i];
    }
    CHECK(distc_store_wait(store, keys, (size_t)world, DISTC_TIMEOUT_DEFAULT));
    distc_buf *peers = calloc((size_t)world, sizeof *peers);
    CHECK(distc_store_multi_get(peers, store, keys, (size_t)world));

    /* Round-trip cost of get and add, as this rank sees it. */
    const int iters = 2000;
    double t1 = now_us();
    for (int i = 0; i < iters; ++i) {
        distc_buf b = {0};
        CHECK(distc_store_get(&b, store, key));
        distc_buf_dispose(&b);
    }
    double get_us = (now_us() - t1) / iters;
    t1 = now_us();
    for (int i = 0; i < iters; ++i) CHECK(distc_store_add(NULL, store, "spin", 1));
    double add_us = (now_us() - t1) / iters;

    /* The report, in the store: the launcher prints them in rank order. */
    char report[512];
    int len = snprintf(report, sizeof report,
                       "rank %d/%d  joined in %6.1f ms  arrived #%lld  leader: %.*s  saw %d peers "
                       "(rank 0 is %.*s)  get %5.1f us  add %5.1f us",
                       rank, world, joined_ms, (long long)order, (int)leader.size, (const char *)leader.data, world,
                       (int)peers[0].size, (const char *)peers[0].data, get_us, add_us);
    snprintf(key, sizeof key, "report/%d", rank);
    CHECK(distc_store_set(store, key, report, (size_t)len));

    /* Leave together: nobody frees the store while others still use it. */
    CHECK(distc_store_add(NULL, store, "done", 1));
    int64_t done = 0;
    while (distc_store_add(&done, store, "done", 0) == 0 && done < world) usleep(1000);
    for (int i = 0; i < world; ++i) distc_buf_dispose(&peers[i]);
    free(peers);
    free(keys);
    free(names);
    distc_buf_dispose(&leader);
    distc_store_free(store);
    return 0;
}

int main(int argc, char **argv) {
    int n = 4;
    if (getenv("RANK")) return run_rank(); /* started by a launcher */
    for (int i = 1; i < argc; ++i) {
        if (!strcmp(argv[i], "-n") && i + 1 < argc)
            n = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: %s [-n NRANKS]\n", argv[0]);
            return 2;
        }
    }
    if (n < 1 || n > 1024) {
        fprintf(stderr, "-n must be in 1..1024\n");
        return 2;
    }

    /* The launcher's store: a TCP server on a free port of 127.0.0.1. */
    distc_tcp_store_options o = DISTC_TCP_STORE_OPTIONS_INIT;
    o.host = "127.0.0.1";
    o.is_server = 1;
    o.timeout_ms = 30000;
    distc_store *store = NULL;
    int32_t port = 0;
    int rank = -1;
    CHECK(distc_store_new_tcp(&store, &o));
    CHECK(distc_store_tcp_port(&port, store));
    printf("distc %s: store server on 127.0.0.1:%d, starting %d ranks\n", distc_version(), port, n);
    fflush(stdout);

    double t0 = now_us();
    pid_t *pids = calloc((size_t)n, sizeof *pids);
    for (int r = 0; r < n; ++r) {
        pids[r] = fork();
        if (pids[r] == 0) {
            char buf[32];
            snprintf(buf, sizeof buf, "%d", r);
            setenv("RANK", buf, 1);
            snprintf(buf, sizeof buf, "%d", n);
            setenv("WORLD_SIZE", buf, 1);
            setenv("MASTER_ADDR", "127.0.0.1", 1);
            snprintf(buf, sizeof buf, "%d", port);
            setenv("MASTER_PORT", buf, 1);
            setenv("TORCHELASTIC_USE_AGENT_STORE", "True", 1);
            execv("/proc/self/exe", argv);
            _exit(127);
        }
    }
    int failed = 0;
    for (int r = 0; r < n; ++r) {
        int st = 0;
        waitpid(pids[r], &st, 0);
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
            fprintf(stderr, "rank %d failed (status 0x%x)\n", r, st);
            failed = 1;
        }
    }
    double total_ms = (now_us() - t0) / 1e3;
    for (int r = 0; r < n && !failed; ++r) {
        char key[32];
        snprintf(key, sizeof key, "report/%d", r);
        distc_buf b = {0};
        CHECK(distc_store_get(&b, store, key));
        printf("  %.*s\n", (int)b.size, (const char *)b.data);
        distc_buf_dispose(&b);
    }
    int64_t nkeys = 0, arrivals = 0;
    CHECK(distc_store_num_keys(&nkeys, store));
    CHECK(distc_store_add(&arrivals, store, "arrivals", 0));
    printf("%s: %lld of %d ranks arrived, %lld keys in the store, %.1f ms from first fork to last exit\n",
           failed ? "FAILED" : "OK", (long long)arrivals, n, (long long)nkeys, total_ms);
    free(pids);
    distc_store_free(store);
    return failed;
}

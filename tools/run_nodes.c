#include "run_nodes.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void key_of(char *key, size_t len, int attempt, const char *what) {
    snprintf(key, len, "/distc-run/attempt_%d/%s", attempt, what);
}

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void nap(int ms) {
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Adds `delta` to the attempt's counter `what`; -1 once the store is lost. */
static long counter(run_nodes *j, int attempt, const char *what, int delta) {
    char key[64];
    int64_t v = 0;
    key_of(key, sizeof key, attempt, what);
    if (j->lost || distc_store_add(&v, j->store, key, delta) != 0) {
        if (!j->lost)
            fprintf(stderr, "distc-run: node %d lost the job's store: %s\n", j->node_rank, distc_error_last());
        j->lost = 1;
        return -1;
    }
    return (long)v;
}

int run_nodes_join(run_nodes *j, int attempt, int timeout_ms) {
    long n = counter(j, attempt, "nodes", 1);
    double until = now_ms() + timeout_ms, said = now_ms() + 2000;
    while (n >= 0 && n < j->nnodes) {
        if (now_ms() >= until) {
            fprintf(stderr, "distc-run: only %ld of %d nodes joined within %d s\n", n, j->nnodes, timeout_ms / 1000);
            return -1;
        }
        if (said && now_ms() >= said) {
            fprintf(stderr, "distc-run: node %d waits for %ld more node(s) to join\n", j->node_rank, j->nnodes - n);
            said = 0;
        }
        char *failed = run_nodes_failure(j, attempt);
        if (failed) {
            fprintf(stderr, "distc-run: node %d starts no ranks: %s\n", j->node_rank, failed);
            free(failed);
            return -1;
        }
        nap(50);
        n = counter(j, attempt, "nodes", 0);
    }
    return n < 0 ? -1 : 0;
}

void run_nodes_announce(run_nodes *j, int attempt, const char *what) {
    char key[64];
    distc_buf old = {0};
    if (j->lost) return;
    key_of(key, sizeof key, attempt, "failed");
    if (distc_store_compare_set(&old, j->store, key, "", 0, what, strlen(what)) == 0)
        distc_buf_dispose(&old);
    else
        j->lost = 1;
}

char *run_nodes_failure(run_nodes *j, int attempt) {
    char key[64];
    const char *keys[1] = {key};
    int32_t there = 0;
    distc_buf v = {0};
    if (j->lost) return NULL;
    key_of(key, sizeof key, attempt, "failed");
    if (distc_store_check(&there, j->store, keys, 1) != 0 || (there && distc_store_get(&v, j->store, key) != 0)) {
        j->lost = 1;
        return NULL;
    }
    if (!there) return NULL;
    char *s = malloc(v.size + 1); /* not strndup: the value has no NUL for it to stop at */
    if (s) {
        memcpy(s, v.data, v.size);
        s[v.size] = 0;
    }
    distc_buf_dispose(&v);
    return s;
}

long run_nodes_dumps(run_nodes *j, int attempt, int delta) { return counter(j, attempt, "dumps", delta); }

void run_nodes_finish(run_nodes *j, int attempt, int timeout_ms) {
    long n = counter(j, attempt, "finished", 1);
    if (j->node_rank != 0) return;
    for (double until = now_ms() + timeout_ms; n >= 0 && n < j->nnodes && now_ms() < until; nap(50))
        n = counter(j, attempt, "finished", 0);
}

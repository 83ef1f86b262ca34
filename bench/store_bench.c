/* distc-store-bench: round-trip latency and throughput of a TCP store.
 *
 *   distc-store-bench [--host ADDR] [--port PORT] [--clients 1,4] [--iters N]
 *                     [--warmup N] [--value-size BYTES] [--ops set,get,add]
 *                     [--protocol auto|distc|torch1|torch2] [--json]
 *
 * Without --port it starts a distc TCP store server in this process (port 0,
 * on its own event-loop thread); with --port it talks to an existing server,
 * PyTorch's TCPStore included (the client detects the protocol by itself
 * unless --protocol says otherwise).
 *
 * Every client is a forked process holding one store connection, made before
 * the in-process server starts (so no child is forked from a threaded
 * process). For each (op, clients) row, the clients first do the warm-up
 * operations, then start together and each times --iters operations one by
 * one. Reported: mean, p50 and p99 of the per-call latency over every call of
 * every client, and aggregate ops/s = all timed calls / (last client's end -
 * first client's start).
 *
 * - set: the protocol has no reply to SET, so its latency is the time of the
 *   call (the send); each client ends its timed loop with one ADD round trip
 *   so that the ops/s count only what the server has processed.
 * - get: the key exists beforehand. A PyTorch server needs WAIT then GET (two
 *   round trips); a distc server answers GET alone (one).
 * - add: delta 1 on a per-client counter; the final value is checked.
 *
 * Timings are printed, never judged: this tool exits non-zero only when an
 * operation fails or returns wrong data. */
#define _POSIX_C_SOURCE 200809L
#include <distc.h>

#include "json_out.h"
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

enum { OP_SET = 0, OP_GET = 1, OP_ADD = 2, N_OPS = 3 };
static const char *const op_names[N_OPS] = {"set", "get", "add"};

enum { CMD_RUN = 1, CMD_GO = 2 };
enum { MAX_CLIENTS = 256, MAX_ROWS = 16 };

typedef struct cmd {
    int32_t kind;
    int32_t op;
    int32_t port;
    int32_t pad;
    int64_t iters;
    int64_t warmup;
} cmd;

typedef struct reply {
    int32_t status; /* 0, or a distc status */
    int32_t pad;
    int64_t t_start_ns;
    int64_t t_end_ns;
    int64_t n; /* latencies (uint64 ns) that follow */
    char err[256];
} reply;

typedef struct config {
    const char *host;
    int32_t port; /* 0: own server */
    int32_t protocol;
    const char *protocol_name;
    int clients[MAX_ROWS];
    int n_clients;
    int ops[N_OPS];
    int n_ops;
    int64_t iters;
    int64_t warmup; /* -1: iters / 10, at least 100 */
    size_t value_size;
    int64_t timeout_ms;
    int json;
} config;

typedef struct worker {
    pid_t pid;
    int cmd_fd; /* parent writes */
    int res_fd; /* parent reads */
} worker;

static int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int write_all(int fd, const void *p, size_t n) {
    const char *c = (const char *)p;
    while (n) {
        ssize_t w = write(fd, c, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return -1;
        c += w;
        n -= (size_t)w;
    }
    return 0;
}

static int read_all(int fd, void *p, size_t n) {
    char *c = (char *)p;
    while (n) {
        ssize_t r = read(fd, c, n);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return -1;
        c += r;
        n -= (size_t)r;
    }
    return 0;
}

/* ------------------------------------------------------------------ worker */

typedef struct wstate {
    const config *cfg;
    int index;
    distc_store *store;
    char key[N_OPS][64];
    char sync_key[64];
    unsigned char *value;
    uint64_t *lat;
    size_t lat_cap;
} wstate;

static int fail_reply(int res_fd, int code, const char *what) {
    reply r;
    memset(&r, 0, sizeof r);
    r.status = code ? code : DISTC_EINTERNAL;
    snprintf(r.err, sizeof r.err, "client %d: %s", (int)getpid(), what);
    return write_all(res_fd, &r, sizeof r);
}

#define WCHECK(call)                                                      \
    do {                                                                  \
        int rc_ = (call);                                                 \
        if (rc_ != 0) {                                                   \
            char m_[240];                                                 \
            snprintf(m_, sizeof m_, "%s: %s", #call, distc_error_last()); \
            fail_reply(res_fd, rc_, m_);                                  \
            return -1;                                                    \
        }                                                                 \
    } while (0)

/* One operation; `check` receives the counter of an add. */
static int one_op(wstate *w, int op, int64_t *counter) {
    switch (op) {
        case OP_SET: return distc_store_set(w->store, w->key[OP_SET], w->value, w->cfg->value_size);
        case OP_GET: {
            distc_buf b = {NULL, 0};
            int rc = distc_store_get(&b, w->store, w->key[OP_GET]);
            if (rc == 0 && b.size != w->cfg->value_size)
                rc = distc_error_set(DISTC_EPROTO, "get returned a value of the wrong size");
            distc_buf_dispose(&b);
            return rc;
        }
        default: return distc_store_add(counter, w->store, w->key[OP_ADD], 1);
    }
}

static int worker_run(wstate *w, const cmd *c, int cmd_fd, int res_fd) {
    const config *cfg = w->cfg;
    if (!w->store) {
        distc_tcp_store_options o = DISTC_TCP_STORE_OPTIONS_INIT;
        o.host = cfg->host;
        o.port = c->port;
        o.is_server = 0;
        o.world_size = -1;
        o.wait_for_workers = 0;
        o.timeout_ms = cfg->timeout_ms;
        o.protocol = cfg->protocol;
        WCHECK(distc_store_new_tcp(&w->store, &o));
    }
    if ((size_t)c->iters > w->lat_cap) {
        free(w->lat);
        w->lat = (uint64_t *)malloc((size_t)c->iters * sizeof *w->lat);
        if (!w->lat) {
            w->lat_cap = 0;
            fail_reply(res_fd, DISTC_ENOMEM, "out of memory for latencies");
            return -1;
        }
        w->lat_cap = (size_t)c->iters;
    }
    if (c->op == OP_GET) WCHECK(distc_store_set(w->store, w->key[OP_GET], w->value, cfg->value_size));

    int64_t first = 0, counter = 0;
    for (int64_t i = 0; i < c->warmup; ++i) {
        WCHECK(one_op(w, c->op, &counter));
        if (i == 0) first = counter;
    }
    WCHECK(distc_store_add(NULL, w->store, w->sync_key, 0)); /* the server has caught up */

    reply r;
    memset(&r, 0, sizeof r);
    if (write_all(res_fd, &r, sizeof r)) return -1; /* ready */
    cmd go;
    if (read_all(cmd_fd, &go, sizeof go) || go.kind != CMD_GO) return -1;

    r.t_start_ns = now_ns();
    int64_t prev = r.t_start_ns;
    for (int64_t i = 0; i < c->iters; ++i) {
        WCHECK(one_op(w, c->op, &counter));
        int64_t t = now_ns();
        w->lat[i] = (uint64_t)(t - prev);
        prev = t;
        if (i == 0 && c->warmup == 0) first = counter;
    }
    if (c->op == OP_SET) WCHECK(distc_store_add(NULL, w->store, w->sync_key, 0));
    r.t_end_ns = now_ns();

    if (c->op == OP_ADD && counter - first != c->warmup + c->iters - 1) {
        char m[200];
        snprintf(m, sizeof m, "add: counter went from %lld to %lld over %lld adds", (long long)first,
                 (long long)counter, (long long)(c->warmup + c->iters));
        fail_reply(res_fd, DISTC_EPROTO, m);
        return -1;
    }
    if (c->op == OP_SET) {
        distc_buf b = {NULL, 0};
        WCHECK(distc_store_get(&b, w->store, w->key[OP_SET]));
        size_t got = b.size;
        distc_buf_dispose(&b);
        if (got != cfg->value_size) {
            fail_reply(res_fd, DISTC_EPROTO, "set: the value read back has the wrong size");
            return -1;
        }
    }
    r.n = c->iters;
    if (write_all(res_fd, &r, sizeof r)) return -1;
    if (write_all(res_fd, w->lat, (size_t)c->iters * sizeof *w->lat)) return -1;
    return 0;
}

static void worker_main(const config *cfg, int index, int cmd_fd, int res_fd) {
    wstate w;
    memset(&w, 0, sizeof w);
    w.cfg = cfg;
    w.index = index;
    for (int op = 0; op < N_OPS; ++op)
        snprintf(w.key[op], sizeof w.key[op], "distc-bench/%s/%d/%d", op_names[op], (int)getppid(), index);
    snprintf(w.sync_key, sizeof w.sync_key, "distc-bench/sync/%d/%d", (int)getppid(), index);
    w.value = (unsigned char *)malloc(cfg->value_size ? cfg->value_size : 1);
    if (!w.value) _exit(1);
    for (size_t i = 0; i < cfg->value_size; ++i) w.value[i] = (unsigned char)('a' + i % 26);
    for (;;) {
        cmd c;
        if (read_all(cmd_fd, &c, sizeof c)) break; /* the parent is gone or done */
        if (c.kind != CMD_RUN || worker_run(&w, &c, cmd_fd, res_fd)) break;
    }
    distc_store_free(w.store);
    free(w.lat);
    free(w.value);
    _exit(0);
}

/* ------------------------------------------------------------------ parent */

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Nearest-rank percentile of a sorted array. */
static double pct_us(const uint64_t *v, size_t n, double p) {
    size_t rank = (size_t)(p / 100.0 * (double)n + 0.999999);
    if (rank < 1) rank = 1;
    if (rank > n) rank = n;
    return (double)v[rank - 1] / 1000.0;
}

typedef struct row {
    int op, clients;
    double mean_us, p50_us, p99_us, ops_per_s;
} row;

static int run_row(const config *cfg, worker *ws, int32_t port, int op, int clients, row *out) {
    cmd c;
    memset(&c, 0, sizeof c);
    c.kind = CMD_RUN;
    c.op = op;
    c.port = port;
    c.iters = cfg->iters;
    c.warmup = cfg->warmup;
    for (int i = 0; i < clients; ++i)
        if (write_all(ws[i].cmd_fd, &c, sizeof c)) return -1;
    int failed = 0;
    reply r;
    for (int i = 0; i < clients; ++i) {
        if (read_all(ws[i].res_fd, &r, sizeof r)) {
            fprintf(stderr, "distc-store-bench: client %d died\n", i);
            return -1;
        }
        if (r.status) {
            fprintf(stderr, "distc-store-bench: %s\n", r.err);
            failed = 1;
        }
    }
    if (failed) return -1;
    c.kind = CMD_GO;
    for (int i = 0; i < clients; ++i)
        if (write_all(ws[i].cmd_fd, &c, sizeof c)) return -1;

    size_t total = (size_t)clients * (size_t)cfg->iters;
    uint64_t *lat = (uint64_t *)malloc(total * sizeof *lat);
    if (!lat) return -1;
    int64_t t0 = INT64_MAX, t1 = INT64_MIN;
    size_t n = 0;
    for (int i = 0; i < clients; ++i) {
        if (read_all(ws[i].res_fd, &r, sizeof r)) {
            fprintf(stderr, "distc-store-bench: client %d died\n", i);
            failed = 1;
            break;
        }
        if (r.status) {
            fprintf(stderr, "distc-store-bench: %s\n", r.err);
            failed = 1;
            continue;
        }
        if (read_all(ws[i].res_fd, lat + n, (size_t)r.n * sizeof *lat)) {
            failed = 1;
            break;
        }
        n += (size_t)r.n;
        if (r.t_start_ns < t0) t0 = r.t_start_ns;
        if (r.t_end_ns > t1) t1 = r.t_end_ns;
    }
    if (failed || n == 0) {
        free(lat);
        return -1;
    }
    qsort(lat, n, sizeof *lat, cmp_u64);
    double sum = 0;
    for (size_t i = 0; i < n; ++i) sum += (double)lat[i];
    out->op = op;
    out->clients = clients;
    out->mean_us = sum / (double)n / 1000.0;
    out->p50_us = pct_us(lat, n, 50);
    out->p99_us = pct_us(lat, n, 99);
    out->ops_per_s = (double)n / ((double)(t1 - t0) / 1e9);
    free(lat);
    return 0;
}

static int usage(const char *argv0, int code) {
    fprintf(code ? stderr : stdout,
            "usage: %s [options]\n"
            "  Measures set/get/add latency and ops/s of a TCP store (distc or PyTorch's).\n"
            "  --host ADDR          server address (default 127.0.0.1)\n"
            "  --port PORT          use the server on PORT; without it, start a distc\n"
            "                       server in this process on a free port\n"
            "  --clients LIST       client process counts, one row each (default 1,4)\n"
            "  --iters N            timed operations per client (default 10000)\n"
            "  --warmup N           untimed operations per client first (default iters/10, >= 100)\n"
            "  --value-size BYTES   size of set/get values (default 64)\n"
            "  --ops LIST           among set,get,add (default set,get,add)\n"
            "  --protocol P         auto|distc|torch1|torch2 (default auto: detects the server)\n"
            "  --timeout-ms MS      store timeout (default 30000)\n"
            "  --json               one JSON object per (op, clients) row instead of a table\n"
            "  --version            print the library's version\n",
            argv0);
    return code;
}

static int parse_i64(const char *s, int64_t lo, int64_t hi, int64_t *out) {
    char *end = NULL;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || !*s || *end || v < lo || v > hi) return -1;
    *out = v;
    return 0;
}

static int parse_args(config *cfg, int argc, char **argv) {
    cfg->host = "127.0.0.1";
    cfg->port = 0;
    cfg->protocol = DISTC_TCP_PROTOCOL_AUTO;
    cfg->protocol_name = "auto";
    cfg->clients[0] = 1;
    cfg->clients[1] = 4;
    cfg->n_clients = 2;
    cfg->n_ops = 3;
    for (int i = 0; i < N_OPS; ++i) cfg->ops[i] = i;
    cfg->iters = 10000;
    cfg->warmup = -1;
    cfg->value_size = 64;
    cfg->timeout_ms = 30000;
    cfg->json = 0;
    for (int i = 1; i < argc; ++i) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) return usage(argv[0], 0), 1;
        if (!strcmp(a, "--version")) {
            printf("%s\n", distc_version());
            return 1;
        }
        if (!strcmp(a, "--json")) {
            cfg->json = 1;
            continue;
        }
        const char *v = i + 1 < argc ? argv[++i] : NULL;
        int64_t x = 0;
        if (!v) return usage(argv[0], 2), 2;
        if (!strcmp(a, "--host")) {
            cfg->host = v;
        } else if (!strcmp(a, "--port")) {
            if (parse_i64(v, 1, 65535, &x)) goto bad;
            cfg->port = (int32_t)x;
        } else if (!strcmp(a, "--iters")) {
            if (parse_i64(v, 1, 100000000, &x)) goto bad;
            cfg->iters = x;
        } else if (!strcmp(a, "--warmup")) {
            if (parse_i64(v, 0, 100000000, &x)) goto bad;
            cfg->warmup = x;
        } else if (!strcmp(a, "--value-size")) {
            if (parse_i64(v, 0, 64 << 20, &x)) goto bad;
            cfg->value_size = (size_t)x;
        } else if (!strcmp(a, "--timeout-ms")) {
            if (parse_i64(v, 1, INT32_MAX, &x)) goto bad;
            cfg->timeout_ms = x;
        } else if (!strcmp(a, "--protocol")) {
            static const char *const names[] = {"auto", "distc", "torch1", "torch2"};
            int found = -1;
            for (int k = 0; k < 4; ++k)
                if (!strcmp(v, names[k])) found = k;
            if (found < 0) goto bad;
            cfg->protocol = found; /* the distc_tcp_protocol values, in order */
            cfg->protocol_name = names[found];
        } else if (!strcmp(a, "--clients") || !strcmp(a, "--ops")) {
            int is_ops = a[2] == 'o';
            char buf[256];
            if (strlen(v) >= sizeof buf) goto bad;
            strcpy(buf, v);
            int n = 0;
            for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
                if (is_ops) {
                    int found = -1;
                    for (int k = 0; k < N_OPS; ++k)
                        if (!strcmp(t, op_names[k])) found = k;
                    if (found < 0 || n >= N_OPS) goto bad;
                    cfg->ops[n++] = found;
                } else {
                    if (parse_i64(t, 1, MAX_CLIENTS, &x) || n >= MAX_ROWS) goto bad;
                    cfg->clients[n++] = (int)x;
                }
            }
            if (n == 0) goto bad;
            if (is_ops)
                cfg->n_ops = n;
            else
                cfg->n_clients = n;
        } else {
            return usage(argv[0], 2), 2;
        }
        continue;
    bad:
        fprintf(stderr, "distc-store-bench: bad %s '%s'\n", a, v);
        return 2;
    }
    if (cfg->warmup < 0) cfg->warmup = cfg->iters / 10 < 100 ? 100 : cfg->iters / 10;
    return 0;
}

int main(int argc, char **argv) {
    config cfg;
    int rc = parse_args(&cfg, argc, argv);
    if (rc) return rc == 1 ? 0 : rc;
    signal(SIGPIPE, SIG_IGN);

    int nworkers = 0;
    for (int i = 0; i < cfg.n_clients; ++i)
        if (cfg.clients[i] > nworkers) nworkers = cfg.clients[i];

    /* Fork the clients first: the server's thread must not exist yet. */
    worker ws[MAX_CLIENTS];
    fflush(NULL);
    for (int i = 0; i < nworkers; ++i) {
        int to_child[2], to_parent[2];
        if (pipe(to_child) || pipe(to_parent)) {
            perror("distc-store-bench: pipe");
            return 1;
        }
        pid_t pid = fork();
        if (pid < 0) {
            perror("distc-store-bench: fork");
            return 1;
        }
        if (pid == 0) {
            for (int j = 0; j < i; ++j) {
                close(ws[j].cmd_fd);
                close(ws[j].res_fd);
            }
            close(to_child[1]);
            close(to_parent[0]);
            worker_main(&cfg, i, to_child[0], to_parent[1]);
        }
        close(to_child[0]);
        close(to_parent[1]);
        ws[i].pid = pid;
        ws[i].cmd_fd = to_child[1];
        ws[i].res_fd = to_parent[0];
    }

    distc_store *server = NULL;
    int32_t port = cfg.port;
    if (!port) {
        distc_tcp_store_options o = DISTC_TCP_STORE_OPTIONS_INIT;
        o.is_server = 1;
        o.port = 0;
        o.world_size = -1;
        o.wait_for_workers = 0;
        o.timeout_ms = cfg.timeout_ms;
        if (distc_store_new_tcp(&server, &o) || distc_store_tcp_port(&port, server)) {
            fprintf(stderr, "distc-store-bench: cannot start a server: %s\n", distc_error_last());
            rc = 1;
            goto done;
        }
    }

    long nproc = sysconf(_SC_NPROCESSORS_ONLN);
    if (!cfg.json) {
        printf("# distc-store-bench %s: distc client (protocol %s) -> %s server %s:%d\n", distc_version(),
               cfg.protocol_name, cfg.port ? "external" : "in-process distc", cfg.host, (int)port);
        printf(
            "# %lld timed ops per client after %lld warm-up, value %zu B, nproc %ld; "
            "latency per call, ops/s summed over clients\n",
            (long long)cfg.iters, (long long)cfg.warmup, cfg.value_size, nproc);
        printf("%-4s %7s %10s %10s %10s %12s\n", "op", "clients", "mean_us", "p50_us", "p99_us", "ops/s");
        fflush(stdout);
    }
    for (int oi = 0; oi < cfg.n_ops && !rc; ++oi) {
        for (int ci = 0; ci < cfg.n_clients && !rc; ++ci) {
            row r;
            if (run_row(&cfg, ws, port, cfg.ops[oi], cfg.clients[ci], &r)) {
                fprintf(stderr, "distc-store-bench: %s with %d clients failed\n", op_names[cfg.ops[oi]],
                        cfg.clients[ci]);
                rc = 1;
                break;
            }
            if (cfg.json) {
                printf("{\"client\": \"distc\", \"server\": \"%s\", \"host\": ", cfg.port ? "external" : "distc");
                print_json_str(cfg.host);
                printf(
                    ", \"port\": %d, \"protocol\": \"%s\", \"op\": \"%s\", \"clients\": %d, \"iters\": %lld, "
                    "\"warmup\": %lld, \"value_size\": %zu, \"mean_us\": %.3f, \"p50_us\": %.3f, "
                    "\"p99_us\": %.3f, \"ops_per_s\": %.1f, \"nproc\": %ld, \"distc_version\": \"%s\"}\n",
                    (int)port, cfg.protocol_name, op_names[r.op], r.clients, (long long)cfg.iters,
                    (long long)cfg.warmup, cfg.value_size, r.mean_us, r.p50_us, r.p99_us, r.ops_per_s, nproc,
                    distc_version());
            } else {
                printf("%-4s %7d %10.1f %10.1f %10.1f %12.0f\n", op_names[r.op], r.clients, r.mean_us, r.p50_us,
                       r.p99_us, r.ops_per_s);
            }
            fflush(stdout);
        }
    }

done:
    for (int i = 0; i < nworkers; ++i) {
        close(ws[i].cmd_fd); /* EOF: the client disconnects and exits */
        close(ws[i].res_fd);
    }
    for (int i = 0; i < nworkers; ++i) {
        int st = 0;
        while (waitpid(ws[i].pid, &st, 0) < 0 && errno == EINTR) {}
    }
    distc_store_free(server);
    return rc;
}

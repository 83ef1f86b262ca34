/* distc-store: a standalone TCP store server (PyTorch-compatible).
 *
 *   distc-store [--host ADDR] [--port PORT] [--port-file PATH]
 *               [--max-request-bytes N] [--max-unread-reply-bytes N]
 *
 * Serves until SIGINT/SIGTERM. With --port 0 (the default) it picks a free
 * port and prints it; --port-file writes it to a file for scripts. */
#define _DEFAULT_SOURCE
#include <distc.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

static volatile sig_atomic_t stop = 0;
static void on_signal(int sig) { (void)sig; stop = 1; }

static int usage(const char *argv0, int code) {
    fprintf(code ? stderr : stdout,
            "usage: %s [--host ADDR] [--port PORT] [--port-file PATH] [limits]\n"
            "  Serves a distc / PyTorch TCPStore until interrupted.\n"
            "  --host ADDR      address to bind (default: every interface)\n"
            "  --port PORT      port to listen on; 0 picks a free one (default 0)\n"
            "  --port-file PATH write the bound port to PATH once listening\n"
            "Per-connection limits (N in bytes; a K, M or G suffix multiplies by 1024^1..3):\n"
            "  --max-request-bytes N       the largest request a client may send, and the most\n"
            "                              input buffered for one connection; a larger request\n"
            "                              closes the connection (default 1G + 1M, at least 4096)\n"
            "  --max-unread-reply-bytes N  replies a client may leave unread before its requests\n"
            "                              are no longer read; reading resumes once it takes them\n"
            "                              (default 4M). A request waiting for keys holds back its\n"
            "                              connection too: then at most 64K more is read from it.\n"
            "  A multi_get whose values together exceed 1 GiB is refused.\n",
            argv0);
    return code;
}

/* A byte count with an optional K/M/G suffix; -1 when malformed. */
static long long parse_bytes(const char *v) {
    char *end = NULL;
    long long n = strtoll(v, &end, 10);
    if (end == v || n < 0) return -1;
    int shift = 0;
    if (*end == 'K' || *end == 'k') shift = 10;
    else if (*end == 'M' || *end == 'm') shift = 20;
    else if (*end == 'G' || *end == 'g') shift = 30;
    if (shift) ++end;
    if (*end || n > (LLONG_MAX >> shift)) return -1;
    return n << shift;
}

int main(int argc, char **argv) {
    distc_tcp_store_options opts = DISTC_TCP_STORE_OPTIONS_INIT;
    const char *port_file = NULL;
    opts.is_server = 1;
    opts.wait_for_workers = 0;
    for (int i = 1; i < argc; ++i) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) return usage(argv[0], 0);
        if (!v) return usage(argv[0], 2);
        char *end = NULL;
        if (!strcmp(a, "--host")) opts.host = v;
        else if (!strcmp(a, "--port")) {
            long p = strtol(v, &end, 10);
            if (*end || p < 0 || p > 65535) { fprintf(stderr, "distc-store: bad --port '%s'\n", v); return 2; }
            opts.port = (int32_t)p;
        } else if (!strcmp(a, "--port-file")) port_file = v;
        else if (!strcmp(a, "--max-request-bytes") || !strcmp(a, "--max-unread-reply-bytes")) {
            long long n = parse_bytes(v);
            if (n < 0) { fprintf(stderr, "distc-store: bad %s '%s'\n", a, v); return 2; }
            if (!strcmp(a, "--max-request-bytes")) opts.max_request_bytes = n;
            else opts.max_unread_reply_bytes = n;
        } else return usage(argv[0], 2);
        ++i;
    }
    /* Each client holds one descriptor: allow as many as the hard limit does. */
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0) { rl.rlim_cur = rl.rlim_max; setrlimit(RLIMIT_NOFILE, &rl); }

    distc_store *store = NULL;
    if (distc_store_new_tcp(&store, &opts) != 0) {
        fprintf(stderr, "distc-store: %s\n", distc_error_last());
        return 1;
    }
    int32_t port = 0;
    distc_store_tcp_port(&port, store);
    printf("distc-store %s listening on %s:%d\n", distc_version(), opts.host ? opts.host : "*", port);
    fflush(stdout);
    if (port_file) {
        FILE *f = fopen(port_file, "w");
        if (!f || fprintf(f, "%d\n", port) < 0 || fclose(f) != 0) {
            fprintf(stderr, "distc-store: cannot write %s\n", port_file);
            distc_store_free(store);
            return 1;
        }
    }
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
    while (!stop) usleep(100 * 1000);
    printf("distc-store: shutting down\n");
    distc_store_free(store);
    return 0;
}

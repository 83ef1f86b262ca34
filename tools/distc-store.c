/* distc-store: a standalone TCP store server (PyTorch-compatible).
 *
 *   distc-store [--host ADDR] [--port PORT] [--port-file PATH]
 *               [--token-file PATH] [--allow-torch-clients]
 *               [--max-request-bytes N] [--max-unread-reply-bytes N]
 *
 * Serves until SIGINT/SIGTERM. With --port 0 (the default) it picks a free
 * port and prints it; --port-file writes it to a file for scripts. Clients it
 * refuses or drops are reported on stderr. */
#define _DEFAULT_SOURCE
#include <distc.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "size_arg.h"

static volatile sig_atomic_t stop = 0;
static void on_signal(int sig) {
    (void)sig;
    stop = 1;
}

static int usage(const char *argv0, int code) {
    fprintf(code ? stderr : stdout,
            "usage: %s [--host ADDR] [--port PORT] [--port-file PATH] [access] [limits]\n"
            "  Serves a distc / PyTorch TCPStore until interrupted.\n"
            "  --host ADDR      address to bind (default: every interface, so anyone who can\n"
            "                   reach the port can read and write every key unless a token is set)\n"
            "  --port PORT      port to listen on; 0 picks a free one (default 0)\n"
            "  --port-file PATH write the bound port to PATH once listening\n"
            "  -h, --help       this text\n"
            "Access:\n"
            "  DISTC_STORE_TOKEN  (environment) a shared secret: only clients that prove they\n"
            "                     know it are served (a challenge-response; the token never\n"
            "                     crosses the wire, but keys and values do, unencrypted)\n"
            "  --token-file PATH  read the token from PATH's first line instead (not visible in ps)\n"
            "  --allow-torch-clients  serve PyTorch clients even with a token: they cannot prove\n"
            "                     it, so anyone speaking PyTorch's protocol gets in (default:\n"
            "                     served only when there is no token)\n"
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

/* A byte count (size_arg.h); -1 when malformed. */
static long long parse_bytes(const char *v) {
    uint64_t n;
    return size_arg(v, &n) ? -1 : (long long)n;
}

/* The first line of `path`, without its line end; NULL (with a message) when unreadable or empty. */
static char *read_token(const char *path) {
    static char buf[4096];
    FILE *f = fopen(path, "r");
    if (!f || !fgets(buf, sizeof buf, f)) {
        fprintf(stderr, "distc-store: cannot read a token from %s\n", path);
        if (f) fclose(f);
        return NULL;
    }
    /* A line longer than the buffer would be cut, and a client holding the whole token refused. */
    int whole = strchr(buf, '\n') != NULL || feof(f);
    fclose(f);
    if (!whole) {
        fprintf(stderr, "distc-store: the token in %s is longer than %zu bytes\n", path, sizeof buf - 2);
        return NULL;
    }
    buf[strcspn(buf, "\r\n")] = 0;
    if (!buf[0]) {
        fprintf(stderr, "distc-store: %s holds an empty token\n", path);
        return NULL;
    }
    return buf;
}

static void log_line(void *payload, const char *line) {
    (void)payload;
    fprintf(stderr, "distc-store: %s\n", line);
}

int main(int argc, char **argv) {
    distc_tcp_store_options opts = DISTC_TCP_STORE_OPTIONS_INIT;
    const char *port_file = NULL;
    opts.is_server = 1;
    opts.wait_for_workers = 0;
    opts.server_log = log_line;
    for (int i = 1; i < argc; ++i) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) return usage(argv[0], 0);
        if (!strcmp(a, "--allow-torch-clients")) {
            opts.allow_torch_clients = 1;
            continue;
        }
        const int known = !strcmp(a, "--host") || !strcmp(a, "--port") || !strcmp(a, "--port-file") ||
                          !strcmp(a, "--token-file") || !strcmp(a, "--max-request-bytes") ||
                          !strcmp(a, "--max-unread-reply-bytes");
        if (!known) {
            fprintf(stderr, "distc-store: unknown option %s\n", a);
            return usage(argv[0], 2);
        }
        if (!v) {
            fprintf(stderr, "distc-store: %s needs a value\n", a);
            return usage(argv[0], 2);
        }
        char *end = NULL;
        if (!strcmp(a, "--host"))
            opts.host = v;
        else if (!strcmp(a, "--port")) {
            long p = strtol(v, &end, 10);
            if (end == v || *end || p < 0 || p > 65535) {
                fprintf(stderr, "distc-store: bad --port '%s'\n", v);
                return 2;
            }
            opts.port = (int32_t)p;
        } else if (!strcmp(a, "--port-file"))
            port_file = v;
        else if (!strcmp(a, "--token-file")) {
            if (!(opts.token = read_token(v))) return 2;
        } else if (!strcmp(a, "--max-request-bytes") || !strcmp(a, "--max-unread-reply-bytes")) {
            long long n = parse_bytes(v);
            /* The library's own minimum, said in the tool's terms (its message names the C field). */
            long long least = !strcmp(a, "--max-request-bytes") ? 4096 : 1;
            if (n < least) {
                fprintf(stderr, "distc-store: bad %s '%s' (at least %lld bytes)\n", a, v, least);
                return 2;
            }
            if (!strcmp(a, "--max-request-bytes"))
                opts.max_request_bytes = n;
            else
                opts.max_unread_reply_bytes = n;
        }
        ++i;
    }
    /* Each client holds one descriptor: allow as many as the hard limit does. */
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }

    distc_store *store = NULL;
    if (distc_store_new_tcp(&store, &opts) != 0) {
        fprintf(stderr, "distc-store: %s\n", distc_error_last());
        return 1;
    }
    int32_t port = 0;
    distc_store_tcp_port(&port, store);
    const char *env_token = getenv("DISTC_STORE_TOKEN");
    int has_token = opts.token || (env_token && env_token[0]);
    printf("distc-store %s listening on %s:%d%s\n", distc_version(), opts.host ? opts.host : "*", port,
           has_token ? ", token required" : "");
    fflush(stdout);
    if (!has_token && (!opts.host || !strcmp(opts.host, "0.0.0.0") || !strcmp(opts.host, "::")))
        fprintf(stderr,
                "distc-store: warning: listening on every interface without a token: anyone who can "
                "reach port %d can read and write every key (set DISTC_STORE_TOKEN or --token-file, "
                "or --host 127.0.0.1)\n",
                port);
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

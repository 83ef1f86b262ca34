/*
 * distc-run: starts the ranks of a job on this machine, like torchrun but a
 * small native program.
 *
 *   distc-run -n 4 PROGRAM [ARGS...]
 *
 * Each rank gets torchrun's variables (RANK, LOCAL_RANK, WORLD_SIZE,
 * LOCAL_WORLD_SIZE, GROUP_RANK, MASTER_ADDR, MASTER_PORT,
 * TORCHELASTIC_USE_AGENT_STORE, TORCHELASTIC_RESTART_COUNT,
 * TORCHELASTIC_MAX_RESTARTS), so env:// in distc and in PyTorch works
 * unchanged. Node 0's launcher hosts the TCP store; ranks connect to it.
 * Output lines are prefixed with the rank. The first rank to fail stops the
 * others (SIGTERM, then SIGKILL after --grace-ms) and is named with its exit
 * code or signal and its last lines; SIGINT/SIGTERM to distc-run go to every
 * rank. With --nnodes > 1 the launchers also watch the job's store, so a
 * failure on one node stops the ranks of every node.
 * --max-restarts N starts the whole node's ranks again after a failure.
 * The store asks for a token, random per job, that the ranks get in
 * DISTC_STORE_TOKEN (a job over several machines takes the one in the
 * environment, the same on every node).
 */
#define _GNU_SOURCE
#include <distc.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "run_nodes.h"

#define MAX_LOCAL 1024
#define LINE_MAX_BYTES 4096

typedef struct opts {
    int nproc, nnodes, node_rank, master_port, max_restarts, prefix, tail, grace_ms, allow_torch;
    const char *master_addr;
    const char *trace_dir; /* --trace-dir: where ranks write their traces when asked */
    char **argv;           /* the program and its arguments */
} opts;

/* One output stream of one rank: a partial line, and the last lines for failure reports. */
typedef struct stream {
    int fd; /* -1 once closed */
    int is_err;
    char buf[LINE_MAX_BYTES];
    size_t len;
} stream;

typedef struct rank_proc {
    pid_t pid;
    int rank, running, status;
    stream out, err;
    char **tail; /* ring of the last lines */
    int tail_next, tail_count;
} rank_proc;

static volatile sig_atomic_t g_signal = 0; /* SIGINT/SIGTERM received */
static volatile sig_atomic_t g_dump = 0;   /* SIGUSR2 received (with --trace-dir): ask the ranks for traces */
static int g_wake[2] = {-1, -1};           /* self-pipe: SIGCHLD and signals wake poll() */

static void on_signal(int sig) {
    int saved = errno;
    if (sig == SIGUSR2)
        g_dump = 1;
    else if (sig != SIGCHLD)
        g_signal = sig;
    if (g_wake[1] >= 0) (void)!write(g_wake[1], "x", 1);
    errno = saved;
}

static int usage(int code) {
    fprintf(code ? stderr : stdout,
            "usage: distc-run [options] -n N PROGRAM [ARGS...]\n"
            "  Starts N ranks of PROGRAM on this machine with torchrun's environment\n"
            "  (RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT, ...); node 0 hosts the store.\n"
            "  -n, --nproc-per-node N  ranks on this machine (required)\n"
            "  --nnodes M              machines in the job (default 1); a rank that fails on one\n"
            "                          stops the ranks of all\n"
            "  --node-rank K           this machine's index, 0..M-1 (default 0)\n"
            "  --master-addr HOST      where node 0's store listens (default 127.0.0.1)\n"
            "  --master-port P         its port (default: a free one; required with --nnodes > 1)\n"
            "  --max-restarts R        start the ranks again up to R times after a failure (default 0)\n"
            "  --grace-ms MS           after SIGTERM, wait this long before SIGKILL (default 5000)\n"
            "  --tail L                lines of a failed rank's output to repeat (default 10)\n"
            "  --no-prefix             do not prefix output lines with [rank]\n"
            "  --trace-dir DIR         ranks write their flight recorders into DIR on a failure, and\n"
            "                          when distc-run gets SIGUSR2 (distc-trace --live PID DIR)\n"
            "  --allow-torch-clients   let PyTorch processes use the store (they cannot prove the\n"
            "                          token, so anyone who reaches the port gets in that way)\n"
            "  -h, --help              this text\n"
            "  The store admits clients that know the job's token, handed to the ranks in\n"
            "  DISTC_STORE_TOKEN: a random one per job, or with --nnodes > 1 the one set in\n"
            "  DISTC_STORE_TOKEN on every node (without it the store is open to anyone who\n"
            "  reaches --master-addr:--master-port). A single-node job's store listens on 127.0.0.1.\n");
    return code;
}

static int bad(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int bad(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "distc-run: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    return usage(2);
}

static int parse_int(const char *s, int lo, int hi, int *out) {
    char *end = NULL;
    errno = 0;
    long v = s ? strtol(s, &end, 10) : 0;
    if (!s || !*s || *end || errno || v < lo || v > hi) return -1;
    *out = (int)v;
    return 0;
}

static int parse_args(int argc, char **argv, opts *o) {
    *o = (opts){.nproc = 0,
                .nnodes = 1,
                .node_rank = 0,
                .master_port = 0,
                .max_restarts = 0,
                .prefix = 1,
                .tail = 10,
                .grace_ms = 5000,
                .allow_torch = 0,
                .master_addr = "127.0.0.1",
                .trace_dir = NULL,
                .argv = NULL};
    int i = 1;
    for (; i < argc && argv[i][0] == '-'; ++i) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int *target = NULL, lo = 0, hi = 0;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) return usage(0) - 1;
        if (!strcmp(a, "--")) {
            ++i;
            break;
        }
        if (!strcmp(a, "--no-prefix")) {
            o->prefix = 0;
            continue;
        }
        if (!strcmp(a, "--allow-torch-clients")) {
            o->allow_torch = 1;
            continue;
        }
        if (!strcmp(a, "--trace-dir")) {
            if (!v || !*v) return bad("--trace-dir needs a directory");
            o->trace_dir = v;
            ++i;
            continue;
        }
        if (!strcmp(a, "--master-addr")) {
            if (!v || !*v) return bad("--master-addr needs a host");
            o->master_addr = v;
            ++i;
            continue;
        }
        if (!strcmp(a, "-n") || !strcmp(a, "--nproc-per-node") || !strcmp(a, "--nproc_per_node"))
            target = &o->nproc, lo = 1, hi = MAX_LOCAL;
        else if (!strcmp(a, "--nnodes"))
            target = &o->nnodes, lo = 1, hi = 1 << 20;
        else if (!strcmp(a, "--node-rank") || !strcmp(a, "--node_rank"))
            target = &o->node_rank, lo = 0, hi = 1 << 20;
        else if (!strcmp(a, "--master-port") || !strcmp(a, "--master_port"))
            target = &o->master_port, lo = 1, hi = 65535;
        else if (!strcmp(a, "--max-restarts") || !strcmp(a, "--max_restarts"))
            target = &o->max_restarts, lo = 0, hi = 1000000;
        else if (!strcmp(a, "--grace-ms"))
            target = &o->grace_ms, lo = 0, hi = 3600000;
        else if (!strcmp(a, "--tail"))
            target = &o->tail, lo = 0, hi = 10000;
        else
            return bad("unknown option %s", a);
        if (parse_int(v, lo, hi, target) != 0)
            return bad("%s needs a number in %d..%d, got '%s'", a, lo, hi, v ? v : "");
        ++i;
    }
    if (o->nproc == 0) return bad("-n N (ranks on this machine) is required");
    if (i >= argc) return bad("no program to run");
    if (o->node_rank >= o->nnodes) return bad("--node-rank %d is not below --nnodes %d", o->node_rank, o->nnodes);
    if (o->nnodes > 1 && o->master_port == 0) return bad("--master-port is required with --nnodes > 1");
    o->argv = argv + i;
    return 0;
}

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void remember(rank_proc *p, const char *line, int tail) {
    if (tail == 0) return;
    free(p->tail[p->tail_next]);
    p->tail[p->tail_next] = strdup(line);
    p->tail_next = (p->tail_next + 1) % tail;
    if (p->tail_count < tail) ++p->tail_count;
}

static void emit(const opts *o, rank_proc *p, stream *s, const char *line) {
    FILE *f = s->is_err ? stderr : stdout;
    if (o->prefix)
        fprintf(f, "[%d] %s\n", p->rank, line);
    else
        fprintf(f, "%s\n", line);
    fflush(f);
    remember(p, line, o->tail);
}

/* Reads what is there; prints complete lines (and a last partial one at EOF). */
static void drain(const opts *o, rank_proc *p, stream *s) {
    for (;;) {
        ssize_t n = read(s->fd, s->buf + s->len, sizeof s->buf - 1 - s->len);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
        if (n <= 0) {
            if (s->len) {
                s->buf[s->len] = 0;
                emit(o, p, s, s->buf);
                s->len = 0;
            }
            close(s->fd);
            s->fd = -1;
            return;
        }
        s->len += (size_t)n;
        size_t start = 0;
        for (size_t i = 0; i < s->len; ++i)
            if (s->buf[i] == '\n') {
                s->buf[i] = 0;
                emit(o, p, s, s->buf + start);
                start = i + 1;
            }
        memmove(s->buf, s->buf + start, s->len - start);
        s->len -= start;
        if (s->len == sizeof s->buf - 1) { /* a very long line: print it in pieces */
            s->buf[s->len] = 0;
            emit(o, p, s, s->buf);
            s->len = 0;
        }
    }
}

static void set_env_int(const char *name, long v) {
    char buf[32];
    snprintf(buf, sizeof buf, "%ld", v);
    setenv(name, buf, 1);
}

static int spawn(const opts *o, rank_proc *p, int local, int port, int attempt) {
    int out[2], err[2];
    if (pipe2(out, O_CLOEXEC) != 0 || pipe2(err, O_CLOEXEC) != 0) return -1;
    const pid_t launcher = getpid();
    pid_t pid = fork(); /* from the main thread, which lives as long as the launcher (PR_SET_PDEATHSIG) */
    if (pid < 0) return -1;
    if (pid == 0) {
        /* A launcher killed outright (SIGKILL) cannot stop its ranks: the
         * kernel does, rather than leave them running. Also if it died
         * before this line. Kept across exec. */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != launcher) _exit(137);
        setpgid(0, 0); /* its own process group: signals reach whatever it starts too */
        signal(SIGINT, SIG_DFL);
        signal(SIGTERM, SIG_DFL);
        signal(SIGCHLD, SIG_DFL);
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        int devnull = open("/dev/null", O_RDONLY);
        if (devnull >= 0) dup2(devnull, 0);
        dup2(out[1], 1);
        dup2(err[1], 2);
        long world = (long)o->nnodes * o->nproc;
        set_env_int("RANK", (long)o->node_rank * o->nproc + local);
        set_env_int("LOCAL_RANK", local);
        set_env_int("WORLD_SIZE", world);
        set_env_int("LOCAL_WORLD_SIZE", o->nproc);
        set_env_int("GROUP_RANK", o->node_rank);
        set_env_int("ROLE_RANK", (long)o->node_rank * o->nproc + local);
        set_env_int("ROLE_WORLD_SIZE", world);
        setenv("MASTER_ADDR", o->master_addr, 1);
        set_env_int("MASTER_PORT", port);
        setenv("TORCHELASTIC_USE_AGENT_STORE", "True", 1);
        set_env_int("TORCHELASTIC_RESTART_COUNT", attempt);
        set_env_int("TORCHELASTIC_MAX_RESTARTS", o->max_restarts);
        if (o->nproc > 1) setenv("OMP_NUM_THREADS", "1", 0); /* as torchrun: N ranks share the cores */
        if (o->trace_dir) {
            setenv("DISTC_TRACE_DIR", o->trace_dir, 1);
            setenv("DISTC_TRACE_SIGNAL", "SIGUSR2", 1);
        }
        execvp(o->argv[0], o->argv);
        fprintf(stderr, "distc-run: cannot run %s: %s\n", o->argv[0], strerror(errno));
        _exit(127);
    }
    setpgid(pid, pid); /* also here, so that an early kill(-pid) cannot miss */
    close(out[1]);
    close(err[1]);
    fcntl(out[0], F_SETFL, O_NONBLOCK);
    fcntl(err[0], F_SETFL, O_NONBLOCK);
    p->pid = pid;
    p->rank = o->node_rank * o->nproc + local;
    p->running = 1;
    p->status = 0;
    p->out = (stream){.fd = out[0], .is_err = 0, .len = 0};
    p->err = (stream){.fd = err[0], .is_err = 1, .len = 0};
    p->tail_next = p->tail_count = 0;
    return 0;
}

static void signal_all(rank_proc *ps, int n, int sig) {
    for (int i = 0; i < n; ++i)
        if (ps[i].running) kill(-ps[i].pid, sig);
}

static void describe_status(int status, char *buf, size_t len) {
    if (WIFSIGNALED(status))
        snprintf(buf, len, "was killed by signal %d (%s)", WTERMSIG(status), strsignal(WTERMSIG(status)));
    else
        snprintf(buf, len, "exited with code %d", WEXITSTATUS(status));
}

/* Runs the node's ranks once: 0 when all exited 0, else the failure's exit code for distc-run. */
static int run_once(const opts *o, rank_proc *ps, run_nodes *job, int port, int attempt, int *interrupted) {
    int n = o->nproc;
    for (int i = 0; i < n; ++i) {
        if (spawn(o, &ps[i], i, port, attempt) != 0) {
            fprintf(stderr, "distc-run: cannot start rank %d: %s\n", o->node_rank * n + i, strerror(errno));
            signal_all(ps, i, SIGKILL);
            for (int j = 0; j < i; ++j) waitpid(ps[j].pid, NULL, 0);
            return 1;
        }
    }
    int alive = n, failed = -1, stopping = 0;
    char *elsewhere = NULL; /* another node's failure, which stopped this node */
    double kill_at = 0, next_look = now_ms() + 200;
    long dumps_seen = job && o->trace_dir ? run_nodes_dumps(job, attempt, 0) : 0;
    struct pollfd fds[2 * MAX_LOCAL + 1];
    for (;;) {
        /* Reap what has exited. */
        for (int i = 0; i < n; ++i) {
            if (!ps[i].running) continue;
            int st;
            pid_t r = waitpid(ps[i].pid, &st, WNOHANG);
            if (r != ps[i].pid) continue;
            ps[i].running = 0;
            ps[i].status = st;
            --alive;
            int bad_exit = !(WIFEXITED(st) && WEXITSTATUS(st) == 0);
            if (bad_exit && failed < 0 && !stopping) {
                failed = i;
                stopping = 1;
                signal_all(ps, n, SIGTERM);
                kill_at = now_ms() + o->grace_ms;
                char what[160], how[128];
                describe_status(st, how, sizeof how);
                snprintf(what, sizeof what, "rank %d on node %d %s", ps[i].rank, o->node_rank, how);
                if (job) run_nodes_announce(job, attempt, what);
            }
        }
        int look = job && now_ms() >= next_look; /* the job's store, every 200 ms */
        if (look) next_look = now_ms() + 200;
        /* Traces asked for, here (SIGUSR2) or on another node (the store's count). */
        int ask = g_dump && o->trace_dir;
        g_dump = 0;
        if (ask && job) {
            dumps_seen = run_nodes_dumps(job, attempt, 1);
        } else if (look && o->trace_dir) {
            long asked = run_nodes_dumps(job, attempt, 0);
            ask = asked > dumps_seen;
            if (ask) dumps_seen = asked;
        }
        if (ask) {
            for (int i = 0; i < n; ++i)
                if (ps[i].running) kill(ps[i].pid, SIGUSR2);
            fprintf(stderr, "distc-run: asked node %d's ranks to write their traces into %s\n", o->node_rank,
                    o->trace_dir);
        }
        if (look && !stopping) {
            elsewhere = run_nodes_failure(job, attempt);
            if (elsewhere) {
                stopping = 1;
                signal_all(ps, n, SIGTERM);
                kill_at = now_ms() + o->grace_ms;
            }
        }
        if (g_signal && !stopping) {
            *interrupted = g_signal;
            stopping = 1;
            signal_all(ps, n, g_signal);
            kill_at = now_ms() + o->grace_ms;
        }
        if (stopping && alive > 0 && now_ms() >= kill_at) {
            signal_all(ps, n, SIGKILL);
            kill_at = now_ms() + 1e9;
        }
        /* Done once every rank exited and their output is drained. */
        int nfds = 0;
        fds[nfds++] = (struct pollfd){g_wake[0], POLLIN, 0};
        for (int i = 0; i < n; ++i) {
            if (ps[i].out.fd >= 0) fds[nfds++] = (struct pollfd){ps[i].out.fd, POLLIN, 0};
            if (ps[i].err.fd >= 0) fds[nfds++] = (struct pollfd){ps[i].err.fd, POLLIN, 0};
        }
        if (alive == 0 && nfds == 1) break;
        int timeout = stopping && alive > 0 ? 50 : (alive == 0 || o->nnodes > 1 ? 200 : 1000);
        int r = poll(fds, (nfds_t)nfds, timeout);
        if (r < 0 && errno != EINTR) break;
        if (fds[0].revents & POLLIN) {
            char b[64];
            while (read(g_wake[0], b, sizeof b) > 0) {}
        }
        for (int i = 0; i < n; ++i) {
            if (ps[i].out.fd >= 0) drain(o, &ps[i], &ps[i].out);
            if (ps[i].err.fd >= 0) drain(o, &ps[i], &ps[i].err);
        }
        /* Exited ranks whose descendants keep the pipes open: stop waiting for them after a while. */
        if (alive == 0 && r == 0) {
            for (int i = 0; i < n; ++i) {
                if (ps[i].out.fd >= 0) close(ps[i].out.fd), ps[i].out.fd = -1;
                if (ps[i].err.fd >= 0) close(ps[i].err.fd), ps[i].err.fd = -1;
            }
        }
    }
    if (elsewhere) {
        fprintf(stderr, "distc-run: node %d stopped its %d rank(s): %s\n", o->node_rank, n, elsewhere);
        free(elsewhere);
        return 1;
    }
    if (failed < 0) return *interrupted ? 128 + *interrupted : 0;
    rank_proc *p = &ps[failed];
    char what[128];
    describe_status(p->status, what, sizeof what);
    fprintf(stderr, "distc-run: rank %d (pid %d) %s; stopped the other %d rank(s)%s\n", p->rank, (int)p->pid, what,
            n - 1, p->tail_count ? "; its last output:" : "");
    for (int k = 0; k < p->tail_count; ++k) {
        int idx = (p->tail_next - p->tail_count + k + o->tail) % o->tail;
        fprintf(stderr, "  [%d] %s\n", p->rank, p->tail[idx]);
    }
    return WIFSIGNALED(p->status) ? 128 + WTERMSIG(p->status) : (WEXITSTATUS(p->status) ? WEXITSTATUS(p->status) : 1);
}

/* The store's refusals, with the flag that admits PyTorch clients when that is the cause. */
static void store_log(void *payload, const char *line) {
    (void)payload;
    fprintf(stderr, "distc-run: %s%s\n", line,
            strstr(line, "PyTorch-protocol") ? " (distc-run --allow-torch-clients admits them)" : "");
}

/* Sets DISTC_STORE_TOKEN for the store and the ranks: the environment's if set, else a
 * fresh random one when this launcher is the whole job. */
static int job_token(const opts *o) {
    const char *given = getenv("DISTC_STORE_TOKEN");
    if (given && *given) return 0;
    if (o->nnodes > 1) {
        if (o->node_rank == 0)
            fprintf(stderr,
                    "distc-run: warning: no DISTC_STORE_TOKEN: the store on port %d is open to anyone "
                    "who can reach it (set the same DISTC_STORE_TOKEN on every node)\n",
                    o->master_port);
        return 0;
    }
    unsigned char raw[32];
    char hex[2 * sizeof raw + 1];
    for (size_t got = 0; got < sizeof raw;) {
        ssize_t r = getrandom(raw + got, sizeof raw - got, 0);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            fprintf(stderr, "distc-run: cannot make the job's token: %s\n", strerror(errno));
            return -1;
        }
        got += (size_t)r;
    }
    for (size_t i = 0; i < sizeof raw; ++i) snprintf(hex + 2 * i, 3, "%02x", raw[i]);
    return setenv("DISTC_STORE_TOKEN", hex, 1);
}

int main(int argc, char **argv) {
    opts o;
    int rc = parse_args(argc, argv, &o);
    if (rc != 0) return rc < 0 ? 0 : rc;
    if (pipe2(g_wake, O_CLOEXEC | O_NONBLOCK) != 0) return 1;
    if (job_token(&o) != 0) return 1;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sa.sa_flags = SA_RESTART;
    sigaction(SIGCHLD, &sa, NULL);
    if (o.trace_dir) sigaction(SIGUSR2, &sa, NULL);

    /* Node 0 hosts the store for the whole job, across restarts (each attempt
     * has keys of its own: /worker/attempt_N, as torchelastic). */
    distc_store *store = NULL;
    int port = o.master_port;
    if (o.node_rank == 0) {
        distc_tcp_store_options so = DISTC_TCP_STORE_OPTIONS_INIT;
        so.is_server = 1;
        so.wait_for_workers = 0;
        so.port = o.master_port;
        so.world_size = o.nnodes * o.nproc;
        so.host = o.nnodes > 1 ? NULL : "127.0.0.1";
        so.allow_torch_clients = o.allow_torch ? 1 : -1;
        so.server_log = store_log;
        if (distc_store_new_tcp(&store, &so) != 0) {
            fprintf(stderr, "distc-run: cannot host the store: %s\n", distc_error_last());
            return 1;
        }
        int32_t bound = 0;
        distc_store_tcp_port(&bound, store);
        port = bound;
    } else {
        /* The other nodes' launchers join the same store, to hear of failures. */
        distc_tcp_store_options so = DISTC_TCP_STORE_OPTIONS_INIT;
        so.host = o.master_addr;
        so.port = o.master_port;
        if (distc_store_new_tcp(&store, &so) != 0) {
            fprintf(stderr, "distc-run: cannot reach node 0's store at %s:%d: %s\n", o.master_addr, o.master_port,
                    distc_error_last());
            return 1;
        }
    }
    /* Only now: joining node 0's store retries for minutes, and until a rank
     * runs, Ctrl-C or SIGTERM has nothing to clean up and should just stop us. */
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    if (o.nnodes > 1) distc_store_set_timeout(store, 2000);
    rank_proc *ps = calloc((size_t)o.nproc, sizeof *ps);
    for (int i = 0; i < o.nproc; ++i) ps[i].tail = calloc((size_t)(o.tail ? o.tail : 1), sizeof(char *));
    int interrupted = 0;
    run_nodes nodes = {store, o.nnodes, o.node_rank, 0}, *job = o.nnodes > 1 ? &nodes : NULL;
    for (int attempt = 0;; ++attempt) {
        if (job && run_nodes_join(job, attempt, 300000) != 0) {
            rc = 1;
            break;
        }
        rc = run_once(&o, ps, job, port, attempt, &interrupted);
        /* Node 0 keeps the store up for the others: as long as they may run
         * when this attempt succeeded here, and while they stop their ranks
         * when it failed. */
        if (job) run_nodes_finish(job, attempt, rc == 0 ? 300000 : o.grace_ms + 2000);
        char *elsewhere = job && rc == 0 ? run_nodes_failure(job, attempt) : NULL;
        if (elsewhere) { /* after this node's ranks had all succeeded */
            fprintf(stderr, "distc-run: the job failed on another node: %s\n", elsewhere);
            free(elsewhere);
            rc = 1;
        }
        if (rc == 0 || interrupted || attempt >= o.max_restarts) break;
        fprintf(stderr, "distc-run: restarting the ranks (restart %d of %d)\n", attempt + 1, o.max_restarts);
    }
    if (interrupted) fprintf(stderr, "distc-run: stopped by %s\n", strsignal(interrupted));
    for (int i = 0; i < o.nproc; ++i) {
        for (int k = 0; k < (o.tail ? o.tail : 1); ++k) free(ps[i].tail[k]);
        free(ps[i].tail);
    }
    free(ps);
    distc_store_free(store);
    return rc;
}

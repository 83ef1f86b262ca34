/* test_pg_processes' SIGPIPE check: blocked on every thread the library
 * starts, the caller's thread left as it was. */
#define _GNU_SOURCE
#include <dirent.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "job.h"
#include "tests.h"

/* SIGPIPE: Gloo writes to its sockets with writev, which raises SIGPIPE
 * on the writing thread when a peer has died (and kills the process unless
 * blocked). Every thread the library starts (the store server, Gloo's loop
 * threads, the worker and p2p threads) must block it; the caller's own
 * thread must come back from every call with its mask as it was and
 * nothing pending. */
static int sigpipe_state(pid_t tid, unsigned long long *blocked, unsigned long long *pending) {
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/self/task/%d/status", (int)tid);
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    int got = 0;
    while (fgets(line, sizeof line, f)) {
        if (sscanf(line, "SigBlk: %llx", blocked) == 1) got |= 1;
        if (sscanf(line, "SigPnd: %llx", pending) == 1) got |= 2;
    }
    fclose(f);
    return got == 3 ? 0 : -1;
}

static int sigpipe_child(int rank, int n, void *arg) {
    const struct job *j = arg;
    distc_pg *pg = join(rank, n, j);
    CHILD_CHECK(pg, "rank %d could not join", rank);
    float x[1024] = {0};
    int64_t shape[1] = {1024};
    DLTensor t = f32(x, shape);
    distc_work *w = NULL;
    CHILD_CHECK(distc_allreduce(NULL, pg, &t, DISTC_SUM, NULL) == 0, "allreduce: %s", distc_error_last());
    CHILD_CHECK(distc_allreduce(&w, pg, &t, DISTC_SUM, NULL) == 0, "async allreduce: %s", distc_error_last());
    CHILD_CHECK(distc_work_wait(w, DISTC_TIMEOUT_DEFAULT) == 0, "async allreduce: %s", distc_error_last());
    distc_work_free(w);
    int rc = rank == 0 ? distc_send(&w, pg, &t, 1, 7, NULL) : distc_recv(&w, pg, &t, 0, 7, NULL);
    CHILD_CHECK(rc == 0 && distc_work_wait(w, DISTC_TIMEOUT_DEFAULT) == 0, "p2p: %s", distc_error_last());
    distc_work_free(w);

    const unsigned long long pipe_bit = 1ULL << (SIGPIPE - 1);
    pid_t me = (pid_t)syscall(SYS_gettid);
    unsigned long long blk = 0, pnd = 0;
    CHILD_CHECK(sigpipe_state(me, &blk, &pnd) == 0, "cannot read this thread's signal state");
    CHILD_CHECK(!(blk & pipe_bit) && !(pnd & pipe_bit), "rank %d: the caller's thread came back with SIGPIPE %s", rank,
                blk & pipe_bit ? "blocked" : "pending");
    DIR *d = opendir("/proc/self/task");
    CHILD_CHECK(d, "cannot list this process's threads");
    int others = 0, unblocked = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        pid_t tid = (pid_t)atoi(e->d_name);
        if (tid <= 0 || tid == me) continue;
        if (sigpipe_state(tid, &blk, &pnd) != 0) continue; /* gone meanwhile */
        ++others;
        if (!(blk & pipe_bit)) ++unblocked;
    }
    closedir(d);
    /* Gloo's loop thread, the worker and the p2p thread at least. */
    CHILD_CHECK(others >= 3, "rank %d: only %d library threads found", rank, others);
    CHILD_CHECK(unblocked == 0, "rank %d: %d of the library's %d threads take SIGPIPE", rank, unblocked, others);
    distc_pg_free(pg);
    return 0;
}

void test_library_threads_block_sigpipe(void **state) {
    (void)state;
    struct job j = {dt_free_port(), 20000, -1, 0, -1, 0};
    assert_int_equal(dt_run_procs(2, sigpipe_child, &j, 60), 0);
}

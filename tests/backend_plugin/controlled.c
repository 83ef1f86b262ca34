/* test_backend_plugin's backend under the test's control: work it completes
 * or fails from any thread (inline, later, racing the caller's exit, never),
 * its hooks, stream-ordered blocking calls and the memory kinds it takes. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "pg_harness.h"
#include "test_util.h"

#include "backend_plugin.h"

/* ------------------------------------------------- a backend under control */

/* Takes every allreduce and keeps its work for the test to complete. */
typedef struct ctl {
    distc_work *pending;
    void *waited_stream;
    int stream_waits, releases, aborts;
    int refuse;          /* allreduce returns DISTC_EINVAL without taking the work */
    int refuse_late;     /* the same, after setting hooks */
    int complete_now;    /* complete from a thread after a short while */
    int complete_inline; /* complete before returning (on the calling thread) */
    int fail_inline;     /* fail before returning */
    int probe;           /* try the user's work calls on the handle first */
    int probe_rc;        /* what distc_work_test answered */
    int never;           /* never complete (the handle stays in `pending`) */
    int twice;           /* complete inline, then try to complete, fail and hook it again */
    int racing;          /* complete from a new thread at once, racing the caller's wait */
    int again_rc[3];     /* what the second complete, fail and set_hooks answered */
    int32_t seen_device;
} ctl;

static ctl g_ctl;

static int ctl_wait_stream(void *payload, void *stream) {
    ctl *c = payload;
    c->waited_stream = stream;
    ++c->stream_waits;
    return 0;
}
static void ctl_release(void *payload) { ++((ctl *)payload)->releases; }

static void *complete_later(void *arg) {
    struct timespec ts = {0, 30 * 1000000L};
    nanosleep(&ts, NULL);
    distc_backend_work_complete(arg, -1);
    return NULL;
}

static void *complete_at_once(void *arg) {
    distc_backend_work_complete(arg, -1);
    return NULL;
}

static int ctl_allreduce(distc_work *w, void *g, const distc_buffer *b, size_t n, int32_t op,
                         const distc_backend_op_args *a) {
    (void)op;
    ctl *c = g;
    if (c->refuse) return distc_error_set(DISTC_EINVAL, "the engine cannot reduce this (test)");
    if (n != 1 || a->version != DISTC_BACKEND_OP_ARGS_VERSION || !a->op || strcmp(a->op, "allreduce") != 0 ||
        a->seq == 0)
        return distc_error_set(DISTC_EINTERNAL, "unexpected arguments");
    c->seen_device = b[0].device_type;
    static const distc_work_hooks hooks = {DISTC_WORK_HOOKS_VERSION, ctl_wait_stream, ctl_release};
    int rc = distc_backend_work_set_hooks(w, &hooks, c);
    if (rc) return rc;
    if (c->refuse_late) return distc_error_set(DISTC_EINVAL, "refused after setting hooks (test)");
    if (c->probe) {
        c->probe_rc = distc_work_test(w);
        distc_work_free(w); /* not the backend's to free: ignored */
    }
    if (c->never) {
        c->pending = w;
        return 0;
    }
    if (c->twice) {
        int rc1 = distc_backend_work_complete(w, -1);
        c->again_rc[0] = distc_backend_work_complete(w, -1);
        c->again_rc[1] = distc_backend_work_fail(w, DISTC_EREMOTE, "late");
        c->again_rc[2] = distc_backend_work_set_hooks(w, &hooks, c);
        return rc1;
    }
    if (c->racing) {
        pthread_t t;
        pthread_create(&t, NULL, complete_at_once, w);
        pthread_detach(t);
        return 0;
    }
    if (c->complete_inline) return distc_backend_work_complete(w, -1);
    if (c->fail_inline) return distc_backend_work_fail(w, DISTC_EREMOTE, "peer 3 vanished");
    if (c->complete_now) {
        pthread_t t;
        pthread_create(&t, NULL, complete_later, w);
        pthread_detach(t);
        return 0;
    }
    c->pending = w;
    return 0;
}

static int ctl_abort(void *g) {
    ++((ctl *)g)->aborts;
    return 0;
}

static void register_ctl(const char *name, uint32_t flags, uint64_t devices) {
    distc_backend_ops ops = {.version = DISTC_BACKEND_OPS_VERSION,
                             .flags = flags,
                             .device_types = devices,
                             .create = ok_create,
                             .destroy = ok_destroy,
                             .abort = ctl_abort,
                             .allreduce = ctl_allreduce};
    ASSERT_OK(distc_backend_register(name, &ops, &g_ctl));
}

void test_work_completed_by_backend(void **state) {
    (void)state;
    memset(&g_ctl, 0, sizeof g_ctl);
    register_ctl("ctl_async", 0, DISTC_DEVICE_BIT(kDLCPU));
    distc_pg *pg = new_group("ctl_async", 0, NULL);
    float x[2] = {1, 2};
    int64_t shape = 2;
    DLTensor t = tensor_f32(x, &shape);

    distc_work *w = NULL;
    ASSERT_OK(distc_allreduce(&w, pg, &t, DISTC_SUM, NULL));
    assert_non_null(g_ctl.pending);
    assert_int_equal(distc_work_test(w), DISTC_INPROGRESS);
    ASSERT_ERR(distc_work_wait(w, 10), DISTC_ETIMEOUT, "still running");
    int hook_rc = 0;
    hook_rc = distc_work_wait_stream(w, (void *)0x1234);
    assert_int_equal(hook_rc, 0);
    assert_int_equal(g_ctl.stream_waits, 1);
    assert_ptr_equal(g_ctl.waited_stream, (void *)0x1234);
    ASSERT_ERR(
        distc_backend_work_set_hooks(g_ctl.pending, &(distc_work_hooks){DISTC_WORK_HOOKS_VERSION, NULL, NULL}, NULL),
        DISTC_ESTATE, "already set");
    ASSERT_OK(distc_backend_work_complete(g_ctl.pending, -1));
    ASSERT_OK(distc_work_wait(w, -1));
    uint64_t seq = 0;
    ASSERT_OK(distc_work_seq(&seq, w));
    assert_int_equal(seq, 1);
    assert_int_equal(g_ctl.releases, 0);
    distc_work_free(w);
    assert_int_equal(g_ctl.releases, 1);

    /* A failure carries the operation and the backend's words. */
    ASSERT_OK(distc_allreduce(&w, pg, &t, DISTC_SUM, NULL));
    ASSERT_ERR(distc_backend_work_fail(g_ctl.pending, 5, "x"), DISTC_EINVAL, "negative");
    ASSERT_OK(distc_backend_work_fail(g_ctl.pending, DISTC_EREMOTE, "peer 3 vanished"));
    ASSERT_ERR(distc_work_wait(w, -1), DISTC_EREMOTE, "peer 3 vanished");
    dt_assert_contains(distc_error_last(), "allreduce #2");
    ASSERT_ERR(distc_work_wait_stream(w, NULL), DISTC_EREMOTE, "peer 3 vanished");
    distc_work_free(w);

    /* An operation the backend refuses: its code and message, no handle, nothing pending. */
    g_ctl.refuse = 1;
    w = NULL;
    ASSERT_ERR(distc_allreduce(&w, pg, &t, DISTC_SUM, NULL), DISTC_EINVAL, "cannot reduce this");
    dt_assert_contains(distc_error_last(), "ctl_async");
    assert_null(w);
    g_ctl.refuse = 0;

    /* Blocking calls on a host backend wait for the backend's completion from its
     * thread; their handle's release hook runs once the call is over. */
    g_ctl.releases = 0;
    g_ctl.complete_now = 1;
    ASSERT_OK(distc_allreduce(NULL, pg, &t, DISTC_SUM, NULL));
    ASSERT_OK(distc_allreduce(NULL, pg, &t, DISTC_SUM, NULL));
    g_ctl.complete_now = 0;
    assert_int_equal(g_ctl.releases, 2);
    /* ... or from inside the call, on the caller's thread. */
    g_ctl.complete_inline = 1;
    ASSERT_OK(distc_allreduce(NULL, pg, &t, DISTC_SUM, NULL));
    assert_int_equal(g_ctl.releases, 3);
    /* A blocking call's handle is only for completing it: the user's calls refuse it. */
    g_ctl.probe = 1;
    ASSERT_OK(distc_allreduce(NULL, pg, &t, DISTC_SUM, NULL));
    assert_int_equal(g_ctl.probe_rc, DISTC_EINVAL);
    g_ctl.probe = 0;
    g_ctl.complete_inline = 0;
    /* A blocking call the backend fails: the operation, numbered, and the backend's words. */
    g_ctl.fail_inline = 1;
    ASSERT_ERR(distc_allreduce(NULL, pg, &t, DISTC_SUM, NULL), DISTC_EREMOTE, "peer 3 vanished");
    dt_assert_contains(distc_error_last(), "allreduce #");
    dt_assert_contains(distc_error_last(), "float32[2]");
    g_ctl.fail_inline = 0;
    /* Refused after setting hooks: the release hook still runs, once. */
    g_ctl.releases = 0;
    g_ctl.refuse_late = 1;
    ASSERT_ERR(distc_allreduce(NULL, pg, &t, DISTC_SUM, NULL), DISTC_EINVAL, "refused after setting hooks");
    g_ctl.refuse_late = 0;
    assert_int_equal(g_ctl.releases, 1);
    g_ctl.complete_now = 1;
    ASSERT_OK(distc_allreduce(NULL, pg, &t, DISTC_SUM, NULL)); /* the thread's handle is fine after a failure */
    g_ctl.complete_now = 0;
    /* A blocking call completed twice, failed or hooked after it completed: refused, the call unharmed. */
    g_ctl.twice = 1;
    g_ctl.releases = 0;
    ASSERT_OK(distc_allreduce(NULL, pg, &t, DISTC_SUM, NULL));
    g_ctl.twice = 0;
    for (int i = 0; i < 3; ++i) assert_int_equal(g_ctl.again_rc[i], DISTC_ESTATE);
    assert_int_equal(g_ctl.releases, 1);
    g_ctl.complete_inline = 1;
    ASSERT_OK(distc_allreduce(NULL, pg, &t, DISTC_SUM, NULL));
    g_ctl.complete_inline = 0;

    ASSERT_ERR(distc_backend_work_complete(NULL, -1), DISTC_EINVAL, "work");
    ASSERT_ERR(distc_backend_work_set_hooks(NULL, NULL, NULL), DISTC_EINVAL, "work");
    ASSERT_OK(distc_allreduce(&w, pg, &t, DISTC_SUM, NULL));
    ASSERT_ERR(distc_backend_work_set_hooks(g_ctl.pending, NULL, NULL), DISTC_EINVAL, "hooks");
    ASSERT_ERR(distc_backend_work_set_hooks(g_ctl.pending, &(distc_work_hooks){99, NULL, NULL}, NULL), DISTC_EINVAL,
               "hooks->version is 99");
    ASSERT_OK(distc_backend_work_complete(g_ctl.pending, -1));
    ASSERT_OK(distc_work_wait(w, -1));
    distc_work_free(w);
    distc_pg_free(pg);
}

/* Short-lived threads whose blocking call another thread completes at once:
 * each thread's call is freed as the thread exits, so a completion that
 * touched the call after waking its caller would use freed memory (the
 * sanitizer presets catch it). */
static void *one_racing_call(void *arg) {
    float x[2] = {1, 2};
    int64_t shape = 2;
    DLTensor t = tensor_f32(x, &shape);
    *(int *)((void **)arg)[1] = distc_allreduce(NULL, ((void **)arg)[0], &t, DISTC_SUM, NULL);
    return NULL;
}

void test_blocking_calls_completed_racing_thread_exit(void **state) {
    (void)state;
    memset(&g_ctl, 0, sizeof g_ctl);
    register_ctl("ctl_racing", 0, DISTC_DEVICE_BIT(kDLCPU));
    distc_pg *pg = new_group("ctl_racing", 0, NULL);
    g_ctl.racing = 1;
    for (int i = 0; i < 200; ++i) {
        int rc = -1;
        void *arg[2] = {pg, &rc};
        pthread_t th;
        assert_int_equal(pthread_create(&th, NULL, one_racing_call, arg), 0);
        pthread_join(th, NULL);
        assert_int_equal(rc, 0);
    }
    g_ctl.racing = 0;
    distc_pg_free(pg);
}

void test_backend_never_completes(void **state) {
    (void)state;
    memset(&g_ctl, 0, sizeof g_ctl);
    register_ctl("ctl_never", 0, DISTC_DEVICE_BIT(kDLCPU));
    distc_pg *pg = new_group("ctl_never", 0, NULL);
    float x[2] = {1, 2};
    int64_t shape = 2;
    DLTensor t = tensor_f32(x, &shape);
    g_ctl.never = 1;
    distc_op_options oo = DISTC_OP_OPTIONS_INIT;
    oo.timeout_ms = 100;
    ASSERT_ERR(distc_allreduce(NULL, pg, &t, DISTC_SUM, &oo), DISTC_ETIMEOUT, "did not complete");
    assert_int_equal(g_ctl.aborts, 1);
    ASSERT_ERR(distc_allreduce(NULL, pg, &t, DISTC_SUM, NULL), DISTC_EABORTED, "aborted");
    distc_pg_free(pg);

    /* The thread's next blocking call gets a handle of its own while the backend
     * still holds the old one; the backend may complete that one late. */
    distc_work *late = g_ctl.pending;
    assert_non_null(late);
    g_ctl.never = 0;
    g_ctl.complete_inline = 1;
    pg = new_group("ctl_never", 0, NULL);
    ASSERT_OK(distc_allreduce(NULL, pg, &t, DISTC_SUM, NULL));
    ASSERT_OK(distc_backend_work_fail(late, DISTC_EABORTED, "late"));
    ASSERT_OK(distc_allreduce(NULL, pg, &t, DISTC_SUM, NULL));
    g_ctl.complete_inline = 0;
    distc_pg_free(pg);
}

void test_stream_ordered_and_devices(void **state) {
    (void)state;
    memset(&g_ctl, 0, sizeof g_ctl);
    register_ctl("ctl_device", DISTC_BACKEND_STREAM_ORDERED, DISTC_DEVICE_BIT(kDLCUDA));
    distc_pg *pg = new_group("ctl_device", 0, NULL);
    float x[2] = {1, 2};
    int64_t shape = 2;
    DLTensor t = tensor_f32(x, &shape);
    ASSERT_ERR(distc_allreduce(NULL, pg, &t, DISTC_SUM, NULL), DISTC_EINVAL, "takes CUDA memory");
    dt_assert_contains(distc_error_last(), "tensor is in CPU memory");
    t.device.device_type = kDLCUDA; /* never dereferenced: the backend only looks at it */
    /* Stream-ordered: the blocking call returns once the backend took the work. */
    ASSERT_OK(distc_allreduce(NULL, pg, &t, DISTC_SUM, NULL));
    assert_int_equal(g_ctl.seen_device, kDLCUDA);
    assert_non_null(g_ctl.pending);
    ASSERT_OK(distc_backend_work_complete(g_ctl.pending, -1));
    assert_int_equal(g_ctl.releases, 1); /* the core's handle went with the blocking call */
    /* Host bytes on a device-only backend go through the store, and the flight
     * recorder records them as every collective. */
    distc_buf got = {NULL, 0};
    ASSERT_OK(distc_all_gather_bytes(&got, pg, "hello", 5, NULL));
    assert_int_equal(got.size, 5);
    distc_buf_dispose(&got);
    char *path = dt_temp_path("trace-bytes");
    ASSERT_OK(distc_pg_trace_dump(pg, path));
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    char text[8192] = {0};
    size_t n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[n] = 0;
    dt_assert_contains(text, "\"op\":\"all_gather_bytes\"");
    dt_assert_contains(text, "\"count\":5");
    unlink(path);
    free(path);
    distc_pg_free(pg);
}

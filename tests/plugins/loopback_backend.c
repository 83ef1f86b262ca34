#include "loopback_backend.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------ completer */
/* One thread per process completes every work, in order. */

typedef struct item {
    distc_work *work;
    int code; /* 0 or a negative distc code */
    struct item *next;
} item;

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_cv = PTHREAD_COND_INITIALIZER;
static item *g_head, *g_tail;
static int g_started;

static void *completer(void *arg) {
    (void)arg;
    for (;;) {
        pthread_mutex_lock(&g_mu);
        while (!g_head) pthread_cond_wait(&g_cv, &g_mu);
        item *it = g_head;
        g_head = it->next;
        if (!g_head) g_tail = NULL;
        pthread_mutex_unlock(&g_mu);
        if (it->code == 0)
            distc_backend_work_complete(it->work, -1);
        else
            distc_backend_work_fail(it->work, it->code, "the loopback group was aborted");
        free(it);
    }
    return NULL;
}

static int finish(distc_work *work, int code) {
    item *it = calloc(1, sizeof *it);
    if (!it) return distc_error_set(DISTC_ENOMEM, "loopback: out of memory");
    it->work = work;
    it->code = code;
    pthread_mutex_lock(&g_mu);
    if (!g_started) {
        pthread_t t;
        if (pthread_create(&t, NULL, completer, NULL) != 0) {
            pthread_mutex_unlock(&g_mu);
            free(it);
            return distc_error_set(DISTC_EBACKEND, "loopback: cannot start its thread");
        }
        pthread_detach(t);
        g_started = 1;
    }
    if (g_tail)
        g_tail->next = it;
    else
        g_head = it;
    g_tail = it;
    pthread_cond_signal(&g_cv);
    pthread_mutex_unlock(&g_mu);
    return 0;
}

/* ---------------------------------------------------------------- group */

typedef struct group {
    volatile int aborted;
} group;

static int lb_create(void **out, const distc_backend_group_info *info, void *payload) {
    (void)payload;
    if (info->size != 1) return distc_error_set(DISTC_EINVAL, "the loopback backend runs world size 1 only");
    group *g = calloc(1, sizeof *g);
    if (!g) return distc_error_set(DISTC_ENOMEM, "loopback: out of memory");
    *out = g;
    return 0;
}

static void lb_destroy(void *g) { free(g); }

int loopback_splits;

/* A world of one splits into itself or into nothing. */
static int lb_split(void **out, void *parent, int32_t color, int32_t key, const distc_backend_group_info *info) {
    (void)parent, (void)key;
    __atomic_add_fetch(&loopback_splits, 1, __ATOMIC_SEQ_CST);
    *out = NULL;
    if (color == DISTC_SPLIT_NOCOLOR) return 0;
    return lb_create(out, info, NULL);
}

static int lb_abort(void *g) {
    ((group *)g)->aborted = 1;
    return 0;
}

static int done(void *g, distc_work *work) { return finish(work, ((group *)g)->aborted ? DISTC_EABORTED : 0); }

static void copy(const distc_buffer *dst, const distc_buffer *src) {
    size_t n = (size_t)src->count * distc_dtype_size(src->dtype);
    if (n && dst->data != src->data) memmove(dst->data, src->data, n);
}

/* The reduction of one rank's data: itself, times the factor for PREMUL_SUM (AVG divides by 1). */
static int reduce_one(const distc_buffer *b, int32_t op, const distc_backend_op_args *a) {
    if (op == DISTC_PREMUL_SUM) return distc_backend_scale(b->data, b->count, b->dtype, a->premul_factor);
    return 0;
}

static int lb_allreduce(distc_work *w, void *g, const distc_buffer *bufs, size_t n, int32_t op,
                        const distc_backend_op_args *a) {
    for (size_t i = 0; i < n; ++i) {
        int rc = reduce_one(&bufs[i], op, a);
        if (rc) return rc;
    }
    return done(g, w);
}

static int lb_broadcast(distc_work *w, void *g, const distc_buffer *b, int32_t root, const distc_backend_op_args *a) {
    (void)b, (void)root, (void)a;
    return done(g, w);
}

static int lb_reduce(distc_work *w, void *g, const distc_buffer *b, int32_t root, int32_t op,
                     const distc_backend_op_args *a) {
    (void)root;
    int rc = reduce_one(b, op, a);
    return rc ? rc : done(g, w);
}

static int lb_allgather(distc_work *w, void *g, const distc_buffer *outs, const distc_buffer *in,
                        const distc_backend_op_args *a) {
    (void)a;
    copy(&outs[0], in);
    return done(g, w);
}

static int lb_gather(distc_work *w, void *g, const distc_buffer *outs, const distc_buffer *in, int32_t root,
                     const distc_backend_op_args *a) {
    (void)root, (void)a;
    copy(&outs[0], in);
    return done(g, w);
}

static int lb_scatter(distc_work *w, void *g, const distc_buffer *out, const distc_buffer *ins, int32_t root,
                      const distc_backend_op_args *a) {
    (void)root, (void)a;
    copy(out, &ins[0]);
    return done(g, w);
}

static int lb_reduce_scatter(distc_work *w, void *g, const distc_buffer *out, const distc_buffer *ins, int32_t op,
                             const distc_backend_op_args *a) {
    copy(out, &ins[0]);
    int rc = reduce_one(out, op, a);
    return rc ? rc : done(g, w);
}

static int lb_alltoall(distc_work *w, void *g, const distc_buffer *outs, const distc_buffer *ins,
                       const distc_backend_op_args *a) {
    (void)a;
    copy(&outs[0], &ins[0]);
    return done(g, w);
}

static int lb_barrier(distc_work *w, void *g, const distc_backend_op_args *a) {
    (void)a;
    return done(g, w);
}

/* No send, recv or batch_p2p: a world of one has no peer (and the core answers DISTC_ENOTSUP). */
static const distc_backend_ops g_ops = {
    .version = DISTC_BACKEND_OPS_VERSION,
    .flags = 0,
    .device_types = DISTC_DEVICE_BIT(kDLCPU),
    .create = lb_create,
    .destroy = lb_destroy,
    .abort = lb_abort,
    .split = lb_split,
    .allreduce = lb_allreduce,
    .broadcast = lb_broadcast,
    .reduce = lb_reduce,
    .allgather = lb_allgather,
    .gather = lb_gather,
    .scatter = lb_scatter,
    .reduce_scatter = lb_reduce_scatter,
    .alltoall = lb_alltoall,
    .barrier = lb_barrier,
};

const distc_backend_ops *loopback_backend_ops(void) { return &g_ops; }

int loopback_backend_register(const char *name) {
    static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    static int done_once;
    int rc = 0;
    pthread_mutex_lock(&mu);
    if (!done_once) {
        rc = distc_backend_register(name, &g_ops, NULL);
        done_once = rc == 0;
    }
    pthread_mutex_unlock(&mu);
    return rc;
}

#ifdef LOOPBACK_AS_PLUGIN
DISTC_EXTERN(int) distc_backend_plugin_init(const distc_backend_ops **ops, void **payload, unsigned int core_version);
DISTC_EXTERN(int) distc_backend_plugin_init(const distc_backend_ops **ops, void **payload, unsigned int core_version) {
    if (core_version < DISTC_BACKEND_OPS_VERSION)
        return distc_error_set(DISTC_EBACKEND, "loopback plugin needs a newer libdistc");
    *ops = &g_ops;
    *payload = NULL;
    return 0;
}
#endif

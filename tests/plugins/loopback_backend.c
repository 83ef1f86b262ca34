#include "loopback_backend.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

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

/* -------------------------------------------------------- device memory */
/* Each allocation is its own mapping, closed (PROT_NONE) except while a copy runs. */

typedef struct region {
    uint8_t *base;
    size_t len;
} region;

static pthread_mutex_t g_mem_mu = PTHREAD_MUTEX_INITIALIZER;
static region g_regions[1024];
static int g_nregions;
int loopback_mem_allocs, loopback_mem_frees, loopback_mem_copies, loopback_mem_zeros;
void *loopback_mem_stream;

/* The region holding [p, p + n), or NULL (with the lock held). */
static region *find_region(const void *p, size_t n) {
    const uint8_t *c = p;
    for (int i = 0; i < g_nregions; ++i)
        if (c >= g_regions[i].base && c + n <= g_regions[i].base + g_regions[i].len) return &g_regions[i];
    return NULL;
}

static void set_open(region *r, int open) {
    if (r) mprotect(r->base, r->len, open ? PROT_READ | PROT_WRITE : PROT_NONE);
}

void *loopback_dev_alloc(size_t bytes) {
    size_t page = (size_t)sysconf(_SC_PAGESIZE), len = (bytes + page - 1) / page * page;
    if (len == 0) len = page;
    void *p = mmap(NULL, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return NULL;
    pthread_mutex_lock(&g_mem_mu);
    if (g_nregions == (int)(sizeof g_regions / sizeof g_regions[0])) {
        pthread_mutex_unlock(&g_mem_mu);
        munmap(p, len);
        return NULL;
    }
    g_regions[g_nregions++] = (region){p, len};
    pthread_mutex_unlock(&g_mem_mu);
    return p;
}

void loopback_dev_free(void *p) {
    if (!p) return;
    pthread_mutex_lock(&g_mem_mu);
    for (int i = 0; i < g_nregions; ++i)
        if (g_regions[i].base == p) {
            munmap(p, g_regions[i].len);
            g_regions[i] = g_regions[--g_nregions];
            break;
        }
    pthread_mutex_unlock(&g_mem_mu);
}

/* memmove with the device regions involved opened for it; 0, or -1 when a device range is not ours. */
static int dev_move(void *dst, const void *src, size_t n, int dst_dev, int src_dev) {
    if (!n) return 0;
    pthread_mutex_lock(&g_mem_mu);
    region *rd = dst_dev ? find_region(dst, n) : NULL, *rs = src_dev ? find_region(src, n) : NULL;
    if ((dst_dev && !rd) || (src_dev && !rs)) {
        pthread_mutex_unlock(&g_mem_mu);
        return -1;
    }
    set_open(rd, 1);
    set_open(rs, 1);
    if (src)
        memmove(dst, src, n);
    else
        memset(dst, 0, n);
    set_open(rd, 0);
    set_open(rs, 0);
    pthread_mutex_unlock(&g_mem_mu);
    return 0;
}

void loopback_dev_write(void *dev, const void *host, size_t n) {
    if (dev_move(dev, host, n, 1, 0)) abort();
}

void loopback_dev_read(void *host, const void *dev, size_t n) {
    if (dev_move(host, dev, n, 0, 1)) abort();
}

static int lb_mem_alloc(void **out, void *g, int32_t device_type, size_t bytes) {
    (void)g;
    if (device_type != LOOPBACK_DEVICE)
        return distc_error_set(DISTC_EINVAL, "loopback: mem_alloc for a memory kind it does not have");
    *out = loopback_dev_alloc(bytes);
    if (!*out) return distc_error_set(DISTC_ENOMEM, "loopback: out of device memory");
    __atomic_add_fetch(&loopback_mem_allocs, 1, __ATOMIC_SEQ_CST);
    return 0;
}

static void lb_mem_free(void *g, int32_t device_type, void *p) {
    (void)g, (void)device_type;
    __atomic_add_fetch(&loopback_mem_frees, 1, __ATOMIC_SEQ_CST);
    loopback_dev_free(p);
}

static int lb_mem_copy(void *g, void *dst, const void *src, size_t bytes, void *stream) {
    (void)g;
    __atomic_add_fetch(&loopback_mem_copies, 1, __ATOMIC_SEQ_CST);
    loopback_mem_stream = stream;
    if (dev_move(dst, src, bytes, 1, 1)) return distc_error_set(DISTC_EINVAL, "loopback: mem_copy outside its memory");
    return 0;
}

static int lb_mem_zero(void *g, void *p, size_t bytes, void *stream) {
    (void)g;
    __atomic_add_fetch(&loopback_mem_zeros, 1, __ATOMIC_SEQ_CST);
    loopback_mem_stream = stream;
    if (dev_move(p, NULL, bytes, 1, 0)) return distc_error_set(DISTC_EINVAL, "loopback: mem_zero outside its memory");
    return 0;
}

/* No send, recv or batch_p2p: a world of one has no peer (and the core answers DISTC_ENOTSUP). */
static const distc_backend_ops g_ops = {
    .version = DISTC_BACKEND_OPS_VERSION,
    .flags = 0,
    .device_types = DISTC_DEVICE_BIT(kDLCPU) | DISTC_DEVICE_BIT(LOOPBACK_DEVICE),
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
    .mem_alloc = lb_mem_alloc,
    .mem_free = lb_mem_free,
    .mem_copy = lb_mem_copy,
    .mem_zero = lb_mem_zero,
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

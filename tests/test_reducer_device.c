/*
 * The reducer with gradients in device memory, on the plain-C loopback
 * backend (world size 1), whose "device" is memory the host cannot touch:
 * pages mapped PROT_NONE except inside the backend's mem_* entries. A reducer
 * that read or wrote a device gradient or bucket itself would crash here, so
 * these tests show that buckets live on the device and that every copy, fill
 * and allreduce goes through the backend, on the caller's stream. The same
 * path runs on CUDA memory under nccl (tests/gpu/test_nccl.c, on a GPU).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "loopback_backend.h"
#include "test_util.h"

#define NGRADS 5
static const int64_t sizes[NGRADS] = {3, 1000, 7, 300, 50};
static void *const kStream = (void *)0x5151; /* opaque to the core; the backend records it */

typedef struct dev_grads {
    DLTensor t[NGRADS];
    DLTensor *p[NGRADS];
    int64_t shape[NGRADS];
} dev_grads;

static void make(dev_grads *g) {
    for (int i = 0; i < NGRADS; ++i) {
        g->shape[i] = sizes[i];
        g->t[i] = (DLTensor){loopback_dev_alloc((size_t)sizes[i] * 4),
                             {LOOPBACK_DEVICE, 0},
                             1,
                             {kDLFloat, 32, 1},
                             &g->shape[i],
                             NULL,
                             0};
        assert_non_null(g->t[i].data);
        g->p[i] = &g->t[i];
    }
}

static void release(dev_grads *g) {
    for (int i = 0; i < NGRADS; ++i) loopback_dev_free(g->t[i].data);
}

static float val(int it, int i, int64_t j) { return (float)((it * 7 + i * 3 + j) % 11) - 5.0f; }

static void write_grad(void *dev, int it, int i) {
    float buf[1000];
    for (int64_t j = 0; j < sizes[i]; ++j) buf[j] = val(it, i, j);
    loopback_dev_write(dev, buf, (size_t)sizes[i] * 4);
}

/* Gradient i after iteration `it` on the device: its values (world size 1 averages to itself), or zeros. */
static void check_grad(const void *dev, int it, int i, int zero) {
    float buf[1000];
    loopback_dev_read(buf, dev, (size_t)sizes[i] * 4);
    for (int64_t j = 0; j < sizes[i]; ++j)
        if (buf[j] != (zero ? 0.0f : val(it, i, j)))
            fail_msg("iteration %d gradient %d element %lld is %g, expected %g", it, i, (long long)j, buf[j],
                     zero ? 0.0 : val(it, i, j));
}

static distc_pg *loopback_group(distc_store **store, const char *backend) {
    ASSERT_OK(loopback_backend_register("loopback"));
    ASSERT_OK(distc_store_new_hash(store));
    distc_pg_options po;
    ASSERT_OK(distc_pg_options_init(&po, DISTC_PG_OPTIONS_VERSION));
    po.backend = backend;
    distc_pg *pg = NULL;
    ASSERT_OK(distc_pg_new(&pg, *store, 0, 1, &po));
    return pg;
}

/* What every test starts from: a loopback group and device gradients. */
typedef struct fixture {
    distc_store *store;
    distc_pg *pg;
    dev_grads g;
} fixture;

static void open_fixture(fixture *f) {
    f->pg = loopback_group(&f->store, "loopback");
    make(&f->g);
}

static void close_fixture(fixture *f) {
    release(&f->g);
    distc_pg_free(f->pg);
    distc_store_free(f->store);
}

static void counters_reset(void) {
    loopback_mem_copies = loopback_mem_zeros = 0;
    loopback_mem_stream = NULL;
}

/* Buckets by size (several, rebuilt at the second iteration), an unused gradient, three iterations. */
static void test_device_buckets(void **state) {
    (void)state;
    fixture f;
    open_fixture(&f);
    int allocs0 = loopback_mem_allocs, frees0 = loopback_mem_frees;
    distc_reducer_options o = DISTC_REDUCER_OPTIONS_INIT;
    o.first_bucket_bytes = 1024;
    o.bucket_cap_bytes = 2048;
    o.stream = kStream;
    distc_reducer *r = NULL;
    ASSERT_OK(distc_reducer_new(&r, f.pg, f.g.p, NGRADS, &o));
    size_t nb = 0;
    ASSERT_OK(distc_reducer_num_buckets(&nb, r));
    assert_true(nb >= 2);
    assert_int_equal(loopback_mem_allocs - allocs0, (int)nb); /* one device allocation per bucket */
    for (int it = 0; it < 3; ++it) {
        for (int i = 0; i < NGRADS; ++i) write_grad(f.g.t[i].data, it, i);
        counters_reset();
        int32_t unused[1] = {2};
        ASSERT_OK(distc_reducer_prepare_for_backward(r, unused, it == 2 ? 1 : 0));
        for (int i = NGRADS - 1; i >= 0; --i)
            if (!(it == 2 && i == 2)) ASSERT_OK(distc_reducer_mark_ready(r, i));
        ASSERT_OK(distc_reducer_finalize(r));
        int used = it == 2 ? NGRADS - 1 : NGRADS;
        assert_int_equal(loopback_mem_copies, used + NGRADS); /* the used into their buckets, all back */
        assert_int_equal(loopback_mem_zeros, NGRADS - used);
        assert_ptr_equal(loopback_mem_stream, kStream);
        for (int i = 0; i < NGRADS; ++i) check_grad(f.g.t[i].data, it, i, it == 2 && i == 2);
    }
    distc_reducer_free(r);
    /* Every bucket, the rebuilt ones and those they replaced, went back to the backend. */
    assert_int_equal(loopback_mem_allocs - allocs0, loopback_mem_frees - frees0);
    close_fixture(&f);
}

/* gradient_as_bucket_view: the views are device memory, written and read in place; nothing is copied. */
static void test_device_views(void **state) {
    (void)state;
    fixture f;
    open_fixture(&f);
    distc_reducer_options o = DISTC_REDUCER_OPTIONS_INIT;
    o.gradient_as_bucket_view = 1;
    o.find_unused_parameters = 1;
    o.stream = kStream;
    distc_reducer *r = NULL;
    ASSERT_OK(distc_reducer_new(&r, f.pg, f.g.p, NGRADS, &o));
    void *view[NGRADS];
    for (int i = 0; i < NGRADS; ++i) ASSERT_OK(distc_reducer_grad_view(&view[i], r, i));
    for (int it = 0; it < 2; ++it) {
        counters_reset();
        ASSERT_OK(distc_reducer_prepare_for_backward(r, NULL, 0));
        for (int i = 0; i < NGRADS; ++i) {
            if (it == 1 && i == 4) continue; /* found unused at finalize: reduced as zeros */
            write_grad(view[i], it, i);
            ASSERT_OK(distc_reducer_mark_ready(r, i));
        }
        ASSERT_OK(distc_reducer_finalize(r));
        assert_int_equal(loopback_mem_copies, 0);
        assert_int_equal(loopback_mem_zeros, it == 1 ? 1 : 0);
        for (int i = 0; i < NGRADS; ++i) check_grad(view[i], it, i, it == 1 && i == 4);
    }
    /* Which gradients some rank used: known on the host only. */
    int32_t used = -1;
    ASSERT_ERR(distc_reducer_grad_used(&used, r, 4), DISTC_ENOTSUP, "host gradients only");
    distc_reducer_free(r);
    close_fixture(&f);
}

/* A C hook sees the bucket as a device DLTensor and reduces it with a collective on the device. */
static int device_hook(distc_work **out, distc_pg *pg, DLTensor *bucket, void *payload) {
    int *calls = payload;
    if (bucket->device.device_type != LOOPBACK_DEVICE) return distc_error_set(DISTC_EINVAL, "not a device bucket");
    ++*calls;
    return distc_allreduce(out, pg, bucket, DISTC_AVG, NULL);
}

static void test_device_hook(void **state) {
    (void)state;
    fixture f;
    open_fixture(&f);
    distc_reducer *r = NULL;
    ASSERT_OK(distc_reducer_new(&r, f.pg, f.g.p, NGRADS, NULL));
    int calls = 0;
    ASSERT_OK(distc_reducer_register_comm_hook(r, device_hook, &calls, 0));
    for (int i = 0; i < NGRADS; ++i) write_grad(f.g.t[i].data, 0, i);
    ASSERT_OK(distc_reducer_prepare_for_backward(r, NULL, 0));
    for (int i = 0; i < NGRADS; ++i) ASSERT_OK(distc_reducer_mark_ready(r, i));
    ASSERT_OK(distc_reducer_finalize(r));
    size_t nb = 0;
    ASSERT_OK(distc_reducer_num_buckets(&nb, r));
    assert_int_equal(calls, (int)nb);
    for (int i = 0; i < NGRADS; ++i) check_grad(f.g.t[i].data, 0, i, 0);
    /* The built-in compression narrows on the host: refused for device buckets. */
    ASSERT_ERR(distc_reducer_register_comm_hook(r, NULL, NULL, DISTC_HOOK_FP16_COMPRESS), DISTC_ENOTSUP,
               "device memory");
    ASSERT_ERR(distc_reducer_register_powersgd(r, NULL), DISTC_ENOTSUP, "device memory");
    ASSERT_ERR(distc_reducer_register_comm_hook(r, NULL, NULL, DISTC_HOOK_BF16_COMPRESS), DISTC_ENOTSUP,
               "device memory");
    distc_reducer_free(r);
    close_fixture(&f);
}

/* A device reducer on a group of `backend`, which keeps no device memory for the core. */
static void expect_no_device_memory(const char *backend, dev_grads *g) {
    distc_store *store;
    distc_pg *pg = loopback_group(&store, backend);
    distc_reducer *r = NULL;
    ASSERT_ERR(distc_reducer_new(&r, pg, g->p, NGRADS, NULL), DISTC_ENOTSUP, "keeps no device memory");
    distc_pg_free(pg);
    distc_store_free(store);
}

static void test_device_errors(void **state) {
    (void)state;
    fixture f;
    open_fixture(&f);
    distc_reducer *r = NULL;
    /* Sparse gradients are reduced on the host. */
    int32_t sparse[NGRADS] = {0, 1, 0, 0, 0};
    distc_reducer_options o = DISTC_REDUCER_OPTIONS_INIT;
    o.expect_sparse = sparse;
    ASSERT_ERR(distc_reducer_new(&r, f.pg, f.g.p, NGRADS, &o), DISTC_ENOTSUP, "sparse and in device memory");
    /* One reducer, one kind of memory. */
    float host[3] = {0};
    int64_t hs = 3;
    DLTensor h = {host, {kDLCPU, 0}, 1, {kDLFloat, 32, 1}, &hs, NULL, 0};
    DLTensor *mixed[2] = {f.g.p[0], &h};
    ASSERT_ERR(distc_reducer_new(&r, f.pg, mixed, 2, NULL), DISTC_EINVAL, "one reducer takes one device");

    /* A backend that takes the memory kind but keeps no device memory for the core. */
    distc_backend_ops nomem = *loopback_backend_ops();
    nomem.mem_alloc = NULL;
    nomem.mem_free = NULL;
    nomem.mem_copy = NULL;
    nomem.mem_zero = NULL;
    ASSERT_OK(distc_backend_register("loopback-nomem", &nomem, NULL));
    expect_no_device_memory("loopback-nomem", &f.g);

    /* A version-1 vtable ends before mem_*: whatever follows it is not read. */
    distc_backend_ops v1 = nomem;
    v1.version = 1;
    v1.mem_alloc = (__typeof__(v1.mem_alloc))(uintptr_t)0xdead; /* never called */
    ASSERT_OK(distc_backend_register("loopback-v1", &v1, NULL));
    expect_no_device_memory("loopback-v1", &f.g);

    /* Some mem_* entries without the others. */
    distc_backend_ops half = *loopback_backend_ops();
    half.mem_zero = NULL;
    ASSERT_ERR(distc_backend_register("loopback-half", &half, NULL), DISTC_EINVAL, "not all four");
    close_fixture(&f);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_device_buckets),
        cmocka_unit_test(test_device_views),
        cmocka_unit_test(test_device_hook),
        cmocka_unit_test(test_device_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

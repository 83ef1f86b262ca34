/* distc-perf's buffers: host memory, or CUDA device memory through a
 * libcudart found with dlopen (so the tool needs no CUDA to build or run). */
#define _GNU_SOURCE
#include "perf_memory.h"

#include <distc.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int g_cuda = -1; /* the CUDA device, or -1: host memory */
int g_shared = 0;
static struct {
    int (*malloc_)(void **, size_t);
    int (*free_)(void *);
    int (*memcpy_)(void *, const void *, size_t, int);
    int (*sync)(void);
    int (*set_device)(int);
    int (*count)(int *);
} cu;
enum { H2D = 1, D2H = 2, D2D = 3 };

int load_cuda(void) {
    const char *names[] = {"libcudart.so.13", "libcudart.so.12", "libcudart.so"};
    void *h = NULL;
    for (size_t i = 0; i < 3 && !h; ++i) h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    if (!h) return fprintf(stderr, "distc-perf: --device cuda needs libcudart: %s\n", dlerror()), -1;
    *(void **)&cu.malloc_ = dlsym(h, "cudaMalloc");
    *(void **)&cu.free_ = dlsym(h, "cudaFree");
    *(void **)&cu.memcpy_ = dlsym(h, "cudaMemcpy");
    *(void **)&cu.sync = dlsym(h, "cudaDeviceSynchronize");
    *(void **)&cu.set_device = dlsym(h, "cudaSetDevice");
    *(void **)&cu.count = dlsym(h, "cudaGetDeviceCount");
    int n = 0;
    if (!cu.malloc_ || !cu.free_ || !cu.memcpy_ || !cu.sync || !cu.set_device || !cu.count || cu.count(&n) || n < 1)
        return fprintf(stderr, "distc-perf: no CUDA device is usable\n"), -1;
    const char *lr = getenv("LOCAL_RANK");
    g_cuda = (lr ? atoi(lr) : 0) % n;
    return cu.set_device(g_cuda) ? -1 : 0;
}

void *mem_alloc(size_t n) {
    void *p = NULL;
    if (g_shared) return distc_mem_alloc(&p, n ? n : 1) == 0 ? p : NULL; /* zeroed, as calloc's */
    if (g_cuda < 0) return calloc(1, n ? n : 1);
    return cu.malloc_(&p, n ? n : 1) ? NULL : p;
}
void mem_free(void *p) {
    if (g_shared)
        distc_mem_free(p);
    else if (g_cuda < 0)
        free(p);
    else if (p)
        cu.free_(p);
}
/* Copies between a buffer of the benchmark's memory and the host (or within it). */
void mem_put(void *dst, const void *host, size_t n) {
    if (g_cuda < 0) {
        if (dst != host) memcpy(dst, host, n);
    } else if (n)
        cu.memcpy_(dst, host, n, H2D);
}
void mem_get(void *host, const void *src, size_t n) {
    if (g_cuda < 0) {
        if (host != src) memcpy(host, src, n);
    } else if (n)
        cu.memcpy_(host, src, n, D2H);
}
void mem_copy(void *dst, const void *src, size_t n) {
    if (g_cuda < 0)
        memmove(dst, src, n);
    else if (n)
        cu.memcpy_(dst, src, n, D2D);
}
/* The calls so far have finished (device backends return once they are enqueued). */
void mem_sync(void) {
    if (g_cuda >= 0) cu.sync();
}

/* distc-perf's buffers in host or CUDA memory (perf_memory.c). */
#ifndef DISTC_PERF_MEMORY_H
#define DISTC_PERF_MEMORY_H

#include <stddef.h>

extern int g_cuda;   /* the CUDA device, or -1: host memory */
extern int g_shared; /* host memory from distc_mem_alloc (--device shared) */
/* Loads libcudart and picks the device (LOCAL_RANK modulo the count); 0 or -1 with a message. */
int load_cuda(void);
void *mem_alloc(size_t n);
void mem_free(void *p);
/* Copies between a buffer of the benchmark's memory and the host (or within it). */
void mem_put(void *dst, const void *host, size_t n);
void mem_get(void *host, const void *src, size_t n);
void mem_copy(void *dst, const void *src, size_t n);
/* The calls so far have finished (device backends return once they are enqueued). */
void mem_sync(void);

#endif

/*
 * A backend written in plain C against distc/sys/backend.h alone: world size
 * 1, host memory and a "device" of its own (below). Operations run at once on the calling thread; their work
 * is completed from the backend's own thread, as an engine's progress thread
 * would. The generic process-group tests run on it (DT_BACKEND=loopback), and
 * it is built as a plugin library too (libdistc-looptest.so).
 */
#ifndef DISTC_LOOPBACK_BACKEND_H
#define DISTC_LOOPBACK_BACKEND_H

#include <distc.h>

/* Calls of its split entry so far (the core splits through the engine when it can). */
extern int loopback_splits;

/* The vtable (static storage). */
const distc_backend_ops *loopback_backend_ops(void);

/* Registers it as `name` once per process; later calls are no-ops. */
int loopback_backend_register(const char *name);

/*
 * Its device memory (DLPack kDLExtDev): pages the host cannot touch
 * (PROT_NONE) except inside the backend's mem_* entries and these helpers,
 * which open them for the copy. Code that reads or writes it directly
 * crashes: what the reducer does with device gradients goes through the
 * backend or fails loudly. Counters and the last stream seen are for tests.
 */
#define LOOPBACK_DEVICE 12 /* kDLExtDev */
void *loopback_dev_alloc(size_t bytes);
void loopback_dev_free(void *p);
void loopback_dev_write(void *dev, const void *host, size_t n);
void loopback_dev_read(void *host, const void *dev, size_t n);
extern int loopback_mem_allocs, loopback_mem_frees, loopback_mem_copies, loopback_mem_zeros;
extern void *loopback_mem_stream; /* the stream of the last mem_copy / mem_zero */

#endif

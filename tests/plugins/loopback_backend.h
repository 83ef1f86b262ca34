/*
 * A backend written in plain C against distc/sys/backend.h alone: world size
 * 1, host memory. Operations run at once on the calling thread; their work
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

#endif

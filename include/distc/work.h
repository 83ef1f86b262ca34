/**
 * @file distc/work.h
 * @brief Handles of asynchronous operations.
 *
 * Every collective and point-to-point call takes a `distc_work **out`. With
 * `out == NULL` the call blocks until the operation is done and returns its
 * status. Otherwise it returns at once (after argument checks) with a handle:
 * test or wait on it, read its error, attach a callback.
 *
 * Buffers handed to an asynchronous operation must stay valid until it
 * completes. distc_work_free() before completion detaches: the operation
 * still completes or fails, it is not cancelled (use distc_pg_abort for that).
 *
 * Thread-safety: a work handle may be used from several threads at once.
 */
#ifndef DISTC_WORK_H
#define DISTC_WORK_H

#include "common.h"

DISTC_BEGIN_DECL

/** An opaque handle of one asynchronous operation. */
typedef struct distc_work distc_work;

/** A completion callback: called once, with the payload given to distc_work_on_complete(). */
typedef void (*distc_work_callback)(distc_work *work, void *payload);

/**
 * Polls the operation: 0 when it completed successfully, DISTC_INPROGRESS
 * while it runs, or the operation's negative error code.
 * @return 0, DISTC_INPROGRESS, or the operation's error code (DISTC_EINVAL for a
 * NULL or invalid handle).
 */
DISTC_EXTERN(int) distc_work_test(distc_work *work);

/**
 * Waits for the operation: its status once complete (0 or its error code,
 * with distc_error_last() set to its message). If `timeout_ms` passes first
 * (DISTC_TIMEOUT_DEFAULT: no limit beyond the operation's own timeout) it
 * returns DISTC_ETIMEOUT and the operation goes on; distc_work_test() tells
 * the two cases apart.
 * @return 0 when the operation succeeded, its error code when it failed, or
 * DISTC_ETIMEOUT when `timeout_ms` passed first.
 */
DISTC_EXTERN(int) distc_work_wait(distc_work *work, int64_t timeout_ms);

/**
 * The operation's status (as distc_work_test) and, in `*message` (may be
 * NULL), its error message: "" while running or on success; valid as long
 * as the handle.
 * @return 0, DISTC_INPROGRESS, or the operation's error code.
 */
DISTC_EXTERN(int) distc_work_error(const distc_work *work, const char **message);

/**
 * The rank the data came from: for a receive from DISTC_ANY_SOURCE once it
 * completed; the peer for other point-to-point operations; -1 for collectives.
 */
DISTC_EXTERN(int) distc_work_source_rank(int32_t *out, const distc_work *work);

/** How long the operation ran, in nanoseconds (0 until it completes). */
DISTC_EXTERN(int) distc_work_duration_ns(int64_t *out, const distc_work *work);

/** The group's sequence number of this collective (1 for its first); 0 for point-to-point. */
DISTC_EXTERN(int) distc_work_seq(uint64_t *out, const distc_work *work);

/**
 * Calls `cb(w, payload)` once when the operation completes: on the group's
 * worker thread, or at once on the calling thread if it has already
 * completed. `w` is a handle valid only during the callback (the caller's
 * own handle may have been freed meanwhile): query it, do not free it (the group
 * may be freed: it is then torn down once the callback has returned). One
 * callback per operation; a second call gives DISTC_ESTATE. The
 * callback should be short: the group's next queued operation waits for it.
 */
DISTC_EXTERN(int) distc_work_on_complete(distc_work *work, distc_work_callback cb, void *payload);

/**
 * Makes `stream` (a cudaStream_t for the nccl backend) wait for the
 * operation without blocking the host. For work of a host backend (gloo,
 * mpi) it waits on the host, as distc_work_wait(work, DISTC_TIMEOUT_DEFAULT),
 * since no stream can wait on it. Returns the operation's error if it has
 * already failed.
 */
DISTC_EXTERN(int) distc_work_wait_stream(distc_work *work, void *stream);

/** Releases the handle; before completion this detaches (see above). NULL is a no-op. */
DISTC_EXTERN(void) distc_work_free(distc_work *work);

DISTC_END_DECL

#endif /* DISTC_WORK_H */

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
 * A blocking collective of the callback's group, or a wait for one it
 * issued asynchronously, would wait for the callback itself: both give
 * DISTC_ESTATE there (issue it asynchronously and leave the callback).
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

/**
 * @brief A second handle of the same operation, freed on its own.
 *
 * `*out` refers to the same operation as `work`: either may be freed first.
 * This is how a continuation hands on the work it was given
 * (distc_work_then), and how a binding shares a handle.
 */
DISTC_EXTERN(int) distc_work_ref(distc_work **out, distc_work *work);

/**
 * @brief A work the program completes itself (a promise).
 *
 * Makes a work no group runs: it completes when distc_work_complete() is
 * called on it. Meanwhile it is tested, waited on, given a callback or
 * continued (distc_work_then) like a group's work, and a communication hook
 * may return it (distc_reducer_register_bucket_hook). Its seq is 0 and its
 * source rank -1. Freeing every handle of it (this one and those of
 * distc_work_ref) before completing it fails it with DISTC_EABORTED, since
 * nothing could complete it any more: its callback and continuations run then.
 */
DISTC_EXTERN(int) distc_work_new(distc_work **out);

/**
 * @brief Completes a work made by distc_work_new().
 *
 * `code` is 0 (success) or a negative distc error code, `message` (may be
 * NULL) the failure's text. Wakes its waiters and runs its callback and
 * continuations' scheduling on this thread. DISTC_ESTATE when it was
 * completed before; DISTC_EINVAL for a group's work (only its backend
 * completes that) or a code that is neither 0 nor an error.
 */
DISTC_EXTERN(int) distc_work_complete(distc_work *work, int code, const char *message);

/**
 * A continuation (distc_work_then): `done` is the work it continues,
 * complete, successfully or not (distc_work_test tells; returning its code
 * passes a failure on); it is valid only during the call. The continuation
 * returns 0 and either leaves `*next` NULL (the continued work then
 * succeeds at once) or sets it to a work it started or made (the continued
 * work then completes with that one's outcome, as a chained future), handing
 * the handle over (use distc_work_ref to hand on `done` itself). A negative
 * return fails the continued work with that code and distc_error_last().
 */
typedef int (*distc_work_continuation)(distc_work **next, distc_work *done, void *payload);

/**
 * @brief Chains a continuation after an operation (a future's then).
 *
 * When `work` completes (at once if it has), `fn(&next, done, payload)` runs
 * on one of distc's continuation threads, never on a group's worker: it may
 * start collectives, wait for them and block. `*out` is a new work that
 * completes when the continuation is done (see distc_work_continuation).
 * `fn` runs exactly once, also when `work` failed, so it may release
 * `payload`. Any number of continuations may follow one work, and they may
 * be chained (a hook's allreduce, then an allgather, then a division).
 * Continuations may run at the same time as each other, in any order: one
 * that blocks never holds up the rest.
 */
DISTC_EXTERN(int) distc_work_then(distc_work **out, distc_work *work, distc_work_continuation fn, void *payload);

/** Releases the handle; before completion this detaches (see above). NULL is a no-op. */
DISTC_EXTERN(void) distc_work_free(distc_work *work);

DISTC_END_DECL

#endif /* DISTC_WORK_H */

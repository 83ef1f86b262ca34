/**
 * @file distc/pg.h
 * @brief Process groups and their collectives (torch.distributed's semantics).
 *
 * A process group is `size` ranks that rendezvous through a store and then
 * run collectives on DLPack tensors over a backend ("gloo" on CPU, built in).
 * Buffers are `DLTensor`s (<dlpack/dlpack.h>), borrowed for the call and, for
 * asynchronous work, until the work completes. They must be contiguous
 * (`strides` NULL or compact) and in CPU memory for gloo.
 *
 * Dtypes: bool, int8, uint8, int16, int32, int64, float16, bfloat16,
 * float32, float64, complex64, complex128.
 *
 * Every call takes `distc_work **out` first: NULL blocks until done (on the
 * calling thread, no hand-off); otherwise the call queues the operation on
 * the group's worker thread and gives a handle (distc/work.h).
 *
 * Thread-safety: collectives on one group must be issued in the same order
 * on every rank; issuing them from several threads at once is allowed but
 * then that order is the caller's to guarantee. Query functions are safe
 * from any thread. distc_pg_abort may be called from any thread at any time.
 */
#ifndef DISTC_PG_H
#define DISTC_PG_H

#include <dlpack/dlpack.h>

#include "common.h"
#include "store.h"
#include "work.h"

DISTC_BEGIN_DECL

/** An opaque process group handle. It holds a reference to its store. */
typedef struct distc_pg distc_pg;

/** Reduction operators. Values are part of the ABI. */
typedef enum distc_reduce_op {
    DISTC_SUM = 0,
    DISTC_AVG = 1,        /**< sum, then one division by the group size */
    DISTC_PRODUCT = 2,
    DISTC_MIN = 3,
    DISTC_MAX = 4,
    DISTC_BAND = 5,       /**< integer and bool tensors only */
    DISTC_BOR = 6,
    DISTC_BXOR = 7,
    DISTC_PREMUL_SUM = 8  /**< each input times distc_op_options.premul_factor, then summed */
} distc_reduce_op;

/** c10d's default collective timeout: 30 minutes. */
#define DISTC_PG_DEFAULT_TIMEOUT_MS 1800000

#define DISTC_PG_OPTIONS_VERSION 1

/** Options of a new group. */
typedef struct distc_pg_options {
    unsigned int version;    /**< DISTC_PG_OPTIONS_VERSION */
    const char *backend;     /**< NULL: "gloo" */
    int64_t timeout_ms;      /**< default timeout of every operation; -1: 30 min */
    const char *group_name;  /**< keys of this group live under "<name>/" in the store;
                                  NULL: "default_pg" */
} distc_pg_options;

#define DISTC_PG_OPTIONS_INIT { DISTC_PG_OPTIONS_VERSION, NULL, -1, NULL }

/** Fills `opts` with the defaults above. */
DISTC_EXTERN(int) distc_pg_options_init(distc_pg_options *opts, unsigned int version);

#define DISTC_OP_OPTIONS_VERSION 1

/** Per-operation options; NULL means defaults. */
typedef struct distc_op_options {
    unsigned int version;   /**< DISTC_OP_OPTIONS_VERSION */
    int64_t timeout_ms;     /**< -1: the group's timeout */
    double premul_factor;   /**< the factor of DISTC_PREMUL_SUM */
} distc_op_options;

#define DISTC_OP_OPTIONS_INIT { DISTC_OP_OPTIONS_VERSION, -1, 1.0 }

/** Fills `opts` with the defaults above. */
DISTC_EXTERN(int) distc_op_options_init(distc_op_options *opts, unsigned int version);

/* ------------------------------------------------------------------------ */
/* Groups                                                                    */

/**
 * Creates this rank's member of a group of `size` ranks that meet in `store`
 * (every rank passes the same store contents, group name and size). Returns
 * when all ranks have connected, or DISTC_ETIMEOUT naming the ranks missing.
 */
DISTC_EXTERN(int) distc_pg_new(distc_pg **out, distc_store *store, int32_t rank, int32_t size,
                               const distc_pg_options *opts);

/**
 * Rendezvous by URL (see distc_rendezvous: env://, tcp://, file://) and
 * create the group in one call. `rv` may be NULL.
 */
DISTC_EXTERN(int) distc_pg_new_from_url(distc_pg **out, const char *url, const distc_rendezvous_options *rv,
                                        const distc_pg_options *opts);

/** This process's rank in the group. */
DISTC_EXTERN(int) distc_pg_rank(int32_t *out, const distc_pg *pg);
/** The number of ranks in the group. */
DISTC_EXTERN(int) distc_pg_size(int32_t *out, const distc_pg *pg);
/** The backend's name ("gloo"); valid as long as the handle. */
DISTC_EXTERN(int) distc_pg_backend(const char **out, const distc_pg *pg);
/** The group's name; its keys live under "<name>/" in the store. Valid as long as the handle. */
DISTC_EXTERN(int) distc_pg_name(const char **out, const distc_pg *pg);
/** The group's default timeout in ms. */
DISTC_EXTERN(int) distc_pg_timeout(int64_t *out, const distc_pg *pg);

/**
 * Aborts the group on this rank: operations in flight and queued fail with
 * DISTC_EABORTED, every waiter wakes, later calls fail with DISTC_EABORTED.
 * Never hangs. Peers see their operations with this rank fail.
 */
DISTC_EXTERN(int) distc_pg_abort(distc_pg *pg);

/**
 * Releases the handle. Queued work is aborted; work handles stay valid (and
 * report DISTC_EABORTED if their operation could not run). NULL is a no-op.
 */
DISTC_EXTERN(void) distc_pg_free(distc_pg *pg);

/* ------------------------------------------------------------------------ */
/* Collectives                                                               */

/** Reduces `tensor` in place across the group; every rank gets the result. */
DISTC_EXTERN(int) distc_allreduce(distc_work **out, distc_pg *pg, DLTensor *tensor, distc_reduce_op op,
                                  const distc_op_options *opts);

/** Allreduce of `n` tensors of one dtype as a single operation. */
DISTC_EXTERN(int) distc_allreduce_coalesced(distc_work **out, distc_pg *pg, DLTensor *const *tensors, size_t n,
                                            distc_reduce_op op, const distc_op_options *opts);

/** Copies `root`'s tensor into every rank's `tensor`. */
DISTC_EXTERN(int) distc_broadcast(distc_work **out, distc_pg *pg, DLTensor *tensor, int32_t root,
                                  const distc_op_options *opts);

/** Reduces into `root`'s `tensor` (in place); other ranks' tensors are left as they were. */
DISTC_EXTERN(int) distc_reduce(distc_work **out, distc_pg *pg, DLTensor *tensor, int32_t root, distc_reduce_op op,
                               const distc_op_options *opts);

/** Gathers every rank's `input` into `outputs[0..size)` on every rank. */
DISTC_EXTERN(int) distc_allgather(distc_work **out, distc_pg *pg, DLTensor *const *outputs, const DLTensor *input,
                                  const distc_op_options *opts);

/** Gathers every rank's `input` into one `output` of size x its elements, in rank order. */
DISTC_EXTERN(int) distc_allgather_into_tensor(distc_work **out, distc_pg *pg, DLTensor *output,
                                              const DLTensor *input, const distc_op_options *opts);

/**
 * Gathers every rank's `input` into `outputs[0..size)` on `root`; `outputs`
 * is ignored (may be NULL) on other ranks.
 */
DISTC_EXTERN(int) distc_gather(distc_work **out, distc_pg *pg, DLTensor *const *outputs, const DLTensor *input,
                               int32_t root, const distc_op_options *opts);

/**
 * Sends `inputs[r]` from `root` to rank r's `output`; `inputs` is ignored
 * (may be NULL) on other ranks.
 */
DISTC_EXTERN(int) distc_scatter(distc_work **out, distc_pg *pg, DLTensor *output, const DLTensor *const *inputs,
                                int32_t root, const distc_op_options *opts);

/** Reduces `inputs[0..size)` across ranks; rank r's `output` gets the reduction of everyone's inputs[r]. */
DISTC_EXTERN(int) distc_reduce_scatter(distc_work **out, distc_pg *pg, DLTensor *output,
                                       const DLTensor *const *inputs, distc_reduce_op op,
                                       const distc_op_options *opts);

/** reduce_scatter from one flat `input` of size x `output`'s elements. */
DISTC_EXTERN(int) distc_reduce_scatter_tensor(distc_work **out, distc_pg *pg, DLTensor *output,
                                              const DLTensor *input, distc_reduce_op op,
                                              const distc_op_options *opts);

/** Rank r sends `inputs[j]` to rank j, which receives it in its `outputs[r]`. */
DISTC_EXTERN(int) distc_alltoall(distc_work **out, distc_pg *pg, DLTensor *const *outputs,
                                 const DLTensor *const *inputs, const distc_op_options *opts);

/**
 * All-to-all on single tensors split along their first dimension.
 * `input_splits[j]` rows go to rank j; `output_splits[j]` rows come from
 * rank j. Either may be NULL: even splits (the first dimension must then
 * divide by the group size). Splits must add up to the first dimension.
 */
DISTC_EXTERN(int) distc_alltoall_single(distc_work **out, distc_pg *pg, DLTensor *output, const DLTensor *input,
                                        const int64_t *output_splits, const int64_t *input_splits,
                                        const distc_op_options *opts);

/** Returns when every rank has entered the barrier. */
DISTC_EXTERN(int) distc_barrier(distc_work **out, distc_pg *pg, const distc_op_options *opts);

/** Receive from whichever rank sends first (distc_work_source_rank tells which). */
#define DISTC_ANY_SOURCE (-1)

/** Sends `tensor` to rank `dst`, matched with its recv of the same `tag`. */
DISTC_EXTERN(int) distc_send(distc_work **out, distc_pg *pg, const DLTensor *tensor, int32_t dst, int32_t tag,
                             const distc_op_options *opts);

/** Receives into `tensor` from rank `src` (or DISTC_ANY_SOURCE) with `tag`. */
DISTC_EXTERN(int) distc_recv(distc_work **out, distc_pg *pg, DLTensor *tensor, int32_t src, int32_t tag,
                             const distc_op_options *opts);

DISTC_END_DECL

#endif /* DISTC_PG_H */

/**
 * @file distc/reducer.h
 * @brief DDP gradient bucketing (c10d's Reducer) for any training loop.
 *
 * The caller's own autograd (a hand-written backward pass, Zygote, PyTorch
 * hooks ...) says when each gradient is ready; the reducer copies it into its
 * bucket and starts an asynchronous allreduce of a bucket as soon as the
 * bucket is full and every bucket before it has started, so communication
 * overlaps the rest of the backward pass. finalize() waits, and writes the
 * averaged gradients back (the division by the group size happens once per
 * bucket, as in c10d).
 *
 *   distc_reducer_new(&r, pg, grads, n, NULL);
 *   for each step:
 *       distc_reducer_prepare_for_backward(r, NULL, 0);
 *       ... backward: distc_reducer_mark_ready(r, i) as gradient i is written ...
 *       distc_reducer_finalize(r);   // grads now hold the average over ranks
 *
 * Gradients are DLTensors, borrowed for the reducer's life: it
 * reads one when it is marked ready and writes it in finalize. Statistics of
 * the last iteration (ready times, bucket launch and reduction times) show
 * the overlap. c10d's no_sync needs no call: skip prepare, mark_ready and
 * finalize in the accumulating iterations and keep adding into the
 * gradients; the next reduced iteration averages the sums. Communication
 * hooks replace the bucket allreduce (compression, ...). Buckets made by size
 * are rebuilt once, in the order gradients arrived. Sparse gradients (an
 * embedding's rows, as COO indices and values) get buckets of their own and
 * are reduced by row (distc_reducer_mark_ready_sparse).
 *
 * Device memory: gradients on a device (CUDA memory under the nccl backend)
 * get buckets on that device. The reducer never touches device memory
 * itself: the group's backend allocates, copies and zeroes it (the mem_*
 * entries of distc/sys/backend.h), ordered on opts->stream, where the bucket
 * allreduces run too. All gradients of one reducer are on one device. Not on
 * a device: sparse gradients and the built-in float16/bfloat16 compression
 * (both work on the host; DISTC_ENOTSUP), while a C hook receives the bucket
 * as a device DLTensor.
 *
 * Thread-safety: one iteration at a time; mark_ready may be called from
 * several threads of one backward pass.
 */
#ifndef DISTC_REDUCER_H
#define DISTC_REDUCER_H

#include <dlpack/dlpack.h>

#include "common.h"
#include "pg.h"

DISTC_BEGIN_DECL

/** c10d's default bucket size cap: 25 MiB. */
#define DISTC_BUCKET_CAP_BYTES (25u * 1024u * 1024u)
/** c10d's default size of the first bucket: 1 MiB. */
#define DISTC_FIRST_BUCKET_BYTES (1024u * 1024u)

/**
 * @brief Groups tensors into buckets by size (c10d's compute_bucket_assignment_by_size).
 *
 * c10d's compute_bucket_assignment_by_size. Walks the `n` tensors in order
 * (only their dtype, device and shape are read) and groups them into buckets
 * of one dtype and device each: a bucket closes as soon as its size in bytes
 * reaches the current limit of its (dtype, device), and each (dtype, device)
 * then moves on to the next of the `n_limits` limits (the last one stays).
 * A tensor with `expect_sparse[i]` nonzero gets a bucket of its own
 * (`expect_sparse` may be NULL). Buckets are numbered by the smallest tensor
 * index they hold; within a bucket tensors keep their order.
 *
 * Writes the bucket of tensor i to `bucket_of[i]` and the number of buckets
 * to `*n_buckets`. Pass limits {DISTC_FIRST_BUCKET_BYTES,
 * DISTC_BUCKET_CAP_BYTES} for c10d's defaults. DISTC_EINVAL for n == 0, a
 * NULL or malformed tensor, no limits, or a zero limit.
 */
DISTC_EXTERN(int) distc_compute_bucket_assignment_by_size(int32_t *bucket_of, size_t *n_buckets,
                                                          const DLTensor *const *tensors, size_t n,
                                                          const uint64_t *limits, size_t n_limits,
                                                          const int32_t *expect_sparse);

/** An opaque reducer; it holds a reference to its group. */
typedef struct distc_reducer distc_reducer;

/** Version 2 added `expect_sparse`, version 3 `stream`. Structs of older versions are still accepted. */
#define DISTC_REDUCER_OPTIONS_VERSION 4

/** Options of a reducer; NULL means defaults. */
typedef struct distc_reducer_options {
    unsigned int version;            /**< DISTC_REDUCER_OPTIONS_VERSION */
    uint64_t bucket_cap_bytes;       /**< 0: DISTC_BUCKET_CAP_BYTES */
    uint64_t first_bucket_bytes;     /**< 0: DISTC_FIRST_BUCKET_BYTES */
    const int32_t *bucket_of;        /**< explicit assignment: the bucket of each gradient, buckets
                                        numbered 0.. in launch order, each of one dtype; NULL: by
                                        size (distc_compute_bucket_assignment_by_size, buckets
                                        launched from the last gradients to the first, as c10d;
                                        and, as c10d, rebuilt once at the second
                                        prepare_for_backward in the order the gradients arrived
                                        on rank 0 in the first iteration, unless
                                        find_unused_parameters or gradient_as_bucket_view) */
    int32_t find_unused_parameters;  /**< nonzero: gradients not marked ready by finalize() reduce
                                        as zeros; zero: that is DISTC_ESTATE naming them */
    int32_t gradient_as_bucket_view; /**< nonzero: each gradient lives in its bucket
                                        (distc_reducer_grad_view): the backward pass writes it
                                        there, mark_ready copies nothing and finalize leaves
                                        the average there; `grads` only give shapes and dtypes */
    const int32_t *expect_sparse;    /**< (version 2) per gradient, nonzero: its gradients are
                                        sparse (rows of grads[i] along its first dimension, as
                                        an embedding's): it gets a bucket of its own, is marked
                                        with distc_reducer_mark_ready_sparse and read with
                                        distc_reducer_sparse_grad; NULL: none */
    void *stream;                    /**< (version 3) gradients in device memory: the stream (a
                                        cudaStream_t for nccl) the backward pass writes them on.
                                        Bucket copies, fills and allreduces are ordered there,
                                        and finalize() returns with the copies back into the
                                        gradients enqueued there. NULL: the default stream */
    int32_t static_graph;            /**< (version 4) nonzero: every iteration uses the same
                                        gradients (c10d's static_graph). The first one finds
                                        those no rank marks (as find_unused_parameters does,
                                        also without it); later ones mark this rank's unused
                                        ones ready at prepare_for_backward, so their buckets
                                        start without waiting for finalize, and need no
                                        allreduce of the used map. A gradient used in the
                                        first iteration and not marked later is DISTC_ESTATE
                                        at finalize. Buckets made by size are rebuilt as
                                        without find_unused_parameters */
} distc_reducer_options;

#define DISTC_REDUCER_OPTIONS_INIT \
    { DISTC_REDUCER_OPTIONS_VERSION, 0, 0, NULL, 0, 0, NULL, NULL, 0 }

/** Fills `opts` with the defaults above; an older `version` fills the fields of that version only. */
DISTC_EXTERN(int) distc_reducer_options_init(distc_reducer_options *opts, unsigned int version);

/**
 * A reducer over the `n` gradient buffers `grads` (contiguous, any dtype the
 * group's backend reduces with AVG; host memory, or all on one device of the
 * group's backend). Every rank of `pg` creates one with the same shapes and
 * options. DISTC_ENOTSUP for device gradients whose backend keeps no device
 * memory for the core (no mem_* entries), or that are sparse.
 */
DISTC_EXTERN(int) distc_reducer_new(distc_reducer **out, distc_pg *pg, DLTensor *const *grads, size_t n,
                                    const distc_reducer_options *opts);

/** The number of buckets. */
DISTC_EXTERN(int) distc_reducer_num_buckets(size_t *out, const distc_reducer *r);

/**
 * @brief Where a gradient lives when gradients are views of their buckets.
 *
 * With gradient_as_bucket_view: where gradient `index` lives (its bucket's
 * memory, as many elements of its dtype as grads[index] has), for the whole
 * life of the reducer. Write the gradient there before mark_ready; read the
 * average there after finalize. DISTC_ESTATE without the option.
 */
DISTC_EXTERN(int) distc_reducer_grad_view(void **view, const distc_reducer *r, int32_t index);

/** The bucket of gradient `index`. */
DISTC_EXTERN(int) distc_reducer_bucket_of(int32_t *out, const distc_reducer *r, int32_t index);

/**
 * Starts an iteration. The `n_unused` gradients listed in `unused` will not
 * be computed in this backward pass: they reduce as zeros (c10d's unused
 * parameters). DISTC_ESTATE when the previous iteration was not finalized.
 */
DISTC_EXTERN(int) distc_reducer_prepare_for_backward(distc_reducer *r, const int32_t *unused, size_t n_unused);

/**
 * Gradient `index` holds its value for this iteration: it is copied into its
 * bucket, and every bucket that is now complete (in order) starts its
 * allreduce. DISTC_ESTATE when it was marked (or listed unused) already in
 * this iteration, or no iteration was prepared.
 */
DISTC_EXTERN(int) distc_reducer_mark_ready(distc_reducer *r, int32_t index);

/**
 * Sparse gradient `index` (declared in opts->expect_sparse) holds its value
 * for this iteration: `values` rows (nnz x the row of grads[index], its dtype)
 * at the row numbers `indices` (int64, nnz of them, each below grads[index]'s
 * first dimension; repeats are summed). Both are copied. The reduction, once
 * every bucket before it has started: the union of every rank's rows, rows
 * with the same index summed in rank order, then divided by the group size
 * (c10d's sparse allreduce and DDP's division). It runs on the calling thread
 * (an exchange of variable-size byte messages), so it does not overlap the
 * rest of the backward pass. DISTC_EINVAL for a dense gradient or a malformed
 * pair, DISTC_ESTATE as mark_ready.
 */
DISTC_EXTERN(int) distc_reducer_mark_ready_sparse(distc_reducer *r, int32_t index, const DLTensor *indices,
                                                  const DLTensor *values);

/**
 * @brief A sparse gradient's average over ranks, after finalize.
 *
 * After finalize: sparse gradient `index` averaged over ranks, as `*nnz`
 * distinct row numbers in increasing order (`*indices_out`) and their rows
 * (`*values_out`, nnz x the row of grads[index], its dtype). The memory is the
 * reducer's, valid until the next prepare_for_backward or free. A sparse
 * gradient no rank marked (unused) has nnz 0. DISTC_EINVAL for a dense gradient.
 */
DISTC_EXTERN(int) distc_reducer_sparse_grad(const int64_t **indices_out, const void **values_out, size_t *nnz,
                                            const distc_reducer *r, int32_t index);

/**
 * Ends the iteration: starts what is left, waits for every bucket and
 * writes the averages back into the gradients. A failed allreduce (a dead
 * peer, a timeout) is returned here with its message; the reducer is then
 * ready for a new iteration.
 */
DISTC_EXTERN(int) distc_reducer_finalize(distc_reducer *r);

/**
 * @brief One iteration of a rank that has run out of inputs (uneven inputs).
 *
 * c10d's Join for the reducer: prepare_for_backward with every gradient
 * unused, then finalize, so this rank's buckets (zeros) meet the active
 * ranks' and nobody waits for it. Its gradient buffers then hold the active
 * ranks' sum over the group's size. The protocol around it, every
 * iteration, on every rank of the group:
 *
 *   1. an allreduce (SUM) of one int: 1 on a rank with an input, 0 on a
 *      joined rank; 0 in all means every rank is done: stop;
 *   2. an active rank runs its iteration (prepare, mark_ready, finalize),
 *      a joined rank calls distc_reducer_join().
 *
 * The averages then divide by the whole group (c10d's
 * divide_by_initial_world_size); multiply by size / (the sum of step 1)
 * to average over the active ranks instead. At the end, copy the weights
 * of a rank that finished last to all (a broadcast), as c10d's DDP does.
 * DISTC_ESTATE inside an iteration.
 */
DISTC_EXTERN(int) distc_reducer_join(distc_reducer *r);

/**
 * A communication hook: starts the reduction of one bucket (`bucket`: its
 * memory, all its gradients back to back) over `pg` and hands back the work
 * that finishes it; when that work completes the bucket must hold the
 * average over ranks. Called with the reducer's lock held, from whichever
 * thread completed the bucket: do not call back into the reducer (such a
 * call gives DISTC_ESTATE). Return 0,
 * or a negative code (with distc_error_set) that the mark_ready or finalize
 * that launched the bucket returns.
 */
typedef int (*distc_reducer_comm_hook)(distc_work **out, distc_pg *pg, DLTensor *bucket, void *payload);

/** Built-in communication hooks (c10d's fp16_compress_hook, bf16_compress_hook). */
typedef enum distc_reducer_builtin_hook {
    DISTC_HOOK_ALLREDUCE = 0,     /**< the default: an AVG allreduce of the bucket as it is */
    DISTC_HOOK_FP16_COMPRESS = 1, /**< float32 buckets travel as float16 and are averaged there */
    DISTC_HOOK_BF16_COMPRESS = 2  /**< ... as bfloat16 */
} distc_reducer_builtin_hook;

/**
 * Replaces how buckets are reduced, before the first iteration (DISTC_ESTATE
 * during one). `hook` NULL selects `builtin` (a distc_reducer_builtin_hook);
 * otherwise `hook` is called with `payload` for every bucket. The
 * compressing hooks leave buckets of other dtypes as they are.
 */
DISTC_EXTERN(int) distc_reducer_register_comm_hook(distc_reducer *r, distc_reducer_comm_hook hook, void *payload,
                                                   int32_t builtin);

/**
 * @brief One bucket as a bucket hook sees it (c10d's GradBucket).
 *
 * Valid during the hook's call; the memory it points to (the buffer and
 * the views into it) until the iteration's finalize returns. Later versions
 * may add fields at the end.
 */
typedef struct distc_reducer_bucket {
    size_t index;          /**< its position in launch order, 0 first */
    int32_t is_last;       /**< 1 for the iteration's last bucket (c10d's is_last) */
    DLTensor *buffer;      /**< the flat bucket: its gradients back to back, one dtype, 1-d */
    size_t num_grads;      /**< how many gradients it holds */
    const int32_t *grads;  /**< their indices, as given to distc_reducer_new, in bucket order */
    const size_t *offsets; /**< where each starts in buffer, in elements */
    const DLTensor *views; /**< each one's view of buffer, with the gradient's shape (byte_offset into buffer->data) */
} distc_reducer_bucket;

/**
 * A bucket hook: starts the reduction of `bucket` and hands back, in
 * `*out`, a work that completes once the bucket's buffer holds the result
 * (c10d's comm hook and its future): a collective's work, a continuation
 * chain of several (distc_work_then: an allreduce, then an allgather ...),
 * or a work of distc_work_new completed by the program. Called with the
 * reducer's lock held, on the thread whose mark_ready (or finalize)
 * completed the bucket: start work and return, do not wait for it here and
 * do not call back into the reducer (DISTC_ESTATE). finalize waits for the
 * work without a timeout of its own: a work of distc_work_new that the
 * program never completes keeps it waiting. Return 0, or a negative code (with
 * distc_error_set) that mark_ready or finalize returns. The bucket's
 * collectives must be the same, in the same order, on every rank.
 */
typedef int (*distc_reducer_bucket_hook)(distc_work **out, distc_pg *pg, const distc_reducer_bucket *bucket,
                                         void *payload);

/** Releases a hook's payload once the hook is no longer used (distc_reducer_register_bucket_hook). */
typedef void (*distc_reducer_hook_release)(void *payload);

/**
 * @brief Replaces how buckets are reduced with a hook that sees the whole bucket.
 *
 * Like distc_reducer_register_comm_hook, before the first iteration
 * (DISTC_ESTATE during one), with a hook that gets the bucket's index,
 * position, buffer and per-gradient views (PowerSGD-style hooks keep state
 * per bucket index). `hook` NULL restores the default allreduce.
 * finalize waits for each returned work, then writes the buffer back into
 * the gradients. Host and device buffers alike (a device bucket's buffer
 * is device memory). Bucket k+1 is handed to the hook once bucket k's work
 * has completed, so what a hook chains comes in the same order on every
 * rank. `release` (may be NULL) is called with `payload` once the hook is
 * no longer used: replaced, or the reducer freed (on whichever thread
 * drops it last), also when registering fails.
 */
DISTC_EXTERN(int) distc_reducer_register_bucket_hook(distc_reducer *r, distc_reducer_bucket_hook hook, void *payload,
                                                     distc_reducer_hook_release release);

/** The version of distc_powersgd_options this header describes. */
#define DISTC_POWERSGD_OPTIONS_VERSION 1

/** PowerSGD's settings, with torch's PowerSGDState's names and defaults. */
typedef struct distc_powersgd_options {
    unsigned int version;              /**< DISTC_POWERSGD_OPTIONS_VERSION */
    int32_t matrix_approximation_rank; /**< r, the rank of P and Q: 1 */
    int32_t use_error_feedback;        /**< add the compression's error to the next bucket: 1 */
    int32_t warm_start;                /**< start Q from the last iteration's: 1 */
    int64_t start_powersgd_iter;       /**< plain allreduces before this iteration (>= 2 with either above): 1000 */
    double min_compression_rate;       /**< compress a matrix when (rows + cols) r times this < rows cols: 2 */
    double orthogonalization_epsilon;  /**< added to each column's norm (set 1e-8 if a gradient may be all zero): 0 */
    uint64_t random_seed;              /**< Q's random start: 0 */
} distc_powersgd_options;

/** The defaults above, as an initializer. */
#define DISTC_POWERSGD_OPTIONS_INIT \
    { DISTC_POWERSGD_OPTIONS_VERSION, 1, 1, 1, 1000, 2.0, 0.0, 0 }

/** Fills `opts` with the defaults above. */
DISTC_EXTERN(int) distc_powersgd_options_init(distc_powersgd_options *opts, unsigned int version);

/**
 * @brief PowerSGD as the reducer's communication hook (c10d's powerSGD_hook).
 *
 * Before the first iteration (DISTC_ESTATE during one). Until iteration
 * `start_powersgd_iter` buckets are plainly averaged. From then on, in each
 * float32 or float64 bucket, every gradient viewed as a matrix (its first
 * dimension by the rest) that is worth it travels as P = M Q and
 * Q = M^T P of rank r (P orthogonalized between the two allreduces, by
 * Gram-Schmidt up to rank 2 and Householder QR above, as torch's hook; Q
 * starts random, the same on every rank, or from the last iteration's with
 * warm_start), and becomes P Q^T / size; the rest (biases,
 * small matrices) travels as one plain allreduce. With error feedback each
 * rank adds what compression lost last time. Three allreduces per bucket,
 * chained (distc_reducer_register_bucket_hook's ordering keeps them in
 * step). Host buckets only (DISTC_ENOTSUP for device gradients); opts NULL
 * takes the defaults; DISTC_EINVAL for a rank below 1, a negative
 * min_compression_rate or epsilon, or a start below 2 with error feedback
 * or warm start (buckets are rebuilt after the first iteration).
 */
DISTC_EXTERN(int) distc_reducer_register_powersgd(distc_reducer *r, const distc_powersgd_options *opts);

/**
 * @brief What PowerSGD has done so far.
 *
 * The iterations counted (each at its last bucket), and the gradient
 * elements before and after compression summed over the compressed
 * iterations (their ratio is the compression rate). Any output may be NULL.
 * DISTC_ESTATE when PowerSGD is not the reducer's hook.
 */
DISTC_EXTERN(int) distc_reducer_powersgd_stats(int64_t *iterations, uint64_t *numel_before, uint64_t *numel_after,
                                               const distc_reducer *r);

/**
 * @brief When a gradient was marked ready in the last iteration.
 *
 * When gradient `index` was marked ready in the last finalized iteration, in
 * ns after its prepare_for_backward (-1: it was unused).
 */
DISTC_EXTERN(int) distc_reducer_ready_ns(int64_t *out, const distc_reducer *r, int32_t index);

/**
 * @brief Whether any rank used a gradient in the last iteration.
 *
 * With find_unused_parameters: 1 when some rank marked gradient `index`
 * ready in the last finalized iteration, 0 when no rank did (each listed it
 * unused or left it unmarked). c10d's DDP leaves such a parameter's gradient
 * alone (None stays None); its buffer here holds zeros. finalize learns it
 * with one more allreduce (an int32 per gradient, launched after the
 * buckets'). Without the option it is not learned and the answer is 1, as
 * it is before the first finalize. With static_graph the first iteration's
 * answer stands. DISTC_ENOTSUP for device gradients with
 * find_unused_parameters or static_graph.
 */
DISTC_EXTERN(int) distc_reducer_grad_used(int32_t *out, const distc_reducer *r, int32_t index);

/**
 * Bucket `bucket` in the last finalized iteration: its size in bytes, when
 * its allreduce started (ns after prepare_for_backward) and how long it took
 * (ns). Any output may be NULL. A first bucket that starts before the last
 * gradient is ready is the overlap the reducer exists for.
 */
DISTC_EXTERN(int) distc_reducer_bucket_stats(uint64_t *bytes, int64_t *launch_ns, int64_t *reduce_ns,
                                             const distc_reducer *r, size_t bucket);

/** Releases the reducer (waiting for buckets in flight; in a completion
 * callback of its group's collectives, where that wait is refused, the
 * buckets' memory goes once their allreduces completed). A registered
 * hook's payload is released before this returns. NULL is a no-op. */
DISTC_EXTERN(void) distc_reducer_free(distc_reducer *r);

DISTC_END_DECL

#endif /* DISTC_REDUCER_H */

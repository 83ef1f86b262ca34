/**
 * @file distc/reducer.h
 * @brief DDP gradient bucketing (c10d's Reducer) for any training loop.
 *
 * The reducer itself (buckets launched as gradients become ready) is being
 * built; this header holds its bucket assignment so far.
 */
#ifndef DISTC_REDUCER_H
#define DISTC_REDUCER_H

#include <dlpack/dlpack.h>

#include "common.h"

DISTC_BEGIN_DECL

/** c10d's default bucket size cap: 25 MiB. */
#define DISTC_BUCKET_CAP_BYTES (25u * 1024u * 1024u)
/** c10d's default size of the first bucket: 1 MiB. */
#define DISTC_FIRST_BUCKET_BYTES (1024u * 1024u)

/**
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

DISTC_END_DECL

#endif /* DISTC_REDUCER_H */

// Grouping gradients into buckets (c10d's compute_bucket_assignment_by_size).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace distc {

// What the assignment needs to know of a tensor.
struct BucketTensor {
    int dtype_code, dtype_bits;  // DLPack dtype (buckets never mix dtypes)
    int device_type, device_id;  // nor devices
    uint64_t nbytes;
    bool sparse;  // gets a bucket of its own
};

// Buckets as lists of tensor indices, ordered by their smallest index.
std::vector<std::vector<size_t>> compute_bucket_assignment_by_size(const std::vector<BucketTensor> &tensors,
                                                                   const std::vector<uint64_t> &limits);

}  // namespace distc

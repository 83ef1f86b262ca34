// Sparse gradients for the reducer: rows of an embedding-like gradient as
// (row indices, row values), exchanged between ranks and summed by row
// (c10d's sparse allreduce over gloo: allgather, then coalesce).
#pragma once

#include <cstdint>
#include <vector>

#include "core/pg/tensor.hpp"
#include "core/store/store.hpp"

namespace distc {

// One rank's contribution as bytes: nnz, the indices, then the rows.
Bytes pack_sparse(const int64_t *indices, size_t nnz, const void *rows, size_t row_bytes);

// Every rank's contribution (in rank order) coalesced: distinct indices in
// increasing order, rows with the same index summed in rank order (so every
// rank computes the same bits), then multiplied by `scale` (1/size for an
// average). Throws DISTC_EPROTO for a malformed contribution.
void reduce_sparse(const std::vector<Bytes> &parts, DType dtype, size_t row_numel, double scale,
                   std::vector<int64_t> &indices, Bytes &rows);

}  // namespace distc

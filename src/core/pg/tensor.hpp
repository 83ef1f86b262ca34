// A contiguous buffer as the core sees it (host memory unless a device backend is used); capi/ builds these from DLTensors.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "core/pg/types.hpp"
#include "core/util/buffer_pool.hpp"
#include "core/util/checked.hpp"
#include "core/util/span.hpp"

namespace distc {

// DLDeviceType values the core itself reads and writes: kDLCPU, kDLCUDAHost (pinned).
inline bool host_memory(int32_t device_type) { return device_type == 1 || device_type == 3; }
// Whether a backend's memory kinds (bit 1 << DLDeviceType each) include kDLCPU.
inline bool takes_host_memory(uint64_t device_types) { return (device_types & (uint64_t{1} << 1)) != 0; }

struct Tensor {
    void *data = nullptr;
    size_t numel = 0;
    DType dtype = DType::Float32;
    int64_t dim0 = 0;         // first dimension (numel for 0-d or 1-d), for splits
    int32_t device_type = 1;  // DLDeviceType (kDLCPU)
    int32_t device_id = 0;

    size_t nbytes() const { return numel * dtype_size(dtype); }
    size_t row_numel() const { return dim0 > 0 ? numel / static_cast<size_t>(dim0) : 0; }
    uint8_t *bytes() const { return static_cast<uint8_t *>(data); }
};

// A collective's list of tensors, lent for the call (core/util/span.hpp).
using TensorSpan = Span<Tensor>;

// `numel` elements of `dt` at `p`, 1-d, on the host.
inline Tensor flat_tensor(void *p, DType dt, size_t numel) {
    Tensor t;
    t.data = p;
    t.numel = numel;
    t.dtype = dt;
    t.dim0 = static_cast<int64_t>(numel);
    return t;
}

// Whether [a, a + na) and [b, b + nb) share a byte (empty ranges never do).
inline bool overlaps(const void *a, size_t na, const void *b, size_t nb) {
    auto *x = static_cast<const uint8_t *>(a), *y = static_cast<const uint8_t *>(b);
    return na && nb && x < y + nb && y < x + na;
}

// Scratch memory without zero-filling: every byte is written before it is read.
// Its size is checked (core/util/checked.hpp): counts may come from peers.
// Large ones come from, and go back to, the buffer pool (buffer_pool.hpp).
struct Scratch {
    PooledBytes buf;
    Tensor t;
    Scratch(DType dt, size_t numel) : buf(pool_take(checked_mul(numel, dtype_size(dt), "a scratch buffer") + 1)) {
        t.data = buf.p.get();
        t.numel = numel;
        t.dtype = dt;
        t.dim0 = static_cast<int64_t>(numel);
    }
    ~Scratch() { pool_give(std::move(buf)); }
    Scratch(const Scratch &) = delete;
    Scratch &operator=(const Scratch &) = delete;
};

}  // namespace distc

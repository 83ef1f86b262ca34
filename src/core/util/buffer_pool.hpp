// Large temporary buffers kept for the next call that needs one. A fresh
// allocation of 32 MiB or more is fresh memory from the kernel every time
// (glibc maps it, and unmaps it when freed), and the first touch of each
// of its pages faults: on the AMD VM a 32 MiB reduce, whose non-roots copy
// their input into a scratch buffer, took 100 ms a call instead of 5.
// Buffers of kPoolMinBytes or more are kept when released, up to
// kPoolKeepBytes in all (the largest ones), and reused by the next request
// that fits.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

namespace distc {

inline constexpr size_t kPoolMinBytes = size_t(1) << 20;
inline constexpr size_t kPoolKeepBytes = size_t(512) << 20;

struct PooledBytes {
    std::unique_ptr<uint8_t[]> p;
    size_t cap = 0;
};

// At least `n` bytes, uninitialised: a kept buffer that fits, else new ones.
PooledBytes pool_take(size_t n);
// Keeps `b` for a later pool_take where it is large enough and there is room.
void pool_give(PooledBytes b) noexcept;

}  // namespace distc

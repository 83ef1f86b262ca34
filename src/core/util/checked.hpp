// Sizes computed from callers' numbers. Shapes, split sizes and byte lengths
// come from outside; a product that wraps would size a buffer far smaller
// than what is then read or written, so every such product goes through here.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "core/util/error.hpp"
#include "distc/pg.h"

namespace distc {

// The largest tensor (or byte string moved as one) the library takes:
// DISTC_TENSOR_MAX_BYTES, far beyond any memory yet small enough that a few
// of them multiplied by a group size stay inside 64 bits.
constexpr uint64_t kMaxBytes = DISTC_TENSOR_MAX_BYTES;

// a * b, or false when it does not fit in 64 bits.
inline bool mul_fits(uint64_t a, uint64_t b, uint64_t &out) { return !__builtin_mul_overflow(a, b, &out); }

[[noreturn, gnu::cold]] inline void fail_too_large(const char *what, uint64_t a, uint64_t b) {
    fail(DISTC_EINVAL, std::string(what) + " would be " + std::to_string(a) + " x " + std::to_string(b) +
                           ", over DISTC_TENSOR_MAX_BYTES (2^48)");
}

// a * b (elements or bytes) for `what`: DISTC_EINVAL when it wraps or is over kMaxBytes.
inline size_t checked_mul(uint64_t a, uint64_t b, const char *what) {
    uint64_t n = 0;
    if (!mul_fits(a, b, n) || n > kMaxBytes) fail_too_large(what, a, b);
    return static_cast<size_t>(n);
}

// total += n for `what`, with the same limit.
inline void checked_add(size_t &total, uint64_t n, const char *what) {
    if (n > kMaxBytes || total + n > kMaxBytes) fail_too_large(what, total + (n > kMaxBytes ? 0 : n), 1);
    total += static_cast<size_t>(n);
}

}  // namespace distc

// test_reduce_kernels' reference (reference.cpp): the dtypes, ops and lengths
// the parts run through, a seeded generator, float16 and bfloat16 decoded and
// encoded independently of the library, and the helpers that run a kernel.
#ifndef DISTC_TEST_REDUCE_KERNELS_REFERENCE_HPP
#define DISTC_TEST_REDUCE_KERNELS_REFERENCE_HPP

#include <cstdarg>
#include <cstddef>
#include <csetjmp>
#include <cstdint>
extern "C" {  // cmocka 1.1 has no C++ guards of its own
#include <cmocka.h>
}

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "core/pg/types.hpp"

using distc::DType;
using distc::ReduceFn;
using distc::ReduceOp;

extern const DType kDTypes[12];
extern const ReduceOp kOps[9];
// Lengths around the kernels' 64-byte blocks, odd ones included.
extern const size_t kLengths[13];

uint64_t next_rand();

bool is_complex(DType t);
bool is_floating(DType t);

// ------------------------------------------------ reference 16-bit formats
// Written independently of the library's conversions: decoding with ldexp,
// encoding by searching the (monotone) positive bit patterns.

struct Fmt16 {
    int man_bits;  // 10 for float16, 7 for bfloat16
    int bias;      // 15, 127
    uint16_t inf;  // 0x7c00, 0x7f80
};
extern const Fmt16 kHalf;
extern const Fmt16 kBf16;

// The value of a non-negative pattern up to and including `inf`, reading
// the all-ones exponent as if it were an ordinary one (so inf reads as the
// first value past the largest finite one).
double decode_ext(const Fmt16 &f, uint16_t h);

double ref_decode(const Fmt16 &f, uint16_t h);

// Round to nearest, ties to even. Not for NaN.
uint16_t ref_encode(const Fmt16 &f, double x);

bool is_nan16(const Fmt16 &f, uint16_t h);

// ------------------------------------------------------------------ helpers

template <typename T>
void run(DType t, ReduceOp op, T *c, const T *a, const T *b, size_t n) {
    ReduceFn fn = distc::reduce_fn(t, op);
    if (!fn) fail_msg("reduce_fn(%s, %s) is null", distc::dtype_name(t), distc::op_name(op));
    fn(c, a, b, n);
}

// Runs fn three ways (separate output, c == a, c == b) and checks all
// against `expected`, and that nothing past n is written.
template <typename T, typename Eq>
void check_three_ways(DType t, ReduceOp op, const std::vector<T> &a, const std::vector<T> &b,
                      const std::vector<T> &expected, Eq eq) {
    const size_t n = a.size();
    const char *tn = distc::dtype_name(t), *on = distc::op_name(op);
    std::vector<T> c(n + 1);
    std::memset(static_cast<void *>(c.data()), 0xa5, sizeof(T) * (n + 1));
    T sentinel;
    std::memcpy(&sentinel, &c[n], sizeof(T));
    run(t, op, c.data(), a.data(), b.data(), n);
    for (size_t i = 0; i < n; ++i)
        if (!eq(c[i], expected[i])) fail_msg("%s %s n=%zu: element %zu differs", tn, on, n, i);
    if (std::memcmp(&c[n], &sentinel, sizeof(T)) != 0) fail_msg("%s %s n=%zu wrote past the end", tn, on, n);

    std::vector<T> x = a;
    run(t, op, x.data(), x.data(), b.data(), n);
    for (size_t i = 0; i < n; ++i)
        if (!eq(x[i], expected[i])) fail_msg("%s %s n=%zu c==a: element %zu differs", tn, on, n, i);
    std::vector<T> y = b;
    run(t, op, y.data(), a.data(), y.data(), n);
    for (size_t i = 0; i < n; ++i)
        if (!eq(y[i], expected[i])) fail_msg("%s %s n=%zu c==b: element %zu differs", tn, on, n, i);
}

template <typename T>
bool same_bits(const T &x, const T &y) {
    return std::memcmp(&x, &y, sizeof(T)) == 0;
}

// Floating comparisons: bit-identical, or both NaN.
template <typename T>
bool same_or_nan(const T &x, const T &y) {
    return same_bits(x, y) || (std::isnan(x) && std::isnan(y));
}

#endif

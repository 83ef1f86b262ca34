// Element types and reduction kernels: gloo-style elementwise combine
// functions for every (dtype, op) pair that has a meaning, and the in-place
// scaling that AVG and PREMUL_SUM need.
#include "core/pg/types.hpp"

#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

namespace distc {

namespace {

// ------------------------------------------------------------ 16-bit floats
// float16 (IEEE binary16) and bfloat16 live in memory as uint16_t bit
// patterns; arithmetic happens in float. float has more than 2p+2 bits of
// precision for both formats, so rounding a float sum/product of two 16-bit
// values back to 16 bits gives the correctly rounded 16-bit result.

inline uint32_t float_bits(float f) {
    uint32_t u;
    std::memcpy(&u, &f, sizeof u);
    return u;
}

inline float bits_float(uint32_t u) {
    float f;
    std::memcpy(&f, &u, sizeof f);
    return f;
}

// The conversions are written without branches: every case is computed and
// one is picked with a bit mask, so that the compiler can vectorize the
// kernels that use them. (With ?: it moves the float arithmetic into a
// branch, which -ftrapping-math then keeps it from if-converting.)

inline uint32_t select(bool cond, uint32_t if_true, uint32_t if_false) {
    const uint32_t m = 0u - uint32_t(cond);
    return (if_true & m) | (if_false & ~m);
}

inline float half_to_float(uint16_t h) {
    const uint32_t sign = uint32_t(h & 0x8000u) << 16;
    const uint32_t em = uint32_t(h & 0x7fffu) << 13;  // exponent and significand, in place
    const uint32_t exp = em & 0x0f800000u;
    // Normal: rebias the exponent by 127 - 15. Inf/NaN: all-ones exponent,
    // significand (NaN payload) kept.
    uint32_t normal = em + (uint32_t(127 - 15) << 23);
    normal = select(exp == 0x0f800000u, em | 0x7f800000u, normal);
    // Zero or subnormal: significand * 2^-24, exact in float: plant the
    // significand in 2^-14's and subtract 2^-14.
    const uint32_t sub = float_bits(bits_float(em + (uint32_t(127 - 14) << 23)) - 0x1p-14f);
    return bits_float(sign | select(exp == 0, sub, normal));
}

inline uint16_t float_to_half(float f) {
    const uint32_t all = float_bits(f);
    const uint32_t sign = (all >> 16) & 0x8000u;
    const uint32_t u = all & 0x7fffffffu;
    // Normal: rebias the exponent, round the 13 dropped bits to nearest
    // even. A carry out of the significand bumps the exponent, up to Inf.
    const uint32_t normal = (u + (uint32_t(15 - 127) << 23) + 0xfffu + ((u >> 13) & 1u)) >> 13;
    // Below 2^-14: a float16 subnormal or zero. Adding 0.5 lines the value's
    // bits up in units of 2^-24 at the bottom of the significand, and the
    // float addition rounds to nearest even for us.
    const uint32_t sub = float_bits(bits_float(u) + 0.5f) - float_bits(0.5f);
    uint32_t r = select(u < 0x38800000u, sub, normal);
    r = select(u >= 0x47800000u, 0x7c00u, r);                        // >= 65536 or Inf: Inf
    r = select(u > 0x7f800000u, 0x7e00u | ((u >> 13) & 0x3ffu), r);  // NaN: quiet, top of the payload
    return uint16_t(sign | r);
}

inline float bf16_to_float(uint16_t h) { return bits_float(uint32_t(h) << 16); }

inline uint16_t float_to_bf16(float f) {
    const uint32_t u = float_bits(f);
    // Round to nearest even; overflow carries into Inf. NaN stays (quiet) NaN.
    const uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
    return uint16_t(select((u & 0x7fffffffu) > 0x7f800000u, (u >> 16) | 0x40u, rounded));
}

// How a kernel reads and writes elements: as themselves, or 16-bit floats
// through float.
template <typename T>
struct Plain {
    using Storage = T;
    using Compute = T;
    static T load(T v) { return v; }
    static T store(T v) { return v; }
};
struct Half {
    using Storage = uint16_t;
    using Compute = float;
    static float load(uint16_t h) { return half_to_float(h); }
    static uint16_t store(float f) { return float_to_half(f); }
};
struct BHalf {
    using Storage = uint16_t;
    using Compute = float;
    static float load(uint16_t h) { return bf16_to_float(h); }
    static uint16_t store(float f) { return float_to_bf16(f); }
};

// ---------------------------------------------------------------- operators
// Integer arithmetic wraps around (two's complement), as torch's does: it is
// done in an unsigned type at least as wide as unsigned int, so that neither
// signed overflow nor integer promotion of narrow types is undefined.
template <typename T>
using WrapT = std::conditional_t<(sizeof(T) < sizeof(unsigned)), unsigned, std::make_unsigned_t<T>>;

struct OpSum {
    template <typename T>
    static T f(T a, T b) {
        if constexpr (std::is_integral_v<T>)
            return T(WrapT<T>(a) + WrapT<T>(b));
        else
            return a + b;
    }
};
struct OpProd {
    template <typename T>
    static T f(T a, T b) {
        if constexpr (std::is_integral_v<T>)
            return T(WrapT<T>(a) * WrapT<T>(b));
        else
            return a * b;
    }
};
// MIN and MAX propagate NaN (as torch.minimum/maximum do): whichever side is
// NaN wins.
struct OpMin {
    template <typename T>
    static T f(T a, T b) {
        if constexpr (std::is_integral_v<T>)
            return b < a ? b : a;
        else
            return (a < b || a != a) ? a : b;
    }
};
struct OpMax {
    template <typename T>
    static T f(T a, T b) {
        if constexpr (std::is_integral_v<T>)
            return b > a ? b : a;
        else
            return (a > b || a != a) ? a : b;
    }
};
struct OpBand {
    template <typename T>
    static T f(T a, T b) {
        return T(a & b);
    }
};
struct OpBor {
    template <typename T>
    static T f(T a, T b) {
        return T(a | b);
    }
};
struct OpBxor {
    template <typename T>
    static T f(T a, T b) {
        return T(a ^ b);
    }
};
// bool: one byte holding 0 or 1; any nonzero byte reads as true and results
// are always 0 or 1.
struct BoolOr {
    template <typename T>
    static T f(T a, T b) {
        return T((a | b) != 0);
    }
};
struct BoolAnd {
    template <typename T>
    static T f(T a, T b) {
        return T((a != 0) & (b != 0));
    }
};
struct BoolXor {
    template <typename T>
    static T f(T a, T b) {
        return T((a != 0) ^ (b != 0));
    }
};

// ------------------------------------------------------------------ kernels
// c may be a or b (the same pointer): element i is read before it is written.
//
// Blocks of 64 bytes are loaded into locals before anything is stored, so
// the compiler needs no alias check to vectorize them: at -O2 GCC does not
// version a simple loop for possible aliasing, but it unrolls these
// fixed-size blocks and its SLP pass vectorizes them (several times faster
// than the simple loop for float32 and int64 sums; -O3 gets no faster either
// way).
#if defined(__GNUC__)
#define DISTC_UNROLL _Pragma("GCC unroll 64")
#else
#define DISTC_UNROLL
#endif

template <typename Fmt, typename Op>
void kernel(void *c, const void *a, const void *b, size_t n) {
    using S = typename Fmt::Storage;
    using C = typename Fmt::Compute;
    S *pc = static_cast<S *>(c);
    const S *pa = static_cast<const S *>(a);
    const S *pb = static_cast<const S *>(b);
    constexpr size_t B = 64 / sizeof(S);
    size_t i = 0;
    for (; i + B <= n; i += B) {
        C x[B], y[B];
        DISTC_UNROLL for (size_t j = 0; j < B; ++j) x[j] = Fmt::load(pa[i + j]);
        DISTC_UNROLL for (size_t j = 0; j < B; ++j) y[j] = Fmt::load(pb[i + j]);
        DISTC_UNROLL for (size_t j = 0; j < B; ++j) x[j] = Op::template f<C>(x[j], y[j]);
        DISTC_UNROLL for (size_t j = 0; j < B; ++j) pc[i + j] = Fmt::store(x[j]);
    }
    for (; i < n; ++i) pc[i] = Fmt::store(Op::template f<C>(Fmt::load(pa[i]), Fmt::load(pb[i])));
}

// data[i] *= factor, computed in Fmt's compute type; blocked the same way.
template <typename Fmt>
void scale_fp(void *data, size_t n, typename Fmt::Compute factor) {
    using S = typename Fmt::Storage;
    using C = typename Fmt::Compute;
    S *p = static_cast<S *>(data);
    constexpr size_t B = 64 / sizeof(S);
    size_t i = 0;
    for (; i + B <= n; i += B) {
        C x[B];
        DISTC_UNROLL for (size_t j = 0; j < B; ++j) x[j] = Fmt::load(p[i + j]) * factor;
        DISTC_UNROLL for (size_t j = 0; j < B; ++j) p[i + j] = Fmt::store(x[j]);
    }
    for (; i < n; ++i) p[i] = Fmt::store(Fmt::load(p[i]) * factor);
}
#undef DISTC_UNROLL

// Complex SUM is componentwise: a SUM over 2n reals.
template <typename R>
void complex_sum(void *c, const void *a, const void *b, size_t n) {
    kernel<Plain<R>, OpSum>(c, a, b, 2 * n);
}

template <typename T>
ReduceFn int_fn(ReduceOp op) {
    switch (op) {
        case ReduceOp::Sum:
        case ReduceOp::Avg:
        case ReduceOp::PremulSum: return &kernel<Plain<T>, OpSum>;
        case ReduceOp::Product: return &kernel<Plain<T>, OpProd>;
        case ReduceOp::Min: return &kernel<Plain<T>, OpMin>;
        case ReduceOp::Max: return &kernel<Plain<T>, OpMax>;
        case ReduceOp::Band: return &kernel<Plain<T>, OpBand>;
        case ReduceOp::Bor: return &kernel<Plain<T>, OpBor>;
        case ReduceOp::Bxor: return &kernel<Plain<T>, OpBxor>;
    }
    return nullptr;
}

template <typename T>
ReduceFn float_fn(ReduceOp op) {
    switch (op) {
        case ReduceOp::Sum:
        case ReduceOp::Avg:
        case ReduceOp::PremulSum: return &kernel<Plain<T>, OpSum>;
        case ReduceOp::Product: return &kernel<Plain<T>, OpProd>;
        case ReduceOp::Min: return &kernel<Plain<T>, OpMin>;
        case ReduceOp::Max: return &kernel<Plain<T>, OpMax>;
        default: return nullptr;
    }
}

template <typename Fmt>
ReduceFn half_fn(ReduceOp op) {
    switch (op) {
        case ReduceOp::Sum:
        case ReduceOp::Avg:
        case ReduceOp::PremulSum: return &kernel<Fmt, OpSum>;
        case ReduceOp::Product: return &kernel<Fmt, OpProd>;
        case ReduceOp::Min: return &kernel<Fmt, OpMin>;
        case ReduceOp::Max: return &kernel<Fmt, OpMax>;
        default: return nullptr;
    }
}

ReduceFn bool_fn(ReduceOp op) {
    switch (op) {
        case ReduceOp::Sum:
        case ReduceOp::Max:
        case ReduceOp::Bor: return &kernel<Plain<uint8_t>, BoolOr>;
        case ReduceOp::Product:
        case ReduceOp::Min:
        case ReduceOp::Band: return &kernel<Plain<uint8_t>, BoolAnd>;
        case ReduceOp::Bxor: return &kernel<Plain<uint8_t>, BoolXor>;
        default: return nullptr;
    }
}

// ------------------------------------------------------------------ scaling

// Integers: the exact result truncated toward zero.
//  - factor == 1/d for an integer d >= 2 (how AVG passes 1/world_size):
//    integer division by d, like NCCL's integer AVG. Multiplying by the rounded
//    double 1/d instead would give 0 for 49 * (1/49), and lose int64 bits.
//  - factor an integer: integer multiplication, wrapping like SUM/PRODUCT.
//  - otherwise: in double, truncated toward zero and saturated to the
//    type's range (NaN gives 0).
template <typename T>
void scale_int(void *data, size_t n, double factor) {
    T *p = static_cast<T *>(data);
    if (factor == std::trunc(factor) && std::fabs(factor) < 0x1p63) {
        const WrapT<T> m = WrapT<T>(int64_t(factor));
        for (size_t i = 0; i < n; ++i) p[i] = T(WrapT<T>(p[i]) * m);
        return;
    }
    const double recip = std::round(1.0 / factor);
    if (recip >= 2 && recip < 0x1p63 && 1.0 / recip == factor) {
        const int64_t d = int64_t(recip);
        if (sizeof(T) < 8 && d <= INT32_MAX) {  // 32-bit division is the faster one
            const int32_t d32 = int32_t(d);
            for (size_t i = 0; i < n; ++i) p[i] = T(int32_t(p[i]) / d32);
        } else {
            for (size_t i = 0; i < n; ++i) p[i] = T(int64_t(p[i]) / d);
        }
        return;
    }
    constexpr double lo = double(std::numeric_limits<T>::min());
    // max + 1 is a power of two, exact in double; max itself may not be (int64).
    constexpr double hi_excl = (double(std::numeric_limits<T>::max() / 2 + 1)) * 2.0;
    for (size_t i = 0; i < n; ++i) {
        const double v = std::trunc(double(p[i]) * factor);
        if (v != v)
            p[i] = 0;
        else if (v < lo)
            p[i] = std::numeric_limits<T>::min();
        else if (v >= hi_excl)
            p[i] = std::numeric_limits<T>::max();
        else
            p[i] = T(v);
    }
}

// --------------------------------------------------------- support messages

bool is_valid(DType t) { return uint8_t(t) <= uint8_t(DType::Complex128); }
bool is_valid(ReduceOp op) { return uint8_t(op) <= uint8_t(ReduceOp::PremulSum); }

#define DISTC_BITWISE_MSG(OP)                                                                 \
    switch (t) {                                                                              \
        case DType::Float16: return OP " needs an integer or bool tensor, not float16";       \
        case DType::BFloat16: return OP " needs an integer or bool tensor, not bfloat16";     \
        case DType::Float32: return OP " needs an integer or bool tensor, not float32";       \
        case DType::Float64: return OP " needs an integer or bool tensor, not float64";       \
        case DType::Complex64: return OP " needs an integer or bool tensor, not complex64";   \
        case DType::Complex128: return OP " needs an integer or bool tensor, not complex128"; \
        default: return nullptr;                                                              \
    }

#define DISTC_COMPLEX_MSG(OP)                                                                \
    switch (t) {                                                                             \
        case DType::Complex64: return OP " is not defined on complex tensors (complex64)";   \
        case DType::Complex128: return OP " is not defined on complex tensors (complex128)"; \
        default: return nullptr;                                                             \
    }

}  // namespace

const char *op_name(ReduceOp op) {
    switch (op) {
        case ReduceOp::Sum: return "SUM";
        case ReduceOp::Avg: return "AVG";
        case ReduceOp::Product: return "PRODUCT";
        case ReduceOp::Min: return "MIN";
        case ReduceOp::Max: return "MAX";
        case ReduceOp::Band: return "BAND";
        case ReduceOp::Bor: return "BOR";
        case ReduceOp::Bxor: return "BXOR";
        case ReduceOp::PremulSum: return "PREMUL_SUM";
    }
    return "UNKNOWN";
}

const char *reduce_op_unsupported(DType t, ReduceOp op) {
    if (!is_valid(t)) return "unknown element type";
    if (!is_valid(op)) return "unknown reduce op";
    switch (op) {
        case ReduceOp::Sum: return nullptr;
        case ReduceOp::Avg: return t == DType::Bool ? "AVG is not defined on bool tensors" : nullptr;
        case ReduceOp::PremulSum: return t == DType::Bool ? "PREMUL_SUM is not defined on bool tensors" : nullptr;
        case ReduceOp::Product: DISTC_COMPLEX_MSG("PRODUCT")
        case ReduceOp::Min: DISTC_COMPLEX_MSG("MIN")
        case ReduceOp::Max: DISTC_COMPLEX_MSG("MAX")
        case ReduceOp::Band: DISTC_BITWISE_MSG("BAND")
        case ReduceOp::Bor: DISTC_BITWISE_MSG("BOR")
        case ReduceOp::Bxor: DISTC_BITWISE_MSG("BXOR")
    }
    return "unknown reduce op";
}

#undef DISTC_BITWISE_MSG
#undef DISTC_COMPLEX_MSG

ReduceFn reduce_fn(DType t, ReduceOp op) {
    if (reduce_op_unsupported(t, op)) return nullptr;
    switch (t) {
        case DType::Bool: return bool_fn(op);
        case DType::Int8: return int_fn<int8_t>(op);
        case DType::UInt8: return int_fn<uint8_t>(op);
        case DType::Int16: return int_fn<int16_t>(op);
        case DType::Int32: return int_fn<int32_t>(op);
        case DType::Int64: return int_fn<int64_t>(op);
        case DType::Float16: return half_fn<Half>(op);
        case DType::BFloat16: return half_fn<BHalf>(op);
        case DType::Float32: return float_fn<float>(op);
        case DType::Float64: return float_fn<double>(op);
        case DType::Complex64:
            return op == ReduceOp::Sum || op == ReduceOp::Avg || op == ReduceOp::PremulSum ? &complex_sum<float>
                                                                                           : nullptr;
        case DType::Complex128:
            return op == ReduceOp::Sum || op == ReduceOp::Avg || op == ReduceOp::PremulSum ? &complex_sum<double>
                                                                                           : nullptr;
    }
    return nullptr;
}

void scale_in_place(DType t, void *data, size_t n, double factor) {
    if (n == 0) return;
    switch (t) {
        case DType::Bool: return;  // AVG/PREMUL_SUM are rejected on bool
        case DType::Int8: return scale_int<int8_t>(data, n, factor);
        case DType::UInt8: return scale_int<uint8_t>(data, n, factor);
        case DType::Int16: return scale_int<int16_t>(data, n, factor);
        case DType::Int32: return scale_int<int32_t>(data, n, factor);
        case DType::Int64: return scale_int<int64_t>(data, n, factor);
        case DType::Float16: return scale_fp<Half>(data, n, float(factor));
        case DType::BFloat16: return scale_fp<BHalf>(data, n, float(factor));
        case DType::Float32: return scale_fp<Plain<float>>(data, n, float(factor));
        case DType::Float64: return scale_fp<Plain<double>>(data, n, factor);
        case DType::Complex64: return scale_fp<Plain<float>>(data, 2 * n, float(factor));  // (re, im) pairs
        case DType::Complex128: return scale_fp<Plain<double>>(data, 2 * n, factor);
    }
}

void narrow_floats(DType to, uint16_t *dst, const float *src, size_t n) {
    if (to == DType::Float16)
        for (size_t i = 0; i < n; ++i) dst[i] = float_to_half(src[i]);
    else
        for (size_t i = 0; i < n; ++i) dst[i] = float_to_bf16(src[i]);
}

void widen_floats(DType from, float *dst, const uint16_t *src, size_t n) {
    if (from == DType::Float16)
        for (size_t i = 0; i < n; ++i) dst[i] = half_to_float(src[i]);
    else
        for (size_t i = 0; i < n; ++i) dst[i] = bf16_to_float(src[i]);
}

}  // namespace distc

// Element types and reduction kernels (src/core/pg/types.hpp): names and
// sizes, which (dtype, op) pairs are defined, every kernel against a
// reference, float16/bfloat16 rounding, and scale_in_place.
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

namespace {

const DType kDTypes[] = {DType::Bool,    DType::Int8,    DType::UInt8,     DType::Int16,
                         DType::Int32,   DType::Int64,   DType::Float16,   DType::BFloat16,
                         DType::Float32, DType::Float64, DType::Complex64, DType::Complex128};
const ReduceOp kOps[] = {ReduceOp::Sum,  ReduceOp::Avg, ReduceOp::Product, ReduceOp::Min,      ReduceOp::Max,
                         ReduceOp::Band, ReduceOp::Bor, ReduceOp::Bxor,    ReduceOp::PremulSum};
// Lengths around the kernels' 64-byte blocks, odd ones included.
const size_t kLengths[] = {0, 1, 3, 7, 8, 15, 16, 17, 31, 33, 64, 65, 130};

uint64_t g_rng = 0x9e3779b97f4a7c15ull;
uint64_t next_rand() {  // splitmix64
    uint64_t z = (g_rng += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

bool is_complex(DType t) { return t == DType::Complex64 || t == DType::Complex128; }
bool is_floating(DType t) {
    return t == DType::Float16 || t == DType::BFloat16 || t == DType::Float32 || t == DType::Float64;
}

// ------------------------------------------------ reference 16-bit formats
// Written independently of the library's conversions: decoding with ldexp,
// encoding by searching the (monotone) positive bit patterns.

struct Fmt16 {
    int man_bits;  // 10 for float16, 7 for bfloat16
    int bias;      // 15, 127
    uint16_t inf;  // 0x7c00, 0x7f80
};
const Fmt16 kHalf{10, 15, 0x7c00};
const Fmt16 kBf16{7, 127, 0x7f80};

// The value of a non-negative pattern up to and including `inf`, reading
// the all-ones exponent as if it were an ordinary one (so inf reads as the
// first value past the largest finite one).
double decode_ext(const Fmt16 &f, uint16_t h) {
    const int exp = h >> f.man_bits;
    const int man = h & ((1 << f.man_bits) - 1);
    if (exp == 0) return std::ldexp(double(man), 1 - f.bias - f.man_bits);
    return std::ldexp(double(man + (1 << f.man_bits)), exp - f.bias - f.man_bits);
}

double ref_decode(const Fmt16 &f, uint16_t h) {
    const bool neg = h & 0x8000;
    const uint16_t mag = h & 0x7fff;
    double v;
    if (mag > f.inf)
        v = std::numeric_limits<double>::quiet_NaN();
    else if (mag == f.inf)
        v = std::numeric_limits<double>::infinity();
    else
        v = decode_ext(f, mag);
    return neg ? -v : v;
}

// Round to nearest, ties to even. Not for NaN.
uint16_t ref_encode(const Fmt16 &f, double x) {
    const uint16_t sign = std::signbit(x) ? 0x8000 : 0;
    const double m = std::fabs(x);
    if (m >= decode_ext(f, f.inf)) return uint16_t(sign | f.inf);
    // Largest h with decode_ext(h) <= m.
    uint16_t lo = 0, hi = f.inf;  // decode_ext(lo) <= m < decode_ext(hi)
    while (hi - lo > 1) {
        const uint16_t mid = uint16_t((lo + hi) / 2);
        if (decode_ext(f, mid) <= m)
            lo = mid;
        else
            hi = mid;
    }
    const double dl = m - decode_ext(f, lo), dh = decode_ext(f, hi) - m;
    uint16_t r;
    if (dl < dh)
        r = lo;
    else if (dh < dl)
        r = hi;
    else
        r = (lo & 1) ? hi : lo;
    return uint16_t(sign | r);
}

bool is_nan16(const Fmt16 &f, uint16_t h) { return (h & 0x7fff) > f.inf; }

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

// ----------------------------------------------------------- names, matrix

void test_names_and_sizes(void **) {
    static const struct {
        DType t;
        size_t size;
        const char *name;
    } expect[] = {
        {DType::Bool, 1, "bool"},       {DType::Int8, 1, "int8"},           {DType::UInt8, 1, "uint8"},
        {DType::Int16, 2, "int16"},     {DType::Int32, 4, "int32"},         {DType::Int64, 8, "int64"},
        {DType::Float16, 2, "float16"}, {DType::BFloat16, 2, "bfloat16"},   {DType::Float32, 4, "float32"},
        {DType::Float64, 8, "float64"}, {DType::Complex64, 8, "complex64"}, {DType::Complex128, 16, "complex128"},
    };
    for (const auto &e : expect) {
        assert_int_equal(distc::dtype_size(e.t), e.size);
        assert_string_equal(distc::dtype_name(e.t), e.name);
    }
    static const char *const ops[] = {"SUM", "AVG", "PRODUCT", "MIN", "MAX", "BAND", "BOR", "BXOR", "PREMUL_SUM"};
    for (size_t i = 0; i < 9; ++i) assert_string_equal(distc::op_name(kOps[i]), ops[i]);
    // Out-of-range values get a name and size 0 instead of garbage.
    assert_int_equal(distc::dtype_size(DType(200)), 0);
    assert_non_null(distc::dtype_name(DType(200)));
    assert_non_null(distc::op_name(ReduceOp(200)));
}

bool expect_supported(DType t, ReduceOp op) {
    switch (op) {
        case ReduceOp::Sum: return true;
        case ReduceOp::Avg:
        case ReduceOp::PremulSum: return t != DType::Bool;
        case ReduceOp::Product:
        case ReduceOp::Min:
        case ReduceOp::Max: return !is_complex(t);
        case ReduceOp::Band:
        case ReduceOp::Bor:
        case ReduceOp::Bxor: return !is_complex(t) && !is_floating(t);
    }
    return false;
}

// Writes v (and -v as the imaginary part of complex types) as element i.
void put(DType t, void *p, size_t i, double v) {
    switch (t) {
        case DType::Bool: static_cast<uint8_t *>(p)[i] = v != 0; break;
        case DType::Int8: static_cast<int8_t *>(p)[i] = int8_t(v); break;
        case DType::UInt8: static_cast<uint8_t *>(p)[i] = uint8_t(v); break;
        case DType::Int16: static_cast<int16_t *>(p)[i] = int16_t(v); break;
        case DType::Int32: static_cast<int32_t *>(p)[i] = int32_t(v); break;
        case DType::Int64: static_cast<int64_t *>(p)[i] = int64_t(v); break;
        case DType::Float16: static_cast<uint16_t *>(p)[i] = ref_encode(kHalf, v); break;
        case DType::BFloat16: static_cast<uint16_t *>(p)[i] = ref_encode(kBf16, v); break;
        case DType::Float32: static_cast<float *>(p)[i] = float(v); break;
        case DType::Float64: static_cast<double *>(p)[i] = v; break;
        case DType::Complex64:
            static_cast<float *>(p)[2 * i] = float(v);
            static_cast<float *>(p)[2 * i + 1] = float(-v);
            break;
        case DType::Complex128:
            static_cast<double *>(p)[2 * i] = v;
            static_cast<double *>(p)[2 * i + 1] = -v;
            break;
    }
}

double get(DType t, const void *p, size_t i) {
    switch (t) {
        case DType::Bool: return static_cast<const uint8_t *>(p)[i];
        case DType::Int8: return static_cast<const int8_t *>(p)[i];
        case DType::UInt8: return static_cast<const uint8_t *>(p)[i];
        case DType::Int16: return static_cast<const int16_t *>(p)[i];
        case DType::Int32: return static_cast<const int32_t *>(p)[i];
        case DType::Int64: return double(static_cast<const int64_t *>(p)[i]);
        case DType::Float16: return ref_decode(kHalf, static_cast<const uint16_t *>(p)[i]);
        case DType::BFloat16: return ref_decode(kBf16, static_cast<const uint16_t *>(p)[i]);
        case DType::Float32: return static_cast<const float *>(p)[i];
        case DType::Float64: return static_cast<const double *>(p)[i];
        case DType::Complex64: {
            const float *f = static_cast<const float *>(p);
            return f[2 * i + 1] == -f[2 * i] ? f[2 * i] : std::nan("");
        }
        case DType::Complex128: {
            const double *d = static_cast<const double *>(p);
            return d[2 * i + 1] == -d[2 * i] ? d[2 * i] : std::nan("");
        }
    }
    return std::nan("");
}

// Every dtype x every op: defined pairs give the right answer on a small
// odd-length input (computed in place, c == a); undefined ones have no
// kernel and a message naming the op and the dtype.
void test_every_dtype_and_op(void **) {
    for (DType t : kDTypes) {
        for (ReduceOp op : kOps) {
            const char *tn = distc::dtype_name(t), *on = distc::op_name(op);
            const char *why = distc::reduce_op_unsupported(t, op);
            ReduceFn fn = distc::reduce_fn(t, op);
            if (!expect_supported(t, op)) {
                if (!why) fail_msg("%s on %s should be unsupported", on, tn);
                if (fn) fail_msg("reduce_fn(%s, %s) should be null", tn, on);
                if (!std::strstr(why, on) || !std::strstr(why, tn))
                    fail_msg("message for %s on %s does not name both: \"%s\"", on, tn, why);
                continue;
            }
            if (why) fail_msg("%s on %s should be supported, got \"%s\"", on, tn, why);
            if (!fn) fail_msg("reduce_fn(%s, %s) is null", tn, on);

            // a = {6, 6, 6}, b = {3, 3, 3} (bool: a = 1, b = 0).
            const bool bl = t == DType::Bool;
            const double av = bl ? 1 : 6, bv = bl ? 0 : 3;
            alignas(16) unsigned char a[3 * 16], b[3 * 16];
            for (size_t i = 0; i < 3; ++i) {
                put(t, a, i, av);
                put(t, b, i, bv);
            }
            double want = 0;
            switch (op) {
                case ReduceOp::Sum:
                case ReduceOp::Avg:
                case ReduceOp::PremulSum: want = bl ? 1 : 9; break;
                case ReduceOp::Product: want = bl ? 0 : 18; break;
                case ReduceOp::Min: want = bl ? 0 : 3; break;
                case ReduceOp::Max: want = bl ? 1 : 6; break;
                case ReduceOp::Band: want = bl ? 0 : 2; break;
                case ReduceOp::Bor: want = bl ? 1 : 7; break;
                case ReduceOp::Bxor: want = bl ? 1 : 5; break;
            }
            fn(a, a, b, 3);
            for (size_t i = 0; i < 3; ++i)
                if (get(t, a, i) != want)
                    fail_msg("%s %s: element %zu is %g, expected %g", tn, on, i, get(t, a, i), want);
        }
    }
}

void test_unsupported_messages(void **) {
    assert_string_equal(distc::reduce_op_unsupported(DType::Complex64, ReduceOp::Min),
                        "MIN is not defined on complex tensors (complex64)");
    assert_string_equal(distc::reduce_op_unsupported(DType::Float32, ReduceOp::Band),
                        "BAND needs an integer or bool tensor, not float32");
    assert_string_equal(distc::reduce_op_unsupported(DType::Bool, ReduceOp::Avg), "AVG is not defined on bool tensors");
    assert_non_null(std::strstr(distc::reduce_op_unsupported(DType::BFloat16, ReduceOp::Bxor), "bfloat16"));
    assert_non_null(std::strstr(distc::reduce_op_unsupported(DType::Complex128, ReduceOp::Product), "PRODUCT"));
    // Out-of-range enum values are refused, not indexed with.
    assert_non_null(distc::reduce_op_unsupported(DType(77), ReduceOp::Sum));
    assert_non_null(distc::reduce_op_unsupported(DType::Int32, ReduceOp(77)));
    assert_null(distc::reduce_fn(DType(77), ReduceOp::Sum));
    assert_null(distc::reduce_fn(DType::Int32, ReduceOp(77)));
}

// ----------------------------------------------------------------- integers

template <typename T>
T ref_int(ReduceOp op, T a, T b) {
    // Two's complement wraparound: do it in uint64 and keep the low bits.
    const uint64_t ua = uint64_t(int64_t(a)), ub = uint64_t(int64_t(b));
    switch (op) {
        case ReduceOp::Sum:
        case ReduceOp::Avg:
        case ReduceOp::PremulSum: return T(ua + ub);
        case ReduceOp::Product: return T(ua * ub);
        case ReduceOp::Min: return std::min(a, b);
        case ReduceOp::Max: return std::max(a, b);
        case ReduceOp::Band: return T(ua & ub);
        case ReduceOp::Bor: return T(ua | ub);
        case ReduceOp::Bxor: return T(ua ^ ub);
    }
    return 0;
}

template <typename T>
std::vector<T> int_values(size_t n) {
    const T special[] = {std::numeric_limits<T>::min(), std::numeric_limits<T>::max(), T(-1), T(0), T(1), T(-7)};
    std::vector<T> v(n);
    for (size_t i = 0; i < n; ++i) {
        const uint64_t r = next_rand();
        if (r % 4 == 0)
            v[i] = special[(r >> 8) % 6];
        else if (r % 4 == 1)
            v[i] = T(int64_t(r >> 32) % 100 - 50);  // small, either sign
        else
            v[i] = T(r >> 7);
    }
    return v;
}

template <typename T>
void check_int_type(DType t) {
    for (ReduceOp op : kOps) {
        for (size_t n : kLengths) {
            const std::vector<T> a = int_values<T>(n), b = int_values<T>(n);
            std::vector<T> want(n);
            for (size_t i = 0; i < n; ++i) want[i] = ref_int(op, a[i], b[i]);
            check_three_ways(t, op, a, b, want, same_bits<T>);
        }
    }
}

void test_integer_ops_against_reference(void **) {
    check_int_type<int8_t>(DType::Int8);
    check_int_type<uint8_t>(DType::UInt8);
    check_int_type<int16_t>(DType::Int16);
    check_int_type<int32_t>(DType::Int32);
    check_int_type<int64_t>(DType::Int64);
}

template <typename T>
T one_int(DType t, ReduceOp op, T a, T b) {
    T c = 0;
    run(t, op, &c, &a, &b, 1);
    return c;
}

void test_integer_hand_picked(void **) {
    // Wraparound, as torch's integer arithmetic does.
    assert_int_equal(one_int<int8_t>(DType::Int8, ReduceOp::Sum, 100, 100), -56);
    assert_int_equal(one_int<int8_t>(DType::Int8, ReduceOp::Sum, -128, -1), 127);
    assert_int_equal(one_int<int8_t>(DType::Int8, ReduceOp::Product, 16, 16), 0);
    assert_int_equal(one_int<int8_t>(DType::Int8, ReduceOp::Product, -3, 5), -15);
    assert_int_equal(one_int<uint8_t>(DType::UInt8, ReduceOp::Sum, 200, 100), 44);
    assert_int_equal(one_int<uint8_t>(DType::UInt8, ReduceOp::Product, 255, 255), 1);
    assert_int_equal(one_int<int16_t>(DType::Int16, ReduceOp::Product, -32768, -1), -32768);
    assert_int_equal(one_int<int32_t>(DType::Int32, ReduceOp::Sum, INT32_MAX, 1), INT32_MIN);
    assert_int_equal(one_int<int64_t>(DType::Int64, ReduceOp::Sum, INT64_MAX, 1), INT64_MIN);
    assert_int_equal(one_int<int64_t>(DType::Int64, ReduceOp::Product, int64_t(1) << 32, int64_t(1) << 32), 0);
    assert_int_equal(one_int<int64_t>(DType::Int64, ReduceOp::Product, -4000000000, 3), -12000000000);
    // Negative numbers order below positive ones; uint8 has none.
    assert_int_equal(one_int<int32_t>(DType::Int32, ReduceOp::Min, -5, 3), -5);
    assert_int_equal(one_int<int32_t>(DType::Int32, ReduceOp::Max, -5, 3), 3);
    assert_int_equal(one_int<int8_t>(DType::Int8, ReduceOp::Max, -128, -127), -127);
    assert_int_equal(one_int<uint8_t>(DType::UInt8, ReduceOp::Min, 255, 128), 128);
    assert_int_equal(one_int<int64_t>(DType::Int64, ReduceOp::Min, INT64_MIN, INT64_MAX), INT64_MIN);
    // Bitwise ops on two's complement patterns.
    assert_int_equal(one_int<int16_t>(DType::Int16, ReduceOp::Band, -1, 0x1234), 0x1234);
    assert_int_equal(one_int<int16_t>(DType::Int16, ReduceOp::Bxor, -1, 0x00ff), -256);
    assert_int_equal(one_int<uint8_t>(DType::UInt8, ReduceOp::Bor, 0xf0, 0x0f), 0xff);
    assert_int_equal(one_int<int64_t>(DType::Int64, ReduceOp::Bor, INT64_MIN, 1), INT64_MIN + 1);
    // AVG and PREMUL_SUM combine as SUM (the scaling is separate).
    assert_int_equal(one_int<int32_t>(DType::Int32, ReduceOp::Avg, -7, 3), -4);
    assert_int_equal(one_int<int32_t>(DType::Int32, ReduceOp::PremulSum, -7, 3), -4);
}

// --------------------------------------------------------------------- bool

void test_bool_ops(void **) {
    // All four combinations, in place and not, odd length.
    const std::vector<uint8_t> a = {0, 0, 1, 1, 1}, b = {0, 1, 0, 1, 1};
    const std::vector<uint8_t> or_ = {0, 1, 1, 1, 1}, and_ = {0, 0, 0, 1, 1}, xor_ = {0, 1, 1, 0, 0};
    for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Max, ReduceOp::Bor})
        check_three_ways(DType::Bool, op, a, b, or_, same_bits<uint8_t>);
    for (ReduceOp op : {ReduceOp::Product, ReduceOp::Min, ReduceOp::Band})
        check_three_ways(DType::Bool, op, a, b, and_, same_bits<uint8_t>);
    check_three_ways(DType::Bool, ReduceOp::Bxor, a, b, xor_, same_bits<uint8_t>);
    // Long inputs (the blocked path) and bytes other than 0/1: results are 0/1.
    for (size_t n : kLengths) {
        std::vector<uint8_t> x(n), y(n), o(n), d(n), e(n);
        for (size_t i = 0; i < n; ++i) {
            x[i] = uint8_t(next_rand() % 3 == 0 ? 0 : (next_rand() % 2 ? 1 : 2 + next_rand() % 250));
            y[i] = uint8_t(next_rand() % 2);
            o[i] = (x[i] || y[i]) ? 1 : 0;
            d[i] = (x[i] && y[i]) ? 1 : 0;
            e[i] = (!x[i] != !y[i]) ? 1 : 0;
        }
        check_three_ways(DType::Bool, ReduceOp::Sum, x, y, o, same_bits<uint8_t>);
        check_three_ways(DType::Bool, ReduceOp::Product, x, y, d, same_bits<uint8_t>);
        check_three_ways(DType::Bool, ReduceOp::Bxor, x, y, e, same_bits<uint8_t>);
    }
}

// ----------------------------------------------------------- float32/64

template <typename T>
T ref_float(ReduceOp op, T a, T b) {
    switch (op) {
        case ReduceOp::Product: return a * b;
        case ReduceOp::Min:
            return std::isnan(a) || std::isnan(b) ? std::numeric_limits<T>::quiet_NaN() : std::min(a, b);
        case ReduceOp::Max:
            return std::isnan(a) || std::isnan(b) ? std::numeric_limits<T>::quiet_NaN() : std::max(a, b);
        default: return a + b;
    }
}

template <typename T>
void check_float_type(DType t) {
    for (ReduceOp op :
         {ReduceOp::Sum, ReduceOp::Avg, ReduceOp::PremulSum, ReduceOp::Product, ReduceOp::Min, ReduceOp::Max}) {
        for (size_t n : kLengths) {
            std::vector<T> a(n), b(n), want(n);
            for (size_t i = 0; i < n; ++i) {
                // Quarter-integers of either sign: sums and products exact.
                a[i] = T(int(next_rand() % 2001) - 1000) / 4;
                b[i] = T(int(next_rand() % 2001) - 1000) / 4;
                want[i] = ref_float(op, a[i], b[i]);
            }
            // Avoid comparing min/max of equal-magnitude zeros of either sign.
            check_three_ways(t, op, a, b, want, [](T x, T y) { return x == y || (std::isnan(x) && std::isnan(y)); });
        }
    }
}

void test_float_ops(void **) {
    check_float_type<float>(DType::Float32);
    check_float_type<double>(DType::Float64);

    const float inf = std::numeric_limits<float>::infinity(), nan = std::nanf("");
    const std::vector<float> a = {-1.5f, -0.5f, -2.0f, inf, nan, 1.0f, 3e38f};
    const std::vector<float> b = {2.0f, -3.0f, 3.5f, -inf, 1.0f, nan, 3e38f};
    check_three_ways(DType::Float32, ReduceOp::Sum, a, b, std::vector<float>{0.5f, -3.5f, 1.5f, nan, nan, nan, inf},
                     same_or_nan<float>);
    check_three_ways(DType::Float32, ReduceOp::Product, a, b,
                     std::vector<float>{-3.0f, 1.5f, -7.0f, -inf, nan, nan, inf}, same_or_nan<float>);
    // MIN/MAX propagate NaN from either side.
    check_three_ways(DType::Float32, ReduceOp::Min, a, b,
                     std::vector<float>{-1.5f, -3.0f, -2.0f, -inf, nan, nan, 3e38f}, same_or_nan<float>);
    check_three_ways(DType::Float32, ReduceOp::Max, a, b, std::vector<float>{2.0f, -0.5f, 3.5f, inf, nan, nan, 3e38f},
                     same_or_nan<float>);

    const std::vector<double> da = {-1e308, 0.1, -0.0}, db = {-1e308, 0.2, -0.0};
    check_three_ways(DType::Float64, ReduceOp::Sum, da, db,
                     std::vector<double>{-std::numeric_limits<double>::infinity(), 0.1 + 0.2, -0.0},
                     same_or_nan<double>);
}

// ------------------------------------------------------- float16, bfloat16

uint16_t one16(DType t, ReduceOp op, uint16_t a, uint16_t b) {
    uint16_t c = 0;
    run(t, op, &c, &a, &b, 1);
    return c;
}

uint16_t scale16(DType t, uint16_t v, double factor) {
    distc::scale_in_place(t, &v, 1, factor);
    return v;
}

// Every pattern survives a trip through the kernels' float arithmetic
// (x + -0 == x and max(x, x) == x exactly), and NaN stays NaN.
void check_roundtrip_all(DType t, const Fmt16 &f) {
    for (uint32_t h = 0; h <= 0xffff; ++h) {
        const uint16_t x = uint16_t(h);
        const uint16_t s = one16(t, ReduceOp::Sum, x, 0x8000);
        const uint16_t m = one16(t, ReduceOp::Max, x, x);
        if (is_nan16(f, x)) {
            if (!is_nan16(f, s) || !is_nan16(f, m))
                fail_msg("%s NaN 0x%04x became 0x%04x / 0x%04x", distc::dtype_name(t), x, s, m);
        } else if (s != x || m != x) {
            fail_msg("%s 0x%04x came back as 0x%04x / 0x%04x", distc::dtype_name(t), x, s, m);
        }
        // float -> 16 bits of every representable value (via scale of 1.0).
        if (!is_nan16(f, x) && (x & 0x7fff) != f.inf) {
            const uint16_t one = t == DType::Float16 ? 0x3c00 : 0x3f80;
            const uint16_t r = scale16(t, one, ref_decode(f, x));
            if (r != x) fail_msg("%s 1.0 * value(0x%04x) gave 0x%04x", distc::dtype_name(t), x, r);
        }
    }
}

// Between every pair of adjacent finite positive values, the midpoint rounds
// to the even pattern, and anything off the midpoint to the nearer value
// (through the scale path, which converts an arbitrary float).
void check_midpoints(DType t, const Fmt16 &f) {
    const uint16_t one = t == DType::Float16 ? 0x3c00 : 0x3f80;
    const uint16_t minus_one = uint16_t(one | 0x8000);
    for (uint16_t h = 0; h < f.inf; ++h) {
        const double lo = decode_ext(f, h), hi = decode_ext(f, uint16_t(h + 1));
        const float mid = float((lo + hi) / 2);
        if (double(mid) != (lo + hi) / 2) fail_msg("midpoint not exact in float");
        const uint16_t even = (h & 1) ? uint16_t(h + 1) : h;
        const uint16_t below = h, above = uint16_t(h + 1);
        const struct {
            float v;
            uint16_t want;
        } cases[] = {{mid, even},
                     {std::nextafter(mid, 0.0f), below},
                     {std::nextafter(mid, std::numeric_limits<float>::infinity()), above}};
        for (const auto &c : cases) {
            uint16_t r = scale16(t, one, c.v);
            if (r != c.want)
                fail_msg("%s: %.9g rounded to 0x%04x, expected 0x%04x", distc::dtype_name(t), double(c.v), r, c.want);
            r = scale16(t, minus_one, c.v);
            if (r != (c.want | 0x8000))
                fail_msg("%s: -%.9g rounded to 0x%04x, expected 0x%04x", distc::dtype_name(t), double(c.v), r,
                         c.want | 0x8000);
        }
    }
}

// Random finite pairs: each op equals the correctly rounded exact result.
void check_random_pairs(DType t, const Fmt16 &f) {
    auto finite = [&]() {
        for (;;) {
            const uint16_t h = uint16_t(next_rand());
            if ((h & 0x7fff) < f.inf) return h;
        }
    };
    for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Product, ReduceOp::Min, ReduceOp::Max}) {
        for (size_t n : kLengths) {
            std::vector<uint16_t> a(n), b(n), want(n);
            for (size_t i = 0; i < n; ++i) {
                a[i] = finite();
                b[i] = finite();
                // Same exponent region half the time, so that sums mix.
                if (next_rand() % 2) b[i] = uint16_t((a[i] & f.inf) | (b[i] & ~f.inf));
                if ((b[i] & 0x7fff) >= f.inf) b[i] = a[i];
                const double x = ref_decode(f, a[i]), y = ref_decode(f, b[i]);
                double r;
                switch (op) {
                    case ReduceOp::Sum: r = x + y; break;
                    case ReduceOp::Product:
                        r = x * y;
                        // The kernels compute in float, as torch does. That is
                        // the correctly rounded result everywhere except for
                        // bfloat16 products below float's normal range, which
                        // round to float's subnormal grid first.
                        if (t == DType::BFloat16) r = double(float(r));
                        break;
                    case ReduceOp::Min: r = y < x ? y : x; break;
                    default: r = y > x ? y : x; break;
                }
                want[i] = ref_encode(f, r);
            }
            // Zeros: min/max of +0 and -0 may return either; compare values.
            check_three_ways(t, op, a, b, want, [&](uint16_t p, uint16_t q) {
                return p == q || (ref_decode(f, p) == 0 && ref_decode(f, q) == 0);
            });
        }
    }
}

void test_float16_roundtrip(void **) { check_roundtrip_all(DType::Float16, kHalf); }
void test_float16_rounding(void **) {
    check_midpoints(DType::Float16, kHalf);
    check_random_pairs(DType::Float16, kHalf);
}

void test_float16_hand_picked(void **) {
    const DType h = DType::Float16;
    const ReduceOp S = ReduceOp::Sum;
    // Ties to even: 1 + 2^-11 is halfway between 1 and 1 + 2^-10.
    assert_int_equal(one16(h, S, 0x3c00, 0x1000), 0x3c00);
    assert_int_equal(one16(h, S, 0x3c01, 0x1000), 0x3c02);
    assert_int_equal(one16(h, S, 0x3c00, 0x1001), 0x3c01);  // just above the tie
    // Overflow: 65504 + 32 = 65536 and the tie 65520 go to Inf; 65504 + 8 stays.
    assert_int_equal(one16(h, S, 0x7bff, 0x5000), 0x7c00);
    assert_int_equal(one16(h, S, 0x7bff, 0x4c00), 0x7c00);
    assert_int_equal(one16(h, S, 0x7bff, 0x4800), 0x7bff);
    assert_int_equal(one16(h, S, 0xfbff, 0xd000), 0xfc00);
    assert_int_equal(one16(h, ReduceOp::Product, 0x5bf8 /* 255 */, 0x5bf8), 0x7bf0 /* 65024 */);
    assert_int_equal(one16(h, ReduceOp::Product, 0x5c00 /* 256 */, 0x5c00), 0x7c00);
    // Inf and NaN.
    assert_int_equal(one16(h, S, 0x7c00, 0x3c00), 0x7c00);
    assert_int_equal(one16(h, S, 0xfc00, 0xbc00), 0xfc00);
    assert_true(is_nan16(kHalf, one16(h, S, 0x7c00, 0xfc00)));
    assert_true(is_nan16(kHalf, one16(h, S, 0x7e00, 0x3c00)));
    assert_true(is_nan16(kHalf, one16(h, ReduceOp::Product, 0x7c00, 0x0000)));
    assert_true(is_nan16(kHalf, one16(h, ReduceOp::Min, 0x3c00, 0x7e01)));
    assert_true(is_nan16(kHalf, one16(h, ReduceOp::Max, 0xfe00, 0x3c00)));
    // Subnormals: 2^-24 is the smallest; the largest plus it is the smallest normal.
    assert_int_equal(one16(h, S, 0x0001, 0x0001), 0x0002);
    assert_int_equal(one16(h, S, 0x03ff, 0x0001), 0x0400);
    assert_int_equal(one16(h, S, 0x0400, 0x8001), 0x03ff);
    assert_int_equal(one16(h, S, 0x8001, 0x8001), 0x8002);
    assert_int_equal(one16(h, ReduceOp::Product, 0x0001, 0x3800 /* 0.5 */), 0x0000);  // tie to even 0
    assert_int_equal(one16(h, ReduceOp::Product, 0x0003, 0x3800), 0x0002);            // 1.5 ulp -> 2
    assert_int_equal(one16(h, ReduceOp::Product, 0x0001, 0x3a00 /* 0.75 */), 0x0001);
    assert_int_equal(one16(h, ReduceOp::Product, 0x8001, 0x3800), 0x8000);  // -0
    assert_int_equal(one16(h, ReduceOp::Product, 0x0400, 0x3800), 0x0200);  // normal -> subnormal
    // Negative numbers.
    assert_int_equal(one16(h, S, 0xc000 /* -2 */, 0x3c00 /* 1 */), 0xbc00);
    assert_int_equal(one16(h, ReduceOp::Min, 0xc000, 0x3c00), 0xc000);
    assert_int_equal(one16(h, ReduceOp::Max, 0xc000, 0xc200 /* -3 */), 0xc000);
    assert_int_equal(one16(h, ReduceOp::Product, 0xc000, 0xc200), 0x4600 /* 6 */);
    // Conversions of values that are not sums of halves (scale path).
    assert_int_equal(scale16(h, 0x3c00, 0.1), 0x2e66);
    assert_int_equal(scale16(h, 0x3c00, 1e-8), 0x0000);
    assert_int_equal(scale16(h, 0x3c00, 5.96e-8), 0x0001);
    assert_int_equal(scale16(h, 0x3c00, 65519.0), 0x7bff);
    assert_int_equal(scale16(h, 0x3c00, 1e10), 0x7c00);
    assert_int_equal(scale16(h, 0x3c00, -1e10), 0xfc00);
    assert_true(is_nan16(kHalf, scale16(h, 0x3c00, std::nan(""))));
}

void test_bfloat16_roundtrip(void **) { check_roundtrip_all(DType::BFloat16, kBf16); }
void test_bfloat16_rounding(void **) {
    check_midpoints(DType::BFloat16, kBf16);
    check_random_pairs(DType::BFloat16, kBf16);
}

void test_bfloat16_hand_picked(void **) {
    const DType h = DType::BFloat16;
    const ReduceOp S = ReduceOp::Sum;
    // 1 + 2^-8 is halfway between 1 and 1 + 2^-7.
    assert_int_equal(one16(h, S, 0x3f80, 0x3b80), 0x3f80);
    assert_int_equal(one16(h, S, 0x3f81, 0x3b80), 0x3f82);
    // 256 + 1 = 257 is not representable (8 bits): tie goes to even 256.
    assert_int_equal(one16(h, S, 0x4380 /* 256 */, 0x3f80), 0x4380);
    assert_int_equal(one16(h, S, 0x4380, 0x4000 /* 2 */), 0x4381 /* 258 */);
    // Largest finite doubled is Inf; Inf and NaN behave.
    assert_int_equal(one16(h, S, 0x7f7f, 0x7f7f), 0x7f80);
    assert_int_equal(one16(h, S, 0xff7f, 0xff7f), 0xff80);
    assert_int_equal(one16(h, S, 0x7f80, 0xbf80), 0x7f80);
    assert_true(is_nan16(kBf16, one16(h, S, 0x7f80, 0xff80)));
    assert_true(is_nan16(kBf16, one16(h, S, 0x7fc0, 0x3f80)));
    assert_true(is_nan16(kBf16, one16(h, ReduceOp::Max, 0x3f80, 0xffc1)));
    // Subnormals (as float's).
    assert_int_equal(one16(h, S, 0x0001, 0x0001), 0x0002);
    assert_int_equal(one16(h, S, 0x007f, 0x0001), 0x0080);
    // Negative numbers.
    assert_int_equal(one16(h, S, 0xc000 /* -2 */, 0x3f80), 0xbf80);
    assert_int_equal(one16(h, ReduceOp::Min, 0xc000, 0x3f80), 0xc000);
    assert_int_equal(one16(h, ReduceOp::Product, 0xc000, 0xc040 /* -3 */), 0x40c0 /* 6 */);
    // float -> bfloat16 of values between patterns.
    assert_int_equal(scale16(h, 0x3f80, 0.1), 0x3dcd);
    assert_int_equal(scale16(h, 0x3f80, 3.0e38), 0x7f62);
    assert_int_equal(scale16(h, 0x3f80, 3.4e38), 0x7f80);  // above the last tie: Inf
    assert_true(is_nan16(kBf16, scale16(h, 0x3f80, std::nan(""))));
}

// ------------------------------------------------------------------ complex

template <typename R>
void check_complex(DType t) {
    // (re, im) pairs: 1-2i + 0.5+2i = 1.5, 3.5+4i + -1-4i = 2.5, -0.25 + -0.25 = -0.5
    const std::vector<R> a = {1, -2, 3.5, 4, -0.25, 0}, b = {0.5, 2, -1, -4, -0.25, 0};
    const std::vector<R> want = {1.5, 0, 2.5, 0, -0.5, 0};
    ReduceFn fn = distc::reduce_fn(t, ReduceOp::Sum);
    assert_non_null(fn);
    std::vector<R> c(6 + 2, R(42));
    fn(c.data(), a.data(), b.data(), 3);  // n counts complex elements
    for (size_t i = 0; i < 6; ++i) assert_true(c[i] == want[i]);
    assert_true(c[6] == 42 && c[7] == 42);
    std::vector<R> x = a;
    fn(x.data(), x.data(), b.data(), 3);
    assert_true(x == want);
    fn(x.data(), a.data(), b.data(), 0);
    assert_true(x == want);
    // Across the blocked path: n = 0..40 complex elements, in place.
    for (size_t n = 0; n <= 40; ++n) {
        std::vector<R> p(2 * n), q(2 * n), r(2 * n);
        for (size_t i = 0; i < 2 * n; ++i) {
            p[i] = R(int(next_rand() % 200) - 100) / 8;
            q[i] = R(int(next_rand() % 200) - 100) / 8;
            r[i] = p[i] + q[i];
        }
        distc::reduce_fn(t, ReduceOp::Avg)(q.data(), p.data(), q.data(), n);
        assert_true(q == r);
    }
}

void test_complex_sum(void **) {
    check_complex<float>(DType::Complex64);
    check_complex<double>(DType::Complex128);
}

// ------------------------------------------------------------ scale_in_place

template <typename T>
std::vector<T> scaled(DType t, std::vector<T> v, double factor) {
    // n counts elements of t: a complex element is two entries of v.
    distc::scale_in_place(t, v.data(), is_complex(t) ? v.size() / 2 : v.size(), factor);
    return v;
}

void test_scale_float(void **) {
    using VF = std::vector<float>;
    using VD = std::vector<double>;
    assert_true(scaled(DType::Float32, VF{1.5f, -2.0f, 3.0f, -0.0f, 7.0f}, 0.5) ==
                (VF{0.75f, -1.0f, 1.5f, -0.0f, 3.5f}));
    // float32 multiplies in float: by float(0.1), not by the double 0.1.
    assert_true(scaled(DType::Float32, VF{3.0f}, 0.1)[0] == 3.0f * 0.1f);
    assert_true(scaled(DType::Float64, VD{3.0, -6.0, 1e308}, 0.25) == (VD{0.75, -1.5, 2.5e307}));
    assert_true(scaled(DType::Float64, VD{3.0}, 0.1)[0] == 3.0 * 0.1);
    const VF big = scaled(DType::Float32, VF{3e38f, -3e38f}, 2.0);
    assert_true(std::isinf(big[0]) && big[0] > 0 && std::isinf(big[1]) && big[1] < 0);
    // Long inputs.
    VF v(1000);
    for (size_t i = 0; i < v.size(); ++i) v[i] = float(i) - 500;
    v = scaled(DType::Float32, v, 0.25);
    for (size_t i = 0; i < v.size(); ++i) assert_true(v[i] == (float(i) - 500) / 4);
}

void test_scale_integer(void **) {
    using V32 = std::vector<int32_t>;
    using V64 = std::vector<int64_t>;
    // Truncation toward zero, negative values included (AVG over 2 ranks).
    assert_true(scaled(DType::Int32, V32{7, -7, 5, -5, 0, 49, 1, -1}, 0.5) == (V32{3, -3, 2, -2, 0, 24, 0, 0}));
    assert_true(scaled(DType::Int8, std::vector<int8_t>{127, -128, -3}, 0.5) == (std::vector<int8_t>{63, -64, -1}));
    assert_true(scaled(DType::UInt8, std::vector<uint8_t>{255, 1}, 0.5) == (std::vector<uint8_t>{127, 0}));
    assert_true(scaled(DType::Int16, std::vector<int16_t>{-32768, 100}, 1.0 / 3) == (std::vector<int16_t>{-10922, 33}));
    // AVG: k * size contributions scaled by 1/size give back exactly k, for
    // every size up to 200 (49 * (1/49) is 0.999... in double).
    for (int size = 1; size <= 200; ++size) {
        const double f = 1.0 / size;
        V32 v32 = {size, -size, 7 * size, -7 * size, 7 * size + size - 1, -(7 * size + size - 1)};
        v32 = scaled(DType::Int32, v32, f);
        if (v32 != V32{1, -1, 7, -7, 7, -7}) fail_msg("int32 AVG over %d ranks is off", size);
        V64 v64 = {int64_t(size) << 40, -(int64_t(size) << 40), size, size - 1};
        v64 = scaled(DType::Int64, v64, f);
        if (v64 != V64{int64_t(1) << 40, -(int64_t(1) << 40), 1, 0}) fail_msg("int64 AVG over %d ranks is off", size);
    }
    // int64 beyond 2^53 keeps its low bits.
    assert_true(scaled(DType::Int64, V64{INT64_MAX, INT64_MIN, INT64_MAX - 2}, 0.5) ==
                (V64{INT64_MAX / 2, INT64_MIN / 2, (INT64_MAX - 2) / 2}));
    assert_true(scaled(DType::Int64, V64{(int64_t(1) << 60) + 3}, 1.0 / 3) == (V64{((int64_t(1) << 60) + 3) / 3}));
    // Other factors: exact product, truncated toward zero.
    assert_true(scaled(DType::Int32, V32{10, -10, 7, -7}, 0.3) == (V32{3, -3, 2, -2}));
    assert_true(scaled(DType::Int32, V32{3, -3, 5, -5}, 1.5) == (V32{4, -4, 7, -7}));
    assert_true(scaled(DType::Int32, V32{7, -7}, -0.5) == (V32{-3, 3}));
    assert_true(scaled(DType::Int64, V64{3, -3}, 3.0) == (V64{9, -9}));
    assert_true(scaled(DType::Int32, V32{3, -3}, 0.0) == (V32{0, 0}));
    assert_true(scaled(DType::Int32, V32{3, -3}, 1.0) == (V32{3, -3}));
    // Out of range: integer factors wrap like integer arithmetic, fractional
    // ones saturate; NaN gives 0.
    assert_true(scaled(DType::Int8, std::vector<int8_t>{100}, 2.0) == (std::vector<int8_t>{-56}));
    assert_true(scaled(DType::Int32, V32{INT32_MIN}, -1.0) == (V32{INT32_MIN}));
    assert_true(scaled(DType::Int8, std::vector<int8_t>{100, -100}, 1.5) == (std::vector<int8_t>{127, -128}));
    assert_true(scaled(DType::UInt8, std::vector<uint8_t>{200, 3}, -0.5) == (std::vector<uint8_t>{0, 0}));
    assert_true(scaled(DType::Int64, V64{INT64_MAX, INT64_MIN}, 1.5) == (V64{INT64_MAX, INT64_MIN}));
    assert_true(scaled(DType::Int32, V32{5, -5}, std::nan("")) == (V32{0, 0}));
}

void test_scale_half_complex_bool(void **) {
    using V16 = std::vector<uint16_t>;
    // float16: 3, -3, 65504 halved; doubling the largest finite overflows.
    assert_true(scaled(DType::Float16, V16{0x4200, 0xc200, 0x7bff, 0x0001}, 0.5) ==
                (V16{0x3e00, 0xbe00, 0x77ff, 0x0000}));
    assert_true(scaled(DType::Float16, V16{0x7bff, 0xfbff}, 2.0) == (V16{0x7c00, 0xfc00}));
    assert_true(scaled(DType::Float16, V16{0x4200}, 1.0 / 3) == (V16{0x3c00}));
    // bfloat16: 3 * 0.5 = 1.5; -3 * 0.25 = -0.75.
    assert_true(scaled(DType::BFloat16, V16{0x4040, 0xc040}, 0.5) == (V16{0x3fc0, 0xbfc0}));
    assert_true(scaled(DType::BFloat16, V16{0xc040}, 0.25) == (V16{0xbf40}));
    // complex: both components by the real factor.
    assert_true(scaled(DType::Complex64, std::vector<float>{1, -2, 3, 4}, 0.5) ==
                (std::vector<float>{0.5f, -1, 1.5f, 2}));
    assert_true(scaled(DType::Complex128, std::vector<double>{1, -2, 3, 4, -8, 0}, 0.25) ==
                (std::vector<double>{0.25, -0.5, 0.75, 1, -2, 0}));
    // bool: untouched.
    assert_true(scaled(DType::Bool, std::vector<uint8_t>{0, 1, 1}, 0.5) == (std::vector<uint8_t>{0, 1, 1}));
    // n == 0 touches nothing (a null pointer is fine).
    for (DType t : kDTypes) distc::scale_in_place(t, nullptr, 0, 0.5);
}

// Long inputs (the blocked paths) scale exactly like one element at a time,
// and nothing past n is written.
void test_scale_long_inputs(void **) {
    for (DType t : kDTypes) {
        const size_t es = distc::dtype_size(t);
        for (size_t n : kLengths) {
            std::vector<unsigned char> v((n + 1) * es), w;
            for (auto &byte : v) byte = uint8_t(next_rand());
            if (t == DType::Bool)
                for (auto &byte : v) byte &= 1;
            w = v;
            for (double factor : {0.5, 1.0 / 3, -2.5, 3.0}) {
                distc::scale_in_place(t, v.data(), n, factor);
                for (size_t i = 0; i < n; ++i) distc::scale_in_place(t, w.data() + i * es, 1, factor);
                if (std::memcmp(v.data(), w.data(), v.size()) != 0)
                    fail_msg("%s n=%zu factor %g: blocked and elementwise scaling differ", distc::dtype_name(t), n,
                             factor);
            }
        }
    }
}

}  // namespace

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_names_and_sizes),
        cmocka_unit_test(test_every_dtype_and_op),
        cmocka_unit_test(test_unsupported_messages),
        cmocka_unit_test(test_integer_ops_against_reference),
        cmocka_unit_test(test_integer_hand_picked),
        cmocka_unit_test(test_bool_ops),
        cmocka_unit_test(test_float_ops),
        cmocka_unit_test(test_float16_roundtrip),
        cmocka_unit_test(test_float16_rounding),
        cmocka_unit_test(test_float16_hand_picked),
        cmocka_unit_test(test_bfloat16_roundtrip),
        cmocka_unit_test(test_bfloat16_rounding),
        cmocka_unit_test(test_bfloat16_hand_picked),
        cmocka_unit_test(test_complex_sum),
        cmocka_unit_test(test_scale_float),
        cmocka_unit_test(test_scale_integer),
        cmocka_unit_test(test_scale_half_complex_bool),
        cmocka_unit_test(test_scale_long_inputs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

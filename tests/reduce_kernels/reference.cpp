// test_reduce_kernels' reference (reference.hpp): the dtypes, ops and lengths,
// the seeded generator, and float16 and bfloat16 decoded and encoded by hand.
#include "reference.hpp"

const DType kDTypes[] = {DType::Bool,    DType::Int8,    DType::UInt8,     DType::Int16,
                         DType::Int32,   DType::Int64,   DType::Float16,   DType::BFloat16,
                         DType::Float32, DType::Float64, DType::Complex64, DType::Complex128};
const ReduceOp kOps[] = {ReduceOp::Sum,  ReduceOp::Avg, ReduceOp::Product, ReduceOp::Min,      ReduceOp::Max,
                         ReduceOp::Band, ReduceOp::Bor, ReduceOp::Bxor,    ReduceOp::PremulSum};
const size_t kLengths[] = {0, 1, 3, 7, 8, 15, 16, 17, 31, 33, 64, 65, 130};

namespace {

uint64_t g_rng = 0x9e3779b97f4a7c15ull;

}  // namespace

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

const Fmt16 kHalf{10, 15, 0x7c00};
const Fmt16 kBf16{7, 127, 0x7f80};

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

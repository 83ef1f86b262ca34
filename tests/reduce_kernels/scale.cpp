// test_reduce_kernels' scale_in_place (AVG and PREMUL_SUM): floating,
// integer (truncation, saturation), 16-bit, complex and bool, long inputs.
#include "reference.hpp"
#include "tests.hpp"

// ------------------------------------------------------------ scale_in_place

namespace {

template <typename T>
std::vector<T> scaled(DType t, std::vector<T> v, double factor) {
    // n counts elements of t: a complex element is two entries of v.
    distc::scale_in_place(t, v.data(), is_complex(t) ? v.size() / 2 : v.size(), factor);
    return v;
}

}  // namespace

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

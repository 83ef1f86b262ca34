// test_reduce_kernels' integer and bool kernels: every op against a
// wraparound reference, hand-picked edges, bool's 0/1 results.
#include "reference.hpp"
#include "tests.hpp"

// ----------------------------------------------------------------- integers

namespace {

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

}  // namespace

void test_integer_ops_against_reference(void **) {
    check_int_type<int8_t>(DType::Int8);
    check_int_type<uint8_t>(DType::UInt8);
    check_int_type<int16_t>(DType::Int16);
    check_int_type<int32_t>(DType::Int32);
    check_int_type<int64_t>(DType::Int64);
}

namespace {

template <typename T>
T one_int(DType t, ReduceOp op, T a, T b) {
    T c = 0;
    run(t, op, &c, &a, &b, 1);
    return c;
}

}  // namespace

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

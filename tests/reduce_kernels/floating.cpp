// test_reduce_kernels' float32, float64 and complex kernels: quarter-integers
// against a reference, Inf and NaN, complex sums across the blocked path.
#include "reference.hpp"
#include "tests.hpp"

// ----------------------------------------------------------- float32/64

namespace {

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

}  // namespace

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

// ------------------------------------------------------------------ complex

namespace {

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

}  // namespace

void test_complex_sum(void **) {
    check_complex<float>(DType::Complex64);
    check_complex<double>(DType::Complex128);
}

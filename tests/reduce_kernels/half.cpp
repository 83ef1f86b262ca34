// test_reduce_kernels' float16 and bfloat16 kernels: every pattern's round
// trip, rounding at every midpoint and of random pairs, hand-picked edges.
#include "reference.hpp"
#include "tests.hpp"

// ------------------------------------------------------- float16, bfloat16

namespace {

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

}  // namespace

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

// test_reduce_kernels' matrix: dtype names and sizes, every dtype x op defined
// or refused as torch does, and the messages of refused pairs.
#include "reference.hpp"
#include "tests.hpp"

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

namespace {

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

}  // namespace

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

// Element types and reduction operators as the core sees them (the C API's
// DLPack dtypes and distc_reduce_op values are translated in capi/).
#pragma once

#include <cstddef>
#include <cstdint>

namespace distc {

enum class DType : uint8_t {
    Bool,
    Int8,
    UInt8,
    Int16,
    Int32,
    Int64,
    Float16,
    BFloat16,
    Float32,
    Float64,
    Complex64,
    Complex128
};

enum class ReduceOp : uint8_t { Sum, Avg, Product, Min, Max, Band, Bor, Bxor, PremulSum };

// Inline: every size computation on the hot path asks it.
inline size_t dtype_size(DType t) {
    static constexpr uint8_t kSizes[] = {1, 1, 1, 2, 4, 8, 2, 2, 4, 8, 8, 16};
    unsigned i = static_cast<unsigned>(t);
    return i < sizeof kSizes ? kSizes[i] : 0;
}
// "float32", as torch names them.
inline const char *dtype_name(DType t) {
    static constexpr const char *kNames[] = {"bool",    "int8",     "uint8",   "int16",   "int32",     "int64",
                                             "float16", "bfloat16", "float32", "float64", "complex64", "complex128"};
    unsigned i = static_cast<unsigned>(t);
    return i < sizeof kNames / sizeof *kNames ? kNames[i] : "unknown";
}
const char *op_name(ReduceOp op);  // "SUM", ...

// gloo's reduction signature: c[i] = a[i] (op) b[i] for n elements; c may alias a or b.
using ReduceFn = void (*)(void *c, const void *a, const void *b, size_t n);

// The elementwise function that combines two contributions under `op` for
// `t`. AVG combines as SUM (the division is a separate scale step, once);
// PREMUL_SUM too (inputs are scaled first). Returns nullptr for combinations
// that have no meaning (see reduce_op_supported).
ReduceFn reduce_fn(DType t, ReduceOp op);

// nullptr when `op` is defined on `t`, else a static message explaining why not:
// MIN/MAX/PRODUCT on complex; BAND/BOR/BXOR on floating or complex types.
const char *reduce_op_unsupported(DType t, ReduceOp op);

// data[i] *= factor for n elements of type t (AVG divides by the world size
// as factor 1/size; PREMUL_SUM multiplies by the user's factor). Integer types
// round toward zero as torch's integer division does for AVG; bool is
// rejected by reduce_op_unsupported for AVG/PREMUL_SUM.
void scale_in_place(DType t, void *data, size_t n, double factor);

// float32 <-> float16 / bfloat16 (`to` Float16 or BFloat16), round to nearest
// even, for compressing buckets.
void narrow_floats(DType to, uint16_t *dst, const float *src, size_t n);
void widen_floats(DType from, float *dst, const uint16_t *src, size_t n);

}  // namespace distc

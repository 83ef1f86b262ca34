#include "capi/tensor_args.hpp"

#include "capi/args.hpp"
#include "capi/guard.hpp"
#include "core/util/checked.hpp"

namespace distc::capi {

namespace {

// kDLBool arrived in DLPack 0.8; Debian's header is 0.6. The value is fixed by the spec.
constexpr int kBoolCode = 6;

// The core dtype of a DLPack one, or -1 when unsupported.
int dtype_of(DLDataType d) {
    if (d.lanes != 1) return -1;
    switch (static_cast<int>(d.code)) {
        case kBoolCode: return d.bits == 8 ? int(DType::Bool) : -1;
        case kDLInt:
            if (d.bits == 8) return int(DType::Int8);
            if (d.bits == 16) return int(DType::Int16);
            if (d.bits == 32) return int(DType::Int32);
            if (d.bits == 64) return int(DType::Int64);
            return -1;
        case kDLUInt: return d.bits == 8 ? int(DType::UInt8) : -1;
        case kDLFloat:
            if (d.bits == 16) return int(DType::Float16);
            if (d.bits == 32) return int(DType::Float32);
            if (d.bits == 64) return int(DType::Float64);
            return -1;
        case kDLBfloat: return d.bits == 16 ? int(DType::BFloat16) : -1;
        case kDLComplex:
            if (d.bits == 64) return int(DType::Complex64);
            if (d.bits == 128) return int(DType::Complex128);
            return -1;
        default: return -1;
    }
}

const char *device_name(int type) {
    switch (type) {
        case kDLCPU: return "CPU";
        case kDLCUDA: return "CUDA";
        case kDLCUDAHost: return "CUDA host";
        case kDLCUDAManaged: return "CUDA managed";
        case kDLROCM: return "ROCm";
        default: return "device";
    }
}

std::string device_list(uint64_t mask) {
    std::string s;
    for (int t = 0; t < 64; ++t)
        if (mask >> t & 1) s += (s.empty() ? "" : ", ") + std::string(device_name(t));
    return s;
}

// A power of two.
size_t element_alignment(DType t) {
    size_t n = dtype_size(t);
    return t == DType::Complex64 || t == DType::Complex128 ? n / 2 : n;
}

// What is wrong with a tensor argument (Fault::None: nothing).
enum class Fault : uint8_t {
    None,
    Null,
    Device,
    Ndim,
    NoShape,
    Dtype,
    NegativeDim,
    TooLarge,
    Offset,
    Strides,
    NoData,
    Misaligned
};

// The checks of tensor_arg, with no message built: this runs on every call.
// On a Strides fault, `dim` is the offending dimension.
Fault check_tensor(uint64_t device_types, const DLTensor *t, Tensor &out, int &dim) {
    if (!t) return Fault::Null;
    int type = enum_value(t->device.device_type);
    if (type < 0 || type >= 64 || !(device_types >> type & 1)) return Fault::Device;
    if (t->ndim < 0) return Fault::Ndim;
    if (t->ndim > 0 && !t->shape) return Fault::NoShape;
    int dt = dtype_of(t->dtype);
    if (dt < 0) return Fault::Dtype;
    bool empty = false;
    for (int i = 0; i < t->ndim; ++i) {
        if (t->shape[i] < 0) return Fault::NegativeDim;
        empty |= t->shape[i] == 0;
    }
    // The shape's product, checked: a wrapped count would let a small buffer pass for a huge one.
    uint64_t numel = empty ? 0 : 1, nbytes = 0;
    for (int i = 0; i < t->ndim && !empty; ++i)
        if (!mul_fits(numel, static_cast<uint64_t>(t->shape[i]), numel)) return Fault::TooLarge;
    if (!mul_fits(numel, dtype_size(static_cast<DType>(dt)), nbytes) || nbytes > kMaxBytes) return Fault::TooLarge;
    uintptr_t base = reinterpret_cast<uintptr_t>(t->data), end = 0;
    if (t->byte_offset > kMaxBytes || __builtin_add_overflow(base, t->byte_offset + nbytes, &end)) return Fault::Offset;
    // Contiguous: no strides, or the compact row-major ones (dimensions of size 1 may have any stride).
    // An empty tensor has no element to be out of place; the running product then stays below numel.
    if (t->strides && !empty) {
        int64_t expect = 1;
        for (int i = t->ndim - 1; i >= 0; --i) {
            if (t->shape[i] != 1 && t->strides[i] != expect) {
                dim = i;
                return Fault::Strides;
            }
            expect *= t->shape[i];
        }
    }
    if (!t->data && numel > 0) return Fault::NoData;
    // The kernels read elements as their type (complex ones as two of their parts).
    if (numel > 0 && ((base + t->byte_offset) & (element_alignment(static_cast<DType>(dt)) - 1)) != 0)
        return Fault::Misaligned;
    // An empty tensor may have no data and still an offset: nothing to point at.
    out.data = t->data ? static_cast<char *>(t->data) + t->byte_offset : nullptr;
    out.numel = numel;
    out.dtype = static_cast<DType>(dt);
    out.dim0 = t->ndim == 0 ? 1 : t->shape[0];
    out.device_type = type;
    out.device_id = t->device.device_id;
    return Fault::None;
}

std::string shape_text(const DLTensor *t) {
    std::string s = "{";
    for (int i = 0; i < t->ndim; ++i) s += (i ? ", " : "") + std::to_string(t->shape[i]);
    return s + "}";
}

// The message for a fault check_tensor found.
// `g` is null for a tensor that is only described (any device).
[[noreturn, gnu::cold]] void fail_tensor(const ProcessGroup *g, const DLTensor *t, const char *name, Fault f, int dim) {
    std::string n(name);
    switch (f) {
        case Fault::Null: fail(DISTC_EINVAL, n + " is NULL");
        case Fault::Device: {
            int type = enum_value(t->device.device_type);
            if (!g) fail(DISTC_EINVAL, n + " has DLPack device type " + std::to_string(type) + ", which is not one");
            fail(DISTC_EINVAL, n + " is in " + device_name(type) + " memory (DLPack device type " +
                                   std::to_string(type) + "); the " + g->backend_name() + " backend takes " +
                                   device_list(g->device_types()) + " memory");
        }
        case Fault::Ndim: fail(DISTC_EINVAL, n + " has ndim < 0");
        case Fault::NoShape: fail(DISTC_EINVAL, n + " has ndim > 0 but no shape");
        case Fault::Dtype:
            if (t->dtype.lanes != 1)
                fail(DISTC_EINVAL, n + " has a vector dtype (" + std::to_string(t->dtype.lanes) +
                                       " lanes); only scalars are supported");
            fail(DISTC_EINVAL, n + " has an unsupported dtype (DLPack code " + std::to_string(t->dtype.code) + ", " +
                                   std::to_string(t->dtype.bits) +
                                   " bits); supported: bool, int8, uint8, int16, int32, "
                                   "int64, float16, bfloat16, float32, float64, complex64, complex128");
        case Fault::NegativeDim: fail(DISTC_EINVAL, n + " has a negative dimension");
        case Fault::TooLarge:
            fail(DISTC_EINVAL, n + " has shape " + shape_text(t) + " of " + std::to_string(t->dtype.bits / 8) +
                                   "-byte elements: over DISTC_TENSOR_MAX_BYTES (2^48 bytes)");
        case Fault::Offset:
            fail(DISTC_EINVAL, n + " has byte_offset " + std::to_string(t->byte_offset) +
                                   (t->byte_offset > kMaxBytes ? ", over DISTC_TENSOR_MAX_BYTES (2^48 bytes)"
                                                               : ", which with its size runs past the end of memory"));
        case Fault::Strides: {
            int64_t expect = 1;
            for (int i = t->ndim - 1; i > dim; --i) expect *= t->shape[i];
            fail(DISTC_EINVAL, n + " is not contiguous (stride " + std::to_string(t->strides[dim]) + " in dimension " +
                                   std::to_string(dim) + ", expected " + std::to_string(expect) +
                                   "); make a contiguous copy first");
        }
        case Fault::NoData: fail(DISTC_EINVAL, n + " has no data but shape " + shape_text(t));
        case Fault::Misaligned:
            fail(DISTC_EINVAL, n + "'s data (with byte_offset " + std::to_string(t->byte_offset) +
                                   ") is not aligned to " +
                                   std::to_string(element_alignment(static_cast<DType>(dtype_of(t->dtype)))) +
                                   " bytes, as its elements must be");
        case Fault::None: break;
    }
    fail(DISTC_EINTERNAL, n + ": unexplained fault");
}

// `t` checked against `devices` (the group's, when g is given); `name()`
// names it, called only for the error: a call that passes builds no string.
template <typename Name>
void check_into(uint64_t devices, const ProcessGroup *g, const DLTensor *t, Tensor &out, Name name) {
    int dim = 0;
    Fault f = check_tensor(devices, t, out, dim);
    if (f != Fault::None) fail_tensor(g, t, name().c_str(), f, dim);
}

template <typename Name>
Tensor checked(uint64_t devices, const ProcessGroup *g, const DLTensor *t, Name name) {
    Tensor out;
    check_into(devices, g, t, out, name);
    return out;
}

}  // namespace

Tensor tensor_arg(const ProcessGroup &g, const DLTensor *t, const char *name) {
    return checked(g.device_types(), &g, t, [name] { return std::string(name); });
}

Tensor tensor_arg(const ProcessGroup &g, const DLTensor *t, FnRef<std::string()> name) {
    return checked(g.device_types(), &g, t, name);
}

Tensor described_tensor_arg(const DLTensor *t, const char *name) {
    return checked(~uint64_t{0}, nullptr, t, [name] { return std::string(name); });
}

TensorList tensor_list_arg(const ProcessGroup &g, const DLTensor *const *ts, size_t n, const char *name) {
    if (!ts) fail(DISTC_EINVAL, std::string(name) + " is NULL");
    TensorList out(n);
    for (size_t i = 0; i < n; ++i)
        check_into(g.device_types(), &g, ts[i], out.emplace(i),
                   [&] { return std::string(name) + "[" + std::to_string(i) + "]"; });
    return out;
}

DLDataType dl_dtype(DType t) {
    auto bits = static_cast<uint8_t>(dtype_size(t) * 8);
    switch (t) {
        case DType::Bool: return DLDataType{kBoolCode, 8, 1};
        case DType::Int8:
        case DType::Int16:
        case DType::Int32:
        case DType::Int64: return DLDataType{kDLInt, bits, 1};
        case DType::UInt8: return DLDataType{kDLUInt, 8, 1};
        case DType::BFloat16: return DLDataType{kDLBfloat, 16, 1};
        case DType::Complex64:
        case DType::Complex128: return DLDataType{kDLComplex, bits, 1};
        default: return DLDataType{kDLFloat, bits, 1};
    }
}

void fail_reduce_op(int op) { fail(DISTC_EINVAL, "op " + std::to_string(op) + " is not a distc_reduce_op"); }

}  // namespace distc::capi

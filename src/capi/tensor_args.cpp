#include "capi/tensor_args.hpp"

#include "capi/guard.hpp"

namespace distc::capi {

namespace {

// kDLBool arrived in DLPack 0.8; Debian's header is 0.6. The value is fixed by the spec.
constexpr int kBoolCode = 6;

DType dtype_arg(DLDataType d, const std::string &name) {
    if (d.lanes != 1)
        fail(DISTC_EINVAL, name + " has a vector dtype (" + std::to_string(d.lanes) + " lanes); only scalars are supported");
    switch (static_cast<int>(d.code)) {
    case kBoolCode:
        if (d.bits == 8) return DType::Bool;
        break;
    case kDLInt:
        if (d.bits == 8) return DType::Int8;
        if (d.bits == 16) return DType::Int16;
        if (d.bits == 32) return DType::Int32;
        if (d.bits == 64) return DType::Int64;
        break;
    case kDLUInt:
        if (d.bits == 8) return DType::UInt8;
        break;
    case kDLFloat:
        if (d.bits == 16) return DType::Float16;
        if (d.bits == 32) return DType::Float32;
        if (d.bits == 64) return DType::Float64;
        break;
    case kDLBfloat:
        if (d.bits == 16) return DType::BFloat16;
        break;
    case kDLComplex:
        if (d.bits == 64) return DType::Complex64;
        if (d.bits == 128) return DType::Complex128;
        break;
    default:
        break;
    }
    fail(DISTC_EINVAL, name + " has an unsupported dtype (DLPack code " + std::to_string(d.code) + ", " +
                           std::to_string(d.bits) + " bits); supported: bool, int8, uint8, int16, int32, int64, "
                           "float16, bfloat16, float32, float64, complex64, complex128");
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

}  // namespace

Tensor tensor_arg(const ProcessGroup &g, const DLTensor *t, const std::string &name) {
    if (!t) fail(DISTC_EINVAL, name + " is NULL");
    int type = t->device.device_type;
    if (type < 0 || type >= 64 || !(g.device_types() >> type & 1))
        fail(DISTC_EINVAL, name + " is in " + device_name(type) + " memory (DLPack device type " + std::to_string(type) +
                               "); the " + g.backend_name() + " backend takes " + device_list(g.device_types()) +
                               " memory");
    if (t->ndim < 0) fail(DISTC_EINVAL, name + " has ndim < 0");
    if (t->ndim > 0 && !t->shape) fail(DISTC_EINVAL, name + " has ndim > 0 but no shape");
    Tensor out;
    out.dtype = dtype_arg(t->dtype, name);
    size_t numel = 1;
    for (int i = 0; i < t->ndim; ++i) {
        if (t->shape[i] < 0) fail(DISTC_EINVAL, name + " has a negative dimension");
        numel *= static_cast<size_t>(t->shape[i]);
    }
    // Contiguous: no strides, or the compact row-major ones (dimensions of size 1 may have any stride).
    if (t->strides) {
        int64_t expect = 1;
        for (int i = t->ndim - 1; i >= 0; --i) {
            if (t->shape[i] != 1 && t->strides[i] != expect)
                fail(DISTC_EINVAL, name + " is not contiguous (stride " + std::to_string(t->strides[i]) +
                                       " in dimension " + std::to_string(i) + ", expected " + std::to_string(expect) +
                                       "); make a contiguous copy first");
            expect *= t->shape[i];
        }
    }
    if (!t->data && numel > 0) fail(DISTC_EINVAL, name + " has no data but " + std::to_string(numel) + " elements");
    out.data = static_cast<char *>(t->data) + t->byte_offset;
    out.numel = numel;
    out.dim0 = t->ndim == 0 ? 1 : t->shape[0];
    out.device_type = type;
    out.device_id = t->device.device_id;
    return out;
}

std::vector<Tensor> tensor_list_arg(const ProcessGroup &g, const DLTensor *const *ts, size_t n, const std::string &name) {
    if (!ts) fail(DISTC_EINVAL, name + " is NULL");
    std::vector<Tensor> out;
    out.reserve(n);
    for (size_t i = 0; i < n; ++i) out.push_back(tensor_arg(g, ts[i], name + "[" + std::to_string(i) + "]"));
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

ReduceOp reduce_op_arg(int op) {
    if (op < DISTC_SUM || op > DISTC_PREMUL_SUM) fail(DISTC_EINVAL, "op " + std::to_string(op) + " is not a distc_reduce_op");
    return static_cast<ReduceOp>(op);
}

}  // namespace distc::capi

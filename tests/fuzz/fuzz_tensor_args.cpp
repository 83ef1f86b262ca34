// libFuzzer target: the C API's checks of DLTensors, reduce ops, split sizes
// and operation options. Each input describes a tensor (ndim, shape, strides,
// dtype, device, byte_offset, where data points) and an op with options.
// Every check must answer DISTC_EINVAL or let the call through; a tensor
// that passes and really lies inside this target's buffer then runs an
// allreduce and an all-to-all on a one-rank group, which must succeed or
// fail cleanly. A crash, another exception or a sanitizer report is a finding.
#include <dlpack/dlpack.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "capi/tensor_args.hpp"
#include "core/util/error.hpp"
#include "distc.h"

extern "C" int fuzz_allreduce(distc_pg *pg, DLTensor *t, int32_t op, const distc_op_options *o);  // fuzz_calls.c

namespace {

struct Input {
    const uint8_t *p;
    size_t n;
    template <typename T>
    T take() {
        T v{};
        size_t k = n < sizeof v ? n : sizeof v;
        std::memcpy(&v, p, k);
        p += k, n -= k;
        return v;
    }
};

alignas(16) uint8_t g_buf[4096], g_out[4096];

distc_pg *one_rank_group() {
    static distc_pg *pg = [] {
        distc_store *st = nullptr;
        distc_pg *g = nullptr;
        if (distc_store_new_hash(&st) != 0 || distc_pg_new(&g, st, 0, 1, nullptr) != 0) std::abort();
        distc_store_free(st);
        return g;
    }();
    return pg;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    Input in{data, size};
    int64_t shape[8], strides[8];
    uint8_t flags = in.take<uint8_t>();
    int32_t ndim = int32_t(in.take<uint8_t>() % 10) - 1;  // -1..8
    for (int i = 0; i < 8; ++i) shape[i] = in.take<int64_t>();
    if (flags & 1)  // small dimensions, so that some tensors fit the buffer
        for (int i = 0; i < 8; ++i) shape[i] = (shape[i] & 0x7) - (flags & 2 ? 1 : 0);
    for (int i = 0; i < 8; ++i) strides[i] = flags & 4 ? in.take<int64_t>() % 64 : in.take<int64_t>();
    DLTensor t{};
    t.ndim = ndim;
    t.shape = flags & 8 ? nullptr : shape;
    t.strides = flags & 16 ? strides : nullptr;
    t.dtype.code = in.take<uint8_t>() % (flags & 32 ? 256 : 7);
    t.dtype.bits = uint8_t(8 << (in.take<uint8_t>() % 5));
    t.dtype.lanes = flags & 64 ? in.take<uint16_t>() : 1;
    int32_t dev = in.take<int32_t>();
    std::memcpy(&t.device.device_type, &dev, sizeof dev);  // any int, as a C caller may pass
    if (in.take<uint8_t>() & 1) t.device.device_type = kDLCPU;
    t.device.device_id = in.take<int32_t>();
    t.byte_offset = in.take<uint64_t>();
    if (flags & 128) t.byte_offset %= 64;
    uint8_t where = in.take<uint8_t>() % 3;
    t.data = where == 0   ? nullptr
             : where == 1 ? static_cast<void *>(g_buf)
                          : reinterpret_cast<void *>(in.take<uintptr_t>());

    distc::Tensor checked;
    try {
        checked = distc::capi::described_tensor_arg(&t, "tensor");
    } catch (const distc::Error &e) {
        if (e.code() != DISTC_EINVAL) std::abort();
        return 0;
    }
    // Accepted: its claimed extent must not wrap, and it runs only where it truly lies in g_buf.
    uint64_t end = t.byte_offset + checked.nbytes();
    if (end < t.byte_offset || checked.nbytes() > DISTC_TENSOR_MAX_BYTES) std::abort();
    if (t.data != g_buf || end > sizeof g_buf) return 0;

    int32_t op = in.take<int32_t>();
    distc_op_options o = DISTC_OP_OPTIONS_INIT;
    o.version = in.take<uint8_t>() % 4;
    o.timeout_ms = in.take<int64_t>();
    if (in.take<uint8_t>() & 1) o.timeout_ms = 5000;
    o.premul_factor = in.take<double>();
    o.stream = nullptr;
    distc_pg *pg = one_rank_group();
    int rc = fuzz_allreduce(pg, &t, op, in.take<uint8_t>() & 1 ? &o : nullptr);
    if (rc != 0 && rc != DISTC_EINVAL) std::abort();

    DLTensor out = t;
    out.data = g_out;
    int64_t split[1] = {in.take<int64_t>()};
    rc = distc_alltoall_single(nullptr, pg, &out, &t, in.take<uint8_t>() & 1 ? split : nullptr,
                               in.take<uint8_t>() & 1 ? split : nullptr, nullptr);
    if (rc != 0 && rc != DISTC_EINVAL) std::abort();
    return 0;
}

// The "nccl" backend plugin (libdistc-nccl.so): distc's collectives on CUDA
// device memory through NCCL, ordered on the caller's stream. It implements
// distc/sys/backend.h and nothing else of distc's internals.
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "backends/nccl/nccl_group.hpp"

using namespace distc_nccl;
using distc_plugin::guarded;

namespace {

Group &group(void *g) { return *static_cast<Group *>(g); }

size_t nbytes(const distc_buffer &b) { return static_cast<size_t>(b.count) * distc_dtype_size(b.dtype); }

void check_buffer(const Group &g, const distc_buffer &b, const char *name) {
    if (b.device_type != kDLCUDA && b.device_type != kDLCUDAManaged)
        raise(DISTC_EINVAL, std::string(name) + " is not in CUDA memory");
    if (b.device_id != g.device())
        raise(DISTC_EINVAL, std::string(name) + " is on CUDA device " + std::to_string(b.device_id) +
                                " but this group's communicator is on device " + std::to_string(g.device()));
}

void check_buffers(const Group &g, const distc_buffer *bs, size_t n, const char *name) {
    for (size_t i = 0; i < n; ++i) check_buffer(g, bs[i], (std::string(name) + "[" + std::to_string(i) + "]").c_str());
}

// An NCCL element type and count for a reduction; complex numbers reduce as pairs of reals.
struct Typed {
    ncclDataType_t type;
    size_t count;
};

Typed reduce_type(const distc_buffer &b) {
    switch (b.dtype) {
        case DISTC_DTYPE_BOOL: return {ncclUint8, b.count};
        case DISTC_DTYPE_INT8: return {ncclInt8, b.count};
        case DISTC_DTYPE_UINT8: return {ncclUint8, b.count};
        case DISTC_DTYPE_INT32: return {ncclInt32, b.count};
        case DISTC_DTYPE_INT64: return {ncclInt64, b.count};
        case DISTC_DTYPE_FLOAT16: return {ncclFloat16, b.count};
        case DISTC_DTYPE_BFLOAT16: return {ncclBfloat16, b.count};
        case DISTC_DTYPE_FLOAT32: return {ncclFloat32, b.count};
        case DISTC_DTYPE_FLOAT64: return {ncclFloat64, b.count};
        case DISTC_DTYPE_COMPLEX64: return {ncclFloat32, 2 * b.count};
        case DISTC_DTYPE_COMPLEX128: return {ncclFloat64, 2 * b.count};
        default: raise(DISTC_ENOTSUP, std::string("NCCL cannot reduce ") + distc_dtype_name(b.dtype) + " tensors");
    }
}

uint16_t to_half(float f) {  // round to nearest even; factors are ordinary numbers
    uint32_t x;
    std::memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000u;
    int32_t exp = static_cast<int32_t>((x >> 23) & 0xff) - 127 + 15;
    uint32_t mant = x & 0x7fffffu;
    if (exp <= 0) return static_cast<uint16_t>(sign);
    if (exp >= 31) return static_cast<uint16_t>(sign | 0x7c00u);
    uint32_t h = sign | (static_cast<uint32_t>(exp) << 10) | (mant >> 13);
    uint32_t rest = mant & 0x1fffu;
    if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h;
    return static_cast<uint16_t>(h);
}

uint16_t to_bf16(float f) {
    uint32_t x;
    std::memcpy(&x, &f, 4);
    x += 0x7fffu + ((x >> 16) & 1u);
    return static_cast<uint16_t>(x >> 16);
}

// A reduction operator for `op` on `t`; PREMUL_SUM creates one (with
// comm == nullptr: only checks that NCCL can do it), which goes into `made`
// for destruction after the launch.
ncclRedOp_t red_op(int32_t op, const distc_buffer &b, Typed t, double factor, ncclComm_t comm,
                   std::vector<ncclRedOp_t> *made) {
    bool is_bool = b.dtype == DISTC_DTYPE_BOOL;
    bool is_float = t.type == ncclFloat16 || t.type == ncclBfloat16 || t.type == ncclFloat32 || t.type == ncclFloat64;
    switch (op) {
        case DISTC_SUM: return is_bool ? ncclMax : ncclSum;  // logical or, as torch
        case DISTC_AVG: return ncclAvg;
        case DISTC_PRODUCT: return is_bool ? ncclMin : ncclProd;
        case DISTC_MIN: return ncclMin;
        case DISTC_MAX: return ncclMax;
        case DISTC_BAND:
            if (is_bool) return ncclMin;
            break;
        case DISTC_BOR:
            if (is_bool) return ncclMax;
            break;
        case DISTC_PREMUL_SUM: {
            if (!is_float)
                raise(DISTC_ENOTSUP, std::string("PREMUL_SUM on ") + distc_dtype_name(b.dtype) +
                                         " tensors: NCCL's factor would be an integer too");
            if (!comm) return ncclSum;
            ncclRedOp_t r = ncclSum;
            float f = static_cast<float>(factor);
            double d = factor;
            uint16_t h = t.type == ncclFloat16 ? to_half(f) : to_bf16(f);
            void *scalar = t.type == ncclFloat64   ? static_cast<void *>(&d)
                           : t.type == ncclFloat32 ? static_cast<void *>(&f)
                                                   : static_cast<void *>(&h);
            ncclResult_t res = ncclRedOpCreatePreMulSum(&r, scalar, t.type, ncclScalarHostImmediate, comm);
            if (res != ncclSuccess)
                raise(DISTC_EBACKEND, std::string("ncclRedOpCreatePreMulSum: ") + ncclGetErrorString(res));
            made->push_back(r);
            return r;
        }
        default: break;
    }
    raise(DISTC_ENOTSUP, std::string("NCCL has no bitwise reductions (") + distc_dtype_name(b.dtype) +
                             "); BAND and BOR work on bool tensors only");
}

// Throws, before anything is launched, when NCCL cannot reduce `b` with `op`.
void check_reduction(int32_t op, const distc_buffer &b) { red_op(op, b, reduce_type(b), 1.0, nullptr, nullptr); }

// One reduction (allreduce, reduce, reduce_scatter) with its NCCL type and operator.
template <typename F>
ncclResult_t with_op(int32_t op, const distc_buffer &b, double factor, ncclComm_t comm, std::vector<ncclRedOp_t> &made,
                     F &&call) {
    Typed t = reduce_type(b);
    return call(t, red_op(op, b, t, factor, comm, &made));
}

// NCCL calls fused into one launch; the group is closed even when a call throws.
ncclResult_t grouped(const std::function<ncclResult_t()> &calls) {
    ncclResult_t r = ncclGroupStart();
    if (r != ncclSuccess) return r;
    ncclResult_t inner;
    try {
        inner = calls();
    } catch (...) {
        ncclGroupEnd();
        throw;
    }
    r = ncclGroupEnd();
    return inner != ncclSuccess ? inner : r;
}

bool consecutive(const distc_buffer *bs, size_t n) {
    const char *p = static_cast<const char *>(bs[0].data);
    for (size_t i = 0; i < n; ++i) {
        if (bs[i].data != p && bs[i].count) return false;
        p += nbytes(bs[i]);
    }
    return true;
}

cudaError_t copy_async(void *dst, const void *src, size_t n, cudaStream_t s) {
    if (n == 0 || dst == src) return cudaSuccess;
    return cudaMemcpyAsync(dst, src, n, cudaMemcpyDeviceToDevice, s);
}

// CUDA failures inside an enqueue surface as NCCL's "unhandled CUDA error".
ncclResult_t cuda_ok(cudaError_t e) { return e == cudaSuccess ? ncclSuccess : ncclUnhandledCudaError; }

// ------------------------------------------------------------------ vtable

int nccl_create(void **out, const distc_backend_group_info *info, void *) {
    return guarded([&] { *out = new Group(*info); });
}

void nccl_destroy(void *g) { delete static_cast<Group *>(g); }

int nccl_abort(void *g) {
    return guarded([&] {
        group(g).abort(DISTC_EABORTED, "distc_pg_abort was called",
                       "the group was aborted (distc_pg_abort was called)");
    });
}

int nccl_split(void **out, void *parent, int32_t color, int32_t key, const distc_backend_group_info *info) {
    return guarded([&] { *out = group(parent).split(color, key, info); });
}

int nccl_allreduce(distc_work *w, void *g, const distc_buffer *bs, size_t n, int32_t op,
                   const distc_backend_op_args *a) {
    return guarded([&] {
        Group &G = group(g);
        check_buffers(G, bs, n, "tensors");
        for (size_t i = 0; i < n; ++i) check_reduction(op, bs[i]);
        G.launch(w, a, [&](ncclComm_t comm, cudaStream_t s, std::vector<ncclRedOp_t> &made) {
            auto one = [&](const distc_buffer &b) {
                return with_op(op, b, a->premul_factor, comm, made, [&](Typed t, ncclRedOp_t o) {
                    return ncclAllReduce(b.data, b.data, t.count, t.type, o, comm, s);
                });
            };
            if (n == 1) return one(bs[0]);
            return grouped([&] {  // coalesced: one launch for all
                for (size_t i = 0; i < n; ++i)
                    if (ncclResult_t r = one(bs[i]); r != ncclSuccess) return r;
                return ncclSuccess;
            });
        });
    });
}

int nccl_broadcast(distc_work *w, void *g, const distc_buffer *b, int32_t root, const distc_backend_op_args *a) {
    return guarded([&] {
        Group &G = group(g);
        check_buffer(G, *b, "tensor");
        G.launch(w, a, [&](ncclComm_t comm, cudaStream_t s, std::vector<ncclRedOp_t> &) {
            return ncclBroadcast(b->data, b->data, nbytes(*b), ncclUint8, root, comm, s);
        });
    });
}

int nccl_reduce(distc_work *w, void *g, const distc_buffer *b, int32_t root, int32_t op,
                const distc_backend_op_args *a) {
    return guarded([&] {
        Group &G = group(g);
        check_buffer(G, *b, "tensor");
        check_reduction(op, *b);
        G.launch(w, a, [&](ncclComm_t comm, cudaStream_t s, std::vector<ncclRedOp_t> &made) {
            // In place: only the root's buffer is written.
            return with_op(op, *b, a->premul_factor, comm, made, [&](Typed t, ncclRedOp_t o) {
                return ncclReduce(b->data, b->data, t.count, t.type, o, root, comm, s);
            });
        });
    });
}

int nccl_allgather(distc_work *w, void *g, const distc_buffer *outs, const distc_buffer *in,
                   const distc_backend_op_args *a) {
    return guarded([&] {
        Group &G = group(g);
        size_t n = static_cast<size_t>(G.size());
        check_buffer(G, *in, "input");
        check_buffers(G, outs, n, "outputs");
        G.launch(w, a, [&](ncclComm_t comm, cudaStream_t s, std::vector<ncclRedOp_t> &) {
            if (consecutive(outs, n)) return ncclAllGather(in->data, outs[0].data, nbytes(*in), ncclUint8, comm, s);
            // Separate outputs: one broadcast from each rank.
            return grouped([&] {
                for (size_t r = 0; r < n; ++r) {
                    const void *src = static_cast<int>(r) == G.rank() ? in->data : outs[r].data;
                    if (ncclResult_t e =
                            ncclBroadcast(src, outs[r].data, nbytes(*in), ncclUint8, static_cast<int>(r), comm, s);
                        e != ncclSuccess)
                        return e;
                }
                return ncclSuccess;
            });
        });
    });
}

int nccl_gather(distc_work *w, void *g, const distc_buffer *outs, const distc_buffer *in, int32_t root,
                const distc_backend_op_args *a) {
    return guarded([&] {
        Group &G = group(g);
        size_t n = static_cast<size_t>(G.size());
        check_buffer(G, *in, "input");
        if (G.rank() == root) check_buffers(G, outs, n, "outputs");
        G.launch(w, a, [&](ncclComm_t comm, cudaStream_t s, std::vector<ncclRedOp_t> &) {
            return grouped([&] {
                if (G.rank() != root) return ncclSend(in->data, nbytes(*in), ncclUint8, root, comm, s);
                for (size_t r = 0; r < n; ++r) {
                    ncclResult_t e =
                        static_cast<int>(r) == root
                            ? cuda_ok(copy_async(outs[r].data, in->data, nbytes(*in), s))
                            : ncclRecv(outs[r].data, nbytes(outs[r]), ncclUint8, static_cast<int>(r), comm, s);
                    if (e != ncclSuccess) return e;
                }
                return ncclSuccess;
            });
        });
    });
}

int nccl_scatter(distc_work *w, void *g, const distc_buffer *out, const distc_buffer *ins, int32_t root,
                 const distc_backend_op_args *a) {
    return guarded([&] {
        Group &G = group(g);
        size_t n = static_cast<size_t>(G.size());
        check_buffer(G, *out, "output");
        if (G.rank() == root) check_buffers(G, ins, n, "inputs");
        G.launch(w, a, [&](ncclComm_t comm, cudaStream_t s, std::vector<ncclRedOp_t> &) {
            return grouped([&] {
                if (G.rank() != root) return ncclRecv(out->data, nbytes(*out), ncclUint8, root, comm, s);
                for (size_t r = 0; r < n; ++r) {
                    ncclResult_t e =
                        static_cast<int>(r) == root
                            ? cuda_ok(copy_async(out->data, ins[r].data, nbytes(*out), s))
                            : ncclSend(ins[r].data, nbytes(ins[r]), ncclUint8, static_cast<int>(r), comm, s);
                    if (e != ncclSuccess) return e;
                }
                return ncclSuccess;
            });
        });
    });
}

int nccl_reduce_scatter(distc_work *w, void *g, const distc_buffer *out, const distc_buffer *ins, int32_t op,
                        const distc_backend_op_args *a) {
    return guarded([&] {
        Group &G = group(g);
        size_t n = static_cast<size_t>(G.size());
        check_buffer(G, *out, "output");
        check_buffers(G, ins, n, "inputs");
        check_reduction(op, *out);
        G.launch(w, a, [&](ncclComm_t comm, cudaStream_t s, std::vector<ncclRedOp_t> &made) {
            return with_op(op, *out, a->premul_factor, comm, made, [&](Typed t, ncclRedOp_t o) {
                if (consecutive(ins, n)) return ncclReduceScatter(ins[0].data, out->data, t.count, t.type, o, comm, s);
                // Separate inputs: reduce each rank's part onto that rank.
                return grouped([&] {
                    for (size_t r = 0; r < n; ++r)
                        if (ncclResult_t e =
                                ncclReduce(ins[r].data, out->data, t.count, t.type, o, static_cast<int>(r), comm, s);
                            e != ncclSuccess)
                            return e;
                    return ncclSuccess;
                });
            });
        });
    });
}

int nccl_alltoall(distc_work *w, void *g, const distc_buffer *outs, const distc_buffer *ins,
                  const distc_backend_op_args *a) {
    return guarded([&] {
        Group &G = group(g);
        size_t n = static_cast<size_t>(G.size());
        check_buffers(G, outs, n, "outputs");
        check_buffers(G, ins, n, "inputs");
        G.launch(w, a, [&](ncclComm_t comm, cudaStream_t s, std::vector<ncclRedOp_t> &) {
            return grouped([&] {
                for (size_t r = 0; r < n; ++r) {
                    int peer = static_cast<int>(r);
                    if (peer == G.rank()) {
                        if (ncclResult_t e = cuda_ok(copy_async(outs[r].data, ins[r].data, nbytes(ins[r]), s));
                            e != ncclSuccess)
                            return e;
                        continue;
                    }
                    if (nbytes(ins[r]))
                        if (ncclResult_t e = ncclSend(ins[r].data, nbytes(ins[r]), ncclUint8, peer, comm, s);
                            e != ncclSuccess)
                            return e;
                    if (nbytes(outs[r]))
                        if (ncclResult_t e = ncclRecv(outs[r].data, nbytes(outs[r]), ncclUint8, peer, comm, s);
                            e != ncclSuccess)
                            return e;
                }
                return ncclSuccess;
            });
        });
    });
}

int nccl_barrier(distc_work *w, void *g, const distc_backend_op_args *a) {
    return guarded([&] {
        Group &G = group(g);
        // As c10d: a one-element allreduce; the work completes when every rank's has.
        G.launch(w, a, [&](ncclComm_t comm, cudaStream_t s, std::vector<ncclRedOp_t> &) {
            return ncclAllReduce(G.barrier_buffer(), G.barrier_buffer(), 1, ncclInt32, ncclSum, comm, s);
        });
    });
}

int nccl_send(distc_work *w, void *g, const distc_buffer *b, int32_t dst, int32_t tag, const distc_backend_op_args *a) {
    (void)tag;  // NCCL matches sends and receives between two ranks in issue order; it has no tags
    return guarded([&] {
        Group &G = group(g);
        check_buffer(G, *b, "tensor");
        G.launch(w, a, [&](ncclComm_t comm, cudaStream_t s, std::vector<ncclRedOp_t> &) {
            return ncclSend(b->data, nbytes(*b), ncclUint8, dst, comm, s);
        });
    });
}

int nccl_recv(distc_work *w, void *g, const distc_buffer *b, int32_t src, int32_t tag, const distc_backend_op_args *a) {
    (void)tag;
    return guarded([&] {
        if (src < 0) raise(DISTC_ENOTSUP, "NCCL cannot receive from any source; name the sending rank");
        Group &G = group(g);
        check_buffer(G, *b, "tensor");
        G.launch(w, a, [&](ncclComm_t comm, cudaStream_t s, std::vector<ncclRedOp_t> &) {
            return ncclRecv(b->data, nbytes(*b), ncclUint8, src, comm, s);
        });
    });
}

int nccl_batch_p2p(distc_work *w, void *g, const distc_backend_p2p *ops, size_t n, const distc_backend_op_args *a) {
    return guarded([&] {
        Group &G = group(g);
        for (size_t i = 0; i < n; ++i)
            check_buffer(G, ops[i].buffer, ("ops[" + std::to_string(i) + "].tensor").c_str());
        G.launch(w, a, [&](ncclComm_t comm, cudaStream_t s, std::vector<ncclRedOp_t> &) {
            return grouped([&] {
                for (size_t i = 0; i < n; ++i) {
                    const distc_buffer &b = ops[i].buffer;
                    ncclResult_t e = ops[i].kind == DISTC_P2P_SEND
                                         ? ncclSend(b.data, nbytes(b), ncclUint8, ops[i].peer, comm, s)
                                         : ncclRecv(b.data, nbytes(b), ncclUint8, ops[i].peer, comm, s);
                    if (e != ncclSuccess) return e;
                }
                return ncclSuccess;
            });
        });
    });
}

// Device memory for the core (the reducer's buckets), on the group's device
// and the caller's stream.
int nccl_mem_alloc(void **out, void *g, int32_t device_type, size_t bytes) {
    return guarded([&] {
        DeviceGuard d(group(g).device());
        // Managed memory when the caller's gradients are managed: the bucket then is too.
        if (device_type == kDLCUDAManaged)
            check_cuda(cudaMallocManaged(out, bytes ? bytes : 1), "cudaMallocManaged");
        else
            check_cuda(cudaMalloc(out, bytes ? bytes : 1), "cudaMalloc");
    });
}

// cudaFree waits for the device, so copies still queued on the stream finish first.
void nccl_mem_free(void *g, int32_t, void *p) {
    guarded([&] {
        DeviceGuard d(group(g).device());
        cudaFree(p);
    });
}

int nccl_mem_copy(void *g, void *dst, const void *src, size_t bytes, void *stream) {
    return guarded([&] {
        DeviceGuard d(group(g).device());
        check_cuda(copy_async(dst, src, bytes, static_cast<cudaStream_t>(stream)), "cudaMemcpyAsync");
    });
}

int nccl_mem_zero(void *g, void *p, size_t bytes, void *stream) {
    return guarded([&] {
        DeviceGuard d(group(g).device());
        check_cuda(cudaMemsetAsync(p, 0, bytes, static_cast<cudaStream_t>(stream)), "cudaMemsetAsync");
    });
}

const distc_backend_ops kOps = [] {
    distc_backend_ops o{};
    o.version = DISTC_BACKEND_OPS_VERSION;
    o.flags = DISTC_BACKEND_STREAM_ORDERED;
    o.device_types = DISTC_DEVICE_BIT(kDLCUDA) | DISTC_DEVICE_BIT(kDLCUDAManaged);
    o.create = nccl_create;
    o.destroy = nccl_destroy;
    o.abort = nccl_abort;
    o.split = nccl_split;
    o.allreduce = nccl_allreduce;
    o.broadcast = nccl_broadcast;
    o.reduce = nccl_reduce;
    o.allgather = nccl_allgather;
    o.gather = nccl_gather;
    o.scatter = nccl_scatter;
    o.reduce_scatter = nccl_reduce_scatter;
    o.alltoall = nccl_alltoall;
    o.barrier = nccl_barrier;
    o.send = nccl_send;
    o.recv = nccl_recv;
    o.batch_p2p = nccl_batch_p2p;
    o.mem_alloc = nccl_mem_alloc;
    o.mem_free = nccl_mem_free;
    o.mem_copy = nccl_mem_copy;
    o.mem_zero = nccl_mem_zero;
    return o;
}();

}  // namespace

extern "C" __attribute__((visibility("default"))) int distc_backend_plugin_init(const distc_backend_ops **ops,
                                                                                void **payload,
                                                                                unsigned int core_version) {
    int version = 0;
    if (ncclGetVersion(&version) != ncclSuccess || version < 21800)
        return distc_error_set(DISTC_EBACKEND, ("libnccl is version " + std::to_string(version) +
                                                "; the nccl backend needs 2.18 or newer (ncclCommSplit)")
                                                   .c_str());
    return distc_plugin::plugin_init(&kOps, "libdistc-nccl.so", ops, payload, core_version);
}

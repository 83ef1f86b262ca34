// What every backend implements for a group: it starts operations and
// completes their Work later, from any thread (the shape of MPI's
// non-blocking collectives and of NCCL's stream launches). The built-in host
// backend (backends/host/) implements it directly; plugins
// (distc/sys/backend.h) are adapted to it in capi/plugin_backend.cpp. The
// group has checked every argument before a call.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/pg/call.hpp"
#include "core/pg/tensor.hpp"
#include "core/store/store.hpp"
#include "core/work/work.hpp"

namespace distc {

struct AsyncArgs {
    uint64_t seq;  // 0 for point-to-point
    Millis timeout;
    double premul_factor;
    void *stream;                // the caller's device stream, or nullptr
    const char *op;              // "allreduce" (static)
    const OpLabel *label;        // the rest of the operation's name, for messages
    bool blocking;               // a blocking call: no handle is given out (see DISTC_OP_BLOCKING)
    Call call;                   // the operation's fingerprint, which the host transports put on every message
    bool interruptible = false;  // blocking, and must end at its timeout or an abort (DISTC_OP_INTERRUPTIBLE)
};

// Thrown by a blocking call the backend did not complete within its timeout
// (plus a margin): the group then aborts.
struct BlockingCallTimedOut {};

struct AsyncGroupInfo {
    std::shared_ptr<Store> store;  // the group's key space
    int rank, size;
    Millis timeout;
    std::string name;               // "<name>/<instance>"
    std::vector<int> global_ranks;  // size entries
    int device;                     // -1: the backend's choice
};

// A device backend's memory (distc/sys/backend.h, mem_*), for what the core
// keeps on the device itself: the reducer's buckets. Device memory is only
// touched through these; `stream` orders copies on a device backend.
class DeviceMemory {
public:
    virtual void *alloc(int device_type, size_t bytes) = 0;
    virtual void release(int device_type, void *p) noexcept = 0;
    virtual void copy(void *dst, const void *src, size_t bytes, void *stream) = 0;
    virtual void zero(void *p, size_t bytes, void *stream) = 0;

protected:
    ~DeviceMemory() = default;
};

class AsyncBackend {
public:
    using WorkPtr = std::shared_ptr<Work>;
    virtual ~AsyncBackend() = default;
    virtual const char *name() const = 0;
    // How collectives reach `peer` (never this rank): a static string; by
    // default the backend's name (distc_pg_transport).
    virtual const char *transport(int peer) const {
        (void)peer;
        return name();
    }
    virtual uint64_t device_types() const = 0;  // bit (1 << DLDeviceType) per memory kind taken
    // Blocking calls return once the operation is enqueued (device streams).
    virtual bool stream_ordered() const = 0;
    // Its device memory, or nullptr when it keeps none for the core.
    virtual DeviceMemory *memory() { return nullptr; }

    // Each either takes `w` (and completes it later, maybe at once) or throws
    // without having sent anything (DISTC_ENOTSUP naming the backend and
    // AsyncArgs::op when the backend does not implement it). A blocking call
    // on a host backend (not stream_ordered) has no `w`: it returns once the
    // operation completed, or throws its failure, or BlockingCallTimedOut.
    // Lists (Span) are lent for the call: one that queues the operation
    // copies what it keeps.
    virtual void allreduce(const WorkPtr &w, const Tensor *ts, size_t n, ReduceOp op, const AsyncArgs &a) = 0;
    virtual void broadcast(const WorkPtr &w, const Tensor &t, int root, const AsyncArgs &a) = 0;
    virtual void reduce(const WorkPtr &w, const Tensor &t, int root, ReduceOp op, const AsyncArgs &a) = 0;
    virtual void allgather(const WorkPtr &w, TensorSpan outputs, const Tensor &input, const AsyncArgs &a) = 0;
    // `outputs` / `inputs` empty on non-roots.
    virtual void gather(const WorkPtr &w, TensorSpan outputs, const Tensor &input, int root, const AsyncArgs &a) = 0;
    virtual void scatter(const WorkPtr &w, const Tensor &output, TensorSpan inputs, int root, const AsyncArgs &a) = 0;
    virtual void reduce_scatter(const WorkPtr &w, const Tensor &output, TensorSpan inputs, ReduceOp op,
                                const AsyncArgs &a) = 0;
    virtual void alltoall(const WorkPtr &w, TensorSpan outputs, TensorSpan inputs, const AsyncArgs &a) = 0;
    // One flat output and input with per-peer counts (elements, in rank
    // order): alltoall_single. By default alltoall over per-peer views; a
    // backend that moves flat buffers itself skips making them.
    virtual void alltoall_single(const WorkPtr &w, const Tensor &output, const Tensor &input, Span<size_t> out_counts,
                                 Span<size_t> in_counts, const AsyncArgs &a) {
        auto views = [](const Tensor &t, Span<size_t> counts) {
            std::vector<Tensor> v;
            v.reserve(counts.size());
            size_t off = 0;
            for (size_t c : counts) {
                Tensor p = t;
                p.data = t.bytes() + off * dtype_size(t.dtype);
                p.numel = c;
                p.dim0 = static_cast<int64_t>(c);
                off += c;
                v.push_back(p);
            }
            return v;
        };
        const std::vector<Tensor> outs = views(output, out_counts), ins = views(input, in_counts);
        alltoall(w, outs, ins, a);
    }
    virtual void barrier(const WorkPtr &w, const AsyncArgs &a) = 0;
    virtual void send(const WorkPtr &w, const Tensor &t, int dst, int tag, const AsyncArgs &a) = 0;
    virtual void recv(const WorkPtr &w, const Tensor &t, int src, int tag, const AsyncArgs &a) = 0;
    struct P2p {
        bool send;
        Tensor tensor;
        int peer;
        int tag;
    };
    virtual void batch_p2p(const WorkPtr &w, Span<P2p> ops, const AsyncArgs &a) = 0;

    // A subgroup made by the engine from this group (a collective on it), or
    // nullptr when the engine cannot split (the caller then makes the
    // subgroup from its own key space). `color` < 0: in no subgroup.
    // Sets `made` to whether the engine split.
    virtual std::unique_ptr<AsyncBackend> split(int color, int key, const AsyncGroupInfo &info, bool &made) = 0;
    virtual void abort() = 0;
};

// The built-in host backend ("gloo"; backends/host/), created for one group.
// `debug`: DISTC_DEBUG=detail's cross-check of every collective.
std::unique_ptr<AsyncBackend> make_host_backend(const AsyncGroupInfo &info, bool debug);

// The backend `name` (a registered one or a plugin library), created for one
// group. Throws DISTC_ENOTFOUND / DISTC_EBACKEND naming what is missing.
std::unique_ptr<AsyncBackend> make_async_backend(const std::string &name, const AsyncGroupInfo &info);

// This process's rank and the world size according to backend `name`'s
// engine (MPI_COMM_WORLD). Throws DISTC_ENOTSUP when it has no world of its own.
void engine_world(const std::string &name, int &rank, int &size);

}  // namespace distc

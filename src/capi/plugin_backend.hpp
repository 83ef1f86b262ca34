// The adapter between the core's AsyncBackend and a backend's C vtable
// (distc/sys/backend.h): tensors become distc_buffers, Works become handles
// the backend completes, errors become exceptions.
#pragma once

#include <memory>

#include "capi/registry.hpp"
#include "core/pg/async_backend.hpp"

struct distc_store;

namespace distc {

class PluginBackend final : public AsyncBackend, private DeviceMemory {
public:
    // Creates the backend's group (a collective over the group's ranks).
    PluginBackend(std::shared_ptr<const BackendDef> def, const AsyncGroupInfo &info);
    ~PluginBackend() override;

    const char *name() const override { return def_->name.c_str(); }
    uint64_t device_types() const override { return def_->ops.device_types; }
    bool stream_ordered() const override { return def_->ops.flags & DISTC_BACKEND_STREAM_ORDERED; }
    DeviceMemory *memory() override { return def_->ops.mem_alloc ? this : nullptr; }

    void allreduce(const WorkPtr &w, const Tensor *ts, size_t n, ReduceOp op, const AsyncArgs &a) override;
    void broadcast(const WorkPtr &w, const Tensor &t, int root, const AsyncArgs &a) override;
    void reduce(const WorkPtr &w, const Tensor &t, int root, ReduceOp op, const AsyncArgs &a) override;
    void allgather(const WorkPtr &w, TensorSpan outputs, const Tensor &input, const AsyncArgs &a) override;
    void gather(const WorkPtr &w, TensorSpan outputs, const Tensor &input, int root, const AsyncArgs &a) override;
    void scatter(const WorkPtr &w, const Tensor &output, TensorSpan inputs, int root, const AsyncArgs &a) override;
    void reduce_scatter(const WorkPtr &w, const Tensor &output, TensorSpan inputs, ReduceOp op,
                        const AsyncArgs &a) override;
    void alltoall(const WorkPtr &w, TensorSpan outputs, TensorSpan inputs, const AsyncArgs &a) override;
    void barrier(const WorkPtr &w, const AsyncArgs &a) override;
    void send(const WorkPtr &w, const Tensor &t, int dst, int tag, const AsyncArgs &a) override;
    void recv(const WorkPtr &w, const Tensor &t, int src, int tag, const AsyncArgs &a) override;
    void batch_p2p(const WorkPtr &w, Span<P2p> ops, const AsyncArgs &a) override;

    std::unique_ptr<AsyncBackend> split(int color, int key, const AsyncGroupInfo &info, bool &made) override;
    void abort() override;

private:
    void *alloc(int device_type, size_t bytes) override;
    void release(int device_type, void *p) noexcept override;
    void copy(void *dst, const void *src, size_t bytes, void *stream) override;
    void zero(void *p, size_t bytes, void *stream) override;

    PluginBackend(std::shared_ptr<const BackendDef> def, void *group, distc_store *store);
    // Hands `w` to the backend through `call` (which calls `entry` of the
    // vtable); throws DISTC_ENOTSUP when the backend has no `entry`, and the
    // backend's message if it did not take the work. Without `w`, performs a
    // blocking host call (see AsyncBackend).
    template <typename Entry, typename F>
    void start(const WorkPtr &w, const AsyncArgs &a, Entry entry, F &&call);

    std::shared_ptr<const BackendDef> def_;
    void *group_ = nullptr;
    distc_store *store_ = nullptr;  // the handle the backend was given; freed after destroy
};

}  // namespace distc

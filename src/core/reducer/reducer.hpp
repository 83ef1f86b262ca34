// The DDP reducer: gradients copied into buckets as the caller's backward
// pass produces them, one asynchronous AVG allreduce per bucket launched in
// bucket order as soon as a bucket is complete, and the averages written back
// at finalize (c10d's Reducer, without autograd).
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "core/pg/process_group.hpp"
#include "core/pg/tensor.hpp"
#include "core/store/store.hpp"

namespace distc {

class Reducer : public std::enable_shared_from_this<Reducer> {
public:
    // `buckets` lists gradient indices per bucket, in launch order.
    // `views`: gradients live in the buckets (grad_view), nothing is copied in or out.
    // `rebuild_limits` (non-empty): after the first iteration, rebuild the buckets
    // by size in the order gradients arrived on rank 0 (c10d's bucket rebuild).
    // `sparse` (per gradient, may be empty): rows exchanged by index, each alone in its bucket.
    // Gradients in device memory (all on one device) get buckets there, allocated,
    // copied and zeroed through the group's backend on `stream` (see DeviceMemory).
    Reducer(std::shared_ptr<ProcessGroup> pg, std::vector<Tensor> grads,
            const std::vector<std::vector<size_t>> &buckets, bool find_unused, bool views,
            std::vector<uint64_t> rebuild_limits = {}, std::vector<char> sparse = {}, void *stream = nullptr,
            bool static_graph = false);
    ~Reducer();
    Reducer(const Reducer &) = delete;
    Reducer &operator=(const Reducer &) = delete;

    size_t num_buckets() const { return buckets_.size(); }
    size_t bucket_of(size_t i) const { return bucket_of_[i]; }
    size_t num_grads() const { return grads_.size(); }
    bool on_device() const { return device_ != nullptr; }
    void *grad_view(size_t i) const;  // throws DISTC_ESTATE without views

    // The last finalized iteration, in ns after its prepare(): -1 when not marked (unused).
    int64_t ready_ns(size_t i) const;
    // Whether some rank marked gradient i ready in the last finalized iteration
    // (with find_unused, an allreduce of the marks at finalize tells; without
    // it every gradient is marked). Throws DISTC_ENOTSUP for device gradients
    // with find_unused.
    bool used(size_t i) const;
    struct BucketStats {
        uint64_t bytes;
        int64_t launch_ns, reduce_ns;
    };
    BucketStats bucket_stats(size_t b) const;

    // How buckets are reduced: `hook` (when set) starts a bucket's reduction and
    // returns its work; else `compress` (Float16/BFloat16, or Float32 for none)
    // is the type float32 buckets travel as. Throws DISTC_ESTATE during an iteration.
    // A hook gets bucket k+1 only once bucket k's work has completed: what it
    // chains (continuations that start more collectives) then comes in the
    // same order on every rank. A group runs its collectives one at a time
    // anyway, so this costs the overlap of one bucket's tail with the next.
    // A hook sees the bucket (c10d's GradBucket): its position in launch
    // order, whether it is the last, its memory, and its gradients with their
    // element offsets in it.
    struct HookBucket {
        size_t index;
        bool is_last;
        const Tensor &buffer;
        const std::vector<size_t> &grads;
        std::vector<size_t> offsets;
        std::vector<size_t> rows;  // each gradient's first dimension (its numel when 1-d)
    };
    using Hook = std::function<std::shared_ptr<Work>(const HookBucket &bucket)>;
    void set_comm_hook(Hook hook, DType compress);
    // Its owner lets go: the hook (and what it holds) goes now, on this
    // thread, and no bucket is launched any more. A continuation of a
    // bucket may still hold the reducer for a moment, and the reducer
    // itself would go with it, on its thread, later.
    void close();

    void prepare(const std::vector<size_t> &unused);
    void mark_ready(size_t i);
    // A sparse gradient's rows: `indices` (int64, nnz) and `values` (nnz rows of grads[i]).
    void mark_ready_sparse(size_t i, const Tensor &indices, const Tensor &values);
    void finalize();
    // One iteration as a rank out of inputs (uneven inputs, c10d's join):
    // every gradient reduces as zeros, matching the active ranks' buckets.
    void join();
    bool is_sparse(size_t i) const { return sparse_[i] != 0; }
    // After finalize: the averaged rows of sparse gradient i (valid until the next prepare).
    struct SparseGrad {
        const int64_t *indices;
        const void *values;
        size_t nnz;
    };
    SparseGrad sparse_grad(size_t i) const;

private:
    // A bucket's memory: host memory the ranks of a host share (distc_mem_alloc:
    // their collectives then copy and reduce without the kernel), host scratch
    // where that cannot be had, or device memory of the group's backend.
    struct Storage {
        Tensor t;
        std::unique_ptr<Scratch> host;
        bool shared = false;             // t.data is from shared_alloc
        DeviceMemory *device = nullptr;  // releases t.data when set
        Storage() = default;
        Storage(const Storage &) = delete;
        Storage &operator=(const Storage &) = delete;
        ~Storage();
    };
    std::unique_ptr<Storage> allocate(DType dt, size_t numel);
    // Host buckets from this size on are shared memory; smaller ones go
    // through the rings, not in place, where it makes no difference.
    static constexpr size_t kSharedBucketBytes = size_t(64) << 10;
    // Host memcpy / memset, or the backend's device copy / fill on the stream.
    void copy(void *dst, const void *src, size_t n);
    void zero(void *p, size_t n);

    struct Bucket {
        std::vector<size_t> members;
        std::unique_ptr<Storage> buf;  // the members back to back
        size_t pending = 0;            // members not ready yet in this iteration
        std::shared_ptr<Work> work;
        bool next_waits = false;        // a continuation launches the next bucket once this work completes
        std::unique_ptr<Scratch> wire;  // the compressed copy in flight, if any
        Clock::time_point launched{};
        BucketStats last{0, -1, -1};  // of the last finalized iteration
        // A sparse gradient's bucket (one member): this rank's rows, packed, then the
        // reduced rows; the exchange runs at launch and its failure waits for finalize.
        bool sparse = false;
        Bytes local;
        std::vector<int64_t> indices;
        Bytes rows;
        int code = 0;
        std::string message;
        int64_t exchange_ns = -1;
    };
    void launch_sparse_locked(Bucket &b);    // the blocking exchange of a sparse bucket
    void ready_locked(size_t i, bool zero);  // copies (or zeroes) gradient i into its bucket
    void set_buckets(const std::vector<std::vector<size_t>> &buckets);
    void rebuild_locked();          // a collective: every rank is in prepare()
    void launch_complete_locked();  // starts every complete bucket, in order
    // mu_, for the public calls: DISTC_ESTATE from within this reducer's hook.
    std::unique_lock<std::mutex> lock() const;
    // Marks the calling thread as inside this reducer's hook, for its scope.
    class InHook {
    public:
        explicit InHook(const Reducer *r);
        ~InHook();
        InHook(const InHook &) = delete;
        InHook &operator=(const InHook &) = delete;

    private:
        const Reducer *prev_;
    };
    // The same, from a continuation once the bucket before has completed; a
    // hook failing there fails its bucket's work (nobody is there to throw to).
    void launch_deferred();
    void launch_recording_locked();
    std::shared_ptr<Work> launch_used_map();  // the MAX allreduce of used_map_

    std::shared_ptr<ProcessGroup> pg_;
    std::vector<Tensor> grads_;
    DeviceMemory *device_ = nullptr;  // set when the gradients are device memory
    void *stream_ = nullptr;
    std::vector<char> sparse_;
    std::vector<Bucket> buckets_;
    std::vector<size_t> bucket_of_, offset_of_;  // per gradient: bucket, byte offset in it
    std::vector<char> ready_;
    Clock::time_point started_{};              // prepare() of this iteration
    std::vector<Clock::time_point> ready_at_;  // this iteration (time_point{}: unused)
    std::vector<int64_t> last_ready_ns_;       // the last finalized one
    std::vector<int32_t> used_map_;            // with find_unused on the host: the marks, then their MAX over ranks
    std::vector<char> last_used_;              // the last finalized iteration's, over ranks
    bool find_unused_, views_;
    // static_graph: the first iteration finds the unused gradients (as
    // find_unused); later ones mark them ready at prepare, so their buckets
    // need not wait for finalize, and allreduce no used map.
    bool static_graph_ = false, learned_ = false;
    std::vector<size_t> static_unused_;
    bool zero_unmarked() const { return find_unused_ || (static_graph_ && !learned_); }
    Hook hook_;
    std::vector<uint64_t> rebuild_limits_;  // empty: never rebuild
    std::vector<size_t> arrival_;           // this iteration's mark_ready order
    bool rebuilt_ = false;
    int iterations_ = 0;
    DType compress_ = DType::Float32;
    bool in_iteration_ = false;
    bool closed_ = false;  // close(): buckets still waiting are never launched
    size_t next_bucket_ = 0;
    mutable std::mutex mu_;
};

}  // namespace distc

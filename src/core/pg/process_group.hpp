// A process group: rank, size, name, timeouts, the sequence of operations and
// the worker thread that runs asynchronous ones. Collectives validate their
// arguments here (sizes, dtypes, roots: nothing is sent when they are wrong)
// and hand the data movement to the backend.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/pg/async_backend.hpp"
#include "core/pg/backend.hpp"
#include "core/pg/mesh.hpp"
#include "core/store/store.hpp"
#include "core/util/fn_ref.hpp"
#include "core/work/work.hpp"

namespace distc {

struct PgOptions {
    std::string backend = "gloo";
    Millis timeout{1800000};
    std::string name;  // empty: "default_pg" for a root group, derived for subgroups
    int debug = -1;  // -1: from DISTC_DEBUG ("detail" turns it on); 0 off; 1 on
    int device = -1;  // device backends: the accelerator; -1: the backend's choice
    // The store is this process's alone (an engine's world: mpi://). Ranks
    // then cannot meet in it; the engine's own creation is collective.
    bool private_store = false;
};

struct OpOptions {
    Millis timeout{-1};  // negative: the group's
    double premul_factor = 1.0;
    void *stream = nullptr;  // device backends: the caller's stream
};

struct P2pOp {
    bool send;
    Tensor tensor;
    int peer;
    uint32_t tag;
};

class ProcessGroup {
public:
    // `store` is the job's store; the group keeps its keys under "<name>/<instance>/".
    // `global_ranks[i]` is group rank i's rank in the root group (empty: this is the root).
    // `make`, when given, creates an asynchronous backend for the group's key
    // space (a subgroup split by the engine from its parent).
    using MakeAsync = std::function<std::unique_ptr<AsyncBackend>(const AsyncGroupInfo &)>;
    ProcessGroup(std::shared_ptr<Store> store, int rank, int size, const PgOptions &opts,
                 std::vector<int> global_ranks = {}, const MakeAsync &make = nullptr);
    ~ProcessGroup();
    ProcessGroup(const ProcessGroup &) = delete;
    ProcessGroup &operator=(const ProcessGroup &) = delete;

    int rank() const { return rank_; }
    int size() const { return size_; }
    const std::string &name() const { return name_; }
    const std::string &store_prefix() const { return prefix_; }
    const char *backend_name() const { return backend_ ? backend_->name() : async_->name(); }
    // Bit (1 << DLDeviceType) per memory kind the backend takes.
    uint64_t device_types() const { return device_types_; }
    // The backend's device memory (async_backend.hpp), or nullptr (host backends, or none kept).
    DeviceMemory *device_memory() const { return async_ ? async_->memory() : nullptr; }
    Millis timeout() const { return timeout_; }
    int global_rank(int group_rank) const;  // -1 if out of range
    int group_rank(int global_rank) const;  // -1 if not a member

    // Subgroups (groups.cpp). nullptr: this rank is not a member.
    std::shared_ptr<ProcessGroup> new_subgroup(const std::vector<int> &ranks, PgOptions opts);
    std::shared_ptr<ProcessGroup> split(int color, int key, PgOptions opts);

    // Each returns a Work; with async=false the operation has already run on
    // the calling thread (and a failure was thrown, not stored), and what
    // returns may be null.
    using WorkPtr = std::shared_ptr<Work>;
    WorkPtr allreduce(std::vector<Tensor> tensors, ReduceOp op, const OpOptions &o, bool async);
    WorkPtr allreduce(const Tensor &t, ReduceOp op, const OpOptions &o, bool async);
    WorkPtr broadcast(Tensor t, int root, const OpOptions &o, bool async);
    WorkPtr reduce(Tensor t, int root, ReduceOp op, const OpOptions &o, bool async);
    WorkPtr allgather(Tensor input, std::vector<Tensor> outputs, const OpOptions &o, bool async);
    WorkPtr gather(Tensor input, std::vector<Tensor> outputs, int root, const OpOptions &o, bool async);
    WorkPtr scatter(std::vector<Tensor> inputs, Tensor output, int root, const OpOptions &o, bool async);
    WorkPtr reduce_scatter(std::vector<Tensor> inputs, Tensor output, ReduceOp op, const OpOptions &o, bool async);
    WorkPtr alltoall(std::vector<Tensor> inputs, std::vector<Tensor> outputs, const OpOptions &o, bool async);
    WorkPtr alltoall_single(Tensor input, Tensor output, std::vector<int64_t> in_splits,
                            std::vector<int64_t> out_splits, const OpOptions &o, bool async);
    WorkPtr barrier(const OpOptions &o, bool async);
    WorkPtr send(Tensor t, int dst, int tag, const OpOptions &o, bool async);
    WorkPtr recv(Tensor t, int src, int tag, const OpOptions &o, bool async);
    WorkPtr batch_p2p(std::vector<P2pOp> ops, const OpOptions &o, bool async);

    // Blocking compound operations (extra_collectives.cpp).
    void monitored_barrier(Millis timeout, bool wait_all);
    std::vector<Bytes> all_gather_bytes(ByteView data, const OpOptions &o);
    std::vector<Bytes> gather_bytes(ByteView data, int root, const OpOptions &o);
    Bytes broadcast_bytes(ByteView data, int root, const OpOptions &o);
    Bytes scatter_bytes(const std::vector<ByteView> &data, int root, const OpOptions &o);

    void abort();
    bool aborted() const { return aborted_.load(); }
    // True on a thread of some group (its worker or a p2p waiter), where a
    // completion callback runs: destroying that group there would join the
    // thread from itself.
    static bool on_group_thread();

private:
    using Body = std::function<int32_t(const OpCtx &)>;  // returns the source rank or -1
    // What an operation is, for messages and for the debug-mode cross-check.
    struct OpInfo {
        const char *kind;      // "allreduce"
        OpLabel label;         // what messages say of its data: "(float32[16])"
        int dtype = -1;        // DType, or -1
        uint64_t numel = 0;
        int root = -1;
        int reduce = -1;       // ReduceOp, or -1
        uint32_t steps = 1;    // tags (sequence numbers) the body uses: ctx.tag .. ctx.tag + steps - 1
        bool p2p = false;      // paired by tag, outside the group's sequence
    };
    WorkPtr run(const OpInfo &info, const OpOptions &o, bool async, Body body);
    OpInfo allreduce_info(const Tensor *ts, size_t n, ReduceOp op) const;  // checks the arguments
    // The path of asynchronous backends: number the operation, let the backend
    // take its Work; a blocking call returns once done (stream-ordered: enqueued).
    using Start = FnRef<void(const WorkPtr &, const AsyncArgs &)>;
    template <typename F>
    WorkPtr launch(const OpInfo &info, const OpOptions &o, bool async, F &&start) {
        if (aborted_) fail_aborted();
        uint64_t seq = info.p2p ? 0 : take_seq(1);
        Millis timeout = o.timeout.count() < 0 ? timeout_ : o.timeout;
        bool host_ordered = !info.p2p && !stream_ordered_;  // streams order device work themselves
        if (host_ordered && !async && outstanding_count_.load(std::memory_order_acquire)) wait_outstanding(timeout);
        AsyncArgs args{seq, timeout, o.premul_factor, o.stream, info.kind, &info.label, !async};
        if (async || stream_ordered_) return launch_work(info, args, host_ordered, start);
        // A blocking call on the host: the backend completes it before we
        // return, so it needs no Work (nobody else sees it) and returns none.
        try {
            start(nullptr, args);
        } catch (const BlockingCallTimedOut &) {
            abort_timed_out(info, args);
        }
        return nullptr;
    }
    [[noreturn, gnu::cold]] void fail_aborted() const;
    // Its parts off the blocking fast path: an asynchronous or stream-ordered
    // call's Work; waiting for earlier asynchronous collectives; a blocking
    // call the backend did not complete in time (aborts the group, throws).
    WorkPtr launch_work(const OpInfo &info, const AsyncArgs &a, bool host_ordered, Start start);
    void wait_outstanding(Millis timeout);
    [[noreturn]] void abort_timed_out(const OpInfo &info, const AsyncArgs &a);
    // Byte collectives through the store (asynchronous backends): `kind` is
    // the collective's name, `mine` this rank's value(s), root -1 for all_gather.
    struct StoreBytesResult {
        std::vector<Bytes> all;
        Bytes one;
    };
    StoreBytesResult store_bytes(const char *kind, const OpOptions &o, int root, const std::vector<ByteView> &mine);
    bool bytes_via_store() const;
    struct BytePrims;
    // Runs a byte collective's two steps with the primitives this group's backend offers.
    void with_byte_prims(const OpInfo &info, const OpOptions &o, const std::function<void(BytePrims &)> &body);
    void debug_check(const OpInfo &info, const OpCtx &ctx);
    // Runs one operation and completes its Work; a collective that fails
    // (unless every rank failed it alike) breaks the group.
    void execute(Work &w, const OpCtx &ctx, const Body &body, bool collective) noexcept;
    void break_group(const std::string &why);
    void worker_loop();
    void p2p_loop();
    // Completes every queued (not yet running) operation with DISTC_EABORTED.
    void drop_queued(bool stop, const char *why);
    void check_rank(int r, const char *what) const;
    // Creation (the constructor's parts): the backend (and mesh) through `store`;
    // then every rank waits for all to have succeeded.
    static constexpr const char *kCreationFailed = "creation_failed";  // a failing rank's reason
    void connect(const PgOptions &opts, const MakeAsync &make, const std::shared_ptr<Store> &store,
                 const std::string &instance);
    void agree_created(Store &store);
    // Subgroups (groups.cpp): the members' group, once everyone's (color, key) is known;
    // and how an asynchronous backend makes it (color < 0: joins the engine's split as a non-member).
    std::shared_ptr<ProcessGroup> split_members(int color, int key, PgOptions opts, const Scratch &all);
    MakeAsync engine_split(int color, int key, const PgOptions &opts);
    void check_reduce(const Tensor &t, ReduceOp op) const;

    std::shared_ptr<Store> root_store_;  // the job's store, for subgroups
    std::shared_ptr<Store> store_;       // this group's key space
    std::string prefix_;                 // its keys' prefix in root_store_
    const int rank_, size_;
    const std::string name_;
    const Millis timeout_;
    const std::vector<int> global_ranks_;
    const bool private_store_;  // PgOptions::private_store; subgroups inherit it
    bool debug_ = false;
    std::atomic<uint64_t> subgroups_{0};       // creations so far, same on every rank
    std::atomic<uint64_t> monitored_{0};       // monitored barriers so far
    std::unique_ptr<Backend> backend_;      // gloo, built in
    std::unique_ptr<AsyncBackend> async_;  // or a registered or plugin backend
    uint64_t device_types_ = (uint64_t{1} << 1) | (uint64_t{1} << 3);  // gloo's: kDLCPU, kDLCUDAHost; else async_'s
    bool stream_ordered_ = false;                                      // async_'s, read once
    // Asynchronous collectives of a host backend not known to be done: a
    // blocking collective waits for them first, as with gloo (guarded by mu_).
    std::vector<std::weak_ptr<Work>> outstanding_;
    std::atomic<size_t> outstanding_count_{0};  // its size, read without the lock
    std::unique_ptr<Mesh> mesh_;  // collectives up to Mesh::limit() bypass the backend (mesh.hpp)
    bool small(size_t nbytes) const { return mesh_ && nbytes <= Mesh::limit(); }
    // The last sequence number taken. Collectives of a group are issued one
    // at a time (issued concurrently they have no order across ranks anyway),
    // so taking numbers needs no locked increment; a racing issue may repeat one.
    std::atomic<uint64_t> seq_{0};
    uint64_t take_seq(uint32_t n) {
        uint64_t s = seq_.load(std::memory_order_relaxed);
        seq_.store(s + n, std::memory_order_relaxed);
        return s + 1;
    }
    std::atomic<bool> aborted_{false};

    struct Item {
        WorkPtr work;
        OpCtx ctx;
        Body body;
        bool collective;
    };
    mutable std::mutex mu_;
    std::string broken_;  // why a collective failed here and broke the group (guarded by mu_)
    std::condition_variable cv_;       // the worker and the p2p waiters wait for items here
    std::condition_variable idle_cv_;  // blocking collectives wait here for earlier async ones
    // Async collectives run one at a time, in order, on worker_.
    std::deque<Item> queue_;
    size_t collectives_pending_ = 0;  // queued or running on worker_
    std::thread worker_;
    // Async point-to-point operations are posted at once; their waits run on a
    // pool that grows so that no wait holds up another (an irecv queued before
    // the matching isend must not deadlock).
    std::deque<Item> p2p_queue_;
    size_t p2p_idle_ = 0;
    std::vector<std::thread> p2p_threads_;
    bool stopping_ = false;
};

}  // namespace distc

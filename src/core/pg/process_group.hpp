// A process group: rank, size, name, timeouts and the sequence of operations.
// Collectives validate their arguments here (sizes, dtypes, roots: nothing is
// sent when they are wrong), take a sequence number and hand the operation to
// the backend (the built-in host backend or a plugin, one interface) through
// one launch path.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/pg/async_backend.hpp"
#include "core/pg/call_check.hpp"
#include "core/pg/trace_recorder.hpp"
#include "core/store/store.hpp"
#include "core/util/fn_ref.hpp"
#include "core/work/work.hpp"

namespace distc {

struct PgOptions {
    std::string backend = "gloo";
    Millis timeout{1800000};
    std::string name;  // empty: "default_pg" for a root group, derived for subgroups
    // Where the group's ranks meet in the store (empty: `name`). Subgroups
    // derive theirs from the parent's, so that groups the caller gave one
    // name (every color of a split, say) never share keys.
    std::string key_space;
    int debug = -1;   // -1: the parent's (subgroups), else from DISTC_DEBUG ("detail" turns it on); 0 off; 1 on
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

// One operation of a batch_isend_irecv, as the backend takes it.
using P2pOp = AsyncBackend::P2p;

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
    const char *backend_name() const { return backend_->name(); }
    const char *transport(int peer) const { return peer == rank_ ? "self" : backend_->transport(peer); }
    // Bit (1 << DLDeviceType) per memory kind the backend takes.
    uint64_t device_types() const { return device_types_; }
    // The backend's device memory (async_backend.hpp), or nullptr (host backends, or none kept).
    DeviceMemory *device_memory() const { return backend_->memory(); }
    Millis timeout() const { return timeout_; }
    int global_rank(int group_rank) const;  // -1 if out of range
    int group_rank(int global_rank) const;  // -1 if not a member

    // Subgroups (groups.cpp). nullptr: this rank is not a member.
    std::shared_ptr<ProcessGroup> new_subgroup(const std::vector<int> &ranks, PgOptions opts);
    std::shared_ptr<ProcessGroup> split(int color, int key, PgOptions opts);

    // Each returns a Work; with async=false the operation has already run on
    // the calling thread (and a failure was thrown, not stored), and what
    // returns may be null. Lists (Span) are lent for the call only.
    using WorkPtr = std::shared_ptr<Work>;
    WorkPtr allreduce(TensorSpan tensors, ReduceOp op, const OpOptions &o, bool async);
    WorkPtr allreduce(const Tensor &t, ReduceOp op, const OpOptions &o, bool async);
    WorkPtr broadcast(Tensor t, int root, const OpOptions &o, bool async);
    WorkPtr reduce(Tensor t, int root, ReduceOp op, const OpOptions &o, bool async);
    WorkPtr allgather(Tensor input, TensorSpan outputs, const OpOptions &o, bool async);
    WorkPtr gather(Tensor input, TensorSpan outputs, int root, const OpOptions &o, bool async);
    WorkPtr scatter(TensorSpan inputs, Tensor output, int root, const OpOptions &o, bool async);
    WorkPtr reduce_scatter(TensorSpan inputs, Tensor output, ReduceOp op, const OpOptions &o, bool async);
    WorkPtr alltoall(TensorSpan inputs, TensorSpan outputs, const OpOptions &o, bool async);
    WorkPtr alltoall_single(Tensor input, Tensor output, std::vector<int64_t> in_splits,
                            std::vector<int64_t> out_splits, const OpOptions &o, bool async);
    WorkPtr barrier(const OpOptions &o, bool async);
    WorkPtr send(Tensor t, int dst, int tag, const OpOptions &o, bool async);
    WorkPtr recv(Tensor t, int src, int tag, const OpOptions &o, bool async);
    WorkPtr batch_p2p(Span<P2pOp> ops, const OpOptions &o, bool async);

    // Blocking compound operations (extra_collectives.cpp).
    void monitored_barrier(Millis timeout, bool wait_all);
    std::vector<Bytes> all_gather_bytes(ByteView data, const OpOptions &o);
    std::vector<Bytes> gather_bytes(ByteView data, int root, const OpOptions &o);
    Bytes broadcast_bytes(ByteView data, int root, const OpOptions &o);
    Bytes scatter_bytes(const std::vector<ByteView> &data, int root, const OpOptions &o);

    void abort();
    bool aborted() const { return aborted_.load(); }
    // This group's flight recorder into the file `path` (trace_recorder.hpp).
    void trace_dump(const std::string &path) const;

private:
    // What an operation is, for messages and for the transports' check that
    // every rank runs the same call.
    struct OpInfo {
        const char *kind;  // "allreduce"
        OpLabel label;     // what messages say of its data: "(float32[16])"
        int dtype = -1;    // DType, or -1
        uint64_t numel = 0;
        int root = -1;
        int reduce = -1;      // ReduceOp, or -1
        bool p2p = false;     // paired by tag, outside the group's sequence
        uint64_t digest = 0;  // an all-to-all's split_digest (call.hpp), when check_ wants it
    };
    OpInfo allreduce_info(const Tensor *ts, size_t n, ReduceOp op) const;  // checks the arguments
    // The one launch path: number the operation and let the backend take its
    // Work; a blocking call returns once done (stream-ordered: enqueued).
    using Start = FnRef<void(const WorkPtr &, const AsyncArgs &)>;
    template <typename F>
    WorkPtr launch(const OpInfo &info, const OpOptions &o, bool async, F &&start) {
        if (aborted_) fail_aborted();
        if (!async && !info.p2p && in_callback_of(this)) fail_in_callback();
        // Point-to-point operations are paired by tag, not by the group's
        // sequence, so only collectives advance it.
        uint64_t seq = info.p2p ? 0 : seq_.fetch_add(1, std::memory_order_relaxed) + 1;
        Millis timeout = o.timeout.count() < 0 ? timeout_ : o.timeout;
        bool host_ordered = !info.p2p && !stream_ordered_;  // streams order device work themselves
        if (host_ordered && !async && outstanding_count_.load(std::memory_order_acquire)) wait_outstanding(timeout);
        AsyncArgs args{
            seq,
            timeout,
            o.premul_factor,
            o.stream,
            info.kind,
            &info.label,
            !async,
            make_call(info.kind, info.dtype, info.reduce, info.root, info.numel, static_cast<uint32_t>(seq))};
        uint64_t traced =
            trace_ ? trace_->begin(info.kind, seq, info.label, info.root, info.reduce, !async && !stream_ordered_,
                                   info.p2p ? seq_.load(std::memory_order_relaxed) : 0)
                   : 0;
        if (check_ && !info.p2p) check_call(info, args, traced);
        if (async || stream_ordered_) return launch_work(info, args, host_ordered, start, traced);
        // A blocking call on the host: the backend completes it before we
        // return, so it needs no Work (nobody else sees it) and returns none.
        try {
            try {
                start(nullptr, args);
            } catch (const BlockingCallTimedOut &) {
                abort_timed_out(info, args);
            }
        } catch (const Error &e) {
            if (traced) trace_->finished(traced, e.code(), e.what());
            throw;
        }
        if (traced) trace_->finished(traced, 0, kNoMessage);
        return nullptr;
    }
    [[noreturn, gnu::cold]] void fail_aborted() const;
    [[noreturn, gnu::cold]] void fail_in_callback() const;
    // Debug mode on an engine's backend: the ranks compare the call first (call_check.hpp).
    void check_call(const OpInfo &info, const AsyncArgs &a, uint64_t traced);
    // Its parts off the blocking fast path: an asynchronous or stream-ordered
    // call's Work; waiting for earlier asynchronous collectives; a blocking
    // call the backend did not complete in time (aborts the group, throws).
    WorkPtr launch_work(const OpInfo &info, const AsyncArgs &a, bool host_ordered, Start start, uint64_t traced);
    static const std::string kNoMessage;
    void wait_outstanding(Millis timeout);
    [[noreturn]] void abort_timed_out(const OpInfo &info, const AsyncArgs &a);
    // Byte collectives through the store (device-only backends): `kind` is
    // the collective's name, `mine` this rank's value(s), root -1 for all_gather.
    struct StoreBytesResult {
        std::vector<Bytes> all;
        Bytes one;
    };
    StoreBytesResult store_bytes(const char *kind, const OpOptions &o, int root, const std::vector<ByteView> &mine);
    bool bytes_via_store() const;
    // A byte collective's two steps (lengths, then bytes) as two of the group's own blocking collectives.
    struct BytePrims;
    BytePrims byte_prims(const OpOptions &o);
    void check_rank(int r, const char *what) const;
    // Creation (the constructor's parts): the backend through `store`; then
    // every rank waits for all to have succeeded.
    static constexpr const char *kCreationFailed = "creation_failed";  // a failing rank's reason
    void connect(const PgOptions &opts, const MakeAsync &make, const std::shared_ptr<Store> &store,
                 const std::string &instance);
    void agree_created(Store &store);
    // Subgroups (groups.cpp): the members' group, once everyone's (color, key) is known;
    // and how the backend makes it (color < 0: joins the engine's split as a non-member).
    std::shared_ptr<ProcessGroup> split_members(int color, int key, PgOptions opts, const Scratch &all);
    MakeAsync engine_split(int color, int key, const PgOptions &opts);
    // What a subgroup takes from this group: its store's kind, and debug mode unless its options set it.
    void inherit(PgOptions &opts) const;
    void check_reduce(const Tensor &t, ReduceOp op) const;

    std::shared_ptr<Store> root_store_;  // the job's store, for subgroups
    std::shared_ptr<Store> store_;       // this group's key space
    std::string prefix_;                 // its keys' prefix in root_store_
    const int rank_, size_;
    const std::string name_;
    const std::string key_space_;  // PgOptions::key_space, or the name
    const Millis timeout_;
    const std::vector<int> global_ranks_;
    const bool private_store_;               // PgOptions::private_store; subgroups inherit it
    bool debug_ = false;                     // DISTC_DEBUG=detail: the ranks cross-check every call
    std::atomic<uint64_t> subgroups_{0};     // creations so far, same on every rank
    std::atomic<uint64_t> monitored_{0};     // monitored barriers so far
    std::unique_ptr<AsyncBackend> backend_;  // the host backend, or a registered or plugin one
    std::unique_ptr<CallCheck> check_;       // debug mode on another backend than the host one (else null)
    std::shared_ptr<TraceRecorder> trace_;   // its flight recorder (null: DISTC_TRACE_BUFFER=0)
    uint64_t device_types_ = 0;              // backend_'s, read once
    bool stream_ordered_ = false;            // backend_'s, read once
    // Asynchronous collectives not known to be done: a blocking collective on
    // the host waits for them first, so results come in issue order (guarded by mu_).
    std::vector<std::weak_ptr<Work>> outstanding_;
    std::atomic<size_t> outstanding_count_{0};  // its size, read without the lock
    std::atomic<uint64_t> seq_{0};              // the last sequence number taken
    std::atomic<bool> aborted_{false};
    mutable std::mutex mu_;
};

}  // namespace distc

#include "core/reducer/reducer.hpp"

#include <cstring>
#include <string>

#include "core/reducer/bucket_assignment.hpp"
#include "core/reducer/sparse.hpp"

#include "core/util/error.hpp"
#include "core/util/shared_memory.hpp"
#include "core/work/continuation.hpp"

namespace distc {

Reducer::Reducer(std::shared_ptr<ProcessGroup> pg, std::vector<Tensor> grads,
                 const std::vector<std::vector<size_t>> &buckets, bool find_unused, bool views,
                 std::vector<uint64_t> rebuild_limits, std::vector<char> sparse, void *stream, bool static_graph) :
    pg_(std::move(pg)),
    grads_(std::move(grads)), stream_(stream), sparse_(std::move(sparse)), find_unused_(find_unused), views_(views),
    static_graph_(static_graph), rebuild_limits_(std::move(rebuild_limits)) {
    size_t n = grads_.size();
    sparse_.resize(n, 0);
    auto host = [](const Tensor &t) { return host_memory(t.device_type); };
    if (!host(grads_[0])) {
        device_ = pg_->device_memory();
        if (!device_)
            fail(DISTC_ENOTSUP, std::string("the gradients are device memory, and the ") + pg_->backend_name() +
                                    " backend keeps no device memory for the reducer's buckets (its vtable has no "
                                    "mem_* entries)");
    }
    for (size_t i = 0; i < n; ++i) {
        const Tensor &g = grads_[i], &g0 = grads_[0];
        if (host(g) != host(g0) || (!host(g) && (g.device_type != g0.device_type || g.device_id != g0.device_id)))
            fail(DISTC_EINVAL, "grads[" + std::to_string(i) + "] is on device (" + std::to_string(g.device_type) +
                                   ", " + std::to_string(g.device_id) + ") but grads[0] on (" +
                                   std::to_string(g0.device_type) + ", " + std::to_string(g0.device_id) +
                                   "): one reducer takes one device");
        if (device_ && sparse_[i])
            fail(DISTC_ENOTSUP, "gradient " + std::to_string(i) +
                                    " is sparse and in device memory: sparse gradients are reduced on the host");
    }
    ready_.assign(n, 0);
    ready_at_.assign(n, Clock::time_point{});
    last_ready_ns_.assign(n, -1);
    last_used_.assign(n, 1);
    set_buckets(buckets);
}

void Reducer::set_buckets(const std::vector<std::vector<size_t>> &buckets) {
    size_t n = grads_.size();
    bucket_of_.assign(n, SIZE_MAX);
    offset_of_.assign(n, 0);
    std::vector<Bucket> made;
    for (size_t b = 0; b < buckets.size(); ++b) {
        Bucket bk;
        bk.members = buckets[b];
        if (bk.members.empty()) fail(DISTC_EINVAL, "bucket " + std::to_string(b) + " is empty");
        for (size_t i : bk.members)
            if (sparse_[i] && bk.members.size() > 1)
                fail(DISTC_EINVAL, "bucket " + std::to_string(b) + " holds sparse gradient " + std::to_string(i) +
                                       " with others; a sparse gradient needs a bucket of its own");
        bk.sparse = sparse_[bk.members[0]] != 0;
        DType dt = grads_[bk.members[0]].dtype;
        size_t numel = 0;
        for (size_t i : bk.members) {
            if (grads_[i].dtype != dt)
                fail(DISTC_EINVAL, "bucket " + std::to_string(b) + " mixes " + dtype_name(dt) + " (gradient " +
                                       std::to_string(bk.members[0]) + ") and " + dtype_name(grads_[i].dtype) +
                                       " (gradient " + std::to_string(i) + ")");
            bucket_of_[i] = b;
            offset_of_[i] = numel * dtype_size(dt);
            numel += grads_[i].numel;
        }
        bk.buf = allocate(dt, bk.sparse ? 0 : numel);                                // sparse rows live elsewhere
        if (views_ && bk.buf->t.nbytes()) zero(bk.buf->t.data, bk.buf->t.nbytes());  // views start at zero
        bk.last.bytes = numel * dtype_size(dt);
        made.push_back(std::move(bk));
    }
    for (size_t i = 0; i < n; ++i)
        if (bucket_of_[i] == SIZE_MAX) fail(DISTC_EINVAL, "gradient " + std::to_string(i) + " is in no bucket");
    buckets_ = std::move(made);
}

std::unique_ptr<Reducer::Storage> Reducer::allocate(DType dt, size_t numel) {
    auto s = std::make_unique<Storage>();
    if (device_) {
        s->t.data = device_->alloc(grads_[0].device_type, numel * dtype_size(dt));
        s->device = device_;
        s->t.numel = numel;
        s->t.dtype = dt;
        s->t.dim0 = static_cast<int64_t>(numel);
        s->t.device_type = grads_[0].device_type;
        s->t.device_id = grads_[0].device_id;
    } else {
        const size_t bytes = checked_mul(numel, dtype_size(dt), "a bucket");
        try {
            if (bytes >= kSharedBucketBytes) {
                s->t.data = shared_alloc(bytes);
                s->shared = true;
                s->t.numel = numel;
                s->t.dtype = dt;
                s->t.dim0 = static_cast<int64_t>(numel);
            }
        } catch (const Error &) {  // out of file descriptors, say: plain memory serves as well
        }
        if (!s->shared) {
            s->host = std::make_unique<Scratch>(dt, numel);
            s->t = s->host->t;
        }
    }
    return s;
}

Reducer::Storage::~Storage() {
    if (device) device->release(t.device_type, t.data);
    if (shared) {
        try {
            shared_free(t.data);
        } catch (...) {  // it is ours: cannot fail
        }
    }
}

void Reducer::copy(void *dst, const void *src, size_t n) {
    if (device_)
        device_->copy(dst, src, n, stream_);
    else
        std::memcpy(dst, src, n);
}

void Reducer::zero(void *p, size_t n) {
    if (device_)
        device_->zero(p, n, stream_);
    else
        std::memset(p, 0, n);
}

void Reducer::rebuild_locked() {
    // Rank 0's arrival order, so that every rank builds the same buckets. As
    // bytes: they travel on any backend, whatever memory its collectives take.
    size_t n = grads_.size();
    std::vector<int64_t> order(n);
    for (size_t k = 0; k < n; ++k) order[k] = k < arrival_.size() ? static_cast<int64_t>(arrival_[k]) : -1;
    Bytes got = pg_->broadcast_bytes(ByteView(order.data(), n * sizeof(int64_t)), 0, OpOptions{});
    if (got.size() != n * sizeof(int64_t))
        fail(DISTC_EPROTO, "rank 0 sent a bucket order of " + std::to_string(got.size()) + " bytes for " +
                               std::to_string(n) + " gradients");
    std::memcpy(order.data(), got.data(), got.size());
    // Gradients rank 0 never saw arrive (unused) go last, in index order.
    std::vector<char> seen(n, 0);
    std::vector<size_t> pos;
    for (int64_t v : order)
        if (v >= 0 && static_cast<size_t>(v) < n && !seen[static_cast<size_t>(v)]) {
            seen[static_cast<size_t>(v)] = 1;
            pos.push_back(static_cast<size_t>(v));
        }
    for (size_t i = 0; i < n; ++i)
        if (!seen[i]) pos.push_back(i);
    std::vector<BucketTensor> bt;
    for (size_t i : pos)
        bt.push_back(BucketTensor{static_cast<int>(grads_[i].dtype), 0, grads_[i].device_type, grads_[i].device_id,
                                  grads_[i].nbytes(), sparse_[i] != 0});
    // Positions in arrival order map back to gradient indices; bucket 0 fills first.
    auto by_pos = compute_bucket_assignment_by_size(bt, rebuild_limits_);
    std::vector<std::vector<size_t>> buckets;
    for (const auto &b : by_pos) {
        std::vector<size_t> members;
        for (size_t p : b) members.push_back(pos[p]);
        buckets.push_back(std::move(members));
    }
    set_buckets(buckets);
}

namespace {
// The reducer whose hook this thread is running, under the reducer's lock.
thread_local const Reducer *t_in_hook = nullptr;
}  // namespace

Reducer::InHook::InHook(const Reducer *r) : prev_(t_in_hook) { t_in_hook = r; }
Reducer::InHook::~InHook() { t_in_hook = prev_; }

std::unique_lock<std::mutex> Reducer::lock() const {
    // The lock is not recursive: a hook that called back in would wait for itself for ever.
    if (t_in_hook == this)
        fail(DISTC_ESTATE,
             "called from this reducer's communication hook, which runs with the reducer locked: a hook starts "
             "its bucket's reduction and returns");
    return std::unique_lock<std::mutex>(mu_);
}

Reducer::~Reducer() {
    for (auto &b : buckets_) {
        if (!b.work) continue;
        try {
            b.work->wait(Millis(-1));  // the buffers must outlive the allreduces reading them
        } catch (const Error &) {
            // Freed in a completion callback of its group's collectives: those
            // allreduces run only once the callback returns. Their buffers go
            // once the last of them has completed, not under them.
            auto kept = std::make_shared<std::vector<Bucket>>(std::move(buckets_));
            for (Bucket &k : *kept)
                if (k.work) k.work->add_continuation([kept](Work &) {});
            return;
        }
    }
}

void *Reducer::grad_view(size_t i) const {
    if (!views_) fail(DISTC_ESTATE, "gradients are not bucket views (set gradient_as_bucket_view)");
    if (sparse_[i]) fail(DISTC_EINVAL, "gradient " + std::to_string(i) + " is sparse: it has no view");
    return buckets_[bucket_of_[i]].buf->t.bytes() + offset_of_[i];
}

int64_t Reducer::ready_ns(size_t i) const {
    auto lk = lock();
    return last_ready_ns_[i];
}

void Reducer::join() {
    std::vector<size_t> all(grads_.size());
    for (size_t i = 0; i < all.size(); ++i) all[i] = i;
    prepare(all);
    finalize();
}

bool Reducer::used(size_t i) const {
    auto lk = lock();
    if ((find_unused_ || static_graph_) && device_)
        fail(DISTC_ENOTSUP,
             "which gradients some rank used is known for host gradients only (find_unused_parameters "
             "with device gradients reduces unused ones as zeros)");
    return last_used_[i] != 0;
}

Reducer::BucketStats Reducer::bucket_stats(size_t b) const {
    auto lk = lock();
    return buckets_[b].last;
}

void Reducer::prepare(const std::vector<size_t> &unused) {
    auto lk = lock();
    if (in_iteration_)
        fail(DISTC_ESTATE,
             "the previous iteration was not finalized (call distc_reducer_finalize after each backward)");
    for (size_t u : unused)
        if (u >= grads_.size())
            fail(DISTC_EINVAL,
                 "unused index " + std::to_string(u) + " is outside 0.." + std::to_string(grads_.size() - 1));
    // c10d rebuilds once, at the start of the second iteration, from the first one's order.
    if (!rebuild_limits_.empty() && !rebuilt_ && iterations_ == 1) {
        rebuild_locked();
        rebuilt_ = true;
    }
    in_iteration_ = true;
    next_bucket_ = 0;
    arrival_.clear();
    started_ = Clock::now();
    std::fill(ready_.begin(), ready_.end(), 0);
    std::fill(ready_at_.begin(), ready_at_.end(), Clock::time_point{});
    for (auto &b : buckets_) {
        b.pending = b.members.size();
        b.work.reset();
        b.code = 0;
        b.message.clear();
        b.indices.clear();
        b.rows.clear();
    }
    try {
        for (size_t u : unused) {
            if (ready_[u]) fail(DISTC_EINVAL, "unused index " + std::to_string(u) + " is listed twice");
            ready_locked(u, true);
        }
        if (learned_)
            for (size_t u : static_unused_)
                if (!ready_[u]) ready_locked(u, true);
        launch_complete_locked();
    } catch (...) {
        in_iteration_ = false;
        throw;
    }
}

void Reducer::ready_locked(size_t i, bool zero) {
    Bucket &b = buckets_[bucket_of_[i]];
    if (b.sparse) {  // unused: no rows from this rank (mark_ready_sparse packs the used case)
        if (zero) b.local = pack_sparse(nullptr, 0, nullptr, 0);
        ready_[i] = 1;
        if (!zero) ready_at_[i] = Clock::now();
        --b.pending;
        return;
    }
    uint8_t *dst = b.buf->t.bytes() + offset_of_[i];
    size_t nb = grads_[i].nbytes();
    if (zero && nb)
        this->zero(dst, nb);
    else if (nb && !views_)  // with views the gradient was written in place
        copy(dst, grads_[i].data, nb);
    ready_[i] = 1;
    if (!zero) ready_at_[i] = Clock::now();
    --b.pending;
}

void Reducer::set_comm_hook(Hook hook, DType compress) {
    auto lk = lock();
    if (in_iteration_) fail(DISTC_ESTATE, "a communication hook cannot change during an iteration");
    if (device_ && compress != DType::Float32)
        fail(DISTC_ENOTSUP, std::string("the built-in ") + dtype_name(compress) +
                                " compression narrows buckets on the host, and these buckets are device memory: "
                                "register a hook that compresses on the device");
    hook_ = std::move(hook);
    compress_ = compress;
}

void Reducer::launch_complete_locked() {
    while (next_bucket_ < buckets_.size() && buckets_[next_bucket_].pending == 0) {
        if (hook_ && next_bucket_ > 0) {  // a hook's buckets go one after the other (see set_comm_hook)
            Bucket &prev = buckets_[next_bucket_ - 1];
            if (prev.work && !prev.work->done()) {
                if (!prev.next_waits) {
                    prev.next_waits = true;
                    std::weak_ptr<Reducer> weak = weak_from_this();
                    prev.work->add_continuation([weak](Work &) {
                        run_continuation([weak] {
                            if (auto self = weak.lock()) self->launch_deferred();
                        });
                    });
                }
                return;
            }
        }
        Bucket &b = buckets_[next_bucket_];
        b.next_waits = false;
        b.launched = Clock::now();
        b.wire.reset();
        if (b.sparse) {
            launch_sparse_locked(b);
        } else if (hook_) {
            HookBucket hb{next_bucket_, next_bucket_ + 1 == buckets_.size(), b.buf->t, b.members, {}, {}};
            for (size_t i : b.members) {
                hb.offsets.push_back(offset_of_[i] / dtype_size(b.buf->t.dtype));
                hb.rows.push_back(grads_[i].dim0 > 0 ? static_cast<size_t>(grads_[i].dim0) : 1);
            }
            {
                InHook in(this);
                b.work = hook_(hb);
            }
            if (!b.work) fail(DISTC_EINTERNAL, "the communication hook gave no work");
        } else if (compress_ != DType::Float32 && b.buf->t.dtype == DType::Float32) {
            // c10d's fp16/bf16 compression: the bucket travels narrowed, is averaged
            // there, and is widened back at finalize.
            b.wire = std::make_unique<Scratch>(compress_, b.buf->t.numel);
            narrow_floats(compress_, static_cast<uint16_t *>(b.wire->t.data), static_cast<const float *>(b.buf->t.data),
                          b.buf->t.numel);
            b.work = pg_->allreduce(b.wire->t, ReduceOp::Avg, OpOptions{}, true);
        } else {
            // AVG: one division by the group size per bucket, as c10d does.
            OpOptions o;
            o.stream = stream_;
            b.work = pg_->allreduce(b.buf->t, ReduceOp::Avg, o, true);
        }
        ++next_bucket_;
    }
}

std::shared_ptr<Work> Reducer::launch_used_map() {
    return pg_->allreduce(flat_tensor(used_map_.data(), DType::Int32, used_map_.size()), ReduceOp::Max, OpOptions{},
                          true);
}

void Reducer::launch_recording_locked() {
    for (;;) {
        try {
            launch_complete_locked();
            return;
        } catch (const Error &e) {
            auto failed = Work::promise("bucket hook");
            failed->complete(e.code(), e.what());
            buckets_[next_bucket_].work = failed;
            ++next_bucket_;
        }
    }
}

void Reducer::launch_deferred() {
    std::lock_guard<std::mutex> lk(mu_);
    if (!closed_) launch_recording_locked();
}

void Reducer::close() {
    Hook gone;  // destroyed after the lock: its payload's release is the caller's code
    std::lock_guard<std::mutex> lk(mu_);
    closed_ = true;
    gone.swap(hook_);
}

void Reducer::launch_sparse_locked(Bucket &b) {
    // A blocking exchange of variable-size messages, issued in bucket order like the
    // dense buckets' allreduces (so every rank runs the same collectives in the same order).
    size_t i = b.members[0];
    const Tensor &g = grads_[i];
    auto t0 = Clock::now();
    try {
        auto parts = pg_->all_gather_bytes(ByteView(b.local), OpOptions{});
        reduce_sparse(parts, g.dtype, g.row_numel(), 1.0 / pg_->size(), b.indices, b.rows);
    } catch (const Error &e) {
        b.code = e.code();
        b.message = e.what();
    }
    b.exchange_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t0).count();
}

void Reducer::mark_ready_sparse(size_t i, const Tensor &indices, const Tensor &values) {
    auto lk = lock();
    if (i >= grads_.size())
        fail(DISTC_EINVAL, "index " + std::to_string(i) + " is outside 0.." + std::to_string(grads_.size() - 1));
    if (!sparse_[i])
        fail(DISTC_EINVAL,
             "gradient " + std::to_string(i) + " is dense (not in opts->expect_sparse): use distc_reducer_mark_ready");
    if (!in_iteration_) fail(DISTC_ESTATE, "no iteration: call distc_reducer_prepare_for_backward first");
    if (ready_[i])
        fail(DISTC_ESTATE,
             "gradient " + std::to_string(i) + " was marked ready twice in one iteration (or was listed as unused)");
    const Tensor &g = grads_[i];
    if (indices.dtype != DType::Int64)
        fail(DISTC_EINVAL, std::string("indices are ") + dtype_name(indices.dtype) + ", not int64");
    if (values.dtype != g.dtype)
        fail(DISTC_EINVAL, std::string("values are ") + dtype_name(values.dtype) + " but gradient " +
                               std::to_string(i) + " is " + dtype_name(g.dtype));
    size_t nnz = indices.numel, row = g.row_numel();
    if (values.numel != nnz * row)
        fail(DISTC_EINVAL, "values hold " + std::to_string(values.numel) + " elements; " + std::to_string(nnz) +
                               " rows of " + std::to_string(row) + " expected");
    const int64_t *idx = static_cast<const int64_t *>(indices.data);
    for (size_t k = 0; k < nnz; ++k)
        if (idx[k] < 0 || idx[k] >= g.dim0)
            fail(DISTC_EINVAL, "indices[" + std::to_string(k) + "] = " + std::to_string(idx[k]) + " is outside 0.." +
                                   std::to_string(g.dim0 - 1));
    buckets_[bucket_of_[i]].local = pack_sparse(idx, nnz, values.data, row * dtype_size(g.dtype));
    ready_locked(i, false);
    arrival_.push_back(i);
    launch_complete_locked();
}

Reducer::SparseGrad Reducer::sparse_grad(size_t i) const {
    auto lk = lock();
    if (!sparse_[i]) fail(DISTC_EINVAL, "gradient " + std::to_string(i) + " is dense: read it in its buffer");
    const Bucket &b = buckets_[bucket_of_[i]];
    return SparseGrad{b.indices.data(), b.rows.data(), b.indices.size()};
}

void Reducer::mark_ready(size_t i) {
    auto lk = lock();
    if (i >= grads_.size())
        fail(DISTC_EINVAL, "index " + std::to_string(i) + " is outside 0.." + std::to_string(grads_.size() - 1));
    if (sparse_[i])
        fail(DISTC_EINVAL, "gradient " + std::to_string(i) + " is sparse: use distc_reducer_mark_ready_sparse");
    if (!in_iteration_) fail(DISTC_ESTATE, "no iteration: call distc_reducer_prepare_for_backward first");
    if (ready_[i])
        fail(DISTC_ESTATE,
             "gradient " + std::to_string(i) + " was marked ready twice in one iteration (or was listed as unused)");
    ready_locked(i, false);
    arrival_.push_back(i);
    launch_complete_locked();
}

void Reducer::finalize() {
    auto lk = lock();
    if (!in_iteration_) fail(DISTC_ESTATE, "no iteration to finalize: call distc_reducer_prepare_for_backward first");
    std::string missing;
    for (size_t i = 0; i < grads_.size(); ++i)
        if (!ready_[i]) {
            if (zero_unmarked())
                ready_locked(i, true);
            else
                missing += (missing.empty() ? "" : ", ") + std::to_string(i);
        }
    if (!missing.empty()) {
        // What was launched must finish before the buffers are used again.
        for (auto &b : buckets_)
            if (b.work) b.work->wait(Millis(-1));
        in_iteration_ = false;
        fail(DISTC_ESTATE, "gradients " + missing +
                               (learned_ ? " were used in the first iteration and not marked ready in this one "
                                           "(static_graph: every iteration uses the same gradients)"
                                         : " were not marked ready in this iteration (list them as unused in "
                                           "prepare_for_backward, or set find_unused_parameters)"));
    }
    try {
        launch_complete_locked();
    } catch (...) {
        // A bucket that cannot start (its hook failed): let the started ones finish, end the iteration.
        for (auto &b : buckets_)
            if (b.work) b.work->wait(Millis(-1));
        in_iteration_ = false;
        throw;
    }
    // With find_unused (and in static_graph's first iteration), which
    // gradients any rank used (c10d's local_used_map allreduce): launched
    // after the buckets, so in the same order on every rank, and overlapping
    // their tail.
    std::shared_ptr<Work> used_work;
    bool want_used = !device_ && (static_graph_ ? !learned_ : find_unused_);
    if (want_used) {
        used_map_.resize(grads_.size());
        for (size_t i = 0; i < grads_.size(); ++i) used_map_[i] = ready_at_[i] != Clock::time_point{};
    }
    // With a hook the buckets are still being launched: the map goes after them.
    if (want_used && !hook_) {
        try {
            used_work = launch_used_map();
        } catch (...) {
            for (auto &b : buckets_)
                if (b.work) b.work->wait(Millis(-1));
            in_iteration_ = false;
            throw;
        }
    }
    if (static_graph_ && !learned_) {  // what this rank did not use, from now on marked at prepare
        for (size_t i = 0; i < grads_.size(); ++i)
            if (ready_at_[i] == Clock::time_point{}) static_unused_.push_back(i);
        learned_ = true;
    }
    in_iteration_ = false;
    ++iterations_;
    lk.unlock();
    int code = 0;
    std::string msg;
    auto since = [this](Clock::time_point t) {
        return t == Clock::time_point{} ? int64_t{-1}
                                        : std::chrono::duration_cast<std::chrono::nanoseconds>(t - started_).count();
    };
    for (size_t i = 0; i < grads_.size(); ++i) last_ready_ns_[i] = since(ready_at_[i]);
    for (size_t k = 0; k < buckets_.size(); ++k) {
        std::shared_ptr<Work> work;
        {
            // A hook's bucket k starts once bucket k-1 is done: here, if no continuation did yet.
            std::lock_guard<std::mutex> relock(mu_);
            if (next_bucket_ <= k) launch_recording_locked();
            work = buckets_[k].work;
        }
        Bucket &sb = buckets_[k];
        if (sb.sparse) {  // exchanged at launch
            if (sb.code && !code) code = sb.code, msg = "bucket " + std::to_string(k) + " (sparse): " + sb.message;
            sb.last.launch_ns = since(sb.launched);
            sb.last.reduce_ns = sb.exchange_ns;
            sb.last.bytes = sb.rows.size();
            continue;
        }
        if (!work) fail(DISTC_EINTERNAL, "bucket " + std::to_string(k) + " was never launched");
        work->wait(Millis(-1));
        if (work->status() != 0) {
            if (!code) code = work->status(), msg = "bucket " + std::to_string(k) + ": " + work->message();
            continue;
        }
        Bucket &b = buckets_[k];
        b.last.launch_ns = since(b.launched);
        b.last.reduce_ns = work->duration_ns();
        if (b.wire)
            widen_floats(compress_, static_cast<float *>(b.buf->t.data), static_cast<const uint16_t *>(b.wire->t.data),
                         b.buf->t.numel);
        if (!views_)
            for (size_t i : b.members)
                if (grads_[i].nbytes()) copy(grads_[i].data, b.buf->t.bytes() + offset_of_[i], grads_[i].nbytes());
    }
    if (want_used && hook_) {
        try {
            used_work = launch_used_map();
        } catch (const Error &e) {
            if (!code) code = e.code(), msg = std::string("the map of used gradients: ") + e.what();
        }
    }
    if (used_work) {
        used_work->wait(Millis(-1));
        if (used_work->status() != 0) {
            if (!code) code = used_work->status(), msg = "the map of used gradients: " + used_work->message();
        } else {
            std::lock_guard<std::mutex> relock(mu_);
            for (size_t i = 0; i < grads_.size(); ++i) last_used_[i] = used_map_[i] != 0;
        }
    }
    if (code) fail(code, msg);
}

}  // namespace distc

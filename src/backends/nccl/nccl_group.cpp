#include "backends/nccl/nccl_group.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "support/sigpipe.hpp"

namespace distc_nccl {

void check_cuda(cudaError_t e, const char *what) {
    if (e != cudaSuccess)
        raise(DISTC_EBACKEND,
              std::string(what) + " failed: " + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")");
}

namespace {

std::mutex g_pool_mu;
std::vector<std::vector<cudaEvent_t>> g_pool;  // by device

std::string nccl_error(ncclResult_t r, ncclComm_t comm) {
    std::string s = ncclGetErrorString(r);
    const char *last = comm ? ncclGetLastError(comm) : nullptr;
    if (last && *last) s += ": " + std::string(last);
    return s;
}

struct EventRef {
    int device;
    cudaEvent_t event;
};

int wait_stream_hook(void *payload, void *stream) {
    auto *ref = static_cast<EventRef *>(payload);
    cudaError_t e = cudaStreamWaitEvent(static_cast<cudaStream_t>(stream), ref->event, 0);
    if (e != cudaSuccess)
        return distc_error_set(DISTC_EBACKEND, (std::string("cudaStreamWaitEvent: ") + cudaGetErrorString(e)).c_str());
    return 0;
}

void release_hook(void *payload) {
    auto *ref = static_cast<EventRef *>(payload);
    give_event(ref->device, ref->event);
    delete ref;
}

const distc_work_hooks kHooks = {DISTC_WORK_HOOKS_VERSION, wait_stream_hook, release_hook};

}  // namespace

cudaEvent_t take_event(int device) {
    {
        std::lock_guard<std::mutex> lk(g_pool_mu);
        if (g_pool.size() <= static_cast<size_t>(device)) g_pool.resize(static_cast<size_t>(device) + 1);
        auto &v = g_pool[static_cast<size_t>(device)];
        if (!v.empty()) {
            cudaEvent_t e = v.back();
            v.pop_back();
            return e;
        }
    }
    cudaEvent_t e = nullptr;
    check_cuda(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreateWithFlags");
    return e;
}

void give_event(int device, cudaEvent_t e) {
    std::lock_guard<std::mutex> lk(g_pool_mu);
    if (g_pool.size() <= static_cast<size_t>(device)) g_pool.resize(static_cast<size_t>(device) + 1);
    g_pool[static_cast<size_t>(device)].push_back(e);
}

Group::Group(const distc_backend_group_info &info) :
    rank_(info.rank), size_(info.size), store_(info.store), timeout_ms_(info.timeout_ms) {
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess || count == 0)
        raise(DISTC_EBACKEND, std::string("no CUDA device is visible (cudaGetDeviceCount: ") +
                                  (e != cudaSuccess ? cudaGetErrorString(e) : "0 devices") + ")");
    if (info.device >= 0) {
        if (info.device >= count)
            raise(DISTC_EINVAL,
                  "device " + std::to_string(info.device) + " does not exist (" + std::to_string(count) + " visible)");
        device_ = info.device;
    } else {
        // torchrun's convention: one device per local rank.
        const char *lr = std::getenv("LOCAL_RANK");
        device_ = lr ? std::atoi(lr) % count : 0;
    }
    check_cuda(cudaSetDevice(device_), "cudaSetDevice");
    init_comm(info);
    start_watchdog();
}

Group::Group(const distc_backend_group_info &info, ncclComm_t comm, int device) :
    rank_(info.rank), size_(info.size), device_(device), store_(info.store), timeout_ms_(info.timeout_ms), comm_(comm) {
    check_cuda(cudaMalloc(&barrier_buf_, sizeof(int)), "cudaMalloc");
    start_watchdog();
}

void Group::store_barrier(const std::string &name, const char *what) {
    std::string mine = name + "/" + std::to_string(rank_);
    if (distc_store_set(store_, mine.c_str(), "1", 1) != 0)
        raise(distc_error_last_code(), std::string(what) + ": " + distc_error_last());
    std::vector<std::string> keys;
    std::vector<const char *> ptrs;
    for (int r = 0; r < size_; ++r) keys.push_back(name + "/" + std::to_string(r));
    for (auto &k : keys) ptrs.push_back(k.c_str());
    if (distc_store_wait(store_, ptrs.data(), ptrs.size(), timeout_ms_) != 0)
        raise(distc_error_last_code(), std::string(what) + ": not every rank arrived: " + distc_error_last());
}

void Group::init_comm(const distc_backend_group_info &info) {
    ncclUniqueId id;
    if (rank_ == 0) {
        ncclResult_t r = ncclGetUniqueId(&id);
        if (r != ncclSuccess) raise(DISTC_EBACKEND, "ncclGetUniqueId: " + nccl_error(r, nullptr));
        if (distc_store_set(info.store, "nccl/unique_id", &id, sizeof id) != 0)
            raise(distc_error_last_code(), std::string("publishing the ncclUniqueId: ") + distc_error_last());
    } else {
        distc_buf b = {nullptr, 0};
        const char *key = "nccl/unique_id";
        if (distc_store_wait(info.store, &key, 1, info.timeout_ms) != 0 || distc_store_get(&b, info.store, key) != 0)
            raise(distc_error_last_code(), std::string("waiting for rank 0's ncclUniqueId: ") + distc_error_last());
        bool ok = b.size == sizeof id;
        if (ok) std::memcpy(&id, b.data, sizeof id);
        distc_buf_dispose(&b);
        if (!ok) raise(DISTC_EPROTO, "the ncclUniqueId in the store has the wrong size");
    }
    // A blocking communicator: a non-blocking one hands every launch to a
    // thread of NCCL's, a cost on every call. A rank that never comes is caught
    // by the store first, as c10d does; the watchdog covers later hangs.
    store_barrier("nccl/init", "creating the NCCL communicator");
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    cfg.blocking = 1;
    ncclResult_t r = ncclCommInitRankConfig(&comm_, size_, id, rank_, &cfg);
    settle(r, "ncclCommInitRankConfig", Clock::now() + std::chrono::milliseconds(info.timeout_ms));
    check_cuda(cudaMalloc(&barrier_buf_, sizeof(int)), "cudaMalloc");
}

// A non-blocking communicator answers ncclInProgress until its last call is
// done with the host side; errors are reported, and a timeout aborts it.
void Group::settle(ncclResult_t r, const char *what, Clock::time_point deadline) {
    while (r == ncclInProgress) {
        if (Clock::now() > deadline) {
            if (comm_) ncclCommAbort(comm_);
            comm_ = nullptr;
            aborted_ = true;
            raise(DISTC_ETIMEOUT, std::string(what) +
                                      " did not finish in time (are all ranks calling it?); "
                                      "the communicator was aborted");
        }
        std::this_thread::yield();
        if (ncclCommGetAsyncError(comm_, &r) != ncclSuccess) break;
    }
    if (r != ncclSuccess) raise(DISTC_EBACKEND, std::string(what) + ": " + nccl_error(r, comm_));
}

void Group::start_watchdog() {
    watchdog_ = distc::start_thread([this] { watchdog(); });
}

Group::~Group() {
    if (!aborted_) cover_all(false);  // the watchdog then waits for every operation launched
    {
        std::lock_guard<std::mutex> lk(mu_);
        stop_ = true;  // the watchdog drains what is in flight (bounded by timeouts), then exits
    }
    cv_.notify_all();
    if (watchdog_.joinable()) watchdog_.join();
    cudaSetDevice(device_);
    if (barrier_buf_) cudaFree(barrier_buf_);
    if (comm_ && !aborted_) {
        ncclCommDestroy(comm_);
    }
}

std::string Group::Inflight::label() const {
    std::string s = std::string(op) + (seq ? " #" + std::to_string(seq) : "");
    return sentinel_of_blocking ? s + " (a blocking call)" : s;
}

cudaError_t Group::cover(StreamState &st, Clock::time_point now) {
    cudaEvent_t ev = nullptr;
    try {
        ev = take_event(device_);
    } catch (const Failure &) {
        return cudaErrorMemoryAllocation;
    }
    cudaError_t e = cudaEventRecord(ev, st.stream);
    if (e != cudaSuccess) {
        give_event(device_, ev);
        return e;
    }
    bool was_empty;
    {
        std::lock_guard<std::mutex> lk(mu_);
        was_empty = inflight_.empty();
        inflight_.push_back(Inflight{nullptr, st.stream, ev, st.deadline, st.timeout_ms, st.op, st.seq, true});
    }
    if (was_empty) cv_.notify_all();
    st.pending = false;
    st.last_record = now;
    return cudaSuccess;
}

void Group::cover_all(bool only_old) {
    std::unique_lock<std::mutex> lk(launch_mu_, std::defer_lock);
    if (!only_old)
        lk.lock();
    else if (!lk.try_lock())
        return;  // a launch in progress: the watchdog comes back
    if (aborted_) return;
    DeviceGuard dg(device_);
    auto now = Clock::now();
    bool left = false;
    for (auto &st : streams_) {
        if (!st.pending) continue;
        if (only_old && now - st.first < std::chrono::milliseconds(1)) {
            left = true;
            continue;
        }
        if (cover(st, now) != cudaSuccess) left = true;
    }
    pending_ = left;
}

void Group::launch(distc_work *work, const distc_backend_op_args *a, const Enqueue &enqueue) {
    auto stream = static_cast<cudaStream_t>(a->stream);
    bool detached = a->flags & DISTC_OP_BLOCKING;
    cudaEvent_t ev = nullptr;
    {
        std::lock_guard<std::mutex> lk(launch_mu_);
        if (aborted_) raise(DISTC_EABORTED, "the group was aborted (" + abort_reason_ + ")");
        DeviceGuard dg(device_);
        auto now = Clock::now();
        auto deadline = now + std::chrono::milliseconds(a->timeout_ms);
        std::vector<ncclRedOp_t> ops;
        auto free_ops = [&] {
            if (comm_)
                for (auto op : ops) ncclRedOpDestroy(op, comm_);
        };
        try {
            settle(enqueue(comm_, stream, ops), a->op, deadline);
            free_ops();
        } catch (...) {
            free_ops();
            throw;
        }
        if (detached) {
            StreamState *st = nullptr;
            for (auto &x : streams_)
                if (x.stream == stream) st = &x;
            if (!st) {
                streams_.emplace_back();
                streams_.back().stream = stream;
                st = &streams_.back();
            }
            if (!st->pending || deadline < st->deadline) {
                if (!st->pending) st->first = now;
                st->deadline = deadline;
                st->timeout_ms = a->timeout_ms;
                st->op = a->op;
                st->seq = a->seq;
            }
            st->pending = true;
            if (now - st->last_record > std::chrono::microseconds(200)) {
                check_cuda(cover(*st, now), "cudaEventRecord");
            } else if (!pending_) {
                // Under mu_: a watchdog about to sleep with nothing in flight must see it.
                {
                    std::lock_guard<std::mutex> g(mu_);
                    pending_ = true;
                }
                cv_.notify_all();
            }
        } else {
            ev = take_event(device_);
            cudaError_t e = cudaEventRecord(ev, stream);
            if (e != cudaSuccess) give_event(device_, ev);
            check_cuda(e, "cudaEventRecord");
        }
    }
    if (detached) {
        // Nobody waits on it: done as far as the caller can tell; the watchdog still times it.
        distc_backend_work_complete(work, -1);
        return;
    }
    auto *ref = new EventRef{device_, ev};
    distc_backend_work_set_hooks(work, &kHooks, ref);
    bool was_empty;
    {
        std::lock_guard<std::mutex> lk(mu_);
        was_empty = inflight_.empty();
        inflight_.push_back(Inflight{work, stream, ev, Clock::now() + std::chrono::milliseconds(a->timeout_ms),
                                     a->timeout_ms, a->op, a->seq, false});
    }
    if (was_empty) cv_.notify_all();  // the watchdog sleeps on cv_ only when nothing is in flight
}

Group *Group::split(int color, int key, const distc_backend_group_info *info) {
    // ncclCommSplit blocks until every rank of the parent calls it: meet in the store first.
    store_barrier("nccl/split/" + std::to_string(++splits_), "ncclCommSplit");
    std::lock_guard<std::mutex> lk(launch_mu_);
    if (aborted_) raise(DISTC_EABORTED, "the group was aborted (" + abort_reason_ + ")");
    check_cuda(cudaSetDevice(device_), "cudaSetDevice");
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    cfg.blocking = 1;
    ncclComm_t sub = nullptr;
    ncclResult_t r = ncclCommSplit(comm_, color < 0 ? NCCL_SPLIT_NOCOLOR : color, key, &sub, &cfg);
    int64_t timeout = info ? info->timeout_ms : 1800000;
    auto deadline = Clock::now() + std::chrono::milliseconds(timeout);
    // The split completes on the parent; a new communicator then settles on its own.
    settle(r, "ncclCommSplit", deadline);
    if (color < 0) return nullptr;
    // A non-blocking split may hand the new communicator's handle over from NCCL's own thread.
    auto handle_deadline = std::min(deadline, Clock::now() + std::chrono::seconds(5));
    while (!__atomic_load_n(&sub, __ATOMIC_ACQUIRE)) {
        if (Clock::now() > handle_deadline) raise(DISTC_EBACKEND, "ncclCommSplit returned no communicator");
        std::this_thread::yield();
    }
    ncclResult_t st = ncclInProgress;
    while (st == ncclInProgress) {
        if (ncclCommGetAsyncError(sub, &st) != ncclSuccess) break;
        if (st == ncclInProgress && Clock::now() > deadline) {
            ncclCommAbort(sub);
            raise(DISTC_ETIMEOUT, "ncclCommSplit's new communicator did not finish in time");
        }
        std::this_thread::yield();
    }
    if (st != ncclSuccess) {
        ncclCommAbort(sub);
        raise(DISTC_EBACKEND, "ncclCommSplit: " + nccl_error(st, sub));
    }
    return new Group(*info, sub, device_);
}

void Group::abort(int code, const std::string &why, const std::string &culprit_msg) {
    std::deque<Inflight> failed;
    {
        std::lock_guard<std::mutex> lk(mu_);
        if (aborted_.exchange(true)) return;
        abort_reason_ = why;
        failed.swap(inflight_);
    }
    cv_.notify_all();
    // Waiters wake first: ncclCommAbort may wait for the streams to reach the
    // communicator's queued work, which is what a stuck stream never does.
    for (size_t i = 0; i < failed.size(); ++i) {
        if (!failed[i].work) {
            give_event(device_, failed[i].event);
            continue;
        }
        // The operation that caused it gets `code`; the rest were cut short by the abort.
        int c = i == 0 ? code : DISTC_EABORTED;
        distc_backend_work_fail(failed[i].work, c,
                                (i == 0 ? culprit_msg : "the communicator was aborted (" + why + ")").c_str());
    }
    // No launch is halfway through the communicator while it is torn down.
    std::lock_guard<std::mutex> lk(launch_mu_);
    if (comm_) ncclCommAbort(comm_);
    comm_ = nullptr;
}

void Group::watchdog() {
    cudaSetDevice(device_);
    // The launching thread takes mu_ for every operation, so no CUDA or NCCL
    // call is made while holding it: what to query is copied out first.
    struct Probe {
        distc_work *work;
        cudaStream_t stream;
        cudaEvent_t event;
    };
    std::vector<Probe> probes;
    int idle_us = 10;  // backoff while nothing finishes
    Clock::time_point last_async_check{};
    std::unique_lock<std::mutex> lk(mu_);
    for (;;) {
        // Idle: sleep until work comes, or until uncovered detached operations are due.
        if (pending_ && inflight_.empty() && !stop_) {
            cv_.wait_for(lk, std::chrono::milliseconds(1));
        } else {
            cv_.wait(lk, [&] { return stop_ || !inflight_.empty() || pending_; });
        }
        if (pending_) {
            lk.unlock();
            cover_all(true);
            lk.lock();
        }
        if (inflight_.empty()) {
            if (stop_) return;  // nothing left
            continue;
        }
        // Events on one stream complete in order: only each stream's oldest is
        // queried, so a deep queue costs one query per stream, not one per entry.
        probes.clear();
        for (const auto &x : inflight_) {
            bool seen = false;
            for (const auto &p : probes) seen = seen || p.stream == x.stream;
            if (!seen) probes.push_back(Probe{x.work, x.stream, x.event});  // work may be nullptr (a sentinel)
        }
        lk.unlock();
        // Events are pooled, never destroyed: querying one whose work was failed
        // by an abort meanwhile is harmless (the work is then not found below).
        std::vector<cudaEvent_t> finished;
        std::string engine_error, culprit;
        for (const auto &p : probes) {
            cudaError_t q = cudaEventQuery(p.event);
            if (q == cudaSuccess) {
                finished.push_back(p.event);
            } else if (q != cudaErrorNotReady && engine_error.empty()) {
                culprit = std::string("CUDA reports ") + cudaGetErrorName(q) + " (" + cudaGetErrorString(q) + ")";
                engine_error = culprit;
            }
        }
        auto now = Clock::now();
        // Engine errors (a peer gone) are looked for every 50 ms: the call takes
        // the launch lock, which launches should not have to wait for.
        if (engine_error.empty() && now - last_async_check > std::chrono::milliseconds(50) && launch_mu_.try_lock()) {
            last_async_check = now;
            ncclResult_t async = ncclSuccess;
            if (comm_ && !aborted_ && ncclCommGetAsyncError(comm_, &async) == ncclSuccess && async != ncclSuccess &&
                async != ncclInProgress)
                culprit = engine_error = "NCCL reports an error: " + nccl_error(async, comm_);
            launch_mu_.unlock();
        }
        lk.lock();
        std::vector<distc_work *> done;
        std::vector<cudaEvent_t> spent;  // sentinels' events go back to the pool here
        bool progressed = false;
        for (auto e : finished)
            for (auto it = inflight_.begin(); it != inflight_.end(); ++it)
                if (it->event == e) {
                    if (it->work)
                        done.push_back(it->work);
                    else
                        spent.push_back(e);
                    inflight_.erase(it);
                    progressed = true;
                    break;
                }
        std::string timed_out;
        int64_t timeout_ms = 0;
        for (auto it = inflight_.begin(); it != inflight_.end(); ++it)
            if (now > it->deadline) {
                // The timed-out entry goes first, so that it is the one failed with ETIMEOUT.
                timed_out = it->label();
                timeout_ms = it->timeout_ms;
                Inflight x = *it;
                inflight_.erase(it);
                inflight_.push_front(x);
                break;
            }
        if (!engine_error.empty() && !inflight_.empty())
            engine_error = std::string(inflight_.front().label()) + ": " + engine_error;
        bool empty = inflight_.empty();
        lk.unlock();
        for (auto *w : done) distc_backend_work_complete(w, -1);
        for (auto e : spent) give_event(device_, e);
        if (!engine_error.empty() && !empty) {
            abort(DISTC_EBACKEND, engine_error, culprit + "; the communicator was aborted");
        } else if (!timed_out.empty()) {
            std::string msg = "timed out after " + std::to_string(timeout_ms) +
                              " ms on the GPU (a peer is missing or the stream is stuck); the communicator was aborted";
            abort(DISTC_ETIMEOUT, timed_out + " " + msg, msg);
        } else if (!progressed) {
            // Nothing finished: poll again soon, less often the longer nothing does
            // (completion latency against the driver time the launching thread needs).
            std::this_thread::sleep_for(std::chrono::microseconds(idle_us));
            idle_us = std::min(idle_us * 2, 200);
        } else {
            idle_us = 10;
        }
        lk.lock();
    }
}

}  // namespace distc_nccl

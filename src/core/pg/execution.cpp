// Running a group's operations on the built-in backend: on the calling
// thread, or queued to the worker (collectives, in order) and the p2p waiters;
// completing their Work, and breaking the group when a collective fails.
#include <algorithm>

#include "core/pg/process_group.hpp"
#include "core/util/error.hpp"
#include "support/sigpipe.hpp"

namespace distc {

namespace {
thread_local bool t_group_thread = false;
}  // namespace

bool ProcessGroup::on_group_thread() { return t_group_thread; }

void ProcessGroup::drop_queued(bool stop, const char *why) {
    std::deque<Item> dropped;
    {
        std::lock_guard<std::mutex> lk(mu_);
        if (stop) stopping_ = true;
        collectives_pending_ -= queue_.size();
        dropped.swap(queue_);
        for (auto &it : p2p_queue_) dropped.push_back(std::move(it));
        p2p_queue_.clear();
    }
    cv_.notify_all();
    idle_cv_.notify_all();
    for (auto &it : dropped) it.work->complete(DISTC_EABORTED, it.work->what() + ": " + why);
}

ProcessGroup::~ProcessGroup() {
    drop_queued(true, "the group was freed before it ran");
    if (worker_.joinable() || !p2p_threads_.empty()) {
        // An operation in flight may wait on peers for its whole timeout: cut it short.
        aborted_ = true;
        if (backend_) backend_->abort();
        if (mesh_) mesh_->abort();
    }
    if (worker_.joinable()) worker_.join();
    for (auto &t : p2p_threads_) t.join();
}

void ProcessGroup::abort() {
    aborted_ = true;
    if (async_) async_->abort();
    if (backend_) backend_->abort();
    if (mesh_) mesh_->abort();
    drop_queued(false, "the group was aborted");
}

void ProcessGroup::execute(Work &w, const OpCtx &ctx, const Body &body, bool collective) noexcept {
    w.start();
    int code = 0;
    std::string msg;
    int32_t src = -1;
    bool agreed = false;
    try {
        src = body(ctx);
    } catch (const Error &e) {
        code = e.code();
        msg = e.what();
        agreed = dynamic_cast<const AgreedError *>(&e) != nullptr;
    } catch (const std::bad_alloc &) {
        code = DISTC_ENOMEM;
        msg = "out of memory";
    } catch (const std::exception &e) {
        code = DISTC_EINTERNAL;
        msg = std::string("internal error: ") + e.what();
    }
    if (code != 0 && aborted_ && code != DISTC_EABORTED) {
        // Our own abort shut the connections; what the transport saw is a symptom.
        code = DISTC_EABORTED;
        msg = "the group was aborted (" + msg + ")";
    } else if (code != 0 && collective && !agreed) {
        break_group(w.what() + " failed on rank " + std::to_string(rank_) + ": " + msg);
    }
    w.complete(code, code ? w.what() + " failed: " + msg : "", src);
}

void ProcessGroup::break_group(const std::string &why) {
    // A collective that failed here may have completed, or be about to, on
    // peers that had what they needed (a late rank reads what this one sent
    // before giving up). Resetting every connection makes their same
    // operation and every later one fail instead, naming this rank, as a
    // timed-out Gloo group closes its pairs and NCCL aborts its communicator.
    {
        std::lock_guard<std::mutex> lk(mu_);
        if (!broken_.empty()) return;
        broken_ = why;
    }
    aborted_ = true;
    if (mesh_) mesh_->abort();
    if (backend_) backend_->abort();
    drop_queued(false, ("the group broke: " + why).c_str());
}

ProcessGroup::WorkPtr ProcessGroup::run(const OpInfo &info, const OpOptions &o, bool async, Body body) {
    if (aborted_) fail_aborted();
    // Point-to-point operations are paired by tag, not by the group's sequence,
    // so only collectives advance it (ranks skip each other's sends and recvs).
    // A collective takes `steps` numbers (+1 for the debug cross-check) as its tags.
    uint64_t seq = 0;
    uint32_t steps = info.steps + (debug_ ? 1 : 0);
    if (!info.p2p) seq = take_seq(steps);
    OpCtx ctx{static_cast<uint32_t>(seq), o.timeout.count() < 0 ? timeout_ : o.timeout,
              make_call(info.kind, info.dtype, info.reduce, info.root, info.numel, static_cast<uint32_t>(seq))};
    auto w = std::make_shared<Work>(seq, info.kind, info.label);
    if (debug_ && !info.p2p) {
        Body inner = std::move(body);
        body = [this, info, inner](const OpCtx &c) {
            debug_check(info, c);
            Call next = c.call;
            next.seq = c.tag + 1;
            return inner(OpCtx{c.tag + 1, c.timeout, next});
        };
    }
    if (!async) {
        // The blocking path: this thread, no hand-off, no queue; a collective
        // first lets earlier asynchronous ones finish, so results come in order.
        if (!info.p2p) {
            std::unique_lock<std::mutex> lk(mu_);
            idle_cv_.wait(lk, [&] { return collectives_pending_ == 0 || stopping_; });
        }
        execute(*w, ctx, body, !info.p2p);
        if (w->status() != 0) fail(w->status(), w->message());
        return w;
    }
    {
        std::lock_guard<std::mutex> lk(mu_);
        if (stopping_) fail(DISTC_ESTATE, "the group is being freed");
        if (info.p2p) {
            p2p_queue_.push_back(Item{w, ctx, std::move(body), false});
            if (p2p_idle_ == 0) p2p_threads_.push_back(start_thread([this] { p2p_loop(); }));
        } else {
            queue_.push_back(Item{w, ctx, std::move(body), true});
            ++collectives_pending_;
            if (!worker_.joinable()) worker_ = start_thread([this] { worker_loop(); });
        }
    }
    cv_.notify_all();
    return w;
}

void ProcessGroup::fail_aborted() const {
    std::string why;
    {
        std::lock_guard<std::mutex> lk(mu_);
        why = broken_;
    }
    fail(DISTC_EABORTED, why.empty() ? "the group was aborted" : "the group is broken: " + why);
}

void ProcessGroup::wait_outstanding(Millis timeout) {
    // Results come in issue order: earlier asynchronous collectives finish first.
    std::vector<std::weak_ptr<Work>> earlier;
    {
        std::lock_guard<std::mutex> lk(mu_);
        earlier.swap(outstanding_);
        outstanding_count_ = 0;
    }
    for (auto &e : earlier)
        if (auto p = e.lock()) p->wait(timeout + Millis(2000));
}

void ProcessGroup::abort_timed_out(const OpInfo &info, const AsyncArgs &a) {
    async_->abort();
    aborted_ = true;
    fail(DISTC_ETIMEOUT, describe_op(info.kind, a.seq, info.label) + ": the " + async_->name() +
                             " backend did not complete it within " + std::to_string(a.timeout.count()) +
                             " ms; the group was aborted");
}

ProcessGroup::WorkPtr ProcessGroup::launch_work(const OpInfo &info, const AsyncArgs &a, bool host_ordered,
                                                Start start) {
    auto w = std::make_shared<Work>(a.seq, info.kind, info.label);
    if (!a.blocking) w->start();  // a blocking call's duration is nobody's to read
    start(w, a);
    if (host_ordered) {
        std::lock_guard<std::mutex> lk(mu_);
        outstanding_.erase(std::remove_if(outstanding_.begin(), outstanding_.end(),
                                          [](const std::weak_ptr<Work> &x) {
                                              auto p = x.lock();
                                              return !p || p->done();
                                          }),
                           outstanding_.end());
        outstanding_.push_back(w);
        outstanding_count_ = outstanding_.size();
    }
    // A device launch that already failed is reported now, as a blocking call must.
    if (a.blocking && w->done() && w->status() != 0) fail(w->status(), w->message());
    return w;
}

void ProcessGroup::worker_loop() {
    t_group_thread = true;
    for (;;) {
        Item it;
        {
            std::unique_lock<std::mutex> lk(mu_);
            cv_.wait(lk, [&] { return stopping_ || !queue_.empty(); });
            if (queue_.empty()) return;  // stopping
            it = std::move(queue_.front());
            queue_.pop_front();
        }
        execute(*it.work, it.ctx, it.body, it.collective);
        {
            std::lock_guard<std::mutex> lk(mu_);
            --collectives_pending_;
        }
        idle_cv_.notify_all();
    }
}

void ProcessGroup::p2p_loop() {
    t_group_thread = true;
    std::unique_lock<std::mutex> lk(mu_);
    for (;;) {
        ++p2p_idle_;
        cv_.wait(lk, [&] { return stopping_ || !p2p_queue_.empty(); });
        --p2p_idle_;
        if (p2p_queue_.empty()) return;  // stopping
        Item it = std::move(p2p_queue_.front());
        p2p_queue_.pop_front();
        lk.unlock();
        execute(*it.work, it.ctx, it.body, it.collective);
        lk.lock();
    }
}

}  // namespace distc

#include "backends/host/executor.hpp"

#include "core/util/error.hpp"
#include "support/sigpipe.hpp"

namespace distc {

Executor::~Executor() {
    drop_queued(true, "the group was freed before it ran");
    bool running;
    {
        std::lock_guard<std::mutex> lk(mu_);
        running = worker_.joinable() || !p2p_threads_.empty();
    }
    if (running) {
        // An operation in flight may wait on peers for its whole timeout: cut it short.
        closed_ = true;
        close_(false);
    }
    if (worker_.joinable()) worker_.join();
    for (auto &t : p2p_threads_) t.join();
}

void Executor::abort() {
    {
        std::lock_guard<std::mutex> lk(mu_);
        aborted_ = true;
    }
    closed_ = true;
    close_(false);
    drop_queued(false, "the group was aborted");
}

void Executor::fail_closed() const {
    std::string why;
    {
        std::lock_guard<std::mutex> lk(mu_);
        why = broken_;
    }
    fail(DISTC_EABORTED, why.empty() ? "the group was aborted" : "the group is broken: " + why);
}

void Executor::drop_queued(bool stop, const std::string &why) {
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

Executor::Outcome Executor::attempt(const Op &op, FnRef<int32_t()> body) noexcept {
    Outcome o;
    bool agreed = false;
    try {
        o.source = body();
        return o;
    } catch (const Error &e) {
        o.code = e.code();
        o.message = e.what();
        agreed = dynamic_cast<const AgreedError *>(&e) != nullptr;
    } catch (const std::bad_alloc &) {
        o.code = DISTC_ENOMEM;
        o.message = "out of memory";
    } catch (const std::exception &e) {
        o.code = DISTC_EINTERNAL;
        o.message = std::string("internal error: ") + e.what();
    }
    try {
        std::string what = describe_op(op.kind, op.seq, op.label);
        if (closed_ && o.code != DISTC_EABORTED) {
            // Our own abort (or an earlier failure) shut the links; what the
            // transport saw is a symptom.
            o.code = DISTC_EABORTED;
            o.message = "the group was aborted (" + o.message + ")";
        } else {
            // A peer that broke off left a note of the group's first failure
            // (it may be this one's cause): this rank's error names it too.
            const bool lost = o.code == DISTC_EREMOTE;
            std::string first;
            if (op.collective && !agreed)
                first = break_group(what + " failed on rank " + std::to_string(rank_) + ": " + o.message, lost);
            else if (lost && notes_)
                first = others_note(notes_->first());
            if (lost && !first.empty()) o.message += "; the group's first failure: " + first;
        }
        o.message = what + " failed: " + o.message;
    } catch (const std::exception &) {
        // Out of memory for the message: the code still tells.
    }
    return o;
}

std::string Executor::break_group(const std::string &why, bool lost_link) {
    // A collective that failed here may have completed, or be about to, on
    // peers that had what they needed (a late rank reads what this one sent
    // before giving up). Breaking every link makes their same operation and
    // every later one fail instead, naming this rank, as a timed-out Gloo
    // group closes its pairs and NCCL aborts its communicator.
    {
        std::lock_guard<std::mutex> lk(mu_);
        if (!broken_.empty() || aborted_) return {};
        broken_ = why;
    }
    closed_ = true;
    close_(true);
    drop_queued(false, "the group broke: " + why);
    // The links first, the store after: a slow store must not let a peer
    // complete what failed here. So a rank that lost a link waits a moment
    // for the note of the peer that broke it, before its own.
    if (!notes_) return {};
    std::string first = lost_link ? notes_->first() : std::string();
    if (first.empty()) first = notes_->tell(why);
    return others_note(first);
}

std::string Executor::others_note(const std::string &note) const {
    std::lock_guard<std::mutex> lk(mu_);
    return !broken_.empty() && note == broken_.substr(0, note.size()) ? std::string() : note;
}

void Executor::run_here(const Op &op, FnRef<int32_t()> body) {
    check_open();
    if (op.collective && collectives_pending_.load(std::memory_order_acquire)) {
        // Results come in issue order: asynchronous collectives issued
        // before this one finish first. (This thread's own enqueue counted
        // them before it returned, so a call after them never misses them.)
        std::unique_lock<std::mutex> lk(mu_);
        idle_cv_.wait(lk, [&] { return collectives_pending_ == 0 || stopping_; });
    }
    Outcome o = attempt(op, body);
    if (o.code) fail(o.code, o.message);
}

void Executor::enqueue(const Op &op, std::shared_ptr<Work> w, Body body) {
    check_open();
    {
        std::lock_guard<std::mutex> lk(mu_);
        if (stopping_) fail(DISTC_ESTATE, "the group is being freed");
        Item it{op, std::move(w), std::move(body)};
        if (!op.collective) {
            p2p_queue_.push_back(std::move(it));
            if (p2p_idle_ == 0) p2p_threads_.push_back(start_thread([this] { p2p_loop(); }));
        } else {
            queue_.push_back(std::move(it));
            ++collectives_pending_;
            if (!worker_.joinable()) worker_ = start_thread([this] { worker_loop(); });
        }
    }
    cv_.notify_all();
}

void Executor::worker_loop() {
    mark_group_thread();
    for (;;) {
        Item it;
        {
            std::unique_lock<std::mutex> lk(mu_);
            cv_.wait(lk, [&] { return stopping_ || !queue_.empty(); });
            if (queue_.empty()) return;  // stopping
            it = std::move(queue_.front());
            queue_.pop_front();
        }
        it.work->start();
        Outcome o = attempt(it.op, it.body);
        it.work->complete(o.code, o.message, o.source);
        {
            std::lock_guard<std::mutex> lk(mu_);
            --collectives_pending_;
        }
        idle_cv_.notify_all();
    }
}

void Executor::p2p_loop() {
    mark_group_thread();
    std::unique_lock<std::mutex> lk(mu_);
    for (;;) {
        ++p2p_idle_;
        cv_.wait(lk, [&] { return stopping_ || !p2p_queue_.empty(); });
        --p2p_idle_;
        if (p2p_queue_.empty()) return;  // stopping
        Item it = std::move(p2p_queue_.front());
        p2p_queue_.pop_front();
        lk.unlock();
        it.work->start();
        Outcome o = attempt(it.op, it.body);
        it.work->complete(o.code, o.message, o.source);
        lk.lock();
    }
}

}  // namespace distc

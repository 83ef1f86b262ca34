#include "core/work/work.hpp"

#include "core/util/error.hpp"
#include "distc/errors.h"

namespace distc {

std::string OpLabel::detail() const {
    std::string t = dtype ? std::string(dtype) + "[" + std::to_string(numel) + "]" : "";
    switch (form) {
        case Form::Plain: return "";
        case Form::Tensor: return "(" + t + ")";
        case Form::List: return "(" + std::to_string(n) + " x " + (dtype ? t : "?") + ")";
        case Form::Ops: return "(" + std::to_string(n) + " operations)";
        case Form::Bytes: return "(" + std::to_string(n) + " bytes)";
        case Form::Send: return "(" + t + " to rank " + std::to_string(peer) + ", tag " + std::to_string(tag) + ")";
        case Form::Recv:
            return "(" + t + " from " + (peer < 0 ? std::string("any rank") : "rank " + std::to_string(peer)) +
                   ", tag " + std::to_string(tag) + ")";
    }
    return "";
}

std::string describe_op(const char *kind, uint64_t seq, const OpLabel &label) {
    std::string d = label.detail();
    return std::string(kind) + (seq ? " #" + std::to_string(seq) : "") + (d.empty() ? "" : " " + d);
}

const std::string &Work::what() const {
    std::lock_guard<std::mutex> lk(mu_);
    if (!what_built_) {
        what_ = describe_op(kind_, seq_, label_);
        what_built_ = true;
    }
    return what_;
}

namespace {
thread_local bool t_group_thread = false;
thread_local const void *t_runner = nullptr;
}  // namespace

void mark_group_thread() { t_group_thread = true; }
bool on_group_thread() { return t_group_thread; }
bool in_callback_of(const void *runner) { return runner && t_runner == runner; }

void Work::start() {
    std::lock_guard<std::mutex> lk(mu_);
    start_ = std::chrono::steady_clock::now();
}

bool Work::complete(int code, const std::string &message, int32_t source_rank) {
    std::function<void()> cb;
    {
        std::lock_guard<std::mutex> lk(mu_);
        if (done_.load(std::memory_order_relaxed)) return false;
        code_ = code;
        message_ = message;
        if (source_rank >= 0) source_ = source_rank;
        // Only a started work has a duration to report: a blocking call's (never
        // started, no handle given out) skips the clock, a cost on the fast path.
        if (start_ != std::chrono::steady_clock::time_point{}) end_ = std::chrono::steady_clock::now();
        cb = std::move(cb_);
        done_.store(true, std::memory_order_release);
    }
    if (trace_) trace_->finished(trace_id_, code, message);
    cv_.notify_all();
    if (cb) {
        const void *outer = t_runner;
        t_runner = runner_;
        cb();
        t_runner = outer;
    }
    // Continuations come after the callback, also those added while it ran (a
    // binding's callback records the outcome that its continuations read).
    std::vector<std::function<void(Work &)>> continuations;
    {
        std::lock_guard<std::mutex> lk(mu_);
        continuations.swap(continuations_);
        continuations_run_ = true;
    }
    for (auto &fn : continuations) fn(*this);
    return true;
}

bool Work::complete_by_backend(int code, const char *message, int32_t source_rank) {
    if (code == 0) return complete(0, std::string(), source_rank);
    return complete(code, what() + " failed: " + message, source_rank);
}

bool Work::done() const { return done_.load(std::memory_order_acquire); }

int Work::status() const { return done_.load(std::memory_order_acquire) ? code_ : DISTC_INPROGRESS; }

std::string Work::message() const {
    std::lock_guard<std::mutex> lk(mu_);
    return message_;
}

const char *Work::message_cstr() const {
    std::lock_guard<std::mutex> lk(mu_);
    return done_ ? message_.c_str() : "";
}

int32_t Work::source_rank() const {
    std::lock_guard<std::mutex> lk(mu_);
    return source_;
}

int64_t Work::duration_ns() const {
    std::lock_guard<std::mutex> lk(mu_);
    if (!done_) return 0;
    return std::chrono::duration_cast<std::chrono::nanoseconds>(end_ - start_).count();
}

bool Work::wait(std::chrono::milliseconds timeout) const {
    if (done_.load(std::memory_order_acquire)) return true;  // no lock, and no clock read by wait_for
    if (in_callback_of(runner_))
        fail(DISTC_ESTATE, what() +
                               " cannot be waited for from a completion callback of its group: it may run "
                               "only once the callback has returned");
    std::unique_lock<std::mutex> lk(mu_);
    if (timeout.count() < 0) {
        cv_.wait(lk, [&] { return done_.load(std::memory_order_relaxed); });
        return true;
    }
    return cv_.wait_for(lk, timeout, [&] { return done_.load(std::memory_order_relaxed); });
}

bool Work::on_complete(std::function<void()> cb) {
    {
        std::lock_guard<std::mutex> lk(mu_);
        if (has_cb_) return false;
        has_cb_ = true;
        if (!done_) {
            cb_ = std::move(cb);
            return true;
        }
    }
    cb();
    return true;
}

void Work::add_continuation(std::function<void(Work &)> fn) {
    {
        std::lock_guard<std::mutex> lk(mu_);
        if (!continuations_run_) {
            continuations_.push_back(std::move(fn));
            return;
        }
    }
    fn(*this);
}

Work::~Work() {
    if (release_) release_();
}

bool Work::set_hooks(StreamWait wait_stream, std::function<void()> release) {
    std::lock_guard<std::mutex> lk(mu_);
    if (has_hooks_) return false;
    has_hooks_ = true;
    wait_stream_ = std::move(wait_stream);
    release_ = std::move(release);
    return true;
}

bool Work::wait_stream(void *stream, int &rc) const {
    StreamWait fn;
    {
        std::lock_guard<std::mutex> lk(mu_);
        if (!wait_stream_) return false;
        fn = wait_stream_;
    }
    rc = fn(stream);
    return true;
}

}  // namespace distc

#include "core/work/blocking_call.hpp"

namespace distc {

void BlockingCall::complete_slow(int code, const char *message) {
    code_ = code;
    if (code != 0) message_ = message ? message : "";
    if (this_thread() == owner_) {
        state_.store(kDone, std::memory_order_release);
        return;
    }
    // The caller went to sleep only if it saw kRunning under the mutex: then
    // taking the mutex here orders this wake-up after its wait began.
    if (state_.exchange(kDone, std::memory_order_acq_rel) == kSleeping) {
        { std::lock_guard<std::mutex> lk(mu_); }
        cv_.notify_all();
    }
}

bool BlockingCall::wait_slow(std::chrono::milliseconds timeout) {
    if (state_.load(std::memory_order_acquire) != kDone) {
        std::unique_lock<std::mutex> lk(mu_);
        int s = kRunning;
        state_.compare_exchange_strong(s, kSleeping, std::memory_order_acq_rel);  // else s is kDone
        if (s != kDone && !cv_.wait_for(lk, timeout, [&] { return state_.load(std::memory_order_acquire) == kDone; }))
            return false;
    }
    if (release_) run_release();
    return true;
}

void BlockingCall::run_release() {
    auto release = std::move(release_);
    release_ = nullptr;
    release();
}

}  // namespace distc

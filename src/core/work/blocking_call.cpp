#include "core/work/blocking_call.hpp"

namespace distc {

void BlockingCall::complete_slow(int code, const char *message) {
    code_ = code;
    if (code != 0) message_ = message ? message : "";
    if (this_thread() == owner_) {
        state_.store(kDone, std::memory_order_release);
        return;
    }
    // Not asleep (kRunning): the caller sees kDone itself, and this thread
    // must not touch the call again, as the caller may reuse or free it at once.
    int s = kRunning;
    if (state_.compare_exchange_strong(s, kDone, std::memory_order_acq_rel)) return;
    // Asleep (it went to sleep under the mutex): it cannot see kDone, wake and
    // free the call before this thread lets go of the mutex, so the wake-up
    // happens under it.
    std::lock_guard<std::mutex> lk(mu_);
    state_.store(kDone, std::memory_order_release);
    cv_.notify_all();
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

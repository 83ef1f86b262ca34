// The outcome of one blocking call on a host backend, kept without a Work:
// nobody but the calling thread ever sees it, so it needs no shared
// ownership, callbacks or durations. A thread lends its one BlockingCall to
// each blocking call it makes (capi/plugin_backend.cpp). Completed on that thread
// (inside the backend's call) it takes one plain store; from another thread,
// one compare-exchange, and the mutex only when the caller went to sleep.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>

#include "core/work/completion.hpp"

namespace distc {

class BlockingCall final : public Completion {
public:
    // Lends it for the next call. Only when reusable().
    void begin() {
        if (release_) run_release();  // a call given up on, completed since
        code_ = 0;
        has_release_ = false;
        owner_ = this_thread();
        state_.store(kRunning, std::memory_order_relaxed);
    }
    // Not lent any more: never begun, completed, or taken back after the backend refused the call.
    bool reusable() const {
        int s = state_.load(std::memory_order_acquire);
        return s == kIdle || s == kDone;
    }
    // The backend refused the call (it will not complete it).
    void take_back() {
        state_.store(kIdle, std::memory_order_relaxed);
        if (release_) run_release();
    }

    // From the backend, on any thread, once: code 0 or a negative distc code.
    // False, changing nothing, when the call is not running (completed already).
    bool complete(int code, const char *message) {
        if (!running()) return false;
        if (code == 0 && this_thread() == owner_) {
            // Inside the backend's call on the lending thread, which is not waiting.
            state_.store(kDone, std::memory_order_release);
            return true;
        }
        complete_slow(code, message);
        return true;
    }
    bool complete_by_backend(int code, const char *message, int32_t) override { return complete(code, message); }
    // No stream waits on a blocking host call; the release hook runs once the
    // call is over.
    bool set_backend_hooks(StreamWait, std::function<void()> release) override {
        if (!running() || has_release_) return false;
        has_release_ = true;
        release_ = std::move(release);
        return true;
    }

    // Waits up to `timeout` for complete(); false if it did not come (the call
    // stays lent to the backend). Runs the release hook when it came.
    bool wait(std::chrono::milliseconds timeout) {
        if (state_.load(std::memory_order_acquire) == kDone && !release_) return true;  // the common case
        return wait_slow(timeout);
    }
    int code() const { return code_; }
    const std::string &message() const { return message_; }  // the backend's, when code() < 0

private:
    // Which thread runs: its thread pointer (one instruction where the compiler has it).
    static const void *this_thread() {
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__aarch64__))
        return __builtin_thread_pointer();
#else
        static thread_local char mark;
        return &mark;
#endif
    }
    bool running() const {
        int s = state_.load(std::memory_order_acquire);
        return s == kRunning || s == kSleeping;
    }
    void complete_slow(int code, const char *message);
    void run_release();
    bool wait_slow(std::chrono::milliseconds timeout);
    enum : int { kIdle, kRunning, kSleeping, kDone };
    std::atomic<int> state_{kIdle};
    int code_ = 0;
    const void *owner_ = nullptr;  // the thread that lent it: completed there, it cannot be asleep
    std::string message_;
    std::function<void()> release_;
    bool has_release_ = false;
    std::mutex mu_;
    std::condition_variable cv_;
};

}  // namespace distc

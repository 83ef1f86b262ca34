// One operation's state, shared by the C handle, the group's queue and the
// thread that runs it. It holds no reference to its group, so a work handle
// outlives the group and vice versa.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>

namespace distc {

class Work {
public:
    Work(uint64_t seq, std::string what) : seq_(seq), what_(std::move(what)) {}
    ~Work();
    Work(const Work &) = delete;
    Work &operator=(const Work &) = delete;

    uint64_t seq() const { return seq_; }
    const std::string &what() const { return what_; }  // "allreduce #5 (float32, 1024 elements)"

    void start();  // marks the running start (for duration)
    // Records the outcome, wakes waiters and runs the callback; first call wins.
    void complete(int code, const std::string &message, int32_t source_rank = -1);

    bool done() const;
    int status() const;               // DISTC_INPROGRESS until done
    std::string message() const;
    const char *message_cstr() const;  // stable once done
    int32_t source_rank() const;
    int64_t duration_ns() const;
    // Waits up to `timeout` (negative: forever); true if done.
    bool wait(std::chrono::milliseconds timeout) const;
    // Registers the callback; runs it now if already done. False if one was set before.
    bool on_complete(std::function<void()> cb);

    // Device work (backends with streams): how a stream waits for it, and
    // what to release when the work goes. Set once, before completion; false
    // if set before.
    using StreamWait = std::function<int(void *stream)>;
    bool set_hooks(StreamWait wait_stream, std::function<void()> release);
    // Runs the stream hook; false (and nothing done) when there is none.
    bool wait_stream(void *stream, int &rc) const;

private:
    const uint64_t seq_;
    const std::string what_;
    mutable std::mutex mu_;
    mutable std::condition_variable cv_;
    bool done_ = false;
    bool has_cb_ = false;
    int code_ = 1;  // DISTC_INPROGRESS
    std::string message_;
    int32_t source_ = -1;
    std::chrono::steady_clock::time_point start_{}, end_{};
    std::function<void()> cb_;
    bool has_hooks_ = false;
    StreamWait wait_stream_;
    std::function<void()> release_;
};

}  // namespace distc

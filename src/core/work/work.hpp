// One operation's state, shared by the C handle, the group's queue and the
// thread that runs it. It holds no reference to its group, so a work handle
// outlives the group and vice versa.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/work/completion.hpp"

namespace distc {

// How messages name an operation: "allreduce #5 (float32[16])". Kept as
// fields and formatted only when a message needs it, so that an operation
// that succeeds builds no string.
struct OpLabel {
    enum class Form : uint8_t { Plain, Tensor, List, Ops, Bytes, Send, Recv };
    Form form = Form::Plain;
    const char *dtype = nullptr;  // the dtype's name (static)
    uint64_t numel = 0;
    uint64_t n = 0;  // List: tensors; Ops: operations; Bytes: bytes
    int peer = -1;   // Send/Recv: the peer; -1 with Recv: any rank
    int tag = 0;
    std::string detail() const;  // "(float32[16])", "" for Plain
};

// "allreduce #5 (float32[16])": how messages name an operation (`seq` 0: no number).
std::string describe_op(const char *kind, uint64_t seq, const OpLabel &label);

// A backend's own threads that complete Works (the host backend's worker
// and waiters) mark themselves: a completion callback running there must not
// destroy the group whose thread it is (distc_pg_free defers that).
void mark_group_thread();
bool on_group_thread();
// Whether this thread is running the completion callback of a collective of
// group `runner` (Work::set_runner), where that group's next collectives
// wait for the callback to return: a blocking one, or a wait for one, there
// would wait for itself.
bool in_callback_of(const void *runner);

// Who hears of an operation's outcome besides its waiters: the group's
// flight recorder (core/pg/trace_recorder.hpp), under the id it gave.
class TraceSink {
public:
    virtual ~TraceSink() = default;
    virtual void finished(uint64_t id, int code, const std::string &message) = 0;
};

class Work final : public Completion, public std::enable_shared_from_this<Work> {
public:
    // `kind` is a static string ("allreduce"); seq 0 means no number (point-to-point).
    Work(uint64_t seq, const char *kind, OpLabel label = {}) : seq_(seq), kind_(kind), label_(label) {}
    ~Work();
    Work(const Work &) = delete;
    Work &operator=(const Work &) = delete;

    uint64_t seq() const { return seq_; }
    const char *kind() const { return kind_; }
    // "allreduce #5 (float32[1024])", built on first use; stable afterwards.
    const std::string &what() const;

    void start();  // marks the running start (for duration)
    // Tells `sink` the outcome under `id`; set before the work can complete.
    void trace_to(std::shared_ptr<TraceSink> sink, uint64_t id) {
        trace_ = std::move(sink);
        trace_id_ = id;
    }
    // Records the outcome, wakes waiters and runs the callback; first call wins
    // (false for the others).
    bool complete(int code, const std::string &message, int32_t source_rank = -1);
    // A backend's completion: a failure's message becomes "<what()> failed: <message>".
    bool complete_by_backend(int code, const char *message, int32_t source_rank) override;

    bool done() const;
    int status() const;  // DISTC_INPROGRESS until done
    std::string message() const;
    const char *message_cstr() const;  // stable once done
    int32_t source_rank() const;
    int64_t duration_ns() const;
    // Waits up to `timeout` (negative: forever); true if done.
    bool wait(std::chrono::milliseconds timeout) const;
    // Registers the callback; runs it now if already done. False if one was set before.
    bool on_complete(std::function<void()> cb);
    // distc's own continuations (distc_work_then): any number, run on the
    // completing thread after the callback (or now, once those ran), given
    // this work; they must be short (they queue the real work elsewhere).
    void add_continuation(std::function<void(Work &)> fn);

    // A work no backend owns, completed by the program (distc_work_new).
    static std::shared_ptr<Work> promise(const char *kind) {
        auto w = std::make_shared<Work>(0, kind);
        w->promise_ = true;
        return w;
    }
    bool is_promise() const { return promise_; }

    // Device work (backends with streams): how a stream waits for it, and
    // what to release when the work goes. Set once, before completion; false
    // if set before.
    bool set_hooks(StreamWait wait_stream, std::function<void()> release);
    bool set_backend_hooks(StreamWait wait_stream, std::function<void()> release) override {
        return !done() && set_hooks(std::move(wait_stream), std::move(release));
    }
    // Runs the stream hook; false (and nothing done) when there is none.
    bool wait_stream(void *stream, int &rc) const;
    // The group whose collective this is (see in_callback_of): waiting for it
    // from one of that group's completion callbacks is refused.
    void set_runner(const void *runner) { runner_ = runner; }

private:
    const uint64_t seq_;
    const char *const kind_;
    const OpLabel label_;
    mutable std::mutex mu_;
    mutable std::string what_;
    mutable bool what_built_ = false;
    mutable std::condition_variable cv_;
    // Set last, under mu_, once the outcome is recorded: done() and status()
    // read it without the lock (a blocking call checks it right after running).
    std::atomic<bool> done_{false};
    bool has_cb_ = false;
    int code_ = 1;  // DISTC_INPROGRESS
    std::string message_;
    int32_t source_ = -1;
    std::chrono::steady_clock::time_point start_{}, end_{};
    std::function<void()> cb_;
    const void *runner_ = nullptr;
    std::vector<std::function<void(Work &)>> continuations_;
    bool continuations_run_ = false;  // under mu_: complete() has run them (later ones run at once)
    bool promise_ = false;
    std::shared_ptr<TraceSink> trace_;
    uint64_t trace_id_ = 0;
    bool has_hooks_ = false;
    StreamWait wait_stream_;
    std::function<void()> release_;
};

}  // namespace distc

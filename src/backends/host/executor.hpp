// How the host backend runs operations: a blocking call on the calling
// thread (after the asynchronous collectives issued before it), an
// asynchronous collective on one worker thread in issue order, and the wait
// of an asynchronous send or receive on a pool that grows so that no wait
// holds up another (an irecv queued before the matching isend must not
// deadlock). Every operation ends in one place (attempt), which also breaks
// the group when a collective fails.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "backends/host/failure_notes.hpp"
#include "core/util/fn_ref.hpp"
#include "core/work/work.hpp"

namespace distc {

class Executor {
public:
    // `close` breaks the group's links (every transport and Gloo's pairs) so
    // that peers' operations and this rank's in flight fail at once; any
    // thread. Its argument: whether a failure here breaks them (else an
    // abort or a free). `notes` tells the group's first failure to every
    // rank (may be null).
    Executor(int rank, std::function<void(bool)> close, std::unique_ptr<FailureNotes> notes = nullptr) :
        rank_(rank), close_(std::move(close)), notes_(std::move(notes)) {}
    ~Executor();  // drops what is queued, cuts short what runs, joins the threads
    Executor(const Executor &) = delete;
    Executor &operator=(const Executor &) = delete;

    // What an operation is, for its messages.
    struct Op {
        const char *kind;
        uint64_t seq;
        OpLabel label;
        bool collective;  // in the group's sequence (not point-to-point)
    };
    // Returns the source rank (receives) or -1; throws its failure.
    using Body = std::function<int32_t()>;

    // A blocking call, on this thread; throws what it failed with.
    void run_here(const Op &op, FnRef<int32_t()> body);
    // An asynchronous call: `w` completes once `body` has run.
    void enqueue(const Op &op, std::shared_ptr<Work> w, Body body);

    // Throws DISTC_EABORTED when the group was aborted or broke: why, and where.
    void check_open() const {
        if (closed_.load(std::memory_order_acquire)) fail_closed();
    }
    void abort();  // ProcessGroup::abort: fails what is queued and all later calls

private:
    struct Item {
        Op op;
        std::shared_ptr<Work> work;
        Body body;
    };
    struct Outcome {
        int code = 0;
        std::string message;  // "allreduce #3 (float32[4]) failed: ..." when code != 0
        int32_t source = -1;
    };
    Outcome attempt(const Op &op, FnRef<int32_t()> body) noexcept;
    // `lost_link`: the failure was a peer breaking off. Returns the group's
    // first failure where another rank's note has it ("" where this rank's
    // is the first, or none could be left).
    std::string break_group(const std::string &why, bool lost_link);
    // `note`, or "" where it is this rank's own (it broke the group first).
    std::string others_note(const std::string &note) const;
    [[noreturn, gnu::cold]] void fail_closed() const;
    void drop_queued(bool stop, const std::string &why);
    void worker_loop();
    void p2p_loop();

    const int rank_;
    const std::function<void(bool)> close_;
    const std::unique_ptr<FailureNotes> notes_;
    std::atomic<bool> closed_{false};  // aborted or broken: nothing new runs
    mutable std::mutex mu_;
    std::string broken_;  // why a collective failed here and broke the group
    bool aborted_ = false;
    std::condition_variable cv_;       // the worker and the p2p waiters wait for items here
    std::condition_variable idle_cv_;  // blocking collectives wait here for earlier async ones
    std::deque<Item> queue_;           // collectives, in issue order
    // Queued or running on worker_. Changed under mu_; a blocking call reads
    // it without: one that finds none pending takes no lock.
    std::atomic<size_t> collectives_pending_{0};
    std::thread worker_;
    std::deque<Item> p2p_queue_;
    size_t p2p_idle_ = 0;
    std::vector<std::thread> p2p_threads_;
    bool stopping_ = false;
};

}  // namespace distc

// One rank's MPI communicator for a distc group. Asynchronous operations are
// MPI requests that a progress thread tests and completes. Blocking
// point-to-point calls post requests and test them on the caller's thread,
// so timeouts and aborts end them with an error. Blocking collectives run
// MPI's blocking collective (its tuned algorithms: the non-blocking ones were
// slower when measured), which nothing can interrupt: past the timeout the
// job is aborted with a message. DISTC_MPI_BLOCKING_COLLECTIVES=interruptible
// drives them like point-to-point instead (errors, not a killed job; slower).
#pragma once

#include <mpi.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "support/plugin_failure.hpp"
#include "distc/sys/backend.h"

namespace distc_mpi {

using Clock = std::chrono::steady_clock;

using distc_plugin::Failure;
using distc_plugin::raise;
// An MPI return code, as an exception naming the call; and as text.
[[noreturn, gnu::cold]] void fail_mpi(int rc, const char *what);
inline void check(int rc, const char *what) {
    if (rc != MPI_SUCCESS) fail_mpi(rc, what);
}
std::string mpi_error(int rc);

// MPI itself: initialised once with MPI_THREAD_MULTIPLE asked for, finalised
// at exit when distc initialised it. With MPI_THREAD_SERIALIZED (a program
// that initialised MPI so) every MPI call of distc goes through one lock
// (mpi_lock); less is refused.
void ensure_mpi();
extern bool g_serialized;  // set by ensure_mpi
// Set as MPI_Finalize starts (ensure_mpi watches for it): after it any MPI
// call aborts the process. An atomic read, where MPI_Finalized takes a lock.
extern std::atomic<bool> g_finalized;
extern std::mutex g_mpi_mu;
inline std::unique_lock<std::mutex> mpi_lock() {
    return g_serialized ? std::unique_lock<std::mutex>(g_mpi_mu) : std::unique_lock<std::mutex>();
}

// Tests `req` until it completes (true), or for `timeout_ms` (false: the
// request stays MPI's, with whatever it is to write).
bool test_until(MPI_Request &req, int64_t timeout_ms);

// After a collective step that may time out on some ranks (a barrier, a
// dup): whether every rank of `comm` got through it in time (`made`: this
// one did). A rank that gave up says so and leaves its answer to MPI, so
// that a rank coming later, whose step matched the one given up, reads it
// and gives up too instead of going on alone.
bool all_made_it(MPI_Comm comm, bool made, int64_t timeout_ms);

// An operation in flight: its requests, what to do on the host once they
// completed (unpack, scale), and the memory it owns until then.
struct Op {
    std::vector<MPI_Request> reqs;
    std::vector<std::unique_ptr<uint8_t[]>> temps;
    std::vector<int> ints;         // counts and displacements MPI reads until completion
    std::function<void()> finish;  // may be empty
    int source_req = -1;           // the request whose status names the source rank (recv)
    int32_t source = -1;           // otherwise the peer to report (send), or -1
    // Receives, checked once complete: MPI takes a shorter message silently,
    // and reports a longer one only in its status.
    struct Recv {
        size_t req;
        int bytes, tag;
    };
    std::vector<Recv> recvs;
    // What is wrong with them, as gloo says it ("": nothing); `in_status`: the
    // test returned MPI_ERR_IN_STATUS (only then do the statuses' errors count).
    std::string recv_mismatch(const std::vector<MPI_Status> &st, bool in_status) const;
    // An operation of receives only, timed out: MPI can cancel those (not
    // sends, nor collectives). True once each is cancelled or complete:
    // nothing writes the buffers any more, and the group goes on.
    bool cancel_receives();
    uint8_t *temp(size_t n) {
        temps.emplace_back(new uint8_t[n ? n : 1]);
        return temps.back().get();
    }
};

class Group {
public:
    Group(MPI_Comm comm, int64_t timeout_ms);  // takes ownership of comm
    // Throws where the group cannot take an operation: aborted, or MPI finalized.
    void check_usable() {
        if (aborted_.load(std::memory_order_acquire)) fail_aborted();
        if (g_finalized.load(std::memory_order_acquire))
            raise(DISTC_ESTATE, "the program finalized MPI: the mpi backend cannot use it any more");
    }
    ~Group();

    MPI_Comm comm() const { return comm_; }
    int rank() const { return rank_; }
    int size() const { return size_; }

    // An asynchronous operation: `post` starts it (fills op.reqs); the
    // progress thread completes `work` when every request is done.
    void start(distc_work *work, const distc_backend_op_args *a, const std::function<void(Op &)> &post);
    // A blocking call: `run` performs it with blocking MPI calls on this thread;
    // the progress thread watches its deadline (MPI cannot cancel it: past
    // the timeout the job is aborted with a message naming the operation).
    // `source` (may be NULL) is read once `run` returned: the rank to report.
    template <typename F>
    void run_blocking(distc_work *work, const distc_backend_op_args *a, F &&run, const int32_t *source = nullptr) {
        check_usable();
        watch_blocking(a);
        try {
            auto lk = mpi_lock();
            run();
        } catch (const Failure &f) {
            blocking_calls_.store(2 * a->seq, std::memory_order_release);
            if (f.code == DISTC_EBACKEND) mark_broken(op_name(a->op, a->seq) + " failed in MPI");
            throw;
        } catch (...) {
            blocking_calls_.store(2 * a->seq, std::memory_order_release);
            throw;
        }
        blocking_calls_.store(2 * a->seq, std::memory_order_release);
        distc_backend_work_complete(work, source ? *source : -1);
    }
    // A blocking call whose requests `o` holds: tested on this thread until
    // done, the timeout, or an abort (then the requests are abandoned).
    void wait_here(distc_work *work, const distc_backend_op_args *a, Op &o);

    Group *split(int color, int key, const distc_backend_group_info *info);
    // Fails everything in flight and later calls; requests MPI cannot cancel are abandoned.
    void abort(int code, const std::string &why);

private:
    // "allreduce #3" ("send": point-to-point has no number).
    static std::string op_name(const char *op, uint64_t seq);
    // A collective that failed in MPI, or that MPI cannot cancel, leaves the
    // communicator unusable: later calls fail at once, naming `why` (the
    // first reason stays). Returns the reason.
    std::string mark_broken(const std::string &why);
    struct Pending {
        distc_work *work;
        Op op;
        Clock::time_point deadline;
        int64_t timeout_ms;
        const char *name;
        uint64_t seq;
    };
    void progress();
    [[noreturn, gnu::cold]] void fail_aborted();
    void watch_blocking(const distc_backend_op_args *a) {
        blocking_name_.store(a->op, std::memory_order_relaxed);
        blocking_seq_.store(a->seq, std::memory_order_relaxed);
        blocking_timeout_ms_.store(a->timeout_ms, std::memory_order_relaxed);
        blocking_calls_.store(2 * a->seq + 1, std::memory_order_release);
    }

    MPI_Comm comm_;
    int rank_ = 0, size_ = 1;
    int64_t timeout_ms_;
    std::mutex mu_;
    std::condition_variable cv_;
    std::deque<Pending> incoming_;    // handed to the progress thread
    std::vector<Pending> abandoned_;  // requests of aborted operations (their memory stays)
    bool comm_in_use_ = false;        // requests of distc's own were left on comm_: it is never freed
    bool stop_ = false;
    std::atomic<bool> aborted_{false};
    std::string abort_reason_;
    // The blocking call in progress on some thread, for its deadline. Set
    // without waking the progress thread, which looks every 100 ms: 2 seq + 1
    // while the call with that sequence number runs, 2 seq once it returned.
    // Plain stores, no clock: the progress thread times a call from when it
    // first saw it (up to one look, 100 ms, later than the exact deadline).
    // Calls from several threads at once may hide one another (the last store
    // is always some call's end, so never a false alarm).
    std::atomic<uint64_t> blocking_calls_{0};
    std::atomic<const char *> blocking_name_{""};
    std::atomic<uint64_t> blocking_seq_{0};
    std::atomic<int64_t> blocking_timeout_ms_{0};
    std::thread progress_;
};

}  // namespace distc_mpi

#include "backends/mpi/mpi_group.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "distc.h"
#include "support/sigpipe.hpp"

namespace distc_mpi {

std::string mpi_error(int rc) {
    char text[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(rc, text, &len);
    return std::string(text, static_cast<size_t>(len));
}

void fail_mpi(int rc, const char *what) { raise(DISTC_EBACKEND, std::string(what) + " failed: " + mpi_error(rc)); }

bool g_serialized = false;
std::mutex g_mpi_mu;
std::atomic<bool> g_finalized{false};

namespace {

std::mutex g_init_mu;

void finalize_at_exit() {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) MPI_Finalize();
}

// MPI_Finalize deletes MPI_COMM_SELF's attributes first thing: an attribute
// whose delete callback marks it tells the group before any call would abort.
int on_finalize(MPI_Comm, int, void *, void *) {
    g_finalized.store(true, std::memory_order_release);
    return MPI_SUCCESS;
}

void watch_finalize() {
    static bool watching = false;  // under g_init_mu
    if (watching) return;
    int key = MPI_KEYVAL_INVALID;
    if (MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, on_finalize, &key, nullptr) == MPI_SUCCESS &&
        MPI_Comm_set_attr(MPI_COMM_SELF, key, nullptr) == MPI_SUCCESS)
        watching = true;
}

const char *level_name(int level) {
    switch (level) {
        case MPI_THREAD_SINGLE: return "MPI_THREAD_SINGLE";
        case MPI_THREAD_FUNNELED: return "MPI_THREAD_FUNNELED";
        case MPI_THREAD_SERIALIZED: return "MPI_THREAD_SERIALIZED";
        default: return "MPI_THREAD_MULTIPLE";
    }
}

}  // namespace

void ensure_mpi() {
    std::lock_guard<std::mutex> lk(g_init_mu);
    int initialized = 0, finalized = 0;
    MPI_Initialized(&initialized);
    MPI_Finalized(&finalized);  // after it, any MPI call aborts the process
    if (finalized) raise(DISTC_ESTATE, "the program finalized MPI: the mpi backend cannot use it any more");
    int level = MPI_THREAD_SINGLE;
    if (!initialized) {
        int argc = 0;
        char **argv = nullptr;
        // MULTIPLE: the progress thread tests requests while a caller is inside
        // MPI. (With Open MPI 4.1, SERIALIZED measured no cheaper for small
        // allreduces; only SINGLE was, which the progress thread rules out.)
        check(MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &level), "MPI_Init_thread");
        // MPI is distc's alone here: an error MPI raises where no group's
        // communicator is at hand (Open MPI reports a failed non-blocking
        // collective's test so) comes back as a code, not the job's end. A
        // program that initialised MPI keeps its own handlers.
        MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
        MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);
        // Groups are gone by then or never freed; MPI must still be finalised
        // for mpirun to see a clean exit.
        std::atexit(finalize_at_exit);
    } else {
        MPI_Query_thread(&level);
    }
    if (level < MPI_THREAD_SERIALIZED)
        raise(DISTC_EBACKEND, std::string("MPI provides ") + level_name(level) +
                                  "; the mpi backend needs MPI_THREAD_SERIALIZED or better (initialise MPI with "
                                  "MPI_Init_thread(..., MPI_THREAD_MULTIPLE, ...), or let distc do it)");
    g_serialized = level < MPI_THREAD_MULTIPLE;
    watch_finalize();
}

namespace {
// A test loop's wait between tries: spin first (latency), then yield the core (a peer may need it).
void pause_after(unsigned spins) {
    if (spins > 2000) std::this_thread::sleep_for(std::chrono::microseconds(spins > 20000 ? 100 : 5));
}
}  // namespace

bool test_until(MPI_Request &req, int64_t timeout_ms) {
    const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
    for (unsigned spins = 0;; ++spins) {
        int done = 0;
        {
            auto lk = mpi_lock();
            check(MPI_Test(&req, &done, MPI_STATUS_IGNORE), "MPI_Test");
        }
        if (done) return true;
        if (Clock::now() > deadline) return false;
        pause_after(spins);
    }
}

bool all_made_it(MPI_Comm comm, bool made, int64_t timeout_ms) {
    auto *flag = new int(made ? 1 : 0);  // MPI reads it, and writes the minimum, until complete
    MPI_Request req = MPI_REQUEST_NULL;
    {
        auto lk = mpi_lock();
        int rc = MPI_Iallreduce(MPI_IN_PLACE, flag, 1, MPI_INT, MPI_MIN, comm, &req);
        if (rc != MPI_SUCCESS) delete flag;
        check(rc, "MPI_Iallreduce");
    }
    if (!made || !test_until(req, timeout_ms)) return false;  // `flag` stays MPI's
    const bool all = *flag != 0;
    delete flag;
    return all;
}

Group::Group(MPI_Comm comm, int64_t timeout_ms) : comm_(comm), timeout_ms_(timeout_ms) {
    auto lk = mpi_lock();
    MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
    lk = {};
    progress_ = distc::start_thread([this] { progress(); });
}

Group::~Group() {
    {
        std::lock_guard<std::mutex> lk(mu_);
        // The progress thread finishes what is in flight (bounded by its
        // timeouts), then exits. Failing it at once would hand the caller
        // back buffers that MPI, which cannot take them back, still writes.
        stop_ = true;
    }
    cv_.notify_all();
    if (progress_.joinable()) progress_.join();
    // MPI may still write into what abandoned requests were given, and use
    // a communicator with requests left on it: both stay, for the life of the process.
    if (!abandoned_.empty() || comm_in_use_) {
        static std::mutex mu;
        static auto *kept = new std::vector<Pending>;
        std::lock_guard<std::mutex> lk(mu);
        for (auto &p : abandoned_) kept->push_back(std::move(p));
        return;
    }
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (finalized) return;
    auto lk = mpi_lock();
    MPI_Comm_free(&comm_);
}

std::string Op::recv_mismatch(const std::vector<MPI_Status> &st, bool in_status) const {
    for (const Recv &r : recvs) {
        const MPI_Status &s = st[r.req];
        const std::string who = "rank " + std::to_string(s.MPI_SOURCE), tag = std::to_string(r.tag);
        if (in_status && s.MPI_ERROR == MPI_ERR_TRUNCATE)
            return who + " sent more than the " + std::to_string(r.bytes) + " bytes this receive takes (tag " + tag +
                   ")";
        if (in_status && s.MPI_ERROR != MPI_SUCCESS) continue;
        int got = 0;
        MPI_Get_count(&s, MPI_BYTE, &got);
        if (got != r.bytes)
            return who + " sent " + std::to_string(got) + " bytes with tag " + tag + "; this receive takes " +
                   std::to_string(r.bytes);
    }
    return "";
}

bool Op::cancel_receives() {
    if (reqs.empty() || recvs.size() != reqs.size()) return false;
    auto lk = mpi_lock();
    for (MPI_Request &r : reqs)
        if (r != MPI_REQUEST_NULL) MPI_Cancel(&r);
    // A cancelled receive completes at once; one that matched meanwhile has its data.
    return MPI_Waitall(static_cast<int>(reqs.size()), reqs.data(), MPI_STATUSES_IGNORE) == MPI_SUCCESS;
}

std::string Group::op_name(const char *op, uint64_t seq) {
    return std::string(op) + (seq ? " #" + std::to_string(seq) : "");
}

std::string Group::mark_broken(const std::string &why) {
    std::lock_guard<std::mutex> lk(mu_);
    if (!aborted_.exchange(true)) abort_reason_ = why;
    return abort_reason_;
}

void Group::fail_aborted() {
    std::lock_guard<std::mutex> lk(mu_);
    raise(DISTC_EABORTED, "the group was aborted (" + abort_reason_ + ")");
}

void Group::start(distc_work *work, const distc_backend_op_args *a, const std::function<void(Op &)> &post) {
    check_usable();
    Pending p{work, Op{}, Clock::now() + std::chrono::milliseconds(a->timeout_ms), a->timeout_ms, a->op, a->seq};
    {
        auto lk = mpi_lock();
        post(p.op);  // throws before anything is queued when MPI refuses
    }
    {
        std::lock_guard<std::mutex> lk(mu_);
        incoming_.push_back(std::move(p));
    }
    cv_.notify_all();
}

void Group::wait_here(distc_work *work, const distc_backend_op_args *a, Op &o) {
    auto deadline = Clock::now() + std::chrono::milliseconds(a->timeout_ms);
    std::vector<MPI_Status> st(o.reqs.size());
    for (unsigned spins = 0;; ++spins) {
        int done = 0, rc;
        {
            auto lk = mpi_lock();
            rc = MPI_Testall(static_cast<int>(o.reqs.size()), o.reqs.data(), &done, st.data());
        }
        int code = 0;
        std::string msg;
        const bool in_status = rc == MPI_ERR_IN_STATUS;
        if ((done || in_status) && !(msg = o.recv_mismatch(st, in_status)).empty()) {
            code = DISTC_EINVAL;
        } else if (rc != MPI_SUCCESS) {
            code = DISTC_EBACKEND;
            msg = "MPI reports: " + mpi_error(rc);
            if (a->seq) mark_broken(op_name(a->op, a->seq) + " failed in MPI");
        } else if (done) {
            int32_t source = o.source_req >= 0 ? st[static_cast<size_t>(o.source_req)].MPI_SOURCE : o.source;
            if (o.finish) o.finish();
            distc_backend_work_complete(work, source);
            return;
        } else if (aborted_) {
            std::lock_guard<std::mutex> lk(mu_);
            code = DISTC_EABORTED;
            msg = "the group was aborted (" + abort_reason_ + ")";
        } else if (Clock::now() > deadline && o.cancel_receives()) {
            code = DISTC_ETIMEOUT;
            msg = "timed out after " + std::to_string(a->timeout_ms) + " ms (a peer stopped sending?); withdrawn";
            distc_backend_work_fail(work, code, msg.c_str());
            return;
        } else if (Clock::now() > deadline) {
            code = DISTC_ETIMEOUT;
            msg = "timed out after " + std::to_string(a->timeout_ms) +
                  " ms (a peer stopped calling?); MPI cannot cancel it: the group was aborted";
            mark_broken(op_name(a->op, a->seq) + " timed out");
        }
        if (code != 0) {
            distc_backend_work_fail(work, code, msg.c_str());
            // MPI may still write into the buffers it was given: keep them.
            std::lock_guard<std::mutex> lk(mu_);
            abandoned_.push_back(Pending{nullptr, std::move(o), deadline, a->timeout_ms, a->op, a->seq});
            return;
        }
        pause_after(spins);
    }
}

Group *Group::split(int color, int key, const distc_backend_group_info *info) {
    check_usable();
    // MPI_Comm_split has no timeout: every rank of the group meets first in
    // a barrier that does.
    MPI_Request req = MPI_REQUEST_NULL;
    {
        auto lk = mpi_lock();
        check(MPI_Ibarrier(comm_, &req), "MPI_Ibarrier");
    }
    const int64_t timeout = info ? info->timeout_ms : timeout_ms_;
    if (!all_made_it(comm_, test_until(req, timeout), timeout)) {
        {
            std::lock_guard<std::mutex> lk(mu_);
            comm_in_use_ = true;  // by the barrier and the verdict left to MPI
        }
        abort(DISTC_EABORTED, "a subgroup's creation timed out");
        raise(DISTC_ETIMEOUT, "not every rank of the group joined the subgroup's creation within " +
                                  std::to_string(timeout) + " ms; MPI cannot cancel it: the group was aborted");
    }
    MPI_Comm sub = MPI_COMM_NULL;
    {
        auto lk = mpi_lock();
        check(MPI_Comm_split(comm_, color < 0 ? MPI_UNDEFINED : color, key, &sub), "MPI_Comm_split");
    }
    if (color < 0) return nullptr;
    auto *g = new Group(sub, info->timeout_ms);
    if (g->rank() != info->rank || g->size() != info->size) {
        int r = g->rank(), s = g->size();
        delete g;
        raise(DISTC_EINTERNAL, "MPI_Comm_split placed this rank at " + std::to_string(r) + " of " + std::to_string(s) +
                                   ", distc expected " + std::to_string(info->rank) + " of " +
                                   std::to_string(info->size));
    }
    return g;
}

void Group::abort(int code, const std::string &why) {
    std::deque<Pending> failed;
    {
        std::lock_guard<std::mutex> lk(mu_);
        if (aborted_.exchange(true)) return;
        abort_reason_ = why;
        failed.swap(incoming_);
    }
    cv_.notify_all();
    // The progress thread fails what it holds when it sees the flag; these never reached it.
    for (auto &p : failed) {
        distc_backend_work_fail(p.work, code, why.c_str());
        p.work = nullptr;
        std::lock_guard<std::mutex> lk(mu_);
        abandoned_.push_back(std::move(p));
    }
}

void Group::progress() {
    std::vector<Pending> mine;  // only this thread touches these
    int idle_us = 5;
    uint64_t seen_call = 0;       // the blocking call (its odd count) seen running
    Clock::time_point seen_at{};  // since when
    std::unique_lock<std::mutex> lk(mu_);
    for (;;) {
        if (mine.empty() && incoming_.empty()) {
            if (stop_) return;
            // Idle: a look every 100 ms at the blocking call in progress, if any.
            cv_.wait_for(lk, std::chrono::milliseconds(100));
        }
        for (auto &p : incoming_) mine.push_back(std::move(p));
        incoming_.clear();
        bool aborted = aborted_;
        std::string reason = abort_reason_;
        uint64_t call = blocking_calls_.load(std::memory_order_acquire);
        lk.unlock();

        // A blocking MPI call cannot be interrupted: past its timeout the job ends
        // with a message, rather than hang (as c10d's watchdog tears down NCCL jobs).
        auto now = Clock::now();
        if (!(call & 1)) {
            seen_call = 0;
        } else if (call != seen_call) {
            seen_call = call;
            seen_at = now;
        } else if (now - seen_at > std::chrono::milliseconds(blocking_timeout_ms_.load())) {
            std::fprintf(stderr,
                         "distc mpi backend: %s #%llu timed out after %lld ms in a blocking MPI call (a rank stopped "
                         "calling); MPI cannot cancel it, aborting the job\n",
                         blocking_name_.load(), static_cast<unsigned long long>(blocking_seq_.load()),
                         static_cast<long long>(blocking_timeout_ms_.load()));
            std::fflush(stderr);
            // The flight recorder's dump first: this rank's part of the story
            // ends here, with the blocking call still "started".
            const char *dir = std::getenv("DISTC_TRACE_DIR");
            if (dir && *dir && distc_trace_dump_all(dir) != 0)
                std::fprintf(stderr, "distc mpi backend: could not write the trace: %s\n", distc_error_last());
            MPI_Abort(MPI_COMM_WORLD, 1);
        }

        bool progressed = false;
        bool collective_waiting = false;  // collectives complete in the order they were issued, as gloo's
        for (size_t i = 0; i < mine.size();) {
            Pending &p = mine[i];
            if (!aborted && p.seq != 0 && collective_waiting) {
                ++i;
                continue;
            }
            int code = 0;
            std::string msg;
            int32_t source = p.op.source;
            if (aborted) {
                code = DISTC_EABORTED;
                msg = "the group was aborted (" + reason + ")";
            } else {
                int done = 0;
                std::vector<MPI_Status> st(p.op.reqs.size());
                int rc;
                {
                    auto ml = mpi_lock();
                    rc = p.op.reqs.empty()
                             ? MPI_SUCCESS
                             : MPI_Testall(static_cast<int>(p.op.reqs.size()), p.op.reqs.data(), &done, st.data());
                }
                if (p.op.reqs.empty()) done = 1;
                const bool in_status = rc == MPI_ERR_IN_STATUS;
                if ((done || in_status) && !(msg = p.op.recv_mismatch(st, in_status)).empty()) {
                    code = DISTC_EINVAL;
                } else if (rc != MPI_SUCCESS) {
                    code = DISTC_EBACKEND;
                    msg = "MPI reports: " + mpi_error(rc);
                    if (p.seq) {
                        reason = mark_broken(op_name(p.name, p.seq) + " failed in MPI");
                        aborted = true;
                    }
                } else if (done) {
                    if (p.op.source_req >= 0) source = st[static_cast<size_t>(p.op.source_req)].MPI_SOURCE;
                    try {
                        if (p.op.finish) p.op.finish();
                    } catch (const Failure &f) {
                        code = f.code;
                        msg = f.message;
                    }
                    if (code == 0) distc_backend_work_complete(p.work, source);
                } else if (Clock::now() > p.deadline && p.op.cancel_receives()) {
                    code = DISTC_ETIMEOUT;
                    msg =
                        "timed out after " + std::to_string(p.timeout_ms) + " ms (a peer stopped sending?); withdrawn";
                    p.op.reqs.clear();  // complete: nothing to abandon
                } else if (Clock::now() > p.deadline) {
                    code = DISTC_ETIMEOUT;
                    msg = "timed out after " + std::to_string(p.timeout_ms) +
                          " ms (a rank stopped calling?); MPI cannot cancel it: the group was aborted";
                    reason = mark_broken(op_name(p.name, p.seq) + " timed out");
                    aborted = true;
                } else {
                    if (p.seq != 0) collective_waiting = true;
                    ++i;
                    continue;
                }
            }
            progressed = true;
            bool abandon = code != 0 && !p.op.reqs.empty();
            if (code != 0) distc_backend_work_fail(p.work, code, msg.c_str());
            if (abandon) {
                // MPI may still write into the buffers it was given: keep them.
                p.work = nullptr;
                std::lock_guard<std::mutex> g(mu_);
                abandoned_.push_back(std::move(p));
            }
            mine.erase(mine.begin() + static_cast<std::ptrdiff_t>(i));
        }
        if (!mine.empty() && !progressed) {
            std::this_thread::sleep_for(std::chrono::microseconds(idle_us));
            idle_us = std::min(idle_us * 2, 200);
        } else {
            idle_us = 5;
        }
        lk.lock();
    }
}

}  // namespace distc_mpi

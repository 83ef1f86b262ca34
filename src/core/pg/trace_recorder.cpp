#include "core/pg/trace_recorder.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <thread>

#include "core/pg/types.hpp"
#include "core/util/error.hpp"
#include "distc/errors.h"

namespace distc {

namespace {

enum State { kQueued = 1, kStarted, kCompleted, kFailed, kAborted };
const char *const kStateNames[] = {"", "queued", "started", "completed", "failed", "aborted"};

// The kernel tick's clock: a few milliseconds of resolution, enough to say
// who waited how long, at a fraction of the precise clock's cost per call.
int64_t now_us() {
    timespec ts;
    clock_gettime(CLOCK_REALTIME_COARSE, &ts);
    return static_cast<int64_t>(ts.tv_sec) * 1000000 + ts.tv_nsec / 1000;
}

int64_t thread_id() {
    thread_local int64_t id = 0;  // constant-initialised: no guard variable
    if (!id) id = static_cast<int64_t>(::syscall(SYS_gettid));
    return id;
}

size_t capacity_from_env() {
    const char *e = std::getenv("DISTC_TRACE_BUFFER");
    if (!e || !*e) return 1000;
    long long n = std::atoll(e);
    return n <= 0 ? 0 : static_cast<size_t>(std::min<long long>(n, 10000000));
}

std::string json_string(const std::string &s) {
    std::string out = "\"";
    for (unsigned char c : s) {
        if (c == '"' || c == '\\') {
            out += '\\';
            out += static_cast<char>(c);
        } else if (c < 0x20) {
            char buf[8];
            std::snprintf(buf, sizeof buf, "\\u%04x", c);
            out += buf;
        } else {
            out += static_cast<char>(c);
        }
    }
    return out + "\"";
}

std::string host_name() {
    char name[256] = {0};
    return ::gethostname(name, sizeof name - 1) == 0 ? name : "?";
}

// The recorders of live groups, for dump_all; both outlive static
// destructors, as a dump may come from a process that is exiting.
std::mutex &registry_mu() {
    static auto *m = new std::mutex();
    return *m;
}
std::vector<std::weak_ptr<TraceRecorder>> &registry() {
    static auto *r = new std::vector<std::weak_ptr<TraceRecorder>>();  // outlives static destructors
    return *r;
}

// A spin lock on one slot: begin and finished touch one slot each, briefly.
struct SlotLock {
    std::atomic_flag &f;
    explicit SlotLock(std::atomic_flag &flag) : f(flag) {
        while (f.test_and_set(std::memory_order_acquire)) {}
    }
    ~SlotLock() { f.clear(std::memory_order_release); }
};

// DISTC_TRACE_SIGNAL: the signal (USR1, SIGUSR2, 12, ...) on which this
// process dumps every group into DISTC_TRACE_DIR, as a launcher asks a
// running job. The handler only writes to a pipe; a thread of its own
// dumps, so a rank stuck in a collective still answers.
int g_dump_pipe[2] = {-1, -1};

int signal_number(const char *name) {
    std::string s = name;
    if (s.rfind("SIG", 0) == 0) s = s.substr(3);
    if (s == "USR1") return SIGUSR1;
    if (s == "USR2") return SIGUSR2;
    if (s == "HUP") return SIGHUP;
    if (s == "PWR") return SIGPWR;
    int n = std::atoi(s.c_str());
    return n > 0 && n < NSIG && n != SIGKILL && n != SIGSTOP ? n : 0;
}

void on_dump_signal(int) {
    int saved = errno;
    if (g_dump_pipe[1] >= 0) (void)!::write(g_dump_pipe[1], "d", 1);
    errno = saved;
}

void start_dump_on_signal() {
    const char *name = std::getenv("DISTC_TRACE_SIGNAL");
    if (!name || !*name) return;
    int sig = signal_number(name);
    if (!sig) {
        std::fprintf(stderr, "distc: DISTC_TRACE_SIGNAL=%s is not a signal this process can catch\n", name);
        return;
    }
    if (::pipe2(g_dump_pipe, O_CLOEXEC) != 0) return;
    std::thread([] {
        char b[64];
        for (;;) {
            ssize_t n = ::read(g_dump_pipe[0], b, sizeof b);
            if (n < 0 && errno == EINTR) continue;
            if (n <= 0) return;
            const char *dir = std::getenv("DISTC_TRACE_DIR");
            try {
                std::string path = TraceRecorder::dump_all(dir && *dir ? dir : ".");
                std::fprintf(stderr, "distc: wrote the trace %s (asked by a signal)\n", path.c_str());
            } catch (const std::exception &e) {
                std::fprintf(stderr, "distc: could not write the trace asked by a signal: %s\n", e.what());
            }
        }
    }).detach();
    struct sigaction sa;
    std::memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_dump_signal;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    ::sigaction(sig, &sa, nullptr);
}

}  // namespace

TraceRecorder::TraceRecorder(std::string group, int rank, int size, std::vector<int> global_ranks,
                             std::string backend) :
    group_(std::move(group)),
    backend_(std::move(backend)), rank_(rank), size_(size), global_ranks_(std::move(global_ranks)),
    capacity_(std::max<size_t>(1, capacity_from_env())) {
    slots_.reset(new Slot[capacity_]);
}

std::shared_ptr<TraceRecorder> TraceRecorder::make(std::string group, int rank, int size, std::vector<int> global_ranks,
                                                   std::string backend) {
    if (capacity_from_env() == 0) return nullptr;
    // A function-local static, not std::call_once: that one's thread-local
    // state would take static TLS, which a library loaded late (Python's
    // import after torch's) may not get.
    static const bool signal_started = (start_dump_on_signal(), true);
    (void)signal_started;
    auto r = std::make_shared<TraceRecorder>(std::move(group), rank, size, std::move(global_ranks), std::move(backend));
    std::lock_guard<std::mutex> lk(registry_mu());
    auto &all = registry();
    all.erase(std::remove_if(all.begin(), all.end(), [](const auto &w) { return w.expired(); }), all.end());
    all.push_back(r);
    return r;
}

uint64_t TraceRecorder::begin(const TraceOp &op) {
    uint64_t id = next_.fetch_add(1, std::memory_order_relaxed) + 1;
    Slot &s = slots_[(id - 1) % capacity_];
    SlotLock lk(s.busy);
    s.id = id;
    s.op = op;
    s.thread = thread_id();
    s.queued_us = now_us();
    s.ended_us = 0;
    s.state = op.blocking ? kStarted : kQueued;
    s.code = 0;
    s.error.clear();
    return id;
}

void TraceRecorder::finished(uint64_t id, int code, const std::string &message) {
    {
        Slot &s = slots_[(id - 1) % capacity_];
        SlotLock lk(s.busy);
        if (s.id != id) return;  // overwritten since: the ring has moved on
        s.ended_us = now_us();
        s.code = code;
        s.state = code == 0 ? kCompleted : code == DISTC_EABORTED ? kAborted : kFailed;
        if (code != 0) s.error = message;
    }
    if (code == DISTC_ETIMEOUT || code == DISTC_EABORTED || code == DISTC_EREMOTE) dump_on_failure();
}

int TraceRecorder::global_rank() const {
    return global_ranks_.empty() ? rank_ : global_ranks_[static_cast<size_t>(rank_)];
}

void TraceRecorder::write(std::ostream &out) const {
    out << "{\"type\":\"group\",\"group\":" << json_string(group_) << ",\"rank\":" << rank_ << ",\"size\":" << size_
        << ",\"global_rank\":" << global_rank() << ",\"backend\":" << json_string(backend_) << ",\"ranks\":[";
    for (int r = 0; r < size_; ++r)
        out << (r ? "," : "") << (global_ranks_.empty() ? r : global_ranks_[static_cast<size_t>(r)]);
    uint64_t last = next_.load(std::memory_order_acquire);
    uint64_t first = last > capacity_ ? last - capacity_ + 1 : 1;
    out << "],\"capacity\":" << capacity_ << ",\"recorded\":" << last << "}\n";
    for (uint64_t id = first; id <= last; ++id) {
        Slot copy;
        {
            Slot &s = slots_[(id - 1) % capacity_];
            SlotLock lk(s.busy);
            if (s.id != id) continue;  // being overwritten right now
            copy.op = s.op;
            copy.thread = s.thread;
            copy.queued_us = s.queued_us;
            copy.ended_us = s.ended_us;
            copy.state = s.state;
            copy.code = s.code;
            copy.error = s.error;
        }
        const OpLabel &l = copy.op.label;
        out << "{\"type\":\"op\",\"group\":" << json_string(group_) << ",\"rank\":" << rank_ << ",\"id\":" << id
            << ",\"seq\":" << copy.op.seq << ",\"op\":" << json_string(copy.op.kind)
            << ",\"dtype\":" << (l.dtype ? json_string(l.dtype) : "null") << ",\"numel\":" << l.numel;
        if (l.form == OpLabel::Form::List || l.form == OpLabel::Form::Ops || l.form == OpLabel::Form::Bytes)
            out << ",\"count\":" << l.n;
        if (l.form == OpLabel::Form::Send || l.form == OpLabel::Form::Recv)
            out << ",\"peer\":" << l.peer << ",\"tag\":" << l.tag;
        if (copy.op.root >= 0) out << ",\"root\":" << copy.op.root;
        if (copy.op.reduce >= 0) out << ",\"reduce\":" << json_string(op_name(static_cast<ReduceOp>(copy.op.reduce)));
        out << ",\"blocking\":" << (copy.op.blocking ? "true" : "false") << ",\"thread\":" << copy.thread
            << ",\"state\":\"" << kStateNames[copy.state] << "\",\"queued_us\":" << copy.queued_us;
        if (copy.ended_us)
            out << ",\"ended_us\":" << copy.ended_us << ",\"duration_us\":" << copy.ended_us - copy.queued_us;
        if (copy.code) out << ",\"code\":" << copy.code << ",\"error\":" << json_string(copy.error);
        out << "}\n";
    }
}

// The rank a trace file is known by: the lowest root-group rank of its groups.
static int lowest_rank(const std::vector<std::shared_ptr<TraceRecorder>> &groups) {
    int rank = -1;
    for (auto &r : groups)
        if (rank < 0 || r->global_rank() < rank) rank = r->global_rank();
    return rank;
}

void TraceRecorder::write_file(const std::string &path, const std::vector<std::shared_ptr<TraceRecorder>> &groups) {
    // Written aside, then renamed: a reader (distc-trace) sees a whole file
    // or none. One dump at a time per process (ranks that are threads of
    // one process fail together, and each dumps).
    static auto *one_at_a_time = new std::mutex();  // outlives static destructors too
    std::lock_guard<std::mutex> lk(*one_at_a_time);
    std::string tmp = path + ".tmp." + std::to_string(::getpid());
    {
        std::ofstream out(tmp, std::ios::trunc);
        if (!out) fail_errno(DISTC_EIO, "cannot write the trace " + tmp, errno);
        out << "{\"type\":\"distc-trace\",\"version\":1,\"host\":" << json_string(host_name())
            << ",\"pid\":" << ::getpid() << ",\"rank\":" << lowest_rank(groups) << ",\"time_us\":" << now_us()
            << ",\"groups\":" << groups.size() << "}\n";
        for (auto &r : groups) r->write(out);
        out.flush();
        if (!out) fail_errno(DISTC_EIO, "cannot write the trace " + tmp, errno);
    }
    if (std::rename(tmp.c_str(), path.c_str()) != 0)
        fail_errno(DISTC_EIO, "cannot rename " + tmp + " to " + path, errno);
}

std::string TraceRecorder::dump_all(const std::string &dir) {
    std::vector<std::shared_ptr<TraceRecorder>> live;
    {
        std::lock_guard<std::mutex> lk(registry_mu());
        for (auto &w : registry())
            if (auto r = w.lock()) live.push_back(std::move(r));
    }
    std::string path = dir + "/distc-trace-rank" + std::to_string(lowest_rank(live)) + "-" + host_name() + "-" +
                       std::to_string(::getpid()) + ".jsonl";
    write_file(path, live);
    return path;
}

void TraceRecorder::dump_on_failure() noexcept {
    const char *dir = std::getenv("DISTC_TRACE_DIR");
    if (!dir || !*dir || dumped_.exchange(true)) return;
    try {
        std::string path = dump_all(dir);
        std::fprintf(stderr, "distc: rank %d wrote its trace to %s\n", global_rank(), path.c_str());
    } catch (const std::exception &e) {
        std::fprintf(stderr, "distc: rank %d could not write its trace: %s\n", global_rank(), e.what());
    }
}

}  // namespace distc

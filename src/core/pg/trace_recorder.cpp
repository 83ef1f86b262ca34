#include "core/pg/trace_recorder.hpp"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <thread>

#include "core/pg/types.hpp"
#include "core/util/env.hpp"
#include "core/util/error.hpp"
#include "core/util/tick_clock.hpp"
#include "support/sigpipe.hpp"
#include "distc/errors.h"

namespace distc {

namespace {

const char *const kStateNames[] = {"", "queued", "started", "completed", "failed", "aborted"};

size_t capacity_from_env() { return static_cast<size_t>(env_int("DISTC_TRACE_BUFFER", 1000, 0, 10000000)); }

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

template <typename T>
T get(const std::atomic<T> &a) {
    return a.load(std::memory_order_acquire);
}
int32_t lo32(uint64_t w) { return static_cast<int32_t>(static_cast<uint32_t>(w)); }
int32_t hi32(uint64_t w) { return static_cast<int32_t>(static_cast<uint32_t>(w >> 32)); }

uint64_t ring_mask(size_t capacity) {
    uint64_t n = 1;
    while (n < capacity) n <<= 1;
    return n - 1;
}

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
    // Or its number; only signals that mean nothing else to a process: a
    // fault's (SEGV ...) would turn a crash into a hang, TERM or INT a stop
    // into a dump.
    char *end = nullptr;
    long n = std::strtol(s.c_str(), &end, 10);
    if (s.empty() || *end) return 0;
    if (n == SIGUSR1 || n == SIGUSR2 || n == SIGHUP || n == SIGPWR) return static_cast<int>(n);
    return n >= SIGRTMIN && n <= SIGRTMAX ? static_cast<int>(n) : 0;
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
        std::fprintf(stderr,
                     "distc: DISTC_TRACE_SIGNAL=%s is not one of USR1, USR2, HUP, PWR or a real-time signal's "
                     "number; no dump on a signal\n",
                     name);
        return;
    }
    if (::pipe2(g_dump_pipe, O_CLOEXEC) != 0) return;
    start_thread([] {
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
    capacity_(std::max<size_t>(1, capacity_from_env())), mask_(ring_mask(capacity_)) {
    coll_.slots.reset(new Slot[mask_ + 1]);
    p2p_.slots.reset(new Slot[mask_ + 1]);
}

std::shared_ptr<TraceRecorder> TraceRecorder::make(std::string group, int rank, int size, std::vector<int> global_ranks,
                                                   std::string backend) {
    if (capacity_from_env() == 0) return nullptr;
    // A function-local static, not std::call_once: that one's thread-local
    // state would take static TLS, which a library loaded late (Python's
    // import after torch's) may not get.
    static const bool signal_started = (start_dump_on_signal(), true);
    // A fork's child is another thread: its records must not carry the parent's id.
    static const bool forks = (pthread_atfork(nullptr, nullptr, [] { t_thread_id = 0; }), true);
    (void)signal_started;
    (void)forks;
    auto r = std::make_shared<TraceRecorder>(std::move(group), rank, size, std::move(global_ranks), std::move(backend));
    std::lock_guard<std::mutex> lk(registry_mu());
    auto &all = registry();
    all.erase(std::remove_if(all.begin(), all.end(), [](const auto &w) { return w.expired(); }), all.end());
    all.push_back(r);
    return r;
}

uint64_t TraceRecorder::thread_id_slow() {
    t_thread_id = static_cast<uint64_t>(::syscall(SYS_gettid));
    return t_thread_id;
}

void TraceRecorder::failed(uint64_t id, int code, const std::string &message) {
    {
        std::lock_guard<std::mutex> lk(errors_mu_);
        errors_[id] = {code, message};
        // Those out of the ring go: the map keeps one ring's worth of each kind.
        for (auto it = errors_.lower_bound(id & kP2p);
             it != errors_.end() && (it->first & kP2p) == (id & kP2p) && (it->first & ~kP2p) + mask_ < (id & ~kP2p);)
            it = errors_.erase(it);
    }
    end(id, code == DISTC_EABORTED ? kAborted : kFailed);
    if (code == DISTC_ETIMEOUT || code == DISTC_EABORTED || code == DISTC_EREMOTE) dump_on_failure();
}

struct TraceRecorder::Record {
    uint64_t id = 0;
    uint64_t after = 0;  // point-to-point: the collectives begun before it
    TraceOp op{};
    int64_t thread = 0, queued_us = 0, ended_us = 0;
    int state = 0;
};

// A consistent copy of entry `index` of `ring`, if it still holds it; a
// writer busy on its slot is waited for a little.
bool TraceRecorder::read(const Ring &ring, uint64_t index, Record &r) const {
    const Slot &s = ring.slots[(index - 1) & mask_];
    for (int attempt = 0; attempt < 1000; ++attempt) {
        uint64_t v = get(s.version);
        if (v == 0 || (v - 1) / 4 != index) return false;
        if (v % 2) {
            std::this_thread::yield();
            continue;
        }
        bool coll = &ring == &coll_;
        r.id = coll ? index : kP2p | index;
        r.op.seq = coll ? index : 0;
        r.op.kind = get(s.kind);
        r.op.label.dtype = get(s.dtype);
        r.op.label.numel = get(s.numel);
        uint64_t extra = get(s.extra), meta = get(s.meta), who = get(s.who);
        r.op.root = coll ? lo32(meta) : -1;
        r.after = coll ? 0 : static_cast<uint32_t>(meta);  // 32 bits: unwrapped by the merge
        r.op.reduce = static_cast<int>((meta >> 32) & 0xff) - 1;
        r.op.label.form = static_cast<OpLabel::Form>((meta >> 40) & 0xff);
        r.op.blocking = (meta >> 48) & 1;
        if (sends(r.op.label.form)) {
            r.op.label.peer = lo32(extra);
            r.op.label.tag = hi32(extra);
        } else {
            r.op.label.n = extra;
        }
        r.thread = static_cast<int64_t>(who & 0xffffff);
        r.state = static_cast<int>((who >> 24) & 0xf);
        r.queued_us = get(s.queued_us);
        r.ended_us = r.state >= kCompleted ? r.queued_us + static_cast<int64_t>(who >> 28) : 0;
        if (s.version.load(std::memory_order_relaxed) == v) return true;
    }
    return false;
}

int TraceRecorder::global_rank() const {
    return global_ranks_.empty() ? rank_ : global_ranks_[static_cast<size_t>(rank_)];
}

void TraceRecorder::write(std::ostream &out) const {
    out << "{\"type\":\"group\",\"group\":" << json_string(group_) << ",\"rank\":" << rank_ << ",\"size\":" << size_
        << ",\"global_rank\":" << global_rank() << ",\"backend\":" << json_string(backend_) << ",\"ranks\":[";
    for (int r = 0; r < size_; ++r)
        out << (r ? "," : "") << (global_ranks_.empty() ? r : global_ranks_[static_cast<size_t>(r)]);
    // Both rings' records, oldest first: a point-to-point operation after
    // the collectives begun before it.
    struct Cursor {
        const Ring &ring;
        uint64_t index, last;
        Record rec;
        bool valid = false;
    };
    uint64_t last_coll = newest(coll_), last_p2p = newest(p2p_);
    auto first = [this](uint64_t last) { return last > capacity_ ? last - capacity_ + 1 : 1; };
    out << "],\"capacity\":" << capacity_ << ",\"recorded\":" << last_coll + last_p2p << "}\n";
    Cursor cursors[] = {{coll_, first(last_coll), last_coll, {}}, {p2p_, first(last_p2p), last_p2p, {}}};
    auto advance = [this](Cursor &c) {
        c.valid = false;
        while (!c.valid && c.index <= c.last) c.valid = read(c.ring, c.index++, c.rec);  // skips one being overwritten
    };
    for (auto &c : cursors) advance(c);
    // `after` kept its low 32 bits: the nearest count at or below the newest collective's.
    auto after = [last_coll](const Record &p) { return last_coll - static_cast<uint32_t>(last_coll - p.after); };
    while (cursors[0].valid || cursors[1].valid) {
        Cursor &c = !cursors[1].valid || (cursors[0].valid && cursors[0].rec.id <= after(cursors[1].rec)) ? cursors[0]
                                                                                                          : cursors[1];
        write_op(out, c.rec);
        advance(c);
    }
}

uint64_t TraceRecorder::newest(const Ring &ring) const {
    if (&ring == &p2p_) return p2p_.last.load(std::memory_order_acquire);
    // Collectives keep no count (their sequence number is their index): the
    // highest version any slot holds names it.
    uint64_t top = 0;
    for (uint64_t i = 0; i <= mask_; ++i) top = std::max(top, get(ring.slots[i].version));
    return top ? (top - 1) / 4 : 0;
}

void TraceRecorder::write_op(std::ostream &out, const Record &copy) const {
    const OpLabel &l = copy.op.label;
    out << "{\"type\":\"op\",\"group\":" << json_string(group_) << ",\"rank\":" << rank_
        << ",\"id\":" << (copy.id & ~kP2p) << ",\"seq\":" << copy.op.seq << ",\"op\":" << json_string(copy.op.kind)
        << ",\"dtype\":" << (l.dtype ? json_string(l.dtype) : "null") << ",\"numel\":" << l.numel;
    if (l.form == OpLabel::Form::List || l.form == OpLabel::Form::Ops || l.form == OpLabel::Form::Bytes)
        out << ",\"count\":" << l.n;
    if (sends(l.form)) out << ",\"peer\":" << l.peer << ",\"tag\":" << l.tag;
    if (copy.op.root >= 0) out << ",\"root\":" << copy.op.root;
    if (copy.op.reduce >= 0) out << ",\"reduce\":" << json_string(op_name(static_cast<ReduceOp>(copy.op.reduce)));
    out << ",\"blocking\":" << (copy.op.blocking ? "true" : "false") << ",\"thread\":" << copy.thread << ",\"state\":\""
        << kStateNames[copy.state] << "\",\"queued_us\":" << copy.queued_us;
    if (copy.ended_us)
        out << ",\"ended_us\":" << copy.ended_us << ",\"duration_us\":" << copy.ended_us - copy.queued_us;
    if (copy.state == kFailed || copy.state == kAborted) {
        std::pair<int, std::string> error{copy.state == kAborted ? DISTC_EABORTED : DISTC_EBACKEND, ""};
        {
            std::lock_guard<std::mutex> lk(errors_mu_);
            auto it = errors_.find(copy.id);
            if (it != errors_.end()) error = it->second;
        }
        out << ",\"code\":" << error.first << ",\"error\":" << json_string(error.second);
    }
    out << "}\n";
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
            << ",\"pid\":" << ::getpid() << ",\"rank\":" << lowest_rank(groups) << ",\"time_us\":" << real_now_us()
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

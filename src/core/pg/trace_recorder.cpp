#include "core/pg/trace_recorder.hpp"

#include <fcntl.h>
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
#include "core/util/error.hpp"
#include "core/util/tick_clock.hpp"
#include "support/sigpipe.hpp"
#include "distc/errors.h"

namespace distc {

namespace {

enum State { kQueued = 1, kStarted, kCompleted, kFailed, kAborted };
const char *const kStateNames[] = {"", "queued", "started", "completed", "failed", "aborted"};

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

template <typename T, typename V>
void put(std::atomic<T> &a, V v) {
    a.store(static_cast<T>(v), std::memory_order_release);
}
template <typename T>
T get(const std::atomic<T> &a) {
    return a.load(std::memory_order_acquire);
}

// Fields packed in pairs, so that a record takes fewer stores.
uint64_t pair32(int32_t lo, int32_t hi) {
    return static_cast<uint32_t>(lo) | static_cast<uint64_t>(static_cast<uint32_t>(hi)) << 32;
}
int32_t lo32(uint64_t w) { return static_cast<int32_t>(static_cast<uint32_t>(w)); }
int32_t hi32(uint64_t w) { return static_cast<int32_t>(static_cast<uint32_t>(w >> 32)); }
uint64_t meta_of(int root, int reduce, OpLabel::Form form, bool blocking, int state) {
    return static_cast<uint32_t>(root) | static_cast<uint64_t>(static_cast<uint8_t>(reduce + 1)) << 32 |
           static_cast<uint64_t>(form) << 40 | static_cast<uint64_t>(blocking) << 48 |
           static_cast<uint64_t>(state) << 56;
}
uint64_t with_state(uint64_t meta, int state) {
    return (meta & ~(uint64_t{0xff} << 56)) | static_cast<uint64_t>(state) << 56;
}

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
    slots_.reset(new Slot[mask_ + 1]);
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

uint64_t TraceRecorder::begin(const char *kind, uint64_t seq, const OpLabel &label, int root, int reduce,
                              bool blocking) {
    uint64_t id = next_.fetch_add(1, std::memory_order_relaxed) + 1;
    Slot &s = slots_[(id - 1) & mask_];
    s.version.store(4 * id + 1, std::memory_order_relaxed);
    put(s.kind, kind);
    put(s.seq, seq);
    put(s.dtype, label.dtype);
    put(s.numel, label.numel);
    put(s.n, label.n);
    put(s.peer_tag, pair32(label.peer, label.tag));
    put(s.meta, meta_of(root, reduce, label.form, blocking, blocking ? kStarted : kQueued));
    put(s.who, pair32(static_cast<int32_t>(thread_id()), 0));
    put(s.queued_us, tick_now_us());
    put(s.ended_us, 0);
    put(s.version, 4 * id + 2);
    return id;
}

void TraceRecorder::finished(uint64_t id, int code, const std::string &message) {
    if (code != 0) return failed(id, code, message);
    Slot &s = slots_[(id - 1) & mask_];
    if (get(s.version) != 4 * id + 2) return;  // overwritten since: the ring has moved on
    s.version.store(4 * id + 3, std::memory_order_relaxed);
    put(s.ended_us, tick_now_us());
    put(s.meta, with_state(s.meta.load(std::memory_order_relaxed), kCompleted));
    put(s.version, 4 * id + 4);
}

void TraceRecorder::failed(uint64_t id, int code, const std::string &message) {
    Slot &s = slots_[(id - 1) & mask_];
    if (get(s.version) != 4 * id + 2) return;
    {
        std::lock_guard<std::mutex> lk(errors_mu_);
        errors_[id] = message;
        while (errors_.begin()->first + mask_ < id) errors_.erase(errors_.begin());  // out of the ring
    }
    s.version.store(4 * id + 3, std::memory_order_relaxed);
    put(s.ended_us, tick_now_us());
    put(s.who, pair32(lo32(s.who.load(std::memory_order_relaxed)), code));
    put(s.meta, with_state(s.meta.load(std::memory_order_relaxed), code == DISTC_EABORTED ? kAborted : kFailed));
    put(s.version, 4 * id + 4);
    if (code == DISTC_ETIMEOUT || code == DISTC_EABORTED || code == DISTC_EREMOTE) dump_on_failure();
}

struct TraceRecorder::Record {
    TraceOp op{};
    int64_t thread = 0, queued_us = 0, ended_us = 0;
    int state = 0, code = 0;
};

// A consistent copy of record `id`, if the ring still holds it; a writer
// busy on its slot is waited for a little.
bool TraceRecorder::read(uint64_t id, Record &r) const {
    const Slot &s = slots_[(id - 1) & mask_];
    for (int attempt = 0; attempt < 1000; ++attempt) {
        uint64_t v = get(s.version);
        if (v == 0 || (v - 1) / 4 != id) return false;
        if (v % 2) {
            std::this_thread::yield();
            continue;
        }
        r.op.kind = get(s.kind);
        r.op.seq = get(s.seq);
        r.op.label.dtype = get(s.dtype);
        r.op.label.numel = get(s.numel);
        r.op.label.n = get(s.n);
        uint64_t pt = get(s.peer_tag), meta = get(s.meta), who = get(s.who);
        r.op.label.peer = lo32(pt);
        r.op.label.tag = hi32(pt);
        r.op.root = lo32(meta);
        r.op.reduce = static_cast<int>((meta >> 32) & 0xff) - 1;
        r.op.label.form = static_cast<OpLabel::Form>((meta >> 40) & 0xff);
        r.op.blocking = (meta >> 48) & 1;
        r.state = static_cast<int>(meta >> 56);
        r.thread = lo32(who);
        r.code = hi32(who);
        r.queued_us = get(s.queued_us);
        r.ended_us = get(s.ended_us);
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
    uint64_t last = next_.load(std::memory_order_acquire);
    uint64_t first = last > capacity_ ? last - capacity_ + 1 : 1;
    out << "],\"capacity\":" << capacity_ << ",\"recorded\":" << last << "}\n";
    for (uint64_t id = first; id <= last; ++id) {
        Record copy;
        if (!read(id, copy)) continue;  // being overwritten right now
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
        if (copy.code) {
            std::string error;
            {
                std::lock_guard<std::mutex> lk(errors_mu_);
                auto it = errors_.find(id);
                if (it != errors_.end()) error = it->second;
            }
            out << ",\"code\":" << copy.code << ",\"error\":" << json_string(error);
        }
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

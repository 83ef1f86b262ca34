#include "backends/host/transport/shm/shm_transport.hpp"

#include <sched.h>

#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "core/util/copy_streaming.hpp"
#include "core/util/debug.hpp"
#include "core/util/env.hpp"
#include "core/util/error.hpp"

namespace distc {

namespace {

// Whether the host's ranks outnumber the cores they share: DISTC_SHM_CORES,
// else those this process may run on.
bool oversubscribed(int local_ranks) {
    if (int64_t n = env_int("DISTC_SHM_CORES", 0, 1, 1 << 20)) return local_ranks > n;
    cpu_set_t cpus;
    int cores = sched_getaffinity(0, sizeof cpus, &cpus) == 0 ? CPU_COUNT(&cpus) : 1;
    return local_ranks > cores;
}

// Looking at the rings costs a few loads: some hundred looks before the
// first yield (a system call) keep a reply that is on its way cheap. Not
// when the host's ranks outnumber the cores: then the peer being waited
// for needs this core, and yielding at once was several times faster.
unsigned polls_for(int local_ranks) {
    // Bounded: a poll is a pause, and polls come before the deadline's check.
    return static_cast<unsigned>(env_int("DISTC_SHM_POLLS", oversubscribed(local_ranks) ? 0 : 256, 0, 1 << 20));
}

}  // namespace

double ShmTransport::kernel_copy_ratio() {
    if (const char *e = std::getenv("DISTC_SHM_KERNEL_COPY"); e && *e) {
        if (std::strcmp(e, "slow") == 0) return kSlowRatio * 2;
        if (std::strcmp(e, "fast") == 0) return 1.0;
        std::fprintf(stderr, "distc: DISTC_SHM_KERNEL_COPY=%s is not fast or slow; it is measured\n", e);
    }
    static const double ratio = [] {
        // Beyond the caches, as the large collectives copy; the fastest of
        // several rounds each. Our own memory serves: the kernel pins and
        // copies it as it would a peer's. The host's other ranks measure at
        // the same time, and a round that overlaps their copies misreads:
        // with 4 rounds, a kernel well past kSlowRatio now and then read
        // below it, and its host chose copies in place that the rings beat
        // several times over (bench/results/shm_kernel_verdict_amd_ab.txt).
        const size_t n = size_t(4) << 20;
        std::vector<uint8_t> a(n, 1), b(n, 2);
        double mem = 1e9, kernel = 1e9;
        for (int r = 0; r < 12; ++r) {
            auto t0 = Clock::now();
            std::memcpy(b.data(), a.data(), n);
            auto t1 = Clock::now();
            iovec local{b.data(), n}, remote{a.data(), n};
            if (::process_vm_readv(::getpid(), &local, 1, &remote, 1, 0) != static_cast<ssize_t>(n)) return 1.0;
            auto t2 = Clock::now();
            mem = std::min(mem, std::chrono::duration<double>(t1 - t0).count());
            kernel = std::min(kernel, std::chrono::duration<double>(t2 - t1).count());
        }
        return kernel / std::max(mem, 1e-9);
    }();
    return ratio;
}

double ShmTransport::line_trip(Millis timeout) {
    // The first two local ranks meet in the segment; the others have no part.
    // The first measures once per process (a group made later says what it
    // found), where each rank has a core of its own (a spinning peer would
    // otherwise wait for this core) and nobody set DISTC_SHM_NONTEMPORAL.
    static std::atomic<double> known{0};
    const int me = links_->me();
    if (me > 1) return 0;
    const auto deadline = Clock::now() + std::min(timeout, kTripWait);
    const char *told = std::getenv("DISTC_SHM_NONTEMPORAL");
    const bool skip =
        known.load() > 0 || oversubscribed(static_cast<int>(ranks_.size())) || (told && *told) || !kNonTemporalStores;
    const double trip = links_->line_trip(1 - me, me == 0, me == 0 && skip, deadline);
    if (me == 0 && trip > 0) known.store(trip);
    return me == 0 ? known.load() : 0;
}

bool ShmTransport::copies_fast(std::vector<double> ratios) {
    if (ratios.empty()) return false;
    std::sort(ratios.begin(), ratios.end());
    return ratios[(ratios.size() - 1) / 2] < kSlowRatio;
}

size_t ShmTransport::single_copy_bytes(bool p2p, bool fast) {
    const size_t dflt = !p2p ? size_t(4) << 20 : fast ? size_t(32) << 10 : size_t(256) << 10;
    return static_cast<size_t>(env_int("DISTC_SHM_CMA_BYTES", static_cast<int64_t>(dflt), 0, INT64_MAX));
}

size_t ShmTransport::ring_bytes(int n) {
    if (int64_t v = env_int("DISTC_SHM_RING_BYTES", 0, 4096, int64_t(1) << 30)) {
        size_t p = 4096;  // the power of two at or below it
        while (p * 2 <= static_cast<size_t>(v)) p *= 2;
        return p;
    }
    size_t pairs = static_cast<size_t>(n) * static_cast<size_t>(n > 1 ? n - 1 : 1);
    size_t p = size_t(1) << 20;
    while (p > (size_t(64) << 10) && p * pairs > (size_t(64) << 20)) p /= 2;
    return p;
}

namespace {

std::vector<pid_t> pids_of(const std::vector<int> &ranks, const Locality &loc) {
    std::vector<pid_t> out;
    for (int r : ranks) out.push_back(loc.pid[static_cast<size_t>(r)]);
    return out;
}

}  // namespace

ShmTransport::ShmTransport(Store &store, int rank, const Locality &loc, Millis timeout, P2pMailbox &box) :
    ranks_(loc.peers_of(rank)), pids_(pids_of(ranks_, loc)), spin_(spin_from_env("DISTC_SHM_SPIN_US", 50)),
    polls_(polls_for(static_cast<int>(ranks_.size()))),
    // Two planes of rings: the collectives', then point-to-point's.
    seg_(store, "shm/" + std::to_string(ranks_[0]) + "/", rank, ranks_, pids_,
         2 * ShmLinks::segment_bytes(static_cast<int>(ranks_.size()), ring_bytes(static_cast<int>(ranks_.size()))),
         timeout, [n = static_cast<int>(ranks_.size())](uint8_t *base) {
             ShmLinks::init(base, n, ring_bytes(n));
             ShmLinks::init(base + ShmLinks::segment_bytes(n, ring_bytes(n)), n, ring_bytes(n));
         }) {
    const int n = static_cast<int>(ranks_.size());
    const int me = static_cast<int>(std::find(ranks_.begin(), ranks_.end(), rank) - ranks_.begin());
    const size_t ring = ring_bytes(n);
    links_ = std::make_unique<ShmLinks>(seg_.base(), me, ring, ranks_, pids_);
    // The collectives' rings are in use from the first call; point-to-point's
    // take memory only as messages touch them.
    links_->populate();
    links_->show_lazily();  // one collective at a time reads them (the exchange)
    x_.name_peers(ranks_);
    auto p2p_links =
        std::make_unique<ShmLinks>(seg_.base() + ShmLinks::segment_bytes(n, ring), me, ring, ranks_, pids_);
    p2p_ = std::make_unique<ShmP2p>(box, std::move(p2p_links), ranks_, me);
}

bool ShmTransport::make_for_group(Store &store, int rank, int size, const Locality &loc, Millis timeout,
                                  P2pMailbox &box, std::unique_ptr<ShmTransport> &out, std::string &why_not) {
    std::unique_ptr<ShmTransport> t;
    // '1' made ('-': alone on its host, no segment), then 'c' when this rank
    // can read the memory of every rank on its host ('n' if not), 'o' or 'd'
    // for whether its host's ranks outnumber its cores, then how much longer
    // than memcpy its kernel takes to copy (kernel_copy_ratio, in hundredths;
    // nothing after 'n': not measured), and from the host's first local rank
    // ";t=" and the cache-line trip in ns (line_trip); '0' and why, if not made.
    std::string mine = "1-";
    if (loc.peers_of(rank).size() > 1) {
        try {
            t = std::make_unique<ShmTransport>(store, rank, loc, timeout, box);
            // Single copy where this rank can read every local peer's memory (a
            // container or ptrace policy may forbid it).
            bool readable = true;
            for (int r : loc.peers_of(rank))
                readable = readable && ShmLinks::can_read(loc.pid[size_t(r)],
                                                          reinterpret_cast<const void *>(loc.probe[size_t(r)]), kProbe);
            mine = readable ? "1c" : "1n";
            mine += oversubscribed(static_cast<int>(loc.peers_of(rank).size())) ? 'o' : 'd';
            if (readable) mine += std::to_string(std::lround(std::min(kernel_copy_ratio(), 1e6) * 100));
            if (const double trip = t->line_trip(timeout); trip > 0) mine += ";t=" + std::to_string(std::lround(trip));
        } catch (const Error &e) {
            mine = std::string("0rank ") + std::to_string(rank) + ": " + e.what();
        }
    }
    store.set("shm/ok/" + std::to_string(rank), ByteView(mine.data(), mine.size()));
    std::vector<std::string> keys;
    for (int r = 0; r < size; ++r) keys.push_back("shm/ok/" + std::to_string(r));
    // How fast the kernel copies, and whether ranks outnumber cores, are
    // the host's verdicts, from what its ranks measured. Ranks measure side
    // by side as they start, and copying at once slows the kernel's copy
    // more than memcpy: a fast kernel can read as slow (seen with 8 ranks
    // on 16 cores, and with 2 on 2), a slow one hardly reads as fast. So
    // the host takes the lower median of its ratios: fast where at least
    // half of its ranks measured fast. The host's ranks see the same
    // numbers, so all choose the same algorithms among themselves; other
    // hosts' ranks do not run those.
    std::vector<bool> here(static_cast<size_t>(size), false);
    for (int r : loc.peers_of(rank)) here[static_cast<size_t>(r)] = true;
    bool single_copy = single_copy_bytes(false) > 0;
    int over_votes = 0, under_votes = 0, r = 0;
    std::vector<double> ratios;
    double trip = 0;
    for (const Bytes &b : store.multi_get(keys, timeout)) {
        if (b.size() < 2 || b[0] != '1') {
            why_not = b.empty() ? "a rank said nothing" : std::string(b.begin() + 1, b.end());
            return false;
        }
        single_copy = single_copy && b[1] != 'n';
        if (!here[static_cast<size_t>(r++)]) continue;
        if (b.size() > 2) ++(b[2] == 'o' ? over_votes : under_votes);
        const std::string rest(b.begin() + std::min<size_t>(b.size(), 3), b.end());
        if (b[1] == 'c' && !rest.empty() && rest[0] != ';') ratios.push_back(std::atof(rest.c_str()) / 100);
        if (size_t at = rest.find(";t="); at != std::string::npos) trip = std::atof(rest.c_str() + at + 3);
    }
    const bool fast = copies_fast(ratios);
    const bool core_each = under_votes >= over_votes;  // the host's ranks do not outnumber its cores
    const bool streams = kNonTemporalStores && env_flag("DISTC_SHM_NONTEMPORAL", trip >= kSlowTripNs && core_each);
    if (t && debug_level() != DebugLevel::Off) {
        std::string copy = single_copy_bytes(false) > 0 ? "single copy off (a rank may not read its peers' memory)"
                                                        : "single copy off (DISTC_SHM_CMA_BYTES=0)";
        if (single_copy) {
            char b[160];
            std::snprintf(b, sizeof b,
                          "single copy on; this rank's kernel copies between processes in %.2f times a memcpy's "
                          "time, and the host takes it as %s",
                          kernel_copy_ratio(), fast ? "fast" : "slow");
            copy = b;
        }
        char lines[120] = "no cache-line trip measured";
        if (trip > 0) std::snprintf(lines, sizeof lines, "a cache line crosses cores in %.0f ns", trip);
        std::fprintf(stderr,
                     "distc: rank %d: shared memory with %zu ranks on its host; %s; ranks %s cores; %s, and the "
                     "rings are written %s\n",
                     rank, loc.peers_of(rank).size(), copy.c_str(), core_each ? "do not outnumber" : "outnumber", lines,
                     streams ? "past the caches (non-temporal stores)" : "through the caches");
    }
    if (t) {
        t->reads_ = single_copy;
        t->cheap_ = fast;
        t->cheap_rounds_ = core_each;
        // A slow kernel copy: the collectives' large pieces go through the
        // rings too, unless DISTC_SHM_CMA_BYTES asks otherwise.
        const char *cma = std::getenv("DISTC_SHM_CMA_BYTES");
        const bool offers = single_copy && (fast || (cma && *cma));
        t->links_->set_single_copy(offers ? single_copy_bytes(false) : 0);
        const size_t stream = streams ? kStreamRunBytes : 0;
        t->links_->set_streaming(stream);
        t->p2p_->set_streaming(stream);
        t->p2p_->set_single_copy(single_copy ? single_copy_bytes(true, fast) : 0);
        // Two ranks that each send the other a message at once copy faster
        // through the rings, where the kernel copies slowly and each has a
        // core (both kernel copies at once slow each other down; one way,
        // in place was as fast or faster): bench/results/shm_p2p_rings_amd.txt.
        t->p2p_->set_inline_exchanges(env_flag("DISTC_SHM_INLINE_EXCHANGES", single_copy && !fast && core_each));
        // A receive may wait long on a peer that is descheduled (more ranks
        // than cores) or still copying; each time its spin runs out, the
        // carrier's thread must take over, which costs more than polling.
        t->p2p_->route(spin_from_env("DISTC_SHM_P2P_SPIN_US", 1000), t->polls_);
    }
    out = std::move(t);
    return true;
}

void ShmTransport::progress(const Call &call, Clock::time_point deadline, FnRef<void(int, int)> on_recv,
                            std::chrono::microseconds patience) {
    try {
        x_.run(*links_, call, deadline, std::max(spin_, patience), polls_, on_recv);
    } catch (...) {
        links_->abandon();  // the caller may free the buffers it offered in place
        throw;
    }
}

void ShmTransport::close() noexcept {
    links_->close();
    links_->abandon();
    p2p_->close();
}

std::string ShmTransport::describe(int peer) const { return links_->name(peer); }

}  // namespace distc

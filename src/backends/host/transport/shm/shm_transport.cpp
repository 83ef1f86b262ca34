#include "backends/host/transport/shm/shm_transport.hpp"

#include <sched.h>

#include <cstdlib>

#include "core/util/error.hpp"

namespace distc {

namespace {

std::chrono::microseconds spin_from_env() {
    const char *e = std::getenv("DISTC_SHM_SPIN_US");
    return std::chrono::microseconds(e && *e ? std::atoll(e) : 50);
}

// Looking at the rings costs a few loads: some hundred looks before the
// first yield (a system call) keep a reply that is on its way cheap. Not
// when the host's ranks outnumber the cores this process may run on: then
// the peer being waited for needs this core, and yielding at once was
// several times faster.
unsigned polls_for(int local_ranks) {
    if (const char *e = std::getenv("DISTC_SHM_POLLS"); e && *e) return static_cast<unsigned>(std::atoi(e));
    cpu_set_t cpus;
    int cores = sched_getaffinity(0, sizeof cpus, &cpus) == 0 ? CPU_COUNT(&cpus) : 1;
    return local_ranks > cores ? 0 : 256;
}

}  // namespace

size_t ShmTransport::single_copy_bytes() {
    const char *e = std::getenv("DISTC_SHM_CMA_BYTES");
    return e && *e ? static_cast<size_t>(std::atoll(e)) : size_t(4) << 20;
}

size_t ShmTransport::ring_bytes(int n) {
    if (const char *e = std::getenv("DISTC_SHM_RING_BYTES"); e && *e) {
        size_t v = static_cast<size_t>(std::atoll(e)), p = 4096;
        while (p * 2 <= v && p < (size_t(1) << 30)) p *= 2;
        return p;
    }
    size_t pairs = static_cast<size_t>(n) * static_cast<size_t>(n > 1 ? n - 1 : 1);
    size_t p = size_t(1) << 20;
    while (p > (size_t(64) << 10) && p * pairs > (size_t(64) << 20)) p /= 2;
    return p;
}

ShmTransport::ShmTransport(Store &store, int rank, int size, const Locality &loc, Millis timeout) :
    pids_(loc.pid), spin_(spin_from_env()), polls_(polls_for(size)),
    seg_(store, rank, loc.peers_of(rank), ShmLinks::segment_bytes(size, ring_bytes(size)), timeout,
         [size](uint8_t *base) { ShmLinks::init(base, size, ring_bytes(size)); }) {
    std::vector<int> ranks(static_cast<size_t>(size));
    for (int r = 0; r < size; ++r) ranks[size_t(r)] = r;
    links_ = std::make_unique<ShmLinks>(seg_.base(), rank, ring_bytes(size), std::move(ranks), pids_);
}

std::unique_ptr<ShmTransport> ShmTransport::try_make(Store &store, int rank, int size, const Locality &loc,
                                                     Millis timeout, std::string &why_not) {
    std::unique_ptr<ShmTransport> t;
    std::string mine = "1";
    try {
        t = std::make_unique<ShmTransport>(store, rank, size, loc, timeout);
        // Single copy where this rank can read every other's memory (a
        // container or ptrace policy may forbid it).
        bool readable = true;
        for (int r = 0; r < size; ++r)
            readable = readable && ShmLinks::can_read(loc.pid[size_t(r)],
                                                      reinterpret_cast<const void *>(loc.probe[size_t(r)]), kProbe);
        mine += readable ? "c" : "n";
    } catch (const Error &e) {
        mine = std::string("0rank ") + std::to_string(rank) + ": " + e.what();
    }
    store.set("shm/ok/" + std::to_string(rank), ByteView(mine.data(), mine.size()));
    std::vector<std::string> keys;
    for (int r = 0; r < size; ++r) keys.push_back("shm/ok/" + std::to_string(r));
    bool single_copy = single_copy_bytes() > 0;
    for (const Bytes &b : store.multi_get(keys, timeout)) {
        if (b.empty() || b[0] != '1') {
            why_not = b.empty() ? "a rank said nothing" : std::string(b.begin() + 1, b.end());
            return nullptr;
        }
        single_copy = single_copy && b.size() > 1 && b[1] == 'c';
    }
    t->single_copy_ = single_copy;
    t->links_->set_single_copy(single_copy ? single_copy_bytes() : 0);
    return t;
}

std::string ShmTransport::describe(int peer) const {
    return "rank " + std::to_string(peer) + " (shm, pid " + std::to_string(pids_[size_t(peer)]) + ")";
}

}  // namespace distc

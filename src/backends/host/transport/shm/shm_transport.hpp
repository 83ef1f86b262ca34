// The shared-memory transport: the ranks of a group that share one host
// (locality.hpp) move collectives through one segment (segment.hpp) of byte
// rings (shm_links.hpp), with the same framing and checks as the TCP mesh
// (exchange.hpp). Its peers are those ranks, indexed in rank order. The
// calling thread moves the bytes, spinning for DISTC_SHM_SPIN_US after its
// last progress before it sleeps on a futex. A second plane of the segment
// (rings and doorbells of its own) carries point-to-point (shm_p2p.hpp),
// whose waiters poll for DISTC_SHM_P2P_SPIN_US (default 1000).
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "backends/host/transport/exchange.hpp"
#include "backends/host/transport/shm/locality.hpp"
#include "backends/host/transport/shm/segment.hpp"
#include "backends/host/transport/shm/shm_links.hpp"
#include "backends/host/transport/shm/shm_p2p.hpp"
#include "backends/host/transport/transport.hpp"
#include "core/store/store.hpp"

namespace distc {

class ShmTransport final : public Transport {
public:
    // `rank`'s transport to the other ranks on its host (loc.peers_of(rank),
    // at least two). Throws when the segment cannot be made; see
    // make_for_group for a group's agreed fallback.
    // Its point-to-point carries `box`'s messages once the group agreed.
    ShmTransport(Store &store, int rank, const Locality &loc, Millis timeout, P2pMailbox &box);
    // Every rank of the group calls it, and each says through the store
    // whether its host's segment was made. True when every one was: then
    // `out` is this rank's transport (null for a rank alone on its host).
    // False on every rank otherwise, with why in `why_not`.
    static bool make_for_group(Store &store, int rank, int size, const Locality &loc, Millis timeout, P2pMailbox &box,
                               std::unique_ptr<ShmTransport> &out, std::string &why_not);
    // Pieces from this size on are copied once, in place (DISTC_SHM_CMA_BYTES;
    // 0: never), where every rank can read the others' memory. Collectives:
    // by default 4 MiB (their large calls copy in place by themselves; below
    // that, the ring's two copies, writer and reader at once, finish sooner,
    // as in place the writer waits for the reader's copy). Point-to-point:
    // 32 KiB, since a send and its receive are often both waiting, and each
    // rank of an exchange then copies once instead of twice (from 64 KiB
    // before: 32-128 KiB exchanges took 0.79-0.95 of that time,
    // bench/results/shm_p2p_single_copy_ab.txt); 256 KiB where the kernel
    // copies slowly (`fast`: copies_fast() of the host's ratios), as below
    // that the ring's two copies finished sooner.
    static size_t single_copy_bytes(bool p2p, bool fast = true);
    // Bytes of each ring: DISTC_SHM_RING_BYTES, else by the number of ranks
    // (1 MiB for up to 8, less beyond, at least 64 KiB); a power of two.
    static size_t ring_bytes(int n);

    const char *name() const override { return "shm"; }
    void send(int peer, const void *p, size_t n, const bool *gate) override { x_.send(peer, p, n, gate); }
    void recv(int peer, void *p, size_t n, int id, const bool *gate) override { x_.recv(peer, p, n, id, gate); }
    void progress(const Call &call, Clock::time_point deadline, FnRef<void(int, int)> on_recv,
                  std::chrono::microseconds patience = {}) override;
    bool reads_peers() const override { return reads_; }
    bool copies_in_place_cheaply() const override { return reads_ && cheap_; }
    // Not where the host's ranks outnumber the cores (most of them say so):
    // a round then waits for peers to be scheduled.
    bool cheap_rounds() const override { return cheap_rounds_; }
    // How many times a memcpy's time this process's kernel takes to copy
    // between processes: measured once per process (4 MiB, process_vm_readv
    // against memcpy), unless DISTC_SHM_KERNEL_COPY (fast, slow) says. Where
    // the host finds it kSlowRatio or more (make_for_group), the collectives
    // in which every rank copies go through the rings, and so do their large
    // pieces; broadcast, gather, scatter and point-to-point, where one side
    // would wait idle, still copy once.
    static double kernel_copy_ratio();
    static constexpr double kSlowRatio = 2;
    // A host's verdict from its ranks' kernel_copy_ratio: fast where the
    // lower median is below kSlowRatio (at least half of them measured fast).
    static bool copies_fast(std::vector<double> ratios);
    // Where a cache line takes kSlowTripNs or more to cross from one
    // rank's core to another's (line_trip), and each rank has a core of its
    // own, a rank writes runs of kStreamRunBytes or more into the rings
    // with non-temporal stores (DISTC_SHM_NONTEMPORAL=1 or 0 says instead):
    // its stores then fetch no line back from the reader first, and the
    // reader takes them from memory instead of from the writer's cache. On
    // the VM where the trip took about 300 ns, the collectives and messages
    // that go through the rings took 0.80-0.99 of their time at 64 KiB-4
    // MiB (bench/results/shm_nontemporal_ab.txt), and in its fast state
    // (about 75 ns) 1.1-2.9 times as long: a group keeps the choice it made
    // as it started, even where a VM's cores move later. The readers need
    // not agree: the bytes are the same.
    static constexpr double kSlowTripNs = 200;
    static constexpr size_t kStreamRunBytes = size_t(16) << 10;
    // Waits this long at most for the other rank of the trip.
    static constexpr Millis kTripWait{100};
    void read_peer(int peer, uint64_t addr, void *to, size_t n) override { links_->read_from(peer, addr, to, n); }
    void write_peer(int peer, uint64_t addr, const void *from, size_t n) override {
        links_->write_to(peer, addr, from, n);
    }
    void attach_peer(int peer, const PeerBuffer &b) override { links_->attach(peer, b); }
    bool read_peer_directly(int peer, uint64_t addr, size_t n, FnRef<void(const uint8_t *)> use) override {
        return links_->read_directly(peer, addr, n, use);
    }
    void close() noexcept override;
    std::string describe(int peer) const override;

private:
    // The trip, in ns, for the host's first local rank (the first time in
    // this process: measured with the second; later: what it found then);
    // 0 for the others, or where nothing was measured.
    double line_trip(Millis timeout);

    std::vector<int> ranks_;  // by peer index: the group rank
    std::vector<pid_t> pids_;
    std::chrono::microseconds spin_;
    unsigned polls_;  // looks at the rings before the first yield (DISTC_SHM_POLLS; 0 when oversubscribed)
    Segment seg_;
    std::unique_ptr<ShmLinks> links_;
    Exchange x_;
    std::unique_ptr<ShmP2p> p2p_;
    bool reads_ = false, cheap_ = false;  // every local rank can read the others' memory; and the kernel copies fast
    bool cheap_rounds_ = false;           // the host's ranks do not outnumber the cores (agreed, as the above)
};

}  // namespace distc

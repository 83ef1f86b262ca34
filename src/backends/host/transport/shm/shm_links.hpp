// The shared-memory transport's links for the exchange (exchange.hpp): in one
// segment, a single-producer single-consumer byte ring for each ordered pair
// of ranks, and for each rank a doorbell it sleeps on. The fast path makes
// no system call: a writer copies into the ring and publishes the new head,
// a reader copies out and publishes the tail. A rank that finds nothing to
// do sleeps on its doorbell (a futex in the segment), and whoever moves a
// ring it waits on rings it, only when it sleeps. Sleeps come in slices, so
// a peer that died (its pidfd says so) or closed its end is noticed.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "backends/host/transport/exchange.hpp"
#include "core/util/socket.hpp"

namespace distc {

class ShmLinks final : public Links {
public:
    // The segment's size for `n` local ranks with rings of `ring_bytes` (a power of two).
    static size_t segment_bytes(int n, size_t ring_bytes);
    // `base`: the mapped segment (zeroed by its creator, set up by the local
    // rank `me` == 0 before anyone else uses it: the creator calls init()
    // first); `ranks`: the group rank of each local rank; `pids`: their processes.
    ShmLinks(uint8_t *base, int me, size_t ring_bytes, std::vector<int> ranks, const std::vector<pid_t> &pids);
    static void init(uint8_t *base, int n, size_t ring_bytes);

    // Peers are local ranks (0 .. n-1), not group ranks.
    size_t write(int peer, const iovec *iov, int n) override;
    size_t read(int peer, const iovec *iov, int n) override;
    void wait(const std::vector<Want> &wants, Clock::time_point deadline) override;

    // Marks this rank's end closed and wakes every rank, this one's waiter too:
    // peers fail at once, and a wait here returns and throws. Any thread.
    void close() noexcept;

private:
    struct alignas(64) Bell {
        std::atomic<uint32_t> seq;       // the futex word
        std::atomic<uint32_t> sleeping;  // its owner sleeps (or is about to)
        std::atomic<uint32_t> closed;    // its owner closed its end
        int32_t pad[13];
    };
    struct alignas(64) Ring {
        std::atomic<uint64_t> head;  // bytes ever written (the producer's)
        char pad0[56];
        std::atomic<uint64_t> tail;  // bytes ever read (the consumer's)
        char pad1[56];
    };
    Ring &ring(int from, int to) const { return rings_[from * n_ + to]; }
    uint8_t *data(int from, int to) const { return data_ + static_cast<size_t>(from * n_ + to) * cap_; }
    void ring_bell(int who);
    bool ready(const Want &w) const;
    [[noreturn]] void peer_gone(int peer, bool died) const;
    void check_self() const;
    void check_alive(const std::vector<Want> &wants) const;
    std::string name(int peer) const;

    int n_, me_;
    size_t cap_;
    Bell *bells_;
    Ring *rings_;
    uint8_t *data_;
    std::vector<int> ranks_;
    std::vector<pid_t> pids_;
    std::vector<Fd> pidfds_;  // by local rank, for peers in other processes
    std::atomic<bool> closed_{false};
};

}  // namespace distc

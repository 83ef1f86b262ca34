// What the host backend's algorithms (algorithms.hpp) move their messages
// over: one group's links to its peers. A transport connects through the
// group's store when it is made; then each collective posts its segment
// sends and receives and calls progress() once, which moves them all (from
// the calling thread) and checks that every message belongs to the same call.
// The TCP mesh (tcp/) is one; the shared-memory transport plugs in here too.
//
// Point-to-point (P2pTransport) is the other face of a transport: messages
// matched by peer and tag, posted in the caller's order and waited for later.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/pg/async_backend.hpp"
#include "core/pg/call.hpp"
#include "core/pg/tensor.hpp"
#include "core/util/clock.hpp"
#include "core/util/error.hpp"
#include "core/util/fn_ref.hpp"

namespace distc {

// Where a rank's buffer lies, as a peer that reads or writes it in place
// needs to know: its address, and the shared-memory region that holds it
// where the caller allocated it with distc_mem_alloc (core/util/
// shared_memory.hpp), which a peer on the same host may map to reach it
// with loads and stores. Sent between ranks as it is.
struct PeerBuffer {
    uint64_t addr = 0;
    uint64_t region = 0;       // the region's id; 0: none
    uint64_t region_base = 0;  // the region's first byte, in the owner's process
    int64_t region_fd = -1;    // the owner's file descriptor of it
    // Not in shared memory, but mostly on huge pages, which the kernel
    // copies fast; said only where the ranks ask whether every buffer is
    // fast to reach (Algorithms::in_place_shared, all-to-all's probes).
    uint64_t huge = 0;
};
// `n` bytes at `p`, as this rank describes them to its peers.
PeerBuffer peer_buffer(const void *p, size_t n);

class Transport {
public:
    virtual ~Transport() = default;
    virtual const char *name() const = 0;  // "tcp"

    // Queues a message of this call; per peer, messages move in the order they
    // were queued. A gated message does not start until *gate is true, which
    // the on_recv callback of a receive of the same call must set.
    virtual void send(int peer, const void *p, size_t n, const bool *gate = nullptr) = 0;
    // `id` is handed to on_recv when the message is complete.
    virtual void recv(int peer, void *p, size_t n, int id = -1, const bool *gate = nullptr) = 0;
    // Moves every queued message, then forgets them. Throws DISTC_EINVAL when
    // a peer runs another call (both named), DISTC_EPROTO when one is out of
    // step, DISTC_EREMOTE when a link breaks, DISTC_ETIMEOUT at `deadline`.
    // `patience`: how long peers may take to get here for a known reason (a
    // large copy of their own), during which a waiting rank spins rather
    // than sleeps (waking from a sleep costs more than the spin).
    virtual void progress(const Call &call, Clock::time_point deadline, FnRef<void(int peer, int id)> on_recv,
                          std::chrono::microseconds patience = {}) = 0;
    // Whether read_peer and write_peer work: peers' buffers can be read and
    // written where they are (shared memory with single copy), so the
    // algorithms may copy straight from and to them instead of sending
    // messages through the links.
    virtual bool reads_peers() const { return false; }
    // Whether a rank's reading its peers' buffers in place beats their going
    // through the links where every rank copies anyway (allreduce, reduce,
    // reduce_scatter, allgather, all-to-all): one copy by the kernel against
    // two in user space. Not where the kernel's copy is slow.
    virtual bool copies_in_place_cheaply() const { return reads_peers(); }
    // Whether a round of messages costs little next to the bytes it moves (a
    // cache line's trip through shared memory, not system calls and wakeups
    // as over sockets): reductions of more than two ranks then leave the
    // one-round direct path for reduce-scatter and allgather at smaller sizes.
    virtual bool cheap_rounds() const { return false; }
    // Copies `n` bytes at `addr` in `peer`'s address space to `to`. The peer
    // must keep that buffer until this rank says (by a message) it is done.
    // Throws DISTC_EREMOTE when the peer died or the read fails.
    virtual void read_peer(int, uint64_t, void *, size_t) {
        fail(DISTC_EINTERNAL, std::string(name()) + " cannot read peers' memory");
    }
    // Copies `n` bytes from `from` to `addr` in `peer`'s address space, under
    // the same terms (where reads_peers()).
    virtual void write_peer(int, uint64_t, const void *, size_t) {
        fail(DISTC_EINTERNAL, std::string(name()) + " cannot write peers' memory");
    }
    // A peer published `b` (the buffer read_peer and write_peer reach until
    // the next call names another): the transport may map its region, so
    // that they copy with memcpy instead of through the kernel.
    virtual void attach_peer(int, const PeerBuffer &) {}
    // Where `peer`'s bytes [addr, addr + n) can be read with loads (a rank of
    // this process, or a region attach_peer mapped), calls use() with them,
    // on the terms of read_peer, and returns true; false otherwise. n is at
    // most a few hundred KiB (a cache-sized block).
    virtual bool read_peer_directly(int, uint64_t, size_t, FnRef<void(const uint8_t *)>) { return false; }
    // Breaks every link so that peers fail at once; any thread, any time.
    virtual void close() noexcept = 0;
    // "rank 3 at 10.0.0.2:40123 (tcp)", for messages.
    virtual std::string describe(int peer) const = 0;
};

// A posted send or receive. wait() returns the peer rank once it completed,
// or throws (timeout, failure, abort); a wait that throws, or destroying it
// unwaited, withdraws it: its buffer is never touched afterwards.
class PendingP2p {
public:
    virtual ~PendingP2p() = default;
    virtual int wait(Millis timeout) = 0;
};

class P2pTransport {
public:
    virtual ~P2pTransport() = default;
    // Messages with one peer and tag are matched in the order they were posted.
    virtual std::unique_ptr<PendingP2p> post_send(const Tensor &tensor, int dst, uint32_t tag) = 0;
    // src < 0: any source.
    virtual std::unique_ptr<PendingP2p> post_recv(Tensor &tensor, int src, uint32_t tag) = 0;
    // A blocking batch: posts every operation in order, then waits for all
    // of them within `timeout`; returns what the last one's wait returned.
    // Where a post or a wait fails, what did not complete is withdrawn (its
    // buffer never touched again), and it throws.
    virtual int post_wait(Span<AsyncBackend::P2p> ops, Millis timeout);
};

// A spin's length in microseconds from environment variable `name`, else `dflt`.
std::chrono::microseconds spin_from_env(const char *name, long long dflt);

// Posts `ops` on `t`, in order, for a wait later (wait_all).
std::vector<std::unique_ptr<PendingP2p>> post_all(P2pTransport &t, Span<AsyncBackend::P2p> ops);
// Waits for every posted operation within one `timeout` (each gets what is
// left of it): what the last one's wait returned.
int wait_all(const std::vector<std::unique_ptr<PendingP2p>> &posted, Millis timeout);

}  // namespace distc

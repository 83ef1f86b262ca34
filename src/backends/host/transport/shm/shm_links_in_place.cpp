// ShmLinks' copies straight between processes (single copy): a reader takes
// a writer's offer in place (read_in_place), the collectives read and write
// peers' buffers where they are (read_from, write_to), and a writer moves or
// withdraws what it offered (relocate, abandon). Between processes the kernel
// copies (process_vm_readv/writev); between ranks of one process, and into
// and out of peers' shared memory mapped here (PeerMemory), memcpy.
#include <sched.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "backends/host/transport/shm/shm_links.hpp"
#include "core/util/error.hpp"
#include "core/util/shared_memory.hpp"

namespace distc {

namespace {

// Reads and writes of a peer's buffer go a piece of this size at a time, each
// after a look whether the peer closed its end, so that its close() waits for
// one piece at most (kPokeWait in shm_links.cpp). Each piece is a system call
// that looks up the peer and its memory map: fewer of them took less time
// for large broadcasts and gathers (bench/results/shm_poke_pieces_ab.txt).
constexpr size_t kPokeBytes = size_t(8) << 20;

}  // namespace

size_t ShmLinks::read_in_place(int peer, const iovec *iov, int n, size_t k, uint64_t off) {
    // The offer stays where it is while this rank copies from it (kReading).
    Ring &r = ring(peer, me_);
    uint32_t st = r.offer.load(std::memory_order_acquire);
    while (st == kOffered || st == kTaken)
        if (r.offer.compare_exchange_weak(st, kReading, std::memory_order_acquire)) break;
    if (st != kOffered && st != kTaken) {
        if (st == kMoving || st == kInline) return 0;  // the writer moves it, or sends it inline: look again
        fail(DISTC_EREMOTE, name(peer) + " withdrew the bytes it offered in place (it gave up on the message)");
    }
    struct Done {  // begun, however this copy ends: the writer may no longer send it inline
        std::atomic<uint32_t> &offer;
        ~Done() { offer.store(kTaken, std::memory_order_release); }
    } done{r.offer};
    const uint64_t addr = r.offer_addr.load(std::memory_order_relaxed);
    attach(peer, PeerBuffer{addr, r.offer_region.load(std::memory_order_relaxed),
                            r.offer_base.load(std::memory_order_relaxed), r.offer_fd.load(std::memory_order_relaxed)});
    return copy_from(peer, addr + off, iov, n, k);
}

void ShmLinks::note_offer(Ring &r, uint64_t addr, size_t n) {
    const SharedRegion s = shared_region_of(reinterpret_cast<const void *>(addr), n);
    r.offer_addr.store(addr, std::memory_order_relaxed);
    r.offer_region.store(s.id, std::memory_order_relaxed);
    r.offer_base.store(s.base, std::memory_order_relaxed);
    r.offer_fd.store(s.fd, std::memory_order_relaxed);
}

size_t ShmLinks::copy_from(int peer, uint64_t from, const iovec *iov, int n, size_t k) {
    if (const uint8_t *p = local(peer, from, k)) {  // a rank in this process, or memory mapped here
        size_t left = k;
        for (int i = 0; i < n && left; ++i) {
            size_t len = std::min(iov[i].iov_len, left);
            std::memcpy(iov[i].iov_base, p, len);
            p += len;
            left -= len;
        }
        return k;
    }
    iovec local[4];
    int m = 0;
    for (size_t left = k; m < n && m < 4 && left; ++m) {
        local[m] = {iov[m].iov_base, std::min(iov[m].iov_len, left)};
        left -= local[m].iov_len;
    }
    iovec remote{reinterpret_cast<void *>(from), k};
    for (;;) {
        ssize_t got = ::process_vm_readv(pids_[size_t(peer)], local, static_cast<unsigned long>(m), &remote, 1, 0);
        if (got > 0) return static_cast<size_t>(got);
        if (got < 0 && errno == EINTR) continue;
        if (got < 0 && errno == ESRCH) peer_gone(peer, true);
        fail_errno(DISTC_EREMOTE, "reading " + name(peer) + "'s buffer in place (process_vm_readv)",
                   got < 0 ? errno : EFAULT);
    }
}

template <typename Piece>
void ShmLinks::touch(int peer, size_t n, Piece &&piece) {
    // A Dekker pair with settle(): we say we touch the peer's memory, then
    // look whether it closed; it says it closed, then waits while we touch.
    std::atomic<uint32_t> &poking = ring(me_, peer).poking;
    struct Done {
        std::atomic<uint32_t> &w;
        ~Done() { w.store(0, std::memory_order_release); }
    };
    try {
        for (size_t off = 0; off < n;) {
            poking.store(1, std::memory_order_seq_cst);
            Done done{poking};
            if (bells_[peer].closed.load(std::memory_order_seq_cst)) peer_gone(peer, false);
            off += piece(off, std::min(n - off, kPokeBytes));
        }
    } catch (...) {
        // Should another thread have closed this end meanwhile (an abort),
        // our caller's buffers go back to it only once no peer copies from
        // or into them (else its failure closes this end, and close() waits).
        if (closed_.load(std::memory_order_seq_cst)) settle();
        throw;
    }
}

void ShmLinks::write_to(int peer, uint64_t addr, const void *from, size_t n) {
    auto *src = static_cast<const uint8_t *>(from);
    uint8_t *here = local(peer, addr, n);  // a rank in this process, or memory mapped here
    touch(peer, n, [&](size_t off, size_t k) -> size_t {
        if (here) {
            std::memcpy(here + off, src + off, k);
            return k;
        }
        // The kernel may copy less than asked (a page it could not pin).
        iovec local{const_cast<uint8_t *>(src + off), k}, remote{reinterpret_cast<void *>(addr + off), k};
        ssize_t got = ::process_vm_writev(pids_[size_t(peer)], &local, 1, &remote, 1, 0);
        if (got < 0 && errno == EINTR) return 0;
        if (got < 0 && errno == ESRCH) peer_gone(peer, true);
        if (got <= 0)
            fail_errno(DISTC_EREMOTE, "writing into " + name(peer) + "'s buffer in place (process_vm_writev)",
                       got < 0 ? errno : EFAULT);
        return static_cast<size_t>(got);
    });
}

void ShmLinks::read_from(int peer, uint64_t addr, void *to, size_t n) {
    auto *dst = static_cast<uint8_t *>(to);
    touch(peer, n, [&](size_t off, size_t k) -> size_t {
        iovec v{dst + off, k};
        return copy_from(peer, addr + off, &v, 1, k);  // perhaps less than asked (a page it could not pin)
    });
}

bool ShmLinks::read_directly(int peer, uint64_t addr, size_t n, FnRef<void(const uint8_t *)> use) {
    const uint8_t *at = local(peer, addr, n);
    if (!at) return false;
    touch(peer, n, [&](size_t, size_t) -> size_t {
        use(at);  // all n at once, under one look whether the peer closed
        return n;
    });
    return true;
}

bool ShmLinks::can_read(pid_t pid, const void *addr, uint64_t expect) {
    if (pid == ::getpid()) return true;
    uint64_t got = 0;
    iovec local{&got, sizeof got}, remote{const_cast<void *>(addr), sizeof got};
    return ::process_vm_readv(pid, &local, 1, &remote, 1, 0) == static_cast<ssize_t>(sizeof got) && got == expect;
}

uint32_t ShmLinks::take_offer(int peer, uint32_t to) noexcept {
    Ring &r = ring(me_, peer);
    for (;;) {
        uint32_t st = r.offer.load(std::memory_order_acquire);
        if ((st == kOffered || st == kTaken) && r.offer.compare_exchange_weak(st, to, std::memory_order_acquire))
            return st;
        if (st != kReading && st != kOffered && st != kTaken) return kNoOffer;  // read, or withdrawn
        // A copy in progress ends soon, unless its reader died mid-copy.
        if (st == kReading && !alive(peer)) {
            r.offer.store(to, std::memory_order_release);
            return kTaken;
        }
        if (st == kReading) sched_yield();
    }
}

void ShmLinks::relocate(int peer, const uint8_t *from, size_t n, const uint8_t *to) {
    Out &o = out_[size_t(peer)];
    auto a = reinterpret_cast<const uint8_t *>(o.addr);
    if (!o.pending.load(std::memory_order_relaxed) || a < from || a >= from + n) return;
    uint32_t was = take_offer(peer, kMoving);
    if (was == kNoOffer) return;
    o.addr = reinterpret_cast<uint64_t>(to + (a - from));
    Ring &r = ring(me_, peer);
    note_offer(r, o.addr, o.len);
    r.offer.store(was, std::memory_order_release);
}

void ShmLinks::abandon() noexcept {
    for (int p = 0; p < n_; ++p)
        if (p != me_ && out_[size_t(p)].pending.load(std::memory_order_relaxed)) take_offer(p, kWithdrawn);
}

}  // namespace distc

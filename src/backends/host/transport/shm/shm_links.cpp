#include "backends/host/transport/shm/shm_links.hpp"

#include <linux/futex.h>
#include <linux/membarrier.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>

#include "core/util/copy_streaming.hpp"
#include "core/util/env.hpp"
#include "core/util/error.hpp"

namespace distc {

namespace {

constexpr uint64_t kMagic = 0x64697374632d7335ULL;  // "distc-s5": stamped chunks, the trip's lines
// The header's line, then line_trip()'s two.
constexpr size_t kHeader = 3 * 64;
constexpr uint64_t kLine = 64;
#ifdef MADV_POPULATE_WRITE
constexpr int kPopulateWrite = MADV_POPULATE_WRITE;
#else
constexpr int kPopulateWrite = 23;  // Linux 5.14
#endif
// Sleeps last at most this long, to look at the peers' processes in between.
constexpr Millis kSlice{50};
// close() waits at most this long for a piece of a peer's buffer under way
// (shm_links_in_place.cpp; longer only for a peer stopped mid-piece).
constexpr Millis kPokeWait{1000};

struct Header {
    uint64_t magic;
    uint32_t n;
    uint32_t pad;
    uint64_t ring_bytes;
    uint64_t salt;  // mixed into chunks' stamps
};

long futex(std::atomic<uint32_t> *word, int op, uint32_t val, const timespec *ts) {
    // Shared (not FUTEX_PRIVATE): the word is in a segment other processes map.
    return ::syscall(SYS_futex, reinterpret_cast<uint32_t *>(word), op, val, ts, nullptr, 0);
}

long membarrier(int cmd) { return ::syscall(SYS_membarrier, cmd, 0, 0); }

// Whether this process is registered for global expedited membarriers:
// then its sleepers fence for their movers. Registered again for every
// group (it costs one system call, and a child forked after an earlier
// group must not count on its parent's registration).
bool asymmetric_fences() {
    static const bool can = [] {
        if (!env_flag("DISTC_SHM_MEMBARRIER", true)) return false;
        long cmds = membarrier(MEMBARRIER_CMD_QUERY);
        const long need = MEMBARRIER_CMD_GLOBAL_EXPEDITED | MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED;
        return cmds >= 0 && (cmds & need) == need;
    }();
    return can && membarrier(MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED) == 0;
}

int pidfd_open(pid_t pid) {
#ifdef SYS_pidfd_open
    return static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
#else
    (void)pid;
    errno = ENOSYS;
    return -1;
#endif
}

size_t total(const iovec *iov, int n) {
    size_t t = 0;
    for (int i = 0; i < n; ++i) t += iov[i].iov_len;
    return t;
}

// Copies between the iovecs and a ring's bytes at `pos`..`pos + k`
// (wrapping); into the ring, runs of at least `stream` bytes (0: none)
// through non-temporal stores.
template <bool kIn>
void copy(uint8_t *ring, size_t cap, uint64_t pos, const iovec *iov, int n, size_t k, size_t stream = 0) {
    for (int i = 0; i < n && k; ++i) {
        auto *p = static_cast<uint8_t *>(iov[i].iov_base);
        size_t len = std::min(iov[i].iov_len, k);
        k -= len;
        while (len) {
            size_t at = static_cast<size_t>(pos & (cap - 1)), run = std::min(len, cap - at);
            if (kIn && stream && run >= stream)
                copy_nontemporal(ring + at, p, run);
            else if (kIn)
                std::memcpy(ring + at, p, run);
            else
                std::memcpy(p, ring + at, run);
            p += run;
            pos += run;
            len -= run;
        }
    }
}

}  // namespace

size_t ShmLinks::segment_bytes(int n, size_t ring_bytes) {
    size_t nn = static_cast<size_t>(n) * static_cast<size_t>(n);
    return kHeader + static_cast<size_t>(n) * sizeof(Bell) + nn * sizeof(Ring) + nn * ring_bytes;
}

void ShmLinks::init(uint8_t *base, int n, size_t ring_bytes) {
    // The memfd starts zeroed: every counter and flag is 0 already.
    uint64_t salt = 0;
    while (::getrandom(&salt, sizeof salt, 0) != static_cast<ssize_t>(sizeof salt))
        if (errno != EINTR) fail_errno(DISTC_EINTERNAL, "getrandom for the shared memory segment", errno);
    Header h{kMagic, static_cast<uint32_t>(n), 0, ring_bytes, salt};
    std::memcpy(base, &h, sizeof h);
}

ShmLinks::ShmLinks(uint8_t *base, int me, size_t ring_bytes, std::vector<int> ranks, const std::vector<pid_t> &pids) :
    n_(static_cast<int>(ranks.size())), me_(me), cap_(ring_bytes), ranks_(std::move(ranks)), pids_(pids),
    self_(::getpid()), pidfds_(ranks_.size()), mem_(pids_), out_(ranks_.size()), in_(ranks_.size()),
    light_(asymmetric_fences()) {
    Header h;
    std::memcpy(&h, base, sizeof h);
    if (h.magic != kMagic || h.n != static_cast<uint32_t>(n_) || h.ring_bytes != ring_bytes)
        fail(DISTC_EPROTO, "the shared memory segment is not laid out as this rank expects");
    salt_ = h.salt;
    trip_ = reinterpret_cast<std::atomic<uint64_t> *>(base + 64);
    bells_ = reinterpret_cast<Bell *>(base + kHeader);
    rings_ = reinterpret_cast<Ring *>(base + kHeader + static_cast<size_t>(n_) * sizeof(Bell));
    data_ = reinterpret_cast<uint8_t *>(rings_ + static_cast<size_t>(n_) * static_cast<size_t>(n_));
    for (int p = 0; p < n_; ++p)
        if (p != me_ && !same_process(p)) pidfds_[size_t(p)] = Fd(pidfd_open(pids_[size_t(p)]));
    bells_[me_].light.store(light_ ? 1 : 0, std::memory_order_release);
}

std::string ShmLinks::name(int peer) const {
    return "rank " + std::to_string(ranks_[size_t(peer)]) + " (shm, pid " + std::to_string(pids_[size_t(peer)]) + ")";
}

void ShmLinks::advance(std::atomic<uint64_t> &at, uint64_t to, int peer) {
    // Either `peer`, about to sleep, sees this store, or we see it sleeping
    // and wake it. A peer that takes the fence for both of us (its membarrier
    // drains our store before it looks) spares us ours; the compiler must
    // still keep our load after the store.
    if (light_ && bells_[peer].light.load(std::memory_order_relaxed)) {
        at.store(to, std::memory_order_release);
        std::atomic_signal_fence(std::memory_order_seq_cst);
    } else {
        at.store(to, std::memory_order_seq_cst);
    }
    ring_bell(peer);
}

void ShmLinks::ring_bell(int who) {
    Bell &b = bells_[who];
    // After advance()'s store, which pairs with wait()'s store of `sleeping`
    // and its loads.
    if (!b.sleeping.load(std::memory_order_seq_cst)) return;
    // One wake per sleep: with more ranks than cores, a woken rank may wait
    // long for a core, and a reader freeing room for it made a system call
    // per message meanwhile. We look at seq with a read-modify-write, a
    // fence (advance() may have skipped its own): a sleeper that takes its
    // next value after it sees our store, so it need not be woken.
    const uint32_t at = b.seq.fetch_add(0, std::memory_order_seq_cst);
    if (b.woke.load(std::memory_order_acquire) == at) return;
    // A mover stopped between the two steps leaves woke behind: the next wakes it.
    uint32_t now = b.seq.fetch_add(1, std::memory_order_seq_cst) + 1;
    futex(&b.seq, FUTEX_WAKE, INT_MAX, nullptr);
    b.woke.store(now, std::memory_order_release);
}

void ShmLinks::check_self() const {
    if (closed_.load(std::memory_order_relaxed)) closed_here();
}

void ShmLinks::closed_here() const {
    // Another thread closed this end (an abort) and may still wait for a
    // peer's copy from or into our buffers: so does this one, before its caller
    // gets the buffers back.
    settle();
    fail(DISTC_EREMOTE, "this rank closed its shared memory links");
}

void ShmLinks::settle() const noexcept {
    for (int p = 0; p < n_; ++p) {
        if (p == me_) continue;
        const auto until = Clock::now() + kPokeWait;
        while (ring(p, me_).poking.load(std::memory_order_seq_cst) && Clock::now() < until && alive(p)) sched_yield();
    }
}

void ShmLinks::peer_gone(int peer, bool died) const {
    fail(DISTC_EREMOTE, name(peer) + (died ? " died" : " closed its shared memory links") +
                            " (it gave up on the group after a failure there, or died)");
}

size_t ShmLinks::write(int peer, const iovec *iov, int n, bool may_offer) {
    check_self();
    Ring &r = ring(me_, peer);
    Out &o = out_[size_t(peer)];
    // An offer the reader moved past is done, even where the reader closed
    // its end since (it got the message, then freed its group).
    if (o.pending.load(std::memory_order_relaxed) &&
        r.tail.load(std::memory_order_acquire) >= o.until.load(std::memory_order_relaxed)) {
        o.pending.store(false, std::memory_order_relaxed);
        return o.len;
    }
    if (bells_[peer].closed.load(std::memory_order_acquire)) peer_gone(peer, false);
    if (r.stopped.load(std::memory_order_acquire))
        fail(DISTC_EREMOTE, name(peer) + " stopped reading what this rank sends it (it failed on a message)");
    if (o.pending.load(std::memory_order_relaxed)) {  // done once the reader moved past it (above)
        if (inline_after_.count() == 0 || Clock::now() - o.offered < inline_wait(o.len)) return 0;
        uint32_t st = kOffered;
        if (!r.offer.compare_exchange_strong(st, kInline, std::memory_order_acq_rel)) return 0;  // being read
        // Nobody copied it yet: its bytes follow inline (the reader skips the offer).
        o.pending.store(false, std::memory_order_relaxed);
        o.inline_left = o.len;
        o.reoffer = o.until.load(std::memory_order_relaxed);
    }
    const uint64_t h = r.head.load(std::memory_order_relaxed);
    // The reader's tail as last seen here, looked at again only where that
    // is too old to say: before the reader passed the last offer that went
    // inline, or where the ring looks too full for what comes.
    if (o.tail < o.reoffer) o.tail = r.tail.load(std::memory_order_acquire);
    // A new offer waits until the reader passed the last one that went inline.
    const bool offers = may_offer && cma_min_ && o.inline_left == 0 && o.tail >= o.reoffer;
    const bool offer = offers && iov[0].iov_len >= cma_min_;
    // Inline: what fits, up to the next piece that goes in place.
    int m = 0;
    size_t k = 0;
    if (!offer)
        for (; m < n && !(offers && m > 0 && iov[m].iov_len >= cma_min_); ++m) k += iov[m].iov_len;
    if (cap_ - (h - o.tail) < chunk_end(h, k) - h) o.tail = r.tail.load(std::memory_order_acquire);
    size_t room = cap_ - static_cast<size_t>(h - o.tail);
    if (room <= sizeof(ChunkHeader)) return 0;
    if (offer) {
        ChunkHeader c{0, iov[0].iov_len | ChunkHeader::kInPlace};
        o.len = iov[0].iov_len;
        o.addr = reinterpret_cast<uint64_t>(iov[0].iov_base);
        if (inline_after_.count()) o.offered = Clock::now();
        o.until.store(chunk_end(h, 0), std::memory_order_relaxed);
        o.pending.store(true, std::memory_order_relaxed);
        note_offer(r, o.addr, o.len);
        r.offer.store(kOffered, std::memory_order_release);  // before the chunk that points to it
        publish(peer, h, c, iov, 0, 0);
        return 0;
    }
    k = std::min(k, room - sizeof(ChunkHeader));
    // The room is whole half lines, and a larger chunk ends on a line.
    if (chunk_end(h, k) - h > room) k = std::max<size_t>(room - kLine / 2, kLine / 2) - sizeof(ChunkHeader);
    if (k == 0) return 0;
    o.inline_left -= std::min(o.inline_left, k);
    publish(peer, h, ChunkHeader{0, k}, iov, m, k);
    return k;
}

std::chrono::microseconds ShmLinks::inline_wait(size_t len) const {
    // Copying inline at 1 GB/s: slower than a ring copies here, so that a
    // reader a little late still gets the single copy.
    auto copy = std::chrono::microseconds(static_cast<int64_t>(len / 1000));
    return std::min(std::max(copy, std::chrono::microseconds(100)), inline_after_);
}

uint64_t ShmLinks::chunk_end(uint64_t pos, size_t bytes) {
    // A chunk of half a line ends there: two small messages (a repeated
    // exchange header and a few bytes) share a line, so a reader that runs
    // behind its writer takes in two with each line it fetches. A larger
    // one ends on a line, so that the next does not share its last line
    // with a reader still copying it out.
    const uint64_t end = pos + sizeof(ChunkHeader) + bytes;
    return end - pos <= kLine / 2 ? pos + kLine / 2 : (end + kLine - 1) & ~(kLine - 1);
}

void ShmLinks::publish(int peer, uint64_t pos, const ChunkHeader &c, const iovec *iov, int n, size_t k) {
    // The header's first word is on a half line, inside the ring: the rest of the
    // header and the bytes, then the stamp that says they are there, then the
    // head for ready() and a sleeper.
    uint8_t *d = data(me_, peer);
    iovec ci{const_cast<uint64_t *>(&c.len), sizeof c.len};
    copy<true>(d, cap_, pos + sizeof c.stamp, &ci, 1, sizeof c.len);
    copy<true>(d, cap_, pos + sizeof c, iov, n, k, stream_min_);
    __atomic_store_n(reinterpret_cast<uint64_t *>(d + (pos & (cap_ - 1))), stamp(pos), __ATOMIC_RELEASE);
    advance(ring(me_, peer).head, chunk_end(pos, c.in_place() ? 0 : k), peer);
}

size_t ShmLinks::read(int peer, const iovec *iov, int n) {
    check_self();
    Ring &r = ring(peer, me_);
    In &s = in_[size_t(peer)];
    const uint64_t t = s.pos;
    if (!s.open) {
        if (!chunk_at(peer, t, s.hdr)) {
            // What it wrote before it closed is still read; only then is it gone.
            if (!bells_[peer].closed.load(std::memory_order_acquire)) {
                show(peer);  // caught up: the writer may have all the room
                return 0;
            }
            if (!chunk_at(peer, t, s.hdr)) peer_gone(peer, false);
        }
        s.open = true;
        s.off = 0;
    }
    if (s.hdr.in_place() && r.offer.load(std::memory_order_acquire) == kInline) {
        // Its bytes come inline after it: past the offer, on to them.
        s.open = false;
        r.offer.store(kNoOffer, std::memory_order_relaxed);
        s.pos = chunk_end(t, 0);
        show(peer);  // the writer makes no new offer before the tail passes this one
        return read(peer, iov, n);
    }
    size_t k = std::min(total(iov, n), s.hdr.bytes() - s.off);
    if (k == 0) return 0;
    if (!s.hdr.in_place())
        copy<false>(data(peer, me_), cap_, t + sizeof s.hdr + s.off, iov, n, k);
    else
        k = read_in_place(peer, iov, n, k, s.off);
    s.off += k;
    if (s.off == s.hdr.bytes()) {
        if (s.hdr.in_place()) r.offer.store(kNoOffer, std::memory_order_release);  // before the tail frees the writer
        s.open = false;
        s.pos = chunk_end(t, s.hdr.in_place() ? 0 : s.hdr.bytes());
        // An in-place chunk's writer waits for the tail to pass it.
        if (!lazy_ || s.hdr.in_place() || s.pos - s.shown >= cap_ / kShowEvery) show(peer);
    }
    return k;
}

bool ShmLinks::chunk_at(int peer, uint64_t t, ChunkHeader &h) const {
    // A chunk's header is published with its inline bytes: all or nothing.
    auto *at = reinterpret_cast<uint64_t *>(data(peer, me_) + (t & (cap_ - 1)));
    if (__atomic_load_n(at, __ATOMIC_ACQUIRE) != stamp(t)) return false;
    iovec hv{&h, sizeof h};
    copy<false>(data(peer, me_), cap_, t, &hv, 1, sizeof h);
    return true;
}

bool ShmLinks::peek(int peer, void *to, size_t n) {
    const In &s = in_[size_t(peer)];
    ChunkHeader h;
    if (peer == me_ || s.open || !chunk_at(peer, s.pos, h) || h.in_place() || h.bytes() < n) return false;
    iovec v{to, n};
    copy<false>(data(peer, me_), cap_, s.pos + sizeof h, &v, 1, n);
    return true;
}

void ShmLinks::populate() noexcept {
    const auto page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
    for (int p = 0; p < n_; ++p) {
        if (p == me_) continue;
        for (uint8_t *d : {data(me_, p), data(p, me_)}) {
            uintptr_t lo = reinterpret_cast<uintptr_t>(d) & ~(page - 1),
                      hi = (reinterpret_cast<uintptr_t>(d) + cap_ + page - 1) & ~(page - 1);
            // Writes nothing: only maps the pages, giving the segment what it lacks
            // (an older kernel says EINVAL: the first lap faults as before).
            ::madvise(reinterpret_cast<void *>(lo), hi - lo, kPopulateWrite);
        }
    }
}

void ShmLinks::show(int peer) {
    In &s = in_[size_t(peer)];
    if (s.shown == s.pos) return;
    s.shown = s.pos;
    advance(ring(peer, me_).tail, s.pos, peer);
}

size_t ShmLinks::unread(int peer) const {
    const Ring &r = ring(peer, me_);
    // The head follows a chunk's stamp: a chunk read before it moved leaves the tail ahead.
    uint64_t h = r.head.load(std::memory_order_acquire), t = read_pos(peer);
    return h > t ? static_cast<size_t>(h - t) : 0;
}

uint64_t ShmLinks::read_pos(int peer) const {
    // Another thread may read meanwhile where the tail is published at once.
    return lazy_ ? in_[size_t(peer)].pos : ring(peer, me_).tail.load(std::memory_order_seq_cst);
}

bool ShmLinks::ready(const Want &w) const {
    if (bells_[w.peer].closed.load(std::memory_order_seq_cst)) return true;  // the next move throws
    if (w.write) {
        const Ring &r = ring(me_, w.peer);
        if (r.stopped.load(std::memory_order_seq_cst)) return true;  // so does the next write
        const Out &o = out_[size_t(w.peer)];
        uint64_t t = r.tail.load(std::memory_order_seq_cst);
        if (o.pending.load(std::memory_order_relaxed)
                ? t >= o.until.load(std::memory_order_relaxed)
                : r.head.load(std::memory_order_seq_cst) - t + sizeof(ChunkHeader) < cap_)
            return true;
    }
    if (w.read && ring(w.peer, me_).head.load(std::memory_order_seq_cst) != read_pos(w.peer)) return true;
    return false;
}

void ShmLinks::stop_reading(int peer) noexcept {
    ring(peer, me_).stopped.store(1, std::memory_order_seq_cst);
    ring_bell(peer);
}

double ShmLinks::line_trip(int peer, bool pinger, bool skip, Clock::time_point deadline) const {
    // As bench/line_trip.c: each side stores the count into its own line
    // and waits for the other's, with no pause between loads (a pause would
    // be measured too).
    constexpr uint64_t kTrips = 200, kRuns = 5, kSkip = ~uint64_t(0);
    std::atomic<uint64_t> &ping = trip_[0], &pong = trip_[8];  // a line apart
    if (skip) {
        ping.store(kSkip, std::memory_order_release);
        return 0;
    }
    // Whether `line` came to `v` (not kSkip) by the deadline, the peer alive.
    auto until = [&](std::atomic<uint64_t> &line, uint64_t v) {
        for (uint32_t i = 1;; ++i) {
            const uint64_t x = line.load(std::memory_order_acquire);
            if (x == v || x == kSkip) return x == v;
            if (i % 4096 == 0) {
                if (Clock::now() > deadline || !alive(peer)) return false;
                // Still waiting for the peer to begin: its core may be this one.
                if (v == 1) sched_yield();
            }
        }
    };
    if (!pinger) {
        for (uint64_t v = 1; v <= kTrips * kRuns; ++v) {
            if (!until(ping, v)) return 0;
            pong.store(v, std::memory_order_release);
        }
        return 0;
    }
    double best = 0;
    for (uint64_t r = 0, v = 0; r < kRuns; ++r) {
        const auto t0 = Clock::now();
        for (uint64_t i = 0; i < kTrips; ++i) {
            ping.store(++v, std::memory_order_release);
            if (!until(pong, v)) return 0;
        }
        const double ns = std::chrono::duration<double, std::nano>(Clock::now() - t0).count() / (2 * kTrips);
        best = r == 0 ? ns : std::min(best, ns);
    }
    return best;
}

bool ShmLinks::alive(int peer) const {
    const Fd &pf = pidfds_[size_t(peer)];
    if (pf.valid()) {
        pollfd p{pf.get(), POLLIN, 0};
        return ::poll(&p, 1, 0) <= 0;  // a pidfd reads as ready once its process exited
    }
    return same_process(peer) || ::kill(pids_[size_t(peer)], 0) == 0 || errno != ESRCH;
}

void ShmLinks::check_alive(const std::vector<Want> &wants) const {
    for (const Want &w : wants)
        if (!alive(w.peer)) peer_gone(w.peer, true);
}

void ShmLinks::wait(const std::vector<Want> &wants, Clock::time_point deadline) {
    // Whoever this rank does not wait for may wait for room this rank made.
    for (int p = 0; lazy_ && p < n_; ++p)
        if (p != me_) show(p);
    Bell &me = bells_[me_];
    me.sleeping.store(1, std::memory_order_seq_cst);
    // The fence for movers that skip theirs (advance). Should it fail, they
    // keep theirs from now on; one that just skipped it is seen within a slice.
    if (light_ && membarrier(MEMBARRIER_CMD_GLOBAL_EXPEDITED) != 0) me.light.store(0, std::memory_order_seq_cst);
    // A value no wake was made for yet (see ring_bell).
    uint32_t seq = me.seq.fetch_add(1, std::memory_order_seq_cst) + 1;
    bool any = closed_.load(std::memory_order_seq_cst) ||
               std::any_of(wants.begin(), wants.end(), [&](const Want &w) { return ready(w); });
    if (!any) {
        auto left = std::min(std::chrono::duration_cast<std::chrono::nanoseconds>(deadline - Clock::now()),
                             std::chrono::nanoseconds(kSlice));
        if (left.count() > 0) {
            timespec ts{static_cast<time_t>(left.count() / 1000000000), static_cast<long>(left.count() % 1000000000)};
            long rc = futex(&me.seq, FUTEX_WAIT, seq, &ts);
            if (rc != 0 && errno == ETIMEDOUT) {
                me.sleeping.store(0, std::memory_order_relaxed);
                check_alive(wants);
                return;
            }
        }
    }
    me.sleeping.store(0, std::memory_order_relaxed);
}

void ShmLinks::close() noexcept {
    closed_.store(true, std::memory_order_seq_cst);
    bells_[me_].closed.store(1, std::memory_order_seq_cst);
    for (int p = 0; p < n_; ++p) {
        // Unconditionally: the waiter may be between its check and its sleep.
        bells_[p].seq.fetch_add(1, std::memory_order_seq_cst);
        futex(&bells_[p].seq, FUTEX_WAKE, INT_MAX, nullptr);
    }
    // Our caller may reuse its buffers once we return: a peer's piece under
    // way into them ends first (the next one sees us closed).
    settle();
}

}  // namespace distc

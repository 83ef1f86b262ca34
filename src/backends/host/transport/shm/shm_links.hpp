// The shared-memory transport's links for the exchange (exchange.hpp): in one
// segment, a single-producer single-consumer byte ring for each ordered pair
// of ranks, and for each rank a doorbell it sleeps on. The fast path makes
// no system call: a writer copies into the ring and publishes the new head,
// a reader copies out and publishes the tail (the collectives' readers
// lazily: show_lazily). A rank that finds nothing to
// do sleeps on its doorbell (a futex in the segment), and whoever moves a
// ring it waits on rings it, only when it sleeps and nobody rang for that
// sleep yet. Sleeps come in slices, so
// a peer that died (its pidfd says so) or closed its end is noticed.
//
// Whether a peer sleeps is a Dekker pair: the mover stores its head or tail,
// then looks at the peer's `sleeping`; the sleeper stores `sleeping`, then
// looks at the rings. Each side needs a full fence between its store and its
// load, and the mover's would stall every message until the line that the
// reader polls came over. Where the kernel has membarrier, the sleeper takes
// the fence for both (MEMBARRIER_CMD_GLOBAL_EXPEDITED, which runs one on
// every core that runs a registered process) and says so in its Bell, and a
// mover in a registered process then stores with release alone. Movers
// towards a rank that cannot, or from one, keep their fence.
// DISTC_SHM_MEMBARRIER=0 keeps it everywhere.
//
// A ring carries chunks, each from a half cache line (two small ones share
// a line, a larger one ends on one): a 16-byte header, then
// its bytes inline, or (single copy, for pieces of at least cma_min bytes)
// only a mark that the bytes are offered in place. The header's first word,
// stored last, stamps the chunk's place in the stream, so a reader polls the
// line it reads next rather than the writer's head: a small message costs it
// one line from the writer, not two in turn. A writer looks at the reader's
// tail only when its last look says the ring is too full.
//
// In place: the writer's own buffer, whose address is in the pair's offer
// slot, which the reader copies from with process_vm_readv (memcpy within
// one process). The reader moves its tail past a chunk only once it has all
// of it, so a writer knows an in-place chunk was read, and its buffer free
// again, when the tail passes it. The slot also lets a writer take its
// buffer back before then (a send that timed out, a collective that
// failed): it waits out a copy in progress, then points the slot at a copy
// of the bytes (relocate) or withdraws the offer (abandon, and the reader
// fails).
//
// Where cache lines cross cores slowly, a writer may stream its larger runs
// into the ring (set_streaming: non-temporal stores, then a store fence
// before the stamp): its stores then fetch no line back from the reader,
// and the reader loads the bytes from memory. Only the writer decides.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "backends/host/transport/exchange.hpp"
#include "backends/host/transport/shm/peer_memory.hpp"
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
    size_t write(int peer, const iovec *iov, int n) override { return write(peer, iov, n, true); }
    // And with `may_offer` false, every piece inline, whatever its size.
    size_t write(int peer, const iovec *iov, int n, bool may_offer);
    size_t read(int peer, const iovec *iov, int n) override;
    void wait(const std::vector<Want> &wants, Clock::time_point deadline) override;
    int count() const override { return n_; }
    int me() const { return me_; }  // this rank's local index
    // Where the next chunk from `peer` has come whole and carries at least
    // `n` bytes inline.
    bool peek(int peer, void *to, size_t n) override;

    // Pieces of at least `bytes` go in place (0: never). Every rank of the
    // group must agree, and be able to read the others' memory. With
    // `inline_after`, a piece its reader has not begun to copy goes inline
    // after all once it waited about as long as copying it inline takes (at
    // least 100 us, at most `inline_after`): point-to-point, where a receiver
    // that is not there must not hold its sender up much longer than the
    // ring would.
    void set_single_copy(size_t bytes, std::chrono::microseconds inline_after = {}) {
        cma_min_ = bytes;
        inline_after_ = inline_after;
    }
    size_t single_copy() const { return cma_min_; }
    // Inline runs of at least `bytes` (0: none) go into the rings through
    // non-temporal stores.
    void set_streaming(size_t bytes) { stream_min_ = bytes; }
    // The reader publishes its tail only when it finds nothing more to read,
    // when it sleeps, after an in-place chunk, and otherwise once per eighth
    // of the ring: a writer that polls the tail of a full ring would make
    // every store of it wait for the line to come back. For links whose
    // reads and waits come from one thread at a time (a wait publishes what
    // every peer's reads freed).
    void show_lazily() { lazy_ = true; }
    // Copies `n` bytes at `addr` in local rank `peer`'s process to `to`
    // (single copy, for algorithms that read peers' buffers where they are:
    // the caller makes sure the peer keeps them). Throws DISTC_EREMOTE when
    // the peer died or its memory cannot be read.
    void read_from(int peer, uint64_t addr, void *to, size_t n);
    // And `n` bytes from `from` to `addr` in `peer`'s process (the same
    // permission as reading: the ptrace access check).
    // Both go a piece at a time, and touch nothing of a peer that closed its
    // end (it failed, or was aborted, and may have returned to its caller
    // and freed the buffer): that throws DISTC_EREMOTE, and the peer's
    // close() waits for a piece under way.
    void write_to(int peer, uint64_t addr, const void *from, size_t n);
    // `peer`'s buffer of this call is `b`: where it lies in a region of
    // shared memory that maps here (PeerMemory), read_from, write_to and
    // read_directly copy with memcpy, as between ranks of one process.
    void attach(int peer, const PeerBuffer &b) {
        if (!same_process(peer)) mem_.attach(peer, b);
    }
    // Calls use() with `peer`'s bytes [addr, addr + n) where they can be read
    // with loads (a rank of this process, or attached memory), on the terms
    // of read_from, and returns true; false otherwise.
    bool read_directly(int peer, uint64_t addr, size_t n, FnRef<void(const uint8_t *)> use);
    size_t peer_regions_mapped() const { return mem_.mapped(); }
    // Whether this process can read `pid`'s memory at `addr`, where `expect` is.
    static bool can_read(pid_t pid, const void *addr, uint64_t expect);

    // Bytes written by `peer` and not read yet (chunk headers included), and
    // what a ring holds.
    size_t unread(int peer) const;
    size_t capacity() const { return cap_; }
    // "rank 3 (shm, pid 4012)", for messages.
    std::string name(int peer) const;
    // Whether `peer`'s process still runs (a rank in this process always does).
    bool alive(int peer) const;
    // Maps the rings this rank writes and reads, and gives them memory, now
    // (a first lap through a ring would otherwise fault on every page, as
    // writer and reader meet there). Best effort.
    void populate() noexcept;
    // One way of a cache line's trip between this rank and local rank
    // `peer`, in ns, through two lines of the segment that serve one pair
    // once (the group's first two local ranks, as it starts): the `pinger`
    // times round trips and returns the fastest of a few runs' means; the
    // other answers them and returns 0. So does a pinger whose peer did not
    // answer all by `deadline` or died, and one that passes `skip`, which
    // tells the other not to wait.
    double line_trip(int peer, bool pinger, bool skip, Clock::time_point deadline) const;
    // Makes this rank's wait() return soon (any thread).
    void wake() { ring_bell(me_); }

    // The in-place piece this rank offers `peer` now lies at `to`, a copy of
    // [from, from + n) that the caller keeps until the piece is read. Any
    // thread that holds what guards write().
    void relocate(int peer, const uint8_t *from, size_t n, const uint8_t *to);
    // Withdraws every in-place piece this rank offers: no peer reads the
    // buffers behind them from now on (a reader that tries fails).
    void abandon() noexcept;

    // This rank reads nothing more from `peer` (a stream it cannot follow:
    // a message it had no memory for, or a malformed one): the peer's
    // writes to it throw DISTC_EREMOTE from now on, and a wait for room wakes.
    void stop_reading(int peer) noexcept;

    // Marks this rank's end closed and wakes every rank, this one's waiter too:
    // peers fail at once, and a wait here returns and throws. Returns once
    // no peer reads or writes this rank's buffers (read_from, write_to), at
    // most 1 s for a peer stopped mid-piece. Any thread.
    void close() noexcept;

private:
    // An in-place offer's states (Ring::offer).
    // kOffered: nobody copied from it yet; kTaken: the reader began (and will
    // finish) it; kReading: it copies now; kMoving: the writer relocates it;
    // kWithdrawn: gone; kInline: the writer sends the bytes inline after the
    // offer's chunk instead (only from kOffered: a reader that began finishes).
    static constexpr uint32_t kNoOffer = 0, kOffered = 1, kReading = 2, kMoving = 3, kWithdrawn = 4, kInline = 5,
                              kTaken = 6;
    struct alignas(64) Bell {
        // The futex word. Its owner takes a value of its own for each sleep,
        // and a mover that wakes it the next.
        std::atomic<uint32_t> seq;
        std::atomic<uint32_t> sleeping;  // its owner sleeps (or is about to)
        std::atomic<uint32_t> closed;    // its owner closed its end
        // Its owner's process is registered for membarrier and issues one
        // after storing `sleeping`: a registered mover needs no fence of its own.
        std::atomic<uint32_t> light;
        // The value of seq whose wake was made: a mover that finds seq
        // there leaves the owner, woken already, to look at every ring.
        std::atomic<uint32_t> woke;
        int32_t pad[11];
    };
    struct alignas(64) Ring {
        std::atomic<uint64_t> head;  // bytes ever written (the producer's)
        char pad0[56];
        std::atomic<uint64_t> tail;  // bytes ever read (the consumer's)
        char pad1[56];
        // The in-place piece on offer: its state (kOffered, the reader
        // kReading while it copies, the writer kMoving while it relocates,
        // kWithdrawn) and where its bytes are in the writer's process.
        std::atomic<uint32_t> offer;
        // The writer reads or writes the reader's buffer now (read_from,
        // write_to): the reader's close() waits until it is done.
        std::atomic<uint32_t> poking;
        std::atomic<uint64_t> offer_addr;
        // The reader gave up on this ring (stop_reading): the writer's next move throws.
        std::atomic<uint32_t> stopped;
        uint32_t pad1b;
        // The shared memory the offer lies in (distc_mem_alloc; region 0:
        // none), for the reader to map and copy from with memcpy (PeerMemory).
        std::atomic<uint64_t> offer_region, offer_base;
        std::atomic<int64_t> offer_fd;
        char pad2[16];
    };
    static_assert(sizeof(Ring) == 3 * 64, "a ring's words fill three cache lines");
    struct ChunkHeader {
        uint64_t stamp;  // stamp(position): the chunk is complete (written last)
        uint64_t len;    // the chunk's bytes; kInPlace set: offered in place, not inline
        static constexpr uint64_t kInPlace = uint64_t(1) << 63;
        bool in_place() const { return len & kInPlace; }
        size_t bytes() const { return static_cast<size_t>(len & ~kInPlace); }
    };
    // What marks a chunk at `pos` complete: the position mixed with the
    // segment's random salt, so no stale chunk and, but for a 2^-64 chance, no
    // payload that happens to lie where the next header goes looks like one.
    uint64_t stamp(uint64_t pos) const { return pos ^ salt_; }
    // How long an in-place piece of `len` bytes waits for its reader before it goes inline.
    std::chrono::microseconds inline_wait(size_t len) const;
    // Where a chunk of `bytes` after its header ends (chunks start on half lines).
    static uint64_t chunk_end(uint64_t pos, size_t bytes);
    void publish(int peer, uint64_t pos, const ChunkHeader &c, const iovec *iov, int n, size_t k);
    // Whether the chunk at `t` in the ring from `peer` is complete; if so its header, into `h`.
    bool chunk_at(int peer, uint64_t t, ChunkHeader &h) const;
    // Stores `to` into this rank's head or tail `at` of a ring shared with
    // `peer`, and wakes `peer` if it sleeps (the Dekker pair above).
    void advance(std::atomic<uint64_t> &at, uint64_t to, int peer);
    struct Out {  // an in-place chunk written and not yet read
        // Atomic: a thread may wait (ready()) while another writes.
        std::atomic<bool> pending{false};
        std::atomic<uint64_t> until{0};  // read once the tail reaches this
        size_t len = 0;
        uint64_t addr = 0;  // where its bytes are now
        Clock::time_point offered{};
        size_t inline_left = 0;  // of a piece that went inline after all
        uint64_t reoffer = 0;    // no new offer before the tail passes this
        uint64_t tail = 0;       // the reader's tail when this rank last looked
    };
    struct In {  // the chunk being read
        bool open = false;
        ChunkHeader hdr{};
        size_t off = 0;
        uint64_t pos = 0;    // where this rank reads (its tail)
        uint64_t shown = 0;  // the tail as published to the writer
    };
    static constexpr uint64_t kShowEvery = 8;  // see show_lazily()
    void show(int peer);                       // publishes this rank's tail in the ring from `peer`
    uint64_t read_pos(int peer) const;
    Ring &ring(int from, int to) const { return rings_[from * n_ + to]; }
    size_t read_in_place(int peer, const iovec *iov, int n, size_t k, uint64_t off);
    // Up to `k` bytes at `from` in `peer`'s process into `iov`: the count copied.
    size_t copy_from(int peer, uint64_t from, const iovec *iov, int n, size_t k);
    uint8_t *data(int from, int to) const { return data_ + static_cast<size_t>(from * n_ + to) * cap_; }
    void ring_bell(int who);
    // Waits until `peer` copies nothing of this rank's offer, then moves it
    // to state `to`: the state it had (kOffered, kTaken), or kNoOffer if it
    // was read or withdrawn meanwhile.
    uint32_t take_offer(int peer, uint32_t to) noexcept;
    bool ready(const Want &w) const;
    [[noreturn]] void peer_gone(int peer, bool died) const;
    void check_self() const;
    [[noreturn, gnu::cold]] void closed_here() const;
    // Returns once no peer reads or writes this rank's buffers (this end is
    // closed: none begins again), or after kPokeWait.
    void settle() const noexcept;
    // Calls piece(offset, bytes) for pieces of `n` bytes of `peer`'s memory
    // (each returns what it copied), under the peer's watch (settle).
    template <typename Piece>
    void touch(int peer, size_t n, Piece &&piece);
    void check_alive(const std::vector<Want> &wants) const;  // throws for the first that died
    bool same_process(int peer) const { return pids_[size_t(peer)] == self_; }
    // Says where the offer of `n` bytes at `addr` is, and in which shared memory.
    static void note_offer(Ring &r, uint64_t addr, size_t n);
    // Where `peer`'s bytes [addr, addr + n) are in this process, if anywhere.
    uint8_t *local(int peer, uint64_t addr, size_t n) const {
        return same_process(peer) ? reinterpret_cast<uint8_t *>(addr) : mem_.view(peer, addr, n);
    }

    int n_, me_;
    size_t cap_;
    uint64_t salt_;
    std::atomic<uint64_t> *trip_;  // line_trip()'s two lines
    Bell *bells_;
    Ring *rings_;
    uint8_t *data_;
    std::vector<int> ranks_;
    std::vector<pid_t> pids_;
    // This process's: getpid() is a system call, too dear for every copy.
    pid_t self_;
    std::vector<Fd> pidfds_;  // by local rank, for peers in other processes
    PeerMemory mem_;
    std::vector<Out> out_;
    std::vector<In> in_;
    size_t cma_min_ = 0;
    size_t stream_min_ = 0;  // set_streaming()
    bool lazy_ = false;      // show_lazily()
    std::chrono::microseconds inline_after_{0};
    std::atomic<bool> closed_{false};
    bool light_;  // this process takes asymmetric fences (Bell::light)
};

}  // namespace distc

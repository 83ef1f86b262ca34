#include "backends/host/algorithms.hpp"
#include "core/util/copy_streaming.hpp"

#include <algorithm>
#include <cstring>

#include "core/util/error.hpp"

namespace distc {

namespace {

// Large reductions move in segments of this many bytes, with this many
// segments per peer in flight: the scratch memory stays bounded and each
// segment is reduced while later ones are still on the wire.
constexpr size_t kSegmentBytes = 512 * 1024;
constexpr size_t kWindow = 2;
// Up to this size a reduction sends everything to everyone (one round trip);
// above it, reduce-scatter then allgather (each rank moves 2(n-1)/n of the data).
constexpr size_t kDirectReduceBytes = 64 * 1024;
// With more than two ranks, sending everything costs each rank n-1 copies of
// the data in and out, and reducing them, against 2(n-1)/n over two rounds:
// the direct path saves a round but moves (n-1)(n-2)/n times the data more.
// Where rounds are cheap (Transport::cheap_rounds) it stops at this many
// bytes times n / ((n-1)(n-2)): 12 KiB at 3 ranks, 5.3 KiB at 4, 1.5 KiB at
// 8 (over shared memory with a core per rank, the chunked path won from
// 8 KiB at 4 ranks and from 2 KiB at 8, and lost at 1 KiB). Over sockets,
// where the extra round costs system calls, it lost up to twice the time
// from 2 to 32 KiB at 4 and 8 ranks: there 64 KiB stays, at any number of
// ranks, and so it does where ranks outnumber cores.
constexpr size_t kDirectReduceWork = 8 * 1024;

size_t direct_reduce_bytes(int ranks, bool cheap_rounds) {
    if (ranks <= 2 || !cheap_rounds) return kDirectReduceBytes;
    const auto n = static_cast<size_t>(ranks);
    return std::min(kDirectReduceBytes, kDirectReduceWork * n / ((n - 1) * (n - 2)));
}

// Above this, a broadcast to more than one peer is scattered, and each rank
// forwards its piece to the others as it arrives: the root sends the data
// once instead of once per peer (from 1 MiB that finished sooner over
// either transport; at 512 KiB the two paths were even).
constexpr size_t kDirectBroadcastBytes = 512 * 1024;

// From this many ranks, where rounds are cheap (Transport::cheap_rounds), a
// barrier goes in ceil(log2 n) rounds of one message each way instead of
// one message to and from every peer. With a core per rank the rounds took
// 0.90 of the time at 6 ranks, 0.67 at 8 and 0.39 at 16, and gained nothing
// at 4 or 5 (bench/results/shm_barrier_ab.txt). Where ranks outnumber
// cores, each round waits for a peer to be scheduled: there pairs stay.
constexpr int kBarrierRoundsRanks = 6;

// From this many ranks, where rounds are cheap, a broadcast of up to
// kDirectBroadcastBytes, or a scatter of up to kTreeScatterBytes in all,
// goes down a binomial tree: the root writes log2(n) messages instead of
// n - 1 (each to a ring line its reader polls, which must come over before
// the store completes), and the ranks it sent to pass the rest on. With a
// core per rank the tree took 0.25-0.6 of the flat path's time for
// broadcasts of 8 B to 512 KiB at 8 and 16 ranks, 0.45-0.85 at 4; scatters
// 0.6-0.9 up to 128 KiB at 8 and 16 ranks and 0.75-0.95 at 4, but more
// from 256 KiB, where the first child forwards half the data; at 5 ranks
// both were even (bench/results/shm_tree_ab.txt).
constexpr int kTreeRanks = 4;
constexpr size_t kTreeScatterBytes = 128 * 1024;

// The binomial tree over virtual ranks (0: the root): v's parent is v with
// its lowest set bit cleared, its subtree the tree_span(v, n) ranks from v, its
// children v + d for each power of two d below that bit, the largest first.
int tree_span(int v, int n) {
    if (v == 0) return n;
    return std::min(v & -v, n - v);
}
int tree_first_gap(int v, int n) {  // the largest d of v's children (0: none)
    int d = 1;
    if (v == 0) {
        while (d < n) d *= 2;
    } else {
        d = v & -v;
    }
    d /= 2;
    while (d > 0 && v + d >= n) d /= 2;
    return d;
}

// `total` units of `unit` bytes at `base`, cut into `parts` near-equal chunks,
// each moved in segments of up to `seg` units.
struct Chunks {
    uint8_t *base;
    size_t total, parts, seg, unit;
    size_t lo(size_t c) const { return total * c / parts; }  // chunk c is units [lo(c), lo(c + 1))
    size_t segments(size_t c) const { return (lo(c + 1) - lo(c) + seg - 1) / seg; }
    // Segment k of chunk c, and its length in bytes.
    uint8_t *piece(size_t c, size_t k, size_t &bytes) const {
        size_t b = lo(c) + k * seg;
        bytes = (std::min(b + seg, lo(c + 1)) - b) * unit;
        return base + b * unit;
    }
};

}  // namespace

uint8_t *Algorithms::scratch(size_t n) {
    if (n > scratch_cap_) {
        scratch_.reset(new uint8_t[n]);
        scratch_cap_ = n;
    }
    return scratch_.get();
}

void Algorithms::run(const Call &call, Clock::time_point deadline, std::chrono::microseconds patience) {
    t_.progress(
        call, deadline, [](int, int) {}, patience);
}

void Algorithms::reduce_direct(Tensor &t, ReduceOp op, int to, const Call &call, Clock::time_point deadline) {
    size_t n = t.nbytes();
    if (to != rank_)
        for (int p = 0; p < size_; ++p)
            if (p != rank_ && (to == kEveryone || p == to)) t_.send(p, t.data, n);
    if (to != kEveryone && to != rank_) return run(call, deadline);
    uint8_t *all = scratch(n * static_cast<size_t>(size_));
    for (int p = 0; p < size_; ++p)
        if (p != rank_) t_.recv(p, all + n * static_cast<size_t>(p), n);
    run(call, deadline);
    // In rank order on every rank: the same bits everywhere. Our own part is
    // read in place; the partial sums go to its (unused) slot of `all`, and
    // only the last step writes `t`, after it was read.
    auto in = [&](int r) -> const void * { return r == rank_ ? t.data : all + n * static_cast<size_t>(r); };
    ReduceFn fn = reduce_fn(t.dtype, op);
    uint8_t *acc = size_ == 2 ? t.bytes() : all + n * static_cast<size_t>(rank_);
    fn(acc, in(0), in(1), t.numel);
    for (int p = 2; p < size_; ++p) fn(p == size_ - 1 ? t.data : acc, acc, in(p), t.numel);
}

void Algorithms::reduce_chunked(Tensor &t, ReduceOp op, int to, const Call &call, Clock::time_point deadline,
                                uint8_t *dest) {
    const size_t esz = dtype_size(t.dtype), P = static_cast<size_t>(size_);
    const size_t seg = std::max<size_t>(1, kSegmentBytes / esz);
    // Rank r owns chunk r of the elements.
    const Chunks ch{t.bytes(), t.numel, P, seg, esz};
    auto segments = [&](int r) { return ch.segments(static_cast<size_t>(r)); };
    auto piece = [&](int r, size_t k, size_t &bytes) { return ch.piece(static_cast<size_t>(r), k, bytes); };
    const size_t mine = segments(rank_);
    // Each peer's pieces of our chunk land in a window of kWindow segments.
    const size_t slot = std::min(mine, kWindow) * seg * esz;
    uint8_t *win = scratch(slot * P);
    auto window = [&](int r, size_t k) { return win + slot * static_cast<size_t>(r) + (k % kWindow) * seg * esz; };
    reduced_.reset(new bool[mine]());  // the gates of the sends that wait on segments
    arrived_.assign(mine, 0);

    for (int p = 0; p < size_; ++p) {
        if (p == rank_) continue;
        size_t bytes;
        // Reduce-scatter: our copy of p's chunk out; p's copy of ours in, a window at a time.
        for (size_t k = 0; k < segments(p); ++k) {
            uint8_t *src = piece(p, k, bytes);
            t_.send(p, src, bytes);
        }
        for (size_t k = 0; k < mine; ++k) {
            piece(rank_, k, bytes);
            t_.recv(p, window(p, k), bytes, static_cast<int>(k), k >= kWindow ? &reduced_[k - kWindow] : nullptr);
        }
        // Then our reduced chunk out, each segment once it is reduced, and p's in.
        if (to == kEveryone || to == p)
            for (size_t k = 0; k < mine; ++k) {
                uint8_t *src = piece(rank_, k, bytes);
                t_.send(p, src, bytes, &reduced_[k]);
            }
        if (to == kEveryone || to == rank_)
            for (size_t k = 0; k < segments(p); ++k) {
                uint8_t *dst = piece(p, k, bytes);
                t_.recv(p, dst, bytes);
            }
    }
    ReduceFn fn = reduce_fn(t.dtype, op);
    auto reduce_segment = [&](size_t k) {
        size_t bytes;
        uint8_t *own = piece(rank_, k, bytes), *out = dest ? dest + k * seg * esz : own;
        size_t n = bytes / esz;
        auto in = [&](int r) -> const uint8_t * { return r == rank_ ? own : window(r, k); };
        // In rank order. Our own piece is an input until the last step writes
        // it: from rank 2 on, the partial sums go to rank 0's window first.
        uint8_t *acc = rank_ < 2 ? out : window(0, k);
        fn(acc, in(0), in(1), n);
        for (int r = 2; r < size_; ++r) fn(r == size_ - 1 ? out : acc, acc, in(r), n);
    };
    t_.progress(call, deadline, [&](int, int id) {
        if (id < 0) return;
        auto k = static_cast<size_t>(id);
        if (++arrived_[k] < size_ - 1) return;
        reduce_segment(k);
        reduced_[k] = true;
    });
}

void Algorithms::reduce_scatter(const Tensor &in, Tensor &out, ReduceOp op, const Call &call, Millis timeout) {
    std::lock_guard<TurnLock> lk(mu_);
    auto deadline = deadline_in(timeout);
    bool published = false;
    if (in.numel >= static_cast<size_t>(size_) &&
        in_place_shared(in.nbytes(), kInPlaceReduceBytes, in.nbytes(), in.data, in.nbytes(), call, deadline, published))
        return reduce_scatter_in_place(in, out, op, call, deadline, published);
    Tensor all = in;
    if (in.nbytes() > kDirectReduceBytes && in.numel >= static_cast<size_t>(size_))
        return reduce_chunked(all, op, kNobody, call, deadline, out.bytes());
    // Small: each peer gets its part of our input, in one round, and we
    // reduce ours from every rank's in rank order. `out` may be our own part
    // of `in`: it is read before the last step writes it.
    const size_t part = out.nbytes(), me = static_cast<size_t>(rank_);
    uint8_t *theirs = scratch(part * static_cast<size_t>(size_));
    for (int p = 0; p < size_; ++p) {
        if (p == rank_) continue;
        t_.send(p, in.bytes() + part * static_cast<size_t>(p), part);
        t_.recv(p, theirs + part * static_cast<size_t>(p), part);
    }
    run(call, deadline);
    if (part == 0) return;
    auto src = [&](int r) -> const uint8_t * {
        return r == rank_ ? in.bytes() + part * me : theirs + part * static_cast<size_t>(r);
    };
    ReduceFn fn = reduce_fn(in.dtype, op);
    uint8_t *acc = theirs + part * me;  // our (unused) slot holds the partial sums
    fn(size_ == 2 ? out.data : acc, src(0), src(1), out.numel);
    for (int r = 2; r < size_; ++r) fn(r == size_ - 1 ? out.data : acc, acc, src(r), out.numel);
}

void Algorithms::reduce_to(Tensor &t, ReduceOp op, int to, const Call &call, Millis timeout) {
    std::lock_guard<TurnLock> lk(mu_);
    auto deadline = deadline_in(timeout);
    bool published = false;
    if (to != kNobody && t.numel >= static_cast<size_t>(size_) &&
        in_place_shared(t.nbytes(), kInPlaceReduceBytes, t.nbytes(), t.data, t.nbytes(), call, deadline, published))
        return reduce_in_place(t, op, to, call, deadline, published);
    if (t.nbytes() > direct_reduce_bytes(size_, t_.cheap_rounds()) && t.numel >= static_cast<size_t>(size_))
        reduce_chunked(t, op, to, call, deadline);
    else  // a small reduce-scatter reduces everything everywhere and keeps its part
        reduce_direct(t, op, to == kNobody ? kEveryone : to, call, deadline);
}

void Algorithms::broadcast(Tensor &t, int root, const Call &call, Millis timeout) {
    std::lock_guard<TurnLock> lk(mu_);
    auto deadline = deadline_in(timeout);
    if (in_place(t.nbytes(), size_ == 2                     ? from(kInPlaceBroadcastPairBytes)
                             : t_.copies_in_place_cheaply() ? kInPlaceBroadcastBytes.cheap
                                                            : kInPlaceBroadcastBytes.otherwise))
        return broadcast_in_place(t, root, call, deadline);
    if (size_ > 2 && t.nbytes() > kDirectBroadcastBytes) return broadcast_chunked(t, root, call, deadline);
    if (size_ >= kTreeRanks && t_.cheap_rounds()) return broadcast_tree(t, root, call, deadline);
    if (rank_ == root) {
        for (int p = 0; p < size_; ++p)
            if (p != rank_) t_.send(p, t.data, t.nbytes());
    } else {
        t_.recv(root, t.data, t.nbytes());
    }
    run(call, deadline);
}

void Algorithms::broadcast_tree(Tensor &t, int root, const Call &call, Clock::time_point deadline) {
    const int n = size_, v = (rank_ - root + n) % n;
    auto real = [&](int x) { return (x + root) % n; };
    bool got = v == 0;  // our copy is in: it goes on (gates the sends)
    if (v) t_.recv(real(v & (v - 1)), t.data, t.nbytes(), 0);
    for (int d = tree_first_gap(v, n); d > 0; d /= 2) t_.send(real(v + d), t.data, t.nbytes(), &got);
    t_.progress(call, deadline, [&](int, int id) {
        if (id == 0) got = true;
    });
}

void Algorithms::broadcast_chunked(Tensor &t, int root, const Call &call, Clock::time_point deadline) {
    // The non-roots in order after the root: v = 0 .. size-2; chunk v is v's to forward.
    const size_t n = t.nbytes(), m = static_cast<size_t>(size_ - 1);
    auto member = [&](size_t v) { return static_cast<int>((static_cast<size_t>(root) + 1 + v) % (m + 1)); };
    const Chunks ch{t.bytes(), n, m, kSegmentBytes, 1};
    size_t bytes;
    if (rank_ == root) {
        for (size_t v = 0; v < m; ++v)
            for (size_t k = 0; k < ch.segments(v); ++k) {
                uint8_t *src = ch.piece(v, k, bytes);
                t_.send(member(v), src, bytes);
            }
        return run(call, deadline);
    }
    const size_t me = static_cast<size_t>(rank_ - root - 1 + size_) % (m + 1), mine = ch.segments(me);
    reduced_.reset(new bool[mine]());  // here: which of our chunk's segments came in
    for (size_t k = 0; k < mine; ++k) {
        uint8_t *dst = ch.piece(me, k, bytes);
        t_.recv(root, dst, bytes, static_cast<int>(k));
    }
    for (size_t v = 0; v < m; ++v) {
        if (v == me) continue;
        for (size_t k = 0; k < mine; ++k) {
            uint8_t *src = ch.piece(me, k, bytes);
            t_.send(member(v), src, bytes, &reduced_[k]);
        }
        for (size_t k = 0; k < ch.segments(v); ++k) {
            uint8_t *dst = ch.piece(v, k, bytes);
            t_.recv(member(v), dst, bytes);
        }
    }
    t_.progress(call, deadline, [&](int, int id) {
        if (id >= 0) reduced_[static_cast<size_t>(id)] = true;
    });
}

void Algorithms::allgather(const Tensor &in, Tensor &out, const Call &call, Millis timeout) {
    std::lock_guard<TurnLock> lk(mu_);
    auto deadline = deadline_in(timeout);
    size_t n = in.nbytes();
    if (in_place_everyone(n * static_cast<size_t>(size_ - 1), kInPlaceBytes))
        return allgather_in_place(in, out, n, call, deadline);
    // An input that lies in `out` goes into our slot first, as
    // allgather_in_place moves it before it publishes; others are read
    // where they are (a peer that reads a part just written here would take
    // its lines from this core's cache, several times slower).
    uint8_t *own = out.bytes() + n * static_cast<size_t>(rank_);
    Tensor mine = in;
    if (overlaps(in.data, n, out.data, out.nbytes()) && own != in.data && n) {
        std::memmove(own, in.data, n);
        mine.data = own;
    }
    bool published = false;
    if (in_place_shared(n * static_cast<size_t>(size_ - 1), kInPlaceBytes, out.nbytes(), mine.data, n, call, deadline,
                        published))
        return allgather_in_place(mine, out, n, call, deadline, published);
    // Our own part first, and sent from there: `in` may alias a slot of `out`
    // that a receive fills while our sends are still going.
    if (own != mine.data && n) std::memmove(own, mine.data, n);
    for (int p = 0; p < size_; ++p) {
        if (p == rank_) continue;
        t_.send(p, own, n);
        t_.recv(p, out.bytes() + n * static_cast<size_t>(p), n);
    }
    run(call, deadline);
}

void Algorithms::gather(const Tensor &in, Tensor *out, int root, const Call &call, Millis timeout) {
    std::lock_guard<TurnLock> lk(mu_);
    auto deadline = deadline_in(timeout);
    size_t n = in.nbytes();
    if (size_ > 1 && in_place(n, from(kInPlacePartBytes))) return gather_in_place(in, out, n, root, call, deadline);
    if (rank_ != root) {
        t_.send(root, in.data, n);
    } else {
        uint8_t *own = out->bytes() + n * static_cast<size_t>(rank_);
        if (own != in.data && n) std::memmove(own, in.data, n);
        for (int p = 0; p < size_; ++p)
            if (p != rank_) t_.recv(p, out->bytes() + n * static_cast<size_t>(p), n);
    }
    run(call, deadline);
}

void Algorithms::scatter(const Tensor *in, Tensor &out, int root, const Call &call, Millis timeout) {
    std::lock_guard<TurnLock> lk(mu_);
    auto deadline = deadline_in(timeout);
    size_t n = out.nbytes();
    if (size_ > 1 && in_place(n, from(kInPlacePartBytes))) return scatter_in_place(in, out, n, root, call, deadline);
    if (size_ >= kTreeRanks && n * static_cast<size_t>(size_) <= kTreeScatterBytes && t_.cheap_rounds())
        return scatter_tree(in, out, n, root, call, deadline);
    if (rank_ != root) {
        t_.recv(root, out.data, n);
        return run(call, deadline);
    }
    for (int p = 0; p < size_; ++p)
        if (p != rank_) t_.send(p, in->bytes() + n * static_cast<size_t>(p), n);
    run(call, deadline);
    // After the sends: `out` may alias another rank's part of `in`.
    const uint8_t *own = in->bytes() + n * static_cast<size_t>(rank_);
    if (own != out.data && n) std::memmove(out.data, own, n);
}

void Algorithms::scatter_tree(const Tensor *in, Tensor &out, size_t n, int root, const Call &call,
                              Clock::time_point deadline) {
    // Each rank gets its subtree's parts, in virtual rank order, and passes
    // on its children's. The parts of a subtree lie in rank order in the
    // root's input: where the subtree wraps past the last rank, they go as
    // two messages, the same two whoever sends them.
    const int P = size_, v = (rank_ - root + P) % P, span = tree_span(v, P);
    auto real = [&](int x) { return (x + root) % P; };
    // Parts [x, x + k) of the subtree at x: how many of them come before the wrap.
    auto before_wrap = [&](int x, int k) { return std::min(k, P - real(x)); };
    // A rank with children keeps its subtree's parts here; a leaf takes its own into `out`.
    uint8_t *mine = v == 0 ? nullptr : span == 1 ? out.bytes() : scratch(n * static_cast<size_t>(span));
    int pieces = 0, in_count = 0;
    bool got = v == 0;
    if (v) {
        const int parent = real(v & (v - 1)), a = before_wrap(v, span);
        t_.recv(parent, mine, n * static_cast<size_t>(a), 1);
        ++pieces;
        if (a < span) {
            t_.recv(parent, mine + n * static_cast<size_t>(a), n * static_cast<size_t>(span - a), 1);
            ++pieces;
        }
    }
    for (int d = tree_first_gap(v, P); d > 0; d /= 2) {
        const int c = v + d, k = tree_span(c, P), a = before_wrap(c, k);
        // From the root's input in rank order, or from our copy in virtual order.
        const uint8_t *first =
            v == 0 ? in->bytes() + n * static_cast<size_t>(real(c)) : mine + n * static_cast<size_t>(d);
        const uint8_t *rest = v == 0 ? in->bytes() : first + n * static_cast<size_t>(a);
        t_.send(real(c), first, n * static_cast<size_t>(a), &got);
        if (a < k) t_.send(real(c), rest, n * static_cast<size_t>(k - a), &got);
    }
    t_.progress(call, deadline, [&](int, int id) {
        if (id == 1 && ++in_count == pieces) got = true;
    });
    // After the sends: `out` may alias a part of the root's input they read.
    const uint8_t *own = v == 0 ? in->bytes() + n * static_cast<size_t>(rank_) : mine;
    if (own != out.data && n) std::memmove(out.data, own, n);
}

void Algorithms::pass(Tensor &t, int from, int to, const Call &call, Millis timeout) {
    if (from == to || (rank_ != from && rank_ != to)) return;
    std::lock_guard<TurnLock> lk(mu_);
    auto deadline = deadline_in(timeout);
    if (rank_ == from)
        t_.send(to, t.data, t.nbytes());
    else
        t_.recv(from, t.data, t.nbytes());
    run(call, deadline);
}

void Algorithms::alltoallv(const Tensor &in, Span<size_t> in_counts, Tensor &out, Span<size_t> out_counts,
                           const Call &call, Millis timeout) {
    std::lock_guard<TurnLock> lk(mu_);
    auto deadline = deadline_in(timeout);
    const size_t esz = dtype_size(in.dtype);
    size_t in_total = 0, out_total = 0;
    for (int p = 0; p < size_; ++p) {
        in_total += in_counts[static_cast<size_t>(p)] * esz;
        out_total += out_counts[static_cast<size_t>(p)] * esz;
    }
    const size_t P = static_cast<size_t>(size_);
    const uint8_t *src = in.bytes();
    // One buffer whose parts lie where the parts from each peer go (torch's
    // all_to_all_single with output = input, MPI_IN_PLACE): a pair where
    // both ranks are so swaps its two parts in place (swap_parts); parts
    // that go as messages are sent from copies (`sent_from`), since receives
    // land while sends are still going. Any other overlap sends everything
    // from a copy.
    bool swaps = src == out.bytes();
    for (size_t p = 0; p < P && swaps; ++p) swaps = in_counts[p] == out_counts[p];
    if (!swaps && overlaps(src, in_total, out.data, out_total)) {
        uint8_t *copy = scratch(in_total);
        std::memcpy(copy, src, in_total);
        src = copy;
    }
    uint8_t *copies = nullptr;
    auto sent_from = [&](size_t off, size_t n) -> const uint8_t * {
        if (!swaps) return src + off;
        if (!copies) copies = scratch(in_total);
        std::memcpy(copies + off, src + off, n);
        return copies + off;
    };
    // A pair that moves enough between them reads in place; both ranks of a
    // pair see the same two sizes (or their split check fails), so decide alike.
    // Where the transport reads peers but not cheaply, a pair that moves
    // kSharedProbeBytes or more tells where its parts are all the same, and
    // reads in place if both lie in shared memory (distc_mem_alloc) or on
    // huge pages (fast_to_reach). A pair that cannot (or where one rank
    // swaps and the other does not) sends its parts in a second round
    // (both sides see both Parts).
    const bool reads = t_.copies_in_place_cheaply(), probes = !reads && t_.reads_peers();
    const size_t pair_from = from(kInPlaceBytes), probe_bytes = kSharedProbeBytes;
    bool told = false;
    reads_.assign(P, false);
    told_.assign(P, false);
    pair_skip_.resize(P, 0);
    parts_out_.resize(P);
    parts_in_.resize(P);
    std::vector<size_t> &out_bytes = out_bytes_, &in_bytes = in_bytes_;
    out_bytes.resize(P);
    in_bytes.resize(P);
    size_t ioff = 0, ooff = 0;
    for (int p = 0; p < size_; ++p) {
        size_t ni = in_counts[static_cast<size_t>(p)] * esz, no = out_counts[static_cast<size_t>(p)] * esz;
        out_bytes[size_t(p)] = no;
        in_bytes[size_t(p)] = ni;
        if (p == rank_) {
            if (ni && out.bytes() + ooff != src + ioff) copy_streaming(out.bytes() + ooff, src + ioff, ni);
        } else if ((reads && ni + no >= pair_from) ||
                   (probes && ni + no >= probe_bytes && probes_now(pair_skip_[size_t(p)]))) {
            told_[size_t(p)] = told = true;
            parts_out_[size_t(p)] = {described(src + ioff, ni, !reads), ni, no, swaps};
            t_.send(p, &parts_out_[size_t(p)], sizeof(Part));
            t_.recv(p, &parts_in_[size_t(p)], sizeof(Part), 0);  // id 0: a Part
        } else {
            // A peer that sends another size than we expect is caught by the message header.
            t_.send(p, sent_from(ioff, ni), ni);
            t_.recv(p, out.bytes() + ooff, no);
        }
        ioff += ni;
        ooff += no;
    }
    // Every peer checks the sizes between each pair through this rank's share
    // of a digest of them all: a pair that disagrees fails every rank.
    Call mine = call;
    mine.count = split_digest(rank_, in_bytes, out_bytes);
    t_.progress(mine, deadline, [&](int peer, int id) {
        if (id == 0) check_part(peer, call);  // as it arrives: before the digest's check, which names nobody
    });
    bool any = false;
    if (told) {
        bool sent = false;
        ioff = ooff = 0;
        for (int p = 0; p < size_; ++p) {
            const Part &m = parts_out_[size_t(p)], &t = parts_in_[size_t(p)];
            if (told_[size_t(p)]) {
                const bool shared = reads || (fast_to_reach(m.buf) && fast_to_reach(t.buf));
                if (shared && m.swaps == t.swaps) {
                    reads_[size_t(p)] = any = true;
                } else {
                    if (!shared) pair_skip_[size_t(p)] = kProbeBackoff;
                    t_.send(p, sent_from(ioff, in_bytes[size_t(p)]), in_bytes[size_t(p)]);
                    t_.recv(p, out.bytes() + ooff, out_bytes[size_t(p)]);
                    sent = true;
                }
            }
            ioff += in_bytes[size_t(p)];
            ooff += out_bytes[size_t(p)];
        }
        if (sent) run(call, deadline);
    }
    if (any)
        swaps ? swap_parts(out.bytes(), out_bytes, call, deadline) : read_parts(out.bytes(), out_bytes, call, deadline);
}

void Algorithms::barrier(const Call &call, Millis timeout) {
    std::lock_guard<TurnLock> lk(mu_);
    if (size_ >= kBarrierRoundsRanks && t_.cheap_rounds()) return dissemination(call, deadline_in(timeout));
    sync(call, deadline_in(timeout), 0);
}

void Algorithms::dissemination(const Call &call, Clock::time_point deadline) {
    // Round k: an empty message to rank + 2^k and one from rank - 2^k, sent
    // once the messages of every earlier round came in (done[k]; they come
    // in any order: heard[k]). So a rank returns only once every rank's
    // first message reached it through some chain, and a rank that fails (a
    // peer's message of another call, say) breaks the chains through it: no
    // rank gets through.
    bool heard[32] = {}, done[32] = {true};
    const int64_t n = size_;
    int rounds = 0;
    for (int64_t d = 1; d < n; d *= 2, ++rounds) {
        t_.send(static_cast<int>((rank_ + d) % n), nullptr, 0, &done[rounds]);
        t_.recv(static_cast<int>((rank_ - d + n) % n), nullptr, 0, rounds);
    }
    t_.progress(call, deadline, [&](int, int id) {
        if (id < 0) return;
        heard[id] = true;
        for (int k = 1; k < rounds; ++k) done[k] = done[k - 1] && heard[k - 1];
    });
}

}  // namespace distc

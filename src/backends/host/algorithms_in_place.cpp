// Large collectives over a transport that reads and writes peers' memory
// where it is (shared memory with single copy): every rank tells the others
// where its buffer is, then copies what it needs straight out of their
// buffers, so each byte is copied once instead of into a ring and out
// again. A reduction reads the peers' data in place too, a cache-sized
// block at a time: each rank reduces its own chunk from every rank's
// buffer, in rank order, and (allreduce, reduce) writes each reduced block
// into every peer's buffer (the root's) while it is still in cache, so
// every rank has the same bits. A broadcast's root writes a share of every
// non-root's buffer while they read the rest. Two all-to-all rounds of small messages
// order the steps: the buffers' addresses (nobody reads a peer's buffer
// before every rank's call has been seen to match), then "done". A rank
// returns only once no peer touches its buffer any more; one that fails
// breaks the group, and its peers fail at their next message.
#include <algorithm>
#include <cstring>

#include "backends/host/algorithms.hpp"
#include "core/util/copy_streaming.hpp"
#include "core/util/error.hpp"
#include "core/util/huge_pages.hpp"

namespace distc {

namespace {

// Peers' data is reduced through blocks of this size, which stay in cache.
constexpr size_t kBlockBytes = 128 * 1024;
// A rank waiting for peers that copy in place spins for as long as copying
// what it copied takes at this rate (slower than the kernel's copies here,
// so that a slow peer is still waited for spinning), at most this long.
constexpr size_t kPatientBytesPerUs = 2000, kMaxPatienceUs = 5000;
constexpr size_t kPageBytes = 4096;

}  // namespace

size_t Algorithms::from(From f) const {
    return t_.copies_in_place_cheaply() && t_.cheap_rounds() ? f.cheap : f.otherwise;
}
bool Algorithms::in_place(size_t bytes, size_t least) const { return bytes >= least && t_.reads_peers(); }
bool Algorithms::in_place_everyone(size_t bytes, From f) const {
    return t_.copies_in_place_cheaply() && bytes >= from(f);
}

bool Algorithms::in_place_shared(size_t bytes, From f, size_t size, const void *buffer, size_t n, const Call &call,
                                 Clock::time_point deadline, bool &published) {
    published = false;
    if (in_place_everyone(bytes, f)) return true;
    if (!t_.reads_peers() || size < kSharedProbeBytes || !probes_now(probe_skip_)) return false;
    publish(buffer, n, call, deadline, true);
    published = true;
    bool all = true;
    for (int p = 0; p < size_; ++p) all = all && fast_to_reach(p == rank_ ? mine_ : peer_buf_[size_t(p)]);
    if (!all) probe_skip_ = kProbeBackoff;
    return all;  // else through the rings, where nobody reads the buffers published
}

bool Algorithms::fast_to_reach(const PeerBuffer &b) { return b.region != 0 || b.huge != 0; }

PeerBuffer Algorithms::described(const void *buffer, size_t n, bool say_huge) {
    PeerBuffer b = peer_buffer(buffer, n);
    b.huge = say_huge && b.region == 0 && mostly_on_huge_pages(buffer, n);
    return b;
}

bool Algorithms::probes_now(unsigned &skip) {
    if (skip == 0) return true;
    --skip;
    return false;
}

void Algorithms::swap(const void *mine, size_t stride, void *theirs, size_t n, const Call &call,
                      Clock::time_point deadline) {
    for (int p = 0; p < size_; ++p) {
        if (p == rank_) continue;
        t_.send(p, static_cast<const uint8_t *>(mine) + stride * static_cast<size_t>(p), n);
        t_.recv(p, static_cast<uint8_t *>(theirs) + n * static_cast<size_t>(p), n);
    }
    run(call, deadline);
}

void Algorithms::publish(const void *buffer, size_t n, const Call &call, Clock::time_point deadline, bool say_huge) {
    const size_t P = static_cast<size_t>(size_);
    peer_buf_.resize(P);
    peer_addr_.resize(P);
    mine_ = described(buffer, n, say_huge);
    swap(&mine_, 0, peer_buf_.data(), sizeof mine_, call, deadline);
    for (int p = 0; p < size_; ++p) {
        if (p == rank_) continue;
        peer_addr_[size_t(p)] = peer_buf_[size_t(p)].addr;
        t_.attach_peer(p, peer_buf_[size_t(p)]);
    }
}

void Algorithms::sync(const Call &call, Clock::time_point deadline, size_t copied, const std::vector<bool> *only) {
    for (int p = 0; p < size_; ++p) {
        if (p == rank_ || (only && !(*only)[size_t(p)])) continue;
        t_.send(p, nullptr, 0);
        t_.recv(p, nullptr, 0);
    }
    // A peer that copies as much takes about as long (a rank that finished,
    // or had nothing to copy, waits that long at most): spin through it.
    run(call, deadline, std::chrono::microseconds(std::min<size_t>(copied / kPatientBytesPerUs, kMaxPatienceUs)));
}

void Algorithms::reduce_from_peers(const uint8_t *own, uint8_t *out, size_t off, size_t bytes, DType dt, ReduceOp op,
                                   int push) {
    const size_t esz = dtype_size(dt), block = kBlockBytes / esz * esz;
    ReduceFn fn = reduce_fn(dt, op);
    uint8_t *acc = scratch(2 * block), *in = acc + block;
    for (size_t b = 0; b < bytes; b += block) {
        const size_t len = std::min(block, bytes - b), count = len / esz;
        // Calls use() with rank r's block: our own in place, a peer's where
        // it can be read with loads (under the peer's watch), else copied
        // into `into` first.
        auto with_piece = [&](int r, uint8_t *into, FnRef<void(const uint8_t *)> use) {
            if (r == rank_) return use(own + b);
            const uint64_t at = peer_addr_[size_t(r)] + off + b;
            if (t_.read_peer_directly(r, at, len, use)) return;
            t_.read_peer(r, at, into, len);
            use(into);
        };
        // In rank order, as every other path reduces: the same bits.
        if (size_ == 1) {
            if (out != own) std::memmove(out + b, own + b, len);
        } else {
            with_piece(0, acc, [&](const uint8_t *first) {
                with_piece(1, in, [&](const uint8_t *x) { fn(size_ == 2 ? out + b : acc, first, x, count); });
            });
        }
        for (int r = 2; r < size_; ++r)
            with_piece(r, in, [&](const uint8_t *x) { fn(r == size_ - 1 ? out + b : acc, acc, x, count); });
        // Into the peers' buffers while the block is still in cache. Only
        // this rank reads or writes this chunk of theirs in the call, and it
        // read this block already.
        for (int k = 1; k < size_; ++k) {
            int p = (rank_ + k) % size_;
            if (push == kEveryone || push == p) t_.write_peer(p, peer_addr_[size_t(p)] + off + b, out + b, len);
        }
    }
}

void Algorithms::reduce_in_place(Tensor &t, ReduceOp op, int to, const Call &call, Clock::time_point deadline,
                                 bool published) {
    const size_t esz = dtype_size(t.dtype), P = static_cast<size_t>(size_);
    const size_t me = static_cast<size_t>(rank_), lo = t.numel * me / P * esz, hi = t.numel * (me + 1) / P * esz;
    if (!published) publish(t.data, t.nbytes(), call, deadline);
    // Our chunk of every buffer, reduced into ours and written into theirs
    // (or the root's). Peers read and write only their own chunks of our
    // buffer meanwhile.
    reduce_from_peers(t.bytes() + lo, t.bytes() + lo, lo, hi - lo, t.dtype, op, to);
    sync(call, deadline, t.nbytes());  // every chunk is where it goes; no peer touches our buffer any more
}

void Algorithms::broadcast_in_place(Tensor &t, int root, const Call &call, Clock::time_point deadline) {
    const size_t n = t.nbytes(), P = size_t(size_), m = P - 1;
    // The root, idle otherwise, writes the last 1/P of every non-root's
    // buffer while each non-root reads the rest from the root's: two copies
    // go on at once where there was one (the root's writes pin the
    // non-roots' pages, the readers the root's).
    const size_t split = n * m / P / kPageBytes * kPageBytes;
    publish(t.data, n, call, deadline);
    if (rank_ == root) {
        for (size_t k = 1; k < P; ++k) {  // split < n: every non-root gets a share
            const int p = int((size_t(root) + k) % P);
            t_.write_peer(p, peer_addr_[size_t(p)] + split, t.bytes() + split, n - split);
        }
    } else {
        // A reader of a process's memory takes its page-table lock for every
        // page it pins, so readers that go through the root's buffer side by
        // side mostly wait for each other: each starts at a page of its own
        // (the v-th of m non-roots v/m of the way in) and wraps around.
        const size_t v = (size_t(rank_) + P - size_t(root) - 1) % P;
        const size_t at = std::min(split, split * v / m / kPageBytes * kPageBytes);
        const uint64_t from = peer_addr_[size_t(root)];
        if (split > at) t_.read_peer(root, from + at, t.bytes() + at, split - at);
        if (at) t_.read_peer(root, from, t.data, at);
    }
    sync(call, deadline, n);  // nobody reads the root's buffer, or writes ours, any more
}

void Algorithms::reduce_scatter_in_place(const Tensor &in, Tensor &out, ReduceOp op, const Call &call,
                                         Clock::time_point deadline, bool published) {
    const size_t part = out.nbytes(), off = part * static_cast<size_t>(rank_);
    if (!published) publish(in.data, in.nbytes(), call, deadline);
    reduce_from_peers(in.bytes() + off, out.bytes(), off, part, in.dtype, op, kNobody);
    sync(call, deadline, in.nbytes());  // no peer reads our buffer any more
}

void Algorithms::allgather_in_place(const Tensor &in, Tensor &out, size_t n, const Call &call,
                                    Clock::time_point deadline, bool published) {
    uint8_t *own = out.bytes() + n * static_cast<size_t>(rank_);
    // Peers read our input where the caller has it: lines that no core is
    // writing (our own slot of `out` is written now). Unless it lies in
    // `out`, where our reads may overwrite it: then our slot, filled first.
    const bool inside = overlaps(in.data, n, out.data, out.nbytes());
    if (inside && own != in.data && n) std::memmove(own, in.data, n);
    if (!published) publish(inside ? own : in.data, n, call, deadline);
    // Two ranks take the parts in rank order: both read one input at a time
    // (its owner with memcpy, the peer through the kernel), so its lines
    // come from memory once for the two. With more ranks every peer would
    // pin the same pages at once: each starts at its own part instead.
    const int first = size_ == 2 ? 0 : rank_;
    for (int k = 0; k < size_; ++k) {
        const int p = (first + k) % size_;
        if (p != rank_)
            t_.read_peer(p, peer_addr_[size_t(p)], out.bytes() + n * static_cast<size_t>(p), n);
        else if (!inside && n)
            copy_streaming(own, in.data, n);
    }
    sync(call, deadline, n * static_cast<size_t>(size_ - 1));  // no peer reads our buffer any more
}

void Algorithms::gather_in_place(const Tensor &in, Tensor *out, size_t n, int root, const Call &call,
                                 Clock::time_point deadline) {
    const size_t me = static_cast<size_t>(rank_);
    uint8_t *own = rank_ == root ? out->bytes() + n * me : nullptr;
    // The root's own part goes in while the others write theirs, unless its
    // input lies in `out`, where they may overwrite it: then first.
    const bool first = own && overlaps(in.data, n, out->data, out->nbytes());
    if (first && own != in.data) std::memmove(own, in.data, n);
    publish(own ? out->data : in.data, own ? out->nbytes() : n, call, deadline);
    if (own && !first) copy_streaming(own, in.data, n);
    if (!own) t_.write_peer(root, peer_addr_[size_t(root)] + n * me, in.data, n);
    sync(call, deadline, n);  // every part is in; no peer writes the root's buffer any more
}

void Algorithms::scatter_in_place(const Tensor *in, Tensor &out, size_t n, int root, const Call &call,
                                  Clock::time_point deadline) {
    const size_t me = static_cast<size_t>(rank_);
    const uint8_t *own = rank_ == root ? in->bytes() + n * me : nullptr;
    // The root's own part while the others read theirs, unless its `out`
    // lies in `in`, where they may still read: then last.
    const bool last = own && overlaps(in->data, in->nbytes(), out.data, n);
    publish(own ? in->data : out.data, own ? in->nbytes() : n, call, deadline);
    if (own && !last) copy_streaming(out.data, own, n);
    if (!own) t_.read_peer(root, peer_addr_[size_t(root)] + n * me, out.data, n);
    sync(call, deadline, n);  // no peer reads the root's buffer any more
    if (last && own != out.data) std::memmove(out.data, own, n);
}

void Algorithms::check_part(int p, const Call &call) const {
    // Both ranks of a pair see both sizes, so both catch a split that disagrees.
    const Part &t = parts_in_[size_t(p)], &m = parts_out_[size_t(p)];
    if (t.bytes == m.expect && t.expect == m.bytes) return;
    fail(DISTC_EINVAL, "rank " + std::to_string(p) + " sends " + std::to_string(t.bytes) + " bytes to rank " +
                           std::to_string(rank_) + " and expects " + std::to_string(t.expect) + " in " +
                           describe(call) + ", where rank " + std::to_string(rank_) + " expects " +
                           std::to_string(m.expect) + " and sends " + std::to_string(m.bytes) +
                           ": the ranks' split sizes disagree");
}

void Algorithms::read_parts(uint8_t *dst, const std::vector<size_t> &out_bytes, const Call &call,
                            Clock::time_point deadline) {
    // From the next rank on, as allgather reads: ranks that read the same
    // peer side by side wait for each other on its page-table lock.
    size_t at = 0, copied = 0;  // where peer p's part goes in `dst`
    for (int p = 0; p <= rank_; ++p) at += out_bytes[size_t(p)];
    for (int k = 1; k < size_; ++k) {
        const int p = (rank_ + k) % size_;
        if (p == 0) at = 0;
        if (reads_[size_t(p)] && out_bytes[size_t(p)]) {
            t_.attach_peer(p, parts_in_[size_t(p)].buf);
            t_.read_peer(p, parts_in_[size_t(p)].buf.addr, dst + at, out_bytes[size_t(p)]);
            copied += out_bytes[size_t(p)];
        }
        at += out_bytes[size_t(p)];
    }
    sync(call, deadline, copied, &reads_);  // no peer reads our input any more
}

void Algorithms::swap_parts(uint8_t *buf, const std::vector<size_t> &bytes, const Call &call,
                            Clock::time_point deadline) {
    // Each rank of a pair trades one half of the two parts, the lower rank
    // the first: no byte of either buffer is touched by both. A block at a
    // time through a cache-sized copy: the peer's bytes out, ours in, the
    // peer's into ours. From the next rank on, as read_parts.
    std::vector<size_t> at(bytes.size(), 0);  // where the part for (and from) each peer lies
    for (size_t p = 1; p < bytes.size(); ++p) at[p] = at[p - 1] + bytes[p - 1];
    uint8_t *tmp = scratch(kBlockBytes);
    size_t copied = 0;
    for (int k = 1; k < size_; ++k) {
        const int p = (rank_ + k) % size_;
        const size_t n = bytes[size_t(p)], half = n / 2 / kPageBytes * kPageBytes;
        if (!reads_[size_t(p)] || !n) continue;
        t_.attach_peer(p, parts_in_[size_t(p)].buf);
        const uint64_t theirs = parts_in_[size_t(p)].buf.addr;
        uint8_t *mine = buf + at[size_t(p)];
        const size_t lo = rank_ < p ? 0 : half, hi = rank_ < p ? half : n;
        for (size_t b = lo; b < hi; b += kBlockBytes) {
            const size_t len = std::min(kBlockBytes, hi - b);
            t_.read_peer(p, theirs + b, tmp, len);
            t_.write_peer(p, theirs + b, mine + b, len);
            std::memcpy(mine + b, tmp, len);
        }
        copied += 2 * (hi - lo);
    }
    sync(call, deadline, copied, &reads_);  // no peer touches our buffer any more
}

}  // namespace distc

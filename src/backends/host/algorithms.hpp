// The host backend's collectives over one transport (transport.hpp): each
// posts its messages to every peer and lets the transport move them all at
// once, so a message of any size flows and a receive can trigger work (a
// reduction) while other transfers are still moving. One collective at a
// time per group.
//
// Results are the same bits on every rank: small reductions are summed in
// rank order everywhere, large ones are reduce-scatter then allgather, each
// chunk reduced once, by its owner, in rank order.
//
// Where rounds are cheap (Transport::cheap_rounds), barrier, small
// broadcast and small scatter go in log2(n) steps instead (algorithms.cpp).
//
// Where the transport reads peers' memory (Transport::reads_peers), large
// broadcast, gather and scatter copy straight from and to the peers'
// buffers instead (algorithms_in_place.cpp), and so do allreduce, reduce,
// reduce_scatter, allgather and all-to-all where it does so cheaply
// (Transport::copies_in_place_cheaply).
#pragma once

#include <memory>
#include <mutex>
#include <vector>

#include "backends/host/transport/transport.hpp"
#include "core/util/turn_lock.hpp"
#include "core/pg/tensor.hpp"

namespace distc {

class Algorithms {
    static constexpr int kEveryone = -1, kNobody = -2;  // where a reduction's result goes (or a rank)

public:
    Algorithms(Transport &t, int rank, int size) : t_(t), rank_(rank), size_(size) {}

    void allreduce(Tensor &t, ReduceOp op, const Call &call, Millis timeout) {
        reduce_to(t, op, kEveryone, call, timeout);
    }
    void broadcast(Tensor &t, int root, const Call &call, Millis timeout);
    void reduce(Tensor &t, int root, ReduceOp op, const Call &call, Millis timeout) {
        reduce_to(t, op, root, call, timeout);
    }
    void allgather(const Tensor &in, Tensor &out, const Call &call, Millis timeout);
    // `out` / `in` (size x the part, in rank order) only on the root.
    void gather(const Tensor &in, Tensor *out, int root, const Call &call, Millis timeout);
    void scatter(const Tensor *in, Tensor &out, int root, const Call &call, Millis timeout);
    // Counts in elements, per peer in rank order; parts packed in that order in `in` and `out`.
    void alltoallv(const Tensor &in, Span<size_t> in_counts, Tensor &out, Span<size_t> out_counts, const Call &call,
                   Millis timeout);
    // `in` holds size parts, in rank order, and is only read; `out` (one
    // part, not inside `in`) gets this rank's part of their reduction.
    void reduce_scatter(const Tensor &in, Tensor &out, ReduceOp op, const Call &call, Millis timeout);
    void barrier(const Call &call, Millis timeout);
    // Rank `from`'s `t` into rank `to`'s; the other ranks return at once.
    void pass(Tensor &t, int from, int to, const Call &call, Millis timeout);

private:
    // `patience`: see Transport::progress.
    void run(const Call &call, Clock::time_point deadline, std::chrono::microseconds patience = {});
    // A reduction's result on every rank, on `to` only, or (reduce-scatter) each rank's part on its rank.
    void reduce_to(Tensor &t, ReduceOp op, int to, const Call &call, Millis timeout);
    // Every rank's copy of t, reduced in rank order into t on every rank or on `to` only.
    void reduce_direct(Tensor &t, ReduceOp op, int to, const Call &call, Clock::time_point deadline);
    // Reduce-scatter in segments, each chunk reduced by its owner as its pieces
    // arrive, then the chunks gathered to every rank, to `to` only, or to
    // nobody. With `dest` (to nobody only), this rank's chunk of the result
    // goes there and `t` is only read.
    void reduce_chunked(Tensor &t, ReduceOp op, int to, const Call &call, Clock::time_point deadline,
                        uint8_t *dest = nullptr);
    // Scatter from the root, then every rank forwards its piece to the others
    // as it arrives (more than two ranks, large messages).
    void broadcast_chunked(Tensor &t, int root, const Call &call, Clock::time_point deadline);
    // Down a binomial tree from the root (algorithms.cpp: kTreeRanks).
    void broadcast_tree(Tensor &t, int root, const Call &call, Clock::time_point deadline);
    void scatter_tree(const Tensor *in, Tensor &out, size_t n, int root, const Call &call, Clock::time_point deadline);
    // Barrier in ceil(log2(size)) rounds of one message each way.
    void dissemination(const Call &call, Clock::time_point deadline);
    uint8_t *scratch(size_t n);

    // In place (algorithms_in_place.cpp): allgather from this many bytes a
    // rank reads from its peers in all, all-to-all from what a pair moves
    // both ways; reductions (allreduce, reduce, reduce_scatter) and broadcast
    // from their input's size; gather and scatter from each rank's part.
    // Below these, the paths through the rings measured as fast or faster
    // (the two rounds of messages cost more than the copy they save). A
    // broadcast of 2 ranks, where both copy at once, gains from less.
    struct From {
        size_t cheap, otherwise;
    };
    // `cheap` where every rank has a core and the kernel copies fast: the
    // rounds cost less there, and single copy won from the smaller sizes
    // (measured with 2 ranks: bench/results/shm_in_place_cheap_ab.txt and
    // shm_gather_parts_ab.txt). With more ranks than cores the rounds wait
    // for ranks to be scheduled, and the rings were faster up to the larger.
    static constexpr From kInPlaceBytes{16 * 1024, 64 * 1024}, kInPlaceReduceBytes{32 * 1024, 128 * 1024},
        kInPlaceBroadcastPairBytes{32 * 1024, 128 * 1024}, kInPlacePartBytes{32 * 1024, 128 * 1024};
    // A broadcast of more ranks: `cheap` wherever the kernel copies fast,
    // even with more ranks than cores, where its non-roots' reads took
    // 0.48-0.89 of the chunked rings' time for 256 KiB-2 MiB (3 and 4 ranks
    // on 2 cores, bench/results/shm_broadcast_from_ab.txt); where it copies
    // slowly only from 4 MiB (shm_broadcast_ab.txt).
    static constexpr From kInPlaceBroadcastBytes{256 * 1024, 4096 * 1024};
    size_t from(From f) const;
    bool in_place(size_t bytes, size_t least) const;
    // Where every rank copies anyway: only where the transport copies in
    // place cheaply (Transport::copies_in_place_cheaply).
    bool in_place_everyone(size_t bytes, From f) const;
    // Where it reads peers' memory but not cheaply (the kernel copies
    // slowly), ranks whose buffers all lie in shared memory (distc_mem_alloc)
    // or on huge pages still copy in place, with loads and stores or the
    // kernel's fast copy of huge pages: from this size (where the rings'
    // calls take hundreds of times the round) they publish their buffers
    // first, and so learn alike whether all of them do. With more ranks
    // than cores too: there in place took 0.25-0.52 of the rings' time
    // from 2 MiB shared and 0.56-0.69 on huge pages, and ordinary buffers'
    // calls 0.89-1.05 (4 ranks on 2 cores, bench/results/shm_probe_4ranks_ab.txt).
    static constexpr size_t kSharedProbeBytes = 1024 * 1024;
    // A probe that finds a buffer not shared costs the next kProbeBackoff
    // calls that could probe theirs (all ranks saw the same buffers, so they
    // skip alike; all-to-all counts per pair): a caller that never uses
    // shared memory then pays one round in that many calls.
    static constexpr unsigned kProbeBackoff = 16;
    // in_place_everyone (of `bytes`), or else that probe, from the call's
    // `size` as nccl-tests counts it (allgather: its output; all-to-all: what
    // a pair moves both ways). Sets `published` where the probe published
    // `buffer` (`n` bytes): the path in place must not again.
    bool in_place_shared(size_t bytes, From f, size_t size, const void *buffer, size_t n, const Call &call,
                         Clock::time_point deadline, bool &published);
    // Whether a probe goes ahead, or (counting one down) `skip` says it backs off.
    static bool probes_now(unsigned &skip);
    // Sends every peer `n` bytes at mine + p * stride and receives each
    // peer's at theirs + p * n, in one run.
    void swap(const void *mine, size_t stride, void *theirs, size_t n, const Call &call, Clock::time_point deadline);
    // An empty message to and from every peer (`only`: those marked).
    // After `copied` bytes of copies in place, which peers may still be making.
    void sync(const Call &call, Clock::time_point deadline, size_t copied, const std::vector<bool> *only = nullptr);
    // Tells the peers where this rank's buffer (the `n` bytes they may touch)
    // is (with `say_huge`, whether it lies on huge pages); theirs land in
    // peer_addr_ and peer_buf_, and the transport may map their memory.
    void publish(const void *buffer, size_t n, const Call &call, Clock::time_point deadline, bool say_huge = false);
    // `n` bytes at `buffer` as peers see them; with `say_huge`, whether they
    // lie on huge pages (a page-table query: only where it decides something).
    static PeerBuffer described(const void *buffer, size_t n, bool say_huge);
    // Whether peers copy a buffer fast where the kernel copies ordinary
    // memory slowly: in shared memory (memcpy), or on huge pages (the
    // kernel pins those several times faster).
    static bool fast_to_reach(const PeerBuffer &b);
    // Bytes [off, off + bytes) of every rank's buffer (own: ours), reduced
    // in rank order into `out` and into the buffers of `push` (kEveryone, a
    // rank, or kNobody).
    void reduce_from_peers(const uint8_t *own, uint8_t *out, size_t off, size_t bytes, DType dt, ReduceOp op, int push);
    // The reduction into every rank's `t` (to: kEveryone) or the root's.
    // Each publishes its buffer first, unless `published` (in_place_shared).
    void reduce_in_place(Tensor &t, ReduceOp op, int to, const Call &call, Clock::time_point deadline,
                         bool published = false);
    // Every non-root copies the root's buffer.
    void broadcast_in_place(Tensor &t, int root, const Call &call, Clock::time_point deadline);
    void reduce_scatter_in_place(const Tensor &in, Tensor &out, ReduceOp op, const Call &call,
                                 Clock::time_point deadline, bool published = false);
    void allgather_in_place(const Tensor &in, Tensor &out, size_t n, const Call &call, Clock::time_point deadline,
                            bool published = false);
    // Each non-root writes its part into the root's `out` (gather), or reads
    // it out of the root's `in` (scatter), all at once; the root copies its own.
    void gather_in_place(const Tensor &in, Tensor *out, size_t n, int root, const Call &call,
                         Clock::time_point deadline);
    void scatter_in_place(const Tensor *in, Tensor &out, size_t n, int root, const Call &call,
                          Clock::time_point deadline);
    // All-to-all's pairs marked in told_: each side sends the other a Part
    // (where its bytes for it are), checked as it arrives; the pairs that
    // then read in place (reads_) copy the peers' bytes into `dst`
    // (read_parts), or where both ranks' buffers are in place, trade their
    // two parts (swap_parts: `buf`'s part for each peer is where the peer's
    // part goes).
    struct Part {
        PeerBuffer buf;          // where this rank's part for the peer is
        uint64_t bytes, expect;  // its size, and what this rank expects back
        uint64_t swaps;          // whether this rank's input is its output
    };
    void check_part(int peer, const Call &call) const;
    void read_parts(uint8_t *dst, const std::vector<size_t> &out_bytes, const Call &call, Clock::time_point deadline);
    void swap_parts(uint8_t *buf, const std::vector<size_t> &bytes, const Call &call, Clock::time_point deadline);

    Transport &t_;
    int rank_, size_;
    TurnLock mu_;                         // one operation on the wire at a time; guards what follows
    std::unique_ptr<uint8_t[]> scratch_;  // kept between collectives: no page faults per call
    size_t scratch_cap_ = 0;
    std::unique_ptr<bool[]> reduced_;   // per segment of this rank's chunk: ready to go on (gates sends)
    std::vector<int> arrived_;          // per segment: peers whose piece is in
    std::vector<uint64_t> peer_addr_;   // in place: where each peer's buffer is
    std::vector<PeerBuffer> peer_buf_;  // and what it published
    PeerBuffer mine_;                   // what this rank published last
    std::vector<Part> parts_out_, parts_in_;
    std::vector<bool> told_;           // all-to-all: the pairs that sent each other Parts
    std::vector<bool> reads_;          // and those of them that read in place
    unsigned probe_skip_ = 0;          // in_place_shared's probes still to skip (kProbeBackoff)
    std::vector<unsigned> pair_skip_;  // and all-to-all's, per peer
    std::vector<size_t> out_bytes_, in_bytes_;
};

}  // namespace distc

// The host backend's collectives over one transport (transport.hpp): each
// posts its messages to every peer and lets the transport move them all at
// once, so a message of any size flows and a receive can trigger work (a
// reduction) while other transfers are still moving. One collective at a
// time per group.
//
// Results are the same bits on every rank: small reductions are summed in
// rank order everywhere, large ones are reduce-scatter then allgather, each
// chunk reduced once, by its owner, in rank order.
#pragma once

#include <memory>
#include <mutex>
#include <vector>

#include "backends/host/transport/transport.hpp"
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
    void alltoallv(const Tensor &in, const std::vector<size_t> &in_counts, Tensor &out,
                   const std::vector<size_t> &out_counts, const Call &call, Millis timeout);
    // `in` holds size parts, in rank order, and is only read; `out` (one
    // part, not inside `in`) gets this rank's part of their reduction.
    void reduce_scatter(const Tensor &in, Tensor &out, ReduceOp op, const Call &call, Millis timeout);
    void barrier(const Call &call, Millis timeout);
    // Rank `from`'s `t` into rank `to`'s; the other ranks return at once.
    void pass(Tensor &t, int from, int to, const Call &call, Millis timeout);

private:
    void run(const Call &call, Clock::time_point deadline);
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
    uint8_t *scratch(size_t n);

    Transport &t_;
    int rank_, size_;
    std::mutex mu_;                       // one operation on the wire at a time; guards what follows
    std::unique_ptr<uint8_t[]> scratch_;  // kept between collectives: no page faults per call
    size_t scratch_cap_ = 0;
    std::unique_ptr<bool[]> reduced_;  // per segment of this rank's chunk: ready to go on (gates sends)
    std::vector<int> arrived_;         // per segment: peers whose piece is in
};

}  // namespace distc

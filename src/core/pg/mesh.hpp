// The group's own TCP mesh, driven by the calling thread. Gloo hands every
// message to its event-loop thread and wakes the caller with a condition
// variable: two thread wake-ups per hop, tens of microseconds each on this
// kind of machine, which is all an 8-byte allreduce costs. The mesh keeps one
// connection per peer, moves bytes from the thread that called (spinning
// briefly before it sleeps), and interleaves all peers' sends and receives so
// a message of any size flows (mesh_exchange.hpp). Collectives up to a size
// threshold take it (by operation and size only, so every rank picks the same
// path); larger ones go to Gloo's algorithms.
//
// Results are the same bits on every rank: small reductions are summed in
// rank order everywhere, large ones are reduce-scatter then allgather, each
// chunk reduced once, by its owner, in rank order.
#pragma once

#include <chrono>
#include <memory>
#include <mutex>
#include <vector>

#include "core/pg/mesh_exchange.hpp"
#include "core/pg/tensor.hpp"
#include "core/store/store.hpp"
#include "core/util/socket.hpp"

namespace distc {

class Mesh {
    static constexpr int kEveryone = -1, kNobody = -2;  // where a reduction's result goes (or a rank)

public:
    // Connects to every peer through `store` (the group's key space).
    Mesh(Store &store, int rank, int size, Millis timeout);
    ~Mesh();

    // Collectives whose largest message is up to this many bytes take the
    // mesh (DISTC_MESH_BYTES: by default every size; 0 turns the mesh off).
    static size_t limit();
    static constexpr int64_t kEverySize = int64_t(1) << 62;
    // Collectives whose message sizes differ between ranks (uneven all-to-all)
    // can only take the mesh when every size does: ranks must agree on the path.
    static bool takes_every_size() { return limit() == static_cast<size_t>(kEverySize); }

    void allreduce(Tensor &t, ReduceOp op, const Call &call, Millis timeout) { reduce_to(t, op, kEveryone, call, timeout); }
    void broadcast(Tensor &t, int root, const Call &call, Millis timeout);
    void reduce(Tensor &t, int root, ReduceOp op, const Call &call, Millis timeout) { reduce_to(t, op, root, call, timeout); }
    void allgather(const Tensor &in, Tensor &out, const Call &call, Millis timeout);
    // `out` / `in` (size x the part, in rank order) only on the root.
    void gather(const Tensor &in, Tensor *out, int root, const Call &call, Millis timeout);
    void scatter(const Tensor *in, Tensor &out, int root, const Call &call, Millis timeout);
    // Counts in elements, per peer in rank order; parts packed in that order in `in` and `out`.
    void alltoallv(const Tensor &in, const std::vector<size_t> &in_counts, Tensor &out,
                   const std::vector<size_t> &out_counts, const Call &call, Millis timeout);
    // `all` holds size parts; on return this rank's part of it holds their reduction.
    void reduce_scatter(Tensor &all, ReduceOp op, const Call &call, Millis timeout) {
        reduce_to(all, op, kNobody, call, timeout);
    }
    void barrier(const Call &call, Millis timeout);

    void abort();  // shuts every socket down: waits in flight fail at once

private:
    void run(const Call &call, Clock::time_point deadline);
    // A reduction's result on every rank, on `to` only, or (reduce-scatter) each rank's part on its rank.
    void reduce_to(Tensor &t, ReduceOp op, int to, const Call &call, Millis timeout);
    // Every rank's copy of t, reduced in rank order into t on every rank or on `to` only.
    void reduce_direct(Tensor &t, ReduceOp op, int to, const Call &call, Clock::time_point deadline);
    // Reduce-scatter in segments, each chunk reduced by its owner as its pieces
    // arrive, then the chunks gathered to every rank, to `to` only, or to nobody.
    void reduce_chunked(Tensor &t, ReduceOp op, int to, const Call &call, Clock::time_point deadline);
    // Scatter from the root, then every rank forwards its piece to the others
    // as it arrives (more than two ranks, large messages).
    void broadcast_chunked(Tensor &t, int root, const Call &call, Clock::time_point deadline);
    uint8_t *scratch(size_t n);
    std::string peer_name(int peer) const { return "rank " + std::to_string(peer); }

    int rank_, size_;
    std::vector<Fd> socks_;  // by peer rank; invalid for our own rank
    std::mutex mu_;          // one operation on the wire at a time; guards what follows
    std::chrono::microseconds spin_;
    MeshExchange x_;
    std::unique_ptr<uint8_t[]> scratch_;  // kept between collectives: no page faults per call
    size_t scratch_cap_ = 0;
    std::unique_ptr<bool[]> reduced_;  // per segment of this rank's chunk: ready to go on (gates sends)
    std::vector<int> arrived_;           // per segment: peers whose piece is in
};

}  // namespace distc

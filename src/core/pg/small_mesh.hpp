// The small-message path. Gloo hands every message to its event-loop thread
// and wakes the caller with a condition variable: two thread wake-ups per hop,
// tens of microseconds each on this kind of machine, which is all an 8-byte
// allreduce costs. For messages up to a threshold the group instead keeps its
// own full mesh of TCP connections, used by the calling thread itself, which
// spins briefly before it sleeps. Every rank picks this path by the same rule
// (operation and size only), so ranks never disagree on which path a
// collective takes. Results are reduced in rank order, so every rank gets the
// same bits.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <vector>

#include "core/pg/tensor.hpp"
#include "core/store/store.hpp"
#include "core/util/socket.hpp"

namespace distc {

class SmallMesh {
public:
    // Connects to every peer through `store` (the group's key space).
    SmallMesh(Store &store, int rank, int size, Millis timeout);
    ~SmallMesh();

    // Messages up to this many bytes take the mesh (DISTC_SMALL_MSG_BYTES,
    // default and at most kMaxLimit; 0 turns the mesh off).
    static size_t limit();
    static constexpr int64_t kMaxLimit = 64 * 1024;

    void allreduce(Tensor &t, ReduceOp op, uint32_t seq, Millis timeout);
    void broadcast(Tensor &t, int root, uint32_t seq, Millis timeout);
    void reduce(Tensor &t, int root, ReduceOp op, uint32_t seq, Millis timeout);
    void allgather(const Tensor &in, Tensor &out, uint32_t seq, Millis timeout);
    // `out` / `in` (size x the part, in rank order) only on the root.
    void gather(const Tensor &in, Tensor *out, int root, uint32_t seq, Millis timeout);
    void scatter(const Tensor *in, Tensor &out, int root, uint32_t seq, Millis timeout);
    // Every rank sends `chunk` bytes to each rank (in rank order in `in` and `out`).
    void alltoall(const Tensor &in, Tensor &out, size_t chunk, uint32_t seq, Millis timeout);
    void barrier(uint32_t seq, Millis timeout);

    void abort();  // shuts every socket down: waits in flight fail at once

private:
    void send(int peer, uint32_t seq, const void *p, size_t n, Clock::time_point deadline);
    void recv(int peer, uint32_t seq, void *p, size_t n, Clock::time_point deadline);
    // Receives every peer's copy of t's bytes and reduces all of them, in rank order, into t.
    void collect_and_reduce(Tensor &t, ReduceOp op, uint32_t seq, Clock::time_point deadline);
    std::string peer_name(int peer) const { return "rank " + std::to_string(peer); }

    int rank_, size_;
    std::vector<Fd> socks_;  // by peer rank; invalid for our own rank
    std::mutex mu_;          // one operation on the wire at a time
    std::chrono::microseconds spin_;
};

}  // namespace distc

// Collectives of a group that spans hosts, where ranks share memory inside
// each host: shared memory among a host's ranks, the TCP mesh among one
// leader per host (its first rank), shared memory again to fan out; a
// leader carries its host's parts to the other leaders as one block. Every
// rank gets the same bits: the leaders' result. A sum adds each host's
// ranks in rank order, then the hosts' partial sums in host order, so for
// floating point it may differ in the last bits from a flat run, which adds
// all ranks in rank order.
#pragma once

#include <memory>
#include <vector>

#include "backends/host/algorithms.hpp"
#include "backends/host/transport/shm/locality.hpp"
#include "backends/host/transport/subset_transport.hpp"
#include "backends/host/transport/transport.hpp"

namespace distc {

class Hierarchy {
public:
    // `loc`: which host each rank is on; `local`: the transport among this
    // rank's host (null when it is alone there); `mesh`: the group's TCP mesh.
    Hierarchy(int rank, const Locality &loc, Transport *local, Transport &mesh);

    void allreduce(Tensor &t, ReduceOp op, const Call &call, Millis timeout);
    // The result on `root` only; other ranks' `t` is clobbered (pass a copy).
    void reduce(Tensor &t, int root, ReduceOp op, const Call &call, Millis timeout);
    // `out`: every rank's `in`, in rank order.
    void allgather(const Tensor &in, Tensor &out, const Call &call, Millis timeout);
    void broadcast(Tensor &t, int root, const Call &call, Millis timeout);
    // As Algorithms' (algorithms.hpp): `out` / `in` only on the root.
    void gather(const Tensor &in, Tensor *out, int root, const Call &call, Millis timeout);
    void scatter(const Tensor *in, Tensor &out, int root, const Call &call, Millis timeout);
    // `in` (every rank's part, in rank order) is only read; `out` may alias this rank's part.
    void reduce_scatter(const Tensor &in, Tensor &out, ReduceOp op, const Call &call, Millis timeout);
    // Counts in elements, per rank in rank order, as Algorithms::alltoallv's.
    // False: nothing was moved, and the caller runs the flat mesh's
    // all-to-all instead, as every rank's call does (the leaders decide, once
    // they know the counts between their hosts: see kHierAlltoallBytes).
    bool alltoallv(const Tensor &in, Span<size_t> in_counts, Tensor &out, Span<size_t> out_counts, const Call &call,
                   Millis timeout);
    // Above this many bytes between two hosts (both ways), an all-to-all
    // takes the flat mesh: sending every byte through the leaders then costs
    // more than the messages it saves (bench/compare --hosts 2 --ops
    // alltoall). Only a group of two hosts decides so: its leaders both know
    // that one volume, so they agree without a word more.
    static constexpr size_t kHierAlltoallBytes = 64 * 1024;
    void barrier(const Call &call, Millis timeout);
    bool same_host(int rank) const { return host_[static_cast<size_t>(rank)] == my_host_; }

private:
    int local_index(int rank) const;  // among its host's ranks
    // Parts of `n` bytes between rank order and host blocks (each host's
    // parts in its rank order, padded to the fullest host's).
    void to_rank_order(const uint8_t *blocks, size_t n, uint8_t *ranked) const;
    void to_blocks(const uint8_t *ranked, size_t n, uint8_t *blocks) const;
    // copy(offset in the blocks, offset in rank order) for every rank's part.
    template <typename F>
    void each_part(size_t n, F &&copy) const;
    size_t mates() const { return members_[static_cast<size_t>(my_host_)].size(); }  // ranks on this host
    int rank_;
    std::vector<int> host_;
    std::vector<std::vector<int>> members_;  // by host: its ranks, in rank order
    int most_ = 0;                           // ranks on the fullest host
    bool contiguous_ = false;                // host h has ranks h*most_ .. h*most_+most_-1, every host most_ of them
    int my_host_;
    bool leader_;
    std::unique_ptr<Algorithms> local_;  // among this host's ranks, if more than one
    std::unique_ptr<SubsetTransport> leaders_mesh_;
    std::unique_ptr<Algorithms> leaders_;  // among the hosts' leaders, on a leader of a group of hosts
};

}  // namespace distc

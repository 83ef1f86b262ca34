#include "backends/host/hierarchy.hpp"

#include <algorithm>
#include <cstring>

namespace distc {

namespace {

// What is left of a collective's timeout for its next phase.
Millis left(Clock::time_point deadline) {
    return std::max(Millis(1), std::chrono::duration_cast<Millis>(deadline - Clock::now()));
}

}  // namespace

Hierarchy::Hierarchy(int rank, const Locality &loc, Transport *local, Transport &mesh) :
    host_(loc.host), my_host_(host_[static_cast<size_t>(rank)]) {
    std::vector<int> leaders = loc.leaders(), mine = loc.peers_of(rank);
    leader_ = mine[0] == rank;
    host_size_.assign(leaders.size(), 0);
    for (int h : host_) most_ = std::max(most_, ++host_size_[static_cast<size_t>(h)]);
    contiguous_ = host_.size() == host_size_.size() * static_cast<size_t>(most_);
    for (size_t r = 0; r < host_.size(); ++r) contiguous_ = contiguous_ && host_[r] == static_cast<int>(r) / most_;
    if (local) local_ = std::make_unique<Algorithms>(*local, local_index(rank), static_cast<int>(mine.size()));
    if (leader_ && leaders.size() > 1) {
        int me = static_cast<int>(std::find(leaders.begin(), leaders.end(), rank) - leaders.begin());
        int n = static_cast<int>(leaders.size());
        leaders_mesh_ = std::make_unique<SubsetTransport>(mesh, std::move(leaders));
        leaders_ = std::make_unique<Algorithms>(*leaders_mesh_, me, n);
    }
}

int Hierarchy::local_index(int rank) const {
    int i = 0;
    for (int r = 0; r < rank; ++r) i += host_[static_cast<size_t>(r)] == host_[static_cast<size_t>(rank)];
    return i;
}

void Hierarchy::allreduce(Tensor &t, ReduceOp op, const Call &call, Millis timeout) {
    auto deadline = Clock::now() + timeout;
    if (local_) local_->reduce(t, 0, op, call, left(deadline));
    if (leaders_) leaders_->allreduce(t, op, call, left(deadline));
    if (local_) local_->broadcast(t, 0, call, left(deadline));
}

void Hierarchy::reduce(Tensor &t, int root, ReduceOp op, const Call &call, Millis timeout) {
    auto deadline = Clock::now() + timeout;
    const int root_host = host_[static_cast<size_t>(root)];
    if (local_) local_->reduce(t, 0, op, call, left(deadline));
    if (leaders_) leaders_->reduce(t, root_host, op, call, left(deadline));
    // From the root host's leader to the root, when they differ.
    if (local_ && my_host_ == root_host && local_index(root) != 0) local_->broadcast(t, 0, call, left(deadline));
}

void Hierarchy::allgather(const Tensor &in, Tensor &out, const Call &call, Millis timeout) {
    auto deadline = Clock::now() + timeout;
    const size_t n = in.nbytes(), hosts = host_size_.size(), block = n * static_cast<size_t>(most_);
    auto bytes = [](void *p, size_t len) {
        Tensor b;
        b.data = p;
        b.numel = b.dim0 = len;
        b.dtype = DType::UInt8;
        return b;
    };
    // Each host's parts gather at its leader (in the host's rank order), the
    // leaders exchange their hosts' blocks (padded to the fullest host's),
    // each leader puts them in rank order, and shares them with its host.
    // When hosts hold equal runs of consecutive ranks (the usual layout),
    // the blocks are the output's own pieces: gathered and exchanged in
    // place, with no scratch to fault in and no reordering copy.
    if (leader_ && contiguous_) {
        Tensor own = bytes(out.bytes() + block * static_cast<size_t>(my_host_), block);
        if (local_)
            local_->gather(bytes(in.data, n), &own, 0, call, left(deadline));
        else if (n)
            std::memcpy(own.data, in.data, n);
        if (leaders_) {
            Tensor all = bytes(out.data, block * hosts);
            leaders_->allgather(own, all, call, left(deadline));
        }
    } else if (leader_) {
        Scratch blocks(DType::UInt8, block * hosts);
        uint8_t *mine = blocks.t.bytes() + block * static_cast<size_t>(my_host_);
        Tensor own = bytes(mine, n * static_cast<size_t>(host_size_[static_cast<size_t>(my_host_)]));
        if (local_)
            local_->gather(bytes(in.data, n), &own, 0, call, left(deadline));
        else if (n)
            std::memcpy(mine, in.data, n);
        if (leaders_) {
            Tensor all = blocks.t, me = bytes(mine, block);
            leaders_->allgather(me, all, call, left(deadline));
        }
        std::vector<size_t> next(hosts, 0);
        for (size_t r = 0; r < host_.size(); ++r) {
            size_t h = static_cast<size_t>(host_[r]);
            if (n) std::memcpy(out.bytes() + n * r, blocks.t.bytes() + block * h + n * next[h]++, n);
        }
    } else {
        local_->gather(bytes(in.data, n), nullptr, 0, call, left(deadline));
    }
    if (local_) {
        Tensor all = bytes(out.data, out.nbytes());
        local_->broadcast(all, 0, call, left(deadline));
    }
}

void Hierarchy::broadcast(Tensor &t, int root, const Call &call, Millis timeout) {
    auto deadline = Clock::now() + timeout;
    const int root_host = host_[static_cast<size_t>(root)];
    // The root's host first (its leader gets the data), then the leaders,
    // then every other host from its leader.
    if (local_ && my_host_ == root_host) local_->broadcast(t, local_index(root), call, left(deadline));
    if (leaders_) leaders_->broadcast(t, root_host, call, left(deadline));
    if (local_ && my_host_ != root_host) local_->broadcast(t, 0, call, left(deadline));
}

void Hierarchy::barrier(const Call &call, Millis timeout) {
    auto deadline = Clock::now() + timeout;
    if (local_) local_->barrier(call, left(deadline));
    if (leaders_) leaders_->barrier(call, left(deadline));
    if (local_) local_->barrier(call, left(deadline));
}

}  // namespace distc

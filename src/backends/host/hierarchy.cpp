#include "backends/host/hierarchy.hpp"

#include <algorithm>
#include <cstring>
#include <string>

namespace distc {

namespace {

Tensor bytes(void *p, size_t len) {
    Tensor b;
    b.data = p;
    b.numel = b.dim0 = len;
    b.dtype = DType::UInt8;
    return b;
}

Tensor typed(void *p, DType dt, size_t numel) {
    Tensor t = bytes(p, numel);
    t.dtype = dt;
    return t;
}

}  // namespace

Hierarchy::Hierarchy(int rank, const Locality &loc, Transport *local, Transport &mesh) :
    rank_(rank), host_(loc.host), my_host_(host_[static_cast<size_t>(rank)]) {
    std::vector<int> leaders = loc.leaders(), mine = loc.peers_of(rank);
    leader_ = mine[0] == rank;
    members_.resize(leaders.size());
    for (size_t r = 0; r < host_.size(); ++r) members_[static_cast<size_t>(host_[r])].push_back(static_cast<int>(r));
    for (const auto &m : members_) most_ = std::max(most_, static_cast<int>(m.size()));
    contiguous_ = host_.size() == members_.size() * static_cast<size_t>(most_);
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
    auto deadline = deadline_in(timeout);
    if (local_) local_->reduce(t, 0, op, call, left_of(deadline));
    if (leaders_) leaders_->allreduce(t, op, call, left_of(deadline));
    if (local_) local_->broadcast(t, 0, call, left_of(deadline));
}

void Hierarchy::reduce(Tensor &t, int root, ReduceOp op, const Call &call, Millis timeout) {
    auto deadline = deadline_in(timeout);
    const int root_host = host_[static_cast<size_t>(root)];
    if (local_) local_->reduce(t, 0, op, call, left_of(deadline));
    if (leaders_) leaders_->reduce(t, root_host, op, call, left_of(deadline));
    // From the root host's leader to the root, when they differ.
    if (local_ && my_host_ == root_host && local_index(root) != 0) local_->broadcast(t, 0, call, left_of(deadline));
}

void Hierarchy::allgather(const Tensor &in, Tensor &out, const Call &call, Millis timeout) {
    auto deadline = deadline_in(timeout);
    const size_t n = in.nbytes(), hosts = members_.size(), block = n * static_cast<size_t>(most_);
    // Each host's parts gather at its leader (in the host's rank order), the
    // leaders exchange their hosts' blocks (padded to the fullest host's),
    // each leader puts them in rank order, and shares them with its host.
    // When hosts hold equal runs of consecutive ranks (the usual layout),
    // the blocks are the output's own pieces: gathered and exchanged in
    // place, with no scratch to fault in and no reordering copy.
    if (leader_ && contiguous_) {
        Tensor own = bytes(out.bytes() + block * static_cast<size_t>(my_host_), block);
        if (local_)
            local_->gather(bytes(in.data, n), &own, 0, call, left_of(deadline));
        else if (n)
            std::memcpy(own.data, in.data, n);
        if (leaders_) {
            Tensor all = bytes(out.data, block * hosts);
            leaders_->allgather(own, all, call, left_of(deadline));
        }
    } else if (leader_) {
        Scratch blocks(DType::UInt8, block * hosts);
        uint8_t *mine = blocks.t.bytes() + block * static_cast<size_t>(my_host_);
        Tensor own = bytes(mine, n * mates());
        if (local_)
            local_->gather(bytes(in.data, n), &own, 0, call, left_of(deadline));
        else if (n)
            std::memcpy(mine, in.data, n);
        if (leaders_) {
            Tensor all = blocks.t, me = bytes(mine, block);
            leaders_->allgather(me, all, call, left_of(deadline));
        }
        to_rank_order(blocks.t.bytes(), n, out.bytes());
    } else {
        local_->gather(bytes(in.data, n), nullptr, 0, call, left_of(deadline));
    }
    if (local_) {
        Tensor all = bytes(out.data, out.nbytes());
        local_->broadcast(all, 0, call, left_of(deadline));
    }
}

void Hierarchy::broadcast(Tensor &t, int root, const Call &call, Millis timeout) {
    auto deadline = deadline_in(timeout);
    const int root_host = host_[static_cast<size_t>(root)];
    // The root's host first (its leader gets the data), then the leaders,
    // then every other host from its leader.
    if (local_ && my_host_ == root_host) local_->broadcast(t, local_index(root), call, left_of(deadline));
    if (leaders_) leaders_->broadcast(t, root_host, call, left_of(deadline));
    if (local_ && my_host_ != root_host) local_->broadcast(t, 0, call, left_of(deadline));
}

template <typename F>
void Hierarchy::each_part(size_t n, F &&copy) const {
    if (!n) return;
    const size_t block = n * static_cast<size_t>(most_);
    for (size_t h = 0; h < members_.size(); ++h)
        for (size_t i = 0; i < members_[h].size(); ++i)
            copy(block * h + n * i, n * static_cast<size_t>(members_[h][i]));
}

void Hierarchy::to_rank_order(const uint8_t *blocks, size_t n, uint8_t *ranked) const {
    each_part(n, [&](size_t b, size_t r) { std::memcpy(ranked + r, blocks + b, n); });
}

void Hierarchy::to_blocks(const uint8_t *ranked, size_t n, uint8_t *blocks) const {
    each_part(n, [&](size_t b, size_t r) { std::memcpy(blocks + b, ranked + r, n); });
}

void Hierarchy::gather(const Tensor &in, Tensor *out, int root, const Call &call, Millis timeout) {
    auto deadline = deadline_in(timeout);
    const size_t n = in.nbytes(), hosts = members_.size(), block = n * static_cast<size_t>(most_);
    const int root_host = host_[static_cast<size_t>(root)];
    if (!leader_) {
        local_->gather(bytes(in.data, n), nullptr, 0, call, left_of(deadline));
        // A root that does not lead its host gets the whole from its leader.
        if (rank_ == root) local_->pass(*out, 0, local_index(root), call, left_of(deadline));
        return;
    }
    // Each host's parts gather at its leader as one block; the root host's
    // leader collects the blocks in host order (in `out` itself when it is
    // the root and they are the output's pieces), then puts them in rank order.
    const bool collects = my_host_ == root_host, in_place = collects && rank_ == root && contiguous_;
    std::unique_ptr<Scratch> scratch;
    uint8_t *blocks = in_place ? out->bytes() : nullptr;
    if (!in_place) {
        scratch = std::make_unique<Scratch>(DType::UInt8, collects ? block * hosts : block);
        blocks = scratch->t.bytes();
    }
    uint8_t *mine = collects ? blocks + block * static_cast<size_t>(my_host_) : blocks;
    Tensor own = bytes(mine, n * mates());
    if (local_)
        local_->gather(bytes(in.data, n), &own, 0, call, left_of(deadline));
    else if (n)
        std::memcpy(mine, in.data, n);
    Tensor all = bytes(blocks, block * hosts);
    leaders_->gather(bytes(mine, block), collects ? &all : nullptr, root_host, call, left_of(deadline));
    if (!collects || in_place) return;
    if (rank_ == root) return to_rank_order(blocks, n, out->bytes());
    Tensor whole = bytes(blocks, n * host_.size());  // in rank order already when contiguous
    std::unique_ptr<Scratch> ranked;
    if (!contiguous_) {
        ranked = std::make_unique<Scratch>(DType::UInt8, whole.numel);
        to_rank_order(blocks, n, ranked->t.bytes());
        whole = ranked->t;
    }
    local_->pass(whole, 0, local_index(root), call, left_of(deadline));
}

void Hierarchy::scatter(const Tensor *in, Tensor &out, int root, const Call &call, Millis timeout) {
    auto deadline = deadline_in(timeout);
    const size_t n = out.nbytes(), hosts = members_.size(), block = n * static_cast<size_t>(most_),
                 total = n * host_.size();
    const int root_host = host_[static_cast<size_t>(root)];
    if (!leader_) {
        // A root that does not lead its host hands the whole to its leader first.
        if (rank_ == root) {
            Tensor whole = *in;
            local_->pass(whole, local_index(root), 0, call, left_of(deadline));
        }
        local_->scatter(nullptr, out, 0, call, left_of(deadline));
        return;
    }
    // The root host's leader sends each host's block (its parts in rank
    // order, padded to the fullest host's) to that host's leader, which
    // scatters it among its ranks.
    const bool sends = my_host_ == root_host;
    std::unique_ptr<Scratch> whole, scratch;
    const uint8_t *ranked = nullptr;
    if (sends && rank_ == root) {
        ranked = in->bytes();
    } else if (sends) {
        whole = std::make_unique<Scratch>(DType::UInt8, total);
        local_->pass(whole->t, local_index(root), 0, call, left_of(deadline));
        ranked = whole->t.bytes();
    }
    uint8_t *blocks = nullptr;
    if (sends && contiguous_) {
        // The parts are the blocks already. Nothing writes them: the leaders'
        // scatter finds this leader's block where its output would go.
        blocks = const_cast<uint8_t *>(ranked);
    } else {
        scratch = std::make_unique<Scratch>(DType::UInt8, sends ? block * hosts : block);
        blocks = scratch->t.bytes();
        if (sends) to_blocks(ranked, n, blocks);
    }
    uint8_t *mine = sends ? blocks + block * static_cast<size_t>(my_host_) : blocks;
    Tensor all = bytes(blocks, block * hosts), me = bytes(mine, block);
    leaders_->scatter(sends ? &all : nullptr, me, root_host, call, left_of(deadline));
    Tensor own = bytes(mine, n * mates());
    if (local_)
        local_->scatter(&own, out, 0, call, left_of(deadline));
    else if (n)
        std::memmove(out.data, mine, n);
}

void Hierarchy::reduce_scatter(const Tensor &in, Tensor &out, ReduceOp op, const Call &call, Millis timeout) {
    auto deadline = deadline_in(timeout);
    const size_t n = out.nbytes(), hosts = members_.size(), most = static_cast<size_t>(most_);
    // The host's sum at its leader (reducing clobbers the other ranks'
    // tensors: a copy), the leaders' reduce-scatter of the host blocks,
    // each leader's block scattered on its host: the parts of allreduce's sum.
    Scratch sum(in.dtype, in.numel);
    if (in.nbytes()) std::memcpy(sum.t.data, in.data, in.nbytes());
    if (local_) local_->reduce(sum.t, 0, op, call, left_of(deadline));
    if (!leader_) return local_->scatter(nullptr, out, 0, call, left_of(deadline));
    Tensor blocks = sum.t;
    std::unique_ptr<Scratch> padded;
    if (!contiguous_) {
        padded = std::make_unique<Scratch>(in.dtype, out.numel * most * hosts);
        std::memset(padded->t.data, 0, padded->t.nbytes());  // the padding is reduced too: zeros, not garbage
        to_blocks(sum.t.bytes(), n, padded->t.bytes());
        blocks = padded->t;
    }
    Scratch mine(in.dtype, out.numel * most);
    leaders_->reduce_scatter(blocks, mine.t, op, call, left_of(deadline));
    Tensor own = typed(mine.t.data, in.dtype, out.numel * mates());
    if (local_)
        local_->scatter(&own, out, 0, call, left_of(deadline));
    else if (n)
        std::memcpy(out.data, mine.t.data, n);
}

bool Hierarchy::alltoallv(const Tensor &in, Span<size_t> in_counts, Tensor &out, Span<size_t> out_counts,
                          const Call &call, Millis timeout) {
    auto deadline = deadline_in(timeout);
    const size_t size = host_.size(), hosts = members_.size(), esz = dtype_size(in.dtype);
    const std::vector<int> &here = members_[static_cast<size_t>(my_host_)];
    const size_t locals = here.size();
    // 1. What every rank of the host sends to and receives from each rank, in bytes, at its leader.
    std::vector<uint64_t> counts(2 * size), all(leader_ ? 2 * size * locals : 0);
    size_t in_total = 0, out_total = 0;
    for (size_t r = 0; r < size; ++r) {
        in_total += counts[r] = in_counts[r] * esz;
        out_total += counts[size + r] = out_counts[r] * esz;
    }
    uint8_t none = 0;  // where nothing is sent or received
    Tensor empty = bytes(&none, 0);
    if (local_) {
        Tensor all_t = bytes(all.data(), all.size() * sizeof(uint64_t));
        local_->gather(bytes(counts.data(), counts.size() * sizeof(uint64_t)), leader_ ? &all_t : nullptr, 0, call,
                       left_of(deadline));
    } else {
        all = counts;
    }
    // 2. The leaders exchange what their hosts' ranks send each other, and
    // (two hosts only: see kHierAlltoallBytes) say on their hosts whether the
    // data goes through them or the flat mesh.
    uint8_t through_leaders = 1;
    Tensor decision = bytes(&through_leaders, 1);
    if (!leader_) {
        if (hosts == 2) local_->broadcast(decision, 0, call, left_of(deadline));
        if (!through_leaders) return false;
        // 3. This rank's whole input to its leader; 5. its whole output from it.
        std::vector<size_t> to(locals, 0), from(locals, 0);
        to[0] = in_total;
        local_->alltoallv(bytes(in.data, in_total), to, empty, from, call, left_of(deadline));
        to[0] = 0;
        from[0] = out_total;
        Tensor whole = bytes(out.data, out_total);
        local_->alltoallv(empty, to, whole, from, call, left_of(deadline));
        return true;
    }
    auto sent = [&](size_t i, size_t r) { return all[i * 2 * size + r]; };        // local rank i to rank r
    auto got = [&](size_t i, size_t r) { return all[i * 2 * size + size + r]; };  // local rank i from rank r
    // Each host's leader gets, from every leader, the counts its ranks
    // receive from that host's: by sender, then receiver, in rank order.
    // Counts that do not pair up fail here, on whichever path the data
    // would take, as the flat mesh's message headers would.
    // out_at: where each piece for this host's ranks lands in what the leaders receive.
    std::vector<size_t> count_to(hosts), count_from(hosts), piece_to(hosts, 0), piece_from(hosts, 0),
        out_at(locals * size);
    std::vector<uint64_t> count_out, count_in;
    size_t at = 0;
    for (size_t h = 0; h < hosts; ++h) {
        const std::vector<int> &theirs = members_[h];
        count_to[h] = count_from[h] = locals * theirs.size();
        for (size_t i = 0; i < locals; ++i)
            for (int r : theirs) {
                count_out.push_back(sent(i, static_cast<size_t>(r)));
                piece_to[h] += sent(i, static_cast<size_t>(r));
            }
        for (int r : theirs)
            for (size_t j = 0; j < locals; ++j) {
                out_at[j * size + static_cast<size_t>(r)] = at;
                at += got(j, static_cast<size_t>(r));
                piece_from[h] += got(j, static_cast<size_t>(r));
            }
    }
    count_in.resize(count_out.size());
    Tensor co = typed(count_out.data(), DType::Int64, count_out.size()),
           ci = typed(count_in.data(), DType::Int64, count_in.size());
    leaders_->alltoallv(co, count_to, ci, count_from, call, left_of(deadline));
    size_t k = 0;
    for (size_t h = 0; h < hosts; ++h)
        for (int r : members_[h])
            for (size_t j = 0; j < locals; ++j, ++k)
                if (count_in[k] != got(j, static_cast<size_t>(r)))
                    fail(DISTC_EINVAL, "rank " + std::to_string(r) + " sends " + std::to_string(count_in[k]) +
                                           " bytes to rank " + std::to_string(here[j]) + ", which expects " +
                                           std::to_string(got(j, static_cast<size_t>(r))) +
                                           ": the ranks' split sizes disagree");
    if (hosts == 2) {
        size_t other = 1 - static_cast<size_t>(my_host_);
        through_leaders = piece_to[other] + piece_from[other] <= kHierAlltoallBytes;
        if (local_) local_->broadcast(decision, 0, call, left_of(deadline));
    }
    if (!through_leaders) return false;
    // 3. The host's inputs, one after another in local order; where each piece starts.
    std::vector<size_t> in_at(locals * size), out_tot(locals, 0), from(locals, 0), to(locals, 0);
    size_t in_all = 0;
    for (size_t i = 0; i < locals; ++i)
        for (size_t r = 0; r < size; ++r) {
            in_at[i * size + r] = in_all;
            in_all += sent(i, r);
            from[i] += sent(i, r);
            out_tot[i] += got(i, r);
        }
    Scratch inputs(DType::UInt8, in_all);
    if (local_) {
        to[0] = in_total;
        local_->alltoallv(bytes(in.data, in_total), to, inputs.t, from, call, left_of(deadline));
    } else if (in_total) {
        std::memcpy(inputs.t.data, in.data, in_total);
    }
    // 4. Each host's leader sends every other leader, in one message, the
    // pieces that host's ranks receive from this host's.
    Scratch outgoing(DType::UInt8, inputs.t.numel), incoming(DType::UInt8, at);
    uint8_t *p = outgoing.t.bytes();
    for (size_t h = 0; h < hosts; ++h)
        for (size_t i = 0; i < locals; ++i)
            for (int r : members_[h]) {
                size_t len = sent(i, static_cast<size_t>(r));
                if (len) std::memcpy(p, inputs.t.bytes() + in_at[i * size + static_cast<size_t>(r)], len);
                p += len;
            }
    leaders_->alltoallv(outgoing.t, piece_to, incoming.t, piece_from, call, left_of(deadline));
    // 5. Each local rank's output: its pieces in sender order, which is the
    // order of its `out`.
    Scratch outputs(DType::UInt8, incoming.t.numel);
    p = outputs.t.bytes();
    for (size_t j = 0; j < locals; ++j)
        for (size_t r = 0; r < size; ++r) {
            size_t len = got(j, r);
            if (len) std::memcpy(p, incoming.t.bytes() + out_at[j * size + r], len);
            p += len;
        }
    if (local_) {
        std::fill(from.begin(), from.end(), 0);
        from[0] = out_total;
        Tensor whole = bytes(out.data, out_total);
        local_->alltoallv(outputs.t, out_tot, whole, from, call, left_of(deadline));
    } else if (out_total) {
        std::memcpy(out.data, outputs.t.data, out_total);
    }
    return true;
}

void Hierarchy::barrier(const Call &call, Millis timeout) {
    auto deadline = deadline_in(timeout);
    if (local_) local_->barrier(call, left_of(deadline));
    if (leaders_) leaders_->barrier(call, left_of(deadline));
    if (local_) local_->barrier(call, left_of(deadline));
}

}  // namespace distc

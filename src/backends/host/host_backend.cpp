#include "backends/host/host_backend.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <tuple>

#include "backends/host/transport/address.hpp"
#include "backends/host/transport/gloo/gloo_backend.hpp"
#include "backends/host/transport/p2p_mailbox.hpp"
#include "backends/host/transport/shm/shm_transport.hpp"
#include "backends/host/transport/tcp/tcp_transport.hpp"
#include "core/util/env.hpp"
#include "core/util/debug.hpp"
#include "core/util/error.hpp"

namespace distc {

namespace {

bool consecutive(TensorSpan ts) {
    const uint8_t *p = ts.empty() ? nullptr : ts[0].bytes();
    for (const auto &t : ts) {
        if (t.bytes() != p) return false;
        p += t.nbytes();
    }
    return true;
}

// A flat tensor over `ts` (all of one dtype, their sum checked by the group):
// the tensors themselves when they are back to back in memory, else packed
// into `scratch` (with their contents when `copy_in`).
Tensor flatten(TensorSpan ts, std::unique_ptr<Scratch> &scratch, bool copy_in) {
    size_t numel = 0;
    for (const auto &t : ts) numel += t.numel;
    if (consecutive(ts)) {
        Tensor f = ts[0];
        f.numel = numel;
        f.dim0 = static_cast<int64_t>(numel);
        return f;
    }
    scratch = std::make_unique<Scratch>(ts[0].dtype, numel);
    if (copy_in) {
        uint8_t *p = scratch->t.bytes();
        for (const auto &t : ts) {
            if (t.nbytes()) std::memcpy(p, t.data, t.nbytes());
            p += t.nbytes();
        }
    }
    return scratch->t;
}

void unflatten(const Tensor &flat, TensorSpan ts) {
    if (consecutive(ts) && flat.data == (ts.empty() ? nullptr : ts[0].data)) return;
    const uint8_t *p = flat.bytes();
    for (const auto &t : ts) {
        if (t.nbytes()) std::memcpy(t.data, p, t.nbytes());
        p += t.nbytes();
    }
}

std::vector<size_t> counts_of(TensorSpan ts) {
    std::vector<size_t> c;
    c.reserve(ts.size());
    for (const auto &t : ts) c.push_back(t.numel);
    return c;
}

}  // namespace

size_t HostBackend::mesh_limit() {
    static const size_t v = [] {
        return static_cast<size_t>(env_int("DISTC_MESH_BYTES", kEverySize, 0, kEverySize));
    }();
    return v;
}

HostBackend::HostBackend(const AsyncGroupInfo &info, bool debug) :
    rank_(info.rank), size_(info.size), debug_(debug),
    exec_(
        info.rank, [this](bool breaking) { close_links(breaking); },
        info.size > 1 ? std::make_unique<FailureNotes>(info.store) : nullptr) {
    Address here{"127.0.0.1", "alone in its group"};
    if (size_ > 1) here = choose_address(*info.store, rank_, size_, info.timeout);
    if (debug_level() != DebugLevel::Off)
        std::fprintf(stderr, "distc: rank %d advertises %s (%s)\n", rank_, here.host.c_str(), here.why.c_str());
    if (size_ > 1 && mesh_limit() > 0) {
        box_ = std::make_unique<P2pMailbox>(size_);
        tcp_ = std::make_unique<TcpTransport>(*info.store, rank_, size_, here.host, info.timeout, *box_);
        Locality loc = find_locality(*info.store, rank_, size_, info.timeout);
        std::string why_not;
        // Every rank agrees whether every host's segment was made (a rank
        // alone on its host has none to make).
        bool shared = loc.shares_memory() &&
                      ShmTransport::make_for_group(*info.store, rank_, size_, loc, info.timeout, *box_, shm_, why_not);
        if (!shared && loc.shares_memory() && debug_level() != DebugLevel::Off)
            std::fprintf(stderr, "distc: rank %d: shared memory not used: %s\n", rank_, why_not.c_str());
        if (shared && !loc.all_local()) hier_ = std::make_unique<Hierarchy>(rank_, loc, shm_.get(), *tcp_);
        algo_ = std::make_unique<Algorithms>(shared && loc.all_local() ? static_cast<Transport &>(*shm_) : *tcp_, rank_,
                                             size_);
        p2p_ = box_.get();
    }
    // Every rank decides alike (by size and DISTC_MESH_BYTES), so all or none connect Gloo.
    if (!algo_ || mesh_limit() < static_cast<size_t>(kEverySize)) {
        gloo_ = std::make_unique<GlooBackend>(info.store, info.rank, info.size, here.host, info.timeout);
        if (!p2p_) p2p_ = gloo_.get();
    }
}

HostBackend::~HostBackend() = default;

void HostBackend::close_links(bool breaking) {
    if (tcp_ && breaking) tcp_->finish_sends();
    if (shm_) shm_->close();
    if (gloo_) gloo_->abort();
    // Longer only where a TCP peer does not read what this rank sent.
    if (tcp_) breaking ? tcp_->close_once_sent(std::chrono::milliseconds(100)) : tcp_->close();
}

const char *HostBackend::transport(int peer) const {
    if (!algo_) return "gloo";
    // In a group of hosts, a peer on this host is reached by shared memory
    // (the collectives are hierarchical), the others by the mesh.
    bool shm = shm_ && (!hier_ || hier_->same_host(peer));
    if (mesh_limit() < static_cast<size_t>(kEverySize)) return shm ? "shm+gloo" : "tcp+gloo";
    return shm ? "shm" : "tcp";
}

template <typename F>
void HostBackend::submit(const WorkPtr &w, const AsyncArgs &a, bool collective, F &&body) {
    Executor::Op op{a.op, a.seq, *a.label, collective};
    if (debug_ && collective) {
        OpCtx c = ctx(a);
        auto checked = [this, c, b = std::forward<F>(body)]() mutable -> int32_t {
            debug_check(c);
            return b();
        };
        if (!w) return exec_.run_here(op, checked);
        return exec_.enqueue(op, w, std::move(checked));
    }
    if (!w) return exec_.run_here(op, body);
    exec_.enqueue(op, w, std::forward<F>(body));
}

template <typename F, typename... Lists>
void HostBackend::submit_with(const WorkPtr &w, const AsyncArgs &a, F body, const Lists &...lists) {
    if (!w) return submit(w, a, true, [&]() -> int32_t { return body(lists...); });
    // Queued: it runs after the call returned, so the lists are copied.
    submit(w, a, true, [body, kept = std::make_tuple(lists.to_vector()...)]() mutable -> int32_t {
        return std::apply([&](const auto &...v) { return body(TensorSpan(v)...); }, kept);
    });
}

void HostBackend::reduce_all(Tensor &t, ReduceOp op, double factor, const OpCtx &c) {
    if (op == ReduceOp::PremulSum) scale_in_place(t.dtype, t.data, t.numel, factor);
    if (small(t.nbytes()) && hier_)
        hier_->allreduce(t, op, c.call, c.timeout);
    else if (small(t.nbytes()))
        algo_->allreduce(t, op, c.call, c.timeout);
    else
        gloo_->allreduce(t, op, c);
    if (op == ReduceOp::Avg) scale_in_place(t.dtype, t.data, t.numel, 1.0 / size_);
}

void HostBackend::allreduce(const WorkPtr &w, const Tensor *ts, size_t n, ReduceOp op, const AsyncArgs &a) {
    OpCtx c = ctx(a);
    double factor = a.premul_factor;
    if (n == 1) {
        // The common call, without a list to allocate.
        Tensor t = ts[0];
        return submit(w, a, true, [this, t, op, factor, c]() mutable -> int32_t {
            reduce_all(t, op, factor, c);
            return -1;
        });
    }
    auto body = [this, op, factor, c](TensorSpan v) -> int32_t {
        std::unique_ptr<Scratch> scratch;
        Tensor flat = flatten(v, scratch, true);
        reduce_all(flat, op, factor, c);
        unflatten(flat, v);
        return -1;
    };
    submit_with(w, a, body, TensorSpan(ts, n));
}

void HostBackend::broadcast(const WorkPtr &w, const Tensor &t, int root, const AsyncArgs &a) {
    OpCtx c = ctx(a);
    submit(w, a, true, [this, t = Tensor(t), root, c]() mutable -> int32_t {
        if (small(t.nbytes()) && hier_)
            hier_->broadcast(t, root, c.call, c.timeout);
        else if (small(t.nbytes()))
            algo_->broadcast(t, root, c.call, c.timeout);
        else
            gloo_->broadcast(t, root, c);
        return -1;
    });
}

void HostBackend::reduce(const WorkPtr &w, const Tensor &t, int root, ReduceOp op, const AsyncArgs &a) {
    OpCtx c = ctx(a);
    double factor = a.premul_factor;
    submit(w, a, true, [this, t, root, op, factor, c]() mutable -> int32_t {
        // Non-roots contribute from a copy: their tensor is left as it was.
        std::unique_ptr<Scratch> scratch;
        Tensor work = t;
        if (rank_ != root) {
            scratch = std::make_unique<Scratch>(t.dtype, t.numel);
            if (t.nbytes()) std::memcpy(scratch->t.data, t.data, t.nbytes());
            work = scratch->t;
        }
        if (op == ReduceOp::PremulSum) scale_in_place(work.dtype, work.data, work.numel, factor);
        if (small(work.nbytes()) && hier_)
            hier_->reduce(work, root, op, c.call, c.timeout);
        else if (small(work.nbytes()))
            algo_->reduce(work, root, op, c.call, c.timeout);
        else
            gloo_->reduce(work, root, op, c);
        if (rank_ == root && op == ReduceOp::Avg) scale_in_place(t.dtype, t.data, t.numel, 1.0 / size_);
        return -1;
    });
}

void HostBackend::allgather(const WorkPtr &w, TensorSpan outputs, const Tensor &input, const AsyncArgs &a) {
    OpCtx c = ctx(a);
    auto body = [this, input, c](TensorSpan outputs) -> int32_t {
        std::unique_ptr<Scratch> scratch;
        Tensor flat = flatten(outputs, scratch, false);
        if (small(input.nbytes()) && hier_)
            hier_->allgather(input, flat, c.call, c.timeout);
        else if (small(input.nbytes()))
            algo_->allgather(input, flat, c.call, c.timeout);
        else
            gloo_->allgather(input, flat, c);
        unflatten(flat, outputs);
        return -1;
    };
    submit_with(w, a, body, outputs);
}

void HostBackend::gather(const WorkPtr &w, TensorSpan outputs, const Tensor &input, int root, const AsyncArgs &a) {
    OpCtx c = ctx(a);
    auto body = [this, input, root, c](TensorSpan outputs) -> int32_t {
        // Every rank decides by the part's size, which is the same everywhere.
        bool mesh = small(input.nbytes());
        std::unique_ptr<Scratch> scratch;
        Tensor flat;
        Tensor *out = nullptr;
        if (rank_ == root) {
            flat = flatten(outputs, scratch, false);
            out = &flat;
        }
        if (mesh && hier_)
            hier_->gather(input, out, root, c.call, c.timeout);
        else if (mesh)
            algo_->gather(input, out, root, c.call, c.timeout);
        else
            gloo_->gather(input, out, root, c);
        if (out) unflatten(flat, outputs);
        return -1;
    };
    submit_with(w, a, body, outputs);
}

void HostBackend::scatter(const WorkPtr &w, const Tensor &output, TensorSpan inputs, int root, const AsyncArgs &a) {
    OpCtx c = ctx(a);
    auto body = [this, output = Tensor(output), root, c](TensorSpan inputs) mutable -> int32_t {
        bool mesh = small(output.nbytes());
        std::unique_ptr<Scratch> scratch;
        Tensor flat;
        const Tensor *in = nullptr;
        if (rank_ == root) {
            flat = flatten(inputs, scratch, true);
            in = &flat;
        }
        if (mesh && hier_)
            hier_->scatter(in, output, root, c.call, c.timeout);
        else if (mesh)
            algo_->scatter(in, output, root, c.call, c.timeout);
        else
            gloo_->scatter(in, output, root, c);
        return -1;
    };
    submit_with(w, a, body, inputs);
}

void HostBackend::reduce_scatter(const WorkPtr &w, const Tensor &output, TensorSpan inputs, ReduceOp op,
                                 const AsyncArgs &a) {
    OpCtx c = ctx(a);
    double factor = a.premul_factor;
    auto body = [this, output = Tensor(output), op, factor, c](TensorSpan inputs) mutable -> int32_t {
        const size_t total = checked_mul(output.nbytes(), static_cast<size_t>(size_), "the inputs together");
        // The algorithms read the inputs in place and write only `output`.
        // A copy where that cannot be: PREMUL_SUM scales the inputs, Gloo
        // (which has no reduce-scatter collective) allreduces all of them,
        // and an output inside another rank's part would be written while
        // that part is still being sent.
        std::unique_ptr<Scratch> scratch;
        Tensor flat = flatten(inputs, scratch, true);
        const uint8_t *own = flat.bytes() + output.nbytes() * static_cast<size_t>(rank_);
        bool inside = output.bytes() < flat.bytes() + total && flat.bytes() < output.bytes() + output.nbytes();
        if (!scratch && (op == ReduceOp::PremulSum || !small(total) || (inside && output.bytes() != own))) {
            scratch = std::make_unique<Scratch>(output.dtype, flat.numel);
            if (total) std::memcpy(scratch->t.data, flat.data, total);
            flat = scratch->t;
        }
        if (op == ReduceOp::PremulSum) scale_in_place(flat.dtype, flat.data, flat.numel, factor);
        if (small(total) && hier_ && total <= kHierReduceScatterBytes) {
            hier_->reduce_scatter(flat, output, op, c.call, c.timeout);
        } else if (small(total)) {
            algo_->reduce_scatter(flat, output, op, c.call, c.timeout);
        } else {
            gloo_->allreduce(flat, op, c);
            const uint8_t *mine = flat.bytes() + output.nbytes() * static_cast<size_t>(rank_);
            if (output.nbytes()) std::memmove(output.data, mine, output.nbytes());
        }
        if (op == ReduceOp::Avg) scale_in_place(output.dtype, output.data, output.numel, 1.0 / size_);
        return -1;
    };
    submit_with(w, a, body, inputs);
}

void HostBackend::alltoallv(const Tensor &in, Span<size_t> ic, Tensor &out, Span<size_t> oc, bool mesh,
                            const OpCtx &c) {
    if (mesh && hier_ && hier_->alltoallv(in, ic, out, oc, c.call, c.timeout)) return;
    if (mesh)
        algo_->alltoallv(in, ic, out, oc, c.call, c.timeout);
    else
        gloo_->alltoallv(in, ic, out, oc, c);
}

void HostBackend::alltoall(const WorkPtr &w, TensorSpan outputs, TensorSpan inputs, const AsyncArgs &a) {
    OpCtx c = ctx(a);
    // Sizes may differ between ranks (uneven splits), so only a transport
    // that takes every size: ranks must agree on the path.
    bool mesh = takes_every_size();
    auto body = [this, mesh, c](TensorSpan inputs, TensorSpan outputs) -> int32_t {
        std::unique_ptr<Scratch> sin, sout;
        Tensor fin = flatten(inputs, sin, true);
        Tensor fout = flatten(outputs, sout, false);
        alltoallv(fin, counts_of(inputs), fout, counts_of(outputs), mesh, c);
        unflatten(fout, outputs);
        return -1;
    };
    submit_with(w, a, body, inputs, outputs);
}

void HostBackend::alltoall_single(const WorkPtr &w, const Tensor &output, const Tensor &input, Span<size_t> out_counts,
                                  Span<size_t> in_counts, const AsyncArgs &a) {
    OpCtx c = ctx(a);
    bool mesh = takes_every_size();  // as alltoall's
    if (!w)
        return submit(w, a, true, [&]() -> int32_t {
            Tensor out = output;
            alltoallv(input, in_counts, out, out_counts, mesh, c);
            return -1;
        });
    // Queued: it runs after the call returned, so the counts are copied.
    submit(w, a, true,
           [this, in = input, out = output, ic = in_counts.to_vector(), oc = out_counts.to_vector(), mesh,
            c]() mutable -> int32_t {
               alltoallv(in, ic, out, oc, mesh, c);
               return -1;
           });
}

void HostBackend::barrier(const WorkPtr &w, const AsyncArgs &a) {
    OpCtx c = ctx(a);
    submit(w, a, true, [this, c]() -> int32_t {
        if (hier_)
            hier_->barrier(c.call, c.timeout);
        else if (algo_)
            algo_->barrier(c.call, c.timeout);
        else
            gloo_->barrier(c);
        return -1;
    });
}

void HostBackend::send(const WorkPtr &w, const Tensor &t, int dst, int tag, const AsyncArgs &a) {
    P2p op{true, t, dst, tag};
    p2p(w, Span<P2p>(&op, 1), a);
}

void HostBackend::recv(const WorkPtr &w, const Tensor &t, int src, int tag, const AsyncArgs &a) {
    P2p op{false, t, src, tag};
    p2p(w, Span<P2p>(&op, 1), a);
}

void HostBackend::batch_p2p(const WorkPtr &w, Span<P2p> ops, const AsyncArgs &a) { p2p(w, ops, a); }

void HostBackend::p2p(const WorkPtr &w, Span<P2p> ops, const AsyncArgs &a) {
    exec_.check_open();
    // A send or a receive completes with its peer (a receive from any
    // source: who sent it); a batch with -1.
    const bool one = ops.size() == 1;
    const Millis timeout = a.timeout;
    if (!w)
        return submit(w, a, false, [&]() -> int32_t {
            int peer = p2p_->post_wait(ops, timeout);
            return one ? peer : -1;
        });
    // Posted now, in the caller's order (messages with one peer and tag
    // never overtake each other); the wait, queued, outlives this call.
    auto kept = std::make_shared<std::vector<std::unique_ptr<PendingP2p>>>(post_all(*p2p_, ops));
    submit(w, a, false, [kept, timeout, one]() -> int32_t {
        int peer = wait_all(*kept, timeout);
        return one ? peer : -1;
    });
}

void HostBackend::debug_check(const OpCtx &c) {
    // Every rank's call, gathered before the operation runs (over Gloo, at the tag after its own).
    std::vector<Call> all(static_cast<size_t>(size_));
    Call mine = c.call;
    Tensor in, out;
    in.data = &mine;
    in.dtype = out.dtype = DType::UInt8;
    in.numel = in.dim0 = sizeof mine;
    out.data = all.data();
    out.numel = sizeof mine * all.size();
    out.dim0 = static_cast<int64_t>(out.numel);
    if (algo_)  // one call every rank makes alike, whatever it checks
        algo_->allgather(in, out, make_call("allgather", int(DType::UInt8), -1, -1, sizeof mine, c.call.seq),
                         c.timeout);
    else
        gloo_->allgather(in, out, OpCtx{c.tag + 1, c.timeout, c.call});
    std::string msg = disagreement(all);
    if (msg.empty()) return;
    fail_agreed(DISTC_EINVAL, msg);
}

}  // namespace distc

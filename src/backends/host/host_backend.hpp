// The built-in CPU backend ("gloo", the default), behind the same interface
// as a plugin (core/pg/async_backend.hpp). It owns how operations run
// (executor.hpp), packing lists of tensors into one, AVG and PREMUL_SUM, and
// the choice of path: collectives take the host algorithms over a transport
// (algorithms.hpp, transport/: shared memory when every rank shares this
// host, else the TCP mesh, or for a group of hosts whose ranks share memory
// inside them, hierarchy.hpp), by operation and size only so that every
// rank picks the same, and point-to-point takes the TCP transport's own
// connections. Gloo's pairs (transport/gloo/) are made only for what still
// needs them: collectives above DISTC_MESH_BYTES (0: all of them, and
// point-to-point too), and a group of one.
#pragma once

#include <memory>

#include "backends/host/algorithms.hpp"
#include "backends/host/executor.hpp"
#include "backends/host/hierarchy.hpp"
#include "backends/host/transport/gloo/backend.hpp"
#include "backends/host/transport/transport.hpp"
#include "core/pg/async_backend.hpp"

namespace distc {

class P2pMailbox;
class TcpTransport;
class ShmTransport;

class HostBackend final : public AsyncBackend {
public:
    // `debug`: DISTC_DEBUG=detail's cross-check of every collective's call
    // (the transports check every message's call anyway; Gloo's pairs do not).
    HostBackend(const AsyncGroupInfo &info, bool debug);
    ~HostBackend() override;

    const char *name() const override { return "gloo"; }
    uint64_t device_types() const override { return (uint64_t{1} << 1) | (uint64_t{1} << 3); }  // kDLCPU, kDLCUDAHost
    bool stream_ordered() const override { return false; }
    const char *transport(int peer) const override;

    void allreduce(const WorkPtr &w, const Tensor *ts, size_t n, ReduceOp op, const AsyncArgs &a) override;
    void broadcast(const WorkPtr &w, const Tensor &t, int root, const AsyncArgs &a) override;
    void reduce(const WorkPtr &w, const Tensor &t, int root, ReduceOp op, const AsyncArgs &a) override;
    void allgather(const WorkPtr &w, TensorSpan outputs, const Tensor &input, const AsyncArgs &a) override;
    void gather(const WorkPtr &w, TensorSpan outputs, const Tensor &input, int root, const AsyncArgs &a) override;
    void scatter(const WorkPtr &w, const Tensor &output, TensorSpan inputs, int root, const AsyncArgs &a) override;
    void reduce_scatter(const WorkPtr &w, const Tensor &output, TensorSpan inputs, ReduceOp op,
                        const AsyncArgs &a) override;
    void alltoall(const WorkPtr &w, TensorSpan outputs, TensorSpan inputs, const AsyncArgs &a) override;
    void alltoall_single(const WorkPtr &w, const Tensor &output, const Tensor &input, Span<size_t> out_counts,
                         Span<size_t> in_counts, const AsyncArgs &a) override;
    void barrier(const WorkPtr &w, const AsyncArgs &a) override;
    void send(const WorkPtr &w, const Tensor &t, int dst, int tag, const AsyncArgs &a) override;
    void recv(const WorkPtr &w, const Tensor &t, int src, int tag, const AsyncArgs &a) override;
    void batch_p2p(const WorkPtr &w, Span<P2p> ops, const AsyncArgs &a) override;
    std::unique_ptr<AsyncBackend> split(int, int, const AsyncGroupInfo &, bool &made) override {
        made = false;  // subgroups connect through their own key space
        return nullptr;
    }
    void abort() override { exec_.abort(); }

    // The largest message that takes the transports (DISTC_MESH_BYTES; by
    // default every size, 0 turns them off).
    static size_t mesh_limit();
    static constexpr int64_t kEverySize = int64_t(1) << 62;
    // Above this many bytes of input, a reduce-scatter across hosts takes the
    // flat mesh (which reaches same-host peers by shared memory anyway):
    // the hierarchy's sum at each leader then costs more than it saves
    // (bench/compare --hosts 2 --ops reduce_scatter). Every rank's input is
    // the same size, so every rank picks the same path.
    static constexpr size_t kHierReduceScatterBytes = 64 * 1024;

private:
    // Runs `body` now (a blocking call, w null) or queues it.
    template <typename F>
    void submit(const WorkPtr &w, const AsyncArgs &a, bool collective, F &&body);
    // A collective whose body takes `lists` (TensorSpans): a queued body
    // keeps copies of them, a blocking call lends the caller's.
    template <typename F, typename... Lists>
    void submit_with(const WorkPtr &w, const AsyncArgs &a, F body, const Lists &...lists);
    // What a collective's body needs of its arguments, copied: a queued body
    // runs after the call returned.
    static OpCtx ctx(const AsyncArgs &a) { return OpCtx{static_cast<uint32_t>(a.seq * 2), a.timeout, a.call}; }
    bool small(size_t nbytes) const { return algo_ && nbytes <= mesh_limit(); }
    // Collectives whose sizes differ between ranks (uneven all-to-all) can
    // take the transports only when every size does: ranks must agree on the path.
    bool takes_every_size() const { return algo_ && mesh_limit() == static_cast<size_t>(kEverySize); }
    void reduce_all(Tensor &t, ReduceOp op, double factor, const OpCtx &c);
    void alltoallv(const Tensor &in, Span<size_t> ic, Tensor &out, Span<size_t> oc, bool mesh, const OpCtx &c);
    void debug_check(const OpCtx &c);
    // Sends and receives, in the caller's order: waited for now, or queued when `w`.
    void p2p(const WorkPtr &w, Span<P2p> ops, const AsyncArgs &a);
    // The executor's way to close the group: every transport and Gloo's
    // pairs; `breaking`: after a failure here, not an abort or a free.
    void close_links(bool breaking);

    const int rank_, size_;
    const bool debug_;
    std::unique_ptr<P2pMailbox> box_;  // before the transports that carry its messages
    std::unique_ptr<TcpTransport> tcp_;
    std::unique_ptr<ShmTransport> shm_;  // among the ranks on this host, when they share memory
    std::unique_ptr<Algorithms> algo_;   // over shm_ (every rank on this host), else tcp_
    std::unique_ptr<Hierarchy> hier_;    // hosts sharing memory inside: allreduce, reduce, broadcast, allgather,
                                         // barrier
    std::unique_ptr<Backend> gloo_;      // only when something above needs it
    P2pTransport *p2p_ = nullptr;        // box_ (over tcp_ and shm_), else gloo_
    Executor exec_;                      // last: stops its threads before the links go
};

}  // namespace distc

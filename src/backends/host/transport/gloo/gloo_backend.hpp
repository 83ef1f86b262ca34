// The built-in CPU backend over Gloo (Debian libgloo-dev): a full mesh of TCP
// pairs per group, and Gloo's collectives with the group's sequence numbers
// as tags.
#pragma once

#include <atomic>
#include <memory>
#include "backends/host/transport/gloo/abortable.hpp"
#include "backends/host/transport/gloo/backend.hpp"

namespace gloo {
class Context;
}  // namespace gloo

namespace distc {

class GlooBackend final : public Backend {
public:
    // `host`: the address its pairs listen on (choose_address).
    GlooBackend(std::shared_ptr<Store> store, int rank, int size, const std::string &host,
                std::chrono::milliseconds timeout);
    ~GlooBackend() override;

    const char *name() const override { return "gloo"; }
    void allreduce(Tensor &tensor, ReduceOp op, const OpCtx &ctx) override;
    void broadcast(Tensor &tensor, int root, const OpCtx &ctx) override;
    void reduce(Tensor &tensor, int root, ReduceOp op, const OpCtx &ctx) override;
    void allgather(const Tensor &input, Tensor &output, const OpCtx &ctx) override;
    void gather(const Tensor &input, Tensor *output, int root, const OpCtx &ctx) override;
    void scatter(const Tensor *input, Tensor &output, int root, const OpCtx &ctx) override;
    void alltoallv(const Tensor &input, Span<size_t> in_counts, Tensor &output, Span<size_t> out_counts,
                   const OpCtx &ctx) override;
    void barrier(const OpCtx &ctx) override;
    std::unique_ptr<PendingP2p> post_send(const Tensor &tensor, int dst, uint32_t tag) override;
    std::unique_ptr<PendingP2p> post_recv(Tensor &tensor, int src, uint32_t tag) override;
    void abort() override;

    // Runs f, turning Gloo's exceptions into distc errors (public for PendingP2p).
    // `writes`: f may write to peers, so SIGPIPE is blocked meanwhile; a wait
    // that only waits spares the three system calls.
    template <typename F>
    auto guarded(F &&f, bool writes = true) -> decltype(f());

private:
    void check_open() const;

    std::shared_ptr<gloo::transport::Device> device_;
    std::shared_ptr<gloo::Context> context_;
    int rank_, size_;
    std::atomic<bool> aborted_{false};
    std::shared_ptr<AbortState> abort_ = std::make_shared<AbortState>();
};

}  // namespace distc

// Gloo's pairs and algorithms as the host backend uses them: for
// point-to-point (tags, any source) and for collectives above the TCP mesh's
// size limit (DISTC_MESH_BYTES). Each call is one whole operation on this
// rank and throws distc::Error on failure. Tags come from the group's
// sequence numbers, equal on every rank for the same operation, so
// operations running at once on different threads never cross.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

#include "backends/host/transport/transport.hpp"
#include "core/pg/call.hpp"
#include "core/pg/tensor.hpp"
#include "core/store/store.hpp"

namespace distc {

struct OpCtx {
    uint32_t tag;
    std::chrono::milliseconds timeout;
    Call call{};  // what the operation is (its seq is tag), for transports that check it on every message
};

class Backend : public P2pTransport {
public:
    virtual ~Backend() = default;
    virtual const char *name() const = 0;

    // In place; `tensor` holds this rank's contribution and receives the result.
    virtual void allreduce(Tensor &tensor, ReduceOp op, const OpCtx &ctx) = 0;
    virtual void broadcast(Tensor &tensor, int root, const OpCtx &ctx) = 0;
    // `tensor` is the input everywhere and the output on root.
    virtual void reduce(Tensor &tensor, int root, ReduceOp op, const OpCtx &ctx) = 0;
    // `output` holds size x input.numel elements in rank order.
    virtual void allgather(const Tensor &input, Tensor &output, const OpCtx &ctx) = 0;
    // `output` (root only) holds size x input.numel elements in rank order.
    virtual void gather(const Tensor &input, Tensor *output, int root, const OpCtx &ctx) = 0;
    // `input` (root only) holds size x output.numel elements in rank order.
    virtual void scatter(const Tensor *input, Tensor &output, int root, const OpCtx &ctx) = 0;
    // Element counts per peer; inputs and outputs are packed in rank order.
    virtual void alltoallv(const Tensor &input, Span<size_t> in_counts, Tensor &output, Span<size_t> out_counts,
                           const OpCtx &ctx) = 0;
    virtual void barrier(const OpCtx &ctx) = 0;
    // Point-to-point: P2pTransport's post_send and post_recv.

    // Makes operations in flight fail soon and later ones fail at once. Any thread.
    virtual void abort() = 0;
};

}  // namespace distc

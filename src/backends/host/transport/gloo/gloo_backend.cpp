#include "backends/host/transport/gloo/gloo_backend.hpp"

#include <cstdlib>
#include <cstring>
#include <optional>

#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/alltoallv.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/common/error.h>
#include <gloo/gather.h>
#include <gloo/reduce.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/store.h>
#include <gloo/scatter.h>
#include <gloo/transport/tcp/device.h>
#include <gloo/transport/unbound_buffer.h>

#include "backends/host/transport/gloo/abortable.hpp"
#include "core/util/error.hpp"
#include "support/sigpipe.hpp"
#include "core/util/socket.hpp"

namespace distc {

namespace {

// Gloo's rendezvous over a distc store (already under the group's prefix).
class StoreAdapter final : public gloo::rendezvous::Store {
public:
    StoreAdapter(std::shared_ptr<distc::Store> s, std::chrono::milliseconds timeout) :
        s_(std::move(s)), timeout_(timeout) {}
    void set(const std::string &key, const std::vector<char> &data) override {
        s_->set(key, ByteView(data.data(), data.size()));
    }
    std::vector<char> get(const std::string &key) override {
        Bytes b = s_->get(key, timeout_);
        return std::vector<char>(b.begin(), b.end());
    }
    void wait(const std::vector<std::string> &keys) override { s_->wait(keys, timeout_); }
    void wait(const std::vector<std::string> &keys, const std::chrono::milliseconds &t) override { s_->wait(keys, t); }

private:
    std::shared_ptr<distc::Store> s_;
    std::chrono::milliseconds timeout_;
};

// Where this rank's pairs listen: where the mesh does (choose_address, the
// one choice for every transport), when Gloo can bind it, else loopback.
gloo::transport::tcp::attr device_attr(const std::string &host) {
    gloo::transport::tcp::attr a;
    a.hostname = host;
    try {
        gloo::transport::tcp::CreateDevice(a);
    } catch (const std::exception &) {
        a.hostname = "127.0.0.1";
    }
    return a;
}

// Gloo's typed setters want an element type of the right size; the bytes
// themselves are handled by our reduce functions.
template <size_t N>
struct Elem {
    unsigned char b[N];
};

template <typename F>
void with_elem(size_t size, F &&f) {
    switch (size) {
        case 1: f(Elem<1>{}); break;
        case 2: f(Elem<2>{}); break;
        case 4: f(Elem<4>{}); break;
        case 8: f(Elem<8>{}); break;
        case 16: f(Elem<16>{}); break;
        default: fail(DISTC_EINTERNAL, "unexpected element size " + std::to_string(size));
    }
}

// Gloo wants a positive timeout.
std::chrono::milliseconds positive(std::chrono::milliseconds t) {
    return t.count() > 0 ? t : std::chrono::milliseconds(1);
}

}  // namespace

GlooBackend::GlooBackend(std::shared_ptr<Store> store, int rank, int size, const std::string &host,
                         std::chrono::milliseconds timeout) :
    rank_(rank),
    size_(size) {
    // Gloo's loop threads are born here and inherit the mask: they write to
    // peers too, and must not take SIGPIPE (support/sigpipe.hpp).
    SigpipeBlocked no_sigpipe;
    try {
        device_ = std::make_shared<AbortableDevice>(gloo::transport::tcp::CreateDevice(device_attr(host)), abort_,
                                                    positive(timeout));
        auto ctx = std::make_shared<gloo::rendezvous::Context>(rank, size);
        ctx->setTimeout(positive(timeout));
        StoreAdapter adapter(std::move(store), timeout);
        ctx->connectFullMesh(adapter, device_);
        context_ = std::move(ctx);
    } catch (const Error &) {
        throw;
    } catch (const std::exception &e) {
        fail(DISTC_EBACKEND, std::string("gloo could not connect rank ") + std::to_string(rank) + " of " +
                                 std::to_string(size) + ": " + e.what());
    }
}

GlooBackend::~GlooBackend() = default;

void GlooBackend::check_open() const {
    if (aborted_) fail(DISTC_EABORTED, "the group was aborted");
}

template <typename F>
auto GlooBackend::guarded(F &&f, bool writes) -> decltype(f()) {
    check_open();
    std::optional<SigpipeBlocked> no_sigpipe;  // Gloo writes to dead peers from this thread too
    if (writes) no_sigpipe.emplace();
    try {
        return f();
    } catch (const Error &) {
        throw;
    } catch (const std::exception &e) {
        if (aborted_) fail(DISTC_EABORTED, std::string("the group was aborted (") + e.what() + ")");
        std::string m = e.what();
        bool timeout = m.find("Timed out") != std::string::npos || m.find("timed out") != std::string::npos;
        if (timeout) fail(DISTC_ETIMEOUT, m);
        if (dynamic_cast<const gloo::IoException *>(&e))
            fail(DISTC_EREMOTE, m + " (a peer gave up on the group after a failure there, or died)");
        fail(DISTC_EBACKEND, m);
    }
}

void GlooBackend::allreduce(Tensor &t, ReduceOp op, const OpCtx &ctx) {
    if (t.numel == 0 || size_ == 1) return;
    ReduceFn fn = reduce_fn(t.dtype, op);
    guarded([&] {
        with_elem(dtype_size(t.dtype), [&](auto e) {
            using T = decltype(e);
            gloo::AllreduceOptions o(context_);
            o.setOutput(static_cast<T *>(t.data), t.numel);
            o.setReduceFunction(fn);
            o.setTag(ctx.tag);
            o.setTimeout(positive(ctx.timeout));
            gloo::allreduce(o);
        });
    });
}

void GlooBackend::broadcast(Tensor &t, int root, const OpCtx &ctx) {
    if (t.numel == 0 || size_ == 1) return;
    guarded([&] {
        gloo::BroadcastOptions o(context_);
        // Output only, on the root too: Gloo then broadcasts in place. Given
        // the same buffer as input it would copy it onto itself while its
        // loop thread sends from it.
        o.setOutput(t.bytes(), t.nbytes());
        o.setRoot(root);
        o.setTag(ctx.tag);
        o.setTimeout(positive(ctx.timeout));
        gloo::broadcast(o);
    });
}

void GlooBackend::reduce(Tensor &t, int root, ReduceOp op, const OpCtx &ctx) {
    if (t.numel == 0 || size_ == 1) return;
    ReduceFn fn = reduce_fn(t.dtype, op);
    guarded([&] {
        with_elem(dtype_size(t.dtype), [&](auto e) {
            using T = decltype(e);
            gloo::ReduceOptions o(context_);
            o.setOutput(static_cast<T *>(t.data), t.numel);
            o.setRoot(root);
            o.setReduceFunction(fn);
            o.setTag(ctx.tag);
            o.setTimeout(positive(ctx.timeout));
            gloo::reduce(o);
        });
    });
}

void GlooBackend::allgather(const Tensor &in, Tensor &out, const OpCtx &ctx) {
    if (in.numel == 0) return;
    if (size_ == 1) {
        if (out.data != in.data) std::memcpy(out.data, in.data, in.nbytes());
        return;
    }
    guarded([&] {
        gloo::AllgatherOptions o(context_);
        o.setInput(in.bytes(), in.nbytes());
        o.setOutput(out.bytes(), out.nbytes());
        o.setTag(ctx.tag);
        o.setTimeout(positive(ctx.timeout));
        gloo::allgather(o);
    });
}

void GlooBackend::gather(const Tensor &in, Tensor *out, int root, const OpCtx &ctx) {
    if (in.numel == 0) return;
    if (size_ == 1) {
        if (out->data != in.data) std::memcpy(out->data, in.data, in.nbytes());
        return;
    }
    // Gloo's root copies its input into its slot after the peers' parts
    // came in: an input that lies in another slot goes from a copy.
    std::vector<uint8_t> copy;
    const uint8_t *src = in.bytes();
    if (rank_ == root && src != out->bytes() + in.nbytes() * static_cast<size_t>(rank_) &&
        overlaps(in.data, in.nbytes(), out->data, out->nbytes())) {
        copy.assign(src, src + in.nbytes());
        src = copy.data();
    }
    guarded([&] {
        gloo::GatherOptions o(context_);
        o.setInput(const_cast<uint8_t *>(src), in.nbytes());
        if (rank_ == root) o.setOutput(out->bytes(), out->nbytes());
        o.setRoot(root);
        o.setTag(ctx.tag);
        o.setTimeout(positive(ctx.timeout));
        gloo::gather(o);
    });
}

void GlooBackend::scatter(const Tensor *in, Tensor &out, int root, const OpCtx &ctx) {
    if (out.numel == 0) return;
    if (size_ == 1) {
        if (out.data != in->data) std::memcpy(out.data, in->data, out.nbytes());
        return;
    }
    // Gloo's root copies its own part while its sends may still read the
    // others: an output that lies in another part is filled from a copy.
    std::vector<uint8_t> copy;
    uint8_t *dst = out.bytes();
    if (rank_ == root && dst != in->bytes() + out.nbytes() * static_cast<size_t>(rank_) &&
        overlaps(out.data, out.nbytes(), in->data, in->nbytes())) {
        copy.resize(out.nbytes());
        dst = copy.data();
    }
    guarded([&] {
        gloo::ScatterOptions o(context_);
        std::vector<uint8_t *> parts;
        if (rank_ == root) {
            for (int r = 0; r < size_; ++r) parts.push_back(in->bytes() + out.nbytes() * static_cast<size_t>(r));
            o.setInputs(parts, out.nbytes());
        }
        o.setOutput(dst, out.nbytes());
        o.setRoot(root);
        o.setTag(ctx.tag);
        o.setTimeout(positive(ctx.timeout));
        gloo::scatter(o);
    });
    if (!copy.empty()) std::memcpy(out.data, copy.data(), copy.size());
}

void GlooBackend::alltoallv(const Tensor &in, Span<size_t> ic, Tensor &out, Span<size_t> oc, const OpCtx &ctx) {
    size_t es = dtype_size(in.dtype);
    if (size_ == 1) {
        if (ic[0] && out.data != in.data) std::memcpy(out.data, in.data, ic[0] * es);
        return;
    }
    std::vector<int64_t> ib, ob;
    for (size_t c : ic) ib.push_back(static_cast<int64_t>(c * es));
    for (size_t c : oc) ob.push_back(static_cast<int64_t>(c * es));
    // Gloo receives while its sends may still read: an input that overlaps
    // the output (in place, as torch allows) goes from a copy.
    std::vector<uint8_t> copy;
    uint8_t *src = in.bytes();
    if (overlaps(in.data, in.nbytes(), out.data, out.nbytes())) {
        copy.assign(src, src + in.nbytes());
        src = copy.data();
    }
    // Gloo wants real buffers even when nothing moves.
    uint8_t dummy_in = 0, dummy_out = 0;
    guarded([&] {
        gloo::AlltoallvOptions o(context_);
        o.setInput(in.numel ? src : &dummy_in, ib);
        o.setOutput(out.numel ? out.bytes() : &dummy_out, ob);
        o.setTag(ctx.tag);
        o.setTimeout(positive(ctx.timeout));
        gloo::alltoallv(o);
    });
}

void GlooBackend::barrier(const OpCtx &ctx) {
    if (size_ == 1) return;
    guarded([&] {
        gloo::BarrierOptions o(context_);
        o.setTag(ctx.tag);
        o.setTimeout(positive(ctx.timeout));
        gloo::barrier(o);
    });
}

namespace {

class GlooPending final : public PendingP2p {
public:
    GlooPending(GlooBackend &b, std::unique_ptr<gloo::transport::UnboundBuffer> buf, bool send) :
        b_(b), buf_(std::move(buf)), send_(send) {}
    int wait(std::chrono::milliseconds timeout) override {
        return b_.guarded(
            [&] {
                int peer = -1;
                bool ok = send_ ? buf_->waitSend(&peer, positive(timeout)) : buf_->waitRecv(&peer, positive(timeout));
                if (!ok) fail(DISTC_EABORTED, "the group was aborted");
                return peer;
            },
            false);  // the transfer was posted (and written) by post_send/post_recv
    }

private:
    GlooBackend &b_;
    std::unique_ptr<gloo::transport::UnboundBuffer> buf_;
    bool send_;
};

// Gloo wants a real pointer even for an empty message.
uint8_t empty_message = 0;

}  // namespace

std::unique_ptr<PendingP2p> GlooBackend::post_send(const Tensor &t, int dst, uint32_t tag) {
    return guarded([&] {
        auto buf = context_->createUnboundBuffer(t.numel ? t.data : &empty_message, t.nbytes());
        buf->send(dst, tag);
        return std::unique_ptr<PendingP2p>(new GlooPending(*this, std::move(buf), true));
    });
}

std::unique_ptr<PendingP2p> GlooBackend::post_recv(Tensor &t, int src, uint32_t tag) {
    return guarded([&] {
        auto buf = context_->createUnboundBuffer(t.numel ? t.data : &empty_message, t.nbytes());
        if (src >= 0) {
            buf->recv(src, tag);
        } else {
            std::vector<int> srcs;
            for (int r = 0; r < size_; ++r)
                if (r != rank_) srcs.push_back(r);
            buf->recv(srcs, tag);
        }
        return std::unique_ptr<PendingP2p>(new GlooPending(*this, std::move(buf), false));
    });
}

void GlooBackend::abort() {
    aborted_ = true;
    abort_->abort();  // wakes every wait in flight on this rank
    // Peers learn of it from the closed connections and fail fast too.
    try {
        context_->closeConnections();
    } catch (const std::exception &) {}
}

}  // namespace distc

#include "backends/host/transport/transport.hpp"

#include "core/util/env.hpp"
#include "core/util/shared_memory.hpp"

namespace distc {

PeerBuffer peer_buffer(const void *p, size_t n) {
    const SharedRegion r = shared_region_of(p, n);
    return PeerBuffer{reinterpret_cast<uintptr_t>(p), r.id, r.base, r.fd};
}

std::chrono::microseconds spin_from_env(const char *name, long long dflt) {
    // At most a second: a spin runs before the deadline is looked at again.
    return std::chrono::microseconds(env_int(name, dflt, 0, 1000000));
}

std::vector<std::unique_ptr<PendingP2p>> post_all(P2pTransport &t, Span<AsyncBackend::P2p> ops) {
    std::vector<std::unique_ptr<PendingP2p>> posted;
    posted.reserve(ops.size());
    for (const auto &o : ops) {
        Tensor buf = o.tensor;
        const auto tag = static_cast<uint32_t>(o.tag);
        posted.push_back(o.send ? t.post_send(buf, o.peer, tag) : t.post_recv(buf, o.peer, tag));
    }
    return posted;
}

int wait_all(const std::vector<std::unique_ptr<PendingP2p>> &posted, Millis timeout) {
    const auto deadline = posted.size() > 1 ? deadline_in(timeout) : Clock::time_point{};
    int last = -1;
    for (size_t i = 0; i < posted.size(); ++i) last = posted[i]->wait(i == 0 ? timeout : left_of(deadline));
    return last;
}

int P2pTransport::post_wait(Span<AsyncBackend::P2p> ops, Millis timeout) {
    // Everything is posted before anything is waited for: the batch cannot
    // deadlock on its own order. A wait that throws, and the destructors,
    // withdraw what did not complete.
    return wait_all(post_all(*this, ops), timeout);
}

}  // namespace distc

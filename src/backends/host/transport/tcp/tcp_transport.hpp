// The TCP mesh: one connection per peer, made through the group's store,
// moved by the calling thread (../exchange.hpp). Gloo hands every message
// to its event-loop thread and wakes the caller with a condition variable:
// two thread wake-ups per hop, which is all a small allreduce costs. Here the
// caller moves the bytes itself, spinning briefly (DISTC_SPIN_US) before it
// sleeps in poll.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "backends/host/transport/exchange.hpp"
#include "backends/host/transport/tcp/socket_links.hpp"
#include "backends/host/transport/tcp/tcp_p2p.hpp"
#include "backends/host/transport/transport.hpp"
#include "core/store/store.hpp"

namespace distc {

class TcpTransport final : public Transport {
public:
    // Connects to every peer through `store` (the group's key space, keys
    // "mesh/<rank>"); lower ranks accept, higher ranks connect. The listener
    // stays open for point-to-point, connected on first use: this
    // transport carries `box`'s messages to and from every peer. `host` is
    // what peers connect to (choose_address in transport/address.hpp).
    TcpTransport(Store &store, int rank, int size, const std::string &host, Millis timeout, P2pMailbox &box);

    const char *name() const override { return "tcp"; }
    void send(int peer, const void *p, size_t n, const bool *gate) override { x_.send(peer, p, n, gate); }
    void recv(int peer, void *p, size_t n, int id, const bool *gate) override { x_.recv(peer, p, n, id, gate); }
    void progress(const Call &call, Clock::time_point deadline, FnRef<void(int, int)> on_recv,
                  std::chrono::microseconds patience = {}) override {
        x_.run(links_, call, deadline, std::max(spin_, patience), 0, on_recv);
    }
    // Resets every link at once: a peer's next send or receive on it fails.
    void close() noexcept override;
    // For a rank that breaks its group: first a FIN behind what it sent on
    // every link, so that a peer still reading a call this rank completed
    // gets all of it, then the end (a reset at once drops what the kernel
    // took but had not sent yet, and that peer would fail the call). Then,
    // once that reached every peer or `within` passed, close().
    void finish_sends() noexcept;
    void close_once_sent(Clock::duration within) noexcept;
    std::string describe(int peer) const override;

private:
    std::vector<Fd> socks_;           // by peer rank; invalid for our own rank
    std::vector<std::string> where_;  // by rank: where it listens, "host:port"
    std::chrono::microseconds spin_;
    SocketLinks links_{socks_};
    Exchange x_;
    std::unique_ptr<TcpP2p> p2p_;
};

}  // namespace distc

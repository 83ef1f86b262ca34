#include "backends/host/transport/tcp/tcp_transport.hpp"

#include <linux/sockios.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>

#include "core/util/error.hpp"

namespace distc {

namespace {

// `missing`: who has not connected yet, for the error.
Fd accept_one(int listener, Clock::time_point deadline, const std::string &missing) {
    for (;;) {
        int left = static_cast<int>(std::chrono::duration_cast<Millis>(deadline - Clock::now()).count());
        if (left <= 0) fail(DISTC_ETIMEOUT, missing + " did not connect to the group's mesh within the timeout");
        pollfd p{listener, POLLIN, 0};
        int rc = ::poll(&p, 1, left);
        if (rc < 0 && errno != EINTR) fail_errno(DISTC_EIO, "poll", errno);
        if (rc <= 0) continue;
        int fd = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
        if (fd >= 0) return Fd(fd);
        if (errno != EINTR && errno != EAGAIN && errno != ECONNABORTED) fail_errno(DISTC_EIO, "accept", errno);
    }
}

// Whether all this rank sent on `fd`, and its FIN, reached the peer (or
// the peer closed its end too, and reads no more).
bool delivered(int fd) {
    pollfd p{fd, 0, 0};
    if (::poll(&p, 1, 0) == 1 && (p.revents & (POLLHUP | POLLERR))) return true;
    int queued = 0;
    return ::ioctl(fd, SIOCOUTQ, &queued) != 0 || queued == 0;
}

// A waiter on a point-to-point message of up to this size moves its
// connections' bytes itself (TcpP2p::poll) for DISTC_TCP_P2P_SPIN_US, or as
// long as its message takes at the rate below, if longer; a larger one is
// left to the thread, whose blocking waits take the socket's bytes in
// larger reads and writes (waiters that polled took longer from 2 MiB). A
// waiter that gives up on a message still coming sleeps, and then the
// thread and the waiter must both wake: the spin is longer than the mesh's,
// whose peers are in the same call, and the rate one that links between
// hosts reach.
constexpr size_t kPollBytes = size_t(256) << 10, kPollBytesPerUs = 1000;

}  // namespace

TcpTransport::TcpTransport(Store &store, int rank, int size, const std::string &host, Millis timeout, P2pMailbox &box) :
    socks_(static_cast<size_t>(size)), where_(static_cast<size_t>(size)), spin_(spin_from_env("DISTC_SPIN_US", 10)) {
    auto deadline = Clock::now() + timeout;
    Fd listener = tcp_listen("", 0, size + 8);
    std::string me = host_port(host, local_port(listener.get()));
    where_[static_cast<size_t>(rank)] = me;
    store.set("mesh/" + std::to_string(rank), ByteView(me.data(), me.size()));
    // Lower ranks accept, higher ranks connect and say who they are and
    // where they listen (for point-to-point connections made later).
    for (int p = 0; p < rank; ++p) {
        Bytes addr = store.get("mesh/" + std::to_string(p), timeout);
        std::string a(addr.begin(), addr.end()), peer_host;
        int port = 0;
        if (!split_host_port(a, peer_host, port))
            fail(DISTC_EPROTO, "rank " + std::to_string(p) + " published a mesh address without a port: " + a);
        where_[static_cast<size_t>(p)] = a;
        Fd fd = tcp_connect(peer_host, port, deadline);
        int32_t hello[2] = {rank, static_cast<int32_t>(me.size())};
        send_all(fd.get(), hello, sizeof hello, deadline, describe(p));
        send_all(fd.get(), me.data(), me.size(), deadline, describe(p));
        socks_[static_cast<size_t>(p)] = std::move(fd);
    }
    for (int n = rank + 1; n < size; ++n) {
        std::string missing;
        int count = 0;
        for (int q = rank + 1; q < size; ++q)
            if (!socks_[static_cast<size_t>(q)].valid()) missing += (count++ ? ", " : "") + std::to_string(q);
        Fd fd = accept_one(listener.get(), deadline, (count > 1 ? "ranks " : "rank ") + missing);
        int32_t hello[2] = {-1, 0};
        recv_all(fd.get(), hello, sizeof hello, deadline, "a peer", spin_);
        int who = hello[0];
        if (who <= rank || who >= size || socks_[static_cast<size_t>(who)].valid() || hello[1] <= 0 || hello[1] > 1024)
            fail(DISTC_EPROTO, "unexpected peer " + std::to_string(who) + " joined the group's mesh");
        std::string a(static_cast<size_t>(hello[1]), '\0');
        recv_all(fd.get(), &a[0], a.size(), deadline, "rank " + std::to_string(who), spin_);
        std::string unused;
        int port = 0;
        if (!split_host_port(a, unused, port))
            fail(DISTC_EPROTO, "rank " + std::to_string(who) + " gave a mesh address without a port: " + a);
        set_nodelay(fd.get());
        where_[static_cast<size_t>(who)] = a;
        socks_[static_cast<size_t>(who)] = std::move(fd);
    }
    p2p_ = std::make_unique<TcpP2p>(box, rank, where_, std::move(listener), timeout);
    const auto p2p_spin = spin_from_env("DISTC_TCP_P2P_SPIN_US", 200);
    for (int p = 0; p < size; ++p)
        if (p != rank) {
            p2p_->watch(p, socks_[static_cast<size_t>(p)].get());
            box.route(p, p2p_.get(), P2pMailbox::Polling{p2p_spin, 0, kPollBytes, kPollBytesPerUs});
        }
}

void TcpTransport::close() noexcept {
    p2p_->close();
    for (auto &s : socks_)
        if (s.valid()) {
            // A reset rather than a FIN: a peer's next send on it fails at
            // once, even while what this rank sent before is still unread
            // there (the peer reads that first). connect(AF_UNSPEC)
            // disconnects a TCP socket and keeps its descriptor, which other
            // threads may still hold.
            sockaddr unspec{};
            unspec.sa_family = AF_UNSPEC;
            ::connect(s.get(), &unspec, sizeof unspec);
            ::shutdown(s.get(), SHUT_RDWR);
        }
}

void TcpTransport::finish_sends() noexcept {
    p2p_->close();  // its own connections: nothing of a collective on them
    for (auto &s : socks_)
        if (s.valid()) ::shutdown(s.get(), SHUT_WR);
}

void TcpTransport::close_once_sent(Clock::duration within) noexcept {
    const auto until = Clock::now() + within;
    for (auto &s : socks_)
        while (s.valid() && !delivered(s.get()) && Clock::now() < until) ::usleep(200);
    close();
}

std::string TcpTransport::describe(int peer) const {
    std::string s = "rank " + std::to_string(peer);
    if (peer >= 0 && static_cast<size_t>(peer) < where_.size() && !where_[static_cast<size_t>(peer)].empty())
        s += " at " + where_[static_cast<size_t>(peer)];
    return s + " (tcp)";
}

}  // namespace distc

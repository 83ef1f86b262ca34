#include "backends/host/transport/tcp/tcp_transport.hpp"

#include <poll.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstdlib>

#include "core/util/error.hpp"

namespace distc {

namespace {

Fd accept_one(int listener, Clock::time_point deadline) {
    for (;;) {
        int left = static_cast<int>(std::chrono::duration_cast<Millis>(deadline - Clock::now()).count());
        if (left <= 0) fail(DISTC_ETIMEOUT, "peers did not connect to the group's mesh in time");
        pollfd p{listener, POLLIN, 0};
        int rc = ::poll(&p, 1, left);
        if (rc < 0 && errno != EINTR) fail_errno(DISTC_EIO, "poll", errno);
        if (rc <= 0) continue;
        int fd = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
        if (fd >= 0) return Fd(fd);
        if (errno != EINTR && errno != EAGAIN && errno != ECONNABORTED) fail_errno(DISTC_EIO, "accept", errno);
    }
}

std::chrono::microseconds spin_from_env() {
    const char *e = std::getenv("DISTC_SPIN_US");
    return std::chrono::microseconds(e && *e ? std::atoll(e) : 10);
}

}  // namespace

TcpTransport::TcpTransport(Store &store, int rank, int size, Millis timeout)
    : rank_(rank), socks_(static_cast<size_t>(size)), where_(static_cast<size_t>(size)), spin_(spin_from_env()) {
    auto deadline = Clock::now() + timeout;
    Fd listener = tcp_listen("", 0, size + 8);
    std::string me = advertised_host() + ":" + std::to_string(local_port(listener.get()));
    store.set("mesh/" + std::to_string(rank), ByteView(me.data(), me.size()));
    for (int p = 0; p < rank; ++p) {
        Bytes addr = store.get("mesh/" + std::to_string(p), timeout);
        std::string a(addr.begin(), addr.end());
        auto colon = a.rfind(':');
        where_[static_cast<size_t>(p)] = a;
        Fd fd = tcp_connect(a.substr(0, colon), std::atoi(a.c_str() + colon + 1), deadline);
        int32_t self = rank;
        send_all(fd.get(), &self, sizeof self, deadline, describe(p));
        socks_[static_cast<size_t>(p)] = std::move(fd);
    }
    for (int n = rank + 1; n < size; ++n) {
        Fd fd = accept_one(listener.get(), deadline);
        int32_t who = -1;
        recv_all(fd.get(), &who, sizeof who, deadline, "a peer", spin_);
        if (who <= rank || who >= size || socks_[static_cast<size_t>(who)].valid())
            fail(DISTC_EPROTO, "unexpected peer " + std::to_string(who) + " joined the group's mesh");
        set_nodelay(fd.get());
        where_[static_cast<size_t>(who)] = peer_address(fd.get());
        socks_[static_cast<size_t>(who)] = std::move(fd);
    }
}

void TcpTransport::close() noexcept {
    for (auto &s : socks_)
        if (s.valid()) {
            // A reset rather than a FIN: a peer's next send on it fails at
            // once, even while what this rank sent before is still unread
            // there. connect(AF_UNSPEC) disconnects a TCP socket and keeps
            // its descriptor, which other threads may still hold.
            sockaddr unspec{};
            unspec.sa_family = AF_UNSPEC;
            ::connect(s.get(), &unspec, sizeof unspec);
            ::shutdown(s.get(), SHUT_RDWR);
        }
}

std::string TcpTransport::describe(int peer) const {
    std::string s = "rank " + std::to_string(peer);
    if (peer >= 0 && static_cast<size_t>(peer) < where_.size() && !where_[static_cast<size_t>(peer)].empty())
        s += " at " + where_[static_cast<size_t>(peer)];
    return s + " (tcp)";
}

}  // namespace distc

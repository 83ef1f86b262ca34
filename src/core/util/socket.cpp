#include "core/util/socket.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sched.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "core/util/error.hpp"

namespace distc {

Fd &Fd::operator=(Fd &&o) noexcept {
    if (this != &o) reset(o.release());
    return *this;
}

void Fd::reset(int fd) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = fd;
}

namespace {

struct AddrInfo {
    addrinfo *ai = nullptr;
    ~AddrInfo() {
        if (ai) freeaddrinfo(ai);
    }
};

void resolve(AddrInfo &out, const std::string &host, int port, bool passive) {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = passive ? AI_PASSIVE : 0;
    std::string p = std::to_string(port);
    int rc = getaddrinfo(host.empty() ? nullptr : host.c_str(), p.c_str(), &hints, &out.ai);
    if (rc != 0) fail(DISTC_EINVAL, "cannot resolve host '" + host + "': " + gai_strerror(rc));
}

int ms_until(Clock::time_point deadline) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) return 0;
    return left > 1000000 ? 1000000 : static_cast<int>(left) + 1;
}

// Waits for `events` on fd; false on timeout.
bool wait_fd(int fd, short events, Clock::time_point deadline) {
    for (;;) {
        pollfd p{fd, events, 0};
        int rc = ::poll(&p, 1, ms_until(deadline));
        if (rc > 0) return true;
        if (rc == 0) {
            if (Clock::now() >= deadline) return false;
            continue;
        }
        if (errno != EINTR) fail_errno(DISTC_EIO, "poll", errno);
    }
}

}  // namespace

Fd tcp_listen(const std::string &host, int port, int backlog) {
    AddrInfo ai;
    resolve(ai, host, port, true);
    int last_err = 0;
    // Prefer IPv6 dual-stack when binding every interface, so both families reach us.
    for (int pass = 0; pass < 2; ++pass) {
        for (addrinfo *a = ai.ai; a; a = a->ai_next) {
            if (host.empty() && ((pass == 0) != (a->ai_family == AF_INET6))) continue;
            if (!host.empty() && pass == 1) continue;
            Fd fd(::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol));
            if (!fd.valid()) {
                last_err = errno;
                continue;
            }
            int one = 1, zero = 0;
            ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
            if (a->ai_family == AF_INET6) ::setsockopt(fd.get(), IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero);
            if (::bind(fd.get(), a->ai_addr, a->ai_addrlen) != 0 || ::listen(fd.get(), backlog) != 0) {
                last_err = errno;
                continue;
            }
            return fd;
        }
    }
    fail_errno(DISTC_EIO, "cannot listen on " + (host.empty() ? std::string("*") : host) + ":" + std::to_string(port),
               last_err ? last_err : EADDRNOTAVAIL);
}

int local_port(int fd) {
    sockaddr_storage ss{};
    socklen_t len = sizeof ss;
    if (::getsockname(fd, reinterpret_cast<sockaddr *>(&ss), &len) != 0) fail_errno(DISTC_EIO, "getsockname", errno);
    if (ss.ss_family == AF_INET6) return ntohs(reinterpret_cast<sockaddr_in6 *>(&ss)->sin6_port);
    return ntohs(reinterpret_cast<sockaddr_in *>(&ss)->sin_port);
}

std::string numeric_address(const sockaddr *sa) {
    char buf[INET6_ADDRSTRLEN] = {0};
    if (sa->sa_family == AF_INET)
        ::inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in *>(sa)->sin_addr, buf, sizeof buf);
    else if (sa->sa_family == AF_INET6)
        ::inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6 *>(sa)->sin6_addr, buf, sizeof buf);
    std::string s = buf;
    // A dual-stack socket reports IPv4 peers as ::ffff:a.b.c.d; peers want a.b.c.d.
    if (s.rfind("::ffff:", 0) == 0 && s.find('.') != std::string::npos) s = s.substr(7);
    return s;
}

std::string local_address(int fd) {
    sockaddr_storage ss{};
    socklen_t len = sizeof ss;
    if (::getsockname(fd, reinterpret_cast<sockaddr *>(&ss), &len) != 0) return "";
    return numeric_address(reinterpret_cast<sockaddr *>(&ss));
}

std::string peer_address(int fd) {
    sockaddr_storage a{};
    socklen_t len = sizeof a;
    if (::getpeername(fd, reinterpret_cast<sockaddr *>(&a), &len) != 0 ||
        (a.ss_family != AF_INET && a.ss_family != AF_INET6))
        return "?:0";
    const auto *sa = reinterpret_cast<const sockaddr *>(&a);
    int port = ntohs(a.ss_family == AF_INET6 ? reinterpret_cast<const sockaddr_in6 *>(sa)->sin6_port
                                             : reinterpret_cast<const sockaddr_in *>(sa)->sin_port);
    return host_port(numeric_address(sa), port);
}

std::string host_port(const std::string &host, int port) {
    bool six = host.find(':') != std::string::npos && host.front() != '[';
    return (six ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

std::string unbracketed(const std::string &host) {
    return host.size() > 2 && host.front() == '[' && host.back() == ']' ? host.substr(1, host.size() - 2) : host;
}

bool split_host_port(const std::string &s, std::string &host, int &port) {
    auto colon = s.rfind(':');
    if (colon == std::string::npos || colon == 0 || colon + 1 == s.size()) return false;
    host = unbracketed(s.substr(0, colon));
    char *end = nullptr;
    long p = std::strtol(s.c_str() + colon + 1, &end, 10);
    port = static_cast<int>(p);
    return *end == '\0' && p > 0 && p < 65536;
}

Fd tcp_connect(const std::string &host, int port, Clock::time_point deadline) {
    AddrInfo ai;
    resolve(ai, host, port, false);
    std::string peer = host + ":" + std::to_string(port);
    int last_err = ECONNREFUSED;
    for (addrinfo *a = ai.ai; a; a = a->ai_next) {
        Fd fd(::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol));
        if (!fd.valid()) {
            last_err = errno;
            continue;
        }
        int rc = ::connect(fd.get(), a->ai_addr, a->ai_addrlen);
        if (rc != 0 && errno == EINPROGRESS) {
            if (!wait_fd(fd.get(), POLLOUT, deadline)) fail(DISTC_ETIMEOUT, "connecting to " + peer + " timed out");
            socklen_t len = sizeof rc;
            ::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &rc, &len);
            if (rc != 0) {
                last_err = rc;
                continue;
            }
        } else if (rc != 0) {
            last_err = errno;
            continue;
        }
        int flags = ::fcntl(fd.get(), F_GETFL);
        ::fcntl(fd.get(), F_SETFL, flags & ~O_NONBLOCK);
        set_nodelay(fd.get());
        return fd;
    }
    fail_errno(DISTC_EREMOTE, "cannot connect to " + peer, last_err);
}

void set_nodelay(int fd) {
    int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

void set_nonblocking(int fd) {
    int flags = ::fcntl(fd, F_GETFL);
    ::fcntl(fd, F_SETFL, flags | O_NONBLOCK);
}

void send_all(int fd, const void *p, size_t n, Clock::time_point deadline, const std::string &peer) {
    auto *c = static_cast<const char *>(p);
    while (n) {
        ssize_t w = ::send(fd, c, n, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w > 0) {
            c += w;
            n -= static_cast<size_t>(w);
            continue;
        }
        if (w < 0 && errno == EINTR) continue;
        if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            if (!wait_fd(fd, POLLOUT, deadline)) fail(DISTC_ETIMEOUT, "sending to " + peer + " timed out");
            continue;
        }
        fail_errno(DISTC_EREMOTE, "connection to " + peer + " lost while sending", w < 0 ? errno : EPIPE);
    }
}

void recv_all(int fd, void *p, size_t n, Clock::time_point deadline, const std::string &peer,
              std::chrono::microseconds spin) {
    auto *c = static_cast<char *>(p);
    auto spin_until = std::min(Clock::now() + spin, deadline);  // a long spin still ends in time
    while (n) {
        ssize_t r = ::recv(fd, c, n, MSG_DONTWAIT);
        if (r > 0) {
            c += r;
            n -= static_cast<size_t>(r);
            continue;
        }
        if (r == 0) fail(DISTC_EREMOTE, peer + " closed the connection");
        if (errno == EINTR) continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK)
            fail_errno(DISTC_EREMOTE, "connection to " + peer + " lost while receiving", errno);
        if (Clock::now() < spin_until) {
            // Yield while spinning: when ranks outnumber cores, the peer we wait
            // for may need this core; when they do not, this returns at once.
            sched_yield();
            continue;
        }
        if (!wait_fd(fd, POLLIN, deadline)) fail(DISTC_ETIMEOUT, "waiting for " + peer + " timed out");
    }
}

bool peer_closed(int fd) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 0) <= 0) return false;
    if (p.revents & (POLLERR | POLLHUP)) return true;
    char b;
    ssize_t r = ::recv(fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
    return r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

}  // namespace distc

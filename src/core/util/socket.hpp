// Thin POSIX socket helpers: an owning fd, connect/listen, and deadline-bounded I/O.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "core/util/clock.hpp"

struct sockaddr;

namespace distc {

class Fd {
public:
    Fd() = default;
    explicit Fd(int fd) : fd_(fd) {}
    Fd(Fd &&o) noexcept : fd_(o.release()) {}
    Fd &operator=(Fd &&o) noexcept;
    Fd(const Fd &) = delete;
    Fd &operator=(const Fd &) = delete;
    ~Fd() { reset(); }

    int get() const { return fd_; }
    bool valid() const { return fd_ >= 0; }
    int release() {
        int f = fd_;
        fd_ = -1;
        return f;
    }
    void reset(int fd = -1);

private:
    int fd_ = -1;
};

// Binds and listens on host:port (host "" = every interface; port 0 = any free port).
Fd tcp_listen(const std::string &host, int port, int backlog);
int local_port(int fd);
// "host:port" (IPv6 "[host]:port") of a connected socket's peer, "?:0" when unknown.
std::string peer_address(int fd);
// The numeric address of a socket's local end ("" when it has none), and of
// a socket address (an IPv4 peer of a dual-stack socket as a.b.c.d).
std::string local_address(int fd);
std::string numeric_address(const sockaddr *sa);
// "host:port", with an IPv6 literal in brackets; and back (false when there
// is no port); and a host without the brackets of an IPv6 literal.
std::string host_port(const std::string &host, int port);
bool split_host_port(const std::string &s, std::string &host, int &port);
std::string unbracketed(const std::string &host);
// One connection attempt, bounded by `deadline`; throws DISTC_EIO/ETIMEOUT/EREMOTE.
Fd tcp_connect(const std::string &host, int port, Clock::time_point deadline);
void set_nodelay(int fd);
void set_nonblocking(int fd);

// Blocking-socket I/O bounded by a deadline. `spin` is how long to busy-poll
// before sleeping in poll(2): on loopback, waking a sleeping thread costs more
// than a reply that comes within a short spin.
void send_all(int fd, const void *p, size_t n, Clock::time_point deadline, const std::string &peer);
void recv_all(int fd, void *p, size_t n, Clock::time_point deadline, const std::string &peer,
              std::chrono::microseconds spin);
// True when the peer has closed (or reset) an otherwise idle connection.
bool peer_closed(int fd);

}  // namespace distc

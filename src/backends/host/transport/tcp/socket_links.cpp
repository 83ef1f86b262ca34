#include "backends/host/transport/tcp/socket_links.hpp"

#include <sys/socket.h>

#include <cerrno>
#include <string>

#include "core/util/error.hpp"

namespace distc {

namespace {

// A peer resets its connections when an operation fails on it (Executor::break_group).
constexpr const char *kGaveUp = " (it gave up on the group after a failure there, or died)";

std::string rank_name(int p) { return "rank " + std::to_string(p); }

}  // namespace

size_t SocketLinks::write(int p, const iovec *iov, int n) {
    msghdr mh{};
    mh.msg_iov = const_cast<iovec *>(iov);
    mh.msg_iovlen = static_cast<size_t>(n);
    for (;;) {
        ssize_t w = ::sendmsg(socks_[static_cast<size_t>(p)].get(), &mh, MSG_DONTWAIT | MSG_NOSIGNAL);
        if (w > 0) return static_cast<size_t>(w);
        if (w < 0 && errno == EINTR) continue;
        if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return 0;
        fail_errno(DISTC_EREMOTE, "connection to " + rank_name(p) + " lost while sending" + kGaveUp,
                   w < 0 ? errno : EPIPE);
    }
}

size_t SocketLinks::read(int p, const iovec *iov, int n) {
    msghdr mh{};
    mh.msg_iov = const_cast<iovec *>(iov);
    mh.msg_iovlen = static_cast<size_t>(n);
    for (;;) {
        ssize_t r = ::recvmsg(socks_[static_cast<size_t>(p)].get(), &mh, MSG_DONTWAIT);
        if (r > 0) return static_cast<size_t>(r);
        if (r == 0) fail(DISTC_EREMOTE, rank_name(p) + " closed the connection" + kGaveUp);
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
        fail_errno(DISTC_EREMOTE, "connection to " + rank_name(p) + " lost while receiving" + kGaveUp, errno);
    }
}

bool SocketLinks::peek(int p, void *to, size_t n) {
    // Not our own index (no socket) nor a broken link: those say no.
    return ::recv(socks_[static_cast<size_t>(p)].get(), to, n, MSG_PEEK | MSG_DONTWAIT) == static_cast<ssize_t>(n);
}

void SocketLinks::wait(const std::vector<Want> &wants, Clock::time_point deadline) {
    fds_.clear();
    for (const Want &w : wants)
        fds_.push_back(pollfd{socks_[static_cast<size_t>(w.peer)].get(),
                              short((w.write ? POLLOUT : 0) | (w.read ? POLLIN : 0)), 0});
    const auto ns = deadline - Clock::now();
    if (ns <= Clock::duration::zero()) return;
    // Whole milliseconds, rounded up: less than one left must still sleep.
    auto left = std::chrono::ceil<std::chrono::milliseconds>(ns).count();
    int rc = ::poll(fds_.data(), fds_.size(), left > 1000000 ? 1000000 : int(left));
    if (rc < 0 && errno != EINTR) fail_errno(DISTC_EIO, "poll", errno);
}

}  // namespace distc

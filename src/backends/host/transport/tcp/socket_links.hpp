// The TCP mesh's links for the exchange (exchange.hpp): one connected,
// non-blocking socket per peer, waited on with poll.
#pragma once

#include <poll.h>

#include <vector>

#include "backends/host/transport/exchange.hpp"
#include "core/util/socket.hpp"

namespace distc {

class SocketLinks final : public Links {
public:
    explicit SocketLinks(const std::vector<Fd> &socks) : socks_(socks) {}
    size_t write(int peer, const iovec *iov, int n) override;
    size_t read(int peer, const iovec *iov, int n) override;
    void wait(const std::vector<Want> &wants, Clock::time_point deadline) override;
    int count() const override { return static_cast<int>(socks_.size()); }
    bool peek(int peer, void *to, size_t n) override;

private:
    const std::vector<Fd> &socks_;  // by peer rank
    std::vector<pollfd> fds_;
};

}  // namespace distc

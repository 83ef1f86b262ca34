// Some ranks of a transport as a transport of their own: peer i is
// ranks[i] of the underlying one. A hierarchical collective runs the host
// algorithms among one leader per host over the group's TCP mesh this way.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "backends/host/transport/transport.hpp"

namespace distc {

class SubsetTransport final : public Transport {
public:
    SubsetTransport(Transport &t, std::vector<int> ranks) : t_(t), ranks_(std::move(ranks)) {
        int top = 0;
        for (int r : ranks_) top = r > top ? r : top;
        index_.assign(static_cast<size_t>(top) + 1, -1);
        for (size_t i = 0; i < ranks_.size(); ++i) index_[static_cast<size_t>(ranks_[i])] = static_cast<int>(i);
    }
    const char *name() const override { return t_.name(); }
    void send(int peer, const void *p, size_t n, const bool *gate) override { t_.send(rank(peer), p, n, gate); }
    void recv(int peer, void *p, size_t n, int id, const bool *gate) override { t_.recv(rank(peer), p, n, id, gate); }
    void progress(const Call &call, Clock::time_point deadline, FnRef<void(int, int)> on_recv,
                  std::chrono::microseconds patience = {}) override {
        t_.progress(
            call, deadline, [&](int peer, int id) { on_recv(index_[static_cast<size_t>(peer)], id); }, patience);
    }
    bool cheap_rounds() const override { return t_.cheap_rounds(); }
    void close() noexcept override {}  // the underlying transport's owner closes it
    std::string describe(int peer) const override { return t_.describe(rank(peer)); }

private:
    int rank(int peer) const { return ranks_[static_cast<size_t>(peer)]; }
    Transport &t_;
    std::vector<int> ranks_;
    std::vector<int> index_;  // by underlying rank: its peer index, or -1
};

}  // namespace distc

// Point-to-point over shared memory: the carrier (../p2p_mailbox.hpp) of
// messages to and from the ranks on this host. Its rings and doorbells are
// a plane of the segment of their own (shm_links.hpp), apart from the
// collectives', so a message never waits behind a collective or mixes with
// one. A send writes what fits from the calling thread; one thread per
// group, started with it (a peer's send may need this rank to read before
// any receive is posted), reads every ring and writes the rest, sleeping on
// its doorbell.
// A message whose receive is not posted yet stays in its ring, read once
// straight into the receive when it comes, unless the ring is more than
// half full (its sender may wait for room) or a receive waits for a later
// message of that peer: then it is read into the mailbox's memory. A large
// one offered in place that nobody begins to read within 20 ms comes
// inline after all, so that a sender waits not much longer than the ring
// makes it.
// A rank waiting for a message polls the rings itself for a while first
// (DISTC_SHM_SPIN_US), as collectives do; the thread rests meanwhile, and
// while waits come back to back it looks ever less often (at least every
// 8 ms), so what nobody waits for may wait that long. A peer that closes
// its end or dies fails what is posted to and from it once its ring is
// read to the end.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "backends/host/transport/p2p_mailbox.hpp"
#include "backends/host/transport/shm/shm_links.hpp"

namespace distc {

class ShmP2p final : public P2pMailbox::Carrier {
public:
    // `links`: the plane's; `me`: this rank's local index in `ranks` (the
    // group rank of each local rank).
    ShmP2p(P2pMailbox &box, std::unique_ptr<ShmLinks> links, std::vector<int> ranks, int me);
    // From now on `box`'s messages to and from the other local ranks go
    // here; a waiter polls the rings (P2pMailbox::route) before it sleeps.
    void route(std::chrono::microseconds spin, unsigned polls);
    ~ShmP2p() override;
    ShmP2p(const ShmP2p &) = delete;
    ShmP2p &operator=(const ShmP2p &) = delete;

    void start() override;
    void queue(std::shared_ptr<P2pMailbox::Op> op) override;
    void unqueue(P2pMailbox::Op &op) override;
    void kept(P2pMailbox::Op &op, const uint8_t *was) override;
    // Pieces of at least `bytes` are read in place, unless nobody begins to
    // within about the time copying them inline takes (at most 20 ms): then
    // they go inline (ShmLinks::set_single_copy). A send whose receive is not
    // there yet so waits about one copy's time more than it did inline.
    void set_single_copy(size_t bytes) { links_->set_single_copy(bytes, std::chrono::milliseconds(20)); }
    void set_streaming(size_t bytes) { links_->set_streaming(bytes); }
    // The sends of a batch that also receives from their peer (an exchange:
    // both ranks copy at once) go inline whatever their size, but for those
    // in shared memory (distc_mem_alloc).
    void set_inline_exchanges(bool on) { inline_exchanges_ = on; }
    std::string who(int peer) const override;
    bool poll() override;
    void polling_starts() override { ++pollers_; }
    void polling_stops(bool sleeps) override;
    // Closes this rank's end: peers fail what they post with it, and what is
    // posted here fails at once (any thread).
    void close() noexcept;

private:
    using Op = P2pMailbox::Op;
    using Header = P2pMailbox::Header;
    struct Out {
        std::deque<std::shared_ptr<Op>> queue;
        Header hdr{};  // the front send's, while it goes
        // Whether it may go in place: not an exchange that goes inline
        // (set_inline_exchanges), unless it lies in shared memory, where its
        // receiver maps it and copies it once with memcpy.
        bool may_offer = true;
        std::string broken;
    };
    struct In {
        Header hdr{};
        size_t got = 0;     // of the header
        bool held = false;  // the header is in, no receive took it yet: its payload waits in the ring
        bool payload = false;
        bool gone = false;  // its peer closed its end or died: nothing more comes
        P2pMailbox::Arrival a;
    };

    void start_locked();
    bool write_some(int l);  // mu_ held; true if bytes moved
    // mu_ held. `drain`: a held message goes to the mailbox's early
    // messages even when nothing calls for it (its peer died).
    bool read_some(int l, bool drain = false);
    bool take_held(int l, bool drain);  // mu_ held: true if the held message now goes somewhere
    void loop();
    void died(int l);                              // mu_ held: its process is gone
    void lost_in(int l, const std::string &why);   // mu_ held: nothing more comes from it
    void lost_out(int l, const std::string &why);  // mu_ held: nothing more goes to it
    int local(int rank) const { return local_[static_cast<size_t>(rank)]; }

    P2pMailbox &box_;
    std::mutex &mu_;  // the mailbox's: everything below
    std::unique_ptr<ShmLinks> links_;
    const std::vector<int> ranks_;
    const int me_;
    std::vector<int> local_;  // by group rank: the local index, -1 for another host
    std::vector<Out> out_;    // by local index
    std::vector<In> in_;
    std::vector<Links::Want> wants_;
    bool closed_ = false;
    bool routed_ = false;
    bool inline_exchanges_ = false;  // set_inline_exchanges()
    // While waiters poll the rings, the thread rests off its doorbell (so
    // writers need not wake it): until none does, and a while more after
    // one got its message (the next wait is likely to come soon).
    int pollers_ = 0;
    bool look_now_ = false;  // a waiter went to sleep, or a send waits for room
    Clock::time_point rest_until_{};
    std::chrono::microseconds rest_for_;  // the thread's next rest (shm_p2p.cpp: kRest, kRestMost)
    std::condition_variable rest_;
    std::thread thread_;
};

}  // namespace distc

// Point-to-point matching for one group, whatever carries the bytes: a
// receive takes the first message of its peer (or of any peer) and tag, in
// posting and arrival order; a message that comes before its receive is kept
// until one is posted. Carriers move the bytes: the TCP connections
// (tcp/tcp_p2p.hpp) for some peers, the shared-memory rings
// (shm/shm_p2p.hpp) for those on this host. With one mailbox behind both, a
// receive from any source takes a message from either, and every rule
// (sizes, withdrawn receives, a peer that is gone) is the same on both.
//
// One mutex (mu()) guards the mailbox and every carrier's state, so a
// carrier can hand a receive bytes while the caller withdraws it.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "backends/host/transport/transport.hpp"

namespace distc {

class P2pMailbox final : public P2pTransport {
public:
    struct Arrival;
    struct Early;  // a message that came before its receive
    struct Op {
        Op(bool s, int p, uint32_t t, uint8_t *d, size_t n) : send(s), peer(p), tag(t), data(d), len(n) {}
        bool send;
        int peer;  // the destination, the source (-1: any) and, once received, who sent it
        uint32_t tag;
        uint8_t *data;
        size_t len;
        size_t done = 0;  // send: the carrier's progress (0: nothing of it moved yet)
        // send: one of a batch that also receives from its peer, an exchange
        // (the peer likely sends at the same moment)
        bool exchange = false;
        std::vector<uint8_t> kept;   // a withdrawn send's payload, so that the stream stays whole
        Arrival *filling = nullptr;  // receive: the message being written into it
        // Stored last, with release, under mu(): a waiter that sees it set
        // reads code, msg and peer without the lock.
        std::atomic<bool> finished{false};
        int code = 0;
        std::string msg;
    };
    // What moves the messages to and from some peers. Every call but
    // connect() is made with mu() held.
    class Carrier {
    public:
        virtual ~Carrier() = default;
        // Before a send to `peer` is queued (mu() not held): a carrier that
        // connects on first use does so here, and throws if it cannot.
        virtual void connect(int peer) { (void)peer; }
        // A receive was posted (it is in the mailbox now): from the first
        // on, whatever arrives is read.
        virtual void start() = 0;
        // Sends in the order queued; finish() each when its bytes are gone.
        // Throws when the link to op->peer is broken.
        virtual void queue(std::shared_ptr<Op> op) = 0;
        // A send that timed out before any of it moved (op.done == 0) leaves
        // its queue. A send partly moved stays and goes from op.kept, which
        // now holds what was at `was`: nothing may read `was` afterwards.
        virtual void unqueue(Op &op) = 0;
        virtual void kept(Op &op, const uint8_t *was) {
            (void)op;
            (void)was;
        }
        virtual std::string who(int peer) const = 0;  // "rank 3 (10.0.0.2:4012)"
        // Moves what can move now from the calling thread, a waiter's, which
        // polls before it sleeps: true if anything moved. A carrier whose
        // thread does all the work says false.
        virtual bool poll() { return false; }
        // A waiter starts or stops polling: the carrier's thread may rest
        // meanwhile. It must look again at once when the waiter goes to
        // sleep (`sleeps`); one whose message came lets it rest a while more.
        virtual void polling_starts() {}
        virtual void polling_stops(bool sleeps) { (void)sleeps; }
    };
    // What a carrier sends before every message's payload (each its own magic).
    struct Header {
        uint32_t magic;
        uint32_t tag;
        uint64_t len;
    };
    // One incoming message, as a carrier reads it: where its bytes go.
    struct Arrival {
        int peer = -1;
        uint64_t len = 0;
        size_t got = 0;  // of the payload
        enum class Into { Op, Early, Discard } into = Into::Discard;
        std::shared_ptr<Op> op;
        Early *early = nullptr;
        // Where the next payload bytes go, at most `want` of them (cut to
        // the room there); nullptr: read and dropped. Throws DISTC_ENOMEM
        // where an early message's memory cannot grow: its link is lost.
        uint8_t *dest(size_t &want);
    };

    explicit P2pMailbox(int size);
    ~P2pMailbox() override;
    P2pMailbox(const P2pMailbox &) = delete;
    P2pMailbox &operator=(const P2pMailbox &) = delete;
    // How a waiter polls a carrier before it sleeps: `polls` times, then
    // yielding between polls, until `spin` passed without progress, or as
    // long as a message of its size takes at `bytes_per_us` (0: no such
    // bound). Only for messages of up to `up_to` bytes: a larger one's
    // carrier thread may move it better. No spin and no polls: it sleeps
    // at once, and the carrier's thread moves everything.
    struct Polling {
        std::chrono::microseconds spin{0};
        unsigned polls = 0;
        size_t up_to = SIZE_MAX;
        size_t bytes_per_us = 0;
    };
    // Messages to and from `peer` go through `c` (set before any is posted;
    // a later route replaces an earlier one). A waiter polls its peer's
    // carrier (every one, for any source) as `p` says; a carrier's first
    // route sets it.
    void route(int peer, Carrier *c, Polling p);
    // Whether `c` carries `peer`'s messages (mu() held, or before any is posted).
    bool carries(const Carrier *c, int peer) const { return route_[static_cast<size_t>(peer)] == c; }

    std::unique_ptr<PendingP2p> post_send(const Tensor &tensor, int dst, uint32_t tag) override;
    std::unique_ptr<PendingP2p> post_recv(Tensor &tensor, int src, uint32_t tag) override;
    // Under one hold of mu() (let go only while it yields or sleeps): a
    // small message's round trip is short enough that each take and release
    // of the lock, and a handle allocated per operation, showed in it.
    int post_wait(Span<AsyncBackend::P2p> ops, Millis timeout) override;

    std::mutex &mu() { return mu_; }
    // What carriers call, mu() held. A message's header came: `a` now says
    // where its payload goes. Returns why it cannot be taken (then the
    // carrier drops its link and calls lost()), "" when it can.
    std::string begin(Arrival &a, int peer, uint32_t tag, uint64_t len);
    // Whether a receive posted now would take a message of `peer` with
    // `tag`; whether any could take some message of `peer` (any source too).
    bool would_take(int peer, uint32_t tag) const;
    bool awaits(int peer) const;
    // Every payload byte is in: its receive completes, or it waits for one.
    void end(Arrival &a);
    // Its link broke mid-message (or between messages: a.peer may be -1).
    void lost(Arrival &a, const std::string &why);
    // Receives from `peer` fail with `why`, and later ones at once.
    void peer_ended(int peer, const std::string &why);
    void peer_back(int peer) { gone_[static_cast<size_t>(peer)].clear(); }
    void finish(Op &op, int code, std::string msg);
    // Everything posted fails, and everything posted later (DISTC_EABORTED).
    void close(const std::string &why);
    bool closed() const { return closed_; }
    const std::string &closed_why() const { return closed_why_; }

private:
    friend class MailboxPending;
    static bool matches(const Op &recv, int peer, uint32_t tag) {
        return recv.tag == tag && (recv.peer < 0 || recv.peer == peer);
    }
    std::string who(int peer) const;
    std::string size_mismatch(int peer, uint64_t sent, uint32_t tag, size_t takes) const;
    void deliver(Early &e);  // a completed early message to a receive posted since
    int wait(Op &op, Millis timeout);
    // The parts of posting and waiting, mu() held (`lk`: a wait lets go of
    // it while it yields or sleeps). A wait that gives up withdraws `op` and
    // throws, naming `timeout`.
    std::shared_ptr<Op> send_locked(const Tensor &t, int dst, uint32_t tag, bool exchange = false);
    std::shared_ptr<Op> recv_locked(const Tensor &t, int src, uint32_t tag);
    int wait_locked(std::unique_lock<std::mutex> &lk, Op &op, Clock::time_point deadline, Millis timeout);
    void withdraw(Op &op);  // a wait gave up on it

    std::mutex mu_;
    std::condition_variable cv_;
    bool closed_ = false;
    std::string closed_why_;
    std::vector<Carrier *> route_;     // by peer rank
    std::vector<Carrier *> carriers_;  // each once
    struct Poller {                    // a carrier that a waiter polls, and how
        Carrier *c;
        Polling p;
    };
    std::vector<Poller> pollers_;
    // Receives not yet matched, in posting order: few at a time, and a
    // vector keeps its memory (a list would allocate for every receive).
    std::vector<std::shared_ptr<Op>> posted_;
    std::list<Early> early_;         // messages not yet matched, in arrival order
    std::vector<std::string> gone_;  // by peer rank: why it is gone, "" while it lives
};

}  // namespace distc

// The transports' progress engine: one collective's messages to and from
// every peer, moved by the calling thread over one byte stream per peer
// (Links: TCP connections, shared-memory rings). Sends and receives on all
// links are interleaved as the links allow, so no message is too large for
// their buffers (a rank that only sent before reading would deadlock once
// both sides' buffers fill), and a receive can trigger work (a reduction)
// while other transfers are still moving. Every message carries a header
// that lets the receiver catch a peer running another call: in full, or,
// where it repeats the link's last header but for the sequence number (a
// loop of the same collective), as its first word alone, which the receiver
// expands from the last header it read there. A small message then takes a
// few dozen bytes of a ring, not a whole cache line.
#pragma once

#include <sys/uio.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/pg/call.hpp"
#include "core/util/clock.hpp"
#include "core/util/fn_ref.hpp"

namespace distc {

// One non-blocking duplex byte stream per peer, as a transport has them.
class Links {
public:
    virtual ~Links() = default;
    // Moves what fits now of the bytes in `iov` to `peer`: the count, 0 when
    // nothing fits. Throws DISTC_EREMOTE when the link is broken.
    virtual size_t write(int peer, const iovec *iov, int n) = 0;
    // Moves what has arrived from `peer` into `iov`: the count, 0 when nothing
    // has. Throws DISTC_EREMOTE when the peer closed its end or died.
    virtual size_t read(int peer, const iovec *iov, int n) = 0;
    struct Want {
        int peer;
        bool write, read;
    };
    // Sleeps until one of `wants` may move (a spurious return is fine) or
    // `deadline` passes.
    virtual void wait(const std::vector<Want> &wants, Clock::time_point deadline) = 0;
    // Peers are 0 .. count() - 1 (this rank's own index among them).
    virtual int count() const = 0;
    // Copies the first `n` bytes that `peer` sent and this rank has not read
    // yet to `to`, leaving them unread: false unless that many have come (or
    // where the link cannot look). Only at the start of a message.
    virtual bool peek(int, void *, size_t) { return false; }
};

class Exchange {
public:
    // The group rank of each peer index, for messages (default: the index).
    void name_peers(std::vector<int> ranks) { ranks_ = std::move(ranks); }
    // Queues a message; per peer, messages go over the connection in the order
    // they were queued. A gated message does not start until *gate is true:
    // the engine never waits on it alone, so a gate must be opened by the
    // on_recv callback of a receive queued in the same run.
    void send(int peer, const void *p, size_t n, const bool *gate = nullptr);
    // `id` is handed to on_recv when the message is complete.
    void recv(int peer, void *p, size_t n, int id = -1, const bool *gate = nullptr);

    // Moves every queued message, then clears the queues (keeping their memory
    // for the next collective). Each message carries `call` (what this rank is
    // running), its length and the bytes this rank expects from that peer in
    // all: a peer out of step is DISTC_EPROTO; one running another call, or
    // an all-to-all whose split sizes disagree with this rank's, is
    // DISTC_EINVAL naming both sides, found before its bytes are read. In an
    // all-to-all, the counts in the calls of every peer's first message and
    // this rank's must sum to 0: split sizes that disagree between two other
    // ranks fail this one too (DISTC_EINVAL) once everything moved. Waiting
    // polls the links `polls` times more, then spins (yielding) for `spin`
    // after the last progress, then sleeps in links.wait(). A rank that
    // sleeps long in a call looks, now and then, at what the peers it
    // receives nothing from in it sent: a message of the same collective
    // that another call sent fails it (DISTC_EINVAL) instead of waiting for
    // the timeout, where the peer it waits for runs a third call or never sends.
    void run(Links &links, const Call &call, Clock::time_point deadline, std::chrono::microseconds spin, unsigned polls,
             FnRef<void(int peer, int id)> on_recv);

private:
    struct Header {
        Call call;
        uint64_t len;     // this message's payload
        uint64_t expect;  // what the sender receives from this peer in this call, all messages together
    };
    // A repeated header on the wire: its first word (the call's sequence
    // number, then this kind), which no call has.
    static constexpr size_t kWord = 8;
    static constexpr uint8_t kRepeat = 0xfe;
    static bool repeats(const Header &last, const Header &h);
    struct Msg {
        uint8_t *p;
        size_t n;
        int id;
        const bool *gate;
    };
    // One direction of one connection: its messages, the current one and how
    // far it has got (header and payload bytes together).
    struct Lane {
        std::vector<Msg> msgs;
        size_t next = 0;
        size_t done = 0;
        // The current message's header on the wire: kWord or sizeof(Header).
        // A receiver's is a guess until the first word is in (pull()).
        size_t hl = 0;
        Header hdr{};
        bool idle() const { return next == msgs.size(); }
        void reset() {
            msgs.clear();
            next = done = hl = 0;
        }
        bool ready() const { return !idle() && (!msgs[next].gate || *msgs[next].gate); }
    };
    struct Peer {
        Lane out, in;
        uint64_t out_total = 0, in_total = 0;  // this call's bytes each way, as queued
        // The last header sent and read on this link, kept from call to
        // call: a repeated header means the same on both ends.
        Header sent{}, got{};
        bool has_sent = false, has_got = false;
    };

    Peer &peer(int p);
    static int remaining(Lane &l, ::iovec *iov);  // the rest of the current message
    // Whether `pr`'s next header, as this rank's call expects it, repeats
    // the last one read: what a receiver guesses before the first word is in.
    static bool expects_repeat(const Peer &pr, const Lane &l, const Call &call);
    // The first word of `l`'s header is in, `extra` bytes after it in the
    // places the guess gave them: reads what kind of header it is, and puts
    // the bytes where they belong if the guess was wrong.
    void settle_header(Peer &pr, Lane &l, size_t extra, const Call &call, int peer);
    // Moves what the link takes now; true if any byte moved.
    bool push(Links &links, Peer &pr, const Call &call, int peer);
    bool pull(Links &links, Peer &pr, const Call &call, int peer, FnRef<void(int, int)> on_recv);
    // A peer's link broke: reads what every peer sent before, and throws
    // what a header there says is wrong (else returns; the loss stands).
    void explain_loss(Links &links, const Call &call, FnRef<void(int, int)> on_recv);
    // The checks of a peer's header, once it is in.
    void check_header(const Peer &pr, const Lane &l, const Call &call, int peer) const;
    [[noreturn]] void disagree(const Call &theirs, const Call &call, int peer) const;
    // Looks at the next message of each peer this rank receives nothing
    // from in this call (Links::peek), and throws where it is one of this
    // collective (its sequence number) that another call sent.
    void look_at_others(Links &links, const Call &call) const;
    std::vector<Peer> peers_;
    std::vector<Links::Want> wants_;  // kept: no allocation per wait
    uint64_t digest_ = 0;             // all-to-all: the calls' counts summed, this rank's and its peers'
    std::vector<int> ranks_;
    std::string rank_name(int peer) const;
};

}  // namespace distc

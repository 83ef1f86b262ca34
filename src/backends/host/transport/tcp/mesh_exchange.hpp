// The mesh's progress engine: one collective's messages to and from every
// peer, moved by the calling thread over non-blocking sockets. Sends and
// receives on all connections are interleaved as the sockets allow, so no
// message is too large for the kernel's buffers (a rank that only sent before
// reading would deadlock once both sides' buffers fill), and a receive can
// trigger work (a reduction) while other transfers are still moving.
#pragma once

#include <sys/uio.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "core/pg/call.hpp"
#include "core/util/fn_ref.hpp"
#include "core/util/socket.hpp"

namespace distc {

class MeshExchange {
public:
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
    // DISTC_EINVAL naming both sides, found before its bytes are read. Waiting
    // spins (yielding) for `spin` after the last progress, then sleeps in poll.
    void run(const std::vector<Fd> &socks, const Call &call, Clock::time_point deadline, std::chrono::microseconds spin,
             FnRef<void(int peer, int id)> on_recv);

private:
    struct Header {
        Call call;
        uint64_t len;     // this message's payload
        uint64_t expect;  // what the sender receives from this peer in this call, all messages together
    };
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
        Header hdr{};
        bool idle() const { return next == msgs.size(); }
        void reset() {
            msgs.clear();
            next = done = 0;
        }
        bool ready() const { return !idle() && (!msgs[next].gate || *msgs[next].gate); }
    };
    struct Peer {
        Lane out, in;
        uint64_t out_total = 0, in_total = 0;  // this call's bytes each way, as queued
    };

    Peer &peer(int p);
    static int remaining(Lane &l, ::iovec *iov);  // the rest of the current message
    // Moves what the socket takes now; true if any byte moved.
    bool push(int fd, Peer &pr, const Call &call, int peer);
    bool pull(int fd, Peer &pr, const Call &call, int peer, FnRef<void(int, int)> on_recv);
    // The checks of a peer's header, once it is in.
    void check_header(const Peer &pr, const Lane &l, const Call &call, int peer) const;
    std::vector<Peer> peers_;
};

}  // namespace distc

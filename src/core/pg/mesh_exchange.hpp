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
    // for the next collective). Each message carries `seq` and its length, so
    // ranks out of step get DISTC_EPROTO instead of each other's bytes. Waiting
    // spins (yielding) for `spin` after the last progress, then sleeps in poll.
    void run(const std::vector<Fd> &socks, uint32_t seq, Clock::time_point deadline, std::chrono::microseconds spin,
             FnRef<void(int peer, int id)> on_recv);

private:
    struct Header {
        uint32_t seq;
        uint32_t len;
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
    };

    Peer &peer(int p);
    static int remaining(Lane &l, ::iovec *iov);  // the rest of the current message
    // Moves what the socket takes now; true if any byte moved.
    bool push(int fd, Lane &l, uint32_t seq, int peer);
    bool pull(int fd, Lane &l, uint32_t seq, int peer, FnRef<void(int, int)> on_recv);
    std::vector<Peer> peers_;
};

}  // namespace distc

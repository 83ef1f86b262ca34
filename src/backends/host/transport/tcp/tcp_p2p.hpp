// Point-to-point over TCP: sends and receives matched by peer and tag, any
// source included, without Gloo's full mesh. A rank connects to a peer the
// first time it sends to it (to the listener the group's mesh already
// advertised), and each direction has its own connection, so nobody waits
// for the other side to choose. Messages are eager: a send completes once
// its bytes are in the kernel's hands; a message that arrives before its
// receive is posted is kept until one is. One thread per group, started on
// the first send or receive, reads every incoming connection.
#pragma once

#include <condition_variable>
#include <deque>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "backends/host/transport/transport.hpp"
#include "core/util/socket.hpp"

struct epoll_event;

namespace distc {

class TcpP2p final : public P2pTransport {
public:
    // `listener`: this rank's listening socket; `addrs`: each rank's "host:port".
    TcpP2p(int rank, std::vector<std::string> addrs, Fd listener, Millis connect_timeout);
    ~TcpP2p() override;
    TcpP2p(const TcpP2p &) = delete;
    TcpP2p &operator=(const TcpP2p &) = delete;

    std::unique_ptr<PendingP2p> post_send(const Tensor &tensor, int dst, uint32_t tag) override;
    std::unique_ptr<PendingP2p> post_recv(Tensor &tensor, int src, uint32_t tag) override;
    // Breaks every connection; what is posted fails at once (any thread).
    void close() noexcept;
    // Watches the group's other connection to `peer` (the mesh's) for its
    // end: a peer that never sent to this rank has no connection here to
    // close, yet a receive from it must learn that it is gone.
    void watch(int peer, int fd);

    struct Op;  // tcp_p2p.cpp

private:
    struct Header {
        uint32_t magic;
        uint32_t tag;
        uint64_t len;
    };
    struct Out;     // one outgoing connection and its queued sends
    struct In;      // one incoming connection and where its current message goes
    struct Early {  // a message that came before its receive
        int peer;
        uint32_t tag;
        std::unique_ptr<uint8_t[]> data;  // not zero-filled: memory is taken as the bytes arrive
        size_t size;
        bool complete = false;
    };
    friend class TcpPending;

    void start_thread_locked();
    Out &out_to(int dst);     // connects on first use (mu_ not held)
    void write_some(Out &o);  // mu_ held
    void loop();
    void handle(const ::epoll_event *evs, int n);  // mu_ held: one batch of events
    void accept_all();
    void read_some(In &in);                     // mu_ held
    void on_header(In &in);                     // mu_ held
    void deliver(Early &e);                     // mu_ held: a completed early message to a receive posted since
    void lost(In &in, const std::string &why);  // mu_ held
    void peer_gone(int peer);                   // mu_ held: its mesh connection ended
    void check_gone();                          // mu_ held: receives from peers gone with nothing left to read fail
    void peer_ended(int peer, const std::string &why);            // mu_ held: its receives fail, and later ones at once
    static bool matches(const Op &recv, int peer, uint32_t tag);  // a message of (peer, tag) is for `recv`
    std::string size_mismatch(int peer, uint64_t sent, uint32_t tag, size_t takes) const;
    void finish(Op &op, int code, std::string msg);  // mu_ held
    void withdraw(Op &op);                           // mu_ held: a wait gave up on it
    int wait(Op &op, Millis timeout);
    std::string who(int peer) const;

    const int rank_;
    const std::vector<std::string> addrs_;
    Fd listener_;
    const Millis connect_timeout_;
    Fd epoll_, wake_;
    std::mutex connect_mu_;  // one connection attempt at a time
    std::mutex mu_;          // everything below
    std::condition_variable cv_;
    bool closed_ = false;
    std::string closed_why_;
    std::thread thread_;
    std::vector<std::unique_ptr<Out>> out_;  // by peer rank
    std::list<std::unique_ptr<In>> in_;
    std::list<std::shared_ptr<Op>> posted_;  // receives not yet matched, in posting order
    std::list<Early> early_;                 // messages not yet matched, in arrival order
    std::vector<std::string> gone_;          // by peer rank: why its incoming connection ended, "" while it lives
    std::vector<char> mesh_gone_;            // by peer rank: its mesh connection ended, not yet acted on
    std::vector<int> mesh_fd_;               // by peer rank: the watched mesh connection, -1 once it ended
};

}  // namespace distc

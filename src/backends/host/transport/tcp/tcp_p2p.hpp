// Point-to-point over TCP: the carrier (../p2p_mailbox.hpp) of messages to
// and from peers on other hosts, without Gloo's full mesh. A rank connects
// to a peer the first time it sends to it (to the listener the group's mesh
// already advertised), and each direction has its own connection, so nobody
// waits for the other side to choose. Messages are eager: a send completes
// once its bytes are in the kernel's hands. One thread per group, started
// on the first send or receive, reads every incoming connection, except
// while a waiter polls them itself (a small message: P2pMailbox::route).
#pragma once

#include <deque>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "backends/host/transport/p2p_mailbox.hpp"
#include "core/util/socket.hpp"

struct epoll_event;

namespace distc {

class TcpP2p final : public P2pMailbox::Carrier {
public:
    // `listener`: this rank's listening socket; `addrs`: each rank's "host:port".
    TcpP2p(P2pMailbox &box, int rank, std::vector<std::string> addrs, Fd listener, Millis connect_timeout);
    ~TcpP2p() override;
    TcpP2p(const TcpP2p &) = delete;
    TcpP2p &operator=(const TcpP2p &) = delete;

    void connect(int peer) override;
    void start() override { start_thread_locked(); }
    void queue(std::shared_ptr<P2pMailbox::Op> op) override;
    void unqueue(P2pMailbox::Op &op) override;
    std::string who(int peer) const override;
    // A waiter reads what its incoming connections hold and sends what the
    // outgoing ones take now, as the thread would: it need not wait for the
    // thread's wake-up and then its own. Meanwhile the thread does not watch
    // them, so that they do not wake it too (it would take the core and the
    // lock from the waiter).
    bool poll() override;
    void polling_starts() override;
    void polling_stops(bool sleeps) override;
    // Breaks every connection; what is posted fails at once (any thread).
    void close() noexcept;
    // Watches the group's other connection to `peer` (the mesh's) for its
    // end: a peer that never sent to this rank has no connection here to
    // close, yet a receive from it must learn that it is gone.
    void watch(int peer, int fd);

private:
    using Op = P2pMailbox::Op;
    using Header = P2pMailbox::Header;
    struct Out;  // one outgoing connection and its queued sends
    struct In;   // one incoming connection and where its current message goes

    void start_thread_locked();
    Out *out_to(int dst);     // mu_ held: the connection, once connect() made it
    void write_some(Out &o);  // mu_ held
    void loop();
    // mu_ held: one batch of events, from the thread or a waiter's poll().
    // Only the thread frees the connections that ended: its batch, taken
    // before it got the lock, may name one that a waiter's batch ended.
    void handle(const ::epoll_event *evs, int n);
    void close_locked();
    void watch_conns(bool on);  // whether the thread's epoll watches conns_
    void accept_all();
    void read_some(In &in);                     // mu_ held
    void lost(In &in, const std::string &why);  // mu_ held
    void peer_gone(int peer);                   // mu_ held: its mesh connection ended
    void check_gone();                          // mu_ held: receives from peers gone with nothing left to read fail

    P2pMailbox &box_;
    const int rank_;
    const std::vector<std::string> addrs_;
    Fd listener_;
    const Millis connect_timeout_;
    Fd epoll_, wake_;
    Fd conns_;               // the connections' epoll (Ins, Outs with bytes to send): in epoll_ while no waiter polls
    std::mutex connect_mu_;  // one connection attempt at a time
    std::mutex &mu_;         // the mailbox's: everything below
    bool closed_ = false;
    int pollers_ = 0;  // waiters polling now
    std::thread thread_;
    std::vector<std::unique_ptr<Out>> out_;  // by peer rank
    std::list<std::unique_ptr<In>> in_;
    std::vector<char> mesh_gone_;  // by peer rank: its mesh connection ended, not yet acted on
    std::vector<int> mesh_fd_;     // by peer rank: the watched mesh connection, -1 once it ended
};

}  // namespace distc

#include "backends/host/transport/tcp/tcp_p2p.hpp"

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "core/util/error.hpp"
#include "support/sigpipe.hpp"

namespace distc {

namespace {
constexpr uint32_t kHello = 0x50324344;    // "DC2P": the first bytes on a connection, then the sender's rank
constexpr uint32_t kMessage = 0x4d324344;  // "DC2M": before every message
// Epoll tags: 0 the listener, 2 the wake-up, an In's address (aligned), an
// Out's address | 1, a watched mesh connection (peer << 3) | 4, the epoll of
// the connections (Ins, and Outs with bytes to send) 6.
constexpr uint64_t kListener = 0, kWake = 2, kMesh = 4, kConns = 6;
}  // namespace

struct TcpP2p::Out {
    int peer;
    Fd fd;
    std::deque<std::shared_ptr<Op>> queue;
    bool armed = false;  // in epoll for EPOLLOUT
    std::string broken;  // why it failed, "" while it works
};

struct TcpP2p::In {
    Fd fd;
    int peer = -1;  // known once its hello is in
    uint32_t hello[2]{};
    Header hdr{};
    size_t got = 0;  // of the hello or the header
    enum class Stage { Hello, Header, Payload } stage = Stage::Hello;
    P2pMailbox::Arrival a;
};

TcpP2p::TcpP2p(P2pMailbox &box, int rank, std::vector<std::string> addrs, Fd listener, Millis connect_timeout) :
    box_(box), rank_(rank), addrs_(std::move(addrs)), listener_(std::move(listener)), connect_timeout_(connect_timeout),
    mu_(box.mu()), out_(addrs_.size()), mesh_gone_(addrs_.size()), mesh_fd_(addrs_.size(), -1) {
    epoll_ = Fd(::epoll_create1(EPOLL_CLOEXEC));
    conns_ = Fd(::epoll_create1(EPOLL_CLOEXEC));
    wake_ = Fd(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
    if (!epoll_.valid() || !conns_.valid() || !wake_.valid()) fail_errno(DISTC_EIO, "epoll/eventfd", errno);
    set_nonblocking(listener_.get());
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = kListener;
    ::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, listener_.get(), &ev);
    ev.data.u64 = kWake;
    ::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, wake_.get(), &ev);
    watch_conns(true);
}

void TcpP2p::watch_conns(bool on) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = kConns;
    ::epoll_ctl(epoll_.get(), on ? EPOLL_CTL_ADD : EPOLL_CTL_DEL, conns_.get(), &ev);
}

TcpP2p::~TcpP2p() {
    close();
    if (thread_.joinable()) thread_.join();
}

std::string TcpP2p::who(int peer) const {
    return "rank " + std::to_string(peer) + " (" + addrs_[static_cast<size_t>(peer)] + ")";
}

void TcpP2p::close() noexcept {
    std::lock_guard<std::mutex> lk(mu_);
    close_locked();
}

void TcpP2p::close_locked() {
    if (closed_) return;
    closed_ = true;
    const std::string why = "the group was aborted (its connections were closed)";
    for (auto &o : out_)
        if (o) {
            ::shutdown(o->fd.get(), SHUT_RDWR);
            for (auto &op : o->queue) box_.finish(*op, DISTC_EABORTED, why);
            o->queue.clear();
        }
    for (auto &in : in_) {
        ::shutdown(in->fd.get(), SHUT_RDWR);
        if (in->a.op) box_.finish(*in->a.op, DISTC_EABORTED, why);
    }
    box_.close(why);
    uint64_t one = 1;
    (void)!::write(wake_.get(), &one, sizeof one);
}

void TcpP2p::watch(int peer, int fd) {
    epoll_event ev{};
    ev.events = EPOLLRDHUP;  // EPOLLHUP and EPOLLERR come anyway; the mesh's own data is not ours to read
    ev.data.u64 = (static_cast<uint64_t>(peer) << 3) | kMesh;
    std::lock_guard<std::mutex> lk(mu_);
    if (::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, fd, &ev) == 0) mesh_fd_[static_cast<size_t>(peer)] = fd;
}

void TcpP2p::peer_gone(int peer) {
    // Its messages come on another connection, which may still hold some:
    // read everything there is first.
    accept_all();
    for (auto &in : in_) read_some(*in);
    mesh_gone_[static_cast<size_t>(peer)] = 1;
    check_gone();
}

void TcpP2p::check_gone() {
    for (size_t p = 0; p < mesh_gone_.size(); ++p) {
        if (!mesh_gone_[p]) continue;
        // A peer on this host sends by shared memory: what it sent before it
        // went may still wait in its ring, and that carrier tells its end.
        if (!box_.carries(this, static_cast<int>(p))) {
            mesh_gone_[p] = 0;
            continue;
        }
        bool unknown = false, connected = false;
        for (auto &in : in_) {
            if (!in->fd.valid()) continue;
            unknown = unknown || in->peer < 0;
            connected = connected || in->peer == static_cast<int>(p);
        }
        if (connected) {  // its own connection's end will tell, after its last message
            mesh_gone_[p] = 0;
            continue;
        }
        if (unknown) continue;  // a connection whose sender is not known yet may be its
        mesh_gone_[p] = 0;
        std::string why =
            who(static_cast<int>(p)) +
            " closed its connections to the group (it freed the group, gave up after a failure there, or died)";
        box_.peer_ended(static_cast<int>(p), why);
    }
}

void TcpP2p::start_thread_locked() {
    if (!thread_.joinable()) thread_ = start_thread([this] { loop(); });
}

void TcpP2p::connect(int dst) {
    auto d = static_cast<size_t>(dst);
    std::lock_guard<std::mutex> one(connect_mu_);
    {
        std::lock_guard<std::mutex> lk(mu_);
        if (out_[d]) return;
    }
    std::string host;
    int port = 0;
    split_host_port(addrs_[d], host, port);  // TcpTransport checked every address
    auto deadline = Clock::now() + connect_timeout_;
    Fd fd;
    try {
        fd = tcp_connect(host, port, deadline);
        uint32_t hello[2] = {kHello, static_cast<uint32_t>(rank_)};
        send_all(fd.get(), hello, sizeof hello, deadline, who(dst));
    } catch (const Error &e) {
        fail(DISTC_EREMOTE, "cannot reach " + who(dst) + " for point-to-point: " + e.what());
    }
    set_nodelay(fd.get());
    set_nonblocking(fd.get());
    auto o = std::make_unique<Out>();
    o->peer = dst;
    o->fd = std::move(fd);
    std::lock_guard<std::mutex> lk(mu_);
    out_[d] = std::move(o);
}

void TcpP2p::queue(std::shared_ptr<Op> op) {
    Out &o = *out_[static_cast<size_t>(op->peer)];
    if (!o.broken.empty()) fail(DISTC_EREMOTE, o.broken);
    o.queue.push_back(std::move(op));
    if (o.queue.size() == 1) write_some(o);  // from this thread: no hand-off when the socket takes it
    if (!o.queue.empty() && !o.armed) {
        epoll_event ev{};
        ev.events = EPOLLOUT;
        ev.data.u64 = reinterpret_cast<uint64_t>(&o) | 1;
        ::epoll_ctl(conns_.get(), EPOLL_CTL_ADD, o.fd.get(), &ev);
        o.armed = true;
        start_thread_locked();
    }
}

void TcpP2p::unqueue(Op &op) {
    Out &o = *out_[static_cast<size_t>(op.peer)];
    o.queue.erase(
        std::remove_if(o.queue.begin(), o.queue.end(), [&](const std::shared_ptr<Op> &p) { return p.get() == &op; }),
        o.queue.end());
}

void TcpP2p::write_some(Out &o) {
    while (!o.queue.empty()) {
        Op &op = *o.queue.front();
        Header h{kMessage, op.tag, op.len};
        iovec iov[2];
        int n = 0;
        if (op.done < sizeof h) iov[n++] = {reinterpret_cast<uint8_t *>(&h) + op.done, sizeof h - op.done};
        size_t sent = op.done > sizeof h ? op.done - sizeof h : 0;
        if (op.len > sent) iov[n++] = {op.data + sent, op.len - sent};
        ssize_t w = 0;
        if (n) {
            msghdr m{};
            m.msg_iov = iov;
            m.msg_iovlen = static_cast<size_t>(n);
            w = ::sendmsg(o.fd.get(), &m, MSG_NOSIGNAL | MSG_DONTWAIT);
        }
        if (w < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return;
            o.broken = "connection to " + who(o.peer) + " lost while sending: " + std::strerror(errno) +
                       " (it gave up on the group after a failure there, or died)";
            for (auto &q : o.queue) box_.finish(*q, DISTC_EREMOTE, o.broken);
            o.queue.clear();
            ::shutdown(o.fd.get(), SHUT_RDWR);
            return;
        }
        op.done += static_cast<size_t>(w);
        if (op.done < sizeof h + op.len) return;  // the socket is full
        box_.finish(op, 0, "");
        o.queue.pop_front();
    }
}

void TcpP2p::loop() {
    epoll_event evs[32];
    for (;;) {
        int n = ::epoll_wait(epoll_.get(), evs, 32, -1);
        if (n < 0 && errno != EINTR) return;
        std::unique_lock<std::mutex> lk(mu_);
        if (closed_) return;
        try {
            handle(evs, n);
        } catch (const std::exception &) {
            // Out of memory for a message or a name: nothing here can go on
            // safely, so everything posted fails rather than waits.
            close_locked();
            return;
        }
        // Connections that ended are removed once no event names them.
        in_.remove_if([](const std::unique_ptr<In> &c) { return !c->fd.valid(); });
    }
}

void TcpP2p::polling_starts() {
    if (pollers_++ == 0) watch_conns(false);
}

void TcpP2p::polling_stops(bool) {
    if (--pollers_ == 0) watch_conns(true);  // what came meanwhile wakes the thread at once
}

bool TcpP2p::poll() {
    if (closed_) return false;
    epoll_event evs[32];
    int n = ::epoll_wait(conns_.get(), evs, 32, 0);
    if (n <= 0) return false;
    try {
        handle(evs, n);
    } catch (const std::exception &) {
        close_locked();  // as the thread does; the waiter's operation fails with the rest
    }
    return true;
}

void TcpP2p::handle(const epoll_event *evs, int n) {
    for (int i = 0; i < n; ++i) {
        uint64_t tag = evs[i].data.u64;
        if (tag == kWake) {
            uint64_t v;
            (void)!::read(wake_.get(), &v, sizeof v);
        } else if (tag == kListener) {
            accept_all();
        } else if (tag == kConns) {  // no waiter polls the connections: they are the thread's
            epoll_event conns[32];
            int k = ::epoll_wait(conns_.get(), conns, 32, 0);
            if (k > 0) handle(conns, k);
        } else if ((tag & 7) == kMesh) {
            auto peer = static_cast<size_t>(tag >> 3);
            if (mesh_fd_[peer] < 0) continue;
            ::epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, mesh_fd_[peer], nullptr);
            mesh_fd_[peer] = -1;
            peer_gone(static_cast<int>(peer));
        } else if (tag & 1) {
            Out &o = *reinterpret_cast<Out *>(tag & ~uint64_t{1});
            write_some(o);
            if (o.queue.empty() && o.armed) {
                ::epoll_ctl(conns_.get(), EPOLL_CTL_DEL, o.fd.get(), nullptr);
                o.armed = false;
            }
        } else {
            read_some(*reinterpret_cast<In *>(tag));
        }
    }
}

void TcpP2p::accept_all() {
    for (;;) {
        int fd = ::accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd < 0) return;  // EAGAIN, or out of descriptors: the peer's connection waits
        auto in = std::make_unique<In>();
        in->fd = Fd(fd);
        epoll_event ev{};
        ev.events = EPOLLIN;
        ev.data.u64 = reinterpret_cast<uint64_t>(in.get());
        ::epoll_ctl(conns_.get(), EPOLL_CTL_ADD, fd, &ev);
        in_.push_back(std::move(in));
    }
}

void TcpP2p::read_some(In &in) {
    if (!in.fd.valid()) return;
    uint8_t discard[4096];
    for (int rounds = 0; rounds < 64; ++rounds) {
        uint8_t *dst;
        size_t want;
        if (in.stage == In::Stage::Hello) {
            dst = reinterpret_cast<uint8_t *>(in.hello) + in.got;
            want = sizeof in.hello - in.got;
        } else if (in.stage == In::Stage::Header) {
            dst = reinterpret_cast<uint8_t *>(&in.hdr) + in.got;
            want = sizeof in.hdr - in.got;
        } else {
            want = in.a.len - in.a.got;
            try {
                dst = in.a.dest(want);
            } catch (const Error &e) {
                return lost(in, e.what());
            }
            if (!dst) dst = discard, want = std::min(want, sizeof discard);
        }
        ssize_t r = want ? ::recv(in.fd.get(), dst, want, MSG_DONTWAIT) : 0;
        if (want && r == 0)
            return lost(in, (in.peer < 0 ? std::string("a peer") : who(in.peer)) + " closed the connection");
        if (r < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return;
            return lost(in, "connection from " + (in.peer < 0 ? std::string("a peer") : who(in.peer)) +
                                " lost: " + std::strerror(errno));
        }
        if (in.stage == In::Stage::Payload) {
            in.a.got += static_cast<size_t>(r);
        } else {
            in.got += static_cast<size_t>(r);
        }
        if (in.stage == In::Stage::Hello) {
            if (in.got < sizeof in.hello) continue;
            int peer = static_cast<int>(in.hello[1]);
            if (in.hello[0] != kHello || peer < 0 || static_cast<size_t>(peer) >= addrs_.size() || peer == rank_)
                return lost(in, "a stranger connected to the group's point-to-point listener");
            in.peer = in.a.peer = peer;
            box_.peer_back(peer);
            in.stage = In::Stage::Header;
            in.got = 0;
            check_gone();
        } else if (in.stage == In::Stage::Header) {
            if (in.got < sizeof in.hdr) continue;
            in.got = 0;
            if (in.hdr.magic != kMessage)
                return lost(in, who(in.peer) + " sent a malformed point-to-point message (DISTC_EPROTO)");
            std::string why = box_.begin(in.a, in.peer, in.hdr.tag, in.hdr.len);
            if (!why.empty()) return lost(in, why);
            in.stage = In::Stage::Payload;
        }
        if (in.stage == In::Stage::Payload && in.a.got == in.a.len) {
            box_.end(in.a);
            in.stage = In::Stage::Header;
        }
    }
}

void TcpP2p::lost(In &in, const std::string &why) {
    box_.lost(in.a, why + " (it gave up on the group after a failure there, or died)");
    ::epoll_ctl(conns_.get(), EPOLL_CTL_DEL, in.fd.get(), nullptr);
    in.fd.reset();
    check_gone();
}

}  // namespace distc

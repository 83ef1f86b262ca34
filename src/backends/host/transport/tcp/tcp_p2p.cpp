#include "backends/host/transport/tcp/tcp_p2p.hpp"

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/sysinfo.h>
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
// Out's address | 1, a watched mesh connection (peer << 3) | 4.
constexpr uint64_t kListener = 0, kWake = 2, kMesh = 4;

// RAM and swap together: no message larger than that can be kept.
uint64_t machine_memory() {
    static const uint64_t bytes = [] {
        struct sysinfo si {};
        if (::sysinfo(&si) != 0) return uint64_t{DISTC_TENSOR_MAX_BYTES};
        return (uint64_t{si.totalram} + si.totalswap) * si.mem_unit;
    }();
    return bytes;
}
}  // namespace

struct TcpP2p::Op {
    Op(bool s, int p, uint32_t t, uint8_t *d, size_t n) : send(s), peer(p), tag(t), data(d), len(n) {}
    bool send;
    int peer;  // the destination, the source (-1: any) and, once received, who sent it
    uint32_t tag;
    uint8_t *data;
    size_t len;
    size_t done = 0;            // send: header and payload bytes written
    std::vector<uint8_t> kept;  // a withdrawn send's payload, so that the stream stays whole
    In *filling = nullptr;      // receive: the connection writing into it
    bool finished = false;
    int code = 0;
    std::string msg;
};

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
    size_t got = 0;  // of the hello, the header or the payload, whichever is current
    enum class Stage { Hello, Header, Payload } stage = Stage::Hello;
    enum class Into { Op, Early, Discard } into = Into::Discard;
    std::shared_ptr<Op> op;
    Early *early = nullptr;
};

class TcpPending final : public PendingP2p {
public:
    TcpPending(TcpP2p &p, std::shared_ptr<TcpP2p::Op> op) : p_(p), op_(std::move(op)) {}
    ~TcpPending() override {
        std::lock_guard<std::mutex> lk(p_.mu_);
        p_.withdraw(*op_);
    }
    int wait(Millis timeout) override { return p_.wait(*op_, timeout); }

private:
    TcpP2p &p_;
    std::shared_ptr<TcpP2p::Op> op_;
};

TcpP2p::TcpP2p(int rank, std::vector<std::string> addrs, Fd listener, Millis connect_timeout) :
    rank_(rank), addrs_(std::move(addrs)), listener_(std::move(listener)), connect_timeout_(connect_timeout),
    out_(addrs_.size()), gone_(addrs_.size()), mesh_gone_(addrs_.size()), mesh_fd_(addrs_.size(), -1) {
    epoll_ = Fd(::epoll_create1(EPOLL_CLOEXEC));
    wake_ = Fd(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
    if (!epoll_.valid() || !wake_.valid()) fail_errno(DISTC_EIO, "epoll/eventfd", errno);
    set_nonblocking(listener_.get());
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = kListener;
    ::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, listener_.get(), &ev);
    ev.data.u64 = kWake;
    ::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, wake_.get(), &ev);
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
    if (closed_) return;
    closed_ = true;
    closed_why_ = "the group was aborted (its connections were closed)";
    for (auto &o : out_)
        if (o) {
            ::shutdown(o->fd.get(), SHUT_RDWR);
            for (auto &op : o->queue) finish(*op, DISTC_EABORTED, closed_why_);
            o->queue.clear();
        }
    for (auto &in : in_) {
        ::shutdown(in->fd.get(), SHUT_RDWR);
        if (in->op) finish(*in->op, DISTC_EABORTED, closed_why_);
    }
    for (auto &op : posted_) finish(*op, DISTC_EABORTED, closed_why_);
    posted_.clear();
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
        peer_ended(static_cast<int>(p), why);
    }
}

void TcpP2p::peer_ended(int peer, const std::string &why) {
    gone_[static_cast<size_t>(peer)] = why;
    posted_.remove_if([&](const std::shared_ptr<Op> &op) {
        if (op->peer != peer) return false;
        finish(*op, DISTC_EREMOTE, why);
        return true;
    });
}

bool TcpP2p::matches(const Op &recv, int peer, uint32_t tag) {
    return recv.tag == tag && (recv.peer < 0 || recv.peer == peer);
}

std::string TcpP2p::size_mismatch(int peer, uint64_t sent, uint32_t tag, size_t takes) const {
    return who(peer) + " sent " + std::to_string(sent) + " bytes with tag " + std::to_string(tag) +
           "; this receive takes " + std::to_string(takes);
}

void TcpP2p::start_thread_locked() {
    if (!thread_.joinable()) thread_ = start_thread([this] { loop(); });
}

TcpP2p::Out &TcpP2p::out_to(int dst) {
    auto d = static_cast<size_t>(dst);
    std::lock_guard<std::mutex> one(connect_mu_);
    {
        std::lock_guard<std::mutex> lk(mu_);
        if (out_[d]) return *out_[d];
    }
    const std::string &a = addrs_[d];
    auto colon = a.rfind(':');
    auto deadline = Clock::now() + connect_timeout_;
    Fd fd;
    try {
        fd = tcp_connect(a.substr(0, colon), std::atoi(a.c_str() + colon + 1), deadline);
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
    return *out_[d];
}

void TcpP2p::finish(Op &op, int code, std::string msg) {
    if (op.finished) return;
    op.finished = true;
    op.code = code;
    op.msg = std::move(msg);
    op.filling = nullptr;
    cv_.notify_all();
}

std::unique_ptr<PendingP2p> TcpP2p::post_send(const Tensor &t, int dst, uint32_t tag) {
    auto op = std::make_shared<Op>(true, dst, tag, t.bytes(), t.nbytes());
    Out &o = out_to(dst);
    std::lock_guard<std::mutex> lk(mu_);
    if (closed_) fail(DISTC_EABORTED, closed_why_);
    if (!o.broken.empty()) fail(DISTC_EREMOTE, o.broken);
    o.queue.push_back(op);
    if (o.queue.size() == 1) write_some(o);  // from this thread: no hand-off when the socket takes it
    if (!o.queue.empty() && !o.armed) {
        epoll_event ev{};
        ev.events = EPOLLOUT;
        ev.data.u64 = reinterpret_cast<uint64_t>(&o) | 1;
        ::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, o.fd.get(), &ev);
        o.armed = true;
        start_thread_locked();
    }
    return std::make_unique<TcpPending>(*this, std::move(op));
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
            for (auto &q : o.queue) finish(*q, DISTC_EREMOTE, o.broken);
            o.queue.clear();
            ::shutdown(o.fd.get(), SHUT_RDWR);
            return;
        }
        op.done += static_cast<size_t>(w);
        if (op.done < sizeof h + op.len) return;  // the socket is full
        finish(op, 0, "");
        o.queue.pop_front();
    }
}

std::unique_ptr<PendingP2p> TcpP2p::post_recv(Tensor &t, int src, uint32_t tag) {
    auto op = std::make_shared<Op>(false, src, tag, t.bytes(), t.nbytes());
    std::lock_guard<std::mutex> lk(mu_);
    if (closed_) fail(DISTC_EABORTED, closed_why_);
    start_thread_locked();
    // A message that came first, in arrival order. From one peer, an earlier
    // message still arriving goes first: it takes this receive when complete.
    for (auto it = early_.begin(); it != early_.end(); ++it) {
        if (!matches(*op, it->peer, it->tag)) continue;
        if (!it->complete) {
            if (src >= 0) break;
            continue;
        }
        if (it->size != op->len) {
            std::string why = size_mismatch(it->peer, it->size, tag, op->len);
            early_.erase(it);
            fail(DISTC_EINVAL, why);
        }
        if (op->len) std::memcpy(op->data, it->data.get(), op->len);
        op->peer = it->peer;
        early_.erase(it);
        finish(*op, 0, "");
        return std::make_unique<TcpPending>(*this, std::move(op));
    }
    if (src >= 0 && !gone_[static_cast<size_t>(src)].empty()) fail(DISTC_EREMOTE, gone_[static_cast<size_t>(src)]);
    posted_.push_back(op);
    return std::make_unique<TcpPending>(*this, std::move(op));
}

int TcpP2p::wait(Op &op, Millis timeout) {
    std::unique_lock<std::mutex> lk(mu_);
    if (!cv_.wait_for(lk, timeout, [&] { return op.finished; })) {
        withdraw(op);
        fail(DISTC_ETIMEOUT, std::string(op.send ? "sending to " : "waiting for a message from ") +
                                 (op.peer < 0 ? std::string("any rank") : who(op.peer)) + " with tag " +
                                 std::to_string(op.tag) + " timed out after " + std::to_string(timeout.count()) +
                                 " ms");
    }
    if (op.code) fail(op.code, op.msg);
    return op.peer;
}

void TcpP2p::withdraw(Op &op) {
    if (op.finished) return;
    op.finished = true;
    op.code = DISTC_ETIMEOUT;
    if (!op.send) {
        posted_.remove_if([&](const std::shared_ptr<Op> &p) { return p.get() == &op; });
        if (op.filling) {
            // The rest of a message arriving into it is read and dropped.
            op.filling->into = In::Into::Discard;
            op.filling->op.reset();
            op.filling = nullptr;
        }
        return;
    }
    Out &o = *out_[static_cast<size_t>(op.peer)];
    if (op.done == 0) {
        o.queue.erase(std::remove_if(o.queue.begin(), o.queue.end(),
                                     [&](const std::shared_ptr<Op> &p) { return p.get() == &op; }),
                      o.queue.end());
        return;
    }
    // Partly written: the peer expects the rest, which goes from a copy now
    // that the caller may free its buffer.
    op.kept.assign(op.data, op.data + op.len);
    op.data = op.kept.data();
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
            lk.unlock();
            close();
            return;
        }
    }
}

void TcpP2p::handle(const epoll_event *evs, int n) {
    for (int i = 0; i < n; ++i) {
        uint64_t tag = evs[i].data.u64;
        if (tag == kWake) {
            uint64_t v;
            (void)!::read(wake_.get(), &v, sizeof v);
        } else if (tag == kListener) {
            accept_all();
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
                ::epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, o.fd.get(), nullptr);
                o.armed = false;
            }
        } else {
            read_some(*reinterpret_cast<In *>(tag));
        }
    }
    // Connections that ended are removed once no event names them.
    in_.remove_if([](const std::unique_ptr<In> &c) { return !c->fd.valid(); });
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
        ::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, fd, &ev);
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
            want = in.hdr.len - in.got;
            if (in.into == In::Into::Op)
                dst = in.op->data + in.got;
            else if (in.into == In::Into::Early)
                dst = in.early->data.get() + in.got;
            else
                dst = discard, want = std::min(want, sizeof discard);
        }
        ssize_t r = want ? ::recv(in.fd.get(), dst, want, MSG_DONTWAIT) : 0;
        if (want && r == 0)
            return lost(in, (in.peer < 0 ? std::string("a peer") : who(in.peer)) + " closed the connection");
        if (r < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return;
            return lost(in, "connection from " + (in.peer < 0 ? std::string("a peer") : who(in.peer)) +
                                " lost: " + std::strerror(errno));
        }
        in.got += static_cast<size_t>(r);
        if (in.stage == In::Stage::Hello) {
            if (in.got < sizeof in.hello) continue;
            int peer = static_cast<int>(in.hello[1]);
            if (in.hello[0] != kHello || peer < 0 || static_cast<size_t>(peer) >= addrs_.size() || peer == rank_)
                return lost(in, "a stranger connected to the group's point-to-point listener");
            in.peer = peer;
            gone_[static_cast<size_t>(peer)].clear();
            in.stage = In::Stage::Header;
            in.got = 0;
            check_gone();
        } else if (in.stage == In::Stage::Header) {
            if (in.got < sizeof in.hdr) continue;
            in.got = 0;
            on_header(in);
            if (!in.fd.valid()) return;
        }
        if (in.stage == In::Stage::Payload && in.got == in.hdr.len) {
            if (in.into == In::Into::Op) {
                in.op->peer = in.peer;
                finish(*in.op, 0, "");
                in.op.reset();
            } else if (in.into == In::Into::Early) {
                Early *e = in.early;
                in.early = nullptr;  // delivered, it is gone
                e->complete = true;
                deliver(*e);
            }
            in.into = In::Into::Discard;
            in.stage = In::Stage::Header;
            in.got = 0;
        }
    }
}

void TcpP2p::on_header(In &in) {
    if (in.hdr.magic != kMessage)
        return lost(in, who(in.peer) + " sent a malformed point-to-point message (DISTC_EPROTO)");
    in.stage = In::Stage::Payload;
    for (auto it = posted_.begin(); it != posted_.end(); ++it) {
        Op &op = **it;
        if (!matches(op, in.peer, in.hdr.tag)) continue;
        std::shared_ptr<Op> mine = std::move(*it);
        posted_.erase(it);
        if (op.len != in.hdr.len) {
            finish(op, DISTC_EINVAL, size_mismatch(in.peer, in.hdr.len, in.hdr.tag, op.len));
            in.into = In::Into::Discard;
            return;
        }
        in.into = In::Into::Op;
        in.op = std::move(mine);
        op.filling = &in;
        return;
    }
    // Kept until its receive is posted, so it must fit in this machine's memory.
    if (in.hdr.len > DISTC_TENSOR_MAX_BYTES || in.hdr.len > machine_memory())
        return lost(in, who(in.peer) + " sent a message of " + std::to_string(in.hdr.len) +
                            " bytes before its receive was posted, more than this machine's memory");
    try {
        early_.push_back(Early{in.peer, in.hdr.tag,
                               std::unique_ptr<uint8_t[]>(new uint8_t[in.hdr.len ? in.hdr.len : 1]),
                               static_cast<size_t>(in.hdr.len)});
    } catch (const std::bad_alloc &) {
        return lost(in, "no memory to keep the " + std::to_string(in.hdr.len) + "-byte message " + who(in.peer) +
                            " sent before its receive was posted");
    }
    in.into = In::Into::Early;
    in.early = &early_.back();
}

void TcpP2p::deliver(Early &e) {
    for (auto it = posted_.begin(); it != posted_.end(); ++it) {
        Op &op = **it;
        if (!matches(op, e.peer, e.tag)) continue;
        if (op.len != e.size) {
            finish(op, DISTC_EINVAL, size_mismatch(e.peer, e.size, e.tag, op.len));
        } else {
            if (op.len) std::memcpy(op.data, e.data.get(), op.len);
            op.peer = e.peer;
            finish(op, 0, "");
        }
        posted_.erase(it);
        early_.remove_if([&](const Early &x) { return &x == &e; });
        return;
    }
}

void TcpP2p::lost(In &in, const std::string &why) {
    std::string full = why + " (it gave up on the group after a failure there, or died)";
    if (in.op) finish(*in.op, DISTC_EREMOTE, full);
    in.op.reset();
    if (in.into == In::Into::Early && in.early && !in.early->complete)
        early_.remove_if([&](const Early &x) { return &x == in.early; });
    in.early = nullptr;
    if (in.peer >= 0) peer_ended(in.peer, full);
    ::epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, in.fd.get(), nullptr);
    in.fd.reset();
    check_gone();
}

}  // namespace distc

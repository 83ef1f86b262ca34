#include "core/store/tcp/tcp_server.hpp"

#include <fcntl.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sched.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "core/util/env.hpp"
#include "core/util/error.hpp"
#include "support/sigpipe.hpp"

namespace distc {

using wire::Dialect;
using wire::Op;
using wire::Reader;
using wire::Writer;

namespace {
constexpr uint64_t kListenId = 0, kWakeId = 1;
constexpr size_t kReadChunk = 64 * 1024;
constexpr size_t kReadPerEvent = 16 * kReadChunk;  // then the other connections' turn
constexpr size_t kHeldInput = kReadChunk;
constexpr size_t kUnauthenticatedInput = 4096;  // a HELLO and an AUTH fit many times
constexpr size_t kKeptOutput = 4096;

// How long the loop keeps polling after activity before it sleeps: a sleeping
// thread takes tens of microseconds to wake on this kind of machine.
int64_t spin_us() { return env_int("DISTC_STORE_SERVER_SPIN_US", 20, 0, 1000000); }

}  // namespace

TcpServer::TcpServer(const std::string &host, int port, const TcpServerOptions &opts) :
    opts_(opts),
    torch_allowed_(opts.allow_torch_clients == 1 || (opts.allow_torch_clients == -1 && opts.token.empty())) {
    listen_ = tcp_listen(host, port, 4096);
    set_nonblocking(listen_.get());
    port_ = local_port(listen_.get());
    epoll_.reset(::epoll_create1(EPOLL_CLOEXEC));
    wake_.reset(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
    spare_.reset(::open("/dev/null", O_RDONLY | O_CLOEXEC));
    if (!epoll_.valid() || !wake_.valid()) fail_errno(DISTC_EIO, "cannot create the server's event loop", errno);
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = kListenId;
    ::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, listen_.get(), &ev);
    ev.data.u64 = kWakeId;
    ::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, wake_.get(), &ev);
    thread_ = start_thread([this] { run(); });
}

TcpServer::~TcpServer() {
    uint64_t one = 1;
    if (::write(wake_.get(), &one, sizeof one) < 0) {
        // The eventfd cannot be full; nothing else to do in a destructor.
    }
    if (thread_.joinable()) thread_.join();
}

void TcpServer::run() noexcept {
    const int64_t spin = spin_us();
    epoll_event evs[256];
    auto last_activity = Clock::now();
    for (;;) {
        bool spinning = Clock::now() - last_activity < std::chrono::microseconds(spin);
        int timeout = spinning ? 0 : -1;
        if (accept_paused_ && !spinning) {
            auto left = std::chrono::ceil<std::chrono::milliseconds>(accept_resume_ - Clock::now()).count();
            timeout = static_cast<int>(std::max<int64_t>(left, 0));
        }
        if (spinning) sched_yield();  // see recv_all: spin without starving clients of a core
        int n = ::epoll_wait(epoll_.get(), evs, 256, timeout);
        if (n < 0 && errno != EINTR) return;
        // Whatever else is going on: busy clients must not keep new ones out.
        if (accept_paused_ && Clock::now() >= accept_resume_) {
            accept_paused_ = false;
            epoll_event ev{};
            ev.events = EPOLLIN;
            ev.data.u64 = kListenId;
            ::epoll_ctl(epoll_.get(), EPOLL_CTL_MOD, listen_.get(), &ev);
        }
        if (n <= 0) continue;
        last_activity = Clock::now();
        for (int i = 0; i < n; ++i) {
            uint64_t id = evs[i].data.u64;
            if (id == kWakeId) {
                drain();
                conns_.clear();
                nconns_ = 0;
                return;
            }
            if (id == kListenId)
                accept_all();
            else
                contain(id, [&] { on_event(id, evs[i].events); });
        }
        while (!ready_.empty()) {
            auto ids = std::move(ready_);
            ready_.clear();
            for (uint64_t id : ids) {
                auto it = conns_.find(id);
                if (it != conns_.end()) contain(id, [&] { serve(*it->second); });
            }
        }
    }
}

// Stopping: what every connection has already sent is read and answered, as
// far as the sockets take it without waiting. A client's last write may have
// woken the very waiter that stops this server; its CHECK is answered then,
// not cut off (tcp_client.hpp).
void TcpServer::drain() noexcept {
    std::vector<uint64_t> ids;
    for (auto &kv : conns_) ids.push_back(kv.first);
    for (uint64_t id : ids) {
        auto it = conns_.find(id);
        if (it == conns_.end()) continue;
        contain(id, [&] {
            Conn &c = *it->second;
            if (reading(c)) read_some(c);
            serve(c);
        });
    }
}

template <typename F>
void TcpServer::contain(uint64_t id, F &&f) noexcept {
    try {
        f();
    } catch (...) {
        // Out of memory serving one request (a large value, a large reply), or
        // no randomness for a nonce: that connection goes, the others and the
        // stored keys stay.
        auto it = conns_.find(id);
        if (it != conns_.end()) drop(*it->second, "the server could not serve it (out of memory?)");
    }
}

void TcpServer::accept_all() {
    if (!spare_.valid()) spare_.reset(::open("/dev/null", O_RDONLY | O_CLOEXEC));
    for (;;) {
        int fd = ::accept4(listen_.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0 && errno == EINTR) continue;
        if (fd < 0) {
            int err = errno;
            if ((err == EMFILE || err == ENFILE) && spare_.valid()) {
                // Out of descriptors: the spare one lets the first waiting client
                // in to be closed at once, so it fails fast rather than waiting
                // behind the others; a descriptor freed meanwhile serves the next.
                spare_.reset();
                int refused = ::accept4(listen_.get(), nullptr, nullptr, SOCK_CLOEXEC);
                err = errno;
                if (refused >= 0) ::close(refused);
                spare_.reset(::open("/dev/null", O_RDONLY | O_CLOEXEC));
                if (refused >= 0) {
                    log("refused a client: out of file descriptors");
                    continue;
                }
            }
            if (err == EMFILE || err == ENFILE || err == ENOBUFS || err == ENOMEM) {
                // No spare descriptor or no memory: stop accepting for a moment instead of spinning.
                epoll_event ev{};
                ev.events = 0;
                ev.data.u64 = kListenId;
                ::epoll_ctl(epoll_.get(), EPOLL_CTL_MOD, listen_.get(), &ev);
                accept_paused_ = true;
                accept_resume_ = Clock::now() + std::chrono::milliseconds(100);
            }
            return;
        }
        set_nodelay(fd);
        Fd owned(fd);
        std::unique_ptr<Conn> c;
        try {
            c = std::make_unique<Conn>();
            c->id = next_id_++;
            c->authed = opts_.token.empty();
            c->fd = std::move(owned);
            epoll_event ev{};
            ev.events = c->events = EPOLLIN | EPOLLRDHUP;
            ev.data.u64 = c->id;
            if (::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, fd, &ev) != 0) continue;
            conns_.emplace(c->id, std::move(c));
        } catch (const std::bad_alloc &) {
            if (c && c->fd.valid()) ::epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, fd, nullptr);
            continue;  // the client sees its connection closed
        }
        nconns_ = conns_.size();
    }
}

void TcpServer::log(const std::string &what) noexcept {
    if (!opts_.log) return;
    try {
        opts_.log("distc store server on port " + std::to_string(port_) + ": " + what);
    } catch (...) {
        // Out of memory for the line: it is lost, the server goes on.
    }
}

void TcpServer::drop(Conn &c, const std::string &why, const char *verb) {
    if (opts_.log) log(verb + (" " + peer_address(c.fd.get())) + ": " + why);
    close_conn(c.id);
}

void TcpServer::close_conn(uint64_t id) {
    auto it = conns_.find(id);
    if (it == conns_.end()) return;
    ::epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, it->second->fd.get(), nullptr);
    stop_waiting(*it->second);
    buffered_ -= it->second->accounted;
    conns_.erase(it);
    nconns_ = conns_.size();
}

bool TcpServer::serving(const Conn &c) const {
    return !c.blocked && c.out.size() - c.out_off < opts_.max_unread_reply_bytes;
}

size_t TcpServer::read_limit(const Conn &c) const {
    if (c.closing) return 0;
    if (!c.authed) return kUnauthenticatedInput;  // costs the server little before it knows who calls
    // A connection whose requests are held back is read only a little further,
    // so that a PyTorch 2.x client's CANCEL_WAIT behind a blocked WAIT gets in.
    return serving(c) ? opts_.max_request_bytes : std::min(kHeldInput, opts_.max_request_bytes);
}

bool TcpServer::reading(const Conn &c) const { return c.in_end - c.in_off < read_limit(c); }

void TcpServer::on_event(uint64_t id, uint32_t events) {
    auto it = conns_.find(id);
    if (it == conns_.end()) return;
    Conn &c = *it->second;
    bool eof = false;
    if (events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) {
        if (reading(c))
            eof = read_some(c);
        else
            eof = events & (EPOLLRDHUP | EPOLLHUP | EPOLLERR);  // gone while its requests are held back
    }
    serve(c);
    if (eof) close_conn(id);  // after serving what it sent, as far as it can be
}

bool TcpServer::read_some(Conn &c) {
    const size_t limit = read_limit(c);
    for (size_t total = 0; total < kReadPerEvent;) {
        size_t buffered = c.in_end - c.in_off;
        if (buffered >= limit) break;
        size_t need = std::min(kReadChunk / 4, limit - buffered);
        if (c.in.size() - c.in_end < need) {
            if (c.in_off > 0) {  // slide the unparsed tail to the front first
                std::memmove(c.in.data(), c.in.data() + c.in_off, buffered);
                c.in_end = buffered;
                c.in_off = 0;
            }
            if (c.in.size() - c.in_end < need) {
                if (c.in.empty() && !spare_in_.empty() && spare_in_.size() <= opts_.max_request_bytes)
                    c.in.swap(spare_in_);
                else
                    c.in.resize(std::min(std::max(c.in.size() * 2, kReadChunk), opts_.max_request_bytes));
            }
        }
        size_t space = std::min(c.in.size() - c.in_end, limit - buffered);
        ssize_t r = ::recv(c.fd.get(), c.in.data() + c.in_end, space, 0);
        if (r > 0) {
            c.in_end += static_cast<size_t>(r);
            total += static_cast<size_t>(r);
            if (static_cast<size_t>(r) < space) break;  // drained; saves a recv that says EAGAIN
            continue;
        }
        if (r < 0 && errno == EINTR) continue;
        if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
        return true;  // closed or reset
    }
    return false;
}

void TcpServer::serve(Conn &c) {
    const uint64_t id = c.id;
    for (;;) {
        Stop stop = process(c);
        if (stop == Stop::Closed || !send_pending(c)) return;
        if (c.closing && c.out_off == c.out.size()) {
            close_conn(id);
            return;
        }
        // Requests held back by unread replies may go on once the socket took some.
        if (stop != Stop::Output || !serving(c)) break;
    }
    if (!conns_.count(id)) return;
    // Interest follows the state: reads only while the connection may buffer
    // more; EPOLLRDHUP always, so a client that hangs up is noticed.
    uint32_t want =
        EPOLLRDHUP | (reading(c) ? uint32_t(EPOLLIN) : 0u) | (c.out_off < c.out.size() ? uint32_t(EPOLLOUT) : 0u);
    if (want != c.events) {
        epoll_event ev{};
        ev.events = want;
        ev.data.u64 = c.id;
        ::epoll_ctl(epoll_.get(), EPOLL_CTL_MOD, c.fd.get(), &ev);
        c.events = want;
    }
    size_t held = c.in.size() + c.out.capacity() + c.blocked_keys.capacity();
    buffered_ += held - c.accounted;  // modular arithmetic: a decrease works too
    c.accounted = held;
}

bool TcpServer::send_pending(Conn &c) {
    while (c.out_off < c.out.size()) {
        ssize_t w = ::send(c.fd.get(), c.out.data() + c.out_off, c.out.size() - c.out_off, MSG_NOSIGNAL);
        if (w > 0) {
            c.out_off += static_cast<size_t>(w);
            continue;
        }
        if (w < 0 && errno == EINTR) continue;
        if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
        close_conn(c.id);
        return false;
    }
    if (c.out_off == c.out.size()) {
        c.out_off = 0;
        if (c.out.capacity() > kKeptOutput)
            std::vector<uint8_t>().swap(c.out);  // after a large reply: an idle connection holds little
        else
            c.out.clear();
    } else if (c.out_off >= kReadChunk && c.out_off >= c.out.size() / 2) {
        // A client that reads slowly never lets the buffer empty: drop what was sent.
        c.out.erase(c.out.begin(), c.out.begin() + static_cast<std::ptrdiff_t>(c.out_off));
        c.out_off = 0;
    }
    return true;
}

TcpServer::Stop TcpServer::process(Conn &c) {
    Stop stop = Stop::Input;
    for (;;) {
        if (c.closing) break;
        size_t avail = c.in_end - c.in_off;
        Result unblocked = c.blocked ? try_unblock(c) : Result::Done;
        if (unblocked == Result::Bad) {
            drop(c, c.why);
            return Stop::Closed;
        }
        if (unblocked == Result::Incomplete) {
            // Only a 2.x client's CANCEL_WAIT may overtake a blocked request.
            if (!(avail && c.dialect == Dialect::Torch2 && c.dialect_known &&
                  wire::decode_op(c.dialect, c.in[c.in_off]) == Op::CancelWait)) {
                stop = Stop::Blocked;
                break;
            }
        } else if (c.out.size() - c.out_off >= opts_.max_unread_reply_bytes) {
            stop = Stop::Output;
            break;
        }
        if (avail == 0) break;
        Reader r(c.in.data() + c.in_off, avail);
        uint8_t byte = r.u8();
        if (!c.dialect_known) {
            if (byte == wire::kHello) {
                c.dialect = Dialect::Torch2;
            } else if (byte == 0) {
                // 2.x opens with VALIDATE (0) + magic; in 1.x a 0 is SET with a
                // 64-bit key length whose low half would have to equal the magic.
                uint32_t magic = r.u32();
                if (r.incomplete()) break;
                c.dialect = magic == wire::kTorchMagic ? Dialect::Torch2 : Dialect::Torch1;
                r = Reader(c.in.data() + c.in_off, avail);
                r.u8();
            } else {
                c.dialect = Dialect::Torch1;
            }
            c.dialect_known = true;
            if (byte != wire::kHello) {
                if (!torch_allowed_) {
                    drop(c,
                         opts_.token.empty() ? "a PyTorch-protocol client, and allow_torch_clients is 0"
                                             : "a PyTorch-protocol client cannot prove the token this store "
                                               "requires (allow_torch_clients admits such clients)",
                         "refused");
                    return Stop::Closed;
                }
                c.authed = true;
            }
        }
        Op op = wire::decode_op(c.dialect, byte);
        if (!c.authed && op != Op::Hello && op != Op::Auth) {
            drop(c, std::string(wire::op_name(op)) + " before authenticating", "refused");
            return Stop::Closed;
        }
        c.why.clear();
        Result res = handle(c, op, r);
        if (res == Result::Incomplete && avail >= read_limit(c)) {
            res = Result::Bad;
            c.why = "a request over max_request_bytes (" + std::to_string(read_limit(c)) + ")";
        }
        if (res == Result::Incomplete) break;
        if (res == Result::Bad) {
            drop(c,
                 c.why.empty() ? std::string("sent bytes that break the protocol (") + wire::op_name(op) + ")" : c.why);
            return Stop::Closed;
        }
        c.in_off += r.consumed();
    }
    if (c.in_off == c.in_end) {
        // Nothing buffered: the read buffer goes back to the server (a busy
        // connection takes it again at its next read), or away after a large request.
        c.in_off = c.in_end = 0;
        if (c.in.size() == kReadChunk && spare_in_.empty())
            spare_in_.swap(c.in);
        else
            std::vector<uint8_t>().swap(c.in);
    }
    return stop;
}

}  // namespace distc

#include "backends/host/transport/tcp/mesh_exchange.hpp"

#include <poll.h>
#include <sched.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <cerrno>

#include "core/util/error.hpp"

namespace distc {

namespace {

// Large payloads go as several messages, so a receive's progress (and a
// reduction gated on it) never waits for one huge read.
constexpr size_t kMaxMsg = size_t(1) << 30;

// A peer resets its connections when an operation fails on it (Executor::break_group).
constexpr const char *kGaveUp = " (it gave up on the group after a failure there, or died)";

std::string rank_name(int p) { return "rank " + std::to_string(p); }

}  // namespace

MeshExchange::Peer &MeshExchange::peer(int p) {
    if (peers_.size() <= static_cast<size_t>(p)) peers_.resize(static_cast<size_t>(p) + 1);
    return peers_[static_cast<size_t>(p)];
}

void MeshExchange::send(int p, const void *data, size_t n, const bool *gate) {
    auto *c = static_cast<uint8_t *>(const_cast<void *>(data));
    Peer &pr = peer(p);
    pr.out_total += n;
    auto &msgs = pr.out.msgs;
    do {
        size_t k = n < kMaxMsg ? n : kMaxMsg;
        msgs.push_back(Msg{c, k, -1, gate});
        c += k;
        n -= k;
    } while (n);
}

void MeshExchange::recv(int p, void *data, size_t n, int id, const bool *gate) {
    auto *c = static_cast<uint8_t *>(data);
    Peer &pr = peer(p);
    pr.in_total += n;
    auto &msgs = pr.in.msgs;
    do {
        size_t k = n < kMaxMsg ? n : kMaxMsg;
        n -= k;
        // Only the last piece reports completion.
        msgs.push_back(Msg{c, k, n ? -2 : id, gate});
        c += k;
    } while (n);
}

// The rest of the current message, header then payload, as an iovec list; returns its length.
int MeshExchange::remaining(Lane &l, iovec *iov) {
    const Msg &m = l.msgs[l.next];
    int cnt = 0;
    if (l.done < sizeof(Header)) iov[cnt++] = {reinterpret_cast<uint8_t *>(&l.hdr) + l.done, sizeof(Header) - l.done};
    size_t off = l.done > sizeof(Header) ? l.done - sizeof(Header) : 0;
    if (m.n > off) iov[cnt++] = {m.p + off, m.n - off};
    return cnt;
}

bool MeshExchange::push(int fd, Peer &pr, const Call &call, int p) {
    Lane &l = pr.out;
    bool moved = false;
    while (l.ready()) {
        const Msg &m = l.msgs[l.next];
        if (l.done == 0) l.hdr = Header{call, m.n, pr.in_total};
        // Header and payload in one call: a small message is one segment on the wire.
        iovec iov[2];
        msghdr mh{};
        mh.msg_iov = iov;
        mh.msg_iovlen = static_cast<size_t>(remaining(l, iov));
        ssize_t w = ::sendmsg(fd, &mh, MSG_DONTWAIT | MSG_NOSIGNAL);
        if (w > 0) {
            moved = true;
            l.done += static_cast<size_t>(w);
            if (l.done == sizeof(Header) + m.n) {
                ++l.next;
                l.done = 0;
            }
            continue;
        }
        if (w < 0 && errno == EINTR) continue;
        if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
        fail_errno(DISTC_EREMOTE, "connection to " + rank_name(p) + " lost while sending" + kGaveUp,
                   w < 0 ? errno : EPIPE);
    }
    return moved;
}

bool MeshExchange::pull(int fd, Peer &pr, const Call &call, int p, FnRef<void(int, int)> on_recv) {
    Lane &l = pr.in;
    bool moved = false;
    while (l.ready()) {
        const Msg &m = l.msgs[l.next];
        iovec iov[2];
        msghdr mh{};
        mh.msg_iov = iov;
        mh.msg_iovlen = static_cast<size_t>(remaining(l, iov));
        ssize_t r = ::recvmsg(fd, &mh, MSG_DONTWAIT);
        if (r == 0) fail(DISTC_EREMOTE, rank_name(p) + " closed the connection" + kGaveUp);
        if (r < 0) {
            if (errno == EINTR) continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK) break;
            fail_errno(DISTC_EREMOTE, "connection to " + rank_name(p) + " lost while receiving" + kGaveUp, errno);
        }
        moved = true;
        size_t before = l.done;
        l.done += static_cast<size_t>(r);
        if (before < sizeof(Header) && l.done >= sizeof(Header)) check_header(pr, l, call, p);
        if (l.done == sizeof(Header) + m.n) {
            int id = m.id;
            ++l.next;
            l.done = 0;
            if (id != -2) on_recv(p, id);
        }
    }
    return moved;
}

void MeshExchange::check_header(const Peer &pr, const Lane &l, const Call &call, int p) const {
    const Header &h = l.hdr;
    const Msg &m = l.msgs[l.next];
    if (h.call.seq != call.seq)
        fail(DISTC_EPROTO, rank_name(p) + " sent a message of collective #" + std::to_string(h.call.seq) +
                               " while this rank runs #" + std::to_string(call.seq) + " (ranks out of step)");
    if (!h.call.same_as(call))
        fail(DISTC_EINVAL, "ranks disagree on collective #" + std::to_string(call.seq) + ": " + rank_name(p) +
                               " calls " + describe(h.call) + ", this rank " + describe(call));
    // Both directions of a pair: what the peer expects from us, then what it sends.
    if (l.next == 0 && h.expect != pr.out_total)
        fail(DISTC_EINVAL, rank_name(p) + " expects " + std::to_string(h.expect) + " bytes from this rank in " +
                               describe(call) + ", which sends it " + std::to_string(pr.out_total) +
                               (call.all_to_all() ? ": the ranks' split sizes disagree" : ""));
    if (h.len != m.n)
        fail(call.all_to_all() ? DISTC_EINVAL : DISTC_EPROTO,
             rank_name(p) + " sends " + std::to_string(h.len) + " bytes in " + describe(call) +
                 " where this rank expects " + std::to_string(m.n) +
                 (call.all_to_all() ? ": the ranks' split sizes disagree" : ""));
}

void MeshExchange::run(const std::vector<Fd> &socks, const Call &call, Clock::time_point deadline,
                       std::chrono::microseconds spin, FnRef<void(int, int)> on_recv) {
    // Whatever happens, the next collective starts with empty queues.
    struct Clear {
        std::vector<Peer> &ps;
        ~Clear() {
            for (auto &p : ps) {
                p.out.reset();
                p.in.reset();
                p.out_total = p.in_total = 0;
            }
        }
    } clear{peers_};
    std::vector<pollfd> fds;
    auto spin_until = Clock::now() + spin;
    for (;;) {
        bool moved = false, pending = false;
        for (size_t p = 0; p < peers_.size(); ++p) {
            Peer &pr = peers_[p];
            if (pr.out.idle() && pr.in.idle()) continue;
            int fd = socks[p].get();
            try {
                moved |= push(fd, pr, call, int(p));
            } catch (const Error &e) {
                // The peer reset the connection: what it sent before may say
                // why (another call, other sizes). Read that first; only a
                // peer that agreed with this rank is reported as lost.
                if (e.code() == DISTC_EREMOTE) pull(fd, pr, call, int(p), on_recv);
                throw;
            }
            moved |= pull(fd, pr, call, int(p), on_recv);
            pending |= !pr.out.idle() || !pr.in.idle();
        }
        if (!pending) return;
        if (moved) {
            spin_until = Clock::now() + spin;
            continue;
        }
        if (Clock::now() < spin_until) {
            // Yield while spinning: when ranks outnumber cores, the peer we wait
            // for may need this core; when they do not, this returns at once.
            sched_yield();
            continue;
        }
        fds.clear();
        for (size_t p = 0; p < peers_.size(); ++p) {
            short ev = short((peers_[p].out.ready() ? POLLOUT : 0) | (peers_[p].in.ready() ? POLLIN : 0));
            if (ev) fds.push_back(pollfd{socks[p].get(), ev, 0});
        }
        if (fds.empty()) fail(DISTC_EINTERNAL, "mesh transfers wait on each other (a gate no receive opens)");
        auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
        int rc = left > 0 ? ::poll(fds.data(), fds.size(), left > 1000000 ? 1000000 : int(left) + 1) : 0;
        if (rc < 0 && errno != EINTR) fail_errno(DISTC_EIO, "poll", errno);
        if (rc == 0 && Clock::now() >= deadline) {
            // Name the peers this rank still waits for.
            std::string who;
            for (size_t p = 0; p < peers_.size(); ++p)
                if (!peers_[p].in.idle() || !peers_[p].out.idle()) who += (who.empty() ? "" : ", ") + rank_name(int(p));
            bool receiving = false;
            for (auto &pr : peers_) receiving |= !pr.in.idle();
            fail(DISTC_ETIMEOUT, std::string(receiving ? "waiting for " : "sending to ") + who + " timed out");
        }
    }
}

}  // namespace distc

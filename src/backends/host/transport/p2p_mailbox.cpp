#include "backends/host/transport/p2p_mailbox.hpp"

#include <sys/sysinfo.h>

#include <algorithm>
#include <cstring>
#include <thread>

#include "core/util/error.hpp"

namespace distc {

namespace {
// RAM and swap together: no message larger than that can be kept.
uint64_t machine_memory() {
    static const uint64_t bytes = [] {
        struct sysinfo si {};
        if (::sysinfo(&si) != 0) return uint64_t{DISTC_TENSOR_MAX_BYTES};
        return (uint64_t{si.totalram} + si.totalswap) * si.mem_unit;
    }();
    return bytes;
}

// Whether the batch receives from `peer` (named, not any source).
bool exchanges(Span<AsyncBackend::P2p> ops, int peer) {
    for (const auto &o : ops)
        if (!o.send && o.peer == peer) return true;
    return false;
}
}  // namespace

// Its memory is taken as its bytes arrive, in chunks (Arrival::dest: 64
// KiB, then each as large as all before it, up to 16 MiB): a peer that
// announces a huge message and sends little of it holds little.
struct P2pMailbox::Early {
    int peer;
    uint32_t tag;
    size_t size;
    std::vector<std::pair<std::unique_ptr<uint8_t[]>, size_t>> chunks;  // not zero-filled
    size_t have = 0;                                                    // the chunks' bytes together
    bool complete = false;
    void copy_to(uint8_t *dst) const {
        for (const auto &c : chunks) {
            std::memcpy(dst, c.first.get(), c.second);
            dst += c.second;
        }
    }
};

class MailboxPending final : public PendingP2p {
public:
    MailboxPending(P2pMailbox &m, std::shared_ptr<P2pMailbox::Op> op) : m_(m), op_(std::move(op)) {}
    ~MailboxPending() override {
        if (op_->finished.load(std::memory_order_acquire)) return;  // nothing to withdraw: no lock
        std::lock_guard<std::mutex> lk(m_.mu_);
        m_.withdraw(*op_);
    }
    int wait(Millis timeout) override { return m_.wait(*op_, timeout); }

private:
    P2pMailbox &m_;
    std::shared_ptr<P2pMailbox::Op> op_;
};

uint8_t *P2pMailbox::Arrival::dest(size_t &want) {
    if (into == Into::Op) return op->data + got;
    if (into != Into::Early || want == 0) return nullptr;
    Early &e = *early;
    if (got == e.have) {
        constexpr size_t kFirst = size_t(64) << 10, kMost = size_t(16) << 20;
        const size_t n = std::min(e.size - e.have, std::clamp(e.have, kFirst, kMost));
        try {
            e.chunks.emplace_back(std::unique_ptr<uint8_t[]>(new uint8_t[n]), n);
        } catch (const std::bad_alloc &) {
            fail(DISTC_ENOMEM, "no memory to keep the " + std::to_string(e.size) + "-byte message that rank " +
                                   std::to_string(peer) + " sent before its receive was posted");
        }
        e.have += n;
    }
    const auto &last = e.chunks.back();
    want = std::min(want, e.have - got);
    return last.first.get() + (got - (e.have - last.second));
}

P2pMailbox::P2pMailbox(int size) : route_(static_cast<size_t>(size)), gone_(static_cast<size_t>(size)) {}

P2pMailbox::~P2pMailbox() = default;

void P2pMailbox::route(int peer, Carrier *c, Polling p) {
    route_[static_cast<size_t>(peer)] = c;
    if (std::find(carriers_.begin(), carriers_.end(), c) == carriers_.end()) carriers_.push_back(c);
    if ((p.spin.count() > 0 || p.polls > 0) &&
        std::none_of(pollers_.begin(), pollers_.end(), [&](const Poller &x) { return x.c == c; }))
        pollers_.push_back(Poller{c, p});
}

std::string P2pMailbox::who(int peer) const {
    Carrier *c = peer >= 0 && static_cast<size_t>(peer) < route_.size() ? route_[static_cast<size_t>(peer)] : nullptr;
    return c ? c->who(peer) : "rank " + std::to_string(peer);
}

std::string P2pMailbox::size_mismatch(int peer, uint64_t sent, uint32_t tag, size_t takes) const {
    return who(peer) + " sent " + std::to_string(sent) + " bytes with tag " + std::to_string(tag) +
           "; this receive takes " + std::to_string(takes);
}

void P2pMailbox::finish(Op &op, int code, std::string msg) {
    if (op.finished.load(std::memory_order_relaxed)) return;
    op.code = code;
    op.msg = std::move(msg);
    op.filling = nullptr;
    op.finished.store(true, std::memory_order_release);
    cv_.notify_all();
}

void P2pMailbox::close(const std::string &why) {
    if (closed_) return;
    closed_ = true;
    closed_why_ = why;
    for (auto &op : posted_) finish(*op, DISTC_EABORTED, why);
    posted_.clear();
}

void P2pMailbox::peer_ended(int peer, const std::string &why) {
    gone_[static_cast<size_t>(peer)] = why;
    posted_.erase(std::remove_if(posted_.begin(), posted_.end(),
                                 [&](const std::shared_ptr<Op> &op) {
                                     if (op->peer != peer) return false;
                                     finish(*op, DISTC_EREMOTE, why);
                                     return true;
                                 }),
                  posted_.end());
}

std::unique_ptr<PendingP2p> P2pMailbox::post_send(const Tensor &t, int dst, uint32_t tag) {
    route_[static_cast<size_t>(dst)]->connect(dst);
    std::lock_guard<std::mutex> lk(mu_);
    return std::make_unique<MailboxPending>(*this, send_locked(t, dst, tag));
}

std::unique_ptr<PendingP2p> P2pMailbox::post_recv(Tensor &t, int src, uint32_t tag) {
    std::lock_guard<std::mutex> lk(mu_);
    return std::make_unique<MailboxPending>(*this, recv_locked(t, src, tag));
}

int P2pMailbox::post_wait(Span<AsyncBackend::P2p> ops, Millis timeout) {
    for (const auto &o : ops)
        if (o.send) route_[static_cast<size_t>(o.peer)]->connect(o.peer);
    // A batch of a few (a send and a receive, most often) keeps its
    // operations on the stack; the carriers share them while they move.
    constexpr size_t kFew = 4;
    std::shared_ptr<Op> few[kFew];
    std::vector<std::shared_ptr<Op>> many(ops.size() > kFew ? ops.size() : 0);
    std::shared_ptr<Op> *posted = ops.size() > kFew ? many.data() : few;
    std::unique_lock<std::mutex> lk(mu_);
    size_t n = 0;
    int last = -1;
    try {
        for (; n < ops.size(); ++n) {
            const auto &o = ops[n];
            const auto tag = static_cast<uint32_t>(o.tag);
            posted[n] = o.send ? send_locked(o.tensor, o.peer, tag, exchanges(ops, o.peer))
                               : recv_locked(o.tensor, o.peer, tag);
        }
        const auto deadline = deadline_in(timeout);
        for (size_t i = 0; i < n; ++i) last = wait_locked(lk, *posted[i], deadline, timeout);
    } catch (...) {
        if (!lk.owns_lock()) lk.lock();
        for (size_t i = 0; i < n; ++i) withdraw(*posted[i]);
        throw;
    }
    return last;
}

std::shared_ptr<P2pMailbox::Op> P2pMailbox::send_locked(const Tensor &t, int dst, uint32_t tag, bool exchange) {
    if (closed_) fail(DISTC_EABORTED, closed_why_);
    auto op = std::make_shared<Op>(true, dst, tag, t.bytes(), t.nbytes());
    op->exchange = exchange;
    route_[static_cast<size_t>(dst)]->queue(op);
    return op;
}

std::shared_ptr<P2pMailbox::Op> P2pMailbox::recv_locked(const Tensor &t, int src, uint32_t tag) {
    if (closed_) fail(DISTC_EABORTED, closed_why_);
    auto op = std::make_shared<Op>(false, src, tag, t.bytes(), t.nbytes());
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
        it->copy_to(op->data);
        op->peer = it->peer;
        early_.erase(it);
        finish(*op, 0, "");
        return op;
    }
    if (src >= 0 && !gone_[static_cast<size_t>(src)].empty()) fail(DISTC_EREMOTE, gone_[static_cast<size_t>(src)]);
    posted_.push_back(op);
    if (src >= 0)
        route_[static_cast<size_t>(src)]->start();
    else
        for (Carrier *c : carriers_) c->start();
    return op;
}

int P2pMailbox::wait(Op &op, Millis timeout) {
    if (op.finished.load(std::memory_order_acquire)) {  // a send the ring took, a message that was here: no lock
        if (op.code) fail(op.code, op.msg);
        return op.peer;
    }
    std::unique_lock<std::mutex> lk(mu_);
    return wait_locked(lk, op, deadline_in(timeout), timeout);
}

int P2pMailbox::wait_locked(std::unique_lock<std::mutex> &lk, Op &op, Clock::time_point deadline, Millis timeout) {
    // A message on its way is here sooner than a carrier's thread could
    // wake this one: poll, `polls` times, then yielding until `spin` passed
    // without progress (the clock is read only then). Only the carrier of
    // op's peer, or every one for any source: another's poll (a system
    // call, for TCP) only slows this wait.
    Carrier *only = op.peer >= 0 ? route_[static_cast<size_t>(op.peer)] : nullptr;
    auto mine = [&](const Poller &x) { return (!only || x.c == only) && op.len <= x.p.up_to; };
    std::chrono::microseconds spin{0};
    unsigned polls = 0;
    bool any = false;
    for (const Poller &x : pollers_)
        if (mine(x)) {
            spin = std::max(spin, x.p.spin);
            if (x.p.bytes_per_us)
                spin = std::max(spin, std::chrono::microseconds(static_cast<int64_t>(op.len / x.p.bytes_per_us)));
            polls = std::max(polls, x.p.polls);
            any = true;
        }
    if (any && !op.finished) {
        for (const Poller &x : pollers_)
            if (mine(x)) x.c->polling_starts();
        unsigned left = polls, rounds = 0;
        Clock::time_point until{};
        while (!op.finished && !closed_) {
            bool moved = false;
            for (const Poller &x : pollers_)
                if (mine(x)) moved = x.c->poll() || moved;
            if (op.finished) break;
            if (moved) {
                left = polls;
                until = {};
                // Others' messages keep coming: the deadline still holds.
                if (++rounds % 64 == 0 && Clock::now() >= deadline) break;
            }
            if (left > 0) {
                // Polls keep the lock: dropping it between two costs more than
                // a poll, and a thread that wants it gets it once this one yields.
                --left;
#if defined(__x86_64__) || defined(__i386__)
                __builtin_ia32_pause();
#endif
                continue;
            }
            auto now = Clock::now();
            if (until == Clock::time_point{}) until = now + spin;
            if (now >= until || now >= deadline) break;
            lk.unlock();
            std::this_thread::yield();
            lk.lock();
        }
        for (const Poller &x : pollers_)
            if (mine(x)) x.c->polling_stops(!op.finished);
    }
    if (!cv_.wait_until(lk, deadline, [&] { return op.finished.load(std::memory_order_relaxed); })) {
        withdraw(op);
        fail(DISTC_ETIMEOUT, std::string(op.send ? "sending to " : "waiting for a message from ") +
                                 (op.peer < 0 ? std::string("any rank") : who(op.peer)) + " with tag " +
                                 std::to_string(op.tag) + " timed out after " + std::to_string(timeout.count()) +
                                 " ms");
    }
    if (op.code) fail(op.code, op.msg);
    return op.peer;
}

void P2pMailbox::withdraw(Op &op) {
    if (op.finished.load(std::memory_order_relaxed)) return;
    op.code = DISTC_ETIMEOUT;
    op.finished.store(true, std::memory_order_release);
    if (!op.send) {
        posted_.erase(std::remove_if(posted_.begin(), posted_.end(),
                                     [&](const std::shared_ptr<Op> &p) { return p.get() == &op; }),
                      posted_.end());
        if (op.filling) {
            // The rest of a message arriving into it is read and dropped.
            op.filling->into = Arrival::Into::Discard;
            op.filling->op.reset();
            op.filling = nullptr;
        }
        return;
    }
    if (op.done == 0) return route_[static_cast<size_t>(op.peer)]->unqueue(op);
    // Partly moved: the peer expects the rest, which goes from a copy now
    // that the caller may free its buffer.
    const uint8_t *was = op.data;
    op.kept.assign(op.data, op.data + op.len);
    op.data = op.kept.data();
    route_[static_cast<size_t>(op.peer)]->kept(op, was);
}

bool P2pMailbox::would_take(int peer, uint32_t tag) const {
    return std::any_of(posted_.begin(), posted_.end(),
                       [&](const std::shared_ptr<Op> &op) { return matches(*op, peer, tag); });
}

bool P2pMailbox::awaits(int peer) const {
    return std::any_of(posted_.begin(), posted_.end(),
                       [&](const std::shared_ptr<Op> &op) { return op->peer < 0 || op->peer == peer; });
}

std::string P2pMailbox::begin(Arrival &a, int peer, uint32_t tag, uint64_t len) {
    a.peer = peer;
    a.len = len;
    a.got = 0;
    a.into = Arrival::Into::Discard;
    for (auto it = posted_.begin(); it != posted_.end(); ++it) {
        Op &op = **it;
        if (!matches(op, peer, tag)) continue;
        std::shared_ptr<Op> mine = std::move(*it);
        posted_.erase(it);
        if (op.len != len) {
            finish(op, DISTC_EINVAL, size_mismatch(peer, len, tag, op.len));
            return "";
        }
        a.into = Arrival::Into::Op;
        a.op = std::move(mine);
        op.filling = &a;
        return "";
    }
    // Kept until its receive is posted, so it must fit in this machine's memory.
    if (len > DISTC_TENSOR_MAX_BYTES || len > machine_memory())
        return who(peer) + " sent a message of " + std::to_string(len) +
               " bytes before its receive was posted, more than this machine's memory";
    early_.push_back(Early{peer, tag, static_cast<size_t>(len), {}});
    a.into = Arrival::Into::Early;
    a.early = &early_.back();
    return "";
}

void P2pMailbox::end(Arrival &a) {
    if (a.into == Arrival::Into::Op) {
        a.op->peer = a.peer;
        finish(*a.op, 0, "");
        a.op.reset();
    } else if (a.into == Arrival::Into::Early) {
        Early *e = a.early;
        a.early = nullptr;  // delivered, it is gone
        e->complete = true;
        deliver(*e);
    }
    a.into = Arrival::Into::Discard;
    a.got = 0;
}

void P2pMailbox::deliver(Early &e) {
    for (auto it = posted_.begin(); it != posted_.end(); ++it) {
        Op &op = **it;
        if (!matches(op, e.peer, e.tag)) continue;
        if (op.len != e.size) {
            finish(op, DISTC_EINVAL, size_mismatch(e.peer, e.size, e.tag, op.len));
        } else {
            e.copy_to(op.data);
            op.peer = e.peer;
            finish(op, 0, "");
        }
        posted_.erase(it);
        early_.remove_if([&](const Early &x) { return &x == &e; });
        return;
    }
}

void P2pMailbox::lost(Arrival &a, const std::string &why) {
    if (a.op) finish(*a.op, DISTC_EREMOTE, why);
    a.op.reset();
    if (a.into == Arrival::Into::Early && a.early && !a.early->complete)
        early_.remove_if([&](const Early &x) { return &x == a.early; });
    a.early = nullptr;
    a.into = Arrival::Into::Discard;
    if (a.peer >= 0) peer_ended(a.peer, why);
}

}  // namespace distc

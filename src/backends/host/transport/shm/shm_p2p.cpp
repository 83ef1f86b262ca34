#include "backends/host/transport/shm/shm_p2p.hpp"

#include <sys/uio.h>

#include <algorithm>

#include "core/util/error.hpp"
#include "core/util/shared_memory.hpp"
#include "support/sigpipe.hpp"

namespace distc {

namespace {
constexpr uint32_t kMessage = 0x53324344;  // "DC2S": before every message
// The thread's sleeps on its doorbell: the links look at the peers'
// processes in between anyway, so this only bounds a sleep with nothing to watch.
constexpr Millis kNap{1000};
// How long the thread stays off its doorbell after a waiter got its message.
// What arrives meanwhile waits in its ring for the next receive, or for the
// thread to look again.
constexpr std::chrono::microseconds kRest{1000};
// While it keeps waking to find that it should rest on (waiters come back to
// back and poll the rings themselves), each rest is twice the last, up to
// this: a wake costs a context switch, and the lock the waiter holds.
constexpr std::chrono::microseconds kRestMost{8000};

}  // namespace

ShmP2p::ShmP2p(P2pMailbox &box, std::unique_ptr<ShmLinks> links, std::vector<int> ranks, int me) :
    box_(box), mu_(box.mu()), links_(std::move(links)), ranks_(std::move(ranks)), me_(me),
    local_(static_cast<size_t>(ranks_.back() + 1), -1), out_(ranks_.size()), in_(ranks_.size()), rest_for_(kRest) {
    for (size_t l = 0; l < ranks_.size(); ++l) {
        local_[static_cast<size_t>(ranks_[l])] = static_cast<int>(l);
        in_[l].a.peer = ranks_[l];
    }
}

ShmP2p::~ShmP2p() {
    close();
    if (thread_.joinable()) thread_.join();
}

void ShmP2p::route(std::chrono::microseconds spin, unsigned polls) {
    std::lock_guard<std::mutex> lk(mu_);
    routed_ = true;
    for (size_t l = 0; l < ranks_.size(); ++l)
        if (static_cast<int>(l) != me_) box_.route(ranks_[l], this, P2pMailbox::Polling{spin, polls});
    // From now on, not at the first receive: a peer's send larger than its
    // ring's room completes only once this rank reads it (into memory, when
    // no receive is posted for it yet), and sends are eager (distc_send).
    start_locked();
}

void ShmP2p::polling_stops(bool sleeps) {
    --pollers_;
    bool sending = std::any_of(out_.begin(), out_.end(), [](const Out &o) { return !o.queue.empty(); });
    if (!sleeps && !sending) {  // the thread looks again by itself, a while later
        // Off the coarse clock (a precise read costs a fair part of a small
        // message's wait): at least kRest from now, at most a tick more.
        rest_until_ = deadline_in(Millis(0)) + kRest;
        return;
    }
    look_now_ = true;
    rest_.notify_one();
}

bool ShmP2p::poll() {
    bool moved = false;
    for (int l = 0; l < static_cast<int>(ranks_.size()); ++l) {
        if (l == me_) continue;
        // Both, whichever moved: a ring that takes bytes must not starve one that has some.
        bool wrote = write_some(l);
        bool read = read_some(l);
        moved = moved || wrote || read;
    }
    return moved;
}

std::string ShmP2p::who(int peer) const { return links_->name(local(peer)); }

void ShmP2p::close() noexcept {
    std::lock_guard<std::mutex> lk(mu_);
    if (closed_) return;
    closed_ = true;
    const std::string why = "the group was aborted (its shared memory links were closed)";
    for (auto &o : out_) {
        for (auto &op : o.queue) box_.finish(*op, DISTC_EABORTED, why);
        o.queue.clear();
    }
    for (auto &in : in_)
        if (in.a.op) box_.finish(*in.a.op, DISTC_EABORTED, why);
    if (routed_) box_.close(why);  // else the group never used it (it fell back to TCP)
    links_->abandon();             // the sends just failed: their buffers are the callers' again
    links_->close();
    rest_.notify_one();  // wakes the thread, which sees closed_
}

void ShmP2p::start_locked() {
    if (!thread_.joinable() && !closed_) thread_ = start_thread([this] { loop(); });
}

void ShmP2p::start() {
    start_locked();
    // A receive was posted: a held message it takes goes into it now.
    for (int l = 0; l < static_cast<int>(ranks_.size()); ++l)
        if (in_[size_t(l)].held) read_some(l);
}

void ShmP2p::queue(std::shared_ptr<Op> op) {
    int l = local(op->peer);
    Out &o = out_[static_cast<size_t>(l)];
    if (!o.broken.empty()) fail(DISTC_EREMOTE, o.broken);
    o.queue.push_back(std::move(op));
    if (o.queue.size() == 1) write_some(l);  // from this thread: no hand-off when the ring takes it
    if (o.queue.empty()) return;
    start_locked();
    // A waiter polling now writes the rest (or hands it to the thread when
    // it stops), and a resting thread looks by itself when its rest ends (in
    // at most 8 ms): the caller is likely to wait on it first. Else the
    // thread sleeps on its doorbell, maybe without looking at this ring:
    // wake it.
    if (pollers_ > 0 || Clock::now() < rest_until_) return;
    links_->wake();
}

void ShmP2p::kept(Op &op, const uint8_t *was) { links_->relocate(local(op.peer), was, op.len, op.data); }

void ShmP2p::unqueue(Op &op) {
    Out &o = out_[static_cast<size_t>(local(op.peer))];
    o.queue.erase(
        std::remove_if(o.queue.begin(), o.queue.end(), [&](const std::shared_ptr<Op> &p) { return p.get() == &op; }),
        o.queue.end());
}

bool ShmP2p::write_some(int l) {
    Out &o = out_[static_cast<size_t>(l)];
    bool moved = false;
    while (!o.queue.empty()) {
        Op &op = *o.queue.front();
        if (op.done == 0) {
            o.hdr = Header{kMessage, op.tag, op.len};
            o.may_offer = !(op.exchange && inline_exchanges_) || shared_region_of(op.data, op.len).id != 0;
        }
        iovec iov[2];
        int n = 0;
        if (op.done < sizeof o.hdr) iov[n++] = {reinterpret_cast<uint8_t *>(&o.hdr) + op.done, sizeof o.hdr - op.done};
        size_t sent = op.done > sizeof o.hdr ? op.done - sizeof o.hdr : 0;
        if (op.len > sent) iov[n++] = {op.data + sent, op.len - sent};
        size_t w;
        try {
            w = links_->write(l, iov, n, o.may_offer);
        } catch (const Error &e) {
            lost_out(l, e.what());
            return true;
        }
        if (w == 0) return moved;
        moved = true;
        op.done += w;
        if (op.done < sizeof o.hdr + op.len) continue;  // the ring may take more of it now
        box_.finish(op, 0, "");
        o.queue.pop_front();
    }
    return moved;
}

bool ShmP2p::take_held(int l, bool drain) {
    In &in = in_[static_cast<size_t>(l)];
    const int peer = ranks_[size_t(l)];
    if (!drain && !box_.would_take(peer, in.hdr.tag) && !box_.awaits(peer) &&
        links_->unread(l) <= links_->capacity() / 2)
        return false;
    in.held = false;
    std::string why = box_.begin(in.a, peer, in.hdr.tag, in.hdr.len);
    if (!why.empty()) {
        lost_in(l, why);
        return false;
    }
    in.payload = true;
    return true;
}

bool ShmP2p::read_some(int l, bool drain) {
    In &in = in_[static_cast<size_t>(l)];
    uint8_t discard[4096];
    bool moved = false;
    for (int rounds = 0; rounds < 64 && !in.gone; ++rounds) {
        if (in.held && !take_held(l, drain)) return moved;
        iovec iov;
        size_t r = 0;
        try {
            if (!in.payload) {
                iov = {reinterpret_cast<uint8_t *>(&in.hdr) + in.got, sizeof in.hdr - in.got};
            } else {
                size_t want = static_cast<size_t>(in.a.len - in.a.got);
                uint8_t *dst = in.a.dest(want);
                iov = dst ? iovec{dst, want} : iovec{discard, std::min(want, sizeof discard)};
            }
            if (iov.iov_len) r = links_->read(l, &iov, 1);
        } catch (const Error &e) {
            lost_in(l, e.what());
            return true;
        }
        if (iov.iov_len) {
            if (r == 0) return moved;
            moved = true;
        }
        if (!in.payload) {
            in.got += r;
            if (in.got < sizeof in.hdr) continue;
            in.got = 0;
            if (in.hdr.magic != kMessage) {
                lost_in(l, who(ranks_[size_t(l)]) + " sent a malformed point-to-point message (DISTC_EPROTO)");
                return true;
            }
            in.held = true;
            continue;
        }
        in.a.got += r;
        if (in.a.got == in.a.len) {
            const bool into_op = in.a.into == P2pMailbox::Arrival::Into::Op;
            box_.end(in.a);
            in.payload = false;
            // Its waiter goes on at once; what follows waits for the next poll.
            if (into_op) return true;
        }
    }
    return moved;
}

void ShmP2p::lost_in(int l, const std::string &why) {
    In &in = in_[static_cast<size_t>(l)];
    if (in.gone) return;
    in.gone = true;
    box_.lost(in.a, why);
    // Its writer must not wait for room that never comes, nor send more.
    links_->stop_reading(l);
}

void ShmP2p::lost_out(int l, const std::string &why) {
    Out &o = out_[static_cast<size_t>(l)];
    if (o.broken.empty()) o.broken = why;
    for (auto &op : o.queue) box_.finish(*op, DISTC_EREMOTE, o.broken);
    o.queue.clear();
}

void ShmP2p::died(int l) {
    // What it wrote before it died is still in its ring: read it all first.
    while (read_some(l, true)) {}
    std::string why = who(ranks_[size_t(l)]) + " died";
    lost_in(l, why);
    lost_out(l, why);
}

void ShmP2p::loop() {
    std::unique_lock<std::mutex> lk(mu_);
    const int n = static_cast<int>(ranks_.size());
    while (!closed_) {
        if (!look_now_ && (pollers_ > 0 || Clock::now() < rest_until_)) {
            rest_.wait_until(lk, std::max(rest_until_, Clock::now() + rest_for_));
            rest_for_ = std::min(2 * rest_for_, kRestMost);
            continue;
        }
        rest_for_ = kRest;
        look_now_ = false;
        if (poll()) continue;
        wants_.clear();
        for (int l = 0; l < n; ++l) {
            // A held message keeps its ring readable: the thread would never
            // sleep. Its peer's next write rings the doorbell anyway.
            const bool w = !out_[size_t(l)].queue.empty(), r = !in_[size_t(l)].gone && !in_[size_t(l)].held;
            if (l != me_ && (w || r)) wants_.push_back({l, w, r});
        }
        lk.unlock();
        bool dead = false;
        try {
            links_->wait(wants_, Clock::now() + kNap);
        } catch (const Error &) {
            dead = true;  // which one, the loop below asks
        }
        lk.lock();
        if (dead)
            for (const auto &w : wants_)
                if (!links_->alive(w.peer)) died(w.peer);
    }
}

}  // namespace distc

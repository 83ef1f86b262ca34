#include "backends/host/transport/exchange.hpp"

#include <sched.h>

#include <algorithm>
#include <cstring>

#include "core/util/error.hpp"

namespace distc {

namespace {

// Large payloads go as several messages, so a receive's progress (and a
// reduction gated on it) never waits for one huge read.
constexpr size_t kMaxMsg = size_t(1) << 30;

// A rank that has slept this long in a call starts to look at the peers it
// receives nothing from (look_at_others): a call that finishes sooner never
// pays for it. Then it looks again after twice as long each time, up to
// kLookEvery: a long wait wakes a few times a second.
constexpr auto kLookAfter = std::chrono::milliseconds(5), kLookEvery = std::chrono::milliseconds(200);

}  // namespace

std::string Exchange::rank_name(int p) const {
    return "rank " + std::to_string(static_cast<size_t>(p) < ranks_.size() ? ranks_[static_cast<size_t>(p)] : p);
}

Exchange::Peer &Exchange::peer(int p) {
    if (peers_.size() <= static_cast<size_t>(p)) peers_.resize(static_cast<size_t>(p) + 1);
    return peers_[static_cast<size_t>(p)];
}

void Exchange::send(int p, const void *data, size_t n, const bool *gate) {
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

void Exchange::recv(int p, void *data, size_t n, int id, const bool *gate) {
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

static_assert(sizeof(Call) + 16 == 40, "Exchange::Header has no padding: repeats() compares its bytes");

bool Exchange::repeats(const Header &last, const Header &h) {
    Header a = last;
    a.call.seq = h.call.seq;
    return std::memcmp(&a, &h, sizeof h) == 0;
}

// The rest of the current message, header then payload, as an iovec list; returns its length.
int Exchange::remaining(Lane &l, iovec *iov) {
    const Msg &m = l.msgs[l.next];
    auto *h = reinterpret_cast<uint8_t *>(&l.hdr);
    // A first word begun and not finished: only its rest, which says how long the header is.
    if (l.done > 0 && l.done < kWord) {
        iov[0] = {h + l.done, kWord - l.done};
        return 1;
    }
    int cnt = 0;
    if (l.done < l.hl) iov[cnt++] = {h + l.done, l.hl - l.done};
    size_t off = l.done > l.hl ? l.done - l.hl : 0;
    if (m.n > off) iov[cnt++] = {m.p + off, m.n - off};
    return cnt;
}

bool Exchange::push(Links &links, Peer &pr, const Call &call, int p) {
    Lane &l = pr.out;
    bool moved = false;
    while (l.ready()) {
        const Msg &m = l.msgs[l.next];
        if (l.hl == 0) {  // once per message, however many writes it takes
            const Header h{call, m.n, pr.in_total};
            const bool again = pr.has_sent && repeats(pr.sent, h);
            pr.sent = h;
            pr.has_sent = true;
            l.hdr = h;
            l.hl = sizeof(Header);
            if (again) {
                l.hdr.call.kind = kRepeat;
                l.hl = kWord;
            }
        }
        // Header and payload in one call: a small message is one segment on the wire.
        iovec iov[2];
        size_t w = links.write(p, iov, remaining(l, iov));
        if (w == 0) break;
        moved = true;
        l.done += w;
        if (l.done == l.hl + m.n) {
            ++l.next;
            l.done = l.hl = 0;
        }
    }
    return moved;
}

bool Exchange::expects_repeat(const Peer &pr, const Lane &l, const Call &call) {
    // Exactly what check_header() asks of a repeated header: a wrong guess
    // of a full one is then always an error (settle_header()).
    return pr.has_got && pr.got.call.same_as(call) && pr.got.len == l.msgs[l.next].n &&
           (l.next != 0 || pr.got.expect == pr.out_total);
}

void Exchange::settle_header(Peer &pr, Lane &l, size_t extra, const Call &call, int p) {
    const bool again = l.hdr.call.kind == kRepeat;
    if (again) {
        if (!pr.has_got)
            fail(DISTC_EPROTO, rank_name(p) + " sent a repeated header as the first on its link (a broken stream)");
        const uint32_t seq = l.hdr.call.seq;
        l.hdr = pr.got;
        l.hdr.call.seq = seq;
    }
    if (again && l.hl != kWord) {
        // This rank's call expects another header than the last: that one
        // disagrees, and the bytes read after its word (perhaps the next
        // message's, on a stream) were read for nothing.
        check_header(pr, l, call, p);
        fail(DISTC_EINTERNAL, rank_name(p) + " repeated a header this rank did not expect it to");
    }
    if (!again && l.hl == kWord) {
        // Guessed a repeat: the bytes after the word went to the payload,
        // and the first of them are the header's.
        constexpr size_t kRest = sizeof(Header) - kWord;
        uint8_t *payload = l.msgs[l.next].p;
        const size_t k = std::min(extra, kRest);
        std::memcpy(reinterpret_cast<uint8_t *>(&l.hdr) + kWord, payload, k);
        if (extra > k) std::memmove(payload, payload + k, extra - k);
        l.hl = sizeof(Header);
    }
}

bool Exchange::pull(Links &links, Peer &pr, const Call &call, int p, FnRef<void(int, int)> on_recv) {
    Lane &l = pr.in;
    bool moved = false;
    while (l.ready()) {
        const Msg &m = l.msgs[l.next];
        // A guess at the header's length, so that a small message is one
        // read: settle_header() corrects it once the first word is in.
        if (l.hl == 0) l.hl = expects_repeat(pr, l, call) ? kWord : sizeof(Header);
        iovec iov[2];
        size_t r = links.read(p, iov, remaining(l, iov));
        if (r == 0) break;
        moved = true;
        size_t before = l.done;
        l.done += r;
        if (before < kWord && l.done >= kWord) settle_header(pr, l, l.done - kWord, call, p);
        if (before < l.hl && l.done >= l.hl) {
            check_header(pr, l, call, p);
            pr.got = l.hdr;
            pr.has_got = true;
            if (l.next == 0 && call.all_to_all()) digest_ += l.hdr.call.count;
        }
        if (l.done == l.hl + m.n) {
            int id = m.id;
            ++l.next;
            l.done = l.hl = 0;
            if (id != -2) on_recv(p, id);
        }
    }
    return moved;
}

void Exchange::check_header(const Peer &pr, const Lane &l, const Call &call, int p) const {
    const Header &h = l.hdr;
    const Msg &m = l.msgs[l.next];
    if (h.call.seq != call.seq)
        fail(DISTC_EPROTO, rank_name(p) + " sent a message of collective #" + std::to_string(h.call.seq) +
                               " while this rank runs #" + std::to_string(call.seq) + " (ranks out of step)");
    if (!h.call.same_as(call)) disagree(h.call, call, p);
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

void Exchange::disagree(const Call &theirs, const Call &call, int p) const {
    fail(DISTC_EINVAL, "ranks disagree on collective #" + std::to_string(call.seq) + ": " + rank_name(p) + " calls " +
                           describe(theirs) + ", this rank " + describe(call));
}

void Exchange::look_at_others(Links &links, const Call &call) const {
    for (int p = 0; p < links.count(); ++p) {
        const Peer *pr = static_cast<size_t>(p) < peers_.size() ? &peers_[static_cast<size_t>(p)] : nullptr;
        if (pr && !pr->in.msgs.empty()) continue;
        Header h;
        if (!links.peek(p, &h, kWord)) continue;
        if (h.call.kind == kRepeat) {  // the last header read from that peer, but for its sequence number
            if (!pr || !pr->has_got) continue;
            const uint32_t seq = h.call.seq;
            h = pr->got;
            h.call.seq = seq;
        } else if (!links.peek(p, &h, sizeof h)) {
            continue;
        }
        // The next call's messages may be there already (a later sequence
        // number); a rank's own phases of one call all call alike.
        if (h.call.seq == call.seq && !h.call.same_as(call)) disagree(h.call, call, p);
    }
}

void Exchange::explain_loss(Links &links, const Call &call, FnRef<void(int, int)> on_recv) {
    // A peer broke its link, perhaps because of what another rank sent it:
    // what the peers sent before (that one too) may say why, in a header of
    // another call or other sizes. So a rank that such a header was meant
    // for reports it, whichever peer gave up first; only a loss among peers
    // that agreed with this rank stands.
    for (size_t q = 0; q < peers_.size(); ++q) {
        if (peers_[q].in.idle()) continue;
        try {
            pull(links, peers_[q], call, int(q), on_recv);
        } catch (const Error &e) {
            if (e.code() != DISTC_EREMOTE) throw;
        }
    }
    look_at_others(links, call);
}

void Exchange::run(Links &links, const Call &call, Clock::time_point deadline, std::chrono::microseconds spin,
                   unsigned polls, FnRef<void(int, int)> on_recv) {
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
    digest_ = call.count;
    // The spin starts once polling found nothing: a clock read only then.
    Clock::time_point spin_until{}, look_at{};
    Clock::duration look_gap = kLookAfter;
    unsigned idle = 0;
    for (;;) {
        bool moved = false, pending = false;
        for (size_t p = 0; p < peers_.size(); ++p) {
            Peer &pr = peers_[p];
            if (pr.out.idle() && pr.in.idle()) continue;
            try {
                moved |= push(links, pr, call, int(p));
                moved |= pull(links, pr, call, int(p), on_recv);
            } catch (const Error &e) {
                if (e.code() == DISTC_EREMOTE) explain_loss(links, call, on_recv);
                throw;
            }
            pending |= !pr.out.idle() || !pr.in.idle();
        }
        if (!pending) {
            if (call.all_to_all() && digest_ != 0)
                fail(DISTC_EINVAL, "ranks disagree on " + describe(call) +
                                       ": the ranks' split sizes disagree between other ranks of the group");
            return;
        }
        if (moved) {
            idle = 0;
            continue;
        }
        if (++idle <= polls) {  // links cheap to look at: poll again before anything costs a system call
#if defined(__x86_64__) || defined(__i386__)
            __builtin_ia32_pause();
#endif
            continue;
        }
        if (idle == polls + 1) spin_until = std::min(Clock::now() + spin, deadline);  // ends in time, however long
        if (Clock::now() < spin_until) {
            // Yield while spinning: when ranks outnumber cores, the peer we wait
            // for may need this core; when they do not, this returns at once.
            sched_yield();
            continue;
        }
        wants_.clear();
        for (size_t p = 0; p < peers_.size(); ++p) {
            bool w = peers_[p].out.ready(), r = peers_[p].in.ready();
            if (w || r) wants_.push_back(Links::Want{int(p), w, r});
        }
        if (wants_.empty()) fail(DISTC_EINTERNAL, "transfers wait on each other (a gate no receive opens)");
        const auto now = Clock::now();
        if (look_at == Clock::time_point{}) {
            look_at = now + kLookAfter;
        } else if (now >= look_at) {
            look_at_others(links, call);
            look_gap = std::min<Clock::duration>(2 * look_gap, kLookEvery);
            look_at = now + look_gap;
        }
        if (now >= deadline) {
            // Name the peers this rank still waits for.
            std::string who;
            for (size_t p = 0; p < peers_.size(); ++p)
                if (!peers_[p].in.idle() || !peers_[p].out.idle()) who += (who.empty() ? "" : ", ") + rank_name(int(p));
            bool receiving = false;
            for (auto &pr : peers_) receiving |= !pr.in.idle();
            fail(DISTC_ETIMEOUT, std::string(receiving ? "waiting for " : "sending to ") + who + " timed out");
        }
        // Back by look_at: what a peer we do not read from sends wakes nobody.
        links.wait(wants_, std::min(deadline, look_at));
    }
}

}  // namespace distc

// What the store server does with each request (tcp_server.cpp reads them):
// the key-value operations, and requests that block until their keys exist.
#include <algorithm>

#include "core/store/tcp/tcp_server.hpp"
#include "core/util/error.hpp"
#include "core/util/random.hpp"

namespace distc {

using wire::Op;
using wire::Reader;
using wire::Writer;

namespace {
constexpr size_t kNone = static_cast<size_t>(-1);
}  // namespace

TcpServer::Result TcpServer::handle(Conn &c, Op op, Reader &r) {
    auto status = [&] { return r.bad() ? Result::Bad : r.incomplete() ? Result::Incomplete : Result::Done; };
    auto reply = [&](const Writer &w) { reply_to(c, w); };
    switch (op) {
        case Op::Validate: {
            uint32_t magic = r.u32();
            if (!r.ok()) return status();
            return magic == wire::kTorchMagic ? Result::Done : Result::Bad;
        }
        case Op::Hello: return hello(c, r);
        case Op::Auth: return auth(c, r);
        case Op::Ping: {
            uint32_t nonce = r.u32();
            if (!r.ok()) return status();
            reply(Writer().u32(nonce));
            return Result::Done;
        }
        case Op::Set: {
            std::string key = r.str();
            ByteView v = r.view();
            if (!r.ok()) return status();
            data_[key] = v.to_bytes();
            key_created(key);
            return Result::Done;
        }
        case Op::Append: {
            std::string key = r.str();
            ByteView v = r.view();
            if (!r.ok()) return status();
            // Past the limit no client could read the value back: refused as a malformed request.
            auto it = data_.find(key);
            if (!append_fits(it == data_.end() ? 0 : it->second.size(), v.size)) return Result::Bad;
            auto &cur = data_[key];
            cur.insert(cur.end(), v.data, v.data + v.size);
            key_created(key);
            return Result::Done;
        }
        case Op::MultiSet: {
            // Parsed twice, checked then applied, so that no copy of the request is made.
            uint64_t n = r.count();
            const uint8_t *first = r.here();
            for (uint64_t i = 0; i < n && r.ok(); ++i) {
                r.view();
                r.view();
            }
            if (!r.ok()) return status();
            Reader items(first, static_cast<size_t>(r.here() - first));
            for (uint64_t i = 0; i < n; ++i) {
                std::string k = items.str();
                data_[k] = items.view().to_bytes();
                key_created(k);
            }
            return Result::Done;
        }
        case Op::CompareSet: {
            std::string key = r.str();
            ByteView expected = r.view();
            ByteView desired = r.view();
            if (!r.ok()) return status();
            auto it = data_.find(key);
            bool created;
            Bytes res = compare_set_value(it == data_.end() ? nullptr : &it->second, &created, expected, desired);
            if (created) {
                data_[key] = res;
                key_created(key);
            }
            reply(Writer().bytes(res));
            return Result::Done;
        }
        case Op::Add: {
            std::string key = r.str();
            int64_t delta = r.i64();
            if (!r.ok()) return status();
            auto it = data_.find(key);
            int64_t v;
            try {
                v = add_to_counter(key, it == data_.end() ? nullptr : &it->second, delta);
            } catch (const Error &e) {
                return refuse(c, e.code(), e.what());
            }
            data_[key] = counter_bytes(v);
            key_created(key);
            if (c.version >= 2) c.out.push_back(wire::kStatusOk);
            reply(Writer().i64(v));
            return Result::Done;
        }
        case Op::Get: {
            // PyTorch clients WAIT before GET; a distc client relies on GET waiting.
            const uint8_t *first = r.here();
            r.view();
            if (!r.ok()) return status();
            block(c, Op::Get, 1, ByteView(first, static_cast<size_t>(r.here() - first)));
            return Result::Done;
        }
        case Op::Check: {
            uint64_t n = r.count();
            const uint8_t *first = r.here();
            for (uint64_t i = 0; i < n && r.ok(); ++i) r.view();
            if (!r.ok()) return status();
            Reader keys(first, static_cast<size_t>(r.here() - first));
            bool all = true;
            for (uint64_t i = 0; i < n && all; ++i) all = data_.count(keys.str()) > 0;
            reply(Writer().u8(all ? wire::kCheckReady : wire::kCheckNotReady));
            return Result::Done;
        }
        case Op::Wait:
        case Op::MultiGet: {
            uint64_t n = r.count();
            const uint8_t *first = r.here();
            for (uint64_t i = 0; i < n && r.ok(); ++i) r.view();
            if (!r.ok()) return status();
            block(c, op, n, ByteView(first, static_cast<size_t>(r.here() - first)));
            return Result::Done;
        }
        case Op::NumKeys: reply(Writer().i64(static_cast<int64_t>(data_.size()))); return Result::Done;
        case Op::DeleteKey: {
            std::string key = r.str();
            if (!r.ok()) return status();
            reply(Writer().i64(static_cast<int64_t>(data_.erase(key))));
            return Result::Done;
        }
        case Op::CancelWait:
            if (c.blocked) end_block(c);
            reply(Writer().u8(wire::kWaitCanceled));
            return Result::Done;
        default: return Result::Bad;  // WATCH_KEY and unknown queries: not served
    }
}

TcpServer::Result TcpServer::hello(Conn &c, Reader &r) {
    uint32_t magic = r.u32();
    uint32_t version = r.u32();
    if (!r.ok()) return r.bad() ? Result::Bad : Result::Incomplete;
    if (magic != wire::kDistcMagic || version == 0 || c.version != 0) return Result::Bad;
    c.version = std::min(version, wire::kDistcVersion);
    Writer w;
    w.u32(wire::kDistcMagic).u32(c.version);
    if (!opts_.token.empty() && c.version < 3) {
        c.why = "its distc protocol version " + std::to_string(c.version) +
                " cannot prove the token this store requires (version 3 can)";
        return Result::Bad;
    }
    if (c.version >= 3) {
        w.u64(opts_.max_request_bytes).u8(opts_.token.empty() ? 0 : 1);
        if (!opts_.token.empty()) {
            random_bytes(c.nonce, sizeof c.nonce);
            w.raw(c.nonce, sizeof c.nonce);
            c.challenged = true;
        }
    }
    reply_to(c, w);
    return Result::Done;
}

TcpServer::Result TcpServer::auth(Conn &c, Reader &r) {
    uint8_t has_token = r.u8();
    Digest mac{};
    if (has_token) r.raw(mac.data(), mac.size());
    if (!r.ok()) return r.bad() ? Result::Bad : Result::Incomplete;
    if (!c.challenged) {
        c.why = "sent AUTH unasked";
        return Result::Bad;
    }
    c.challenged = false;
    const char *refusal = nullptr;
    if (!has_token)
        refusal = "no token given; this store requires one";
    else if (!digest_equal(mac, wire::auth_mac(opts_.token, c.nonce)))
        refusal = "token rejected";
    if (!refusal) {
        c.authed = true;
        c.out.push_back(wire::kStatusOk);
        return Result::Done;
    }
    log("refused " + peer_address(c.fd.get()) + ": " + refusal);
    reply_to(c, Writer().error(DISTC_EREMOTE, refusal));
    c.closing = true;
    return Result::Done;
}

TcpServer::Result TcpServer::refuse(Conn &c, int code, const std::string &msg) {
    if (c.version < 2) {  // no error reply in this protocol: drop the client
        c.why = msg + " (its protocol has no error reply)";
        return Result::Bad;
    }
    reply_to(c, Writer().error(code, msg));
    return Result::Done;
}

void TcpServer::reply_to(Conn &c, const Writer &w) { c.out.insert(c.out.end(), w.buf().begin(), w.buf().end()); }

void TcpServer::block(Conn &c, Op op, uint64_t count, ByteView keys) {
    c.blocked_keys = keys.to_bytes();
    c.blocked = true;
    c.blocked_op = op;
    c.blocked_count = count;
    c.cursor = 0;
    // process() tries to complete it right away and registers it as a waiter if not.
}

void TcpServer::end_block(Conn &c) {
    stop_waiting(c);
    c.blocked = false;
    Bytes().swap(c.blocked_keys);
    c.blocked_count = 0;
}

size_t TcpServer::first_missing(const Conn &c, size_t from, size_t to) const {
    Reader r(c.blocked_keys.data() + from, to - from);
    while (!r.at_end()) {
        size_t at = from + r.consumed();
        if (!data_.count(r.str())) return at;
    }
    return kNone;
}

TcpServer::Result TcpServer::try_unblock(Conn &c) {
    // Keys before the cursor were stored when last looked at, but may have been deleted since.
    size_t missing = first_missing(c, c.cursor, c.blocked_keys.size());
    if (missing == kNone) missing = first_missing(c, 0, c.cursor);
    if (missing != kNone) {
        c.cursor = missing;
        Reader r(c.blocked_keys.data() + missing, c.blocked_keys.size() - missing);
        wait_for(c, r.str());
        return Result::Incomplete;
    }
    Op op = c.blocked_op;
    uint64_t count = c.blocked_count;
    Bytes keys = std::move(c.blocked_keys);
    end_block(c);
    if (op == Op::Wait) {
        c.out.push_back(wire::kStopWaiting);
        return Result::Done;
    }
    // Repeated keys are sent again each time: bound the reply before building it,
    // to what a GET of the largest value takes.
    uint64_t total = 0;
    for (Reader r(keys.data(), keys.size()); !r.at_end();) total += 8 + data_[r.str()].size();
    if (total > 8 + DISTC_STORE_MAX_VALUE_SIZE)
        return refuse(c, DISTC_ENOMEM,
                      std::string(wire::op_name(op)) + " of " + std::to_string(count) + " keys needs a reply of " +
                          std::to_string(total) +
                          " bytes, over the 1 GiB limit of a value; ask for fewer keys at once");
    c.out.reserve(c.out.size() + total + 1);
    if (op == Op::MultiGet && c.version >= 2) c.out.push_back(wire::kStatusOk);
    for (Reader r(keys.data(), keys.size()); !r.at_end();) {
        const Bytes &v = data_[r.str()];
        uint64_t n = v.size();
        const auto *p = reinterpret_cast<const uint8_t *>(&n);
        c.out.insert(c.out.end(), p, p + 8);
        c.out.insert(c.out.end(), v.begin(), v.end());
    }
    return Result::Done;
}

void TcpServer::wait_for(Conn &c, std::string key) {
    if (c.waiting && c.waiting_on == key) return;
    stop_waiting(c);
    waiters_[key].insert(c.id);
    c.waiting = true;
    c.waiting_on = std::move(key);
    ++nwaiters_;
}

void TcpServer::stop_waiting(Conn &c) {
    if (!c.waiting) return;
    auto it = waiters_.find(c.waiting_on);
    if (it != waiters_.end()) {
        it->second.erase(c.id);
        if (it->second.empty()) waiters_.erase(it);
    }
    c.waiting = false;
    std::string().swap(c.waiting_on);
    --nwaiters_;
}

void TcpServer::key_created(const std::string &key) {
    auto it = waiters_.find(key);
    if (it == waiters_.end()) return;
    ready_.reserve(ready_.size() + it->second.size());  // nothing below throws
    for (uint64_t id : it->second) {
        auto c = conns_.find(id);
        if (c == conns_.end()) continue;
        c->second->waiting = false;
        --nwaiters_;
        ready_.push_back(id);
    }
    waiters_.erase(it);
}

}  // namespace distc

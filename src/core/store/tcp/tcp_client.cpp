#include "core/store/tcp/tcp_client.hpp"

#include <cstdlib>
#include <cstring>
#include <thread>

#include "core/util/env.hpp"
#include "core/util/error.hpp"

namespace distc {

using wire::Op;
using wire::Writer;

namespace {
std::chrono::microseconds client_spin() {
    return std::chrono::microseconds(env_int("DISTC_STORE_CLIENT_SPIN_US", 50, 0, 1000000));
}
}  // namespace

TcpClient::TcpClient(std::string host, int port, distc_tcp_protocol protocol, int connect_retries, Millis timeout,
                     std::string token) :
    host_(std::move(host)),
    port_(port), peer_("store server " + host_ + ":" + std::to_string(port)), protocol_(protocol),
    token_(std::move(token)), spin_(client_spin()) {
    idle_.push_back(connect(Clock::now() + timeout, connect_retries));
}

std::string TcpClient::local_address() {
    std::lock_guard<std::mutex> g(mu_);
    return local_;
}

Fd TcpClient::connect(Clock::time_point deadline, int retries) {
    Fd fd;
    auto backoff = Millis(10);
    for (int attempt = 0;; ++attempt) {
        try {
            fd = tcp_connect(host_, port_, deadline);
            std::string here = distc::local_address(fd.get());
            std::lock_guard<std::mutex> g(mu_);
            local_ = here;
            break;
        } catch (const Error &e) {
            bool out_of_time = Clock::now() + backoff >= deadline;
            if (e.code() != DISTC_EREMOTE || (retries >= 0 && attempt >= retries))
                fail(e.code(), "cannot reach the " + peer_ + ": " + e.what());
            if (out_of_time)
                fail(DISTC_ETIMEOUT, "cannot reach the " + peer_ + ": " + e.what() + " (gave up after " +
                                         std::to_string(attempt + 1) + " attempts within the timeout)");
            std::this_thread::sleep_for(backoff);
            backoff = std::min(backoff * 2, Millis(1000));
        }
    }
    Io io{*this, fd.get(), deadline};
    switch (protocol_) {
        case DISTC_TCP_PROTOCOL_AUTO:  // only the first connection: later ones know the answer
            dialect_ = wire::Dialect::Torch2;
            if (handshake(io)) {
                protocol_ = DISTC_TCP_PROTOCOL_DISTC;
            } else {
                // A PyTorch server drops a connection that opens with an unknown query.
                fd = tcp_connect(host_, port_, deadline);
                protocol_ = DISTC_TCP_PROTOCOL_TORCH1;
                dialect_ = wire::Dialect::Torch1;
            }
            break;
        case DISTC_TCP_PROTOCOL_DISTC:
            if (!handshake(io)) fail(DISTC_EPROTO, peer_ + " is not a distc store server (it refused the handshake)");
            break;
        case DISTC_TCP_PROTOCOL_TORCH1: dialect_ = wire::Dialect::Torch1; break;
        case DISTC_TCP_PROTOCOL_TORCH2:
            dialect_ = wire::Dialect::Torch2;
            io.send(Writer(wire::encode_op(dialect_, Op::Validate)).u32(wire::kTorchMagic));
            break;
    }
    return fd;
}

bool TcpClient::handshake(Io &io) {
    io.send(Writer(wire::kHello).u32(wire::kDistcMagic).u32(wire::kDistcVersion));
    uint32_t magic;
    try {
        magic = io.recv_pod<uint32_t>();
    } catch (const Error &e) {
        if (e.code() == DISTC_EREMOTE) return false;
        throw;
    }
    uint32_t version = io.recv_pod<uint32_t>();
    if (magic != wire::kDistcMagic || version == 0 || version > wire::kDistcVersion)
        fail(DISTC_EPROTO, peer_ + " answered the handshake with unknown bytes");
    version_ = version;
    if (version >= 3) {
        max_request_ = io.recv_pod<uint64_t>();
        uint8_t needs_token = io.recv_pod<uint8_t>();
        if (needs_token > 1) fail(DISTC_EPROTO, peer_ + " answered the handshake with unknown bytes");
        if (needs_token) {
            uint8_t nonce[wire::kNonceSize];
            recv_all(io.fd, nonce, sizeof nonce, io.deadline, peer_, spin_);
            authenticate(io, nonce);
        }
    }
    return true;
}

void TcpClient::authenticate(Io &io, const uint8_t *nonce) {
    Writer w(wire::kAuth);
    if (token_.empty()) {
        w.u8(0);  // so that the server can say why it refuses
    } else {
        Digest mac = wire::auth_mac(token_, nonce);
        w.u8(1).raw(mac.data(), mac.size());
    }
    io.send(w);
    uint8_t status = io.recv_pod<uint8_t>();
    if (status == wire::kStatusOk) return;
    if (status != wire::kStatusError) fail(DISTC_EPROTO, peer_ + " answered AUTH with an unknown status");
    if (token_.empty())
        fail(DISTC_EREMOTE, peer_ + " requires a token (set DISTC_STORE_TOKEN, or the token option, to the server's)");
    fail(DISTC_EREMOTE, peer_ +
                            " rejected the token (DISTC_STORE_TOKEN, or the token option, differs from the "
                            "server's)");
}

template <typename F>
auto TcpClient::call(Millis timeout, F &&body) -> decltype(body(std::declval<Io &>())) {
    auto deadline = Clock::now() + timeout;
    Fd fd;
    {
        std::lock_guard<std::mutex> lk(mu_);
        if (!idle_.empty()) {
            fd = std::move(idle_.back());
            idle_.pop_back();
        }
    }
    if (!fd.valid()) fd = connect(deadline, 0);  // one attempt: a dead server must fail fast
    Io io{*this, fd.get(), deadline};
    // On an exception fd closes with it: its state is unknown.
    auto give_back = [&] {
        std::lock_guard<std::mutex> lk(mu_);
        if (idle_.size() < kMaxIdle) idle_.push_back(std::move(fd));
    };
    if constexpr (std::is_void_v<decltype(body(io))>) {
        body(io);
        give_back();
    } else {
        auto r = body(io);
        give_back();
        return r;
    }
}

namespace {
// A request over the server's limit would cost the connection: refuse it here, with the reason.
void check_size(const Writer &w, uint64_t limit, const std::string &peer) {
    if (limit && w.buf().size() > limit)
        fail(DISTC_ENOMEM, "a request of " + std::to_string(w.buf().size()) + " bytes is over the " +
                               std::to_string(limit) + " bytes " + peer + " accepts (its max_request_bytes)");
}
}  // namespace

void TcpClient::Io::send_applied(Writer &write) {
    check_size(write, c.max_request_, c.peer_);
    Writer check = c.request(Op::Check);
    put_keys(check, {});
    write.raw(check.buf().data(), check.buf().size());
    send_all(fd, write.buf().data(), write.buf().size(), deadline, c.peer_);
    if (recv_pod<uint8_t>() != wire::kCheckReady) fail(DISTC_EPROTO, c.peer_ + " answered CHECK wrongly");
}

void TcpClient::Io::send(const Writer &w) {
    check_size(w, c.max_request_, c.peer_);
    send_all(fd, w.buf().data(), w.buf().size(), deadline, c.peer_);
}

template <typename T>
T TcpClient::Io::recv_pod() {
    T v;
    recv_all(fd, &v, sizeof v, deadline, c.peer_, c.spin_);
    return v;
}

void TcpClient::Io::recv_status(const char *op, void *after, size_t n) {
    uint8_t b[9];
    recv_all(fd, b, 1 + n, deadline, c.peer_, c.spin_);
    if (b[0] == wire::kStatusOk) {
        if (n) std::memcpy(after, b + 1, n);  // after may be NULL when n is 0
        return;
    }
    if (b[0] != wire::kStatusError) fail(DISTC_EPROTO, c.peer_ + " answered " + op + " with an unknown status");
    if (n < 8) recv_all(fd, b + 1 + n, 8 - n, deadline, c.peer_, c.spin_);
    int32_t code;
    uint32_t len;
    std::memcpy(&code, b + 1, 4);
    std::memcpy(&len, b + 5, 4);
    if (len > wire::kMaxErrorMessage) fail(DISTC_EPROTO, c.peer_ + " sent an error message over the length limit");
    std::string msg(len, '\0');
    if (len) recv_all(fd, msg.data(), len, deadline, c.peer_, c.spin_);
    if (code >= 0 || code < DISTC_EPROTO) code = DISTC_EREMOTE;  // not a code this library knows
    fail(code, c.peer_ + " refused " + op + ": " + msg);
}

Bytes TcpClient::Io::recv_bytes() {
    uint64_t len = recv_pod<uint64_t>();
    if (len > DISTC_STORE_MAX_VALUE_SIZE) fail(DISTC_EPROTO, c.peer_ + " sent a value over the 1 GiB limit");
    Bytes b(len);
    if (len) recv_all(fd, b.data(), len, deadline, c.peer_, c.spin_);
    return b;
}

Writer &TcpClient::put_keys(Writer &w, const std::vector<std::string> &keys) {
    w.u64(keys.size());
    for (const auto &k : keys) w.str(k);
    return w;
}

void TcpClient::set(const std::string &key, ByteView value, Millis timeout) {
    call(timeout, [&](Io &io) {
        Writer w = request(Op::Set);
        w.str(key).bytes(value);
        io.send_applied(w);
    });
}

Bytes TcpClient::get(const std::string &key, Millis timeout) {
    return call(timeout, [&](Io &io) {
        if (protocol_ != DISTC_TCP_PROTOCOL_DISTC) {
            // A PyTorch server answers GET only for a key that exists: WAIT first.
            Writer w = request(Op::Wait);
            io.send(put_keys(w, {key}));
            if (io.recv_pod<uint8_t>() != wire::kStopWaiting) fail(DISTC_EPROTO, peer_ + " answered WAIT wrongly");
        }
        io.send(request(Op::Get).str(key));
        return io.recv_bytes();
    });
}

int64_t TcpClient::add(const std::string &key, int64_t delta, Millis timeout) {
    return call(timeout, [&](Io &io) {
        io.send(request(Op::Add).str(key).i64(delta));
        try {
            if (!status_replies()) return io.recv_pod<int64_t>();
            int64_t v;
            io.recv_status("ADD", &v, sizeof v);
            return v;
        } catch (const Error &e) {
            // PyTorch's protocol has no error reply: a server drops the client whose ADD it
            // cannot do. One that is dead, or drops this client whatever it asks, does not
            // answer a new connection's CHECK.
            if (e.code() != DISTC_EREMOTE || !still_serves(io.deadline)) throw;
            fail(DISTC_EINVAL, std::string(e.what()) + " during ADD but serves a new connection: key '" + key +
                                   "' holds a non-integer value, or the sum overflows int64");
        }
    });
}

bool TcpClient::still_serves(Clock::time_point deadline) {
    try {
        Fd fd = connect(deadline, 0);
        Io io{*this, fd.get(), deadline};
        Writer w = request(Op::Check);
        io.send(put_keys(w, {}));
        io.recv_pod<uint8_t>();
        std::lock_guard<std::mutex> lk(mu_);
        if (idle_.size() < kMaxIdle) idle_.push_back(std::move(fd));
        return true;
    } catch (const Error &) {
        return false;
    }
}

Bytes TcpClient::compare_set(const std::string &key, ByteView expected, ByteView desired, Millis timeout) {
    return call(timeout, [&](Io &io) {
        io.send(request(Op::CompareSet).str(key).bytes(expected).bytes(desired));
        return io.recv_bytes();
    });
}

bool TcpClient::check(const std::vector<std::string> &keys, Millis timeout) {
    return call(timeout, [&](Io &io) {
        Writer w = request(Op::Check);
        io.send(put_keys(w, keys));
        uint8_t r = io.recv_pod<uint8_t>();
        if (r != wire::kCheckReady && r != wire::kCheckNotReady) fail(DISTC_EPROTO, peer_ + " answered CHECK wrongly");
        return r == wire::kCheckReady;
    });
}

void TcpClient::wait(const std::vector<std::string> &keys, Millis timeout) {
    call(timeout, [&](Io &io) {
        Writer w = request(Op::Wait);
        io.send(put_keys(w, keys));
        if (io.recv_pod<uint8_t>() != wire::kStopWaiting) fail(DISTC_EPROTO, peer_ + " answered WAIT wrongly");
    });
}

bool TcpClient::delete_key(const std::string &key, Millis timeout) {
    return call(timeout, [&](Io &io) {
        io.send(request(Op::DeleteKey).str(key));
        return io.recv_pod<int64_t>() > 0;
    });
}

int64_t TcpClient::num_keys(Millis timeout) {
    return call(timeout, [&](Io &io) {
        io.send(request(Op::NumKeys));
        return io.recv_pod<int64_t>();
    });
}

void TcpClient::append(const std::string &key, ByteView value, Millis timeout) {
    call(timeout, [&](Io &io) {
        Writer w = request(Op::Append);
        w.str(key).bytes(value);
        io.send_applied(w);
    });
}

std::vector<Bytes> TcpClient::multi_get(const std::vector<std::string> &keys, Millis timeout) {
    return call(timeout, [&](Io &io) {
        if (protocol_ != DISTC_TCP_PROTOCOL_DISTC) {
            Writer w = request(Op::Wait);
            io.send(put_keys(w, keys));
            if (io.recv_pod<uint8_t>() != wire::kStopWaiting) fail(DISTC_EPROTO, peer_ + " answered WAIT wrongly");
        }
        Writer w;
        if (protocol_ == DISTC_TCP_PROTOCOL_TORCH1) {
            for (const auto &k : keys) w.u8(wire::encode_op(dialect_, Op::Get)).str(k);  // pipelined
        } else {
            w = request(Op::MultiGet);
            put_keys(w, keys);
        }
        io.send(w);
        if (status_replies()) io.recv_status("MULTI_GET", nullptr, 0);
        std::vector<Bytes> out;
        out.reserve(keys.size());
        for (size_t i = 0; i < keys.size(); ++i) out.push_back(io.recv_bytes());
        return out;
    });
}

void TcpClient::multi_set(const std::vector<std::string> &keys, const std::vector<ByteView> &values, Millis timeout) {
    call(timeout, [&](Io &io) {
        Writer w;
        if (protocol_ == DISTC_TCP_PROTOCOL_TORCH1) {
            for (size_t i = 0; i < keys.size(); ++i)
                w.u8(wire::encode_op(dialect_, Op::Set)).str(keys[i]).bytes(values[i]);
        } else {
            w = request(Op::MultiSet);
            w.u64(keys.size());
            for (size_t i = 0; i < keys.size(); ++i) w.str(keys[i]).bytes(values[i]);
        }
        io.send_applied(w);
    });
}

}  // namespace distc

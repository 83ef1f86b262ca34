#include "core/store/tcp/tcp_client.hpp"

#include <cstdlib>
#include <thread>

#include "core/util/error.hpp"

namespace distc {

using wire::Op;
using wire::Writer;

namespace {
std::chrono::microseconds client_spin() {
    const char *e = std::getenv("DISTC_STORE_CLIENT_SPIN_US");
    return std::chrono::microseconds(e ? std::atoll(e) : 50);
}
}  // namespace

TcpClient::TcpClient(std::string host, int port, distc_tcp_protocol protocol, int connect_retries, Millis timeout)
    : host_(std::move(host)), port_(port), peer_("store server " + host_ + ":" + std::to_string(port)),
      protocol_(protocol), spin_(client_spin()) {
    std::lock_guard<std::mutex> lk(mu_);
    connect(Clock::now() + timeout, connect_retries);
}

void TcpClient::connect(Clock::time_point deadline, int retries) {
    auto backoff = Millis(10);
    for (int attempt = 0;; ++attempt) {
        try {
            sock_ = tcp_connect(host_, port_, deadline);
            break;
        } catch (const Error &e) {
            bool out_of_tries = (retries >= 0 && attempt >= retries) || Clock::now() + backoff >= deadline;
            if (e.code() != DISTC_EREMOTE || out_of_tries) {
                if (e.code() == DISTC_EREMOTE && Clock::now() + backoff >= deadline)
                    fail(DISTC_ETIMEOUT, std::string(e.what()) + " (gave up after " + std::to_string(attempt + 1) +
                                             " attempts within the timeout)");
                throw;
            }
            std::this_thread::sleep_for(backoff);
            backoff = std::min(backoff * 2, Millis(1000));
        }
    }
    switch (protocol_) {
    case DISTC_TCP_PROTOCOL_AUTO:
        if (handshake(deadline)) {
            protocol_ = DISTC_TCP_PROTOCOL_DISTC;
        } else {
            // A PyTorch server drops a connection that opens with an unknown query.
            sock_ = tcp_connect(host_, port_, deadline);
            protocol_ = DISTC_TCP_PROTOCOL_TORCH1;
            dialect_ = wire::Dialect::Torch1;
        }
        break;
    case DISTC_TCP_PROTOCOL_DISTC:
        if (!handshake(deadline)) fail(DISTC_EPROTO, peer_ + " is not a distc store server (it refused the handshake)");
        break;
    case DISTC_TCP_PROTOCOL_TORCH1:
        dialect_ = wire::Dialect::Torch1;
        break;
    case DISTC_TCP_PROTOCOL_TORCH2:
        dialect_ = wire::Dialect::Torch2;
        send(Writer(wire::encode_op(dialect_, Op::Validate)).u32(wire::kTorchMagic), deadline);
        break;
    }
}

bool TcpClient::handshake(Clock::time_point deadline) {
    dialect_ = wire::Dialect::Torch2;
    send(Writer(wire::kHello).u32(wire::kDistcMagic).u32(wire::kDistcVersion), deadline);
    uint32_t magic;
    try {
        magic = recv_pod<uint32_t>(deadline);
    } catch (const Error &e) {
        if (e.code() == DISTC_EREMOTE) return false;
        throw;
    }
    uint32_t version = recv_pod<uint32_t>(deadline);
    if (magic != wire::kDistcMagic) fail(DISTC_EPROTO, peer_ + " answered the handshake with unknown bytes");
    (void)version;  // one version so far; later servers answer with the highest they share
    return true;
}

template <typename F>
auto TcpClient::call(Millis timeout, F &&body) -> decltype(body(Clock::time_point{})) {
    std::lock_guard<std::mutex> lk(mu_);
    auto deadline = Clock::now() + timeout;
    if (!sock_.valid()) connect(deadline, 0);  // once: a dead server must fail fast
    try {
        return body(deadline);
    } catch (...) {
        sock_.reset();
        throw;
    }
}

void TcpClient::send(const Writer &w, Clock::time_point deadline) {
    send_all(sock_.get(), w.buf().data(), w.buf().size(), deadline, peer_);
}

template <typename T>
T TcpClient::recv_pod(Clock::time_point deadline) {
    T v;
    recv_all(sock_.get(), &v, sizeof v, deadline, peer_, spin_);
    return v;
}

Bytes TcpClient::recv_bytes(Clock::time_point deadline) {
    uint64_t len = recv_pod<uint64_t>(deadline);
    if (len > DISTC_STORE_MAX_VALUE_SIZE) fail(DISTC_EPROTO, peer_ + " sent a value over the 1 GiB limit");
    Bytes b(len);
    if (len) recv_all(sock_.get(), b.data(), len, deadline, peer_, spin_);
    return b;
}

Writer &TcpClient::put_keys(Writer &w, const std::vector<std::string> &keys) {
    w.u64(keys.size());
    for (const auto &k : keys) w.str(k);
    return w;
}

void TcpClient::set(const std::string &key, ByteView value, Millis timeout) {
    call(timeout, [&](Clock::time_point dl) {
        // SET has no reply: make sure the server is still there before trusting the send.
        if (peer_closed(sock_.get())) fail(DISTC_EREMOTE, peer_ + " closed the connection");
        send(request(Op::Set).str(key).bytes(value), dl);
    });
}

Bytes TcpClient::get(const std::string &key, Millis timeout) {
    return call(timeout, [&](Clock::time_point dl) {
        if (protocol_ != DISTC_TCP_PROTOCOL_DISTC) {
            // A PyTorch server answers GET only for a key that exists: WAIT first.
            Writer w = request(Op::Wait);
            send(put_keys(w, {key}), dl);
            if (recv_pod<uint8_t>(dl) != wire::kStopWaiting) fail(DISTC_EPROTO, peer_ + " answered WAIT wrongly");
        }
        send(request(Op::Get).str(key), dl);
        return recv_bytes(dl);
    });
}

int64_t TcpClient::add(const std::string &key, int64_t delta, Millis timeout) {
    return call(timeout, [&](Clock::time_point dl) {
        send(request(Op::Add).str(key).i64(delta), dl);
        try {
            return recv_pod<int64_t>(dl);
        } catch (const Error &e) {
            if (e.code() != DISTC_EREMOTE) throw;
            // The protocol has no error reply: the server drops a client whose ADD it cannot do.
            fail(DISTC_EINVAL, std::string(e.what()) + " during ADD (does the key hold a non-integer value?)");
        }
    });
}

Bytes TcpClient::compare_set(const std::string &key, ByteView expected, ByteView desired, Millis timeout) {
    return call(timeout, [&](Clock::time_point dl) {
        send(request(Op::CompareSet).str(key).bytes(expected).bytes(desired), dl);
        return recv_bytes(dl);
    });
}

bool TcpClient::check(const std::vector<std::string> &keys, Millis timeout) {
    return call(timeout, [&](Clock::time_point dl) {
        Writer w = request(Op::Check);
        send(put_keys(w, keys), dl);
        uint8_t r = recv_pod<uint8_t>(dl);
        if (r != wire::kCheckReady && r != wire::kCheckNotReady) fail(DISTC_EPROTO, peer_ + " answered CHECK wrongly");
        return r == wire::kCheckReady;
    });
}

void TcpClient::wait(const std::vector<std::string> &keys, Millis timeout) {
    call(timeout, [&](Clock::time_point dl) {
        Writer w = request(Op::Wait);
        send(put_keys(w, keys), dl);
        if (recv_pod<uint8_t>(dl) != wire::kStopWaiting) fail(DISTC_EPROTO, peer_ + " answered WAIT wrongly");
    });
}

bool TcpClient::delete_key(const std::string &key, Millis timeout) {
    return call(timeout, [&](Clock::time_point dl) {
        send(request(Op::DeleteKey).str(key), dl);
        return recv_pod<int64_t>(dl) > 0;
    });
}

int64_t TcpClient::num_keys(Millis timeout) {
    return call(timeout, [&](Clock::time_point dl) {
        send(request(Op::NumKeys), dl);
        return recv_pod<int64_t>(dl);
    });
}

void TcpClient::append(const std::string &key, ByteView value, Millis timeout) {
    call(timeout, [&](Clock::time_point dl) {
        if (peer_closed(sock_.get())) fail(DISTC_EREMOTE, peer_ + " closed the connection");
        send(request(Op::Append).str(key).bytes(value), dl);
    });
}

std::vector<Bytes> TcpClient::multi_get(const std::vector<std::string> &keys, Millis timeout) {
    return call(timeout, [&](Clock::time_point dl) {
        if (protocol_ != DISTC_TCP_PROTOCOL_DISTC) {
            Writer w = request(Op::Wait);
            send(put_keys(w, keys), dl);
            if (recv_pod<uint8_t>(dl) != wire::kStopWaiting) fail(DISTC_EPROTO, peer_ + " answered WAIT wrongly");
        }
        Writer w;
        if (protocol_ == DISTC_TCP_PROTOCOL_TORCH1) {
            for (const auto &k : keys) w.u8(wire::encode_op(dialect_, Op::Get)).str(k);  // pipelined
        } else {
            w = request(Op::MultiGet);
            put_keys(w, keys);
        }
        send(w, dl);
        std::vector<Bytes> out;
        out.reserve(keys.size());
        for (size_t i = 0; i < keys.size(); ++i) out.push_back(recv_bytes(dl));
        return out;
    });
}

void TcpClient::multi_set(const std::vector<std::string> &keys, const std::vector<ByteView> &values,
                          Millis timeout) {
    call(timeout, [&](Clock::time_point dl) {
        if (peer_closed(sock_.get())) fail(DISTC_EREMOTE, peer_ + " closed the connection");
        Writer w;
        if (protocol_ == DISTC_TCP_PROTOCOL_TORCH1) {
            for (size_t i = 0; i < keys.size(); ++i)
                w.u8(wire::encode_op(dialect_, Op::Set)).str(keys[i]).bytes(values[i]);
        } else {
            w = request(Op::MultiSet);
            w.u64(keys.size());
            for (size_t i = 0; i < keys.size(); ++i) w.str(keys[i]).bytes(values[i]);
        }
        send(w, dl);
    });
}

}  // namespace distc

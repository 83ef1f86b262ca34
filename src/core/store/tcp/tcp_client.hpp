// A blocking TCP store client: one connection, one request at a time (a mutex
// serialises threads), every wait bounded by a deadline. After any failure in
// the middle of a request the connection is dropped, since its state is
// unknown; the next request reconnects once.
#pragma once

#include <mutex>
#include <string>
#include <vector>

#include "core/store/store.hpp"
#include "core/store/tcp/wire.hpp"
#include "core/util/socket.hpp"
#include "distc/store.h"

namespace distc {

class TcpClient {
public:
    TcpClient(std::string host, int port, distc_tcp_protocol protocol, int connect_retries, Millis timeout);

    void set(const std::string &key, ByteView value, Millis timeout);
    Bytes get(const std::string &key, Millis timeout);
    int64_t add(const std::string &key, int64_t delta, Millis timeout);
    Bytes compare_set(const std::string &key, ByteView expected, ByteView desired, Millis timeout);
    bool check(const std::vector<std::string> &keys, Millis timeout);
    void wait(const std::vector<std::string> &keys, Millis timeout);
    bool delete_key(const std::string &key, Millis timeout);
    int64_t num_keys(Millis timeout);
    bool has_append() const { return protocol_ != DISTC_TCP_PROTOCOL_TORCH1; }
    void append(const std::string &key, ByteView value, Millis timeout);
    std::vector<Bytes> multi_get(const std::vector<std::string> &keys, Millis timeout);
    void multi_set(const std::vector<std::string> &keys, const std::vector<ByteView> &values, Millis timeout);

    distc_tcp_protocol protocol() const { return protocol_; }
    const std::string &peer() const { return peer_; }

private:
    template <typename F>
    auto call(Millis timeout, F &&body) -> decltype(body(Clock::time_point{}));
    void connect(Clock::time_point deadline, int retries);
    bool handshake(Clock::time_point deadline);  // false: not a distc server
    void send(const wire::Writer &w, Clock::time_point deadline);
    template <typename T>
    T recv_pod(Clock::time_point deadline);
    Bytes recv_bytes(Clock::time_point deadline);
    wire::Writer request(wire::Op op) const { return wire::Writer(wire::encode_op(dialect_, op)); }
    static wire::Writer &put_keys(wire::Writer &w, const std::vector<std::string> &keys);

    std::string host_;
    int port_;
    std::string peer_;
    distc_tcp_protocol protocol_;
    wire::Dialect dialect_ = wire::Dialect::Torch2;
    std::chrono::microseconds spin_;
    std::mutex mu_;
    Fd sock_;
};

}  // namespace distc

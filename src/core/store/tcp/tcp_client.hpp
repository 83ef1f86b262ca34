// A blocking TCP store client. Each request takes an idle connection from a
// small pool, or opens one, so a thread blocked in get() or wait() never holds
// up another thread's set() on the same handle (it would deadlock until the
// timeout otherwise). Every wait is bounded by a deadline. After a failure in
// the middle of a request its connection is closed, since its state is
// unknown; the next request opens a new one, with a single attempt so that a
// dead server is reported at once.
#pragma once

#include <atomic>
#include <mutex>
#include <utility>
#include <string>
#include <vector>

#include "core/store/store.hpp"
#include "core/store/tcp/wire.hpp"
#include "core/util/socket.hpp"
#include "distc/store.h"

namespace distc {

class TcpClient {
public:
    // `token`: proved to a server that requires one ("": none).
    TcpClient(std::string host, int port, distc_tcp_protocol protocol, int connect_retries, Millis timeout,
              std::string token = {});

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
    // This end's address on its last connection to the server ("" before one).
    std::string local_address();

private:
    // One request on one connection.
    struct Io {
        TcpClient &c;
        int fd;
        Clock::time_point deadline;
        void send(const wire::Writer &w);
        // SET, APPEND and MULTI_SET have no reply. A CHECK of no keys right
        // behind one does, and a server answers one connection's requests in
        // order: after this the write is there for every client, so a rank
        // that sets a key, then meets its peers in a collective, knows they
        // see it (they need not wait for it). Both go in one write, so that
        // a server that stops as soon as the write wakes someone (the last
        // rank's "done") has the CHECK in hand, and answers it, first.
        void send_applied(wire::Writer &write);
        template <typename T>
        T recv_pod();
        Bytes recv_bytes();
        // A version-2 status byte, and on success the `n` (<= 8) reply bytes after it, read at once.
        void recv_status(const char *op, void *after, size_t n);
    };
    template <typename F>
    auto call(Millis timeout, F &&body) -> decltype(body(std::declval<Io &>()));
    Fd connect(Clock::time_point deadline, int retries);
    bool handshake(Io &io);  // false: not a distc server
    void authenticate(Io &io, const uint8_t *nonce);
    bool still_serves(Clock::time_point deadline);  // a new connection is served (and kept in the pool)
    wire::Writer request(wire::Op op) const { return wire::Writer(wire::encode_op(dialect_, op)); }
    bool status_replies() const { return protocol_ == DISTC_TCP_PROTOCOL_DISTC && version_ >= 2; }
    static wire::Writer &put_keys(wire::Writer &w, const std::vector<std::string> &keys);

    std::string host_;
    int port_;
    std::string peer_;
    distc_tcp_protocol protocol_;
    wire::Dialect dialect_ = wire::Dialect::Torch2;
    std::string token_;
    std::atomic<uint32_t> version_{0};      // the distc protocol version the server agreed to
    std::atomic<uint64_t> max_request_{0};  // the server's max_request_bytes; 0: not told
    std::chrono::microseconds spin_;
    static constexpr size_t kMaxIdle = 8;
    std::mutex mu_;  // guards idle_ and the protocol resolution
    std::vector<Fd> idle_;
    std::string local_;  // under mu_
};

}  // namespace distc

// The store server's bookkeeping seen from inside (src/core/store/tcp/):
// waiter entries of blocked requests, and the bytes connections hold while
// their requests are held back, or idle. Hostile clients are raw sockets that
// speak PyTorch 2.x's dialect byte by byte; well-behaved ones are TcpClients.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <memory>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "core/store/tcp/tcp_client.hpp"
#include "core/store/tcp/tcp_server.hpp"
#include "core/util/error.hpp"

// After distc's headers: cmocka defines a fail() macro.
#include <cstdarg>
#include <cstddef>
#include <csetjmp>
#include <cstdint>
extern "C" {  // cmocka 1.1 has no C++ guards of its own
#include <cmocka.h>
}

using distc::Millis;
using distc::TcpClient;
using distc::TcpServer;

namespace {

const Millis kTimeout(10000);

// Polls `pred` until it holds or `seconds` pass; the result is pred's last value.
bool eventually(const std::function<bool()> &pred, int seconds = 20) {
    auto end = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
    while (!pred()) {
        if (std::chrono::steady_clock::now() > end) return pred();
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return true;
}

// PyTorch 2.x's query numbers.
enum : uint8_t { kValidate = 0, kSet = 1, kGet = 3, kWait = 6, kCancelWait = 12 };

struct Msg {
    std::vector<uint8_t> b;
    Msg &u8(uint8_t v) { return raw(&v, 1); }
    Msg &u32(uint32_t v) { return raw(&v, 4); }
    Msg &u64(uint64_t v) { return raw(&v, 8); }
    Msg &str(const std::string &s) { return u64(s.size()).raw(s.data(), s.size()); }
    Msg &keys(const std::vector<std::string> &ks) {
        u64(ks.size());
        for (const auto &k : ks) str(k);
        return *this;
    }
    Msg &raw(const void *p, size_t n) {
        b.insert(b.end(), static_cast<const uint8_t *>(p), static_cast<const uint8_t *>(p) + n);
        return *this;
    }
};

// A PyTorch 2.x client on a raw socket.
class Raw {
public:
    explicit Raw(int port) {
        fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_port = htons(static_cast<uint16_t>(port));
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        if (::connect(fd_, reinterpret_cast<sockaddr *>(&a), sizeof a) != 0) fail_msg("raw connect failed");
        timeval tv{10, 0};
        setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        send(Msg().u8(kValidate).u32(0x3C85F7CE));
    }
    ~Raw() { close(); }
    void close() {
        if (fd_ >= 0) ::close(fd_);
        fd_ = -1;
    }
    void send(const Msg &m) {
        size_t off = 0;
        while (off < m.b.size()) {
            ssize_t w = ::send(fd_, m.b.data() + off, m.b.size() - off, MSG_NOSIGNAL);
            if (w <= 0) fail_msg("raw send failed");
            off += static_cast<size_t>(w);
        }
    }
    // Sends until done or until the peer takes nothing for `timeout_s`; returns the bytes sent.
    size_t send_until_stalled(const Msg &m, size_t from, int timeout_s) {
        timeval tv{timeout_s, 0};
        setsockopt(fd_, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
        size_t off = from;
        while (off < m.b.size()) {
            ssize_t w = ::send(fd_, m.b.data() + off, m.b.size() - off, MSG_NOSIGNAL);
            if (w <= 0) break;
            off += static_cast<size_t>(w);
        }
        return off - from;
    }
    void recv_exact(void *p, size_t n) {
        if (::recv(fd_, p, n, MSG_WAITALL) != static_cast<ssize_t>(n)) fail_msg("raw recv failed");
    }
    uint8_t recv_u8() {
        uint8_t v;
        recv_exact(&v, 1);
        return v;
    }
    // True when the server closed the connection (rather than answering or keeping it open).
    bool closed_by_peer() {
        uint8_t b;
        ssize_t r = ::recv(fd_, &b, 1, 0);
        return r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK);
    }

private:
    int fd_ = -1;
};

std::vector<std::string> numbered(const char *prefix, int n) {
    std::vector<std::string> ks;
    for (int i = 0; i < n; ++i) ks.push_back(prefix + std::to_string(i));
    return ks;
}

// A round trip that is served in a later loop iteration than the requests
// before it, so whatever those woke up has run by the time it returns.
void barrier(TcpClient &c) {
    c.add("barrier", 1, kTimeout);
    c.add("barrier", 1, kTimeout);
}

// A WAIT for 100 keys is one waiter entry however often it wakes, and none once it ends.
void test_one_waiter_per_blocked_request(void **) {
    TcpServer srv("127.0.0.1", 0);
    TcpClient setter("127.0.0.1", srv.port(), DISTC_TCP_PROTOCOL_DISTC, 0, kTimeout);
    auto keys = numbered("k", 100);
    Raw w(srv.port());
    w.send(Msg().u8(kWait).keys(keys));
    assert_true(eventually([&] { return srv.num_waiters() == 1; }));
    for (int i = 99; i >= 1; --i) {  // last to first: the early keys keep it waiting
        setter.set(keys[i], distc::ByteView("v", 1), kTimeout);
        barrier(setter);
        assert_int_equal(srv.num_waiters(), 1);
    }
    setter.delete_key(keys[50], kTimeout);  // a key seen earlier goes again
    setter.set(keys[0], distc::ByteView("v", 1), kTimeout);
    barrier(setter);
    assert_int_equal(srv.num_waiters(), 1);
    setter.set(keys[50], distc::ByteView("v", 1), kTimeout);
    assert_int_equal(w.recv_u8(), 0);  // STOP_WAITING
    assert_int_equal(srv.num_waiters(), 0);
}

// Waits that time out, are cancelled or whose client hangs up leave nothing behind.
void test_waiters_released_when_the_wait_ends(void **) {
    TcpServer srv("127.0.0.1", 0);
    {
        TcpClient c("127.0.0.1", srv.port(), DISTC_TCP_PROTOCOL_DISTC, 0, kTimeout);
        for (int i = 0; i < 100; ++i) {
            try {
                c.get("never", Millis(2));
                fail_msg("get of a missing key returned");
            } catch (const distc::Error &e) {
                assert_int_equal(e.code(), DISTC_ETIMEOUT);  // and the client closes that connection
            }
        }
    }
    assert_true(eventually([&] { return srv.num_connections() == 0; }));
    assert_int_equal(srv.num_waiters(), 0);

    Raw cancelled(srv.port());
    cancelled.send(Msg().u8(kWait).keys({"never"}));
    cancelled.send(Msg().u8(kCancelWait));
    assert_int_equal(cancelled.recv_u8(), 1);  // WAIT_CANCELED
    assert_int_equal(srv.num_waiters(), 0);

    Raw gone(srv.port());
    gone.send(Msg().u8(kWait).keys({"never", "nor"}));
    assert_true(eventually([&] { return srv.num_waiters() == 1; }));
    gone.close();
    assert_true(eventually([&] { return srv.num_connections() == 1; }));  // `cancelled` is left
    assert_int_equal(srv.num_waiters(), 0);
}

distc::ByteView view(const std::vector<uint8_t> &v) { return distc::ByteView(v.data(), v.size()); }

// A connection whose request waits for a key is not read further (beyond a
// little): 48 MiB sent behind a blocked WAIT stay in the sockets, not in the
// server; once the key comes the server reads on and serves all of it.
void test_blocked_connection_is_not_read(void **) {
    TcpServer srv("127.0.0.1", 0);
    TcpClient setter("127.0.0.1", srv.port(), DISTC_TCP_PROTOCOL_DISTC, 0, kTimeout);
    Raw w(srv.port());
    w.send(Msg().u8(kWait).keys({"gate"}));
    assert_true(eventually([&] { return srv.num_waiters() == 1; }));
    Msg sets;
    std::vector<uint8_t> mib(1u << 20, 7);
    for (int i = 0; i < 48; ++i) sets.u8(kSet).str("s" + std::to_string(i)).u64(mib.size()).raw(mib.data(), mib.size());
    size_t sent = w.send_until_stalled(sets, 0, 2);
    barrier(setter);
    assert_true(srv.buffered_bytes() <= (256u << 10));
    assert_true(sent < sets.b.size());  // the sockets filled up
    setter.set("gate", distc::ByteView("open", 4), kTimeout);
    assert_int_equal(w.recv_u8(), 0);  // STOP_WAITING
    w.send_until_stalled(sets, sent, 10);
    assert_int_equal(setter.get("s47", kTimeout).size(), mib.size());
    assert_true(eventually([&] { return srv.buffered_bytes() <= (64u << 10); }));
}

// A client that sends 2,000 GETs of a 64 KiB value and reads no reply makes the
// server hold about max_unread_reply_bytes, not 125 MiB; reading them all works.
void test_unread_replies_hold_back_reading(void **) {
    distc::TcpServerOptions o;
    o.max_unread_reply_bytes = 256u << 10;
    TcpServer srv("127.0.0.1", 0, o);
    TcpClient setter("127.0.0.1", srv.port(), DISTC_TCP_PROTOCOL_DISTC, 0, kTimeout);
    std::vector<uint8_t> value(64u << 10);
    for (size_t i = 0; i < value.size(); ++i) value[i] = static_cast<uint8_t>(i * 31);
    setter.set("v", view(value), kTimeout);
    Raw r(srv.port());
    Msg gets;
    const int n = 2000;
    for (int i = 0; i < n; ++i) gets.u8(kGet).str("v");
    r.send(gets);
    barrier(setter);
    // The cap, the reply that crossed it, and buffers' slack (which depends on how
    // far the kernel had taken replies when reading stopped): far from 125 MiB.
    assert_true(srv.buffered_bytes() <= o.max_unread_reply_bytes + value.size() + (256u << 10));
    std::vector<uint8_t> got(value.size());
    for (int i = 0; i < n; ++i) {
        uint64_t len = 0;
        r.recv_exact(&len, 8);
        assert_int_equal(len, value.size());
        r.recv_exact(got.data(), got.size());
        assert_true(got == value);
    }
    assert_true(eventually([&] { return srv.buffered_bytes() <= (64u << 10); }));
}

// After large values come and go, idle connections hold next to nothing.
void test_idle_connections_hold_little(void **) {
    TcpServer srv("127.0.0.1", 0);
    TcpClient big("127.0.0.1", srv.port(), DISTC_TCP_PROTOCOL_DISTC, 0, kTimeout);
    std::vector<uint8_t> mib8(8u << 20, 1), kib100(100u << 10, 2);
    big.set("big", view(mib8), kTimeout);
    assert_int_equal(big.get("big", kTimeout).size(), mib8.size());
    std::vector<std::unique_ptr<TcpClient>> many;
    for (int i = 0; i < 100; ++i) {
        many.push_back(std::make_unique<TcpClient>("127.0.0.1", srv.port(), DISTC_TCP_PROTOCOL_DISTC, 0, kTimeout));
        many.back()->set("k" + std::to_string(i), view(kib100), kTimeout);
        assert_int_equal(many.back()->get("k" + std::to_string(i), kTimeout).size(), kib100.size());
    }
    barrier(big);
    assert_int_equal(srv.num_connections(), 101);
    // At most the one read buffer the server keeps for whichever connection reads next.
    assert_true(srv.buffered_bytes() <= 101 * 4096 + (64u << 10));
}

// A request over max_request_bytes closes its connection before more than the
// limit is buffered; the server serves on.
void test_request_over_the_limit_is_refused(void **) {
    distc::TcpServerOptions o;
    o.max_request_bytes = 1u << 20;
    TcpServer srv("127.0.0.1", 0, o);
    Raw r(srv.port());
    std::vector<uint8_t> mib2(2u << 20, 3);
    r.send_until_stalled(Msg().u8(kSet).str("k").u64(mib2.size()).raw(mib2.data(), mib2.size()), 0, 10);
    assert_true(r.closed_by_peer());
    TcpClient c("127.0.0.1", srv.port(), DISTC_TCP_PROTOCOL_DISTC, 0, kTimeout);
    std::vector<uint8_t> half(512u << 10, 4);
    c.set("k", view(half), kTimeout);
    assert_int_equal(c.get("k", kTimeout).size(), half.size());
    assert_true(eventually([&] { return srv.num_connections() == 1; }));
}

}  // namespace

int main() {
    const CMUnitTest tests[] = {
        cmocka_unit_test(test_one_waiter_per_blocked_request),
        cmocka_unit_test(test_waiters_released_when_the_wait_ends),
        cmocka_unit_test(test_blocked_connection_is_not_read),
        cmocka_unit_test(test_unread_replies_hold_back_reading),
        cmocka_unit_test(test_idle_connections_hold_little),
        cmocka_unit_test(test_request_over_the_limit_is_refused),
    };
    return cmocka_run_group_tests(tests, nullptr, nullptr);
}

// The store server's bookkeeping seen from inside (src/core/store/tcp/):
// waiter entries of blocked requests. Hostile clients are raw sockets that
// speak PyTorch 2.x's dialect byte by byte; well-behaved ones are TcpClients.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
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
enum : uint8_t { kValidate = 0, kWait = 6, kCancelWait = 12 };

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
    uint8_t recv_u8() {
        uint8_t v;
        if (::recv(fd_, &v, 1, MSG_WAITALL) != 1) fail_msg("raw recv failed");
        return v;
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

}  // namespace

int main() {
    const CMUnitTest tests[] = {
        cmocka_unit_test(test_one_waiter_per_blocked_request),
        cmocka_unit_test(test_waiters_released_when_the_wait_ends),
    };
    return cmocka_run_group_tests(tests, nullptr, nullptr);
}

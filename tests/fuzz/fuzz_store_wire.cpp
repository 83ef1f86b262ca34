// libFuzzer target: the TCP store server's parser, in every dialect (PyTorch
// 1.x, 2.x, distc's HELLO). One server runs for the whole session; each
// input is what one client sends on a fresh connection before it closes.
// The server must answer or drop the connection, never crash, and still
// serve a well-behaved client afterwards.
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <memory>

#include "core/store/tcp/tcp_server.hpp"
#include "core/store/tcp/tcp_store.hpp"
#include "core/util/error.hpp"
#include "core/util/socket.hpp"

namespace {

// Replaced every few thousand inputs (after checking it still serves), so
// that the keys inputs set do not pile up for the whole session.
std::unique_ptr<distc::TcpServer> g_server;

distc::TcpServer &server() {
    if (!g_server) g_server = std::make_unique<distc::TcpServer>("127.0.0.1", 0);
    return *g_server;
}

// A real client still gets what it set: the server survived the inputs so far.
void check_still_serves() {
    distc::TcpStoreOptions o;
    o.host = "127.0.0.1";
    o.port = server().port();
    o.timeout = std::chrono::milliseconds(5000);
    distc::TcpStore c(o);
    c.set("fuzz/alive", distc::ByteView("yes", 3));
    distc::Bytes v = c.get("fuzz/alive", std::chrono::milliseconds(5000));
    if (v.size() != 3) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static uint64_t runs = 0;
    auto deadline = distc::Clock::now() + std::chrono::seconds(5);
    distc::Fd fd = distc::tcp_connect("127.0.0.1", server().port(), deadline);
    for (size_t off = 0; off < size;) {
        ssize_t w = ::send(fd.get(), data + off, size - off, MSG_NOSIGNAL);
        if (w <= 0) break;  // the server dropped us: fine
        off += size_t(w);
    }
    ::shutdown(fd.get(), SHUT_WR);
    // Read replies until the server closes, or until it has been quiet a moment
    // (a request that waits for a key it will never see).
    uint8_t buf[4096];
    for (;;) {
        pollfd p{fd.get(), POLLIN, 0};
        if (::poll(&p, 1, 2) <= 0) break;
        if (::recv(fd.get(), buf, sizeof buf, 0) <= 0) break;
    }
    fd.reset();
    if (++runs % 4096 == 0) {
        check_still_serves();
        g_server.reset();
    }
    return 0;
}

// libFuzzer target: the TCP transport's point-to-point reader
// (backends/host/transport/tcp/tcp_p2p) and the mailbox it fills. A stranger or a peer connects to a
// group's point-to-point listener and sends arbitrary bytes, where rank 0
// has posted receives of 16 and 0 bytes from rank 1 with tags 1 and 2 and
// one from any source with tag 3. Each receive must end in success,
// DISTC_EINVAL (another size), DISTC_EREMOTE (a dropped connection) or
// DISTC_ETIMEOUT, never write past its buffer, and the reader never crash.
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "backends/host/transport/p2p_mailbox.hpp"
#include "backends/host/transport/tcp/tcp_p2p.hpp"
#include "core/util/error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    distc::Fd listener = distc::tcp_listen("127.0.0.1", 0, 8);
    int port = distc::local_port(listener.get());
    std::vector<std::string> addrs = {"127.0.0.1:" + std::to_string(port), "127.0.0.1:1", "127.0.0.1:1"};
    auto box = std::make_unique<distc::P2pMailbox>(3);
    auto p2p = std::make_unique<distc::TcpP2p>(*box, 0, addrs, std::move(listener), std::chrono::milliseconds(1000));
    box->route(1, p2p.get(), distc::P2pMailbox::Polling{});  // no polling: the carrier's thread reads every frame
    box->route(2, p2p.get(), distc::P2pMailbox::Polling{});
    std::vector<uint8_t> a(16 + 16, 0xA5), b(16, 0xA5), c(64 + 16, 0xA5);  // 16 guard bytes each
    distc::Tensor ta, tb, tc;
    ta.data = a.data(), ta.numel = 16, ta.dtype = distc::DType::UInt8;
    tb.data = b.data(), tb.numel = 0, tb.dtype = distc::DType::UInt8;
    tc.data = c.data(), tc.numel = 64, tc.dtype = distc::DType::UInt8;
    std::unique_ptr<distc::PendingP2p> ra = box->post_recv(ta, 1, 1), rb = box->post_recv(tb, 1, 2),
                                       rc = box->post_recv(tc, -1, 3);
    {
        distc::Fd fd = distc::tcp_connect("127.0.0.1", port, distc::Clock::now() + std::chrono::seconds(5));
        for (size_t off = 0; off < size;) {
            ssize_t w = ::send(fd.get(), data + off, size - off, MSG_NOSIGNAL);
            if (w <= 0) break;  // dropped: fine
            off += size_t(w);
        }
    }  // closed: what was not matched fails
    for (auto *r : {ra.get(), rb.get(), rc.get()}) {
        try {
            r->wait(std::chrono::milliseconds(5));
        } catch (const distc::Error &e) {
            int k = e.code();
            if (k != DISTC_EINVAL && k != DISTC_EREMOTE && k != DISTC_ETIMEOUT && k != DISTC_EPROTO) std::abort();
        }
    }
    ra.reset(), rb.reset(), rc.reset();
    p2p.reset();
    box.reset();
    for (auto *v : {&a, &b, &c})
        for (size_t i = v->size() - 16; i < v->size(); ++i)
            if ((*v)[i] != 0xA5) std::abort();
    return 0;
}

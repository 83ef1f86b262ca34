// libFuzzer target: the TCP transport's frame parser
// (backends/host/transport/exchange over tcp/socket_links). A peer
// sends arbitrary bytes where this rank, running an allreduce of 16 uint8
// elements, expects up to four messages of sizes the input also picks, and
// where that succeeds runs the next allreduce with the same messages on the
// same links (whose headers may repeat the last one: a first word alone);
// each exchange must end in success, DISTC_EPROTO, DISTC_EINVAL (another
// call, other sizes) or DISTC_EREMOTE, never write past a message or crash.
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "backends/host/transport/exchange.hpp"
#include "backends/host/transport/tcp/socket_links.hpp"
#include "core/util/error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 6) return 0;
    uint32_t seq;
    std::memcpy(&seq, data, 4);
    size_t nmsg = 1 + data[4] % 4;
    data += 5, size -= 5;
    std::vector<std::vector<uint8_t>> bufs;
    for (size_t i = 0; i < nmsg && size >= 2; ++i) {
        size_t n = (size_t(data[0]) | size_t(data[1]) << 8) % 2048;
        bufs.emplace_back(n + 16, 0xA5);  // 16 guard bytes that must stay untouched
        data += 2, size -= 2;
    }
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) std::abort();
    int big = 1 << 20;
    setsockopt(sv[1], SOL_SOCKET, SO_SNDBUF, &big, sizeof big);
    setsockopt(sv[0], SOL_SOCKET, SO_RCVBUF, &big, sizeof big);
    for (size_t off = 0; off < size;) {
        ssize_t w = ::write(sv[1], data + off, size - off);
        if (w <= 0) break;
        off += size_t(w);
    }
    ::shutdown(sv[1], SHUT_WR);
    std::vector<distc::Fd> socks(2);
    socks[1] = distc::Fd(sv[0]);
    distc::SocketLinks links(socks);
    distc::Exchange x;
    uint8_t reply[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    try {
        for (uint32_t call_seq = seq; call_seq != seq + 2; ++call_seq) {
            for (size_t i = 0; i < bufs.size(); ++i) x.recv(1, bufs[i].data(), bufs[i].size() - 16, int(i));
            x.send(1, reply, sizeof reply);
            int got = 0;
            distc::Call call = distc::make_call("allreduce", 2 /* uint8 */, 0 /* SUM */, -1, 16, call_seq);
            x.run(links, call, distc::Clock::now() + std::chrono::milliseconds(200), std::chrono::microseconds(0), 0,
                  [&](int peer, int id) {
                      if (peer != 1 || id != got) std::abort();  // in order, each once
                      ++got;
                  });
            if (got != int(bufs.size())) std::abort();
        }
    } catch (const distc::Error &e) {
        if (e.code() != DISTC_EPROTO && e.code() != DISTC_EINVAL && e.code() != DISTC_EREMOTE) std::abort();
    }
    for (const auto &b : bufs)
        for (size_t i = b.size() - 16; i < b.size(); ++i)
            if (b[i] != 0xA5) std::abort();
    ::close(sv[1]);
    return 0;
}

#include "core/pg/small_mesh.hpp"

#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "core/util/error.hpp"

namespace distc {

namespace {

// Each message: the collective's sequence number and the payload length, so a
// rank that is out of step is caught instead of reading someone else's bytes.
struct Header {
    uint32_t seq;
    uint32_t len;
};

int64_t env_int(const char *name, int64_t dflt) {
    const char *e = std::getenv(name);
    return e && *e ? std::atoll(e) : dflt;
}

Fd accept_one(int listener, Clock::time_point deadline) {
    for (;;) {
        int left = static_cast<int>(std::chrono::duration_cast<Millis>(deadline - Clock::now()).count());
        if (left <= 0) fail(DISTC_ETIMEOUT, "peers did not connect to the small-message mesh in time");
        pollfd p{listener, POLLIN, 0};
        int rc = ::poll(&p, 1, left);
        if (rc < 0 && errno != EINTR) fail_errno(DISTC_EIO, "poll", errno);
        if (rc <= 0) continue;
        int fd = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
        if (fd >= 0) return Fd(fd);
        if (errno != EINTR && errno != EAGAIN && errno != ECONNABORTED) fail_errno(DISTC_EIO, "accept", errno);
    }
}

}  // namespace

size_t SmallMesh::limit() {
    // Every rank sends to all peers before it reads: the kernel's socket
    // buffers must hold a whole message, so the threshold is capped well
    // below what they hold (several hundred KiB on Linux by default).
    static const size_t v =
        static_cast<size_t>(std::clamp<int64_t>(env_int("DISTC_SMALL_MSG_BYTES", kMaxLimit), 0, kMaxLimit));
    return v;
}

SmallMesh::SmallMesh(Store &store, int rank, int size, Millis timeout)
    : rank_(rank), size_(size), socks_(static_cast<size_t>(size)),
      spin_(env_int("DISTC_SPIN_US", 10)) {
    auto deadline = Clock::now() + timeout;
    Fd listener = tcp_listen("", 0, size + 8);
    std::string me = advertised_host() + ":" + std::to_string(local_port(listener.get()));
    store.set("small_mesh/" + std::to_string(rank), ByteView(me.data(), me.size()));
    // Lower ranks accept, higher ranks connect and say who they are.
    for (int p = 0; p < rank; ++p) {
        Bytes addr = store.get("small_mesh/" + std::to_string(p), timeout);
        std::string a(addr.begin(), addr.end());
        auto colon = a.rfind(':');
        Fd fd = tcp_connect(a.substr(0, colon), std::atoi(a.c_str() + colon + 1), deadline);
        int32_t me = rank;
        send_all(fd.get(), &me, sizeof me, deadline, peer_name(p));
        socks_[static_cast<size_t>(p)] = std::move(fd);
    }
    for (int n = rank + 1; n < size; ++n) {
        Fd fd = accept_one(listener.get(), deadline);
        int32_t who = -1;
        recv_all(fd.get(), &who, sizeof who, deadline, "a peer", spin_);
        if (who <= rank || who >= size || socks_[static_cast<size_t>(who)].valid())
            fail(DISTC_EPROTO, "unexpected peer " + std::to_string(who) + " joined the small-message mesh");
        set_nodelay(fd.get());
        socks_[static_cast<size_t>(who)] = std::move(fd);
    }
}

SmallMesh::~SmallMesh() = default;

void SmallMesh::abort() {
    for (auto &s : socks_)
        if (s.valid()) ::shutdown(s.get(), SHUT_RDWR);
}

void SmallMesh::send(int peer, uint32_t seq, const void *p, size_t n, Clock::time_point deadline) {
    Header h{seq, static_cast<uint32_t>(n)};
    // One write per message where it fits: header and payload leave together.
    uint8_t buf[4096];
    int fd = socks_[static_cast<size_t>(peer)].get();
    if (n + sizeof h <= sizeof buf) {
        std::memcpy(buf, &h, sizeof h);
        if (n) std::memcpy(buf + sizeof h, p, n);
        send_all(fd, buf, sizeof h + n, deadline, peer_name(peer));
        return;
    }
    send_all(fd, &h, sizeof h, deadline, peer_name(peer));
    send_all(fd, p, n, deadline, peer_name(peer));
}

void SmallMesh::recv(int peer, uint32_t seq, void *p, size_t n, Clock::time_point deadline) {
    Header h{};
    int fd = socks_[static_cast<size_t>(peer)].get();
    recv_all(fd, &h, sizeof h, deadline, peer_name(peer), spin_);
    if (h.seq != seq || h.len != n)
        fail(DISTC_EPROTO, peer_name(peer) + " sent " + std::to_string(h.len) + " bytes for collective #" +
                               std::to_string(h.seq) + " while this rank expected " + std::to_string(n) +
                               " bytes for #" + std::to_string(seq) +
                               " (ranks out of step: set DISTC_DEBUG=detail to see who calls what)");
    if (n) recv_all(fd, p, n, deadline, peer_name(peer), spin_);
}

void SmallMesh::collect_and_reduce(Tensor &t, ReduceOp op, uint32_t seq, Clock::time_point deadline) {
    size_t n = t.nbytes();
    Scratch all(DType::UInt8, n * static_cast<size_t>(size_));
    for (int p = 0; p < size_; ++p) {
        uint8_t *slot = all.t.bytes() + n * static_cast<size_t>(p);
        if (p == rank_)
            std::memcpy(slot, t.data, n);
        else
            recv(p, seq, slot, n, deadline);
    }
    if (size_ == 1) return;
    // In rank order on every rank: the same bits everywhere.
    ReduceFn fn = reduce_fn(t.dtype, op);
    const uint8_t *base = all.t.bytes();
    fn(t.data, base, base + n, t.numel);
    for (int p = 2; p < size_; ++p) fn(t.data, t.data, base + n * static_cast<size_t>(p), t.numel);
}

void SmallMesh::allreduce(Tensor &t, ReduceOp op, uint32_t seq, Millis timeout) {
    std::lock_guard<std::mutex> lk(mu_);
    auto deadline = Clock::now() + timeout;
    for (int p = 0; p < size_; ++p)
        if (p != rank_) send(p, seq, t.data, t.nbytes(), deadline);
    collect_and_reduce(t, op, seq, deadline);
}

void SmallMesh::reduce(Tensor &t, int root, ReduceOp op, uint32_t seq, Millis timeout) {
    std::lock_guard<std::mutex> lk(mu_);
    auto deadline = Clock::now() + timeout;
    if (rank_ != root)
        send(root, seq, t.data, t.nbytes(), deadline);
    else
        collect_and_reduce(t, op, seq, deadline);
}

void SmallMesh::broadcast(Tensor &t, int root, uint32_t seq, Millis timeout) {
    std::lock_guard<std::mutex> lk(mu_);
    auto deadline = Clock::now() + timeout;
    if (rank_ == root) {
        for (int p = 0; p < size_; ++p)
            if (p != rank_) send(p, seq, t.data, t.nbytes(), deadline);
    } else {
        recv(root, seq, t.data, t.nbytes(), deadline);
    }
}

void SmallMesh::allgather(const Tensor &in, Tensor &out, uint32_t seq, Millis timeout) {
    std::lock_guard<std::mutex> lk(mu_);
    auto deadline = Clock::now() + timeout;
    size_t n = in.nbytes();
    for (int p = 0; p < size_; ++p)
        if (p != rank_) send(p, seq, in.data, n, deadline);
    // Our own part first: `in` may alias another rank's slot of `out`.
    uint8_t *own = out.bytes() + n * static_cast<size_t>(rank_);
    if (own != in.data) std::memmove(own, in.data, n);
    for (int p = 0; p < size_; ++p)
        if (p != rank_) recv(p, seq, out.bytes() + n * static_cast<size_t>(p), n, deadline);
}

void SmallMesh::gather(const Tensor &in, Tensor *out, int root, uint32_t seq, Millis timeout) {
    std::lock_guard<std::mutex> lk(mu_);
    auto deadline = Clock::now() + timeout;
    size_t n = in.nbytes();
    if (rank_ != root) {
        send(root, seq, in.data, n, deadline);
        return;
    }
    uint8_t *own = out->bytes() + n * static_cast<size_t>(rank_);
    if (own != in.data && n) std::memmove(own, in.data, n);
    for (int p = 0; p < size_; ++p)
        if (p != rank_) recv(p, seq, out->bytes() + n * static_cast<size_t>(p), n, deadline);
}

void SmallMesh::scatter(const Tensor *in, Tensor &out, int root, uint32_t seq, Millis timeout) {
    std::lock_guard<std::mutex> lk(mu_);
    auto deadline = Clock::now() + timeout;
    size_t n = out.nbytes();
    if (rank_ != root) {
        recv(root, seq, out.data, n, deadline);
        return;
    }
    for (int p = 0; p < size_; ++p)
        if (p != rank_) send(p, seq, in->bytes() + n * static_cast<size_t>(p), n, deadline);
    const uint8_t *own = in->bytes() + n * static_cast<size_t>(rank_);
    if (own != out.data && n) std::memmove(out.data, own, n);
}

void SmallMesh::alltoall(const Tensor &in, Tensor &out, size_t chunk, uint32_t seq, Millis timeout) {
    std::lock_guard<std::mutex> lk(mu_);
    auto deadline = Clock::now() + timeout;
    for (int p = 0; p < size_; ++p)
        if (p != rank_) send(p, seq, in.bytes() + chunk * static_cast<size_t>(p), chunk, deadline);
    size_t own = chunk * static_cast<size_t>(rank_);
    if (chunk && out.bytes() + own != in.bytes() + own) std::memmove(out.bytes() + own, in.bytes() + own, chunk);
    for (int p = 0; p < size_; ++p)
        if (p != rank_) recv(p, seq, out.bytes() + chunk * static_cast<size_t>(p), chunk, deadline);
}

void SmallMesh::barrier(uint32_t seq, Millis timeout) {
    std::lock_guard<std::mutex> lk(mu_);
    auto deadline = Clock::now() + timeout;
    for (int p = 0; p < size_; ++p)
        if (p != rank_) send(p, seq, nullptr, 0, deadline);
    for (int p = 0; p < size_; ++p)
        if (p != rank_) recv(p, seq, nullptr, 0, deadline);
}

}  // namespace distc

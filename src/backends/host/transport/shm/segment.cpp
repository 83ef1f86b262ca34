#include "backends/host/transport/shm/segment.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <mutex>
#include <random>
#include <utility>

#include "core/util/error.hpp"
#include "core/util/socket.hpp"

namespace distc {

namespace {

// An abstract socket address: a leading NUL, no file behind it.
sockaddr_un abstract_address(const std::string &name, socklen_t &len) {
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    if (name.size() + 1 > sizeof a.sun_path) fail(DISTC_EINTERNAL, "shared memory socket name too long");
    std::memcpy(a.sun_path + 1, name.data(), name.size());
    len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
    return a;
}

int poll_left(Clock::time_point deadline, int cap_ms) {
    auto left = std::chrono::duration_cast<Millis>(deadline - Clock::now()).count();
    return static_cast<int>(std::clamp<int64_t>(left, 0, cap_ms));
}

void io_all(int fd, void *p, size_t n, bool out, Clock::time_point deadline) {
    auto *c = static_cast<uint8_t *>(p);
    while (n) {
        ssize_t k = out ? ::send(fd, c, n, MSG_NOSIGNAL | MSG_DONTWAIT) : ::recv(fd, c, n, MSG_DONTWAIT);
        if (k > 0) {
            c += k;
            n -= static_cast<size_t>(k);
            continue;
        }
        if (k == 0) fail(DISTC_EREMOTE, "a rank closed the shared memory socket during setup");
        if (errno == EINTR) continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK) fail_errno(DISTC_EIO, "shared memory setup socket", errno);
        int ms = poll_left(deadline, 1000);
        if (ms == 0) fail(DISTC_ETIMEOUT, "shared memory setup timed out");
        pollfd pf{fd, short(out ? POLLOUT : POLLIN), 0};
        ::poll(&pf, 1, ms);
    }
}

// The one message that passes the segment: its size, and the memfd with it.
struct FdMessage {
    uint64_t size = 0;
    iovec iov{&size, sizeof size};
    alignas(cmsghdr) char ctl[CMSG_SPACE(sizeof(int))] = {};
    msghdr mh{};
    FdMessage() {
        mh.msg_iov = &iov;
        mh.msg_iovlen = 1;
        mh.msg_control = ctl;
        mh.msg_controllen = sizeof ctl;
    }
    FdMessage(const FdMessage &) = delete;
};

// Ranks of one process (threads as ranks) share one mapping of their
// segment, so every byte of it has one address there: a rank reading
// another's buffer in place synchronises through the same atomics the
// writer published with (as ThreadSanitizer sees them too).
struct Mapping {
    uint8_t *base;
    size_t bytes;
    int users;
};
// Never destroyed: a group may end on one of distc's threads while the
// process exits and runs static destructors.
std::mutex &g_maps_mu = *new std::mutex;
std::map<std::pair<dev_t, ino_t>, Mapping> &g_maps = *new std::map<std::pair<dev_t, ino_t>, Mapping>;

uint8_t *map(int fd, size_t bytes) {
    struct stat st {};
    if (::fstat(fd, &st) != 0) fail_errno(DISTC_EIO, "fstat of the shared memory segment", errno);
    std::lock_guard<std::mutex> lk(g_maps_mu);
    auto it = g_maps.find({st.st_dev, st.st_ino});
    if (it != g_maps.end() && it->second.bytes == bytes) {
        ++it->second.users;
        return it->second.base;
    }
    void *p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) fail_errno(DISTC_EIO, "mmap of the shared memory segment", errno);
    g_maps[{st.st_dev, st.st_ino}] = Mapping{static_cast<uint8_t *>(p), bytes, 1};
    return static_cast<uint8_t *>(p);
}

void unmap(uint8_t *base) noexcept {
    std::lock_guard<std::mutex> lk(g_maps_mu);
    for (auto it = g_maps.begin(); it != g_maps.end(); ++it)
        if (it->second.base == base) {
            if (--it->second.users == 0) {
                ::munmap(base, it->second.bytes);
                g_maps.erase(it);
            }
            return;
        }
}

// The creator: a memfd of `bytes`, then one accepted connection per other member.
uint8_t *create(Store &store, const std::string &key, int rank, const std::vector<int> &members,
                const std::vector<pid_t> &pids, size_t bytes, Clock::time_point deadline, FnRef<void(uint8_t *)> init) {
    Fd mem(::memfd_create("distc-shm", MFD_CLOEXEC));
    if (!mem.valid()) fail_errno(DISTC_EIO, "memfd_create", errno);
    if (::ftruncate(mem.get(), static_cast<off_t>(bytes)) != 0)
        fail_errno(DISTC_EIO, "sizing the shared memory segment (ftruncate)", errno);
    uint8_t *base = map(mem.get(), bytes);
    try {
        init(base);
        Fd ls(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
        if (!ls.valid()) fail_errno(DISTC_EIO, "socket(AF_UNIX)", errno);
        std::random_device rd;
        std::string name = "distc-shm-" + std::to_string(::getpid()) + "-" + std::to_string(rank) + "-" +
                           std::to_string(rd()) + std::to_string(rd());
        socklen_t len;
        sockaddr_un a = abstract_address(name, len);
        if (::bind(ls.get(), reinterpret_cast<sockaddr *>(&a), len) != 0 ||
            ::listen(ls.get(), static_cast<int>(members.size())) != 0)
            fail_errno(DISTC_EIO, "binding the shared memory socket", errno);
        std::string ok = "@" + name;
        store.set(key + "seg", ByteView(ok.data(), ok.size()));
        std::vector<bool> seen(members.size());
        for (size_t got = 1; got < members.size();) {
            int ms = poll_left(deadline, 100);
            if (ms == 0)
                fail(DISTC_ETIMEOUT, "ranks sharing this host did not fetch the shared memory segment in time");
            pollfd pf{ls.get(), POLLIN, 0};
            if (::poll(&pf, 1, ms) <= 0) {
                if (store.check({key + "fail"}))
                    fail(DISTC_EREMOTE, "a rank sharing this host gave up on shared memory");
                continue;
            }
            Fd c(::accept4(ls.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK));
            if (!c.valid()) continue;
            // Only a member's process is heard at all (a stranger that
            // connected and said nothing would hold this loop up).
            ucred cred{};
            socklen_t clen = sizeof cred;
            if (::getsockopt(c.get(), SOL_SOCKET, SO_PEERCRED, &cred, &clen) != 0 ||
                std::find(pids.begin(), pids.end(), cred.pid) == pids.end())
                continue;
            int32_t who = -1;
            io_all(c.get(), &who, sizeof who, false, deadline);
            auto it = std::find(members.begin(), members.end(), who);
            if (it == members.end() || it == members.begin() || seen[size_t(it - members.begin())] ||
                cred.pid != pids[size_t(it - members.begin())])
                continue;  // not that rank's process
            seen[size_t(it - members.begin())] = true;
            FdMessage m;
            m.size = bytes;
            cmsghdr *cm = CMSG_FIRSTHDR(&m.mh);
            cm->cmsg_level = SOL_SOCKET;
            cm->cmsg_type = SCM_RIGHTS;
            cm->cmsg_len = CMSG_LEN(sizeof(int));
            int mfd = mem.get();
            std::memcpy(CMSG_DATA(cm), &mfd, sizeof mfd);
            if (::sendmsg(c.get(), &m.mh, MSG_NOSIGNAL) != static_cast<ssize_t>(sizeof m.size))
                fail_errno(DISTC_EIO, "passing the shared memory segment", errno);
            ++got;
        }
    } catch (...) {
        unmap(base);
        throw;
    }
    return base;
}

// Any other member: the creator's memfd, received over its socket.
uint8_t *fetch(Store &store, const std::string &key, int rank, size_t bytes, Millis timeout,
               Clock::time_point deadline) {
    Bytes where = store.get(key + "seg", timeout);
    std::string w(where.begin(), where.end());
    if (w.empty() || w[0] != '@') fail(DISTC_EREMOTE, "the shared memory segment was not made: " + w.substr(1));
    Fd c(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
    if (!c.valid()) fail_errno(DISTC_EIO, "socket(AF_UNIX)", errno);
    socklen_t len;
    sockaddr_un a = abstract_address(w.substr(1), len);
    if (::connect(c.get(), reinterpret_cast<sockaddr *>(&a), len) != 0 && errno != EINPROGRESS && errno != EAGAIN)
        fail_errno(DISTC_EIO, "connecting to the shared memory socket", errno);
    int32_t me = rank;
    io_all(c.get(), &me, sizeof me, true, deadline);
    FdMessage m;
    for (;;) {
        ssize_t r = ::recvmsg(c.get(), &m.mh, MSG_CMSG_CLOEXEC);
        if (r == static_cast<ssize_t>(sizeof m.size)) break;
        if (r < 0 && (errno == EAGAIN || errno == EINTR)) {
            int ms = poll_left(deadline, 1000);
            if (ms == 0) fail(DISTC_ETIMEOUT, "the shared memory segment did not come in time");
            pollfd pf{c.get(), POLLIN, 0};
            ::poll(&pf, 1, ms);
            continue;
        }
        fail(DISTC_EPROTO, "the shared memory segment did not come over its socket");
    }
    cmsghdr *cm = CMSG_FIRSTHDR(&m.mh);
    Fd mem;
    if (cm && cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS && cm->cmsg_len == CMSG_LEN(sizeof(int))) {
        int mfd;
        std::memcpy(&mfd, CMSG_DATA(cm), sizeof mfd);
        mem = Fd(mfd);  // closed on every path from here
    }
    if (!mem.valid() || m.size != bytes)
        fail(DISTC_EPROTO, "the shared memory socket passed no segment of the expected size");
    return map(mem.get(), bytes);
}

}  // namespace

Segment::Segment(Store &store, const std::string &key, int rank, const std::vector<int> &members,
                 const std::vector<pid_t> &pids, size_t bytes, Millis timeout, FnRef<void(uint8_t *)> init) {
    auto deadline = Clock::now() + timeout;
    try {
        base_ = members[0] == rank ? create(store, key, rank, members, pids, bytes, deadline, init)
                                   : fetch(store, key, rank, bytes, timeout, deadline);
    } catch (const Error &e) {
        // Tell the others at once instead of leaving them to time out.
        std::string why = "!" + std::string(e.what());
        store.set(members[0] == rank ? key + "seg" : key + "fail", ByteView(why.data(), why.size()));
        throw;
    }
}

Segment::~Segment() {
    if (base_) unmap(base_);
}

}  // namespace distc

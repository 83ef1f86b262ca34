#include "backends/host/transport/shm/peer_memory.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "core/util/shared_memory.hpp"

namespace distc {

namespace {

const SharedRegionHeader *header(const uint8_t *map) { return reinterpret_cast<const SharedRegionHeader *>(map); }

}  // namespace

PeerMemory::PeerMemory(std::vector<pid_t> pids) :
    pids_(std::move(pids)), maps_(pids_.size()), current_(pids_.size(), nullptr) {}

PeerMemory::~PeerMemory() {
    for (auto &ms : maps_)
        for (Mapping &m : ms) unmap(m);
}

void PeerMemory::unmap(Mapping &m) {
    if (m.map) ::munmap(m.map, m.mapped);
    m.map = nullptr;
}

bool PeerMemory::live(const Mapping &m) const {
    return m.map && header(m.map)->live.load(std::memory_order_acquire) == 1;
}

PeerMemory::Mapping PeerMemory::map(int peer, const PeerBuffer &b) {
    Mapping m{b.region, b.region_base, 0, nullptr, 0, attaches_};
    if (b.region_fd < 0 || b.region_fd > INT32_MAX) return m;
    char path[64];
    std::snprintf(path, sizeof path, "/proc/%d/fd/%lld", static_cast<int>(pids_[size_t(peer)]),
                  static_cast<long long>(b.region_fd));
    // Not blocking, and no terminal taken: a peer may name any descriptor.
    const int fd = ::open(path, O_RDWR | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (fd < 0) return m;
    struct stat st {};
    void *p = MAP_FAILED;
    if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && static_cast<uint64_t>(st.st_size) > kSharedRegionHeader)
        p = ::mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    ::close(fd);
    if (p == MAP_FAILED) return m;
    m.map = static_cast<uint8_t *>(p);
    m.mapped = static_cast<size_t>(st.st_size);
    // The file behind that descriptor now may be another (the region was
    // freed and the number reused), or not a region at all.
    const SharedRegionHeader *h = header(m.map);
    if (std::memcmp(h->magic, kSharedRegionMagic, sizeof h->magic) != 0 || h->id != b.region ||
        h->bytes > m.mapped - kSharedRegionHeader || !live(m)) {
        unmap(m);
        return m;
    }
    m.bytes = h->bytes;
    return m;
}

void PeerMemory::attach(int peer, const PeerBuffer &b) {
    ++attaches_;
    auto &ms = maps_[size_t(peer)];
    current_[size_t(peer)] = nullptr;
    // Regions the peer freed since it last named them go now.
    ms.erase(std::remove_if(ms.begin(), ms.end(),
                            [&](Mapping &m) {
                                if (!m.map || live(m)) return false;
                                unmap(m);
                                return true;
                            }),
             ms.end());
    if (b.region == 0) return;
    auto it = std::find_if(ms.begin(), ms.end(), [&](const Mapping &m) { return m.id == b.region; });
    if (it == ms.end()) {
        if (ms.size() >= kKeep) {
            auto old = std::min_element(ms.begin(), ms.end(),
                                        [](const Mapping &x, const Mapping &y) { return x.used < y.used; });
            unmap(*old);
            ms.erase(old);
        }
        ms.push_back(map(peer, b));
        it = ms.end() - 1;
    }
    it->used = attaches_;
    if (it->map && it->base == b.region_base) current_[size_t(peer)] = &*it;
}

uint8_t *PeerMemory::view(int peer, uint64_t addr, size_t n) const {
    const Mapping *m = current_[size_t(peer)];
    if (!m || addr < m->base || addr - m->base > m->bytes || n > m->bytes - (addr - m->base) || !live(*m))
        return nullptr;
    return m->map + kSharedRegionHeader + (addr - m->base);
}

size_t PeerMemory::mapped() const {
    size_t k = 0;
    for (const auto &ms : maps_)
        for (const Mapping &m : ms) k += m.map != nullptr;
    return k;
}

}  // namespace distc

#include "core/util/shared_memory.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <mutex>
#include <new>

#include "core/util/error.hpp"
#include "core/util/socket.hpp"

namespace distc {

namespace {

struct Allocation {
    uint64_t id;
    size_t bytes, mapped;
    int fd;
    void *map;
};

// Every live allocation of this process, by the caller's first byte.
struct Registry {
    std::mutex mu;
    std::map<uintptr_t, Allocation> live;
    uint64_t next_id = 1;
};

Registry &registry() {
    static Registry *r = new Registry;  // never destroyed: frees may come from static destructors
    return *r;
}

constexpr size_t kPage = 4096;
// Past this, a size is a caller's mistake (a negative number cast), not memory.
constexpr size_t kMaxBytes = size_t(1) << 44;

}  // namespace

void *shared_alloc(size_t bytes) {
    if (bytes == 0) fail(DISTC_EINVAL, "bytes is 0: nothing to allocate");
    if (bytes > kMaxBytes)
        fail(DISTC_EINVAL, "bytes is " + std::to_string(bytes) + ", more than the " + std::to_string(kMaxBytes) +
                               " one allocation may have");
    const size_t mapped = kSharedRegionHeader + (bytes + kPage - 1) / kPage * kPage;
    Fd fd(::memfd_create("distc-mem", MFD_CLOEXEC));
    if (!fd.valid()) fail_errno(errno == EMFILE || errno == ENFILE ? DISTC_ENOMEM : DISTC_EIO, "memfd_create", errno);
    if (::ftruncate(fd.get(), static_cast<off_t>(mapped)) != 0)
        fail_errno(DISTC_ENOMEM, "sizing shared memory of " + std::to_string(bytes) + " bytes (ftruncate)", errno);
    void *map = ::mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_SHARED, fd.get(), 0);
    if (map == MAP_FAILED)
        fail_errno(DISTC_ENOMEM, "mapping shared memory of " + std::to_string(bytes) + " bytes (mmap)", errno);
    Registry &r = registry();
    std::lock_guard<std::mutex> lock(r.mu);
    const uint64_t id = r.next_id++;
    auto *h = new (map) SharedRegionHeader{};
    std::memcpy(h->magic, kSharedRegionMagic, sizeof h->magic);
    h->id = id;
    h->bytes = bytes;
    h->live.store(1, std::memory_order_release);
    uint8_t *user = static_cast<uint8_t *>(map) + kSharedRegionHeader;
    r.live[reinterpret_cast<uintptr_t>(user)] = Allocation{id, bytes, mapped, fd.release(), map};
    return user;
}

void shared_free(void *p) {
    if (!p) return;
    Registry &r = registry();
    Allocation a;
    {
        std::lock_guard<std::mutex> lock(r.mu);
        auto it = r.live.find(reinterpret_cast<uintptr_t>(p));
        if (it == r.live.end()) fail(DISTC_EINVAL, "ptr was not returned by distc_mem_alloc, or was freed already");
        a = it->second;
        r.live.erase(it);
    }
    // Peers that mapped it see this and unmap theirs; the memory goes once the last mapping does.
    static_cast<SharedRegionHeader *>(a.map)->live.store(0, std::memory_order_release);
    ::munmap(a.map, a.mapped);
    ::close(a.fd);
}

SharedRegion shared_region_of(const void *p, size_t n) {
    Registry &r = registry();
    const auto at = reinterpret_cast<uintptr_t>(p);
    std::lock_guard<std::mutex> lock(r.mu);
    auto it = r.live.upper_bound(at);
    if (it == r.live.begin()) return {};
    --it;
    const Allocation &a = it->second;
    if (at - it->first > a.bytes || n > a.bytes - (at - it->first)) return {};
    return SharedRegion{a.id, it->first, a.bytes, a.fd};
}

}  // namespace distc

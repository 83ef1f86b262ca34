#include "core/util/huge_pages.hpp"

#include <fcntl.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <mutex>

namespace distc {

namespace {

// linux/fs.h since 6.7; the build's headers may be older. The ABI is fixed.
struct PageRegion {
    uint64_t start, end, categories;
};
struct PmScanArg {
    uint64_t size, flags, start, end, walk_end, vec, vec_len, max_pages, category_inverted, category_mask,
        category_anyof_mask, return_mask;
};
constexpr unsigned long kPagemapScan = _IOWR('f', 16, PmScanArg);
constexpr uint64_t kPageIsHuge = 1 << 6;
constexpr uint64_t kPage = 4096;

// /proc/self/pagemap names the process that opened it: a child forked since
// opens its own.
struct Pagemap {
    std::mutex mu;
    int fd = -1;
    pid_t pid = 0;
    bool unsupported = false;
};
Pagemap g_pagemap;

}  // namespace

bool mostly_on_huge_pages(const void *p, size_t n) {
    if (!p || n == 0) return false;
    std::lock_guard<std::mutex> lk(g_pagemap.mu);
    if (g_pagemap.unsupported) return false;
    const pid_t me = ::getpid();
    if (g_pagemap.fd < 0 || g_pagemap.pid != me) {
        if (g_pagemap.fd >= 0) ::close(g_pagemap.fd);
        g_pagemap.fd = ::open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
        g_pagemap.pid = me;
        if (g_pagemap.fd < 0) return false;  // out of descriptors, say: try again next time
    }
    const uint64_t first = reinterpret_cast<uintptr_t>(p), start = first / kPage * kPage;
    const uint64_t end = (first + n + kPage - 1) / kPage * kPage;
    uint64_t huge = 0;
    PageRegion found[16];
    for (uint64_t at = start; at < end;) {
        PmScanArg a{};
        a.size = sizeof a;
        a.start = at;
        a.end = end;
        a.vec = reinterpret_cast<uintptr_t>(found);
        a.vec_len = sizeof found / sizeof found[0];
        a.category_mask = kPageIsHuge;  // only huge pages, reported as runs
        a.return_mask = kPageIsHuge;
        const int k = ::ioctl(g_pagemap.fd, kPagemapScan, &a);
        if (k < 0) {
            if (errno == ENOTTY) g_pagemap.unsupported = true;  // a kernel older than the query
            return false;
        }
        for (int i = 0; i < k; ++i) huge += found[i].end - found[i].start;
        if (a.walk_end <= at) break;
        at = a.walk_end;
    }
    return huge >= (end - start) / 4 * 3;
}

}  // namespace distc

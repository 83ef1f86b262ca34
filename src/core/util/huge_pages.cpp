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

// A range asked about again gets the last answer, up to kReuse times: a
// collective's buffers come back call after call, and the query costs
// microseconds. An answer that went stale only costs speed (either path
// gives the same results).
constexpr unsigned kReuse = 64;
struct Answer {
    uint64_t start = 0, end = 0, last_use = 0;
    unsigned left = 0;
    bool huge = false;
};

// /proc/self/pagemap names the process that opened it: a child forked since
// opens its own, and forgets the parent's answers.
struct Pagemap {
    std::mutex mu;
    int fd = -1;
    pid_t pid = 0;
    bool unsupported = false;
    Answer answers[8];
    uint64_t uses = 0;
};
Pagemap g_pagemap;

bool ask_kernel(int fd, uint64_t start, uint64_t end);

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
        for (Answer &a : g_pagemap.answers) a = Answer{};
        if (g_pagemap.fd < 0) return false;  // out of descriptors, say: try again next time
    }
    const uint64_t first = reinterpret_cast<uintptr_t>(p), start = first / kPage * kPage;
    const uint64_t end = (first + n + kPage - 1) / kPage * kPage;
    Answer *slot = &g_pagemap.answers[0];  // the same range's, else the least recently used
    for (Answer &a : g_pagemap.answers) {
        if (a.start == start && a.end == end) {
            slot = &a;
            break;
        }
        if (a.last_use < slot->last_use) slot = &a;
    }
    slot->last_use = ++g_pagemap.uses;
    if (slot->start == start && slot->end == end && slot->left > 0) {
        --slot->left;
        return slot->huge;
    }
    *slot = Answer{start, end, g_pagemap.uses, kReuse, ask_kernel(g_pagemap.fd, start, end)};
    return slot->huge;
}

namespace {

bool ask_kernel(int fd, uint64_t start, uint64_t end) {
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
        const int k = ::ioctl(fd, kPagemapScan, &a);
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

}  // namespace

}  // namespace distc

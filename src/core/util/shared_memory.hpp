// Memory that the ranks of a host can read and write where it lies
// (distc_mem_alloc): each allocation is a memfd of its own that this process
// maps, and that a peer process of the same host may map as well (it opens
// /proc/<pid>/fd/<fd>, which needs the same permission as reading the
// process's memory). A collective whose buffers lie in such memory then
// copies and reduces straight between the ranks' buffers with loads and
// stores, instead of asking the kernel to copy (which pins every page).
//
// A region is a header page, then the caller's bytes. The header says what
// the region is (so that a peer that opened the wrong file, or a file
// descriptor reused since, can tell) and whether it is still allocated (a
// peer unmaps its own mapping of a freed region when it next sees it).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace distc {

struct SharedRegionHeader {
    char magic[8];               // kSharedRegionMagic
    uint64_t id;                 // unique in its process, never reused
    uint64_t bytes;              // the caller's bytes (after the header page)
    std::atomic<uint32_t> live;  // 1 while allocated; 0 once freed
};

inline constexpr char kSharedRegionMagic[8] = {'d', 'i', 's', 't', 'c', '-', 'm', '1'};
inline constexpr size_t kSharedRegionHeader = 4096;

// Where an allocation lies, as a peer needs to map it.
struct SharedRegion {
    uint64_t id = 0;    // 0: not in shared memory
    uint64_t base = 0;  // the caller's first byte, in this process
    uint64_t bytes = 0;
    int fd = -1;
};

// Allocates `bytes` (at least 1) of zeroed shared memory, page-aligned.
// Throws DISTC_EINVAL (0 or too large), DISTC_ENOMEM or DISTC_EIO.
void *shared_alloc(size_t bytes);
// Frees what shared_alloc returned; nullptr is a no-op. Throws DISTC_EINVAL
// for any other pointer (the start of a freed one included).
void shared_free(void *p);
// The allocation that holds all of [p, p + n), if any (id 0 otherwise).
SharedRegion shared_region_of(const void *p, size_t n);

}  // namespace distc

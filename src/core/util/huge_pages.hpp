// Whether memory lies on huge pages (transparent or hugetlb), as the kernel
// reports it for this process's own pages. The kernel's copy between
// processes pins every page it touches, and pins a huge page's bytes several
// times faster than 4 KiB pages' (a host with transparent huge pages
// "always" gives most large buffers them).
#pragma once

#include <cstddef>

namespace distc {

// True where at least 3/4 of the `n` bytes at `p` are on huge pages (and
// present). False where they are not, where nothing is mapped there, and on
// kernels without the query (PAGEMAP_SCAN, Linux 6.7): those answer "no".
// A range asked about again may get an answer up to 64 asks old: for
// choosing a path only, where a stale answer costs speed, not results.
bool mostly_on_huge_pages(const void *p, size_t n);

}  // namespace distc

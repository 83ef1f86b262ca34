// A copy that bypasses the caches for large sizes (non-temporal stores):
// the destination is not read into the cache first (a plain copy's stores
// fetch each line they write), and the lines it writes do not push the
// caches' contents out.
#pragma once

#include <cstddef>

namespace distc {

// From this size on, copy_streaming streams (x86-64; memcpy elsewhere):
// beyond any core's L2, where glibc's memcpy streams by itself on most
// servers (from three quarters of the last-level cache's share per thread).
// Virtual machines often report their host's whole cache instead, which
// puts glibc's bound beyond any copy; measured on one (2 ranks, own parts
// of all-to-all and allgather, bench/results/copy_streaming_ab.txt), 32-64
// MiB calls took less time and 1-16 MiB the same, while below 1 MiB (still
// in cache) streaming took longer.
constexpr size_t kStreamBytes = size_t(4) << 20;

// memcpy(dst, src, n), through non-temporal stores from kStreamBytes on.
// dst and src must not overlap.
void copy_streaming(void *dst, const void *src, size_t n);

// Whether copy_nontemporal streams here (memcpy where not).
#if defined(__x86_64__)
constexpr bool kNonTemporalStores = true;
#else
constexpr bool kNonTemporalStores = false;
#endif

// memcpy(dst, src, n) through non-temporal stores whatever the size (but
// for the destination's partial lines at either end), and a store fence
// after them: what the caller stores next is seen after these bytes.
void copy_nontemporal(void *dst, const void *src, size_t n);

}  // namespace distc

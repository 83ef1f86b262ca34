// Random bytes from the kernel (getrandom), for nonces and tokens.
#pragma once

#include <sys/random.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>

#include "core/util/error.hpp"

namespace distc {

inline void random_bytes(void *out, size_t n) {
    auto *p = static_cast<uint8_t *>(out);
    while (n) {
        ssize_t r = ::getrandom(p, n, 0);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) fail_errno(DISTC_EIO, "getrandom failed", errno);
        p += r;
        n -= static_cast<size_t>(r);
    }
}

}  // namespace distc

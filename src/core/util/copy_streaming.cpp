#include "core/util/copy_streaming.hpp"

#include <cstdint>
#include <cstring>

#if defined(__x86_64__)
#include <emmintrin.h>
#endif

namespace distc {

void copy_nontemporal(void *dst, const void *src, size_t n) {
#if defined(__x86_64__)
    auto *d = static_cast<uint8_t *>(dst);
    auto *s = static_cast<const uint8_t *>(src);
    // Up to the destination's next line with a plain copy, then whole
    // lines streamed (SSE2: every x86-64 has it), then the rest.
    const size_t head = (64 - (reinterpret_cast<uintptr_t>(d) & 63)) & 63;
    if (n < head + 64) {  // not one whole line
        std::memcpy(d, s, n);
        return;
    }
    std::memcpy(d, s, head);
    d += head;
    s += head;
    n -= head;
    const size_t body = n & ~size_t(63);
    for (size_t i = 0; i < body; i += 64) {
        const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i *>(s + i));
        const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i *>(s + i + 16));
        const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i *>(s + i + 32));
        const __m128i e = _mm_loadu_si128(reinterpret_cast<const __m128i *>(s + i + 48));
        _mm_stream_si128(reinterpret_cast<__m128i *>(d + i), a);
        _mm_stream_si128(reinterpret_cast<__m128i *>(d + i + 16), b);
        _mm_stream_si128(reinterpret_cast<__m128i *>(d + i + 32), c);
        _mm_stream_si128(reinterpret_cast<__m128i *>(d + i + 48), e);
    }
    _mm_sfence();  // the streamed lines are visible before what follows (a "done" message, a ring's stamp)
    std::memcpy(d + body, s + body, n - body);
#else
    std::memcpy(dst, src, n);
#endif
}

void copy_streaming(void *dst, const void *src, size_t n) {
    if (n >= kStreamBytes)
        copy_nontemporal(dst, src, n);
    else
        std::memcpy(dst, src, n);
}

}  // namespace distc

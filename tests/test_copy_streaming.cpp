// copy_streaming and copy_nontemporal (src/core/util/copy_streaming.hpp):
// the same bytes as memcpy at every size around their bounds (streaming's
// size, a whole line past the destination's first) and every alignment of
// source and destination, and not one byte outside the destination.
#include <algorithm>
#include <cstdint>
#include <iterator>
#include <cstring>
#include <vector>

#include "core/util/copy_streaming.hpp"

#include <cstdarg>
#include <cstddef>
#include <csetjmp>
extern "C" {  // cmocka 1.1 has no C++ guards of its own
#include <cmocka.h>
}

using distc::copy_nontemporal;
using distc::copy_streaming;
using distc::kStreamBytes;

namespace {

using Copy = void (*)(void *, const void *, size_t);

void same_bytes(Copy copy, const std::vector<size_t> &sizes) {
    size_t most = 0;
    for (size_t n : sizes) most = std::max(most, n);
    const size_t guard = 128;
    std::vector<uint8_t> src(most + 64), dst(most + 64 + 2 * guard);
    for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint8_t>(i * 131 + (i >> 12));
    for (size_t n : sizes)
        for (size_t so : {0, 5, 32})
            for (size_t dof : {0, 1, 17, 48, 63}) {
                std::memset(dst.data(), 0xA5, dst.size());
                uint8_t *d = dst.data() + guard + dof;
                copy(d, src.data() + so, n);
                if (n) assert_memory_equal(d, src.data() + so, n);
                for (uint8_t *p = dst.data(); p < d; ++p) assert_int_equal(*p, 0xA5);
                for (uint8_t *p = d + n; p < d + n + guard; ++p) assert_int_equal(*p, 0xA5);
            }
}

void test_streaming_same_bytes_as_memcpy(void **) {
    const size_t sizes[] = {0,
                            1,
                            63,
                            64,
                            4096,
                            kStreamBytes - 1,
                            kStreamBytes,
                            kStreamBytes + 1,
                            kStreamBytes + 64,
                            kStreamBytes + 127,
                            3 * kStreamBytes + 4095};
    same_bytes(copy_streaming, std::vector<size_t>(std::begin(sizes), std::end(sizes)));
}

// Every size: the rings stream runs of a few KiB (shm_links.cpp).
void test_nontemporal_same_bytes_as_memcpy(void **) {
    std::vector<size_t> sizes;
    for (size_t n = 0; n <= 200; ++n) sizes.push_back(n);  // below, at and past a line and two
    for (size_t n : {size_t(4095), size_t(4096), size_t(16384 + 33), size_t(1) << 20}) sizes.push_back(n);
    same_bytes(copy_nontemporal, sizes);
}

}  // namespace

int main() {
    const CMUnitTest tests[] = {
        cmocka_unit_test(test_streaming_same_bytes_as_memcpy),
        cmocka_unit_test(test_nontemporal_same_bytes_as_memcpy),
    };
    return cmocka_run_group_tests(tests, nullptr, nullptr);
}

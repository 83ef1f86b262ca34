// copy_streaming (src/backends/host/copy_streaming.hpp): the same bytes as
// memcpy at every size around its streaming bound and every alignment of
// source and destination, and not one byte outside the destination.
#include <cstdint>
#include <cstring>
#include <vector>

#include "backends/host/copy_streaming.hpp"

#include <cstdarg>
#include <cstddef>
#include <csetjmp>
extern "C" {  // cmocka 1.1 has no C++ guards of its own
#include <cmocka.h>
}

using distc::copy_streaming;
using distc::kStreamBytes;

namespace {

void test_same_bytes_as_memcpy(void **) {
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
    const size_t most = 3 * kStreamBytes + 4095, guard = 128;
    std::vector<uint8_t> src(most + 64), dst(most + 64 + 2 * guard);
    for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint8_t>(i * 131 + (i >> 12));
    for (size_t n : sizes)
        for (size_t so : {0, 5, 32})
            for (size_t dof : {0, 1, 17, 48, 63}) {
                std::memset(dst.data(), 0xA5, dst.size());
                uint8_t *d = dst.data() + guard + dof;
                copy_streaming(d, src.data() + so, n);
                if (n) assert_memory_equal(d, src.data() + so, n);
                for (uint8_t *p = dst.data(); p < d; ++p) assert_int_equal(*p, 0xA5);
                for (uint8_t *p = d + n; p < d + n + guard; ++p) assert_int_equal(*p, 0xA5);
            }
}

}  // namespace

int main() {
    const CMUnitTest tests[] = {
        cmocka_unit_test(test_same_bytes_as_memcpy),
    };
    return cmocka_run_group_tests(tests, nullptr, nullptr);
}

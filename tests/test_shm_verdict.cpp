// How a host decides whether its kernel copies between processes fast
// enough for the in-place collectives: each rank measures the kernel's copy
// against memcpy (ShmTransport::kernel_copy_ratio), and the host takes the
// lower median of its ranks' ratios (ShmTransport::copies_fast). Ranks that
// measure side by side as they start can read a fast kernel as slow, so
// one rank of two reading slow must not send the host to the rings.
#include <cmath>
#include <cstdlib>

// Before cmocka, whose fail() macro would rewrite the library's fail().
#include "backends/host/transport/shm/shm_transport.hpp"

#include <cstdarg>
#include <cstddef>
#include <csetjmp>
#include <cstdint>
extern "C" {  // cmocka 1.1 has no C++ guards of its own
#include <cmocka.h>
}

using distc::ShmTransport;

namespace {

void test_lower_median_decides(void **) {
    const double slow = ShmTransport::kSlowRatio;
    assert_false(ShmTransport::copies_fast({}));  // nobody measured: the rings
    assert_true(ShmTransport::copies_fast({1.4}));
    assert_false(ShmTransport::copies_fast({slow}));  // the bound itself is slow
    assert_true(ShmTransport::copies_fast({1.9, 1.4}));
    assert_true(ShmTransport::copies_fast({slow + 0.1, 1.4}));            // one of two read slow: a tie is fast
    assert_false(ShmTransport::copies_fast({slow + 0.1, 3.2, 1.4}));      // most read slow
    assert_true(ShmTransport::copies_fast({3.2, 1.3, slow + 0.5, 1.2}));  // half of four
    assert_false(ShmTransport::copies_fast({3.2, 1.3, slow + 0.5, 2.9}));
}

void test_ratio_measured_or_told(void **) {
    unsetenv("DISTC_SHM_KERNEL_COPY");
    double r = ShmTransport::kernel_copy_ratio();
    assert_true(std::isfinite(r) && r > 0);
    assert_true(ShmTransport::kernel_copy_ratio() == r);  // measured once per process
    setenv("DISTC_SHM_KERNEL_COPY", "slow", 1);
    assert_false(ShmTransport::copies_fast({ShmTransport::kernel_copy_ratio()}));
    setenv("DISTC_SHM_KERNEL_COPY", "fast", 1);
    assert_true(ShmTransport::copies_fast({ShmTransport::kernel_copy_ratio()}));
    unsetenv("DISTC_SHM_KERNEL_COPY");
}

}  // namespace

int main() {
    const CMUnitTest tests[] = {
        cmocka_unit_test(test_lower_median_decides),
        cmocka_unit_test(test_ratio_measured_or_told),
    };
    return cmocka_run_group_tests(tests, nullptr, nullptr);
}

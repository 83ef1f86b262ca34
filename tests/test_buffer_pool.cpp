// The buffer pool behind large Scratch buffers (core/util/buffer_pool.hpp):
// a released large buffer serves the next request that fits (the smallest
// that does), small ones and ones past the bound are not kept, and the
// pool never holds more than kPoolKeepBytes.
#include <cstdint>
#include <vector>

// Before cmocka, whose fail() macro would rewrite the library's fail().
#include "core/pg/tensor.hpp"
#include "core/util/buffer_pool.hpp"

#include <cstdarg>
#include <cstddef>
#include <csetjmp>
extern "C" {  // cmocka 1.1 has no C++ guards of its own
#include <cmocka.h>
}

using distc::kPoolKeepBytes;
using distc::kPoolMinBytes;
using distc::pool_give;
using distc::pool_take;
using distc::PooledBytes;

namespace {

constexpr size_t kMiB = size_t(1) << 20;

// Empties the pool (it is process-wide): takes everything it might hold.
void drain() {
    std::vector<PooledBytes> held;
    for (int i = 0; i < 64; ++i) held.push_back(pool_take(kPoolMinBytes));
}

void test_reuses_the_smallest_that_fits(void **) {
    drain();
    PooledBytes a = pool_take(4 * kMiB), b = pool_take(2 * kMiB);
    assert_true(a.cap >= 4 * kMiB && b.cap >= 2 * kMiB);
    uint8_t *pa = a.p.get(), *pb = b.p.get();
    pool_give(std::move(a));
    pool_give(std::move(b));
    PooledBytes c = pool_take(kMiB + 1);  // both fit: the 2 MiB one
    assert_ptr_equal(c.p.get(), pb);
    PooledBytes d = pool_take(3 * kMiB);
    assert_ptr_equal(d.p.get(), pa);
    PooledBytes e = pool_take(3 * kMiB);  // nothing kept fits: new memory
    assert_true(e.p.get() != pa && e.p.get() != pb && e.cap >= 3 * kMiB);
}

void test_small_and_huge_are_not_kept(void **) {
    drain();
    // Neither comes back: the next large request gets new memory, exactly
    // as large as it asks (a kept buffer would be larger or the same one).
    pool_give(pool_take(kPoolMinBytes - 1));
    pool_give(pool_take(kPoolKeepBytes + 1));  // never touched: address space only
    PooledBytes next = pool_take(kPoolMinBytes);
    assert_int_equal(next.cap, kPoolMinBytes);
    pool_give(std::move(next));
    assert_int_equal(pool_take(kPoolMinBytes).cap, kPoolMinBytes);  // kept, and given back whole
}

void test_keeps_at_most_the_bound(void **) {
    drain();
    // Six buffers of a fifth of the bound each (never touched: address
    // space only): the pool keeps the five that fit in it.
    // Kept ones are told apart by their size: requests a page smaller get
    // them back, new ones are exactly as large as asked.
    const size_t each = kPoolKeepBytes / 5, ask = each - 4096;
    std::vector<PooledBytes> bufs;
    for (int i = 0; i < 6; ++i) bufs.push_back(pool_take(each));
    for (auto &b : bufs) pool_give(std::move(b));
    std::vector<PooledBytes> back;
    int kept = 0;
    for (int i = 0; i < 6; ++i) {
        back.push_back(pool_take(ask));
        kept += back.back().cap == each;
    }
    assert_int_equal(kept, 5);
}

void test_scratch_goes_through_it(void **) {
    drain();
    uint8_t *first;
    {
        distc::Scratch s(distc::DType::Float32, 8 * kMiB / 4);
        first = s.t.bytes();
        s.t.bytes()[0] = 1;
    }
    distc::Scratch again(distc::DType::Float32, 4 * kMiB / 4);
    assert_ptr_equal(again.t.bytes(), first);  // the same memory: no fresh pages to fault in
}

}  // namespace

int main() {
    const CMUnitTest tests[] = {
        cmocka_unit_test(test_reuses_the_smallest_that_fits),
        cmocka_unit_test(test_small_and_huge_are_not_kept),
        cmocka_unit_test(test_keeps_at_most_the_bound),
        cmocka_unit_test(test_scratch_goes_through_it),
    };
    return cmocka_run_group_tests(tests, nullptr, nullptr);
}

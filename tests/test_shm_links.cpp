// The shared-memory rings' pieces that a group's collectives cannot pin
// down: bytes written with non-temporal stores (ShmLinks::set_streaming)
// read back the same across every wrap of a small ring and every alignment,
// a write told not to offer in place puts a large piece inline,
// and the cache-line trip (ShmLinks::line_trip) that decides it is
// measured between two ranks, returns 0 without its other rank, and lets
// that rank go at once when the first says it skips.
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

// Before cmocka, whose fail() macro would rewrite the library's fail().
#include "backends/host/transport/shm/shm_links.hpp"

#include <cstdarg>
#include <cstddef>
#include <csetjmp>
extern "C" {  // cmocka 1.1 has no C++ guards of its own
#include <cmocka.h>
}

using distc::Clock;
using distc::ShmLinks;

namespace {

constexpr size_t kRing = 4096;

// A segment of two local ranks, both in this process.
struct Pair {
    std::unique_ptr<uint8_t, decltype(&std::free)> base{nullptr, &std::free};
    std::unique_ptr<ShmLinks> a, b;
    Pair() {
        const size_t bytes = ShmLinks::segment_bytes(2, kRing);
        base.reset(static_cast<uint8_t *>(std::aligned_alloc(4096, (bytes + 4095) / 4096 * 4096)));
        std::memset(base.get(), 0, bytes);
        ShmLinks::init(base.get(), 2, kRing);
        const std::vector<pid_t> pids{::getpid(), ::getpid()};
        a = std::make_unique<ShmLinks>(base.get(), 0, kRing, std::vector<int>{0, 1}, pids);
        b = std::make_unique<ShmLinks>(base.get(), 1, kRing, std::vector<int>{0, 1}, pids);
    }
};

void test_streamed_bytes_read_back(void **) {
    for (size_t stream : {size_t(0), size_t(1), size_t(64), size_t(1000)}) {
        Pair p;
        p.a->set_streaming(stream);
        // Messages of every length around a line and the ring, from odd
        // offsets, so that runs start and end mid-line and wrap.
        std::vector<uint8_t> src(3 * kRing + 200), dst(src.size());
        for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint8_t>(i * 7 + 3 + stream);
        for (size_t len : {size_t(1), size_t(47), size_t(64), size_t(65), size_t(1000), size_t(4000), 2 * kRing + 77})
            for (size_t off : {size_t(0), size_t(3), size_t(61)}) {
                std::memset(dst.data(), 0, dst.size());
                size_t wrote = 0, got = 0;
                for (int spins = 0; got < len; ++spins) {
                    assert_true(spins < 100000);
                    if (wrote < len) {
                        iovec v{src.data() + off + wrote, len - wrote};
                        wrote += p.a->write(1, &v, 1);
                    }
                    iovec v{dst.data() + got, len - got};
                    got += p.b->read(0, &v, 1);
                }
                assert_memory_equal(dst.data(), src.data() + off, len);
                assert_int_equal(dst[len], 0);
            }
    }
}

// A piece past the single-copy size is offered in place (only its chunk's
// header enters the ring), unless the writer says it may not be: then its
// bytes go inline (point-to-point's exchanges, ShmP2p::set_inline_exchanges).
void test_inline_when_no_offer(void **) {
    std::vector<uint8_t> src(1000, 7), dst(1000, 0);
    iovec v{src.data(), src.size()};
    {
        Pair p;
        p.a->set_single_copy(64);
        assert_int_equal(p.a->write(1, &v, 1), 0);  // offered: done once read
        assert_true(p.b->unread(0) < 64);
        iovec d{dst.data(), dst.size()};
        assert_int_equal(p.b->read(0, &d, 1), src.size());  // read in place (memcpy in one process)
        assert_memory_equal(dst.data(), src.data(), src.size());
    }
    {
        Pair p;
        p.a->set_single_copy(64);
        assert_int_equal(p.a->write(1, &v, 1, false), src.size());
        assert_true(p.b->unread(0) >= src.size());
    }
}

void test_trip_measured_between_two(void **) {
    Pair p;
    const auto deadline = Clock::now() + std::chrono::seconds(10);
    double answered = -1;
    std::thread other([&] { answered = p.b->line_trip(0, false, false, deadline); });
    const double trip = p.a->line_trip(1, true, false, deadline);
    other.join();
    assert_true(trip > 0 && trip < 1e9);  // one core: each trip waits for a time slice, still finite
    assert_true(answered == 0);
}

void test_trip_without_its_peer(void **) {
    Pair p;
    const auto t0 = Clock::now();
    assert_true(p.a->line_trip(1, true, false, t0 + std::chrono::milliseconds(50)) == 0);
    assert_true(Clock::now() - t0 >= std::chrono::milliseconds(50));
    // The answerer alone as well.
    Pair q;
    assert_true(q.b->line_trip(0, false, false, Clock::now() + std::chrono::milliseconds(50)) == 0);
}

void test_skip_lets_the_other_go(void **) {
    Pair p;
    assert_true(p.a->line_trip(1, true, true, Clock::now() + std::chrono::seconds(10)) == 0);
    const auto t0 = Clock::now();
    assert_true(p.b->line_trip(0, false, false, t0 + std::chrono::seconds(10)) == 0);
    assert_true(Clock::now() - t0 < std::chrono::seconds(5));  // not the deadline
}

}  // namespace

int main() {
    const CMUnitTest tests[] = {
        cmocka_unit_test(test_streamed_bytes_read_back),  cmocka_unit_test(test_inline_when_no_offer),
        cmocka_unit_test(test_trip_measured_between_two), cmocka_unit_test(test_trip_without_its_peer),
        cmocka_unit_test(test_skip_lets_the_other_go),
    };
    return cmocka_run_group_tests(tests, nullptr, nullptr);
}

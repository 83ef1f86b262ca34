// The time types every layer uses: timeouts in milliseconds, deadlines on the monotonic clock.
#pragma once

#include <time.h>

#include <algorithm>
#include <chrono>

namespace distc {

using Millis = std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

// The coarse clock's last tick: never later than Clock::now().
inline Clock::time_point coarse_now() {
    timespec t{};
    if (::clock_gettime(CLOCK_MONOTONIC_COARSE, &t) != 0) return Clock::now();
    return Clock::time_point(std::chrono::duration_cast<Clock::duration>(std::chrono::seconds(t.tv_sec) +
                                                                         std::chrono::nanoseconds(t.tv_nsec)));
}

// `timeout` from now, for a deadline that every collective sets and few
// reach: read off the coarse monotonic clock (the same clock as Clock, kept
// at the last tick, a fraction of the cost of a precise read) and moved one
// tick on, so that it is never earlier than `timeout` from now and at most a
// tick later.
inline Clock::time_point deadline_in(Millis timeout) {
    static const std::chrono::nanoseconds tick = [] {
        timespec r{};
        ::clock_getres(CLOCK_MONOTONIC_COARSE, &r);
        return std::chrono::seconds(r.tv_sec) + std::chrono::nanoseconds(r.tv_nsec);
    }();
    return coarse_now() + std::chrono::duration_cast<Clock::duration>(tick) + timeout;
}

// What is left of a deadline (from deadline_in), at least 1 ms: read off the
// coarse clock, so never less than is left and at most a tick more.
inline Millis left_of(Clock::time_point deadline) {
    return std::max(Millis(1), std::chrono::duration_cast<Millis>(deadline - coarse_now()));
}

}  // namespace distc

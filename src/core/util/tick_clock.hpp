// A wall clock at the kernel's tick: CLOCK_REALTIME_COARSE, which the vDSO
// serves from the time the kernel kept at its last tick, with no system
// call and no counter read. For the flight recorder, which stamps every
// operation twice: a precise clock read there would cost more than the rest
// of the record together. It needs no thread of ours either: a thread that
// woke every few milliseconds to refresh a clock of its own took cores
// from ranks busy copying (more context switches than the ranks made).
#pragma once

#include <time.h>

#include <cstdint>

namespace distc {

// Microseconds since the epoch, behind the real clock by at most a tick of
// the kernel (1/HZ: 1 to 10 ms).
inline int64_t tick_now_us() {
    timespec ts;
    clock_gettime(CLOCK_REALTIME_COARSE, &ts);
    return static_cast<int64_t>(ts.tv_sec) * 1000000 + ts.tv_nsec / 1000;
}

// The real clock, read now (CLOCK_REALTIME).
int64_t real_now_us();

}  // namespace distc

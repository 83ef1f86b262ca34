// A wall clock that costs one load: a thread of its own reads the real clock
// every 2 ms while someone asks the time, and sleeps when nobody
// has asked for a whole tick. For the flight recorder, which stamps every
// operation twice: a real clock read there would cost more than the rest of
// the record together.
#pragma once

#include <atomic>
#include <cstdint>

namespace distc {

namespace tick {
// Readers load `now`; while `ticking`, the ticker refreshes it each tick and
// stops after a tick in which nobody read it (`used` stayed false).
extern std::atomic<int64_t> now;
extern std::atomic<bool> ticking, used;
int64_t wake();  // the real clock, and the ticker started again
}  // namespace tick

// Microseconds since the epoch (CLOCK_REALTIME), a few milliseconds behind
// at most while the ticker runs (more if the machine is too busy to run it); the first call after a pause reads the real clock.
inline int64_t tick_now_us() {
    if (tick::ticking.load(std::memory_order_relaxed)) {
        // Stored only when it changes: readers on many cores share the line.
        if (!tick::used.load(std::memory_order_relaxed)) tick::used.store(true, std::memory_order_relaxed);
        return tick::now.load(std::memory_order_relaxed);
    }
    return tick::wake();
}

// The real clock, read now (CLOCK_REALTIME).
int64_t real_now_us();

}  // namespace distc

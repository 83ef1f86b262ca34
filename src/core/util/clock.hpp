// The time types every layer uses: timeouts in milliseconds, deadlines on the monotonic clock.
#pragma once

#include <chrono>

namespace distc {

using Millis = std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

}  // namespace distc

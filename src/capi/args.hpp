// Argument translation shared by the C shims of several headers.
#pragma once

#include <cstdint>
#include <string>

#include "core/store/rendezvous.hpp"
#include "distc/store.h"

namespace distc::capi {

// The core adds timeouts to steady_clock::now() in nanoseconds, which overflows
// past ~292 years: INT64_MAX ("forever" to many callers) timed out at once.
// Anything longer than a century means a century.
inline Millis clamp_ms(int64_t ms) {
    constexpr int64_t kMaxTimeoutMs = int64_t(100) * 365 * 24 * 3600 * 1000;
    return Millis(ms < kMaxTimeoutMs ? ms : kMaxTimeoutMs);
}

// A checked distc_rendezvous_options (NULL: defaults) for `url`; `name` is the
// argument's name in messages ("opts", "rv").
RendezvousRequest rendezvous_request(const char *url, const distc_rendezvous_options *opts, const std::string &name);

}  // namespace distc::capi

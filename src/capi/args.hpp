// Argument translation shared by the C shims of several headers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <string>

#include "capi/guard.hpp"
#include "core/store/rendezvous.hpp"
#include "distc/store.h"

namespace distc::capi {

// The integer a caller passed as an enum. C callers (and FFIs) may pass any
// int; reading it as the C++ enum is undefined outside the enumerators' range,
// so the bits are copied out first and range-checked as an int.
template <typename E>
inline int enum_value(const E &e) {
    static_assert(sizeof(E) == sizeof(int), "C enums are int-sized here");
    int v;
    std::memcpy(&v, &e, sizeof v);
    return v;
}

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

// Options structs grow by appending fields; `version` says how far a caller's
// struct goes, and `ends[v - 1]` is where version v's ends (the current
// version's end, sizeof, need not be listed).
template <class T>
size_t options_size(unsigned version, std::initializer_list<size_t> ends) {
    return version <= ends.size() ? ends.begin()[version - 1] : sizeof(T);
}

// The version check of an options struct a caller passed (`name`: "opts", ...).
inline void check_options_version(unsigned version, unsigned current, const char *name = "opts") {
    if (version < 1 || version > current)
        fail(DISTC_EINVAL, std::string(name) + "->version is " + std::to_string(version) + ", expected 1.." +
                               std::to_string(current));
}

// distc_x_options_init: `defaults` written as far as a struct of `version` goes.
template <class T>
void init_options(T *opts, unsigned version, unsigned current, T defaults, std::initializer_list<size_t> ends) {
    require_ptr(opts, "opts");
    if (version < 1 || version > current) fail(DISTC_EINVAL, "unknown options version " + std::to_string(version));
    defaults.version = version;
    std::memcpy(opts, &defaults, options_size<T>(version, ends));
}

}  // namespace distc::capi

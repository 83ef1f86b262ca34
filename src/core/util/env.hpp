// Numbers and switches from the environment, read strictly. A value the
// variable does not take (junk, trailing junk, a negative, out of range) is
// not guessed at: the default serves, with one line on stderr naming the
// variable, so that a typo neither turns a feature off silently nor wraps
// into a wait that never ends.
#pragma once

#include <cstdint>

namespace distc {

// A whole number in [lo, hi] from `name`: `dflt` when unset or empty, or
// (with the warning) when it is not one.
int64_t env_int(const char *name, int64_t dflt, int64_t lo, int64_t hi);

// A switch: 1, true, on, yes or 0, false, off, no (any case): `dflt` when
// unset or empty, or (with the warning) when it is something else.
bool env_flag(const char *name, bool dflt);

}  // namespace distc

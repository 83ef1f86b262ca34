// How much the library says and checks: DISTC_DEBUG, else torch's
// TORCH_DISTRIBUTED_DEBUG, so a job that sets torch's variable gets the
// same from distc.
#pragma once

namespace distc {

enum class DebugLevel { Off = 0, Info = 1, Detail = 2 };

// DISTC_DEBUG: unset, "", "0" or "off": Off; "detail": Detail; any other
// value: Info. When unset, TORCH_DISTRIBUTED_DEBUG: OFF, INFO or DETAIL
// (any case; others: Off). Read at each call.
DebugLevel debug_level();

}  // namespace distc

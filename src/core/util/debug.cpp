#include "core/util/debug.hpp"

#include <strings.h>

#include <cstdlib>
#include <cstring>

namespace distc {

DebugLevel debug_level() {
    if (const char *e = std::getenv("DISTC_DEBUG")) {
        if (!*e || std::strcmp(e, "0") == 0 || strcasecmp(e, "off") == 0) return DebugLevel::Off;
        return strcasecmp(e, "detail") == 0 ? DebugLevel::Detail : DebugLevel::Info;
    }
    if (const char *t = std::getenv("TORCH_DISTRIBUTED_DEBUG")) {
        if (strcasecmp(t, "detail") == 0) return DebugLevel::Detail;
        if (strcasecmp(t, "info") == 0) return DebugLevel::Info;
    }
    return DebugLevel::Off;
}

}  // namespace distc

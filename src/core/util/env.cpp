#include "core/util/env.hpp"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <strings.h>

#include <initializer_list>

namespace distc {

namespace {

void warn(const char *name, const char *value, const char *wants, const char *used) {
    std::fprintf(stderr, "distc: %s=%s is not %s; %s is used\n", name, value, wants, used);
}

}  // namespace

int64_t env_int(const char *name, int64_t dflt, int64_t lo, int64_t hi) {
    const char *e = std::getenv(name);
    if (!e || !*e) return dflt;
    errno = 0;
    char *end = nullptr;
    long long v = std::strtoll(e, &end, 10);
    if (errno == 0 && end != e && *end == '\0' && v >= lo && v <= hi) return v;
    char wants[96], used[32];
    std::snprintf(wants, sizeof wants, "a whole number from %lld to %lld", static_cast<long long>(lo),
                  static_cast<long long>(hi));
    std::snprintf(used, sizeof used, "%lld", static_cast<long long>(dflt));
    warn(name, e, wants, used);
    return dflt;
}

bool env_flag(const char *name, bool dflt) {
    const char *e = std::getenv(name);
    if (!e || !*e) return dflt;
    for (const char *t : {"1", "true", "on", "yes"})
        if (strcasecmp(e, t) == 0) return true;
    for (const char *f : {"0", "false", "off", "no"})
        if (strcasecmp(e, f) == 0) return false;
    warn(name, e, "1, true, on, yes, 0, false, off or no", dflt ? "on" : "off");
    return dflt;
}

}  // namespace distc

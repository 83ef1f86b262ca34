#include "core/util/error.hpp"

#include <cstring>

namespace distc {

void fail_errno(int code, const std::string &what, int err) {
    char buf[256];
    // GNU strerror_r may return a static string instead of filling buf.
    const char *s = strerror_r(err, buf, sizeof buf);
    throw Error(code, what + ": " + s);
}

}  // namespace distc

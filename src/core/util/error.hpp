// Internal error type: the core throws, the C shims translate (see capi/guard.hpp).
#pragma once

#include <stdexcept>
#include <string>

#include "distc/errors.h"

namespace distc {

class Error : public std::runtime_error {
public:
    Error(int code, const std::string &msg) : std::runtime_error(msg), code_(code) {}
    int code() const noexcept { return code_; }

private:
    int code_;
};

[[noreturn]] inline void fail(int code, const std::string &msg) { throw Error(code, msg); }

// errno-carrying failure of a system call.
[[noreturn]] void fail_errno(int code, const std::string &what, int err);

}  // namespace distc

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

// Whether `code` is 0 or one of distc_status (DISTC_EPROTO is its last):
// what the caller's callbacks may hand back.
inline bool is_status(int code) { return code <= 0 && code >= DISTC_EPROTO; }

// A failure every rank of a group reaches alike, from what all of them know
// (lengths they exchanged, the calls they compared): it fails the operation
// everywhere, so it leaves the group usable instead of breaking it.
class AgreedError : public Error {
public:
    using Error::Error;
};
[[noreturn]] inline void fail_agreed(int code, const std::string &msg) { throw AgreedError(code, msg); }

// fail(code, message()) with the message built out of line: checks on hot
// paths then carry no string code (nor the stack frame it needs).
template <typename F>
[[noreturn, gnu::cold, gnu::noinline]] void fail_with(int code, F &&message) {
    throw Error(code, message());
}

// errno-carrying failure of a system call.
[[noreturn]] void fail_errno(int code, const std::string &what, int err);

}  // namespace distc

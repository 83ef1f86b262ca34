// For backend plugins written in C++: failures thrown inside the plugin and
// turned into a code and a message (distc_error_set) at the vtable boundary.
// Header-only: plugins use distc/sys/backend.h and this, nothing else of distc.
#pragma once

#include <new>
#include <stdexcept>
#include <string>

#include "distc/sys/backend.h"

namespace distc_plugin {

struct Failure {
    int code;
    std::string message;
};

[[noreturn]] inline void raise(int code, std::string message) { throw Failure{code, std::move(message)}; }

// Runs `body` and answers 0, or the failure's code with its message set.
template <typename F>
int guarded(F &&body) noexcept {
    try {
        body();
        return 0;
    } catch (const Failure &f) {
        return distc_error_set(f.code, f.message.c_str());
    } catch (const std::bad_alloc &) {
        return distc_error_set(DISTC_ENOMEM, "out of memory");
    } catch (const std::exception &e) {
        return distc_error_set(DISTC_EINTERNAL, e.what());
    }
}

}  // namespace distc_plugin

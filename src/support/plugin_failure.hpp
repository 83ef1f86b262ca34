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

// The usual body of distc_backend_plugin_init: refuses an older core, hands out `mine`.
inline int plugin_init(const distc_backend_ops *mine, const char *lib, const distc_backend_ops **ops, void **payload,
                       unsigned int core_version) {
    if (core_version < DISTC_BACKEND_OPS_VERSION)
        return distc_error_set(DISTC_EBACKEND, (std::string(lib) + " needs a newer libdistc").c_str());
    *ops = mine;
    *payload = nullptr;
    return 0;
}

}  // namespace distc_plugin

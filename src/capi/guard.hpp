// The try/catch guard every C entry point runs its body in: no exception crosses
// the ABI, and every failure leaves a code and a one-line message naming the
// function on the calling thread.
#pragma once

#include <new>
#include <stdexcept>
#include <string>

#include "core/util/error.hpp"

namespace distc::capi {

int set_last_error(int code, const char *fn, const std::string &msg);
void clear_last_error();

template <typename F>
int guard(const char *fn, F &&body) noexcept {
    try {
        clear_last_error();
        return body();
    } catch (const Error &e) {
        return set_last_error(e.code(), fn, e.what());
    } catch (const std::bad_alloc &) {
        return set_last_error(DISTC_ENOMEM, fn, "out of memory");
    } catch (const std::length_error &e) {
        // A count no container can hold (a -1 passed as a size_t, say).
        return set_last_error(DISTC_ENOMEM, fn, std::string("a count or size too large to hold (") + e.what() + ")");
    } catch (const std::exception &e) {
        return set_last_error(DISTC_EINTERNAL, fn, std::string("internal error: ") + e.what());
    } catch (...) {
        return set_last_error(DISTC_EINTERNAL, fn, "internal error: unknown exception");
    }
}

// Argument checks shared by every shim; they throw DISTC_EINVAL naming the argument.
inline void require(bool ok, const char *what) {
    if (!ok) fail(DISTC_EINVAL, what);
}
template <typename T>
inline void require_ptr(const T *p, const char *name) {
    if (p == nullptr) fail(DISTC_EINVAL, std::string(name) + " is NULL");
}

}  // namespace distc::capi

#include "capi/guard.hpp"

#include <cstdlib>
#include <cstring>

#include "distc/common.h"
#include "distc/errors.h"
#include "distc/version.h"

namespace {
thread_local int last_code = 0;
thread_local std::string last_msg;
// Whether either is set: clearing on every call's entry then costs one test
// (the flag, trivially initialised, is read without the string's TLS wrapper).
thread_local bool last_set = false;
}  // namespace

namespace distc::capi {

int set_last_error(int code, const char *fn, const std::string &msg) {
    last_set = true;
    last_code = code;
    try {
        last_msg = std::string(fn) + ": " + msg;
        // Messages quote what callers and peers sent (keys, URLs, paths): one
        // line, no control bytes a terminal would act on, and a bounded
        // length that keeps the start and the end (where the verdict is).
        for (auto &c : last_msg)
            if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = c == '\t' || c == '\n' || c == '\r' ? ' ' : '?';
        constexpr size_t kMax = 2048, kHead = 1400, kTail = 600;
        if (last_msg.size() > kMax)
            last_msg = last_msg.substr(0, kHead) + " [... " + std::to_string(last_msg.size() - kHead - kTail) +
                       " bytes cut ...] " + last_msg.substr(last_msg.size() - kTail);
    } catch (...) {
        last_msg.clear();
    }
    return code;
}

void clear_last_error() {
    if (!last_set) return;
    last_set = false;
    last_code = 0;
    last_msg.clear();
}

}  // namespace distc::capi

extern "C" {

DISTC_EXTERN(const char *) distc_strerror(int code) {
    switch (code) {
        case DISTC_OK: return "success";
        case DISTC_INPROGRESS: return "in progress";
        case DISTC_EINVAL: return "invalid argument";
        case DISTC_ETIMEOUT: return "timed out";
        case DISTC_ENOTFOUND: return "not found";
        case DISTC_ENOTSUP: return "not supported";
        case DISTC_EREMOTE: return "remote peer failed";
        case DISTC_EABORTED: return "aborted";
        case DISTC_ESTATE: return "wrong state";
        case DISTC_ENOMEM: return "out of memory or over a size limit";
        case DISTC_EBACKEND: return "backend error";
        case DISTC_EINTERNAL: return "internal error";
        case DISTC_EIO: return "system I/O error";
        case DISTC_EPROTO: return "protocol error";
        default: return "unknown error code";
    }
}

DISTC_EXTERN(const char *) distc_error_last(void) { return last_msg.c_str(); }

DISTC_EXTERN(int) distc_error_last_code(void) { return last_code; }

DISTC_EXTERN(void) distc_error_clear(void) { distc::capi::clear_last_error(); }

DISTC_EXTERN(int) distc_error_set(int code, const char *message) {
    last_set = true;
    last_code = code;
    try {
        last_msg = message ? message : "";
    } catch (...) {
        last_msg.clear();
    }
    return code;
}

DISTC_EXTERN(const char *) distc_version(void) { return DISTC_VERSION_STRING; }

DISTC_EXTERN(uint32_t) distc_version_number(void) { return DISTC_VERSION_NUMBER; }

DISTC_EXTERN(void) distc_buf_dispose(distc_buf *buf) {
    if (!buf) return;
    std::free(buf->data);
    buf->data = nullptr;
    buf->size = 0;
}

DISTC_EXTERN(int) distc_buf_set(distc_buf *out, const void *data, size_t len) {
    return distc::capi::guard("distc_buf_set", [&] {
        distc::capi::require_ptr(out, "out");
        distc::capi::require(data != nullptr || len == 0, "data is NULL but len > 0");
        // malloc(0) may return NULL; keep data non-NULL for empty values.
        auto *p = static_cast<uint8_t *>(std::malloc(len ? len : 1));
        if (!p) distc::fail(DISTC_ENOMEM, "cannot allocate " + std::to_string(len) + " bytes");
        if (len) std::memcpy(p, data, len);
        out->data = p;
        out->size = len;
        return 0;
    });
}

}  // extern "C"

// C shims for distc/sys/backend.h: registering backends, and the calls a
// backend makes to complete work and to use the core's host kernels.
#include "capi/registry.hpp"
#include "capi/guard.hpp"
#include "capi/handles.hpp"
#include "core/pg/types.hpp"
#include "distc/sys/backend.h"

using namespace distc;
using distc::capi::guard;
using distc::capi::require;
using distc::capi::require_ptr;

namespace {

[[noreturn, gnu::cold]] void fail_completed() {
    fail(DISTC_ESTATE, "the work was already completed (a backend completes each work once, and sets hooks before)");
}

// Completes what the backend's handle stands for. An async work's handle is
// freed then: the backend must not touch it afterwards.
void complete(distc_work *work, int code, const char *message, int32_t source_rank) {
    // Read first: a blocking call's handle is its thread's again the moment
    // the call completes, to reuse or free (test_backend_plugin races it).
    const bool async = work->impl != nullptr;
    if (!work->completion->complete_by_backend(code, message, source_rank)) fail_completed();
    if (async) delete work;
}

DType dtype_value(int32_t dtype) {
    if (dtype < DISTC_DTYPE_BOOL || dtype > DISTC_DTYPE_COMPLEX128)
        fail(DISTC_EINVAL, "dtype " + std::to_string(dtype) + " is not a distc_dtype");
    return static_cast<DType>(dtype);
}

}  // namespace

extern "C" {

DISTC_EXTERN(size_t) distc_dtype_size(int32_t dtype) {
    if (dtype < DISTC_DTYPE_BOOL || dtype > DISTC_DTYPE_COMPLEX128) return 0;
    return dtype_size(static_cast<DType>(dtype));
}

DISTC_EXTERN(const char *) distc_dtype_name(int32_t dtype) {
    if (dtype < DISTC_DTYPE_BOOL || dtype > DISTC_DTYPE_COMPLEX128) return "unknown";
    return dtype_name(static_cast<DType>(dtype));
}

DISTC_EXTERN(int) distc_backend_register(const char *name, const distc_backend_ops *ops, void *payload) {
    return guard(__func__, [&] {
        require_ptr(name, "name");
        require_ptr(ops, "ops");
        register_backend(name, ops, payload, "registered by the program");
        return 0;
    });
}

DISTC_EXTERN(int) distc_plugin_load(const char *name, const char *path) {
    return guard(__func__, [&] {
        require_ptr(name, "name");
        require_ptr(path, "path");
        if (!*path) fail(DISTC_EINVAL, "path is empty");
        load_backend(name, path);
        return 0;
    });
}

DISTC_EXTERN(int) distc_backend_work_set_hooks(distc_work *work, const distc_work_hooks *hooks, void *payload) {
    return guard(__func__, [&] {
        require_ptr(work, "work");
        require_ptr(hooks, "hooks");
        if (hooks->version != DISTC_WORK_HOOKS_VERSION)
            fail(DISTC_EINVAL, "hooks->version is " + std::to_string(hooks->version) + ", expected " +
                                   std::to_string(DISTC_WORK_HOOKS_VERSION));
        Completion::StreamWait ws;
        if (hooks->wait_stream) ws = [fn = hooks->wait_stream, payload](void *s) { return fn(payload, s); };
        std::function<void()> rel;
        if (hooks->release) rel = [fn = hooks->release, payload] { fn(payload); };
        if (!work->completion->set_backend_hooks(std::move(ws), std::move(rel)))
            fail(DISTC_ESTATE,
                 "hooks are already set on the work, or it was completed (a backend sets hooks once, before "
                 "completing)");
        return 0;
    });
}

DISTC_EXTERN(int) distc_backend_work_complete(distc_work *work, int32_t source_rank) {
    return guard(__func__, [&] {
        require_ptr(work, "work");
        complete(work, 0, nullptr, source_rank);
        return 0;
    });
}

DISTC_EXTERN(int) distc_backend_work_fail(distc_work *work, int code, const char *message) {
    return guard(__func__, [&] {
        require_ptr(work, "work");
        require(code < 0, "code must be a negative distc error code");
        complete(work, code, message && *message ? message : distc_strerror(code), -1);
        return 0;
    });
}

DISTC_EXTERN(int) distc_backend_combine(void *dst, const void *src, uint64_t count, int32_t dtype, int32_t op) {
    return guard(__func__, [&] {
        require(count == 0 || (dst && src), "dst or src is NULL");
        DType dt = dtype_value(dtype);
        require(op >= DISTC_SUM && op <= DISTC_PREMUL_SUM, "op is not a distc_reduce_op");
        if (const char *why = reduce_op_unsupported(dt, static_cast<ReduceOp>(op))) fail(DISTC_EINVAL, why);
        ReduceFn fn = reduce_fn(dt, static_cast<ReduceOp>(op));
        if (count) fn(dst, dst, src, count);
        return 0;
    });
}

DISTC_EXTERN(int) distc_backend_scale(void *data, uint64_t count, int32_t dtype, double factor) {
    return guard(__func__, [&] {
        require(count == 0 || data, "data is NULL");
        DType dt = dtype_value(dtype);
        require(dt != DType::Bool, "bool cannot be scaled");
        if (count) scale_in_place(dt, data, count, factor);
        return 0;
    });
}

}  // extern "C"

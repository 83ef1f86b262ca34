// C shims for distc/work.h.
#include "capi/args.hpp"
#include "capi/guard.hpp"
#include "capi/handles.hpp"
#include "core/work/continuation.hpp"
#include "distc/work.h"

using namespace distc;
using distc::capi::guard;
using distc::capi::require;
using distc::capi::require_ptr;

namespace {
Work &work_arg(const distc_work *w) {
    require_ptr(w, "work");
    // The handle a backend got for a blocking call is the backend's, and only for completing it.
    if (!w->impl) fail(DISTC_EINVAL, "work is a backend's handle of a blocking call (see distc/sys/backend.h)");
    return *w->impl;
}

// A failed operation's status leaves its message as the thread's last error.
int report(const Work &w, const char *fn) {
    int st = w.status();
    if (st < 0) return distc::capi::set_last_error(st, fn, w.message());
    return st;
}
}  // namespace

distc_promise_hold::~distc_promise_hold() {
    if (auto w = work.lock()) {
        try {
            w->complete(DISTC_EABORTED, "every handle of the future was freed before it was completed");
        } catch (...) {
            w->complete(DISTC_EABORTED, std::string());  // out of memory for the message
        }
    }
}

extern "C" {

DISTC_EXTERN(int) distc_work_test(distc_work *work) {
    return guard(__func__, [&] { return report(work_arg(work), "distc_work_test"); });
}

DISTC_EXTERN(int) distc_work_wait(distc_work *work, int64_t timeout_ms) {
    return guard(__func__, [&] {
        Work &w = work_arg(work);
        require(timeout_ms >= -1, "timeout_ms must be >= 0 or -1");
        if (!w.wait(timeout_ms < 0 ? Millis(-1) : capi::clamp_ms(timeout_ms)))
            fail(DISTC_ETIMEOUT, w.what() + " still running after " + std::to_string(timeout_ms) + " ms");
        return report(w, "distc_work_wait");
    });
}

DISTC_EXTERN(int) distc_work_error(const distc_work *work, const char **message) {
    return guard(__func__, [&] {
        Work &w = work_arg(work);
        if (message) *message = w.message_cstr();
        return w.status();
    });
}

DISTC_EXTERN(int) distc_work_source_rank(int32_t *out, const distc_work *work) {
    return guard(__func__, [&] {
        require_ptr(out, "out");
        *out = work_arg(work).source_rank();
        return 0;
    });
}

DISTC_EXTERN(int) distc_work_duration_ns(int64_t *out, const distc_work *work) {
    return guard(__func__, [&] {
        require_ptr(out, "out");
        *out = work_arg(work).duration_ns();
        return 0;
    });
}

DISTC_EXTERN(int) distc_work_seq(uint64_t *out, const distc_work *work) {
    return guard(__func__, [&] {
        require_ptr(out, "out");
        *out = work_arg(work).seq();
        return 0;
    });
}

DISTC_EXTERN(int) distc_work_on_complete(distc_work *work, distc_work_callback cb, void *payload) {
    return guard(__func__, [&] {
        Work &w = work_arg(work);
        require(cb != nullptr, "cb is NULL");
        // The callback gets a handle of its own, valid while it runs: the caller's
        // handle may have been freed (detached) by then.
        std::weak_ptr<Work> weak = work->impl;
        if (!w.on_complete([weak, cb, payload] {
                if (auto sp = weak.lock()) {
                    distc_work tmp{sp};
                    cb(&tmp, payload);
                }
            }))
            fail(DISTC_ESTATE, "a callback is already set on " + w.what());
        return 0;
    });
}

DISTC_EXTERN(int) distc_work_wait_stream(distc_work *work, void *stream) {
    return guard(__func__, [&] {
        Work &w = work_arg(work);
        // Already failed: say so now rather than let the stream run on bad data.
        if (w.done() && w.status() < 0) return report(w, "distc_work_wait_stream");
        int rc = 0;
        if (w.wait_stream(stream, rc)) {
            if (rc < 0) fail(rc, w.what() + ": making the stream wait failed: " + distc_error_last());
            return 0;
        }
        w.wait(Millis(-1));  // host work: no stream can wait on it
        return report(w, "distc_work_wait_stream");
    });
}

DISTC_EXTERN(int) distc_work_ref(distc_work **out, distc_work *work) {
    return guard(__func__, [&] {
        require_ptr(out, "out");
        *out = nullptr;
        work_arg(work);
        *out = new distc_work{work->impl, work->impl.get(), work->hold};
        return 0;
    });
}

DISTC_EXTERN(int) distc_work_new(distc_work **out) {
    return guard(__func__, [&] {
        require_ptr(out, "out");
        auto w = Work::promise("future");
        auto hold = std::make_shared<distc_promise_hold>();
        hold->work = w;
        *out = new distc_work{w, w.get(), std::move(hold)};
        return 0;
    });
}

DISTC_EXTERN(int) distc_work_complete(distc_work *work, int code, const char *message) {
    return guard(__func__, [&] {
        Work &w = work_arg(work);
        if (!w.is_promise())
            fail(DISTC_EINVAL, w.what() +
                                   " is a group's operation: only its backend completes it "
                                   "(distc_work_complete completes works made by distc_work_new)");
        if (!is_status(code))
            fail(DISTC_EINVAL, "code must be 0 or a negative distc error code (DISTC_EINVAL .. DISTC_EPROTO), not " +
                                   std::to_string(code));
        std::string text = code == 0 ? std::string() : (message && *message ? message : distc_strerror(code));
        if (!w.complete(code, text)) fail(DISTC_ESTATE, "the future was already completed");
        return 0;
    });
}

DISTC_EXTERN(int) distc_work_then(distc_work **out, distc_work *work, distc_work_continuation fn, void *payload) {
    return guard(__func__, [&] {
        require_ptr(out, "out");
        *out = nullptr;
        Work &w = work_arg(work);
        require(fn != nullptr, "fn is NULL");
        auto next = distc::then(w, [fn, payload](Work &src) -> std::shared_ptr<Work> {
            distc_work done{src.shared_from_this()};
            distc_work *handed = nullptr;
            distc_error_clear();
            int rc = fn(&handed, &done, payload);
            std::shared_ptr<Work> then;
            if (handed) {
                then = handed->impl;
                if (handed != &done) distc_work_free(handed);
            }
            if (!is_status(rc))
                fail(DISTC_EINTERNAL, "the continuation returned " + std::to_string(rc) +
                                          (rc > 0 ? ", a positive code" : ", which is not a distc_status"));
            if (rc < 0) {
                const char *msg = distc_error_last();
                fail(rc, msg && *msg ? msg : "it returned " + std::to_string(rc) + " (" + distc_strerror(rc) + ")");
            }
            if (handed && !then) fail(DISTC_EINVAL, "it handed back a backend's handle of a blocking call");
            return then;
        });
        *out = new distc_work{next};
        return 0;
    });
}

DISTC_EXTERN(void) distc_work_free(distc_work *work) {
    if (work && !work->impl) return;  // a backend's handle of a blocking call: its thread's, not anyone's to free
    delete work;
}

}  // extern "C"

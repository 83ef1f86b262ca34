// The opaque C handles: thin boxes around shared core objects, so children keep
// parents alive and handles can be freed in any order.
#pragma once

#include <memory>

#include "core/store/store.hpp"

struct distc_store {
    std::shared_ptr<distc::Store> impl;
};

#include "core/pg/process_group.hpp"
#include "core/work/completion.hpp"
#include "core/work/work.hpp"

struct distc_pg {
    std::shared_ptr<distc::ProcessGroup> impl;
};

// The program's hold on a promise (distc_work_new), shared by its handles
// (distc_work_ref): once the last goes, nobody can complete the promise, so
// it fails then, and whatever waits on it or continues it runs.
struct distc_promise_hold {
    std::weak_ptr<distc::Work> work;
    ~distc_promise_hold();
};

// A program's handle has impl. A backend's handle (distc/sys/backend.h) has
// what it completes: an async operation's Work, whose handle is the backend's
// until it completes it and freed then; or, without impl, the BlockingCall
// that a thread lends for each of its blocking calls (plugin_backend.cpp),
// a handle that is the thread's and never given out.
struct distc_work {
    std::shared_ptr<distc::Work> impl;
    distc::Completion *completion = impl.get();
    std::shared_ptr<distc_promise_hold> hold = nullptr;  // a promise's handles only
};

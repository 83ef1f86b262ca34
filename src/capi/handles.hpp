// The opaque C handles: thin boxes around shared core objects, so children keep
// parents alive and handles can be freed in any order.
#pragma once

#include <memory>

#include "core/store/store.hpp"

struct distc_store {
    std::shared_ptr<distc::Store> impl;
};

#include "core/pg/process_group.hpp"
#include "core/work/blocking_call.hpp"
#include "core/work/work.hpp"

struct distc_pg {
    std::shared_ptr<distc::ProcessGroup> impl;
};

struct distc_work {
    std::shared_ptr<distc::Work> impl;
    // Instead of impl, for the handle a thread lends a host backend for each of
    // its blocking calls (plugin_backend.cpp): the handle is never given out.
    distc::BlockingCall *call = nullptr;
};

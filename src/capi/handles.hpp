// The opaque C handles: thin boxes around shared core objects, so children keep
// parents alive and handles can be freed in any order.
#pragma once

#include <atomic>
#include <memory>

#include "core/store/store.hpp"

struct distc_store {
    std::shared_ptr<distc::Store> impl;
};

#include "core/pg/process_group.hpp"
#include "core/work/work.hpp"

struct distc_pg {
    std::shared_ptr<distc::ProcessGroup> impl;
};

struct distc_work {
    std::shared_ptr<distc::Work> impl;
    // A blocking call's handle that its thread keeps for the next call
    // (plugin_backend.cpp): completing it clears `lent` instead of freeing it.
    bool kept = false;
    std::atomic<bool> lent{false};
};

// How a group's ranks learn why it broke (executor.hpp). A rank whose
// operation failed because a peer broke off learns only which link it lost;
// the first rank to break the group knows why (a peer it timed out on, one
// that died, a mismatch). Once its links are broken it leaves a note in
// the group's store, and a rank that lost a link waits a moment for one, so
// that every rank's error can name the first failure, not only the link it
// saw go.
#pragma once

#include <memory>
#include <string>

#include "core/store/store.hpp"

namespace distc {

class FailureNotes {
public:
    // The notes go in `store` (the group's key space), under "broken";
    // none where the store may not give up in time (a custom store's).
    explicit FailureNotes(std::shared_ptr<Store> store) :
        store_(store && store->bounds_its_waits() ? std::move(store) : nullptr) {}

    // This rank breaks the group, for `why`: leaves it unless a note is
    // there already, and returns the note that stays ("" when the store
    // failed). Briefly: the store may be what failed.
    std::string tell(const std::string &why) noexcept;
    // The note, waiting a moment for one ("" if none came).
    std::string first() noexcept;

private:
    std::shared_ptr<Store> store_;
};

}  // namespace distc

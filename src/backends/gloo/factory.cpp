#include "core/pg/backend.hpp"

#include "backends/gloo/gloo_backend.hpp"
#include "core/util/error.hpp"

namespace distc {

std::unique_ptr<Backend> make_backend(const std::string &name, std::shared_ptr<Store> store, int rank, int size,
                                      std::chrono::milliseconds timeout) {
    if (name == "gloo") return std::make_unique<GlooBackend>(std::move(store), rank, size, timeout);
    fail(DISTC_ENOTFOUND, "unknown backend '" + name + "' (this build has: gloo)");
}

}  // namespace distc

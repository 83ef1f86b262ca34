// The core asks for the host backend through this function, declared in
// core/pg/async_backend.hpp: the core names no backend's header.
#include "backends/host/host_backend.hpp"

namespace distc {

std::unique_ptr<AsyncBackend> make_host_backend(const AsyncGroupInfo &info, bool debug) {
    return std::make_unique<HostBackend>(info, debug);
}

}  // namespace distc

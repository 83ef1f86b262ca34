#include "backends/host/transport/shm/locality.hpp"

#include <unistd.h>

#include <cstdlib>
#include <map>

#include "backends/host/transport/address.hpp"
#include "core/util/env.hpp"
#include "core/util/error.hpp"

namespace distc {

const uint64_t kProbe = 0x70726f62652d6463ULL;

std::string host_identity() {
    if (!env_flag("DISTC_SHM", true)) return "";
    if (const char *id = std::getenv("DISTC_HOST_ID"); id && *id) return std::string("id:") + id;
    std::string net = network_identity(), ipc = namespace_id("ipc"), pidns = namespace_id("pid");
    // Without a boot id or namespaces to compare, nobody is known to share this host.
    if (net.empty() || ipc.empty() || pidns.empty()) return "";
    return net + " " + ipc + " " + pidns;
}

std::vector<int> Locality::peers_of(int rank) const {
    std::vector<int> out;
    for (size_t r = 0; r < host.size(); ++r)
        if (host[r] == host[static_cast<size_t>(rank)]) out.push_back(static_cast<int>(r));
    return out;
}

bool Locality::all_local() const {
    for (int h : host)
        if (h != 0) return false;
    return true;
}

std::vector<int> Locality::leaders() const {
    std::vector<int> out;
    for (size_t r = 0; r < host.size(); ++r)
        if (static_cast<size_t>(host[r]) == out.size()) out.push_back(static_cast<int>(r));
    return out;
}

bool Locality::shares_memory() const { return leaders().size() < host.size(); }

Locality find_locality(Store &store, int rank, int size, Millis timeout) {
    std::string me =
        std::to_string(::getpid()) + " " + std::to_string(reinterpret_cast<uintptr_t>(&kProbe)) + " " + host_identity();
    store.set("shm/host/" + std::to_string(rank), ByteView(me.data(), me.size()));
    std::vector<std::string> keys;
    for (int r = 0; r < size; ++r) keys.push_back("shm/host/" + std::to_string(r));
    std::vector<Bytes> all = store.multi_get(keys, timeout);
    Locality loc;
    std::map<std::string, int> hosts;
    for (int r = 0; r < size; ++r) {
        std::string s(all[static_cast<size_t>(r)].begin(), all[static_cast<size_t>(r)].end());
        auto space = s.find(' '), second = space == std::string::npos ? space : s.find(' ', space + 1);
        if (second == std::string::npos)
            fail(DISTC_EPROTO, "rank " + std::to_string(r) + " published no host identity");
        loc.pid.push_back(static_cast<pid_t>(std::atol(s.c_str())));
        loc.probe.push_back(std::strtoull(s.c_str() + space + 1, nullptr, 10));
        std::string id = s.substr(second + 1);
        // A rank off shared memory is a host of its own.
        if (id.empty()) id = "alone:" + std::to_string(r);
        auto it = hosts.emplace(id, static_cast<int>(hosts.size())).first;
        loc.host.push_back(it->second);
    }
    return loc;
}

}  // namespace distc

#include "backends/host/transport/address.hpp"

#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>

#include "core/util/error.hpp"
#include "core/util/netif.hpp"

namespace distc {

namespace {

const char *const kInterfaceVars[] = {"DISTC_IFNAME", "DISTC_GLOO_IFNAME", "GLOO_SOCKET_IFNAME"};

std::string first_line(const char *path) {
    std::ifstream f(path);
    std::string s;
    std::getline(f, s);
    return s;
}

std::string list_interfaces(const std::vector<Interface> &ifs) {
    std::string s;
    for (const auto &i : ifs) s += (s.empty() ? "" : ", ") + i.name + " " + i.address + (i.up ? "" : " (down)");
    return s.empty() ? "none" : s;
}

// The address of the first interface in `names` (a comma-separated list, as
// Gloo takes it) that has one of `family`, else of any family.
std::string named_address(const std::string &names, int family, const std::vector<Interface> &ifs) {
    size_t at = 0;
    while (at <= names.size()) {
        size_t comma = names.find(',', at);
        std::string name = names.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
        const Interface *any = nullptr;
        for (const auto &i : ifs) {
            if (i.name != name) continue;
            if (i.family == family) return i.address;
            if (!any) any = &i;
        }
        if (any) return any->address;
        if (comma == std::string::npos) break;
        at = comma + 1;
    }
    return "";
}

bool same_family_or_any(const std::string &a, int family) { return family == 0 || address_family(a) == family; }

}  // namespace

std::string namespace_id(const char *kind) {
    std::string path = std::string("/proc/self/ns/") + kind;
    char buf[128];
    ssize_t n = ::readlink(path.c_str(), buf, sizeof buf);
    return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string();
}

std::string network_identity() {
    std::string boot = first_line("/proc/sys/kernel/random/boot_id"), net = namespace_id("net");
    if (boot.empty() || net.empty()) return "";
    return boot + " " + net;
}

Address choose_address(Store &store, int rank, int size, Millis timeout) {
    std::string via_store = store.local_address();
    std::string me = network_identity() + "\n" + via_store;
    store.set("net/" + std::to_string(rank), ByteView(me.data(), me.size()));
    int family = via_store.empty() ? AF_INET : address_family(via_store);
    std::vector<Interface> ifs = interfaces();

    for (const char *var : kInterfaceVars) {
        const char *names = std::getenv(var);
        if (!names || !*names) continue;
        std::string a = named_address(names, family, ifs);
        if (a.empty())
            fail(DISTC_EINVAL, std::string(var) + "=" + names +
                                   " names no interface with an address here (interfaces: " + list_interfaces(ifs) +
                                   ")");
        return {a, std::string("interface ") + names + " (" + var + ")"};
    }
    if (const char *h = std::getenv("DISTC_HOSTNAME"); h && *h) return {h, "DISTC_HOSTNAME"};
    if (!via_store.empty() && !is_loopback(via_store)) return {via_store, "the route to the store"};

    // Loopback (or a store off the network): good enough unless a peer is elsewhere.
    std::vector<std::string> keys;
    for (int r = 0; r < size; ++r) keys.push_back("net/" + std::to_string(r));
    std::vector<Bytes> all = store.multi_get(keys, timeout);
    std::string mine = network_identity(), tried;
    std::vector<std::string> remote;
    bool elsewhere = mine.empty();
    for (int r = 0; r < size; ++r) {
        std::string s(all[static_cast<size_t>(r)].begin(), all[static_cast<size_t>(r)].end());
        size_t nl = s.find('\n');
        if (nl == std::string::npos) fail(DISTC_EPROTO, "rank " + std::to_string(r) + " published no network identity");
        if (r == rank || (!mine.empty() && s.compare(0, nl, mine) == 0)) continue;
        elsewhere = true;
        std::string a = s.substr(nl + 1);
        if (!a.empty() && !is_loopback(a)) remote.push_back(a);
    }
    if (!elsewhere) return {via_store.empty() ? "127.0.0.1" : via_store, "loopback (every peer is on this host)"};
    tried =
        "its store connection is from " + (via_store.empty() ? std::string("nowhere (not a TCP store)") : via_store);
    for (const auto &a : remote) {
        std::string src = route_source(a);
        if (!src.empty() && !is_loopback(src)) return {src, "the route to a peer at " + a};
        tried += "; the route to a peer at " + a + " leaves from " + (src.empty() ? "nowhere" : src);
    }
    std::string name = host_name();
    for (const auto &a : resolve_all(name))
        if (!is_loopback(a) && same_family_or_any(a, family)) return {name, "this host's name"};
    tried += "; host name '" + name + "' resolves to no address but loopback";
    for (int pass = 0; pass < 2; ++pass)
        for (const auto &i : ifs)
            if (i.up && !i.loopback && (pass == 1 || i.family == family))
                return {i.address, "interface " + i.name + ", the first that is up"};
    fail(DISTC_EIO, "rank " + std::to_string(rank) + " has peers on other hosts but no address they can reach: " +
                        tried + "; interfaces: " + list_interfaces(ifs) +
                        ". Set DISTC_IFNAME (or GLOO_SOCKET_IFNAME) to the interface peers reach this host through");
}

}  // namespace distc

#include "core/util/netif.hpp"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "core/util/socket.hpp"

namespace distc {

namespace {

bool link_local6(const sockaddr *sa) {
    return sa->sa_family == AF_INET6 && IN6_IS_ADDR_LINKLOCAL(&reinterpret_cast<const sockaddr_in6 *>(sa)->sin6_addr);
}

}  // namespace

std::vector<Interface> interfaces() {
    std::vector<Interface> out;
    ifaddrs *ifs = nullptr;
    if (::getifaddrs(&ifs) != 0) return out;
    for (ifaddrs *i = ifs; i; i = i->ifa_next) {
        if (!i->ifa_addr || (i->ifa_addr->sa_family != AF_INET && i->ifa_addr->sa_family != AF_INET6)) continue;
        if (link_local6(i->ifa_addr)) continue;
        Interface f;
        f.name = i->ifa_name;
        f.address = numeric_address(i->ifa_addr);
        f.family = i->ifa_addr->sa_family;
        f.up = (i->ifa_flags & IFF_UP) && (i->ifa_flags & IFF_RUNNING);
        f.loopback = (i->ifa_flags & IFF_LOOPBACK) || is_loopback(f.address);
        out.push_back(f);
    }
    ::freeifaddrs(ifs);
    return out;
}

int address_family(const std::string &address) {
    in6_addr six{};
    in_addr four{};
    if (::inet_pton(AF_INET, address.c_str(), &four) == 1) return AF_INET;
    if (::inet_pton(AF_INET6, address.c_str(), &six) == 1) return AF_INET6;
    return 0;
}

std::string route_source(const std::string &address) {
    sockaddr_storage ss{};
    socklen_t len = 0;
    int family = address_family(address);
    if (family == AF_INET) {
        auto *in = reinterpret_cast<sockaddr_in *>(&ss);
        in->sin_family = AF_INET;
        in->sin_port = htons(9);  // any port: nothing is sent
        ::inet_pton(AF_INET, address.c_str(), &in->sin_addr);
        len = sizeof *in;
    } else if (family == AF_INET6) {
        auto *in6 = reinterpret_cast<sockaddr_in6 *>(&ss);
        in6->sin6_family = AF_INET6;
        in6->sin6_port = htons(9);
        ::inet_pton(AF_INET6, address.c_str(), &in6->sin6_addr);
        len = sizeof *in6;
    } else {
        return "";
    }
    Fd fd(::socket(family, SOCK_DGRAM | SOCK_CLOEXEC, 0));
    if (!fd.valid() || ::connect(fd.get(), reinterpret_cast<sockaddr *>(&ss), len) != 0) return "";
    return local_address(fd.get());
}

bool is_loopback(const std::string &address) {
    std::string a = address;
    if (a.rfind("::ffff:", 0) == 0) a = a.substr(7);
    return a == "::1" || a.rfind("127.", 0) == 0 || a == "localhost";
}

std::string host_name() {
    char name[256] = {0};
    if (::gethostname(name, sizeof name - 1) != 0) return "";
    return name;
}

std::vector<std::string> resolve_all(const std::string &host) {
    std::vector<std::string> out;
    addrinfo hints{}, *res = nullptr;
    hints.ai_socktype = SOCK_STREAM;
    if (host.empty() || ::getaddrinfo(host.c_str(), nullptr, &hints, &res) != 0) return out;
    for (addrinfo *a = res; a; a = a->ai_next) {
        std::string s = numeric_address(a->ai_addr);
        if (!s.empty() && std::find(out.begin(), out.end(), s) == out.end()) out.push_back(s);
    }
    ::freeaddrinfo(res);
    return out;
}

}  // namespace distc

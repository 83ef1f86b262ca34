// What this host's network looks like from here: its interfaces, the route
// the kernel would take to an address, and what a socket is bound to. The
// host backend's choice of address (backends/host/transport/address) is built
// from these.
#pragma once

#include <string>
#include <vector>

namespace distc {

struct Interface {
    std::string name, address;  // numeric address, no brackets
    int family = 0;             // AF_INET or AF_INET6
    bool up = false, loopback = false;
};

// Every address of every interface (IPv6 link-local ones left out: they
// need a scope that peers cannot use).
std::vector<Interface> interfaces();
// The address the kernel would send from to reach `address` (numeric), ""
// when there is no route. Sends nothing: a UDP socket is only connected.
std::string route_source(const std::string &address);
// True for 127.0.0.0/8, ::1 and IPv4-mapped loopback.
bool is_loopback(const std::string &address);
// AF_INET, AF_INET6, or 0 when `address` is not numeric.
int address_family(const std::string &address);
// This host's name and what it resolves to ("" when it does not resolve).
std::string host_name();
std::vector<std::string> resolve_all(const std::string &host);

}  // namespace distc

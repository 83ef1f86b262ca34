// The one address a rank gives its peers, for every transport of the host
// backend (the TCP mesh, its point-to-point listener, Gloo's pairs).
//
// In order: an interface the user names (DISTC_IFNAME, DISTC_GLOO_IFNAME,
// GLOO_SOCKET_IFNAME), an address or name in DISTC_HOSTNAME, the address
// this rank reaches the rendezvous store from (the kernel's route to
// MASTER_ADDR), and, when that is loopback but some peers are on other hosts
// (the rank runs where the store is served and reaches it through
// 127.0.0.1), the route to those peers' addresses; then this host's name and
// its first interface that is up. Loopback is kept only when every peer is
// on this host. Every rank publishes what it knows before it decides, so no
// rank waits for one that has decided already.
#pragma once

#include <string>

#include "core/store/store.hpp"

namespace distc {

// This process's namespace of that kind ("net", "ipc", ...), "" when unknown.
std::string namespace_id(const char *kind);
// Boot id and network namespace: ranks that share them reach each other on loopback.
std::string network_identity();

struct Address {
    std::string host;  // numeric, or a name the user gave
    std::string why;   // how it was chosen, for DISTC_DEBUG and errors
};

// Publishes under "net/<rank>" and may read every rank's: call it on every rank.
Address choose_address(Store &store, int rank, int size, Millis timeout);

}  // namespace distc

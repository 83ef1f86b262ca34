// Which ranks of a group share this host closely enough to share memory:
// the same kernel boot, IPC, network and PID namespaces (so a memfd passed
// over an abstract Unix socket maps, futexes wake across processes, and a
// peer's pid names that peer). Every rank publishes its identity and pid
// through the group's store and reads everyone's, so all ranks derive the
// same answer. DISTC_SHM=0 on a rank keeps it (and only it) off shared
// memory; DISTC_HOST_ID replaces the identity (tests fake hosts with it).
#pragma once

#include <string>
#include <sys/types.h>
#include <vector>

#include "core/store/store.hpp"

namespace distc {

struct Locality {
    std::vector<int> host;        // by rank: an index shared by the ranks of one host, in order of first rank
    std::vector<pid_t> pid;       // by rank
    std::vector<uint64_t> probe;  // by rank: where its process keeps kProbe, to test reading its memory
    // The ranks sharing `rank`'s host, in rank order (only itself when it is off shared memory).
    std::vector<int> peers_of(int rank) const;
    bool all_local() const;            // one host for the whole group
    std::vector<int> leaders() const;  // the first rank of each host, in host order
    bool shares_memory() const;        // some host has two ranks or more
};

// A value every process keeps at a known address, which a peer reads to
// learn whether it may read this process's memory (process_vm_readv).
extern const uint64_t kProbe;

// This process's identity: "" when DISTC_SHM=0.
std::string host_identity();

// Publishes this rank's identity under "shm/host/<rank>" and reads every rank's.
Locality find_locality(Store &store, int rank, int size, Millis timeout);

}  // namespace distc

// The shared-memory regions (distc_mem_alloc) of a group's local peers that
// this process mapped, so that the collectives reach peers' buffers in them
// with loads and stores instead of the kernel's copies. A peer's region is
// mapped the first time a call names it (its file, opened as
// /proc/<pid>/fd/<fd>: the permission to read the peer's memory), checked
// against its header, and kept for later calls; a region its owner freed is
// unmapped when that peer next names a buffer. One that cannot be mapped is
// remembered, and reached through the kernel as any other buffer.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "backends/host/transport/transport.hpp"

namespace distc {

class PeerMemory {
public:
    explicit PeerMemory(std::vector<pid_t> pids);  // by peer index (this rank's own is never used)
    ~PeerMemory();
    PeerMemory(const PeerMemory &) = delete;
    PeerMemory &operator=(const PeerMemory &) = delete;

    // `peer`'s buffer of this call is `b`: views of its bytes come from its
    // region, if b names one that maps; else none until the next attach.
    // From the thread that runs the group's collectives, as view() is.
    void attach(int peer, const PeerBuffer &b);
    // Where `peer`'s bytes [addr, addr + n) are in this process, if they lie
    // in the region of its last attach, and that is still allocated.
    uint8_t *view(int peer, uint64_t addr, size_t n) const;
    // Regions mapped now, over every peer (for tests).
    size_t mapped() const;

    // Regions kept per peer; past that, the one named longest ago goes.
    static constexpr size_t kKeep = 16;

private:
    struct Mapping {
        uint64_t id, base, bytes;  // the region and where its bytes start in the owner
        uint8_t *map;              // null: it could not be mapped
        size_t mapped;
        uint64_t used;  // the attach that last named it
    };
    bool live(const Mapping &m) const;
    Mapping map(int peer, const PeerBuffer &b);
    static void unmap(Mapping &m);

    std::vector<pid_t> pids_;
    std::vector<std::vector<Mapping>> maps_;  // by peer
    std::vector<const Mapping *> current_;    // by peer: its last attach's region, if mapped
    uint64_t attaches_ = 0;
};

}  // namespace distc

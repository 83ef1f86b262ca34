// One shared memory segment per group's host: an anonymous memfd that the
// host's first rank creates and hands to the others over an abstract Unix
// socket (SCM_RIGHTS), so that no name exists anywhere in the file system
// and nothing outlives the ranks, even when all of them are killed.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/store/store.hpp"
#include "core/util/fn_ref.hpp"

namespace distc {

class Segment {
public:
    // `members`: the ranks sharing it, in rank order, and their processes
    // (`pids`); members[0] creates it and hands it only to a connection from
    // the process of the rank it names (SO_PEERCRED), as abstract sockets
    // have no permissions of their own.
    // Keys (in the group's key space, after `key`): "seg" (where the socket
    // is, or why the segment could not be made) and "fail" (a member gave
    // up). The creator lays the zeroed segment out with `init` before
    // handing it on.
    Segment(Store &store, const std::string &key, int rank, const std::vector<int> &members,
            const std::vector<pid_t> &pids, size_t bytes, Millis timeout, FnRef<void(uint8_t *)> init);
    ~Segment();
    Segment(const Segment &) = delete;
    Segment &operator=(const Segment &) = delete;

    uint8_t *base() const { return base_; }

private:
    uint8_t *base_ = nullptr;  // one mapping per process, shared by its ranks
};

}  // namespace distc

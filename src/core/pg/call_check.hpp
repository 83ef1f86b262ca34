// Debug mode (DISTC_DEBUG=detail) for groups whose backend is an engine's
// (MPI, NCCL, a plugin): the host backend checks its own calls inside its
// executor (host_backend.cpp). Here, before each collective and on the
// caller's thread, the ranks gather what each calls; a mismatch fails the
// call on every rank with DISTC_EINVAL naming who calls what, before the
// engine sees it (MPI takes a mismatched call's bytes as data, or ends the
// job). As with torch's debug wrapper, a call, asynchronous or not, returns
// only once every rank has made its own.
#pragma once

#include <memory>

#include "core/pg/async_backend.hpp"

namespace distc {

class CallCheck {
public:
    // The check for a group on `engine`, or nullptr (with a warning on
    // stderr) where there is no way to make one. It gathers through a host
    // group of its own in the group's store, or, when the store is this
    // process's alone (`private_store`: mpi://), through the engine's own
    // allgather of host bytes.
    static std::unique_ptr<CallCheck> make(const AsyncGroupInfo &info, AsyncBackend &engine, bool private_store);

    // Throws AgreedError(DISTC_EINVAL) when the ranks' calls of `a` differ;
    // the exchange's own failure otherwise, its message saying it was the
    // check (BlockingCallTimedOut from an engine that overran its timeout).
    void check(const AsyncArgs &a);
    void abort();
    // Whether it has a host group of its own (its keys are in the store).
    bool own_group() const { return own_ != nullptr; }

private:
    CallCheck(std::unique_ptr<AsyncBackend> own, AsyncBackend &via, int size) :
        own_(std::move(own)), via_(via), size_(size) {}
    std::unique_ptr<AsyncBackend> own_;  // the host group it gathers in, or null
    AsyncBackend &via_;                  // own_, or the engine
    const int size_;
};

}  // namespace distc

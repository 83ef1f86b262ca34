#include "core/pg/call_check.hpp"

#include <algorithm>
#include <cstdio>
#include <vector>

#include "core/store/prefix_store.hpp"
#include "core/util/error.hpp"

namespace distc {

std::unique_ptr<CallCheck> CallCheck::make(const AsyncGroupInfo &info, AsyncBackend &engine, bool private_store) {
    if (!private_store) {
        // Keys under "debug/" of the group's key space (creation.cpp removes
        // them once every rank is connected).
        AsyncGroupInfo own = info;
        own.store = std::make_shared<PrefixStore>("debug", info.store);
        own.name = info.name + "/debug";
        own.device = -1;
        auto host = make_host_backend(own, false);
        AsyncBackend &via = *host;
        return std::unique_ptr<CallCheck>(new CallCheck(std::move(host), via, info.size));
    }
    if (engine.device_types() & (uint64_t(1) << 1))  // kDLCPU
        return std::unique_ptr<CallCheck>(new CallCheck(nullptr, engine, info.size));
    std::fprintf(
        stderr,
        "distc: rank %d: group '%s': DISTC_DEBUG=detail cannot check calls on the %s backend: it takes no host "
        "memory and its ranks share no store\n",
        info.rank, info.name.c_str(), engine.name());
    return nullptr;
}

void CallCheck::check(const AsyncArgs &a) {
    std::vector<Call> all(static_cast<size_t>(size_));
    // Every rank makes this same call whatever it checks.
    AsyncArgs x = a;
    x.op = "debug-mode check";
    x.stream = nullptr;
    x.call = make_call("allgather", int(DType::UInt8), -1, -1, sizeof(Call), a.call.seq);
    try {
        if (own_) {
            std::vector<Tensor> outs(all.size());
            for (size_t r = 0; r < all.size(); ++r) outs[r] = flat_tensor(&all[r], DType::UInt8, sizeof(Call));
            Call mine = a.call;
            x.blocking = true;
            own_->allgather(nullptr, outs, flat_tensor(&mine, DType::UInt8, sizeof mine), x);
        } else {
            gather_via_engine(all.data(), a.call, x);
        }
    } catch (const Error &e) {
        fail(e.code(), "DISTC_DEBUG=detail's check of " + describe_op(a.op, a.seq, *a.label) + ": " + e.what());
    }
    std::string msg = disagreement(all);
    if (!msg.empty()) fail_agreed(DISTC_EINVAL, msg);
}

void CallCheck::gather_via_engine(Call *all, const Call &mine, const AsyncArgs &x) {
    // What the engine reads and writes, on the heap: after a timeout it may
    // still write there, so then it is left to it.
    struct Exchange {
        Call mine;
        std::vector<Call> all;
        std::vector<Tensor> outs;
    };
    auto *ex = new Exchange{mine, std::vector<Call>(static_cast<size_t>(size_)), {}};
    for (Call &c : ex->all) ex->outs.push_back(flat_tensor(&c, DType::UInt8, sizeof(Call)));
    // Blocking, on this thread, but interruptible: its timeout and an abort
    // end it (MPI's own blocking allgather could only end the job).
    AsyncArgs blocking = x;
    blocking.blocking = blocking.interruptible = true;
    via_.allgather(nullptr, ex->outs, flat_tensor(&ex->mine, DType::UInt8, sizeof(Call)),
                   blocking);  // throws: `ex` stays
    std::copy(ex->all.begin(), ex->all.end(), all);
    delete ex;
}

void CallCheck::abort() {
    if (own_) own_->abort();
}

}  // namespace distc

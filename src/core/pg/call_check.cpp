#include "core/pg/call_check.hpp"

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
    if (takes_host_memory(engine.device_types()))
        return std::unique_ptr<CallCheck>(new CallCheck(nullptr, engine, info.size));
    std::fprintf(
        stderr,
        "distc: rank %d: group '%s': DISTC_DEBUG=detail cannot check calls on the %s backend: it takes no host "
        "memory and its ranks share no store\n",
        info.rank, info.name.c_str(), engine.name());
    return nullptr;
}

void CallCheck::check(const AsyncArgs &a) {
    // Every rank makes this same call whatever it checks: blocking, on this
    // thread, yet ended by its timeout and an abort (an engine's blocking
    // collective may otherwise not be: MPI's would end the job).
    AsyncArgs x = a;
    x.op = "debug-mode check";
    x.stream = nullptr;
    x.blocking = x.interruptible = true;
    x.call = make_call("allgather", int(DType::UInt8), -1, -1, sizeof(Call), a.call.seq);
    // What the exchange reads and writes, on the heap: after a failure an
    // engine may still write there, so then it is left to it.
    struct Exchange {
        Call mine;
        std::vector<Call> all;
        std::vector<Tensor> outs;
    };
    auto *ex = new Exchange{a.call, std::vector<Call>(static_cast<size_t>(size_)), {}};
    for (Call &c : ex->all) ex->outs.push_back(flat_tensor(&c, DType::UInt8, sizeof(Call)));
    try {
        via_.allgather(nullptr, ex->outs, flat_tensor(&ex->mine, DType::UInt8, sizeof(Call)), x);
    } catch (const Error &e) {
        fail(e.code(), "DISTC_DEBUG=detail's check of " + describe_op(a.op, a.seq, *a.label) + ": " + e.what());
    }
    const std::string msg = disagreement(ex->all);
    delete ex;
    if (!msg.empty()) fail_agreed(DISTC_EINVAL, msg);
}

void CallCheck::abort() {
    if (own_) own_->abort();
}

}  // namespace distc

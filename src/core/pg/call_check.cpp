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
    Call mine = a.call;
    std::vector<Tensor> outs(all.size());
    for (size_t r = 0; r < all.size(); ++r) outs[r] = flat_tensor(&all[r], DType::UInt8, sizeof(Call));
    const Tensor in = flat_tensor(&mine, DType::UInt8, sizeof mine);
    // Every rank makes this same call whatever it checks.
    AsyncArgs x = a;
    x.op = "allgather";
    x.stream = nullptr;
    x.blocking = true;
    x.call = make_call("allgather", int(DType::UInt8), -1, -1, sizeof mine, a.call.seq);
    try {
        via_.allgather(nullptr, outs, in, x);
    } catch (const Error &e) {
        fail(e.code(), "DISTC_DEBUG=detail's check of " + describe_op(a.op, a.seq, *a.label) + ": " + e.what());
    }
    std::string msg = disagreement(all);
    if (!msg.empty()) fail_agreed(DISTC_EINVAL, msg);
}

void CallCheck::abort() {
    if (own_) own_->abort();
}

}  // namespace distc

#include "core/pg/call_check.hpp"

#include <algorithm>
#include <cstdio>
#include <vector>

#include "core/store/prefix_store.hpp"
#include "core/util/error.hpp"

namespace distc {

std::unique_ptr<CallCheck> CallCheck::make(const AsyncGroupInfo &info, AsyncBackend &engine, bool private_store,
                                           const void *runner) {
    if (!private_store) {
        // Keys under "debug/" of the group's key space (creation.cpp removes
        // them once every rank is connected).
        AsyncGroupInfo own = info;
        own.store = std::make_shared<PrefixStore>("debug", info.store);
        own.name = info.name + "/debug";
        own.device = -1;
        auto host = make_host_backend(own, false);
        AsyncBackend &via = *host;
        return std::unique_ptr<CallCheck>(new CallCheck(std::move(host), via, info.size, runner));
    }
    if (engine.device_types() & (uint64_t(1) << 1))  // kDLCPU
        return std::unique_ptr<CallCheck>(new CallCheck(nullptr, engine, info.size, runner));
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
    // The group's completion callbacks run on the engine's thread, which
    // would wait here for itself.
    if (in_callback_of(runner_))
        fail(DISTC_ESTATE, "it cannot run in a completion callback of the group's own collectives on this backend");
    // What the engine reads and writes, on the heap: after a timeout it may
    // still write there, so then it is left to it.
    struct Exchange {
        Call mine;
        std::vector<Call> all;
        std::vector<Tensor> outs;
    };
    auto *ex = new Exchange{mine, std::vector<Call>(static_cast<size_t>(size_)), {}};
    for (Call &c : ex->all) ex->outs.push_back(flat_tensor(&c, DType::UInt8, sizeof(Call)));
    auto w = std::make_shared<Work>(x.seq, x.op, *x.label);
    AsyncArgs async = x;
    async.blocking = false;
    try {
        via_.allgather(w, ex->outs, flat_tensor(&ex->mine, DType::UInt8, sizeof(Call)), async);
    } catch (...) {
        delete ex;  // refused: the engine took nothing
        throw;
    }
    // The engine fails it at its timeout; the margin covers its detection.
    if (!w->wait(x.timeout + Millis(2000)))
        fail(DISTC_ETIMEOUT, "the " + std::string(via_.name()) + " backend did not complete it within " +
                                 std::to_string(x.timeout.count()) + " ms");
    if (w->status() != 0) fail(w->status(), w->message());
    std::copy(ex->all.begin(), ex->all.end(), all);
    delete ex;
}

void CallCheck::abort() {
    if (own_) own_->abort();
}

}  // namespace distc

#include "core/pg/call.hpp"

#include <cstring>
#include <iterator>

#include "core/pg/types.hpp"

namespace distc {

namespace {
constexpr const char *kKinds[] = {"allreduce", "broadcast",      "reduce",   "allgather",       "gather",
                                  "scatter",   "reduce_scatter", "alltoall", "alltoall_single", "barrier"};
constexpr uint8_t kUnknown = 0xff;
}  // namespace

bool Call::all_to_all() const { return kind == 7 || kind == 8; }

Call make_call(const char *kind, int dtype, int reduce, int root, uint64_t count, uint32_t seq) {
    Call c;
    c.seq = seq;
    // Kinds are string literals and a group repeats the same ones: the last
    // lookup's pointer answers without comparing strings.
    thread_local const char *last = nullptr;
    thread_local uint8_t last_kind = kUnknown;
    if (kind != last) {
        last_kind = kUnknown;
        for (size_t i = 0; i < std::size(kKinds); ++i)
            if (std::strcmp(kind, kKinds[i]) == 0) {
                last_kind = static_cast<uint8_t>(i);
                break;
            }
        last = kind;
    }
    c.kind = last_kind;
    c.dtype = dtype < 0 ? 0xff : static_cast<uint8_t>(dtype);
    c.op = reduce < 0 ? 0xff : static_cast<uint8_t>(reduce);
    c.root = root;
    c.count = c.all_to_all() ? 0 : count;
    return c;
}

std::string describe(const Call &c) {
    std::string s = c.kind < std::size(kKinds) ? kKinds[c.kind] : "an unknown collective";
    s += " #" + std::to_string(c.seq);
    std::string args;
    auto add = [&](const std::string &a) { args += (args.empty() ? "" : ", ") + a; };
    if (c.dtype != 0xff) add(dtype_name(static_cast<DType>(c.dtype)));
    if (c.dtype != 0xff && !c.all_to_all()) add(std::to_string(c.count) + " elements");
    if (c.root >= 0) add("root " + std::to_string(c.root));
    if (c.op != 0xff) add(op_name(static_cast<ReduceOp>(c.op)));
    return args.empty() ? s : s + " (" + args + ")";
}

}  // namespace distc

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

uint8_t lookup_kind(const char *kind) {
    for (size_t i = 0; i < std::size(kKinds); ++i)
        if (std::strcmp(kind, kKinds[i]) == 0) return static_cast<uint8_t>(i);
    return kUnknown;
}

namespace {
std::string kind_name(const Call &c) { return c.kind < std::size(kKinds) ? kKinds[c.kind] : "an unknown collective"; }

std::string args_of(const Call &c) {
    std::string args;
    auto add = [&](const std::string &a) { args += (args.empty() ? "" : ", ") + a; };
    if (c.dtype != 0xff) add(dtype_name(static_cast<DType>(c.dtype)));
    if (c.dtype != 0xff && !c.all_to_all()) add(std::to_string(c.count) + " elements");
    if (c.root >= 0) add("root " + std::to_string(c.root));
    if (c.op != 0xff) add(op_name(static_cast<ReduceOp>(c.op)));
    return args;
}
}  // namespace

std::string describe(const Call &c) {
    std::string s = kind_name(c) + " #" + std::to_string(c.seq), args = args_of(c);
    return args.empty() ? s : s + " (" + args + ")";
}

std::string describe_call(const Call &c) { return kind_name(c) + "(" + args_of(c) + ")"; }

}  // namespace distc

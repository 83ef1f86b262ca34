#include "core/pg/call.hpp"

#include <cstring>
#include <iterator>
#include <map>
#include <vector>

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

uint64_t split_digest(int rank, Span<size_t> in_bytes, Span<size_t> out_bytes) {
    // Pair (x, y) adds x's bytes to y times w(x, y) on x and takes y's bytes
    // from x times the same w on y: over the group the terms cancel exactly
    // when every pair agrees. Odd weights: one pair that disagrees never sums to 0.
    auto w = [](uint64_t x, uint64_t y) {
        uint64_t z = (x << 32 | y) + 0x9e3779b97f4a7c15ULL;  // splitmix64
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
        return (z ^ (z >> 31)) | 1;
    };
    uint64_t d = 0;
    const auto me = static_cast<uint64_t>(rank);
    for (size_t p = 0; p < in_bytes.size(); ++p) d += in_bytes[p] * w(me, p) - out_bytes[p] * w(p, me);
    return d;
}

std::string disagreement(Span<Call> all) {
    std::map<std::string, std::vector<size_t>> calls;  // what is called -> by whom
    uint64_t digest = 0;
    for (size_t r = 0; r < all.size(); ++r) {
        calls[describe_call(all[r])].push_back(r);
        digest += all[r].count;
    }
    const std::string head = "ranks disagree on collective #" + std::to_string(all.size() ? all[0].seq : 0) + ":";
    if (calls.size() == 1) {
        if (!all.size() || !all[0].all_to_all() || digest == 0) return "";
        return head + " " + kind_name(all[0]) + ": the ranks' split sizes disagree";
    }
    std::string msg = head;
    for (const auto &e : calls) {
        msg += e.second.size() == 1 ? " rank " : " ranks ";
        for (size_t i = 0; i < e.second.size(); ++i) msg += (i ? "," : "") + std::to_string(e.second[i]);
        msg += " call " + e.first + ";";
    }
    msg.pop_back();
    return msg;
}

}  // namespace distc

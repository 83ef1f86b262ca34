// What a collective is, in a form every message of it carries: the mesh's
// frames hold it, and a rank that receives a frame of another call than its
// own fails with both calls named (DISTC_EINVAL) instead of reading bytes
// meant for something else.
#pragma once

#include <cstdint>
#include <string>

namespace distc {

struct Call {
    uint32_t seq = 0;     // the group's sequence number (the operation's tag)
    uint8_t kind = 0;     // index of the operation's name (call.cpp), 0xff: unknown
    uint8_t dtype = 0xff; // DType, 0xff: none
    uint8_t op = 0xff;    // ReduceOp, 0xff: none
    uint8_t pad = 0;
    int32_t root = -1;
    uint32_t pad2 = 0;
    uint64_t count = 0;   // elements; 0 for all-to-all, whose per-peer sizes differ by design

    // The same operation, whatever its sequence number.
    bool same_as(const Call &o) const {
        return kind == o.kind && dtype == o.dtype && op == o.op && root == o.root && count == o.count;
    }
    bool all_to_all() const;
};
static_assert(sizeof(Call) == 24, "Call travels in frame headers");

// `kind` is the operation's name ("allreduce"); dtype, reduce and root -1 when they do not apply.
Call make_call(const char *kind, int dtype, int reduce, int root, uint64_t count, uint32_t seq);
// "allreduce #3 (float32, 4 elements, SUM)"
std::string describe(const Call &c);

}  // namespace distc

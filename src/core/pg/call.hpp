// What a collective is, in a form every message of it carries: the mesh's
// frames hold it, and a rank that receives a frame of another call than its
// own fails with both calls named (DISTC_EINVAL) instead of reading bytes
// meant for something else.
#pragma once

#include <cstdint>
#include <string>

#include "core/util/span.hpp"

namespace distc {

struct Call {
    uint32_t seq = 0;      // the group's sequence number (the operation's tag)
    uint8_t kind = 0;      // index of the operation's name (call.cpp), 0xff: unknown
    uint8_t dtype = 0xff;  // DType, 0xff: none
    uint8_t op = 0xff;     // ReduceOp, 0xff: none
    uint8_t pad = 0;
    int32_t root = -1;
    uint32_t pad2 = 0;
    // Elements. All-to-all's per-peer sizes differ by design: there the host
    // backend puts this rank's share of a digest of every rank's split sizes
    // (Algorithms::alltoallv), which sums to 0 over the group when they agree.
    uint64_t count = 0;

    // The same operation, whatever its sequence number.
    bool same_as(const Call &o) const {
        return kind == o.kind && dtype == o.dtype && op == o.op && root == o.root && (count == o.count || all_to_all());
    }
    bool all_to_all() const { return kind == 7 || kind == 8; }  // call.cpp's kKinds
};
static_assert(sizeof(Call) == 24, "Call travels in frame headers");

// The index of an operation's name, 0xff when unknown (a string compare).
uint8_t lookup_kind(const char *kind);

// `kind` is the operation's name ("allreduce", a string literal); dtype,
// reduce and root -1 when they do not apply. Inline: every collective makes one.
inline Call make_call(const char *kind, int dtype, int reduce, int root, uint64_t count, uint32_t seq) {
    // A group repeats the same few kinds: the last lookup's pointer answers.
    thread_local const char *last = nullptr;
    thread_local uint8_t last_kind = 0xff;
    if (kind != last) {
        last_kind = lookup_kind(kind);
        last = kind;
    }
    Call c;
    c.seq = seq;
    c.kind = last_kind;
    c.dtype = dtype < 0 ? 0xff : static_cast<uint8_t>(dtype);
    c.op = reduce < 0 ? 0xff : static_cast<uint8_t>(reduce);
    c.root = root;
    c.count = c.all_to_all() ? 0 : count;
    return c;
}
// "allreduce #3 (float32, 4 elements, SUM)"
std::string describe(const Call &c);
// The same without its number: "allreduce(float32, 4 elements, SUM)".
std::string describe_call(const Call &c);

// Rank `rank`'s share of a digest of every pair's split sizes in an
// all-to-all (its Call::count): the shares sum to 0 over the group when all
// pairs agree. `in_bytes[p]`: what this rank sends p; `out_bytes[p]`: what it takes from p.
uint64_t split_digest(int rank, Span<size_t> in_bytes, Span<size_t> out_bytes);

// Every rank's call of one collective (`all[r]`: rank r's), as debug mode
// gathers them: "" when they agree, else "ranks disagree on collective #5:
// rank 1 call allreduce(float32, 5 elements, SUM); ranks 0,2 call ...".
std::string disagreement(Span<Call> all);

}  // namespace distc

// The flight recorder: every group keeps its recent operations in a bounded
// ring (DISTC_TRACE_BUFFER entries, 0: off) and writes them out as JSON
// lines on demand, or by itself into DISTC_TRACE_DIR when an operation times
// out, the group is aborted or a peer is lost, so that `distc-trace` can
// line up every rank's records and name the rank at fault. Recording takes
// no lock shared with other slots and allocates nothing unless an operation
// fails (its message).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <ostream>
#include <string>
#include <vector>

#include "core/work/work.hpp"

namespace distc {

struct TraceOp {
    const char *kind;
    uint64_t seq;  // 0: point-to-point
    OpLabel label;
    int root = -1;
    int reduce = -1;  // ReduceOp, or -1
    bool blocking = false;
};

class TraceRecorder final : public TraceSink {
public:
    // `global_ranks[i]`: group rank i's rank in the root group (empty: the root group).
    TraceRecorder(std::string group, int rank, int size, std::vector<int> global_ranks, std::string backend);
    // A recorder for a new group, registered for dump_all; null when recording is off.
    static std::shared_ptr<TraceRecorder> make(std::string group, int rank, int size, std::vector<int> global_ranks,
                                               std::string backend);

    // An operation starts (blocking) or is queued (asynchronous): its entry's id.
    uint64_t begin(const TraceOp &op);
    void finished(uint64_t id, int code, const std::string &message) override;
    void write(std::ostream &out) const;  // the group line, then its records, oldest first

    int global_rank() const;
    // `groups`' records as one trace file (a header line, then each group's).
    static void write_file(const std::string &path, const std::vector<std::shared_ptr<TraceRecorder>> &groups);
    // Every live group's records into `dir` (one file per process and rank); the path written.
    static std::string dump_all(const std::string &dir);
    // dump_all(DISTC_TRACE_DIR) when that is set, at most once per group.
    void dump_on_failure() noexcept;

private:
    struct Slot {
        std::atomic_flag busy = ATOMIC_FLAG_INIT;
        uint64_t id = 0;  // 0: empty
        TraceOp op{};
        int64_t thread = 0;
        int64_t queued_us = 0, ended_us = 0;
        int state = 0;  // kQueued ...
        int code = 0;
        std::string error;
    };
    const std::string group_, backend_;
    const int rank_, size_;
    const std::vector<int> global_ranks_;
    std::unique_ptr<Slot[]> slots_;
    const size_t capacity_;
    std::atomic<uint64_t> next_{0};
    std::atomic<bool> dumped_{false};
};

}  // namespace distc

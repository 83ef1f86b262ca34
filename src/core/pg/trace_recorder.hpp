// The flight recorder: every group keeps its recent operations in a bounded
// ring (DISTC_TRACE_BUFFER entries, 0: off) and writes them out as JSON
// lines on demand, or by itself into DISTC_TRACE_DIR when an operation times
// out, the group is aborted or a peer is lost, so that `distc-trace` can
// line up every rank's records and name the rank at fault. Recording takes
// no lock, makes no system call and allocates nothing unless an operation
// fails (its message).
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
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
    // Taken in pieces: a TraceOp built by the caller would be one more copy per operation.
    uint64_t begin(const char *kind, uint64_t seq, const OpLabel &label, int root, int reduce, bool blocking);
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
    // A slot is written without a lock: its id comes from one atomic
    // counter, so only a ring that wraps past an operation still running
    // can put two writers on it, and then a record is garbled, never
    // unsafe. `version` (4 * id + phase; odd: being written) lets a reader
    // take a consistent copy. Every field is an atomic, stored relaxed or
    // released: plain moves on the common machines.
    struct Slot {
        std::atomic<uint64_t> version{0};  // 0: empty
        std::atomic<const char *> kind{nullptr}, dtype{nullptr};
        std::atomic<uint64_t> seq{0}, numel{0}, n{0};
        std::atomic<uint64_t> peer_tag{0};  // peer, tag: 32 bits each
        std::atomic<uint64_t> meta{0};      // root 32, reduce + 1, form, blocking, state: 8 each
        std::atomic<uint64_t> who{0};       // the thread's id, the error code: 32 bits each
        std::atomic<int64_t> queued_us{0}, ended_us{0};
    };
    void failed(uint64_t id, int code, const std::string &message);  // finished's rare part
    struct Record;                                                   // a slot's consistent copy
    bool read(uint64_t id, Record &out) const;

    const std::string group_, backend_;
    const int rank_, size_;
    const std::vector<int> global_ranks_;
    const size_t capacity_;  // records kept
    const uint64_t mask_;    // the ring: a power of two at least capacity_, less one
    std::unique_ptr<Slot[]> slots_;
    std::atomic<uint64_t> next_{0};
    std::atomic<bool> dumped_{false};
    // Failed operations' messages, by id: failures are rare, and the slots
    // then hold no string.
    mutable std::mutex errors_mu_;
    std::map<uint64_t, std::string> errors_;
};

}  // namespace distc

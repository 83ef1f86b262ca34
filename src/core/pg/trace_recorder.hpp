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

#include "core/util/tick_clock.hpp"
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

    // An operation starts (blocking) or is queued (asynchronous): its entry's
    // id (a collective's is its sequence number). A point-to-point operation
    // (`seq` 0) says how many collectives the group had begun (`after`), which
    // places it among them in a dump. Taken in pieces: a TraceOp built by the
    // caller would be one more copy per operation. Both inline: they are on
    // every operation's path.
    uint64_t begin(const char *kind, uint64_t seq, const OpLabel &label, int root, int reduce, bool blocking,
                   uint64_t after = 0) {
        uint64_t index = seq, id = seq;
        Ring *ring = &coll_;
        if (!seq) {
            ring = &p2p_;
            index = p2p_.last.fetch_add(1, std::memory_order_relaxed) + 1;
            id = kP2p | index;
            root = static_cast<int>(static_cast<uint32_t>(after));  // a point-to-point operation has no root
        }
        Slot &s = ring->at(index, mask_);
        s.version.store(4 * index + 1, std::memory_order_relaxed);
        put(s.kind, kind);
        put(s.dtype, label.dtype);
        put(s.numel, label.numel);
        put(s.extra, sends(label.form) ? pair32(label.peer, label.tag) : label.n);
        put(s.meta, static_cast<uint32_t>(root) | static_cast<uint64_t>(static_cast<uint8_t>(reduce + 1)) << 32 |
                        static_cast<uint64_t>(label.form) << 40 | static_cast<uint64_t>(blocking) << 48);
        put(s.queued_us, tick_now_us());
        put(s.who, who_of(t_thread_id ? t_thread_id : thread_id_slow(), blocking ? kStarted : kQueued, 0));
        put(s.version, 4 * index + 2);
        return id;
    }
    void finished(uint64_t id, int code, const std::string &message) override {
        if (code != 0) return failed(id, code, message);
        end(id, kCompleted);
    }
    void write(std::ostream &out) const;  // the group line, then its records, oldest first

    int global_rank() const;
    // `groups`' records as one trace file (a header line, then each group's).
    static void write_file(const std::string &path, const std::vector<std::shared_ptr<TraceRecorder>> &groups);
    // Every live group's records into `dir` (one file per process and rank); the path written.
    static std::string dump_all(const std::string &dir);
    // dump_all(DISTC_TRACE_DIR) when that is set, at most once per group.
    void dump_on_failure() noexcept;

private:
    // A slot is written without a lock: a collective's slot is its sequence
    // number's (which the group already took with an atomic increment, so
    // recording takes none), a point-to-point operation's comes from an
    // atomic counter of its own ring. Only a ring that wraps past an
    // operation still running can put two writers on one slot, and then a
    // record is garbled, never unsafe. `version` (4 * index + 1 while begun,
    // + 2 once written) lets a reader take a consistent copy. Every field is
    // an atomic stored relaxed or released: plain moves on the common
    // machines, eight words in one cache line.
    struct alignas(64) Slot {
        std::atomic<uint64_t> version{0};  // 0: empty
        std::atomic<const char *> kind{nullptr}, dtype{nullptr};
        std::atomic<uint64_t> numel{0};
        std::atomic<uint64_t> extra{0};  // List, Ops, Bytes: the count; Send, Recv: peer and tag, 32 bits each
        std::atomic<uint64_t> meta{0};   // root (point-to-point: `after`) 32, reduce + 1, form, blocking: 8 each
        std::atomic<int64_t> queued_us{0};
        std::atomic<uint64_t> who{0};  // the thread's id 24, state 4, duration in us 36
    };
    // Collectives and point-to-point operations keep their last `capacity_`
    // each; an id names its ring (kP2p set: point-to-point) and index.
    static constexpr uint64_t kP2p = uint64_t{1} << 63;
    struct Ring {
        std::unique_ptr<Slot[]> slots;
        std::atomic<uint64_t> last{0};  // point-to-point: the highest index begun (collectives keep none: newest())
        Slot &at(uint64_t index, uint64_t mask) { return slots[(index - 1) & mask]; }
    };
    uint64_t newest(const Ring &ring) const;  // the highest index in `ring`
    Ring &ring_of(uint64_t id) { return id & kP2p ? p2p_ : coll_; }
    void failed(uint64_t id, int code, const std::string &message);  // finished's rare part
    enum State { kQueued = 1, kStarted, kCompleted, kFailed, kAborted };
    // The thread (Linux's ids fit 24 bits), the state and, once ended, the
    // duration in microseconds (up to about 19 hours).
    static constexpr uint64_t kMaxDuration = (uint64_t{1} << 36) - 1;
    static uint64_t who_of(uint64_t thread, int state, uint64_t duration_us) {
        return (thread & 0xffffff) | static_cast<uint64_t>(state) << 24 |
               (duration_us < kMaxDuration ? duration_us : kMaxDuration) << 28;
    }
    // An end is one store (`who`: state and duration), which a reader sees
    // whole or not at all, so it needs no version of its own.
    void end(uint64_t id, int state) {
        uint64_t index = id & ~kP2p;
        Slot &s = ring_of(id).at(index, mask_);
        if (s.version.load(std::memory_order_acquire) != 4 * index + 2) return;  // overwritten: the ring moved on
        int64_t took = tick_now_us() - s.queued_us.load(std::memory_order_relaxed);
        put(s.who, who_of(s.who.load(std::memory_order_relaxed), state, took > 0 ? static_cast<uint64_t>(took) : 0));
    }
    static bool sends(OpLabel::Form f) { return f == OpLabel::Form::Send || f == OpLabel::Form::Recv; }
    static uint64_t pair32(int32_t lo, int32_t hi) {
        return static_cast<uint32_t>(lo) | static_cast<uint64_t>(static_cast<uint32_t>(hi)) << 32;
    }
    template <typename T, typename V>
    static void put(std::atomic<T> &a, V v) {
        a.store(static_cast<T>(v), std::memory_order_release);
    }
    static inline thread_local uint64_t t_thread_id = 0;  // constant-initialised: no guard, no wrapper
    static uint64_t thread_id_slow();
    struct Record;  // a slot's consistent copy
    bool read(const Ring &ring, uint64_t index, Record &out) const;
    void write_op(std::ostream &out, const Record &r) const;

    const std::string group_, backend_;
    const int rank_, size_;
    const std::vector<int> global_ranks_;
    const size_t capacity_;  // records kept
    const uint64_t mask_;    // the ring: a power of two at least capacity_, less one
    Ring coll_, p2p_;
    std::atomic<bool> dumped_{false};
    // Failed operations' codes and messages, by id: failures are rare, and
    // the slots then hold no string.
    mutable std::mutex errors_mu_;
    std::map<uint64_t, std::pair<int, std::string>> errors_;
};

}  // namespace distc

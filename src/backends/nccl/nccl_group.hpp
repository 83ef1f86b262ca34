// One rank's NCCL communicator and what keeps it safe: the events that tell
// when stream-ordered work finished, and the watchdog thread that completes
// work, fails work past its timeout or hit by an engine error, and then
// aborts the communicator so that no rank hangs.
#pragma once

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "support/plugin_failure.hpp"
#include "distc/sys/backend.h"

namespace distc_nccl {

using Clock = std::chrono::steady_clock;

using distc_plugin::Failure;
using distc_plugin::raise;
// cudaError_t / ncclResult_t checks naming what was called.
void check_cuda(cudaError_t e, const char *what);

// The caller's current device, switched to the group's for a call and back.
struct DeviceGuard {
    int prev = -1, dev;
    explicit DeviceGuard(int d) : dev(d) {
        if (cudaGetDevice(&prev) != cudaSuccess || prev != d) check_cuda(cudaSetDevice(d), "cudaSetDevice");
    }
    ~DeviceGuard() {
        if (prev >= 0 && prev != dev) cudaSetDevice(prev);
    }
    DeviceGuard(const DeviceGuard &) = delete;
    DeviceGuard &operator=(const DeviceGuard &) = delete;
};

class Group {
public:
    // Rendezvous through `store` (rank 0 publishes the ncclUniqueId) and init.
    Group(const distc_backend_group_info &info);
    // A communicator made by ncclCommSplit of `parent` (already initialised).
    Group(const distc_backend_group_info &info, ncclComm_t comm, int device);
    ~Group();

    int device() const { return device_; }
    int rank() const { return rank_; }
    int size() const { return size_; }

    // Runs `enqueue` (NCCL and CUDA calls on `stream`) under the launch lock,
    // waits out a non-blocking communicator's ncclInProgress, then records
    // the work's completion event and hands it to the watchdog.
    // Throws Failure before anything is enqueued when the group is aborted.
    // Reduction operators `enqueue` creates (PREMUL_SUM) go into `ops` and
    // are destroyed once the launch has settled.
    using Enqueue = std::function<ncclResult_t(ncclComm_t, cudaStream_t, std::vector<ncclRedOp_t> &ops)>;
    void launch(distc_work *work, const distc_backend_op_args *a, const Enqueue &enqueue);

    // ncclCommSplit of this communicator (a collective on it); nullptr for NOCOLOR.
    Group *split(int color, int key, const distc_backend_group_info *info);

    // Aborts the communicator and fails everything in flight: the first entry
    // (the culprit) with `code` and `culprit_msg`, the rest with DISTC_EABORTED
    // naming `why`. Idempotent, any thread.
    void abort(int code, const std::string &why, const std::string &culprit_msg);

    int *barrier_buffer() const { return barrier_buf_; }

private:
    struct Inflight {
        distc_work *work;  // nullptr: a sentinel event covering detached operations
        cudaStream_t stream;
        cudaEvent_t event;
        Clock::time_point deadline;
        int64_t timeout_ms;
        const char *op;  // "allreduce" (static)
        uint64_t seq;
        bool sentinel_of_blocking;
        std::string label() const;  // "allreduce #3", as messages name it
    };
    // Blocking calls (DISTC_OP_BLOCKING: "detached" here) are completed at launch and
    // tracked by one event per stream per 200 us rather than one each; the
    // watchdog covers a stream's tail after 1 ms. Guarded by launch_mu_.
    struct StreamState {
        cudaStream_t stream;
        Clock::time_point last_record{};
        bool pending = false;          // detached operations after the last event
        Clock::time_point first{};     // when the first of them was launched
        Clock::time_point deadline{};  // the earliest of their deadlines
        int64_t timeout_ms = 0;
        const char *op = "";  // that operation
        uint64_t seq = 0;
    };
    // Records a sentinel event after `st`'s pending operations (launch_mu_ held, device set).
    cudaError_t cover(StreamState &st, Clock::time_point now);
    void cover_all(bool only_old);
    void init_comm(const distc_backend_group_info &info);
    // Every rank of this group reaches `name` (through the store) within the timeout.
    void store_barrier(const std::string &name, const char *what);
    void settle(ncclResult_t r, const char *what, Clock::time_point deadline);
    void watchdog();
    void start_watchdog();

    int rank_ = 0, size_ = 1, device_ = 0;
    distc_store *store_ = nullptr;  // the group's key space (valid until destroy returns)
    int64_t timeout_ms_ = 0;
    uint64_t splits_ = 0;
    ncclComm_t comm_ = nullptr;
    int *barrier_buf_ = nullptr;
    std::mutex launch_mu_;  // NCCL calls on comm_ never overlap (abort included)
    std::mutex mu_;         // inflight_, flags
    std::condition_variable cv_;
    std::deque<Inflight> inflight_;
    std::vector<StreamState> streams_;
    std::atomic<bool> pending_{false};  // some stream has uncovered detached operations
    bool stop_ = false;
    std::atomic<bool> aborted_{false};
    std::string abort_reason_;
    std::thread watchdog_;
};

// Process-wide pool of completion events per device: they outlive groups,
// since a work handle (and its event) may outlive its group.
cudaEvent_t take_event(int device);
void give_event(int device, cudaEvent_t e);

}  // namespace distc_nccl

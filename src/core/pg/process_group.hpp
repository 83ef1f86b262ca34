// A process group: rank, size, name, timeouts, the sequence of operations and
// the worker thread that runs asynchronous ones. Collectives validate their
// arguments here (sizes, dtypes, roots: nothing is sent when they are wrong)
// and hand the data movement to the backend.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/pg/backend.hpp"
#include "core/store/store.hpp"
#include "core/work/work.hpp"

namespace distc {

struct PgOptions {
    std::string backend = "gloo";
    Millis timeout{1800000};
    std::string name = "default_pg";
};

struct OpOptions {
    Millis timeout{-1};  // negative: the group's
    double premul_factor = 1.0;
};

class ProcessGroup {
public:
    ProcessGroup(std::shared_ptr<Store> store, int rank, int size, const PgOptions &opts);
    ~ProcessGroup();
    ProcessGroup(const ProcessGroup &) = delete;
    ProcessGroup &operator=(const ProcessGroup &) = delete;

    int rank() const { return rank_; }
    int size() const { return size_; }
    const std::string &name() const { return name_; }
    const char *backend_name() const { return backend_->name(); }
    Millis timeout() const { return timeout_; }

    // Each returns a Work; with async=false the operation has already run on
    // the calling thread (and a failure was thrown, not stored).
    using WorkPtr = std::shared_ptr<Work>;
    WorkPtr allreduce(std::vector<Tensor> tensors, ReduceOp op, const OpOptions &o, bool async);
    WorkPtr broadcast(Tensor t, int root, const OpOptions &o, bool async);
    WorkPtr reduce(Tensor t, int root, ReduceOp op, const OpOptions &o, bool async);
    WorkPtr allgather(Tensor input, std::vector<Tensor> outputs, const OpOptions &o, bool async);
    WorkPtr gather(Tensor input, std::vector<Tensor> outputs, int root, const OpOptions &o, bool async);
    WorkPtr scatter(std::vector<Tensor> inputs, Tensor output, int root, const OpOptions &o, bool async);
    WorkPtr reduce_scatter(std::vector<Tensor> inputs, Tensor output, ReduceOp op, const OpOptions &o, bool async);
    WorkPtr alltoall(std::vector<Tensor> inputs, std::vector<Tensor> outputs, const OpOptions &o, bool async);
    WorkPtr alltoall_single(Tensor input, Tensor output, std::vector<int64_t> in_splits,
                            std::vector<int64_t> out_splits, const OpOptions &o, bool async);
    WorkPtr barrier(const OpOptions &o, bool async);
    WorkPtr send(Tensor t, int dst, int tag, const OpOptions &o, bool async);
    WorkPtr recv(Tensor t, int src, int tag, const OpOptions &o, bool async);

    void abort();
    bool aborted() const { return aborted_.load(); }

private:
    using Body = std::function<int32_t(const OpCtx &)>;  // returns the source rank or -1
    WorkPtr run(const std::string &what, const OpOptions &o, bool async, Body body);
    void execute(Work &w, const OpCtx &ctx, const Body &body) noexcept;
    void worker_loop();
    void check_rank(int r, const char *what) const;
    void check_reduce(const Tensor &t, ReduceOp op) const;

    std::shared_ptr<Store> store_;
    const int rank_, size_;
    const std::string name_;
    const Millis timeout_;
    std::unique_ptr<Backend> backend_;
    std::atomic<uint64_t> seq_{0};
    std::atomic<bool> aborted_{false};

    struct Item {
        WorkPtr work;
        OpCtx ctx;
        Body body;
    };
    std::mutex mu_;
    std::condition_variable cv_;
    std::deque<Item> queue_;
    bool stopping_ = false;
    std::thread worker_;
};

}  // namespace distc

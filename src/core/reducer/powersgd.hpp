// PowerSGD (arXiv:1905.13727) as a bucket hook of the reducer, after torch's
// powerSGD_hook: each gradient matrix M worth compressing travels as
// P = MQ and Q = M^T P (rank r, P orthogonalized between the two sums), the
// rest as one plain allreduce; M becomes P Q^T / size. Error feedback adds
// the compression's error to the bucket next time; warm start begins Q from
// the last iteration's. Float32 and float64 buckets on the host; others
// reduce plainly.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <vector>

#include "core/reducer/reducer.hpp"

namespace distc {

struct PowerSgdOptions {
    int32_t rank = 1;           // matrix_approximation_rank
    int64_t start_iter = 1000;  // plain allreduces before this iteration
    double min_compression_rate = 2;
    bool error_feedback = true;
    bool warm_start = true;
    double epsilon = 0;  // added to each column's norm when orthogonalizing
    uint64_t seed = 0;
};

struct PowerSgdStats {
    int64_t iter = 0;                // iterations seen (counted at their last bucket)
    uint64_t before = 0, after = 0;  // elements before and after compression, so far
};

class PowerSgd : public std::enable_shared_from_this<PowerSgd> {
public:
    PowerSgd(std::shared_ptr<ProcessGroup> pg, PowerSgdOptions o);
    // The hook: starts the bucket's reduction, returns the chain that ends it.
    std::shared_ptr<Work> reduce(const Reducer::HookBucket &b);
    PowerSgdStats stats() const;

    // One bucket's memories, kept between iterations (as doubles: aligned for either type).
    struct Memory {
        std::vector<double> error, p, q;
    };

private:
    template <typename T>
    std::shared_ptr<Work> compress(const Reducer::HookBucket &b);
    void count(uint64_t before, uint64_t after, bool last);

    std::shared_ptr<ProcessGroup> pg_;
    const PowerSgdOptions o_;
    std::mt19937_64 seeds_;  // one draw per fresh start of a bucket: in bucket order, as on every rank
    std::map<size_t, Memory> memory_;
    mutable std::mutex mu_;  // stats_ (read from any thread)
    PowerSgdStats stats_;
};

}  // namespace distc

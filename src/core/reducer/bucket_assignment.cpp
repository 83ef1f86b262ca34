#include "core/reducer/bucket_assignment.hpp"

#include <algorithm>
#include <map>
#include <tuple>

namespace distc {

std::vector<std::vector<size_t>> compute_bucket_assignment_by_size(const std::vector<BucketTensor> &tensors,
                                                                   const std::vector<uint64_t> &limits) {
    using Key = std::tuple<int, int, int, int>;  // dtype code, bits, device type, id
    struct Open {
        std::vector<size_t> indices;
        uint64_t size = 0;
        size_t limit = 0;  // which of `limits` applies to this (dtype, device) now
    };
    std::map<Key, Open> open;
    std::vector<std::vector<size_t>> result;
    for (size_t i = 0; i < tensors.size(); ++i) {
        const BucketTensor &t = tensors[i];
        if (t.sparse) {
            result.push_back({i});
            continue;
        }
        Open &b = open[Key{t.dtype_code, t.dtype_bits, t.device_type, t.device_id}];
        b.indices.push_back(i);
        b.size += t.nbytes;
        if (b.size >= limits[b.limit]) {
            result.push_back(std::move(b.indices));
            b.indices.clear();
            b.size = 0;
            if (b.limit + 1 < limits.size()) ++b.limit;  // the last limit stays
        }
    }
    for (auto &kv : open)
        if (!kv.second.indices.empty()) result.push_back(std::move(kv.second.indices));
    // Indices within a bucket ascend, so the first is the smallest.
    std::sort(result.begin(), result.end(),
              [](const std::vector<size_t> &a, const std::vector<size_t> &b) { return a.front() < b.front(); });
    return result;
}

}  // namespace distc

#include "core/reducer/sparse.hpp"

#include <algorithm>
#include <cstring>
#include <string>

#include "core/pg/types.hpp"
#include "core/util/error.hpp"

namespace distc {

Bytes pack_sparse(const int64_t *indices, size_t nnz, const void *rows, size_t row_bytes) {
    Bytes b(sizeof(int64_t) + nnz * (sizeof(int64_t) + row_bytes));
    int64_t n = static_cast<int64_t>(nnz);
    std::memcpy(b.data(), &n, sizeof n);
    if (nnz) {
        std::memcpy(b.data() + sizeof n, indices, nnz * sizeof(int64_t));
        std::memcpy(b.data() + sizeof n + nnz * sizeof(int64_t), rows, nnz * row_bytes);
    }
    return b;
}

void reduce_sparse(const std::vector<Bytes> &parts, DType dtype, size_t row_numel, double scale,
                   std::vector<int64_t> &indices, Bytes &rows) {
    size_t row_bytes = row_numel * dtype_size(dtype);
    struct Row {
        int64_t index;
        const uint8_t *data;
    };
    std::vector<Row> all;  // rank order, then each rank's order: a stable sort keeps it
    for (size_t r = 0; r < parts.size(); ++r) {
        const Bytes &p = parts[r];
        int64_t n = -1;
        if (p.size() >= sizeof n) std::memcpy(&n, p.data(), sizeof n);
        if (n < 0 || p.size() != sizeof n + static_cast<size_t>(n) * (sizeof(int64_t) + row_bytes))
            fail(DISTC_EPROTO, "rank " + std::to_string(r) + " sent a malformed sparse gradient (" +
                                   std::to_string(p.size()) + " bytes)");
        const uint8_t *idx = p.data() + sizeof n, *val = idx + n * sizeof(int64_t);
        for (int64_t k = 0; k < n; ++k) {
            int64_t i;
            std::memcpy(&i, idx + k * sizeof i, sizeof i);
            all.push_back(Row{i, val + k * row_bytes});
        }
    }
    std::stable_sort(all.begin(), all.end(), [](const Row &a, const Row &b) { return a.index < b.index; });
    ReduceFn add = reduce_fn(dtype, ReduceOp::Sum);
    if (!add) fail(DISTC_EINVAL, std::string("sparse gradients of ") + dtype_name(dtype) + " cannot be summed");
    indices.clear();
    rows.clear();
    for (size_t k = 0; k < all.size();) {
        size_t at = rows.size();
        rows.insert(rows.end(), all[k].data, all[k].data + row_bytes);
        indices.push_back(all[k].index);
        size_t j = k + 1;
        for (; j < all.size() && all[j].index == all[k].index; ++j)
            add(rows.data() + at, rows.data() + at, all[j].data, row_numel);
        k = j;
    }
    if (scale != 1.0 && !rows.empty()) scale_in_place(dtype, rows.data(), indices.size() * row_numel, scale);
}

}  // namespace distc

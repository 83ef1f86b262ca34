// C shims for distc/reducer.h.
#include "capi/guard.hpp"
#include "core/reducer/bucket_assignment.hpp"
#include "distc/reducer.h"

using namespace distc;
using distc::capi::guard;
using distc::capi::require;
using distc::capi::require_ptr;

extern "C" {

DISTC_EXTERN(int) distc_compute_bucket_assignment_by_size(int32_t *bucket_of, size_t *n_buckets,
                                                          const DLTensor *const *tensors, size_t n,
                                                          const uint64_t *limits, size_t n_limits,
                                                          const int32_t *expect_sparse) {
    return guard(__func__, [&] {
        require_ptr(bucket_of, "bucket_of");
        require_ptr(n_buckets, "n_buckets");
        require_ptr(tensors, "tensors");
        require(n > 0, "n is 0 (no tensors)");
        require(limits != nullptr && n_limits > 0, "no bucket size limits (limits is NULL or n_limits is 0)");
        std::vector<uint64_t> lim(limits, limits + n_limits);
        for (size_t k = 0; k < n_limits; ++k)
            if (lim[k] == 0) fail(DISTC_EINVAL, "limits[" + std::to_string(k) + "] is 0");
        std::vector<BucketTensor> ts;
        ts.reserve(n);
        for (size_t i = 0; i < n; ++i) {
            const DLTensor *t = tensors[i];
            std::string at = "tensors[" + std::to_string(i) + "]";
            if (!t) fail(DISTC_EINVAL, at + " is NULL");
            if (t->ndim < 0 || (t->ndim > 0 && !t->shape)) fail(DISTC_EINVAL, at + " has a malformed shape");
            if (t->dtype.bits == 0 || t->dtype.bits % 8 || t->dtype.lanes != 1)
                fail(DISTC_EINVAL, at + " has an element size that is not whole bytes");
            uint64_t numel = 1;
            for (int d = 0; d < t->ndim; ++d) {
                if (t->shape[d] < 0) fail(DISTC_EINVAL, at + " has a negative dimension");
                numel *= static_cast<uint64_t>(t->shape[d]);
            }
            ts.push_back(BucketTensor{t->dtype.code, t->dtype.bits, t->device.device_type, t->device.device_id,
                                      numel * (t->dtype.bits / 8), expect_sparse && expect_sparse[i] != 0});
        }
        auto buckets = compute_bucket_assignment_by_size(ts, lim);
        for (size_t b = 0; b < buckets.size(); ++b)
            for (size_t i : buckets[b]) bucket_of[i] = static_cast<int32_t>(b);
        *n_buckets = buckets.size();
        return 0;
    });
}

}  // extern "C"

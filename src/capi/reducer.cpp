// C shims for distc/reducer.h.
#include <algorithm>

#include <cstddef>
#include <cstring>
#include <tuple>

#include "capi/args.hpp"
#include "capi/guard.hpp"
#include "capi/handles.hpp"
#include "capi/tensor_args.hpp"
#include "core/reducer/bucket_assignment.hpp"
#include "core/reducer/powersgd.hpp"
#include "core/reducer/reducer.hpp"
#include "distc/reducer.h"

using namespace distc;
using distc::capi::guard;
using distc::capi::require;
using distc::capi::require_ptr;

struct distc_reducer {
    std::shared_ptr<distc::Reducer> impl;
    std::shared_ptr<distc::ProcessGroup> pg;  // for the handle a communication hook gets
    // Each gradient's shape, for the views a bucket hook gets.
    std::shared_ptr<const std::vector<std::vector<int64_t>>> shapes;
    std::shared_ptr<distc::PowerSgd> powersgd;  // when it is the hook (for its stats)
};

namespace {

// Where each older version of distc_reducer_options ends (1: before
// expect_sparse, 2: before stream).
const std::initializer_list<size_t> kEnds = {offsetof(distc_reducer_options, expect_sparse),
                                             offsetof(distc_reducer_options, stream),
                                             offsetof(distc_reducer_options, static_graph)};

Reducer &reducer_arg(const distc_reducer *r) {
    require_ptr(r, "r");
    return *r->impl;
}

size_t index_arg(const Reducer &r, int32_t index, const char *name) {
    if (index < 0 || static_cast<size_t>(index) >= r.num_grads())
        fail(DISTC_EINVAL,
             std::string(name) + " " + std::to_string(index) + " is outside 0.." + std::to_string(r.num_grads() - 1));
    return static_cast<size_t>(index);
}

// A hook's work handed back: the core's Work, the handle released.
std::shared_ptr<Work> hook_result(int rc, distc_work *w, const char *what) {
    if (rc < 0) {
        if (w) distc_work_free(w);
        fail(rc, std::string("the ") + what + " failed: " + distc_error_last());
    }
    if (!w) fail(DISTC_EINVAL, std::string("the ") + what + " returned 0 but no work");
    std::shared_ptr<Work> work = w->impl;
    distc_work_free(w);
    if (!work) fail(DISTC_EINVAL, std::string("the ") + what + " returned a backend's handle of a blocking call");
    return work;
}

DLTensor flat_dl(const Tensor &t, int64_t *shape) {
    *shape = static_cast<int64_t>(t.numel);
    return DLTensor{
        t.data, {static_cast<DLDeviceType>(t.device_type), t.device_id}, 1, capi::dl_dtype(t.dtype), shape, nullptr, 0};
}
}  // namespace

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
            Tensor d = capi::described_tensor_arg(t, ("tensors[" + std::to_string(i) + "]").c_str());
            ts.push_back(BucketTensor{t->dtype.code, t->dtype.bits, d.device_type, d.device_id, d.nbytes(),
                                      expect_sparse && expect_sparse[i] != 0});
        }
        auto buckets = compute_bucket_assignment_by_size(ts, lim);
        for (size_t b = 0; b < buckets.size(); ++b)
            for (size_t i : buckets[b]) bucket_of[i] = static_cast<int32_t>(b);
        *n_buckets = buckets.size();
        return 0;
    });
}

namespace {
// Two gradients in the same memory would be reduced twice, or (as bucket
// views) one bucket slot would be two gradients: refused.
void refuse_overlaps(const std::vector<Tensor> &ts) {
    std::vector<size_t> order;
    for (size_t i = 0; i < ts.size(); ++i)
        if (ts[i].nbytes()) order.push_back(i);
    auto lo = [&](size_t i) { return reinterpret_cast<uintptr_t>(ts[i].data); };
    auto key = [&](size_t i) { return std::make_tuple(ts[i].device_type, ts[i].device_id, lo(i)); };
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return key(a) < key(b); });
    for (size_t k = 1; k < order.size(); ++k) {
        size_t a = order[k - 1], b = order[k];
        if (ts[a].device_type == ts[b].device_type && ts[a].device_id == ts[b].device_id &&
            lo(a) + ts[a].nbytes() > lo(b))
            fail(DISTC_EINVAL, "grads[" + std::to_string(std::min(a, b)) + "] and grads[" +
                                   std::to_string(std::max(a, b)) + "] share memory; each gradient needs its own");
    }
}
}  // namespace

DISTC_EXTERN(int) distc_reducer_options_init(distc_reducer_options *opts, unsigned int version) {
    return guard(__func__, [&] {
        capi::init_options(opts, version, DISTC_REDUCER_OPTIONS_VERSION,
                           distc_reducer_options DISTC_REDUCER_OPTIONS_INIT, kEnds);
        return 0;
    });
}

DISTC_EXTERN(int) distc_reducer_new(distc_reducer **out, distc_pg *pg, DLTensor *const *grads, size_t n,
                                    const distc_reducer_options *opts) {
    return guard(__func__, [&] {
        require_ptr(out, "out");
        require_ptr(pg, "pg");
        require(n > 0, "n is 0 (no gradients)");
        distc_reducer_options o = DISTC_REDUCER_OPTIONS_INIT;
        if (opts) {
            capi::check_options_version(opts->version, DISTC_REDUCER_OPTIONS_VERSION);
            // Older structs end early: read only what they have.
            std::memcpy(&o, opts, capi::options_size<distc_reducer_options>(opts->version, kEnds));
        }
        std::vector<char> sparse(n, 0);
        if (o.version >= 2 && o.expect_sparse)
            for (size_t i = 0; i < n; ++i) sparse[i] = o.expect_sparse[i] != 0;
        std::vector<Tensor> ts = capi::tensor_list_arg(*pg->impl, grads, n, "grads").span().to_vector();
        std::vector<std::vector<int64_t>> shapes;
        for (size_t i = 0; i < n; ++i) shapes.emplace_back(grads[i]->shape, grads[i]->shape + grads[i]->ndim);
        refuse_overlaps(ts);
        std::vector<std::vector<size_t>> buckets;
        std::vector<uint64_t> rebuild;  // c10d rebuilds buckets made by size, without unused-parameter search
        if (o.bucket_of) {
            int32_t nb = 0;
            for (size_t i = 0; i < n; ++i) {
                if (o.bucket_of[i] < 0) fail(DISTC_EINVAL, "opts->bucket_of[" + std::to_string(i) + "] is negative");
                // n gradients fill at most n buckets, none empty.
                if (static_cast<size_t>(o.bucket_of[i]) >= n)
                    fail(DISTC_EINVAL, "opts->bucket_of[" + std::to_string(i) + "] is " +
                                           std::to_string(o.bucket_of[i]) + ": " + std::to_string(n) +
                                           " gradients fill buckets 0.." + std::to_string(n - 1) + " at most");
                nb = std::max(nb, o.bucket_of[i] + 1);
            }
            buckets.resize(static_cast<size_t>(nb));
            for (size_t i = 0; i < n; ++i) buckets[static_cast<size_t>(o.bucket_of[i])].push_back(i);
        } else {
            std::vector<BucketTensor> bt;
            for (size_t i = 0; i < n; ++i)
                bt.push_back(BucketTensor{grads[i]->dtype.code, grads[i]->dtype.bits, ts[i].device_type,
                                          ts[i].device_id, ts[i].nbytes(), sparse[i] != 0});
            uint64_t first = o.first_bucket_bytes ? o.first_bucket_bytes : DISTC_FIRST_BUCKET_BYTES;
            uint64_t cap = o.bucket_cap_bytes ? o.bucket_cap_bytes : DISTC_BUCKET_CAP_BYTES;
            buckets = compute_bucket_assignment_by_size(bt, {first, cap});
            // Gradients come last-layer first: launch the buckets of the last gradients first (as DDP).
            std::reverse(buckets.begin(), buckets.end());
            bool static_graph = o.version >= 4 && o.static_graph;
            if ((!o.find_unused_parameters || static_graph) && !o.gradient_as_bucket_view) rebuild = {first, cap};
        }
        *out = new distc_reducer{
            std::make_shared<Reducer>(pg->impl, std::move(ts), buckets, o.find_unused_parameters != 0,
                                      o.gradient_as_bucket_view != 0, rebuild, std::move(sparse),
                                      o.version >= 3 ? o.stream : nullptr, o.version >= 4 && o.static_graph),
            pg->impl, std::make_shared<const std::vector<std::vector<int64_t>>>(std::move(shapes)), nullptr};
        return 0;
    });
}

DISTC_EXTERN(int) distc_reducer_num_buckets(size_t *out, const distc_reducer *r) {
    return guard(__func__, [&] {
        require_ptr(out, "out");
        *out = reducer_arg(r).num_buckets();
        return 0;
    });
}

DISTC_EXTERN(int) distc_reducer_register_bucket_hook(distc_reducer *r, distc_reducer_bucket_hook hook, void *payload,
                                                     distc_reducer_hook_release release) {
    // The payload goes with the last copy of the hook (or now, if it is refused).
    std::shared_ptr<void> owned(payload, [release](void *p) {
        if (release) release(p);
    });
    return guard(__func__, [&] {
        Reducer &rd = reducer_arg(r);
        if (!hook) {
            rd.set_comm_hook(nullptr, DType::Float32);
            r->powersgd.reset();
            return 0;
        }
        auto pg = std::make_shared<distc_pg>(distc_pg{r->pg});
        auto shapes = r->shapes;  // per gradient, from distc_reducer_new
        rd.set_comm_hook(
            [hook, payload, owned, pg, shapes](const Reducer::HookBucket &hb) {
                int64_t flat = 0;
                DLTensor buffer = flat_dl(hb.buffer, &flat);
                std::vector<int32_t> grads;
                std::vector<DLTensor> views;
                for (size_t k = 0; k < hb.grads.size(); ++k) {
                    size_t i = hb.grads[k];
                    grads.push_back(static_cast<int32_t>(i));
                    const std::vector<int64_t> &shape = (*shapes)[i];
                    views.push_back(DLTensor{buffer.data, buffer.device, static_cast<int32_t>(shape.size()),
                                             buffer.dtype, const_cast<int64_t *>(shape.data()), nullptr,
                                             hb.offsets[k] * dtype_size(hb.buffer.dtype)});
                }
                distc_reducer_bucket b{hb.index,     hb.is_last ? 1 : 0, &buffer,     grads.size(),
                                       grads.data(), hb.offsets.data(),  views.data()};
                distc_work *w = nullptr;
                distc_error_clear();
                int rc = hook(&w, pg.get(), &b, payload);
                return hook_result(rc, w, "bucket hook");
            },
            DType::Float32);
        r->powersgd.reset();
        return 0;
    });
}

DISTC_EXTERN(int) distc_powersgd_options_init(distc_powersgd_options *opts, unsigned int version) {
    return guard(__func__, [&] {
        capi::init_options(opts, version, DISTC_POWERSGD_OPTIONS_VERSION,
                           distc_powersgd_options DISTC_POWERSGD_OPTIONS_INIT, {});
        return 0;
    });
}

DISTC_EXTERN(int) distc_reducer_register_powersgd(distc_reducer *r, const distc_powersgd_options *opts) {
    return guard(__func__, [&] {
        Reducer &rd = reducer_arg(r);
        distc_powersgd_options o = DISTC_POWERSGD_OPTIONS_INIT;
        if (opts) {
            capi::check_options_version(opts->version, DISTC_POWERSGD_OPTIONS_VERSION);
            o = *opts;
        }
        PowerSgdOptions po;
        po.rank = o.matrix_approximation_rank;
        po.start_iter = o.start_powersgd_iter;
        po.min_compression_rate = o.min_compression_rate;
        po.error_feedback = o.use_error_feedback != 0;
        po.warm_start = o.warm_start != 0;
        po.epsilon = o.orthogonalization_epsilon;
        po.seed = o.random_seed;
        if (rd.on_device())
            fail(DISTC_ENOTSUP, "PowerSGD compresses buckets on the host, and these gradients are device memory");
        auto ps = std::make_shared<PowerSgd>(r->pg, po);
        rd.set_comm_hook([ps](const Reducer::HookBucket &b) { return ps->reduce(b); }, DType::Float32);
        r->powersgd = ps;
        return 0;
    });
}

DISTC_EXTERN(int) distc_reducer_powersgd_stats(int64_t *iterations, uint64_t *numel_before, uint64_t *numel_after,
                                               const distc_reducer *r) {
    return guard(__func__, [&] {
        reducer_arg(r);
        if (!r->powersgd) fail(DISTC_ESTATE, "PowerSGD is not this reducer's hook (distc_reducer_register_powersgd)");
        PowerSgdStats st = r->powersgd->stats();
        if (iterations) *iterations = st.iter;
        if (numel_before) *numel_before = st.before;
        if (numel_after) *numel_after = st.after;
        return 0;
    });
}

DISTC_EXTERN(int) distc_reducer_register_comm_hook(distc_reducer *r, distc_reducer_comm_hook hook, void *payload,
                                                   int32_t builtin) {
    return guard(__func__, [&] {
        Reducer &rd = reducer_arg(r);
        if (hook) {
            // The hook sees the bucket as a DLTensor and the group as a handle of its own.
            auto pg = std::make_shared<distc_pg>(distc_pg{r->pg});
            rd.set_comm_hook(
                [hook, payload, pg](const Reducer::HookBucket &hb) {
                    int64_t flat = 0;
                    DLTensor t = flat_dl(hb.buffer, &flat);
                    distc_work *w = nullptr;
                    distc_error_clear();
                    int rc = hook(&w, pg.get(), &t, payload);
                    return hook_result(rc, w, "communication hook");
                },
                DType::Float32);
            r->powersgd.reset();
            return 0;
        }
        switch (builtin) {
            case DISTC_HOOK_ALLREDUCE: rd.set_comm_hook(nullptr, DType::Float32); break;
            case DISTC_HOOK_FP16_COMPRESS: rd.set_comm_hook(nullptr, DType::Float16); break;
            case DISTC_HOOK_BF16_COMPRESS: rd.set_comm_hook(nullptr, DType::BFloat16); break;
            default: fail(DISTC_EINVAL, "builtin " + std::to_string(builtin) + " is not a distc_reducer_builtin_hook");
        }
        r->powersgd.reset();
        return 0;
    });
}

DISTC_EXTERN(int) distc_reducer_grad_view(void **view, const distc_reducer *r, int32_t index) {
    return guard(__func__, [&] {
        require_ptr(view, "view");
        Reducer &rd = reducer_arg(r);
        *view = rd.grad_view(index_arg(rd, index, "index"));
        return 0;
    });
}

DISTC_EXTERN(int) distc_reducer_bucket_of(int32_t *out, const distc_reducer *r, int32_t index) {
    return guard(__func__, [&] {
        require_ptr(out, "out");
        Reducer &rd = reducer_arg(r);
        *out = static_cast<int32_t>(rd.bucket_of(index_arg(rd, index, "index")));
        return 0;
    });
}

DISTC_EXTERN(int) distc_reducer_prepare_for_backward(distc_reducer *r, const int32_t *unused, size_t n_unused) {
    return guard(__func__, [&] {
        Reducer &rd = reducer_arg(r);
        require(unused != nullptr || n_unused == 0, "unused is NULL but n_unused > 0");
        std::vector<size_t> u;
        for (size_t k = 0; k < n_unused; ++k) u.push_back(index_arg(rd, unused[k], "unused index"));
        rd.prepare(u);
        return 0;
    });
}

DISTC_EXTERN(int) distc_reducer_mark_ready(distc_reducer *r, int32_t index) {
    return guard(__func__, [&] {
        Reducer &rd = reducer_arg(r);
        rd.mark_ready(index_arg(rd, index, "index"));
        return 0;
    });
}

DISTC_EXTERN(int) distc_reducer_mark_ready_sparse(distc_reducer *r, int32_t index, const DLTensor *indices,
                                                  const DLTensor *values) {
    return guard(__func__, [&] {
        Reducer &rd = reducer_arg(r);
        size_t i = index_arg(rd, index, "index");
        Tensor ix = capi::tensor_arg(*r->pg, indices, "indices");
        Tensor vs = capi::tensor_arg(*r->pg, values, "values");
        rd.mark_ready_sparse(i, ix, vs);
        return 0;
    });
}

DISTC_EXTERN(int) distc_reducer_sparse_grad(const int64_t **indices_out, const void **values_out, size_t *nnz,
                                            const distc_reducer *r, int32_t index) {
    return guard(__func__, [&] {
        require_ptr(indices_out, "indices_out");
        require_ptr(values_out, "values_out");
        require_ptr(nnz, "nnz");
        Reducer &rd = reducer_arg(r);
        Reducer::SparseGrad g = rd.sparse_grad(index_arg(rd, index, "index"));
        *indices_out = g.indices;
        *values_out = g.values;
        *nnz = g.nnz;
        return 0;
    });
}

DISTC_EXTERN(int) distc_reducer_finalize(distc_reducer *r) {
    return guard(__func__, [&] {
        reducer_arg(r).finalize();
        return 0;
    });
}

DISTC_EXTERN(int) distc_reducer_ready_ns(int64_t *out, const distc_reducer *r, int32_t index) {
    return guard(__func__, [&] {
        require_ptr(out, "out");
        Reducer &rd = reducer_arg(r);
        *out = rd.ready_ns(index_arg(rd, index, "index"));
        return 0;
    });
}

DISTC_EXTERN(int) distc_reducer_join(distc_reducer *r) {
    return guard(__func__, [&] {
        reducer_arg(r).join();
        return 0;
    });
}

DISTC_EXTERN(int) distc_reducer_grad_used(int32_t *out, const distc_reducer *r, int32_t index) {
    return guard(__func__, [&] {
        require_ptr(out, "out");
        Reducer &rd = reducer_arg(r);
        *out = rd.used(index_arg(rd, index, "index")) ? 1 : 0;
        return 0;
    });
}

DISTC_EXTERN(int) distc_reducer_bucket_stats(uint64_t *bytes, int64_t *launch_ns, int64_t *reduce_ns,
                                             const distc_reducer *r, size_t bucket) {
    return guard(__func__, [&] {
        Reducer &rd = reducer_arg(r);
        if (bucket >= rd.num_buckets())
            fail(DISTC_EINVAL,
                 "bucket " + std::to_string(bucket) + " is outside 0.." + std::to_string(rd.num_buckets() - 1));
        Reducer::BucketStats st = rd.bucket_stats(bucket);
        if (bytes) *bytes = st.bytes;
        if (launch_ns) *launch_ns = st.launch_ns;
        if (reduce_ns) *reduce_ns = st.reduce_ns;
        return 0;
    });
}

DISTC_EXTERN(void) distc_reducer_free(distc_reducer *r) {
    // The hook's payload is released before this returns, even while a
    // bucket's continuation on another thread still holds the reducer.
    if (r && r->impl) r->impl->close();
    delete r;
}

}  // extern "C"

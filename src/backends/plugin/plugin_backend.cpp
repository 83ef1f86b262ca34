#include "backends/plugin/plugin_backend.hpp"

#include <cstring>

#include "capi/handles.hpp"
#include "core/util/error.hpp"

namespace distc {

static_assert(DISTC_DTYPE_BOOL == static_cast<int>(DType::Bool) &&
                  DISTC_DTYPE_COMPLEX128 == static_cast<int>(DType::Complex128) &&
                  DISTC_DTYPE_FLOAT16 == static_cast<int>(DType::Float16),
              "distc_dtype and DType must agree");

namespace {

distc_buffer buf(const Tensor &t) {
    return distc_buffer{t.data, t.numel, static_cast<int32_t>(t.dtype), t.device_type, t.device_id, 0};
}

std::vector<distc_buffer> bufs(const std::vector<Tensor> &ts) {
    std::vector<distc_buffer> v;
    v.reserve(ts.size());
    for (const auto &t : ts) v.push_back(buf(t));
    return v;
}

distc_backend_op_args args(const AsyncArgs &a) {
    return distc_backend_op_args{DISTC_BACKEND_OP_ARGS_VERSION, a.timeout.count(), a.seq, a.premul_factor, a.stream,
                                 a.op, a.blocking ? DISTC_OP_BLOCKING : 0u};
}

struct GroupInfo {
    std::vector<int32_t> global;
    distc_backend_group_info gi{};
    GroupInfo(const AsyncGroupInfo &info, distc_store *store) : global(info.global_ranks.begin(), info.global_ranks.end()) {
        gi = distc_backend_group_info{DISTC_BACKEND_GROUP_INFO_VERSION, store, info.rank, info.size,
                                      info.timeout.count(), info.name.c_str(), global.data(), info.device};
    }
};

// The backend's message for a call that returned `rc`; the calling thread's last error.
std::string backend_error(const BackendDef &def, const char *op, int rc) {
    std::string msg = distc_error_last_code() == rc ? distc_error_last() : "";
    if (msg.empty()) msg = distc_strerror(rc);
    return "backend '" + def.name + "' " + op + ": " + msg;
}

}  // namespace

PluginBackend::PluginBackend(std::shared_ptr<const BackendDef> def, const AsyncGroupInfo &info)
    : def_(std::move(def)), store_(new distc_store{info.store}) {
    GroupInfo gi(info, store_);
    distc_error_clear();
    int rc = def_->ops.create(&group_, &gi.gi, def_->payload);
    if (rc < 0 || !group_) {
        delete store_;
        fail(rc < 0 ? rc : DISTC_EBACKEND, backend_error(*def_, "create", rc < 0 ? rc : DISTC_EBACKEND));
    }
}

PluginBackend::PluginBackend(std::shared_ptr<const BackendDef> def, void *group, distc_store *store)
    : def_(std::move(def)), group_(group), store_(store) {}

PluginBackend::~PluginBackend() {
    def_->ops.destroy(group_);
    delete store_;
}

void PluginBackend::require(const char *op) const {
    const auto &o = def_->ops;
    bool have = false;
    if (!std::strcmp(op, "allreduce")) have = o.allreduce;
    else if (!std::strcmp(op, "broadcast")) have = o.broadcast;
    else if (!std::strcmp(op, "reduce")) have = o.reduce;
    else if (!std::strcmp(op, "allgather")) have = o.allgather;
    else if (!std::strcmp(op, "gather")) have = o.gather;
    else if (!std::strcmp(op, "scatter")) have = o.scatter;
    else if (!std::strcmp(op, "reduce_scatter")) have = o.reduce_scatter;
    else if (!std::strcmp(op, "alltoall") || !std::strcmp(op, "alltoall_single")) have = o.alltoall;
    else if (!std::strcmp(op, "barrier")) have = o.barrier;
    else if (!std::strcmp(op, "send")) have = o.send;
    else if (!std::strcmp(op, "recv")) have = o.recv;
    else if (!std::strcmp(op, "batch_isend_irecv")) have = o.batch_p2p;
    if (!have) fail(DISTC_ENOTSUP, "the " + def_->name + " backend does not implement " + op);
}

namespace {

// The handle of this thread's blocking calls, lent to the backend call after
// call instead of a new one each time (the fast path allocates nothing). One
// still lent when the next call comes (its backend never completed it: the
// call timed out and the group was aborted) is left to that backend, and the
// thread takes a new one; that handle is then never freed.
struct KeptHandle {
    distc_work *box = nullptr;
    ~KeptHandle() {
        if (box && !box->lent.load(std::memory_order_acquire)) delete box;
    }
    distc_work *lend(const std::shared_ptr<Work> &w) {
        if (!box || box->lent.load(std::memory_order_acquire)) {
            box = new distc_work{};
            box->kept = true;
        }
        box->impl = w;
        box->lent.store(true, std::memory_order_relaxed);
        return box;
    }
};
thread_local KeptHandle t_kept;

}  // namespace

template <typename F>
void PluginBackend::start(const WorkPtr &w, const distc_backend_op_args &x, const char *op, F &&call) {
    // The backend holds this handle until it completes the work (distc_backend_work_complete
    // frees it, or gives a kept one back).
    // Host backends complete a blocking call before it returns; device ones may
    // complete it later, from their own thread, so theirs are not kept.
    bool keep = (x.flags & DISTC_OP_BLOCKING) && !stream_ordered();
    auto *box = keep ? t_kept.lend(w) : new distc_work{w};
    distc_error_clear();
    int rc = call(box);
    if (rc < 0) {
        if (box->kept) {
            box->impl.reset();
            box->lent.store(false, std::memory_order_release);
        } else {
            delete box;
        }
        fail(rc, backend_error(*def_, op, rc));
    }
}

void PluginBackend::allreduce(const WorkPtr &w, const std::vector<Tensor> &ts, ReduceOp op, const AsyncArgs &a) {
    auto x = args(a);
    if (ts.size() == 1) {  // the common case, without an allocation
        auto b = buf(ts[0]);
        start(w, x, "allreduce", [&](distc_work *h) { return def_->ops.allreduce(h, group_, &b, 1, int(op), &x); });
        return;
    }
    auto b = bufs(ts);
    start(w, x, "allreduce", [&](distc_work *h) { return def_->ops.allreduce(h, group_, b.data(), b.size(), int(op), &x); });
}

void PluginBackend::broadcast(const WorkPtr &w, const Tensor &t, int root, const AsyncArgs &a) {
    auto b = buf(t);
    auto x = args(a);
    start(w, x, "broadcast", [&](distc_work *h) { return def_->ops.broadcast(h, group_, &b, root, &x); });
}

void PluginBackend::reduce(const WorkPtr &w, const Tensor &t, int root, ReduceOp op, const AsyncArgs &a) {
    auto b = buf(t);
    auto x = args(a);
    start(w, x, "reduce", [&](distc_work *h) { return def_->ops.reduce(h, group_, &b, root, int(op), &x); });
}

void PluginBackend::allgather(const WorkPtr &w, const std::vector<Tensor> &outputs, const Tensor &input,
                              const AsyncArgs &a) {
    auto o = bufs(outputs);
    auto i = buf(input);
    auto x = args(a);
    start(w, x, "allgather", [&](distc_work *h) { return def_->ops.allgather(h, group_, o.data(), &i, &x); });
}

void PluginBackend::gather(const WorkPtr &w, const std::vector<Tensor> &outputs, const Tensor &input, int root,
                           const AsyncArgs &a) {
    auto o = bufs(outputs);
    auto i = buf(input);
    auto x = args(a);
    start(w, x, "gather", [&](distc_work *h) {
        return def_->ops.gather(h, group_, o.empty() ? nullptr : o.data(), &i, root, &x);
    });
}

void PluginBackend::scatter(const WorkPtr &w, const Tensor &output, const std::vector<Tensor> &inputs, int root,
                            const AsyncArgs &a) {
    auto o = buf(output);
    auto i = bufs(inputs);
    auto x = args(a);
    start(w, x, "scatter", [&](distc_work *h) {
        return def_->ops.scatter(h, group_, &o, i.empty() ? nullptr : i.data(), root, &x);
    });
}

void PluginBackend::reduce_scatter(const WorkPtr &w, const Tensor &output, const std::vector<Tensor> &inputs,
                                   ReduceOp op, const AsyncArgs &a) {
    auto o = buf(output);
    auto i = bufs(inputs);
    auto x = args(a);
    start(w, x, "reduce_scatter", [&](distc_work *h) { return def_->ops.reduce_scatter(h, group_, &o, i.data(), int(op), &x); });
}

void PluginBackend::alltoall(const WorkPtr &w, const std::vector<Tensor> &outputs, const std::vector<Tensor> &inputs,
                             const AsyncArgs &a) {
    auto o = bufs(outputs);
    auto i = bufs(inputs);
    auto x = args(a);
    start(w, x, "alltoall", [&](distc_work *h) { return def_->ops.alltoall(h, group_, o.data(), i.data(), &x); });
}

void PluginBackend::barrier(const WorkPtr &w, const AsyncArgs &a) {
    auto x = args(a);
    start(w, x, "barrier", [&](distc_work *h) { return def_->ops.barrier(h, group_, &x); });
}

void PluginBackend::send(const WorkPtr &w, const Tensor &t, int dst, int tag, const AsyncArgs &a) {
    auto b = buf(t);
    auto x = args(a);
    start(w, x, "send", [&](distc_work *h) { return def_->ops.send(h, group_, &b, dst, tag, &x); });
}

void PluginBackend::recv(const WorkPtr &w, const Tensor &t, int src, int tag, const AsyncArgs &a) {
    auto b = buf(t);
    auto x = args(a);
    start(w, x, "recv", [&](distc_work *h) { return def_->ops.recv(h, group_, &b, src, tag, &x); });
}

void PluginBackend::batch_p2p(const WorkPtr &w, const std::vector<P2p> &ops, const AsyncArgs &a) {
    std::vector<distc_backend_p2p> v;
    for (const auto &op : ops)
        v.push_back(distc_backend_p2p{op.send ? DISTC_P2P_SEND : DISTC_P2P_RECV, op.peer, op.tag, 0, buf(op.tensor)});
    auto x = args(a);
    start(w, x, "batch_isend_irecv", [&](distc_work *h) { return def_->ops.batch_p2p(h, group_, v.data(), v.size(), &x); });
}

std::unique_ptr<AsyncBackend> PluginBackend::split(int color, int key, const AsyncGroupInfo &info, bool &made) {
    made = false;
    if (!def_->ops.split) return nullptr;
    distc_error_clear();
    if (color < 0) {
        void *none = nullptr;
        int rc = def_->ops.split(&none, group_, DISTC_SPLIT_NOCOLOR, key, nullptr);
        if (rc < 0) fail(rc, backend_error(*def_, "split", rc));
        made = true;
        return nullptr;
    }
    auto *store = new distc_store{info.store};
    GroupInfo gi(info, store);
    void *sub = nullptr;
    int rc = def_->ops.split(&sub, group_, color, key, &gi.gi);
    if (rc < 0 || !sub) {
        delete store;
        fail(rc < 0 ? rc : DISTC_EBACKEND, backend_error(*def_, "split", rc < 0 ? rc : DISTC_EBACKEND));
    }
    made = true;
    return std::unique_ptr<AsyncBackend>(new PluginBackend(def_, sub, store));
}

void PluginBackend::abort() {
    if (def_->ops.abort) def_->ops.abort(group_);
}

void *PluginBackend::alloc(int device_type, size_t bytes) {
    void *p = nullptr;
    distc_error_clear();
    int rc = def_->ops.mem_alloc(&p, group_, device_type, bytes);
    if (rc < 0) fail(rc, backend_error(*def_, "mem_alloc", rc));
    if (!p) fail(DISTC_EBACKEND, "backend '" + def_->name + "' mem_alloc returned 0 but no memory");
    return p;
}

void PluginBackend::release(int device_type, void *p) noexcept { def_->ops.mem_free(group_, device_type, p); }

void PluginBackend::copy(void *dst, const void *src, size_t bytes, void *stream) {
    distc_error_clear();
    int rc = def_->ops.mem_copy(group_, dst, src, bytes, stream);
    if (rc < 0) fail(rc, backend_error(*def_, "mem_copy", rc));
}

void PluginBackend::zero(void *p, size_t bytes, void *stream) {
    distc_error_clear();
    int rc = def_->ops.mem_zero(group_, p, bytes, stream);
    if (rc < 0) fail(rc, backend_error(*def_, "mem_zero", rc));
}

std::unique_ptr<AsyncBackend> make_async_backend(const std::string &name, const AsyncGroupInfo &info) {
    return std::make_unique<PluginBackend>(find_backend(name), info);
}

void engine_world(const std::string &name, int &rank, int &size) {
    auto def = find_backend(name);
    if (!def->ops.world)
        fail(DISTC_ENOTSUP, "the " + name + " backend has no world of its own (" + name +
                                "://); rendezvous with env://, tcp:// or file://");
    int32_t r = -1, s = -1;
    distc_error_clear();
    int rc = def->ops.world(&r, &s, def->payload);
    if (rc < 0) fail(rc, backend_error(*def, "world", rc));
    if (s < 1 || r < 0 || r >= s)
        fail(DISTC_EBACKEND, "the " + name + " backend reports rank " + std::to_string(r) + " of " + std::to_string(s));
    rank = r;
    size = s;
}

}  // namespace distc

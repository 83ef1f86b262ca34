#include "capi/plugin_backend.hpp"

#include <algorithm>
#include <cstring>

#include "capi/handles.hpp"
#include "core/util/error.hpp"
#include "core/work/blocking_call.hpp"

namespace distc {

static_assert(DISTC_DTYPE_BOOL == static_cast<int>(DType::Bool) &&
                  DISTC_DTYPE_COMPLEX128 == static_cast<int>(DType::Complex128) &&
                  DISTC_DTYPE_FLOAT16 == static_cast<int>(DType::Float16),
              "distc_dtype and DType must agree");

namespace {

distc_buffer buf(const Tensor &t) {
    return distc_buffer{t.data, t.numel, static_cast<int32_t>(t.dtype), t.device_type, t.device_id, 0};
}

std::vector<distc_buffer> bufs(const Tensor *ts, size_t n) {
    std::vector<distc_buffer> v;
    v.reserve(n);
    for (size_t i = 0; i < n; ++i) v.push_back(buf(ts[i]));
    return v;
}
std::vector<distc_buffer> bufs(TensorSpan ts) { return bufs(ts.data(), ts.size()); }

distc_backend_op_args args(const AsyncArgs &a) {
    return distc_backend_op_args{
        DISTC_BACKEND_OP_ARGS_VERSION,
        a.timeout.count(),
        a.seq,
        a.premul_factor,
        a.stream,
        a.op,
        (a.blocking ? DISTC_OP_BLOCKING : 0u) | (a.interruptible ? DISTC_OP_INTERRUPTIBLE : 0u)};
}

struct GroupInfo {
    std::vector<int32_t> global;
    distc_backend_group_info gi{};
    GroupInfo(const AsyncGroupInfo &info, distc_store *store) :
        global(info.global_ranks.begin(), info.global_ranks.end()) {
        gi = distc_backend_group_info{DISTC_BACKEND_GROUP_INFO_VERSION,
                                      store,
                                      info.rank,
                                      info.size,
                                      info.timeout.count(),
                                      info.name.c_str(),
                                      global.data(),
                                      info.device};
    }
};

// The backend's message for a call that returned `rc`; the calling thread's last error.
std::string backend_error(const BackendDef &def, const char *op, int rc) {
    std::string msg = distc_error_last_code() == rc ? distc_error_last() : "";
    if (msg.empty()) msg = distc_strerror(rc);
    return "backend '" + def.name + "' " + op + ": " + msg;
}

}  // namespace

PluginBackend::PluginBackend(std::shared_ptr<const BackendDef> def, const AsyncGroupInfo &info) :
    def_(std::move(def)), store_(new distc_store{info.store}) {
    GroupInfo gi(info, store_);
    distc_error_clear();
    int rc = def_->ops.create(&group_, &gi.gi, def_->payload);
    if (rc < 0 || !group_) {
        delete store_;
        fail(rc < 0 ? rc : DISTC_EBACKEND, backend_error(*def_, "create", rc < 0 ? rc : DISTC_EBACKEND));
    }
}

PluginBackend::PluginBackend(std::shared_ptr<const BackendDef> def, void *group, distc_store *store) :
    def_(std::move(def)), group_(group), store_(store) {}

PluginBackend::~PluginBackend() {
    def_->ops.destroy(group_);
    delete store_;
}

namespace {

// This thread's handle for its blocking calls on host backends, lent to the
// backend call after call (the fast path allocates nothing and shares nothing).
// One the backend has not completed (its call timed out) stays the backend's:
// the thread takes another, and takes the old one back once it is completed.
struct ThreadCall {
    BlockingCall call;
    distc_work handle{nullptr, &call};
};
// A plain pointer, so that the fast path reads it with one TLS access; the
// owner, touched only when the thread needs another ThreadCall, keeps the ones
// still lent and frees what is not lent at thread exit.
thread_local ThreadCall *t_call = nullptr;
struct ThreadCallOwner {
    std::vector<ThreadCall *> lent;  // given up on, maybe still held by a backend
    ~ThreadCallOwner() {
        if (t_call && t_call->call.reusable()) delete t_call;  // the others stay the backend's
        for (ThreadCall *tc : lent)
            if (tc->call.reusable()) delete tc;
    }
};
thread_local ThreadCallOwner t_call_owner;

ThreadCall *next_thread_call() {
    auto &lent = t_call_owner.lent;
    if (t_call) lent.push_back(t_call);
    auto done = std::find_if(lent.begin(), lent.end(), [](ThreadCall *tc) { return tc->call.reusable(); });
    ThreadCall *tc = done != lent.end() ? *done : new ThreadCall;
    if (done != lent.end()) lent.erase(done);
    t_call = tc;
    return tc;
}

inline ThreadCall &lend_thread_call() {
    ThreadCall *tc = t_call;
    if (!tc || !tc->call.reusable()) tc = next_thread_call();
    tc->call.begin();
    return *tc;
}

}  // namespace

template <typename Entry, typename F>
void PluginBackend::start(const WorkPtr &w, const AsyncArgs &a, Entry entry, F &&call) {
    const char *op = a.op;
    if (!entry) fail(DISTC_ENOTSUP, "the " + def_->name + " backend does not implement " + op);
    if (!w) {
        // The C entry point that made this blocking call cleared the last error
        // (for backend_error: the backend's message is the last error it set).
        ThreadCall &tc = lend_thread_call();
        int rc = call(&tc.handle);
        if (rc < 0) {
            tc.call.take_back();
            fail(rc, backend_error(*def_, op, rc));
        }
        // The backend owes completion within the timeout; the margin covers its own detection.
        if (!tc.call.wait(a.timeout + Millis(2000))) throw BlockingCallTimedOut{};
        if (tc.call.code() != 0)
            fail(tc.call.code(), describe_op(a.op, a.seq, *a.label) + " failed: " + tc.call.message());
        return;
    }
    // The backend holds this handle until it completes the work (distc_backend_work_complete frees it).
    distc_error_clear();
    auto *h = new distc_work{w};
    int rc = call(h);
    if (rc < 0) {
        delete h;
        fail(rc, backend_error(*def_, op, rc));
    }
}

void PluginBackend::allreduce(const WorkPtr &w, const Tensor *ts, size_t n, ReduceOp op, const AsyncArgs &a) {
    auto x = args(a);
    if (n == 1) {  // the common case, without an allocation
        auto b = buf(ts[0]);
        start(w, a, def_->ops.allreduce,
              [&](distc_work *h) { return def_->ops.allreduce(h, group_, &b, 1, int(op), &x); });
        return;
    }
    auto b = bufs(ts, n);
    start(w, a, def_->ops.allreduce,
          [&](distc_work *h) { return def_->ops.allreduce(h, group_, b.data(), b.size(), int(op), &x); });
}

void PluginBackend::broadcast(const WorkPtr &w, const Tensor &t, int root, const AsyncArgs &a) {
    auto b = buf(t);
    auto x = args(a);
    start(w, a, def_->ops.broadcast, [&](distc_work *h) { return def_->ops.broadcast(h, group_, &b, root, &x); });
}

void PluginBackend::reduce(const WorkPtr &w, const Tensor &t, int root, ReduceOp op, const AsyncArgs &a) {
    auto b = buf(t);
    auto x = args(a);
    start(w, a, def_->ops.reduce, [&](distc_work *h) { return def_->ops.reduce(h, group_, &b, root, int(op), &x); });
}

void PluginBackend::allgather(const WorkPtr &w, TensorSpan outputs, const Tensor &input, const AsyncArgs &a) {
    auto o = bufs(outputs);
    auto i = buf(input);
    auto x = args(a);
    start(w, a, def_->ops.allgather, [&](distc_work *h) { return def_->ops.allgather(h, group_, o.data(), &i, &x); });
}

void PluginBackend::gather(const WorkPtr &w, TensorSpan outputs, const Tensor &input, int root, const AsyncArgs &a) {
    auto o = bufs(outputs);
    auto i = buf(input);
    auto x = args(a);
    start(w, a, def_->ops.gather,
          [&](distc_work *h) { return def_->ops.gather(h, group_, o.empty() ? nullptr : o.data(), &i, root, &x); });
}

void PluginBackend::scatter(const WorkPtr &w, const Tensor &output, TensorSpan inputs, int root, const AsyncArgs &a) {
    auto o = buf(output);
    auto i = bufs(inputs);
    auto x = args(a);
    start(w, a, def_->ops.scatter,
          [&](distc_work *h) { return def_->ops.scatter(h, group_, &o, i.empty() ? nullptr : i.data(), root, &x); });
}

void PluginBackend::reduce_scatter(const WorkPtr &w, const Tensor &output, TensorSpan inputs, ReduceOp op,
                                   const AsyncArgs &a) {
    auto o = buf(output);
    auto i = bufs(inputs);
    auto x = args(a);
    start(w, a, def_->ops.reduce_scatter,
          [&](distc_work *h) { return def_->ops.reduce_scatter(h, group_, &o, i.data(), int(op), &x); });
}

void PluginBackend::alltoall(const WorkPtr &w, TensorSpan outputs, TensorSpan inputs, const AsyncArgs &a) {
    auto o = bufs(outputs);
    auto i = bufs(inputs);
    auto x = args(a);
    start(w, a, def_->ops.alltoall,
          [&](distc_work *h) { return def_->ops.alltoall(h, group_, o.data(), i.data(), &x); });
}

void PluginBackend::barrier(const WorkPtr &w, const AsyncArgs &a) {
    auto x = args(a);
    start(w, a, def_->ops.barrier, [&](distc_work *h) { return def_->ops.barrier(h, group_, &x); });
}

void PluginBackend::send(const WorkPtr &w, const Tensor &t, int dst, int tag, const AsyncArgs &a) {
    auto b = buf(t);
    auto x = args(a);
    start(w, a, def_->ops.send, [&](distc_work *h) { return def_->ops.send(h, group_, &b, dst, tag, &x); });
}

void PluginBackend::recv(const WorkPtr &w, const Tensor &t, int src, int tag, const AsyncArgs &a) {
    auto b = buf(t);
    auto x = args(a);
    start(w, a, def_->ops.recv, [&](distc_work *h) { return def_->ops.recv(h, group_, &b, src, tag, &x); });
}

void PluginBackend::batch_p2p(const WorkPtr &w, Span<P2p> ops, const AsyncArgs &a) {
    std::vector<distc_backend_p2p> v;
    for (const auto &op : ops)
        v.push_back(distc_backend_p2p{op.send ? DISTC_P2P_SEND : DISTC_P2P_RECV, op.peer, op.tag, 0, buf(op.tensor)});
    auto x = args(a);
    start(w, a, def_->ops.batch_p2p,
          [&](distc_work *h) { return def_->ops.batch_p2p(h, group_, v.data(), v.size(), &x); });
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

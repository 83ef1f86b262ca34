// Compound operations built on the backend's primitives: batched
// point-to-point, the monitored barrier, byte collectives with per-rank
// sizes, and the debug-mode cross-check of what every rank is calling.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <functional>
#include <map>

#include "core/pg/process_group.hpp"
#include "core/util/error.hpp"

namespace distc {

namespace {

OpLabel bytes_label(size_t n) {
    OpLabel l;
    l.form = OpLabel::Form::Bytes;
    l.n = n;
    return l;
}

// The lengths announced in the first step of a byte collective (by each
// rank, or by the root for each rank), checked on every rank alike, so that
// all fail together on one too long.
size_t checked_max_len(const int64_t *lens, size_t n, const char *kind, bool by_root = false) {
    uint64_t max = 0;
    for (size_t r = 0; r < n; ++r) {
        auto len = static_cast<uint64_t>(lens[r]);
        if (len > DISTC_STORE_MAX_VALUE_SIZE)
            fail_agreed(DISTC_EINVAL, std::string(kind) + ": " + (by_root ? "the root passed " : "rank " + std::to_string(r) + " passed ") +
                                   std::to_string(len) + " bytes" + (by_root ? " for rank " + std::to_string(r) : "") +
                                   ", over DISTC_STORE_MAX_VALUE_SIZE (2^30)");
        max = std::max(max, len);
    }
    return static_cast<size_t>(max);
}

Tensor view_of(void *p, DType dt, size_t numel) {
    Tensor t;
    t.data = p;
    t.numel = numel;
    t.dtype = dt;
    t.dim0 = static_cast<int64_t>(numel);
    return t;
}

}  // namespace

// Byte collectives of asynchronous backends go through the store: a device
// backend (nccl) cannot move host bytes, and object collectives are small and
// rare. Keys live under "bytes/<seq>/"; the last rank to finish removes them.
namespace {
struct StoreBytes {
    Store &store;
    std::string base;
    int size;
    Millis timeout;
    std::string key(int r) const { return base + std::to_string(r); }
    std::vector<Bytes> all() const {
        std::vector<std::string> keys;
        for (int r = 0; r < size; ++r) keys.push_back(key(r));
        return store.multi_get(keys, timeout);
    }
    // Every rank calls it once it has read what it needs.
    void done(int readers) const {
        if (store.add(base + "done", 1) < readers) return;
        for (int r = 0; r < size; ++r) store.delete_key(key(r));
        store.delete_key(base + "done");
    }
};
}  // namespace

ProcessGroup::StoreBytesResult ProcessGroup::store_bytes(const char *kind, const OpOptions &o, int root,
                                                         const std::vector<ByteView> &mine) {
    if (aborted_) fail_aborted();
    for (const auto &v : mine)
        if (v.size > DISTC_STORE_MAX_VALUE_SIZE)
            fail(DISTC_EINVAL, std::string(kind) + ": " + std::to_string(v.size) +
                                   " bytes, over DISTC_STORE_MAX_VALUE_SIZE (2^30)");
    uint64_t seq = take_seq(1);
    StoreBytes sb{*store_, "bytes/" + std::to_string(seq) + "/", size_, o.timeout.count() < 0 ? timeout_ : o.timeout};
    StoreBytesResult res;
    try {
        if (std::strcmp(kind, "scatter_bytes") == 0) {
            if (rank_ == root)
                for (int r = 0; r < size_; ++r) store_->set(sb.key(r), mine[static_cast<size_t>(r)]);
            res.one = store_->get(sb.key(rank_), sb.timeout);
            sb.done(size_);
        } else if (std::strcmp(kind, "broadcast_bytes") == 0) {
            if (rank_ == root) {
                store_->set(sb.key(root), mine[0]);
                res.one = mine[0].to_bytes();
            } else {
                res.one = store_->get(sb.key(root), sb.timeout);
            }
            sb.done(size_);
        } else {  // all_gather_bytes, gather_bytes
            store_->set(sb.key(rank_), mine[0]);
            bool reads = root < 0 || rank_ == root;
            if (reads) res.all = sb.all();
            sb.done(root < 0 ? size_ : 1);
        }
    } catch (const Error &e) {
        fail(e.code(), std::string(kind) + " #" + std::to_string(seq) + " failed: " + e.what());
    }
    return res;
}

ProcessGroup::WorkPtr ProcessGroup::batch_p2p(std::vector<P2pOp> ops, const OpOptions &o, bool async) {
    if (ops.empty()) fail(DISTC_EINVAL, "no operations");
    for (size_t i = 0; i < ops.size(); ++i) {
        std::string at = "ops[" + std::to_string(i) + "]";
        if (ops[i].peer < 0 || ops[i].peer >= size_)
            fail(DISTC_EINVAL, at + ".peer " + std::to_string(ops[i].peer) + " is outside 0.." + std::to_string(size_ - 1));
        if (ops[i].peer == rank_) fail(DISTC_EINVAL, at + ".peer is this rank (" + std::to_string(rank_) + ")");
        if (ops[i].tag > static_cast<uint32_t>(INT32_MAX)) fail(DISTC_EINVAL, at + ".tag is negative");
    }
    OpLabel ops_label;
    ops_label.form = OpLabel::Form::Ops;
    ops_label.n = ops.size();
    OpInfo info{"batch_isend_irecv", ops_label};
    info.p2p = true;
    if (async_) {
        std::vector<AsyncBackend::P2p> v;
        for (const auto &op : ops) v.push_back({op.send, op.tensor, op.peer, static_cast<int>(op.tag)});
        return launch(info, o, async, [&](const WorkPtr &w, const AsyncArgs &a) { async_->batch_p2p(w, v, a); });
    }
    if (aborted_) fail_aborted();
    // Everything is posted before anything is waited for: the batch cannot deadlock on its own order.
    std::vector<std::shared_ptr<PendingP2p>> posted;
    for (auto &op : ops)
        posted.push_back(op.send ? backend_->post_send(op.tensor, op.peer, op.tag)
                                 : backend_->post_recv(op.tensor, op.peer, op.tag));
    return run(info, o, async, [posted](const OpCtx &ctx) {
        auto deadline = std::chrono::steady_clock::now() + ctx.timeout;
        for (const auto &p : posted)
            p->wait(std::max(Millis(1), std::chrono::duration_cast<Millis>(deadline - std::chrono::steady_clock::now())));
        return -1;
    });
}

void ProcessGroup::monitored_barrier(Millis timeout, bool wait_all) {
    // Through the store, not the backend: Gloo closes every pair of a group
    // whose receive times out, and a monitored barrier exists to time out.
    OpInfo info{"monitored_barrier", {}};
    info.p2p = true;  // not one of the group's collectives: no sequence number
    std::string base = "monitored_barrier/" + std::to_string(++monitored_) + "/";
    OpOptions o;
    o.timeout = timeout;
    run(info, o, false, [this, base, wait_all](const OpCtx &ctx) {
        auto arrived = [&](int r) { return base + "arrived/" + std::to_string(r); };
        std::string verdict;  // "" or the missing ranks, "2, 3"
        if (rank_ != 0) {
            store_->set(arrived(rank_), ByteView("1", 1));
            // Rank 0 answers after at most `timeout`; allow it that again, plus slack.
            Bytes v = store_->get(base + "result", ctx.timeout * 2 + Millis(1000));
            verdict.assign(v.begin(), v.end());
        } else {
            auto deadline = std::chrono::steady_clock::now() + ctx.timeout;
            std::vector<int> missing;
            for (int r = 1; r < size_; ++r) {
                auto left = std::chrono::duration_cast<Millis>(deadline - std::chrono::steady_clock::now());
                try {
                    store_->wait({arrived(r)}, std::max(left, Millis(0)));
                } catch (const Error &e) {
                    if (e.code() != DISTC_ETIMEOUT) throw;
                    missing.push_back(r);
                    if (!wait_all) break;
                }
            }
            for (size_t i = 0; i < missing.size(); ++i) verdict += (i ? ", " : "") + std::to_string(missing[i]);
            store_->set(base + "result", ByteView(verdict.data(), verdict.size()));
            for (int r = 1; r < size_; ++r) store_->delete_key(arrived(r));
        }
        if (!verdict.empty())
            fail(DISTC_ETIMEOUT, std::string(verdict.find(',') == std::string::npos ? "rank " : "ranks ") + verdict +
                                     " did not reach the barrier within " + std::to_string(ctx.timeout.count()) + " ms" +
                                     (wait_all ? "" : " (wait_all_ranks names every missing rank)"));
        return -1;
    });
}

// Byte collectives have two steps: lengths, then the bytes padded to the
// longest. The built-in backend moves them as two tagged steps of one
// operation; another backend that takes host memory as two of the group's
// own blocking collectives; a device-only one through the store (above).
struct ProcessGroup::BytePrims {
    std::function<void(const Tensor &in, Tensor &out, int step)> allgather;
    std::function<void(const Tensor &in, Tensor *out, int root, int step)> gather;
    std::function<void(Tensor &t, int root, int step)> broadcast;
    std::function<void(const Tensor *in, Tensor &out, int root, int step)> scatter;
};

void ProcessGroup::with_byte_prims(const OpInfo &info, const OpOptions &o, const std::function<void(BytePrims &)> &body) {
    if (backend_) {
        OpInfo two = info;
        two.steps = 2;
        run(two, o, false, [this, &body](const OpCtx &ctx) {
            auto at = [&](int step) { return OpCtx{ctx.tag + static_cast<uint32_t>(step), ctx.timeout}; };
            BytePrims p{
                [&](const Tensor &in, Tensor &out, int step) { backend_->allgather(in, out, at(step)); },
                [&](const Tensor &in, Tensor *out, int root, int step) { backend_->gather(in, out, root, at(step)); },
                [&](Tensor &t, int root, int step) { backend_->broadcast(t, root, at(step)); },
                [&](const Tensor *in, Tensor &out, int root, int step) { backend_->scatter(in, out, root, at(step)); }};
            body(p);
            return -1;
        });
        return;
    }
    // Rank-ordered views of a flat buffer, as the list forms of the collectives take.
    auto parts = [this](const Tensor &flat) {
        std::vector<Tensor> v;
        size_t n = flat.numel / static_cast<size_t>(size_);
        for (int r = 0; r < size_; ++r) v.push_back(view_of(flat.bytes() + n * dtype_size(flat.dtype) * r, flat.dtype, n));
        return v;
    };
    BytePrims p{
        [&](const Tensor &in, Tensor &out, int) { allgather(in, parts(out), o, false); },
        [&](const Tensor &in, Tensor *out, int root, int) {
            gather(in, out ? parts(*out) : std::vector<Tensor>{}, root, o, false);
        },
        [&](Tensor &t, int root, int) { broadcast(t, root, o, false); },
        [&](const Tensor *in, Tensor &out, int root, int) {
            scatter(in ? parts(*in) : std::vector<Tensor>{}, out, root, o, false);
        }};
    body(p);
}

// Host memory through a device-only backend is out: those go through the store.
bool ProcessGroup::bytes_via_store() const { return async_ && !(async_->device_types() & (uint64_t{1} << 1)); }

std::vector<Bytes> ProcessGroup::all_gather_bytes(ByteView data, const OpOptions &o) {
    if (bytes_via_store()) return store_bytes("all_gather_bytes", o, -1, {data}).all;
    std::vector<Bytes> out;
    with_byte_prims(OpInfo{"all_gather_bytes", bytes_label(data.size)}, o, [&](BytePrims &p) {
        int64_t len = static_cast<int64_t>(data.size);
        std::vector<int64_t> lens(static_cast<size_t>(size_));
        Tensor lt = view_of(&len, DType::Int64, 1), lall = view_of(lens.data(), DType::Int64, lens.size());
        p.allgather(lt, lall, 0);
        size_t max = checked_max_len(lens.data(), lens.size(), "all_gather_bytes");
        Scratch mine(DType::UInt8, max), all(DType::UInt8, checked_mul(max, size_, "the gathered bytes"));
        if (data.size) std::memcpy(mine.t.data, data.data, data.size);
        if (max) p.allgather(mine.t, all.t, 1);
        for (int r = 0; r < size_; ++r) {
            const uint8_t *q = all.t.bytes() + max * static_cast<size_t>(r);
            out.emplace_back(q, q + lens[static_cast<size_t>(r)]);
        }
    });
    return out;
}

std::vector<Bytes> ProcessGroup::gather_bytes(ByteView data, int root, const OpOptions &o) {
    check_rank(root, "root");
    if (bytes_via_store()) return store_bytes("gather_bytes", o, root, {data}).all;
    std::vector<Bytes> out;
    OpInfo info{"gather_bytes", bytes_label(data.size), -1, 0, root};
    with_byte_prims(info, o, [&](BytePrims &p) {
        int64_t len = static_cast<int64_t>(data.size);
        std::vector<int64_t> lens(static_cast<size_t>(size_));
        Tensor lt = view_of(&len, DType::Int64, 1), lall = view_of(lens.data(), DType::Int64, lens.size());
        p.allgather(lt, lall, 0);  // everyone needs the longest to pad to
        size_t max = checked_max_len(lens.data(), lens.size(), "gather_bytes");
        Scratch mine(DType::UInt8, max),
            all(DType::UInt8, rank_ == root ? checked_mul(max, size_, "the gathered bytes") : 1);
        if (data.size) std::memcpy(mine.t.data, data.data, data.size);
        if (max) p.gather(mine.t, rank_ == root ? &all.t : nullptr, root, 1);
        if (rank_ == root)
            for (int r = 0; r < size_; ++r) {
                const uint8_t *q = all.t.bytes() + max * static_cast<size_t>(r);
                out.emplace_back(q, q + lens[static_cast<size_t>(r)]);
            }
    });
    return out;
}

Bytes ProcessGroup::broadcast_bytes(ByteView data, int root, const OpOptions &o) {
    check_rank(root, "root");
    if (bytes_via_store()) return store_bytes("broadcast_bytes", o, root, {data}).one;
    Bytes out;
    with_byte_prims(OpInfo{"broadcast_bytes", {}, -1, 0, root}, o, [&](BytePrims &p) {
        int64_t len = rank_ == root ? static_cast<int64_t>(data.size) : 0;
        Tensor lt = view_of(&len, DType::Int64, 1);
        p.broadcast(lt, root, 0);
        std::vector<int64_t> lens(static_cast<size_t>(size_), 0);
        lens[static_cast<size_t>(root)] = len;
        checked_max_len(lens.data(), lens.size(), "broadcast_bytes");
        out = rank_ == root ? data.to_bytes() : Bytes(static_cast<size_t>(len));
        Tensor bt = view_of(out.data(), DType::UInt8, out.size());
        p.broadcast(bt, root, 1);
    });
    return out;
}

Bytes ProcessGroup::scatter_bytes(const std::vector<ByteView> &data, int root, const OpOptions &o) {
    check_rank(root, "root");
    if (rank_ == root && data.size() != static_cast<size_t>(size_))
        fail(DISTC_EINVAL, "the root passed " + std::to_string(data.size()) + " values, expected the group size " +
                               std::to_string(size_));
    if (bytes_via_store()) return store_bytes("scatter_bytes", o, root, data).one;
    Bytes out;
    with_byte_prims(OpInfo{"scatter_bytes", {}, -1, 0, root}, o, [&](BytePrims &p) {
        std::vector<int64_t> lens(static_cast<size_t>(size_), 0);
        if (rank_ == root)
            for (size_t r = 0; r < data.size(); ++r) lens[r] = static_cast<int64_t>(data[r].size);
        Tensor lt = view_of(lens.data(), DType::Int64, lens.size());
        p.broadcast(lt, root, 0);
        size_t max = checked_max_len(lens.data(), lens.size(), "scatter_bytes", true);
        Scratch all(DType::UInt8, rank_ == root ? checked_mul(max, size_, "the scattered bytes") : 1),
            mine(DType::UInt8, max);
        if (rank_ == root)
            for (size_t r = 0; r < data.size(); ++r)
                if (data[r].size) std::memcpy(all.t.bytes() + max * r, data[r].data, data[r].size);
        if (max) p.scatter(rank_ == root ? &all.t : nullptr, mine.t, root, 1);
        out.assign(mine.t.bytes(), mine.t.bytes() + lens[static_cast<size_t>(rank_)]);
    });
    return out;
}

void ProcessGroup::debug_check(const OpInfo &info, const OpCtx &ctx) {
    // Each rank's call as 6 int64: the kind's name (16 chars), dtype, count, root, reduce op.
    constexpr size_t kFields = 6;
    int64_t mine[kFields] = {0, 0, info.dtype, static_cast<int64_t>(info.numel), info.root, info.reduce};
    std::strncpy(reinterpret_cast<char *>(mine), info.kind, 16);
    std::vector<int64_t> all(kFields * static_cast<size_t>(size_));
    Tensor in = view_of(mine, DType::Int64, kFields), out = view_of(all.data(), DType::Int64, all.size());
    backend_->allgather(in, out, ctx);
    auto describe = [](const int64_t *f) {
        char kind[17] = {0};
        std::memcpy(kind, f, 16);
        std::string s = std::string(kind) + "(";
        if (f[2] >= 0) s += std::string(dtype_name(static_cast<DType>(f[2]))) + ", " + std::to_string(f[3]) + " elements";
        if (f[4] >= 0) s += ", root " + std::to_string(f[4]);
        if (f[5] >= 0) s += std::string(", ") + op_name(static_cast<ReduceOp>(f[5]));
        return s + ")";
    };
    std::map<std::string, std::vector<int>> calls;  // what is called -> by whom
    for (int r = 0; r < size_; ++r) calls[describe(&all[kFields * static_cast<size_t>(r)])].push_back(r);
    if (calls.size() == 1) return;
    std::string msg = "ranks disagree on collective #" + std::to_string(ctx.tag) + ":";
    for (const auto &c : calls) {
        msg += c.second.size() == 1 ? " rank " : " ranks ";
        for (size_t i = 0; i < c.second.size(); ++i) msg += (i ? "," : "") + std::to_string(c.second[i]);
        msg += " call " + c.first + ";";
    }
    msg.pop_back();
    fail_agreed(DISTC_EINVAL, msg);
}

}  // namespace distc

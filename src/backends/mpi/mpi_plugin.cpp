// The "mpi" backend plugin (libdistc-mpi.so): distc's collectives on host
// memory through MPI, for jobs started by mpirun. It implements
// distc/sys/backend.h and nothing else of distc's internals.
#include <climits>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "backends/mpi/mpi_group.hpp"

using namespace distc_mpi;
using distc_plugin::guarded;

namespace {

Group &group(void *g) { return *static_cast<Group *>(g); }

size_t nbytes(const distc_buffer &b) { return static_cast<size_t>(b.count) * distc_dtype_size(b.dtype); }

// Failures kept out of line, so that the checks on every call stay small.
[[noreturn, gnu::cold]] void fail_count(uint64_t n, const char *what) {
    raise(DISTC_ENOTSUP,
          std::string(what) + ": " + std::to_string(n) + " is more than MPI's int counts allow in one call (2^31 - 1)");
}
[[noreturn, gnu::cold]] void fail_unknown(const char *what, int32_t v) {
    raise(DISTC_EINVAL, std::string("unknown ") + what + " " + std::to_string(v));
}

// MPI counts are ints.
[[gnu::always_inline]] inline int count_of(uint64_t n, const char *what) {
    if (n > static_cast<uint64_t>(INT_MAX)) fail_count(n, what);
    return static_cast<int>(n);
}

// ------------------------------------------------------------- reductions

// Element types MPI reduces with its own operators; fp16, bf16 and bool go
// through user-defined operators that run distc's kernels.
[[gnu::always_inline]] inline MPI_Datatype elem_type(int32_t dtype) {
    switch (dtype) {
        case DISTC_DTYPE_BOOL: return MPI_UINT8_T;
        case DISTC_DTYPE_INT8: return MPI_INT8_T;
        case DISTC_DTYPE_UINT8: return MPI_UINT8_T;
        case DISTC_DTYPE_INT16: return MPI_INT16_T;
        case DISTC_DTYPE_INT32: return MPI_INT32_T;
        case DISTC_DTYPE_INT64: return MPI_INT64_T;
        case DISTC_DTYPE_FLOAT16: return MPI_UINT16_T;
        case DISTC_DTYPE_BFLOAT16: return MPI_UINT16_T;
        case DISTC_DTYPE_FLOAT32: return MPI_FLOAT;
        case DISTC_DTYPE_FLOAT64: return MPI_DOUBLE;
        case DISTC_DTYPE_COMPLEX64: return MPI_C_FLOAT_COMPLEX;
        case DISTC_DTYPE_COMPLEX128: return MPI_C_DOUBLE_COMPLEX;
        default: fail_unknown("dtype", dtype);
    }
}

template <int D, int O>
void user_fn(void *in, void *inout, int *len, MPI_Datatype *) {
    distc_backend_combine(inout, in, static_cast<uint64_t>(*len), D, O);
}

constexpr int kReduceOps = DISTC_PREMUL_SUM + 1;
MPI_Op g_user[3][kReduceOps];  // bool, float16, bfloat16 x every op; made once MPI is up

template <int D, int... O>
void make_user_ops(int row, std::integer_sequence<int, O...>) {
    ((void)MPI_Op_create(&user_fn<D, O>, 1, &g_user[row][O]), ...);
}

void ensure_user_ops() {
    static std::once_flag once;
    std::call_once(once, [] {
        auto lk = mpi_lock();
        make_user_ops<DISTC_DTYPE_BOOL>(0, std::make_integer_sequence<int, kReduceOps>{});
        make_user_ops<DISTC_DTYPE_FLOAT16>(1, std::make_integer_sequence<int, kReduceOps>{});
        make_user_ops<DISTC_DTYPE_BFLOAT16>(2, std::make_integer_sequence<int, kReduceOps>{});
    });
}

// The operator for `op` on `dtype`. AVG and PREMUL_SUM reduce as SUM; the
// scaling is done on the host (pre_scale / post_scale).
[[gnu::always_inline]] inline MPI_Op mpi_op(int32_t dtype, int32_t op) {
    if (dtype == DISTC_DTYPE_BOOL) return g_user[0][op];
    if (dtype == DISTC_DTYPE_FLOAT16) return g_user[1][op];
    if (dtype == DISTC_DTYPE_BFLOAT16) return g_user[2][op];
    switch (op) {
        case DISTC_SUM:
        case DISTC_AVG:
        case DISTC_PREMUL_SUM: return MPI_SUM;
        case DISTC_PRODUCT: return MPI_PROD;
        case DISTC_MIN: return MPI_MIN;
        case DISTC_MAX: return MPI_MAX;
        case DISTC_BAND: return MPI_BAND;
        case DISTC_BOR: return MPI_BOR;
        case DISTC_BXOR: return MPI_BXOR;
        default: fail_unknown("reduce op", op);
    }
}

void scale(const distc_buffer &b, double factor) {
    if (distc_backend_scale(b.data, b.count, b.dtype, factor) != 0) raise(distc_error_last_code(), distc_error_last());
}

// PREMUL_SUM's inputs, scaled: in place when `mine` may be changed, else a
// scaled copy (returned; the Op owns it).
void *pre_scaled(Op &o, const distc_buffer &b, int32_t op, double factor, bool in_place) {
    if (op != DISTC_PREMUL_SUM) return b.data;
    if (in_place) {
        scale(b, factor);
        return b.data;
    }
    uint8_t *t = o.temp(nbytes(b));
    std::memcpy(t, b.data, nbytes(b));
    scale(distc_buffer{t, b.count, b.dtype, b.device_type, b.device_id, 0}, factor);
    return t;
}

bool consecutive(const distc_buffer *bs, size_t n) {
    const char *p = static_cast<const char *>(bs[0].data);
    for (size_t i = 0; i < n; ++i) {
        if (bs[i].data != p && nbytes(bs[i])) return false;
        p += nbytes(bs[i]);
    }
    return true;
}

// One contiguous buffer for `n` buffers: theirs when they are back to back,
// else a copy (filled from them when `fill`).
uint8_t *packed(Op &o, const distc_buffer *bs, size_t n, bool fill) {
    if (consecutive(bs, n)) return static_cast<uint8_t *>(bs[0].data);
    size_t total = 0;
    for (size_t i = 0; i < n; ++i) total += nbytes(bs[i]);
    uint8_t *t = o.temp(total), *p = t;
    for (size_t i = 0; i < n; ++i) {
        if (fill && nbytes(bs[i])) std::memcpy(p, bs[i].data, nbytes(bs[i]));
        p += nbytes(bs[i]);
    }
    return t;
}

void unpack(const uint8_t *src, const distc_buffer *bs, size_t n) {
    if (src == bs[0].data) return;
    for (size_t i = 0; i < n; ++i) {
        if (nbytes(bs[i])) std::memcpy(bs[i].data, src, nbytes(bs[i]));
        src += nbytes(bs[i]);
    }
}

// Blocking collectives: MPI's own (fast, not interruptible) unless
// DISTC_MPI_BLOCKING_COLLECTIVES=interruptible.
// Read when the plugin is loaded.
const bool g_interruptible = [] {
    const char *e = std::getenv("DISTC_MPI_BLOCKING_COLLECTIVES");
    return e && std::strcmp(e, "interruptible") == 0;
}();
// A blocking collective driven like point-to-point: everywhere with the
// variable, or when the core asks for this one (DISTC_OP_INTERRUPTIBLE).
inline bool interruptible(const distc_backend_op_args *a) {
    return g_interruptible || (a->flags & DISTC_OP_INTERRUPTIBLE);
}

// Every operation has three shapes: MPI's blocking call on this thread (a
// blocking distc collective); its non-blocking twin tested on this thread (a
// blocking point-to-point call, or an interruptible collective); or the twin
// completed by the progress thread (asynchronous calls). `post(o, req)` is
// given req == nullptr for the first.
template <typename Post>
int launch(distc_work *w, void *g, const distc_backend_op_args *a, Post &&post, int32_t source = -1, bool p2p = false) {
    return guarded([&] {
        Group &G = group(g);
        G.check_usable();  // before anything reaches MPI (a post asks it for MPI_TAG_UB)
        if ((a->flags & DISTC_OP_BLOCKING) && (p2p || interruptible(a))) {
            Op o;
            o.source = source;
            {
                auto lk = mpi_lock();
                o.reqs.emplace_back(MPI_REQUEST_NULL);
                post(o, &o.reqs.back());
            }
            G.wait_here(w, a, o);
            return;
        }
        if (a->flags & DISTC_OP_BLOCKING) {
            Op o;
            o.source = source;
            G.run_blocking(
                w, a,
                [&] {
                    post(o, static_cast<MPI_Request *>(nullptr));
                    if (o.finish) o.finish();
                },
                &o.source);
            return;
        }
        G.start(w, a, [&](Op &o) {
            o.source = source;
            o.reqs.emplace_back(MPI_REQUEST_NULL);
            post(o, &o.reqs.back());
        });
    });
}

// ------------------------------------------------------------------ vtable

int mpi_world(int32_t *rank, int32_t *size, void *) {
    return guarded([&] {
        ensure_mpi();
        auto lk = mpi_lock();
        MPI_Comm_rank(MPI_COMM_WORLD, rank);
        MPI_Comm_size(MPI_COMM_WORLD, size);
    });
}

int mpi_create(void **out, const distc_backend_group_info *info, void *) {
    return guarded([&] {
        ensure_mpi();
        ensure_user_ops();
        int r = 0, s = 0;
        MPI_Comm dup = MPI_COMM_NULL;
        {
            auto lk = mpi_lock();
            MPI_Comm_rank(MPI_COMM_WORLD, &r);
            MPI_Comm_size(MPI_COMM_WORLD, &s);
        }
        if (r != info->rank || s != info->size)
            raise(DISTC_EINVAL,
                  "the mpi backend's groups are MPI_COMM_WORLD (this process is rank " + std::to_string(r) + " of " +
                      std::to_string(s) + ") but the group was made as rank " + std::to_string(info->rank) + " of " +
                      std::to_string(info->size) + "; launch with mpirun and create it from the url mpi://");
        // The group's own matching space. MPI_Comm_dup has no timeout: a rank
        // that never makes its group would hold the others for ever.
        auto *made = new MPI_Comm(MPI_COMM_NULL);  // MPI writes it once the dup completes
        MPI_Request req = MPI_REQUEST_NULL;
        {
            auto lk = mpi_lock();
            int rc = MPI_Comm_idup(MPI_COMM_WORLD, made, &req);
            if (rc != MPI_SUCCESS) delete made;
            check(rc, "MPI_Comm_idup");
        }
        const std::string late = "not every rank made its mpi:// group within " + std::to_string(info->timeout_ms) +
                                 " ms (each is a collective of MPI_COMM_WORLD, in the same order on every rank)";
        if (!test_until(req, info->timeout_ms)) raise(DISTC_ETIMEOUT, late);  // `made` stays MPI's
        dup = *made;
        delete made;
        // A rank that gave up left its dup to MPI, which a later rank's dup
        // matches: the ranks meet once more on the new communicator, where
        // the one that gave up never comes, so the late one fails too.
        if (!all_made_it(dup, true, info->timeout_ms)) raise(DISTC_ETIMEOUT, late);
        *out = new Group(dup, info->timeout_ms);
    });
}

void mpi_destroy(void *g) { delete static_cast<Group *>(g); }

int mpi_abort(void *g) {
    return guarded([&] { group(g).abort(DISTC_EABORTED, "distc_pg_abort was called"); });
}

int mpi_split(void **out, void *parent, int32_t color, int32_t key, const distc_backend_group_info *info) {
    return guarded([&] { *out = group(parent).split(color, key, info); });
}

int mpi_allreduce(distc_work *w, void *g, const distc_buffer *bs, size_t n, int32_t op,
                  const distc_backend_op_args *a) {
    Group &G = group(g);
    auto reduce = [&G, op](void *data, uint64_t count, int32_t dtype, MPI_Request *req) {
        int c = count_of(count, "count");
        check(req ? MPI_Iallreduce(MPI_IN_PLACE, data, c, elem_type(dtype), mpi_op(dtype, op), G.comm(), req)
                  : MPI_Allreduce(MPI_IN_PLACE, data, c, elem_type(dtype), mpi_op(dtype, op), G.comm()),
              "MPI_Allreduce");
    };
    if (n == 1 && op != DISTC_AVG && op != DISTC_PREMUL_SUM && (a->flags & DISTC_OP_BLOCKING) && !interruptible(a)) {
        // The common blocking call, MPI's and nothing else: no Op to keep scratch or a finishing step.
        return guarded([&] { G.run_blocking(w, a, [&] { reduce(bs[0].data, bs[0].count, bs[0].dtype, nullptr); }); });
    }
    if (n == 1)
        return launch(w, g, a, [&, b = bs[0]](Op &o, MPI_Request *req) {
            pre_scaled(o, b, op, a->premul_factor, true);
            reduce(b.data, b.count, b.dtype, req);
            if (op == DISTC_AVG) o.finish = [b, avg = 1.0 / G.size()] { scale(b, avg); };
        });
    // Coalesced: one reduction over the buffers packed together.
    std::vector<distc_buffer> v(bs, bs + n);
    return launch(w, g, a, [&, v](Op &o, MPI_Request *req) {
        for (auto &b : v) pre_scaled(o, b, op, a->premul_factor, true);
        uint8_t *p = packed(o, v.data(), v.size(), true);
        uint64_t total = 0;
        for (auto &b : v) total += b.count;
        distc_buffer all{p, total, v[0].dtype, v[0].device_type, v[0].device_id, 0};
        reduce(p, total, all.dtype, req);
        o.finish = [v, p, all, op, avg = 1.0 / G.size()] {
            if (op == DISTC_AVG) scale(all, avg);
            unpack(p, v.data(), v.size());
        };
    });
}

int mpi_broadcast(distc_work *w, void *g, const distc_buffer *b, int32_t root, const distc_backend_op_args *a) {
    Group &G = group(g);
    return launch(w, g, a, [&, b = *b](Op &, MPI_Request *req) {
        int c = count_of(nbytes(b), "bytes");
        check(
            req ? MPI_Ibcast(b.data, c, MPI_BYTE, root, G.comm(), req) : MPI_Bcast(b.data, c, MPI_BYTE, root, G.comm()),
            "MPI_Bcast");
    });
}

int mpi_reduce(distc_work *w, void *g, const distc_buffer *b, int32_t root, int32_t op,
               const distc_backend_op_args *a) {
    Group &G = group(g);
    double avg = 1.0 / G.size();
    bool is_root = G.rank() == root;
    return launch(w, g, a, [&, b = *b](Op &o, MPI_Request *req) {
        // Non-roots send from a scaled copy for PREMUL_SUM: their tensor stays as it was.
        void *src = pre_scaled(o, b, op, a->premul_factor, is_root);
        int c = count_of(b.count, "count");
        const void *send = is_root ? MPI_IN_PLACE : src;
        void *recv = is_root ? b.data : nullptr;
        check(req ? MPI_Ireduce(send, recv, c, elem_type(b.dtype), mpi_op(b.dtype, op), root, G.comm(), req)
                  : MPI_Reduce(send, recv, c, elem_type(b.dtype), mpi_op(b.dtype, op), root, G.comm()),
              "MPI_Reduce");
        if (is_root && op == DISTC_AVG) o.finish = [b, avg] { scale(b, avg); };
    });
}

int mpi_allgather(distc_work *w, void *g, const distc_buffer *outs, const distc_buffer *in,
                  const distc_backend_op_args *a) {
    Group &G = group(g);
    std::vector<distc_buffer> v(outs, outs + G.size());
    return launch(w, g, a, [&, v, in = *in](Op &o, MPI_Request *req) {
        uint8_t *p = packed(o, v.data(), v.size(), false);
        int c = count_of(nbytes(in), "bytes");
        check(req ? MPI_Iallgather(in.data, c, MPI_BYTE, p, c, MPI_BYTE, G.comm(), req)
                  : MPI_Allgather(in.data, c, MPI_BYTE, p, c, MPI_BYTE, G.comm()),
              "MPI_Allgather");
        o.finish = [v, p] { unpack(p, v.data(), v.size()); };
    });
}

int mpi_gather(distc_work *w, void *g, const distc_buffer *outs, const distc_buffer *in, int32_t root,
               const distc_backend_op_args *a) {
    Group &G = group(g);
    std::vector<distc_buffer> v;
    if (outs) v.assign(outs, outs + G.size());
    return launch(w, g, a, [&, v, in = *in](Op &o, MPI_Request *req) {
        uint8_t *p = v.empty() ? nullptr : packed(o, v.data(), v.size(), false);
        int c = count_of(nbytes(in), "bytes");
        check(req ? MPI_Igather(in.data, c, MPI_BYTE, p, c, MPI_BYTE, root, G.comm(), req)
                  : MPI_Gather(in.data, c, MPI_BYTE, p, c, MPI_BYTE, root, G.comm()),
              "MPI_Gather");
        if (p) o.finish = [v, p] { unpack(p, v.data(), v.size()); };
    });
}

int mpi_scatter(distc_work *w, void *g, const distc_buffer *out, const distc_buffer *ins, int32_t root,
                const distc_backend_op_args *a) {
    Group &G = group(g);
    std::vector<distc_buffer> v;
    if (ins) v.assign(ins, ins + G.size());
    return launch(w, g, a, [&, v, out = *out](Op &o, MPI_Request *req) {
        uint8_t *p = v.empty() ? nullptr : packed(o, v.data(), v.size(), true);
        int c = count_of(nbytes(out), "bytes");
        check(req ? MPI_Iscatter(p, c, MPI_BYTE, out.data, c, MPI_BYTE, root, G.comm(), req)
                  : MPI_Scatter(p, c, MPI_BYTE, out.data, c, MPI_BYTE, root, G.comm()),
              "MPI_Scatter");
    });
}

int mpi_reduce_scatter(distc_work *w, void *g, const distc_buffer *out, const distc_buffer *ins, int32_t op,
                       const distc_backend_op_args *a) {
    Group &G = group(g);
    double avg = 1.0 / G.size();
    std::vector<distc_buffer> v(ins, ins + G.size());
    return launch(w, g, a, [&, v, out = *out](Op &o, MPI_Request *req) {
        // The inputs are the caller's: packed (and scaled) in a copy when they must change.
        bool copy = op == DISTC_PREMUL_SUM || !consecutive(v.data(), v.size());
        uint8_t *p = copy ? packed(o, v.data(), v.size(), true) : static_cast<uint8_t *>(v[0].data);
        if (copy && p == v[0].data) {  // consecutive but to be scaled: a copy of its own
            size_t total = nbytes(out) * v.size();
            uint8_t *t = o.temp(total);
            std::memcpy(t, p, total);
            p = t;
        }
        if (op == DISTC_PREMUL_SUM)
            scale(distc_buffer{p, out.count * v.size(), out.dtype, out.device_type, out.device_id, 0},
                  a->premul_factor);
        int c = count_of(out.count, "count");
        check(
            req ? MPI_Ireduce_scatter_block(p, out.data, c, elem_type(out.dtype), mpi_op(out.dtype, op), G.comm(), req)
                : MPI_Reduce_scatter_block(p, out.data, c, elem_type(out.dtype), mpi_op(out.dtype, op), G.comm()),
            "MPI_Reduce_scatter_block");
        if (op == DISTC_AVG) o.finish = [out, avg] { scale(out, avg); };
    });
}

int mpi_alltoall(distc_work *w, void *g, const distc_buffer *outs, const distc_buffer *ins,
                 const distc_backend_op_args *a) {
    Group &G = group(g);
    size_t n = static_cast<size_t>(G.size());
    std::vector<distc_buffer> vo(outs, outs + n), vi(ins, ins + n);
    return launch(w, g, a, [&, vo, vi, n](Op &o, MPI_Request *req) {
        uint8_t *sp = packed(o, vi.data(), n, true), *rp = packed(o, vo.data(), n, false);
        // counts and displacements, in bytes: send counts, send displs, recv counts, recv displs
        o.ints.assign(4 * n, 0);
        int *sc = o.ints.data(), *sd = sc + n, *rc = sd + n, *rd = rc + n;
        uint64_t soff = 0, roff = 0;
        for (size_t r = 0; r < n; ++r) {
            sc[r] = count_of(nbytes(vi[r]), "bytes");
            rc[r] = count_of(nbytes(vo[r]), "bytes");
            sd[r] = count_of(soff, "displacement");
            rd[r] = count_of(roff, "displacement");
            soff += nbytes(vi[r]);
            roff += nbytes(vo[r]);
        }
        // MPI forbids a send buffer that overlaps the receive buffer (in
        // place, as torch allows): the sends go from a copy.
        if (soff && roff && sp < rp + roff && rp < sp + soff) {
            uint8_t *t = o.temp(soff);
            std::memcpy(t, sp, soff);
            sp = t;
        }
        check(req ? MPI_Ialltoallv(sp, sc, sd, MPI_BYTE, rp, rc, rd, MPI_BYTE, G.comm(), req)
                  : MPI_Alltoallv(sp, sc, sd, MPI_BYTE, rp, rc, rd, MPI_BYTE, G.comm()),
              "MPI_Alltoallv");
        o.finish = [vo, rp, n] { unpack(rp, vo.data(), n); };
    });
}

int mpi_barrier(distc_work *w, void *g, const distc_backend_op_args *a) {
    Group &G = group(g);
    return launch(w, g, a, [&](Op &, MPI_Request *req) {
        check(req ? MPI_Ibarrier(G.comm(), req) : MPI_Barrier(G.comm()), "MPI_Barrier");
    });
}

// Called where the MPI lock is already held (inside a post).
int check_tag(int32_t tag) {
    static int ub = [] {
        int *v = nullptr, flag = 0;
        MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &v, &flag);
        return flag && v ? *v : 32767;
    }();
    if (tag > ub)
        raise(DISTC_EINVAL, "tag " + std::to_string(tag) + " is above MPI_TAG_UB (" + std::to_string(ub) + ")");
    return tag;
}

int mpi_send(distc_work *w, void *g, const distc_buffer *b, int32_t dst, int32_t tag, const distc_backend_op_args *a) {
    Group &G = group(g);
    return launch(
        w, g, a,
        [&, b = *b](Op &, MPI_Request *req) {
            int c = count_of(nbytes(b), "bytes"), t = check_tag(tag);
            check(req ? MPI_Isend(b.data, c, MPI_BYTE, dst, t, G.comm(), req)
                      : MPI_Send(b.data, c, MPI_BYTE, dst, t, G.comm()),
                  "MPI_Send");
        },
        dst, true);
}

int mpi_recv(distc_work *w, void *g, const distc_buffer *b, int32_t src, int32_t tag, const distc_backend_op_args *a) {
    Group &G = group(g);
    int peer = src < 0 ? MPI_ANY_SOURCE : src;
    return launch(
        w, g, a,
        [&, b = *b](Op &o, MPI_Request *req) {
            int c = count_of(nbytes(b), "bytes"), t = check_tag(tag);
            o.source_req = 0;  // the status names the sender (any-source receives)
            o.recvs.push_back({0, c, t});
            check(MPI_Irecv(b.data, c, MPI_BYTE, peer, t, G.comm(), req), "MPI_Irecv");
        },
        src, true);
}

int mpi_batch_p2p(distc_work *w, void *g, const distc_backend_p2p *ops, size_t n, const distc_backend_op_args *a) {
    Group &G = group(g);
    std::vector<distc_backend_p2p> v(ops, ops + n);
    // Posted together and completed as one: a ring of them cannot deadlock.
    auto post = [&](Op &o) {
        for (auto &p : v) {
            int c = count_of(nbytes(p.buffer), "bytes"), t = check_tag(p.tag);
            o.reqs.emplace_back(MPI_REQUEST_NULL);
            if (p.kind != DISTC_P2P_SEND) o.recvs.push_back({o.reqs.size() - 1, c, t});
            check(p.kind == DISTC_P2P_SEND ? MPI_Isend(p.buffer.data, c, MPI_BYTE, p.peer, t, G.comm(), &o.reqs.back())
                                           : MPI_Irecv(p.buffer.data, c, MPI_BYTE, p.peer, t, G.comm(), &o.reqs.back()),
                  "MPI_Isend/MPI_Irecv");
        }
    };
    return guarded([&] {
        if (!(a->flags & DISTC_OP_BLOCKING)) {
            G.start(w, a, post);
            return;
        }
        Op o;
        {
            auto lk = mpi_lock();
            post(o);
        }
        G.wait_here(w, a, o);
    });
}

const distc_backend_ops kOps = [] {
    distc_backend_ops o{};
    o.version = DISTC_BACKEND_OPS_VERSION;
    o.flags = 0;
    o.device_types = DISTC_DEVICE_BIT(kDLCPU) | DISTC_DEVICE_BIT(kDLCUDAHost);
    o.create = mpi_create;
    o.destroy = mpi_destroy;
    o.abort = mpi_abort;
    o.split = mpi_split;
    o.allreduce = mpi_allreduce;
    o.broadcast = mpi_broadcast;
    o.reduce = mpi_reduce;
    o.allgather = mpi_allgather;
    o.gather = mpi_gather;
    o.scatter = mpi_scatter;
    o.reduce_scatter = mpi_reduce_scatter;
    o.alltoall = mpi_alltoall;
    o.barrier = mpi_barrier;
    o.send = mpi_send;
    o.recv = mpi_recv;
    o.batch_p2p = mpi_batch_p2p;
    o.world = mpi_world;
    return o;
}();

}  // namespace

extern "C" __attribute__((visibility("default"))) int distc_backend_plugin_init(const distc_backend_ops **ops,
                                                                                void **payload,
                                                                                unsigned int core_version) {
    return distc_plugin::plugin_init(&kOps, "libdistc-mpi.so", ops, payload, core_version);
}

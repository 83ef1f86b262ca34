// C shims for distc/pg.h: argument checks and translation only.
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <utility>

#include "capi/args.hpp"
#include "capi/guard.hpp"
#include "capi/handles.hpp"
#include "capi/tensor_args.hpp"
#include "core/store/hash_store.hpp"
#include "core/store/rendezvous.hpp"
#include "core/util/checked.hpp"
#include "support/sigpipe.hpp"
#include "distc/pg.h"

using namespace distc;
using distc::capi::guard;
using distc::capi::require;
using distc::capi::require_ptr;
using distc::capi::tensor_arg;
using distc::capi::tensor_list_arg;

static_assert(DISTC_SUM == static_cast<int>(ReduceOp::Sum) && DISTC_PREMUL_SUM == static_cast<int>(ReduceOp::PremulSum),
              "distc_reduce_op and ReduceOp must agree");

namespace {

ProcessGroup &pg_arg(distc_pg *pg) {
    require_ptr(pg, "pg");
    return *pg->impl;
}

const ProcessGroup &pg_arg(const distc_pg *pg) {
    require_ptr(pg, "pg");
    return *pg->impl;
}

PgOptions pg_options(const distc_pg_options *opts) {
    PgOptions o;
    if (!opts) return o;
    capi::check_options_version(opts->version, DISTC_PG_OPTIONS_VERSION);
    if (opts->backend) o.backend = opts->backend;
    require(opts->timeout_ms == -1 || opts->timeout_ms > 0, "opts->timeout_ms must be > 0 or -1");
    if (opts->timeout_ms > 0) o.timeout = capi::clamp_ms(opts->timeout_ms);
    if (opts->group_name) {
        require(opts->group_name[0] != '\0', "opts->group_name is empty");
        o.name = opts->group_name;
    }
    require(opts->debug >= -1 && opts->debug <= 1, "opts->debug must be -1, 0 or 1");
    o.debug = opts->debug;
    if (opts->version >= 2) {
        require(opts->device >= -1, "opts->device must be >= 0 or -1");
        o.device = opts->device;
    }
    return o;
}

OpOptions op_options_given(const distc_op_options *opts) {
    OpOptions o;
    capi::check_options_version(opts->version, DISTC_OP_OPTIONS_VERSION);
    require(opts->timeout_ms == -1 || opts->timeout_ms > 0, "opts->timeout_ms must be > 0 or -1");
    if (opts->timeout_ms > 0) o.timeout = capi::clamp_ms(opts->timeout_ms);
    o.premul_factor = opts->premul_factor;
    if (opts->version >= 2) o.stream = opts->stream;
    return o;
}

inline OpOptions op_options(const distc_op_options *opts) { return opts ? op_options_given(opts) : OpOptions{}; }

std::shared_ptr<ProcessGroup> make_pg(const std::shared_ptr<Store> &store, int rank, int size, const PgOptions &o) {
    require(size >= 1, ("size is " + std::to_string(size) + ", must be >= 1").c_str());
    require(rank >= 0 && rank < size,
            ("rank " + std::to_string(rank) + " is outside 0.." + std::to_string(size - 1)).c_str());
    return std::make_shared<ProcessGroup>(store, rank, size, o);
}

// A subgroup for members; NULL (and success) for the others.
int box_member(distc_pg **out, std::shared_ptr<ProcessGroup> g) {
    *out = g ? new distc_pg{std::move(g)} : nullptr;
    return 0;
}

std::vector<ByteView> byte_views(const void *const *data, const size_t *lens, size_t n) {
    require(data != nullptr && lens != nullptr, "data or lens is NULL on the root");
    std::vector<ByteView> v;
    for (size_t i = 0; i < n; ++i) {
        if (!data[i] && lens[i])
            fail(DISTC_EINVAL, "data[" + std::to_string(i) + "] is NULL but lens[" + std::to_string(i) + "] > 0");
        v.emplace_back(data[i], lens[i]);
    }
    return v;
}

void to_bufs(distc_buf *out, const std::vector<Bytes> &vals) {
    size_t i = 0;
    try {
        for (; i < vals.size(); ++i)
            if (distc_buf_set(&out[i], vals[i].data(), vals[i].size()) != 0)
                fail(DISTC_ENOMEM, "cannot allocate a result");
    } catch (...) {
        for (size_t j = 0; j < i; ++j) distc_buf_dispose(&out[j]);
        throw;
    }
}

// The shared tail of every collective: block (out == NULL) or hand back a handle.
int finish(distc_work **out, ProcessGroup::WorkPtr w) {
    if (out) *out = new distc_work{std::move(w)};
    return 0;
}

}  // namespace

extern "C" {

DISTC_EXTERN(int) distc_pg_options_init(distc_pg_options *opts, unsigned int version) {
    return guard(__func__, [&] {
        capi::init_options(opts, version, DISTC_PG_OPTIONS_VERSION, distc_pg_options DISTC_PG_OPTIONS_INIT,
                           {offsetof(distc_pg_options, device)});
        return 0;
    });
}

DISTC_EXTERN(int) distc_op_options_init(distc_op_options *opts, unsigned int version) {
    return guard(__func__, [&] {
        capi::init_options(opts, version, DISTC_OP_OPTIONS_VERSION, distc_op_options DISTC_OP_OPTIONS_INIT,
                           {offsetof(distc_op_options, stream)});
        return 0;
    });
}

DISTC_EXTERN(int) distc_pg_new(distc_pg **out, distc_store *store, int32_t rank, int32_t size,
                               const distc_pg_options *opts) {
    return guard(__func__, [&] {
        require_ptr(out, "out");
        require_ptr(store, "store");
        *out = new distc_pg{make_pg(store->impl, rank, size, pg_options(opts))};
        return 0;
    });
}

DISTC_EXTERN(int) distc_pg_new_from_url(distc_pg **out, const char *url, const distc_rendezvous_options *rv,
                                        const distc_pg_options *opts) {
    return guard(__func__, [&] {
        require_ptr(out, "out");
        PgOptions o = pg_options(opts);
        // "<backend>://" (say mpi://): the engine's launcher placed the ranks; no store to meet in.
        std::string u = url ? url : "";
        size_t sep = u.find("://");
        std::string scheme = sep == std::string::npos ? "" : u.substr(0, sep);
        auto from_engine = [&](const std::string &name, int rank, int size) {
            o.backend = name;
            o.private_store = true;
            *out = new distc_pg{make_pg(std::make_shared<HashStore>(), rank, size, o)};
            return 0;
        };
        if (sep != std::string::npos && sep + 3 == u.size() && scheme != "env" && scheme != "tcp" && scheme != "file") {
            if (opts && opts->backend && scheme != opts->backend)
                fail(DISTC_EINVAL,
                     "url " + u + " names the " + scheme + " backend but opts->backend is " + opts->backend);
            int rank = -1, size = -1;
            engine_world(scheme, rank, size);
            return from_engine(scheme, rank, size);
        }
        // env:// (or no URL) without MASTER_ADDR, for a backend whose launcher
        // placed the ranks (mpi under mpirun or srun): its world, as c10d's
        // init_process_group("mpi") needs nothing either.
        if ((u.empty() || u == "env://") && opts && opts->backend && !std::getenv("MASTER_ADDR")) {
            int rank = -1, size = -1;
            try {
                engine_world(opts->backend, rank, size);
                return from_engine(opts->backend, rank, size);
            } catch (const Error &e) {
                if (e.code() != DISTC_ENOTSUP && e.code() != DISTC_ENOTFOUND) throw;
            }  // a backend with no world of its own: env:// says what is missing
        }
        RendezvousResult r = rendezvous(capi::rendezvous_request(url, rv, "rv"));
        *out = new distc_pg{make_pg(r.store, r.rank, r.world_size, o)};
        return 0;
    });
}

DISTC_EXTERN(int) distc_pg_rank(int32_t *out, const distc_pg *pg) {
    return guard(__func__, [&] {
        require_ptr(out, "out");
        *out = pg_arg(pg).rank();
        return 0;
    });
}

DISTC_EXTERN(int) distc_pg_size(int32_t *out, const distc_pg *pg) {
    return guard(__func__, [&] {
        require_ptr(out, "out");
        *out = pg_arg(pg).size();
        return 0;
    });
}

DISTC_EXTERN(int) distc_pg_backend(const char **out, const distc_pg *pg) {
    return guard(__func__, [&] {
        require_ptr(out, "out");
        *out = pg_arg(pg).backend_name();
        return 0;
    });
}

DISTC_EXTERN(int) distc_pg_transport(const char **out, const distc_pg *pg, int32_t peer) {
    return guard(__func__, [&] {
        require_ptr(out, "out");
        const ProcessGroup &g = pg_arg(pg);
        if (peer < 0 || peer >= g.size())
            fail(DISTC_EINVAL, "peer " + std::to_string(peer) + " is not a rank of the group (size " +
                                   std::to_string(g.size()) + ")");
        *out = g.transport(peer);
        return 0;
    });
}

DISTC_EXTERN(int) distc_pg_name(const char **out, const distc_pg *pg) {
    return guard(__func__, [&] {
        require_ptr(out, "out");
        *out = pg_arg(pg).name().c_str();
        return 0;
    });
}

DISTC_EXTERN(int) distc_pg_store_prefix(const char **out, const distc_pg *pg) {
    return guard(__func__, [&] {
        require_ptr(out, "out");
        *out = pg_arg(pg).store_prefix().c_str();
        return 0;
    });
}

DISTC_EXTERN(int) distc_pg_timeout(int64_t *out, const distc_pg *pg) {
    return guard(__func__, [&] {
        require_ptr(out, "out");
        *out = pg_arg(pg).timeout().count();
        return 0;
    });
}

DISTC_EXTERN(int) distc_pg_new_subgroup(distc_pg **out, distc_pg *parent, const int32_t *ranks, size_t n,
                                        const distc_pg_options *opts) {
    return guard(__func__, [&] {
        require_ptr(out, "out");
        ProcessGroup &p = pg_arg(parent);
        require(n > 0, "n is 0 (no ranks)");
        require_ptr(ranks, "ranks");
        return box_member(out, p.new_subgroup(std::vector<int>(ranks, ranks + n), pg_options(opts)));
    });
}

DISTC_EXTERN(int) distc_pg_split(distc_pg **out, distc_pg *parent, int32_t color, int32_t key,
                                 const distc_pg_options *opts) {
    return guard(__func__, [&] {
        require_ptr(out, "out");
        ProcessGroup &p = pg_arg(parent);
        return box_member(out, p.split(color, key, pg_options(opts)));
    });
}

DISTC_EXTERN(int) distc_pg_global_rank(int32_t *out, const distc_pg *pg, int32_t group_rank) {
    return guard(__func__, [&] {
        require_ptr(out, "out");
        const ProcessGroup &g = pg_arg(pg);
        int r = g.global_rank(group_rank);
        if (r < 0)
            fail(DISTC_EINVAL,
                 "group_rank " + std::to_string(group_rank) + " is outside 0.." + std::to_string(g.size() - 1));
        *out = r;
        return 0;
    });
}

DISTC_EXTERN(int) distc_pg_group_rank(int32_t *out, const distc_pg *pg, int32_t global_rank) {
    return guard(__func__, [&] {
        require_ptr(out, "out");
        *out = pg_arg(pg).group_rank(global_rank);
        return 0;
    });
}

DISTC_EXTERN(int) distc_monitored_barrier(distc_pg *pg, int64_t timeout_ms, int32_t wait_all_ranks) {
    return guard(__func__, [&] {
        ProcessGroup &g = pg_arg(pg);
        require(timeout_ms == DISTC_TIMEOUT_DEFAULT || timeout_ms > 0, "timeout_ms must be > 0 or -1");
        g.monitored_barrier(timeout_ms > 0 ? capi::clamp_ms(timeout_ms) : g.timeout(), wait_all_ranks != 0);
        return 0;
    });
}

DISTC_EXTERN(int) distc_batch_isend_irecv(distc_work **out, distc_pg *pg, const distc_p2p_op *ops, size_t n,
                                          const distc_op_options *opts) {
    return guard(__func__, [&] {
        ProcessGroup &g = pg_arg(pg);
        require(n > 0, "n is 0 (no operations)");
        require_ptr(ops, "ops");
        // A batch of a few (a send and a receive, most often) allocates nothing.
        std::vector<P2pOp> many;
        InlineList<P2pOp, 8> few(n <= 8 ? n : 0);
        if (n > 8) many.reserve(std::min<size_t>(n, 64));  // n is not to be trusted before each op is read
        for (size_t i = 0; i < n; ++i) {
            auto at = [i] { return "ops[" + std::to_string(i) + "]"; };  // only for an error
            if (ops[i].kind != DISTC_P2P_SEND && ops[i].kind != DISTC_P2P_RECV)
                fail(DISTC_EINVAL, at() + ".kind is neither DISTC_P2P_SEND nor DISTC_P2P_RECV");
            if (ops[i].tag < 0) fail(DISTC_EINVAL, at() + ".tag is negative");
            P2pOp op{ops[i].kind == DISTC_P2P_SEND, tensor_arg(g, ops[i].tensor, [&] { return at() + ".tensor"; }),
                     ops[i].peer, ops[i].tag};
            if (n > 8)
                many.push_back(op);
            else
                few.set(i, op);
        }
        return finish(out, g.batch_p2p(n > 8 ? Span<P2pOp>(many) : few.span(), op_options(opts), out));
    });
}

DISTC_EXTERN(int) distc_all_gather_bytes(distc_buf *out, distc_pg *pg, const void *data, size_t len,
                                         const distc_op_options *opts) {
    return guard(__func__, [&] {
        require_ptr(out, "out");
        ProcessGroup &g = pg_arg(pg);
        require(data != nullptr || len == 0, "data is NULL but len > 0");
        to_bufs(out, g.all_gather_bytes(ByteView(data, len), op_options(opts)));
        return 0;
    });
}

DISTC_EXTERN(int) distc_gather_bytes(distc_buf *out, distc_pg *pg, const void *data, size_t len, int32_t root,
                                     const distc_op_options *opts) {
    return guard(__func__, [&] {
        ProcessGroup &g = pg_arg(pg);
        if (g.rank() == root) require_ptr(out, "out");
        require(data != nullptr || len == 0, "data is NULL but len > 0");
        auto vals = g.gather_bytes(ByteView(data, len), root, op_options(opts));
        if (g.rank() == root) to_bufs(out, vals);
        return 0;
    });
}

DISTC_EXTERN(int) distc_broadcast_bytes(distc_buf *out, distc_pg *pg, const void *data, size_t len, int32_t root,
                                        const distc_op_options *opts) {
    return guard(__func__, [&] {
        require_ptr(out, "out");
        ProcessGroup &g = pg_arg(pg);
        if (g.rank() == root) require(data != nullptr || len == 0, "data is NULL but len > 0 on the root");
        to_bufs(out, {g.broadcast_bytes(ByteView(data, g.rank() == root ? len : 0), root, op_options(opts))});
        return 0;
    });
}

DISTC_EXTERN(int) distc_scatter_bytes(distc_buf *out, distc_pg *pg, const void *const *data, const size_t *lens,
                                      int32_t root, const distc_op_options *opts) {
    return guard(__func__, [&] {
        require_ptr(out, "out");
        ProcessGroup &g = pg_arg(pg);
        std::vector<ByteView> v;
        if (g.rank() == root) v = byte_views(data, lens, static_cast<size_t>(g.size()));
        to_bufs(out, {g.scatter_bytes(v, root, op_options(opts))});
        return 0;
    });
}

DISTC_EXTERN(int) distc_pg_abort(distc_pg *pg) {
    return guard(__func__, [&] {
        pg_arg(pg).abort();
        return 0;
    });
}

DISTC_EXTERN(int) distc_pg_trace_dump(const distc_pg *pg, const char *path) {
    return guard(__func__, [&] {
        const ProcessGroup &g = pg_arg(pg);
        require_ptr(path, "path");
        if (!*path) fail(DISTC_EINVAL, "path is empty");
        g.trace_dump(path);
        return 0;
    });
}

DISTC_EXTERN(int) distc_trace_dump_all(const char *dir) {
    return guard(__func__, [&] {
        require_ptr(dir, "dir");
        if (!*dir) fail(DISTC_EINVAL, "dir is empty");
        TraceRecorder::dump_all(dir);
        return 0;
    });
}

DISTC_EXTERN(void) distc_pg_free(distc_pg *pg) {
    if (pg && on_group_thread()) {
        // Called from a completion callback: the group (if this was its last
        // handle) must not be torn down on its own thread; a short-lived
        // thread does it once the callback has returned.
        auto *keep = new (std::nothrow) std::shared_ptr<ProcessGroup>(std::move(pg->impl));
        try {
            if (keep) start_thread([keep] { delete keep; }).detach();
        } catch (...) {
            // Cannot spawn: leak the group rather than join a thread from itself.
        }
    }
    delete pg;
}

DISTC_EXTERN(int) distc_allreduce(distc_work **out, distc_pg *pg, DLTensor *tensor, distc_reduce_op op,
                                  const distc_op_options *opts) {
    return guard(__func__, [&] {
        ProcessGroup &g = pg_arg(pg);
        return finish(out,
                      g.allreduce(tensor_arg(g, tensor, "tensor"), capi::reduce_op_arg(op), op_options(opts), out));
    });
}

DISTC_EXTERN(int) distc_allreduce_coalesced(distc_work **out, distc_pg *pg, DLTensor *const *tensors, size_t n,
                                            distc_reduce_op op, const distc_op_options *opts) {
    return guard(__func__, [&] {
        ProcessGroup &g = pg_arg(pg);
        require(n > 0, "n is 0 (no tensors)");
        return finish(out, g.allreduce(tensor_list_arg(g, tensors, n, "tensors"), capi::reduce_op_arg(op),
                                       op_options(opts), out));
    });
}

DISTC_EXTERN(int) distc_broadcast(distc_work **out, distc_pg *pg, DLTensor *tensor, int32_t root,
                                  const distc_op_options *opts) {
    return guard(__func__, [&] {
        ProcessGroup &g = pg_arg(pg);
        return finish(out, g.broadcast(tensor_arg(g, tensor, "tensor"), root, op_options(opts), out));
    });
}

DISTC_EXTERN(int) distc_reduce(distc_work **out, distc_pg *pg, DLTensor *tensor, int32_t root, distc_reduce_op op,
                               const distc_op_options *opts) {
    return guard(__func__, [&] {
        ProcessGroup &g = pg_arg(pg);
        return finish(out,
                      g.reduce(tensor_arg(g, tensor, "tensor"), root, capi::reduce_op_arg(op), op_options(opts), out));
    });
}

DISTC_EXTERN(int) distc_allgather(distc_work **out, distc_pg *pg, DLTensor *const *outputs, const DLTensor *input,
                                  const distc_op_options *opts) {
    return guard(__func__, [&] {
        ProcessGroup &g = pg_arg(pg);
        return finish(out, g.allgather(tensor_arg(g, input, "input"),
                                       tensor_list_arg(g, outputs, static_cast<size_t>(g.size()), "outputs"),
                                       op_options(opts), out));
    });
}

}  // extern "C"

namespace {
// `n` equal consecutive views of a flat tensor; its size must divide by n.
capi::TensorList split_views(const Tensor &flat, size_t n, size_t part_numel, const char *name) {
    uint64_t whole = 0;
    if (!mul_fits(part_numel, n, whole) || flat.numel != whole)
        fail(DISTC_EINVAL, std::string(name) + " has " + std::to_string(flat.numel) + " elements, expected " +
                               std::to_string(n) + " x " + std::to_string(part_numel));
    capi::TensorList v(n);
    Tensor part = flat;
    part.numel = part_numel;
    part.dim0 = static_cast<int64_t>(part_numel);
    for (size_t i = 0; i < n; ++i) {
        part.data = flat.bytes() + i * part_numel * dtype_size(flat.dtype);
        v.set(i, part);
    }
    return v;
}
}  // namespace

extern "C" {

DISTC_EXTERN(int) distc_allgather_into_tensor(distc_work **out, distc_pg *pg, DLTensor *output, const DLTensor *input,
                                              const distc_op_options *opts) {
    return guard(__func__, [&] {
        ProcessGroup &g = pg_arg(pg);
        Tensor in = tensor_arg(g, input, "input");
        Tensor o = tensor_arg(g, output, "output");
        if (o.dtype != in.dtype)
            fail(DISTC_EINVAL,
                 std::string("output is ") + dtype_name(o.dtype) + " but input is " + dtype_name(in.dtype));
        auto parts = split_views(o, static_cast<size_t>(g.size()), in.numel, "output");
        return finish(out, g.allgather(in, parts, op_options(opts), out));
    });
}

DISTC_EXTERN(int) distc_gather(distc_work **out, distc_pg *pg, DLTensor *const *outputs, const DLTensor *input,
                               int32_t root, const distc_op_options *opts) {
    return guard(__func__, [&] {
        ProcessGroup &g = pg_arg(pg);
        auto outs = g.rank() == root ? tensor_list_arg(g, outputs, static_cast<size_t>(g.size()), "outputs")
                                     : capi::TensorList();
        return finish(out, g.gather(tensor_arg(g, input, "input"), outs, root, op_options(opts), out));
    });
}

DISTC_EXTERN(int) distc_scatter(distc_work **out, distc_pg *pg, DLTensor *output, const DLTensor *const *inputs,
                                int32_t root, const distc_op_options *opts) {
    return guard(__func__, [&] {
        ProcessGroup &g = pg_arg(pg);
        auto ins =
            g.rank() == root ? tensor_list_arg(g, inputs, static_cast<size_t>(g.size()), "inputs") : capi::TensorList();
        return finish(out, g.scatter(ins, tensor_arg(g, output, "output"), root, op_options(opts), out));
    });
}

DISTC_EXTERN(int) distc_reduce_scatter(distc_work **out, distc_pg *pg, DLTensor *output, const DLTensor *const *inputs,
                                       distc_reduce_op op, const distc_op_options *opts) {
    return guard(__func__, [&] {
        ProcessGroup &g = pg_arg(pg);
        return finish(
            out, g.reduce_scatter(tensor_list_arg(g, inputs, static_cast<size_t>(g.size()), "inputs"),
                                  tensor_arg(g, output, "output"), capi::reduce_op_arg(op), op_options(opts), out));
    });
}

DISTC_EXTERN(int) distc_reduce_scatter_tensor(distc_work **out, distc_pg *pg, DLTensor *output, const DLTensor *input,
                                              distc_reduce_op op, const distc_op_options *opts) {
    return guard(__func__, [&] {
        ProcessGroup &g = pg_arg(pg);
        Tensor o = tensor_arg(g, output, "output");
        Tensor in = tensor_arg(g, input, "input");
        if (o.dtype != in.dtype)
            fail(DISTC_EINVAL,
                 std::string("output is ") + dtype_name(o.dtype) + " but input is " + dtype_name(in.dtype));
        auto parts = split_views(in, static_cast<size_t>(g.size()), o.numel, "input");
        return finish(out, g.reduce_scatter(parts, o, capi::reduce_op_arg(op), op_options(opts), out));
    });
}

DISTC_EXTERN(int) distc_alltoall(distc_work **out, distc_pg *pg, DLTensor *const *outputs,
                                 const DLTensor *const *inputs, const distc_op_options *opts) {
    return guard(__func__, [&] {
        ProcessGroup &g = pg_arg(pg);
        size_t n = static_cast<size_t>(g.size());
        return finish(out, g.alltoall(tensor_list_arg(g, inputs, n, "inputs"),
                                      tensor_list_arg(g, outputs, n, "outputs"), op_options(opts), out));
    });
}

DISTC_EXTERN(int) distc_alltoall_single(distc_work **out, distc_pg *pg, DLTensor *output, const DLTensor *input,
                                        const int64_t *output_splits, const int64_t *input_splits,
                                        const distc_op_options *opts) {
    return guard(__func__, [&] {
        ProcessGroup &g = pg_arg(pg);
        size_t n = static_cast<size_t>(g.size());
        std::vector<int64_t> os, is;
        if (output_splits) os.assign(output_splits, output_splits + n);
        if (input_splits) is.assign(input_splits, input_splits + n);
        return finish(out, g.alltoall_single(tensor_arg(g, input, "input"), tensor_arg(g, output, "output"),
                                             std::move(is), std::move(os), op_options(opts), out));
    });
}

DISTC_EXTERN(int) distc_barrier(distc_work **out, distc_pg *pg, const distc_op_options *opts) {
    return guard(__func__, [&] {
        ProcessGroup &g = pg_arg(pg);
        return finish(out, g.barrier(op_options(opts), out));
    });
}

DISTC_EXTERN(int) distc_send(distc_work **out, distc_pg *pg, const DLTensor *tensor, int32_t dst, int32_t tag,
                             const distc_op_options *opts) {
    return guard(__func__, [&] {
        ProcessGroup &g = pg_arg(pg);
        return finish(out, g.send(tensor_arg(g, tensor, "tensor"), dst, tag, op_options(opts), out));
    });
}

DISTC_EXTERN(int) distc_recv(distc_work **out, distc_pg *pg, DLTensor *tensor, int32_t src, int32_t tag,
                             const distc_op_options *opts) {
    return guard(__func__, [&] {
        ProcessGroup &g = pg_arg(pg);
        return finish(out, g.recv(tensor_arg(g, tensor, "tensor"), src, tag, op_options(opts), out));
    });
}

}  // extern "C"

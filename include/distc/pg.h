/**
 * @file distc/pg.h
 * @brief Process groups and their collectives (torch.distributed's semantics).
 *
 * A process group is `size` ranks that rendezvous through a store and then
 * run collectives on DLPack tensors over a backend: "gloo" on CPU, built in;
 * "nccl" on CUDA and "mpi", plugins loaded on first use (distc/sys/backend.h
 * says how, and how to add one). Buffers are `DLTensor`s
 * (<dlpack/dlpack.h>), borrowed for the call and, for asynchronous work,
 * until the work completes. They must be contiguous (`strides` NULL or
 * compact) and in memory the backend takes: CPU (or CUDA host) memory for
 * gloo, CUDA device memory of the group's device for nccl. A tensor's size
 * (its shape's product times the element size, computed with overflow
 * checks) and its `byte_offset` must each be at most DISTC_TENSOR_MAX_BYTES,
 * and `data + byte_offset` plus that size must not wrap the address space,
 * and must be aligned to the element size (to the part's size for complex
 * dtypes); otherwise the call fails with DISTC_EINVAL before anything is sent.
 *
 * Device backends (nccl) are stream-ordered, as NCCL itself: an operation
 * is enqueued on `distc_op_options.stream` (NULL: the legacy default stream)
 * and later work on that stream sees its result. A blocking call
 * (`out == NULL`) returns once the operation is enqueued, not once it ran;
 * with `out` the work handle can make another stream wait
 * (distc_work_wait_stream) or block the host (distc_work_wait). The library
 * reads and writes the buffers only in stream order and never after the
 * work completed. A watchdog fails work that outlives its timeout, and an
 * engine error, by aborting the communicator: the group then answers
 * DISTC_EABORTED.
 *
 * Dtypes: bool, int8, uint8, int16, int32, int64, float16, bfloat16,
 * float32, float64, complex64, complex128.
 *
 * Every call takes `distc_work **out` first: NULL blocks until done (on the
 * calling thread, no hand-off); otherwise the call queues the operation on
 * the group's worker thread and gives a handle (distc/work.h).
 *
 * Thread-safety: collectives on one group must be issued in the same order
 * on every rank; issuing them from several threads at once is allowed but
 * then that order is the caller's to guarantee. Query functions are safe
 * from any thread. distc_pg_abort may be called from any thread at any time.
 *
 * Signals: a dead peer is an error (DISTC_EREMOTE), never a SIGPIPE. Threads
 * the library starts block SIGPIPE; the calling thread blocks it only during
 * a call that writes to sockets without MSG_NOSIGNAL (Gloo's), and gets its
 * mask back as it was, with no SIGPIPE left pending. Signal dispositions are
 * the program's and are not changed.
 *
 * Failures: a collective that fails on one rank (a timeout, a dead peer)
 * breaks the group there, so that the same call fails on every rank; later
 * calls give DISTC_EABORTED. On the built-in backend the first rank to break
 * the group leaves why in the group's store (not a custom store), and an
 * error that a peer's breaking off caused (DISTC_EREMOTE) names it ("...;
 * the group's first failure: ...").
 */
#ifndef DISTC_PG_H
#define DISTC_PG_H

#include <dlpack/dlpack.h>

#include "common.h"
#include "store.h"
#include "work.h"

DISTC_BEGIN_DECL

/** An opaque process group handle. It holds a reference to its store. */
typedef struct distc_pg distc_pg;

/** Reduction operators. Values are part of the ABI. */
typedef enum distc_reduce_op {
    DISTC_SUM = 0,
    DISTC_AVG = 1, /**< sum, then one division by the group size */
    DISTC_PRODUCT = 2,
    DISTC_MIN = 3,
    DISTC_MAX = 4,
    DISTC_BAND = 5, /**< integer and bool tensors only */
    DISTC_BOR = 6,
    DISTC_BXOR = 7,
    DISTC_PREMUL_SUM = 8 /**< each input times distc_op_options.premul_factor, then summed */
} distc_reduce_op;

/**
 * The largest tensor, byte string or result buffer a collective takes: 2^48
 * bytes (256 TiB). Sizes over it are DISTC_EINVAL, never allocated or read.
 */
#define DISTC_TENSOR_MAX_BYTES ((uint64_t)1 << 48)

/** c10d's default collective timeout: 30 minutes. */
#define DISTC_PG_DEFAULT_TIMEOUT_MS 1800000

/** Version 2 added `device`. Structs of version 1 are still accepted. */
#define DISTC_PG_OPTIONS_VERSION 2

/** Options of a new group. */
typedef struct distc_pg_options {
    unsigned int version;   /**< DISTC_PG_OPTIONS_VERSION */
    const char *backend;    /**< NULL: "gloo" */
    int64_t timeout_ms;     /**< default timeout of every operation; -1: 30 min */
    const char *group_name; /**< the group's name; a root group's keys live under
                                  "<name>/<instance>/" in the store. NULL: "default_pg"
                                  (subgroups: derived from the parent's). A subgroup's keys
                                  live under a prefix derived from its parent's whatever its
                                  name, so groups given one name (each color of a split) never
                                  meet: distc_pg_store_prefix tells where. */
    int32_t debug;          /**< 1: before each collective, the ranks check that they all
                                  call the same operation with the same dtype, count, root and
                                  op (one small allgather; an all-to-all's split sizes too),
                                  and a mismatch is DISTC_EINVAL on every rank naming who calls
                                  what; 0: off; -1: a subgroup's parent's setting, else on when
                                  the environment has DISTC_DEBUG=detail. Set it alike on every
                                  rank. On other backends than gloo the check runs on the
                                  calling thread before the engine sees the call (over a host
                                  group of its own in the store; through the engine for
                                  mpi://), so a call, asynchronous or not, returns only once
                                  every rank made its own, and a mismatch fails the call
                                  itself. */
    int32_t device;         /**< (version 2) the accelerator of a device backend ("nccl": the CUDA
                                  device); -1: the backend's choice (nccl: LOCAL_RANK modulo the
                                  device count, else 0) */
} distc_pg_options;

#define DISTC_PG_OPTIONS_INIT \
    { DISTC_PG_OPTIONS_VERSION, NULL, -1, NULL, -1, -1 }

/** Fills `opts` with the defaults above; `version` 1 fills the fields of version 1 only. */
DISTC_EXTERN(int) distc_pg_options_init(distc_pg_options *opts, unsigned int version);

/** Version 2 added `stream`. Structs of version 1 are still accepted. */
#define DISTC_OP_OPTIONS_VERSION 2

/** Per-operation options; NULL means defaults. */
typedef struct distc_op_options {
    unsigned int version; /**< DISTC_OP_OPTIONS_VERSION */
    int64_t timeout_ms;   /**< -1: the group's timeout */
    double premul_factor; /**< the factor of DISTC_PREMUL_SUM */
    void *stream;         /**< (version 2) device backends: the stream the operation is ordered
                                 on (a cudaStream_t for nccl); NULL: the device's default
                                 (legacy) stream. Ignored by host backends. */
} distc_op_options;

#define DISTC_OP_OPTIONS_INIT \
    { DISTC_OP_OPTIONS_VERSION, -1, 1.0, NULL }

/** Fills `opts` with the defaults above; `version` 1 fills the fields of version 1 only. */
DISTC_EXTERN(int) distc_op_options_init(distc_op_options *opts, unsigned int version);

/* ------------------------------------------------------------------------ */
/* Groups                                                                    */

/**
 * Creates this rank's member of a group of `size` ranks that meet in `store`
 * (every rank passes the same store contents, group name and size). Returns
 * when all ranks have connected, or DISTC_ETIMEOUT naming the ranks missing.
 */
DISTC_EXTERN(int) distc_pg_new(distc_pg **out, distc_store *store, int32_t rank, int32_t size,
                               const distc_pg_options *opts);

/**
 * Rendezvous by URL (see distc_rendezvous: env://, tcp://, file://) and
 * create the group in one call. `rv` may be NULL. "<backend>://" (mpi://)
 * takes the ranks the backend's launcher placed, with no store; so do
 * env:// and a NULL `url` when MASTER_ADDR is not set and `opts->backend`
 * names such a backend (mpi under mpirun or srun).
 */
DISTC_EXTERN(int) distc_pg_new_from_url(distc_pg **out, const char *url, const distc_rendezvous_options *rv,
                                        const distc_pg_options *opts);

/** This process's rank in the group. */
DISTC_EXTERN(int) distc_pg_rank(int32_t *out, const distc_pg *pg);
/** The number of ranks in the group. */
DISTC_EXTERN(int) distc_pg_size(int32_t *out, const distc_pg *pg);
/** The backend's name ("gloo"); valid as long as the handle. */
DISTC_EXTERN(int) distc_pg_backend(const char **out, const distc_pg *pg);
/**
 * How this rank's collectives and point-to-point reach `peer` (a rank of
 * the group): "shm" (shared memory: the peer is on this host; a group
 * that spans hosts runs its collectives hierarchically, see README), "tcp" (the TCP mesh),
 * "gloo" (Gloo's pairs), "self" for this rank; with DISTC_MESH_BYTES set,
 * the two paths joined ("shm+gloo": small ones, then large ones). Other
 * backends answer their own name ("mpi", "nccl"). A static string.
 */
DISTC_EXTERN(int) distc_pg_transport(const char **out, const distc_pg *pg, int32_t peer);
/** The group's name. Valid as long as the handle. */
DISTC_EXTERN(int) distc_pg_name(const char **out, const distc_pg *pg);
/**
 * The prefix of this group's keys in the store: "<name>/<instance>/", where the
 * instance counts earlier groups of the same name on that store (so a name can
 * be reused). Valid as long as the handle.
 */
DISTC_EXTERN(int) distc_pg_store_prefix(const char **out, const distc_pg *pg);
/** The group's default timeout in ms. */
DISTC_EXTERN(int) distc_pg_timeout(int64_t *out, const distc_pg *pg);

/**
 * @brief Loads a backend plugin from a file (c10d's Backend.register_backend).
 *
 * Makes the plugin library at `path` (one that exports
 * distc_backend_plugin_init, see distc/sys/backend.h) the backend `name`
 * of this process, whatever its file is called and wherever it lies;
 * groups then name it in distc_pg_options.backend. Plugins named
 * libdistc-<name>.so in DISTC_PLUGIN_PATH or next to libdistc load by
 * themselves and need no call. Names are [a-z0-9_-]+.
 *
 * @return 0; DISTC_ESTATE when `name` is "gloo" or taken; DISTC_ENOTFOUND
 *         when there is no file at `path`; DISTC_EBACKEND when it cannot be
 *         loaded, is not a distc plugin, or refuses to start (the message
 *         says which).
 */
DISTC_EXTERN(int) distc_plugin_load(const char *name, const char *path);

/* ------------------------------------------------------------------------ */
/* Subgroups                                                                 */

/**
 * @brief A group of some of the parent's ranks (c10d's new_group).
 *
 * c10d's new_group: a group of the parent's ranks listed in `ranks` (n of
 * them, distinct), numbered in that order. Every rank of the parent calls it,
 * in the same order as other subgroup creations. A rank not listed gets 0 and
 * `*out == NULL` ("not a member"), not an error. The subgroup holds a
 * reference to the parent's store, not to the parent.
 */
DISTC_EXTERN(int) distc_pg_new_subgroup(distc_pg **out, distc_pg *parent, const int32_t *ranks, size_t n,
                                        const distc_pg_options *opts);

/** A `color` for distc_pg_split that means "in no new group". */
#define DISTC_SPLIT_NOCOLOR (-1)

/**
 * @brief Splits a group by color (MPI_Comm_split, ncclCommSplit).
 *
 * MPI_Comm_split / ncclCommSplit: every parent rank calls it (a collective on
 * the parent); ranks with the same `color` (>= 0) form one new group, ordered
 * by `key` and then by parent rank. DISTC_SPLIT_NOCOLOR gives 0 and
 * `*out == NULL`.
 */
DISTC_EXTERN(int) distc_pg_split(distc_pg **out, distc_pg *parent, int32_t color, int32_t key,
                                 const distc_pg_options *opts);

/**
 * The rank in the root group (the one made by distc_pg_new or
 * distc_pg_new_from_url) of this group's rank `group_rank`.
 */
DISTC_EXTERN(int) distc_pg_global_rank(int32_t *out, const distc_pg *pg, int32_t group_rank);

/** This group's rank of the root group's rank `global_rank`, or -1 when it is not a member. */
DISTC_EXTERN(int) distc_pg_group_rank(int32_t *out, const distc_pg *pg, int32_t global_rank);

/**
 * Aborts the group on this rank: operations in flight and queued fail with
 * DISTC_EABORTED, every waiter wakes, later calls fail with DISTC_EABORTED.
 * Never hangs. Peers see their operations with this rank fail.
 */
DISTC_EXTERN(int) distc_pg_abort(distc_pg *pg);

/* ------------------------------------------------------------------------ */
/* The flight recorder                                                       */

/**
 * @brief Writes this group's recent operations to the file `path`.
 *
 * Every group records its last DISTC_TRACE_BUFFER collectives and as many
 * point-to-point operations (default 1000; 0 turns recording off): group,
 * ranks, sequence number, operation, dtype, element count, root or peer and
 * tag, reduce op, the calling thread, state (queued, started, completed,
 * failed, aborted), when it was queued and when it ended, and a failure's
 * message. The file is JSON lines, version 1: a header ({"type":
 * "distc-trace","version":1,"host","pid","rank","time_us","groups"}), a
 * line per group ({"type":"group","group","rank","size","global_rank",
 * "backend","ranks","capacity","recorded"}), then its operations, oldest
 * first ({"type":"op","group","rank","id","seq","op","dtype","numel",
 * "root","reduce","peer","tag","blocking","thread","state","queued_us",
 * "ended_us","duration_us","code","error"}; times in microseconds since the
 * epoch, to a kernel tick of a few milliseconds: the coarse clock, which
 * costs no system call and needs no thread). "id" is a
 * collective's sequence number, and numbers point-to-point operations (seq
 * 0) apart; a point-to-point operation is listed after the collectives
 * begun before it. The file is written aside and renamed, so a reader sees
 * all of it or nothing. `distc-trace DIR` reads every rank's file and names
 * the rank at fault.
 *
 * With DISTC_TRACE_DIR set, every rank writes all its groups there by
 * itself (distc_trace_dump_all()) when an operation times out, fails
 * because a peer is gone, or is aborted, and when a group is aborted.
 *
 * @return 0; DISTC_ENOTSUP when recording is off; DISTC_EIO when the file
 *         cannot be written.
 */
DISTC_EXTERN(int) distc_pg_trace_dump(const distc_pg *pg, const char *path);

/**
 * @brief Writes every live group's recent operations into the directory `dir`.
 *
 * One file per process, named distc-trace-rank<R>-<host>-<pid>.jsonl (R:
 * the lowest root-group rank of its groups), in distc_pg_trace_dump()'s
 * format. Safe from any thread, also while collectives run: it never waits
 * for one.
 *
 * @return 0; DISTC_EIO when the file cannot be written.
 */
DISTC_EXTERN(int) distc_trace_dump_all(const char *dir);

/**
 * Releases the handle. Queued work is aborted; work handles stay valid (and
 * report DISTC_EABORTED if their operation could not run). On the mpi
 * backend work already handed to MPI is waited for (up to its timeout):
 * MPI cannot take a buffer back. NULL is a no-op.
 */
DISTC_EXTERN(void) distc_pg_free(distc_pg *pg);

/* ------------------------------------------------------------------------ */
/* Collectives                                                               */

/** Reduces `tensor` in place across the group; every rank gets the result. */
DISTC_EXTERN(int) distc_allreduce(distc_work **out, distc_pg *pg, DLTensor *tensor, distc_reduce_op op,
                                  const distc_op_options *opts);

/** Allreduce of `n` tensors of one dtype as a single operation. */
DISTC_EXTERN(int) distc_allreduce_coalesced(distc_work **out, distc_pg *pg, DLTensor *const *tensors, size_t n,
                                            distc_reduce_op op, const distc_op_options *opts);

/** Copies `root`'s tensor into every rank's `tensor`. */
DISTC_EXTERN(int) distc_broadcast(distc_work **out, distc_pg *pg, DLTensor *tensor, int32_t root,
                                  const distc_op_options *opts);

/** Reduces into `root`'s `tensor` (in place); other ranks' tensors are left as they were. */
DISTC_EXTERN(int) distc_reduce(distc_work **out, distc_pg *pg, DLTensor *tensor, int32_t root, distc_reduce_op op,
                               const distc_op_options *opts);

/** Gathers every rank's `input` into `outputs[0..size)` on every rank. */
DISTC_EXTERN(int) distc_allgather(distc_work **out, distc_pg *pg, DLTensor *const *outputs, const DLTensor *input,
                                  const distc_op_options *opts);

/** Gathers every rank's `input` into one `output` of size x its elements, in rank order. */
DISTC_EXTERN(int) distc_allgather_into_tensor(distc_work **out, distc_pg *pg, DLTensor *output, const DLTensor *input,
                                              const distc_op_options *opts);

/**
 * Gathers every rank's `input` into `outputs[0..size)` on `root`; `outputs`
 * is ignored (may be NULL) on other ranks.
 */
DISTC_EXTERN(int) distc_gather(distc_work **out, distc_pg *pg, DLTensor *const *outputs, const DLTensor *input,
                               int32_t root, const distc_op_options *opts);

/**
 * Sends `inputs[r]` from `root` to rank r's `output`; `inputs` is ignored
 * (may be NULL) on other ranks.
 */
DISTC_EXTERN(int) distc_scatter(distc_work **out, distc_pg *pg, DLTensor *output, const DLTensor *const *inputs,
                                int32_t root, const distc_op_options *opts);

/** Reduces `inputs[0..size)` across ranks; rank r's `output` gets the reduction of everyone's inputs[r]. */
DISTC_EXTERN(int) distc_reduce_scatter(distc_work **out, distc_pg *pg, DLTensor *output, const DLTensor *const *inputs,
                                       distc_reduce_op op, const distc_op_options *opts);

/** reduce_scatter from one flat `input` of size x `output`'s elements. */
DISTC_EXTERN(int) distc_reduce_scatter_tensor(distc_work **out, distc_pg *pg, DLTensor *output, const DLTensor *input,
                                              distc_reduce_op op, const distc_op_options *opts);

/** Rank r sends `inputs[j]` to rank j, which receives it in its `outputs[r]`. */
DISTC_EXTERN(int) distc_alltoall(distc_work **out, distc_pg *pg, DLTensor *const *outputs,
                                 const DLTensor *const *inputs, const distc_op_options *opts);

/**
 * All-to-all on single tensors split along their first dimension.
 * `input_splits[j]` rows go to rank j; `output_splits[j]` rows come from
 * rank j. Either may be NULL: even splits (the first dimension must then
 * divide by the group size). Splits must add up to the first dimension.
 * `output` may be `input` (in place, as torch allows): where the splits are
 * alike both ways, the parts then trade places, and on the host's shared
 * memory each pair swaps them where they lie, copying no more than what
 * crosses; otherwise the input is copied first. Other overlaps work too,
 * through a copy.
 */
DISTC_EXTERN(int) distc_alltoall_single(distc_work **out, distc_pg *pg, DLTensor *output, const DLTensor *input,
                                        const int64_t *output_splits, const int64_t *input_splits,
                                        const distc_op_options *opts);

/** Returns when every rank has entered the barrier. */
DISTC_EXTERN(int) distc_barrier(distc_work **out, distc_pg *pg, const distc_op_options *opts);

/** Receive from whichever rank sends first (distc_work_source_rank tells which). */
#define DISTC_ANY_SOURCE (-1)

/**
 * Sends `tensor` to rank `dst`, matched with its recv of the same `tag`
 * (messages of one peer and tag in the order posted). On the built-in
 * backend sends are eager: one completes once its bytes are in the kernel's
 * or the shared-memory ring's hands, before the receive is posted; one that
 * times out still delivers what `tensor` held when it was posted.
 */
DISTC_EXTERN(int) distc_send(distc_work **out, distc_pg *pg, const DLTensor *tensor, int32_t dst, int32_t tag,
                             const distc_op_options *opts);

/**
 * Receives into `tensor` from rank `src` (or DISTC_ANY_SOURCE) with `tag`.
 * To learn which rank an any-source message came from, pass `out` and read
 * distc_work_source_rank() once it completed. DISTC_ANY_SOURCE in a group
 * of one rank is DISTC_EINVAL: nobody can send.
 */
DISTC_EXTERN(int) distc_recv(distc_work **out, distc_pg *pg, DLTensor *tensor, int32_t src, int32_t tag,
                             const distc_op_options *opts);

/**
 * A barrier that names who is missing: every rank reports to rank 0, which
 * waits up to `timeout_ms` (DISTC_TIMEOUT_DEFAULT: the group's) and then
 * releases everyone. If ranks are missing, rank 0 and the ranks that did
 * arrive get DISTC_ETIMEOUT with a message naming the missing ranks (with
 * `wait_all_ranks` zero, only the first missing rank is named, as c10d).
 * Blocking only.
 */
DISTC_EXTERN(int) distc_monitored_barrier(distc_pg *pg, int64_t timeout_ms, int32_t wait_all_ranks);

/* ------------------------------------------------------------------------ */
/* Batched point-to-point                                                    */

/** Whether a distc_p2p_op sends or receives. Values are part of the ABI. */
typedef enum distc_p2p_kind { DISTC_P2P_SEND = 0, DISTC_P2P_RECV = 1 } distc_p2p_kind;

/** One send or receive of distc_batch_isend_irecv. */
typedef struct distc_p2p_op {
    int32_t kind;     /**< a distc_p2p_kind */
    DLTensor *tensor; /**< the data to send, or the buffer to receive into */
    int32_t peer;     /**< destination or source rank (no DISTC_ANY_SOURCE here) */
    int32_t tag;
} distc_p2p_op;

/**
 * @brief Sends and receives posted as one operation (torch's batch_isend_irecv).
 *
 * torch's batch_isend_irecv: posts all `n` sends and receives at once and
 * completes when all have (so a ring of sends and receives cannot deadlock).
 * One work handle covers the batch.
 */
DISTC_EXTERN(int) distc_batch_isend_irecv(distc_work **out, distc_pg *pg, const distc_p2p_op *ops, size_t n,
                                          const distc_op_options *opts);

/* ------------------------------------------------------------------------ */
/* Byte collectives (sizes may differ per rank), for object collectives      */

/**
 * Gathers `len` bytes of `data` from every rank into `outs[0..size)` on every
 * rank; lengths may differ between ranks. Release each with distc_buf_dispose.
 * Blocking only.
 */
DISTC_EXTERN(int) distc_all_gather_bytes(distc_buf *outs, distc_pg *pg, const void *data, size_t len,
                                         const distc_op_options *opts);

/** As distc_all_gather_bytes, into `outs[0..size)` on `root` only (ignored, may be NULL, elsewhere). */
DISTC_EXTERN(int) distc_gather_bytes(distc_buf *outs, distc_pg *pg, const void *data, size_t len, int32_t root,
                                     const distc_op_options *opts);

/** `root`'s `len` bytes of `data` into `*out` on every rank (root included); `data` is ignored elsewhere. */
DISTC_EXTERN(int) distc_broadcast_bytes(distc_buf *out, distc_pg *pg, const void *data, size_t len, int32_t root,
                                        const distc_op_options *opts);

/**
 * `root`'s `data[r]` (`lens[r]` bytes) into rank r's `*out`; `data` and
 * `lens` are ignored (may be NULL) on other ranks.
 */
DISTC_EXTERN(int) distc_scatter_bytes(distc_buf *out, distc_pg *pg, const void *const *data, const size_t *lens,
                                      int32_t root, const distc_op_options *opts);

DISTC_END_DECL

#endif /* DISTC_PG_H */

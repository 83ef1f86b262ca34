/**
 * @file distc/sys/backend.h
 * @brief Backends as plugins: the vtable a communication engine implements.
 *
 * "gloo" is built into libdistc. Any other backend name is looked up, on the
 * first group that asks for it, in this order:
 * 1. backends registered in this process with distc_backend_register();
 * 2. `libdistc-<name>.so` in each directory of DISTC_PLUGIN_PATH (colon
 *    separated), then in `<libdir>/distc/` next to libdistc itself. The
 *    plugin exports `distc_backend_plugin_init` (distc_backend_plugin_init_fn)
 *    which hands back its vtable; it is loaded with dlopen once per process.
 * A missing plugin, one built for a newer ABI, or one whose engine library
 * (libmpi, libnccl, libcudart ...) cannot be loaded is DISTC_ENOTFOUND or
 * DISTC_EBACKEND with a message naming what is missing. The core library
 * itself never depends on an engine.
 *
 * What the core does before calling a backend: checks every argument
 * (handles, ranks, roots, split sizes, list lengths, dtype/op combinations,
 * sizes and dtypes of inputs against outputs, memory kinds against
 * `device_types`), assigns the group's sequence number and the effective
 * timeout, and creates the work handle. The backend moves data and completes
 * the work.
 *
 * Work handles: every operation receives a `distc_work *work` created by
 * the core (a blocking call on a host backend gets its thread's reused
 * handle, see DISTC_OP_BLOCKING). Returning 0 means the backend took it and
 * will call distc_backend_work_complete() or distc_backend_work_fail() exactly once,
 * from any thread, before the operation's timeout has passed (plus a small
 * margin); it may do so before returning. After that call the handle must
 * not be touched again: the backend never frees a handle. Returning a
 * negative code (with distc_error_set()) means it did not take the work: the
 * core fails it with that message, and nothing was sent.
 *
 * Threads: operations of one group are called in the caller's issue order,
 * possibly from several threads, never concurrently for one group unless the
 * caller issues them concurrently. `abort` may be called from any thread at
 * any time, also while an operation call runs.
 */
#ifndef DISTC_SYS_BACKEND_H
#define DISTC_SYS_BACKEND_H

#include "../errors.h"
#include "../pg.h"

DISTC_BEGIN_DECL

/**
 * The vtable layout this header describes; a vtable with a larger version is
 * refused. Version 2 appended the mem_* entries.
 */
#define DISTC_BACKEND_OPS_VERSION 2

/** Element types as backends see them. Values are part of the ABI. */
typedef enum distc_dtype {
    DISTC_DTYPE_BOOL = 0,
    DISTC_DTYPE_INT8 = 1,
    DISTC_DTYPE_UINT8 = 2,
    DISTC_DTYPE_INT16 = 3,
    DISTC_DTYPE_INT32 = 4,
    DISTC_DTYPE_INT64 = 5,
    DISTC_DTYPE_FLOAT16 = 6,
    DISTC_DTYPE_BFLOAT16 = 7,
    DISTC_DTYPE_FLOAT32 = 8,
    DISTC_DTYPE_FLOAT64 = 9,
    DISTC_DTYPE_COMPLEX64 = 10, /**< two float32 */
    DISTC_DTYPE_COMPLEX128 = 11 /**< two float64 */
} distc_dtype;

/** A checked, contiguous buffer: a DLTensor flattened by the core. */
typedef struct distc_buffer {
    void *data;          /**< the first element (DLTensor byte_offset applied); may be NULL when count is 0 */
    uint64_t count;      /**< elements */
    int32_t dtype;       /**< a distc_dtype */
    int32_t device_type; /**< DLDeviceType: kDLCPU, kDLCUDA, ... */
    int32_t device_id;
    int32_t reserved; /**< 0 */
} distc_buffer;

/**
 * Bytes of one element of `dtype` (0 for an unknown value).
 * @return the size in bytes, or 0.
 */
DISTC_EXTERN(size_t) distc_dtype_size(int32_t dtype);
/**
 * The dtype's name as torch spells it ("float32"); "unknown" for an unknown value.
 * @return a static string; never NULL.
 */
DISTC_EXTERN(const char *) distc_dtype_name(int32_t dtype);

/** The version of distc_backend_group_info these headers describe. */
#define DISTC_BACKEND_GROUP_INFO_VERSION 1

/** What a backend learns about a group it creates. Valid during the call only, except `store`. */
typedef struct distc_backend_group_info {
    unsigned int version; /**< DISTC_BACKEND_GROUP_INFO_VERSION */
    distc_store *store;   /**< the group's own key space (its prefix applied); valid until destroy returns */
    int32_t rank;
    int32_t size;
    int64_t timeout_ms;          /**< the group's default timeout */
    const char *group_name;      /**< "<name>/<instance>", unique per group on the store */
    const int32_t *global_ranks; /**< size entries: each group rank's rank in the root group */
    int32_t device;              /**< distc_pg_options.device: -1 lets the backend choose */
} distc_backend_group_info;

/** The version of distc_backend_op_args these headers describe. */
#define DISTC_BACKEND_OP_ARGS_VERSION 1

/** Per-operation values, resolved by the core. */
typedef struct distc_backend_op_args {
    unsigned int version; /**< DISTC_BACKEND_OP_ARGS_VERSION */
    int64_t timeout_ms;   /**< the effective timeout of this operation */
    uint64_t seq;         /**< the group's sequence number; 0 for point-to-point */
    double premul_factor; /**< DISTC_PREMUL_SUM's factor */
    void *stream;         /**< distc_op_options.stream (a cudaStream_t for CUDA backends); NULL: the default */
    const char *op;       /**< "allreduce" (static): with seq, how messages name the operation
                                ("allreduce #3"); the core adds the rest to a failed work's message */
    uint32_t flags;       /**< DISTC_OP_BLOCKING, DISTC_OP_INTERRUPTIBLE */
} distc_backend_op_args;

/**
 * In distc_backend_op_args.flags: a blocking call (`out == NULL`); no handle
 * of the work is given out. A stream-ordered backend may complete the work
 * as soon as the operation is enqueued and track such operations in batches,
 * but must still notice one that outlives its timeout and abort the group
 * (later calls report it). A host backend may run the operation to
 * completion on the calling thread before returning (the core waits for the
 * work right after the call anyway). There the handle is only for completing
 * the call: it is the calling thread's, lent again for its next blocking call
 * once completed; the distc_work_* calls refuse it with DISTC_EINVAL, a
 * wait_stream hook is never called and a release hook runs once the call is
 * over; the source rank given at completion is not reported. Completing it on
 * the calling thread, inside the call, is the cheapest path.
 */
#define DISTC_OP_BLOCKING 0x1u

/**
 * In distc_backend_op_args.flags, with DISTC_OP_BLOCKING: the call must end
 * with an error at its timeout, or when the group is aborted, rather than
 * outlive them (debug mode's check before each call asks for it). A backend
 * whose fastest blocking path cannot be interrupted (MPI's blocking
 * collectives) takes one that can. Backends built before it ignore it.
 */
#define DISTC_OP_INTERRUPTIBLE 0x2u

/** One entry of batch_p2p. */
typedef struct distc_backend_p2p {
    int32_t kind; /**< a distc_p2p_kind */
    int32_t peer;
    int32_t tag;
    int32_t reserved; /**< 0 */
    distc_buffer buffer;
} distc_backend_p2p;

/**
 * Blocking calls (`out == NULL`) return once the backend accepted the
 * operation, not once it completed: the work is ordered on the caller's
 * stream (CUDA backends). Without this flag the core waits for completion.
 */
#define DISTC_BACKEND_STREAM_ORDERED 0x1u

/** The bit of `device_types` for a DLPack device type (kDLCPU, kDLCUDA, ...). */
#define DISTC_DEVICE_BIT(dl_device_type) ((uint64_t)1 << (dl_device_type))

/**
 * A backend. Entries other than `create` and `destroy` may be NULL: the core
 * then answers DISTC_ENOTSUP naming the backend and the operation. List
 * arguments have the group size entries unless stated otherwise; reduce ops
 * are distc_reduce_op values already checked against the dtype.
 */
typedef struct distc_backend_ops {
    unsigned int version;  /**< DISTC_BACKEND_OPS_VERSION the backend was built with */
    uint32_t flags;        /**< DISTC_BACKEND_STREAM_ORDERED */
    uint64_t device_types; /**< DISTC_DEVICE_BIT() of each memory kind the backend takes */

    /** Creates this rank's member of a new group (a collective: every member calls it). */
    int (*create)(void **group, const distc_backend_group_info *info, void *payload);
    /** Releases a group; in-flight work must have been completed or failed first. */
    void (*destroy)(void *group);
    /** Fails in-flight work soon and later work at once; any thread; never blocks on peers. */
    int (*abort)(void *group);
    /**
     * Optional: a subgroup from `parent` (MPI_Comm_split, ncclCommSplit), a
     * collective on the parent. Ranks not in any subgroup are called with
     * DISTC_SPLIT_NOCOLOR and `info` NULL, and set *out = NULL. Without it, subgroups are made
     * with `create` over their own store key space.
     */
    int (*split)(void **out, void *parent, int32_t color, int32_t key, const distc_backend_group_info *info);

    /** `n` >= 1 buffers of one dtype reduced in place as one operation (coalesced). */
    int (*allreduce)(distc_work *work, void *group, const distc_buffer *bufs, size_t n, int32_t op,
                     const distc_backend_op_args *args);
    int (*broadcast)(distc_work *work, void *group, const distc_buffer *buf, int32_t root,
                     const distc_backend_op_args *args);
    /** In place on the root; other ranks' buffers must be left as they were. */
    int (*reduce)(distc_work *work, void *group, const distc_buffer *buf, int32_t root, int32_t op,
                  const distc_backend_op_args *args);
    int (*allgather)(distc_work *work, void *group, const distc_buffer *outputs, const distc_buffer *input,
                     const distc_backend_op_args *args);
    /** `outputs` is NULL on non-roots. */
    int (*gather)(distc_work *work, void *group, const distc_buffer *outputs, const distc_buffer *input, int32_t root,
                  const distc_backend_op_args *args);
    /** `inputs` is NULL on non-roots. */
    int (*scatter)(distc_work *work, void *group, const distc_buffer *output, const distc_buffer *inputs, int32_t root,
                   const distc_backend_op_args *args);
    int (*reduce_scatter)(distc_work *work, void *group, const distc_buffer *output, const distc_buffer *inputs,
                          int32_t op, const distc_backend_op_args *args);
    /** inputs[j] goes to rank j, outputs[j] comes from rank j; sizes may differ per peer (alltoall_single's splits). */
    int (*alltoall)(distc_work *work, void *group, const distc_buffer *outputs, const distc_buffer *inputs,
                    const distc_backend_op_args *args);
    int (*barrier)(distc_work *work, void *group, const distc_backend_op_args *args);
    int (*send)(distc_work *work, void *group, const distc_buffer *buf, int32_t dst, int32_t tag,
                const distc_backend_op_args *args);
    /** `src` may be DISTC_ANY_SOURCE; complete with the rank the data came from. */
    int (*recv)(distc_work *work, void *group, const distc_buffer *buf, int32_t src, int32_t tag,
                const distc_backend_op_args *args);
    /** All `n` sends and receives posted together; one work for the batch. */
    int (*batch_p2p)(distc_work *work, void *group, const distc_backend_p2p *ops, size_t n,
                     const distc_backend_op_args *args);
    /**
     * Optional: this process's rank and the world size as the engine knows
     * them (MPI_COMM_WORLD), for distc_pg_new_from_url("<name>://"): groups
     * whose ranks come from the engine's launcher, with no store to meet in.
     */
    int (*world)(int32_t *rank, int32_t *size, void *payload);

    /*
     * Version 2, optional (all four or none): memory of the group's device,
     * for what the core keeps there itself — the reducer's buckets when the
     * gradients are device memory (distc/reducer.h). Without them such a
     * reducer is DISTC_ENOTSUP. Device memory is only ever touched through
     * these: the core never dereferences it. `stream` is the caller's
     * (distc_reducer_options.stream; NULL: the default); a stream-ordered
     * backend enqueues copies and fills there and may return before they ran.
     */
    /** Allocates `bytes` (may be 0) of memory of kind `device_type` (one of device_types, not kDLCPU). */
    int (*mem_alloc)(void **out, void *group, int32_t device_type, size_t bytes);
    /** Releases what mem_alloc gave; no operation that uses it is still in flight. */
    void (*mem_free)(void *group, int32_t device_type, void *ptr);
    /** Copies `bytes` between two buffers in the group's device memory (device to device). */
    int (*mem_copy)(void *group, void *dst, const void *src, size_t bytes, void *stream);
    /** Sets `bytes` of the group's device memory at `ptr` to zero. */
    int (*mem_zero)(void *group, void *ptr, size_t bytes, void *stream);
} distc_backend_ops;

/**
 * Makes `name` a backend of this process (c10d's Backend.register_backend).
 * The vtable is copied; `payload` is passed to create(). Names are
 * [a-z0-9_-]+; "gloo" and names already registered are DISTC_ESTATE.
 */
DISTC_EXTERN(int) distc_backend_register(const char *name, const distc_backend_ops *ops, void *payload);

/**
 * The entry point a plugin library exports as `distc_backend_plugin_init`:
 * set `*ops` to a vtable that lives as long as the process and `*payload` to
 * what create() receives. `core_version` is the DISTC_BACKEND_OPS_VERSION of
 * the loading core. Return 0, or a negative code with distc_error_set().
 */
typedef int (*distc_backend_plugin_init_fn)(const distc_backend_ops **ops, void **payload, unsigned int core_version);

/* ------------------------------------------------------------------------ */
/* Completing work (for backends)                                            */

/** The version of distc_work_hooks these headers describe. */
#define DISTC_WORK_HOOKS_VERSION 1

/** What a work can do beyond host completion; set before completing it. */
typedef struct distc_work_hooks {
    unsigned int version; /**< DISTC_WORK_HOOKS_VERSION */
    /** Makes `stream` wait for the operation (cudaStreamWaitEvent); NULL: the core waits on the host. */
    int (*wait_stream)(void *payload, void *stream);
    /** Called once when the last handle of the work is gone; may be NULL. */
    void (*release)(void *payload);
} distc_work_hooks;

/** Attaches hooks to a work the backend took; at most once, before completing it. */
DISTC_EXTERN(int) distc_backend_work_set_hooks(distc_work *work, const distc_work_hooks *hooks, void *payload);

/**
 * Completes a work successfully. `source_rank`: the rank a receive's data came
 * from (-1 for collectives). The handle is invalid afterwards.
 */
DISTC_EXTERN(int) distc_backend_work_complete(distc_work *work, int32_t source_rank);

/**
 * Fails a work with a negative distc code and a message (what went wrong,
 * with which peer where known). The handle is invalid afterwards.
 */
DISTC_EXTERN(int) distc_backend_work_fail(distc_work *work, int code, const char *message);

/* ------------------------------------------------------------------------ */
/* Host-memory helpers (for backends on CPU)                                  */

/**
 * dst[i] = dst[i] (op) src[i] for `count` elements of `dtype` in host memory,
 * with the core's kernels (fp16 and bf16 accumulate in float). AVG and
 * PREMUL_SUM combine as SUM (scale with distc_backend_scale). DISTC_EINVAL
 * for combinations distc refuses (MIN on complex ...).
 */
DISTC_EXTERN(int) distc_backend_combine(void *dst, const void *src, uint64_t count, int32_t dtype, int32_t op);

/** data[i] *= factor in host memory (integers round toward zero, as AVG in torch). */
DISTC_EXTERN(int) distc_backend_scale(void *data, uint64_t count, int32_t dtype, double factor);

DISTC_END_DECL

#endif /* DISTC_SYS_BACKEND_H */

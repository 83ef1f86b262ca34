/**
 * @file distc/store.h
 * @brief Key-value stores for rendezvous: hash, file, TCP, prefix and custom.
 *
 * Semantics follow torch.distributed's stores. Keys are NUL-terminated
 * strings; values are bytes (NUL allowed). Counters made by distc_store_add()
 * are stored as their decimal text, so distc_store_get() reads the same bytes
 * PyTorch would.
 *
 * Thread-safety: every store handle may be used from several threads at once.
 * Ownership: distc_store_new_*() gives a caller-owned handle released with
 * distc_store_free(); a prefix store holds a reference to the store it wraps,
 * so the two can be freed in any order.
 */
#ifndef DISTC_STORE_H
#define DISTC_STORE_H

#include "common.h"

DISTC_BEGIN_DECL

/** An opaque store handle. */
typedef struct distc_store distc_store;

/** c10d's default store timeout: 300 s. */
#define DISTC_STORE_DEFAULT_TIMEOUT_MS 300000

/** Values and keys larger than this are refused (DISTC_ENOMEM), never allocated. */
#define DISTC_STORE_MAX_VALUE_SIZE ((uint64_t)1 << 30)

/* ------------------------------------------------------------------------ */
/* Creating stores                                                           */

/** An in-process store, shared by every thread that holds the handle. */
DISTC_EXTERN(int) distc_store_new_hash(distc_store **out);

/**
 * A store kept in a file shared by processes on one machine or a shared file
 * system. Safe with many concurrent processes (records are appended under an
 * exclusive flock). Each store counts its users; when the last of
 * `num_workers` users frees its handle the file is removed, as c10d's
 * FileStore does. `num_workers` <= 0 means "never remove".
 */
DISTC_EXTERN(int) distc_store_new_file(distc_store **out, const char *path, int32_t num_workers);

/** Wire protocols a TCP store client can speak. */
typedef enum distc_tcp_protocol {
    /** Probe for a distc server, else fall back to PyTorch 1.x's protocol. */
    DISTC_TCP_PROTOCOL_AUTO = 0,
    /** A distc server: single-round-trip get, native append/multi_get/multi_set. */
    DISTC_TCP_PROTOCOL_DISTC = 1,
    /** A PyTorch 1.x TCPStore server (no handshake; append/multi_* emulated). */
    DISTC_TCP_PROTOCOL_TORCH1 = 2,
    /** A PyTorch 2.x TCPStore server (validation magic, new query numbering). */
    DISTC_TCP_PROTOCOL_TORCH2 = 3
} distc_tcp_protocol;

/**
 * A line the TCP store server logs: a client it refused or dropped, and why
 * (a missing or wrong token, a PyTorch client it does not admit, a request
 * over the limits, malformed bytes, no memory or descriptors left). Called on
 * the server's thread: it must return quickly and must not use the store.
 */
typedef void (*distc_store_log_fn)(void *payload, const char *line);

/**
 * Version 2 added the server's per-connection limits, version 3 the token, the
 * admission of PyTorch clients and the server's log. Structs of versions 1 and
 * 2 are still accepted.
 */
#define DISTC_TCP_STORE_OPTIONS_VERSION 3

/**
 * Options of distc_store_new_tcp(). Initialise with DISTC_TCP_STORE_OPTIONS_INIT
 * or distc_tcp_store_options_init(); fields may be appended in later versions.
 */
typedef struct distc_tcp_store_options {
    unsigned int version;           /**< DISTC_TCP_STORE_OPTIONS_VERSION */
    const char *host;               /**< server to connect to; for a server, the address to
                                    bind (NULL: every interface) */
    int32_t port;                   /**< 0 with is_server: pick a free port (distc_store_tcp_port) */
    int32_t is_server;              /**< nonzero: also run the server in this process */
    int32_t world_size;             /**< number of participants including the server's
                                    process; -1: unknown */
    int32_t wait_for_workers;       /**< nonzero (with world_size > 0): the creating call waits
                                    until world_size participants have joined */
    int64_t timeout_ms;             /**< default timeout of operations; -1: 300 s */
    int32_t connect_retries;        /**< connection attempts with exponential backoff, bounded
                                    by timeout_ms as well; -1: until the timeout */
    int32_t protocol;               /**< a distc_tcp_protocol */
    int64_t max_request_bytes;      /**< (version 2) server: the largest request a client may send (a key,
                                    its value and their framing), which is also the most input the
                                    server buffers for one connection; a larger request closes the
                                    connection. At least 4096; -1: 1 GiB + 1 MiB, the largest value
                                    with room for its key */
    int64_t max_unread_reply_bytes; /**< (version 2) server: reply bytes a client may leave unread
                                    before the server stops reading its requests; it reads on once the
                                    client has taken them (a single reply may be larger). While a
                                    request waits for its keys, the server reads at most 64 KiB more
                                    from that connection. -1: 4 MiB */
    const char *token;              /**< (version 3) a shared secret. A server with a token serves only
                                    clients that prove they know it: a challenge-response with
                                    HMAC-SHA256 over a random nonce, so the token never crosses the
                                    wire; a client proves it when the server asks. A client without
                                    the right one gets DISTC_EREMOTE ("requires a token", "rejected
                                    the token"). NULL: $DISTC_STORE_TOKEN if set, else none; "": none,
                                    whatever the environment says. It authenticates, it does not
                                    encrypt: keys and values cross the network in the clear. */
    int32_t allow_torch_clients;    /**< (version 3) server: whether clients of PyTorch's protocol, which
                                    cannot prove a token, are served: 1 always, 0 never, -1 only when
                                    the server has no token. Admitted, they can read and write every key. */
    distc_store_log_fn server_log;  /**< (version 3) server: called with a line for each client refused
                                    or dropped; NULL: no log */
    void *server_log_payload;       /**< (version 3) server_log's first argument */
} distc_tcp_store_options;

#define DISTC_TCP_STORE_OPTIONS_INIT                                                                                 \
    {                                                                                                                \
        DISTC_TCP_STORE_OPTIONS_VERSION, NULL, 0, 0, -1, 1, -1, -1, DISTC_TCP_PROTOCOL_AUTO, -1, -1, NULL, -1, NULL, \
            NULL                                                                                                     \
    }

/** Fills `opts` with the defaults above, for FFIs that cannot expand macros; an older
 * `version` fills the fields of that version only. */
DISTC_EXTERN(int) distc_tcp_store_options_init(distc_tcp_store_options *opts, unsigned int version);

/**
 * A TCP store: a client, and with `is_server` also the server (an epoll event
 * loop on one background thread; thousands of clients). Wire-compatible with
 * PyTorch's TCPStore, so PyTorch processes may join as clients or serve. A
 * server listens on `host` (NULL: every interface, so anyone who can reach
 * the port can read and write every key unless a `token` is set).
 * Errors: DISTC_EINVAL (bad options), DISTC_EIO (port in use, cannot bind),
 * DISTC_ETIMEOUT (no server reachable, or workers missing, within the timeout),
 * DISTC_EREMOTE (the server refused this client: no token, or another one).
 */
DISTC_EXTERN(int) distc_store_new_tcp(distc_store **out, const distc_tcp_store_options *opts);

/** The port of a TCP store (the bound one when it was created with port 0). */
DISTC_EXTERN(int) distc_store_tcp_port(int32_t *out, const distc_store *store);

/**
 * A store that prefixes every key with `prefix` + "/" before handing it to
 * `inner` (c10d's PrefixStore). Holds a reference to `inner`.
 */
DISTC_EXTERN(int) distc_store_new_prefix(distc_store **out, const char *prefix, distc_store *inner);

/** Releases the handle. NULL is a no-op. */
DISTC_EXTERN(void) distc_store_free(distc_store *store);

/* ------------------------------------------------------------------------ */
/* Operations                                                                */

/**
 * Sets `key` to `len` bytes of `value` (`value` may be NULL when `len` is 0).
 * Returns once the store holds it (a TCP store: once the server has applied
 * it), so a peer that hears of the set by other means, a collective say,
 * finds the key without waiting. distc_store_append() and
 * distc_store_multi_set() do the same.
 */
DISTC_EXTERN(int) distc_store_set(distc_store *store, const char *key, const void *value, size_t len);

/**
 * @brief Gets the value of a key, waiting for the key to appear.
 *
 * Gets the value of `key` into `out` (release with distc_buf_dispose()),
 * waiting up to the store's timeout for the key to appear.
 * @return 0, or DISTC_ETIMEOUT naming the key.
 */
DISTC_EXTERN(int) distc_store_get(distc_buf *out, distc_store *store, const char *key);

/**
 * Adds `delta` to the counter `key` (a missing key counts as 0) and gives
 * the new value in `out` (which may be NULL). Atomic across all clients.
 * A key whose value is not a decimal integer gives DISTC_EINVAL.
 */
DISTC_EXTERN(int) distc_store_add(int64_t *out, distc_store *store, const char *key, int64_t delta);

/**
 * @brief Sets a key if it holds the expected value (c10d's compare_set).
 *
 * Sets `key` to `desired` if its value equals `expected`, or if the key is
 * missing and `expected_len` is 0. `out` receives the value after the call;
 * when the key is missing and `expected_len` > 0 it receives `expected`
 * (c10d's semantics). `out` may be NULL.
 */
DISTC_EXTERN(int) distc_store_compare_set(distc_buf *out, distc_store *store, const char *key, const void *expected,
                                          size_t expected_len, const void *desired, size_t desired_len);

/** Sets `*out` to 1 if every one of the `n` keys exists, else 0. Never waits. */
DISTC_EXTERN(int) distc_store_check(int32_t *out, distc_store *store, const char *const *keys, size_t n);

/**
 * Waits until every one of the `n` keys exists. `timeout_ms` of
 * DISTC_TIMEOUT_DEFAULT uses the store's timeout.
 * @return 0, or DISTC_ETIMEOUT naming the missing keys.
 */
DISTC_EXTERN(int) distc_store_wait(distc_store *store, const char *const *keys, size_t n, int64_t timeout_ms);

/** Deletes `key`; `*out` (may be NULL) is 1 if it existed, else 0. */
DISTC_EXTERN(int) distc_store_delete_key(int32_t *out, distc_store *store, const char *key);

/**
 * The number of keys in the store. For a TCP store this counts every key on
 * the server, including those of other prefixes (as c10d does).
 */
DISTC_EXTERN(int) distc_store_num_keys(int64_t *out, distc_store *store);

/** Appends `len` bytes to the value of `key` (creating it when missing). */
DISTC_EXTERN(int) distc_store_append(distc_store *store, const char *key, const void *value, size_t len);

/**
 * Gets `n` keys at once, waiting for all of them as distc_store_get() does.
 * `values` is an array of `n` buffers filled in key order; on failure none
 * is left allocated.
 */
DISTC_EXTERN(int) distc_store_multi_get(distc_buf *values, distc_store *store, const char *const *keys, size_t n);

/** Sets `n` keys at once: `values[i]` of `lens[i]` bytes for `keys[i]`. */
DISTC_EXTERN(int) distc_store_multi_set(distc_store *store, const char *const *keys, const void *const *values,
                                        const size_t *lens, size_t n);

/** Sets the store's default timeout (> 0 ms) for get, wait and multi_get. */
DISTC_EXTERN(int) distc_store_set_timeout(distc_store *store, int64_t timeout_ms);

/** The store's default timeout in ms. */
DISTC_EXTERN(int) distc_store_get_timeout(int64_t *out, const distc_store *store);

/* ------------------------------------------------------------------------ */
/* Rendezvous                                                                */

/** The version of distc_rendezvous_options these headers describe. */
#define DISTC_RENDEZVOUS_OPTIONS_VERSION 1

/** Options of distc_rendezvous(). */
typedef struct distc_rendezvous_options {
    unsigned int version; /**< DISTC_RENDEZVOUS_OPTIONS_VERSION */
    int64_t timeout_ms;   /**< store timeout; -1: 300 s */
    int32_t rank;         /**< overrides the URL and environment; -1: unset */
    int32_t world_size;   /**< overrides the URL and environment; -1: unset */
} distc_rendezvous_options;

#define DISTC_RENDEZVOUS_OPTIONS_INIT \
    { DISTC_RENDEZVOUS_OPTIONS_VERSION, -1, -1, -1 }

/** Fills `opts` with the defaults above. */
DISTC_EXTERN(int) distc_rendezvous_options_init(distc_rendezvous_options *opts, unsigned int version);

/**
 * @brief Creates the store a URL names, with this process's rank and the world size.
 *
 * Creates the store that `url` names and gives this process's rank and the
 * world size, as torch.distributed's init_method does. Returns once the
 * store is reachable (a TCP server started by rank 0 waits for all ranks).
 *
 * - `env://`: RANK and WORLD_SIZE (else OMPI_COMM_WORLD_RANK/SIZE, else
 *   SLURM_PROCID/SLURM_NTASKS), MASTER_ADDR and MASTER_PORT. Rank 0 serves,
 *   unless TORCHELASTIC_USE_AGENT_STORE=True (a launcher already serves).
 * - `tcp://HOST:PORT?rank=R&world_size=N`: rank 0 serves on PORT.
 * - `file:///PATH?rank=R&world_size=N`: a file store at PATH.
 *
 * Missing or malformed parts give DISTC_EINVAL naming what is wrong; so do
 * NULL `out`, `rank` or `world_size` (all three are required outputs).
 */
DISTC_EXTERN(int) distc_rendezvous(distc_store **out, int32_t *rank, int32_t *world_size, const char *url,
                                   const distc_rendezvous_options *opts);

DISTC_END_DECL

#endif /* DISTC_STORE_H */

/**
 * @file distc/sys/store.h
 * @brief A store implemented by the caller (etcd, MPI, a Python dict ...).
 *
 * Fill a distc_store_vtable with function pointers and hand it, with a
 * payload pointer, to distc_store_new_custom(). set, get and add are
 * required; any other entry may be NULL:
 * - multi_get, multi_set: emulated with get and set;
 * - append: emulated with compare_set when present, else DISTC_ENOTSUP. The
 *   emulation (as c10d's) cannot tell its own success from a concurrent
 *   append of the very same bytes to the same key, and then loses one of the
 *   two; implement append natively where that matters. It retries while
 *   the value changes under it, for the store's timeout at most
 *   (DISTC_ETIMEOUT);
 * - wait: emulated by polling check when present, else DISTC_ENOTSUP;
 * - compare_set, check, delete_key, num_keys: DISTC_ENOTSUP.
 *
 * Callbacks return 0 or a negative distc code; they may call
 * distc_error_set() to attach a message. Bytes handed back go through
 * distc_buf_set(). Callbacks may be called from several threads at once.
 * A callback that breaks this (a positive code or one that is no
 * distc_status, bytes at NULL, more than DISTC_STORE_MAX_VALUE_SIZE) fails
 * the call with DISTC_EINTERNAL naming the callback.
 */
#ifndef DISTC_SYS_STORE_H
#define DISTC_SYS_STORE_H

#include "../store.h"

DISTC_BEGIN_DECL

/** The version of distc_store_vtable these headers describe. */
#define DISTC_STORE_VTABLE_VERSION 1

/**
 * A caller-implemented store: the callbacks distc_store_new_custom() copies.
 * Each gets the store's `payload` first, returns 0 or a negative distc code, and
 * answers in its last argument, which is never NULL.
 */
typedef struct distc_store_vtable {
    unsigned int version; /**< DISTC_STORE_VTABLE_VERSION */
    /** Sets `key` to `len` bytes of `value`. Required. */
    int (*set)(void *payload, const char *key, const void *value, size_t len);
    /** Waits up to timeout_ms for the key; DISTC_ETIMEOUT when it does not appear. */
    int (*get)(void *payload, const char *key, int64_t timeout_ms, distc_buf *out);
    /** Adds `delta` to the counter `key` (missing: 0) and gives the new value. Required. */
    int (*add)(void *payload, const char *key, int64_t delta, int64_t *out);
    /** As distc_store_compare_set(); the value after the call goes to `out`. */
    int (*compare_set)(void *payload, const char *key, const void *expected, size_t expected_len, const void *desired,
                       size_t desired_len, distc_buf *out);
    /** Sets `*out` to 1 if every one of the `n` keys exists, else 0; never waits. */
    int (*check)(void *payload, const char *const *keys, size_t n, int32_t *out);
    /** Waits up to timeout_ms until every one of the `n` keys exists; DISTC_ETIMEOUT if not. */
    int (*wait)(void *payload, const char *const *keys, size_t n, int64_t timeout_ms);
    /** Deletes `key`; `*out` is 1 if it existed, else 0. */
    int (*delete_key)(void *payload, const char *key, int32_t *out);
    /** The number of keys in the store. */
    int (*num_keys)(void *payload, int64_t *out);
    /** Appends `len` bytes to the value of `key`, creating it when missing. */
    int (*append)(void *payload, const char *key, const void *value, size_t len);
    /** Gets the `n` keys into `out[0..n)`, waiting up to timeout_ms for all of them. */
    int (*multi_get)(void *payload, const char *const *keys, size_t n, int64_t timeout_ms, distc_buf *out);
    /** Sets `keys[i]` to `lens[i]` bytes of `values[i]` for each of the `n`. */
    int (*multi_set)(void *payload, const char *const *keys, const void *const *values, const size_t *lens, size_t n);
    /** Called once, when the last reference to the store goes; may be NULL. */
    void (*free)(void *payload);
} distc_store_vtable;

/**
 * Wraps a caller-implemented store. The vtable is copied; `payload` is passed
 * to every callback and released through vtable->free when the store goes.
 * @return 0, or DISTC_EINVAL when the vtable is NULL, of an unknown version, or
 * lacks set, get or add.
 */
DISTC_EXTERN(int) distc_store_new_custom(distc_store **out, const distc_store_vtable *vtable, void *payload);

DISTC_END_DECL

#endif /* DISTC_SYS_STORE_H */

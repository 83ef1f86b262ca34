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
 *   two; implement append natively where that matters;
 * - wait: emulated by polling check when present, else DISTC_ENOTSUP;
 * - compare_set, check, delete_key, num_keys: DISTC_ENOTSUP.
 *
 * Callbacks return 0 or a negative distc code; they may call
 * distc_error_set() to attach a message. Bytes handed back go through
 * distc_buf_set(). Callbacks may be called from several threads at once.
 */
#ifndef DISTC_SYS_STORE_H
#define DISTC_SYS_STORE_H

#include "../store.h"

DISTC_BEGIN_DECL

#define DISTC_STORE_VTABLE_VERSION 1

typedef struct distc_store_vtable {
    unsigned int version; /**< DISTC_STORE_VTABLE_VERSION */
    int (*set)(void *payload, const char *key, const void *value, size_t len);
    /** Waits up to timeout_ms for the key; DISTC_ETIMEOUT when it does not appear. */
    int (*get)(void *payload, const char *key, int64_t timeout_ms, distc_buf *out);
    int (*add)(void *payload, const char *key, int64_t delta, int64_t *out);
    int (*compare_set)(void *payload, const char *key, const void *expected, size_t expected_len, const void *desired,
                       size_t desired_len, distc_buf *out);
    int (*check)(void *payload, const char *const *keys, size_t n, int32_t *out);
    int (*wait)(void *payload, const char *const *keys, size_t n, int64_t timeout_ms);
    int (*delete_key)(void *payload, const char *key, int32_t *out);
    int (*num_keys)(void *payload, int64_t *out);
    int (*append)(void *payload, const char *key, const void *value, size_t len);
    int (*multi_get)(void *payload, const char *const *keys, size_t n, int64_t timeout_ms, distc_buf *out);
    int (*multi_set)(void *payload, const char *const *keys, const void *const *values, const size_t *lens, size_t n);
    /** Called once, when the last reference to the store goes; may be NULL. */
    void (*free)(void *payload);
} distc_store_vtable;

/**
 * Wraps a caller-implemented store. The vtable is copied; `payload` is passed
 * to every callback and released through vtable->free when the store goes.
 * @return DISTC_EINVAL when the vtable is NULL, of an unknown version, or
 * lacks set, get or add.
 */
DISTC_EXTERN(int) distc_store_new_custom(distc_store **out, const distc_store_vtable *vtable, void *payload);

DISTC_END_DECL

#endif /* DISTC_SYS_STORE_H */

/**
 * @file distc/errors.h
 * @brief Status codes and the per-thread last-error message.
 *
 * Every fallible function returns an int: 0 on success, a negative code below
 * on failure. DISTC_INPROGRESS (> 0) comes only from polling calls. Codes are
 * never renumbered. After a failure, distc_error_last() on the same thread
 * holds one line naming the function, the argument and, where relevant, the
 * peer. Quoted input (keys, URLs) has its control bytes replaced by '?', and
 * a message over 2 KiB keeps its start and end around a marked cut.
 */
#ifndef DISTC_ERRORS_H
#define DISTC_ERRORS_H

#include "common.h"

DISTC_BEGIN_DECL

/** Status codes. Values are part of the ABI. */
typedef enum distc_status {
    DISTC_OK = 0,
    DISTC_INPROGRESS = 1,  /**< polling calls only: not finished yet */
    DISTC_EINVAL = -1,     /**< a bad argument (NULL, out of range, malformed) */
    DISTC_ETIMEOUT = -2,   /**< the operation did not finish within its timeout */
    DISTC_ENOTFOUND = -3,  /**< a key, backend or file that does not exist */
    DISTC_ENOTSUP = -4,    /**< not supported by this store or backend */
    DISTC_EREMOTE = -5,    /**< a peer or server failed or closed the connection */
    DISTC_EABORTED = -6,   /**< cancelled by an abort */
    DISTC_ESTATE = -7,     /**< the object is in the wrong state for this call */
    DISTC_ENOMEM = -8,     /**< out of memory, or a size beyond a documented limit */
    DISTC_EBACKEND = -9,   /**< the communication engine reported an error */
    DISTC_EINTERNAL = -10, /**< a bug in distc: please report it */
    DISTC_EIO = -11,       /**< a system call failed (file, socket, bind) */
    DISTC_EPROTO = -12     /**< a peer sent bytes that break the protocol */
} distc_status;

/**
 * A static, human-readable name for `code` ("invalid argument"); never NULL.
 * @return a static string; "unknown error code" for a value that is no distc_status.
 */
DISTC_EXTERN(const char *) distc_strerror(int code);

/**
 * The message of the last failure on the calling thread; "" when none.
 * Never NULL. Valid until the next distc call on this thread.
 * @return the message, owned by the library.
 */
DISTC_EXTERN(const char *) distc_error_last(void);

/**
 * The code of the last failure on the calling thread; 0 when none.
 * @return a negative distc_status, or 0.
 */
DISTC_EXTERN(int) distc_error_last_code(void);

/** Forgets the calling thread's last failure. */
DISTC_EXTERN(void) distc_error_clear(void);

/**
 * Records `code` and `message` as the calling thread's last failure and
 * returns `code`. For implementors of callbacks (custom stores, backends)
 * so that their failures reach the caller with a message.
 * @return `code`, so that a callback can end with `return distc_error_set(...)`.
 */
DISTC_EXTERN(int) distc_error_set(int code, const char *message);

DISTC_END_DECL

#endif /* DISTC_ERRORS_H */

/**
 * @file distc/common.h
 * @brief Export macros, declaration guards and the byte buffer shared by every area.
 *
 * Every public function is declared with DISTC_EXTERN(type). Everything the
 * library does not declare this way is hidden.
 */
#ifndef DISTC_COMMON_H
#define DISTC_COMMON_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
#define DISTC_BEGIN_DECL extern "C" {
#define DISTC_END_DECL }
#else
#define DISTC_BEGIN_DECL
#define DISTC_END_DECL
#endif

#if defined(_WIN32)
#if defined(DISTC_BUILDING)
#define DISTC_EXTERN(type) __declspec(dllexport) type
#else
#define DISTC_EXTERN(type) __declspec(dllimport) type
#endif
#elif defined(__GNUC__)
#define DISTC_EXTERN(type) __attribute__((visibility("default"))) type
#else
#define DISTC_EXTERN(type) type
#endif

DISTC_BEGIN_DECL

/**
 * Bytes handed to the caller by the library (store values, for instance).
 *
 * The caller owns `data` and releases it with distc_buf_dispose(), never with
 * its own free(). A zero-length value has `size == 0` and a non-NULL `data`.
 */
typedef struct distc_buf {
    uint8_t *data;
    size_t size;
} distc_buf;

/**
 * Releases the bytes of `buf` and resets it to {NULL, 0}.
 * NULL, and a buffer already disposed, are no-ops.
 */
DISTC_EXTERN(void) distc_buf_dispose(distc_buf *buf);

/**
 * Fills `out` with a copy of `len` bytes from `data`, allocated by the library.
 *
 * Meant for implementors of callbacks (a custom store's `get`) that must hand
 * bytes back to distc. `data` may be NULL only when `len` is 0.
 * @return 0, DISTC_EINVAL or DISTC_ENOMEM.
 */
DISTC_EXTERN(int) distc_buf_set(distc_buf *out, const void *data, size_t len);

/** A timeout argument that means "use the object's default timeout". */
#define DISTC_TIMEOUT_DEFAULT (-1)

DISTC_END_DECL

#endif /* DISTC_COMMON_H */

/*
 * Multi-rank tests with threads as ranks, and DLTensor helpers.
 *
 * dt_run_ranks(size, fn, arg) creates one hash store and `size` threads;
 * each thread creates its own distc_pg (group name unique to the run, so
 * groups never mix), runs fn(pg, rank, size, arg) and frees the group.
 *
 * cmocka's assert_* must only be used on the main thread. Inside rank
 * threads use the RK_* macros below: a failure is printed with the rank and
 * counted; dt_run_ranks fails the cmocka test (on the main thread) when the
 * count is not zero after every thread joined.
 */
#ifndef DISTC_PG_HARNESS_H
#define DISTC_PG_HARNESS_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <dlpack/dlpack.h>

#include <distc.h>

/* The default timeout of the groups dt_run_ranks creates. */
#define DT_PG_TIMEOUT_MS 20000

typedef void (*dt_rank_fn)(distc_pg *pg, int rank, int size, void *arg);

/*
 * Runs fn on `size` ranks (threads), each with its own group (timeout
 * DT_PG_TIMEOUT_MS), and fails the calling cmocka test if any rank recorded
 * a failure. The ranks meet in a store-side barrier after fn returns and
 * before they free their groups, so no rank closes its connections while a
 * peer still finishes the last operation. Returns the number of failures.
 */
int dt_run_ranks(int size, dt_rank_fn fn, void *arg);
/* The same with the groups' timeout. */
int dt_run_ranks_timeout(int size, int64_t timeout_ms, dt_rank_fn fn, void *arg);

/*
 * With DT_RANKS_AS=procs in the environment, dt_run_ranks runs each rank as a
 * forked process instead of a thread (the ranks meet in a file store), so the
 * same test bodies also run across real processes. A rank process fails when
 * it recorded a failure.
 */
int dt_ranks_are_processes(void);

/*
 * The backend the groups use: DT_BACKEND from the environment ("gloo" when
 * unset). "loopback" registers the plain-C test backend
 * (tests/plugins/loopback_backend.h), which runs world size 1 only: larger
 * runs are skipped (dt_backend_max_size). "mpi" runs under mpirun: each
 * process is one rank and only runs of the world's size execute (the ranks
 * meet in the file store named by DT_STORE_FILE; tests/mpi/run.sh sets it).
 */
const char *dt_backend(void);
int dt_backend_max_size(void);

/* Inside a rank thread: its rank (-1 elsewhere), the run's store and group name. */
int dt_rank(void);
distc_store *dt_rank_store(void);
const char *dt_rank_group(void);

/* Records a failure of the calling rank thread (printed with its rank). */
void dt_rank_fail(const char *file, int line, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Failures recorded so far in the current run (all ranks). */
int dt_rank_failures(void);

/*
 * Runs fn(store, rank, size, arg) on `size` plain threads (at most 16) that
 * share `store` and make their own groups (what group creation itself does
 * is the test), joins them, and returns the failures the RK_* checks
 * recorded meanwhile.
 */
typedef void (*dt_thread_fn)(distc_store *store, int rank, int size, void *arg);
int dt_run_threads(distc_store *store, int size, dt_thread_fn fn, void *arg);

/*
 * Every rank of `pg` holds the same `len` bytes at `data` (gathered from all
 * of them): records a failure naming `what` and the first rank that differs
 * otherwise. Returns 1 when they are the same.
 */
int dt_same_everywhere(distc_pg *pg, const void *data, size_t len, const char *what);

/* ------------------------------------------------------------------ checks */
/* Each evaluates to 1 when the check passed, 0 when it recorded a failure. */

#define RK_CHECK(cond)                                                         \
    __extension__({                                                            \
        int ok_ = !!(cond);                                                    \
        if (!ok_) dt_rank_fail(__FILE__, __LINE__, "check failed: %s", #cond); \
        ok_;                                                                   \
    })

#define RK_CHECKF(cond, ...)                                     \
    __extension__({                                              \
        int ok_ = !!(cond);                                      \
        if (!ok_) dt_rank_fail(__FILE__, __LINE__, __VA_ARGS__); \
        ok_;                                                     \
    })

/* A distc call returned 0. */
#define RK_OK(expr)                                                                                \
    __extension__({                                                                                \
        int rc_ = (expr);                                                                          \
        if (rc_ != 0)                                                                              \
            dt_rank_fail(__FILE__, __LINE__, "%s -> %d (%s): %s", #expr, rc_, distc_strerror(rc_), \
                         distc_error_last());                                                      \
        rc_ == 0;                                                                                  \
    })

/* A distc call returned `code` and left a message containing `needle`. */
#define RK_ERR(expr, code, needle) RK_ERR2(expr, code, needle, "")

/* The same, with a message that contains both needles (say, the function and the argument). */
#define RK_ERR2(expr, code, needle1, needle2)                                                                    \
    __extension__({                                                                                              \
        int rc_ = (expr);                                                                                        \
        const char *m_ = distc_error_last();                                                                     \
        int ok_ = rc_ == (code) && strstr(m_, (needle1)) && strstr(m_, (needle2));                               \
        if (!ok_)                                                                                                \
            dt_rank_fail(__FILE__, __LINE__, "%s -> %d, expected %d with \"%s\" and \"%s\": \"%s\"", #expr, rc_, \
                         (int)(code), (needle1), (needle2), m_);                                                 \
        ok_;                                                                                                     \
    })

#define RK_EQ_INT(a, b)                                                                           \
    __extension__({                                                                               \
        long long a_ = (long long)(a), b_ = (long long)(b);                                       \
        if (a_ != b_) dt_rank_fail(__FILE__, __LINE__, "%s == %s: %lld != %lld", #a, #b, a_, b_); \
        a_ == b_;                                                                                 \
    })

#define RK_EQ_DBL(a, b)                                                                             \
    __extension__({                                                                                 \
        double a_ = (double)(a), b_ = (double)(b);                                                  \
        if (a_ != b_) dt_rank_fail(__FILE__, __LINE__, "%s == %s: %.17g != %.17g", #a, #b, a_, b_); \
        a_ == b_;                                                                                   \
    })

#define RK_EQ_STR(a, b)                                                                                \
    __extension__({                                                                                    \
        const char *a_ = (a), *b_ = (b);                                                               \
        int ok_ = a_ && b_ && strcmp(a_, b_) == 0;                                                     \
        if (!ok_)                                                                                      \
            dt_rank_fail(__FILE__, __LINE__, "%s == %s: \"%s\" != \"%s\"", #a, #b, a_ ? a_ : "(null)", \
                         b_ ? b_ : "(null)");                                                          \
        ok_;                                                                                           \
    })

/* ------------------------------------------------------------------ dtypes */

/* kDLBool arrived in DLPack 0.8; Debian's header is 0.6. */
#define DT_KDLBOOL 6

#define DT_BOOL ((DLDataType){DT_KDLBOOL, 8, 1})
#define DT_I8 ((DLDataType){kDLInt, 8, 1})
#define DT_U8 ((DLDataType){kDLUInt, 8, 1})
#define DT_I16 ((DLDataType){kDLInt, 16, 1})
#define DT_I32 ((DLDataType){kDLInt, 32, 1})
#define DT_I64 ((DLDataType){kDLInt, 64, 1})
#define DT_F16 ((DLDataType){kDLFloat, 16, 1})
#define DT_BF16 ((DLDataType){kDLBfloat, 16, 1})
#define DT_F32 ((DLDataType){kDLFloat, 32, 1})
#define DT_F64 ((DLDataType){kDLFloat, 64, 1})
#define DT_C64 ((DLDataType){kDLComplex, 64, 1})
#define DT_C128 ((DLDataType){kDLComplex, 128, 1})

/* Every dtype distc supports, in pg.h's order. */
extern const DLDataType dt_all_dtypes[];
extern const size_t dt_num_dtypes;

const char *dt_dtype_name(DLDataType dt);
size_t dt_dtype_size(DLDataType dt); /* bytes of one element */
int dt_dtype_eq(DLDataType a, DLDataType b);
int dt_is_bool(DLDataType dt);
int dt_is_int(DLDataType dt); /* signed or unsigned integer, not bool */
int dt_is_unsigned(DLDataType dt);
int dt_is_float(DLDataType dt); /* float16, bfloat16, float32, float64 */
int dt_is_complex(DLDataType dt);

/* The value `v` becomes when stored in an element of `dt` (real part for complex). */
double dt_round(DLDataType dt, double v);

/* ----------------------------------------------------------------- tensors */

/*
 * Zero-filled CPU tensors that own their shape and data (data is never NULL,
 * even with no elements). Free with dt_tensor_free (NULL is a no-op).
 */
DLTensor *dt_tensor_1d(DLDataType dt, int64_t n);
DLTensor *dt_tensor_2d(DLDataType dt, int64_t rows, int64_t cols);
void dt_tensor_free(DLTensor *t);

int64_t dt_numel(const DLTensor *t);

/*
 * Element i (row-major, flat, contiguous, honouring byte_offset) as a double:
 * the value, 0/1 for bool, the real part for complex (dt_get_imag: the
 * imaginary part, 0 for real dtypes). float16/bfloat16 are decoded from their
 * bit patterns.
 */
double dt_get(const DLTensor *t, int64_t i);
double dt_get_imag(const DLTensor *t, int64_t i);
/* Sets element i (imaginary part 0 for complex). Integers are truncated. */
void dt_set(DLTensor *t, int64_t i, double v);
void dt_set_complex(DLTensor *t, int64_t i, double re, double im);

/* The same on a raw element array of dtype `dt`. */
double dt_elem_get(const void *base, DLDataType dt, int64_t i);
double dt_elem_get_imag(const void *base, DLDataType dt, int64_t i);
void dt_elem_set(void *base, DLDataType dt, int64_t i, double re, double im);

/* IEEE binary16 and bfloat16 bit patterns (round to nearest even). */
uint16_t dt_float_to_half(float f);
float dt_half_to_float(uint16_t h);
uint16_t dt_float_to_bf16(float f);
float dt_bf16_to_float(uint16_t h);

#endif

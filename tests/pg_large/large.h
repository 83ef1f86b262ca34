/* test_pg_large's shared parts: values, checks and the world sizes each test runs. */
#ifndef DISTC_TESTS_PG_LARGE_H
#define DISTC_TESTS_PG_LARGE_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "pg_harness.h"

#define MAX_SIZE 4

/* Rank r's element i: small integers of both signs, different on every rank. */
static inline int64_t val(int rank, int64_t i) { return (i * 7 + rank * 13) % 1001 - 500; }

static inline int env_is(const char *name, const char *value) {
    const char *v = getenv(name);
    return v && strcmp(v, value) == 0;
}

/* DISTC_MESH_BYTES=0: every collective goes to Gloo. */
static inline int gloo_only(void) {
    const char *m = getenv("DISTC_MESH_BYTES");
    return m && atoll(m) == 0;
}

static inline int64_t sum_of(int size, int64_t i) {
    int64_t s = 0;
    for (int r = 0; r < size; ++r) s += val(r, i);
    return s;
}

static inline int64_t max_of(int size, int64_t i) {
    int64_t m = val(0, i);
    for (int r = 1; r < size; ++r) m = val(r, i) > m ? val(r, i) : m;
    return m;
}

static inline DLTensor *filled(DLDataType dt, int64_t n, int rank) {
    DLTensor *t = dt_tensor_1d(dt, n);
    for (int64_t i = 0; i < n; ++i) dt_set(t, i, (double)val(rank, i));
    return t;
}

/* Every element of t equals want(i); reports the first that does not. */
#define CHECK_ALL(what, t, n, want)                                                                              \
    do {                                                                                                         \
        for (int64_t i_ = 0; i_ < (n); ++i_) {                                                                   \
            int64_t i = i_;                                                                                      \
            double w_ = (double)(want);                                                                          \
            if (dt_get((t), i_) != w_) {                                                                         \
                RK_CHECKF(0, "%s: element %lld is %g, expected %g", (what), (long long)i_, dt_get((t), i_), w_); \
                break;                                                                                           \
            }                                                                                                    \
        }                                                                                                        \
    } while (0)

static inline void for_sizes(dt_rank_fn fn) {
    for (int size = 1; size <= MAX_SIZE; ++size) dt_run_ranks(size, fn, NULL);
}

/* alltoall.c */
void test_alltoall_uneven(void **state);
void test_alltoall_in_place(void **state);
void test_alltoall_disagree(void **state);
void test_alltoall_bystander(void **state);

#endif

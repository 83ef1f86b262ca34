/* test_pg_collectives' shared parts (expect.c): the reduce ops, the inputs,
 * the expected values and their checks, and the helpers every part's ranks use. */
#ifndef DISTC_TEST_PG_COLLECTIVES_EXPECT_H
#define DISTC_TEST_PG_COLLECTIVES_EXPECT_H

#include "pg_harness.h"

#define MAX_SIZE 4
/* The most ranks a test runs beyond for_sizes (broadcast, scatter, barrier). */
#define MAX_RANKS 8

/* ---------------------------------------------------------------- reduce ops */

extern const distc_reduce_op all_ops[9];
#define NUM_OPS (sizeof all_ops / sizeof all_ops[0])

const char *op_name(distc_reduce_op op);

/* The combinations torch.distributed defines. */
int op_supported(DLDataType dt, distc_reduce_op op);

/* Options for `op` on `dt`: a premul factor for PREMUL_SUM, else NULL (defaults). */
const distc_op_options *op_opts(distc_op_options *o, DLDataType dt, distc_reduce_op op);

/* ------------------------------------------------------------------ inputs */

/*
 * Inputs of reductions: element i of input k of rank r. bool: every pattern
 * of up to 4 ranks; unsigned {0,1,2}; signed {-1,0,1,2}; floating
 * {-1,0,0.5,1,2}; complex: such a real part and an imaginary part in {-1..2}.
 */
double small_re(DLDataType dt, int r, int i, int k);
double small_im(DLDataType dt, int r, int i, int k);

/* Inputs of data movement: distinct for each (a, b) pair of ranks, exact in every dtype. */
double uniq_re(DLDataType dt, int a, int b, int i);
double uniq_im(DLDataType dt, int a, int b, int i);

void fill_small(DLTensor *t, int r, int k);
void fill_uniq(DLTensor *t, int a, int b);

/* ---------------------------------------------------------- expected values */

/* Element i of t is (re, im); reports a failure (with `what`) and returns 0 if not. */
#define CHECK_ELEM(what, t, i, re, im, approx) check_elem(__FILE__, __LINE__, what, t, i, re, im, approx)
int check_elem(const char *file, int line, const char *what, const DLTensor *t, int64_t i, double re, double im,
               int approx);

#define CHECK_SMALL(what, t, r, k) check_small(__FILE__, __LINE__, what, t, r, k)
int check_small(const char *file, int line, const char *what, const DLTensor *t, int r, int k);

/* Elements [from, from + count) of t (count < 0: to the end) are uniq(a, b, 0..). */
#define CHECK_UNIQ(what, t, a, b) check_uniq(__FILE__, __LINE__, what, t, a, b, 0, -1)
int check_uniq(const char *file, int line, const char *what, const DLTensor *t, int a, int b, int64_t from,
               int64_t count);

#define CHECK_REDUCED(what, t, op, size, k) check_reduced(__FILE__, __LINE__, what, t, op, size, k, 0)
int check_reduced(const char *file, int line, const char *what, const DLTensor *t, distc_reduce_op op, int size, int k,
                  int64_t from);

/* An unsupported (dtype, op): DISTC_EINVAL naming the function and the op. */
#define CHECK_UNSUPPORTED(fn, expr, op) RK_ERR2(expr, DISTC_EINVAL, fn, op_name(op))

void free_list(DLTensor **ts, int n);

/* The group still works: an int32 allreduce SUM gives the exact sum. */
void check_group_works(distc_pg *pg, int rank, int size);

/* The next collective gets sequence number `expect`: rejected calls took none. */
void check_next_seq(distc_pg *pg, int expect);

void for_sizes(dt_rank_fn fn, void *arg);

#endif

/* test_pg_large's all-to-alls: uneven parts, in place, and ranks that
 * disagree on the sizes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "large.h"

/* Rank r sends count(r, q) int32 elements to rank q: sizes differ per pair
 * and rank, and its part for itself is over 4 MiB (copied streaming). */
static int64_t count(int r, int q, int size) {
    (void)size;
    return 100000 + 37 * r + 1001 * q + (r == q ? 1000003 : 0);
}

/* An all-to-all where rank r sends count(r, q, size) int32 elements to rank
 * q, from `in` into `out`, or (in_place) from and into one buffer; every
 * element checked. */
static void run_alltoall(distc_pg *pg, int rank, int size, int64_t (*n_of)(int, int, int), int in_place,
                         const char *what) {
    int64_t in_splits[MAX_SIZE], out_splits[MAX_SIZE], in_n = 0, out_n = 0;
    for (int q = 0; q < size; ++q) {
        in_n += in_splits[q] = n_of(rank, q, size);
        out_n += out_splits[q] = n_of(q, rank, size);
    }
    if (in_place && !RK_EQ_INT(in_n, out_n)) return;
    DLTensor *in = dt_tensor_1d(DT_I32, in_n), *out = in_place ? in : dt_tensor_1d(DT_I32, out_n);
    int32_t *pi = in->data, *po = out->data;
    /* Element k of the part for q: rank * 1e6 + q * 1e5 + k mod 1e5, recognisable on arrival. */
    for (int q = 0, off = 0; q < size; off += (int)in_splits[q], ++q)
        for (int64_t k = 0; k < in_splits[q]; ++k) pi[off + k] = (int32_t)(rank * 1000000 + q * 100000 + k % 100000);
    if (RK_OK(distc_alltoall_single(NULL, pg, out, in, out_splits, in_splits, NULL)))
        for (int r = 0, off = 0; r < size; off += (int)out_splits[r], ++r)
            for (int64_t k = 0; k < out_splits[r]; ++k)
                if (!RK_CHECKF(po[off + k] == (int32_t)(r * 1000000 + rank * 100000 + k % 100000),
                               "%s from %d: element %lld is %d", what, r, (long long)k, po[off + k]))
                    break;
    if (out != in) dt_tensor_free(out);
    dt_tensor_free(in);
}

static void rank_alltoall_uneven(distc_pg *pg, int rank, int size, void *arg) {
    (void)arg;
    run_alltoall(pg, rank, size, count, 0, "alltoall");
}

void test_alltoall_uneven(void **state) {
    (void)state;
    for_sizes(rank_alltoall_uneven);
}

/* In place: one buffer for input and output (torch's all_to_all_single
 * with output = input), part q holding what goes to rank q and then what
 * comes from it. The parts between a pair are alike in size: small ones go
 * as messages (sent from a copy), large ones are swapped in place where the
 * transport can. `arg` (an int): 0, every rank in place; 1, only the even
 * ranks (a pair where one side is not sends messages); 2, one buffer whose
 * parts differ in size both ways (the parts no longer line up: all sent
 * from a copy). */
static int64_t pair_count(int r, int q, int size) {
    (void)size;
    return (r + q) % 3 == 2 ? 3001 + 7 * (r + q) : 300001 + 1001 * (r + q) + (r == q ? 1000003 : 0);
}
static int64_t shifted_count(int r, int q, int size) { return 200003 + 50021 * ((q - r + size) % size); }

static void rank_alltoall_in_place(distc_pg *pg, int rank, int size, void *arg) {
    const int mode = *(const int *)arg, in_place = mode != 1 || rank % 2 == 0;
    char what[64];
    snprintf(what, sizeof what, "alltoall %s (case %d)", in_place ? "in place" : "beside ranks in place", mode);
    run_alltoall(pg, rank, size, mode == 2 ? shifted_count : pair_count, in_place, what);
}

void test_alltoall_in_place(void **state) {
    (void)state;
    static const int modes[] = {0, 1, 2};
    for (size_t m = 0; m < sizeof modes / sizeof modes[0]; ++m)
        for (int size = 1; size <= MAX_SIZE; ++size) dt_run_ranks(size, rank_alltoall_in_place, (void *)&modes[m]);
}

/* Ranks that disagree on an uneven all-to-all's sizes both get DISTC_EINVAL
 * saying so, not each other's bytes: rank 1 expects two elements more from
 * rank 0 than rank 0 sends. `arg` points to the elements per part: small
 * parts go as messages; large ones are read in place where the transport
 * can (each side checks the sizes the other sent); and at the edge, one
 * rank of the pair reads in place while the other sends a message. */
static void rank_alltoall_disagree(distc_pg *pg, int rank, int size, void *arg) {
    (void)size;
    const int64_t n = *(const int64_t *)arg;
    int64_t in_splits[2] = {n, n}, out_splits[2] = {n, n};
    if (rank == 1) out_splits[0] = n + 2;
    DLTensor *in = dt_tensor_1d(DT_I32, 2 * n), *out = dt_tensor_1d(DT_I32, out_splits[0] + out_splits[1]);
    RK_ERR2(distc_alltoall_single(NULL, pg, out, in, out_splits, in_splits, NULL), DISTC_EINVAL, "split sizes disagree",
            rank == 0 ? "rank 1" : "rank 0");
    dt_tensor_free(in);
    dt_tensor_free(out);
}

void test_alltoall_disagree(void **state) {
    if (gloo_only()) skip(); /* Gloo cannot tell: it would wait for the missing bytes */
    (void)state;
    /* 64 KiB between a pair is where it starts to read in place: rank 0
     * moves 2 * 8191 int32 with rank 1 (8 bytes short), rank 1 two more. */
    static const int64_t parts[] = {4, 100000, 8191};
    for (size_t k = 0; k < sizeof parts / sizeof parts[0]; ++k)
        dt_run_ranks(2, rank_alltoall_disagree, (void *)&parts[k]);
}

/* Ranks 1 and 2 disagree on the sizes between them; rank 0 agrees with
 * both. Rank 0 fails too, with DISTC_EINVAL: every rank's first message
 * carries its share of a digest of all the split sizes. (Ranks 1 and 2 each
 * send to rank 0 before they hear from each other, so rank 0 receives every
 * message it waits for: without the digest it mostly succeeded.) */
static void rank_alltoall_bystander(distc_pg *pg, int rank, int size, void *arg) {
    (void)size;
    const int64_t n = *(const int64_t *)arg;
    int64_t in_splits[3] = {n, n, n}, out_splits[3] = {n, n, n};
    if (rank == 2) out_splits[1] = n + 2;
    DLTensor *in = dt_tensor_1d(DT_I32, 3 * n),
             *out = dt_tensor_1d(DT_I32, out_splits[0] + out_splits[1] + out_splits[2]);
    /* Or DISTC_EREMOTE where another rank failed and closed its links
     * first: failed either way, never a success. */
    const char *want = rank == 0 ? "split sizes disagree between other ranks" : rank == 1 ? "rank 2" : "rank 1";
    int rc = distc_alltoall_single(NULL, pg, out, in, out_splits, in_splits, NULL);
    const char *why = distc_error_last();
    RK_CHECKF((rc == DISTC_EINVAL && strstr(why, want)) || rc == DISTC_EREMOTE, "rank %d: %d (%s)", rank, rc, why);
    dt_tensor_free(in);
    dt_tensor_free(out);
}

void test_alltoall_bystander(void **state) {
    if (gloo_only()) skip(); /* Gloo cannot tell */
    (void)state;
    static const int64_t parts[] = {4, 100000};
    for (size_t k = 0; k < sizeof parts / sizeof parts[0]; ++k)
        dt_run_ranks(3, rank_alltoall_bystander, (void *)&parts[k]);
}

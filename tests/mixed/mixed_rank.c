/* Rank 0 of the mixed-language job (run_mixed.py): C. It serves the TCP
 * store (env://), runs the job's collectives with the Python and Rust ranks,
 * and sets a key that a PyTorch process waits for as a store client. */
#include <distc.h>
#include <stdio.h>
#include <string.h>

#define CHECK(call)                                                                      \
    do {                                                                                 \
        int rc_ = (call);                                                                \
        if (rc_ != 0) {                                                                  \
            fprintf(stderr, "mixed C rank: %s failed: %s\n", #call, distc_error_last()); \
            return 1;                                                                    \
        }                                                                                \
    } while (0)

static DLTensor vec(void *data, int64_t *n, uint8_t code, uint8_t bits) {
    DLTensor t = {data, {kDLCPU, 0}, 1, {code, bits, 1}, n, NULL, 0};
    return t;
}

int main(void) {
    distc_store *store;
    distc_pg *pg;
    int32_t rank, size;
    CHECK(distc_rendezvous(&store, &rank, &size, "env://", NULL));
    distc_pg_options o = DISTC_PG_OPTIONS_INIT;
    o.timeout_ms = 60000;
    CHECK(distc_pg_new(&pg, store, rank, size, &o));

    /* allreduce: every rank holds rank + 1 */
    int64_t four = 4, two = 2, one = 1;
    int64_t s[4] = {rank + 1, rank + 1, rank + 1, rank + 1};
    DLTensor ts = vec(s, &four, kDLInt, 64);
    CHECK(distc_allreduce(NULL, pg, &ts, DISTC_SUM, NULL));
    /* broadcast from the Python rank (1) */
    double b[2] = {0, 0};
    DLTensor tb = vec(b, &two, kDLFloat, 64);
    CHECK(distc_broadcast(NULL, pg, &tb, 1, NULL));
    /* allgather: rank r contributes r * 10 */
    int32_t mine = rank * 10, all[3] = {0};
    int64_t n3 = 3;
    DLTensor tin = vec(&mine, &one, kDLInt, 32), tall = vec(all, &n3, kDLInt, 32);
    CHECK(distc_allgather_into_tensor(NULL, pg, &tall, &tin, NULL));
    /* bytes: each rank's language */
    distc_buf names[3];
    memset(names, 0, sizeof names);
    CHECK(distc_all_gather_bytes(names, pg, "C", 1, NULL));

    int ok = s[0] == 6 && b[0] == 1.5 && b[1] == 2.5 && all[0] == 0 && all[1] == 10 && all[2] == 20 &&
             names[0].size == 1 && names[1].size == 6 && memcmp(names[1].data, "Python", 6) == 0 &&
             names[2].size == 4 && memcmp(names[2].data, "Rust", 4) == 0;
    printf("MIXED %s C rank %d of %d: sum %lld, broadcast [%g, %g], allgather [%d, %d, %d], names %.*s/%.*s/%.*s\n",
           ok ? "OK" : "WRONG", rank, size, (long long)s[0], b[0], b[1], all[0], all[1], all[2], (int)names[0].size,
           (char *)names[0].data, (int)names[1].size, (char *)names[1].data, (int)names[2].size, (char *)names[2].data);
    for (int i = 0; i < 3; i++) distc_buf_dispose(&names[i]);

    /* for the PyTorch store client; then wait for its answer before the server goes */
    CHECK(distc_store_set(store, "mixed/from-c", "hello from C", 12));
    const char *answer = "mixed/torch-read-it";
    CHECK(distc_store_wait(store, &answer, 1, 60000));
    CHECK(distc_barrier(NULL, pg, NULL));
    distc_pg_free(pg);
    distc_store_free(store);
    fflush(stdout);
    return ok ? 0 : 1;
}

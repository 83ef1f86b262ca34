/* A rank of a job started by a launcher (distc-run, torchrun, mpirun with
 * env://): joins the group, runs one allreduce, checks it and says so.
 *
 *   distc-run -n 4 distc-allreduce-example
 */
#include <distc.h>
#include <stdio.h>
#include <time.h>

static double now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

int main(void) {
    double t0 = now_us();
    distc_pg *pg = NULL;
    if (distc_pg_new_from_url(&pg, "env://", NULL, NULL) != 0) {
        fprintf(stderr, "joining the group failed: %s\n", distc_error_last());
        return 1;
    }
    int32_t rank = 0, size = 0;
    distc_pg_rank(&rank, pg);
    distc_pg_size(&size, pg);
    double joined = now_us();

    float x[1024];
    for (int i = 0; i < 1024; ++i) x[i] = (float)(rank + i);
    int64_t shape[1] = {1024};
    DLTensor t = {x, {kDLCPU, 0}, 1, {kDLFloat, 32, 1}, shape, NULL, 0};
    if (distc_allreduce(NULL, pg, &t, DISTC_SUM, NULL) != 0) {
        fprintf(stderr, "allreduce failed: %s\n", distc_error_last());
        distc_pg_free(pg);
        return 1;
    }
    int wrong = 0;
    for (int i = 0; i < 1024; ++i) wrong += x[i] != (float)(size * i + size * (size - 1) / 2);
    printf("rank %d of %d: joined in %.1f ms, allreduce of 1024 floats %s in %.0f us\n", rank, size,
           (joined - t0) / 1e3, wrong ? "WRONG" : "correct", now_us() - joined);
    distc_pg_free(pg);
    return wrong ? 1 : 0;
}

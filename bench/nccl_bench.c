/*
 * distc's nccl backend against a plain ncclAllReduce loop, in one process on
 * one GPU (world size 1: what is measured is each call's host cost and the
 * kernel NCCL runs, i.e. distc's overhead), side by side, as nccl-tests time
 * it: `iters` calls on one stream, then one synchronize. Rounds alternate
 * between the two and each row reports the median round.
 *
 *   distc-nccl-bench [-o allreduce|allgather] [-b 8] [-e 256M] [-f 4] [-n 200] [-w 20] [-r 5] [--async]
 *
 * allreduce is in place, which NCCL turns into no GPU work at world size 1:
 * its rows are pure per-call cost. allgather (into one tensor) copies the
 * input on the GPU, so large sizes show whether the calls keep the stream busy.
 *
 * --async gives every distc call a work handle (freed at once) instead of
 * the blocking, stream-ordered form.
 */
#include <cuda_runtime_api.h>
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <distc.h>

#include "size_arg.h"

#define CHECK(cond, ...)                  \
    do {                                  \
        if (!(cond)) {                    \
            fprintf(stderr, __VA_ARGS__); \
            fprintf(stderr, "\n");        \
            exit(1);                      \
        }                                 \
    } while (0)

static double now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
    size_t minb = 8, maxb = 256u << 20;
    int factor = 4, iters = 200, warmup = 20, rounds = 5, async = 0, gather = 0;
    for (int i = 1; i < argc; ++i) {
        if (!strcmp(argv[i], "-b") && i + 1 < argc)
            minb = (size_t)size_arg_or_exit(argv[++i]);
        else if (!strcmp(argv[i], "-e") && i + 1 < argc)
            maxb = (size_t)size_arg_or_exit(argv[++i]);
        else if (!strcmp(argv[i], "-f") && i + 1 < argc)
            factor = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-n") && i + 1 < argc)
            iters = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-w") && i + 1 < argc)
            warmup = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-r") && i + 1 < argc)
            rounds = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--async"))
            async = 1;
        else if (!strcmp(argv[i], "-o") && i + 1 < argc)
            gather = !strcmp(argv[++i], "allgather");
        else
            CHECK(0, "usage: %s [-b bytes] [-e bytes] [-f factor] [-n iters] [-w warmup] [-r rounds] [--async]",
                  argv[0]);
    }
    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
        printf("SKIP: no CUDA device\n");
        return 77;
    }
    CHECK(cudaSetDevice(0) == cudaSuccess, "cudaSetDevice");
    int nv = 0;
    ncclGetVersion(&nv);

    /* The plain NCCL communicator, and distc's over the same device. */
    ncclUniqueId id;
    ncclComm_t comm;
    CHECK(ncclGetUniqueId(&id) == ncclSuccess, "ncclGetUniqueId");
    CHECK(ncclCommInitRank(&comm, 1, id, 0) == ncclSuccess, "ncclCommInitRank");
    distc_store *st = NULL;
    CHECK(distc_store_new_hash(&st) == 0, "store: %s", distc_error_last());
    distc_pg_options po = DISTC_PG_OPTIONS_INIT;
    po.backend = "nccl";
    po.device = 0;
    distc_pg *pg = NULL;
    CHECK(distc_pg_new(&pg, st, 0, 1, &po) == 0, "distc_pg_new: %s", distc_error_last());

    cudaStream_t s;
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) == cudaSuccess, "stream");
    void *buf = NULL, *out = NULL;
    CHECK(cudaMalloc(&buf, maxb) == cudaSuccess, "cudaMalloc %zu", maxb);
    CHECK(cudaMemset(buf, 0, maxb) == cudaSuccess, "memset");
    CHECK(cudaMalloc(&out, maxb) == cudaSuccess, "cudaMalloc %zu", maxb);

    if (gather)
        printf("# distc nccl backend vs plain ncclAllGather (NCCL %d), 1 GPU, float32, out of place,\n", nv);
    else
        printf("# distc nccl backend vs plain ncclAllReduce (NCCL %d), 1 GPU, float32 sum in place,\n", nv);
    printf("# %d calls per round on one stream then one sync; median of %d alternating rounds; %s\n", iters, rounds,
           async ? "distc calls return work handles" : "distc calls are blocking (stream-ordered)");
    printf("# nccl+event: the plain loop with one cudaEventRecord per call, the least any tracking of work costs\n");
    printf("%12s %12s %12s %12s %12s %12s %10s\n", "size(B)", "count", "nccl(us)", "nccl+event", "distc(us)",
           "overhead(us)", "ratio");
    cudaEvent_t ev;
    CHECK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming) == cudaSuccess, "event");

    double *tr = calloc((size_t)rounds, sizeof *tr), *td = calloc((size_t)rounds, sizeof *td);
    double *te = calloc((size_t)rounds, sizeof *te);
    for (size_t bytes = minb; bytes <= maxb; bytes *= (size_t)factor) {
        size_t count = bytes / 4;
        int64_t shape = (int64_t)count;
        DLTensor t = {buf, {kDLCUDA, 0}, 1, {kDLFloat, 32, 1}, &shape, NULL, 0};
        DLTensor o = {out, {kDLCUDA, 0}, 1, {kDLFloat, 32, 1}, &shape, NULL, 0};
        distc_op_options oo = DISTC_OP_OPTIONS_INIT;
        oo.stream = s;
        for (int r = 0; r < rounds; ++r) {
            for (int pass = 0; pass < 3; ++pass) {
                int kind = (pass + r) % 3; /* 0 nccl, 1 distc, 2 nccl+event; rotate which goes first */
                double *slot = kind == 0 ? &tr[r] : kind == 1 ? &td[r] : &te[r];
                for (int i = 0; i < warmup + iters; ++i) {
                    if (i == warmup) {
                        CHECK(cudaStreamSynchronize(s) == cudaSuccess, "sync");
                        *slot = now_us();
                    }
                    if (kind != 1) {
                        ncclResult_t nr = gather ? ncclAllGather(buf, out, count, ncclFloat32, comm, s)
                                                 : ncclAllReduce(buf, buf, count, ncclFloat32, ncclSum, comm, s);
                        CHECK(nr == ncclSuccess, "nccl");
                        if (kind == 2) CHECK(cudaEventRecord(ev, s) == cudaSuccess, "record");
                    } else {
                        distc_work *w = NULL, **wp = async ? &w : NULL;
                        int rc = gather ? distc_allgather_into_tensor(wp, pg, &o, &t, &oo)
                                        : distc_allreduce(wp, pg, &t, DISTC_SUM, &oo);
                        CHECK(rc == 0, "distc: %s", distc_error_last());
                        distc_work_free(w);
                    }
                }
                CHECK(cudaStreamSynchronize(s) == cudaSuccess, "sync");
                *slot = (now_us() - *slot) / iters;
            }
        }
        qsort(tr, (size_t)rounds, sizeof *tr, cmp);
        qsort(td, (size_t)rounds, sizeof *td, cmp);
        qsort(te, (size_t)rounds, sizeof *te, cmp);
        double a = tr[rounds / 2], b = td[rounds / 2], c = te[rounds / 2];
        printf("%12zu %12zu %12.2f %12.2f %12.2f %12.2f %10.3f\n", bytes, count, a, c, b, b - a, b / a);
        fflush(stdout);
    }
    free(tr);
    free(td);
    free(te);
    cudaEventDestroy(ev);
    cudaFree(buf);
    cudaFree(out);
    distc_pg_free(pg);
    distc_store_free(st);
    ncclCommDestroy(comm);
    return 0;
}

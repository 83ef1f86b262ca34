/* distc-pg-bench: one rank of a collective benchmark over a distc process group.
 *
 *   distc-pg-bench [--rank R --size N --port P [--host ADDR]]
 *                  [-o allreduce|broadcast|allgather|reduce_scatter|alltoall|gather|scatter|sendrecv|barrier|all[,...]]
 *                  [-b 8] [-e 64M] [-f 2] [--iters N] [--warmup N]
 *                  [--time-ms T] [--min-iters N] [--reps R] [--timeout-ms MS] [--json]
 *                  [--shared-memory] [--in-place] [--memcpy]
 *
 * Start one process per rank. Without --rank/--size/--port the ranks meet
 * through distc_pg_new_from_url("env://") (RANK, WORLD_SIZE, MASTER_ADDR,
 * MASTER_PORT, as torchrun sets them; rank 0 serves the TCP store); with
 * them through "tcp://ADDR:P?rank=R&world_size=N" (rank 0 serves on P).
 * bench/compare starts the ranks and compares distc with raw Gloo
 * (bench/gloo_bench.cpp) and torch.distributed (bench/pg_torch.py), which
 * follow exactly this procedure.
 *
 * Sizes go from -b to -e (K, M, G: powers of 1024), times -f each step, and
 * -e itself when the steps miss it. Data is float32; as in nccl-tests, the
 * size of allgather and gather is the gathered output (size / ranks from each
 * rank), of scatter the root's input (size / ranks to each rank), of
 * reduce_scatter the input (size / ranks to each rank), of alltoall what
 * each rank sends in all, rounded down to whole floats per rank (at least
 * one), of sendrecv what each rank sends to the next rank (in one batch with
 * its receive from the previous), and sizes that round to the one before are skipped. broadcast's, gather's and scatter's root is rank 0. Every call is
 * blocking (out == NULL): the operation runs on the calling thread. Collectives
 * up to DISTC_MESH_BYTES (a library setting, every size by default; 0 turns
 * it off) take distc's own TCP mesh, larger ones Gloo's algorithms; the
 * allgather outputs are views of one buffer, distc's zero-copy case.
 * --in-place puts each op's input and output in one buffer, as nccl-tests'
 * in-place rows (MPI_IN_PLACE in mpi-raw-bench): allgather's input is the
 * rank's slot of the output (gather's: the root's), reduce_scatter's output
 * the rank's block of the input (scatter's: the root's part; MPI puts it at
 * the start of the input), alltoall's input is its output. allreduce and
 * broadcast are in place either way; sendrecv never is.
 *
 * For each (op, size):
 *   1. check: one call on rank-dependent data, verified element by element
 *      on every rank (a wrong element exits 3);
 *   2. probe: a barrier, then one call, timed; rank 0's time is broadcast (a float64 tensor)
 *      so that every rank derives the same iteration counts from it;
 *   3. warm-up: min(--warmup, time-ms / 4 / probe) calls; when there are
 *      any, rank 0's mean of them is broadcast and replaces the probe; then,
 *      with --time-ms, as many more as that estimate fits in time-ms / 8,
 *      whose mean replaces it again (a few slow first calls must not
 *      shorten the timed window);
 *   4. a barrier, then iters = min(--iters, max(--min-iters, time-ms / probe))
 *      timed calls back to back (--time-ms 0: always --iters);
 *   5. time_us = the per-call average of the slowest rank (an allreduce MAX
 *      of every rank's own average; time_us_min is the fastest rank's).
 * The timed loops run on zeroed buffers (nothing to overflow or denormalise).
 * algbw = size / time, busbw = algbw x nccl-tests' factor: allreduce
 * 2(n-1)/n, allgather, reduce_scatter, alltoall, gather and scatter (n-1)/n, broadcast and sendrecv 1
 * (GB = 1e9 bytes). barrier has one
 * row of size 0 and no bandwidth.
 *
 * Rank 0 prints the rows (nccl-tests-like columns, or one JSON object per row
 * with --json); other ranks print only errors. Timings are printed, never
 * judged: the exit status is 0, 1 (a call failed), 2 (usage) or 3 (a wrong
 * result).
 *
 * --backend NAME runs distc over another backend ("mpi": start it with
 * mpirun; the ranks come from mpi://). Built with PG_BENCH_MPI these files are
 * mpi-raw-bench instead: the same procedure on plain MPI calls, the anchor
 * for distc's mpi backend.
 *
 * The parts are in bench/pg_bench/: options.c (the command line), ops.c
 * (each op's buffers, checked inputs and verification), measure.c (the
 * procedure above, and --memcpy); this file joins the group and prints. */
#define _POSIX_C_SOURCE 200809L
#include "pg_bench/bench.h"

#include "json_out.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ------------------------------------------------------------------ main */

int main(int argc, char **argv) {
    config cfg;
    int rc = parse_args(&cfg, argc, argv);
    if (rc) return rc == 1 ? 0 : rc;
    if (cfg.memcpy_only) return memcpy_rows(&cfg);

    bench bs;
    bench *b = &bs;
    memset(b, 0, sizeof *b);
    b->cfg = &cfg;
    b->rank = cfg.rank;

    char url[512];
    double t_join = now_s();
#ifdef PG_BENCH_MPI
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided); /* the level distc's mpi backend uses */
    MPI_Comm_rank(MPI_COMM_WORLD, &b->rank);
    MPI_Comm_size(MPI_COMM_WORLD, &b->size);
    snprintf(url, sizeof url, "MPI_COMM_WORLD");
    const char *impl = "mpi";
    char version[MPI_MAX_LIBRARY_VERSION_STRING];
    int vlen = 0;
    MPI_Get_library_version(version, &vlen);
    version[strcspn(version, ",\n")] = 0;
#else
    if (cfg.port >= 0)
        snprintf(url, sizeof url, "tcp://%s:%d?rank=%d&world_size=%d", cfg.host, (int)cfg.port, (int)cfg.rank,
                 (int)cfg.size);
    else
        snprintf(url, sizeof url, strcmp(cfg.backend, "mpi") ? "env://" : "mpi://");
    distc_rendezvous_options ro = DISTC_RENDEZVOUS_OPTIONS_INIT;
    ro.timeout_ms = cfg.timeout_ms;
    distc_pg_options po = DISTC_PG_OPTIONS_INIT;
    po.timeout_ms = cfg.timeout_ms;
    po.group_name = "distc-pg-bench";
    po.backend = cfg.backend;
    if (distc_pg_new_from_url(&b->pg, url, &ro, &po) != 0) {
        fprintf(stderr, "distc-pg-bench: cannot join the group (%s): %s\n", url, distc_error_last());
        return 1;
    }
    CHECK(distc_pg_rank(&b->rank, b->pg));
    CHECK(distc_pg_size(&b->size, b->pg));
    char impl_buf[64];
    snprintf(impl_buf, sizeof impl_buf, strcmp(cfg.backend, "gloo") ? "distc-%s" : "distc", cfg.backend);
    const char *impl = impl_buf;
    const char *version = distc_version();
    const char *transport = "";
    CHECK(distc_pg_transport(&transport, b->pg, (b->rank + 1) % b->size));
#endif
    t_join = now_s() - t_join;
    b->views = (DLTensor *)calloc((size_t)b->size, sizeof *b->views);
    b->view_ptrs = (DLTensor **)calloc((size_t)b->size, sizeof *b->view_ptrs);
    if (!b->views || !b->view_ptrs) return 1;

    long nproc = sysconf(_SC_NPROCESSORS_ONLN);
    int leader = b->rank == 0;
    if (leader && !cfg.json) {
#ifdef PG_BENCH_MPI
        const char *transport = "mpi";
#endif
        printf("# " BENCH_NAME " %s: %d ranks (%s, %s, transport %s), joined in %.0f ms; nproc %ld\n", version,
               (int)b->size, impl, url, transport, t_join * 1e3, nproc);
        printf(
            "# float32 sum; root 0; allgather and gather size = gathered output, scatter's = root's input; time = "
            "slowest rank's mean per "
            "call; up to %lld warm-up and %lld timed calls within %.0f ms per size (at least %lld)\n",
            (long long)cfg.warmup, (long long)cfg.iters, cfg.time_ms, (long long)cfg.min_iters);
        if (cfg.in_place || cfg.shared_mem)
            printf("#%s%s\n", cfg.in_place ? " in place (--in-place)" : "",
                   cfg.shared_mem ? " buffers from distc_mem_alloc (--shared-memory)" : "");
        printf("%-9s %12s %12s %8s %11s %11s %9s %9s\n", "op", "size(B)", "count", "iters", "time(us)", "min(us)",
               "algbw", "busbw");
        printf("%-9s %12s %12s %8s %11s %11s %9s %9s\n", "", "", "(elements)", "", "slowest", "fastest", "(GB/s)",
               "(GB/s)");
        fflush(stdout);
    }

    for (int oi = 0; oi < cfg.n_ops && !rc; ++oi) {
        int op = cfg.ops[oi];
        int64_t last = -1;
        int64_t s = cfg.min_bytes;
        for (;;) {
            int64_t size = s, count;
            if (op == OP_BARRIER) {
                count = 0, size = 0;
            } else if (per_peer(op)) {
                count = size / (4 * (int64_t)b->size); /* per rank */
                if (count < 1) count = 1;
                size = count * 4 * b->size;
            } else {
                count = size / 4;
                if (count < 1) count = 1;
                size = count * 4;
            }
            if (size != last) {
                result r;
                memset(&r, 0, sizeof r);
                rc = run_one(b, op, count, size, &r);
                if (rc) break;
                last = size;
                if (leader && cfg.json) {
                    printf(
                        "{\"impl\": \"%s\", \"op\": \"%s\", \"size_bytes\": %lld, \"count\": %lld, "
                        "\"dtype\": \"float32\", \"ranks\": %d, \"root\": %d, \"iters\": %lld, \"warmup\": %lld, "
                        "\"time_us\": %.3f, \"time_us_min\": %.3f, \"algbw_gbps\": %.6f, \"busbw_gbps\": %.6f, "
                        "\"nproc\": %ld, \"version\": ",
                        impl, op_names[op], (long long)r.size_bytes, (long long)r.count, (int)b->size,
                        op == OP_BROADCAST ? 0 : -1, (long long)r.iters, (long long)r.warmup, r.time_us, r.time_us_min,
                        r.algbw, r.busbw, nproc);
                    print_json_str(version);
                    printf("}\n");
                } else if (leader) {
                    printf("%-9s %12lld %12lld %8lld %11.2f %11.2f %9.4f %9.4f\n", op_names[op],
                           (long long)r.size_bytes, (long long)r.count, (long long)r.iters, r.time_us, r.time_us_min,
                           r.algbw, r.busbw);
                }
                fflush(stdout);
            }
            if (op == OP_BARRIER || s >= cfg.max_bytes) break;
            s = s > cfg.max_bytes / cfg.factor ? cfg.max_bytes : s * cfg.factor;
        }
    }

#ifdef PG_BENCH_MPI
    if (rc) MPI_Abort(MPI_COMM_WORLD, rc);
    MPI_Finalize();
#else
    if (rc) distc_pg_abort(b->pg); /* peers fail fast instead of waiting out their timeout */
    distc_pg_free(b->pg);
#endif
    buf_free(&cfg, b->buf);
    buf_free(&cfg, b->out);
    free(b->views);
    free(b->view_ptrs);
    return rc;
}

// gloo-raw-bench: one rank of the collective benchmark with libgloo used directly.
//
//   gloo-raw-bench --rank R --size N --store-dir DIR
//                  [-o allreduce|broadcast|allgather|barrier|all[,...]]
//                  [-b 8] [-e 64M] [-f 2] [--iters N] [--warmup N]
//                  [--time-ms T] [--min-iters N] [--timeout-ms MS] [--json]
//
// The baseline that bench/compare puts next to distc-pg-bench
// (bench/pg_bench.c): the same procedure, options and rows, with distc taken
// out. The ranks meet through gloo::rendezvous::FileStore in DIR (a fresh,
// empty directory shared by the N processes; RANK, WORLD_SIZE and
// GLOO_BENCH_STORE_DIR stand in for the flags), under a PrefixStore, and
// connect a full mesh of gloo::transport::tcp pairs on 127.0.0.1 (on the
// interface GLOO_SOCKET_IFNAME names, when set). The collectives are the
// algorithms distc's gloo backend calls, with the same options (distc sends
// collectives up to DISTC_MESH_BYTES, every size by default, over its own TCP
// mesh instead of Gloo; with DISTC_MESH_BYTES=0 every size takes Gloo,
// which makes the comparison like for like):
//   allreduce  gloo::allreduce, AllreduceOptions::setOutput (in place) and
//              gloo::sum<float> (distc passes its own float32 sum; the default
//              algorithm either way)
//   broadcast  gloo::broadcast, root 0, in place
//   allgather  gloo::allgather into one flat output (distc's zero-copy path
//              when the output tensors are consecutive, as the benchmark has them)
//   barrier    gloo::barrier
// each with a fresh tag per call and the --timeout-ms timeout, blocking on the
// calling thread.
//
// Per (op, size): one checked call, one probe whose rank-0 time is broadcast,
// min(--warmup, time-ms/4/probe) warm-up calls (whose rank-0 mean, broadcast,
// then replaces the probe; with --time-ms, as many more as fit in time-ms/8
// at that estimate, whose mean replaces it again), a barrier, then
// min(--iters, max(--min-iters, time-ms/probe)) timed calls; time_us is the
// slowest rank's mean per call (an allreduce max). See bench/pg_bench.c.
// Exit status: 0, 1 (a call failed), 2 (usage), 3 (a wrong result).
#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/config.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/rendezvous/prefix_store.h>
#include <gloo/transport/tcp/device.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <stdexcept>

#include "size_arg.h"
#include <string>
#include <vector>

namespace {

enum Op { ALLREDUCE = 0, BROADCAST = 1, ALLGATHER = 2, BARRIER = 3, N_OPS = 4 };
const char *const op_names[N_OPS] = {"allreduce", "broadcast", "allgather", "barrier"};

struct Config {
    int rank = -1, size = -1;
    std::string store_dir;
    std::vector<int> ops{ALLREDUCE, BROADCAST, ALLGATHER, BARRIER};
    int64_t min_bytes = 8, max_bytes = int64_t(64) << 20, factor = 2;
    int64_t iters = 1000, warmup = 5, min_iters = 2, reps = 3;
    double time_ms = 100;
    int64_t timeout_ms = 120000;
    bool json = false;
};

double now_s() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

struct WrongResult : std::runtime_error {
    using std::runtime_error::runtime_error;
};

class Bench {
public:
    Bench(const Config &cfg, std::shared_ptr<gloo::Context> ctx) :
        cfg_(cfg), ctx_(std::move(ctx)), rank_(ctx_->rank), size_(ctx_->size),
        timeout_(std::chrono::milliseconds(cfg.timeout_ms)) {}

    int rank() const { return rank_; }
    int size() const { return size_; }

    struct Result {
        int64_t size_bytes = 0, count = 0, iters = 0, warmup = 0;
        double time_us = 0, time_us_min = 0, algbw = 0, busbw = 0;
    };

    Result run(int op, int64_t count, int64_t size_bytes) {
        const int64_t n = size_;
        if (op != BARRIER) buf_.resize(static_cast<size_t>(count));
        if (op == ALLGATHER) out_.resize(static_cast<size_t>(count * n));

        // 1. check
        fill_check(op, count);
        one(op, count);
        verify(op, count, size_bytes);
        std::fill(buf_.begin(), buf_.end(), 0.0f);
        std::fill(out_.begin(), out_.end(), 0.0f);

        // 2. probe (after a barrier: rank 0 must not time its peers' checking)
        one(BARRIER, 0);
        double t0 = now_s();
        one(op, count);
        double probe = now_s() - t0;
        agree(&probe);
        probe = std::max(probe, 1e-7);

        // 3. warm-up, 4. timed loop
        double box = cfg_.time_ms / 1e3;
        int64_t warmup = cfg_.time_ms > 0 ? clamp(box / 4 / probe, 0, cfg_.warmup) : cfg_.warmup;
        int64_t iters = cfg_.time_ms > 0 ? clamp(box / probe, cfg_.min_iters, cfg_.iters) : cfg_.iters;
        iters = std::min(iters, cfg_.iters);
        if (warmup > 0) {  // the warm-up's mean (rank 0's) is a better estimate than one call
            t0 = now_s();
            for (int64_t i = 0; i < warmup; ++i) one(op, count);
            double est = (now_s() - t0) / static_cast<double>(warmup);
            agree(&est);
            if (cfg_.time_ms > 0) iters = clamp(box / std::max(est, 1e-7), cfg_.min_iters, cfg_.iters);
            // A few first calls can be far slower than the rest: calls for an
            // eighth of the box at that estimate, then their mean, so that the
            // timed window fills the box.
            int64_t settle = cfg_.time_ms > 0 ? clamp(box / 8 / std::max(est, 1e-7), 0, cfg_.iters) : 0;
            if (settle > warmup) {
                t0 = now_s();
                for (int64_t i = 0; i < settle; ++i) one(op, count);
                est = (now_s() - t0) / static_cast<double>(settle);
                agree(&est);
                iters = clamp(box / std::max(est, 1e-7), cfg_.min_iters, cfg_.iters);
                warmup += settle;
            }
        }
        // --reps windows; the median window's mean resists this VM's bimodal latency.
        std::vector<double> win;
        for (int64_t w = 0; w < cfg_.reps; ++w) {
            one(BARRIER, 0);
            t0 = now_s();
            for (int64_t i = 0; i < iters; ++i) one(op, count);
            win.push_back((now_s() - t0) / static_cast<double>(iters));
        }
        std::sort(win.begin(), win.end());
        double avg = win[win.size() / 2];

        // 5. slowest and fastest rank
        double mm[2] = {avg, -avg};
        {
            gloo::AllreduceOptions o(ctx_);
            o.setOutput(mm, 2);
            o.setReduceFunction(static_cast<void (*)(void *, const void *, const void *, size_t)>(&gloo::max<double>));
            o.setTag(next_tag());
            o.setTimeout(timeout_);
            gloo::allreduce(o);
        }

        Result r;
        r.size_bytes = size_bytes;
        r.count = op == ALLGATHER ? count * n : (op == BARRIER ? 0 : count);
        r.iters = iters;
        r.warmup = warmup;
        r.time_us = mm[0] * 1e6;
        r.time_us_min = -mm[1] * 1e6;
        double f = op == ALLREDUCE   ? 2.0 * double(n - 1) / double(n)
                   : op == ALLGATHER ? double(n - 1) / double(n)
                                     : 1.0;
        r.algbw = op == BARRIER ? 0.0 : double(size_bytes) / mm[0] / 1e9;
        r.busbw = r.algbw * f;
        return r;
    }

private:
    static int64_t clamp(double x, int64_t lo, int64_t hi) {
        if (!(x >= double(lo))) return lo;
        if (x >= double(hi)) return hi;
        return static_cast<int64_t>(x);
    }

    uint32_t next_tag() { return tag_++; }

    void one(int op, int64_t count) {
        switch (op) {
            case ALLREDUCE: {
                gloo::AllreduceOptions o(ctx_);
                o.setOutput(buf_.data(), static_cast<size_t>(count));
                o.setReduceFunction(
                    static_cast<void (*)(void *, const void *, const void *, size_t)>(&gloo::sum<float>));
                o.setTag(next_tag());
                o.setTimeout(timeout_);
                gloo::allreduce(o);
                break;
            }
            case BROADCAST: {
                gloo::BroadcastOptions o(ctx_);
                if (rank_ == 0) o.setInput(buf_.data(), static_cast<size_t>(count));
                o.setOutput(buf_.data(), static_cast<size_t>(count));
                o.setRoot(0);
                o.setTag(next_tag());
                o.setTimeout(timeout_);
                gloo::broadcast(o);
                break;
            }
            case ALLGATHER: {
                gloo::AllgatherOptions o(ctx_);
                o.setInput(buf_.data(), static_cast<size_t>(count));
                o.setOutput(out_.data(), static_cast<size_t>(count * size_));
                o.setTag(next_tag());
                o.setTimeout(timeout_);
                gloo::allgather(o);
                break;
            }
            default: {
                gloo::BarrierOptions o(ctx_);
                o.setTag(next_tag());
                o.setTimeout(timeout_);
                gloo::barrier(o);
            }
        }
    }

    // Rank-dependent inputs of the check call (as bench/pg_bench.c).
    void fill_check(int op, int64_t count) {
        for (int64_t i = 0; i < count && op != BARRIER; ++i) {
            float &x = buf_[static_cast<size_t>(i)];
            if (op == ALLREDUCE)
                x = float(rank_ + 1) + float(i % 7);
            else if (op == BROADCAST)
                x = rank_ == 0 ? float(i % 251) + 1.0f : -1.0f;
            else
                x = float(rank_ * 1000) + float(i % 13);
        }
        if (op == ALLGATHER) std::fill(out_.begin(), out_.end(), -1.0f);
    }

    void verify(int op, int64_t count, int64_t size_bytes) {
        const int64_t n = size_;
        if (op == BARRIER) return;
        int64_t total = op == ALLGATHER ? count * n : count;
        for (int64_t i = 0; i < total; ++i) {
            float got, want;
            if (op == ALLREDUCE) {
                got = buf_[size_t(i)];
                want = float(n * (n + 1) / 2) + float(n * (i % 7));
            } else if (op == BROADCAST) {
                got = buf_[size_t(i)];
                want = float(i % 251) + 1.0f;
            } else {
                got = out_[size_t(i)];
                want = float((i / count) * 1000) + float((i % count) % 13);
            }
            if (got != want) {
                char m[256];
                std::snprintf(m, sizeof m, "%s of %lld B over %d ranks: element %lld is %g, expected %g", op_names[op],
                              (long long)size_bytes, (int)n, (long long)i, (double)got, (double)want);
                throw WrongResult(m);
            }
        }
    }

    // Every rank gets rank 0's *v.
    void agree(double *v) {
        gloo::BroadcastOptions o(ctx_);
        if (rank_ == 0) o.setInput(v, 1);
        o.setOutput(v, 1);
        o.setRoot(0);
        o.setTag(next_tag());
        o.setTimeout(timeout_);
        gloo::broadcast(o);
    }

    const Config &cfg_;
    std::shared_ptr<gloo::Context> ctx_;
    int rank_, size_;
    std::chrono::milliseconds timeout_;
    uint32_t tag_ = 0;
    std::vector<float> buf_, out_;
};

// ------------------------------------------------------------------ options

bool parse_size(const char *s, int64_t *out) {
    uint64_t v;
    if (size_arg(s, &v)) return false;
    *out = static_cast<int64_t>(v);
    return true;
}

bool parse_int(const char *s, int64_t *out) {
    char *end = nullptr;
    errno = 0;
    long long v = std::strtoll(s, &end, 10);
    if (errno || end == s || *end) return false;
    *out = v;
    return true;
}

bool parse_ops(Config &cfg, const std::string &s) {
    cfg.ops.clear();
    size_t pos = 0;
    while (pos <= s.size()) {
        size_t comma = s.find(',', pos);
        std::string tok = s.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
        pos = comma == std::string::npos ? s.size() + 1 : comma + 1;
        if (tok.empty()) continue;
        std::vector<int> add;
        if (tok == "all") {
            add = {ALLREDUCE, BROADCAST, ALLGATHER, BARRIER};
        } else {
            int found = -1;
            for (int op = 0; op < N_OPS; ++op)
                if (tok == op_names[op]) found = op;
            if (found < 0) return false;
            add = {found};
        }
        for (int op : add)
            if (std::find(cfg.ops.begin(), cfg.ops.end(), op) == cfg.ops.end()) cfg.ops.push_back(op);
    }
    return !cfg.ops.empty();
}

void usage(const char *argv0, FILE *f) {
    std::fprintf(
        f,
        "usage: %s --rank R --size N --store-dir DIR [-o OPS] [-b MIN] [-e MAX] [-f FACTOR]\n"
        "          [--iters N] [--warmup N] [--min-iters N] [--reps R] [--time-ms T] [--timeout-ms MS] [--json]\n"
        "  One rank of the collective benchmark with libgloo alone (bench/compare runs it next to\n"
        "  distc-pg-bench). DIR: an empty directory shared by the ranks (gloo FileStore); RANK,\n"
        "  WORLD_SIZE and GLOO_BENCH_STORE_DIR stand in for the flags. Other options as distc-pg-bench.\n",
        argv0);
}

// 0: run; 1: done (help); 2: usage error.
int parse_args(Config &cfg, int argc, char **argv) {
    if (const char *e = std::getenv("RANK")) cfg.rank = std::atoi(e);
    if (const char *e = std::getenv("WORLD_SIZE")) cfg.size = std::atoi(e);
    if (const char *e = std::getenv("GLOO_BENCH_STORE_DIR")) cfg.store_dir = e;
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        if (a == "-h" || a == "--help") {
            usage(argv[0], stdout);
            return 1;
        }
        if (a == "--version") {
            std::printf("libgloo (Debian libgloo-dev)\n");
            return 1;
        }
        if (a == "--json") {
            cfg.json = true;
            continue;
        }
        if (i + 1 >= argc) {
            usage(argv[0], stderr);
            return 2;
        }
        const char *v = argv[++i];
        int64_t x = 0;
        bool ok = true;
        if (a == "--rank") {
            ok = parse_int(v, &x) && x >= 0;
            cfg.rank = int(x);
        } else if (a == "--size") {
            ok = parse_int(v, &x) && x >= 1 && x < 65536;
            cfg.size = int(x);
        } else if (a == "--store-dir") {
            cfg.store_dir = v;
        } else if (a == "-o" || a == "--op" || a == "--ops") {
            ok = parse_ops(cfg, v);
        } else if (a == "-b" || a == "--minbytes") {
            ok = parse_size(v, &cfg.min_bytes) && cfg.min_bytes >= 1;
        } else if (a == "-e" || a == "--maxbytes") {
            ok = parse_size(v, &cfg.max_bytes) && cfg.max_bytes >= 1;
        } else if (a == "-f" || a == "--stepfactor") {
            ok = parse_int(v, &cfg.factor) && cfg.factor >= 2;
        } else if (a == "-n" || a == "--iters") {
            ok = parse_int(v, &cfg.iters) && cfg.iters >= 1;
        } else if (a == "-w" || a == "--warmup") {
            ok = parse_int(v, &cfg.warmup) && cfg.warmup >= 0;
        } else if (a == "--reps") {
            ok = parse_int(v, &cfg.reps) && cfg.reps >= 1 && cfg.reps <= 16;
        } else if (a == "--min-iters") {
            ok = parse_int(v, &cfg.min_iters) && cfg.min_iters >= 1;
        } else if (a == "--time-ms") {
            char *end = nullptr;
            cfg.time_ms = std::strtod(v, &end);
            ok = end != v && !*end && cfg.time_ms >= 0;
        } else if (a == "--timeout-ms") {
            ok = parse_int(v, &cfg.timeout_ms) && cfg.timeout_ms >= 1;
        } else {
            usage(argv[0], stderr);
            return 2;
        }
        if (!ok) {
            std::fprintf(stderr, "gloo-raw-bench: bad %s '%s'\n", a.c_str(), v);
            return 2;
        }
    }
    if (cfg.rank < 0 || cfg.size < 1 || cfg.rank >= cfg.size || cfg.store_dir.empty()) {
        std::fprintf(stderr, "gloo-raw-bench: needs --rank R < --size N and --store-dir DIR\n");
        return 2;
    }
    if (cfg.max_bytes < cfg.min_bytes) {
        std::fprintf(stderr, "gloo-raw-bench: -e is below -b\n");
        return 2;
    }
    return 0;
}

int run(const Config &cfg) {
    std::chrono::milliseconds timeout(cfg.timeout_ms);
    gloo::transport::tcp::attr attr;
    const char *ifname = std::getenv("GLOO_SOCKET_IFNAME");
    if (ifname && *ifname)
        attr.iface = ifname;
    else
        attr.hostname = "127.0.0.1";
    double t_join = now_s();
    auto device = gloo::transport::tcp::CreateDevice(attr);
    gloo::rendezvous::FileStore file_store(cfg.store_dir);
    gloo::rendezvous::PrefixStore store("gloo-raw-bench", file_store);
    auto ctx = std::make_shared<gloo::rendezvous::Context>(cfg.rank, cfg.size);
    ctx->setTimeout(timeout);
    ctx->connectFullMesh(store, device);
    t_join = now_s() - t_join;

    Bench b(cfg, ctx);
    long nproc = sysconf(_SC_NPROCESSORS_ONLN);
    bool leader = cfg.rank == 0;
    if (leader && !cfg.json) {
        std::printf(
            "# gloo-raw-bench: %d ranks, libgloo directly (FileStore %s, tcp on %s), joined in %.0f ms; "
            "nproc %ld\n",
            cfg.size, cfg.store_dir.c_str(), ifname && *ifname ? ifname : "127.0.0.1", t_join * 1e3, nproc);
        std::printf("%-9s %12s %12s %8s %11s %11s %9s %9s\n", "op", "size(B)", "count", "iters", "time(us)", "min(us)",
                    "algbw", "busbw");
        std::printf("%-9s %12s %12s %8s %11s %11s %9s %9s\n", "", "", "(elements)", "", "slowest", "fastest", "(GB/s)",
                    "(GB/s)");
        std::fflush(stdout);
    }
    for (int op : cfg.ops) {
        int64_t last = -1;
        int64_t s = cfg.min_bytes;
        for (;;) {
            int64_t size = s, count;
            if (op == BARRIER) {
                count = 0, size = 0;
            } else if (op == ALLGATHER) {
                count = std::max<int64_t>(1, size / (4 * int64_t(cfg.size)));
                size = count * 4 * cfg.size;
            } else {
                count = std::max<int64_t>(1, size / 4);
                size = count * 4;
            }
            if (size != last) {
                Bench::Result r = b.run(op, count, size);
                last = size;
                if (leader && cfg.json) {
                    std::printf(
                        "{\"impl\": \"gloo\", \"op\": \"%s\", \"size_bytes\": %lld, \"count\": %lld, "
                        "\"dtype\": \"float32\", \"ranks\": %d, \"root\": %d, \"iters\": %lld, "
                        "\"warmup\": %lld, \"time_us\": %.3f, \"time_us_min\": %.3f, \"algbw_gbps\": %.6f, "
                        "\"busbw_gbps\": %.6f, \"nproc\": %ld, \"version\": \"libgloo\"}\n",
                        op_names[op], (long long)r.size_bytes, (long long)r.count, cfg.size, op == BROADCAST ? 0 : -1,
                        (long long)r.iters, (long long)r.warmup, r.time_us, r.time_us_min, r.algbw, r.busbw, nproc);
                } else if (leader) {
                    std::printf("%-9s %12lld %12lld %8lld %11.2f %11.2f %9.4f %9.4f\n", op_names[op],
                                (long long)r.size_bytes, (long long)r.count, (long long)r.iters, r.time_us,
                                r.time_us_min, r.algbw, r.busbw);
                }
                std::fflush(stdout);
            }
            if (op == BARRIER || s >= cfg.max_bytes) break;
            s = s > cfg.max_bytes / cfg.factor ? cfg.max_bytes : s * cfg.factor;
        }
    }
    return 0;
}

}  // namespace

int main(int argc, char **argv) {
    Config cfg;
    int rc = parse_args(cfg, argc, argv);
    if (rc) return rc == 1 ? 0 : rc;
    try {
        return run(cfg);
    } catch (const WrongResult &e) {
        std::fprintf(stderr, "gloo-raw-bench: rank %d: WRONG RESULT: %s\n", cfg.rank, e.what());
        return 3;
    } catch (const std::exception &e) {
        std::fprintf(stderr, "gloo-raw-bench: rank %d: %s\n", cfg.rank, e.what());
        return 1;
    }
}

#define _GNU_SOURCE
#include "pg_harness.h"

#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "loopback_backend.h"
#include "test_util.h"

/* ------------------------------------------------------------- rank threads */

/* Failures beyond this many per run are counted but not printed. */
#define DT_MAX_PRINTED 40

static int g_failures; /* atomic (__atomic builtins) */
static int g_run_counter;
static __thread int tls_rank = -1;
static __thread int tls_size = 0;
static __thread distc_store *tls_store = NULL;
static __thread const char *tls_group = NULL;

struct dt_run {
    distc_store *store;
    int size;
    int64_t timeout_ms;
    dt_rank_fn fn;
    void *arg;
    char group[64];
};

struct dt_rank_arg {
    struct dt_run *run;
    int rank;
};

int dt_rank(void) { return tls_rank; }
distc_store *dt_rank_store(void) { return tls_store; }
const char *dt_rank_group(void) { return tls_group; }
int dt_rank_failures(void) { return __atomic_load_n(&g_failures, __ATOMIC_SEQ_CST); }

int dt_same_everywhere(distc_pg *pg, const void *data, size_t len, const char *what) {
    int32_t size = 0;
    if (!RK_OK(distc_pg_size(&size, pg))) return 0;
    distc_buf *all = calloc((size_t)size, sizeof *all);
    int same = all && RK_OK(distc_all_gather_bytes(all, pg, data, len, NULL));
    for (int32_t q = 0; all && q < size; ++q) {
        if (same && !(all[q].size == len && memcmp(all[q].data, data, len) == 0)) {
            dt_rank_fail(__FILE__, __LINE__, "%s: rank %d's bytes differ from rank %d's", what, q, tls_rank);
            same = 0;
        }
        distc_buf_dispose(&all[q]);
    }
    free(all);
    return same;
}

typedef struct thread_arg {
    distc_store *store;
    int rank, size;
    dt_thread_fn fn;
    void *arg;
} thread_arg;

static void *thread_main(void *p) {
    thread_arg *a = p;
    a->fn(a->store, a->rank, a->size, a->arg);
    return NULL;
}

int dt_run_threads(distc_store *store, int size, dt_thread_fn fn, void *arg) {
    pthread_t th[16];
    thread_arg args[16];
    int before = dt_rank_failures();
    if (size < 1 || size > 16) return -1;
    for (int r = 0; r < size; ++r) {
        args[r] = (thread_arg){store, r, size, fn, arg};
        if (pthread_create(&th[r], NULL, thread_main, &args[r]) != 0) return -1;
    }
    for (int r = 0; r < size; ++r) pthread_join(th[r], NULL);
    return dt_rank_failures() - before;
}

void dt_rank_fail(const char *file, int line, const char *fmt, ...) {
    int n = __atomic_add_fetch(&g_failures, 1, __ATOMIC_SEQ_CST);
    if (n > DT_MAX_PRINTED) {
        if (n == DT_MAX_PRINTED + 1) fprintf(stderr, "(further failures are counted, not printed)\n");
        return;
    }
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    const char *base = strrchr(file, '/');
    fprintf(stderr, "[%s rank %d/%d] %s:%d: %s\n", tls_group ? tls_group : "main", tls_rank, tls_size,
            base ? base + 1 : file, line, msg);
}

static int is_launched(void);

static void *dt_rank_main(void *p) {
    struct dt_rank_arg *ra = p;
    struct dt_run *run = ra->run;
    tls_rank = ra->rank;
    tls_size = run->size;
    tls_store = run->store;
    tls_group = run->group;

    distc_pg_options o = DISTC_PG_OPTIONS_INIT;
    o.timeout_ms = run->timeout_ms;
    o.group_name = run->group;
    o.backend = dt_backend();
    distc_pg *pg = NULL;
    int rc = distc_pg_new(&pg, run->store, ra->rank, run->size, &o);
    if (rc != 0)
        dt_rank_fail(__FILE__, __LINE__, "distc_pg_new -> %d: %s", rc, distc_error_last());
    else
        run->fn(pg, ra->rank, run->size, run->arg);

    /* Store-side barrier: every rank finished fn before any frees its group. */
    char key[128];
    snprintf(key, sizeof key, "dt_harness/%s/done/%d", run->group, ra->rank);
    distc_store_set(run->store, key, "1", 1);
    char **keys = calloc((size_t)run->size, sizeof *keys);
    for (int r = 0; r < run->size; ++r) {
        keys[r] = malloc(128);
        snprintf(keys[r], 128, "dt_harness/%s/done/%d", run->group, r);
    }
    rc = distc_store_wait(run->store, (const char *const *)keys, (size_t)run->size, run->timeout_ms + 10000);
    if (rc != 0) dt_rank_fail(__FILE__, __LINE__, "peers did not finish: %s", distc_error_last());
    for (int r = 0; r < run->size; ++r) free(keys[r]);
    free(keys);
    /* Under a launcher that does not host the store (srun), rank 0's process
     * does: it may not end the run, and maybe its process, until every rank
     * is past the wait above. The last rank past it says so. */
    if (is_launched()) {
        char left[128], all[128];
        snprintf(left, sizeof left, "dt_harness/%s/left", run->group);
        snprintf(all, sizeof all, "dt_harness/%s/all_left", run->group);
        int64_t n = 0;
        if (distc_store_add(&n, run->store, left, 1) == 0 && n == run->size) distc_store_set(run->store, all, "1", 1);
        const char *const wait_all[] = {all};
        if (ra->rank == 0 && distc_store_wait(run->store, wait_all, 1, run->timeout_ms + 10000) != 0)
            dt_rank_fail(__FILE__, __LINE__, "peers did not leave: %s", distc_error_last());
    }

    distc_pg_free(pg);
    tls_rank = -1;
    tls_store = NULL;
    tls_group = NULL;
    return NULL;
}

/* Process mode: each rank a forked process meeting the others in a file store. */
struct dt_proc_run {
    struct dt_run *run;
    const char *path;
};

static int dt_rank_proc(int rank, int n, void *arg) {
    struct dt_proc_run *pr = arg;
    struct dt_run *run = pr->run;
    if (distc_store_new_file(&run->store, pr->path, n) != 0) {
        fprintf(stderr, "rank %d: distc_store_new_file: %s\n", rank, distc_error_last());
        return 1;
    }
    struct dt_rank_arg ra = {run, rank};
    dt_rank_main(&ra);
    distc_store_free(run->store);
    return dt_rank_failures() ? 1 : 0;
}

const char *dt_backend(void) {
    const char *e = getenv("DT_BACKEND");
    if (!e || !*e) return "gloo";
    if (strcmp(e, "loopback") == 0 && loopback_backend_register("loopback") != 0) {
        fprintf(stderr, "cannot register the loopback backend: %s\n", distc_error_last());
        abort();
    }
    return e;
}

/* World modes: this process is one rank of a job of fixed size, and runs of
 * other sizes are skipped. Under mpirun (DT_BACKEND=mpi) the ranks meet in
 * the file store DT_STORE_FILE; under a launcher (DT_RANKS_AS=launched:
 * distc-run, torchrun, srun) they rendezvous through env://, as users' jobs do. */
static int env_int(const char *a, const char *b) {
    const char *v = getenv(a);
    if (!v && b) v = getenv(b);
    return v ? atoi(v) : -1;
}
static int is_mpi(void) { return strcmp(dt_backend(), "mpi") == 0; }
static int is_launched(void) {
    const char *e = getenv("DT_RANKS_AS");
    return e && strcmp(e, "launched") == 0;
}
static int world_size(void) {
    return is_mpi() ? env_int("OMPI_COMM_WORLD_SIZE", "PMI_SIZE") : env_int("WORLD_SIZE", "SLURM_NTASKS");
}
static int world_rank(void) {
    return is_mpi() ? env_int("OMPI_COMM_WORLD_RANK", "PMI_RANK") : env_int("RANK", "SLURM_PROCID");
}

int dt_backend_max_size(void) {
    if (strcmp(dt_backend(), "loopback") == 0) return 1;
    if (is_mpi() || is_launched()) return world_size();
    return 1 << 30;
}

/* This rank of the world runs fn, with the store every run of the process shares. */
static int dt_run_world_rank(struct dt_run *run) {
    static distc_store *shared;
    if (!shared) {
        int rc;
        if (is_mpi()) {
            const char *path = getenv("DT_STORE_FILE");
            rc = path ? distc_store_new_file(&shared, path, world_size()) : -1;
        } else {
            int32_t rank = -1, size = -1;
            rc = distc_rendezvous(&shared, &rank, &size, "env://", NULL);
        }
        if (rc != 0) {
            fprintf(stderr, "%s: %s\n",
                    is_mpi() ? "MPI mode needs DT_STORE_FILE (a fresh path shared by the ranks)"
                             : "launched mode needs env:// (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT)",
                    rc < 0 ? "not set" : distc_error_last());
            abort();
        }
    }
    run->store = shared;
    struct dt_rank_arg ra = {run, world_rank()};
    dt_rank_main(&ra);
    return __atomic_load_n(&g_failures, __ATOMIC_SEQ_CST);
}

int dt_ranks_are_processes(void) {
    const char *e = getenv("DT_RANKS_AS");
    return e && strcmp(e, "procs") == 0;
}

int dt_run_ranks_timeout(int size, int64_t timeout_ms, dt_rank_fn fn, void *arg) {
    struct dt_run run;
    memset(&run, 0, sizeof run);
    /* The in-place paths on every machine, whatever its kernel's copy
     * measures (CMake runs the suites with "slow" too). */
    setenv("DISTC_SHM_KERNEL_COPY", "fast", 0);
    int world = is_mpi() || is_launched();
    if (size > dt_backend_max_size() || (world && size != world_size())) {
        static int said;
        if (!said++)
            printf("(backend %s runs world size %d%s: other sizes are skipped)\n", dt_backend(), dt_backend_max_size(),
                   is_mpi()        ? " (mpirun -np)"
                   : is_launched() ? " (the launcher's WORLD_SIZE)"
                                   : " at most");
        return 0;
    }
    /* Every run: a group name of its own, and a fresh failure count. */
    run.size = size;
    run.timeout_ms = timeout_ms;
    run.fn = fn;
    run.arg = arg;
    snprintf(run.group, sizeof run.group, "dt_group_%d_size%d", __atomic_add_fetch(&g_run_counter, 1, __ATOMIC_SEQ_CST),
             size);
    __atomic_store_n(&g_failures, 0, __ATOMIC_SEQ_CST);
    if (world) {
        int failures = dt_run_world_rank(&run);
        if (failures != 0) fail_msg("%s: %d failure(s) on rank %d (see above)", run.group, failures, world_rank());
        return failures;
    }
    if (dt_ranks_are_processes()) {
        char *path = dt_temp_path("ranks");
        struct dt_proc_run pr = {&run, path};
        int failed = dt_run_procs(size, dt_rank_proc, &pr, (int)(timeout_ms / 1000) + 60);
        unlink(path);
        free(path);
        if (failed != 0) fail_msg("%s: %d rank process(es) failed (see above)", run.group, failed);
        return failed;
    }
    if (distc_store_new_hash(&run.store) != 0) fail_msg("distc_store_new_hash: %s", distc_error_last());

    pthread_t *th = calloc((size_t)size, sizeof *th);
    struct dt_rank_arg *ra = calloc((size_t)size, sizeof *ra);
    for (int r = 0; r < size; ++r) {
        ra[r].run = &run;
        ra[r].rank = r;
        if (pthread_create(&th[r], NULL, dt_rank_main, &ra[r]) != 0) fail_msg("pthread_create failed");
    }
    for (int r = 0; r < size; ++r) pthread_join(th[r], NULL);
    free(th);
    free(ra);
    distc_store_free(run.store);

    int failures = __atomic_load_n(&g_failures, __ATOMIC_SEQ_CST);
    if (failures != 0) fail_msg("%s: %d failure(s) in the rank threads (see above)", run.group, failures);
    return failures;
}

int dt_run_ranks(int size, dt_rank_fn fn, void *arg) { return dt_run_ranks_timeout(size, DT_PG_TIMEOUT_MS, fn, arg); }

/* ------------------------------------------------------------------ dtypes */

const DLDataType dt_all_dtypes[] = {
    {DT_KDLBOOL, 8, 1}, {kDLInt, 8, 1},    {kDLUInt, 8, 1},     {kDLInt, 16, 1},
    {kDLInt, 32, 1},    {kDLInt, 64, 1},   {kDLFloat, 16, 1},   {kDLBfloat, 16, 1},
    {kDLFloat, 32, 1},  {kDLFloat, 64, 1}, {kDLComplex, 64, 1}, {kDLComplex, 128, 1},
};
const size_t dt_num_dtypes = sizeof dt_all_dtypes / sizeof dt_all_dtypes[0];

int dt_dtype_eq(DLDataType a, DLDataType b) { return a.code == b.code && a.bits == b.bits && a.lanes == b.lanes; }
int dt_is_bool(DLDataType dt) { return dt.code == DT_KDLBOOL; }
int dt_is_int(DLDataType dt) { return dt.code == kDLInt || dt.code == kDLUInt; }
int dt_is_unsigned(DLDataType dt) { return dt.code == kDLUInt; }
int dt_is_float(DLDataType dt) { return dt.code == kDLFloat || dt.code == kDLBfloat; }
int dt_is_complex(DLDataType dt) { return dt.code == kDLComplex; }
size_t dt_dtype_size(DLDataType dt) { return (size_t)dt.bits / 8 * dt.lanes; }

const char *dt_dtype_name(DLDataType dt) {
    switch (dt.code) {
        case DT_KDLBOOL: return "bool";
        case kDLInt:
            return dt.bits == 8    ? "int8"
                   : dt.bits == 16 ? "int16"
                   : dt.bits == 32 ? "int32"
                   : dt.bits == 64 ? "int64"
                                   : "int?";
        case kDLUInt: return dt.bits == 8 ? "uint8" : "uint?";
        case kDLFloat:
            return dt.bits == 16 ? "float16" : dt.bits == 32 ? "float32" : dt.bits == 64 ? "float64" : "float?";
        case kDLBfloat: return "bfloat16";
        case kDLComplex: return dt.bits == 64 ? "complex64" : dt.bits == 128 ? "complex128" : "complex?";
        default: return "unknown";
    }
}

/* ------------------------------------------------------------ 16-bit floats */

static uint32_t f_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static float bits_f(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

float dt_half_to_float(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;
    if (exp == 0x1f) return bits_f(sign | 0x7f800000u | (man << 13));
    if (exp == 0) {
        float mag = ldexpf((float)man, -24);
        return sign ? -mag : mag;
    }
    return bits_f(sign | ((exp + 112u) << 23) | (man << 13));
}

uint16_t dt_float_to_half(float f) {
    if (f != f) return 0x7e00;
    uint16_t sign = signbit(f) ? 0x8000 : 0;
    float a = fabsf(f);
    if (a >= 65520.0f) return sign | 0x7c00; /* rounds to Inf */
    if (a < ldexpf(1.0f, -14)) {
        /* Subnormal: units of 2^-24, rounded to nearest even. */
        float units = nearbyintf(ldexpf(a, 24));
        return (uint16_t)(sign | (uint16_t)units);
    }
    int e;
    float m = frexpf(a, &e); /* a = m * 2^e, m in [0.5, 1) */
    /* 11 significant bits: mantissa in units of 2^(e-11). */
    float sig = nearbyintf(ldexpf(m, 11));
    if (sig >= 2048.0f) {
        sig /= 2.0f;
        e += 1;
    }
    int exp = e - 1 + 15;
    if (exp >= 31) return sign | 0x7c00;
    return (uint16_t)(sign | (uint16_t)(exp << 10) | ((uint16_t)sig & 0x3ffu));
}

float dt_bf16_to_float(uint16_t h) { return bits_f((uint32_t)h << 16); }

uint16_t dt_float_to_bf16(float f) {
    uint32_t u = f_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

/* ---------------------------------------------------------------- elements */

double dt_elem_get(const void *base, DLDataType dt, int64_t i) {
    const char *p = (const char *)base + (size_t)i * dt_dtype_size(dt);
    switch (dt.code) {
        case DT_KDLBOOL: return *(const uint8_t *)p != 0;
        case kDLInt:
            switch (dt.bits) {
                case 8: return *(const int8_t *)p;
                case 16: {
                    int16_t v;
                    memcpy(&v, p, 2);
                    return v;
                }
                case 32: {
                    int32_t v;
                    memcpy(&v, p, 4);
                    return v;
                }
                case 64: {
                    int64_t v;
                    memcpy(&v, p, 8);
                    return (double)v;
                }
            }
            break;
        case kDLUInt:
            if (dt.bits == 8) return *(const uint8_t *)p;
            break;
        case kDLFloat:
            switch (dt.bits) {
                case 16: {
                    uint16_t v;
                    memcpy(&v, p, 2);
                    return dt_half_to_float(v);
                }
                case 32: {
                    float v;
                    memcpy(&v, p, 4);
                    return v;
                }
                case 64: {
                    double v;
                    memcpy(&v, p, 8);
                    return v;
                }
            }
            break;
        case kDLBfloat: {
            uint16_t v;
            memcpy(&v, p, 2);
            return dt_bf16_to_float(v);
        }
        case kDLComplex:
            if (dt.bits == 64) {
                float v;
                memcpy(&v, p, 4);
                return v;
            }
            if (dt.bits == 128) {
                double v;
                memcpy(&v, p, 8);
                return v;
            }
            break;
    }
    return NAN;
}

double dt_elem_get_imag(const void *base, DLDataType dt, int64_t i) {
    if (dt.code != kDLComplex) return 0;
    const char *p = (const char *)base + (size_t)i * dt_dtype_size(dt);
    if (dt.bits == 64) {
        float v;
        memcpy(&v, p + 4, 4);
        return v;
    }
    double v;
    memcpy(&v, p + 8, 8);
    return v;
}

void dt_elem_set(void *base, DLDataType dt, int64_t i, double re, double im) {
    char *p = (char *)base + (size_t)i * dt_dtype_size(dt);
    switch (dt.code) {
        case DT_KDLBOOL: *(uint8_t *)p = re != 0; return;
        case kDLInt: {
            int64_t v = (int64_t)re;
            switch (dt.bits) {
                case 8: {
                    int8_t x = (int8_t)v;
                    memcpy(p, &x, 1);
                    return;
                }
                case 16: {
                    int16_t x = (int16_t)v;
                    memcpy(p, &x, 2);
                    return;
                }
                case 32: {
                    int32_t x = (int32_t)v;
                    memcpy(p, &x, 4);
                    return;
                }
                case 64: memcpy(p, &v, 8); return;
            }
            return;
        }
        case kDLUInt: {
            uint8_t x = (uint8_t)(int64_t)re;
            memcpy(p, &x, 1);
            return;
        }
        case kDLFloat:
            switch (dt.bits) {
                case 16: {
                    uint16_t x = dt_float_to_half((float)re);
                    memcpy(p, &x, 2);
                    return;
                }
                case 32: {
                    float x = (float)re;
                    memcpy(p, &x, 4);
                    return;
                }
                case 64: memcpy(p, &re, 8); return;
            }
            return;
        case kDLBfloat: {
            uint16_t x = dt_float_to_bf16((float)re);
            memcpy(p, &x, 2);
            return;
        }
        case kDLComplex:
            if (dt.bits == 64) {
                float x[2] = {(float)re, (float)im};
                memcpy(p, x, 8);
            } else {
                double x[2] = {re, im};
                memcpy(p, x, 16);
            }
            return;
    }
}

double dt_round(DLDataType dt, double v) {
    unsigned char buf[16];
    dt_elem_set(buf, dt, 0, v, 0);
    return dt_elem_get(buf, dt, 0);
}

/* ----------------------------------------------------------------- tensors */

struct dt_owned {
    DLTensor t; /* first: a DLTensor * is a struct dt_owned * */
    int64_t shape[2];
    int shared; /* t.data is from distc_mem_alloc */
};

/* DT_SHARED_MEMORY=1: every tensor's memory from distc_mem_alloc (shared with
 * the host's ranks); =even: only those of even ranks (a group whose buffers
 * are partly shared); else calloc. */
static int dt_tensor_shared(void) {
    const char *e = getenv("DT_SHARED_MEMORY");
    if (!e || !*e || !strcmp(e, "0")) return 0;
    return strcmp(e, "even") != 0 || tls_rank % 2 == 0;
}

/* DT_HUGE_PAGES=1: tensors of 1 MiB or more on 2 MiB boundaries, advised as
 * transparent huge pages (MADV_HUGEPAGE), as a host with THP "always"
 * gives large buffers; else calloc. */
static void *dt_tensor_huge(size_t bytes) {
    const char *e = getenv("DT_HUGE_PAGES");
    const size_t huge = (size_t)2 << 20, len = (bytes + huge - 1) / huge * huge;
    void *p = NULL;
    if (!e || strcmp(e, "1") != 0 || bytes < ((size_t)1 << 20)) return NULL;
    if (posix_memalign(&p, huge, len) != 0) return NULL;
    madvise(p, len, MADV_HUGEPAGE); /* advice: without THP it stays small pages */
    memset(p, 0, len);
    return p;
}

static DLTensor *dt_tensor_new(DLDataType dt, int ndim, int64_t d0, int64_t d1) {
    struct dt_owned *o = calloc(1, sizeof *o);
    o->shape[0] = d0;
    o->shape[1] = d1;
    int64_t n = ndim == 1 ? d0 : d0 * d1;
    /* At least 16 bytes: zero-element tensors still have a real data pointer. */
    const size_t bytes = (size_t)n * dt_dtype_size(dt) + 16;
    o->shared = dt_tensor_shared();
    if (o->shared) {
        if (distc_mem_alloc(&o->t.data, bytes) != 0) {
            fprintf(stderr, "distc_mem_alloc(%zu): %s\n", bytes, distc_error_last());
            abort();
        }
    } else if (!(o->t.data = dt_tensor_huge(bytes))) {
        o->t.data = calloc(1, bytes);
    }
    o->t.device.device_type = kDLCPU;
    o->t.device.device_id = 0;
    o->t.ndim = ndim;
    o->t.dtype = dt;
    o->t.shape = o->shape;
    o->t.strides = NULL;
    o->t.byte_offset = 0;
    return &o->t;
}

DLTensor *dt_tensor_1d(DLDataType dt, int64_t n) { return dt_tensor_new(dt, 1, n, 1); }
DLTensor *dt_tensor_2d(DLDataType dt, int64_t rows, int64_t cols) { return dt_tensor_new(dt, 2, rows, cols); }

void dt_tensor_free(DLTensor *t) {
    if (!t) return;
    if (((struct dt_owned *)t)->shared) {
        if (distc_mem_free(t->data) != 0) {
            fprintf(stderr, "distc_mem_free: %s\n", distc_error_last());
            abort();
        }
    } else {
        free(t->data);
    }
    free((struct dt_owned *)t);
}

int64_t dt_numel(const DLTensor *t) {
    int64_t n = 1;
    for (int i = 0; i < t->ndim; ++i) n *= t->shape[i];
    return n;
}

static void *dt_base(const DLTensor *t) { return (char *)t->data + t->byte_offset; }

double dt_get(const DLTensor *t, int64_t i) { return dt_elem_get(dt_base(t), t->dtype, i); }
double dt_get_imag(const DLTensor *t, int64_t i) { return dt_elem_get_imag(dt_base(t), t->dtype, i); }
void dt_set(DLTensor *t, int64_t i, double v) { dt_elem_set(dt_base(t), t->dtype, i, v, 0); }
void dt_set_complex(DLTensor *t, int64_t i, double re, double im) { dt_elem_set(dt_base(t), t->dtype, i, re, im); }

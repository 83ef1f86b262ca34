#include "core/reducer/powersgd.hpp"

#include <algorithm>
#include <cmath>

#include "core/util/error.hpp"
#include "core/work/continuation.hpp"

namespace distc {

namespace {

// A gradient compressed: where it lies in the bucket (elements), its shape as
// a matrix (rows = its first dimension), its rank, and where its P and Q lie.
struct Piece {
    size_t offset, rows, cols, r, p_at, q_at;
};

// X's columns replaced by the Q of its Householder QR (rows x r, row-major, rows >= r).
template <typename T>
void householder_q(T *x, size_t rows, size_t r) {
    std::vector<double> a(x, x + rows * r), v(rows), vs;  // vs: the reflectors, rows each
    for (size_t k = 0; k < r; ++k) {
        double norm = 0;
        for (size_t i = k; i < rows; ++i) norm += a[i * r + k] * a[i * r + k];
        norm = std::sqrt(norm);
        double alpha = a[k * r + k] > 0 ? -norm : norm;
        std::fill(v.begin(), v.end(), 0.0);
        for (size_t i = k; i < rows; ++i) v[i] = a[i * r + k];
        v[k] -= alpha;
        double vn = 0;
        for (size_t i = k; i < rows; ++i) vn += v[i] * v[i];
        vn = std::sqrt(vn);
        if (vn > 0)
            for (size_t i = k; i < rows; ++i) v[i] /= vn;
        for (size_t c = k; c < r; ++c) {  // A = (I - 2 v v^T) A
            double dot = 0;
            for (size_t i = k; i < rows; ++i) dot += v[i] * a[i * r + c];
            for (size_t i = k; i < rows; ++i) a[i * r + c] -= 2 * dot * v[i];
        }
        vs.insert(vs.end(), v.begin(), v.end());
    }
    // Q = H_0 ... H_{r-1} applied to the first r columns of the identity.
    std::vector<double> q(rows * r, 0.0);
    for (size_t c = 0; c < r; ++c) q[c * r + c] = 1;
    for (size_t k = r; k-- > 0;) {
        const double *vk = &vs[k * rows];
        for (size_t c = 0; c < r; ++c) {
            double dot = 0;
            for (size_t i = k; i < rows; ++i) dot += vk[i] * q[i * r + c];
            for (size_t i = k; i < rows; ++i) q[i * r + c] -= 2 * dot * vk[i];
        }
    }
    for (size_t i = 0; i < rows * r; ++i) x[i] = static_cast<T>(q[i]);
}

// Orthonormal columns for X (rows x r, row-major, rows >= r), as torch's hook:
// modified Gram-Schmidt for rank <= 2, Householder QR above (stable where the
// columns are nearly dependent, as a gradient of low rank makes P). The two
// may give a basis of the same span with other signs, which P Q^T = P P^T M
// does not see.
template <typename T>
void orthogonalize(T *x, size_t rows, size_t r, double epsilon) {
    if (r > 2) {
        householder_q(x, rows, r);
        return;
    }
    for (size_t c = 0; c < r; ++c) {
        double norm = 0;
        for (size_t i = 0; i < rows; ++i) norm += double(x[i * r + c]) * double(x[i * r + c]);
        T div = static_cast<T>(std::sqrt(norm) + epsilon);
        for (size_t i = 0; i < rows; ++i) x[i * r + c] /= div;
        for (size_t d = c + 1; d < r; ++d) {
            double dot = 0;
            for (size_t i = 0; i < rows; ++i) dot += double(x[i * r + c]) * double(x[i * r + d]);
            for (size_t i = 0; i < rows; ++i) x[i * r + d] -= static_cast<T>(dot) * x[i * r + c];
        }
    }
}

// The three products, row-major, with Q (cols x r) seen through its transpose
// (r x cols) so that every inner loop runs over a row of M, contiguously.
template <typename T>
std::vector<T> transpose(const T *q, size_t cols, size_t r) {
    std::vector<T> qt(r * cols);
    for (size_t j = 0; j < cols; ++j)
        for (size_t c = 0; c < r; ++c) qt[c * cols + j] = q[j * r + c];
    return qt;
}

// P = M Q.
template <typename T>
void mul(const T *m, const T *q, T *p, size_t rows, size_t cols, size_t r) {
    std::vector<T> qt = transpose(q, cols, r);
    for (size_t i = 0; i < rows; ++i)
        for (size_t c = 0; c < r; ++c) {
            const T *mi = m + i * cols, *qc = qt.data() + c * cols;
            T acc = 0;
            for (size_t j = 0; j < cols; ++j) acc += mi[j] * qc[j];
            p[i * r + c] = acc;
        }
}

// Q = M^T P.
template <typename T>
void mul_t(const T *m, const T *p, T *q, size_t rows, size_t cols, size_t r) {
    std::vector<T> qt(r * cols, T(0));
    for (size_t i = 0; i < rows; ++i)
        for (size_t c = 0; c < r; ++c) {
            const T *mi = m + i * cols;
            T pic = p[i * r + c], *qc = qt.data() + c * cols;
            for (size_t j = 0; j < cols; ++j) qc[j] += pic * mi[j];
        }
    for (size_t j = 0; j < cols; ++j)
        for (size_t c = 0; c < r; ++c) q[j * r + c] = qt[c * cols + j];
}

// M = P Q^T.
template <typename T>
void mul_nt(const T *p, const T *q, T *m, size_t rows, size_t cols, size_t r) {
    std::vector<T> qt = transpose(q, cols, r);
    for (size_t i = 0; i < rows; ++i) {
        T *mi = m + i * cols;
        std::fill(mi, mi + cols, T(0));
        for (size_t c = 0; c < r; ++c) {
            T pic = p[i * r + c];
            const T *qc = qt.data() + c * cols;
            for (size_t j = 0; j < cols; ++j) mi[j] += pic * qc[j];
        }
    }
}

template <typename T>
T *as(std::vector<double> &v) {
    return reinterpret_cast<T *>(v.data());
}

size_t doubles_for(size_t n, size_t elem) { return (n * elem + sizeof(double) - 1) / sizeof(double); }

}  // namespace

PowerSgd::PowerSgd(std::shared_ptr<ProcessGroup> pg, PowerSgdOptions o) : pg_(std::move(pg)), o_(o), seeds_(o.seed) {
    if (o_.rank < 1) fail(DISTC_EINVAL, "matrix_approximation_rank must be at least 1, not " + std::to_string(o_.rank));
    if (!(o_.min_compression_rate >= 0)) fail(DISTC_EINVAL, "min_compression_rate must be >= 0");
    if (!(o_.epsilon >= 0)) fail(DISTC_EINVAL, "orthogonalization_epsilon must be >= 0");
    if ((o_.error_feedback || o_.warm_start) && o_.start_iter < 2)
        fail(DISTC_EINVAL,
             "start_powersgd_iter must be at least 2 with error feedback or warm start: buckets are rebuilt after "
             "the first iteration, and what they remember would no longer fit");
}

PowerSgdStats PowerSgd::stats() const {
    std::lock_guard<std::mutex> lk(mu_);
    return stats_;
}

void PowerSgd::count(uint64_t before, uint64_t after, bool last) {
    std::lock_guard<std::mutex> lk(mu_);
    stats_.before += before;
    stats_.after += after;
    if (last) ++stats_.iter;
}

std::shared_ptr<Work> PowerSgd::reduce(const Reducer::HookBucket &b) {
    if (!host_memory(b.buffer.device_type))
        fail(DISTC_ENOTSUP, "PowerSGD compresses buckets on the host, and this bucket is device memory");
    int64_t iter = stats().iter;
    bool floating = b.buffer.dtype == DType::Float32 || b.buffer.dtype == DType::Float64;
    if (iter < o_.start_iter || !floating) {
        count(0, 0, b.is_last);  // a plain iteration counts at once (as torch's)
        return pg_->allreduce(b.buffer, ReduceOp::Avg, OpOptions{}, true);
    }
    return b.buffer.dtype == DType::Float32 ? compress<float>(b) : compress<double>(b);
}

template <typename T>
std::shared_ptr<Work> PowerSgd::compress(const Reducer::HookBucket &b) {
    const DType dt = b.buffer.dtype;
    T *buf = static_cast<T *>(b.buffer.data);
    const size_t total = b.buffer.numel;
    Memory &mem = memory_[b.index];  // a map's elements stay where they are
    // This iteration's pieces, scratch and copies, shared by the steps of the chain.
    struct Step {
        std::shared_ptr<PowerSgd> self;
        Memory *mem;
        T *buf;
        size_t total;
        bool last;
        std::vector<Piece> pieces;
        std::vector<std::pair<size_t, size_t>> plain;  // (offset, numel) of what travels as it is
        std::vector<T> plain_buf, before;
    };
    auto s = std::make_shared<Step>();
    s->self = shared_from_this();
    s->mem = &mem;
    s->buf = buf;
    s->total = total;
    s->last = b.is_last;
    if (o_.error_feedback) {
        if (mem.error.size() == doubles_for(total, sizeof(T))) {
            const T *e = as<T>(mem.error);
            for (size_t i = 0; i < total; ++i) buf[i] += e[i];
        } else {
            mem.error.assign(doubles_for(total, sizeof(T)), 0.0);
        }
        s->before.assign(buf, buf + total);
    }
    uint64_t before = 0, after = 0;
    size_t p_size = 0, q_size = 0;
    for (size_t k = 0; k < b.grads.size(); ++k) {
        size_t numel = (k + 1 < b.grads.size() ? b.offsets[k + 1] : total) - b.offsets[k];
        size_t rows = b.rows[k] ? b.rows[k] : 1, cols = numel / rows;
        size_t r = std::min({rows, cols, static_cast<size_t>(o_.rank)});
        before += numel;
        if (numel && double(rows + cols) * double(r) * o_.min_compression_rate < double(rows * cols)) {
            s->pieces.push_back(Piece{b.offsets[k], rows, cols, r, p_size, q_size});
            p_size += rows * r;
            q_size += cols * r;
            after += (rows + cols) * r;
        } else {
            s->plain.emplace_back(b.offsets[k], numel);
            after += numel;
        }
    }
    count(before, after, false);
    bool fresh = !o_.warm_start || mem.p.size() != doubles_for(p_size, sizeof(T)) ||
                 mem.q.size() != doubles_for(q_size, sizeof(T));
    if (fresh) {
        mem.p.assign(doubles_for(p_size, sizeof(T)), 0.0);
        mem.q.assign(doubles_for(q_size, sizeof(T)), 0.0);
        std::mt19937_64 gen(seeds_());
        std::normal_distribution<double> normal;
        T *q = as<T>(mem.q);
        for (size_t i = 0; i < q_size; ++i) q[i] = static_cast<T>(normal(gen));
    }
    T *p = as<T>(mem.p), *q = as<T>(mem.q);
    for (const Piece &pc : s->pieces) {
        orthogonalize(q + pc.q_at, pc.cols, pc.r, o_.epsilon);
        const T *m = buf + pc.offset;  // rows x cols
        mul(m, q + pc.q_at, p + pc.p_at, pc.rows, pc.cols, pc.r);
    }
    for (auto &[off, n] : s->plain) s->plain_buf.insert(s->plain_buf.end(), buf + off, buf + off + n);
    const int size = pg_->size();
    auto plain =
        pg_->allreduce(flat_tensor(s->plain_buf.data(), dt, s->plain_buf.size()), ReduceOp::Sum, OpOptions{}, true);
    const double eps = o_.epsilon;
    // Each step checks the one before: a failed sum fails the chain with its message.
    auto ok = [](Work &w) {
        if (w.status() != 0) fail(w.status(), w.message());
    };
    auto ps = then(
        *plain,
        [s, size, dt, ok, p_size](Work &w) {
            ok(w);
            size_t at = 0;
            for (auto &[off, n] : s->plain)
                for (size_t i = 0; i < n; ++i) s->buf[off + i] = s->plain_buf[at++] / static_cast<T>(size);
            return s->self->pg_->allreduce(flat_tensor(as<T>(s->mem->p), dt, p_size), ReduceOp::Sum, OpOptions{}, true);
        },
        "PowerSGD's uncompressed part");
    auto qs = then(
        *ps,
        [s, dt, eps, ok, q_size](Work &w) {
            ok(w);
            T *p = as<T>(s->mem->p), *q = as<T>(s->mem->q);
            for (const Piece &pc : s->pieces) {
                orthogonalize(p + pc.p_at, pc.rows, pc.r, eps);
                mul_t(s->buf + pc.offset, p + pc.p_at, q + pc.q_at, pc.rows, pc.cols, pc.r);
            }
            return s->self->pg_->allreduce(flat_tensor(q, dt, q_size), ReduceOp::Sum, OpOptions{}, true);
        },
        "PowerSGD's P");
    return then(
        *qs,
        [s, size, q_size, ok](Work &w) -> std::shared_ptr<Work> {
            ok(w);
            T *p = as<T>(s->mem->p), *q = as<T>(s->mem->q);
            for (size_t i = 0; i < q_size; ++i) q[i] /= static_cast<T>(size);
            for (const Piece &pc : s->pieces)
                mul_nt(p + pc.p_at, q + pc.q_at, s->buf + pc.offset, pc.rows, pc.cols, pc.r);
            const PowerSgdOptions &o = s->self->o_;
            if (o.error_feedback) {
                T *e = as<T>(s->mem->error);
                for (size_t i = 0; i < s->total; ++i) e[i] = s->before[i] - s->buf[i];
            }
            if (!o.warm_start) {
                s->mem->p.clear();
                s->mem->q.clear();
            }
            s->self->count(0, 0, s->last);
            return nullptr;
        },
        "PowerSGD's Q");
}

}  // namespace distc

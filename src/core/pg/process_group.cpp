#include "core/pg/process_group.hpp"

#include <cstdlib>
#include <cstring>
#include <utility>
#include <vector>

#include "core/util/error.hpp"

namespace distc {

namespace {

// split_digest (call.hpp) of this rank's all-to-all, `bytes(p)` giving what it sends p and takes from p.
template <typename F>
uint64_t digest_by_peer(int rank, int size, F &&bytes) {
    std::vector<size_t> in_bytes, out_bytes;
    for (size_t p = 0; p < static_cast<size_t>(size); ++p) {
        auto b = bytes(p);
        in_bytes.push_back(b.first);
        out_bytes.push_back(b.second);
    }
    return split_digest(rank, in_bytes, out_bytes);
}

// Each tensor was checked on its own (under 2^48 bytes, so the sum cannot
// wrap); the sum of a list, all of one dtype, is checked here.
size_t total_numel(const Tensor *ts, size_t n) {
    if (n == 1) return ts[0].numel;
    size_t total = 0;
    for (size_t i = 0; i < n; ++i) checked_add(total, ts[i].numel, "the tensors together");
    if (n) checked_mul(total, dtype_size(ts[0].dtype), "the tensors together");
    return total;
}
OpLabel list_label(const Tensor *ts, size_t n) {
    OpLabel l;
    l.form = OpLabel::Form::List;
    l.n = n;
    if (n) {
        l.dtype = dtype_name(ts[0].dtype);
        l.numel = ts[0].numel;
    }
    return l;
}

OpLabel list_label(TensorSpan ts) { return list_label(ts.data(), ts.size()); }

OpLabel tensor_label(const Tensor &t, OpLabel::Form form = OpLabel::Form::Tensor, int peer = -1, int tag = 0) {
    OpLabel l;
    l.form = form;
    l.dtype = dtype_name(t.dtype);
    l.numel = t.numel;
    l.peer = peer;
    l.tag = tag;
    return l;
}

}  // namespace

int ProcessGroup::global_rank(int group_rank) const {
    if (group_rank < 0 || group_rank >= size_) return -1;
    return global_ranks_.empty() ? group_rank : global_ranks_[static_cast<size_t>(group_rank)];
}

int ProcessGroup::group_rank(int global_rank) const {
    if (global_ranks_.empty()) return global_rank >= 0 && global_rank < size_ ? global_rank : -1;
    for (size_t i = 0; i < global_ranks_.size(); ++i)
        if (global_ranks_[i] == global_rank) return static_cast<int>(i);
    return -1;
}

void ProcessGroup::check_rank(int r, const char *what) const {
    if (r < 0 || r >= size_)
        fail(DISTC_EINVAL, std::string(what) + " " + std::to_string(r) + " is outside 0.." + std::to_string(size_ - 1));
}

void ProcessGroup::check_reduce(const Tensor &t, ReduceOp op) const {
    if (op == ReduceOp::Sum) return;  // defined on every dtype
    if (const char *why = reduce_op_unsupported(t.dtype, op)) fail_with(DISTC_EINVAL, [why] { return why; });
}

namespace {
void same_dtype(const Tensor *ts, size_t n, DType dt, const char *name) {
    for (size_t i = 0; i < n; ++i)
        if (ts[i].dtype != dt)
            fail_with(DISTC_EINVAL, [&] {
                return std::string(name) + "[" + std::to_string(i) + "] is " + dtype_name(ts[i].dtype) + ", expected " +
                       dtype_name(dt);
            });
}
void same_dtype(TensorSpan ts, DType dt, const char *name) { same_dtype(ts.data(), ts.size(), dt, name); }
void same_numel(TensorSpan ts, size_t n, const char *name) {
    for (size_t i = 0; i < ts.size(); ++i)
        if (ts[i].numel != n)
            fail(DISTC_EINVAL, std::string(name) + "[" + std::to_string(i) + "] has " + std::to_string(ts[i].numel) +
                                   " elements, expected " + std::to_string(n));
}
}  // namespace

ProcessGroup::OpInfo ProcessGroup::allreduce_info(const Tensor *ts, size_t n, ReduceOp op) const {
    if (n == 0) fail(DISTC_EINVAL, "no tensors");
    if (n > 1) same_dtype(ts, n, ts[0].dtype, "tensors");
    check_reduce(ts[0], op);
    return OpInfo{"allreduce", list_label(ts, n), int(ts[0].dtype), total_numel(ts, n), -1, int(op)};
}

ProcessGroup::WorkPtr ProcessGroup::allreduce(const Tensor &t, ReduceOp op, const OpOptions &o, bool async) {
    // The common call, without a list to allocate.
    OpInfo info = allreduce_info(&t, 1, op);
    return launch(info, o, async, [&](const WorkPtr &w, const AsyncArgs &a) { backend_->allreduce(w, &t, 1, op, a); });
}

ProcessGroup::WorkPtr ProcessGroup::allreduce(TensorSpan ts, ReduceOp op, const OpOptions &o, bool async) {
    OpInfo info = allreduce_info(ts.data(), ts.size(), op);
    return launch(info, o, async,
                  [&](const WorkPtr &w, const AsyncArgs &a) { backend_->allreduce(w, ts.data(), ts.size(), op, a); });
}

ProcessGroup::WorkPtr ProcessGroup::broadcast(Tensor t, int root, const OpOptions &o, bool async) {
    check_rank(root, "root");
    OpInfo info{"broadcast", tensor_label(t), int(t.dtype), t.numel, root};
    return launch(info, o, async, [&](const WorkPtr &w, const AsyncArgs &a) { backend_->broadcast(w, t, root, a); });
}

ProcessGroup::WorkPtr ProcessGroup::reduce(Tensor t, int root, ReduceOp op, const OpOptions &o, bool async) {
    check_rank(root, "root");
    check_reduce(t, op);
    OpInfo info{"reduce", tensor_label(t), int(t.dtype), t.numel, root, int(op)};
    return launch(info, o, async, [&](const WorkPtr &w, const AsyncArgs &a) { backend_->reduce(w, t, root, op, a); });
}

ProcessGroup::WorkPtr ProcessGroup::allgather(Tensor input, TensorSpan outputs, const OpOptions &o, bool async) {
    if (outputs.size() != static_cast<size_t>(size_))
        fail(DISTC_EINVAL, "outputs has " + std::to_string(outputs.size()) + " tensors, expected the group size " +
                               std::to_string(size_));
    same_dtype(outputs, input.dtype, "outputs");
    same_numel(outputs, input.numel, "outputs");
    OpInfo info{"allgather", tensor_label(input), int(input.dtype), input.numel};
    return launch(info, o, async,
                  [&](const WorkPtr &w, const AsyncArgs &a) { backend_->allgather(w, outputs, input, a); });
}

ProcessGroup::WorkPtr ProcessGroup::gather(Tensor input, TensorSpan outputs, int root, const OpOptions &o, bool async) {
    check_rank(root, "root");
    if (rank_ == root) {
        if (outputs.size() != static_cast<size_t>(size_))
            fail(DISTC_EINVAL, "outputs has " + std::to_string(outputs.size()) +
                                   " tensors on the root, expected the group size " + std::to_string(size_));
        same_dtype(outputs, input.dtype, "outputs");
        same_numel(outputs, input.numel, "outputs");
    }
    OpInfo info{"gather", tensor_label(input), int(input.dtype), input.numel, root};
    return launch(info, o, async,
                  [&](const WorkPtr &w, const AsyncArgs &a) { backend_->gather(w, outputs, input, root, a); });
}

ProcessGroup::WorkPtr ProcessGroup::scatter(TensorSpan inputs, Tensor output, int root, const OpOptions &o,
                                            bool async) {
    check_rank(root, "root");
    if (rank_ == root) {
        if (inputs.size() != static_cast<size_t>(size_))
            fail(DISTC_EINVAL, "inputs has " + std::to_string(inputs.size()) +
                                   " tensors on the root, expected the group size " + std::to_string(size_));
        same_dtype(inputs, output.dtype, "inputs");
        same_numel(inputs, output.numel, "inputs");
    }
    OpInfo info{"scatter", tensor_label(output), int(output.dtype), output.numel, root};
    return launch(info, o, async,
                  [&](const WorkPtr &w, const AsyncArgs &a) { backend_->scatter(w, output, inputs, root, a); });
}

ProcessGroup::WorkPtr ProcessGroup::reduce_scatter(TensorSpan inputs, Tensor output, ReduceOp op, const OpOptions &o,
                                                   bool async) {
    if (inputs.size() != static_cast<size_t>(size_))
        fail(DISTC_EINVAL, "inputs has " + std::to_string(inputs.size()) + " tensors, expected the group size " +
                               std::to_string(size_));
    same_dtype(inputs, output.dtype, "inputs");
    same_numel(inputs, output.numel, "inputs");
    check_reduce(output, op);
    OpInfo info{"reduce_scatter", tensor_label(output), int(output.dtype), output.numel, -1, int(op)};
    return launch(info, o, async,
                  [&](const WorkPtr &w, const AsyncArgs &a) { backend_->reduce_scatter(w, output, inputs, op, a); });
}

ProcessGroup::WorkPtr ProcessGroup::alltoall(TensorSpan inputs, TensorSpan outputs, const OpOptions &o, bool async) {
    if (inputs.size() != static_cast<size_t>(size_) || outputs.size() != static_cast<size_t>(size_))
        fail(DISTC_EINVAL, "inputs and outputs must each hold the group size (" + std::to_string(size_) +
                               ") tensors, got " + std::to_string(inputs.size()) + " and " +
                               std::to_string(outputs.size()));
    same_dtype(inputs, inputs[0].dtype, "inputs");
    same_dtype(outputs, inputs[0].dtype, "outputs");
    if (outputs[rank_].numel != inputs[rank_].numel)
        fail(DISTC_EINVAL, "outputs[" + std::to_string(rank_) + "] and inputs[" + std::to_string(rank_) +
                               "] (this rank's own part) differ in size");
    OpInfo info{"alltoall", list_label(inputs), int(inputs[0].dtype)};
    if (check_)
        info.digest = digest_by_peer(rank_, size_,
                                     [&](size_t p) { return std::make_pair(inputs[p].nbytes(), outputs[p].nbytes()); });
    return launch(info, o, async,
                  [&](const WorkPtr &w, const AsyncArgs &a) { backend_->alltoall(w, outputs, inputs, a); });
}

ProcessGroup::WorkPtr ProcessGroup::alltoall_single(Tensor input, Tensor output, std::vector<int64_t> in_splits,
                                                    std::vector<int64_t> out_splits, const OpOptions &o, bool async) {
    if (input.dtype != output.dtype)
        fail(DISTC_EINVAL,
             std::string("output is ") + dtype_name(output.dtype) + " but input is " + dtype_name(input.dtype));
    if (input.dim0 > 0 && output.dim0 > 0 && input.row_numel() != output.row_numel())
        fail(DISTC_EINVAL, "input and output rows differ in size (" + std::to_string(input.row_numel()) + " vs " +
                               std::to_string(output.row_numel()) + " elements)");
    // Per peer, in elements: inline for groups of up to 16 (no allocation).
    using Counts = InlineList<size_t, 16>;
    auto counts = [&](const Tensor &t, std::vector<int64_t> &splits, const char *name) -> Counts {
        size_t row = t.row_numel();
        if (splits.empty()) {  // even splits: the counts straight away, no list of splits to make
            if (t.dim0 % size_ != 0)
                fail(DISTC_EINVAL, std::string(name) + "'s first dimension (" + std::to_string(t.dim0) +
                                       ") does not divide by the group size " + std::to_string(size_) +
                                       "; pass split sizes");
            Counts c(static_cast<size_t>(size_));
            for (size_t i = 0; i < static_cast<size_t>(size_); ++i) c.set(i, static_cast<size_t>(t.dim0 / size_) * row);
            return c;
        }
        if (splits.size() != static_cast<size_t>(size_))
            fail(DISTC_EINVAL, std::string(name) + "_splits has " + std::to_string(splits.size()) +
                                   " entries, expected " + std::to_string(size_));
        for (size_t i = 0; i < splits.size(); ++i)
            if (splits[i] < 0) fail(DISTC_EINVAL, std::string(name) + "_splits[" + std::to_string(i) + "] is negative");
        int64_t sum = 0;
        for (size_t i = 0; i < splits.size(); ++i) {
            if (splits[i] > t.dim0 - sum)  // also keeps the sum from overflowing
                fail(DISTC_EINVAL, std::string(name) + "_splits add up to more than the first dimension (" +
                                       std::to_string(t.dim0) + ")");
            sum += splits[i];
        }
        if (sum != t.dim0)
            fail(DISTC_EINVAL, std::string(name) + "_splits add up to " + std::to_string(sum) +
                                   " but the first dimension is " + std::to_string(t.dim0));
        Counts c(splits.size());
        for (size_t i = 0; i < splits.size(); ++i) c.set(i, static_cast<size_t>(splits[i]) * row);
        return c;
    };
    const auto ic = counts(input, in_splits, "input");
    const auto oc = counts(output, out_splits, "output");
    if (ic.span()[rank_] != oc.span()[rank_])
        fail(DISTC_EINVAL, "input_splits[" + std::to_string(rank_) + "] and output_splits[" + std::to_string(rank_) +
                               "] (this rank's own part) differ");
    OpInfo info{"alltoall_single", tensor_label(input), int(input.dtype), input.numel};
    if (check_) {
        const size_t esz = dtype_size(input.dtype);
        info.digest = digest_by_peer(rank_, size_,
                                     [&](size_t p) { return std::make_pair(ic.span()[p] * esz, oc.span()[p] * esz); });
    }
    return launch(info, o, async, [&](const WorkPtr &w, const AsyncArgs &a) {
        backend_->alltoall_single(w, output, input, oc, ic, a);
    });
}

ProcessGroup::WorkPtr ProcessGroup::barrier(const OpOptions &o, bool async) {
    OpInfo info{"barrier", {}};
    return launch(info, o, async, [&](const WorkPtr &w, const AsyncArgs &a) { backend_->barrier(w, a); });
}

ProcessGroup::WorkPtr ProcessGroup::send(Tensor t, int dst, int tag, const OpOptions &o, bool async) {
    check_rank(dst, "dst");
    if (dst == rank_) fail(DISTC_EINVAL, "dst is this rank (" + std::to_string(rank_) + ")");
    if (tag < 0) fail(DISTC_EINVAL, "tag is negative (" + std::to_string(tag) + ")");
    OpInfo info{"send", tensor_label(t, OpLabel::Form::Send, dst, tag)};
    info.p2p = true;
    return launch(info, o, async, [&](const WorkPtr &w, const AsyncArgs &a) { backend_->send(w, t, dst, tag, a); });
}

ProcessGroup::WorkPtr ProcessGroup::recv(Tensor t, int src, int tag, const OpOptions &o, bool async) {
    if (src != -1) {
        check_rank(src, "src");
        if (src == rank_) fail(DISTC_EINVAL, "src is this rank (" + std::to_string(rank_) + ")");
    }
    if (tag < 0) fail(DISTC_EINVAL, "tag is negative (" + std::to_string(tag) + ")");
    if (src == -1 && size_ == 1) fail(DISTC_EINVAL, "src is any rank (-1), but this group has no other rank to send");
    OpInfo info{"recv", tensor_label(t, OpLabel::Form::Recv, src, tag)};
    info.p2p = true;
    return launch(info, o, async, [&](const WorkPtr &w, const AsyncArgs &a) { backend_->recv(w, t, src, tag, a); });
}

}  // namespace distc

// DLPack tensors and the C enums, checked and turned into core types.
#pragma once

#include <dlpack/dlpack.h>

#include <vector>

#include "capi/args.hpp"
#include "core/pg/process_group.hpp"
#include "core/pg/tensor.hpp"
#include "core/util/fn_ref.hpp"
#include "distc/pg.h"

namespace distc::capi {

// Throws DISTC_EINVAL naming `name` for a NULL, non-contiguous or
// unsupported-dtype tensor, or one in memory the group's backend does not take.
Tensor tensor_arg(const ProcessGroup &g, const DLTensor *t, const char *name);
// The same, its name built only for an error ("ops[3].tensor").
Tensor tensor_arg(const ProcessGroup &g, const DLTensor *t, FnRef<std::string()> name);
// The tensors of a list argument: inline up to 16 of them, so that a
// collective's call allocates nothing for a group of that size or less.
using TensorList = InlineList<Tensor, 16>;

// `n` tensors from an array; the array and every entry must be non-NULL.
// `name` becomes a string only for an error: a call that passes builds none.
TensorList tensor_list_arg(const ProcessGroup &g, const DLTensor *const *ts, size_t n, const char *name);
// A tensor whose sizes and dtype are planned with (buckets) but whose data is
// not read: any device, the same checks otherwise (NULL data is refused too).
Tensor described_tensor_arg(const DLTensor *t, const char *name);
[[noreturn, gnu::cold]] void fail_reduce_op(int op);
// By reference: the caller's value is range-checked as an int before it is read as the enum.
inline ReduceOp reduce_op_arg(const distc_reduce_op &given) {
    int op = enum_value(given);
    if (op < DISTC_SUM || op > DISTC_PREMUL_SUM) fail_reduce_op(op);
    return static_cast<ReduceOp>(op);
}
// The DLPack dtype of a core dtype (the inverse of what tensor_arg reads).
DLDataType dl_dtype(DType t);

}  // namespace distc::capi

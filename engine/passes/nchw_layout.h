// NNAPI ops may take NCHW tensors (their optional "layout" input set to true, as
// PyTorch's NNAPI converter emits for contiguous inputs); the IR and its kernels are NHWC.
// These rewrite such an op into TRANSPOSE(to NHWC) -> the op with layout false ->
// TRANSPOSE(back to NCHW), so every delegate runs it, and then drop the transpose pairs
// that cancel between consecutive NCHW ops.
#pragma once

#include <vector>

#include "nn/ir/model.h"

namespace nn {

// The ops that replace `op` (just `op` when it is not NCHW). New operands (the NHWC
// tensors, a false layout scalar, the permutations) are appended to `model`; their dims
// are left for shape inference.
std::vector<Operation> nhwc_ops_for(Model& model, const Operation& op);

// Every NCHW op rewritten, then cancelling transpose pairs removed. Returns how many ops
// were rewritten. The model must be in topological order; shapes are inferred after.
size_t rewrite_nchw_layout(Model& model);

}  // namespace nn

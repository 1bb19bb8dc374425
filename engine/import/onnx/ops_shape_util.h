// Axis and slicing helpers shared by the ONNX shape translators (ops_shape.cpp), the
// reductions and Softmax (ops_reduce.cpp) and constant folding (fold_constant.cpp).
#pragma once

#include "import/onnx/converter.h"

namespace nn::onnx_import {

constexpr int32_t kInt64 = 7, kFloat = 1, kBool = 9;  // ONNX TensorProto data types

Status normalize_axis(Converter& c, int64_t axis, size_t rank, int64_t* out);
// The IR axis that holds ONNX axis `axis` in layout `perm`.
int ir_axis(const Perm& perm, int64_t axis);
std::vector<int64_t> ints_of(const HostTensor& h);
// Axes from the attribute (older opsets) or input `input_index` (newer), or none.
Result<std::vector<int64_t>> axes_param(Converter& c, size_t input_index, bool* present);

struct AxisSlice {
  int64_t begin = 0, end = 0, step = 1, len = 0;
};

// A Slice node's starts/ends/axes/steps (attributes before opset 10, inputs after) on `dims`.
Result<std::vector<AxisSlice>> read_slice(Converter& c, const Shape& dims);

// ReduceXxx, ArgMax/ArgMin, Softmax/LogSoftmax (ops_reduce.cpp); called by
// register_shape_translators.
void register_reduce_translators(std::unordered_map<std::string, Translator>& t);

}  // namespace nn::onnx_import

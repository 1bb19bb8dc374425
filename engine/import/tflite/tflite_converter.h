// The graph converter shared by tflite_importer.cpp (tensors, graph, metadata) and
// tflite_ops.cpp (one handler per TFLite operator). Private to the importer.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <optional>
#include <string>
#include <vector>

#include "import/tflite/tflite_schema_generated.h"
#include "nn/ir/model.h"
#include "nn/status.h"

namespace nn::tflite_import {

// The dense bytes of a sparse constant of `dims` (elements of element_bytes each), or why not.
Result<std::vector<uint8_t>> densify_tensor(const tflite::SparsityParameters& sparsity, const Dims& dims,
                                            size_t element_bytes, std::span<const uint8_t> values);

class Converter {
 public:
  Converter(const tflite::Model& fb, const tflite::SubGraph& graph, Model& model)
      : fb_(fb), graph_(graph), m_(model), map_(graph.tensors() ? graph.tensors()->size() : 0, -1) {}

  // Maps the subgraph's inputs, every operator, then the outputs.
  Status convert();
  // After validate_and_infer_shapes(): every mapped tensor's inferred dims must equal the
  // shape the file declares.
  Status check_declared_shapes() const;

 private:
  // ---- tensors (tflite_importer.cpp) ----
  size_t num_tensors() const { return map_.size(); }
  Status check_tensor_index(int32_t t) const;
  const tflite::Tensor& tensor(int32_t t) const { return *graph_.tensors()->Get(static_cast<uint32_t>(t)); }
  std::string tensor_label(int32_t t) const;  // "tensor 12 'conv2d'"
  Result<Dims> tensor_dims(int32_t t) const;
  // The buffer's bytes when the tensor is a constant, nullopt otherwise.
  Result<std::optional<std::span<const uint8_t>>> constant_bytes(int32_t t) const;
  bool is_constant(int32_t t) const;
  // The operand for a tensor that an op reads (created on first use).
  Result<uint32_t> operand(int32_t t);
  // A fresh operand for a tensor an op writes.
  Result<uint32_t> output_operand(int32_t t);
  // Values of a constant integer tensor (INT32 or INT64 within int32 range).
  Result<std::vector<int32_t>> const_ints(int32_t t, const char* what) const;
  Result<float> const_float_scalar(int32_t t, const char* what) const;
  // Folds DEQUANTIZE of a constant into a float32 constant; false if the input is not constant.
  Result<bool> try_fold_dequantize(int32_t in, int32_t out);
  // Folds DENSIFY of a sparse constant into dense bytes (tflite_densify.cpp) that
  // constant_bytes() then serves for `out`; false if the input is not a sparse constant.
  Result<bool> try_fold_densify(int32_t in, int32_t out);
  Result<OperandType> ir_type(int32_t t) const;

  // ---- ops (tflite_ops.cpp) ----
  Status convert_op(const tflite::Operator& op);
  Status convert_builtin(int32_t code, const tflite::Operator& op);
  Status convert_custom(const std::string& name, const tflite::Operator& op);

  // Input i of the current op: its tensor index, or -1 when absent/omitted.
  int32_t in(size_t i) const;
  int32_t out(size_t i) const;
  size_t num_in() const { return cur_->inputs() ? cur_->inputs()->size() : 0; }
  size_t num_out() const { return cur_->outputs() ? cur_->outputs()->size() : 0; }
  Status expect_io(size_t min_in, size_t max_in, size_t outs) const;
  Result<uint32_t> in_operand(size_t i, const char* what);

  // A TFLite fused activation as an IR FuseCode, plus the op to append when the IR op
  // cannot fuse it (TANH, or ops without a fuse input).
  struct Activation {
    int32_t fuse = 0;
    std::optional<OperationType> post;
  };
  Result<Activation> activation(tflite::ActivationFunctionType act, bool op_takes_fuse) const;
  // Adds the operation writing out_tensors; with post, op writes a temporary and post
  // (a unary activation) writes out_tensors[0].
  Status emit(OperationType type, std::vector<uint32_t> inputs, std::vector<int32_t> out_tensors,
              std::optional<OperationType> post = std::nullopt);
  Status unary(OperationType type);
  Status binary(OperationType type);                                            // a, b
  Status binary_fused(OperationType type, tflite::ActivationFunctionType act);  // a, b, fuse
  Status conv2d(const tflite::Conv2DOptions* o);
  Status depthwise_conv2d(const tflite::DepthwiseConv2DOptions* o);
  Status pool2d(OperationType type, const tflite::Pool2DOptions* o);
  Status transpose_conv(const tflite::TransposeConvOptions* o);
  Status transpose_conv_bias_custom();
  Status fully_connected(const tflite::FullyConnectedOptions* o);
  Status resize(OperationType type, bool align_corners, bool half_pixel_centers);
  Status reduce(OperationType type, const tflite::ReducerOptions* o);
  Status reshape(const tflite::ReshapeOptions* o);
  Status concatenation(const tflite::ConcatenationOptions* o);
  Status strided_slice(const tflite::StridedSliceOptions* o);
  Status unpack(const tflite::UnpackOptions* o);
  Result<uint32_t> zero_bias(int32_t filter_tensor, uint32_t channels_dim, const char* what);
  Result<int32_t> axis_scalar(int32_t t, const char* what) const;
  // A TEMPORARY operand with the type, dims and quantization of `like`.
  uint32_t temp_like(uint32_t like, const std::string& suffix);

  const tflite::Model& fb_;
  const tflite::SubGraph& graph_;
  Model& m_;
  std::vector<int64_t> map_;  // tflite tensor index -> operand index, -1 when unmapped
  // Operands whose dims the IR infers, with the tensor that declares them.
  std::vector<std::pair<uint32_t, int32_t>> declared_;
  const tflite::Operator* cur_ = nullptr;
  bool refused_by_name_ = false;
  std::map<int32_t, std::vector<uint8_t>> densified_;  // DENSIFY outputs: tensor -> dense bytes  // the op's error already says "builtin X (code N) ..."
};

}  // namespace nn::tflite_import

// Every IR operation has one OpDef: its validation + shape inference and its plain C++
// reference kernel (the correctness oracle and the fallback of every delegate).
// Families live in engine/ops/<family>.cpp and register themselves in registry.cpp.
#pragma once

#include <span>

#include "nn/ir/model.h"
#include "nn/ops/requantization.h"
#include "nn/status.h"

namespace nn {

// A view of one operation's operand buffers while it runs.
struct OpContext {
  const Model& model;
  const Operation& op;
  std::span<const void* const> input_data;  // like op.inputs; constants point into the model;
                                            // nullptr for NO_VALUE
  std::span<void* const> output_data;       // like op.outputs
  // How quant8 kernels round their rescale (SessionOptions::requantization).
  Requantization requantization = Requantization::kNnapi;
  // Operand descriptions, valid for this run (dims already inferred).
  const Operand& input(size_t i) const { return model.operands[op.inputs[i]]; }
  const Operand& output(size_t i) const { return model.operands[op.outputs[i]]; }
  size_t num_inputs() const { return op.inputs.size(); }
  bool has_input(size_t i) const { return i < op.inputs.size() && model.has_value(op.inputs[i]); }
  int32_t i32(size_t i) const { return model.scalar_i32(op.inputs[i]); }
  float f32(size_t i) const { return model.scalar_f32(op.inputs[i]); }
  bool boolean(size_t i) const { return model.scalar_bool(op.inputs[i]); }
  template <typename T>
  const T* in(size_t i) const { return static_cast<const T*>(input_data[i]); }
  template <typename T>
  T* out(size_t i) const { return static_cast<T*>(output_data[i]); }
};

struct OpDef {
  OperationType type;
  // Checks operand count, types, ranks and scalar parameters; sets the output operands'
  // dims (and type/quant params) in model.operands. Messages name the problem, e.g.
  // "input 1 (filter) must be rank 4, got [3,3,8]"; the caller prefixes "op N TYPE: ".
  Status (*prepare)(Model& model, const Operation& op);
  // Computes the outputs from the inputs. Called only after a successful prepare.
  Status (*reference)(const OpContext& ctx);
};

class OpRegistry {
 public:
  static const OpRegistry& instance();
  const OpDef* find(OperationType type) const;  // nullptr if no op of that type exists
  void add(const OpDef& def);
  std::span<const OpDef> all() const { return defs_; }

 private:
  std::vector<OpDef> defs_;
};

// Runs a whole (validated) model with the reference kernels. inputs/outputs are raw
// buffers in model.inputs / model.outputs order, sized by Operand::byte_size().
Status run_reference(const Model& model, std::span<const void* const> inputs,
                     std::span<void* const> outputs, Requantization requantization = Requantization::kNnapi);

// Applies a fused activation (NNAPI FuseCode) in place.
void apply_fused_activation(int32_t fuse_code, float* data, size_t count);

// Family registration functions, called once by OpRegistry::instance().
void register_conv_ops(OpRegistry& r);         // CONV_2D, DEPTHWISE_CONV_2D, GROUPED_CONV_2D, TRANSPOSE_CONV_2D
void register_pool_ops(OpRegistry& r);         // AVERAGE_POOL_2D, MAX_POOL_2D
void register_dense_ops(OpRegistry& r);        // FULLY_CONNECTED, BATCH_MATMUL
void register_elementwise_ops(OpRegistry& r);  // ADD, SUB, MUL, DIV, MAXIMUM, MINIMUM, POW, PRELU, comparisons, logical, SELECT
void register_unary_ops(OpRegistry& r);        // RELU*, LOGISTIC, TANH, HARD_SWISH, ELU, ABS, EXP, LOG, NEG, SQRT, RSQRT, SIN, FLOOR, NNPIPE_CEIL, NNPIPE_ERF, CAST, DEQUANTIZE, QUANTIZE
void register_shape_ops(OpRegistry& r);        // RESHAPE, SQUEEZE, EXPAND_DIMS, TRANSPOSE, CONCATENATION, SPLIT, SLICE, STRIDED_SLICE, PAD, PAD_V2, MIRROR_PAD, TILE, GATHER, CHANNEL_SHUFFLE, DEPTH_TO_SPACE, SPACE_TO_DEPTH, PACK, REVERSE
void register_reduce_ops(OpRegistry& r);       // MEAN, REDUCE_*, ARGMAX, ARGMIN, SOFTMAX, LOG_SOFTMAX, L2_NORMALIZATION, INSTANCE_NORMALIZATION, LOCAL_RESPONSE_NORMALIZATION
void register_resize_ops(OpRegistry& r);       // RESIZE_BILINEAR, RESIZE_NEAREST_NEIGHBOR
void register_recurrent_ops(OpRegistry& r);    // NNPIPE_GRU

}  // namespace nn

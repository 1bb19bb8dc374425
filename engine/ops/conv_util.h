// Helpers for the spatial op families (conv, pool, dense, resize): reading their scalar
// parameters with messages that name the input, NNAPI's padding arithmetic, and a float
// view of quantized tensors (these reference kernels dequantize, compute in float and
// requantize). Generic checks (counts, ranks, types) live in ops/tensor_util.h.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "nn/ir/model.h"
#include "nn/status.h"

namespace nn::conv_util {

// The value of a constant INT32 / BOOL / FLOAT32 scalar input, or an error naming it.
Result<int32_t> read_i32(const Model& model, const Operation& op, size_t index, const char* name);
Result<bool> read_bool(const Model& model, const Operation& op, size_t index, const char* name);
Result<float> read_f32(const Model& model, const Operation& op, size_t index, const char* name);
// read_i32 plus a lower bound: "input 7 (stride_w) must be >= 1, got 0".
Result<int32_t> read_i32_at_least(const Model& model, const Operation& op, size_t index, const char* name,
                                  int32_t min);
// A FuseCode in 0..3.
Result<int32_t> read_fuse(const Model& model, const Operation& op, size_t index);
// The optional NHWC/NCHW flag: absent or NO_VALUE means NHWC. NCHW is kUnsupportedOp (the
// IR is NHWC; importers transpose).
Status check_layout_nhwc(const Model& model, const Operation& op, size_t index);

// Padding and output extent of one spatial axis.
struct AxisPadding {
  int64_t before = 0, after = 0;
};
// NNAPI/TF SAME (1) or VALID (2) padding of a forward window op (conv, pool).
Result<AxisPadding> implicit_padding(int32_t scheme, int64_t in, int64_t filter, int64_t stride,
                                     int64_t dilation, const char* axis);
// Output extent of a forward window op: (in + before + after - effective_filter) / stride + 1.
// Error when the (dilated) filter is larger than the padded input.
Result<uint32_t> window_output_size(int64_t in, int64_t filter, int64_t stride, int64_t dilation,
                                    const AxisPadding& pad, const char* axis);
// NNAPI's implicit padding of TRANSPOSE_CONV_2D, computed from the OUTPUT extent.
AxisPadding transpose_conv_implicit_padding(int32_t scheme, int64_t out, int64_t filter, int64_t stride);

// The convolution family's operand lists (NNAPI order, OPS.md): where each scalar sits for
// the explicit- and implicit-padding forms. One rule for the reference ops, the delegates
// and the exporter.
enum class ConvKind { kConv, kDepthwise, kGrouped, kTranspose };
constexpr size_t kAbsentSlot = static_cast<size_t>(-1);
struct ConvSlots {
  bool explicit_padding = false;
  size_t output_shape = kAbsentSlot;  // TRANSPOSE_CONV_2D implicit only
  size_t padding = 0;                 // first of 4 pads (explicit) or the PaddingCode (implicit)
  size_t stride = 0;                  // stride_w; stride_h follows
  size_t groups = kAbsentSlot;        // num_groups or depth_multiplier
  size_t fuse = 0;
  size_t layout = 0;
  size_t dilation = kAbsentSlot;  // dilation_w; dilation_h follows
};
ConvSlots conv_slots(ConvKind kind, bool explicit_padding);
// The form an op's input count (and, where both forms have that count, the type of the
// implicit form's layout slot) selects; an error naming the counts each form takes.
Result<ConvSlots> pick_conv_slots(const Model& model, const Operation& op, ConvKind kind);

// Quantized activations: TENSOR_QUANT8_ASYMM (uint8) or TENSOR_QUANT8_ASYMM_SIGNED (int8).
bool is_quant8(OperandType type);

// Checks a quantized activation's scale (> 0) and zero point (in range of its type).
Status check_quant_params(const Operand& operand, const std::string& label);

// Input 0 of a spatial op (conv, pool, resize): a float or quant8 NHWC tensor with valid
// quantization and no zero dim, or an error naming it.
Result<const Operand*> nhwc_activation_input(const Model& model, const Operation& op);

// Sets output 0 of `op` to `dims`, with the type of `like` (the data input). For quantized
// types the builder's declared scale/zero point on the output are kept when it declared
// them (scale > 0, same type); otherwise `like`'s are copied.
void set_output_like(Model& model, const Operation& op, const Operand& like, Dims dims);

// A float view of an input: the buffer itself for TENSOR_FLOAT32, a dequantized copy for
// quant8 (per-tensor), and per-channel TENSOR_QUANT8_SYMM_PER_CHANNEL.
class FloatInput {
 public:
  FloatInput(const Operand& operand, const void* data);
  const float* data() const { return data_; }

 private:
  const float* data_ = nullptr;
  std::vector<float> storage_;
};

// A float buffer for an output; finish() applies the fused activation and, for quant8,
// quantizes into the real output (round half away from zero, saturating).
class FloatOutput {
 public:
  FloatOutput(const Operand& operand, void* data);
  float* data() { return data_; }
  void finish(int32_t fuse_code);

 private:
  const Operand& operand_;
  void* out_;
  float* data_ = nullptr;
  std::vector<float> storage_;
};

// A conv bias as float, per output channel: TENSOR_FLOAT32 as is; TENSOR_INT32 scaled by
// input_scale * filter_scale[channel] (NNAPI's rule). All zeros when absent.
std::vector<float> bias_as_float(const Operand* bias, const void* bias_data, const Operand& input,
                                 const Operand& filter, size_t channels);

// Checks bias (input `index`) of a conv/FC: rank 1 of `channels`, TENSOR_FLOAT32 for a float
// input, TENSOR_INT32 with scale ~= input_scale * filter_scale and zero point 0 for quant8.
Status check_bias(const Model& model, const Operation& op, size_t index, size_t channels);

// Checks a filter/weights operand against a data input: same type for float; for quant8 the
// same quant8 type or (when per_channel_dim >= 0) TENSOR_QUANT8_SYMM_PER_CHANNEL with one
// scale per element of that dim.
Status check_filter_type(const Model& model, const Operation& op, size_t index, const char* name,
                         int per_channel_dim);

}  // namespace nn::conv_util

// The IR -> ONNX exporter's working state, shared by the driver (onnx_export.cpp) and the
// per-op translators (onnx_export_ops.cpp). Internal to the engine.
//
// Every IR operand may exist in the ONNX graph in two layouts: the IR's own order (NHWC for
// 4-D tensors) and, for 4-D tensors, NCHW. Ops ask for the layout they need; the first
// request for a missing layout emits one Transpose (or a Reshape when only unit dims move)
// and later requests reuse it. Constants become initializers in the requested layout.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <onnx/onnx_pb.h>

#include "nn/ir/model.h"
#include "nn/status.h"

namespace nn::onnx_export {

enum class Layout { kIr = 0, kNchw = 1 };

// A quantized IR model as ONNX QDQ (onnx_export_qdq.cpp): the exporter translates a float
// view of it (every quantized tensor float, constants dequantized) and this says what was
// quantized, so each int8 activation becomes QuantizeLinear -> DequantizeLinear after the
// op that writes it, and int8 weights / int32 biases initializers behind a DequantizeLinear.
struct QuantInfo {
  struct Activation {
    float scale = 1.f;
    int32_t zero_point = 0;
    bool is_signed = true;
  };
  struct Constant {
    std::vector<float> scales;  // one, or one per channel along channel_dim (IR layout)
    uint32_t channel_dim = 0;
    bool is_bias = false;       // int32 (else int8)
  };
  std::map<uint32_t, Activation> activations;
  std::map<uint32_t, Constant> constants;
  bool empty() const { return activations.empty() && constants.empty(); }
};

// The float view of `model` (validated) and what was quantized in it; an error for
// quantized forms ONNX QDQ cannot say (asymmetric weights with a zero point, ...).
Result<Model> dequantized_view(const Model& model, QuantInfo* info);

class Exporter {
 public:
  Exporter(const Model& model, onnx::GraphProto& graph, const QuantInfo* quant = nullptr)
      : m_(model), g_(graph), q_(quant) {}
  // Declares inputs/outputs, translates every op, connects the outputs.
  Status run();

  const Model& model() const { return m_; }
  const Operand& operand(uint32_t index) const { return m_.operands[index]; }

  // The ONNX tensor holding `operand` in `layout` (4-D tensors only have kNchw; others are
  // always kIr), made on first use.
  Result<std::string> value(uint32_t operand, Layout layout);
  // The layout an operand is cheapest to read in: NCHW for 4-D tensors that have it (or
  // constants), else the IR order.
  Layout preferred_layout(uint32_t operand) const;
  // The ONNX name an op writes `operand` to in `layout` (a model output's public name when
  // that is the layout it leaves the graph in), recorded for later readers.
  std::string define(uint32_t operand, Layout layout);
  // A fresh, unique tensor name.
  std::string temp(std::string_view base);

  onnx::NodeProto& node(std::string_view type, const std::vector<std::string>& inputs,
                        const std::vector<std::string>& outputs);
  std::string init_f32(std::string_view base, const std::vector<int64_t>& dims,
                       const std::vector<float>& data);
  std::string init_i64(std::string_view base, const std::vector<int64_t>& values);  // 1-D
  std::string scalar1_f32(float v);  // a shared float initializer of shape [1]

  // name (in `from`, an NHWC-ordered 4-D tensor's `ir_dims`) -> `to`; writes `out` or a temp.
  std::string convert(const std::string& name, const Dims& ir_dims, Layout from, Layout to,
                      std::string out = {});
  // out = activation(in) for an NNAPI FuseCode (1 RELU, 2 RELU1, 3 RELU6).
  Status activation(int32_t fuse, const std::string& in, const std::string& out);

  // A conv/FC weight or bias `operand` rearranged by the caller into ONNX `dims` (`data`,
  // float): a float initializer, or for a quantized one the int8/int32 initializer behind a
  // DequantizeLinear with its scales along ONNX axis `channel_axis`.
  std::string weight(uint32_t operand, std::string_view base, const std::vector<int64_t>& dims,
                     const std::vector<float>& data, int channel_axis);

  // A constant operand's data as float (TENSOR_FLOAT32, or a folded DEQUANTIZE result).
  Result<std::vector<float>> const_f32(uint32_t operand) const;
  Result<std::vector<int32_t>> const_i32(uint32_t operand) const;
  bool is_constant(uint32_t operand) const {
    return m_.operands[operand].is_constant() || folded_.count(operand) != 0;
  }
  // Makes `operand` (written by a constant-only op, e.g. DEQUANTIZE of FP16 weights) a
  // constant of the exported graph.
  void fold(uint32_t operand, std::vector<float> data) { folded_[operand] = std::move(data); }

 private:
  Status declare_inputs();
  // QDQ: QUANTIZE / DEQUANTIZE ops, and the QuantizeLinear -> DequantizeLinear after an op
  // that writes an int8 activation.
  Status quantize_op(const Operation& op);
  void requantize_outputs(const Operation& op);
  std::string qdq(const std::string& name, const QuantInfo::Activation& a);
  Status declare_outputs();
  Status connect_outputs();
  Result<std::string> constant(uint32_t operand, Layout layout);

  const Model& m_;
  onnx::GraphProto& g_;
  const QuantInfo* q_ = nullptr;
  std::vector<std::array<std::string, 2>> names_;  // per operand, per Layout
  std::set<std::string> used_names_;
  std::map<uint32_t, std::vector<float>> folded_;
  std::map<float, std::string> scalars_;
  struct Public {
    std::string name;
    Layout layout;
  };
  std::map<uint32_t, Public> public_outputs_;  // operands an op may write straight to
  std::vector<Public> outputs_;                // per model output
};

// Attribute setters.
void attr_int(onnx::NodeProto& n, const char* name, int64_t v);
void attr_float(onnx::NodeProto& n, const char* name, float v);
void attr_string(onnx::NodeProto& n, const char* name, const std::string& v);
void attr_ints(onnx::NodeProto& n, const char* name, const std::vector<int64_t>& v);

// ONNX dims of a tensor in a layout (NHWC [N,H,W,C] -> NCHW [N,C,H,W]).
std::vector<int64_t> onnx_dims(const Dims& ir_dims, Layout layout);
// The NCHW axis of an NHWC axis.
inline int nchw_axis(int nhwc_axis) {
  static constexpr int kMap[4] = {0, 2, 3, 1};
  return kMap[nhwc_axis];
}

// One IR operation -> ONNX nodes (onnx_export_ops.cpp).
Status translate(Exporter& e, const Operation& op);

}  // namespace nn::onnx_export

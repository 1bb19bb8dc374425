// A quantized IR model as an ONNX QDQ graph: what ONNX Runtime fuses into its int8 kernels
// (QLinearConv, QLinearMatMul, ...) and every ONNX runtime can run. NNAPI's rules map one to
// one: TENSOR_QUANT8_ASYMM_SIGNED / ASYMM -> int8 / uint8 with the same scale and zero point
// (QuantizeLinear rounds half to even, NNAPI's QUANTIZE half away from zero: one step apart
// on exact halves); TENSOR_QUANT8_SYMM_PER_CHANNEL -> per-axis DequantizeLinear (zero points
// 0); a TENSOR_INT32 bias -> int32 DequantizeLinear with scale input x filter scale.
#include <cmath>
#include <cstring>

#include "export/onnx_exporter.h"
#include "ops/conv_util.h"

namespace nn::onnx_export {
namespace {

using T = OperationType;

bool is_activation_type(OperandType t) {
  return t == OperandType::TENSOR_QUANT8_ASYMM_SIGNED || t == OperandType::TENSOR_QUANT8_ASYMM;
}

// Replaces a constant's data by float values it owns.
void set_float_data(Operand& o, std::vector<float> values) {
  auto owned = std::make_shared<std::vector<float>>(std::move(values));
  o.type = OperandType::TENSOR_FLOAT32;
  o.data = reinterpret_cast<const uint8_t*>(owned->data());
  o.length = owned->size() * sizeof(float);
  o.keepalive = owned;
  o.scale = 0.f;
  o.zero_point = 0;
  o.channel_quant = {};
}

int64_t channel_of(const Dims& dims, uint32_t channel_dim, size_t i) {
  size_t inner = 1;
  for (size_t d = channel_dim + 1; d < dims.size(); ++d) inner *= dims[d];
  return static_cast<int64_t>((i / inner) % dims[channel_dim]);
}

}  // namespace

Result<Model> dequantized_view(const Model& model, QuantInfo* info) {
  Model v = model;
  *info = {};
  // Biases first need their op's input and filter scales.
  for (const Operation& op : model.operations) {
    const bool weighted = op.type == T::CONV_2D || op.type == T::DEPTHWISE_CONV_2D ||
                          op.type == T::GROUPED_CONV_2D || op.type == T::TRANSPOSE_CONV_2D ||
                          op.type == T::FULLY_CONNECTED;
    if (!weighted || op.inputs.size() < 3 || !model.has_value(op.inputs[2])) continue;
    const Operand& in = model.operands[op.inputs[0]];
    const Operand& filter = model.operands[op.inputs[1]];
    const Operand& bias = model.operands[op.inputs[2]];
    if (bias.type != OperandType::TENSOR_INT32 || !bias.is_constant() || !is_activation_type(in.type)) continue;
    QuantInfo::Constant c;
    c.is_bias = true;
    const size_t n = num_elements(bias.dims);
    if (filter.type == OperandType::TENSOR_QUANT8_SYMM_PER_CHANNEL) {
      for (size_t k = 0; k < n; ++k) c.scales.push_back(in.scale * filter.channel_quant.scales.at(k));
    } else {
      c.scales.push_back(in.scale * filter.scale);
    }
    std::vector<float> f(n);
    for (size_t k = 0; k < n; ++k) f[k] = static_cast<float>(bias.as<int32_t>()[k]) * c.scales[c.scales.size() == 1 ? 0 : k];
    set_float_data(v.operands[op.inputs[2]], std::move(f));
    info->constants[op.inputs[2]] = std::move(c);
  }
  for (size_t i = 0; i < model.operands.size(); ++i) {
    const Operand& o = model.operands[i];
    const bool per_channel = o.type == OperandType::TENSOR_QUANT8_SYMM_PER_CHANNEL;
    if (!is_activation_type(o.type) && !per_channel) continue;
    if (!o.is_constant()) {
      if (per_channel) return Status(StatusCode::kUnsupportedOp, "operand " + std::to_string(i) + " '" + o.name +
                                                                     "': a per-channel tensor that is not constant");
      info->activations[static_cast<uint32_t>(i)] = {o.scale, o.zero_point,
                                                     o.type == OperandType::TENSOR_QUANT8_ASYMM_SIGNED};
      v.operands[i].type = OperandType::TENSOR_FLOAT32;
      v.operands[i].scale = 0.f;
      v.operands[i].zero_point = 0;
      continue;
    }
    // A quantized constant: a weight (symmetric) or another op's int8 constant input.
    if (o.zero_point != 0 && !per_channel)
      return Status(StatusCode::kUnsupportedOp, "operand " + std::to_string(i) + " '" + o.name +
                                                    "': an int8 constant with a zero point; QDQ export takes "
                                                    "symmetric weights only");
    if (o.type == OperandType::TENSOR_QUANT8_ASYMM)
      return Status(StatusCode::kUnsupportedOp, "operand " + std::to_string(i) + ": uint8 weights");
    QuantInfo::Constant c;
    const size_t n = num_elements(o.dims);
    std::vector<float> f(n);
    const int8_t* q = o.as<int8_t>();
    if (per_channel) {
      c.scales = o.channel_quant.scales;
      c.channel_dim = o.channel_quant.channel_dim;
      for (size_t k = 0; k < n; ++k) f[k] = q[k] * c.scales[static_cast<size_t>(channel_of(o.dims, c.channel_dim, k))];
    } else {
      c.scales = {o.scale};
      for (size_t k = 0; k < n; ++k) f[k] = q[k] * o.scale;
    }
    set_float_data(v.operands[i], std::move(f));
    info->constants[static_cast<uint32_t>(i)] = std::move(c);
  }
  return v;
}

std::string Exporter::weight(uint32_t operand, std::string_view base, const std::vector<int64_t>& dims,
                             const std::vector<float>& data, int channel_axis) {
  auto it = q_ ? q_->constants.find(operand) : decltype(q_->constants.end()){};
  if (!q_ || it == q_->constants.end()) return init_f32(base, dims, data);
  const QuantInfo::Constant& c = it->second;
  const bool per_axis = c.scales.size() > 1;
  size_t inner = 1;
  for (size_t d = static_cast<size_t>(channel_axis) + 1; d < dims.size(); ++d) inner *= static_cast<size_t>(dims[d]);
  auto scale_of = [&](size_t k) {
    return per_axis ? c.scales[(k / inner) % static_cast<size_t>(dims[static_cast<size_t>(channel_axis)])]
                    : c.scales[0];
  };
  onnx::TensorProto* t = g_.add_initializer();
  const std::string qname = temp(std::string(base) + (c.is_bias ? "/int32" : "/int8"));
  t->set_name(qname);
  for (int64_t d : dims) t->add_dims(d);
  if (c.is_bias) {
    std::vector<int32_t> q(data.size());
    for (size_t k = 0; k < data.size(); ++k) q[k] = static_cast<int32_t>(std::lround(data[k] / scale_of(k)));
    t->set_data_type(onnx::TensorProto::INT32);
    t->set_raw_data(q.data(), q.size() * sizeof(int32_t));
  } else {
    std::vector<int8_t> q(data.size());
    for (size_t k = 0; k < data.size(); ++k) q[k] = static_cast<int8_t>(std::lround(data[k] / scale_of(k)));
    t->set_data_type(onnx::TensorProto::INT8);
    t->set_raw_data(q.data(), q.size());
  }
  const int64_t channels = per_axis ? dims[static_cast<size_t>(channel_axis)] : 0;
  const std::string sname = per_axis ? init_f32(std::string(base) + "/scales", {channels}, c.scales)
                                     : init_f32(std::string(base) + "/scale", {}, {c.scales[0]});
  onnx::TensorProto* z = g_.add_initializer();
  const std::string zname = temp(std::string(base) + "/zero_point");
  z->set_name(zname);
  if (per_axis) z->add_dims(channels);
  const size_t zn = per_axis ? static_cast<size_t>(channels) : 1;
  if (c.is_bias) {
    z->set_data_type(onnx::TensorProto::INT32);
    std::vector<int32_t> zeros(zn, 0);
    z->set_raw_data(zeros.data(), zeros.size() * sizeof(int32_t));
  } else {
    z->set_data_type(onnx::TensorProto::INT8);
    std::vector<int8_t> zeros(zn, 0);
    z->set_raw_data(zeros.data(), zeros.size());
  }
  const std::string out = temp(std::string(base) + "/dequantized");
  auto& n = node("DequantizeLinear", {qname, sname, zname}, {out});
  if (per_axis) attr_int(n, "axis", channel_axis);
  return out;
}

std::string Exporter::qdq(const std::string& name, const QuantInfo::Activation& a) {
  const std::string scale = init_f32(name + "/scale", {}, {a.scale});
  onnx::TensorProto* z = g_.add_initializer();
  const std::string zname = temp(name + "/zero_point");
  z->set_name(zname);
  if (a.is_signed) {
    z->set_data_type(onnx::TensorProto::INT8);
    const int8_t v = static_cast<int8_t>(a.zero_point);
    z->set_raw_data(&v, 1);
  } else {
    z->set_data_type(onnx::TensorProto::UINT8);
    const uint8_t v = static_cast<uint8_t>(a.zero_point);
    z->set_raw_data(&v, 1);
  }
  const std::string q = temp(name + "/q");
  node("QuantizeLinear", {name, scale, zname}, {q});
  const std::string dq = temp(name + "/dq");
  node("DequantizeLinear", {q, scale, zname}, {dq});
  return dq;
}

void Exporter::requantize_outputs(const Operation& op) {
  for (uint32_t out : op.outputs) {
    auto it = q_->activations.find(out);
    if (it == q_->activations.end()) continue;
    for (std::string& name : names_[out])
      if (!name.empty()) name = qdq(name, it->second);
  }
}

Status Exporter::quantize_op(const Operation& op) {
  const uint32_t in = op.inputs[0], out = op.outputs[0];
  const Layout layout = preferred_layout(in);
  NN_ASSIGN_OR_RETURN(std::string x, value(in, layout));
  if (op.type == T::QUANTIZE) {
    auto it = q_->activations.find(out);
    if (it == q_->activations.end()) return Status(StatusCode::kInternal, "QUANTIZE output is not an int8 activation");
    names_[out][static_cast<int>(m_.operands[out].dims.size() == 4 ? layout : Layout::kIr)] = qdq(x, it->second);
    return Status::ok();
  }
  // DEQUANTIZE: its input already reads as the dequantized float.
  node("Identity", {x}, {define(out, layout)});
  return Status::ok();
}

}  // namespace nn::onnx_export

#include "quantize/rewrite.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <optional>

#include "ops/activation.h"
#include "ops/conv_util.h"

namespace nn::quantize {
namespace {

using T = OperationType;
constexpr OperandType kF32 = OperandType::TENSOR_FLOAT32;
constexpr OperandType kQ8 = OperandType::TENSOR_QUANT8_ASYMM_SIGNED;
constexpr OperandType kPerChannel = OperandType::TENSOR_QUANT8_SYMM_PER_CHANNEL;

// Where an op keeps its filter and bias, and the filter's output-channel dim (-1: NNAPI
// allows one scale only).
struct WeightSlots {
  bool has = false;
  int channel_dim = 0;
};
WeightSlots weight_slots(OperationType type) {
  switch (type) {
    case T::CONV_2D:
    case T::GROUPED_CONV_2D:
    case T::TRANSPOSE_CONV_2D: return {true, 0};
    case T::DEPTHWISE_CONV_2D: return {true, 3};
    case T::FULLY_CONNECTED: return {true, -1};
    default: return {};
  }
}

// Outputs NNAPI fixes: LOGISTIC and SOFTMAX in [0, 1), TANH in [-1, 1).
std::optional<QuantParams> fixed_output_params(OperationType type) {
  switch (type) {
    case T::LOGISTIC:
    case T::SOFTMAX: return QuantParams{1.f / 256, -128};
    case T::TANH: return QuantParams{1.f / 128, 0};
    default: return std::nullopt;
  }
}

int8_t quantize_value(float x, QuantParams p) {
  const double q = std::round(static_cast<double>(x) / p.scale) + p.zero_point;
  return static_cast<int8_t>(std::clamp(q, -128.0, 127.0));
}

}  // namespace

Int8Filter int8_filter(const Operand& w, int channel_dim) {
  const size_t n = num_elements(w.dims);
  const float* v = w.as<float>();
  const bool per_channel = channel_dim >= 0;
  const size_t channels = per_channel ? w.dims[static_cast<size_t>(channel_dim)] : 1;
  Int8Filter f;
  if (per_channel)
    for (size_t d = static_cast<size_t>(channel_dim) + 1; d < w.dims.size(); ++d) f.inner *= w.dims[d];
  std::vector<float> max_abs(channels, 0.f);
  for (size_t i = 0; i < n; ++i) {
    const size_t c = per_channel ? (i / f.inner) % channels : 0;
    max_abs[c] = std::max(max_abs[c], std::fabs(v[i]));
  }
  f.scales.resize(channels);
  for (size_t c = 0; c < channels; ++c) f.scales[c] = max_abs[c] > 0 ? max_abs[c] / 127.f : 1.f;
  f.values.resize(n);
  for (size_t i = 0; i < n; ++i) {
    const size_t c = per_channel ? (i / f.inner) % channels : 0;
    f.values[i] = static_cast<int8_t>(std::clamp(std::round(v[i] / f.scales[c]), -127.f, 127.f));
  }
  return f;
}

int filter_channel_dim(OperationType type, bool per_channel) {
  const WeightSlots slots = weight_slots(type);
  return per_channel && slots.has ? slots.channel_dim : -1;
}

namespace {

struct Builder {
  const Model& f;
  Model q;

  uint32_t add_int8_tensor(const Operand& like, QuantParams p, const std::string& suffix) {
    Operand o;
    o.type = kQ8;
    o.dims = like.dims;
    o.scale = p.scale;
    o.zero_point = p.zero_point;
    o.lifetime = Lifetime::TEMPORARY;
    o.name = like.name + suffix;
    return q.add_operand(std::move(o));
  }

  // A float constant tensor as int8 with its own asymmetric range.
  uint32_t quantize_constant(const Operand& c) {
    const size_t n = num_elements(c.dims);
    const float* v = c.as<float>();
    FloatRange r{0.f, 0.f};
    for (size_t i = 0; i < n; ++i) {
      r.lo = std::min(r.lo, v[i]);
      r.hi = std::max(r.hi, v[i]);
    }
    const QuantParams p = asymmetric_int8(r);
    std::vector<int8_t> data(n);
    for (size_t i = 0; i < n; ++i) data[i] = quantize_value(v[i], p);
    const uint32_t id = q.add_constant(kQ8, c.dims, data.data(), n, c.name + "/int8");
    q.operands[id].scale = p.scale;
    q.operands[id].zero_point = p.zero_point;
    return id;
  }

  // A filter as symmetric int8 (int8_filter), with its scales on the operand.
  // Returns the operand and the scales (one per output channel either way).
  std::pair<uint32_t, std::vector<float>> quantize_filter(const Operand& w, int channel_dim, size_t out_channels,
                                                          const std::vector<int8_t>& values) {
    Int8Filter f = int8_filter(w, channel_dim);
    if (values.size() == f.values.size()) f.values = values;
    const bool per_channel = channel_dim >= 0;
    const uint32_t id =
        q.add_constant(per_channel ? kPerChannel : kQ8, w.dims, f.values.data(), f.values.size(), w.name + "/int8");
    Operand& o = q.operands[id];
    if (per_channel) {
      o.channel_quant.channel_dim = static_cast<uint32_t>(channel_dim);
      o.channel_quant.scales = f.scales;
    } else {
      o.scale = f.scales[0];
      o.zero_point = 0;
      f.scales.assign(out_channels, f.scales[0]);
    }
    return {id, f.scales};
  }

  // A float bias as NNAPI's TENSOR_INT32: scale input_scale x filter_scale[c], zero point 0
  // (the operand's scale is 0 for per-channel filters, whose scales say it per channel).
  // `shift`, when not empty, is subtracted from the float bias first (bias correction).
  uint32_t quantize_bias(const Operand& b, float input_scale, const std::vector<float>& filter_scales,
                         bool per_channel, const std::vector<float>& shift) {
    const size_t n = num_elements(b.dims);
    const float* v = b.as<float>();
    std::vector<int32_t> data(n);
    for (size_t c = 0; c < n; ++c) {
      const double s = static_cast<double>(input_scale) * filter_scales[std::min(c, filter_scales.size() - 1)];
      const double value = static_cast<double>(v[c]) - (c < shift.size() ? shift[c] : 0.f);
      const double x = std::round(value / s);
      data[c] = static_cast<int32_t>(std::clamp(x, -2147483648.0, 2147483647.0));
    }
    const uint32_t id = q.add_constant(OperandType::TENSOR_INT32, b.dims, data.data(), n * 4, b.name + "/int32");
    q.operands[id].scale = per_channel ? 0.f : input_scale * filter_scales[0];
    q.operands[id].zero_point = 0;
    return id;
  }
};

// Drops operands nothing refers to (the float weights replaced by int8 ones, float tensors
// only DEQUANTIZE would have written).
Model compact(Model m) {
  std::vector<bool> used(m.operands.size(), false);
  for (const Operation& op : m.operations) {
    for (uint32_t i : op.inputs) used[i] = true;
    for (uint32_t i : op.outputs) used[i] = true;
  }
  for (uint32_t i : m.inputs) used[i] = true;
  for (uint32_t i : m.outputs) used[i] = true;
  std::vector<uint32_t> remap(m.operands.size(), 0);
  Model out;
  out.metadata = std::move(m.metadata);
  for (size_t i = 0; i < m.operands.size(); ++i)
    if (used[i]) {
      remap[i] = static_cast<uint32_t>(out.operands.size());
      out.operands.push_back(std::move(m.operands[i]));
    }
  for (Operation& op : m.operations) {
    for (uint32_t& i : op.inputs) i = remap[i];
    for (uint32_t& i : op.outputs) i = remap[i];
    out.operations.push_back(std::move(op));
  }
  for (uint32_t i : m.inputs) out.inputs.push_back(remap[i]);
  for (uint32_t i : m.outputs) out.outputs.push_back(remap[i]);
  return out;
}

}  // namespace

QuantParams asymmetric_int8(FloatRange r) {
  double lo = std::min(0.0, static_cast<double>(r.lo));
  double hi = std::max(0.0, static_cast<double>(r.hi));
  if (hi - lo < 1e-6) hi = lo + 1e-6;
  QuantParams p;
  p.scale = static_cast<float>((hi - lo) / 255.0);
  p.zero_point = static_cast<int32_t>(std::clamp(std::round(-128.0 - lo / p.scale), -128.0, 127.0));
  return p;
}

bool output_takes_input_params(OperationType type) {
  switch (type) {
    case T::RESHAPE:
    case T::SQUEEZE:
    case T::EXPAND_DIMS:
    case T::TRANSPOSE:
    case T::MAX_POOL_2D:
    case T::AVERAGE_POOL_2D:
    case T::PAD:
    case T::PAD_V2:
    case T::MIRROR_PAD:
    case T::DEPTH_TO_SPACE:
    case T::SPACE_TO_DEPTH:
    case T::SLICE:
    case T::STRIDED_SLICE:
    case T::GATHER:
    case T::CHANNEL_SHUFFLE:
    case T::SPLIT:
    case T::TILE:
    case T::REVERSE:
    case T::RESIZE_BILINEAR:
    case T::RESIZE_NEAREST_NEIGHBOR:
    case T::REDUCE_MAX:
    case T::REDUCE_MIN: return true;
    default: return false;
  }
}

bool is_candidate(const Model& m, uint32_t k, std::string* reason) {
  const Operation& op = m.operations[k];
  auto no = [&](std::string why) {
    if (reason) *reason = std::move(why);
    return false;
  };
  switch (op.type) {
    case T::QUANTIZE:
    case T::DEQUANTIZE:
    case T::CAST:
    case T::NNPIPE_GRU: return no("not quantized by PTQ");
    default: break;
  }
  for (uint32_t o : op.outputs)
    if (m.operands[o].type != kF32) return no("output is " + std::string(operand_type_name(m.operands[o].type)));
  bool float_activation = false;
  for (uint32_t i : op.inputs) {
    const Operand& o = m.operands[i];
    if (o.type == kF32 && !o.is_constant()) float_activation = true;
  }
  if (!float_activation) return no("no float activation input");
  if (weight_slots(op.type).has) {
    if (op.inputs.size() < 3 || !m.operands[op.inputs[1]].is_constant()) return no("filter is not constant");
    if (m.has_value(op.inputs[2]) && !m.operands[op.inputs[2]].is_constant()) return no("bias is not constant");
  }
  return true;
}

Result<Model> rewrite_quantized(const Model& f, const std::vector<bool>& quantize_op, const Ranges& ranges,
                                bool per_channel, const BiasShifts* shifts, const FilterValues* filters) {
  static const std::vector<float> kNoShift;
  static const std::vector<int8_t> kNearest;
  Builder b{f, {}};
  Model& q = b.q;
  q.metadata = f.metadata;
  q.operands = f.operands;
  q.inputs = f.inputs;
  q.outputs = f.outputs;
  const size_t n = f.operands.size();

  std::vector<bool> float_reader(n, false);
  for (size_t k = 0; k < f.operations.size(); ++k)
    if (!quantize_op[k])
      for (uint32_t i : f.operations[k].inputs) float_reader[i] = true;
  for (uint32_t i : f.outputs) float_reader[i] = true;

  std::vector<int64_t> int8_of(n, -1);
  // The int8 form of float activation t: a QUANTIZE of it unless a quantized op wrote it.
  auto int8_version = [&](uint32_t t) -> Result<uint32_t> {
    if (int8_of[t] >= 0) return static_cast<uint32_t>(int8_of[t]);
    if (t >= ranges.size() || !ranges[t])
      return Status(StatusCode::kInternal, "no calibrated range for '" + f.operands[t].name + "'");
    const Operand like = f.operands[t];
    const uint32_t id = b.add_int8_tensor(like, asymmetric_int8(*ranges[t]), "/int8");
    q.add_operation(T::QUANTIZE, {t}, {id});
    int8_of[t] = id;
    return id;
  };

  for (size_t k = 0; k < f.operations.size(); ++k) {
    const Operation& op = f.operations[k];
    if (!quantize_op[k]) {
      q.operations.push_back(op);
      continue;
    }
    const std::string where = "op " + std::to_string(k) + " " + std::string(operation_type_name(op.type));
    Operation out{op.type, op.inputs, {}};
    const WeightSlots slots = weight_slots(op.type);
    float input_scale = 0.f;
    std::vector<float> filter_scales;
    bool filter_per_channel = false;
    for (size_t s = 0; s < op.inputs.size(); ++s) {
      const uint32_t t = op.inputs[s];
      const Operand o = f.operands[t];
      if (!f.has_value(t) || !is_tensor_type(o.type) || o.type != kF32) continue;
      if (slots.has && s == 1) {
        const int dim = per_channel ? slots.channel_dim : -1;
        const size_t out_channels = op.type == T::DEPTHWISE_CONV_2D ? o.dims.back() : o.dims[0];
        filter_per_channel = dim >= 0;
        const std::vector<int8_t>& values = filters && k < filters->size() ? (*filters)[k] : kNearest;
        auto [id, scales] = b.quantize_filter(o, dim, out_channels, values);
        out.inputs[s] = id;
        filter_scales = std::move(scales);
      } else if (slots.has && s == 2) {
        const std::vector<float>& shift = shifts && k < shifts->size() ? (*shifts)[k] : kNoShift;
        out.inputs[s] = b.quantize_bias(o, input_scale, filter_scales, filter_per_channel, shift);
      } else if (o.is_constant()) {
        out.inputs[s] = b.quantize_constant(o);
      } else {
        auto id = int8_version(t);
        if (!id.is_ok()) return id.status().with_context(where);
        out.inputs[s] = *id;
      }
      if (s == 0) input_scale = q.operands[out.inputs[0]].scale;
    }
    for (uint32_t t : op.outputs) {
      const Operand like = f.operands[t];
      QuantParams p;
      if (auto fixed = fixed_output_params(op.type)) {
        p = *fixed;
      } else if (output_takes_input_params(op.type)) {
        const Operand& in = q.operands[out.inputs[0]];
        p = {in.scale, in.zero_point};
      } else if (t < ranges.size() && ranges[t]) {
        p = asymmetric_int8(*ranges[t]);
      } else {
        return Status(StatusCode::kInternal, where + ": no calibrated range for output '" + like.name + "'");
      }
      const uint32_t id = b.add_int8_tensor(like, p, "/int8");
      int8_of[t] = id;
      out.outputs.push_back(id);
    }
    q.operations.push_back(out);
    for (uint32_t t : op.outputs)
      if (float_reader[t]) q.add_operation(T::DEQUANTIZE, {static_cast<uint32_t>(int8_of[t])}, {t});
  }
  Model result = compact(std::move(q));
  NN_RETURN_IF_ERROR(result.validate_and_infer_shapes());
  return result;
}

namespace {
// The input slot of op's fuse code, if it has one.
std::optional<size_t> fuse_slot(const Model& m, const Operation& op) {
  using conv_util::ConvKind;
  std::optional<ConvKind> kind;
  switch (op.type) {
    case T::CONV_2D: kind = ConvKind::kConv; break;
    case T::DEPTHWISE_CONV_2D: kind = ConvKind::kDepthwise; break;
    case T::TRANSPOSE_CONV_2D: kind = ConvKind::kTranspose; break;
    case T::FULLY_CONNECTED: return op.inputs.size() == 4 ? std::optional<size_t>(3) : std::nullopt;
    case T::ADD:
    case T::SUB:
    case T::MUL: return op.inputs.size() == 3 ? std::optional<size_t>(2) : std::nullopt;
    default: return std::nullopt;
  }
  auto slots = conv_util::pick_conv_slots(m, op, *kind);
  if (!slots.is_ok()) return std::nullopt;
  return slots->fuse;
}
}  // namespace

bool has_quantizable_bias(const Model& m, uint32_t k) {
  const Operation& op = m.operations[k];
  if (!weight_slots(op.type).has || op.inputs.size() < 3) return false;
  const Operand& w = m.operands[op.inputs[1]];
  return w.type == kF32 && w.is_constant() && m.has_value(op.inputs[2]) && m.operands[op.inputs[2]].type == kF32 &&
         m.operands[op.inputs[2]].is_constant();
}

Model without_activation(const Model& one_op) {
  Model m = one_op;
  Operation& op = m.operations[0];
  if (auto slot = fuse_slot(m, op); slot && m.operands[op.inputs[*slot]].is_constant())
    op.inputs[*slot] = m.add_scalar_i32(0);
  return m;
}

Model with_int8_filter_values(const Model& one_op, bool per_channel, const std::vector<int8_t>& chosen) {
  Model m = without_activation(one_op);
  Operation& op = m.operations[0];
  const WeightSlots slots = weight_slots(op.type);
  if (!slots.has) return m;
  const Operand w = m.operands[op.inputs[1]];
  Int8Filter f = int8_filter(w, per_channel ? slots.channel_dim : -1);
  if (chosen.size() == f.values.size()) f.values = chosen;
  const size_t channels = f.scales.size();
  std::vector<float> values(f.values.size());
  for (size_t i = 0; i < values.size(); ++i) values[i] = f.values[i] * f.scales[channels > 1 ? (i / f.inner) % channels : 0];
  op.inputs[1] = m.add_constant_f32(w.dims, values, w.name + "/int8_values");
  return m;
}

Result<Model> fold_activations(const Model& f) {
  Model m = f;
  std::vector<int> readers(m.operands.size(), 0);
  for (const Operation& op : m.operations)
    for (uint32_t i : op.inputs) readers[i]++;
  for (uint32_t o : m.outputs) readers[o] += 2;  // a model output is read outside
  std::vector<int64_t> producer(m.operands.size(), -1);
  for (size_t k = 0; k < m.operations.size(); ++k)
    for (uint32_t o : m.operations[k].outputs) producer[o] = static_cast<int64_t>(k);
  std::vector<bool> removed(m.operations.size(), false);
  for (size_t k = 0; k < m.operations.size(); ++k) {
    const Operation act = m.operations[k];
    const std::optional<FuseCode> fuse = clamp_activation_code(act.type);
    if (!fuse) continue;
    const int32_t code = static_cast<int32_t>(*fuse);
    const uint32_t t = act.inputs[0];
    if (readers[t] != 1 || producer[t] < 0) continue;
    Operation& p = m.operations[static_cast<size_t>(producer[t])];
    if (p.outputs.size() != 1) continue;
    auto slot = fuse_slot(m, p);
    if (!slot || !m.operands[p.inputs[*slot]].is_constant() || m.scalar_i32(p.inputs[*slot]) != 0) continue;
    p.inputs[*slot] = m.add_scalar_i32(code);
    p.outputs[0] = act.outputs[0];
    producer[act.outputs[0]] = producer[t];
    removed[k] = true;
  }
  std::vector<Operation> kept;
  for (size_t k = 0; k < m.operations.size(); ++k)
    if (!removed[k]) kept.push_back(std::move(m.operations[k]));
  m.operations = std::move(kept);
  Model out = compact(std::move(m));
  NN_RETURN_IF_ERROR(out.validate_and_infer_shapes());
  return out;
}

Model extract_op(const Model& f, uint32_t k, const Ranges& ranges, Ranges* sub_ranges,
                 std::vector<uint32_t>* input_operands) {
  const Operation& op = f.operations[k];
  Model s;
  std::map<uint32_t, uint32_t> remap;
  sub_ranges->clear();
  input_operands->clear();
  auto take = [&](uint32_t t, Lifetime activation_lifetime) {
    auto it = remap.find(t);
    if (it != remap.end()) return it->second;
    Operand o = f.operands[t];
    const bool activation = !o.is_constant() && o.lifetime != Lifetime::NO_VALUE;
    if (activation) o.lifetime = activation_lifetime;
    const uint32_t id = s.add_operand(std::move(o));
    remap[t] = id;
    sub_ranges->resize(id + 1);
    if (t < ranges.size()) (*sub_ranges)[id] = ranges[t];
    if (activation && activation_lifetime == Lifetime::MODEL_INPUT) {
      s.inputs.push_back(id);
      input_operands->push_back(t);
    }
    if (activation_lifetime == Lifetime::MODEL_OUTPUT) s.outputs.push_back(id);
    return id;
  };
  Operation sub{op.type, {}, {}};
  for (uint32_t t : op.inputs) sub.inputs.push_back(take(t, Lifetime::MODEL_INPUT));
  for (uint32_t t : op.outputs) sub.outputs.push_back(take(t, Lifetime::MODEL_OUTPUT));
  s.operations.push_back(std::move(sub));
  return s;
}

}  // namespace nn::quantize

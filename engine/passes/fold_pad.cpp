#include "passes/fold_pad.h"

#include <map>
#include <optional>
#include <vector>

#include "ops/conv_util.h"
#include "ops/op_params.h"

namespace nn {

namespace {

struct SpatialPad {
  int32_t top = 0, bottom = 0, left = 0, right = 0;
};

// The pads of a PAD (or PAD_V2 with a 0.0 value) of a float NHWC tensor that pads only
// height and width with zeros.
std::optional<SpatialPad> zero_spatial_pad(const Model& m, const Operation& op) {
  if (op.type != OperationType::PAD && op.type != OperationType::PAD_V2) return std::nullopt;
  if (op.inputs.size() < 2 || op.outputs.size() != 1) return std::nullopt;
  const Operand& in = m.operands[op.inputs[0]];
  const Operand& pads = m.operands[op.inputs[1]];
  if (in.type != OperandType::TENSOR_FLOAT32 || in.dims.size() != 4) return std::nullopt;
  if (!pads.is_constant() || pads.type != OperandType::TENSOR_INT32 || pads.dims != Dims{4, 2} ||
      pads.length < 8 * sizeof(int32_t))
    return std::nullopt;
  if (op.type == OperationType::PAD_V2) {
    const Operand& value = m.operands[op.inputs[2]];
    if (!value.is_constant() || value.type != OperandType::FLOAT32 || m.scalar_f32(op.inputs[2]) != 0.f)
      return std::nullopt;
  }
  const int32_t* p = pads.as<int32_t>();
  if (p[0] != 0 || p[1] != 0 || p[6] != 0 || p[7] != 0) return std::nullopt;
  for (int i = 2; i < 6; ++i)
    if (p[i] < 0) return std::nullopt;
  return SpatialPad{p[2], p[3], p[4], p[5]};
}

// The conv's operand list in the explicit-padding form with `pad` added to its own padding;
// nullopt when the op is not a float NHWC CONV_2D / DEPTHWISE_CONV_2D reading `from` as its
// input (and nowhere else).
std::optional<std::vector<uint32_t>> explicit_form(Model& m, const Operation& op, uint32_t from, uint32_t to,
                                                   const SpatialPad& pad) {
  const auto kind = conv_kind(op.type);
  if (!kind || (*kind != conv_util::ConvKind::kConv && *kind != conv_util::ConvKind::kDepthwise)) return std::nullopt;
  if (op.inputs.empty() || op.inputs[0] != from) return std::nullopt;
  for (size_t i = 1; i < op.inputs.size(); ++i)
    if (op.inputs[i] == from) return std::nullopt;
  if (m.operands[op.outputs[0]].type != OperandType::TENSOR_FLOAT32) return std::nullopt;
  auto params = decode_conv(m, op, *kind);
  if (!params.is_ok()) return std::nullopt;
  const ConvParams& p = params.value();
  if (p.form.layout < op.inputs.size() && m.scalar_bool(op.inputs[p.form.layout])) return std::nullopt;  // NCHW
  const conv_util::ConvSlots ex = conv_util::conv_slots(*kind, true);
  std::vector<uint32_t> in(ex.dilation + 2);
  in[0] = to;
  in[1] = op.inputs[1];
  in[2] = op.inputs[2];
  in[ex.padding + 0] = m.add_scalar_i32(int32_t(p.pad_w.before) + pad.left);
  in[ex.padding + 1] = m.add_scalar_i32(int32_t(p.pad_w.after) + pad.right);
  in[ex.padding + 2] = m.add_scalar_i32(int32_t(p.pad_h.before) + pad.top);
  in[ex.padding + 3] = m.add_scalar_i32(int32_t(p.pad_h.after) + pad.bottom);
  in[ex.stride + 0] = m.add_scalar_i32(p.stride_w);
  in[ex.stride + 1] = m.add_scalar_i32(p.stride_h);
  if (ex.groups != conv_util::kAbsentSlot) in[ex.groups] = m.add_scalar_i32(p.groups);
  in[ex.fuse] = m.add_scalar_i32(p.fuse);
  in[ex.layout] = m.add_scalar_bool(false);
  in[ex.dilation + 0] = m.add_scalar_i32(p.dil_w);
  in[ex.dilation + 1] = m.add_scalar_i32(p.dil_h);
  return in;
}

}  // namespace

size_t fold_pad_into_conv(Model& model) {
  std::map<uint32_t, std::vector<size_t>> readers;  // operand -> ops reading it
  for (size_t k = 0; k < model.operations.size(); ++k)
    for (uint32_t i : model.operations[k].inputs) readers[i].push_back(k);
  std::vector<bool> is_output(model.operands.size(), false);
  for (uint32_t o : model.outputs) is_output[o] = true;

  std::vector<bool> drop(model.operations.size(), false);
  size_t folded = 0;
  for (size_t k = 0; k < model.operations.size(); ++k) {
    const Operation pad_op = model.operations[k];
    const auto pad = zero_spatial_pad(model, pad_op);
    if (!pad) continue;
    const uint32_t out = pad_op.outputs[0];
    auto r = readers.find(out);
    if (is_output[out] || r == readers.end() || r->second.empty()) continue;
    // Every reader must take the pad; build all rewrites before changing any op.
    std::vector<std::vector<uint32_t>> rewritten;
    for (size_t c : r->second) {
      auto in = explicit_form(model, model.operations[c], out, pad_op.inputs[0], *pad);
      if (!in) break;
      rewritten.push_back(std::move(*in));
    }
    if (rewritten.size() != r->second.size()) continue;  // the scalars added stay unused: harmless
    for (size_t j = 0; j < rewritten.size(); ++j) {
      const size_t c = r->second[j];
      model.operations[c].inputs = std::move(rewritten[j]);
      readers[pad_op.inputs[0]].push_back(c);
    }
    readers.erase(out);
    drop[k] = true;
    ++folded;
  }
  if (folded) {
    std::vector<Operation> kept;
    kept.reserve(model.operations.size() - folded);
    for (size_t k = 0; k < model.operations.size(); ++k)
      if (!drop[k]) kept.push_back(std::move(model.operations[k]));
    model.operations = std::move(kept);
  }
  return folded;
}

}  // namespace nn

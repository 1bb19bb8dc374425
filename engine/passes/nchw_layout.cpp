#include "passes/nchw_layout.h"

#include <algorithm>
#include <map>
#include <set>

namespace nn {

namespace {

bool has_layout_input(OperationType t) {
  switch (t) {
    case OperationType::CONV_2D:
    case OperationType::DEPTHWISE_CONV_2D:
    case OperationType::GROUPED_CONV_2D:
    case OperationType::AVERAGE_POOL_2D:
    case OperationType::MAX_POOL_2D:
    case OperationType::RESIZE_BILINEAR:
    case OperationType::RESIZE_NEAREST_NEIGHBOR:
    case OperationType::TRANSPOSE_CONV_2D:
    case OperationType::DEPTH_TO_SPACE:
    case OperationType::SPACE_TO_DEPTH:
      return true;
    default:
      return false;
  }
}

// The layout input: the first BOOL operand after the data input (align_corners and
// half_pixel_centers, also BOOL, come after it).
int layout_index(const Model& m, const Operation& op) {
  for (size_t j = 1; j < op.inputs.size(); ++j)
    if (m.operands[op.inputs[j]].type == OperandType::BOOL) return static_cast<int>(j);
  return -1;
}

constexpr int32_t kToNhwc[4] = {0, 2, 3, 1};
constexpr int32_t kToNchw[4] = {0, 3, 1, 2};

// Ops that compute element by element, so they commute with a transpose.
bool is_elementwise(OperationType t) {
  switch (t) {
    case OperationType::RELU:
    case OperationType::RELU1:
    case OperationType::RELU6:
    case OperationType::LOGISTIC:
    case OperationType::TANH:
    case OperationType::HARD_SWISH:
    case OperationType::ADD:
    case OperationType::SUB:
    case OperationType::MUL:
    case OperationType::DIV:
    case OperationType::MAXIMUM:
    case OperationType::MINIMUM:
      return true;
    default:
      return false;
  }
}

bool is_permutation(const Model& m, uint32_t operand, const int32_t (&perm)[4]) {
  const Operand& p = m.operands[operand];
  if (!p.is_constant() || p.type != OperandType::TENSOR_INT32 || p.length != sizeof perm) return false;
  return std::equal(perm, perm + 4, p.as<int32_t>());
}

}  // namespace

std::vector<Operation> nhwc_ops_for(Model& model, const Operation& op) {
  if (!has_layout_input(op.type) || op.inputs.empty() || op.outputs.size() != 1) return {op};
  const int li = layout_index(model, op);
  if (li < 0 || !model.operands[op.inputs[li]].is_constant() || !model.scalar_bool(op.inputs[li])) return {op};
  // TRANSPOSE_CONV_2D's implicit form gives its output shape in the op's layout: left as is.
  if (op.type == OperationType::TRANSPOSE_CONV_2D && model.operands[op.inputs[3]].type == OperandType::TENSOR_INT32)
    return {op};
  const Operand in = model.operands[op.inputs[0]];
  if (!in.dims.empty() && in.dims.size() != 4) return {op};
  const Operand out = model.operands[op.outputs[0]];

  auto temporary_like = [&](const Operand& like, const std::string& suffix) {
    Operand t;
    t.type = like.type;
    t.scale = like.scale;
    t.zero_point = like.zero_point;
    t.name = like.name + suffix;
    return model.add_operand(std::move(t));
  };
  const uint32_t to_nhwc = model.add_constant_i32({4}, kToNhwc, "nchw_to_nhwc");
  const uint32_t to_nchw = model.add_constant_i32({4}, kToNchw, "nhwc_to_nchw");
  const uint32_t nhwc_in = temporary_like(in, "/nhwc");
  const uint32_t nhwc_out = temporary_like(out, "/nhwc");
  Operation inner = op;
  inner.inputs[0] = nhwc_in;
  inner.inputs[static_cast<size_t>(li)] = model.add_scalar_bool(false);
  inner.outputs[0] = nhwc_out;
  return {Operation{OperationType::TRANSPOSE, {op.inputs[0], to_nhwc}, {nhwc_in}}, inner,
          Operation{OperationType::TRANSPOSE, {nhwc_out, to_nchw}, {op.outputs[0]}}};
}

size_t rewrite_nchw_layout(Model& model) {
  size_t rewritten = 0;
  std::vector<Operation> ops;
  const std::vector<Operation> original = model.operations;
  for (const Operation& op : original) {
    std::vector<Operation> replaced = nhwc_ops_for(model, op);
    if (replaced.size() > 1) ++rewritten;
    ops.insert(ops.end(), replaced.begin(), replaced.end());
  }
  // An elementwise op whose tensor inputs all come from TRANSPOSE(to NCHW) runs on the
  // NHWC tensors instead, and its result is transposed: the transposes sink towards the
  // next NCHW op, where they cancel.
  {
    std::vector<Operation> sunk;
    std::map<uint32_t, size_t> made_by;  // operand -> index in `sunk`
    for (const Operation& op : ops) {
      bool sink = is_elementwise(op.type) && op.outputs.size() == 1;
      std::vector<uint32_t> nhwc_inputs = op.inputs;
      for (size_t j = 0; sink && j < op.inputs.size(); ++j) {
        const Operand& in = model.operands[op.inputs[j]];
        if (!is_tensor_type(in.type) && in.is_constant()) continue;  // the fused activation scalar
        auto p = made_by.find(op.inputs[j]);
        sink = p != made_by.end() && sunk[p->second].type == OperationType::TRANSPOSE &&
               is_permutation(model, sunk[p->second].inputs[1], kToNchw);
        if (sink) nhwc_inputs[j] = sunk[p->second].inputs[0];
      }
      if (!sink) {
        for (uint32_t o : op.outputs) made_by[o] = sunk.size();
        sunk.push_back(op);
        continue;
      }
      Operand t;
      t.type = model.operands[op.outputs[0]].type;
      t.scale = model.operands[op.outputs[0]].scale;
      t.zero_point = model.operands[op.outputs[0]].zero_point;
      t.name = model.operands[op.outputs[0]].name + "/nhwc";
      const uint32_t nhwc_out = model.add_operand(std::move(t));
      made_by[nhwc_out] = sunk.size();
      sunk.push_back({op.type, nhwc_inputs, {nhwc_out}});
      made_by[op.outputs[0]] = sunk.size();
      sunk.push_back({OperationType::TRANSPOSE, {nhwc_out, model.add_constant_i32({4}, kToNchw, "nhwc_to_nchw")},
                      {op.outputs[0]}});
    }
    ops = std::move(sunk);
  }
  // TRANSPOSE(to NCHW) read only by a TRANSPOSE(to NHWC): the second's readers read the
  // first's input instead, and both go once nothing reads them.
  std::map<uint32_t, size_t> producer;
  for (size_t k = 0; k < ops.size(); ++k) producer[ops[k].outputs[0]] = k;
  const std::set<uint32_t> outputs(model.outputs.begin(), model.outputs.end());
  std::map<uint32_t, uint32_t> forward;  // operand -> the equal operand to read instead
  for (const Operation& op : ops) {
    if (op.type != OperationType::TRANSPOSE || op.inputs.size() != 2 || !is_permutation(model, op.inputs[1], kToNhwc))
      continue;
    auto p = producer.find(op.inputs[0]);
    if (p == producer.end()) continue;
    const Operation& first = ops[p->second];
    if (first.type != OperationType::TRANSPOSE || !is_permutation(model, first.inputs[1], kToNchw)) continue;
    if (!outputs.count(op.outputs[0])) forward[op.outputs[0]] = first.inputs[0];
  }
  for (Operation& op : ops)
    for (uint32_t& i : op.inputs)
      for (auto f = forward.find(i); f != forward.end(); f = forward.find(i)) i = f->second;
  // Drop ops nothing reads (repeat: dropping one can orphan its producer).
  for (bool changed = true; changed;) {
    changed = false;
    std::set<uint32_t> read(outputs);
    for (const Operation& op : ops) read.insert(op.inputs.begin(), op.inputs.end());
    auto dead = [&](const Operation& op) {
      return std::none_of(op.outputs.begin(), op.outputs.end(), [&](uint32_t o) { return read.count(o) > 0; });
    };
    const size_t before = ops.size();
    ops.erase(std::remove_if(ops.begin(), ops.end(), dead), ops.end());
    changed = ops.size() != before;
  }
  model.operations = std::move(ops);
  return rewritten;
}

}  // namespace nn

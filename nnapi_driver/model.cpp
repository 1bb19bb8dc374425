// ANeuralNetworksModel_*: the app's calls become an nn::Model, checked as Android's
// runtime checks them (NeuralNetworks.h's rules): BAD_DATA for what the specification
// does not allow at this feature level, BAD_STATE for a call after finish,
// UNEXPECTED_NULL for a missing pointer. Values of 128 bytes or less are copied; larger
// ones are referenced and must outlive the model, as the specification says.
#include <algorithm>
#include <cstring>
#include <functional>
#include <map>

#include "delegates/nnapi/nnapi_feature_levels.h"
#include "driver_internal.h"
#include "nn/ops/registry.h"
#include "passes/nchw_layout.h"

using namespace nnpipe_driver;
using nn::Lifetime;
using nn::OperandType;
using nn::OperationType;

namespace {

bool is_scalar_type(int32_t t) {
  return t == 0 || t == 1 || t == 2 || t == 6 || t == 10;
}

std::string op_name(int32_t type) { return std::string(nn::operation_type_name(static_cast<OperationType>(type))); }

// Operand counts the specification allows per operation (all levels together; the
// level of a longer list is checked by signature_feature_level). Ops not listed are
// checked by the engine's validation at finish.
bool input_count_allowed(int32_t op, uint32_t n, uint32_t outputs, std::string* why) {
  auto want = [&](std::initializer_list<uint32_t> counts, uint32_t outs) {
    if (outputs != outs) {
      *why = op_name(op) + " takes " + std::to_string(outs) + " output(s), got " + std::to_string(outputs);
      return false;
    }
    if (std::find(counts.begin(), counts.end(), n) != counts.end()) return true;
    *why = op_name(op) + ": " + std::to_string(n) + " inputs is not an operand list the specification allows";
    return false;
  };
  switch (static_cast<OperationType>(op)) {
    case OperationType::ADD:
    case OperationType::SUB:
    case OperationType::MUL:
    case OperationType::DIV:
      return want({3}, 1);
    case OperationType::CONV_2D:
      return want({7, 8, 10, 11, 13}, 1);
    case OperationType::DEPTHWISE_CONV_2D:
      return want({8, 9, 11, 12, 14}, 1);
    case OperationType::AVERAGE_POOL_2D:
    case OperationType::MAX_POOL_2D:
      return want({7, 8, 10, 11}, 1);
    case OperationType::FULLY_CONNECTED:
      return want({4}, 1);
    case OperationType::RELU:
    case OperationType::RELU1:
    case OperationType::RELU6:
    case OperationType::LOGISTIC:
    case OperationType::TANH:
    case OperationType::FLOOR:
    case OperationType::HARD_SWISH:
    case OperationType::ABS:
    case OperationType::EXP:
    case OperationType::LOG:
    case OperationType::NEG:
    case OperationType::SQRT:
    case OperationType::RSQRT:
    case OperationType::SIN:
    case OperationType::DEQUANTIZE:
    case OperationType::QUANTIZE:
      return want({1}, 1);
    case OperationType::RESHAPE:
    case OperationType::PAD:
      return want({2}, 1);
    case OperationType::SOFTMAX:
      return want({2, 3}, 1);
    case OperationType::MEAN:
      return want({3}, 1);
    case OperationType::RESIZE_BILINEAR:
    case OperationType::RESIZE_NEAREST_NEIGHBOR:
      return want({3, 4, 5, 6}, 1);
    case OperationType::TRANSPOSE:
      return want({1, 2}, 1);
    case OperationType::TRANSPOSE_CONV_2D:
      return want({9, 11}, 1);
    case OperationType::CONCATENATION:
      if (n < 2 || outputs != 1) {
        *why = "CONCATENATION takes at least one tensor and an axis, and one output";
        return false;
      }
      return true;
    default:
      return true;
  }
}

int check_operand_type(const ANeuralNetworksOperandType& t, std::string* why) {
  const int level = nn::nnapi::operand_type_feature_level(t.type);
  if (level == 0) {
    *why = "operand type " + std::to_string(t.type) + " is not an NNAPI type";
    return ANEURALNETWORKS_BAD_DATA;
  }
  if (level > feature_level()) {
    *why = "operand type " + std::string(nn::operand_type_name(static_cast<OperandType>(t.type))) +
           " needs feature level " + std::to_string(level) + " (driver has " + std::to_string(feature_level()) + ")";
    return ANEURALNETWORKS_BAD_DATA;
  }
  if (is_scalar_type(t.type)) {
    if (t.dimensionCount != 0) {
      *why = "a scalar operand must have dimensionCount 0";
      return ANEURALNETWORKS_BAD_DATA;
    }
  } else if (t.dimensionCount != 0 && t.dimensions == nullptr) {
    *why = "dimensionCount " + std::to_string(t.dimensionCount) + " with null dimensions";
    return ANEURALNETWORKS_BAD_DATA;
  }
  const auto type = static_cast<OperandType>(t.type);
  if (type == OperandType::TENSOR_QUANT8_ASYMM && (t.scale <= 0 || t.zeroPoint < 0 || t.zeroPoint > 255)) {
    *why = "TENSOR_QUANT8_ASYMM needs scale > 0 and zeroPoint in [0, 255]";
    return ANEURALNETWORKS_BAD_DATA;
  }
  if (type == OperandType::TENSOR_QUANT8_ASYMM_SIGNED && (t.scale <= 0 || t.zeroPoint < -128 || t.zeroPoint > 127)) {
    *why = "TENSOR_QUANT8_ASYMM_SIGNED needs scale > 0 and zeroPoint in [-128, 127]";
    return ANEURALNETWORKS_BAD_DATA;
  }
  if ((type == OperandType::TENSOR_FLOAT32 || type == OperandType::TENSOR_FLOAT16 || is_scalar_type(t.type)) &&
      (t.scale != 0.f || t.zeroPoint != 0)) {
    *why = std::string(nn::operand_type_name(type)) + " must have scale 0 and zeroPoint 0";
    return ANEURALNETWORKS_BAD_DATA;
  }
  return ANEURALNETWORKS_NO_ERROR;
}

// Orders the app's ops so every input is produced before it is read. false on a cycle.
bool topological_order(const ANeuralNetworksModel& m, std::vector<uint32_t>* order) {
  const nn::Model& ir = m.ir;
  std::map<uint32_t, uint32_t> producer;
  for (uint32_t k = 0; k < ir.operations.size(); ++k)
    for (uint32_t o : ir.operations[k].outputs) producer[o] = k;
  std::vector<int> state(ir.operations.size(), 0);  // 0 new, 1 on stack, 2 done
  order->clear();
  std::function<bool(uint32_t)> visit = [&](uint32_t k) {
    if (state[k] == 2) return true;
    if (state[k] == 1) return false;
    state[k] = 1;
    for (uint32_t o : ir.operations[k].inputs) {
      auto it = producer.find(o);
      if (it != producer.end() && !visit(it->second)) return false;
    }
    state[k] = 2;
    order->push_back(k);
    return true;
  };
  for (uint32_t k = 0; k < ir.operations.size(); ++k)
    if (!visit(k)) return false;
  return true;
}

// Runs the engine's validation op by op in run order. An op the engine cannot run (not
// implemented, or an operand list it does not take) is recorded, not an error: devices
// report it unsupported, as a driver reports an op it lacks.
void validate_with_engine(ANeuralNetworksModel& m) {
  auto model = std::make_shared<nn::Model>();
  model->operands = m.ir.operands;
  model->inputs = m.ir.inputs;
  model->outputs = m.ir.outputs;
  model->metadata.source_file = "NNAPI model";
  m.op_problem.assign(m.ir.operations.size(), "");
  std::vector<bool> known(model->operands.size(), false);  // the app's operands only
  for (uint32_t i = 0; i < model->operands.size(); ++i) {
    const nn::Operand& o = model->operands[i];
    known[i] = o.lifetime == Lifetime::CONSTANT || o.lifetime == Lifetime::NO_VALUE ||
               o.lifetime == Lifetime::MODEL_INPUT;
  }
  const nn::OpRegistry& registry = nn::OpRegistry::instance();
  bool all_ok = true;
  for (uint32_t k : m.run_order) {
    const nn::Operation& op = m.ir.operations[k];
    std::string problem;
    for (uint32_t i : op.inputs)
      if (!known[i]) problem = "reads operand " + std::to_string(i) + ", which an unsupported op produces";
    const nn::OpDef* def = registry.find(op.type);
    if (problem.empty() && (!def || nn::is_extension(op.type)))
      problem = op_name(static_cast<int32_t>(op.type)) + " is not implemented by nnpipe's kernels";
    if (problem.empty()) {
      // NCHW ops run as TRANSPOSE -> the NHWC op -> TRANSPOSE (the kernels are NHWC).
      for (const nn::Operation& step : nn::nhwc_ops_for(*model, op)) {
        nn::Status s = registry.find(step.type)->prepare(*model, step);
        if (!s.is_ok()) {
          problem = s.message();
          break;
        }
        model->operations.push_back(step);
      }
    }
    if (!problem.empty()) {
      m.op_problem[k] = problem;
      all_ok = false;
      continue;
    }
    for (uint32_t o : op.outputs) known[o] = true;
  }
  if (all_ok) {
    for (uint32_t o : model->outputs)
      if (model->operands[o].lifetime != Lifetime::MODEL_INPUT) model->operands[o].lifetime = Lifetime::MODEL_OUTPUT;
    m.validated = model;
  }
}

}  // namespace

namespace nnpipe_driver {

std::string device_refuses(const ANeuralNetworksDevice& device, const ANeuralNetworksModel& m, size_t k) {
  const nn::Operation& op = m.ir.operations[k];
  const int32_t type = static_cast<int32_t>(op.type);
  if (!device.config.all_ops && !device.config.ops.count(type))
    return device.config.name + " is configured without " + op_name(type);
  std::vector<int32_t> input_types;
  for (uint32_t i : op.inputs) input_types.push_back(static_cast<int32_t>(m.ir.operands[i].type));
  std::string why = nn::nnapi::signature_level_reason(type, input_types, device.config.level);
  if (!why.empty()) return why;
  if (k >= m.op_problem.size()) return "model not finished";
  return m.op_problem[k];
}

bool device_supports(const ANeuralNetworksDevice& device, const ANeuralNetworksModel& m, size_t k) {
  return device_refuses(device, m, k).empty();
}

}  // namespace nnpipe_driver

extern "C" {

int ANeuralNetworksModel_create(ANeuralNetworksModel** model) {
  if (!model) return fail(ANEURALNETWORKS_UNEXPECTED_NULL, "Model_create: model is null");
  *model = new ANeuralNetworksModel;
  ++counters().live_models;
  return ANEURALNETWORKS_NO_ERROR;
}

void ANeuralNetworksModel_free(ANeuralNetworksModel* model) {
  if (!model) return;
  delete model;
  --counters().live_models;
}

int ANeuralNetworksModel_addOperand(ANeuralNetworksModel* model, const ANeuralNetworksOperandType* type) {
  if (!model || !type) return fail(ANEURALNETWORKS_UNEXPECTED_NULL, "Model_addOperand: null argument");
  if (model->finished) return fail(ANEURALNETWORKS_BAD_STATE, "Model_addOperand: model already finished");
  std::string why;
  if (int code = check_operand_type(*type, &why); code != ANEURALNETWORKS_NO_ERROR) {
    model->invalid = true;
    return fail(code, "Model_addOperand: " + why);
  }
  nn::Operand o;
  o.type = static_cast<OperandType>(type->type);
  if (type->dimensionCount) o.dims.assign(type->dimensions, type->dimensions + type->dimensionCount);
  o.scale = type->scale;
  o.zero_point = type->zeroPoint;
  o.name = "operand " + std::to_string(model->ir.operands.size());
  model->ir.add_operand(std::move(o));
  model->value_set.push_back(false);
  model->written_by_op.push_back(false);
  return ANEURALNETWORKS_NO_ERROR;
}

int ANeuralNetworksModel_setOperandValue(ANeuralNetworksModel* model, int32_t index, const void* buffer,
                                         size_t length) {
  if (!model) return fail(ANEURALNETWORKS_UNEXPECTED_NULL, "Model_setOperandValue: model is null");
  if (model->finished) return fail(ANEURALNETWORKS_BAD_STATE, "Model_setOperandValue: model already finished");
  if (index < 0 || static_cast<size_t>(index) >= model->ir.operands.size())
    return fail(ANEURALNETWORKS_BAD_DATA, "Model_setOperandValue: invalid operand index " + std::to_string(index));
  nn::Operand& o = model->ir.operands[index];
  if (buffer == nullptr) {
    if (length != 0)
      return fail(ANEURALNETWORKS_BAD_DATA, "Model_setOperandValue: null buffer with length " + std::to_string(length));
    o.lifetime = Lifetime::NO_VALUE;  // an omitted optional operand
    o.data = nullptr;
    o.length = 0;
    o.keepalive.reset();
    model->value_set[index] = true;
    return ANEURALNETWORKS_NO_ERROR;
  }
  const size_t want = nn::is_tensor_type(o.type) ? o.byte_size() : nn::element_size(o.type);
  const bool dims_known = !nn::is_tensor_type(o.type) ||
                          (!o.dims.empty() && std::find(o.dims.begin(), o.dims.end(), 0u) == o.dims.end());
  if (!dims_known)
    return fail(ANEURALNETWORKS_BAD_DATA, "Model_setOperandValue: operand " + std::to_string(index) +
                                              " has unspecified dimensions");
  if (length != want)
    return fail(ANEURALNETWORKS_BAD_DATA, "Model_setOperandValue: operand " + std::to_string(index) + " needs " +
                                              std::to_string(want) + " bytes, got " + std::to_string(length));
  o.lifetime = Lifetime::CONSTANT;
  o.length = length;
  if (length <= ANEURALNETWORKS_MAX_SIZE_OF_IMMEDIATELY_COPIED_VALUES) {
    auto copy = std::shared_ptr<uint8_t[]>(new uint8_t[std::max<size_t>(length, 64)]());
    std::memcpy(copy.get(), buffer, length);
    o.data = copy.get();
    o.keepalive = std::shared_ptr<const void>(copy, copy.get());
  } else {
    o.data = static_cast<const uint8_t*>(buffer);  // referenced: the app keeps it alive
    o.keepalive.reset();
  }
  model->value_set[index] = true;
  return ANEURALNETWORKS_NO_ERROR;
}

int ANeuralNetworksModel_setOperandSymmPerChannelQuantParams(
    ANeuralNetworksModel* model, int32_t index, const ANeuralNetworksSymmPerChannelQuantParams* params) {
  if (!model || !params) return fail(ANEURALNETWORKS_UNEXPECTED_NULL, "setOperandSymmPerChannelQuantParams: null");
  if (model->finished) return fail(ANEURALNETWORKS_BAD_STATE, "setOperandSymmPerChannelQuantParams: finished");
  if (index < 0 || static_cast<size_t>(index) >= model->ir.operands.size())
    return fail(ANEURALNETWORKS_BAD_DATA, "setOperandSymmPerChannelQuantParams: invalid index");
  nn::Operand& o = model->ir.operands[index];
  if (o.type != OperandType::TENSOR_QUANT8_SYMM_PER_CHANNEL || params->channelDim >= o.dims.size() ||
      params->scaleCount != o.dims[params->channelDim] || (params->scaleCount && !params->scales))
    return fail(ANEURALNETWORKS_BAD_DATA, "setOperandSymmPerChannelQuantParams: does not match the operand");
  o.channel_quant.channel_dim = params->channelDim;
  o.channel_quant.scales.assign(params->scales, params->scales + params->scaleCount);
  return ANEURALNETWORKS_NO_ERROR;
}

int ANeuralNetworksModel_addOperation(ANeuralNetworksModel* model, ANeuralNetworksOperationType type,
                                      uint32_t inputCount, const uint32_t* inputs, uint32_t outputCount,
                                      const uint32_t* outputs) {
  if (!model || (inputCount && !inputs) || (outputCount && !outputs))
    return fail(ANEURALNETWORKS_UNEXPECTED_NULL, "Model_addOperation: null argument");
  if (model->finished) return fail(ANEURALNETWORKS_BAD_STATE, "Model_addOperation: model already finished");
  auto refuse = [&](const std::string& why) {
    model->invalid = true;
    return fail(ANEURALNETWORKS_BAD_DATA, "Model_addOperation " + op_name(type) + ": " + why);
  };
  const int op_level = nn::nnapi::operation_feature_level(type);
  if (op_level == 0) return refuse("operation code " + std::to_string(type) + " is not an NNAPI operation");
  const uint32_t n = static_cast<uint32_t>(model->ir.operands.size());
  std::vector<int32_t> input_types;
  for (uint32_t j = 0; j < inputCount; ++j) {
    if (inputs[j] >= n) return refuse("input " + std::to_string(j) + " is operand " + std::to_string(inputs[j]) + " of " + std::to_string(n));
    input_types.push_back(static_cast<int32_t>(model->ir.operands[inputs[j]].type));
  }
  for (uint32_t j = 0; j < outputCount; ++j) {
    if (outputs[j] >= n) return refuse("output " + std::to_string(j) + " is operand " + std::to_string(outputs[j]) + " of " + std::to_string(n));
    if (model->written_by_op[outputs[j]]) return refuse("output operand " + std::to_string(outputs[j]) + " is already written by another operation");
    if (model->value_set[outputs[j]]) return refuse("output operand " + std::to_string(outputs[j]) + " has a constant value");
  }
  std::string why = nn::nnapi::signature_level_reason(type, input_types, feature_level());
  if (!why.empty()) return refuse(why);
  if (!input_count_allowed(type, inputCount, outputCount, &why)) return refuse(why);
  if (inputCount && !nn::is_tensor_type(model->ir.operands[inputs[0]].type)) return refuse("input 0 must be a tensor");
  for (uint32_t j = 0; j < outputCount; ++j) model->written_by_op[outputs[j]] = true;
  model->ir.operations.push_back(
      {static_cast<OperationType>(type), std::vector<uint32_t>(inputs, inputs + inputCount),
       std::vector<uint32_t>(outputs, outputs + outputCount)});
  return ANEURALNETWORKS_NO_ERROR;
}

int ANeuralNetworksModel_identifyInputsAndOutputs(ANeuralNetworksModel* model, uint32_t inputCount,
                                                  const uint32_t* inputs, uint32_t outputCount,
                                                  const uint32_t* outputs) {
  if (!model || (inputCount && !inputs) || (outputCount && !outputs))
    return fail(ANEURALNETWORKS_UNEXPECTED_NULL, "Model_identifyInputsAndOutputs: null argument");
  if (model->finished) return fail(ANEURALNETWORKS_BAD_STATE, "Model_identifyInputsAndOutputs: model already finished");
  const uint32_t n = static_cast<uint32_t>(model->ir.operands.size());
  for (uint32_t j = 0; j < inputCount; ++j)
    if (inputs[j] >= n || model->value_set[inputs[j]] || model->written_by_op[inputs[j]]) {
      model->invalid = true;
      return fail(ANEURALNETWORKS_BAD_DATA, "Model_identifyInputsAndOutputs: input " + std::to_string(j) +
                                                " is out of range, a constant or an operation's output");
    }
  for (uint32_t j = 0; j < outputCount; ++j)
    if (outputs[j] >= n || model->value_set[outputs[j]]) {
      model->invalid = true;
      return fail(ANEURALNETWORKS_BAD_DATA, "Model_identifyInputsAndOutputs: output " + std::to_string(j) + " is out of range or a constant");
    }
  model->ir.inputs.assign(inputs, inputs + inputCount);
  model->ir.outputs.assign(outputs, outputs + outputCount);
  for (uint32_t i : model->ir.inputs) model->ir.operands[i].lifetime = Lifetime::MODEL_INPUT;
  for (uint32_t o : model->ir.outputs) model->ir.operands[o].lifetime = Lifetime::MODEL_OUTPUT;
  model->identified = true;
  return ANEURALNETWORKS_NO_ERROR;
}

int ANeuralNetworksModel_relaxComputationFloat32toFloat16(ANeuralNetworksModel* model, bool allow) {
  if (!model) return fail(ANEURALNETWORKS_UNEXPECTED_NULL, "relaxComputationFloat32toFloat16: model is null");
  if (model->finished) return fail(ANEURALNETWORKS_BAD_STATE, "relaxComputationFloat32toFloat16: model already finished");
  model->relaxed = allow;  // permission, not an obligation: the reference kernels stay fp32
  return ANEURALNETWORKS_NO_ERROR;
}

int ANeuralNetworksModel_finish(ANeuralNetworksModel* model) {
  if (!model) return fail(ANEURALNETWORKS_UNEXPECTED_NULL, "Model_finish: model is null");
  if (model->finished) return fail(ANEURALNETWORKS_BAD_STATE, "Model_finish: model already finished");
  if (model->invalid) return fail(ANEURALNETWORKS_BAD_STATE, "Model_finish: an earlier call on this model failed");
  if (!model->identified || model->ir.inputs.empty() || model->ir.outputs.empty())
    return fail(ANEURALNETWORKS_BAD_DATA, "Model_finish: inputs and outputs not identified");
  for (uint32_t i = 0; i < model->ir.operands.size(); ++i) {
    const nn::Operand& o = model->ir.operands[i];
    if (o.lifetime == Lifetime::TEMPORARY || o.lifetime == Lifetime::MODEL_OUTPUT)
      if (!model->written_by_op[i])
        return fail(ANEURALNETWORKS_BAD_DATA, "Model_finish: operand " + std::to_string(i) +
                                                  " has no value, is no input and no operation writes it");
  }
  if (!topological_order(*model, &model->run_order))
    return fail(ANEURALNETWORKS_BAD_DATA, "Model_finish: the operations form a cycle");
  validate_with_engine(*model);
  model->finished = true;
  return ANEURALNETWORKS_NO_ERROR;
}

}  // extern "C"

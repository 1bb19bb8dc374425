// ANeuralNetworksExecution_*, events and bursts: an execution binds the app's buffers,
// runs the compilation's Session once and reports output dimensions. startCompute runs
// the model before it returns and hands back an already-signalled event: the
// specification allows that, and it keeps one code path for every way to compute.
#include <algorithm>
#include <cstring>
#include <thread>

#include "driver_internal.h"

using namespace nnpipe_driver;
using State = ANeuralNetworksExecution::State;

namespace {

bool fully_specified(const std::vector<uint32_t>& dims) {
  return !dims.empty() && std::find(dims.begin(), dims.end(), 0u) == dims.end();
}

// The operand as the app declared it (dims may hold 0 = unknown) and as inferred.
const nn::Operand& declared(const ANeuralNetworksExecution* e, uint32_t operand) {
  return e->compilation->model->ir.operands[operand];
}

int check_type_matches(const nn::Operand& declared_operand, const nn::Operand& inferred,
                       const ANeuralNetworksOperandType* type, const char* what, int32_t index) {
  if (!type) return ANEURALNETWORKS_NO_ERROR;
  const std::string where = std::string(what) + " " + std::to_string(index);
  if (type->type != static_cast<int32_t>(declared_operand.type))
    return fail(ANEURALNETWORKS_BAD_DATA, where + ": type does not match the model's operand");
  if (type->dimensionCount && !type->dimensions) return fail(ANEURALNETWORKS_UNEXPECTED_NULL, where + ": null dimensions");
  if (type->dimensionCount == 0) return ANEURALNETWORKS_NO_ERROR;
  if (type->dimensionCount != inferred.dims.size())
    return fail(ANEURALNETWORKS_BAD_DATA, where + ": rank does not match the model's operand");
  for (uint32_t d = 0; d < type->dimensionCount; ++d)
    if (type->dimensions[d] != inferred.dims[d])
      return fail(ANEURALNETWORKS_BAD_DATA, where + ": dimensions do not match the model's operand");
  return ANEURALNETWORKS_NO_ERROR;
}

int bind(ANeuralNetworksExecution* e, bool input, int32_t index, const ANeuralNetworksOperandType* type,
         const void* buffer, size_t length) {
  const char* what = input ? "Execution_setInput" : "Execution_setOutput";
  if (!e) return fail(ANEURALNETWORKS_UNEXPECTED_NULL, std::string(what) + ": execution is null");
  if (e->state != State::kPreparation) return fail(ANEURALNETWORKS_BAD_STATE, std::string(what) + ": execution already computed");
  if (!buffer && length) return fail(ANEURALNETWORKS_UNEXPECTED_NULL, std::string(what) + ": null buffer");
  const nn::Model& validated = *e->compilation->model->validated;
  const auto& list = input ? validated.inputs : validated.outputs;
  if (index < 0 || static_cast<size_t>(index) >= list.size())
    return fail(ANEURALNETWORKS_BAD_DATA, std::string(what) + ": index " + std::to_string(index) + " out of range");
  const uint32_t operand = list[index];
  const nn::Operand& inferred = validated.operands[operand];
  if (int code = check_type_matches(declared(e, operand), inferred, type, what, index); code != ANEURALNETWORKS_NO_ERROR)
    return code;
  const size_t need = inferred.byte_size();
  if (input && length != need)
    return fail(ANEURALNETWORKS_BAD_DATA, std::string(what) + " " + std::to_string(index) + ": " +
                                              std::to_string(length) + " bytes, operand needs " + std::to_string(need));
  // An output the app declared with every dimension is checked now; one it left
  // unspecified is checked after computing (OUTPUT_INSUFFICIENT_SIZE).
  if (!input && fully_specified(declared(e, operand).dims) && length < need)
    return fail(ANEURALNETWORKS_BAD_DATA, std::string(what) + " " + std::to_string(index) + ": " +
                                              std::to_string(length) + " bytes, operand needs " + std::to_string(need));
  auto& b = (input ? e->inputs : e->outputs)[index];
  b.set = true;
  b.in = buffer;
  b.out = const_cast<void*>(buffer);
  b.length = length;
  return ANEURALNETWORKS_NO_ERROR;
}

int compute(ANeuralNetworksExecution* e) {
  if (!e) return fail(ANEURALNETWORKS_UNEXPECTED_NULL, "Execution_compute: execution is null");
  if (e->state != State::kPreparation) return fail(ANEURALNETWORKS_BAD_STATE, "Execution_compute: execution already computed");
  for (size_t i = 0; i < e->inputs.size(); ++i)
    if (!e->inputs[i].set) return fail(ANEURALNETWORKS_BAD_DATA, "Execution_compute: input " + std::to_string(i) + " not set");
  for (size_t i = 0; i < e->outputs.size(); ++i)
    if (!e->outputs[i].set) return fail(ANEURALNETWORKS_BAD_DATA, "Execution_compute: output " + std::to_string(i) + " not set");
  e->state = State::kComputing;
  ANeuralNetworksCompilation* c = e->compilation;
  ANeuralNetworksDevice& device = *c->chosen;
  const nn::Model& validated = *c->model->validated;
  auto finish = [&](int code, const std::string& why) {
    e->state = State::kCompleted;
    e->result = code;
    return code == ANEURALNETWORKS_NO_ERROR ? code : fail(code, "Execution_compute on " + device.config.name + ": " + why);
  };
  const auto t0 = std::chrono::steady_clock::now();
  const int64_t run = ++device.runs;
  ++counters().executions_run;
  std::lock_guard<std::mutex> lock(c->run_mu);
  for (size_t i = 0; i < e->inputs.size(); ++i) {
    nn::Status s = c->session->set_input(i, e->inputs[i].in, e->inputs[i].length);
    if (!s.is_ok()) return finish(ANEURALNETWORKS_BAD_DATA, s.to_string());
  }
  if (device.config.slow_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(device.config.slow_ms));
  if (device.config.fail_run_every > 0 && run % device.config.fail_run_every == 0)
    return finish(ANEURALNETWORKS_OP_FAILED, "set to fail every " + std::to_string(device.config.fail_run_every) + " runs");
  nn::Status s = c->session->run();
  if (!s.is_ok()) return finish(ANEURALNETWORKS_OP_FAILED, s.to_string());
  const uint64_t elapsed_ns = static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0).count());
  if (e->timeout_ns) {
    const bool forced = device.config.miss_deadline_every > 0 && run % device.config.miss_deadline_every == 0;
    if (forced || elapsed_ns > e->timeout_ns) {
      ++counters().missed_deadlines;
      return finish(ANEURALNETWORKS_MISSED_DEADLINE_TRANSIENT, "missed its " + std::to_string(e->timeout_ns / 1000) + " us deadline");
    }
  }
  e->output_dims.clear();
  bool insufficient = false;
  for (size_t i = 0; i < e->outputs.size(); ++i) {
    const nn::Operand& o = validated.operands[validated.outputs[i]];
    e->output_dims.push_back(o.dims);
    if (e->outputs[i].length < o.byte_size()) {
      insufficient = true;
      continue;
    }
    std::memcpy(e->outputs[i].out, c->session->output_data(i), o.byte_size());
  }
  if (insufficient) return finish(ANEURALNETWORKS_OUTPUT_INSUFFICIENT_SIZE, "an output buffer is too small");
  return finish(ANEURALNETWORKS_NO_ERROR, "");
}

}  // namespace

extern "C" {

int ANeuralNetworksExecution_create(ANeuralNetworksCompilation* compilation, ANeuralNetworksExecution** execution) {
  if (!compilation || !execution) return fail(ANEURALNETWORKS_UNEXPECTED_NULL, "Execution_create: null argument");
  if (!compilation->finished || !compilation->session)
    return fail(ANEURALNETWORKS_BAD_STATE, "Execution_create: compilation not finished (or it failed)");
  auto* e = new ANeuralNetworksExecution;
  e->compilation = compilation;
  e->inputs.resize(compilation->model->validated->inputs.size());
  e->outputs.resize(compilation->model->validated->outputs.size());
  *execution = e;
  ++counters().live_executions;
  return ANEURALNETWORKS_NO_ERROR;
}

void ANeuralNetworksExecution_free(ANeuralNetworksExecution* execution) {
  if (!execution) return;
  delete execution;
  --counters().live_executions;
}

int ANeuralNetworksExecution_setInput(ANeuralNetworksExecution* e, int32_t index, const ANeuralNetworksOperandType* type,
                                      const void* buffer, size_t length) {
  return bind(e, true, index, type, buffer, length);
}

int ANeuralNetworksExecution_setOutput(ANeuralNetworksExecution* e, int32_t index, const ANeuralNetworksOperandType* type,
                                       void* buffer, size_t length) {
  return bind(e, false, index, type, buffer, length);
}

int ANeuralNetworksExecution_setTimeout(ANeuralNetworksExecution* e, uint64_t duration) {
  if (!e) return fail(ANEURALNETWORKS_UNEXPECTED_NULL, "Execution_setTimeout: null");
  if (e->state != State::kPreparation) return fail(ANEURALNETWORKS_BAD_STATE, "Execution_setTimeout: already computed");
  if (!e->compilation->explicit_devices || e->compilation->devices.size() != 1)
    return fail(ANEURALNETWORKS_BAD_DATA, "Execution_setTimeout: needs a compilation for exactly one device");
  e->timeout_ns = duration;
  return ANEURALNETWORKS_NO_ERROR;
}

int ANeuralNetworksExecution_compute(ANeuralNetworksExecution* e) { return compute(e); }

int ANeuralNetworksExecution_startCompute(ANeuralNetworksExecution* e, ANeuralNetworksEvent** event) {
  if (!e || !event) return fail(ANEURALNETWORKS_UNEXPECTED_NULL, "Execution_startCompute: null argument");
  if (e->state != State::kPreparation) return fail(ANEURALNETWORKS_BAD_STATE, "Execution_startCompute: already computed");
  auto* ev = new ANeuralNetworksEvent;
  ev->execution = e;
  ev->result = compute(e);
  *event = ev;
  ++counters().live_events;
  return ANEURALNETWORKS_NO_ERROR;
}

int ANeuralNetworksEvent_wait(ANeuralNetworksEvent* event) {
  if (!event) return fail(ANEURALNETWORKS_UNEXPECTED_NULL, "Event_wait: null");
  return event->result;
}

void ANeuralNetworksEvent_free(ANeuralNetworksEvent* event) {
  if (!event) return;
  delete event;
  --counters().live_events;
}

int ANeuralNetworksExecution_getOutputOperandRank(ANeuralNetworksExecution* e, int32_t index, uint32_t* rank) {
  if (!e || !rank) return fail(ANEURALNETWORKS_UNEXPECTED_NULL, "getOutputOperandRank: null argument");
  if (e->state != State::kCompleted ||
      (e->result != ANEURALNETWORKS_NO_ERROR && e->result != ANEURALNETWORKS_OUTPUT_INSUFFICIENT_SIZE))
    return fail(ANEURALNETWORKS_BAD_STATE, "getOutputOperandRank: execution has not completed successfully");
  if (index < 0 || static_cast<size_t>(index) >= e->output_dims.size())
    return fail(ANEURALNETWORKS_BAD_DATA, "getOutputOperandRank: index out of range");
  *rank = static_cast<uint32_t>(e->output_dims[index].size());
  return ANEURALNETWORKS_NO_ERROR;
}

int ANeuralNetworksExecution_getOutputOperandDimensions(ANeuralNetworksExecution* e, int32_t index, uint32_t* dims) {
  if (!e || !dims) return fail(ANEURALNETWORKS_UNEXPECTED_NULL, "getOutputOperandDimensions: null argument");
  if (e->state != State::kCompleted ||
      (e->result != ANEURALNETWORKS_NO_ERROR && e->result != ANEURALNETWORKS_OUTPUT_INSUFFICIENT_SIZE))
    return fail(ANEURALNETWORKS_BAD_STATE, "getOutputOperandDimensions: execution has not completed successfully");
  if (index < 0 || static_cast<size_t>(index) >= e->output_dims.size())
    return fail(ANEURALNETWORKS_BAD_DATA, "getOutputOperandDimensions: index out of range");
  if (e->output_dims[index].empty()) return fail(ANEURALNETWORKS_BAD_DATA, "getOutputOperandDimensions: a scalar");
  std::copy(e->output_dims[index].begin(), e->output_dims[index].end(), dims);
  return ANEURALNETWORKS_NO_ERROR;
}

int ANeuralNetworksBurst_create(ANeuralNetworksCompilation* compilation, ANeuralNetworksBurst** burst) {
  if (!compilation || !burst) return fail(ANEURALNETWORKS_UNEXPECTED_NULL, "Burst_create: null argument");
  if (!compilation->finished || !compilation->session) return fail(ANEURALNETWORKS_BAD_STATE, "Burst_create: compilation not finished");
  *burst = new ANeuralNetworksBurst{compilation, false};
  ++counters().live_bursts;
  return ANEURALNETWORKS_NO_ERROR;
}

void ANeuralNetworksBurst_free(ANeuralNetworksBurst* burst) {
  if (!burst) return;
  delete burst;
  --counters().live_bursts;
}

int ANeuralNetworksExecution_burstCompute(ANeuralNetworksExecution* e, ANeuralNetworksBurst* burst) {
  if (!e || !burst) return fail(ANEURALNETWORKS_UNEXPECTED_NULL, "burstCompute: null argument");
  if (burst->compilation != e->compilation)
    return fail(ANEURALNETWORKS_BAD_DATA, "burstCompute: burst and execution come from different compilations");
  if (burst->busy) return fail(ANEURALNETWORKS_BAD_STATE, "burstCompute: burst already in use");
  burst->busy = true;
  int code = compute(e);
  burst->busy = false;
  return code;
}

}  // extern "C"

// What every model-reader fuzz target does with a model the reader accepted: the checks a
// hostile file must survive after it has got past the parser.
//  - validate_and_infer_shapes() again: shape inference is where hostile dims and scalar
//    parameters bite (overflowing element counts, negative axes, zero strides).
//  - when every tensor is small, run the whole model with the reference kernels on zeroed
//    inputs: a parameter that validation accepted must not make a kernel read or write
//    outside its buffers. Large models are skipped so one input cannot stall the campaign.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <vector>

#include "nn/ir/model.h"
#include "nn/ops/registry.h"

namespace nn::fuzz {

// Limits for the reference run: small enough that the slowest kernel (a convolution whose
// input, filter and output are all at the per-tensor limit) stays well under a millisecond.
inline constexpr size_t kMaxTensorElements = 4096;
inline constexpr size_t kMaxModelElements = 65536;
inline constexpr size_t kMaxOperations = 64;

// Element count of dims, or SIZE_MAX when it exceeds `limit` (without overflowing).
inline size_t bounded_elements(const Dims& dims, size_t limit) {
  size_t n = 1;
  for (uint32_t d : dims) {
    if (d != 0 && n > limit / d) return SIZE_MAX;
    n *= d;
  }
  return n;
}

inline bool small_enough_to_run(const Model& model) {
  if (model.operations.size() > kMaxOperations) return false;
  size_t total = 0;
  for (const Operand& o : model.operands) {
    const size_t n = bounded_elements(o.dims, kMaxTensorElements);
    if (n == SIZE_MAX) return false;
    total += n;
    if (total > kMaxModelElements) return false;
  }
  return true;
}

// Runs the checks; aborts (a crash libFuzzer records) when the model contradicts itself:
// a model that validated once must validate again.
inline void check_loaded_model(Model& model) {
  if (!model.validate_and_infer_shapes().is_ok()) std::abort();
  (void)model.op_summary();
  if (!small_enough_to_run(model)) return;

  std::vector<std::vector<uint8_t>> in_buffers, out_buffers;
  std::vector<const void*> inputs;
  std::vector<void*> outputs;
  for (uint32_t i : model.inputs) {
    in_buffers.emplace_back(model.operands[i].byte_size() + 1, 0);
    inputs.push_back(in_buffers.back().data());
  }
  for (uint32_t i : model.outputs) {
    out_buffers.emplace_back(model.operands[i].byte_size() + 1, 0);
    outputs.push_back(out_buffers.back().data());
  }
  // A refusal (an op the reference cannot run with these parameters) is fine; memory
  // errors are what the sanitizers are watching for.
  (void)run_reference(model, inputs, outputs);
}

}  // namespace nn::fuzz

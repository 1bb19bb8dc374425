// LayerNorm over the last axis (ConvNeXt's channels-last norm, transformers' token norm)
// as the ONNX importer lowers it, nine ops that each stream the tensor:
//
//   m = MEAN(x, last axis, keep)   d = SUB(x, m)   v = MEAN(POW(d, 2) | MUL(d, d), last axis, keep)
//   y = DIV(d, SQRT(ADD(v, eps)))  [* gamma]  [+ beta]      (gamma, beta: one per channel)
//
// run as one native op that reads each row of x once into cache: its mean, then the mean of
// the squared deviations from it, then y. The CPU delegate's fuse_layer_norm pass matches
// the chain (match_layer_norm) at its first MEAN.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "delegates/cpu/native_data.h"
#include "nn/ir/model.h"

namespace nn::cpu {

// The matched chain: its input, output, constants and the ops after the first MEAN (which
// the first MEAN's record absorbs), in execution order.
struct LayerNormPattern {
  uint32_t x = 0, output = 0;
  size_t rows = 0, channels = 0;
  float epsilon = 0;
  std::vector<float> gamma, beta;  // empty: no MUL / ADD of them
  std::vector<uint32_t> ops;
};

// The chain above starting at MEAN op `mean`, or nullopt. `internal_readers(o)`: the ops
// reading operand o, empty when o is seen outside the partition; `fusable(k)`: op k may be
// absorbed. Every tensor of the chain but x feeds only the next op (d: the square and the
// DIV), the mean is over the last axis only, with keep_dims; the square is POW(d, 2) or
// MUL(d, d); gamma and beta hold one value per channel.
std::optional<LayerNormPattern> match_layer_norm(
    const Model& m, uint32_t mean, const std::function<const void*(uint32_t)>& statics,
    const std::function<std::vector<uint32_t>(uint32_t)>& internal_readers,
    const std::function<bool(uint32_t)>& fusable);

// y = (x - mean) / sqrt(var + eps) * gamma + beta per row of `channels`, rows split over
// the pool; AVX-512, AVX2 or plain C++ by the CPU and `avx512`.
class NativeLayerNorm final : public NativeDataOp {
 public:
  NativeLayerNorm(const LayerNormPattern& p, bool avx512);
  void run(const NativeDataArgs& args) const override;
  const char* kernel() const override { return avx512_ ? "native layer norm AVX-512" : "native layer norm AVX2"; }

 private:
  size_t rows_, channels_;
  float epsilon_;
  std::vector<float> gamma_, beta_;  // filled with 1 and 0 where the model has none
  bool avx512_;
};

}  // namespace nn::cpu

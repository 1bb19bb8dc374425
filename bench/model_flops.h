// Arithmetic work of a model, for GFLOP/s: 2 FLOPs per multiply-add in convolutions and
// matrix products, one per element for element-wise ops.
#pragma once

#include "nn/ir/model.h"

namespace nn::bench {

double model_flops(const Model& model);
double op_flops(const Model& model, uint32_t op_index);

}  // namespace nn::bench

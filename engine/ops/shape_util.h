// Helpers shared by the shape-op files (shape.cpp, pad.cpp, gather.cpp): output dims and
// strides, the checks of their data and parameter inputs, and the PAD / GATHER registrations.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "nn/ir/model.h"
#include "nn/ops/registry.h"
#include "nn/status.h"

namespace nn::shape_util {

constexpr size_t kMaxRank = 8;

Status invalid(std::string message);
std::string i64_list(const std::vector<int64_t>& v);
// Turns computed dims into output Dims: every dim >= 1, the product <= 2^31.
Result<Dims> make_dims(const std::vector<int64_t>& dims);
std::vector<int64_t> to_i64(const Dims& d);
std::vector<int64_t> row_major_strides(const std::vector<int64_t>& dims);
std::string operand_suffix(const Model& m, const Operation& op, size_t index);
// A data input: present, a tensor of a known element size, rank <= max_rank.
Status check_data_input(const Model& m, const Operation& op, size_t index, const char* name,
                        size_t max_rank = kMaxRank);
Result<int32_t> read_scalar_i32(const Model& m, const Operation& op, size_t index, const char* name);
bool is_quantized(OperandType t);
Status check_kernel_buffers(const OpContext& ctx, size_t data_input);

// Called by register_shape_ops: PAD, PAD_V2, MIRROR_PAD (pad.cpp) and GATHER (gather.cpp).
void register_pad_ops(OpRegistry& r);
void register_gather_ops(OpRegistry& r);

}  // namespace nn::shape_util

// int8 ops on XNNPACK's quantized subgraph nodes (Debian's Feb-2022 XNNPACK: no qs8
// hard-swish, non-global average pool or per-channel deconvolution; those stay on the
// reference kernels): TENSOR_QUANT8_ASYMM_SIGNED activations are
// xnn_datatype_qint8 values, so a stretch of quantized ops runs int8 end to end inside one
// XNNPACK runtime; QUANTIZE / DEQUANTIZE are XNNPACK converts at its edges.
//
// Rounding, per op (tests/quantize pins each against the reference kernels, NNAPI's integer
// arithmetic: fixed-point multiplier and shift, engine/ops/OPS.md):
//  - CONV_2D, DEPTHWISE_CONV_2D, FULLY_CONNECTED: XNNPACK's qs8/qc8 kernels requantize in
//    fp32 (accumulator x input scale x filter scale / output scale, nearest-even): within one
//    step (2 of 756 conv outputs one step apart on the test case).
//  - ADD, LOGISTIC, global AVERAGE_POOL_2D, MAX_POOL_2D, RESHAPE: equal on the test cases.
//  - MUL: within one step (5 of 315 outputs).
//  - RESIZE_BILINEAR: XNNPACK interpolates with 11-bit fixed-point weights: within one step
//    (74 of 1260 elements at 7x9 -> 14x18).
//  - QUANTIZE: nearest-even in XNNPACK, half away from zero in the reference: one step apart
//    on exact halves only.
#pragma once

#include <xnnpack.h>

#include "delegates/cpu/cpu_internal.h"

namespace nn::cpu {

// Whether an op reads or writes a quantized tensor (it then takes the int8 path).
bool is_int8_op(const Model& model, const Operation& op);

// Whether XNNPACK's quantized nodes run op k exactly as the IR says (within the rounding
// above); the reason when not.
SupportResult xnn_int8_can_lower(const Model& model, uint32_t op_index, const StaticLookup& statics);

// Defines op k's nodes (out_operand and [lo, hi] as for xnn_lower).
Status xnn_int8_lower(xnn_subgraph_t subgraph, const Model& model, uint32_t op_index, const StaticLookup& statics,
                      XnnValues& values, uint32_t out_operand, float lo, float hi);

// Defines an activation value of a quantized operand (TENSOR_QUANT8_ASYMM_SIGNED: qint8).
xnn_status xnn_int8_define_value(xnn_subgraph_t subgraph, const Operand& operand, size_t num_dims,
                                 const size_t* dims, const void* data, uint32_t external_id, uint32_t flags,
                                 uint32_t* id);

}  // namespace nn::cpu

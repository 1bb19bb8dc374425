// int8 ops on XNNPACK's quantized subgraph nodes: TENSOR_QUANT8_ASYMM_SIGNED activations are
// xnn_datatype_qint8 values, so a stretch of quantized ops runs int8 end to end inside one
// XNNPACK runtime; QUANTIZE / DEQUANTIZE are XNNPACK converts at its edges.
//
// Rounding (what the tests/quantize CPU-vs-reference test pins): XNNPACK's qs8/qc8
// kernels requantize in fp32 (accumulator x (input scale x filter scale / output scale),
// rounded to nearest-even) where NNAPI's reference uses a fixed-point multiplier and shift and
// nnpipe's reference kernels dequantize, compute in float and round half away from zero: the
// two agree within one quantization step. QUANTIZE rounds to nearest-even in XNNPACK, half
// away from zero in the reference: they differ by one step on exact halves only.
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

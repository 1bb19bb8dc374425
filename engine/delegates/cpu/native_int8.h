// nnpipe's own kernels for int8 (TENSOR_QUANT8_ASYMM_SIGNED) ops that Debian's Feb-2022
// XNNPACK runs slowly or has no node for, so a quantized block does not stall on a slow
// kernel or a reference fallback between its convolutions (bench/README.md, "int8"):
//
// - MUL by a per-channel gate (squeeze-and-excitation) or by a same-shaped tensor: XNNPACK's
//   broadcasting qs8 multiply calls its micro-kernel once per pixel (the selfie decoder's
//   128x128x16 gate ran at 1.2 G elements/s). NNAPI's fixed-point requantization
//   (ops/quant_math.h) in 16 (AVX-512) or 8 (AVX2) int32 lanes; a per-channel gate with its
//   two roundings nested into one floor and no 64-bit products (Int8Mul::gate_avx512); its
//   two products as vpdpwssd on int16 pairs (AVX-512 VNNI, 64 elements a step, else AVX-VNNI
//   or vpmaddwd on AVX2, 32) across pixels, packed to bytes with saturation
//   (Int8Mul::gate_pairs_vnni / gate_pairs_avx2, CpuOptions::native_int8_gate_pairs). By
//   default (CpuOptions::int8_fp32_requant) the gate is instead one FMA per element in float,
//   a * ((g - zg) sa sb / so) + (zo - za ...), rounded once to nearest even as XNNPACK and
//   qnnpack requantize (Int8Mul::gate_fp32_avx512 / gate_fp32_avx2): within one step of
//   NNAPI's fixed point, which rounds twice.
// - HARD_SWISH and TANH: the reference kernel's 256-entry table (the exactly rounded
//   function), looked up 64 bytes a step with AVX-512 VBMI's two-table byte permute, else a
//   byte at a time. XNNPACK 2022 has no int8 hard-swish or tanh. A table op that alone reads
//   a native int8 conv's output is applied by the conv to the rows it has just written
//   (fuse_int8_table, CpuOptions::int8_conv_table).
// - A residual ADD after a native int8 conv or depthwise conv: the conv applies NNAPI's ADD
//   to each chunk of its output rows while they are in cache (native_int8_add.h), so the ADD
//   is exact and no step of its own. By default with AVX-512 VBMI, by the ADD's byte tables
//   where they are exact (CpuOptions::native_int8_residual_table); by the fixed-point
//   arithmetic only when CpuOptions::native_int8_residual asks for it (slower than XNNPACK's
//   ADD step: the exact arithmetic costs more than the memory traffic and step it saves).
// - ADD of two same-shaped tensors, when CpuOptions::native_int8_add asks for it: NNAPI's
//   arithmetic (both inputs rescaled by fixed-point multipliers after a left shift of 20,
//   summed, requantized: three requantizations) in 16 / 8 int32 lanes, the input stage
//   without 64-bit products (the multiplier split at bit 11). Exact, but about 3x slower
//   than XNNPACK's qs8 add, which rounds once in its own way (within one step).
//   With AVX-512 VBMI (CpuOptions::native_int8_add_table, on by default) the same ADD as
//   four or five 256-entry byte tables (Int8AddTable), where they give NNAPI's bytes for all
//   65536 input pairs: exact and faster than XNNPACK's.
// - LOGISTIC: the reference's table, as HARD_SWISH and TANH, with AVX-512 VBMI only (a byte-wise
//   table loses to XNNPACK's). A table op whose output a DEQUANTIZE alone reads writes the
//   dequantized floats itself (int8_table_dequantized).
// - MEAN over H and W (a global average): exact int32 sums per channel, then the
//   reference's requantization. XNNPACK 2022 has no int8 MEAN node. A global
//   AVERAGE_POOL_2D the same (AVX-512 only), with the reference's integer division (half away
//   from zero). Sums in int16 lanes, 255 values at a time.
// - RESIZE_BILINEAR: the reference's arithmetic (dequantize, blend in float in the same
//   order, divide by the output scale, round half away from zero), 16 / 8 channels a step;
//   XNNPACK's resize interpolates with 11-bit weights (within one step). With AVX-512 the
//   division as a reciprocal and one FMA correction where checked to round alike
//   (int8_resize_reciprocal), and a 2x width's products by 1/4 fused into the adds. Where
//   input and output share scale and zero point and every weight is a multiple of 1/4 (a 2x
//   upsampling with half-pixel centres), by default the taps' weighted sum in int16 rounded
//   by a shift instead (CpuOptions::native_int8_resize_integer): within one step.
// - CONV_2D (groups 1) and TRANSPOSE_CONV_2D with kernel == stride: one int8 GEMM, AVX-512
//   VNNI (vpdpbusd) or AVX2 (vpmaddubsw on |x| and w with x's sign, exact; vpmaddwd on int16
//   when a weight is -128), NNAPI's per-channel requantization fused
//   (XNNPACK 2022 has no VNNI kernels and no per-channel transpose conv). Narrow windows (an
//   RGB stem) are built in registers rather than gathered; a 2x2/2 one-channel transpose conv
//   (a segmentation head) packs 4 pixels x 4 columns per vector.
// - DEPTHWISE_CONV_2D, multiplier 1: 3x3 and 5x5 (dilation 1) as vpdpbusd over four tap rows
//   interleaved per channel (VNNI + VBMI; without VNNI the same interleave with vpmaddubsw on
//   AVX2), other forms in AVX-512 int32 lanes; the same requantization. With AVX-512 but no
//   VNNI, convs and depthwise convs stay on XNNPACK's AVX-512 kernels.
// The convs' requantization (native_int8_conv.cpp, ChannelRequant) is by default XNNPACK's
// and qnnpack's fp32 form (CpuOptions::int8_fp32_requant: float(acc) * scale + zo rounded to
// nearest even, 3 vector ops per 16 outputs), within one step of NNAPI's fixed point and equal
// to it on nearly every byte; with the switch off NNAPI's exactly, in 11-13 vector ops per 16
// outputs where the accumulator bound allows its short form.
//
// Every kernel gives the reference kernel's output exactly, the convs with the fp32 form off
// (tests/runtime/native_int8_test).
// Forms not listed (uint8, other broadcasts, other axes) are left to XNNPACK or the reference.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "delegates/cpu/cpu_internal.h"
#include "delegates/cpu/native_data.h"
#include "delegates/cpu/native_kernels.h"
#include "nn/runtime/session.h"
#include "ops/quant_math.h"

namespace nn::cpu {

// The native int8 kernel of op `op_index`, or nullptr with *why.
// (native_int8_elementwise.cpp; CONV_2D and TRANSPOSE_CONV_2D go to make_native_int8_conv.)
// `cpu` turns single kernels off (CpuOptions::native_int8_add, _logistic, _pool).
std::unique_ptr<NativeDataOp> make_native_int8_op(const Model& model, uint32_t op_index,
                                                  const StaticLookup& statics, const NativeIsa& isa,
                                                  const CpuOptions& cpu, std::string* why);

// CONV_2D (groups 1; windows gathered into rows unless 1x1, stride 1, unpadded) and
// TRANSPOSE_CONV_2D with kernel == stride as one int8 GEMM, DEPTHWISE_CONV_2D (multiplier 1)
// in int32 lanes (native_int8_conv.cpp), or nullptr with *why. `cpu`: native_int8_in_place_tiles,
// native_int8_direct_windows.
std::unique_ptr<NativeDataOp> make_native_int8_conv(const Model& model, uint32_t op_index,
                                                    const StaticLookup& statics, const NativeIsa& isa,
                                                    std::string* why, const CpuOptions& cpu);

// Whether an int8 CONV_2D's GEMM of k bytes a row, n columns and `rows` output pixels runs
// on AMX where NativeIsa::amx allows it (faster there than the VNNI form: bench/README.md,
// "AMX"). Exposed for tests/runtime/native_int8_amx_test.
bool amx_int8_conv_pays(size_t k, size_t n, size_t rows);

// Makes `conv` (an int8 CONV_2D or DEPTHWISE_CONV_2D from make_native_int8_conv) also run
// ADD op `add` (fuse code `fuse`), which reads the conv's output and `residual` (same
// shapes, int8): the conv then writes the ADD's output, NNAPI's ADD (native_int8_add.h)
// applied to each chunk of rows as they are written, and reads `residual` as its second
// operand. The ADD runs by its byte tables when `by_table`, the CPU has AVX-512 VBMI and the
// tables give NNAPI's bytes for every pair (Int8AddTable), else by the fixed-point
// arithmetic when `by_arithmetic`. False (and `conv` unchanged) for any other conv or ADD,
// or when neither form is allowed.
bool fuse_int8_residual_add(NativeDataOp& conv, const Model& model, uint32_t add, uint32_t residual,
                            int32_t fuse, const NativeIsa& isa, bool by_table, bool by_arithmetic);

// An int8 1x1 conv (stride 1, unpadded; from make_native_int8_conv) and the int8 depthwise
// conv that alone reads its output as one op (Int8ExpandDepthwise): the conv's rows go into a
// ring of the depthwise's kernel height, read there by the depthwise's row kernel, so the
// expanded tensor is never written (CpuOptions::int8_expand_depthwise). Takes both ops and
// returns the fused one (reading the conv's input, writing the depthwise's output); nullptr
// and both left as they are where it does not apply: a conv not on the AVX-512 VNNI or AMX
// GEMM, or with a window or padding, a depthwise other than 3x3 / 5x5 with dilation 1 on
// the row forms, a residual ADD run by either.
std::unique_ptr<NativeDataOp> int8_expand_depthwise(std::unique_ptr<NativeDataOp>& conv,
                                                    std::unique_ptr<NativeDataOp>& depthwise);

// A byte table's lookup over runs of bytes: out[i] = table[in[i]], out may be in.
class Int8Lookup {
 public:
  virtual ~Int8Lookup() = default;
  virtual void lookup(const int8_t* in, int8_t* out, size_t n) const = 0;
};

// The lookup of `table` (an int8 HARD_SWISH, LOGISTIC or TANH from make_native_int8_op that
// writes int8), or nullptr for any other op.
std::shared_ptr<const Int8Lookup> int8_table_lookup(const NativeDataOp& table);

// Makes `conv` (an int8 CONV_2D or DEPTHWISE_CONV_2D from make_native_int8_conv, running no
// residual ADD) look each chunk of rows it has just written up in `table`, so it writes the
// table op's output (CpuOptions::int8_conv_table); `op_name` is the table op's, for the kernel
// text. False (and `conv` unchanged) for any other op.
bool fuse_int8_table(NativeDataOp& conv, std::shared_ptr<const Int8Lookup> table, const std::string& op_name);

// `table` (an int8 HARD_SWISH, LOGISTIC or TANH from make_native_int8_op) made to write
// float values: each output byte q as DEQUANTIZE gives it, float(q - zero_point) * scale, for
// a DEQUANTIZE that alone reads the table's output. nullptr when `table` is no table op.
std::unique_ptr<NativeDataOp> int8_table_dequantized(const NativeDataOp& table, float scale, int32_t zero_point);

// The int8 resize's y / so without a division: q0 = y * inv, then q0 + (y - q0 so) inv, the
// remainder and the correction each one FMA (inv = 1 / so rounded). Within about one ulp of
// y / so for every float y; so its rounding to an integer (half away from zero, as the
// reference's quotient) can differ only for y within a few ulps of where the reference's
// rounded quotient steps. int8_resize_reciprocal checks the 64 floats either side of each
// step up to the output clamp (both odd in y: the negative side is the same) with
// int8_resize_rounds_alike(so, zo, inv), and gives inv when all agree; false otherwise.
// Exposed for tests/runtime/native_int8_resize_quarters_test.
float int8_resize_quotient(float y, float so, float inv);
bool int8_resize_rounds_alike(float so, int32_t zo, float inv);
bool int8_resize_reciprocal(float so, int32_t zo, float* inv);

// NNAPI's per-channel requantization of int32 accumulators acc[rows][m.size()] into int8,
// as the native int8 convs do it: quant::multiply_by_quantized_multiplier + zo, clamped to
// `range` (right shifts only). The short form runs when `acc_bound` (the most |acc|) allows
// it (*short_form says whether it did), 16 channels a step with AVX-512 when `avx512` and
// the CPU has it, else 8 with AVX2 (as the AVX2 GEMM), else scalar. `fp32`: the fp32 form
// instead (CpuOptions::int8_fp32_requant). Exposed for tests/runtime/native_int8_test.
void requantize_per_channel(const int32_t* acc, size_t rows, const std::vector<quant::Multiplier>& m,
                            int32_t zo, quant::Range range, int64_t acc_bound, bool avx512, int8_t* out,
                            bool* short_form, bool fp32 = false);

}  // namespace nn::cpu

// CONV_2D, DEPTHWISE_CONV_2D, GROUPED_CONV_2D and TRANSPOSE_CONV_2D: shape inference and
// reference kernels (NHWC; filters OHWI, depthwise [1, H, W, Cout]). One loop nest per op,
// templated on the accumulator: float for TENSOR_FLOAT32, int32 for quant8, where inputs and
// filters enter minus their zero points, the int32 bias is added and the sum is requantized
// (ops/quant_math.h: NNAPI's fixed-point multiplier, or qnnpack's float one), per output channel for
// TENSOR_QUANT8_SYMM_PER_CHANNEL filters.
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "nn/ops/registry.h"
#include "ops/conv_util.h"
#include "ops/op_params.h"
#include "ops/quant_math.h"
#include "ops/tensor_util.h"

namespace nn {

namespace {

using conv_util::ConvKind;

template <ConvKind kKind>
Status prepare_conv(Model& m, const Operation& op) {
  NN_ASSIGN_OR_RETURN(ConvParams p, decode_conv(m, op, kKind));
  const Operand& input = m.operands[op.inputs[0]];
  conv_util::set_output_like(m, op, input, {p.batch, p.out_h, p.out_w, p.out_c});
  return conv_util::check_quant_params(m.operands[op.outputs[0]], "output 0");
}

// Filter OHWI [Cout, KH, KW, Cin/groups] -> [groups][KH][KW][Cin/groups][Cout/groups], so
// the innermost kernel loop runs over contiguous output channels.
template <typename T>
std::vector<T> filter_to_group_hwio(const T* ohwi, const ConvParams& p) {
  const size_t g_count = static_cast<size_t>(p.groups);
  const size_t cin_g = p.kind == ConvKind::kGrouped ? p.in_c / g_count : p.in_c;
  const size_t cout_g = p.out_c / g_count;
  std::vector<T> w(static_cast<size_t>(p.out_c) * p.k_h * p.k_w * cin_g);
  for (size_t co = 0; co < p.out_c; ++co) {
    const size_t g = co / cout_g, cog = co % cout_g;
    for (size_t kh = 0; kh < p.k_h; ++kh)
      for (size_t kw = 0; kw < p.k_w; ++kw)
        for (size_t ci = 0; ci < cin_g; ++ci)
          w[(((g * p.k_h + kh) * p.k_w + kw) * cin_g + ci) * cout_g + cog] =
              ohwi[((co * p.k_h + kh) * p.k_w + kw) * cin_g + ci];
  }
  return w;
}

// acc[i] += x * w[i]. Blocks of 8 with restrict pointers let the compiler vectorize at -O2
// (GCC's default cost model only vectorizes loops whose trip count it knows); this keeps
// the oracle fast enough to run whole models.
template <typename T>
inline void accumulate_scaled(T* __restrict acc, const T* __restrict w, T x, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (size_t j = 0; j < 8; ++j) acc[i + j] += x * w[i + j];
  for (; i < n; ++i) acc[i] += x * w[i];
}

// acc[i] += x[i] * w[i].
template <typename T>
inline void accumulate_product(T* __restrict acc, const T* __restrict x, const T* __restrict w, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (size_t j = 0; j < 8; ++j) acc[i + j] += x[i + j] * w[i + j];
  for (; i < n; ++i) acc[i] += x[i] * w[i];
}

// CONV_2D and GROUPED_CONV_2D (groups = 1 for CONV_2D).
template <typename T>
void conv_loop(const ConvParams& p, const T* in, const T* filter, const T* bias, T* out) {
  const size_t groups = p.kind == ConvKind::kGrouped ? static_cast<size_t>(p.groups) : 1;
  const size_t cin_g = p.in_c / groups, cout_g = p.out_c / groups;
  const std::vector<T> w = filter_to_group_hwio(filter, p);
  for (size_t n = 0; n < p.batch; ++n)
    for (size_t oh = 0; oh < p.out_h; ++oh)
      for (size_t ow = 0; ow < p.out_w; ++ow) {
        T* acc_pixel = out + ((n * p.out_h + oh) * p.out_w + ow) * p.out_c;
        std::copy(bias, bias + p.out_c, acc_pixel);
        for (size_t kh = 0; kh < p.k_h; ++kh) {
          const int64_t ih = int64_t(oh) * p.stride_h - p.pad_h.before + int64_t(kh) * p.dil_h;
          if (ih < 0 || ih >= int64_t(p.in_h)) continue;
          for (size_t kw = 0; kw < p.k_w; ++kw) {
            const int64_t iw = int64_t(ow) * p.stride_w - p.pad_w.before + int64_t(kw) * p.dil_w;
            if (iw < 0 || iw >= int64_t(p.in_w)) continue;
            const T* x_pixel = in + ((n * p.in_h + size_t(ih)) * p.in_w + size_t(iw)) * p.in_c;
            for (size_t g = 0; g < groups; ++g) {
              const T* x = x_pixel + g * cin_g;
              const T* wg = w.data() + ((g * p.k_h + kh) * p.k_w + kw) * cin_g * cout_g;
              T* acc = acc_pixel + g * cout_g;
              for (size_t ci = 0; ci < cin_g; ++ci) accumulate_scaled(acc, wg + ci * cout_g, x[ci], cout_g);
            }
          }
        }
      }
}

// DEPTHWISE_CONV_2D: output channel c * multiplier + m reads input channel c.
template <typename T>
void depthwise_loop(const ConvParams& p, const T* in, const T* filter, const T* bias, T* out) {
  const size_t mult = static_cast<size_t>(p.groups);
  for (size_t n = 0; n < p.batch; ++n)
    for (size_t oh = 0; oh < p.out_h; ++oh)
      for (size_t ow = 0; ow < p.out_w; ++ow) {
        T* acc = out + ((n * p.out_h + oh) * p.out_w + ow) * p.out_c;
        std::copy(bias, bias + p.out_c, acc);
        for (size_t kh = 0; kh < p.k_h; ++kh) {
          const int64_t ih = int64_t(oh) * p.stride_h - p.pad_h.before + int64_t(kh) * p.dil_h;
          if (ih < 0 || ih >= int64_t(p.in_h)) continue;
          for (size_t kw = 0; kw < p.k_w; ++kw) {
            const int64_t iw = int64_t(ow) * p.stride_w - p.pad_w.before + int64_t(kw) * p.dil_w;
            if (iw < 0 || iw >= int64_t(p.in_w)) continue;
            const T* x = in + ((n * p.in_h + size_t(ih)) * p.in_w + size_t(iw)) * p.in_c;
            const T* wk = filter + (kh * p.k_w + kw) * p.out_c;
            if (mult == 1) {
              accumulate_product(acc, x, wk, p.out_c);
            } else {
              for (size_t c = 0; c < p.in_c; ++c)
                for (size_t m = 0; m < mult; ++m) acc[c * mult + m] += x[c] * wk[c * mult + m];
            }
          }
        }
      }
}

// TRANSPOSE_CONV_2D: every input pixel scatters filter-weighted copies into the output at
// out = in * stride + k - pad_before; writes that land outside the output are dropped.
template <typename T>
void transpose_conv_loop(const ConvParams& p, const T* in, const T* filter, const T* bias, T* out) {
  const std::vector<T> w = filter_to_group_hwio(filter, p);  // [KH][KW][Cin][Cout]
  for (size_t i = 0; i < size_t(p.batch) * p.out_h * p.out_w; ++i)
    std::copy(bias, bias + p.out_c, out + i * p.out_c);
  for (size_t n = 0; n < p.batch; ++n)
    for (size_t ih = 0; ih < p.in_h; ++ih)
      for (size_t iw = 0; iw < p.in_w; ++iw) {
        const T* x = in + ((n * p.in_h + ih) * p.in_w + iw) * p.in_c;
        for (size_t kh = 0; kh < p.k_h; ++kh) {
          const int64_t oh = int64_t(ih) * p.stride_h - p.pad_h.before + int64_t(kh);
          if (oh < 0 || oh >= int64_t(p.out_h)) continue;
          for (size_t kw = 0; kw < p.k_w; ++kw) {
            const int64_t ow = int64_t(iw) * p.stride_w - p.pad_w.before + int64_t(kw);
            if (ow < 0 || ow >= int64_t(p.out_w)) continue;
            T* acc = out + ((n * p.out_h + size_t(oh)) * p.out_w + size_t(ow)) * p.out_c;
            const T* wk = w.data() + (kh * p.k_w + kw) * p.in_c * p.out_c;
            for (size_t ci = 0; ci < p.in_c; ++ci) accumulate_scaled(acc, wk + ci * p.out_c, x[ci], p.out_c);
          }
        }
      }
}

template <typename T>
void run_loop(const ConvParams& p, const T* x, const T* w, const T* bias, T* y) {
  switch (p.kind) {
    case ConvKind::kConv:
    case ConvKind::kGrouped:
      conv_loop(p, x, w, bias, y);
      break;
    case ConvKind::kDepthwise:
      depthwise_loop(p, x, w, bias, y);
      break;
    case ConvKind::kTranspose:
      transpose_conv_loop(p, x, w, bias, y);
      break;
  }
}

// Integer path: int32 accumulators of (x - x_zp) * (w - w_zp) plus the int32 bias, then
// requantized per output channel.
void run_conv_quant(const OpContext& ctx, const ConvParams& p) {
  const Operand& input = ctx.input(0);
  const Operand& filter = ctx.input(1);
  const Operand& output = ctx.output(0);
  const std::vector<int32_t> x = quant::centered(input, ctx.input_data[0]);
  const std::vector<int32_t> w = quant::centered(filter, ctx.input_data[1]);
  std::vector<int32_t> bias(p.out_c, 0);
  if (ctx.has_input(2)) std::memcpy(bias.data(), ctx.input_data[2], p.out_c * sizeof(int32_t));
  std::vector<int32_t> acc(num_elements(output.dims));
  run_loop<int32_t>(p, x.data(), w.data(), bias.data(), acc.data());
  quant::requantize_store(acc.data(), acc.size(),
                          quant::conv_requantizers(ctx.requantization, input, filter, output, p.out_c), p.fuse,
                          output, ctx.output_data[0]);
}

template <ConvKind kKind>
Status run_conv(const OpContext& ctx) {
  NN_ASSIGN_OR_RETURN(ConvParams p, decode_conv(ctx.model, ctx.op, kKind));
  const Operand& input = ctx.input(0);
  if (conv_util::is_quant8(input.type)) {
    run_conv_quant(ctx, p);
    return Status::ok();
  }
  const std::vector<float> bias =
      conv_util::bias_as_float(&ctx.input(2), ctx.input_data[2], input, ctx.input(1), p.out_c);
  run_loop<float>(p, ctx.in<float>(0), ctx.in<float>(1), bias.data(), ctx.out<float>(0));
  apply_fused_activation(p.fuse, ctx.out<float>(0), num_elements(ctx.output(0).dims));
  return Status::ok();
}

}  // namespace

void register_conv_ops(OpRegistry& r) {
  r.add({OperationType::CONV_2D, prepare_conv<ConvKind::kConv>, run_conv<ConvKind::kConv>});
  r.add(
      {OperationType::DEPTHWISE_CONV_2D, prepare_conv<ConvKind::kDepthwise>, run_conv<ConvKind::kDepthwise>});
  r.add({OperationType::GROUPED_CONV_2D, prepare_conv<ConvKind::kGrouped>, run_conv<ConvKind::kGrouped>});
  r.add(
      {OperationType::TRANSPOSE_CONV_2D, prepare_conv<ConvKind::kTranspose>, run_conv<ConvKind::kTranspose>});
}

}  // namespace nn

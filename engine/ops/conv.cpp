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
#include "ops/quant_math.h"
#include "ops/tensor_util.h"

namespace nn {

namespace {

using conv_util::AxisPadding;

using conv_util::ConvKind;
using ConvForm = conv_util::ConvSlots;
constexpr size_t kAbsent = conv_util::kAbsentSlot;

struct ConvParams {
  ConvKind kind;
  ConvForm form;
  uint32_t batch = 0, in_h = 0, in_w = 0, in_c = 0;
  uint32_t out_h = 0, out_w = 0, out_c = 0;
  uint32_t k_h = 0, k_w = 0;
  AxisPadding pad_w, pad_h;
  int32_t stride_w = 1, stride_h = 1, dil_w = 1, dil_h = 1;
  int32_t groups = 1;  // GROUPED_CONV_2D num_groups, DEPTHWISE_CONV_2D depth_multiplier
  int32_t fuse = 0;
};

Status invalid(std::string message) {
  return {StatusCode::kInvalidModel, std::move(message)};
}

// Parses and validates everything about a conv op; computes the output extent. Shared by
// prepare() and the kernels so the two can never disagree.
Result<ConvParams> parse_conv(const Model& m, const Operation& op, ConvKind kind) {
  using namespace conv_util;
  NN_RETURN_IF_ERROR(check_output_count(op, 1));
  NN_ASSIGN_OR_RETURN(ConvForm form, pick_conv_slots(m, op, kind));
  ConvParams p;
  p.kind = kind;
  p.form = form;

  NN_ASSIGN_OR_RETURN(const Operand* input_operand, conv_util::nhwc_activation_input(m, op));
  const Operand& input = *input_operand;
  p.batch = input.dims[0];
  p.in_h = input.dims[1];
  p.in_w = input.dims[2];
  p.in_c = input.dims[3];

  NN_RETURN_IF_ERROR(check_filter_type(m, op, 1, "filter", kind == ConvKind::kDepthwise ? 3 : 0));
  NN_RETURN_IF_ERROR(check_rank(m, op, 1, 4, 4, "filter"));
  const Operand& filter = m.operands[op.inputs[1]];
  for (uint32_t d : filter.dims)
    if (d == 0) return invalid(input_label(1, "filter") + " has a zero dim " + dims_to_string(filter.dims));
  p.k_h = filter.dims[1];
  p.k_w = filter.dims[2];

  NN_ASSIGN_OR_RETURN(p.stride_w, read_i32_at_least(m, op, form.stride, "stride_w", 1));
  NN_ASSIGN_OR_RETURN(p.stride_h, read_i32_at_least(m, op, form.stride + 1, "stride_h", 1));
  NN_ASSIGN_OR_RETURN(p.fuse, read_fuse(m, op, form.fuse));
  NN_RETURN_IF_ERROR(check_layout_nhwc(m, op, form.layout));
  if (form.dilation != kAbsent && op.inputs.size() >= form.dilation + 2) {
    NN_ASSIGN_OR_RETURN(p.dil_w, read_i32_at_least(m, op, form.dilation, "dilation_w", 1));
    NN_ASSIGN_OR_RETURN(p.dil_h, read_i32_at_least(m, op, form.dilation + 1, "dilation_h", 1));
  }
  if (form.groups != kAbsent) {
    const char* name = kind == ConvKind::kDepthwise ? "depth_multiplier" : "num_groups";
    NN_ASSIGN_OR_RETURN(p.groups, read_i32_at_least(m, op, form.groups, name, 1));
  }

  const std::string filter_dims = dims_to_string(filter.dims);
  switch (kind) {
    case ConvKind::kConv:
    case ConvKind::kTranspose:
      p.out_c = filter.dims[0];
      if (filter.dims[3] != p.in_c)
        return invalid(input_label(1, "filter") + " " + filter_dims + " has " +
                       std::to_string(filter.dims[3]) + " input channels, input has " +
                       std::to_string(p.in_c));
      break;
    case ConvKind::kGrouped: {
      const uint32_t g = static_cast<uint32_t>(p.groups);
      p.out_c = filter.dims[0];
      if (p.in_c % g != 0 || p.out_c % g != 0)
        return invalid(input_label(form.groups, "num_groups") + " " + std::to_string(g) +
                       " must divide the input channels " + std::to_string(p.in_c) +
                       " and the output channels " + std::to_string(p.out_c));
      if (filter.dims[3] != p.in_c / g)
        return invalid(input_label(1, "filter") + " " + filter_dims +
                       " must have input channels / num_groups = " + std::to_string(p.in_c / g) +
                       " in dim 3");
      break;
    }
    case ConvKind::kDepthwise:
      p.out_c = filter.dims[3];
      if (filter.dims[0] != 1)
        return invalid(input_label(1, "filter") + " must be [1,H,W,Cout], got " + filter_dims);
      if (static_cast<uint64_t>(p.in_c) * static_cast<uint64_t>(p.groups) != p.out_c)
        return invalid(input_label(1, "filter") + " " + filter_dims + " has " + std::to_string(p.out_c) +
                       " output channels, input channels " + std::to_string(p.in_c) + " x depth_multiplier " +
                       std::to_string(p.groups) + " = " +
                       std::to_string(static_cast<uint64_t>(p.in_c) * static_cast<uint64_t>(p.groups)));
      break;
  }
  NN_RETURN_IF_ERROR(check_bias(m, op, 2, p.out_c));

  if (kind == ConvKind::kTranspose) {
    if (form.explicit_padding) {
      NN_ASSIGN_OR_RETURN(int32_t l, read_i32_at_least(m, op, form.padding + 0, "pad_left", 0));
      NN_ASSIGN_OR_RETURN(int32_t r, read_i32_at_least(m, op, form.padding + 1, "pad_right", 0));
      NN_ASSIGN_OR_RETURN(int32_t t, read_i32_at_least(m, op, form.padding + 2, "pad_top", 0));
      NN_ASSIGN_OR_RETURN(int32_t b, read_i32_at_least(m, op, form.padding + 3, "pad_bottom", 0));
      p.pad_w = {l, r};
      p.pad_h = {t, b};
      const int64_t ow = (int64_t(p.in_w) - 1) * p.stride_w + p.k_w - l - r;
      const int64_t oh = (int64_t(p.in_h) - 1) * p.stride_h + p.k_h - t - b;
      if (ow < 1 || oh < 1 || ow >= (1 << 24) || oh >= (1 << 24))
        return invalid("output extent " + std::to_string(oh) + "x" + std::to_string(ow) +
                       " (from (in-1)*stride + filter - pads) must be in [1, 2^24)");
      p.out_w = static_cast<uint32_t>(ow);
      p.out_h = static_cast<uint32_t>(oh);
    } else {
      const size_t i = form.output_shape;
      NN_RETURN_IF_ERROR(check_tensor_type(m, op, i, {OperandType::TENSOR_INT32}, "output_shape"));
      const Operand& shape = m.operands[op.inputs[i]];
      if (!shape.is_constant() || shape.dims != Dims{4})
        return invalid(input_label(i, "output_shape") + " must be a constant TENSOR_INT32 [4], got " +
                       std::string(shape.is_constant() ? "constant " : "non-constant ") +
                       dims_to_string(shape.dims));
      const int32_t* s = shape.as<int32_t>();
      if (s[0] != int32_t(p.batch) || s[3] != int32_t(p.out_c) || s[1] < 1 || s[2] < 1 || s[1] >= (1 << 24) ||
          s[2] >= (1 << 24))
        return invalid(input_label(i, "output_shape") + " [" + std::to_string(s[0]) + "," +
                       std::to_string(s[1]) + "," + std::to_string(s[2]) + "," + std::to_string(s[3]) +
                       "] must be [" + std::to_string(p.batch) + ",H,W," + std::to_string(p.out_c) +
                       "] with H, W >= 1");
      p.out_h = static_cast<uint32_t>(s[1]);
      p.out_w = static_cast<uint32_t>(s[2]);
      NN_ASSIGN_OR_RETURN(int32_t scheme, read_i32(m, op, form.padding, "padding"));
      if (scheme != 1 && scheme != 2)
        return invalid(input_label(form.padding, "padding") + " must be 1 (SAME) or 2 (VALID), got " +
                       std::to_string(scheme));
      p.pad_w = transpose_conv_implicit_padding(scheme, p.out_w, p.k_w, p.stride_w);
      p.pad_h = transpose_conv_implicit_padding(scheme, p.out_h, p.k_h, p.stride_h);
    }
    return p;
  }

  if (form.explicit_padding) {
    NN_ASSIGN_OR_RETURN(int32_t l, read_i32_at_least(m, op, form.padding + 0, "pad_left", 0));
    NN_ASSIGN_OR_RETURN(int32_t r, read_i32_at_least(m, op, form.padding + 1, "pad_right", 0));
    NN_ASSIGN_OR_RETURN(int32_t t, read_i32_at_least(m, op, form.padding + 2, "pad_top", 0));
    NN_ASSIGN_OR_RETURN(int32_t b, read_i32_at_least(m, op, form.padding + 3, "pad_bottom", 0));
    p.pad_w = {l, r};
    p.pad_h = {t, b};
  } else {
    NN_ASSIGN_OR_RETURN(int32_t scheme, read_i32(m, op, form.padding, "padding"));
    NN_ASSIGN_OR_RETURN(p.pad_w, implicit_padding(scheme, p.in_w, p.k_w, p.stride_w, p.dil_w, "width"));
    NN_ASSIGN_OR_RETURN(p.pad_h, implicit_padding(scheme, p.in_h, p.k_h, p.stride_h, p.dil_h, "height"));
  }
  NN_ASSIGN_OR_RETURN(p.out_w, window_output_size(p.in_w, p.k_w, p.stride_w, p.dil_w, p.pad_w, "width"));
  NN_ASSIGN_OR_RETURN(p.out_h, window_output_size(p.in_h, p.k_h, p.stride_h, p.dil_h, p.pad_h, "height"));
  return p;
}

template <ConvKind kKind>
Status prepare_conv(Model& m, const Operation& op) {
  NN_ASSIGN_OR_RETURN(ConvParams p, parse_conv(m, op, kKind));
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
  NN_ASSIGN_OR_RETURN(ConvParams p, parse_conv(ctx.model, ctx.op, kKind));
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

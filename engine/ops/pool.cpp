// AVERAGE_POOL_2D and MAX_POOL_2D: shape inference and reference kernels (NHWC).
// The average divides by the number of input pixels under the window, padding excluded
// (NNAPI and TFLite). Quant8 pools keep the input's scale and zero point (NNAPI requires
// the output to have them) and work on the stored integers: the max directly, the average
// as an int32 sum divided by the count rounding half away from zero (TFLite's integer
// kernels), both clamped to the fused activation's quantized range.
#include <algorithm>
#include <limits>
#include <string>

#include "nn/ops/registry.h"
#include "ops/conv_util.h"
#include "ops/op_params.h"
#include "ops/quant_math.h"
#include "ops/tensor_util.h"

namespace nn {

namespace {

Status invalid(std::string message) {
  return {StatusCode::kInvalidModel, std::move(message)};
}

Status prepare_pool(Model& m, const Operation& op) {
  NN_ASSIGN_OR_RETURN(PoolParams p, decode_pool(m, op));
  const Operand& input = m.operands[op.inputs[0]];
  conv_util::set_output_like(m, op, input, {p.batch, p.out_h, p.out_w, p.channels});
  const Operand& output = m.operands[op.outputs[0]];
  if (conv_util::is_quant8(input.type) && (output.scale != input.scale || output.zero_point != input.zero_point))
    return invalid("output 0 scale " + std::to_string(output.scale) + " / zero point " +
                   std::to_string(output.zero_point) + " must equal input 0's (" + std::to_string(input.scale) +
                   " / " + std::to_string(input.zero_point) + ") for a quantized pool, as NNAPI requires");
  return conv_util::check_quant_params(output, "output 0");
}

// Output pixel (oh, ow)'s window clipped to the input: [h_begin, h_end) x [w_begin, w_end).
struct PoolWindow {
  int64_t h_begin, h_end, w_begin, w_end;
};
PoolWindow pool_window(const PoolParams& p, size_t oh, size_t ow) {
  const int64_t h0 = int64_t(oh) * p.stride_h - p.pad_h.before;
  const int64_t w0 = int64_t(ow) * p.stride_w - p.pad_w.before;
  return {std::max<int64_t>(h0, 0), std::min<int64_t>(h0 + p.filter_h, p.in_h), std::max<int64_t>(w0, 0),
          std::min<int64_t>(w0 + p.filter_w, p.in_w)};
}

template <bool kMax>
void run_pool_quant(const OpContext& ctx, const PoolParams& p) {
  const Operand& input = ctx.input(0);
  const Operand& output = ctx.output(0);
  const quant::Range r = quant::activation_range(p.fuse, output);
  const bool fp32 = ctx.requantization == Requantization::kFp32;
  const size_t c_count = p.channels;
  std::vector<int32_t> acc(c_count);
  for (size_t n = 0; n < p.batch; ++n)
    for (size_t oh = 0; oh < p.out_h; ++oh)
      for (size_t ow = 0; ow < p.out_w; ++ow) {
        const auto [h_begin, h_end, w_begin, w_end] = pool_window(p, oh, ow);
        std::fill(acc.begin(), acc.end(), kMax ? quant::type_range(input.type).lo : 0);
        for (int64_t ih = h_begin; ih < h_end; ++ih)
          for (int64_t iw = w_begin; iw < w_end; ++iw) {
            const size_t base = ((n * p.in_h + size_t(ih)) * p.in_w + size_t(iw)) * c_count;
            for (size_t c = 0; c < c_count; ++c) {
              const int32_t v = quant::load(ctx.input_data[0], input.type, base + c);
              acc[c] = kMax ? std::max(acc[c], v) : acc[c] + v;
            }
          }
        const int32_t count =
            int32_t(std::max<int64_t>(h_end - h_begin, 0) * std::max<int64_t>(w_end - w_begin, 0));
        const size_t dst = ((n * p.out_h + oh) * p.out_w + ow) * c_count;
        // qnnpack: the centred sum times (in_scale / out_scale) / count in float, rounded
        // to even (the scales are equal here, so the ratio is 1).
        const float fp32_scale = count == 0 ? 0.f : 1.f / float(count);
        for (size_t c = 0; c < c_count; ++c) {
          int32_t v = acc[c];
          if (!kMax) {
            if (count == 0)
              v = output.zero_point;
            else if (fp32)
              v = quant::requantize_fp32(v - count * input.zero_point, fp32_scale) + output.zero_point;
            else
              v = v >= 0 ? (v + count / 2) / count : (v - count / 2) / count;
          }
          quant::store(ctx.output_data[0], output.type, dst + c, std::clamp(v, r.lo, r.hi));
        }
      }
}

// One window per output pixel, clipped to the input. A window that lies wholly in the
// padding (only possible when a pad >= the filter) yields 0 for the average and the
// lowest float for the max, as TFLite's kernels would.
template <bool kMax>
Status run_pool(const OpContext& ctx) {
  NN_ASSIGN_OR_RETURN(PoolParams p, decode_pool(ctx.model, ctx.op));
  if (conv_util::is_quant8(ctx.input(0).type)) {
    run_pool_quant<kMax>(ctx, p);
    return Status::ok();
  }
  conv_util::FloatInput x(ctx.input(0), ctx.input_data[0]);
  conv_util::FloatOutput y(ctx.output(0), ctx.output_data[0]);
  const float* in = x.data();
  float* out = y.data();
  const size_t c_count = p.channels;
  std::vector<float> acc(c_count);
  for (size_t n = 0; n < p.batch; ++n)
    for (size_t oh = 0; oh < p.out_h; ++oh)
      for (size_t ow = 0; ow < p.out_w; ++ow) {
        const auto [h_begin, h_end, w_begin, w_end] = pool_window(p, oh, ow);
        std::fill(acc.begin(), acc.end(), kMax ? std::numeric_limits<float>::lowest() : 0.f);
        for (int64_t ih = h_begin; ih < h_end; ++ih)
          for (int64_t iw = w_begin; iw < w_end; ++iw) {
            const float* px = in + ((n * p.in_h + size_t(ih)) * p.in_w + size_t(iw)) * c_count;
            for (size_t c = 0; c < c_count; ++c) acc[c] = kMax ? std::max(acc[c], px[c]) : acc[c] + px[c];
          }
        float* dst = out + ((n * p.out_h + oh) * p.out_w + ow) * c_count;
        const int64_t count = std::max<int64_t>(h_end - h_begin, 0) * std::max<int64_t>(w_end - w_begin, 0);
        for (size_t c = 0; c < c_count; ++c)
          dst[c] = kMax ? acc[c] : (count > 0 ? acc[c] / static_cast<float>(count) : 0.f);
      }
  y.finish(p.fuse);
  return Status::ok();
}

}  // namespace

void register_pool_ops(OpRegistry& r) {
  r.add({OperationType::AVERAGE_POOL_2D, prepare_pool, run_pool<false>});
  r.add({OperationType::MAX_POOL_2D, prepare_pool, run_pool<true>});
}

}  // namespace nn

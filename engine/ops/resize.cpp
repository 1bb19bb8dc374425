// RESIZE_BILINEAR and RESIZE_NEAREST_NEIGHBOR: shape inference and reference kernels
// (NHWC) with TFLite's coordinate rules, as OPS.md states them:
//   scale = in / out, or (in - 1) / (out - 1) with align_corners (and out > 1);
//   bilinear: src = dst * scale, or (dst + 0.5) * scale - 0.5 with half_pixel_centers;
//             the neighbours floor(src) and ceil(src) are clamped to [0, in - 1] and the
//             weights are taken against the clamped lower neighbour;
//   nearest:  src = (dst + offset) * scale with offset 0.5 under half_pixel_centers,
//             rounded (half away from zero) under align_corners, floored otherwise, then
//             clamped to in - 1 (and to 0 with half_pixel_centers).
// Quantized inputs are dequantized, resized in float and requantized.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "nn/ops/registry.h"
#include "ops/conv_util.h"
#include "ops/op_params.h"
#include "ops/resize_taps.h"
#include "ops/tensor_util.h"

namespace nn {

namespace {

Status prepare_resize(Model& m, const Operation& op) {
  NN_ASSIGN_OR_RETURN(ResizeParams p, decode_resize(m, op));
  conv_util::set_output_like(m, op, m.operands[op.inputs[0]], {p.batch, p.out_h, p.out_w, p.channels});
  return conv_util::check_quant_params(m.operands[op.outputs[0]], "output 0");
}

float resize_scale(uint32_t in, uint32_t out, bool align_corners) {
  if (align_corners && out > 1) return static_cast<float>(in - 1) / static_cast<float>(out - 1);
  return static_cast<float>(in) / static_cast<float>(out);
}

std::vector<uint32_t> nearest_taps(uint32_t in, uint32_t out, bool align_corners, bool half_pixel) {
  const float scale = resize_scale(in, out, align_corners);
  const float offset = half_pixel ? 0.5f : 0.f;
  std::vector<uint32_t> taps(out);
  for (uint32_t d = 0; d < out; ++d) {
    const float src = (static_cast<float>(d) + offset) * scale;
    int64_t i = static_cast<int64_t>(align_corners ? std::round(src) : std::floor(src));
    i = std::min<int64_t>(i, in - 1);
    if (half_pixel) i = std::max<int64_t>(i, 0);
    taps[d] = static_cast<uint32_t>(i);
  }
  return taps;
}

Status run_bilinear(const OpContext& ctx) {
  NN_ASSIGN_OR_RETURN(ResizeParams p, decode_resize(ctx.model, ctx.op));
  conv_util::FloatInput x(ctx.input(0), ctx.input_data[0]);
  conv_util::FloatOutput y(ctx.output(0), ctx.output_data[0]);
  const std::vector<BilinearTap> ty = bilinear_taps(p.in_h, p.out_h, p.align_corners, p.half_pixel_centers);
  const std::vector<BilinearTap> tx = bilinear_taps(p.in_w, p.out_w, p.align_corners, p.half_pixel_centers);
  const size_t c_count = p.channels;
  for (size_t n = 0; n < p.batch; ++n)
    for (size_t oy = 0; oy < p.out_h; ++oy) {
      const BilinearTap& v = ty[oy];
      const float* row0 = x.data() + (n * p.in_h + v.lo) * p.in_w * c_count;
      const float* row1 = x.data() + (n * p.in_h + v.hi) * p.in_w * c_count;
      for (size_t ox = 0; ox < p.out_w; ++ox) {
        const BilinearTap& h = tx[ox];
        const float* p00 = row0 + h.lo * c_count;
        const float* p01 = row0 + h.hi * c_count;
        const float* p10 = row1 + h.lo * c_count;
        const float* p11 = row1 + h.hi * c_count;
        float* dst = y.data() + ((n * p.out_h + oy) * p.out_w + ox) * c_count;
        for (size_t c = 0; c < c_count; ++c)
          dst[c] = p00[c] * (1.f - v.frac) * (1.f - h.frac) + p01[c] * (1.f - v.frac) * h.frac +
                   p10[c] * v.frac * (1.f - h.frac) + p11[c] * v.frac * h.frac;
      }
    }
  y.finish(0);
  return Status::ok();
}

Status run_nearest(const OpContext& ctx) {
  NN_ASSIGN_OR_RETURN(ResizeParams p, decode_resize(ctx.model, ctx.op));
  conv_util::FloatInput x(ctx.input(0), ctx.input_data[0]);
  conv_util::FloatOutput y(ctx.output(0), ctx.output_data[0]);
  const std::vector<uint32_t> ty = nearest_taps(p.in_h, p.out_h, p.align_corners, p.half_pixel_centers);
  const std::vector<uint32_t> tx = nearest_taps(p.in_w, p.out_w, p.align_corners, p.half_pixel_centers);
  const size_t c_count = p.channels;
  for (size_t n = 0; n < p.batch; ++n)
    for (size_t oy = 0; oy < p.out_h; ++oy)
      for (size_t ox = 0; ox < p.out_w; ++ox) {
        const float* src = x.data() + ((n * p.in_h + ty[oy]) * p.in_w + tx[ox]) * c_count;
        std::copy(src, src + c_count, y.data() + ((n * p.out_h + oy) * p.out_w + ox) * c_count);
      }
  y.finish(0);
  return Status::ok();
}

}  // namespace

void register_resize_ops(OpRegistry& r) {
  r.add({OperationType::RESIZE_BILINEAR, prepare_resize, run_bilinear});
  r.add({OperationType::RESIZE_NEAREST_NEIGHBOR, prepare_resize, run_nearest});
}

std::vector<BilinearTap> bilinear_taps(uint32_t in, uint32_t out, bool align_corners, bool half_pixel) {
  const float scale = resize_scale(in, out, align_corners);
  std::vector<BilinearTap> taps(out);
  for (uint32_t d = 0; d < out; ++d) {
    const float src =
        half_pixel ? (static_cast<float>(d) + 0.5f) * scale - 0.5f : static_cast<float>(d) * scale;
    const float below = std::floor(src);
    const int64_t lo = std::max<int64_t>(static_cast<int64_t>(below), 0);
    const int64_t hi = std::min<int64_t>(static_cast<int64_t>(std::ceil(src)), in - 1);
    taps[d] = {static_cast<uint32_t>(lo), static_cast<uint32_t>(hi), src - static_cast<float>(lo)};
  }
  return taps;
}

}  // namespace nn

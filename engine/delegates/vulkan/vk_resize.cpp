// RESIZE_BILINEAR on the Vulkan delegate. The per-row and per-column taps are the reference
// kernel's (ops/resize_taps.h: TFLite's coordinate rules, OPS.md), computed on the host, so
// the device only blends and samples the same neighbours with the same weights.
#include "delegates/vulkan/vk_ops.h"
#include "ops/op_params.h"
#include "ops/resize_taps.h"

namespace nn::vk {

namespace {

// The layout of `Tap` in resize_bilinear.comp (std430: 16 bytes).
struct Tap {
  uint32_t lo = 0, hi = 0;
  float frac = 0.f;
  uint32_t unused = 0;
};
static_assert(sizeof(Tap) == 16);

void append_taps(uint32_t in, uint32_t out, bool align_corners, bool half_pixel, std::vector<Tap>& taps) {
  for (const BilinearTap& t : bilinear_taps(in, out, align_corners, half_pixel)) taps.push_back({t.lo, t.hi, t.frac, 0});
}

SupportResult resize_supports(const Model& m, const Operation& op) {
  std::string why;
  auto r = parse_resize(m, op, &why);
  if (!r) return SupportResult::no(why);
  return SupportResult::yes();
}

Status lower_resize(LoweringContext& ctx, const Model& m, const Operation& op, Dispatch& d) {
  std::string why;
  auto r = parse_resize(m, op, &why);
  if (!r) return Status(StatusCode::kUnsupportedOp, why);
  const Dims& in = m.operands[op.inputs[0]].dims;
  const Dims& out = m.operands[op.outputs[0]].dims;
  std::vector<Tap> taps;
  append_taps(in[1], out[1], r->align_corners, r->half_pixel_centers, taps);
  append_taps(in[2], out[2], r->align_corners, r->half_pixel_centers, taps);
  d.shader = "resize_bilinear";
  d.spec = {in[1], in[2], in[3], out[1], out[2]};
  d.bindings.push_back(ctx.operand(op.inputs[0]));
  d.bindings.push_back(
      ctx.upload({reinterpret_cast<const uint8_t*>(taps.data()), taps.size() * sizeof(Tap)}));
  d.items = num_elements(out);
  return Status::ok();
}

}  // namespace

void add_resize_lowerings(std::vector<OpLowering>& out) {
  out.push_back({OperationType::RESIZE_BILINEAR, resize_supports, lower_resize});
}

}  // namespace nn::vk

#version 450
// RESIZE_BILINEAR: one work item = one output element. The taps (the two clamped source
// rows/columns and the weight of the upper one, TFLite's coordinate rules) are the
// reference kernel's bilinear_taps() (engine/ops/resize_taps.h), computed on the host:
// OUT_H row taps, then OUT_W columns.
#include "common.glsl"

layout(constant_id = 4) const uint IN_H = 1;
layout(constant_id = 5) const uint IN_W = 1;
layout(constant_id = 6) const uint C = 1;
layout(constant_id = 7) const uint OUT_H = 1;
layout(constant_id = 8) const uint OUT_W = 1;

struct Tap {
  uint lo;
  uint hi;
  float frac;
  uint unused;
};

layout(std430, binding = 0) writeonly buffer Out { float y[]; };
layout(std430, binding = 1) readonly buffer In { float x[]; };
layout(std430, binding = 2) readonly buffer Taps { Tap taps[]; };

void main() {
  uint i = item();
  if (i >= TOTAL) return;
  uint c = i % C;
  uint pixel = i / C;
  uint ox = pixel % OUT_W;
  uint oy = (pixel / OUT_W) % OUT_H;
  uint n = pixel / (OUT_W * OUT_H);
  Tap v = taps[oy];
  Tap h = taps[OUT_H + ox];
  uint r0 = (n * IN_H + v.lo) * IN_W, r1 = (n * IN_H + v.hi) * IN_W;
  float p00 = x[(r0 + h.lo) * C + c], p01 = x[(r0 + h.hi) * C + c];
  float p10 = x[(r1 + h.lo) * C + c], p11 = x[(r1 + h.hi) * C + c];
  float fy = v.frac, fx = h.frac;
  y[i] = activate(p00 * (1.0 - fy) * (1.0 - fx) + p01 * (1.0 - fy) * fx + p10 * fy * (1.0 - fx) + p11 * fy * fx);
}

// NativeDotConv: a CONV_2D with very few output channels (a segmentation or heatmap head:
// pose_landmark's 3x3 conv 8 -> 1 over 256x256) as one dot product per output pixel and
// channel. NativeConv's GEMM computes output channels in panels 16 wide (AVX-512) or 8 wide
// (AVX2), so a one-channel conv there spends 15 of every 16 FMAs on padding. Here each
// window row of a pixel (kernel_w x in_c floats, contiguous in NHWC) is multiplied lane by
// lane with the filter's row, and the lanes of 16 (AVX-512) or 8 (AVX2) pixels' accumulators
// are summed in one transposing reduction, which leaves their outputs side by side.
#pragma once

#include <cstddef>
#include <cstdint>

#include "delegates/cpu/native_epilogue.h"
#include "delegates/cpu/native_kernels.h"

namespace nn::cpu {

class NativeDotConv final : public NativeOp {
 public:
  // The most output channels it takes (on AVX2; supports() says where below it pays).
  static constexpr uint32_t kMaxOutputs = 6;
  // The most it can be built for (nndotconv measures past kMaxOutputs); more: ok() is false.
  static constexpr uint32_t kMaxBuilt = 16;

  // Whether it runs this conv on `isa`'s kernels: one group, no dilation, an epilogue without
  // LOGISTIC, not a 1x1 stride-1 unpadded conv (those keep NativeConv, which the pointwise
  // fusions build on: a gated input, a projection after a depthwise conv, a conv moved before
  // a resize), and few enough outputs for its window rows: out_c x (a window row's floats
  // rounded up to whole vectors) at most 4 (AVX-512) or 6 (AVX2) window rows' floats. Each
  // output channel costs it about 3.2x (AVX-512) its share of the GEMM's FMAs, which pays a
  // whole 16- (8-) wide panel whatever out_c is (`nndotconv`, bench/README.md).
  static bool supports(const NativeConvShape& s, const Epilogue& e, const NativeIsa& isa);

  // filter: OHWI [out_c, kernel_h, kernel_w, in_c]; bias: [out_c] or nullptr.
  NativeDotConv(const NativeConvShape& s, const float* filter, const float* bias, const Epilogue& e,
                const NativeIsa& isa);
  void run(const NativeArgs& args) const override;
  const NativeConvShape& shape() const { return s_; }

  struct Task;

 private:
  static void row(void* ctx, size_t r);
  void finish_row(const Task& t, size_t r, float* out_row) const;

  NativeConvShape s_;
  Epilogue epilogue_;
  bool avx512_ = false;
  size_t lanes_ = 8;        // floats per vector and pixels per block (16 on AVX-512)
  size_t span_ = 0;         // a window row's floats (kernel_w in_c), rounded up to lanes_
  size_t ox_lo_ = 0, ox_hi_ = 0;  // output columns whose windows are inside horizontally
  float bias_[kMaxBuilt] = {};
};

}  // namespace nn::cpu

// NativeGroupedConv: a grouped convolution (GROUPED_CONV_2D) of at most 16 output channels
// per group on AVX-512, two groups per micro-kernel call.
//
// NativeConv runs a grouped conv group by group; with 16 output channels per group (RegNet's
// group width) its 8 x 16 zmm kernel holds 8 accumulators, one FMA chain per row, too few
// to keep both FMA units busy past the latency of each. Here one call computes 8 output
// pixels of two neighbouring groups side by side: 16 accumulators, each row's two halves
// reading their own group's input channels, the two groups' weights one 32-wide panel.
// Each tile of 8 pixels reads the input in place through a table of pointers per tap and
// pixel (a zero vector for the padding), as XNNPACK's indirect GEMMs do: no im2col copies.
// The epilogue is NativeConv's.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "delegates/cpu/native_kernels.h"

namespace nn::cpu {

class NativeGroupedConv final : public NativeOp {
 public:
  // filter: OHWI [out_c, kernel_h, kernel_w, in_c / groups]; bias: [out_c] or nullptr.
  NativeGroupedConv(const NativeConvShape& shape, const float* filter, const float* bias, const Epilogue& epilogue);
  void run(const NativeArgs& args) const override;

  // Whether it takes this shape on this ISA: AVX-512, 2+ groups that split both channel
  // counts, 1-16 output channels per group, at most 16 taps, not dilated.
  static bool supports(const NativeConvShape& shape, const NativeIsa& isa);
  const NativeConvShape& shape() const { return shape_; }

  struct Item;

 private:
  static void run_item(void* ctx, size_t row_piece, size_t pair_piece);

  NativeConvShape shape_;
  Epilogue epilogue_;
  size_t group_in_ = 0, group_out_ = 0;
  size_t k_ = 0;      // GEMM depth per group: kernel_h * kernel_w * group_in
  size_t pairs_ = 0;  // groups in twos (the last one alone when their count is odd)
  size_t tile_rows_ = 8;  // output pixels per micro-tile: 8, or 7 where that wastes fewer
  std::vector<float> zeros_;  // what a tap in the padding reads: a pixel of zeros
};

}  // namespace nn::cpu

// Dense 3x3 stride-1 convolutions by Winograd's minimal filtering, F(m x m, 3 x 3): each
// (m + 2) x (m + 2) input tile goes into the transform domain, where the conv is (m + 2)^2
// independent GEMMs [tiles x in_c] x [in_c x out_c] on NativeConv's micro-kernels
// (PackedGemm), and each result tile comes back as m x m output pixels. F(4x4, 3x3) does
// 36 multiplies where the direct conv does 144 (4x fewer), F(2x2, 3x3) 16 where it does 36
// (2.25x), at the price of the transforms and a larger float rounding error (F(4x4) ~1e-6
// relative per conv, F(2x2) ~2e-7: tests/runtime/native_winograd_test.cpp).
#pragma once

#include <cstddef>
#include <cstdint>

#include "delegates/cpu/native_kernels.h"

namespace nn::cpu {

class NativeWinograd final : public NativeOp {
 public:
  // shape: NativeWinograd::supports(shape). filter OHWI [out_c, 3, 3, in_c], bias [out_c] or
  // nullptr. output_tile: m, 4 or 2. slots: the most threads one run uses (each gets its
  // own transform buffers in the scratch).
  NativeWinograd(const NativeConvShape& shape, const float* filter, const float* bias,
                 const Epilogue& epilogue, size_t slots, uint32_t output_tile = 4,
                 const NativeIsa& isa = NativeIsa::best(), bool panel_split = true);
  void run(const NativeArgs& args) const override;
  // Per slot, one block of tiles' transformed input and GEMM output.
  size_t scratch_bytes() const override;

  // A 3x3 conv with stride 1 (any padding, any size). Dilation d: the d_h x d_w polyphase
  // sub-images (pixels y * d_h + a, x * d_w + b) each an undilated 3x3 conv over the input's
  // same sub-image, so their tiles gather and scatter pixels d apart.
  static bool supports(const NativeConvShape& s);
  uint32_t output_tile() const { return m_; }
  const NativeConvShape& shape() const { return shape_; }
  // All tiles in one block, the threads splitting the filters' panels (few tiles for large
  // filters; panel_split on): each filter byte is read once per run.
  bool splits_panels() const { return split_panels_; }
  size_t panel_group() const { return panel_group_; }

  struct Task;

 private:
  void run_split_panels(Task& task, pthreadpool_t pool) const;

  NativeConvShape shape_;
  Epilogue epilogue_;
  bool avx512_ = false;
  uint32_t m_ = 4;  // output tile side
  size_t slots_ = 1;
  size_t in_pad_ = 0, out_pad_ = 0;  // in_c / out_c rounded up to the vector width
  size_t tiles_h_ = 0, tiles_w_ = 0, tiles_ = 0;
  size_t block_ = 0;                  // tiles per block (the GEMMs' m)
  size_t slot_floats_ = 0;            // one slot's scratch
  bool split_panels_ = false;
  size_t panel_group_ = 1;  // panels per item of the split
  std::unique_ptr<PackedGemm> gemm_;  // (m + 2)^2 transformed filters, in_c x out_c each
};

// Where F(4x4, 3x3) beats NativeConv's implicit GEMM, measured per shape (nnwinograd:
// in/out channels 16..512, maps 7x7..112x112, 1 and 2 threads, AVX-512 and AVX2;
// bench/README.md): 16 channels or more in and out; out_c >= 32 unless in_c <= 32; and at
// least one 4x4 output tile per thread per 16384 (in_c x out_c) filter pairs, per 16384
// pairs whatever the threads where they split the filters' panels (panel_split).
bool winograd_pays(const NativeConvShape& s, int threads, bool panel_split = true);

// The kernel for a dense 3x3 stride-1 conv: 4 (F(4x4, 3x3)), 2 (F(2x2, 3x3)) or 0 (the
// direct conv). winograd_pays' F(4x4), except on maps with few 4x4 tiles per thread (7x7 and
// 8x8; at 2+ threads 13x13 and 14x14), where F(2x2) or the direct conv won per ISA and
// thread count (nnwinograd --copies, filters cold; bench/README.md). f2 off: winograd_pays
// alone (CpuOptions::winograd_f2).
// Dilated convs (dilated on; CpuOptions::dilated_winograd): F(4x4) where winograd_pays, else 0.
uint32_t winograd_choice(const NativeConvShape& s, int threads, bool panel_split, const NativeIsa& isa,
                         bool f2 = true, bool dilated = true);

}  // namespace nn::cpu

// Depthwise convolution (multiplier 1) with the epilogue fused: columns of 8 output pixels
// per channel block (8-channel vectors on AVX2, 16 on AVX-512F), each input vector loaded
// once for every tap that reads it where stride and width are known at compile time. The
// weights of a channel block are packed contiguously (bias, tap 0, tap 1, ...) so the loops
// stream them in order.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "delegates/cpu/native_kernels.h"

namespace nn::cpu {

NativeDepthwise::NativeDepthwise(const NativeConvShape& shape, const float* filter, const float* bias,
                                 const Epilogue& epilogue, const NativeIsa& isa)
    : shape_(shape), epilogue_(epilogue) {
  avx512_ = isa.avx512;
  lanes_ = avx512_ ? 16 : 8;
  // Packed per block of `lanes_` channels: [bias, tap (0,0), tap (0,1), ...] x lanes, zero past C.
  c_pad_ = (size_t(shape.out_c) + lanes_ - 1) / lanes_ * lanes_;
  const size_t taps = size_t(shape.kernel_h) * shape.kernel_w;
  AlignedFloats packed = allocate_floats(c_pad_ * (taps + 1));
  if (!packed) return;
  float* p = packed.get();
  for (size_t c = 0; c < shape.out_c; ++c) {
    float* block = p + (c / lanes_) * (taps + 1) * lanes_ + c % lanes_;
    block[0] = bias ? bias[c] : 0.f;
    for (size_t t = 0; t < taps; ++t) block[(t + 1) * lanes_] = filter[t * shape.out_c + c];
  }
  // 8-channel maps, stride and dilation 1, 3 or 5 wide: two pixels per zmm (pixel_pairs8),
  // each weight vector holding the 8 channels twice. Row pairs are left to the other kernels.
  pixel_pairs_ = avx512_ && isa.depthwise_pixel_pairs && shape.out_c == 8 && shape.stride_h == 1 &&
                 shape.stride_w == 1 && shape.dilation_h == 1 && shape.dilation_w == 1 &&
                 (shape.kernel_w == 3 || shape.kernel_w == 5);
  if (pixel_pairs_)
    for (size_t r = 0; r <= taps; ++r) std::memcpy(p + r * 16 + 8, p + r * 16, 8 * sizeof(float));
  packed_ = std::move(packed);
  zeros_ = allocate_floats(c_pad_ + 16);
  if (!zeros_) packed_.reset();
  // Output columns whose window lies inside the input horizontally: x0 = ox*stride - pad >= 0
  // and x0 + (kernel_w - 1) * dilation < in_w.
  const int64_t extent = int64_t(shape.kernel_w - 1) * shape.dilation_w;
  ox_lo_ = std::min<size_t>(shape.out_w, (shape.pad_left + shape.stride_w - 1) / shape.stride_w);
  const int64_t last = int64_t(shape.in_w) - 1 - extent + shape.pad_left;  // largest ox*stride allowed
  ox_hi_ = last < 0 ? ox_lo_ : std::min<size_t>(shape.out_w, size_t(last) / shape.stride_w + 1);
  ox_hi_ = std::max(ox_hi_, ox_lo_);
  // Row pairs (run_two_rows): stride and dilation 1, the widths with unrolled taps.
  // CpuOptions::depthwise_two_rows turns them off (for A/B runs).
  two_rows_ = shape.stride_h == 1 && shape.dilation_h == 1 && shape.stride_w == 1 &&
              shape.dilation_w == 1 && (shape.kernel_w == 3 || shape.kernel_w == 5) &&
              shape.kernel_h < kMaxKernelH && isa.two_rows && !pixel_pairs_;
}

struct NativeDepthwise::Task {
  const NativeDepthwise* op;
  const float* input;
  const float* residual;
  float* output;
};

namespace {

#if NN_NATIVE_X86

template <bool kMasked>
NN_INLINE_AVX2 __m256 load8(const float* p, __m256i mask) {
  return kMasked ? _mm256_maskload_ps(p, mask) : _mm256_loadu_ps(p);
}

struct RowArgs {
  const NativeConvShape* s;
  const float* packed;
  size_t taps;
  const float* const* rows;  // input row of each tap row ky (valid for ky_lo <= ky < ky_hi)
  uint32_t ky_lo, ky_hi;     // taps whose row is inside the image
  size_t ox_lo, ox_hi;       // output columns whose whole window is inside horizontally
  const float* res_row;
  float* out_row;
  const float* zeros;  // C zero floats: what taps in the padding read
};

// ---- AVX2: 8-channel blocks, the AVX-512 kernel's structure (below) on ymm registers (16:
// 8 accumulators, a tap row's kKw <= 5 weights and the loaded input). kEdge groups read
// their padding taps from the zero row.

NN_INLINE_AVX2 const float* column_at8(const float* row, int64_t x, int64_t in_w, size_t C,
                                       const float* zeros) {
  return x >= 0 && x < in_w ? row + size_t(x) * C : zeros;
}

template <bool kMasked, bool kRes>
NN_INLINE_AVX2 void finish8(float* out, const float* res, __m256i m, size_t n, __m256 acc,
                            const EpilogueAvx2& epi) {
  const __m256 r = kRes ? load8<kMasked>(res, m) : epi.zero;
  if (kMasked)
    store_first(out, epi(acc, r), n);
  else
    _mm256_storeu_ps(out, epi(acc, r));
}

// kPixels output pixels of one 8-channel block, as pixel_block16.
template <int kKw, int kStride, int kPixels, bool kMasked, bool kRes, bool kEdge>
NN_INLINE_AVX2 void pixel_block8(const RowArgs& a, size_t ox, size_t cb, __m256i m, const EpilogueAvx2& epi) {
  const NativeConvShape& s = *a.s;
  const size_t C = s.out_c, kw = kKw > 0 ? size_t(kKw) : s.kernel_w;
  const size_t tap_stride = size_t(s.dilation_w) * C, step = size_t(s.stride_w) * C;
  const float* w = a.packed + (cb / 8) * (a.taps + 1) * 8;
  __m256 acc[kPixels];
#pragma GCC unroll 8
  for (int p = 0; p < kPixels; ++p) acc[p] = _mm256_load_ps(w);
  const int64_t x0 = int64_t(ox) * s.stride_w - s.pad_left;
  const int64_t in_w = s.in_w;
  const float* zeros = a.zeros + cb;
  for (uint32_t ky = a.ky_lo; ky < a.ky_hi; ++ky) {
    const float* row = a.rows[ky] + cb;
    const float* in = kEdge ? row : row + size_t(x0) * C;
    const float* wk = w + (1 + ky * kw) * 8;
    if constexpr (kStride > 0 && kKw > 0) {
      __m256 wv[kKw];
#pragma GCC unroll 5
      for (int kx = 0; kx < kKw; ++kx) wv[kx] = _mm256_load_ps(wk + kx * 8);
      constexpr int kSpan = (kPixels - 1) * kStride + kKw;
#pragma GCC unroll 24
      for (int j = 0; j < kSpan; ++j, in += C) {
        __m256 x = load8<kMasked>(kEdge ? column_at8(row, x0 + j, in_w, C, zeros) : in, m);
        NN_KEEP_IN_REGISTER(x);
#pragma GCC unroll 5
        for (int kx = 0; kx < kKw; ++kx) {
          const int p = (j - kx) / kStride;
          if (j >= kx && (j - kx) % kStride == 0 && p < kPixels) acc[p] = _mm256_fmadd_ps(x, wv[kx], acc[p]);
        }
      }
    } else {
#pragma GCC unroll 5
      for (size_t kx = 0; kx < kw; ++kx) {
        const __m256 wv = _mm256_load_ps(wk + kx * 8);
#pragma GCC unroll 8
        for (int p = 0; p < kPixels; ++p) {
          const int64_t x = x0 + int64_t(kx) * s.dilation_w + int64_t(p) * s.stride_w;
          const float* src = kEdge ? column_at8(row, x, in_w, C, zeros) : in + kx * tap_stride + p * step;
          acc[p] = _mm256_fmadd_ps(load8<kMasked>(src, m), wv, acc[p]);
        }
      }
    }
  }
  float* out = a.out_row + ox * C + cb;
  const float* res = a.res_row + ox * C + cb;
  const size_t n = C - cb;
#pragma GCC unroll 8
  for (int p = 0; p < kPixels; ++p) finish8<kMasked, kRes>(out + p * C, res + p * C, m, n, acc[p], epi);
}

// kPixels (1, 2 or 4) output pixels of kBlocks consecutive full 8-channel blocks: 8
// independent FMA chains where a pixel group alone would have too few to cover the FMA
// latency (the 7x7 and 14x14 layers' edge and last pixels, one chain each, had made the
// wide layers slower than XNNPACK's up16x9). Weights and inputs read from memory.
template <int kKw, int kPixels, int kBlocks, bool kRes, bool kEdge>
NN_INLINE_AVX2 void pixel_blocks8(const RowArgs& a, size_t ox, size_t cb, const EpilogueAvx2& epi) {
  const NativeConvShape& s = *a.s;
  const size_t C = s.out_c, kw = kKw > 0 ? size_t(kKw) : s.kernel_w;
  const size_t block = (a.taps + 1) * 8;
  const float* w = a.packed + (cb / 8) * block;
  __m256 acc[kBlocks][kPixels];
#pragma GCC unroll 8
  for (int b = 0; b < kBlocks; ++b)
#pragma GCC unroll 8
    for (int p = 0; p < kPixels; ++p) acc[b][p] = _mm256_load_ps(w + b * block);
  const int64_t x0 = int64_t(ox) * s.stride_w - s.pad_left;
  const int64_t in_w = s.in_w;
  const float* zeros = a.zeros + cb;
  for (uint32_t ky = a.ky_lo; ky < a.ky_hi; ++ky) {
    const float* row = a.rows[ky] + cb;
    const float* wk = w + (1 + ky * kw) * 8;
#pragma GCC unroll 5
    for (size_t kx = 0; kx < kw; ++kx) {
      const float* src[kPixels];
#pragma GCC unroll 8
      for (int p = 0; p < kPixels; ++p) {
        const int64_t x = x0 + int64_t(kx) * s.dilation_w + int64_t(p) * s.stride_w;
        src[p] = kEdge ? column_at8(row, x, in_w, C, zeros) : row + size_t(x) * C;
      }
#pragma GCC unroll 8
      for (int b = 0; b < kBlocks; ++b) {
        const __m256 wv = _mm256_load_ps(wk + b * block + kx * 8);
#pragma GCC unroll 8
        for (int p = 0; p < kPixels; ++p)
          acc[b][p] = _mm256_fmadd_ps(_mm256_loadu_ps(src[p] + b * 8), wv, acc[b][p]);
      }
    }
  }
  float* out = a.out_row + ox * C + cb;
  const float* res = a.res_row + ox * C + cb;
#pragma GCC unroll 8
  for (int b = 0; b < kBlocks; ++b)
#pragma GCC unroll 8
    for (int p = 0; p < kPixels; ++p)
      finish8<false, kRes>(out + p * C + b * 8, res + p * C + b * 8, _mm256_setzero_si256(), 8, acc[b][p],
                           epi);
}

// Rows in walk_columns' order, one 8-channel block after another.
template <int kKw, int kStride, bool kRes>
struct OneRow8 {
  const RowArgs& a;
  size_t full;
  __m256i all, tail;
  const EpilogueAvx2& epi;
  template <int kPixels, bool kEdge>
  NN_INLINE_AVX2 void group(size_t ox) {
    size_t cb = 0;
    if constexpr (kPixels < 8) {
      constexpr int kBlocks = 8 / kPixels;
      for (; cb + kBlocks * 8 <= full; cb += kBlocks * 8)
        pixel_blocks8<kKw, kPixels, kBlocks, kRes, kEdge>(a, ox, cb, epi);
    }
    for (; cb < full; cb += 8) pixel_block8<kKw, kStride, kPixels, false, kRes, kEdge>(a, ox, cb, all, epi);
    if (full < a.s->out_c) pixel_block8<kKw, kStride, kPixels, true, kRes, kEdge>(a, ox, full, tail, epi);
  }
};

template <int kKw, int kStride, bool kHs, bool kRes>
NN_TARGET_AVX2 void depthwise_row8_t(const RowArgs& a, const EpilogueAvx2& shared_epi) {
  EpilogueAvx2 epi = shared_epi;
  epi.hard_swish = kHs;
  epi.residual = kRes;
  const size_t C = a.s->out_c, full = C / 8 * 8, out_w = a.s->out_w;
  OneRow8<kKw, kStride, kRes> w{a, full, _mm256_set1_epi32(-1), lane_mask(C - full), epi};
  // Groups of 4 across the left edge, 8 then 4 inside, 4 across the right edge, then
  // single pixels (the edge ones on the zero row too).
  size_t ox = 0;
  for (; ox < a.ox_lo && ox + 4 <= out_w; ox += 4) w.template group<4, true>(ox);
  for (; ox < a.ox_lo; ++ox) w.template group<1, true>(ox);
  for (; ox + 8 <= a.ox_hi; ox += 8) w.template group<8, false>(ox);
  if (ox + 4 <= a.ox_hi) w.template group<4, false>(ox), ox += 4;
  for (; ox + 4 <= out_w; ox += 4) w.template group<4, true>(ox);
  for (; ox < a.ox_hi; ++ox) w.template group<1, false>(ox);
  for (; ox < out_w; ++ox) w.template group<1, true>(ox);
}

template <int kKw, bool kHs, bool kRes>
void depthwise_row8(const RowArgs& a, const EpilogueAvx2& epi) {
  if constexpr (kKw > 0) {
    if (a.s->dilation_w == 1 && a.s->stride_w == 1) return depthwise_row8_t<kKw, 1, kHs, kRes>(a, epi);
    if (a.s->dilation_w == 1 && a.s->stride_w == 2) return depthwise_row8_t<kKw, 2, kHs, kRes>(a, epi);
  }
  depthwise_row8_t<kKw, 0, kHs, kRes>(a, epi);
}

template <int kKw>
void depthwise_row8_dispatch(const RowArgs& a, const EpilogueAvx2& epi) {
  if (epi.hard_swish)
    (epi.residual ? depthwise_row8<kKw, true, true> : depthwise_row8<kKw, true, false>)(a, epi);
  else
    (epi.residual ? depthwise_row8<kKw, false, true> : depthwise_row8<kKw, false, false>)(a, epi);
}

// Two output rows at once on AVX2 (run_two_rows; the AVX-512 form below says why): 4
// pixels of each row, 8 accumulators. Tap row by tap row: tap row r's weights (in
// registers) meet input row r for the upper output row and r + 1 for the lower, so all 8
// FMA chains advance in every step. Two ymm FMAs issue per cycle at 4 cycles' latency, so
// 8 chains are just enough: reading each input row once for both (its pixels feeding tap
// row r of the upper and r - 1 of the lower) left the first and last input rows to 4
// chains, half the FMA rate for a third of a 3x3 layer's work. Each accumulator takes its
// taps in the same order as a row at a time, so the results are the same bits.
template <int kKw, int kPixels, bool kMasked, bool kEdge>
NN_INLINE_AVX2 void tap_row_two8(const float* row_up, const float* row_lo, const float* wk, int64_t x0,
                                 int64_t in_w, size_t C, const float* zeros, __m256i m,
                                 __m256 (&upper)[kPixels], __m256 (&lower)[kPixels]) {
  __m256 wv[kKw];
#pragma GCC unroll 5
  for (int kx = 0; kx < kKw; ++kx) wv[kx] = _mm256_load_ps(wk + kx * 8);
  const float* up = kEdge ? row_up : row_up + size_t(x0) * C;
  const float* lo = kEdge ? row_lo : row_lo + size_t(x0) * C;
  constexpr int kSpan = kPixels - 1 + kKw;
#pragma GCC unroll 16
  for (int j = 0; j < kSpan; ++j, up += C, lo += C) {
    __m256 xu = load8<kMasked>(kEdge ? column_at8(row_up, x0 + j, in_w, C, zeros) : up, m);
    __m256 xl = load8<kMasked>(kEdge ? column_at8(row_lo, x0 + j, in_w, C, zeros) : lo, m);
    NN_KEEP_IN_REGISTER(xu);
    NN_KEEP_IN_REGISTER(xl);
#pragma GCC unroll 5
    for (int kx = 0; kx < kKw; ++kx) {
      const int p = j - kx;
      if (p < 0 || p >= kPixels) continue;
      upper[p] = _mm256_fmadd_ps(xu, wv[kx], upper[p]);
      lower[p] = _mm256_fmadd_ps(xl, wv[kx], lower[p]);
    }
  }
}

// kKh: the kernel height where known at compile time (else 0), so the tap rows unroll;
// kC: the channel count likewise (16), so the input columns are constant offsets.
template <int kKw, int kKh, int kC, int kPixels, bool kMasked, bool kRes, bool kEdge>
NN_INLINE_AVX2 void pixel_block8_two(const RowArgs& a, const RowArgs& b, size_t ox, size_t cb, __m256i m,
                                     const EpilogueAvx2& epi) {
  const NativeConvShape& s = *a.s;
  const size_t C = kC > 0 ? size_t(kC) : s.out_c, kh = kKh > 0 ? size_t(kKh) : s.kernel_h;
  float* const out_a = a.out_row;
  float* const out_b = b.out_row;
  const float* const res_a = a.res_row;
  const float* const res_b = b.res_row;
  const float* w = a.packed + (cb / 8) * (a.taps + 1) * 8;
  __m256 upper[kPixels], lower[kPixels];
#pragma GCC unroll 8
  for (int p = 0; p < kPixels; ++p) upper[p] = lower[p] = _mm256_load_ps(w);
  const int64_t x0 = int64_t(ox) - s.pad_left, in_w = s.in_w;
  const float* zeros = a.zeros + cb;
#pragma GCC unroll 8
  for (size_t r = 0; r < kh; ++r)
    tap_row_two8<kKw, kPixels, kMasked, kEdge>(a.rows[r] + cb, b.rows[r] + cb, w + (1 + r * kKw) * 8, x0,
                                               in_w, C, zeros, m, upper, lower);
  const size_t at = ox * C + cb, n = C - cb;
#pragma GCC unroll 8
  for (int p = 0; p < kPixels; ++p) {
    finish8<kMasked, kRes>(out_a + at + p * C, res_a + at + p * C, m, n, upper[p], epi);
    finish8<kMasked, kRes>(out_b + at + p * C, res_b + at + p * C, m, n, lower[p], epi);
  }
}

// Two rows (a: the upper, b: the lower) in depthwise_row8_t's column order: groups of 4
// (8 as two 4s) in pairs, single pixels a row at a time.
template <int kKw, int kKh, int kC, bool kRes>
struct TwoRows8 {
  const RowArgs& a;
  const RowArgs& b;
  size_t full;
  __m256i all, tail;
  const EpilogueAvx2& epi;
  template <int kPixels, bool kEdge>
  NN_INLINE_AVX2 void group(size_t ox) {
    if constexpr (kPixels == 1) {
      OneRow8<kKw, 1, kRes>{a, full, all, tail, epi}.template group<1, kEdge>(ox);
      OneRow8<kKw, 1, kRes>{b, full, all, tail, epi}.template group<1, kEdge>(ox);
    } else if constexpr (kPixels == 8) {
      group<4, kEdge>(ox);
      group<4, kEdge>(ox + 4);
    } else {
      for (size_t cb = 0; cb < full; cb += 8)
        pixel_block8_two<kKw, kKh, kC, kPixels, false, kRes, kEdge>(a, b, ox, cb, all, epi);
      if (full < a.s->out_c)
        pixel_block8_two<kKw, kKh, kC, kPixels, true, kRes, kEdge>(a, b, ox, full, tail, epi);
    }
  }
};

template <int kKw, int kKh, int kC, bool kHs, bool kRes>
NN_TARGET_AVX2 void depthwise_two_rows8_t(const RowArgs& a, const RowArgs& b,
                                          const EpilogueAvx2& shared_epi) {
  EpilogueAvx2 epi = shared_epi;
  epi.hard_swish = kHs;
  epi.residual = kRes;
  const size_t C = a.s->out_c, full = C / 8 * 8, out_w = a.s->out_w;
  TwoRows8<kKw, kKh, kC, kRes> w{a, b, full, _mm256_set1_epi32(-1), lane_mask(C - full), epi};
  size_t ox = 0;
  for (; ox < a.ox_lo && ox + 4 <= out_w; ox += 4) w.template group<4, true>(ox);
  for (; ox < a.ox_lo; ++ox) w.template group<1, true>(ox);
  for (; ox + 8 <= a.ox_hi; ox += 8) w.template group<8, false>(ox);
  if (ox + 4 <= a.ox_hi) w.template group<4, false>(ox), ox += 4;
  for (; ox + 4 <= out_w; ox += 4) w.template group<4, true>(ox);
  for (; ox < a.ox_hi; ++ox) w.template group<1, false>(ox);
  for (; ox < out_w; ++ox) w.template group<1, true>(ox);
}

template <int kKw, int kKh, int kC>
void depthwise_two_rows8_epilogue(const RowArgs& a, const RowArgs& b, const EpilogueAvx2& epi) {
  if (epi.hard_swish)
    (epi.residual ? depthwise_two_rows8_t<kKw, kKh, kC, true, true>
                  : depthwise_two_rows8_t<kKw, kKh, kC, true, false>)(a, b, epi);
  else
    (epi.residual ? depthwise_two_rows8_t<kKw, kKh, kC, false, true>
                  : depthwise_two_rows8_t<kKw, kKh, kC, false, false>)(a, b, epi);
}

// 3x3: the tap rows unrolled, and 16 channels (selfie's wide maps) at constant offsets;
// 5x5 keeps its tap-row loop (unrolled, it ran slower).
template <int kKw>
void depthwise_two_rows8_dispatch(const RowArgs& a, const RowArgs& b, const EpilogueAvx2& epi) {
  if (kKw != 3 || a.s->kernel_h != 3) return depthwise_two_rows8_epilogue<kKw, 0, 0>(a, b, epi);
  if (a.s->out_c == 16) return depthwise_two_rows8_epilogue<3, 3, 16>(a, b, epi);
  depthwise_two_rows8_epilogue<3, 3, 0>(a, b, epi);
}

// ---- AVX-512F: 16-channel blocks, k-masked channel tails (plain instructions, unlike
// AVX2's microcoded vmaskmovps on AMD). kHs / kRes: the epilogue's stages as constants.

NN_INLINE_AVX512 __mmask16 mask16(size_t n) {
  return n >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << n) - 1);
}

template <bool kMasked>
NN_INLINE_AVX512 __m512 load16(const float* p, __mmask16 m) {
  return kMasked ? _mm512_maskz_loadu_ps(m, p) : _mm512_loadu_ps(p);
}

template <bool kMasked, bool kRes>
NN_INLINE_AVX512 void finish16(float* out, const float* res, __mmask16 m, __m512 acc,
                               const EpilogueAvx512& epi) {
  const __m512 r = kRes ? load16<kMasked>(res, m) : epi.zero;
  if (kMasked)
    _mm512_mask_storeu_ps(out, m, epi(acc, r));
  else
    _mm512_storeu_ps(out, epi(acc, r));
}

template <bool kMasked, bool kRes>
NN_INLINE_AVX512 void edge_block16(const RowArgs& a, size_t ox, size_t cb, __mmask16 m,
                                   const EpilogueAvx512& epi) {
  const NativeConvShape& s = *a.s;
  const size_t C = s.out_c, kw = s.kernel_w;
  const int64_t x0 = int64_t(ox) * s.stride_w - s.pad_left;
  // The taps inside the image horizontally, [kx_lo, kx_hi): no branch per tap.
  size_t kx_lo = 0, kx_hi = kw;
  while (kx_lo < kw && x0 + int64_t(kx_lo) * s.dilation_w < 0) ++kx_lo;
  while (kx_hi > kx_lo && x0 + int64_t(kx_hi - 1) * s.dilation_w >= int64_t(s.in_w)) --kx_hi;
  const float* w = a.packed + (cb / 16) * (a.taps + 1) * 16;
  const size_t tap_stride = size_t(s.dilation_w) * C;
  __m512 acc = _mm512_load_ps(w);
  for (uint32_t ky = a.ky_lo; ky < a.ky_hi; ++ky) {
    const float* in = a.rows[ky] + cb + (kx_lo < kx_hi ? size_t(x0 + int64_t(kx_lo) * s.dilation_w) * C : 0);
    const float* wk = w + (1 + ky * kw) * 16;
    for (size_t kx = kx_lo; kx < kx_hi; ++kx, in += tap_stride)
      acc = _mm512_fmadd_ps(load16<kMasked>(in, m), _mm512_load_ps(wk + kx * 16), acc);
  }
  const size_t at = ox * C + cb;
  finish16<kMasked, kRes>(a.out_row + at, a.res_row + at, m, acc, epi);
}

// Input column x of a row: the zero vector outside the image (edge groups read their
// padding taps from it).
NN_INLINE_AVX512 const float* column_at(const float* row, int64_t x, int64_t in_w, size_t C,
                                        const float* zeros) {
  return x >= 0 && x < in_w ? row + size_t(x) * C : zeros;
}

// kPixels output pixels of one 16-channel block: kPixels independent FMA chains (32 zmm
// registers leave room for 8). kStride > 0 (with dilation 1, kKw > 0): the input pixels of
// a tap row are walked once, each load feeding every tap that reads it (stride 1, 3 taps:
// 10 loads for 24 FMAs instead of 24), one pointer bumped by C (the strided form spilled
// its per-pixel offsets). kStride 0: any stride and dilation, each weight load shared by
// the kPixels chains. kEdge: some taps fall in the horizontal padding and read the zero
// vector instead (so edge pixels run 4 chains at a time too: one pixel at a time, each a
// single chain of 25 FMAs, had cost a third of a 16x16x128 5x5 layer).
template <int kKw, int kStride, int kPixels, bool kMasked, bool kRes, bool kEdge = false>
NN_INLINE_AVX512 void pixel_block16(const RowArgs& a, size_t ox, size_t cb, __mmask16 m,
                                    const EpilogueAvx512& epi) {
  const NativeConvShape& s = *a.s;
  const size_t C = s.out_c, kw = kKw > 0 ? size_t(kKw) : s.kernel_w;
  const size_t tap_stride = size_t(s.dilation_w) * C, step = size_t(s.stride_w) * C;
  const float* w = a.packed + (cb / 16) * (a.taps + 1) * 16;
  __m512 acc[kPixels];
#pragma GCC unroll 8
  for (int p = 0; p < kPixels; ++p) acc[p] = _mm512_load_ps(w);
  const int64_t x0 = int64_t(ox) * s.stride_w - s.pad_left;
  const int64_t in_w = s.in_w;
  const float* zeros = a.zeros + cb;
  for (uint32_t ky = a.ky_lo; ky < a.ky_hi; ++ky) {
    const float* row = a.rows[ky] + cb;
    const float* in = kEdge ? row : row + size_t(x0) * C;
    const float* wk = w + (1 + ky * kw) * 16;
    if constexpr (kStride > 0 && kKw > 0) {
      __m512 wv[kKw];
#pragma GCC unroll 5
      for (int kx = 0; kx < kKw; ++kx) wv[kx] = _mm512_load_ps(wk + kx * 16);
      constexpr int kSpan = (kPixels - 1) * kStride + kKw;  // input pixels the row reads
#pragma GCC unroll 24
      for (int j = 0; j < kSpan; ++j, in += C) {
        __m512 x = load16<kMasked>(kEdge ? column_at(row, x0 + j, in_w, C, zeros) : in, m);
        NN_KEEP_IN_REGISTER(x);
#pragma GCC unroll 5
        for (int kx = 0; kx < kKw; ++kx) {
          const int p = (j - kx) / kStride;
          if (j >= kx && (j - kx) % kStride == 0 && p < kPixels) acc[p] = _mm512_fmadd_ps(x, wv[kx], acc[p]);
        }
      }
    } else {
#pragma GCC unroll 5
      for (size_t kx = 0; kx < kw; ++kx) {
        const __m512 wv = _mm512_load_ps(wk + kx * 16);
#pragma GCC unroll 8
        for (int p = 0; p < kPixels; ++p) {
          const int64_t x = x0 + int64_t(kx) * s.dilation_w + int64_t(p) * s.stride_w;
          const float* src = kEdge ? column_at(row, x, in_w, C, zeros) : in + kx * tap_stride + p * step;
          acc[p] = _mm512_fmadd_ps(load16<kMasked>(src, m), wv, acc[p]);
        }
      }
    }
  }
  float* out = a.out_row + ox * C + cb;
  const float* res = a.res_row + ox * C + cb;
#pragma GCC unroll 8
  for (int p = 0; p < kPixels; ++p) finish16<kMasked, kRes>(out + p * C, res + p * C, m, acc[p], epi);
}

template <int kKw, int kStride, int kPixels, bool kRes, bool kEdge = false>
NN_INLINE_AVX512 void pixel_group16(const RowArgs& a, size_t ox, size_t full, __mmask16 tail,
                                    const EpilogueAvx512& epi) {
  for (size_t cb = 0; cb < full; cb += 16)
    pixel_block16<kKw, kStride, kPixels, false, kRes, kEdge>(a, ox, cb, tail, epi);
  if (full < a.s->out_c) pixel_block16<kKw, kStride, kPixels, true, kRes, kEdge>(a, ox, full, tail, epi);
}

template <bool kRes>
NN_INLINE_AVX512 void edge_pixel16(const RowArgs& a, size_t ox, size_t full, __mmask16 tail,
                                   const EpilogueAvx512& epi) {
  for (size_t cb = 0; cb < full; cb += 16) edge_block16<false, kRes>(a, ox, cb, tail, epi);
  if (full < a.s->out_c) edge_block16<true, kRes>(a, ox, full, tail, epi);
}

// The order in which a row's output columns are run: groups of 4 across the left edge, 8
// then 4 inside, groups of 4 across the right edge (with any inner pixels left over), then
// single pixels. Walker: group<kPixels, kEdge>(ox) and edge(ox) (one edge pixel).
template <class Walker>
NN_INLINE_AVX512 void walk_columns(const RowArgs& a, Walker& w) {
  const size_t out_w = a.s->out_w;
  size_t ox = 0;
  for (; ox < a.ox_lo && ox + 4 <= out_w; ox += 4) w.template group<4, true>(ox);
  for (; ox < a.ox_lo; ++ox) w.edge(ox);
  for (; ox + 8 <= a.ox_hi; ox += 8) w.template group<8, false>(ox);
  if (ox + 4 <= a.ox_hi) w.template group<4, false>(ox), ox += 4;
  for (; ox + 4 <= out_w; ox += 4) w.template group<4, true>(ox);
  for (; ox < a.ox_hi; ++ox) w.template group<1, false>(ox);
  for (; ox < out_w; ++ox) w.edge(ox);
}

template <int kKw, int kStride, bool kRes>
struct OneRow {
  const RowArgs& a;
  size_t full;
  __mmask16 tail;
  const EpilogueAvx512& epi;
  template <int kPixels, bool kEdge>
  NN_INLINE_AVX512 void group(size_t ox) {
    pixel_group16<kKw, kStride, kPixels, kRes, kEdge>(a, ox, full, tail, epi);
  }
  NN_INLINE_AVX512 void edge(size_t ox) { edge_pixel16<kRes>(a, ox, full, tail, epi); }
};

template <int kKw, int kStride, bool kHs, bool kRes>
NN_TARGET_AVX512 void depthwise_row16_t(const RowArgs& a, const EpilogueAvx512& shared_epi) {
  EpilogueAvx512 epi = shared_epi;
  epi.hard_swish = kHs;
  epi.residual = kRes;
  const size_t C = a.s->out_c, full = C / 16 * 16;
  OneRow<kKw, kStride, kRes> walker{a, full, mask16(C - full), epi};
  walk_columns(a, walker);
}

// Two output rows at once for stride-1 layers (dilation 1) whose every tap row is inside
// the image for both: each input row is read once for the two, its pixels feeding tap row r
// of the upper output row and r - 1 of the lower (3x3: 4 input rows read for 2 output rows,
// where a row at a time reads 6). kTop / kBottom: which of the two the input row feeds.

template <int kKw, int kPixels, bool kMasked, bool kEdge, bool kTop, bool kBottom>
NN_INLINE_AVX512 void input_row_two(const float* row, const float* w_top, const float* w_bottom, int64_t x0,
                                    int64_t in_w, size_t C, const float* zeros, __mmask16 m,
                                    __m512 (&upper)[kPixels], __m512 (&lower)[kPixels]) {
  __m512 wt[kKw], wb[kKw];
#pragma GCC unroll 5
  for (int kx = 0; kx < kKw; ++kx) {
    if constexpr (kTop) wt[kx] = _mm512_load_ps(w_top + kx * 16);
    if constexpr (kBottom) wb[kx] = _mm512_load_ps(w_bottom + kx * 16);
  }
  const float* in = kEdge ? row : row + size_t(x0) * C;
  constexpr int kSpan = kPixels - 1 + kKw;
#pragma GCC unroll 16
  for (int j = 0; j < kSpan; ++j, in += C) {
    __m512 x = load16<kMasked>(kEdge ? column_at(row, x0 + j, in_w, C, zeros) : in, m);
    NN_KEEP_IN_REGISTER(x);
#pragma GCC unroll 5
    for (int kx = 0; kx < kKw; ++kx) {
      const int p = j - kx;
      if (p < 0 || p >= kPixels) continue;
      if constexpr (kTop) upper[p] = _mm512_fmadd_ps(x, wt[kx], upper[p]);
      if constexpr (kBottom) lower[p] = _mm512_fmadd_ps(x, wb[kx], lower[p]);
    }
  }
}

template <int kKw, int kPixels, bool kMasked, bool kRes, bool kEdge>
NN_INLINE_AVX512 void pixel_block16_two(const RowArgs& a, const RowArgs& b, size_t ox, size_t cb, __mmask16 m,
                                        const EpilogueAvx512& epi) {
  const NativeConvShape& s = *a.s;
  const size_t C = s.out_c, kh = s.kernel_h;
  const float* w = a.packed + (cb / 16) * (a.taps + 1) * 16;
  const float* taps = w + 16;  // tap row r: taps + r * kKw * 16
  __m512 upper[kPixels], lower[kPixels];
#pragma GCC unroll 8
  for (int p = 0; p < kPixels; ++p) upper[p] = lower[p] = _mm512_load_ps(w);
  const int64_t x0 = int64_t(ox) - s.pad_left, in_w = s.in_w;
  const float* zeros = a.zeros + cb;
  constexpr size_t kRow = size_t(kKw) * 16;
  input_row_two<kKw, kPixels, kMasked, kEdge, true, false>(a.rows[0] + cb, taps, nullptr, x0, in_w, C, zeros,
                                                           m, upper, lower);
  for (size_t r = 1; r < kh; ++r)
    input_row_two<kKw, kPixels, kMasked, kEdge, true, true>(
        a.rows[r] + cb, taps + r * kRow, taps + (r - 1) * kRow, x0, in_w, C, zeros, m, upper, lower);
  input_row_two<kKw, kPixels, kMasked, kEdge, false, true>(
      b.rows[kh - 1] + cb, nullptr, taps + (kh - 1) * kRow, x0, in_w, C, zeros, m, upper, lower);
  const size_t at = ox * C + cb;
#pragma GCC unroll 8
  for (int p = 0; p < kPixels; ++p) {
    finish16<kMasked, kRes>(a.out_row + at + p * C, a.res_row + at + p * C, m, upper[p], epi);
    finish16<kMasked, kRes>(b.out_row + at + p * C, b.res_row + at + p * C, m, lower[p], epi);
  }
}

template <int kKw, int kPixels, bool kRes, bool kEdge = false>
NN_INLINE_AVX512 void pixel_group16_two(const RowArgs& a, const RowArgs& b, size_t ox, size_t full,
                                        __mmask16 tail, const EpilogueAvx512& epi) {
  for (size_t cb = 0; cb < full; cb += 16)
    pixel_block16_two<kKw, kPixels, false, kRes, kEdge>(a, b, ox, cb, tail, epi);
  if (full < a.s->out_c) pixel_block16_two<kKw, kPixels, true, kRes, kEdge>(a, b, ox, full, tail, epi);
}

// Two rows (a: the upper, b: the lower) in walk_columns' order; single pixels a row at a time.
template <int kKw, bool kRes>
struct TwoRows {
  const RowArgs& a;
  const RowArgs& b;
  size_t full;
  __mmask16 tail;
  const EpilogueAvx512& epi;
  template <int kPixels, bool kEdge>
  NN_INLINE_AVX512 void group(size_t ox) {
    if constexpr (kPixels == 1) {
      pixel_group16<kKw, 1, 1, kRes, kEdge>(a, ox, full, tail, epi);
      pixel_group16<kKw, 1, 1, kRes, kEdge>(b, ox, full, tail, epi);
    } else {
      pixel_group16_two<kKw, kPixels, kRes, kEdge>(a, b, ox, full, tail, epi);
    }
  }
  NN_INLINE_AVX512 void edge(size_t ox) {
    edge_pixel16<kRes>(a, ox, full, tail, epi);
    edge_pixel16<kRes>(b, ox, full, tail, epi);
  }
};

template <int kKw, bool kHs, bool kRes>
NN_TARGET_AVX512 void depthwise_two_rows16_t(const RowArgs& a, const RowArgs& b,
                                             const EpilogueAvx512& shared_epi) {
  EpilogueAvx512 epi = shared_epi;
  epi.hard_swish = kHs;
  epi.residual = kRes;
  const size_t C = a.s->out_c, full = C / 16 * 16;
  TwoRows<kKw, kRes> walker{a, b, full, mask16(C - full), epi};
  walk_columns(a, walker);
}

template <int kKw>
void depthwise_two_rows16_dispatch(const RowArgs& a, const RowArgs& b, const EpilogueAvx512& epi) {
  if (epi.hard_swish)
    (epi.residual ? depthwise_two_rows16_t<kKw, true, true> : depthwise_two_rows16_t<kKw, true, false>)(a, b,
                                                                                                        epi);
  else
    (epi.residual ? depthwise_two_rows16_t<kKw, false, true>
                  : depthwise_two_rows16_t<kKw, false, false>)(a, b, epi);
}

// All channel counts: the column kernel beats a pointer-table one (XNNPACK's way) on
// wide layers too (MobileNetV2, bench/README.md): per pixel, the tap table cost more than
// its 18 FMAs.
template <int kKw, bool kHs, bool kRes>
void depthwise_row16(const RowArgs& a, const EpilogueAvx512& epi) {
  if constexpr (kKw > 0) {
    if (a.s->dilation_w == 1 && a.s->stride_w == 1) return depthwise_row16_t<kKw, 1, kHs, kRes>(a, epi);
    if (a.s->dilation_w == 1 && a.s->stride_w == 2) return depthwise_row16_t<kKw, 2, kHs, kRes>(a, epi);
  }
  depthwise_row16_t<kKw, 0, kHs, kRes>(a, epi);
}

template <int kKw>
void depthwise_row16_dispatch(const RowArgs& a, const EpilogueAvx512& epi) {
  if (epi.hard_swish)
    (epi.residual ? depthwise_row16<kKw, true, true> : depthwise_row16<kKw, true, false>)(a, epi);
  else
    (epi.residual ? depthwise_row16<kKw, false, true> : depthwise_row16<kKw, false, false>)(a, epi);
}

// ---- AVX-512F, 8 channels, stride and dilation 1 (NativeIsa::depthwise_pixel_pairs): two
// adjacent output pixels per zmm, the weights duplicated across its halves, so the 16
// contiguous floats of input pixels x, x + 1 are one load and no lane is masked off (the
// 16-channel kernel above leaves half of every vector empty on such maps). Taps accumulate
// in the same order as there, so the results are the same bits.

// kPairs pairs of output pixels from ox (n of them inside the row); kEdge: some taps fall
// in the horizontal padding (each input load masked to its pixels inside the image).
template <int kKw, int kPairs, bool kRes, bool kEdge>
NN_INLINE_AVX512 void pixel_pairs8(const RowArgs& a, size_t ox, size_t n, const EpilogueAvx512& epi) {
  const NativeConvShape& s = *a.s;
  const float* w = a.packed;
  __m512 wv[kKw], acc[kPairs];
#pragma GCC unroll 8
  for (int p = 0; p < kPairs; ++p) acc[p] = _mm512_load_ps(w);
  const int64_t x0 = int64_t(ox) - s.pad_left, in_w = s.in_w;
  for (uint32_t ky = a.ky_lo; ky < a.ky_hi; ++ky) {
    const float* row = a.rows[ky];
#pragma GCC unroll 5
    for (int kx = 0; kx < kKw; ++kx) wv[kx] = _mm512_load_ps(w + (1 + ky * kKw + kx) * 16);
    constexpr int kSpan = 2 * (kPairs - 1) + kKw;
#pragma GCC unroll 24
    for (int j = 0; j < kSpan; ++j) {
      const int64_t x = x0 + j;
      __m512 v;
      if constexpr (kEdge) {
        const __mmask16 m = __mmask16((x >= 0 && x < in_w ? 0x00FF : 0) | (x + 1 >= 0 && x + 1 < in_w ? 0xFF00 : 0));
        // Masked-off lanes are not read, so x = -1 and x + 1 = in_w stay inside the row.
        v = _mm512_maskz_loadu_ps(m, reinterpret_cast<const float*>(reinterpret_cast<uintptr_t>(row) +
                                                                    uintptr_t(x * 8 * int64_t(sizeof(float)))));
      } else {
        v = _mm512_loadu_ps(row + size_t(x) * 8);
      }
      NN_KEEP_IN_REGISTER(v);
#pragma GCC unroll 5
      for (int kx = 0; kx < kKw; ++kx) {
        const int p = (j - kx) / 2;
        if (j >= kx && (j - kx) % 2 == 0 && p < kPairs) acc[p] = _mm512_fmadd_ps(v, wv[kx], acc[p]);
      }
    }
  }
#pragma GCC unroll 8
  for (int p = 0; p < kPairs; ++p) {
    const size_t at = (ox + 2 * size_t(p)) * 8;
    if (2 * size_t(p) + 2 <= n) {
      finish16<false, kRes>(a.out_row + at, a.res_row + at, 0xFFFF, acc[p], epi);
    } else if (2 * size_t(p) < n) {
      finish16<true, kRes>(a.out_row + at, a.res_row + at, 0x00FF, acc[p], epi);
    }
  }
}

template <int kKw, bool kHs, bool kRes>
NN_TARGET_AVX512 void depthwise_pairs8_t(const RowArgs& a, const EpilogueAvx512& shared_epi) {
  EpilogueAvx512 epi = shared_epi;
  epi.hard_swish = kHs;
  epi.residual = kRes;
  const size_t out_w = a.s->out_w;
  // Groups of 4 pixels across the left edge, 16 then 4 inside, 4 across the right edge.
  size_t ox = 0;
  for (; ox < a.ox_lo; ox += 4) pixel_pairs8<kKw, 2, kRes, true>(a, ox, std::min<size_t>(4, out_w - ox), epi);
  for (; ox + 16 <= a.ox_hi; ox += 16) pixel_pairs8<kKw, 8, kRes, false>(a, ox, 16, epi);
  for (; ox + 4 <= a.ox_hi; ox += 4) pixel_pairs8<kKw, 2, kRes, false>(a, ox, 4, epi);
  for (; ox < out_w; ox += 4) pixel_pairs8<kKw, 2, kRes, true>(a, ox, std::min<size_t>(4, out_w - ox), epi);
}

template <int kKw>
void depthwise_pairs8_dispatch(const RowArgs& a, const EpilogueAvx512& epi) {
  if (epi.hard_swish)
    (epi.residual ? depthwise_pairs8_t<kKw, true, true> : depthwise_pairs8_t<kKw, true, false>)(a, epi);
  else
    (epi.residual ? depthwise_pairs8_t<kKw, false, true> : depthwise_pairs8_t<kKw, false, false>)(a, epi);
}

#endif

}  // namespace

void NativeDepthwise::run_row(const float* const* rows, size_t oy, const float* residual_row,
                              float* output_row) const {
  const NativeConvShape& s = shape_;
#if NN_NATIVE_X86
  const int64_t y0 = int64_t(oy) * s.stride_h - s.pad_top;
  RowArgs a{
      &s,     packed_.get(), size_t(s.kernel_h) * s.kernel_w,          rows,       0,           s.kernel_h,
      ox_lo_, ox_hi_,        residual_row ? residual_row : output_row, output_row, zeros_.get()};
  while (a.ky_lo < a.ky_hi && y0 + int64_t(a.ky_lo) * s.dilation_h < 0) ++a.ky_lo;
  while (a.ky_hi > a.ky_lo && y0 + int64_t(a.ky_hi - 1) * s.dilation_h >= int64_t(s.in_h)) --a.ky_hi;
  if (pixel_pairs_) {
    const EpilogueAvx512 epi(epilogue_);
    (s.kernel_w == 3 ? depthwise_pairs8_dispatch<3> : depthwise_pairs8_dispatch<5>)(a, epi);
    if (epilogue_.swish) swish_inplace(output_row, 1, size_t(s.out_w) * s.out_c, 0, true);
    return;
  }
  if (avx512_) {
    const EpilogueAvx512 epi(epilogue_);
    if (s.kernel_w == 3)
      depthwise_row16_dispatch<3>(a, epi);
    else if (s.kernel_w == 5)
      depthwise_row16_dispatch<5>(a, epi);
    else
      depthwise_row16_dispatch<0>(a, epi);
    if (epilogue_.swish) swish_inplace(output_row, 1, size_t(s.out_w) * s.out_c, 0, true);
    return;
  }
  const EpilogueAvx2 epi(epilogue_);
  if (s.kernel_w == 3)
    depthwise_row8_dispatch<3>(a, epi);
  else if (s.kernel_w == 5)
    depthwise_row8_dispatch<5>(a, epi);
  else
    depthwise_row8_dispatch<0>(a, epi);
  if (epilogue_.swish) swish_inplace(output_row, 1, size_t(s.out_w) * s.out_c, 0, false);
#else
  (void)s, (void)rows, (void)oy, (void)residual_row, (void)output_row;
#endif
}

void NativeDepthwise::run_two_rows(const float* const* rows, const float* residual_rows,
                                   float* output_rows) const {
#if NN_NATIVE_X86
  const NativeConvShape& s = shape_;
  const size_t row_out = size_t(s.out_w) * s.out_c;
  const float* res0 = residual_rows ? residual_rows : output_rows;
  RowArgs a{
      &s,          packed_.get(), size_t(s.kernel_h) * s.kernel_w, rows, 0, s.kernel_h, ox_lo_, ox_hi_, res0,
      output_rows, zeros_.get()};
  RowArgs b = a;
  b.rows = rows + 1;
  b.res_row = res0 + row_out;
  b.out_row = output_rows + row_out;
  if (avx512_) {
    const EpilogueAvx512 epi(epilogue_);
    if (s.kernel_w == 3)
      depthwise_two_rows16_dispatch<3>(a, b, epi);
    else
      depthwise_two_rows16_dispatch<5>(a, b, epi);
  } else {
    const EpilogueAvx2 epi(epilogue_);
    if (s.kernel_w == 3)
      depthwise_two_rows8_dispatch<3>(a, b, epi);
    else
      depthwise_two_rows8_dispatch<5>(a, b, epi);
  }
  if (epilogue_.swish) swish_inplace(output_rows, 1, 2 * row_out, 0, avx512_);
#else
  (void)rows, (void)residual_rows, (void)output_rows;
#endif
}

void NativeDepthwise::run(const NativeArgs& args) const {
  const float* input = args.input;
  const float* residual = args.residual;
  float* output = args.output;
  pthreadpool_t pool = args.pool;
  Task task{this, input, residual, output};
  // A task is one output row, or two (two_rows_): a pair whose taps all fall inside the
  // image runs as one (run_two_rows), any other a row at a time.
  auto body = [](void* ctx, size_t index) {
    const Task& t = *static_cast<const Task*>(ctx);
    const NativeConvShape& s = t.op->shape_;
    const size_t step = t.op->two_rows_ ? 2 : 1, tasks = (s.out_h + step - 1) / step;
    const size_t b = index / tasks, oy = index % tasks * step, last = std::min<size_t>(oy + step, s.out_h);
    const size_t row_floats = size_t(s.in_w) * s.in_c, row_out = size_t(s.out_w) * s.out_c;
    const float* image = t.input + b * size_t(s.in_h) * row_floats;
    const size_t out_at = (b * s.out_h + oy) * row_out;
    // Input row of output row y's tap row ky, or null in the padding.
    auto input_row = [&](size_t y, uint32_t ky) -> const float* {
      const int64_t iy = int64_t(y) * s.stride_h - s.pad_top + int64_t(ky) * s.dilation_h;
      return iy >= 0 && iy < int64_t(s.in_h) ? image + size_t(iy) * row_floats : nullptr;
    };
    if (last - oy == 2) {  // two_rows_: stride and dilation 1, so the lower row's taps are rows 1..kernel_h
      const float* rows[kMaxKernelH + 1] = {};
      bool inside = true;
      for (uint32_t r = 0; r <= s.kernel_h; ++r) inside = (rows[r] = input_row(oy, r)) != nullptr && inside;
      if (inside)
        return t.op->run_two_rows(rows, t.residual ? t.residual + out_at : nullptr, t.output + out_at);
    }
    for (size_t y = oy; y < last; ++y) {
      const float* rows[kMaxKernelH] = {};
      for (uint32_t ky = 0; ky < s.kernel_h; ++ky) rows[ky] = input_row(y, ky);
      const size_t at = out_at + (y - oy) * row_out;
      t.op->run_row(rows, y, t.residual ? t.residual + at : nullptr, t.output + at);
    }
  };
  const size_t step = two_rows_ ? 2 : 1;
  for_each_row(pool, size_t(shape_.batch) * ((shape_.out_h + step - 1) / step), body, &task);
}

}  // namespace nn::cpu

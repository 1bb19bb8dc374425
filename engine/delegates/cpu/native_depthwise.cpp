// Depthwise convolution (multiplier 1) on 8-channel AVX2 vectors with the epilogue fused.
// Pixel-major like XNNPACK's dwconv (all channels of one or two output pixels, then the
// next), with the weights of a channel block packed contiguously (bias, tap 0, tap 1, ...)
// so the inner loop streams them in order.
#include <pthreadpool.h>

#include <algorithm>
#include <cstring>

#include "delegates/cpu/native_kernels.h"

namespace nn::cpu {

NativeDepthwise::NativeDepthwise(const NativeConvShape& shape, const float* filter, const float* bias,
                                 const Epilogue& epilogue)
    : shape_(shape), epilogue_(epilogue) {
  // Packed per 8-channel block: [bias, tap (0,0), tap (0,1), ...] x 8 lanes, zero past C.
  c_pad_ = (size_t(shape.out_c) + 7) / 8 * 8;
  const size_t taps = size_t(shape.kernel_h) * shape.kernel_w;
  AlignedFloats packed = allocate_floats(c_pad_ * (taps + 1));
  if (!packed) return;
  float* p = packed.get();
  for (size_t c = 0; c < shape.out_c; ++c) {
    float* block = p + (c / 8) * (taps + 1) * 8 + c % 8;
    block[0] = bias ? bias[c] : 0.f;
    for (size_t t = 0; t < taps; ++t) block[(t + 1) * 8] = filter[t * shape.out_c + c];
  }
  packed_ = std::move(packed);
  // Output columns whose window lies inside the input horizontally: x0 = ox*stride - pad >= 0
  // and x0 + (kernel_w - 1) * dilation < in_w.
  const int64_t extent = int64_t(shape.kernel_w - 1) * shape.dilation_w;
  ox_lo_ = std::min<size_t>(shape.out_w, (shape.pad_left + shape.stride_w - 1) / shape.stride_w);
  const int64_t last = int64_t(shape.in_w) - 1 - extent + shape.pad_left;  // largest ox*stride allowed
  ox_hi_ = last < 0 ? ox_lo_ : std::min<size_t>(shape.out_w, size_t(last) / shape.stride_w + 1);
  ox_hi_ = std::max(ox_hi_, ox_lo_);
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
  const float* image;     // this batch's input
  int64_t y0;             // input row of the window's first tap
  uint32_t ky_lo, ky_hi;  // taps whose row is inside the image
  size_t ox_lo, ox_hi;    // output columns whose whole window is inside horizontally
  const float* res_row;
  float* out_row;
};

template <bool kMasked>
NN_INLINE_AVX2 void finish(const RowArgs& a, size_t ox, size_t cb, __m256i mask, __m256 acc,
                           const EpilogueAvx2& epi) {
  const size_t at = ox * a.s->out_c + cb;
  const __m256 r = epi.residual ? load8<kMasked>(a.res_row + at, mask) : epi.zero;
  if (kMasked)
    store_first(a.out_row + at, epi(acc, r), a.s->out_c - cb);
  else
    _mm256_storeu_ps(a.out_row + at, epi(acc, r));
}

// One channel block of an edge column: taps outside the image are skipped.
template <bool kMasked>
NN_INLINE_AVX2 void edge_block(const RowArgs& a, size_t ox, size_t cb, __m256i mask, const EpilogueAvx2& epi) {
  const NativeConvShape& s = *a.s;
  const size_t C = s.out_c, kw = s.kernel_w, row_stride = size_t(s.in_w) * C;
  const int64_t x0 = int64_t(ox) * s.stride_w - s.pad_left;
  const float* w = a.packed + (cb / 8) * (a.taps + 1) * 8;
  __m256 acc = _mm256_load_ps(w);
  for (uint32_t ky = a.ky_lo; ky < a.ky_hi; ++ky) {
    const float* in_row = a.image + size_t(a.y0 + int64_t(ky) * s.dilation_h) * row_stride + cb;
    for (size_t kx = 0; kx < kw; ++kx) {
      const int64_t ix = x0 + int64_t(kx) * s.dilation_w;
      if (ix < 0 || ix >= int64_t(s.in_w)) continue;
      acc = _mm256_fmadd_ps(load8<kMasked>(in_row + size_t(ix) * C, mask),
                            _mm256_load_ps(w + (1 + ky * kw + kx) * 8), acc);
    }
  }
  finish<kMasked>(a, ox, cb, mask, acc, epi);
}

// One channel block of kPixels interior output pixels (ox, ox + 1, ...): no bounds checks,
// each weight load shared, kPixels independent FMA chains in flight. kKw > 0 is the kernel
// width known at compile time (3, 5: the tap loops unroll).
template <int kKw, int kPixels, bool kMasked>
NN_INLINE_AVX2 void interior_block(const RowArgs& a, size_t ox, size_t cb, __m256i mask,
                                   const EpilogueAvx2& epi) {
  const NativeConvShape& s = *a.s;
  const size_t C = s.out_c, kw = kKw > 0 ? size_t(kKw) : s.kernel_w;
  const size_t row_stride = size_t(s.in_w) * C, tap_stride = size_t(s.dilation_w) * C;
  const size_t step = size_t(s.stride_w) * C;
  const float* w = a.packed + (cb / 8) * (a.taps + 1) * 8;
  __m256 acc[kPixels];
#pragma GCC unroll 4
  for (int p = 0; p < kPixels; ++p) acc[p] = _mm256_load_ps(w);
  const size_t x0 = ox * s.stride_w - s.pad_left;
  for (uint32_t ky = a.ky_lo; ky < a.ky_hi; ++ky) {
    const float* in = a.image + size_t(a.y0 + int64_t(ky) * s.dilation_h) * row_stride + x0 * C + cb;
    const float* wk = w + (1 + ky * kw) * 8;
#pragma GCC unroll 5
    for (size_t kx = 0; kx < kw; ++kx) {
      const __m256 wv = _mm256_load_ps(wk + kx * 8);
#pragma GCC unroll 4
      for (int p = 0; p < kPixels; ++p)
        acc[p] = _mm256_fmadd_ps(load8<kMasked>(in + kx * tap_stride + p * step, mask), wv, acc[p]);
    }
  }
#pragma GCC unroll 4
  for (int p = 0; p < kPixels; ++p) finish<kMasked>(a, ox + p, cb, mask, acc[p], epi);
}

template <int kKw>
NN_TARGET_AVX2 void depthwise_row(const RowArgs& a, const EpilogueAvx2& epi) {
  const size_t C = a.s->out_c, full = C / 8 * 8;
  const __m256i all = _mm256_set1_epi32(-1), tail = lane_mask(C - full);
  // Edge columns (left, then right below): every block, taps checked.
  for (size_t ox = 0; ox < a.ox_lo; ++ox) {
    for (size_t cb = 0; cb < full; cb += 8) edge_block<false>(a, ox, cb, all, epi);
    if (full < C) edge_block<true>(a, ox, full, tail, epi);
  }
  size_t ox = a.ox_lo;
  for (; ox + 4 <= a.ox_hi; ox += 4) {
    for (size_t cb = 0; cb < full; cb += 8) interior_block<kKw, 4, false>(a, ox, cb, all, epi);
    if (full < C) interior_block<kKw, 4, true>(a, ox, full, tail, epi);
  }
  for (; ox < a.ox_hi; ++ox) {
    for (size_t cb = 0; cb < full; cb += 8) interior_block<kKw, 1, false>(a, ox, cb, all, epi);
    if (full < C) interior_block<kKw, 1, true>(a, ox, full, tail, epi);
  }
  for (; ox < a.s->out_w; ++ox) {
    for (size_t cb = 0; cb < full; cb += 8) edge_block<false>(a, ox, cb, all, epi);
    if (full < C) edge_block<true>(a, ox, full, tail, epi);
  }
}

#endif

}  // namespace

void NativeDepthwise::run(const float* input, const float* residual, float* output, pthreadpool_t pool) const {
  // Without a residual the kernel is handed the output as one (never read): no null offsets.
  Task task{this, input, residual ? residual : output, output};
  auto body = [](void* ctx, size_t row) {
    const Task& t = *static_cast<const Task*>(ctx);
    const NativeConvShape& s = t.op->shape_;
    const size_t b = row / s.out_h, oy = row % s.out_h;
    const float* image = t.input + b * size_t(s.in_h) * s.in_w * s.in_c;
    const size_t out_at = row * size_t(s.out_w) * s.out_c;
#if NN_NATIVE_X86
    RowArgs a{&s, t.op->packed_.get(), size_t(s.kernel_h) * s.kernel_w, image,
              int64_t(oy) * s.stride_h - s.pad_top, 0, s.kernel_h, t.op->ox_lo_, t.op->ox_hi_,
              t.residual + out_at, t.output + out_at};
    while (a.ky_lo < a.ky_hi && a.y0 + int64_t(a.ky_lo) * s.dilation_h < 0) ++a.ky_lo;
    while (a.ky_hi > a.ky_lo && a.y0 + int64_t(a.ky_hi - 1) * s.dilation_h >= int64_t(s.in_h)) --a.ky_hi;
    const EpilogueAvx2 epi(t.op->epilogue_);
    if (s.kernel_w == 3)
      depthwise_row<3>(a, epi);
    else if (s.kernel_w == 5)
      depthwise_row<5>(a, epi);
    else
      depthwise_row<0>(a, epi);
#else
    (void)image, (void)out_at, (void)oy;
#endif
  };
  const size_t rows = size_t(shape_.batch) * shape_.out_h;
  if (!pool) {
    for (size_t r = 0; r < rows; ++r) body(&task, r);
    return;
  }
  pthreadpool_parallelize_1d(pool, body, &task, rows, 0);
}

}  // namespace nn::cpu

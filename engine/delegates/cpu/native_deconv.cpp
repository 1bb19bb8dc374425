// Transpose convolution whose kernel equals its stride (no overlapping taps, no padding):
// every input pixel scatters kernel_h * kernel_w * out_c dot products of its channels. The
// selfie models end in one (128x128x16 -> 256x256x1, 2x2 stride 2), which XNNPACK's 2022
// deconvolution runs as a general strided GEMM at ~8% of the layer's time.
#include <algorithm>
#include <cstring>
#include <limits>

#include "delegates/cpu/native_kernels.h"

namespace nn::cpu {

NativeDeconv::NativeDeconv(const NativeConvShape& shape, const float* filter, const float* bias,
                           const Epilogue& epilogue, const NativeIsa& isa)
    : shape_(shape), epilogue_(epilogue) {
  const size_t taps = size_t(shape.kernel_h) * shape.kernel_w;
  n_ = taps * shape.out_c;
  avx512_ = isa.avx512;
  single_2x2_ = shape.kernel_h == 2 && shape.kernel_w == 2 && shape.out_c == 1 && !epilogue.residual;
  const size_t lanes = avx512_ ? 16 : 8;
  c_pad_ = (size_t(shape.in_c) + lanes - 1) / lanes * lanes;
  // Packed: one row of c_pad weights per dot product n = tap * out_c + o, rows rounded up
  // to a multiple of 4 (the kernel computes 4 dots at a time; extra rows are zero).
  const size_t rows = (n_ + 3) / 4 * 4;
  AlignedFloats packed = allocate_floats(rows * c_pad_);
  if (!packed) return;
  bias_.assign(rows, 0.f);
  offsets_.assign(rows, 0);
  for (size_t t = 0; t < taps; ++t)
    for (size_t o = 0; o < shape.out_c; ++o) {
      const size_t n = t * shape.out_c + o;
      offsets_[n] = ((t / shape.kernel_w) * shape.out_w + t % shape.kernel_w) * shape.out_c + o;
      std::memcpy(packed.get() + n * c_pad_, filter + (o * taps + t) * shape.in_c,
                  shape.in_c * sizeof(float));
      bias_[n] = bias ? bias[o] : 0.f;
    }
  if (single_2x2_ && !avx512_) {
    // AVX2's single_2x2_ kernel: each weight as 8 copies (channel-major, the 4 dots of a
    // channel side by side), read as the FMA's memory operand where AVX-512 has an embedded
    // broadcast: a separate broadcast load per FMA made the loop twice as many instructions.
    AlignedFloats spread = allocate_floats(c_pad_ * 4 * 8);
    if (!spread) return;
    for (size_t ch = 0; ch < shape.in_c; ++ch)
      for (size_t q = 0; q < 4; ++q)
        std::fill_n(spread.get() + (ch * 4 + q) * 8, 8, packed.get()[q * c_pad_ + ch]);
    packed = std::move(spread);
  }
  packed_ = std::move(packed);
}

struct NativeDeconv::Task {
  const NativeDeconv* op;
  const float* input;
  const float* residual;
  float* output;
};

namespace {

#if NN_NATIVE_X86

// The dot products of one input pixel with 4 packed rows.
template <bool kTail>
NN_INLINE_AVX2 __m128 dot4(const float* x, const float* w, size_t c, size_t c_pad) {
  __m256 a = _mm256_setzero_ps(), b = a, d = a, e = a;
  for (size_t i = 0; i < c_pad; i += 8) {
    __m256 v;
    if (kTail && i + 8 > c)
      v = _mm256_maskload_ps(x + i, lane_mask(c - i));
    else
      v = _mm256_loadu_ps(x + i);
    a = _mm256_fmadd_ps(v, _mm256_load_ps(w + i), a);
    b = _mm256_fmadd_ps(v, _mm256_load_ps(w + c_pad + i), b);
    d = _mm256_fmadd_ps(v, _mm256_load_ps(w + 2 * c_pad + i), d);
    e = _mm256_fmadd_ps(v, _mm256_load_ps(w + 3 * c_pad + i), e);
  }
  const __m256 h = _mm256_hadd_ps(_mm256_hadd_ps(a, b), _mm256_hadd_ps(d, e));
  return _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
}

template <bool kTail>
NN_TARGET_AVX2 void deconv_row(const NativeConvShape& s, size_t n, size_t c_pad, const float* packed,
                               const float* bias, const size_t* offsets, const Epilogue& epi,
                               const float* in_row, size_t b, size_t y, const float* residual,
                               float* output) {
  alignas(16) float dots[4];
  for (size_t x = 0; x < s.in_w; ++x) {
    const float* px = in_row + x * s.in_c;
    // Output element of dot product q: base + offsets[q].
    const size_t base = ((b * s.out_h + y * s.stride_h) * s.out_w + x * s.stride_w) * s.out_c;
    for (size_t n0 = 0; n0 < n; n0 += 4) {
      _mm_store_ps(dots,
                   _mm_add_ps(dot4<kTail>(px, packed + n0 * c_pad, s.in_c, c_pad), _mm_loadu_ps(bias + n0)));
      const size_t count = std::min<size_t>(4, n - n0);
      if (!epi.residual && epi.lo == -std::numeric_limits<float>::infinity() &&
          epi.hi == std::numeric_limits<float>::infinity() && !epi.hard_swish && !epi.logistic) {
        for (size_t q = 0; q < count; ++q) output[base + offsets[n0 + q]] = dots[q];
        continue;
      }
      for (size_t q = 0; q < count; ++q) {
        const size_t at = base + offsets[n0 + q];
        output[at] = apply_epilogue(epi, dots[q], epi.residual ? residual[at] : 0.f);
      }
    }
  }
}

// a0 b0 a1 b1 ... a7 b7, its first n floats stored.
NN_INLINE_AVX2 void store_interleaved(float* out, __m256 a, __m256 b, size_t n) {
  const __m256 lo = _mm256_unpacklo_ps(a, b), hi = _mm256_unpackhi_ps(a, b);  // lanes 0,1|4,5 and 2,3|6,7
  const __m256 first = _mm256_permute2f128_ps(lo, hi, 0x20), second = _mm256_permute2f128_ps(lo, hi, 0x31);
  if (n >= 8)
    _mm256_storeu_ps(out, first);
  else
    store_first(out, first, n);
  if (n == 16)
    _mm256_storeu_ps(out + 8, second);
  else if (n > 8)
    store_first(out + 8, second, n - 8);
}

// 1 / (1 + exp(-x)) in place over n floats, 4 vectors a step: over a whole output row
// after its dots rather than per 8 pixels, where each logistic's long dependency chain
// held up the next pixels' FMAs; here the steps are independent and overlap.
NN_INLINE_AVX2 void logistic_inplace_avx2(float* p, size_t n) {
  size_t i = 0;
  for (; i + 32 <= n; i += 32) {
    __m256 v[4];
#pragma GCC unroll 4
    for (int k = 0; k < 4; ++k) v[k] = logistic8(_mm256_loadu_ps(p + i + 8 * k));
#pragma GCC unroll 4
    for (int k = 0; k < 4; ++k) _mm256_storeu_ps(p + i + 8 * k, v[k]);
  }
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(p + i, logistic8(_mm256_loadu_ps(p + i)));
  if (i < n) store_first(p + i, logistic8(_mm256_maskload_ps(p + i, lane_mask(n - i))), n - i);
}

// The selfie head's form on AVX2 (2x2 taps, one output channel), as the AVX-512
// deconv_row_2x2_single below: 8 pixels at a time in the lanes, their channel vectors
// transposed in registers, 4 FMAs per channel on the weights spread to 8 lanes, the
// epilogue on 4 vectors, the logistic over each finished row pair. The dot-product form
// above paid a horizontal add chain and a scalar epilogue (with a scalar exp) per dot
// product: 9 times the AVX-512 kernel's time on selfie.
NN_TARGET_AVX2 void deconv_row_2x2_single_avx2(const NativeConvShape& s, size_t c_pad, const float* spread,
                                               const float* bias, const Epilogue& epilogue,
                                               const float* in_row, float* out_top, float* out_bottom) {
  const EpilogueAvx2 epi(epilogue);
  const size_t c = s.in_c;
  for (size_t x0 = 0; x0 < s.in_w; x0 += 8) {
    const size_t pixels = std::min<size_t>(8, s.in_w - x0);
    __m256 acc[4];
    for (int q = 0; q < 4; ++q) acc[q] = _mm256_set1_ps(bias[q]);
    for (size_t cb = 0; cb < c_pad; cb += 8) {
      const size_t valid = std::min<size_t>(8, c - cb);
      const __m256i lanes = lane_mask(valid);
      __m256 v[8];
#pragma GCC unroll 8
      for (size_t p = 0; p < 8; ++p) {  // pixel tail: repeat the last (its lanes are not stored)
        const float* src = in_row + (x0 + std::min(p, pixels - 1)) * c + cb;
        v[p] = valid == 8 ? _mm256_loadu_ps(src) : _mm256_maskload_ps(src, lanes);
      }
      // 8x8 transpose: v[ch] becomes channel cb + ch of the 8 pixels.
      __m256 t[8], u[8];
#pragma GCC unroll 4
      for (int i = 0; i < 8; i += 2) {
        t[i] = _mm256_unpacklo_ps(v[i], v[i + 1]);
        t[i + 1] = _mm256_unpackhi_ps(v[i], v[i + 1]);
      }
#pragma GCC unroll 2
      for (int g = 0; g < 8; g += 4) {
        u[g] = _mm256_shuffle_ps(t[g], t[g + 2], 0x44);
        u[g + 1] = _mm256_shuffle_ps(t[g], t[g + 2], 0xEE);
        u[g + 2] = _mm256_shuffle_ps(t[g + 1], t[g + 3], 0x44);
        u[g + 3] = _mm256_shuffle_ps(t[g + 1], t[g + 3], 0xEE);
      }
#pragma GCC unroll 4
      for (int j = 0; j < 4; ++j) {
        v[j] = _mm256_permute2f128_ps(u[j], u[4 + j], 0x20);
        v[4 + j] = _mm256_permute2f128_ps(u[j], u[4 + j], 0x31);
      }
      const float* w = spread + cb * 32;  // weights past in_c are zero
#pragma GCC unroll 8
      for (int ch = 0; ch < 8; ++ch)
#pragma GCC unroll 4
        for (int q = 0; q < 4; ++q)
          acc[q] = _mm256_fmadd_ps(v[ch], _mm256_load_ps(w + (ch * 4 + q) * 8), acc[q]);
    }
#pragma GCC unroll 4
    for (int q = 0; q < 4; ++q) acc[q] = epi(acc[q], epi.zero);
    // Row 2y: dots 0 and 1 of the pixels interleaved, row 2y + 1 dots 2 and 3.
    store_interleaved(out_top + 2 * x0, acc[0], acc[1], 2 * pixels);
    store_interleaved(out_bottom + 2 * x0, acc[2], acc[3], 2 * pixels);
  }
  if (epilogue.logistic) {
    logistic_inplace_avx2(out_top, 2 * size_t(s.in_w));
    logistic_inplace_avx2(out_bottom, 2 * size_t(s.in_w));
  }
}

// GCC 12's headers build these shuffles' results from _mm512_undefined_ps() under an
// all-ones mask and then warn that the undefined value may be used; it never is.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

// AVX-512F: four input pixels x four dot products at a time. Each of the 16 (pixel, dot)
// pairs accumulates a 16-lane vector over the channels; one shuffle tree then sums all 16
// into one vector (lane 4 * pixel + dot), about three instructions per dot product where
// the AVX2 form above pays a horizontal add chain and a scalar store sequence per pixel.
NN_INLINE_AVX512 __m512 sum_pairs(__m512 a, __m512 b) {  // per 128-bit block: a0+a2, b0+b2, a1+a3, b1+b3
  return _mm512_add_ps(_mm512_unpacklo_ps(a, b), _mm512_unpackhi_ps(a, b));
}
NN_INLINE_AVX512 __m512 sum_quads(__m512 ab, __m512 cd) {  // per block: the four vectors' block sums
  const __m512d x = _mm512_castps_pd(ab), y = _mm512_castps_pd(cd);  // moved as pairs, added as floats
  return _mm512_add_ps(_mm512_castpd_ps(_mm512_unpacklo_pd(x, y)),
                       _mm512_castpd_ps(_mm512_unpackhi_pd(x, y)));
}

// The selfie head's form (2x2 taps, one output channel: 4 dot products per input pixel),
// 16 pixels at a time with the pixels in the lanes: the 16 pixels' channel vectors are
// transposed in registers (64 shuffles) so each channel's weight is one broadcast FMA per
// dot product, and the 4 result vectors interleave straight into output rows 2y and 2y + 1.
// The dot-product form below spends ~3 shuffles and adds per dot on its reduction tree;
// this spends 1 shuffle per pixel and channel block, shared by the 4 dots.
NN_INLINE_AVX512 void transpose16(__m512 (&v)[16]) {
  __m512 t[16];
#pragma GCC unroll 8
  for (int i = 0; i < 16; i += 2) {  // per 128-bit block: (v_i[0], v_i+1[0], v_i[1], v_i+1[1]) / [2], [3]
    t[i] = _mm512_unpacklo_ps(v[i], v[i + 1]);
    t[i + 1] = _mm512_unpackhi_ps(v[i], v[i + 1]);
  }
#pragma GCC unroll 4
  for (int g = 0; g < 16; g += 4) {  // v[g + j], block L: pixels g..g+3 of channel 4L + j
    const __m512d a = _mm512_castps_pd(t[g]), b = _mm512_castps_pd(t[g + 2]);
    const __m512d c = _mm512_castps_pd(t[g + 1]), d = _mm512_castps_pd(t[g + 3]);
    v[g] = _mm512_castpd_ps(_mm512_unpacklo_pd(a, b));
    v[g + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a, b));
    v[g + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(c, d));
    v[g + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(c, d));
  }
#pragma GCC unroll 4
  for (int j = 0; j < 4; ++j) {  // channel 4L + j: block L of v[j], v[4 + j], v[8 + j], v[12 + j]
    const __m512 a01 = _mm512_shuffle_f32x4(v[j], v[4 + j], _MM_SHUFFLE(1, 0, 1, 0));
    const __m512 a23 = _mm512_shuffle_f32x4(v[j], v[4 + j], _MM_SHUFFLE(3, 2, 3, 2));
    const __m512 b01 = _mm512_shuffle_f32x4(v[8 + j], v[12 + j], _MM_SHUFFLE(1, 0, 1, 0));
    const __m512 b23 = _mm512_shuffle_f32x4(v[8 + j], v[12 + j], _MM_SHUFFLE(3, 2, 3, 2));
    t[j] = _mm512_shuffle_f32x4(a01, b01, _MM_SHUFFLE(2, 0, 2, 0));
    t[4 + j] = _mm512_shuffle_f32x4(a01, b01, _MM_SHUFFLE(3, 1, 3, 1));
    t[8 + j] = _mm512_shuffle_f32x4(a23, b23, _MM_SHUFFLE(2, 0, 2, 0));
    t[12 + j] = _mm512_shuffle_f32x4(a23, b23, _MM_SHUFFLE(3, 1, 3, 1));
  }
#pragma GCC unroll 16
  for (int i = 0; i < 16; ++i) v[i] = t[i];  // v[c]: channel c of the 16 pixels
}

NN_TARGET_AVX512 void deconv_row_2x2_single(const NativeConvShape& s, size_t c_pad, const float* packed,
                                            const float* bias, const Epilogue& epilogue, const float* in_row,
                                            float* out_top, float* out_bottom) {
  const EpilogueAvx512 epi(epilogue);
  const size_t c = s.in_c;
  // Output lanes: row 2y is dots 0 and 1 of pixels 0..15 interleaved, row 2y + 1 dots 2, 3.
  const __m512i first8 = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
  const __m512i last8 = _mm512_setr_epi32(8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
  for (size_t x0 = 0; x0 < s.in_w; x0 += 16) {
    const size_t pixels = std::min<size_t>(16, s.in_w - x0);
    __m512 acc[4];
    for (int q = 0; q < 4; ++q) acc[q] = _mm512_set1_ps(bias[q]);
    for (size_t cb = 0; cb < c_pad; cb += 16) {
      const size_t valid = std::min<size_t>(16, c - cb);
      const __mmask16 lanes = valid == 16 ? __mmask16(0xFFFF) : __mmask16((1u << valid) - 1);
      __m512 v[16];
#pragma GCC unroll 16
      for (size_t p = 0; p < 16; ++p)  // pixel tail: repeat the last (its lanes are not stored)
        v[p] = _mm512_maskz_loadu_ps(lanes, in_row + (x0 + std::min(p, pixels - 1)) * c + cb);
      transpose16(v);
      // All 16 channels (the packed weights past in_c are zero): constant indices keep v in
      // registers.
      const float* w = packed + cb;
#pragma GCC unroll 16
      for (int ch = 0; ch < 16; ++ch)
#pragma GCC unroll 4
        for (int q = 0; q < 4; ++q)
          acc[q] = _mm512_fmadd_ps(v[ch], _mm512_set1_ps(w[q * c_pad + ch]), acc[q]);
    }
#pragma GCC unroll 4
    for (int q = 0; q < 4; ++q) acc[q] = epi(acc[q], epi.zero);
    if (epilogue.logistic) logistic16(acc);
    // 2 * pixels floats per output row, in two vectors of up to 16.
    const size_t n = 2 * pixels;
    const __mmask16 lo = n >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << n) - 1);
    const __mmask16 hi = n > 16 ? __mmask16((1u << (n - 16)) - 1) : __mmask16(0);
    float* top = out_top + 2 * x0;
    float* bottom = out_bottom + 2 * x0;
    _mm512_mask_storeu_ps(top, lo, _mm512_permutex2var_ps(acc[0], first8, acc[1]));
    _mm512_mask_storeu_ps(bottom, lo, _mm512_permutex2var_ps(acc[2], first8, acc[3]));
    if (hi) {
      _mm512_mask_storeu_ps(top + 16, hi, _mm512_permutex2var_ps(acc[0], last8, acc[1]));
      _mm512_mask_storeu_ps(bottom + 16, hi, _mm512_permutex2var_ps(acc[2], last8, acc[3]));
    }
  }
}

NN_TARGET_AVX512 void deconv_row_avx512(const NativeConvShape& s, size_t n, size_t c_pad, const float* packed,
                                        const float* bias, const size_t* offsets, const Epilogue& epilogue,
                                        const float* in_row, size_t b, size_t y, const float* residual,
                                        float* output) {
  const EpilogueAvx512 epi(epilogue);
  const size_t c = s.in_c;
  const __mmask16 tail = c % 16 ? __mmask16((1u << (c % 16)) - 1) : __mmask16(0xFFFF);
  const size_t full = c % 16 ? c_pad - 16 : c_pad;  // channels read without a mask
  alignas(64) float lanes[16], res[16] = {};
  for (size_t x0 = 0; x0 < s.in_w; x0 += 4) {
    const size_t pixels = std::min<size_t>(4, s.in_w - x0);
    const float* px[4];
    for (size_t p = 0; p < 4; ++p)
      px[p] = in_row + (x0 + std::min(p, pixels - 1)) * c;  // tail: repeat the last
    const size_t base0 = ((b * s.out_h + y * s.stride_h) * s.out_w + x0 * s.stride_w) * s.out_c;
    const size_t pixel_step = size_t(s.stride_w) * s.out_c;
    for (size_t n0 = 0; n0 < n; n0 += 4) {
      const float* w = packed + n0 * c_pad;
      // acc pq: pixel p, dot q (named registers: an array of vectors would live on the stack).
#define NN_PIXEL(p) \
  __m512 a##p##0 = _mm512_setzero_ps(), a##p##1 = a##p##0, a##p##2 = a##p##0, a##p##3 = a##p##0;
      NN_PIXEL(0)
      NN_PIXEL(1)
      NN_PIXEL(2) NN_PIXEL(3)
#undef NN_PIXEL
          for (size_t i = 0; i < c_pad; i += 16) {
        const bool masked = i >= full;
        const __m512 v0 = masked ? _mm512_maskz_loadu_ps(tail, px[0] + i) : _mm512_loadu_ps(px[0] + i);
        const __m512 v1 = masked ? _mm512_maskz_loadu_ps(tail, px[1] + i) : _mm512_loadu_ps(px[1] + i);
        const __m512 v2 = masked ? _mm512_maskz_loadu_ps(tail, px[2] + i) : _mm512_loadu_ps(px[2] + i);
        const __m512 v3 = masked ? _mm512_maskz_loadu_ps(tail, px[3] + i) : _mm512_loadu_ps(px[3] + i);
#define NN_DOT(q)                                        \
  {                                                      \
    const __m512 wq = _mm512_load_ps(w + q * c_pad + i); \
    a0##q = _mm512_fmadd_ps(v0, wq, a0##q);              \
    a1##q = _mm512_fmadd_ps(v1, wq, a1##q);              \
    a2##q = _mm512_fmadd_ps(v2, wq, a2##q);              \
    a3##q = _mm512_fmadd_ps(v3, wq, a3##q);              \
  }
        NN_DOT(0) NN_DOT(1) NN_DOT(2) NN_DOT(3)
#undef NN_DOT
      }
      const __m512 per_pixel[4] = {sum_quads(sum_pairs(a00, a01), sum_pairs(a02, a03)),
                                   sum_quads(sum_pairs(a10, a11), sum_pairs(a12, a13)),
                                   sum_quads(sum_pairs(a20, a21), sum_pairs(a22, a23)),
                                   sum_quads(sum_pairs(a30, a31), sum_pairs(a32, a33))};
      const __m512 lo01 = _mm512_shuffle_f32x4(per_pixel[0], per_pixel[1], _MM_SHUFFLE(1, 0, 1, 0));
      const __m512 hi01 = _mm512_shuffle_f32x4(per_pixel[0], per_pixel[1], _MM_SHUFFLE(3, 2, 3, 2));
      const __m512 lo23 = _mm512_shuffle_f32x4(per_pixel[2], per_pixel[3], _MM_SHUFFLE(1, 0, 1, 0));
      const __m512 hi23 = _mm512_shuffle_f32x4(per_pixel[2], per_pixel[3], _MM_SHUFFLE(3, 2, 3, 2));
      const __m512 w01 = _mm512_add_ps(lo01, hi01), w23 = _mm512_add_ps(lo23, hi23);
      __m512 sums = _mm512_add_ps(_mm512_shuffle_f32x4(w01, w23, _MM_SHUFFLE(2, 0, 2, 0)),
                                  _mm512_shuffle_f32x4(w01, w23, _MM_SHUFFLE(3, 1, 3, 1)));
      sums = _mm512_add_ps(sums, _mm512_broadcast_f32x4(_mm_loadu_ps(bias + n0)));  // lane 4p + q
      const size_t count = std::min<size_t>(4, n - n0);
      if (epilogue.residual) {
        for (size_t p = 0; p < pixels; ++p)
          for (size_t q = 0; q < count; ++q)
            res[4 * p + q] = residual[base0 + p * pixel_step + offsets[n0 + q]];
      }
      sums = epi(sums, epilogue.residual ? _mm512_load_ps(res) : epi.zero);
      __m512 one_vector[1] = {sums};
      if (epilogue.logistic) logistic16(one_vector);
      _mm512_store_ps(lanes, one_vector[0]);
      for (size_t p = 0; p < pixels; ++p)
        for (size_t q = 0; q < count; ++q)
          output[base0 + p * pixel_step + offsets[n0 + q]] = lanes[4 * p + q];
    }
  }
}

#pragma GCC diagnostic pop

#endif

}  // namespace

void NativeDeconv::run(const NativeArgs& args) const {
  const float* input = args.input;
  const float* residual = args.residual;
  float* output = args.output;
  pthreadpool_t pool = args.pool;
  Task task{this, input, residual, output};
  auto body = [](void* ctx, size_t row) {
    const Task& t = *static_cast<const Task*>(ctx);
    const NativeDeconv& op = *t.op;
    const NativeConvShape& s = op.shape_;
    const size_t b = row / s.in_h, y = row % s.in_h;
    const float* in_row = t.input + row * size_t(s.in_w) * s.in_c;
#if NN_NATIVE_X86
    if (op.single_2x2_) {
      float* top = t.output + (b * s.out_h + 2 * y) * size_t(s.out_w);
      (op.avx512_ ? deconv_row_2x2_single : deconv_row_2x2_single_avx2)(
          s, op.c_pad_, op.packed_.get(), op.bias_.data(), op.epilogue_, in_row, top, top + s.out_w);
    } else if (op.avx512_)
      deconv_row_avx512(s, op.n_, op.c_pad_, op.packed_.get(), op.bias_.data(), op.offsets_.data(),
                        op.epilogue_, in_row, b, y, t.residual, t.output);
    else if (s.in_c % 8)
      deconv_row<true>(s, op.n_, op.c_pad_, op.packed_.get(), op.bias_.data(), op.offsets_.data(),
                       op.epilogue_, in_row, b, y, t.residual, t.output);
    else
      deconv_row<false>(s, op.n_, op.c_pad_, op.packed_.get(), op.bias_.data(), op.offsets_.data(),
                        op.epilogue_, in_row, b, y, t.residual, t.output);
#else
    (void)b, (void)y, (void)in_row;
#endif
  };
  const size_t rows = size_t(shape_.batch) * shape_.in_h;
  for_each_row(pool, rows, body, &task);
}

}  // namespace nn::cpu

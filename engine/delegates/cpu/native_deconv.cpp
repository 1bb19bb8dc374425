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
                           const Epilogue& epilogue)
    : shape_(shape), epilogue_(epilogue) {
  const size_t taps = size_t(shape.kernel_h) * shape.kernel_w;
  n_ = taps * shape.out_c;
  c_pad_ = (size_t(shape.in_c) + 7) / 8 * 8;
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
      std::memcpy(packed.get() + n * c_pad_, filter + (o * taps + t) * shape.in_c, shape.in_c * sizeof(float));
      bias_[n] = bias ? bias[o] : 0.f;
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
                               const float* bias, const size_t* offsets, const Epilogue& epi, const float* in_row,
                               size_t b, size_t y, const float* residual, float* output) {
  alignas(16) float dots[4];
  for (size_t x = 0; x < s.in_w; ++x) {
    const float* px = in_row + x * s.in_c;
    // Output element of dot product q: base + offsets[q].
    const size_t base = ((b * s.out_h + y * s.stride_h) * s.out_w + x * s.stride_w) * s.out_c;
    for (size_t n0 = 0; n0 < n; n0 += 4) {
      _mm_store_ps(dots, _mm_add_ps(dot4<kTail>(px, packed + n0 * c_pad, s.in_c, c_pad), _mm_loadu_ps(bias + n0)));
      const size_t count = std::min<size_t>(4, n - n0);
      if (!epi.residual && epi.lo == -std::numeric_limits<float>::infinity() &&
          epi.hi == std::numeric_limits<float>::infinity() && !epi.hard_swish) {
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

#endif

}  // namespace

void NativeDeconv::run(const float* input, const float* residual, float* output, pthreadpool_t pool) const {
  Task task{this, input, residual, output};
  auto body = [](void* ctx, size_t row) {
    const Task& t = *static_cast<const Task*>(ctx);
    const NativeDeconv& op = *t.op;
    const NativeConvShape& s = op.shape_;
    const size_t b = row / s.in_h, y = row % s.in_h;
    const float* in_row = t.input + row * size_t(s.in_w) * s.in_c;
#if NN_NATIVE_X86
    if (s.in_c % 8)
      deconv_row<true>(s, op.n_, op.c_pad_, op.packed_.get(), op.bias_.data(), op.offsets_.data(), op.epilogue_,
                       in_row, b, y, t.residual, t.output);
    else
      deconv_row<false>(s, op.n_, op.c_pad_, op.packed_.get(), op.bias_.data(), op.offsets_.data(), op.epilogue_,
                        in_row, b, y, t.residual, t.output);
#else
    (void)b, (void)y, (void)in_row;
#endif
  };
  const size_t rows = size_t(shape_.batch) * shape_.in_h;
  for_each_row(pool, rows, body, &task);
}

}  // namespace nn::cpu

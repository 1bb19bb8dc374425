// Bilinear resize (NHWC, fp32) on AVX-512F: per output row, one vertical blend of its two
// input rows into a scratch row, then per output pixel one horizontal blend of two
// scratch pixels, 16 channels a vector. The selfie decoder's three 2x upsamplings took 9%
// of the model in XNNPACK's 2022 resize (op 119, 64x64x16 -> 128x128x16: 0.08 ms).
#include <algorithm>

#include "delegates/cpu/native_kernels.h"
#include "ops/resize_taps.h"

namespace nn::cpu {

NativeResize::NativeResize(const NativeResizeShape& shape) : shape_(shape) {
  const auto ty = bilinear_taps(shape.in_h, shape.out_h, shape.align_corners, shape.half_pixel_centers);
  const auto tx = bilinear_taps(shape.in_w, shape.out_w, shape.align_corners, shape.half_pixel_centers);
  rows_.reserve(ty.size());
  for (const BilinearTap& t : ty) rows_.push_back({t.lo, t.hi, t.frac});
  cols_.reserve(tx.size());
  for (const BilinearTap& t : tx) cols_.push_back({t.lo, t.hi, t.frac});
  packed_ = allocate_floats(1);  // no weights: marks the op as built
}

struct NativeResize::Task {
  const NativeResize* op;
  const float* input;
  float* output;
};

namespace {

#if NN_NATIVE_X86
// dst[i] = a[i] + (b[i] - a[i]) * f for i < n.
NN_INLINE_AVX512 void blend(float* dst, const float* a, const float* b, __m512 f, size_t n) {
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512 va = _mm512_loadu_ps(a + i);
    _mm512_storeu_ps(dst + i, _mm512_fmadd_ps(_mm512_sub_ps(_mm512_loadu_ps(b + i), va), f, va));
  }
  if (i < n) {
    const __mmask16 m = __mmask16((1u << (n - i)) - 1);
    const __m512 va = _mm512_maskz_loadu_ps(m, a + i);
    _mm512_mask_storeu_ps(dst + i, m,
                          _mm512_fmadd_ps(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, b + i), va), f, va));
  }
}

NN_TARGET_AVX512 void resize_row(const NativeResizeShape& s, const NativeResize::Tap& ty,
                                 const NativeResize::Tap* cols, const float* image, float* out_row) {
  const size_t c = s.channels, row_floats = size_t(s.in_w) * c;
  const float* r0 = image + ty.lo * row_floats;
  const float* r1 = image + ty.hi * row_floats;
  const float* row = r0;
  thread_local std::vector<float> scratch;
  if (ty.frac != 0.f && ty.hi != ty.lo) {
    if (scratch.size() < row_floats) scratch.resize(row_floats);
    blend(scratch.data(), r0, r1, _mm512_set1_ps(ty.frac), row_floats);
    row = scratch.data();
  }
  for (size_t ox = 0; ox < s.out_w; ++ox) {
    const NativeResize::Tap& tx = cols[ox];
    blend(out_row + ox * c, row + tx.lo * c, row + tx.hi * c, _mm512_set1_ps(tx.frac), c);
  }
}
#endif

}  // namespace

void NativeResize::run(const float* input, const float*, float* output, pthreadpool_t pool) const {
  Task task{this, input, output};
  auto body = [](void* ctx, size_t r) {
    const Task& t = *static_cast<const Task*>(ctx);
    const NativeResizeShape& s = t.op->shape_;
    const size_t b = r / s.out_h, oy = r % s.out_h;
    const float* image = t.input + b * size_t(s.in_h) * s.in_w * s.channels;
    float* out_row = t.output + r * size_t(s.out_w) * s.channels;
#if NN_NATIVE_X86
    resize_row(s, t.op->rows_[oy], t.op->cols_.data(), image, out_row);
#else
    (void)image, (void)out_row, (void)oy;
#endif
  };
  for_each_row(pool, size_t(shape_.batch) * shape_.out_h, body, &task);
}

NativeConvThenResize::NativeConvThenResize(std::unique_ptr<NativeOp> conv, std::unique_ptr<NativeOp> resize,
                                           size_t scratch_floats)
    : conv_(std::move(conv)), resize_(std::move(resize)) {
  scratch_ = allocate_floats(scratch_floats);
  if (conv_ && conv_->ok() && resize_ && resize_->ok() && scratch_) packed_ = allocate_floats(1);
}

void NativeConvThenResize::run(const float* input, const float*, float* output, pthreadpool_t pool) const {
  conv_->run(input, nullptr, scratch_.get(), pool);
  resize_->run(scratch_.get(), nullptr, output, pool);
}

}  // namespace nn::cpu

// Bilinear resize (NHWC, fp32): per output row, one vertical blend of its two input rows
// into a scratch row, then per output pixel one horizontal blend of two scratch pixels,
// 16 channels a vector on AVX-512F, 8 on AVX2. The selfie decoder's three 2x upsamplings took 9%
// of the model in XNNPACK's 2022 resize (op 119, 64x64x16 -> 128x128x16: 0.08 ms). A
// width-doubling resize with half-pixel taps (all three of them) has its own row kernel.
#include <algorithm>
#include <cmath>

#include "delegates/cpu/native_kernels.h"

namespace nn::cpu {

NativeResize::NativeResize(const NativeResizeShape& shape, const NativeIsa& isa) : shape_(shape) {
  rows_ = bilinear_taps(shape.in_h, shape.out_h, shape.align_corners, shape.half_pixel_centers);
  cols_ = bilinear_taps(shape.in_w, shape.out_w, shape.align_corners, shape.half_pixel_centers);
  avx512_ = isa.avx512;
  // The width doubled with half-pixel centres: output column 2x - 1 blends input columns
  // x - 1 and x by 0.25, column 2x the same two by 0.75, the two edge columns repeat the edge
  // pixels (what bilinear_taps gives; checked here, not assumed).
  twice_w_ = shape.out_w == 2 * shape.in_w && shape.in_w >= 2;
  for (size_t ox = 0; twice_w_ && ox < cols_.size(); ++ox) {
    const BilinearTap& t = cols_[ox];
    const size_t x = (ox + 1) / 2;
    if (ox == 0 || ox + 1 == cols_.size())
      twice_w_ = t.lo == t.hi && t.lo == (ox == 0 ? 0 : shape.in_w - 1);
    else
      twice_w_ = t.lo == x - 1 && t.hi == x && t.frac == (ox % 2 ? 0.25f : 0.75f);
  }
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

// One output row: the vertical blend into a scratch row (skipped when the row falls on an
// input row), then the horizontal blend per pixel. Written once per ISA: a shared template
// could not inline the intrinsics of either.
#define NN_RESIZE_ROW(BLEND, SPLAT)                                               \
  const size_t c = s.channels, row_floats = size_t(s.in_w) * c;                   \
  const float* r0 = image + ty.lo * row_floats;                                   \
  const float* r1 = image + ty.hi * row_floats;                                   \
  const float* row = r0;                                                          \
  thread_local std::vector<float> scratch;                                        \
  if (ty.frac != 0.f && ty.hi != ty.lo) {                                         \
    if (scratch.size() < row_floats) scratch.resize(row_floats);                  \
    BLEND(scratch.data(), r0, r1, SPLAT(ty.frac), row_floats);                    \
    row = scratch.data();                                                         \
  }                                                                               \
  for (size_t ox = 0; ox < s.out_w; ++ox) {                                       \
    const BilinearTap& tx = cols[ox];                                             \
    BLEND(out_row + ox * c, row + tx.lo * c, row + tx.hi * c, SPLAT(tx.frac), c); \
  }

// dst[i] = a[i] + (b[i] - a[i]) * f for i < n, 8 lanes a step (the tail in scalar fma).
NN_INLINE_AVX2 void blend_avx2(float* dst, const float* a, const float* b, float f, size_t n) {
  const __m256 vf = _mm256_set1_ps(f);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 va = _mm256_loadu_ps(a + i);
    _mm256_storeu_ps(dst + i, _mm256_fmadd_ps(_mm256_sub_ps(_mm256_loadu_ps(b + i), va), vf, va));
  }
  for (; i < n; ++i) dst[i] = std::fma(b[i] - a[i], f, a[i]);
}

// r0[] + (r1[] - r0[]) * fy on the lanes of m, or r0[] when the row falls on an input row.
NN_INLINE_AVX512 __m512 vertical_blend(const float* r0, const float* r1, __mmask16 m, bool blend, __m512 fy) {
  const __m512 a = _mm512_maskz_loadu_ps(m, r0);
  return blend ? _mm512_fmadd_ps(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, r1), a), fy, a) : a;
}

// One output row of a width-doubling resize (NativeResize::twice_w_), the same arithmetic
// as the general row: each input pixel's vertical blend is computed once into a register
// and feeds the two output pixels between it and the previous one, with no scratch row and
// no tap lookups (64x64x16 -> 128x128x16: 0.049 -> 0.019 ms).
NN_TARGET_AVX512 void resize_row_twice_w_avx512(const NativeResizeShape& s, const BilinearTap& ty,
                                                const BilinearTap* cols, const float* image, float* out_row) {
  const size_t c = s.channels, w = s.in_w, row_floats = size_t(w) * c;
  const float* r0 = image + ty.lo * row_floats;
  const float* r1 = image + ty.hi * row_floats;
  const bool vertical = ty.frac != 0.f && ty.hi != ty.lo;
  const __m512 fy = _mm512_set1_ps(ty.frac), quarter = _mm512_set1_ps(0.25f),
               three_quarters = _mm512_set1_ps(0.75f);
  const __m512 first_f = _mm512_set1_ps(cols[0].frac), last_f = _mm512_set1_ps(cols[2 * w - 1].frac);
  for (size_t cb = 0; cb < c; cb += 16) {
    const __mmask16 m = c - cb >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << (c - cb)) - 1);
    const bool full = m == 0xFFFF;
#define NN_V(x) vertical_blend(r0 + (x)*c + cb, r1 + (x)*c + cb, m, vertical, fy)
#define NN_PUT(ox, v) \
  (full ? _mm512_storeu_ps(out_row + (ox)*c + cb, v) : _mm512_mask_storeu_ps(out_row + (ox)*c + cb, m, v))
    __m512 prev = NN_V(0);
    NN_PUT(0, _mm512_fmadd_ps(_mm512_sub_ps(prev, prev), first_f, prev));
    for (size_t x = 1; x < w; ++x) {
      const __m512 cur = NN_V(x), d = _mm512_sub_ps(cur, prev);
      NN_PUT(2 * x - 1, _mm512_fmadd_ps(d, quarter, prev));
      NN_PUT(2 * x, _mm512_fmadd_ps(d, three_quarters, prev));
      prev = cur;
    }
    NN_PUT(2 * w - 1, _mm512_fmadd_ps(_mm512_sub_ps(prev, prev), last_f, prev));
#undef NN_PUT
#undef NN_V
  }
}

NN_TARGET_AVX512 void resize_row_avx512(const NativeResizeShape& s, const BilinearTap& ty,
                                        const BilinearTap* cols, const float* image,
                                        float* out_row){NN_RESIZE_ROW(blend, _mm512_set1_ps)}

NN_TARGET_AVX2 void resize_row_avx2(const NativeResizeShape& s, const BilinearTap& ty,
                                    const BilinearTap* cols, const float* image, float* out_row) {
  NN_RESIZE_ROW(blend_avx2, float)
}
#undef NN_RESIZE_ROW
#endif

}  // namespace

void NativeResize::run(const NativeArgs& args) const {
  const float* input = args.input;
  float* output = args.output;
  pthreadpool_t pool = args.pool;
  Task task{this, input, output};
  auto body = [](void* ctx, size_t r) {
    const Task& t = *static_cast<const Task*>(ctx);
    const NativeResizeShape& s = t.op->shape_;
    const size_t b = r / s.out_h, oy = r % s.out_h;
    const float* image = t.input + b * size_t(s.in_h) * s.in_w * s.channels;
    float* out_row = t.output + r * size_t(s.out_w) * s.channels;
#if NN_NATIVE_X86
    if (t.op->avx512_ && t.op->twice_w_)
      resize_row_twice_w_avx512(s, t.op->rows_[oy], t.op->cols_.data(), image, out_row);
    else if (t.op->avx512_)
      resize_row_avx512(s, t.op->rows_[oy], t.op->cols_.data(), image, out_row);
    else
      resize_row_avx2(s, t.op->rows_[oy], t.op->cols_.data(), image, out_row);
#else
    (void)image, (void)out_row, (void)oy;
#endif
  };
  for_each_row(pool, size_t(shape_.batch) * shape_.out_h, body, &task);
}

NativeConvThenResize::NativeConvThenResize(std::unique_ptr<NativeOp> conv, std::unique_ptr<NativeOp> resize,
                                           size_t small_floats)
    : conv_(std::move(conv)), resize_(std::move(resize)), small_bytes_((small_floats * sizeof(float) + 63) / 64 * 64) {
  if (conv_ && conv_->ok() && resize_ && resize_->ok()) packed_ = allocate_floats(1);  // marks it built
}

size_t NativeConvThenResize::scratch_bytes() const {
  return small_bytes_ + std::max(conv_->scratch_bytes(), resize_->scratch_bytes());
}

void NativeConvThenResize::run(const NativeArgs& args) const {
  float* small = static_cast<float*>(args.scratch);
  void* rest = static_cast<uint8_t*>(args.scratch) + small_bytes_;
  conv_->run({.input = args.input, .output = small, .scratch = rest, .pool = args.pool});
  resize_->run({.input = small, .output = args.output, .scratch = rest, .pool = args.pool});
}

}  // namespace nn::cpu

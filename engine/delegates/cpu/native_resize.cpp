// Bilinear resize (NHWC, fp32): per output row, one vertical blend of its two input rows
// into a scratch row, then per output pixel one horizontal blend of two scratch pixels,
// 16 channels a vector on AVX-512F, 8 on AVX2. The selfie decoder's three 2x upsamplings took 9%
// of the model in XNNPACK's 2022 resize (op 119, 64x64x16 -> 128x128x16: 0.08 ms). A
// width-doubling resize with half-pixel taps (all three of them) has its own row kernel
// (on AVX2 over pairs of output rows that blend the same input rows).
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
  // AVX2 runs a width-doubling resize in groups of output rows: two consecutive rows that
  // blend the same two input rows (a half-pixel 2x height's 2y - 1 and 2y) share their loads
  // and subtractions, any other row is a group of its own. Under 8 channels the general row.
  if (!avx512_ && twice_w_ && shape.channels >= 8)
    for (uint32_t oy = 0; oy < rows_.size(); ++oy) {
      row_groups_.push_back(oy);
      const BilinearTap &t = rows_[oy], *next = oy + 1 < rows_.size() ? &rows_[oy + 1] : nullptr;
      if (next && t.lo != t.hi && t.frac != 0.f && next->lo == t.lo && next->hi == t.hi && next->frac != 0.f)
        ++oy;
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

// The vertical blends of kVecs * 8 channels of one input pixel for kRows output rows:
// r0 + (r1 - r0) * fy[r], or r0 where the row falls on input row r0 (kVertical false, kRows 1).
template <int kRows, int kVecs, bool kVertical>
NN_INLINE_AVX2 void vertical_blends8(const float* r0, const float* r1, const __m256 (&fy)[kRows],
                                     __m256 (&v)[kRows][kVecs]) {
#pragma GCC unroll 2
  for (int k = 0; k < kVecs; ++k) {
    const __m256 a = _mm256_loadu_ps(r0 + 8 * k);
    if (!kVertical) {
      v[0][k] = a;
      continue;
    }
    const __m256 d = _mm256_sub_ps(_mm256_loadu_ps(r1 + 8 * k), a);
#pragma GCC unroll 2
    for (int r = 0; r < kRows; ++r) v[r][k] = _mm256_fmadd_ps(d, fy[r], a);
  }
}

// kVecs * 8 channels (from r0, r1 and out[]'s first) of kRows output rows of a
// width-doubling resize whose vertical blends read the same two input rows r0 and r1: the
// arithmetic of resize_row_twice_w_avx512, 8 lanes a vector.
template <int kRows, int kVecs, bool kVertical>
NN_INLINE_AVX2 void twice_w_channels_avx2(const float* r0, const float* r1, const __m256 (&fy)[kRows],
                                          float* const (&out)[kRows], size_t c, size_t w, __m256 first_f,
                                          __m256 last_f) {
  const __m256 quarter = _mm256_set1_ps(0.25f), three_quarters = _mm256_set1_ps(0.75f);
  __m256 prev[kRows][kVecs], cur[kRows][kVecs];
  vertical_blends8<kRows, kVecs, kVertical>(r0, r1, fy, prev);
#pragma GCC unroll 2
  for (int r = 0; r < kRows; ++r)
#pragma GCC unroll 2
    for (int k = 0; k < kVecs; ++k)
      _mm256_storeu_ps(out[r] + 8 * k,
                       _mm256_fmadd_ps(_mm256_sub_ps(prev[r][k], prev[r][k]), first_f, prev[r][k]));
  for (size_t x = 1; x < w; ++x) {
    vertical_blends8<kRows, kVecs, kVertical>(r0 + x * c, r1 + x * c, fy, cur);
#pragma GCC unroll 2
    for (int r = 0; r < kRows; ++r)
#pragma GCC unroll 2
      for (int k = 0; k < kVecs; ++k) {
        const __m256 d = _mm256_sub_ps(cur[r][k], prev[r][k]);
        _mm256_storeu_ps(out[r] + (2 * x - 1) * c + 8 * k, _mm256_fmadd_ps(d, quarter, prev[r][k]));
        _mm256_storeu_ps(out[r] + 2 * x * c + 8 * k, _mm256_fmadd_ps(d, three_quarters, prev[r][k]));
        prev[r][k] = cur[r][k];
      }
  }
#pragma GCC unroll 2
  for (int r = 0; r < kRows; ++r)
#pragma GCC unroll 2
    for (int k = 0; k < kVecs; ++k)
      _mm256_storeu_ps(out[r] + (2 * w - 1) * c + 8 * k,
                       _mm256_fmadd_ps(_mm256_sub_ps(prev[r][k], prev[r][k]), last_f, prev[r][k]));
}

// kRows output rows (1, or 2 that blend the same input rows) of a width-doubling resize of 8
// or more channels: 16 channels a step, then 8, then the last 8 again where the channels
// are no multiple of 8 (recomputed to the same values: no masked loads or stores).
template <int kRows, bool kVertical>
NN_TARGET_AVX2 void resize_rows_twice_w_avx2(const NativeResizeShape& s, const BilinearTap* ty,
                                             const BilinearTap* cols, const float* image, float* out_row) {
  const size_t c = s.channels, w = s.in_w, row_floats = size_t(w) * c;
  const float* r0 = image + ty[0].lo * row_floats;
  const float* r1 = image + ty[0].hi * row_floats;
  __m256 fy[kRows];
  float* out[kRows];
  for (int r = 0; r < kRows; ++r) {
    fy[r] = _mm256_set1_ps(ty[r].frac);
    out[r] = out_row + r * size_t(s.out_w) * c;
  }
  const __m256 first_f = _mm256_set1_ps(cols[0].frac), last_f = _mm256_set1_ps(cols[2 * w - 1].frac);
  size_t cb = 0;
  for (; cb + 16 <= c; cb += 16) {
    twice_w_channels_avx2<kRows, 2, kVertical>(r0 + cb, r1 + cb, fy, out, c, w, first_f, last_f);
    for (int r = 0; r < kRows; ++r) out[r] += 16;
  }
  if (cb + 8 <= c) {
    twice_w_channels_avx2<kRows, 1, kVertical>(r0 + cb, r1 + cb, fy, out, c, w, first_f, last_f);
    for (int r = 0; r < kRows; ++r) out[r] += 8;
    cb += 8;
  }
  if (cb < c) {
    for (int r = 0; r < kRows; ++r) out[r] -= 8 - (c - cb);
    cb = c - 8;
    twice_w_channels_avx2<kRows, 1, kVertical>(r0 + cb, r1 + cb, fy, out, c, w, first_f, last_f);
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
    if (!t.op->row_groups_.empty()) {
      // r counts row groups here (run's for_each_row).
      const std::vector<uint32_t>& groups = t.op->row_groups_;
      const size_t g = r % groups.size(), first = groups[g];
      const size_t count = (g + 1 < groups.size() ? groups[g + 1] : s.out_h) - first;
      const BilinearTap* ty = &t.op->rows_[first];
      float* out = t.output + (r / groups.size() * s.out_h + first) * size_t(s.out_w) * s.channels;
      const float* img = t.input + r / groups.size() * size_t(s.in_h) * s.in_w * s.channels;
      if (count == 2)
        resize_rows_twice_w_avx2<2, true>(s, ty, t.op->cols_.data(), img, out);
      else if (ty->frac != 0.f && ty->hi != ty->lo)
        resize_rows_twice_w_avx2<1, true>(s, ty, t.op->cols_.data(), img, out);
      else
        resize_rows_twice_w_avx2<1, false>(s, ty, t.op->cols_.data(), img, out);
    } else if (t.op->avx512_ && t.op->twice_w_)
      resize_row_twice_w_avx512(s, t.op->rows_[oy], t.op->cols_.data(), image, out_row);
    else if (t.op->avx512_)
      resize_row_avx512(s, t.op->rows_[oy], t.op->cols_.data(), image, out_row);
    else
      resize_row_avx2(s, t.op->rows_[oy], t.op->cols_.data(), image, out_row);
#else
    (void)image, (void)out_row, (void)oy;
#endif
  };
  const size_t rows = row_groups_.empty() ? shape_.out_h : row_groups_.size();  // row groups on AVX2
  for_each_row(pool, size_t(shape_.batch) * rows, body, &task);
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

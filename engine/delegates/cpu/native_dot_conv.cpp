// NativeDotConv (native_dot_conv.h): per output row, blocks of 16 (8) pixels whose windows
// are inside the image go through the vector kernel, the rest one pixel at a time from a
// gathered window; then the epilogue over the row while it is in cache.
#include "delegates/cpu/native_dot_conv.h"

#include <algorithm>
#include <cstring>
#include <vector>

namespace nn::cpu {

struct NativeDotConv::Task {
  const NativeDotConv* op;
  const float* input;
  const float* residual;
  float* output;
};

bool NativeDotConv::supports(const NativeConvShape& s, const Epilogue& e, const NativeIsa& isa) {
  const bool pointwise = s.kernel_h == 1 && s.kernel_w == 1 && s.stride_h == 1 && s.stride_w == 1 &&
                         s.pad_top == 0 && s.pad_left == 0 && s.in_h == s.out_h && s.in_w == s.out_w;
  const bool avx512 = isa.avx512 && native_avx512_enabled();
  const size_t lanes = avx512 ? 16 : 8, row = size_t(s.kernel_w) * s.in_c;
  const size_t padded = (row + lanes - 1) / lanes * lanes;
  return NN_NATIVE_X86 && s.groups == 1 && s.dilation_h == 1 && s.dilation_w == 1 && s.out_c >= 1 &&
         s.out_c <= kMaxOutputs && s.in_c >= 1 && !pointwise && !e.logistic && native_conv_supported() &&
         s.out_c * padded <= (avx512 ? 4 : 6) * row;
}

NativeDotConv::NativeDotConv(const NativeConvShape& s, const float* filter, const float* bias, const Epilogue& e,
                             const NativeIsa& isa)
    : s_(s), epilogue_(e), avx512_(isa.avx512 && native_avx512_enabled()) {
  lanes_ = avx512_ ? 16 : 8;
  const size_t row = size_t(s.kernel_w) * s.in_c;
  span_ = (row + lanes_ - 1) / lanes_ * lanes_;
  if (s.out_c < 1 || s.out_c > kMaxBuilt) return;
  // Each output channel's kernel rows, zero-padded to whole vectors.
  packed_ = allocate_floats(size_t(s.out_c) * s.kernel_h * span_);
  if (!packed_) return;
  for (size_t j = 0; j < s.out_c; ++j)
    for (size_t ky = 0; ky < s.kernel_h; ++ky)
      std::memcpy(packed_.get() + (j * s.kernel_h + ky) * span_, filter + (j * s.kernel_h + ky) * row,
                  row * sizeof(float));
  for (size_t j = 0; j < s.out_c; ++j) bias_[j] = bias ? bias[j] : 0.f;
  const int64_t reach = int64_t(s.kernel_w) - 1;
  while (ox_lo_ < s.out_w && int64_t(ox_lo_ * s.stride_w) < int64_t(s.pad_left)) ++ox_lo_;
  ox_hi_ = ox_lo_;
  while (ox_hi_ < s.out_w && int64_t(ox_hi_ * s.stride_w) - s.pad_left + reach < int64_t(s.in_w)) ++ox_hi_;
}

void NativeDotConv::run(const NativeArgs& args) const {
  Task t{this, args.input, args.residual, args.output};
  for_each_row(args.pool, size_t(s_.batch) * s_.out_h, &NativeDotConv::row, &t);
}

namespace {

// One output row's vector blocks: pixels [lo, hi) in blocks of 16 (8), the last block ending
// at hi and overlapping the one before it (its pixels computed twice, the same values).
struct DotRow {
  const float* x;      // the input at the row's first window row, column 0
  size_t step;         // floats from one output pixel's window to the next
  size_t row_stride;   // floats between input rows
  size_t kh, row, span;
  size_t lo, hi;       // output columns, their windows inside the image
  size_t offset;       // floats from column ox * step to the window's left edge (-pad_left * c)
  const float* w;      // packed filter rows
  const float* bias;
  size_t n;            // output channels
  float* out;
};

}  // namespace

#if NN_NATIVE_X86
// GCC 12 builds the masked loads and the unpacks on _mm512_undefined_* and then warns that
// they may be uninitialized wherever they inline.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
namespace {

// Lane p of the result: the sum of v[p]'s 16 lanes. Pairs interleaved and added (each
// 128-bit lane then holds two vectors' partial sums), pairs of pairs as 64-bit halves (four
// vectors' sums per 128-bit lane), then the four 128-bit lanes of four such vectors
// transposed and added.
NN_INLINE_AVX512 __m512 sum_lanes16(const __m512 (&v)[16]) {
  __m512 s[8];
#pragma GCC unroll 8
  for (int i = 0; i < 8; ++i)
    s[i] = _mm512_add_ps(_mm512_unpacklo_ps(v[2 * i], v[2 * i + 1]), _mm512_unpackhi_ps(v[2 * i], v[2 * i + 1]));
  __m512 r[4];
#pragma GCC unroll 4
  for (int i = 0; i < 4; ++i) {
    const __m512d a = _mm512_castps_pd(s[2 * i]), b = _mm512_castps_pd(s[2 * i + 1]);
    r[i] = _mm512_add_ps(_mm512_castpd_ps(_mm512_unpacklo_pd(a, b)), _mm512_castpd_ps(_mm512_unpackhi_pd(a, b)));
  }
  const __m512 ab = _mm512_add_ps(_mm512_shuffle_f32x4(r[0], r[1], 0x44), _mm512_shuffle_f32x4(r[0], r[1], 0xEE));
  const __m512 cd = _mm512_add_ps(_mm512_shuffle_f32x4(r[2], r[3], 0x44), _mm512_shuffle_f32x4(r[2], r[3], 0xEE));
  return _mm512_add_ps(_mm512_shuffle_f32x4(ab, cd, 0x88), _mm512_shuffle_f32x4(ab, cd, 0xDD));
}

// The same for 8 vectors of 8 lanes.
NN_INLINE_AVX2 __m256 sum_lanes8(const __m256 (&v)[8]) {
  const __m256 h0 = _mm256_hadd_ps(_mm256_hadd_ps(v[0], v[1]), _mm256_hadd_ps(v[2], v[3]));
  const __m256 h1 = _mm256_hadd_ps(_mm256_hadd_ps(v[4], v[5]), _mm256_hadd_ps(v[6], v[7]));
  return _mm256_add_ps(_mm256_permute2f128_ps(h0, h1, 0x20), _mm256_permute2f128_ps(h0, h1, 0x31));
}

// 16 output pixels of channel j: pixel p's window row ky at x + p * step + ky * row_stride,
// `row` floats (the last vector of each row masked to its end), the filter's rows `span` apart.
NN_TARGET_AVX512 __m512 block16(const float* x, size_t step, size_t row_stride, size_t kh, size_t row,
                                size_t span, const float* w) {
  __m512 acc[16];  // every loop over it unrolled, so it stays in registers
#pragma GCC unroll 16
  for (int p = 0; p < 16; ++p) acc[p] = _mm512_setzero_ps();
  const size_t full = row / 16 * 16;
  const __mmask16 tail = __mmask16((1u << (row - full)) - 1);
  for (size_t ky = 0; ky < kh; ++ky, x += row_stride, w += span) {
    // One pointer stepped from pixel to pixel: 16 pointers would not fit the registers.
    for (size_t i = 0; i < full; i += 16) {
      const __m512 wv = _mm512_load_ps(w + i);
      const float* q = x + i;
#pragma GCC unroll 16
      for (int p = 0; p < 16; ++p, q += step) acc[p] = _mm512_fmadd_ps(_mm512_loadu_ps(q), wv, acc[p]);
    }
    if (tail) {
      const __m512 wv = _mm512_load_ps(w + full);
      const float* q = x + full;
#pragma GCC unroll 16
      for (int p = 0; p < 16; ++p, q += step) acc[p] = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(tail, q), wv, acc[p]);
    }
  }
  return sum_lanes16(acc);
}

NN_TARGET_AVX2 __m256 block8(const float* x, size_t step, size_t row_stride, size_t kh, size_t row, size_t span,
                             const float* w) {
  __m256 acc[8];
#pragma GCC unroll 8
  for (int p = 0; p < 8; ++p) acc[p] = _mm256_setzero_ps();
  const size_t full = row / 8 * 8;
  const __m256i tail = lane_mask(row - full);
  for (size_t ky = 0; ky < kh; ++ky, x += row_stride, w += span) {
    for (size_t i = 0; i < full; i += 8) {
      const __m256 wv = _mm256_load_ps(w + i);
      const float* q = x + i;
#pragma GCC unroll 8
      for (int p = 0; p < 8; ++p, q += step) acc[p] = _mm256_fmadd_ps(_mm256_loadu_ps(q), wv, acc[p]);
    }
    if (full < row) {
      const __m256 wv = _mm256_load_ps(w + full);
      const float* q = x + full;
#pragma GCC unroll 8
      for (int p = 0; p < 8; ++p, q += step) acc[p] = _mm256_fmadd_ps(_mm256_maskload_ps(q, tail), wv, acc[p]);
    }
  }
  return sum_lanes8(acc);
}

// Channel j's outputs (bias added) of the `lanes` pixels whose windows start at x, stored at out.
NN_TARGET_AVX512 void store_block16(const DotRow& d, const float* x, size_t j, float* out) {
  _mm512_storeu_ps(out, _mm512_add_ps(block16(x, d.step, d.row_stride, d.kh, d.row, d.span, d.w + j * d.kh * d.span),
                                      _mm512_set1_ps(d.bias[j])));
}
NN_TARGET_AVX2 void store_block8(const DotRow& d, const float* x, size_t j, float* out) {
  _mm256_storeu_ps(out, _mm256_add_ps(block8(x, d.step, d.row_stride, d.kh, d.row, d.span, d.w + j * d.kh * d.span),
                                      _mm256_set1_ps(d.bias[j])));
}

// The row's blocks of kLanes pixels; a single output channel straight to the row, several
// through `block` (channel-major) into the row's pixel-major order.
template <size_t kLanes, void (*kStore)(const DotRow&, const float*, size_t, float*)>
void run_blocks(const DotRow& d) {
  alignas(64) float block[kLanes * NativeDotConv::kMaxBuilt];
  for (size_t ox = d.lo; ox < d.hi; ox += kLanes) {
    const size_t b = std::min(ox, d.hi - kLanes);
    const float* x = d.x + b * d.step - d.offset;
    if (d.n == 1) {
      kStore(d, x, 0, d.out + b);
      continue;
    }
    for (size_t j = 0; j < d.n; ++j) kStore(d, x, j, block + j * kLanes);
    for (size_t p = 0; p < kLanes; ++p)
      for (size_t j = 0; j < d.n; ++j) d.out[(b + p) * d.n + j] = block[j * kLanes + p];
  }
}

// The elementwise epilogue stages over n floats of an output row (and its residual).
NN_TARGET_AVX512 void epilogue16(const Epilogue& e, float* out, const float* residual, size_t n) {
  const EpilogueAvx512 epi(e);
  for (size_t i = 0; i < n; i += 16) {
    const __mmask16 m = __mmask16(n - i >= 16 ? 0xFFFF : (1u << (n - i)) - 1);
    const __m512 r = residual ? _mm512_maskz_loadu_ps(m, residual + i) : _mm512_setzero_ps();
    _mm512_mask_storeu_ps(out + i, m, epi(_mm512_maskz_loadu_ps(m, out + i), r));
  }
}
NN_TARGET_AVX2 void epilogue8(const Epilogue& e, float* out, const float* residual, size_t n) {
  const EpilogueAvx2 epi(e);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 r = residual ? _mm256_loadu_ps(residual + i) : _mm256_setzero_ps();
    _mm256_storeu_ps(out + i, epi(_mm256_loadu_ps(out + i), r));
  }
  for (; i < n; ++i) out[i] = apply_epilogue(e, out[i], residual ? residual[i] : 0.f);
}

}  // namespace
#pragma GCC diagnostic pop
#endif

void NativeDotConv::finish_row(const Task& t, size_t r, float* out_row) const {
  const size_t n = size_t(s_.out_w) * s_.out_c;
  const float* residual = epilogue_.residual && t.residual ? t.residual + r * n : nullptr;
#if NN_NATIVE_X86
  if (avx512_)
    epilogue16(epilogue_, out_row, residual, n);
  else
    epilogue8(epilogue_, out_row, residual, n);
#else
  for (size_t i = 0; i < n; ++i) out_row[i] = apply_epilogue(epilogue_, out_row[i], residual ? residual[i] : 0.f);
#endif
  if (epilogue_.swish) swish_inplace(out_row, 1, n, n, avx512_);
  if (epilogue_.gelu || epilogue_.gelu_tanh) gelu_inplace(out_row, 1, n, n, avx512_, epilogue_.gelu_tanh);
}

void NativeDotConv::row(void* ctx, size_t r) {
  const Task& t = *static_cast<const Task*>(ctx);
  const NativeDotConv& op = *t.op;
  const NativeConvShape& s = op.s_;
  const size_t image = r / s.out_h, oy = r % s.out_h, c = s.in_c, n = s.out_c, lanes = op.lanes_;
  const int64_t iy0 = int64_t(oy * s.stride_h) - s.pad_top;
  float* out_row = t.output + r * s.out_w * n;
  const bool rows_in = iy0 >= 0 && iy0 + int64_t(s.kernel_h) <= int64_t(s.in_h);
  DotRow d{nullptr, size_t(s.stride_w) * c, 0, s.kernel_h, size_t(s.kernel_w) * c, op.span_, 0, 0, 0,
           op.packed_.get(), op.bias_, n, out_row};
  auto blocks = [&] {
#if NN_NATIVE_X86
    if (op.avx512_) run_blocks<16, store_block16>(d);
    else run_blocks<8, store_block8>(d);
#endif
  };
  // The columns whose windows are inside the image, read in place.
  size_t lo = s.out_w, hi = s.out_w;
  if (rows_in && op.ox_hi_ >= op.ox_lo_ + lanes) {
    lo = op.ox_lo_, hi = op.ox_hi_;
    d.row_stride = size_t(s.in_w) * c;
    d.x = t.input + (image * s.in_h + size_t(iy0)) * d.row_stride;
    d.lo = lo, d.hi = hi, d.offset = size_t(s.pad_left) * c;
    blocks();
  }
  // The rest (image edges, padding) in blocks of `lanes` pixels from a zero-padded copy of
  // their windows (a strip of kernel_h rows), outputs copied to the row where they fall outside [lo, hi).
  const size_t strip_px = (lanes - 1) * s.stride_w + s.kernel_w;
  thread_local std::vector<float> strip;
  alignas(64) float block[16 * kMaxBuilt];
  d.row_stride = strip_px * c, d.lo = 0, d.hi = lanes, d.offset = 0, d.out = block;
  for (size_t b = 0; b < s.out_w; b += lanes) {
    if (b >= lo && b + lanes <= hi) continue;
    strip.assign(s.kernel_h * d.row_stride, 0.f);
    const int64_t ix0 = int64_t(b * s.stride_w) - s.pad_left;
    const int64_t from = std::max<int64_t>(ix0, 0), to = std::min<int64_t>(ix0 + int64_t(strip_px), s.in_w);
    for (size_t ky = 0; ky < s.kernel_h && from < to; ++ky) {
      const int64_t iy = iy0 + int64_t(ky);
      if (iy < 0 || iy >= int64_t(s.in_h)) continue;
      std::memcpy(strip.data() + ky * d.row_stride + size_t(from - ix0) * c,
                  t.input + ((image * s.in_h + size_t(iy)) * s.in_w + size_t(from)) * c,
                  size_t(to - from) * c * sizeof(float));
    }
    d.x = strip.data();
    blocks();
    for (size_t p = 0; p < lanes && b + p < s.out_w; ++p)
      if (b + p < lo || b + p >= hi) std::memcpy(out_row + (b + p) * n, block + p * n, n * sizeof(float));
  }
  op.finish_row(t, r, out_row);
}

}  // namespace nn::cpu

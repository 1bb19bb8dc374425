// ADD followed by a global average, fused (native_kernels.h), or a global average alone (no
// b): each image row's channel sums of clamp(a + b) (of a) on AVX-512F or AVX2, rows spread
// over the pool, then the rows' sums added in row order on the calling thread (the same order
// whatever the thread count).
#include <algorithm>

#include "delegates/cpu/native_kernels.h"

namespace nn::cpu {

NativeAddMean::NativeAddMean(const NativeAddMeanShape& shape, const NativeIsa& isa) : shape_(shape) {
  avx512_ = isa.avx512;
  packed_ = allocate_floats(1);  // no weights: marks the op as built
}

size_t NativeAddMean::scratch_bytes() const {
  return size_t(shape_.batch) * shape_.rows * shape_.channels * sizeof(float);
}

struct NativeAddMean::Task {
  const NativeAddMean* op;
  const float* a;
  const float* b;
  float* row_sums;
};

namespace {

#if NN_NATIVE_X86
// GCC 12 calls the AVX-512 min/max intrinsics' unused pass-through operand uninitialized.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
// clamp(a[at..] + b[at..]) on the lanes of m (zero elsewhere before the clamp); kAdd false:
// a[at..] as it is (a mean alone: no ADD, no clamp).
template <bool kAdd>
NN_INLINE_AVX512 __m512 clamped_sum(const float* a, const float* b, size_t at, __mmask16 m, __m512 lo,
                                    __m512 hi) {
  if constexpr (!kAdd) return _mm512_maskz_loadu_ps(m, a + at);
  const __m512 s = _mm512_add_ps(_mm512_maskz_loadu_ps(m, a + at), _mm512_maskz_loadu_ps(m, b + at));
  return _mm512_min_ps(_mm512_max_ps(s, lo), hi);
}

template <bool kAdd>
NN_TARGET_AVX512 void sum_row(const float* a, const float* b, size_t pixels, size_t channels, float lo,
                              float hi, float* sums) {
  const __m512 vlo = _mm512_set1_ps(lo), vhi = _mm512_set1_ps(hi);
  auto term = [&](__mmask16 m, size_t at) NN_TARGET_AVX512 { return clamped_sum<kAdd>(a, b, at, m, vlo, vhi); };
  for (size_t c0 = 0; c0 < channels; c0 += 16) {
    const __mmask16 m = channels - c0 >= 16 ? __mmask16(0xffff) : __mmask16((1u << (channels - c0)) - 1);
    __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();  // two chains: the adds' latency
    size_t p = 0;
    for (; p + 2 <= pixels; p += 2) {
      acc0 = _mm512_add_ps(acc0, term(m, p * channels + c0));
      acc1 = _mm512_add_ps(acc1, term(m, (p + 1) * channels + c0));
    }
    if (p < pixels) acc0 = _mm512_add_ps(acc0, term(m, p * channels + c0));
    _mm512_mask_storeu_ps(sums + c0, m, _mm512_add_ps(acc0, acc1));
  }
}
#pragma GCC diagnostic pop

template <bool kAdd>
NN_TARGET_AVX2 void sum_row_avx2(const float* a, const float* b, size_t pixels, size_t channels, float lo,
                                 float hi, float* sums) {
  const __m256 vlo = _mm256_set1_ps(lo), vhi = _mm256_set1_ps(hi);
  auto term = [&](size_t at) NN_TARGET_AVX2 {
    if constexpr (!kAdd) return _mm256_loadu_ps(a + at);
    const __m256 s = _mm256_add_ps(_mm256_loadu_ps(a + at), _mm256_loadu_ps(b + at));
    return _mm256_min_ps(_mm256_max_ps(s, vlo), vhi);
  };
  size_t c0 = 0;
  // Two 8-channel blocks in one pass over the row: each pixel's 16 channels are one cache
  // line (a pass per block had read every line twice), each block's sums in the same order.
  for (; c0 + 16 <= channels; c0 += 16) {
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    __m256 acc2 = _mm256_setzero_ps(), acc3 = _mm256_setzero_ps();
    size_t p = 0;
    for (; p + 2 <= pixels; p += 2) {
      const size_t at = p * channels + c0;
      acc0 = _mm256_add_ps(acc0, term(at));
      acc2 = _mm256_add_ps(acc2, term(at + 8));
      acc1 = _mm256_add_ps(acc1, term(at + channels));
      acc3 = _mm256_add_ps(acc3, term(at + channels + 8));
    }
    if (p < pixels) {
      acc0 = _mm256_add_ps(acc0, term(p * channels + c0));
      acc2 = _mm256_add_ps(acc2, term(p * channels + c0 + 8));
    }
    _mm256_storeu_ps(sums + c0, _mm256_add_ps(acc0, acc1));
    _mm256_storeu_ps(sums + c0 + 8, _mm256_add_ps(acc2, acc3));
  }
  for (; c0 + 8 <= channels; c0 += 8) {
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();  // two chains, as above
    size_t p = 0;
    for (; p + 2 <= pixels; p += 2) {
      const size_t at = p * channels + c0;
      acc0 = _mm256_add_ps(acc0, term(at));
      acc1 = _mm256_add_ps(acc1, term(at + channels));
    }
    if (p < pixels) acc0 = _mm256_add_ps(acc0, term(p * channels + c0));
    _mm256_storeu_ps(sums + c0, _mm256_add_ps(acc0, acc1));
  }
  for (; c0 < channels; ++c0) {  // the last channels (fewer than 8), one at a time
    float acc = 0.f;
    for (size_t p = 0; p < pixels; ++p)
      acc += kAdd ? std::min(std::max(a[p * channels + c0] + b[p * channels + c0], lo), hi) : a[p * channels + c0];
    sums[c0] = acc;
  }
}
#endif

}  // namespace

void NativeAddMean::run(const NativeArgs& args) const {
  const NativeAddMeanShape& s = shape_;
  const size_t c = s.channels;
  float* output = args.output;
  float* row_sums = static_cast<float*>(args.scratch);
  Task task{this, args.input, args.residual, row_sums};
  auto body = [](void* ctx, size_t row) {
    const Task& t = *static_cast<const Task*>(ctx);
    const NativeAddMeanShape& s = t.op->shape_;
    const size_t at = row * size_t(s.row_pixels) * s.channels;
#if NN_NATIVE_X86
    float* sums = t.row_sums + row * s.channels;
    if (!t.b && t.op->avx512_)
      sum_row<false>(t.a + at, nullptr, s.row_pixels, s.channels, s.lo, s.hi, sums);
    else if (!t.b)
      sum_row_avx2<false>(t.a + at, nullptr, s.row_pixels, s.channels, s.lo, s.hi, sums);
    else if (t.op->avx512_)
      sum_row<true>(t.a + at, t.b + at, s.row_pixels, s.channels, s.lo, s.hi, sums);
    else
      sum_row_avx2<true>(t.a + at, t.b + at, s.row_pixels, s.channels, s.lo, s.hi, sums);
#else
    (void)at;
#endif
  };
  for_each_row(args.pool, size_t(s.batch) * s.rows, body, &task);
  const float scale = 1.f / float(size_t(s.rows) * s.row_pixels);
  for (size_t n = 0; n < s.batch; ++n) {
    float* out = output + n * c;
    const float* sums = row_sums + n * size_t(s.rows) * c;
    for (size_t ch = 0; ch < c; ++ch) out[ch] = 0.f;
    for (size_t r = 0; r < s.rows; ++r)
      for (size_t ch = 0; ch < c; ++ch) out[ch] += sums[r * c + ch];
    for (size_t ch = 0; ch < c; ++ch) out[ch] *= scale;
  }
}

}  // namespace nn::cpu

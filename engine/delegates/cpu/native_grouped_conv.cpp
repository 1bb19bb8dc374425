#include "delegates/cpu/native_grouped_conv.h"

#include <pthreadpool.h>

#include <algorithm>
#include <cstring>
#include <vector>

namespace nn::cpu {

namespace {

constexpr size_t kRows = 8;     // output pixels per micro-tile
constexpr size_t kHalf = 16;    // output channels per group at most: one zmm
constexpr size_t kPanel = 32;   // a pair's weights per k step: group g's 16, then g + 1's
constexpr size_t kMaxTaps = 16;

#if NN_NATIVE_X86
// C[mr x nr] of group g at c and of group g + 1 at c + next_out (kPair 2; kPair 1: group g
// alone), mr <= 8: the sum over `segments` runs of k steps each, run s at seg_a[s] (row r at
// + r * lda; null: zeros, its weights skipped), group g + 1's inputs k floats past group g's
// (a group's channels follow the one before within each tap, in the input and in the im2col
// rows alike). w: the pair's panel, 32 biases, then segments * k rows of 32. Rows past mr
// read the last valid row and are not stored. kK nonzero: k as a constant (RegNet's group
// width 16), the k loop unrolled and both groups' inputs at fixed displacements.
#define NN_ROWS8(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7)
template <int kPair, bool kHardSwish, bool kResidual, int kK>
NN_TARGET_AVX512 void pair_kernel_t(size_t mr, size_t nr, size_t segments, const float* const* seg_a,
                                    size_t runtime_k, size_t lda, const float* w, float* c, const float* res,
                                    size_t ldc, size_t next_out, const EpilogueAvx512& shared_epi) {
  const size_t k = kK ? size_t(kK) : runtime_k;
  EpilogueAvx512 epi = shared_epi;
  epi.hard_swish = kHardSwish;
  epi.residual = kResidual;
  const __mmask16 lanes = nr >= kHalf ? __mmask16(0xFFFF) : __mmask16((1u << nr) - 1);
  const __m512 bias_lo = _mm512_load_ps(w), bias_hi = _mm512_load_ps(w + kHalf);
#define NN_ACC(i) __m512 c##i##l = bias_lo, c##i##h = bias_hi;
  NN_ROWS8(NN_ACC)
#undef NN_ACC
  const float* wp = w + kPanel;
  for (size_t seg = 0; seg < segments; ++seg) {
    if (!seg_a[seg]) {
      wp += k * kPanel;
      continue;
    }
    const float* a0 = seg_a[seg];
    const float* a1 = mr > 1 ? a0 + lda : a0;
    const float* a2 = mr > 2 ? a1 + lda : a1;
    const float* a3 = mr > 3 ? a2 + lda : a2;
    const float* a4 = mr > 4 ? a3 + lda : a3;
    const float* a5 = mr > 5 ? a4 + lda : a4;
    const float* a6 = mr > 6 ? a5 + lda : a5;
    const float* a7 = mr > 7 ? a6 + lda : a6;
#define NN_FMA(i)                                                                 \
  c##i##l = _mm512_fmadd_ps(_mm512_set1_ps(a##i[p]), b0, c##i##l);                \
  if constexpr (kPair == 2) c##i##h = _mm512_fmadd_ps(_mm512_set1_ps(a##i[p + k]), b1, c##i##h);
#define NN_K_STEP                                                         \
  {                                                                       \
    const __m512 b0 = _mm512_load_ps(wp);                                 \
    const __m512 b1 = kPair == 2 ? _mm512_load_ps(wp + kHalf) : b0;       \
    wp += kPanel;                                                         \
    NN_ROWS8(NN_FMA)                                                      \
  }
    if constexpr (kK > 0) {
#pragma GCC unroll 16
      for (size_t p = 0; p < size_t(kK); ++p) NN_K_STEP
    } else {
      for (size_t p = 0; p < k; ++p) NN_K_STEP
    }
#undef NN_K_STEP
#undef NN_FMA
  }
  // Only rows below mr: a row stored twice would add a residual read in place twice.
#define NN_STORE(i)                                                                       \
  if (i < mr) {                                                                           \
    float* out = c + i * ldc;                                                             \
    const float* rr = res + i * ldc;                                                      \
    const __m512 rl = kResidual ? _mm512_maskz_loadu_ps(lanes, rr) : epi.zero;            \
    _mm512_mask_storeu_ps(out, lanes, epi(c##i##l, rl));                                  \
    if constexpr (kPair == 2) {                                                           \
      const __m512 rh = kResidual ? _mm512_maskz_loadu_ps(lanes, rr + next_out) : epi.zero; \
      _mm512_mask_storeu_ps(out + next_out, lanes, epi(c##i##h, rh));                     \
    }                                                                                     \
  }
  NN_ROWS8(NN_STORE)
#undef NN_STORE
}
#undef NN_ROWS8

using PairKernel = void (*)(size_t, size_t, size_t, const float* const*, size_t, size_t, const float*, float*,
                            const float*, size_t, size_t, const EpilogueAvx512&);

template <int kPair, int kK>
PairKernel pair_kernel_for(const Epilogue& e) {
  return e.hard_swish ? (e.residual ? pair_kernel_t<kPair, true, true, kK> : pair_kernel_t<kPair, true, false, kK>)
                      : (e.residual ? pair_kernel_t<kPair, false, true, kK> : pair_kernel_t<kPair, false, false, kK>);
}

// The kernel for a pair (pair 2) or a lone last group (1).
PairKernel pair_kernel(int pair, size_t group_in, const Epilogue& e) {
  if (group_in == 16) return pair == 2 ? pair_kernel_for<2, 16>(e) : pair_kernel_for<1, 16>(e);
  return pair == 2 ? pair_kernel_for<2, 0>(e) : pair_kernel_for<1, 0>(e);
}
#endif

}  // namespace

bool NativeGroupedConv::supports(const NativeConvShape& s, const NativeIsa& isa) {
#if NN_NATIVE_X86
  return isa.avx512 && s.groups >= 2 && s.in_c % s.groups == 0 && s.out_c % s.groups == 0 &&
         s.out_c / s.groups <= kHalf && size_t(s.kernel_h) * s.kernel_w <= kMaxTaps && s.dilation_h == 1 &&
         s.dilation_w == 1;
#else
  (void)s, (void)isa;
  return false;
#endif
}

NativeGroupedConv::NativeGroupedConv(const NativeConvShape& shape, const float* filter, const float* bias,
                                     const Epilogue& epilogue)
    : shape_(shape), epilogue_(epilogue) {
  if (!supports(shape, NativeIsa::with(true, 0, true))) return;
  const size_t groups = shape.groups;
  group_in_ = shape.in_c / groups;
  group_out_ = shape.out_c / groups;
  k_ = size_t(shape.kernel_h) * shape.kernel_w * group_in_;
  pairs_ = (groups + 1) / 2;
  // Per pair: 32 biases, then per k step group g's group_out_ weights in lanes 0-15 and
  // group g + 1's in lanes 16-31 (zeros past group_out_ and for a lone last group).
  const size_t panel = kPanel * (k_ + 1);
  AlignedFloats packed = allocate_floats(pairs_ * panel);
  if (!packed) return;
  for (size_t g = 0; g < groups; ++g) {
    float* dst = packed.get() + g / 2 * panel + g % 2 * kHalf;
    for (size_t c = 0; c < group_out_; ++c) {
      const size_t n = g * group_out_ + c;
      dst[c] = bias ? bias[n] : 0.f;
      for (size_t q = 0; q < k_; ++q) dst[kPanel + q * kPanel + c] = filter[n * k_ + q];
    }
  }
  packed_ = std::move(packed);
}

struct NativeGroupedConv::Item {
  const NativeGroupedConv* conv;
  const float* input;
  const float* residual;
  float* output;
  size_t m_total, tiles, row_pieces, pair_pieces;
};

// Row piece i (a run of micro-tiles) x pair piece j (a run of pairs).
void NativeGroupedConv::run_item(void* ctx, size_t i, size_t j) {
#if NN_NATIVE_X86
  const Item& it = *static_cast<const Item*>(ctx);
  const NativeGroupedConv& conv = *it.conv;
  const NativeConvShape& s = conv.shape_;
  const size_t t0 = it.tiles * i / it.row_pieces, t1 = it.tiles * (i + 1) / it.row_pieces;
  const size_t p0 = conv.pairs_ * j / it.pair_pieces, p1 = conv.pairs_ * (j + 1) / it.pair_pieces;
  if (t1 <= t0 || p1 <= p0) return;
  const size_t groups = s.groups, g0 = 2 * p0, g1 = std::min(2 * p1, groups);
  const size_t in_c = s.in_c, out_c = s.out_c, gi = conv.group_in_, go = conv.group_out_;
  // im2col rows hold only this piece's groups' channels: per tap c_taken floats from c_first.
  const size_t c_first = g0 * gi, c_taken = (g1 - g0) * gi;
  const size_t taps = size_t(s.kernel_h) * s.kernel_w, row_floats = taps * c_taken;
  thread_local std::vector<float> rows;
  if (rows.size() < kRows * row_floats) rows.resize(kRows * row_floats);
  const EpilogueAvx512 epi(conv.epilogue_);
  const PairKernel pair2 = pair_kernel(2, gi, conv.epilogue_), pair1 = pair_kernel(1, gi, conv.epilogue_);
  const size_t pixels = size_t(s.out_h) * s.out_w, panel = kPanel * (conv.k_ + 1);
  const int64_t in_h = s.in_h, in_w = s.in_w;
  const int64_t reach = int64_t(s.kernel_w - 1) * s.dilation_w + 1;  // columns one pixel's window spans
  const size_t m0 = t0 * kRows, m1 = std::min(t1 * kRows, it.m_total);
  const float* seg[kMaxTaps];
  const float* pair_seg[kMaxTaps];
  for (size_t first = m0; first < m1; first += kRows) {
    const size_t mr = std::min(kRows, m1 - first);
    size_t b = first / pixels, oy = first % pixels / s.out_w, ox = first % pixels % s.out_w;
    const int64_t x0 = int64_t(ox) * s.stride_w - s.pad_left;
    const int64_t x_end = int64_t(ox + mr - 1) * s.stride_w - s.pad_left + reach;  // one past
    size_t lda;
    if (ox + mr <= s.out_w && x0 >= 0 && x_end <= in_w) {
      // One output row, every window inside horizontally: one run per tap, read in place.
      const float* image = it.input + b * size_t(in_h) * size_t(in_w) * in_c + c_first;
      for (uint32_t ky = 0; ky < s.kernel_h; ++ky) {
        const int64_t iy = int64_t(oy) * s.stride_h - s.pad_top + int64_t(ky) * s.dilation_h;
        for (uint32_t kx = 0; kx < s.kernel_w; ++kx)
          seg[ky * s.kernel_w + kx] =
              iy < 0 || iy >= in_h
                  ? nullptr
                  : image + (size_t(iy) * size_t(in_w) + size_t(x0 + int64_t(kx) * s.dilation_w)) * in_c;
      }
      lda = size_t(s.stride_w) * in_c;
    } else {
      // im2col rows of the tile's pixels, zeros where a tap reads padding.
      for (size_t r = 0; r < mr; ++r) {
        float* dst = rows.data() + r * row_floats;
        const float* image = it.input + b * size_t(in_h) * size_t(in_w) * in_c + c_first;
        for (uint32_t ky = 0; ky < s.kernel_h; ++ky) {
          const int64_t iy = int64_t(oy) * s.stride_h - s.pad_top + int64_t(ky) * s.dilation_h;
          for (uint32_t kx = 0; kx < s.kernel_w; ++kx, dst += c_taken) {
            const int64_t ix = int64_t(ox) * s.stride_w - s.pad_left + int64_t(kx) * s.dilation_w;
            if (iy < 0 || iy >= in_h || ix < 0 || ix >= in_w)
              std::memset(dst, 0, c_taken * sizeof(float));
            else
              std::memcpy(dst, image + (size_t(iy) * size_t(in_w) + size_t(ix)) * in_c, c_taken * sizeof(float));
          }
        }
        if (++ox == s.out_w) {
          ox = 0;
          if (++oy == s.out_h) oy = 0, ++b;
        }
      }
      for (size_t q = 0; q < taps; ++q) seg[q] = rows.data() + q * c_taken;
      lda = row_floats;
    }
    for (size_t p = p0; p < p1; ++p) {
      const size_t g = 2 * p, offset = (g - g0) * gi;
      for (size_t q = 0; q < taps; ++q) pair_seg[q] = seg[q] ? seg[q] + offset : nullptr;
      const size_t at = first * out_c + g * go;
      (g + 1 < groups ? pair2 : pair1)(mr, go, taps, pair_seg, gi, lda, conv.packed_.get() + p * panel,
                                       it.output + at, it.residual + at, out_c, go, epi);
    }
  }
  const Epilogue& e = conv.epilogue_;
  if (e.swish || e.gelu || e.gelu_tanh) {
    // The piece's outputs are still in cache: the last stage as one more pass over them.
    float* out = it.output + m0 * out_c + g0 * go;
    if (e.swish)
      swish_inplace(out, m1 - m0, (g1 - g0) * go, out_c, true);
    else
      gelu_inplace(out, m1 - m0, (g1 - g0) * go, out_c, true, e.gelu_tanh);
  }
#else
  (void)ctx, (void)i, (void)j;
#endif
}

void NativeGroupedConv::run(const NativeArgs& a) const {
  const size_t m_total = size_t(shape_.batch) * shape_.out_h * shape_.out_w;
  // Without a residual the kernel is handed the output as one (never read): no null offsets.
  Item it{this, a.input, a.residual ? a.residual : a.output, a.output, m_total, (m_total + kRows - 1) / kRows, 1, 1};
  const size_t threads = a.pool ? pthreadpool_get_threads_count(a.pool) : 1;
  if (threads < 2) return run_item(&it, 0, 0);
  // Pieces of rows first (each core then reads the rows it wrote one op earlier); where the
  // image has too few micro-tiles for 4 pieces per thread, the pairs split too.
  const size_t wanted = 4 * threads;
  it.row_pieces = std::min(it.tiles, wanted);
  it.pair_pieces = it.row_pieces >= wanted ? 1 : std::min(pairs_, (wanted + it.row_pieces - 1) / it.row_pieces);
  pthreadpool_parallelize_2d(a.pool, run_item, &it, it.row_pieces, it.pair_pieces, 0);
}

}  // namespace nn::cpu

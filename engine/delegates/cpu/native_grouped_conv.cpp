#include "delegates/cpu/native_grouped_conv.h"

#include <pthreadpool.h>

#include <algorithm>
#include <cstring>
#include <vector>

namespace nn::cpu {

namespace {

constexpr size_t kRows = 8;     // output pixels per micro-tile at most (its pointer table's rows per tap)
constexpr size_t kHalf = 16;    // output channels per group at most: one zmm
constexpr size_t kPanel = 32;   // a pair's weights per k step: group g's 16, then g + 1's
constexpr size_t kMaxTaps = 16;

#if NN_NATIVE_X86
// C[mr x nr] of group g at c and of group g + 1 at c + next_out (kPair 2; kPair 1: group g
// alone), mr <= 8: the sum over `taps` runs of k steps each. Tap q's row r reads a[q * 8 + r]
// + offset (group g's channels; g + 1's follow k floats on), an indirection table as
// XNNPACK's: pixels in place, or a zero vector (as long as a pixel) where the tap reads
// padding, rows past mr repeating the last one;
// a[q * 8] null: the tap reads only padding, its weights skipped. No copies: im2col rows for
// the edge tiles had cost more than the tiles' FMAs on 7x7 maps (every tile an edge one).
// w: the pair's panel, 32 biases, then taps * k rows of 32. Rows past mr are not stored.
// kK nonzero: k as a constant (RegNet's group width 16), the k loop unrolled, both groups'
// inputs at fixed displacements from one pointer.
#define NN_ROWS8(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7)
template <int kPair, bool kHardSwish, bool kResidual, int kK, size_t kR>
NN_TARGET_AVX512 void pair_kernel_t(size_t mr, size_t nr, size_t taps, const float* const* a, size_t offset,
                                    size_t runtime_k,
                                    const float* w, float* c, const float* res, size_t ldc, size_t next_out,
                                    const EpilogueAvx512& shared_epi) {
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
  for (size_t q = 0; q < taps; ++q, a += kRows) {
    if (!a[0]) {
      wp += k * kPanel;
      continue;
    }
#define NN_ROW(i) const float* a##i = a[i] + offset;
    NN_ROWS8(NN_ROW)
#undef NN_ROW
#define NN_FMA(i)                                                                                \
  if constexpr (i < kR) {                                                                        \
    c##i##l = _mm512_fmadd_ps(_mm512_set1_ps(a##i[p]), b0, c##i##l);                             \
    if constexpr (kPair == 2) c##i##h = _mm512_fmadd_ps(_mm512_set1_ps(a##i[p + k]), b1, c##i##h); \
  }
#define NN_K_STEP                                                   \
  {                                                                 \
    const __m512 b0 = _mm512_load_ps(wp);                           \
    const __m512 b1 = kPair == 2 ? _mm512_load_ps(wp + kHalf) : b0; \
    wp += kPanel;                                                   \
    NN_ROWS8(NN_FMA)                                                \
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
#define NN_STORE(i)                                                                         \
  if (i < kR && i < mr) {                                                                  \
    float* out = c + i * ldc;                                                               \
    const float* rr = res + i * ldc;                                                        \
    const __m512 rl = kResidual ? _mm512_maskz_loadu_ps(lanes, rr) : epi.zero;              \
    _mm512_mask_storeu_ps(out, lanes, epi(c##i##l, rl));                                    \
    if constexpr (kPair == 2) {                                                             \
      const __m512 rh = kResidual ? _mm512_maskz_loadu_ps(lanes, rr + next_out) : epi.zero; \
      _mm512_mask_storeu_ps(out + next_out, lanes, epi(c##i##h, rh));                       \
    }                                                                                       \
  }
  NN_ROWS8(NN_STORE)
#undef NN_STORE
}
#undef NN_ROWS8

using PairKernel = void (*)(size_t, size_t, size_t, const float* const*, size_t, size_t, const float*, float*,
                            const float*, size_t, size_t, const EpilogueAvx512&);

template <int kPair, int kK, size_t kR>
PairKernel pair_kernel_for(const Epilogue& e) {
  return e.hard_swish
             ? (e.residual ? pair_kernel_t<kPair, true, true, kK, kR> : pair_kernel_t<kPair, true, false, kK, kR>)
             : (e.residual ? pair_kernel_t<kPair, false, true, kK, kR> : pair_kernel_t<kPair, false, false, kK, kR>);
}

template <size_t kR>
PairKernel pair_kernel_rows(int pair, size_t group_in, const Epilogue& e) {
  if (group_in == 16) return pair == 2 ? pair_kernel_for<2, 16, kR>(e) : pair_kernel_for<1, 16, kR>(e);
  return pair == 2 ? pair_kernel_for<2, 0, kR>(e) : pair_kernel_for<1, 0, kR>(e);
}

// The kernel for a pair (pair 2) or a lone last group (1), on tiles of `rows` pixels (7 or 8).
PairKernel pair_kernel(int pair, size_t group_in, const Epilogue& e, size_t rows) {
  return rows == 7 ? pair_kernel_rows<7>(pair, group_in, e) : pair_kernel_rows<8>(pair, group_in, e);
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
  zeros_.assign(shape.in_c, 0.f);
  // Tiles of 7 pixels where they leave fewer empty rows than tiles of 8 (a 7x7 map: 7 tiles
  // of 7, not 6 of 8 and one of 1, which costs as much as a full one).
  const size_t m = size_t(shape.batch) * shape.out_h * shape.out_w;
  tile_rows_ = (m + 6) / 7 * 7 < (m + 7) / 8 * 8 ? 7 : 8;
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
  const size_t taps = size_t(s.kernel_h) * s.kernel_w;
  const EpilogueAvx512 epi(conv.epilogue_);
  const size_t rows = conv.tile_rows_;
  const PairKernel pair2 = pair_kernel(2, gi, conv.epilogue_, rows),
                   pair1 = pair_kernel(1, gi, conv.epilogue_, rows);
  const size_t pixels = size_t(s.out_h) * s.out_w, panel = kPanel * (conv.k_ + 1);
  const int64_t in_h = s.in_h, in_w = s.in_w;
  const float* zeros = conv.zeros_.data();
  const size_t m0 = t0 * rows, m1 = std::min(t1 * rows, it.m_total);
  // Runs of up to kChunk micro-tiles: their indirection tables (tap-major, 8 rows a tap, at
  // channel 0; the zero vector for padding, a tap's first entry null where it reads only
  // padding), then pair by pair each pair's panel over all of them while it stays in L1.
  constexpr size_t kChunk = 8;
  const float* tables[kChunk][kMaxTaps * kRows];
  for (size_t chunk = m0; chunk < m1; chunk += kChunk * rows) {
    const size_t chunk_end = std::min(m1, chunk + kChunk * rows);
    size_t tiles = 0;
    for (size_t first = chunk; first < chunk_end; first += rows, ++tiles) {
      const float** table = tables[tiles];
      const size_t mr = std::min(rows, chunk_end - first);
      size_t b = first / pixels, oy = first % pixels / s.out_w, ox = first % pixels % s.out_w;
      for (size_t q = 0; q < taps; ++q) table[q * kRows] = nullptr;
      bool live[kMaxTaps] = {};
      for (size_t r = 0; r < kRows; ++r) {
        const float* image = it.input + b * size_t(in_h) * size_t(in_w) * in_c;
        for (uint32_t ky = 0; ky < s.kernel_h; ++ky) {
          const int64_t iy = int64_t(oy) * s.stride_h - s.pad_top + int64_t(ky);
          for (uint32_t kx = 0; kx < s.kernel_w; ++kx) {
            const int64_t ix = int64_t(ox) * s.stride_w - s.pad_left + int64_t(kx);
            const size_t q = ky * s.kernel_w + kx;
            const bool inside = iy >= 0 && iy < in_h && ix >= 0 && ix < in_w;
            live[q] |= inside;
            table[q * kRows + r] = inside ? image + (size_t(iy) * size_t(in_w) + size_t(ix)) * in_c : zeros;
          }
        }
        // Rows past mr repeat the last pixel (computed, not stored).
        if (r + 1 < mr && ++ox == s.out_w) {
          ox = 0;
          if (++oy == s.out_h) oy = 0, ++b;
        }
      }
      for (size_t q = 0; q < taps; ++q)
        if (!live[q]) table[q * kRows] = nullptr;
    }
    for (size_t p = p0; p < p1; ++p) {
      const size_t g = 2 * p;
      const PairKernel kernel = g + 1 < groups ? pair2 : pair1;
      const float* w = conv.packed_.get() + p * panel;
      for (size_t t = 0; t < tiles; ++t) {
        const size_t first = chunk + t * rows, at = first * out_c + g * go;
        kernel(std::min(rows, chunk_end - first), go, taps, tables[t], g * gi, gi, w, it.output + at, it.residual + at,
               out_c, go, epi);
      }
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
  Item it{this, a.input, a.residual ? a.residual : a.output, a.output, m_total, (m_total + tile_rows_ - 1) / tile_rows_,
          1, 1};
  const size_t threads = a.pool ? pthreadpool_get_threads_count(a.pool) : 1;
  if (threads < 2) return run_item(&it, 0, 0);
  // One piece per thread (4 per thread measured slower: bench/README.md): pieces of rows
  // (each core then reads the rows it wrote one op earlier) where the image has 4+ micro-tiles
  // per thread; on a smaller one (RegNet's 7x7 stage) runs of pairs over all rows, as the 1x1
  // convs around it split their output channels there.
  if (it.tiles >= 4 * threads || pairs_ < threads)
    it.row_pieces = std::min(it.tiles, threads);
  else
    it.pair_pieces = std::min(pairs_, threads);
  pthreadpool_parallelize_2d(a.pool, run_item, &it, it.row_pieces, it.pair_pieces, 0);
}

}  // namespace nn::cpu

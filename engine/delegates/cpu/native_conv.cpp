#include "delegates/cpu/native_kernels.h"

#include <cpuinfo.h>
#include <pthreadpool.h>

#include <algorithm>
#include <cfloat>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>

namespace nn::cpu {

namespace {

constexpr size_t kMr = 6;      // rows (output pixels) per micro-tile
constexpr size_t kNr = 16;     // columns (output channels) per micro-tile / weight panel, AVX2
constexpr size_t kNr512 = 32;  // the same for the AVX-512 kernel

void free_aligned(float* p) {
  std::free(p);
}

#if NN_NATIVE_X86

// Applies the epilogue to one row of a micro-tile (residual row `r` shaped like `c`) and
// stores its first nr lanes.
NN_INLINE_AVX2 void store_row(float* c, const float* r, size_t nr, __m256 lo_half, __m256 hi_half,
                              const EpilogueAvx2& epi) {
  __m256 r0 = epi.zero, r1 = epi.zero;
  if (nr == kNr) {
    if (epi.residual) r0 = _mm256_loadu_ps(r), r1 = _mm256_loadu_ps(r + 8);
    _mm256_storeu_ps(c, epi(lo_half, r0));
    _mm256_storeu_ps(c + 8, epi(hi_half, r1));
  } else if (nr >= 8) {
    if (epi.residual) r0 = _mm256_loadu_ps(r);
    _mm256_storeu_ps(c, epi(lo_half, r0));
    if (nr > 8) {
      if (epi.residual) r1 = _mm256_maskload_ps(r + 8, lane_mask(nr - 8));
      store_first(c + 8, epi(hi_half, r1), nr - 8);
    }
  } else {
    if (epi.residual) r0 = _mm256_maskload_ps(r, lane_mask(nr));
    store_first(c, epi(lo_half, r0), nr);
  }
}

// C[m x nr] = epilogue(A[m x K] * W[K x 16] + bias, R), where A's columns come in
// `segments` runs of k each: run s is the matrix at seg_a[s] (row r at seg_a[s] + r*lda),
// or all zeros when seg_a[s] is null (its weights are skipped). One run is a plain GEMM;
// a conv gives one run per kernel row (implicit GEMM: no im2col copy). kRows (6, 4, 2 or
// 1) rows of accumulators a micro-tile, the rows walked kRows at a time; a last tile of
// fewer rows aliases its rows past m to its last valid row (computed twice, stored to the
// same place): no row branches. The smaller kRows serve a GEMM's last rows (a 7x7 image's
// 49 pixels: 8 tiles of 6 and one of 1, where a ninth 6-row tile cost 10% more).
// kHardSwish / kResidual: the epilogue's stages as constants, so the stores carry no
// branches (the dispatcher below picks the instantiation once per call). kSegments / kK
// nonzero: the segments and their length as constants, the k loop unrolled into straight
// FMAs (a 3x3 conv on 3 channels, every stem here: 3 runs of 9 k steps, too short for the
// loop to pay for itself), as the AVX-512 kernel.
#define NN_ROWS6(X) X(0) X(1) X(2) X(3) X(4) X(5)
template <int kRows, bool kHardSwish, bool kResidual, int kSegments = 0, int kK = 0>
NN_TARGET_AVX2 void kernel_6x16_t(size_t m, size_t nr, size_t runtime_segments, const float* const* seg_a,
                                  size_t runtime_k, size_t lda, const float* w, float* c, const float* res,
                                  size_t ldc, const EpilogueAvx2& shared_epi) {
  const size_t segments = kSegments ? size_t(kSegments) : runtime_segments;
  const size_t k = kK ? size_t(kK) : runtime_k;
  EpilogueAvx2 epi = shared_epi;
  epi.hard_swish = kHardSwish;
  epi.residual = kResidual;
  const __m256 bias0 = _mm256_load_ps(w), bias1 = _mm256_load_ps(w + 8);
  for (size_t r0 = 0; r0 < m; r0 += kRows, c += kRows * ldc, res += kRows * ldc) {
    const size_t mr = std::min<size_t>(kRows, m - r0);
#define NN_ACC(i) __m256 c##i##0 = bias0, c##i##1 = bias1;
    NN_ROWS6(NN_ACC)
#undef NN_ACC
    const float* wp = w + kNr;
#pragma GCC unroll 4
    for (size_t seg = 0; seg < segments; ++seg) {
      if (!seg_a[seg]) {
        wp += k * kNr;
        continue;
      }
      const float* a0 = seg_a[seg] + r0 * lda;
      const float* a1 = mr > 1 ? a0 + lda : a0;
      const float* a2 = mr > 2 ? a1 + lda : a1;
      const float* a3 = mr > 3 ? a2 + lda : a2;
      const float* a4 = mr > 4 ? a3 + lda : a3;
      const float* a5 = mr > 5 ? a4 + lda : a4;
#define NN_FMA(i)                                    \
  if constexpr (i < kRows) {                         \
    const __m256 va = _mm256_broadcast_ss(a##i + p); \
    c##i##0 = _mm256_fmadd_ps(va, b0, c##i##0);      \
    c##i##1 = _mm256_fmadd_ps(va, b1, c##i##1);      \
  }
#define NN_K_STEP                              \
  {                                            \
    const __m256 b0 = _mm256_load_ps(wp);      \
    const __m256 b1 = _mm256_load_ps(wp + 8);  \
    wp += kNr;                                 \
    NN_ROWS6(NN_FMA)                           \
  }
      if constexpr (kK > 0) {
#pragma GCC unroll 16
        for (int p = 0; p < kK; ++p) NN_K_STEP
      } else {
        for (size_t p = 0; p < k; ++p) NN_K_STEP
      }
#undef NN_K_STEP
#undef NN_FMA
    }
    // Row i of the tile stores at c + i*ldc (residual res + i*ldc); rows past mr alias.
    const size_t s1 = mr > 1 ? ldc : 0, s2 = mr > 2 ? 2 * ldc : s1, s3 = mr > 3 ? 3 * ldc : s2,
                 s4 = mr > 4 ? 4 * ldc : s3, s5 = mr > 5 ? 5 * ldc : s4;
    if constexpr (kRows > 5) store_row(c + s5, res + s5, nr, c50, c51, epi);
    if constexpr (kRows > 4) store_row(c + s4, res + s4, nr, c40, c41, epi);
    if constexpr (kRows > 3) store_row(c + s3, res + s3, nr, c30, c31, epi);
    if constexpr (kRows > 2) store_row(c + s2, res + s2, nr, c20, c21, epi);
    if constexpr (kRows > 1) store_row(c + s1, res + s1, nr, c10, c11, epi);
    store_row(c, res, nr, c00, c01, epi);
  }
}
#undef NN_ROWS6

// A 16-wide panel's first 8 columns only (its last columns, at most 8 valid: 24 channels
// as 16 + 8), 8 rows: 8 accumulators, one weight load and 8 broadcasts per k step. The
// 6 x 16 kernel spent half its FMAs on the empty columns there; 6 x 8 would leave the FMA
// units waiting on 6 chains. One segment (a plain GEMM), m a multiple of 8.
template <bool kHardSwish, bool kResidual>
NN_TARGET_AVX2 void kernel_8x8_t(size_t m, size_t nr, const float* a, size_t k, size_t lda, const float* w,
                                 float* c, const float* res, size_t ldc, const EpilogueAvx2& shared_epi) {
  EpilogueAvx2 epi = shared_epi;
  epi.hard_swish = kHardSwish;
  epi.residual = kResidual;
  const __m256 bias = _mm256_load_ps(w);
  for (size_t r0 = 0; r0 < m; r0 += 8, a += 8 * lda, c += 8 * ldc, res += 8 * ldc) {
#define NN_ROWS8(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7)
#define NN_ACC(i) __m256 c##i = bias;
    NN_ROWS8(NN_ACC)
#undef NN_ACC
    const float* wp = w + kNr;
    for (size_t p = 0; p < k; ++p, wp += kNr) {
      const __m256 b = _mm256_load_ps(wp);
#define NN_FMA(i) c##i = _mm256_fmadd_ps(_mm256_broadcast_ss(a + i * lda + p), b, c##i);
      NN_ROWS8(NN_FMA)
#undef NN_FMA
    }
#define NN_STORE(i) store_row(c + i * ldc, res + i * ldc, nr, c##i, c##i, epi);
    NN_ROWS8(NN_STORE)
#undef NN_STORE
#undef NN_ROWS8
  }
}

template <int kRows, int kSegments = 0, int kK = 0>
NN_TARGET_AVX2 void kernel_rows_x16(size_t m, size_t nr, size_t segments, const float* const* seg_a,
                                    size_t k, size_t lda, const float* w, float* c, const float* res,
                                    size_t ldc, const EpilogueAvx2& epi) {
  if (epi.hard_swish)
    (epi.residual ? kernel_6x16_t<kRows, true, true, kSegments, kK>
                  : kernel_6x16_t<kRows, true, false, kSegments, kK>)(m, nr, segments, seg_a, k, lda, w, c, res,
                                                                      ldc, epi);
  else
    (epi.residual ? kernel_6x16_t<kRows, false, true, kSegments, kK>
                  : kernel_6x16_t<kRows, false, false, kSegments, kK>)(m, nr, segments, seg_a, k, lda, w, c,
                                                                       res, ldc, epi);
}

NN_TARGET_AVX2 void kernel_8x8(size_t m, size_t nr, const float* a, size_t k, size_t lda, const float* w,
                               float* c, const float* res, size_t ldc, const EpilogueAvx2& epi) {
  (epi.hard_swish ? (epi.residual ? kernel_8x8_t<true, true> : kernel_8x8_t<true, false>)
                  : (epi.residual ? kernel_8x8_t<false, true> : kernel_8x8_t<false, false>))(m, nr, a, k, lda, w,
                                                                                             c, res, ldc, epi);
}

// mr <= 6 rows: 5 or 6 on the 6-row kernel, fewer on the 4-, 2- and 1-row ones.
NN_TARGET_AVX2 void kernel_6x16(size_t mr, size_t nr, size_t segments, const float* const* seg_a, size_t k,
                                size_t lda, const float* w, float* c, const float* res, size_t ldc,
                                const EpilogueAvx2& epi) {
  auto kernel = mr > 4   ? kernel_rows_x16<6>
                : mr > 2 ? kernel_rows_x16<4>
                : mr > 1 ? kernel_rows_x16<2>
                         : kernel_rows_x16<1>;
  kernel(mr, nr, segments, seg_a, k, lda, w, c, res, ldc, epi);
}

// part[kRows x 16] += A[kRows x kc] * W[kc x 16]: one slice of k steps of the k-blocked
// AVX2 GEMM below, the accumulators loaded from and stored back to part (rows 16 floats
// apart, 32-byte aligned), row r of A at a + r * lda; one prefetch into L2 per k step.
#define NN_ROWS6(X) X(0) X(1) X(2) X(3) X(4) X(5)
template <int kRows>
NN_TARGET_AVX2 void kernel_part_avx2(const float* a, size_t lda, size_t kc, const float* wp, float* part,
                                     const float* ahead, size_t ahead_step) {
#define NN_ACC(i)                                          \
  __m256 c##i##0 = _mm256_setzero_ps(), c##i##1 = c##i##0; \
  const float* a##i = a + (i < kRows ? i : 0) * lda;       \
  if constexpr (i < kRows) {                               \
    c##i##0 = _mm256_load_ps(part + i * kNr);              \
    c##i##1 = _mm256_load_ps(part + i * kNr + 8);          \
  }
  NN_ROWS6(NN_ACC)
#undef NN_ACC
  for (size_t p = 0; p < kc; ++p, ahead += ahead_step) {
    _mm_prefetch(reinterpret_cast<const char*>(ahead), _MM_HINT_T1);
    const __m256 b0 = _mm256_load_ps(wp), b1 = _mm256_load_ps(wp + 8);
    wp += kNr;
#define NN_FMA(i)                                    \
  if constexpr (i < kRows) {                         \
    const __m256 va = _mm256_broadcast_ss(a##i + p); \
    c##i##0 = _mm256_fmadd_ps(va, b0, c##i##0);      \
    c##i##1 = _mm256_fmadd_ps(va, b1, c##i##1);      \
  }
    NN_ROWS6(NN_FMA)
#undef NN_FMA
  }
#define NN_STORE(i)                                  \
  if constexpr (i < kRows) {                         \
    _mm256_store_ps(part + i * kNr, c##i##0);        \
    _mm256_store_ps(part + i * kNr + 8, c##i##1);    \
  }
  NN_ROWS6(NN_STORE)
#undef NN_STORE
}
#undef NN_ROWS6

// kernel_6x16's GEMM k-blocked (NativeIsa::avx2_k_blocks), as kernel_blocked_avx512: up to
// 64 rows at a time, the 16-wide panel in slices of epi.k_block steps that every micro-tile
// of those rows runs through (from L1) before the next, the accumulators in a 64 x 16 block
// between slices; each micro-tile prefetches its share of the weights that follow its slice
// (the next slice, or the next panel's first) into L2. Unblocked, every 6-row micro-tile
// streams the whole panel (960 -> 160 on a 7x7 map: 61 KB, more than half of L1, read by
// nine micro-tiles), the first one from L3 or memory. The rows split into micro-tiles of
// near-equal size (49: 4 of 6 and 5 of 5, not 8 of 6 and one of 1, whose two FMA chains
// wait on their latency). Each output is the same FMAs in the same order: the same bits.
NN_TARGET_AVX2 void kernel_blocked_avx2(size_t m, size_t nr, size_t segments, const float* const* seg_a,
                                        size_t k, size_t lda, const float* w, float* c, const float* res,
                                        size_t ldc, const EpilogueAvx2& epi) {
  constexpr size_t kChunk = 64;
  alignas(32) float part[kChunk * kNr];
  using Part = void (*)(const float*, size_t, size_t, const float*, float*, const float*, size_t);
  static constexpr Part kParts[kMr + 1] = {nullptr,
                                           kernel_part_avx2<1>,
                                           kernel_part_avx2<2>,
                                           kernel_part_avx2<3>,
                                           kernel_part_avx2<4>,
                                           kernel_part_avx2<5>,
                                           kernel_part_avx2<6>};
  const size_t slices = (k + epi.k_block - 1) / epi.k_block;
  const size_t chunks = (m + kChunk - 1) / kChunk;
  const __m256 bias0 = _mm256_load_ps(w), bias1 = _mm256_load_ps(w + 8);
  for (size_t chunk = 0, r0 = 0; chunk < chunks; ++chunk) {
    const size_t r1 = m * (chunk + 1) / chunks, rows = r1 - r0;  // chunks of near-equal size
    const size_t tiles = (rows + kMr - 1) / kMr;
    for (size_t i = 0; i < rows; ++i) {
      _mm256_store_ps(part + i * kNr, bias0);
      _mm256_store_ps(part + i * kNr + 8, bias1);
    }
    const float* ws = w + kNr;
    for (size_t seg = 0; seg < segments; ++seg, ws += k * kNr) {
      if (!seg_a[seg]) continue;
      const float* a = seg_a[seg] + r0 * lda;
      for (size_t q = 0; q < slices; ++q) {
        const size_t p0 = k * q / slices, kc = k * (q + 1) / slices - p0;  // slices of near-equal length
        const float* wq = ws + p0 * kNr;
        const float* ahead = wq + kc * kNr;
        const size_t step = (kNr + tiles - 1) / tiles;
        for (size_t t = 0; t < tiles; ++t) {
          const size_t r = rows * t / tiles, n = rows * (t + 1) / tiles - r;
          kParts[n](a + r * lda + p0, lda, kc, wq, part + r * kNr, ahead, step);
          ahead += kc * step;
        }
      }
    }
    for (size_t i = 0; i < rows; ++i) {
      const size_t at = (r0 + i) * ldc;
      store_row(c + at, res + at, nr, _mm256_load_ps(part + i * kNr), _mm256_load_ps(part + i * kNr + 8), epi);
    }
    r0 = r1;
  }
}

// The AVX-512F micro-kernel: 8 rows x 16 * kVecs columns on weight panels as wide, kVecs
// zmm accumulators per row. kVecs 2 (32 columns, 16 accumulators): per k step two 64-byte
// weight loads and 8 broadcasts feed 16 FMAs; kVecs 1 for convs of 16 output channels or
// fewer, which a 32-wide panel would half waste. Tails in nr are k-masked: AVX-512 masked
// loads and stores are plain instructions, unlike AVX2's microcoded vmaskmovps on AMD.
// Rows past mr read the last valid row and are not stored.
//
// With one segment (a plain GEMM: 1x1 convs and im2col rows) it takes any number of rows
// m and walks them kRows at a time in one call (the epilogue's registers and the call are
// paid once per panel). With several segments (implicit GEMM) m is at most 8. kRows 4, 2
// and 1 serve the last rows of a GEMM whose m is no multiple of 8, where 8 rows would
// cost 8 (a 7x7 image's 49 pixels: 56 rows' work, 14% more).
//
// kCols 16 on a 32-wide panel: a last panel of at most 16 valid columns (LR-ASPP's 80, 112
// and 240 channels) computes only its lower half. (A zmm + ymm kernel for 24 columns was
// slower on Zen 4 than the whole 32 on MobileNetV2's 24-channel projections: bench/README.md.)
//
// kSegments / kK nonzero: the segments and their length as constants, the loops unrolled
// into straight FMAs, for a 3x3 conv on 3 channels (every stem here: 3 runs of 9 k steps,
// too short for the loops to pay for themselves; the selfie stem 0.214 -> ~0.195 ms).
#define NN_ROWS8(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7)
template <int kVecs, bool kHardSwish, bool kResidual, size_t kRows = 8, int kCols = 16 * kVecs,
          int kSegments = 0, int kK = 0>
NN_TARGET_AVX512 void kernel_8xn_avx512_t(size_t m, size_t nr, size_t runtime_segments,
                                          const float* const* seg_a, size_t runtime_k, size_t lda,
                                          const float* w, float* c, const float* res, size_t ldc,
                                          const EpilogueAvx512& shared_epi) {
  const size_t segments = kSegments ? size_t(kSegments) : runtime_segments;
  const size_t k = kK ? size_t(kK) : runtime_k;
  constexpr size_t kWidth = 16 * kVecs;
  EpilogueAvx512 epi = shared_epi;
  epi.hard_swish = kHardSwish;
  epi.residual = kResidual;
  const auto mask_of = [](size_t n) NN_INLINE_LAMBDA {
    return n >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << n) - 1);
  };
  const __mmask16 lo_lanes = mask_of(nr), hi_lanes = nr > 16 ? mask_of(nr - 16) : __mmask16(0);
  const __m512 bias_lo = _mm512_load_ps(w), bias_hi = kVecs == 2 ? _mm512_load_ps(w + 16) : bias_lo;
  for (size_t r0 = 0; r0 < m; r0 += kRows, c += kRows * ldc, res += kRows * ldc) {
    const size_t mr = std::min<size_t>(kRows, m - r0);
#define NN_ACC(i) __m512 c##i##l = bias_lo, c##i##h = bias_hi;
    NN_ROWS8(NN_ACC)
#undef NN_ACC
    const float* wp = w + kWidth;
#pragma GCC unroll 4
    for (size_t seg = 0; seg < segments; ++seg) {
      if (!seg_a[seg]) {
        wp += k * kWidth;
        continue;
      }
      const float* a0 = seg_a[seg] + r0 * lda;
      const float* a1 = mr > 1 ? a0 + lda : a0;
      const float* a2 = mr > 2 ? a1 + lda : a1;
      const float* a3 = mr > 3 ? a2 + lda : a2;
      const float* a4 = mr > 4 ? a3 + lda : a3;
      const float* a5 = mr > 5 ? a4 + lda : a4;
      const float* a6 = mr > 6 ? a5 + lda : a5;
      const float* a7 = mr > 7 ? a6 + lda : a6;
      // One k step: the weight loads feed the rows' FMAs (a macro: a lambda would not
      // inherit the AVX-512 target).
#define NN_FMA(i)                                                          \
  if constexpr (i < kRows) {                                               \
    const __m512 va = _mm512_set1_ps(a##i[p]);                             \
    c##i##l = _mm512_fmadd_ps(va, b0, c##i##l);                            \
    if constexpr (kCols == 32) c##i##h = _mm512_fmadd_ps(va, b1, c##i##h); \
  }
#define NN_K_STEP                                                \
  {                                                              \
    const __m512 b0 = _mm512_load_ps(wp);                        \
    const __m512 b1 = kVecs == 2 ? _mm512_load_ps(wp + 16) : b0; \
    wp += kWidth;                                                \
    NN_ROWS8(NN_FMA)                                             \
  }
      if constexpr (kK > 0) {
#pragma GCC unroll 16
        for (int p = 0; p < kK; ++p) NN_K_STEP
      } else {
        for (size_t p = 0; p < k; ++p) NN_K_STEP
      }
#undef NN_K_STEP
#undef NN_FMA
    }
    // Rows are stored only below mr: with a residual read in place, a row stored twice
    // would add it twice. The upper half only where nr reaches it.
#define NN_STORE(i)                                                                      \
  if (i < kRows && i < mr) {                                                             \
    float* out = c + i * ldc;                                                            \
    const float* rr = res + i * ldc;                                                     \
    const __m512 rl = kResidual ? _mm512_maskz_loadu_ps(lo_lanes, rr) : epi.zero;        \
    if (lo_lanes == 0xFFFF)                                                              \
      _mm512_storeu_ps(out, epi(c##i##l, rl));                                           \
    else                                                                                 \
      _mm512_mask_storeu_ps(out, lo_lanes, epi(c##i##l, rl));                            \
    if (kCols > 16 && hi_lanes) {                                                        \
      const __m512 rh = kResidual ? _mm512_maskz_loadu_ps(hi_lanes, rr + 16) : epi.zero; \
      if (hi_lanes == 0xFFFF)                                                            \
        _mm512_storeu_ps(out + 16, epi(c##i##h, rh));                                    \
      else                                                                               \
        _mm512_mask_storeu_ps(out + 16, hi_lanes, epi(c##i##h, rh));                     \
    }                                                                                    \
  }
    NN_ROWS8(NN_STORE)
#undef NN_STORE
  }
}

template <int kVecs, size_t kRows, int kCols, int kSegments = 0, int kK = 0>
NN_TARGET_AVX512 void kernel_cols_avx512(size_t m, size_t nr, size_t segments, const float* const* seg_a,
                                         size_t k, size_t lda, const float* w, float* c, const float* res,
                                         size_t ldc, const EpilogueAvx512& epi) {
  if (epi.hard_swish)
    (epi.residual ? kernel_8xn_avx512_t<kVecs, true, true, kRows, kCols, kSegments, kK>
                  : kernel_8xn_avx512_t<kVecs, true, false, kRows, kCols, kSegments, kK>)(m, nr, segments,
                                                                                          seg_a, k, lda, w, c,
                                                                                          res, ldc, epi);
  else
    (epi.residual ? kernel_8xn_avx512_t<kVecs, false, true, kRows, kCols, kSegments, kK>
                  : kernel_8xn_avx512_t<kVecs, false, false, kRows, kCols, kSegments, kK>)(m, nr, segments,
                                                                                           seg_a, k, lda, w,
                                                                                           c, res, ldc, epi);
}

// A 32-wide panel with 17-24 valid columns (the 24-channel projections of MobileNets and
// the selfie models) or 1-8 (the last 8 of 40, 72 or 200 channels), one segment: 8 rows x
// 8 * kYmm columns in ymm accumulators (kYmm 3 or 1), reading the panel's first columns.
// Only where AVX-512 runs on 256-bit halves (Zen 4: a zmm FMA costs two ymm ones, so 24
// ymm columns cost 3/4 of 32 zmm ones and 8 half of the 16 a half panel computes;
// avx512_half_width()). There 8 rows x 24 is faster on selfie's two 24-channel projections;
// a zmm + ymm form had been slower (bench/README.md). m: a multiple of 8.
template <int kYmm, bool kHardSwish, bool kResidual>
__attribute__((target("avx512f,avx512vl,avx2,fma"))) void kernel_8xy_ymm_t(
    size_t m, size_t nr, const float* a, size_t k, size_t lda, const float* w, float* c, const float* res,
    size_t ldc, const EpilogueAvx2& shared_epi) {
  static_assert(kYmm == 1 || kYmm == 3);
  EpilogueAvx2 epi = shared_epi;
  epi.hard_swish = kHardSwish;
  epi.residual = kResidual;
  const size_t full = 8 * (kYmm - 1);  // columns before the last (masked) vector
  const __mmask8 last = nr >= full + 8 ? __mmask8(0xFF) : __mmask8((1u << (nr - full)) - 1);
  const __m256 bias0 = _mm256_load_ps(w);
  const __m256 bias1 = kYmm == 3 ? _mm256_load_ps(w + 8) : bias0,
               bias2 = kYmm == 3 ? _mm256_load_ps(w + 16) : bias0;
  for (size_t r0 = 0; r0 < m; r0 += 8, a += 8 * lda, c += 8 * ldc, res += 8 * ldc) {
#define NN_ACC(i) __m256 c##i##0 = bias0, c##i##1 = bias1, c##i##2 = bias2;
    NN_ROWS8(NN_ACC)
#undef NN_ACC
    const float* wp = w + 32;
    for (size_t p = 0; p < k; ++p, wp += 32) {
      const __m256 w0 = _mm256_load_ps(wp);
      const __m256 w1 = kYmm == 3 ? _mm256_load_ps(wp + 8) : w0,
                   w2 = kYmm == 3 ? _mm256_load_ps(wp + 16) : w0;
#define NN_FMA(i)                                           \
  {                                                         \
    const __m256 va = _mm256_broadcast_ss(a + i * lda + p); \
    c##i##0 = _mm256_fmadd_ps(va, w0, c##i##0);             \
    if constexpr (kYmm == 3) {                              \
      c##i##1 = _mm256_fmadd_ps(va, w1, c##i##1);           \
      c##i##2 = _mm256_fmadd_ps(va, w2, c##i##2);           \
    }                                                       \
  }
      NN_ROWS8(NN_FMA)
#undef NN_FMA
    }
#define NN_STORE(i)                                                                            \
  {                                                                                            \
    float* out = c + i * ldc;                                                                  \
    const float* rr = res + i * ldc;                                                           \
    if constexpr (kYmm == 3) {                                                                 \
      _mm256_storeu_ps(out, epi(c##i##0, kResidual ? _mm256_loadu_ps(rr) : epi.zero));         \
      _mm256_storeu_ps(out + 8, epi(c##i##1, kResidual ? _mm256_loadu_ps(rr + 8) : epi.zero)); \
    }                                                                                          \
    const __m256 tail = kYmm == 3 ? c##i##2 : c##i##0;                                         \
    const __m256 rt = kResidual ? _mm256_maskz_loadu_ps(last, rr + full) : epi.zero;           \
    _mm256_mask_storeu_ps(out + full, last, epi(tail, rt));                                    \
  }
    NN_ROWS8(NN_STORE)
#undef NN_STORE
  }
}
#undef NN_ROWS8

// part[kRows x kCols] += A[kRows x kc] * W[kc x kCols]: one slice of k steps of the
// k-blocked GEMM below, the accumulators loaded from and stored back to part (rows kWidth
// = 16 * kVecs floats apart, 64-byte aligned), row r of A at a + r * lda.
#define NN_ROWS8(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7)
template <int kVecs, size_t kRows, int kCols>
NN_TARGET_AVX512 void kernel_part_avx512(const float* a, size_t lda, size_t kc, const float* wp, float* part,
                                         const float* ahead, size_t ahead_step) {
  constexpr size_t kWidth = 16 * kVecs;
#define NN_ACC(i)                                                 \
  __m512 c##i##l = _mm512_setzero_ps(), c##i##h = c##i##l;        \
  const float* a##i = a + (i < kRows ? i : 0) * lda;              \
  if constexpr (i < kRows) {                                      \
    c##i##l = _mm512_load_ps(part + i * kWidth);                  \
    if constexpr (kCols == 32) c##i##h = _mm512_load_ps(part + i * kWidth + 16); \
  }
  NN_ROWS8(NN_ACC)
#undef NN_ACC
#define NN_FMA(i)                                                          \
  if constexpr (i < kRows) {                                               \
    const __m512 va = _mm512_set1_ps(a##i[p]);                             \
    c##i##l = _mm512_fmadd_ps(va, b0, c##i##l);                            \
    if constexpr (kCols == 32) c##i##h = _mm512_fmadd_ps(va, b1, c##i##h); \
  }
  for (size_t p = 0; p < kc; ++p, ahead += ahead_step) {
    _mm_prefetch(reinterpret_cast<const char*>(ahead), _MM_HINT_T1);
    const __m512 b0 = _mm512_load_ps(wp);
    const __m512 b1 = kCols == 32 ? _mm512_load_ps(wp + 16) : b0;
    wp += kWidth;
    NN_ROWS8(NN_FMA)
  }
#undef NN_FMA
#define NN_STORE(i)                                                               \
  if constexpr (i < kRows) {                                                      \
    _mm512_store_ps(part + i * kWidth, c##i##l);                                  \
    if constexpr (kCols == 32) _mm512_store_ps(part + i * kWidth + 16, c##i##h); \
  }
  NN_ROWS8(NN_STORE)
#undef NN_STORE
}
#undef NN_ROWS8

// The GEMM of kernel_8xn_avx512 k-blocked (NativeIsa::k_blocks): up to 64 rows at a time,
// the panel's weights in slices of epi.k_block steps (sized to stay in L1 beside the rows'
// slices of A) that every micro-tile of those rows runs through before the next slice,
// the accumulators kept in a 64 x 32 block in L1 between slices. Unblocked, each 8-row
// micro-tile streams the whole panel (128 bytes a k step) from L2 or beyond, which on a
// core with a slower L2 leaves the FMAs waiting on the weight loads (7x7 maps: 49 rows,
// seven passes over panels of up to 590 KB). Each output is the same FMAs in the same
// order as unblocked: the same bits.
template <int kVecs>
NN_TARGET_AVX512 void kernel_blocked_avx512(size_t m, size_t nr, size_t segments, const float* const* seg_a,
                                            size_t k, size_t lda, const float* w, float* c, const float* res,
                                            size_t ldc, const EpilogueAvx512& epi) {
  constexpr size_t kWidth = 16 * kVecs, kChunk = 64;
  alignas(64) float part[kChunk * kWidth];
  // A 32-wide panel with at most 16 valid columns computes its lower half only.
  const bool lower = kVecs == 2 && nr <= 16;
  using Part = void (*)(const float*, size_t, size_t, const float*, float*, const float*, size_t);
  const Part p8 = lower ? kernel_part_avx512<kVecs, 8, 16> : kernel_part_avx512<kVecs, 8, 16 * kVecs>;
  const Part p4 = lower ? kernel_part_avx512<kVecs, 4, 16> : kernel_part_avx512<kVecs, 4, 16 * kVecs>;
  const Part p2 = lower ? kernel_part_avx512<kVecs, 2, 16> : kernel_part_avx512<kVecs, 2, 16 * kVecs>;
  const Part p1 = lower ? kernel_part_avx512<kVecs, 1, 16> : kernel_part_avx512<kVecs, 1, 16 * kVecs>;
  const size_t slices = (k + epi.k_block - 1) / epi.k_block;
  const auto mask_of = [](size_t n) NN_INLINE_LAMBDA {
    return n >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << n) - 1);
  };
  const __mmask16 lo_lanes = mask_of(nr), hi_lanes = nr > 16 ? mask_of(nr - 16) : __mmask16(0);
  for (size_t r0 = 0; r0 < m; r0 += kChunk, c += kChunk * ldc, res += kChunk * ldc) {
    const size_t rows = std::min(kChunk, m - r0);
    const size_t tiles = rows / 8 + (rows % 8 >= 4) + (rows % 4 >= 2) + (rows % 2);  // micro-tiles per slice
    const __m512 bias_lo = _mm512_load_ps(w), bias_hi = kVecs == 2 ? _mm512_load_ps(w + 16) : bias_lo;
    for (size_t i = 0; i < rows; ++i) {
      _mm512_store_ps(part + i * kWidth, bias_lo);
      if (kVecs == 2) _mm512_store_ps(part + i * kWidth + 16, bias_hi);
    }
    const float* ws = w + kWidth;
    for (size_t seg = 0; seg < segments; ++seg, ws += k * kWidth) {
      if (!seg_a[seg]) continue;
      const float* a = seg_a[seg] + r0 * lda;
      for (size_t q = 0; q < slices; ++q) {
        // Slices of near-equal length.
        const size_t p0 = k * q / slices, kc = k * (q + 1) / slices - p0;
        // While the micro-tiles run through this slice, the weights that follow it (the next
        // slice, or the next panel's first: panels are contiguous) are fetched into L2, a
        // share per micro-tile: first touched, they come from L3 or memory, which the FMAs
        // would otherwise wait on (a 7x7 map's panels are read by few rows).
        const float* wq = ws + p0 * kWidth;
        const float* ahead = wq + kc * kWidth;
        const size_t step = (kWidth + tiles - 1) / tiles;
        size_t r = 0;
        auto run = [&](Part fn, size_t n) NN_INLINE_LAMBDA {
          fn(a + r * lda + p0, lda, kc, wq, part + r * kWidth, ahead, step);
          ahead += kc * step;
          r += n;
        };
        while (r + 8 <= rows) run(p8, 8);
        if (rows - r >= 4) run(p4, 4);
        if (rows - r >= 2) run(p2, 2);
        if (rows - r >= 1) run(p1, 1);
      }
    }
    for (size_t i = 0; i < rows; ++i) {
      float* out = c + i * ldc;
      const float* rr = res + i * ldc;
      const __m512 rl = epi.residual ? _mm512_maskz_loadu_ps(lo_lanes, rr) : epi.zero;
      _mm512_mask_storeu_ps(out, lo_lanes, epi(_mm512_load_ps(part + i * kWidth), rl));
      if (kVecs == 2 && hi_lanes) {
        const __m512 rh = epi.residual ? _mm512_maskz_loadu_ps(hi_lanes, rr + 16) : epi.zero;
        _mm512_mask_storeu_ps(out + 16, hi_lanes, epi(_mm512_load_ps(part + i * kWidth + 16), rh));
      }
    }
  }
}

// m rows: the multiple of 8 on the 8-row kernel (on a 32-wide panel whose valid columns
// fit in 16, its lower half only), the rest on the 4-, 2- and 1-row ones.
template <int kVecs>
NN_TARGET_AVX512 void kernel_8xn_avx512(size_t m, size_t nr, size_t segments, const float* const* seg_a,
                                        size_t k, size_t lda, const float* w, float* c, const float* res,
                                        size_t ldc, const EpilogueAvx512& epi) {
  // k-blocked where at least two micro-tiles share each slice of weights.
  if (epi.k_block && m >= 16 && segments * k > epi.k_block)
    return kernel_blocked_avx512<kVecs>(m, nr, segments, seg_a, k, lda, w, c, res, ldc, epi);
  const size_t full = m / 8 * 8;
  if (full && segments == 3 && k == 9)  // a 3x3 conv on 3 channels: a stem
    kernel_cols_avx512<kVecs, 8, 16 * kVecs, 3, 9>(full, nr, segments, seg_a, k, lda, w, c, res, ldc, epi);
  else if (full && kVecs == 2 && nr <= 16)
    kernel_cols_avx512<kVecs, 8, 16>(full, nr, segments, seg_a, k, lda, w, c, res, ldc, epi);
  else if (full)
    kernel_cols_avx512<kVecs, 8, 16 * kVecs>(full, nr, segments, seg_a, k, lda, w, c, res, ldc, epi);
  if (full == m) return;  // most calls (implicit GEMM tiles): no tail to set up
  size_t r0 = full;
  const float* tail[16];  // the segments' runs from row r0 (implicit GEMM: at most kernel_h <= 16)
  auto rest = [&](size_t rows, auto kernel) NN_INLINE_LAMBDA {
    if (m - r0 < rows) return;
    for (size_t s = 0; s < segments; ++s) tail[s] = seg_a[s] ? seg_a[s] + r0 * lda : nullptr;
    kernel(rows, nr, segments, tail, k, lda, w, c + r0 * ldc, res + r0 * ldc, ldc, epi);
    r0 += rows;
  };
  rest(4, kernel_cols_avx512<kVecs, 4, 16 * kVecs>);
  rest(2, kernel_cols_avx512<kVecs, 2, 16 * kVecs>);
  rest(1, kernel_cols_avx512<kVecs, 1, 16 * kVecs>);
}

#else

struct EpilogueAvx2 {
  explicit EpilogueAvx2(const Epilogue& e) : e(e) {}
  Epilogue e;
  bool eight_columns = false;
  size_t k_block = 0;
};

void kernel_6x16(size_t mr, size_t nr, size_t segments, const float* const* seg_a, size_t k, size_t lda,
                 const float* w, float* c, const float* res, size_t ldc, const EpilogueAvx2& epi) {
  for (size_t r = 0; r < mr; ++r)
    for (size_t n = 0; n < nr; ++n) {
      float acc = w[n];
      for (size_t s = 0; s < segments; ++s)
        if (seg_a[s])
          for (size_t p = 0; p < k; ++p) acc += seg_a[s][r * lda + p] * w[kNr + (s * k + p) * kNr + n];
      c[r * ldc + n] = apply_epilogue(epi.e, acc, epi.e.residual ? res[r * ldc + n] : 0.f);
    }
}

void kernel_8x8(size_t m, size_t nr, const float* a, size_t k, size_t lda, const float* w, float* c,
                const float* res, size_t ldc, const EpilogueAvx2& epi) {
  kernel_6x16(m, nr, 1, &a, k, lda, w, c, res, ldc, epi);
}

#endif

}  // namespace

void for_each_row(pthreadpool_t pool, size_t rows, void (*body)(void*, size_t), void* ctx) {
  if (!pool) {
    for (size_t r = 0; r < rows; ++r) body(ctx, r);
    return;
  }
  pthreadpool_parallelize_1d(pool, body, ctx, rows, 0);
}

AlignedFloats allocate_floats(size_t count) {
  const size_t bytes = (count * sizeof(float) + 63) / 64 * 64;
  float* p = static_cast<float*>(std::aligned_alloc(64, bytes ? bytes : 64));
  if (p) std::memset(p, 0, bytes ? bytes : 64);
  return AlignedFloats(p, free_aligned);
}

size_t l1d_bytes() {
  static const size_t bytes = [] {
    const cpuinfo_cache* l1d = cpuinfo_initialize() ? cpuinfo_get_l1d_cache(0) : nullptr;
    return l1d && l1d->size >= (size_t(16) << 10) ? size_t(l1d->size) : size_t(32) << 10;
  }();
  return bytes;
}

size_t l2_bytes() {
  static const size_t bytes = [] {
    const cpuinfo_cache* l2 = cpuinfo_initialize() ? cpuinfo_get_l2_cache(0) : nullptr;
    return l2 && l2->size >= (size_t(64) << 10) ? size_t(l2->size) : size_t(256) << 10;
  }();
  return bytes;
}

bool native_conv_supported() {
#if NN_NATIVE_X86
  static const bool ok = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return ok;
#else
  return false;
#endif
}

NativeConv::NativeConv(const NativeConvShape& shape, const float* filter, const float* bias,
                       const Epilogue& epilogue, const NativeIsa& isa)
    : shape_(shape), epilogue_(epilogue) {
  const uint32_t groups = std::max<uint32_t>(1, shape.groups);
  group_in_ = shape.in_c / groups;
  group_out_ = shape.out_c / groups;
  pointwise_ = shape.kernel_h == 1 && shape.kernel_w == 1 && shape.stride_h == 1 && shape.stride_w == 1 &&
               shape.pad_top == 0 && shape.pad_left == 0 && shape.out_h == shape.in_h &&
               shape.out_w == shape.in_w;
  k_ = size_t(shape.kernel_h) * shape.kernel_w * group_in_;
  // Implicit GEMM: one run of A per kernel row when its taps are contiguous in the input
  // (dilation_w 1, not grouped), else one per tap (FCN's dilated 3x3 convs had gone through
  // im2col; a group's channels are a run of group_in_ within each input pixel).
  taps_w_ = shape.dilation_w == 1 && groups == 1 ? 1 : shape.kernel_w;
  segments_ = size_t(shape.kernel_h) * taps_w_ <= 16 ? size_t(shape.kernel_h) * taps_w_ : 0;
  // A grouped conv reads every tile through per-tap runs (in place or of its im2col rows).
  if (groups > 1 && (segments_ == 0 || shape.in_c % groups || shape.out_c % groups)) return;
  avx512_ = isa.avx512;
  // A group's last 16-wide AVX2 panel with 1-8 valid columns runs on the 8x8 kernel.
  avx2_8_columns_ = isa.avx2_8_columns && !avx512_ && group_out_ % kNr != 0 && group_out_ % kNr <= 8;
  // Edge micro-tiles read zero-padded copies of their input rows (run_tile) where those fit
  // in the tile's im2col space: the columns a tile's windows span, at most its pixels' taps.
  const size_t tile_rows = avx512_ ? 8 : 6;
  const size_t reach = size_t(shape.kernel_w - 1) * shape.dilation_w + 1;
  strips_ = groups == 1 && segments_ > 0 && (tile_rows - 1) * shape.stride_w + reach <= tile_rows * shape.kernel_w;
  small_image_rows_ = isa.small_image_rows;
  k_block_rows_ = isa.k_block_rows;
  gated_rows_ = isa.gated_rows;
  serial_row_tiles_ = isa.serial_row_tiles;
  // Edge tiles of a dilated conv that strips do not take (all of them without strips,
  // those across an output row with) run tap by tap where each tap is a run (taps_w_ =
  // kernel_w) and a run of a tile's pixels is contiguous (stride 1). Not grouped convs:
  // their 1-pixel borders leave little to skip, and the per-tap copies of all channels
  // cost more than the im2col rows (regnet_x_400mf's 22 grouped convs 2.0 -> 2.2 ms).
  edge_taps_ = isa.edge_taps && groups == 1 && segments_ > 0 && taps_w_ == shape.kernel_w && shape.stride_w == 1 &&
               (shape.dilation_w > 1 || shape.dilation_h > 1);
  // 32-wide panels only where a conv (group) has more than 16 output channels (else half empty).
  wide_ = avx512_ && group_out_ > 16;
  // The ymm kernels for 17-24 and 1-8 columns only pay where a zmm FMA costs two ymm ones,
  // and only convs whose last panel has that many columns use them.
  const size_t last_panel = group_out_ % 32;
  half_width_ = wide_ && ((last_panel > 16 && last_panel <= 24) || (last_panel > 0 && last_panel <= 8)) &&
                isa.half_width;
  // Weight panels as wide as the kernel's tile, group by group: per panel its bias, then k
  // rows of width.
  const size_t width = wide_ ? kNr512 : kNr;
  // k-blocked (AVX-512): where a panel outgrows half of L1, slices of it that fit there.
  if (avx512_ && isa.k_blocks) {
    const size_t slice = std::max<size_t>(64, l1d_bytes() / 2 / (width * sizeof(float)));
    if (k_ > slice) k_block_ = slice;
  }
  // AVX2 the same, on its 16-wide panels (k > 384 on a 48 KB L1, 256 on 32 KB).
  const size_t m_total = size_t(shape.batch) * shape.out_h * shape.out_w;
  if (!avx512_ && isa.avx2_k_blocks) {
    const size_t slice = std::max<size_t>(64, l1d_bytes() / 2 / (width * sizeof(float)));
    if (k_ > slice) k_block_ = slice;
    // Shallower panels in one slice where a 1x1 conv's weights come from beyond L2 and few
    // rows read them (a map of one 64-row chunk, at least two micro-tiles: the blocked
    // kernel's): its prefetch of the next panel into L2 and its even micro-tiles (49 rows:
    // 4 of 6 and 5 of 5) took MNASNet's 7x7 192 -> 1152 convs from ~82 to ~97 GFLOP/s on
    // Zen 4. Not where the weights stay in cache: the row convs of an expansion fused with
    // its depthwise conv (56 pixels, 24 -> 72) ran slower so.
    if (!k_block_ && pointwise_ && groups == 1 && m_total >= 2 * kMr && m_total <= 64 &&
        k_ * shape.out_c * sizeof(float) > l2_bytes() / 2)
      k_block_ = k_;
  }
  // A small image (fewer than 5 row tiles: 7x7 to 17x17) of a k-blocked conv: its tiles, each up to 8
  // rows read in place or from edge strips (its rows cross output rows every few tiles, so
  // a third or more were im2col rows anyway), are each too short for the k-blocked kernel
  // and stream every panel once per tile; as im2col rows, built once, they are one call
  // whose 64-row chunks run through each slice.
  im2col_once_ = isa.small_image_im2col && k_block_ && !pointwise_ && groups == 1 && !edge_taps_ &&
                 m_total < tile_rows * 8 * 5 && m_total * k_ * sizeof(float) <= (size_t(2) << 20);
  group_panels_ = (group_out_ + width - 1) / width;
  n_blocks_ = groups * group_panels_;
  const size_t panel = width * (k_ + 1);
  AlignedFloats packed = allocate_floats(n_blocks_ * panel);
  if (!packed) return;
  float* p = packed.get();
  for (size_t j = 0; j < n_blocks_; ++j) {
    float* dst = p + j * panel;
    const auto [first, columns] = panel_columns(j, width);
    for (size_t c = 0; c < columns; ++c) {
      const size_t n = first + c;
      dst[c] = bias ? bias[n] : 0.f;
      for (size_t q = 0; q < k_; ++q) dst[width + q * width + c] = filter[n * k_ + q];
    }
  }
  packed_ = std::move(packed);
}

struct NativeConv::Task {
  const NativeConv* conv;
  const float* input;
  const float* residual;
  float* output;
  const float* weights;  // packed_, or the gated copy in the scratch
  // A scaled input gated per tile (pointwise only): the A matrix is input * gate (+ sum), gate
  // one value per input channel, built per tile in cache. Both null otherwise; sum may be null.
  const float* gate;
  const float* sum;
  bool im2col_all = false;  // every micro-tile through im2col rows (im2col_once)
};

namespace {

// Copies n floats (the receptive field's row, often 9 or 48 floats: too short for memcpy's
// call to pay off).
#if NN_NATIVE_X86
// dst may be overwritten up to the next multiple of 8 floats (im2col rows are written in
// order into a scratch buffer with 8 floats of slack); src is read only within n.
NN_INLINE_AVX2 void copy_floats(float* dst, const float* src, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(dst + i, _mm256_loadu_ps(src + i));
  if (i < n) _mm256_storeu_ps(dst + i, _mm256_maskload_ps(src + i, lane_mask(n - i)));
}
#else
inline void copy_floats(float* dst, const float* src, size_t n) {
  std::memcpy(dst, src, n * sizeof(float));
}
#endif

// out = x * gate + sum over `rows` rows of c channels, gate one value per channel; x * gate
// where sum is null.
#if NN_NATIVE_X86
NN_TARGET_AVX2 void gate_and_add(float* out, const float* x, const float* gate, const float* sum, size_t rows,
                                 size_t c) {
  if (!sum) {
    // Products below FLT_MIN are flushed to zero: a logistic gate near 0 makes denormal
    // inputs, and every FMA reading one takes a microcode assist.
    const __m256 tiny = _mm256_set1_ps(FLT_MIN), abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    for (size_t r = 0; r < rows; ++r, out += c, x += c) {
      size_t i = 0;
      for (; i + 8 <= c; i += 8) {
        const __m256 p = _mm256_mul_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(gate + i));
        _mm256_storeu_ps(out + i, _mm256_and_ps(p, _mm256_cmp_ps(_mm256_and_ps(p, abs_mask), tiny, _CMP_GE_OQ)));
      }
      for (; i < c; ++i) {
        const float p = x[i] * gate[i];
        out[i] = std::fabs(p) < FLT_MIN ? 0.f : p;
      }
    }
    return;
  }
  for (size_t r = 0; r < rows; ++r, out += c, x += c, sum += c) {
    size_t i = 0;
    for (; i + 8 <= c; i += 8)
      _mm256_storeu_ps(out + i, _mm256_fmadd_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(gate + i),
                                                _mm256_loadu_ps(sum + i)));
    for (; i < c; ++i) out[i] = std::fma(x[i], gate[i], sum[i]);
  }
}
#else
void gate_and_add(float* out, const float* x, const float* gate, const float* sum, size_t rows, size_t c) {
  for (size_t r = 0; r < rows; ++r, out += c, x += c, sum += sum ? c : 0)
    for (size_t i = 0; i < c; ++i) {
      const float p = x[i] * gate[i];
      out[i] = sum ? std::fma(x[i], gate[i], sum[i]) : std::fabs(p) < FLT_MIN ? 0.f : p;
    }
}
#endif

// Builds the im2col rows [m0, m0 + count) of a conv: each row the receptive field of one
// output pixel in (ky, kx, c) order, zeros where it falls in the padding. Only channels
// [c0, c0 + c_count) where c_count is given (a grouped conv's tile reads only its panels'
// groups: the rows had held every channel, copied again by every tile of other panels).
NN_TARGET_AVX2 void im2col_rows(const NativeConvShape& s, const float* input, size_t m0, size_t count,
                                float* rows, size_t c0 = 0, size_t c_count = 0) {
  const uint32_t in_c = s.in_c;
  const size_t c_n = c_count ? c_count : in_c;
  const size_t k = size_t(s.kernel_h) * s.kernel_w * c_n;
  const size_t pixels = size_t(s.out_h) * s.out_w;
  // One kernel row, contiguous when dilation_w == 1 and every channel is taken.
  const size_t span = c_n == in_c ? size_t(s.kernel_w) * in_c : 0;
  input += c0;
  // Output coordinates advance with the row: one division for the first row only.
  size_t b = m0 / pixels;
  size_t oy = (m0 % pixels) / s.out_w, ox = (m0 % pixels) % s.out_w;
  for (size_t r = 0; r < count; ++r) {
    float* dst = rows + r * k;
    const float* image = input + b * size_t(s.in_h) * s.in_w * in_c;
    const int64_t y0 = int64_t(oy) * s.stride_h - s.pad_top, x0 = int64_t(ox) * s.stride_w - s.pad_left;
    const bool cols_inside =
        span && s.dilation_w == 1 && x0 >= 0 && x0 + int64_t(s.kernel_w) <= int64_t(s.in_w);
    for (uint32_t ky = 0; ky < s.kernel_h; ++ky) {
      const int64_t iy = y0 + int64_t(ky) * s.dilation_h;
      const bool row_inside = iy >= 0 && iy < s.in_h;
      if (row_inside && cols_inside) {
        copy_floats(dst, image + (size_t(iy) * s.in_w + size_t(x0)) * in_c, span);
        dst += span;
        continue;
      }
      for (uint32_t kx = 0; kx < s.kernel_w; ++kx, dst += c_n) {
        const int64_t ix = x0 + int64_t(kx) * s.dilation_w;
        if (!row_inside || ix < 0 || ix >= s.in_w) {
          std::memset(dst, 0, c_n * sizeof(float));
        } else {
          copy_floats(dst, image + (size_t(iy) * s.in_w + size_t(ix)) * in_c, c_n);
        }
      }
    }
    if (++ox == s.out_w) {
      ox = 0;
      if (++oy == s.out_h) oy = 0, ++b;
    }
  }
}

}  // namespace

namespace {

// The micro-kernel an ISA brings: rows per tile, its epilogue's register form, the call.
// kernel(m, ...): m rows of C; m may exceed kRows only with one segment (a plain GEMM).
struct Avx2Gemm {
  static constexpr size_t kRows = kMr;
  static constexpr size_t kPanel = kNr;
  using Epi = EpilogueAvx2;
  static void set_flags(Epi& epi, bool eight_columns, size_t k_block) {
    epi.eight_columns = eight_columns;
    epi.k_block = k_block;
  }
  static void kernel(size_t m, size_t nr, size_t segments, const float* const* seg_a, size_t k, size_t lda,
                     const float* w, float* c, const float* res, size_t ldc, const Epi& epi) {
    const float* rows[16];  // each segment's run at row r (implicit GEMM: m <= kRows, r = 0)
    if (epi.eight_columns && nr <= 8 && segments == 1 && seg_a[0] && m >= 8) {
      // A panel of at most 8 valid columns: its multiple of 8 rows on the 8x8 kernel.
      const size_t full = m / 8 * 8;
      kernel_8x8(full, nr, seg_a[0], k, lda, w, c, res, ldc, epi);
      if (full == m) return;
      const float* tail = seg_a[0] + full * lda;
      return kernel(m - full, nr, 1, &tail, k, lda, w, c + full * ldc, res + full * ldc, ldc, epi);
    }
#if NN_NATIVE_X86
    // k-blocked where at least two micro-tiles share each slice of weights.
    if (epi.k_block && m >= 2 * kRows)
      return kernel_blocked_avx2(m, nr, segments, seg_a, k, lda, w, c, res, ldc, epi);
#endif
    size_t r = 0;
#if NN_NATIVE_X86
    // The full 6-row tiles in one call, which walks them with the bias and epilogue
    // constants in registers: a call per tile (its dispatch, a copy of the epilogue's eight
    // vectors) weighed on convs of short k such as selfie's 16 -> 16. A 3x3 conv on 3 channels (a stem) with
    // its segments and k as constants.
    if (m >= kRows) {
      r = m / kRows * kRows;
      (segments == 3 && k == 9 ? kernel_rows_x16<kRows, 3, 9> : kernel_rows_x16<kRows>)(r, nr, segments, seg_a,
                                                                                     k, lda, w, c, res, ldc, epi);
    }
#endif
    for (; r < m; r += kRows) {
      for (size_t s = 0; s < segments; ++s) rows[s] = seg_a[s] ? seg_a[s] + r * lda : nullptr;
      kernel_6x16(std::min(kRows, m - r), nr, segments, rows, k, lda, w, c + r * ldc, res + r * ldc, ldc,
                  epi);
    }
  }
};

#if NN_NATIVE_X86
template <int kVecs>
struct Avx512Gemm {
  static constexpr size_t kRows = 8;
  static constexpr size_t kPanel = 16 * kVecs;
  using Epi = EpilogueAvx512;
  static void set_flags(Epi& epi, bool, size_t k_block) { epi.k_block = k_block; }
  static void kernel(size_t m, size_t nr, size_t segments, const float* const* seg_a, size_t k, size_t lda,
                     const float* w, float* c, const float* res, size_t ldc, const Epi& epi) {
    kernel_8xn_avx512<kVecs>(m, nr, segments, seg_a, k, lda, w, c, res, ldc, epi);
  }
};

// 32-wide panels where AVX-512 runs on 256-bit halves: a panel of 17-24 or 1-8 valid
// columns in one segment goes to the ymm 8 x 24 or 8 x 8 kernel (its rows past the last
// multiple of 8 and every other panel to the zmm ones).
struct Avx512HalfWidthGemm {
  static constexpr size_t kRows = 8;
  static constexpr size_t kPanel = 32;
  struct Epi {
    explicit Epi(const Epilogue& e) : wide(e), narrow(e) {}
    EpilogueAvx512 wide;
    EpilogueAvx2 narrow;
  };
  static void set_flags(Epi& epi, bool, size_t k_block) { epi.wide.k_block = k_block; }
  static void kernel(size_t m, size_t nr, size_t segments, const float* const* seg_a, size_t k, size_t lda,
                     const float* w, float* c, const float* res, size_t ldc, const Epi& epi) {
    const size_t full = m / 8 * 8;
    // One segment read in place or from im2col rows; a null one (a padded 1x1 conv's row in
    // the padding: bias only) and the other widths go to the zmm kernels.
    if (full == 0 || segments != 1 || !seg_a[0] || (nr > 8 && nr <= 16) || nr > 24)
      return kernel_8xn_avx512<2>(m, nr, segments, seg_a, k, lda, w, c, res, ldc, epi.wide);
    const bool hs = epi.narrow.hard_swish, rs = epi.narrow.residual;
    if (nr > 16)
      (hs ? (rs ? kernel_8xy_ymm_t<3, true, true> : kernel_8xy_ymm_t<3, true, false>)
          : (rs ? kernel_8xy_ymm_t<3, false, true> : kernel_8xy_ymm_t<3, false, false>))(
          full, nr, seg_a[0], k, lda, w, c, res, ldc, epi.narrow);
    else
      (hs ? (rs ? kernel_8xy_ymm_t<1, true, true> : kernel_8xy_ymm_t<1, true, false>)
          : (rs ? kernel_8xy_ymm_t<1, false, true> : kernel_8xy_ymm_t<1, false, false>))(
          full, nr, seg_a[0], k, lda, w, c, res, ldc, epi.narrow);
    if (full == m) return;
    const float* tail = seg_a[0] + full * lda;
    kernel_8xn_avx512<2>(m - full, nr, 1, &tail, k, lda, w, c + full * ldc, res + full * ldc, ldc, epi.wide);
  }
};

// 8 independent FMA chains of zmm or of ymm registers, `steps` long: the seconds they took.
// Named registers with distinct starting values: an array, or equal chains, the compiler
// would keep in memory or merge into one.
#define NN_CHAINS(V, SET, FMA, ADD, FIRST)                                                                   \
  const V m = SET(0.999f), d = SET(1e-3f);                                                                   \
  V a0 = SET(1.f), a1 = SET(2.f), a2 = SET(3.f), a3 = SET(4.f), a4 = SET(5.f), a5 = SET(6.f), a6 = SET(7.f), \
    a7 = SET(8.f);                                                                                           \
  for (size_t i = 0; i < steps; ++i) {                                                                       \
    a0 = FMA(a0, m, d), a1 = FMA(a1, m, d), a2 = FMA(a2, m, d), a3 = FMA(a3, m, d);                          \
    a4 = FMA(a4, m, d), a5 = FMA(a5, m, d), a6 = FMA(a6, m, d), a7 = FMA(a7, m, d);                          \
  }                                                                                                          \
  volatile float sink = FIRST(ADD(ADD(ADD(a0, a1), ADD(a2, a3)), ADD(ADD(a4, a5), ADD(a6, a7))));            \
  (void)sink;
template <bool kZmm>
NN_TARGET_AVX512 double fma_chains_seconds(size_t steps) {
  const auto t0 = std::chrono::steady_clock::now();
  if constexpr (kZmm) {
    NN_CHAINS(__m512, _mm512_set1_ps, _mm512_fmadd_ps, _mm512_add_ps, _mm512_cvtss_f32)
  } else {
    NN_CHAINS(__m256, _mm256_set1_ps, _mm256_fmadd_ps, _mm256_add_ps, _mm256_cvtss_f32)
  }
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}
#undef NN_CHAINS
#endif

}  // namespace

bool native_avx512_enabled() {
#if NN_NATIVE_X86
  static const bool cpu_has = __builtin_cpu_supports("avx512f");
  return cpu_has;
#else
  return false;
#endif
}

NativeIsa NativeIsa::best() {
  return with(true, -1, true);
}

NativeIsa NativeIsa::with(bool avx512, int half_width, bool two_rows, bool avx2_8_columns, bool avx_vnni) {
  NativeIsa isa;
  isa.avx512 = avx512 && native_avx512_enabled();
#if NN_NATIVE_X86
  // The ymm kernels use AVX-512VL's masked ymm loads and stores: without it, never.
  const bool vl = isa.avx512 && __builtin_cpu_supports("avx512vl");
  isa.half_width = vl && (half_width < 0 ? avx512_half_width() : half_width > 0);
  isa.avx_vnni = avx_vnni && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("avxvnni");
#else
  (void)avx_vnni;
#endif
  isa.two_rows = two_rows;
  isa.avx2_8_columns = avx2_8_columns;
  return isa;
}

bool avx512_half_width() {
#if NN_NATIVE_X86
  // The ymm kernels use AVX-512VL's masked ymm loads and stores: without it, never (not even
  // when asked).
  if (!__builtin_cpu_supports("avx512f") || !__builtin_cpu_supports("avx512vl")) return false;
  // Measured once: the same number of zmm and of ymm FMAs, best of 5 interleaved trials of
  // ~20 us. Full-width cores take about as long for both; half-width ones twice as long
  // for the zmm ones.
  static const bool half = [] {
    double zmm = 1e9, ymm = 1e9;
    for (int trial = 0; trial < 5; ++trial) {
      zmm = std::min(zmm, fma_chains_seconds<true>(8192));
      ymm = std::min(ymm, fma_chains_seconds<false>(8192));
    }
    return zmm > 1.5 * ymm;
  }();
  return half;
#else
  return false;
#endif
}

#if NN_NATIVE_X86
// GCC 12 calls the AVX-512 shift intrinsic's unused pass-through operand uninitialized.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
NN_TARGET_AVX512 void swish_avx512(float* p, size_t n) {
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m512 v[1] = {_mm512_loadu_ps(p + i)};
    const __m512 x = v[0];
    logistic16<1>(v);
    _mm512_storeu_ps(p + i, _mm512_mul_ps(x, v[0]));
  }
  if (i < n) {
    const __mmask16 m = __mmask16((1u << (n - i)) - 1);
    __m512 v[1] = {_mm512_maskz_loadu_ps(m, p + i)};
    const __m512 x = v[0];
    logistic16<1>(v);
    _mm512_mask_storeu_ps(p + i, m, _mm512_mul_ps(x, v[0]));
  }
}
#pragma GCC diagnostic pop

NN_TARGET_AVX2 void swish_avx2(float* p, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 x = _mm256_loadu_ps(p + i);
    _mm256_storeu_ps(p + i, _mm256_mul_ps(x, logistic8(x)));
  }
  for (; i < n; ++i) p[i] = p[i] / (1.f + std::exp(-p[i]));
}
#endif

void swish_inplace(float* data, size_t rows, size_t n, size_t stride, bool avx512) {
  for (size_t r = 0; r < rows; ++r) {
    float* p = data + r * stride;
#if NN_NATIVE_X86
    if (avx512) {
      swish_avx512(p, n);
      continue;
    }
    swish_avx2(p, n);
#else
    (void)avx512;
    for (size_t i = 0; i < n; ++i) p[i] = p[i] / (1.f + std::exp(-p[i]));
#endif
  }
}

#if NN_NATIVE_X86
// GCC 12 calls the AVX-512 shift intrinsic's unused pass-through operand uninitialized.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
NN_TARGET_AVX512 void gelu_tanh_avx512(float* p, size_t n) {
  size_t i = 0;
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(p + i, gelu_tanh16(_mm512_loadu_ps(p + i)));
  if (i < n) {
    const __mmask16 m = __mmask16((1u << (n - i)) - 1);
    _mm512_mask_storeu_ps(p + i, m, gelu_tanh16(_mm512_maskz_loadu_ps(m, p + i)));
  }
}
#pragma GCC diagnostic pop

NN_TARGET_AVX2 void gelu_tanh_avx2(float* p, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(p + i, gelu_tanh8(_mm256_loadu_ps(p + i)));
  for (; i < n; ++i) p[i] = gelu_tanh_approx(p[i]);
}

NN_TARGET_AVX512 void gelu_avx512(float* p, size_t n) {
  size_t i = 0;
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(p + i, gelu16(_mm512_loadu_ps(p + i)));
  if (i < n) {
    const __mmask16 m = __mmask16((1u << (n - i)) - 1);
    _mm512_mask_storeu_ps(p + i, m, gelu16(_mm512_maskz_loadu_ps(m, p + i)));
  }
}

NN_TARGET_AVX2 void gelu_avx2(float* p, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(p + i, gelu8(_mm256_loadu_ps(p + i)));
  for (; i < n; ++i) p[i] = gelu_approx(p[i]);
}
#endif

void gelu_inplace(float* data, size_t rows, size_t n, size_t stride, bool avx512, bool tanh_form) {
  for (size_t r = 0; r < rows; ++r) {
    float* p = data + r * stride;
#if NN_NATIVE_X86
    if (avx512) {
      tanh_form ? gelu_tanh_avx512(p, n) : gelu_avx512(p, n);
      continue;
    }
    tanh_form ? gelu_tanh_avx2(p, n) : gelu_avx2(p, n);
#else
    (void)avx512;
    for (size_t i = 0; i < n; ++i) p[i] = tanh_form ? gelu_tanh_approx(p[i]) : gelu_approx(p[i]);
#endif
  }
}

// Rows [m0, m0 + m_count) x panels [j0, j0 + j_count) of the output.
template <class Gemm>
void NativeConv::run_tile(void* ctx, size_t m0, size_t j0, size_t m_count, size_t j_count) {
  run_tile_gemm<Gemm>(ctx, m0, j0, m_count, j_count);
  const Task& t = *static_cast<const Task*>(ctx);
  const NativeConv& conv = *t.conv;
  const Epilogue& e = conv.epilogue_;
  if (!e.swish && !e.gelu && !e.gelu_tanh) return;
  // The tile's outputs are still in cache: the swish / GELU stage as one more pass over them.
  // Panels [j0, j0 + j_count) write one run of columns (a grouped conv's panels follow its
  // groups' channels in order).
  constexpr size_t kPanel = Gemm::kPanel;
  const size_t ldc = conv.shape_.out_c, col = conv.panel_columns(j0, kPanel).first;
  const auto [last_col, last_n] = conv.panel_columns(j0 + j_count - 1, kPanel);
  const size_t n = last_col + last_n - col;
  if (e.gelu || e.gelu_tanh)
    gelu_inplace(t.output + m0 * ldc + col, m_count, n, ldc, conv.avx512_, e.gelu_tanh);
  else
    swish_inplace(t.output + m0 * ldc + col, m_count, n, ldc, conv.avx512_);
}

template <class Gemm>
void NativeConv::run_tile_gemm(void* ctx, size_t m0, size_t j0, size_t m_count, size_t j_count) {
  constexpr size_t kRows = Gemm::kRows;
  const Task& t = *static_cast<const Task*>(ctx);
  const NativeConv& conv = *t.conv;
  const NativeConvShape& s = conv.shape_;
  const size_t k = conv.k_;
  constexpr size_t kPanel = Gemm::kPanel;
  const size_t panel_size = kPanel * (k + 1);
  const size_t ldc = s.out_c;
  typename Gemm::Epi epi(conv.epilogue_);
  Gemm::set_flags(epi, conv.avx2_8_columns_, conv.k_block_);
  if (conv.pointwise_) {
    // One call per panel over all of the tile's rows (their A block stays in cache).
    const float* a = t.input + m0 * s.in_c;
    if (t.gate) {
      thread_local std::vector<float> gated;
      if (gated.size() < m_count * s.in_c) gated.resize(m_count * s.in_c);
      gate_and_add(gated.data(), a, t.gate, t.sum ? t.sum + m0 * s.in_c : nullptr, m_count, s.in_c);
      a = gated.data();
    }
    for (size_t j = j0; j < j0 + j_count; ++j) {
      const auto [col, nr] = conv.panel_columns(j, kPanel);
      const size_t at = m0 * ldc + col;
      const float* group_a = a + j / conv.group_panels_ * conv.group_in_;
      Gemm::kernel(m_count, nr, 1, &group_a, k, s.in_c, t.weights + j * panel_size, t.output + at,
                   t.residual + at, ldc, epi);
    }
    return;
  }
  // Micro-tiles of kRows pixels from m0. One whose pixels share an output row reads the
  // input in place when their windows are inside horizontally (one run of kernel_w * in_c
  // floats per kernel row, rows stride_w * in_c apart), or zero-padded copies of its input
  // rows when they cross the left or right edge (strips_); the others get im2col rows.
  // Consecutive in-place tiles of one output row are one kernel call, which steps its rows
  // through them: per-tile calls and pointer tables had cost a sixth of the selfie stem.
  const size_t S = conv.segments_, T = conv.taps_w_;
  const int64_t reach = int64_t(s.kernel_w - 1) * s.dilation_w + 1;  // columns one pixel's window spans
  thread_local std::vector<float> scratch;
  const size_t tiles = (m_count + kRows - 1) / kRows;
  // An im2col row holds every input channel (k_all floats; k when not grouped).
  const size_t k_all = size_t(s.kernel_h) * s.kernel_w * s.in_c;
  // A grouped conv's im2col rows hold only the channels of panels [j0, j0 + j_count)'s groups
  // (rows of k_rows floats from channel c_first).
  const bool grouped = conv.group_in_ != s.in_c;
  const size_t c_first = grouped ? j0 / conv.group_panels_ * conv.group_in_ : 0;
  const size_t c_taken = grouped ? ((j0 + j_count - 1) / conv.group_panels_ + 1) * conv.group_in_ - c_first : s.in_c;
  const size_t k_rows = size_t(s.kernel_h) * s.kernel_w * c_taken;
  // Each micro-tile's im2col rows or input strips in a slot of kRows * k_all (+ copy_floats' slack).
  if (scratch.size() < tiles * kRows * k_all + 8) scratch.resize(tiles * kRows * k_all + 8);
  struct Call {
    size_t tile, count;  // micro-tiles [tile, tile + count)
    bool implicit;       // runs in seg[tile * S ...], else im2col rows in scratch
  };
  thread_local std::vector<Call> calls;
  thread_local std::vector<const float*> seg;  // per call's first micro-tile: kernel_h run pointers
  calls.clear();
  seg.resize(tiles * std::max<size_t>(1, S));
  const size_t out_w = s.out_w, out_h = s.out_h, in_c = s.in_c;
  const int64_t in_w = s.in_w, in_h = s.in_h, stride_w = s.stride_w, pad_left = s.pad_left;
  const size_t pixels = size_t(out_h) * out_w;
  // The first pixel's image, row and column, advanced per micro-tile without dividing (the
  // divisions were a fifth of this function on the selfie models' first conv).
  size_t b = m0 / pixels, oy = (m0 % pixels) / out_w, ox = (m0 % pixels) % out_w;
  bool extends = false;  // the last call reads this output row in place and may take the next tile
  for (size_t tile = 0; tile < tiles; ++tile) {
    if (tile > 0) {
      ox += kRows;
      if (ox >= out_w) extends = false;
      while (ox >= out_w) {
        ox -= out_w;
        if (++oy == out_h) oy = 0, ++b;
      }
    }
    const size_t first = m0 + tile * kRows, mr = std::min(kRows, m_count - tile * kRows);
    const int64_t x0 = int64_t(ox) * stride_w - pad_left;
    const int64_t x_end = int64_t(ox + mr - 1) * stride_w - pad_left + reach;  // one past
    const bool one_row = !t.im2col_all && S > 0 && ox + mr <= out_w;
    const bool inside = x0 >= 0 && x_end <= in_w;
    if (one_row && inside && extends) {
      ++calls.back().count;
      continue;
    }
    extends = false;
    if (conv.edge_taps_ && !(one_row && (inside || conv.strips_))) {
      // One run per tap (dilated convs): a tap no pixel of the tile reads inside
      // the image is skipped (a null run), one whose pixels all read one input row inside
      // the image is read in place, and only the others are copied, zeros for the pixels
      // that read padding. im2col rows had computed every tap: deeplabv3's dilation-12 3x3
      // conv on a 16x16 map reads padding with three quarters of its taps.
      int64_t py[kRows], px[kRows];  // each pixel's window origin
      const float* pimage[kRows];
      for (size_t i = 0, y = oy, x = ox, n = b; i < mr; ++i) {
        py[i] = int64_t(y) * s.stride_h - s.pad_top;
        px[i] = int64_t(x) * stride_w - pad_left;
        pimage[i] = t.input + n * size_t(in_h) * size_t(in_w) * in_c;
        if (++x == out_w) x = 0, y = y + 1 == out_h ? (++n, 0) : y + 1;
      }
      float* copy = scratch.data() + tile * kRows * k_all;  // S runs of mr pixels fit
      for (uint32_t ky = 0; ky < s.kernel_h; ++ky)
        for (size_t tx = 0; tx < T; ++tx) {
          const int64_t dy = int64_t(ky) * s.dilation_h, dx = int64_t(tx) * s.dilation_w;
          size_t live = 0;
          bool in_place = true;  // every pixel inside, each one stride_w columns past the one before
          for (size_t i = 0; i < mr; ++i) {
            const int64_t iy = py[i] + dy, ix = px[i] + dx;
            const bool in = iy >= 0 && iy < in_h && ix >= 0 && ix < in_w;
            live += in;
            if (!in || (i > 0 && (py[i] != py[0] || px[i] != px[0] + int64_t(i) * stride_w || pimage[i] != pimage[0])))
              in_place = false;
          }
          const float*& run = seg[tile * S + ky * T + tx];
          if (live == 0) {
            run = nullptr;
          } else if (in_place) {
            run = pimage[0] + (size_t(py[0] + dy) * size_t(in_w) + size_t(px[0] + dx)) * in_c;
          } else {
            for (size_t i = 0; i < mr; ++i) {
              const int64_t iy = py[i] + dy, ix = px[i] + dx;
              float* dst = copy + i * size_t(stride_w) * in_c;
              if (iy >= 0 && iy < in_h && ix >= 0 && ix < in_w)
                std::memcpy(dst, pimage[i] + (size_t(iy) * size_t(in_w) + size_t(ix)) * in_c, in_c * sizeof(float));
              else
                std::memset(dst, 0, in_c * sizeof(float));
            }
            run = copy;
            copy += mr * size_t(stride_w) * in_c;
          }
        }
      calls.push_back({tile, 1, true});
      continue;
    }
    if (!one_row || !(inside || conv.strips_)) {
      im2col_rows(s, t.input, first, mr, scratch.data() + tile * kRows * k_rows, c_first, c_taken);
      // k-blocked, consecutive im2col tiles (rows k apart) are one call: their micro-tiles
      // share each slice of weights. With every tile as im2col rows, calls of 64 rows (the
      // blocked kernel's chunk), each through all of the tile's panels while its rows stay
      // in cache.
      if (conv.k_block_ && !grouped && !calls.empty() && !calls.back().implicit &&
          calls.back().tile + calls.back().count == tile && (!t.im2col_all || calls.back().count < 8))
        ++calls.back().count;
      else
        calls.push_back({tile, 1, false});
      continue;
    }
    const float* image = t.input + b * size_t(in_h) * size_t(in_w) * in_c;
    float* strip = scratch.data() + tile * kRows * k_all;
    // lead zero floats, then the copied input columns [in_lo, in_hi), then zeros (a tile wholly
    // in the left padding is all lead).
    const int64_t in_lo = std::max<int64_t>(x0, 0), in_hi = std::min<int64_t>(x_end, in_w);
    const size_t lead = size_t(std::min(in_lo, x_end) - x0) * in_c, span = size_t(x_end - x0) * in_c;
    const size_t copied = size_t(std::max<int64_t>(0, in_hi - in_lo)) * in_c;
    for (uint32_t ky = 0; ky < s.kernel_h; ++ky) {
      const int64_t iy = int64_t(oy) * s.stride_h - s.pad_top + int64_t(ky) * s.dilation_h;
      const float* run = nullptr;  // the row's columns from x0 (its taps follow at dilation_w steps)
      if (iy < 0 || iy >= in_h) {
        run = nullptr;
      } else if (inside) {
        run = image + (size_t(iy) * size_t(in_w) + size_t(x0)) * in_c;
      } else {
        std::memset(strip, 0, lead * sizeof(float));
        if (copied)
          std::memcpy(strip + lead, image + (size_t(iy) * size_t(in_w) + size_t(in_lo)) * in_c,
                      copied * sizeof(float));
        std::memset(strip + lead + copied, 0, (span - lead - copied) * sizeof(float));
        run = strip;
        strip += span;
      }
      for (size_t tx = 0; tx < T; ++tx) seg[tile * S + ky * T + tx] = run ? run + tx * s.dilation_w * in_c : nullptr;
    }
    calls.push_back({tile, 1, true});
    extends = inside;
  }
  const size_t run_k = grouped ? conv.group_in_ : T == 1 ? size_t(s.kernel_w) * in_c : in_c;
  const size_t run_lda = size_t(s.stride_w) * in_c;
  for (const Call& call : calls) {
    const size_t r = call.tile * kRows, mr = std::min((call.tile + call.count) * kRows, m_count) - r;
    const float* rows = scratch.data() + r * k_rows;
    for (size_t j = j0; j < j0 + j_count; ++j) {
      const auto [col, nr] = conv.panel_columns(j, kPanel);
      const size_t at = (m0 + r) * ldc + col;
      const float* w = t.weights + j * panel_size;
      if (!grouped) {
        if (call.implicit)
          Gemm::kernel(mr, nr, S, &seg[call.tile * S], run_k, run_lda, w, t.output + at, t.residual + at, ldc,
                       epi);
        else
          Gemm::kernel(mr, nr, 1, &rows, k, k, w, t.output + at, t.residual + at, ldc, epi);
        continue;
      }
      // A group's runs: its channels within each tap, of the input or of the im2col rows.
      const size_t offset = j / conv.group_panels_ * conv.group_in_;
      const float* group_seg[16];
      for (size_t q = 0; q < S; ++q) {
        if (!call.implicit) {
          group_seg[q] = rows + q * c_taken + (offset - c_first);
          continue;
        }
        const float* run = seg[call.tile * S + q];
        group_seg[q] = run ? run + offset : nullptr;
      }
      Gemm::kernel(mr, nr, S, group_seg, run_k, call.implicit ? run_lda : k_rows, w, t.output + at,
                   t.residual + at, ldc, epi);
    }
  }
}

void NativeConv::run(const NativeArgs& a) const {
  // Without a residual the kernel is handed the output as one (never read): no null offsets.
  const float* residual = a.residual ? a.residual : a.output;
  if (!scaled_) {
    Task task{this, a.input, residual, a.output, packed_.get(), nullptr, nullptr};
    return dispatch(task, a.pool);
  }
  if (gate_rows_) {
    // input * gate + sum per tile (one FMA per input value): folding the gate into the
    // weights would leave the sum a second GEMM segment, k FMAs per output value. Without a
    // sum (gated_rows) the gate on fewer input values than weights, each tile's rows on the
    // core that runs them (gated weights are written over the pool by panels).
    Task task{this, a.input, residual, a.output, packed_.get(), a.gate, scaled_sum_ ? a.gate_sum : nullptr};
    return dispatch(task, a.pool);
  }
  // Per panel: the bias, then k rows scaled by their input channel's gate; the panels split
  // over the pool (EfficientNet's last 1152 -> 320 projection gates 1.5 MB of weights).
  struct Gating {
    const float* packed;
    const float* gate;
    float* gated;
    size_t width, k;
  } g{packed_.get(), a.gate, static_cast<float*>(a.scratch), wide_ ? kNr512 : kNr, k_};
  for_each_row(
      a.pool, n_blocks_,
      [](void* ctx, size_t j) {
        const Gating& g = *static_cast<const Gating*>(ctx);
        const size_t panel = g.width * (g.k + 1);
        const float* src = g.packed + j * panel;
        float* dst = g.gated + j * panel;
        std::memcpy(dst, src, g.width * sizeof(float));
        for (size_t q = 0; q < g.k; ++q) {
          const float gq = g.gate[q];
          const float* row = src + g.width + q * g.width;
          float* out = dst + g.width + q * g.width;
          for (size_t c = 0; c < g.width; ++c) out[c] = row[c] * gq;
        }
      },
      &g);
  Task task{this, a.input, residual, a.output, g.gated, nullptr, nullptr};
  dispatch(task, a.pool);
}

bool NativeConv::enable_scaled_input(bool with_sum) {
  if (!pointwise_ || !packed_ || group_in_ != shape_.in_c) return false;
  scaled_ = true;
  scaled_sum_ = with_sum;
  // One k-blocked row tile (7x7, 8x8) with fewer pixels than output channels: gating its
  // input rows costs fewer multiplies than its weights, and lets k_block_rows split its rows.
  const size_t m_total = size_t(shape_.batch) * shape_.out_h * shape_.out_w;
  gate_rows_ = with_sum || (gated_rows_ && k_block_ && m_total <= dispatch_tile_m() && m_total < shape_.out_c);
  return true;
}

size_t NativeConv::scratch_bytes() const {
  if (!scaled_ || gate_rows_) return 0;
  return n_blocks_ * (wide_ ? kNr512 : kNr) * (k_ + 1) * sizeof(float);
}

PackedGemm::PackedGemm(size_t count, size_t k, size_t n, const float* b, const NativeIsa& isa)
    : k_(k), n_(n), avx512_(isa.avx512) {
  // The panels NativeConv would pick for n output channels: per panel a (zero) bias row, then
  // k rows of its columns.
  wide_ = avx512_ && n > 16;
  const size_t last_panel = n % 32;
  half_width_ = wide_ && ((last_panel > 16 && last_panel <= 24) || (last_panel > 0 && last_panel <= 8)) &&
                isa.half_width;
  const size_t width = wide_ ? kNr512 : kNr;
  // k-blocked as NativeConv's panels (the transformed filters of a small map, read by few
  // tiles, come from memory).
  if (avx512_ && isa.k_blocks) {
    const size_t slice = std::max<size_t>(64, l1d_bytes() / 2 / (width * sizeof(float)));
    if (k > slice) k_block_ = slice;
  }
  n_blocks_ = (n + width - 1) / width;
  const size_t panel = width * (k + 1);
  AlignedFloats packed = allocate_floats(count * n_blocks_ * panel);
  if (!packed) return;
  for (size_t i = 0; i < count; ++i)
    for (size_t j = 0; j < n_blocks_; ++j) {
      float* dst = packed.get() + (i * n_blocks_ + j) * panel + width;
      const size_t cols = std::min(width, n - j * width);
      for (size_t q = 0; q < k; ++q)
        std::copy_n(b + (i * k + q) * n + j * width, cols, dst + q * width);
    }
  packed_ = std::move(packed);
}

namespace {
template <class Gemm>
void multiply_panels(size_t m, const float* a, size_t lda, const float* w, size_t n_blocks, size_t k,
                     size_t n, float* c, size_t ldc, size_t k_block) {
  constexpr size_t kPanel = Gemm::kPanel;
  typename Gemm::Epi epi{Epilogue{}};
  Gemm::set_flags(epi, false, k_block);
  // One call per panel over all m rows (their A block stays in cache); no residual, so the
  // kernel is handed the output as one (never read).
  for (size_t j = 0; j < n_blocks; ++j, w += kPanel * (k + 1))
    Gemm::kernel(m, std::min(kPanel, n - j * kPanel), 1, &a, k, lda, w, c + j * kPanel, c + j * kPanel, ldc,
                 epi);
}
}  // namespace

void PackedGemm::multiply(size_t i, size_t m, const float* a, size_t lda, float* c, size_t ldc) const {
  multiply(i, m, a, lda, c, ldc, 0, n_blocks_);
}

size_t PackedGemm::panel_width() const {
  return wide_ ? kNr512 : kNr;
}

void PackedGemm::multiply(size_t i, size_t m, const float* a, size_t lda, float* c, size_t ldc, size_t j0,
                          size_t j1) const {
  const size_t width = panel_width();
  j1 = std::min(j1, n_blocks_);
  if (j0 >= j1) return;
  // Panels [j0, j1) as a GEMM of their columns alone: its weights, output and n from j0.
  const float* w = packed_.get() + (i * n_blocks_ + j0) * width * (k_ + 1);
  const size_t blocks = j1 - j0, n = std::min(n_, j1 * width) - j0 * width;
  c += j0 * width;
#if NN_NATIVE_X86
  if (avx512_ && wide_ && half_width_)
    return multiply_panels<Avx512HalfWidthGemm>(m, a, lda, w, blocks, k_, n, c, ldc, k_block_);
  if (avx512_ && wide_) return multiply_panels<Avx512Gemm<2>>(m, a, lda, w, blocks, k_, n, c, ldc, k_block_);
  if (avx512_) return multiply_panels<Avx512Gemm<1>>(m, a, lda, w, blocks, k_, n, c, ldc, k_block_);
#endif
  multiply_panels<Avx2Gemm>(m, a, lda, w, blocks, k_, n, c, ldc, 0);
}

size_t NativeConv::tile_pixels(const NativeIsa& isa) {
#if NN_NATIVE_X86
  if (isa.avx512) return Avx512Gemm<1>::kRows;
#endif
  return Avx2Gemm::kRows;
}

NativeConv::TileKernel NativeConv::tile_kernel() const {
  TileKernel t{&run_tile<Avx2Gemm>, Avx2Gemm::kRows, Avx2Gemm::kPanel, 1};
#if NN_NATIVE_X86
  if (avx512_ && wide_ && half_width_)
    t = {&run_tile<Avx512HalfWidthGemm>, Avx512HalfWidthGemm::kRows, Avx512HalfWidthGemm::kPanel, 1};
  else if (avx512_ && wide_)
    t = {&run_tile<Avx512Gemm<2>>, Avx512Gemm<2>::kRows, Avx512Gemm<2>::kPanel, 1};
  else if (avx512_)
    t = {&run_tile<Avx512Gemm<1>>, Avx512Gemm<1>::kRows, Avx512Gemm<1>::kPanel, 1};
#endif
  // Panels per tile such that the weights a tile walks stay in L2 while its rows stay in L1.
  const size_t panel_bytes = t.width * (k_ + 1) * sizeof(float);
  t.tile_n = std::max<size_t>(1, std::min(n_blocks_, (size_t(256) << 10) / panel_bytes));
  // A grouped conv's tile builds im2col rows of its groups' channels only: as many groups
  // as keep those of a full row tile within a quarter of L2, in tiles of near-equal groups
  // (a 7x7 map has every micro-tile as im2col rows: RegNet's 25 groups of 16 had built 690
  // KB of them per tile, 48 rows x 9 taps x 400 channels, before its panels read them back).
  if (group_in_ != shape_.in_c) {
    const size_t group_bytes =
        t.rows * 8 * size_t(shape_.kernel_h) * shape_.kernel_w * group_in_ * sizeof(float);
    const size_t groups = shape_.groups, most = std::max<size_t>(1, l2_bytes() / 4 / group_bytes);
    const size_t tiles = (groups + most - 1) / most;
    t.tile_n = std::min(t.tile_n, (groups + tiles - 1) / tiles * group_panels_);
  }
  return t;
}

void NativeConv::run_pixels(const float* input, const float* residual, float* output, size_t pixels) const {
  Task task{this, input, residual ? residual : output, output, packed_.get(), nullptr, nullptr};
  const TileKernel t = tile_kernel();
  const size_t tile_m = t.rows * 8;
  for (size_t j0 = 0; j0 < n_blocks_; j0 += t.tile_n)
    for (size_t m0 = 0; m0 < pixels; m0 += tile_m)
      t.fn(&task, m0, j0, std::min(tile_m, pixels - m0), std::min(t.tile_n, n_blocks_ - j0));
}

bool NativeConv::im2col_once(size_t threads) const {
  // Threads split its panels evenly, or enough of them for the remainder not to matter
  // (densenet121's 7x7 128 -> 32 convs, one panel, keep their rows split). Where its pixels
  // outweigh its weights it still takes its panels, not its rows: resnet50's 1x1 stride-2
  // 512 -> 1024 onto 14x14 ran faster so.
  return im2col_once_ && (threads <= 1 || n_blocks_ % threads == 0 || n_blocks_ >= 4 * threads);
}

bool NativeConv::splits_rows(size_t threads) const {
  const size_t m_total = size_t(shape_.batch) * shape_.out_h * shape_.out_w;
  const size_t rows = tile_kernel().rows;
  if (!small_image_rows_ || threads < 2 || m_total >= rows * 8 * 4 || m_total / rows < threads ||
      im2col_once(threads))
    return false;
  const double pixels = double(shape_.batch) * shape_.in_h * shape_.in_w * shape_.in_c + double(m_total) * shape_.out_c;
  return pixels >= double(k_) * shape_.out_c;
}

bool NativeConv::k_block_rows(size_t threads) const {
  const size_t m_total = size_t(shape_.batch) * shape_.out_h * shape_.out_w;
  const size_t rows = tile_kernel().rows;
  // Weights gated per run are written over the pool by panels: each core reads its own.
  const bool gated_weights = scaled_ && !gate_rows_;
  // Each core streams every weight, which pays only where they are few and each thread has
  // rows enough to reuse each slice: 1.3-4 MB on 7x7 / 8x8 maps (resnet50's 512 <-> 2048,
  // pose_landmark_heavy's 1632 <-> 272) and 4x4 maps (one micro-tile per thread) lost.
  const bool few = k_ * shape_.out_c * sizeof(float) <= (size_t(1) << 20);
  return k_block_rows_ && threads >= 2 && k_block_ && pointwise_ && group_in_ == shape_.in_c && !gated_weights &&
         few && m_total < dispatch_tile_m() * 4 && m_total / rows >= 3 * threads && !splits_rows(threads) &&
         !im2col_once(threads);
}

bool NativeConv::serial_row_tiles(size_t threads) const {
  const size_t m_total = size_t(shape_.batch) * shape_.out_h * shape_.out_w;
  // (A k-blocked image of one row tile takes every panel in one tile: no order to choose.)
  // Only where the image's A outgrows half of L2: panel-major re-reads it from beyond L2
  // per panel tile. Where it stays in L2 panel-major held or won (inception_v3's 17x17
  // 768 -> 192 convs ran slower row-major).
  return serial_row_tiles_ && threads <= 1 && k_block_ && pointwise_ && m_total > dispatch_tile_m() &&
         n_blocks_ > tile_kernel().tile_n && m_total * k_ * sizeof(float) > l2_bytes() / 2;
}

size_t NativeConv::dispatch_tile_m() const {
  // An AVX2 k-blocked image of up to one 64-row chunk is one tile (49 rows: not 48 and 1).
  const size_t m_total = size_t(shape_.batch) * shape_.out_h * shape_.out_w;
  return k_block_ && !avx512_ && m_total <= 64 ? m_total : tile_kernel().rows * 8;
}

void NativeConv::dispatch(Task& task, pthreadpool_t pool) const {
  const size_t m_total = size_t(shape_.batch) * shape_.out_h * shape_.out_w;
  const TileKernel kernel = tile_kernel();
  void (*tile_fn)(void*, size_t, size_t, size_t, size_t) = kernel.fn;
  const size_t rows = kernel.rows;
  // Tiles: enough row tiles for two threads to share.
  const size_t tile_m = dispatch_tile_m();
  // k-blocked, a tile's weights need not stay in L2 (each slice is read from L1 by all its
  // rows, then not again): an image of one row tile takes every panel in one tile, so its
  // im2col rows are built once, not once per panel (a 7x7 map's 3x3 conv on 512 channels:
  // 16 times 0.9 MB).
  const size_t tile_n = k_block_ && m_total <= tile_m ? n_blocks_ : kernel.tile_n;
  const size_t threads = pool ? pthreadpool_get_threads_count(pool) : 1;
  task.im2col_all = im2col_once(threads);
  if (task.im2col_all) {
    // One item per thread: a run of panels over all rows (its im2col rows built once).
    struct Runs {
      Task* task;
      void (*tile_fn)(void*, size_t, size_t, size_t, size_t);
      size_t runs, m_total, n_blocks;
    } r{&task, tile_fn, std::min(threads, n_blocks_), m_total, n_blocks_};
    auto run = [](void* ctx, size_t i) {
      const Runs& r = *static_cast<const Runs*>(ctx);
      const size_t j0 = r.n_blocks * i / r.runs, j1 = r.n_blocks * (i + 1) / r.runs;
      if (j1 > j0) r.tile_fn(r.task, 0, j0, r.m_total, j1 - j0);
    };
    if (!pool || r.runs < 2) return run(&r, 0);
    pthreadpool_parallelize_1d(pool, run, &r, r.runs, 0);
    return;
  }
  if (!pool && serial_row_tiles(1)) {
    // Each row tile's A block (64 rows of k floats: 256 KB at k = 1024) stays in L2 while
    // it runs through every panel (each slice read from L1 by its rows, the next prefetched
    // into L2), as at 2+ threads; panel-major, each panel re-read every row tile's A from
    // beyond L2 where the image's A outgrows it (32x32 x 1024: 4 MB).
    for (size_t m0 = 0; m0 < m_total; m0 += tile_m)
      for (size_t j0 = 0; j0 < n_blocks_; j0 += tile_n)
        tile_fn(&task, m0, j0, std::min(tile_m, m_total - m0), std::min(tile_n, n_blocks_ - j0));
    return;
  }
  if (!pool) {
    for (size_t j0 = 0; j0 < n_blocks_; j0 += tile_n)
      for (size_t m0 = 0; m0 < m_total; m0 += tile_m)
        tile_fn(&task, m0, j0, std::min(tile_m, m_total - m0), std::min(tile_n, n_blocks_ - j0));
    return;
  }
  if (m_total >= tile_m * 4) {
    pthreadpool_parallelize_2d_tile_2d(pool, tile_fn, &task, m_total, n_blocks_, tile_m, tile_n, 0);
    return;
  }
  // A small image whose pixels (read and written) outweigh its weights: the threads split
  // its rows like a large image's (row-major pieces, each over every panel), so each core
  // reads the rows it wrote one op earlier and writes the rows the next op reads there. A
  // core reading what the other one has just written can take several times as long as
  // reading its own (bench/README.md, "Rows that stay on their core").
  if (splits_rows(pthreadpool_get_threads_count(pool))) {
    struct RowPieces {
      Task* task;
      void (*tile_fn)(void*, size_t, size_t, size_t, size_t);
      size_t full, pieces, rows, m_total, tile_n, n_blocks;
    } rp{&task, tile_fn, m_total / rows, 0, rows, m_total, tile_n, n_blocks_};
    rp.pieces = std::min(rp.full, 4 * pthreadpool_get_threads_count(pool));
    pthreadpool_parallelize_2d(
        pool,
        [](void* ctx, size_t i, size_t g) {
          const RowPieces& p = *static_cast<const RowPieces*>(ctx);
          const size_t m0 = p.full * i / p.pieces * p.rows;
          const size_t m1 = i + 1 == p.pieces ? p.m_total : p.full * (i + 1) / p.pieces * p.rows;
          const size_t j0 = g * p.tile_n;
          p.tile_fn(p.task, m0, j0, m1 - m0, std::min(p.tile_n, p.n_blocks - j0));
        },
        &rp, rp.pieces, (n_blocks_ + tile_n - 1) / tile_n, 0);
    return;
  }
  // A k-blocked 1x1 conv whose weights outweigh its pixels: one piece of whole micro-tiles
  // per thread, each over every panel in one call, so every slice of weights is read by all
  // of the thread's rows (as at one thread) and each core reads only its rows of the input.
  // Panel pieces had each core read every input row, half of them written by the other core.
  if (k_block_rows(pthreadpool_get_threads_count(pool))) {
    struct RowPieces {
      Task* task;
      void (*tile_fn)(void*, size_t, size_t, size_t, size_t);
      size_t full, pieces, rows, m_total, n_blocks;
    } h{&task, tile_fn, m_total / rows, std::min(m_total / rows, pthreadpool_get_threads_count(pool)), rows,
        m_total, n_blocks_};
    pthreadpool_parallelize_1d(
        pool,
        [](void* ctx, size_t i) {
          const RowPieces& p = *static_cast<const RowPieces*>(ctx);
          const size_t m0 = p.full * i / p.pieces * p.rows;
          const size_t m1 = i + 1 == p.pieces ? p.m_total : p.full * (i + 1) / p.pieces * p.rows;
          p.tile_fn(p.task, m0, 0, m1 - m0, p.n_blocks);
        },
        &h, h.pieces, 0);
    return;
  }
  // A small image (7x7, 14x14): its weights outweigh its pixels, so the threads split the
  // output channels. Items are panel-major (a group of panels, then the pieces of its
  // rows) and the pool gives each thread a contiguous run of items, so each core streams
  // its own panels once; row-major pieces had made every core stream all the weights.
  // Rows are cut (up to 4 pieces of whole micro-tiles, the last one taking the m % rows
  // tail: a 1-row tile would stream a panel for one pixel) only where the panels give
  // fewer than 4 items per thread.
  struct Pieces {
    Task* task;
    void (*tile_fn)(void*, size_t, size_t, size_t, size_t);
    size_t full, pieces, rows, m_total, group, n_blocks;
  } pieces{&task, tile_fn, m_total / rows, 0, rows, m_total, 0, n_blocks_};
  // Input gated per tile without a sum (gated_rows): one group of panels per thread, so
  // each thread gates the rows once.
  const size_t wanted = (task.gate && !task.sum ? 1 : 4) * pthreadpool_get_threads_count(pool);
  pieces.group = std::clamp<size_t>(n_blocks_ / wanted, 1, tile_n);
  const size_t groups = (n_blocks_ + pieces.group - 1) / pieces.group;
  pieces.pieces = std::clamp<size_t>((wanted + groups - 1) / groups, 1, std::clamp<size_t>(pieces.full, 1, 4));
  pthreadpool_parallelize_2d(
      pool,
      [](void* ctx, size_t g, size_t i) {
        const Pieces& p = *static_cast<const Pieces*>(ctx);
        const size_t m0 = p.full * i / p.pieces * p.rows;
        const size_t m1 = i + 1 == p.pieces ? p.m_total : p.full * (i + 1) / p.pieces * p.rows;
        const size_t j0 = g * p.group;
        if (m1 > m0) p.tile_fn(p.task, m0, j0, m1 - m0, std::min(p.group, p.n_blocks - j0));
      },
      &pieces, groups, pieces.pieces, 0);
}

}  // namespace nn::cpu

// What a native kernel does to its accumulators before storing them, so the ops that
// follow a conv in MobileNet-style blocks (RELU*, HARD_SWISH, the residual ADD) cost no
// extra pass over memory:
//
//   y = clamp(acc + bias, lo, hi)        conv's fuse code and folded RELU/RELU1/RELU6
//   y = hard_swish(y)                    when a HARD_SWISH follows
//   y = clamp(y + residual, res_lo, res_hi)   when an ADD of a same-shaped tensor follows
//   y = 1 / (1 + exp(-y))                when a LOGISTIC follows (NativeDeconv only: the
//                                        selfie models' last op; no other kernel reads it)
//   y = y / (1 + exp(-y))                swish (SiLU: a LOGISTIC and the MUL of it by its
//                                        input), last; NativeConv and NativeDepthwise apply
//                                        it in a pass over each tile / row while in cache
//                                        (swish_inplace), not in the micro-kernels
//   y = y * (1 + erf(y / sqrt 2)) / 2    GELU (erf form: the DIV, ERF, ADD 1, MUL and MUL 0.5
//                                        exporters write), last; NativeConv only, in the same
//                                        pass over each tile as swish (gelu_inplace)
//   y = y / (1 + exp(-2 sqrt(2 / pi) (y + 0.044715 y^3)))
//                                        GELU's tanh form (0.5 y (1 + tanh(u)) = y sigmoid(2u)),
//                                        the same way
//
// The order is the IR's: each stage is the op the delegate folded, applied in sequence.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define NN_NATIVE_X86 1
#define NN_TARGET_AVX2 __attribute__((target("avx2,fma")))
// For the helpers called inside micro-kernels: a call there would spill every accumulator.
#define NN_INLINE_AVX2 __attribute__((target("avx2,fma"), always_inline)) inline
#define NN_INLINE_LAMBDA __attribute__((always_inline))
// AVX-512F (Zen 4/5, Skylake-SP and later): 16-lane FMAs, cheap k-masked tails.
#define NN_TARGET_AVX512 __attribute__((target("avx512f,avx2,fma")))
#define NN_INLINE_AVX512 __attribute__((target("avx512f,avx2,fma"), always_inline)) inline
// Keeps a loaded vector in its register: GCC otherwise folds the load into each FMA that
// reads it (a memory operand is free on Intel), and a value read by three FMAs costs three
// loads, which on Zen 4 (one zmm load a cycle) is the depthwise kernels' bound.
#define NN_KEEP_IN_REGISTER(v) __asm__("" : "+v"(v))
#else
#define NN_INLINE_AVX2 inline
#define NN_INLINE_LAMBDA
#define NN_KEEP_IN_REGISTER(v)
#define NN_NATIVE_X86 0
#define NN_TARGET_AVX2
#endif

namespace nn::cpu {

struct Epilogue {
  float lo = -std::numeric_limits<float>::infinity();
  float hi = std::numeric_limits<float>::infinity();
  bool hard_swish = false;
  bool residual = false;  // the kernel is given a second tensor shaped like its output
  float res_lo = -std::numeric_limits<float>::infinity();
  float res_hi = std::numeric_limits<float>::infinity();
  bool logistic = false;  // honoured by NativeDeconv only (the fusion rule offers it no other)
  bool swish = false;     // NativeConv and NativeDepthwise only, after the stages above
  bool gelu = false;      // NativeConv only, after the stages above (never with swish)
  bool gelu_tanh = false; // as gelu, its tanh form
};

// erf(x) as x * P(x^2) / Q(x^2) on [-4, 4] (beyond, erf is +-1 in float: 1 - erf(4) =
// 1.5e-8), the coefficients of Eigen's fast erf. Against std::erf in double over every
// float: at most 3.8e-7 absolute and 3.8e-7 relative (3 ulps of 1, near x = 4; outputs in
// the denormal range aside), so x * (1 + erf) in GELU is off by at most 1.9e-7 |x|
// (cpu_gelu_layer_norm_test.cpp pins these).
inline constexpr float kErfAlpha[] = {-2.72614225801306e-10f, 2.77068142495902e-08f,  -2.10102402082508e-06f,
                                      -5.69250639462346e-05f, -7.34990630326855e-04f, -2.95459980854025e-03f,
                                      -1.60960333262415e-02f};
inline constexpr float kErfBeta[] = {-1.45660718464996e-05f, -2.13374055278905e-04f, -1.68282697438203e-03f,
                                     -7.37332916720468e-03f, -1.42647390514189e-02f};

inline float erf_approx(float v) {
  const float x = std::min(std::max(v, -4.f), 4.f), x2 = x * x;
  float p = kErfAlpha[0], q = kErfBeta[0];
  for (int i = 1; i < 7; ++i) p = std::fma(p, x2, kErfAlpha[i]);
  for (int i = 1; i < 5; ++i) q = std::fma(q, x2, kErfBeta[i]);
  return x * p / q;
}

// GELU as the vector kernels compute it: x * (1 + erf(x * (1 / sqrt 2))) * 0.5.
inline float gelu_approx(float x) {
  return x * (1.f + erf_approx(x * 0.70710678118654752f)) * 0.5f;
}

// The tanh form's argument 2 sqrt(2 / pi) (x + 0.044715 x^3), as x (a + b x^2): its GELU
// is x * sigmoid(that).
inline constexpr float kGeluTanhA = 1.5957691216057308f, kGeluTanhB = 1.5957691216057308f * 0.044715f;
inline float gelu_tanh_approx(float x) {
  return x / (1.f + std::exp(-x * std::fma(x * x, kGeluTanhB, kGeluTanhA)));
}

inline float apply_epilogue(const Epilogue& e, float v, float residual) {
  v = std::min(std::max(v, e.lo), e.hi);
  // HARD_SWISH as the vector epilogues compute it: v * clamp(v / 6 + 0.5, 0, 1).
  if (e.hard_swish) v = v * std::min(std::max(std::fma(v, 1.f / 6.f, 0.5f), 0.f), 1.f);
  if (e.residual) v = std::min(std::max(v + residual, e.res_lo), e.res_hi);
  if (e.logistic) v = 1.f / (1.f + std::exp(-v));
  return v;
}

#if NN_NATIVE_X86

// The epilogue with its constants in registers.
struct EpilogueAvx2 {
  __m256 lo, hi, res_lo, res_hi, sixth, half, one, zero;
  bool clamp, hard_swish, residual;  // clamp: lo or hi is finite
  bool eight_columns = false;        // NativeConv's AVX2 GEMM: NativeIsa::avx2_8_columns
  size_t k_block = 0;                // and its k steps per block (NativeIsa::avx2_k_blocks), 0 none

  NN_TARGET_AVX2 explicit EpilogueAvx2(const Epilogue& e)
      : lo(_mm256_set1_ps(e.lo)),
        hi(_mm256_set1_ps(e.hi)),
        res_lo(_mm256_set1_ps(e.res_lo)),
        res_hi(_mm256_set1_ps(e.res_hi)),
        sixth(_mm256_set1_ps(1.f / 6.f)),
        half(_mm256_set1_ps(0.5f)),
        one(_mm256_set1_ps(1.f)),
        zero(_mm256_setzero_ps()),
        clamp(e.lo != -std::numeric_limits<float>::infinity() ||
              e.hi != std::numeric_limits<float>::infinity()),
        hard_swish(e.hard_swish),
        residual(e.residual) {}

  // `r` is the residual's 8 lanes (ignored unless residual).
  NN_INLINE_AVX2 __m256 operator()(__m256 v, __m256 r) const {
    if (clamp) v = _mm256_min_ps(_mm256_max_ps(v, lo), hi);
    if (hard_swish)
      v = _mm256_mul_ps(v, _mm256_min_ps(_mm256_max_ps(_mm256_fmadd_ps(v, sixth, half), zero), one));
    if (residual) v = _mm256_min_ps(_mm256_max_ps(_mm256_add_ps(v, r), res_lo), res_hi);
    return v;
  }
};

// min/max on 16 lanes. Not _mm512_min_ps/_mm512_max_ps: GCC 12 builds those on
// _mm512_undefined_ps() and then warns (-Wmaybe-uninitialized) wherever they inline.
NN_INLINE_AVX512 __m512 max16(__m512 a, __m512 b) {
  return _mm512_maskz_max_ps(__mmask16(0xFFFF), a, b);
}
NN_INLINE_AVX512 __m512 min16(__m512 a, __m512 b) {
  return _mm512_maskz_min_ps(__mmask16(0xFFFF), a, b);
}

// The same on 16 lanes.
struct EpilogueAvx512 {
  __m512 lo, hi, res_lo, res_hi, sixth, half, one, zero;
  bool clamp, hard_swish, residual;  // clamp: lo or hi is finite
  size_t k_block = 0;                // NativeConv's AVX-512 GEMM: k steps per block (NativeIsa::k_blocks), 0 none

  NN_TARGET_AVX512 explicit EpilogueAvx512(const Epilogue& e)
      : lo(_mm512_set1_ps(e.lo)),
        hi(_mm512_set1_ps(e.hi)),
        res_lo(_mm512_set1_ps(e.res_lo)),
        res_hi(_mm512_set1_ps(e.res_hi)),
        sixth(_mm512_set1_ps(1.f / 6.f)),
        half(_mm512_set1_ps(0.5f)),
        one(_mm512_set1_ps(1.f)),
        zero(_mm512_setzero_ps()),
        clamp(e.lo != -std::numeric_limits<float>::infinity() ||
              e.hi != std::numeric_limits<float>::infinity()),
        hard_swish(e.hard_swish),
        residual(e.residual) {}

  NN_INLINE_AVX512 __m512 operator()(__m512 v, __m512 r) const {
    if (clamp) v = min16(max16(v, lo), hi);
    if (hard_swish) v = _mm512_mul_ps(v, min16(max16(_mm512_fmadd_ps(v, sixth, half), zero), one));
    if (residual) v = min16(max16(_mm512_add_ps(v, r), res_lo), res_hi);
    return v;
  }
};

// 1 / (1 + exp(-v)) on kN vectors of 16 lanes, relative error ~3e-6: exp(-v) = 2^n * p(r) with
// n = round(-v / ln 2) (by adding 1.5 * 2^23, which leaves n in the low mantissa bits),
// r = -v - n ln 2 (ln 2 in two parts), p a degree-5 Taylor polynomial on |r| <= ln 2 / 2,
// and 2^n built in the exponent field; -v clamped to +-87, so 2^n stays a normal float
// (beyond, the result is 0 or 1 in float within the tolerance the reference is held to).
// The vectors go through each step side by side: one at a time, each waited on its own
// chain (the selfie head is faster with its 4 vectors together).
template <int kN>
NN_INLINE_AVX512 void logistic16(__m512 (&v)[kN]) {
  const __m512 lo = _mm512_set1_ps(-87.f), hi = _mm512_set1_ps(87.f), magic = _mm512_set1_ps(12582912.f);
  const __m512 log2e = _mm512_set1_ps(1.44269504088896341f), ln2_hi = _mm512_set1_ps(0.693359375f),
               ln2_lo = _mm512_set1_ps(-2.12194440e-4f), one = _mm512_set1_ps(1.f);
  const __m512 c5 = _mm512_set1_ps(1.f / 120), c4 = _mm512_set1_ps(1.f / 24), c3 = _mm512_set1_ps(1.f / 6),
               c2 = _mm512_set1_ps(0.5f);
  const __m512i bias = _mm512_set1_epi32(127);
  // Step by step across the kN vectors (independent chains side by side for the scheduler).
  __m512 y[kN], t[kN], r[kN], p[kN];
#pragma GCC unroll 4
  for (int i = 0; i < kN; ++i) y[i] = min16(max16(_mm512_sub_ps(_mm512_setzero_ps(), v[i]), lo), hi);
#pragma GCC unroll 4
  for (int i = 0; i < kN; ++i) t[i] = _mm512_fmadd_ps(y[i], log2e, magic);
#pragma GCC unroll 4
  for (int i = 0; i < kN; ++i) {
    const __m512 n = _mm512_sub_ps(t[i], magic);
    r[i] = _mm512_fnmadd_ps(n, ln2_lo, _mm512_fnmadd_ps(n, ln2_hi, y[i]));
  }
#pragma GCC unroll 4
  for (int i = 0; i < kN; ++i) p[i] = _mm512_fmadd_ps(c5, r[i], c4);
#pragma GCC unroll 4
  for (int i = 0; i < kN; ++i) p[i] = _mm512_fmadd_ps(p[i], r[i], c3);
#pragma GCC unroll 4
  for (int i = 0; i < kN; ++i) p[i] = _mm512_fmadd_ps(p[i], r[i], c2);
#pragma GCC unroll 4
  for (int i = 0; i < kN; ++i) p[i] = _mm512_fmadd_ps(p[i], r[i], one);
#pragma GCC unroll 4
  for (int i = 0; i < kN; ++i) p[i] = _mm512_fmadd_ps(p[i], r[i], one);
#pragma GCC unroll 4
  for (int i = 0; i < kN; ++i) {
    // t's bits are 0x4B400000 + n; (those + 127) << 23 is 2^n (the high bits shift out).
    const __m512i bits = _mm512_slli_epi32(_mm512_add_epi32(_mm512_castps_si512(t[i]), bias), 23);
    v[i] = _mm512_div_ps(one, _mm512_fmadd_ps(p[i], _mm512_castsi512_ps(bits), one));
  }
}

// 1 / (1 + exp(-v)) on 8 lanes, as logistic16 to the bit (checked on every float) in two
// instructions fewer: v clamped and its negation folded into the FMAs' signs (r here is
// logistic16's -r, so fnmadd steps the polynomial), the exponent bias in the rounding constant.
NN_INLINE_AVX2 __m256 logistic8(__m256 v) {
  const __m256 x = _mm256_max_ps(_mm256_min_ps(v, _mm256_set1_ps(87.f)), _mm256_set1_ps(-87.f));
  const __m256 magic = _mm256_set1_ps(12582912.f + 127.f), one = _mm256_set1_ps(1.f);
  const __m256 t = _mm256_fnmadd_ps(x, _mm256_set1_ps(1.44269504088896341f), magic);  // bits: 0x4B40007F + n
  const __m256 n = _mm256_sub_ps(t, magic);
  const __m256 r = _mm256_fmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f),
                                   _mm256_fmadd_ps(n, _mm256_set1_ps(0.693359375f), x));
  __m256 p = _mm256_fnmadd_ps(_mm256_set1_ps(1.f / 120), r, _mm256_set1_ps(1.f / 24));
  p = _mm256_fnmadd_ps(p, r, _mm256_set1_ps(1.f / 6));
  p = _mm256_fnmadd_ps(p, r, _mm256_set1_ps(0.5f));
  p = _mm256_fnmadd_ps(p, r, one);
  p = _mm256_fnmadd_ps(p, r, one);
  const __m256i bits = _mm256_slli_epi32(_mm256_castps_si256(t), 23);  // 2^n
  return _mm256_div_ps(one, _mm256_fmadd_ps(p, _mm256_castsi256_ps(bits), one));
}

// erf_approx on 8 / 16 lanes (the same FMAs in the same order: equal results).
NN_INLINE_AVX2 __m256 erf8(__m256 v) {
  const __m256 x = _mm256_min_ps(_mm256_max_ps(v, _mm256_set1_ps(-4.f)), _mm256_set1_ps(4.f));
  const __m256 x2 = _mm256_mul_ps(x, x);
  __m256 p = _mm256_set1_ps(kErfAlpha[0]), q = _mm256_set1_ps(kErfBeta[0]);
  for (int k = 1; k < 7; ++k) p = _mm256_fmadd_ps(p, x2, _mm256_set1_ps(kErfAlpha[k]));
  for (int k = 1; k < 5; ++k) q = _mm256_fmadd_ps(q, x2, _mm256_set1_ps(kErfBeta[k]));
  return _mm256_div_ps(_mm256_mul_ps(x, p), q);
}
NN_INLINE_AVX512 __m512 erf16(__m512 v) {
  const __m512 x = min16(max16(v, _mm512_set1_ps(-4.f)), _mm512_set1_ps(4.f));
  const __m512 x2 = _mm512_mul_ps(x, x);
  __m512 p = _mm512_set1_ps(kErfAlpha[0]), q = _mm512_set1_ps(kErfBeta[0]);
  for (int k = 1; k < 7; ++k) p = _mm512_fmadd_ps(p, x2, _mm512_set1_ps(kErfAlpha[k]));
  for (int k = 1; k < 5; ++k) q = _mm512_fmadd_ps(q, x2, _mm512_set1_ps(kErfBeta[k]));
  return _mm512_div_ps(_mm512_mul_ps(x, p), q);
}
// gelu_approx on 8 / 16 lanes.
NN_INLINE_AVX2 __m256 gelu8(__m256 x) {
  const __m256 e = erf8(_mm256_mul_ps(x, _mm256_set1_ps(0.70710678118654752f)));
  return _mm256_mul_ps(_mm256_mul_ps(x, _mm256_add_ps(_mm256_set1_ps(1.f), e)), _mm256_set1_ps(0.5f));
}
NN_INLINE_AVX512 __m512 gelu16(__m512 x) {
  const __m512 e = erf16(_mm512_mul_ps(x, _mm512_set1_ps(0.70710678118654752f)));
  return _mm512_mul_ps(_mm512_mul_ps(x, _mm512_add_ps(_mm512_set1_ps(1.f), e)), _mm512_set1_ps(0.5f));
}

// gelu_tanh_approx on 16 / 8 lanes: x * sigmoid(x (a + b x^2)).
NN_INLINE_AVX512 __m512 gelu_tanh16(__m512 x) {
  __m512 v[1] = {_mm512_mul_ps(x, _mm512_fmadd_ps(_mm512_mul_ps(x, x), _mm512_set1_ps(kGeluTanhB),
                                                  _mm512_set1_ps(kGeluTanhA)))};
  logistic16<1>(v);
  return _mm512_mul_ps(x, v[0]);
}
NN_INLINE_AVX2 __m256 gelu_tanh8(__m256 x) {
  const __m256 u = _mm256_mul_ps(x, _mm256_fmadd_ps(_mm256_mul_ps(x, x), _mm256_set1_ps(kGeluTanhB),
                                                    _mm256_set1_ps(kGeluTanhA)));
  return _mm256_mul_ps(x, logistic8(u));
}

// First n (0..8) lanes set.
NN_INLINE_AVX2 __m256i lane_mask(size_t n) {
  const __m256i lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(n)), lanes);
}

// Stores the first n (< 8) lanes. Not _mm256_maskstore_ps: AMD cores microcode masked
// stores (measured: im2col spent 60% of its time in them).
NN_INLINE_AVX2 void store_first(float* dst, __m256 v, size_t n) {
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, v);
  for (size_t i = 0; i < n; ++i) dst[i] = lanes[i];
}

#endif

}  // namespace nn::cpu

// NNAPI's fixed-point requantization steps in SIMD lanes, and its int8 ADD of two same-shaped
// tensors (ops/elementwise.cpp's addQuant8), shared by the native ADD kernel
// (native_int8_elementwise.cpp, Int8Add) and the int8 convs that apply a residual ADD to the
// rows they have just written (native_int8_conv.cpp). Every form gives the reference's bytes.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "delegates/cpu/native_kernels.h"
#include "nn/ir/model.h"
#include "ops/quant_math.h"

#if NN_NATIVE_X86
#include <immintrin.h>
// GCC 12 calls the AVX-512 intrinsics' unused pass-through operand (_mm512_undefined_*)
// uninitialized wherever they inline.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#define NN_TARGET_INT8_512 __attribute__((target("avx512f,avx512bw,avx512vl,avx2")))
#define NN_TARGET_INT8_AVX2 __attribute__((target("avx2")))
#define NN_INLINE_INT8_512 __attribute__((target("avx512f,avx512bw,avx512vl,avx2"), always_inline)) inline
#endif

namespace nn::cpu {

// NNAPI's MultiplyByQuantizedMultiplier (quant_math.h) for x whose left shift cannot
// overflow, in SIMD. gemmlowp's rounding doubling high multiply by a multiplier m >= 0 is
// floor((x * m + 2^30) / 2^31) (its nudge toward zero for negative products and the
// truncating division add up to that), then a rounding divide by 2^right, ties away from zero.
struct FixedPoint {
  int32_t multiplier = 0;
  int left = 0, right = 0;
  int32_t mask = 0;  // 2^right - 1
  explicit FixedPoint(quant::Multiplier m)
      : multiplier(m.multiplier),
        left(m.shift > 0 ? m.shift : 0),
        right(m.shift > 0 ? 0 : -m.shift),
        mask(static_cast<int32_t>((int64_t{1} << right) - 1)) {}
};

// The CPU runs the AVX-512 F/BW/VL int8 forms and `isa` allows AVX-512.
inline bool avx512_int8(const NativeIsa& isa) {
#if NN_NATIVE_X86
  static const bool has = __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl");
  return isa.avx512 && has;
#else
  (void)isa;
  return false;
#endif
}

#if NN_NATIVE_X86
// FixedPoint's constants in zmm registers, made once per run of a kernel.
struct Fixed16 {
  __m128i left, right;
  __m512i m, half, mask, threshold, one;
  bool rounds;
  NN_INLINE_INT8_512 explicit Fixed16(const FixedPoint& f)
      : left(_mm_cvtsi32_si128(f.left)),
        right(_mm_cvtsi32_si128(f.right)),
        m(_mm512_set1_epi64(f.multiplier)),
        half(_mm512_set1_epi64(int64_t{1} << 30)),
        mask(_mm512_set1_epi32(f.mask)),
        threshold(_mm512_set1_epi32(f.mask >> 1)),
        one(_mm512_set1_epi32(1)),
        rounds(f.right > 0) {}
  NN_INLINE_INT8_512 __m512i apply(__m512i x) const {
    x = _mm512_sll_epi32(x, left);
    const __m512i even = _mm512_srli_epi64(_mm512_add_epi64(_mm512_mul_epi32(x, m), half), 31);
    const __m512i odd =
        _mm512_slli_epi64(_mm512_add_epi64(_mm512_mul_epi32(_mm512_srli_epi64(x, 32), m), half), 1);
    const __m512i high = _mm512_mask_blend_epi32(0xAAAA, even, odd);
    if (!rounds) return high;
    const __m512i rem = _mm512_and_si512(high, mask);
    const __m512i limit = _mm512_add_epi32(threshold, _mm512_srli_epi32(high, 31));
    const __m512i q = _mm512_sra_epi32(high, right);
    return _mm512_mask_add_epi32(q, _mm512_cmpgt_epi32_mask(rem, limit), q, one);
  }
};

NN_TARGET_INT8_AVX2 inline __m256i mbqm8(__m256i x, const FixedPoint& f) {
  x = _mm256_sll_epi32(x, _mm_cvtsi32_si128(f.left));
  const __m256i m = _mm256_set1_epi64x(f.multiplier);
  const __m256i half = _mm256_set1_epi64x(int64_t{1} << 30);
  const __m256i even = _mm256_srli_epi64(_mm256_add_epi64(_mm256_mul_epi32(x, m), half), 31);
  const __m256i odd =
      _mm256_slli_epi64(_mm256_add_epi64(_mm256_mul_epi32(_mm256_srli_epi64(x, 32), m), half), 1);
  const __m256i high = _mm256_blend_epi32(even, odd, 0xAA);
  if (f.right == 0) return high;
  const __m256i rem = _mm256_and_si256(high, _mm256_set1_epi32(f.mask));
  const __m256i threshold = _mm256_add_epi32(_mm256_set1_epi32(f.mask >> 1), _mm256_srli_epi32(high, 31));
  const __m256i q = _mm256_sra_epi32(high, _mm_cvtsi32_si128(f.right));
  return _mm256_sub_epi32(q, _mm256_cmpgt_epi32(rem, threshold));  // + 1 where rem > threshold
}

// 8 int32 (already in the int8 range) to 8 bytes.
NN_TARGET_INT8_AVX2 inline void store8(int8_t* dst, __m256i v) {
  const __m128i w = _mm_packs_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  _mm_storel_epi64(reinterpret_cast<__m128i*>(dst), _mm_packs_epi16(w, w));
}
#endif

// ADD of two same-shaped int8 tensors, NNAPI's addQuant8: each centred input x shifted left by
// 20, times its fixed-point multiplier (scale / twice the larger input scale: <= 1/2, so a
// right shift), summed, times the output's multiplier, + zo, clamped. The arithmetic is
// symmetric in the two inputs. In SIMD (native_int8_add_simd.inc, one loop for AVX-512 and AVX2):
// - the input stage without 64-bit products (the multiplier split at bit 11); the input with
//   the larger scale has the multiplier 1/2 exactly, whose stage is x << 19;
// - the output stage in ChannelRequant's short form (native_int8_conv.cpp): the rounding
//   divide's half, zo and the high multiply's nudge in one 64-bit constant, where the sum
//   allows it.
class Int8AddMath {
 public:
  static constexpr int kLeftShift = 20;

  // The input stage's constants: srdhm(x << 20, M) = floor((x M + 2^10) / 2^11) for |x| < 2^8,
  // = x Mh + ((x Ml + 2^10) >> 11) with M = Mh 2^11 + Ml: int32 products only. Then the
  // rounding divide by 2^right (ties away from zero) as (v + 2^(right-1) + (v < 0 ? -1 : 0)) >> right.
  struct InputStage {
    int32_t high = 0, low = 0, half = 0;
    int right = 0;
    int pow2 = -1;  // the stage is x << pow2 (low 0, no rounding divide, high a power of 2)
    explicit InputStage(quant::Multiplier m)
        : high(m.multiplier >> 11),
          low(m.multiplier & 2047),
          half(m.shift < 0 ? int32_t(int64_t{1} << (-m.shift - 1)) : 0),
          right(m.shift < 0 ? -m.shift : 0) {
      if (low == 0 && right == 0 && high > 0 && (high & (high - 1)) == 0)
        for (pow2 = 0; (int32_t{1} << pow2) != high;) ++pow2;
    }
  };

  // What the SIMD forms (native_int8_add_simd.inc) read.
  struct Lanes {
    int32_t za, zb, zo;
    InputStage ia, ib;
    FixedPoint fo;
    quant::Range range;
    int64_t out_folded = 0;  // the short output stage's constant: 2^30 + (2^(right-1) + zo 2^right) 2^31
    bool out_short = false;
  };

  Int8AddMath(const Operand& a, const Operand& b, const Operand& out, int32_t fuse, const NativeIsa& isa)
      : ma_(quant::quantize_multiplier(a.scale / (2.0 * std::max(a.scale, b.scale)))),
        mb_(quant::quantize_multiplier(b.scale / (2.0 * std::max(a.scale, b.scale)))),
        mo_(quant::quantize_multiplier(2.0 * std::max(a.scale, b.scale) / ((1 << kLeftShift) * double(out.scale)))),
        lanes_{a.zero_point, b.zero_point, out.zero_point, InputStage(ma_), InputStage(mb_), FixedPoint(mo_),
               quant::activation_range(fuse, out), 0, false} {
    const FixedPoint& fo = lanes_.fo;
    // Each rescaled input is below 2^27 in magnitude (|x| <= 255 << 20, times <= 1/2), the
    // sum below 2^28: the output multiplier's left shift must not overflow (never in practice).
    const bool simd = ma_.shift <= 0 && mb_.shift <= 0 && fo.left <= 2;
    // The short output stage: h = floor((x m + 2^30) / 2^31) (|h| <= |x| + 1, |x| < 2^(28 + left))
    // plus the folded constant must fit in int32.
    const int64_t half = fo.right > 0 ? int64_t{1} << (fo.right - 1) : 0;
    const int64_t folded = half + int64_t{lanes_.zo} * (int64_t{1} << fo.right);
    lanes_.out_short = (int64_t{1} << (28 + fo.left)) + 2 + std::abs(folded) < (int64_t{1} << 31);
    // Only the short stage reads the constant; past it the product would overflow.
    lanes_.out_folded = lanes_.out_short ? (int64_t{1} << 30) + folded * (int64_t{1} << 31) : 0;
    avx512_ = simd && avx512_int8(isa);
    avx2_ = simd && !avx512_ && native_conv_supported();
  }

  // "AVX-512", "AVX2" or "scalar": the form run() takes.
  const char* isa_name() const { return avx512_ ? "AVX-512" : avx2_ ? "AVX2" : "scalar"; }

  // out[i] = a[i] + b[i] for i < n; out may be a or b (each vector is read before it is written).
  void run(const int8_t* a, const int8_t* b, int8_t* out, size_t n) const {
    size_t i = 0;
#if NN_NATIVE_X86
    if (avx512_)
      i = run_avx512(a, b, out, n);
    else if (avx2_)
      i = run_avx2(a, b, out, n);
#endif
    for (; i < n; ++i) out[i] = static_cast<int8_t>(scalar(a[i], b[i]));
  }

  // The reference's input stage: (a - za) << 20 (b - zb) rescaled, before the sum.
  int32_t rescaled_a(int32_t a) const {
    return quant::multiply_by_quantized_multiplier((a - lanes_.za) * (1 << kLeftShift), ma_);
  }
  int32_t rescaled_b(int32_t b) const {
    return quant::multiply_by_quantized_multiplier((b - lanes_.zb) * (1 << kLeftShift), mb_);
  }
  quant::Multiplier output_multiplier() const { return mo_; }
  int32_t output_zero_point() const { return lanes_.zo; }
  quant::Range range() const { return lanes_.range; }

  int32_t scalar(int32_t a, int32_t b) const {
    const int32_t sa = quant::multiply_by_quantized_multiplier((a - lanes_.za) * (1 << kLeftShift), ma_);
    const int32_t sb = quant::multiply_by_quantized_multiplier((b - lanes_.zb) * (1 << kLeftShift), mb_);
    return std::clamp(quant::multiply_by_quantized_multiplier(sa + sb, mo_) + lanes_.zo, lanes_.range.lo,
                      lanes_.range.hi);
  }

 private:
#if NN_NATIVE_X86
  // native_int8_add.cpp. AVX-512: all n (the last partial vector masked); AVX2: the whole
  // vectors of 8, returning how many lanes it wrote.
  NN_TARGET_INT8_512 size_t run_avx512(const int8_t* a, const int8_t* b, int8_t* out, size_t n) const;
  NN_TARGET_INT8_AVX2 size_t run_avx2(const int8_t* a, const int8_t* b, int8_t* out, size_t n) const;
#endif

  quant::Multiplier ma_, mb_, mo_;
  Lanes lanes_;
  bool avx512_ = false, avx2_ = false;
};

// Int8AddMath's ADD as four 256-entry byte tables, looked up 64 bytes a step with AVX-512
// VBMI's two-table byte permute. The output stage of a sum s = sa(a) + sb(b) of the two
// rescaled inputs is floor((s P + K) / N) (P the output multiplier, N = 2^(31 + right), K the
// rounding constants), so with sa P = qa N + ra and sb P + K = qb N + rb (0 <= ra, rb < N) it
// is qa + qb + [ra + rb >= N]. The carry compares ra with N - rb: both replaced by their rank
// among the 256 values of N - rb, a byte each. So out = clamp(A[a] + B[b] + [CA[a] > CB[b]])
// with A = qa + zo and B = qb moved into int8 (clamped where the clamp of the sum decides
// anyway). The floor form rounds the output's ties upward where NNAPI rounds a negative
// tie away from zero: build() compares every one of the 65536 input pairs with
// Int8AddMath and refuses the tables if any differs.
class Int8AddTable {
 public:
  // False (the tables unusable) when some pair's byte differs from `math`'s, or the values
  // do not fit a byte each.
  bool build(const Int8AddMath& math);

  // out[i] = a[i] + b[i] for i < n (AVX-512 VBMI where the CPU has it, else byte by byte);
  // out may be a or b.
  void run(const int8_t* a, const int8_t* b, int8_t* out, size_t n, bool vbmi) const;

  int8_t scalar(int8_t a, int8_t b) const {
    const uint8_t ua = static_cast<uint8_t>(a), ub = static_cast<uint8_t>(b);
    const int32_t v = a_[ua] + b1_[ub] + b_[ub] + (ca_[ua] > cb_[ub] ? 1 : 0);
    return static_cast<int8_t>(std::clamp(v, lo_, hi_));
  }

 private:
#if NN_NATIVE_X86
  template <bool kSplit>
  __attribute__((target("avx512f,avx512bw,avx512vl,avx512vbmi,avx2"))) void run_vbmi(const int8_t* a,
                                                                                      const int8_t* b, int8_t* out,
                                                                                      size_t n) const;
#endif
  // Indexed by the input byte as unsigned (a >= 0: entries 0-127). Where B spans more than a
  // byte (`split_`), B = b1_ + b_ with a_ + b1_ within int8 for every pair, so one
  // saturating add of b_ + carry clamps; else b1_ is 0.
  alignas(64) int8_t a_[256] = {}, b_[256] = {}, b1_[256] = {};
  bool split_ = false;
  alignas(64) uint8_t ca_[256] = {}, cb_[256] = {};
  int32_t lo_ = -128, hi_ = 127;
};

}  // namespace nn::cpu

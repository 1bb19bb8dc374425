// The int8 convs of native_int8.h. CONV_2D and the tiled TRANSPOSE_CONV_2D are one int8 GEMM,
// out[p][j] = requantize(bias[j] + sum_k (x[p][k] - zx) * w[j][k]), int32 accumulators
// exact, NNAPI's per-channel requantization (the reference's integers, so its bytes).
//
// - AVX-512 VNNI: vpdpbusd multiplies unsigned by signed bytes, four at a time. The input
//   enters as x ^ 0x80 = x + 128 (unsigned), so the sum is short by (128 + zx) * sum_k w[j][k],
//   which the bias absorbs when the weights are packed. 8 pixels x 16 channels a tile.
// - AVX2: vpmaddubsw on |x| (unsigned) and w with x's sign (vpsignb), then vpmaddwd by ones:
//   |x| <= 128 and |w| <= 127 keep each int16 pair sum within 2 * 128 * 127, so exact (not
//   on x + 128, whose pair sums reach 2 * 255 * 127 and saturate); the bias absorbs
//   -zx * sum(w). 4 pixels x 16 channels a tile. A weight -128 (its sign flip overflows) takes
//   vpmaddwd on inputs widened to int16 (x - zx), 6 pixels x 8 channels.
// - AVX-VNNI (AVX2 CPUs that have it): the AVX2 tile with VNNI's scheme, x + 128 against w
//   by one ymm vpdpbusd (no int16 step, so any weight); the depthwise conv keeps the AVX2
//   interleave and sums its |x| . sign(w, x) quads by vpdpbusd.
//
// - AMX (with AVX-512 VNNI, where the CPU and the OS allow it and the shape pays,
//   amx_int8_conv_pays): TDPBSSD multiplies signed by signed bytes, 16 rows x 64 bytes of x against
//   64 bytes x 16 columns of w into a 16 x 16 int32 tile, so x enters as it is and the bias
//   holds -zx * sum(w). The tiles go to a per-thread int32 block and through the same
//   requantization as the VNNI form (the same exact accumulators, so the same bytes).
//
// A transpose conv whose kernel equals its stride (no padding: each output pixel has one
// input pixel) is this GEMM with j over (ky, kx, o), its rows scattered to the output; 2x2
// to one channel (a segmentation head) puts its 4 columns of several pixels in one vector
// and writes them straight to the two output rows (Int8Gemm::deconv_2x2_row).
//
// Narrow window convs (RGB stems) read their taps from window rows laid out once per output
// row instead of gathered GEMM rows (Int8WindowConv): flipped bytes into vpdpbusd with
// AVX-512 VNNI, int16 x - zx into vpmaddwd on AVX2 (exact for any weight, as the sign trick
// on bytes would be too, but with fewer ops per product: no vpsignb, no widening vpmaddwd).
#include <pthreadpool.h>

#include <algorithm>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "delegates/cpu/native_int8.h"
#include "delegates/cpu/native_int8_add.h"
#include "ops/op_params.h"
#include "ops/quant_math.h"

#if NN_NATIVE_X86
// GCC 12 calls the AVX-512 intrinsics' unused pass-through operand uninitialized.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#define NN_TARGET_VNNI __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx2")))
#define NN_TARGET_VNNI_VBMI __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx512vbmi,avx2")))
#define NN_TARGET_I8_AVX2 __attribute__((target("avx2,fma")))
#define NN_INLINE_VNNI \
  __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx2"), always_inline)) inline
#define NN_INLINE_I8_512 __attribute__((target("avx512f,avx512bw,avx512vl,avx2"), always_inline)) inline
#define NN_TARGET_I8_512 __attribute__((target("avx512f,avx512bw,avx512vl,avx2")))
#define NN_INLINE_I8_AVX2 __attribute__((target("avx2,fma"), always_inline)) inline
// A lambda inside an AVX2 kernel: lambdas take no target from the function around them.
#define NN_LAMBDA_I8_AVX2 __attribute__((target("avx2,fma"), always_inline))
#if defined(__linux__) && defined(__x86_64__)  // AMX exists in 64-bit mode only
#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>
#define NN_AMX 1
#else
#define NN_AMX 0
#endif
#else
#define NN_AMX 0
#endif

namespace nn::cpu {
namespace {

#if NN_NATIVE_X86
// acc += u (unsigned bytes) . w (signed bytes) per int32 lane, in acc's own register. GCC 12
// gives the intrinsic a fresh destination inside unrolled tiles and copies each accumulator
// back and forth every step (two moves per vpdpbusd); the tied asm operand keeps them put.
__attribute__((target("avx512f,avx512vnni"), always_inline)) inline void dpbusd_in_place(__m512i& acc, __m512i u,
                                                                                        __m512i w) {
  asm("vpdpbusd %2, %1, %0" : "+v"(acc) : "v"(u), "v"(w));
}

// 8 int32 lanes saturated to int8 (the packs saturate as the requantization's clamp to int8
// needs), the first `here` (at most 8) stored at dst.
__attribute__((target("avx2"), always_inline)) inline void store_int8x8(int8_t* dst, __m256i v, size_t here) {
  const __m128i w16 = _mm_packs_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  const __m128i b8 = _mm_packs_epi16(w16, w16);
  if (here == 8) {
    _mm_storel_epi64(reinterpret_cast<__m128i*>(dst), b8);
  } else {
    alignas(16) int8_t tmp[16];
    _mm_store_si128(reinterpret_cast<__m128i*>(tmp), b8);
    std::memcpy(dst, tmp, here);
  }
}

// The same on ymm with AVX-VNNI's VEX encoding, for CPUs without AVX-512 (Intel 12th gen and
// later, Zen 5 with AVX-512 off). In asm so that the AVX2 kernels that hold it need no
// avxvnni target: it runs only where NativeIsa::avx_vnni says the CPU has it.
// acc += u . w by int16 pairs (vpmaddwd, then vpaddd) in acc's own register, w from a register
// or memory: as dpbusd_in_place, GCC 12 keeps unrolled tiles' accumulators put only so.
__attribute__((target("avx2"), always_inline)) inline void maddwd_in_place(__m256i& acc, __m256i u,
                                                                           const __m256i& w) {
  __m256i product;
  asm("vpmaddwd %3, %2, %1\n\tvpaddd %1, %0, %0" : "+x"(acc), "=&x"(product) : "x"(u), "xm"(w));
}

__attribute__((target("avx2"), always_inline)) inline void dpbusd_ymm(__m256i& acc, __m256i u, __m256i w) {
  asm("%{vex%} vpdpbusd %2, %1, %0" : "+x"(acc) : "x"(u), "x"(w));
}
#endif

#if NN_AMX
// AMX in asm (no amx target, so nothing else here needs one; it runs only where
// NativeIsa::amx says it may). The tile loads and stores name their memory in no operand:
// the "memory" clobbers keep the staging copies before the loads and the reads of the
// stored block after the stores. Tiles: 0-3 accumulators (rows 0-15 / 16-31 x columns
// 0-15 / 16-31: 0, 1, 2, 3), 4-5 x (rows 0-15, 16-31), 6-7 w (columns 0-15, 16-31).
#define NN_AMX_LOAD(t, base, stride) \
  asm volatile("tileloadd (%0,%1,1), %%tmm" #t ::"r"(base), "r"(static_cast<long>(stride)) : "memory")
#define NN_AMX_STORE(t, base, stride) \
  asm volatile("tilestored %%tmm" #t ", (%0,%1,1)" ::"r"(base), "r"(static_cast<long>(stride)) : "memory")
#define NN_AMX_ZERO(t) asm volatile("tilezero %%tmm" #t ::)
#define NN_AMX_DPBSSD(c, a, b) asm volatile("tdpbssd %%tmm" #b ", %%tmm" #a ", %%tmm" #c ::)

// Palette 1, every tile 16 rows x 64 bytes (x: 16 rows x 64 bytes of k; w: 16 groups of 4
// k x 16 columns; accumulators: 16 x 16 int32).
struct alignas(64) AmxConfig {
  uint8_t palette = 1, start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {64, 64, 64, 64, 64, 64, 64, 64};
  uint8_t rows[16] = {16, 16, 16, 16, 16, 16, 16, 16};
};
static_assert(sizeof(AmxConfig) == 64, "the tile configuration is 64 bytes");

// Loads the configuration on this thread (tile state is per thread) and releases the tiles
// at scope end, so an idle worker does not carry 8 KB of live tile state through context
// switches.
class AmxTiles {
 public:
  AmxTiles() {
    static const AmxConfig config;
    asm volatile("ldtilecfg %0" ::"m"(config));
  }
  ~AmxTiles() { asm volatile("tilerelease" ::: "memory"); }
  AmxTiles(const AmxTiles&) = delete;
  AmxTiles& operator=(const AmxTiles&) = delete;
};
#endif

// Per-output-channel NNAPI fixed-point multipliers: these kernels implement NNAPI's
// requantization only (the CPU delegate gives them no op under Requantization::kFp32).
std::vector<quant::Multiplier> nnapi_multipliers(const Operand& in, const Operand& filter, const Operand& out,
                                                 size_t channels) {
  std::vector<quant::Multiplier> m;
  for (const quant::Requantizer& r : quant::conv_requantizers(Requantization::kNnapi, in, filter, out, channels))
    m.push_back(r.fixed);
  return m;
}

using T = OperationType;
constexpr OperandType kQ8 = OperandType::TENSOR_QUANT8_ASYMM_SIGNED;
constexpr OperandType kPerChannel = OperandType::TENSOR_QUANT8_SYMM_PER_CHANNEL;

bool has_vnni(const NativeIsa& isa) {
#if NN_NATIVE_X86
  static const bool has = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                          __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni");
  return isa.avx512 && has;
#else
  (void)isa;
  return false;
#endif
}

bool has_vbmi() {
#if NN_NATIVE_X86
  static const bool has = __builtin_cpu_supports("avx512vbmi");
  return has;
#else
  return false;
#endif
}

constexpr size_t kVnniRows = 8, kVnniCols = 16;
constexpr size_t kAvx2Rows = 6, kAvx2Cols = 8;
constexpr size_t kSignRows = 4, kSignCols = 8;
constexpr size_t kDpRows = 6;  // the AVX-VNNI form: one register per product vector
constexpr size_t kTilesPerTask = 8;
constexpr size_t kAmxRows = 32, kAmxCols = 32;

// Per channel, the most |accumulator| any kernel form here reaches: |bias| + (383 + |zx|) *
// sum |w| covers x - zx (|.| <= 255), x + 128 against bias - (128 + zx) * sum w, and x
// against bias - zx * sum w. w[j * channel_stride + t * tap_stride] for t < taps.
std::vector<int64_t> accumulator_bounds(const int8_t* w, size_t channels, size_t taps, size_t channel_stride,
                                        size_t tap_stride, const int32_t* bias, int32_t zx) {
  std::vector<int64_t> bound(channels, 0);
  for (size_t j = 0; j < channels; ++j) {
    int64_t sum = 0;
    for (size_t t = 0; t < taps; ++t) sum += std::abs(int32_t{w[j * channel_stride + t * tap_stride]});
    bound[j] = (bias ? std::abs(int64_t{bias[j]}) : 0) + (383 + std::abs(int64_t{zx})) * sum;
  }
  return bound;
}

// NNAPI's requantization per output channel (ops/quant_math.h): acc * multiplier[j] by the
// rounding doubling high multiply, a rounding right shift, + zo, clamped to the activation
// range. Right shifts only (multipliers below 1, as convs have). In SIMD the high multiply
// by m >= 0 is floor((x * m + 2^30) / 2^31), gemmlowp's nudge and truncation combined.
//
// The short form (Columns16::apply, 11-13 vector ops per 16 outputs against 17) folds the
// rounding right shift's half, the zero point and the high multiply's nudge into one 64-bit
// constant: with h = floor((x * m + 2^30) / 2^31) and s > 0, NNAPI's result is
//   ((h + 2^(s-1) - [h < 0]) >> s) + zo = (floor((x * m + 2^30 + (2^(s-1) + zo * 2^s) * 2^31) / 2^31)
//                                          - [x < 0]) >> s
// (h < 0 exactly when x < 0, but for x = -1, m = 2^30, where both sides give 0), and h + zo
// for s = 0. It needs that sum to fit in int32, which the accumulator bound each kernel
// passes (|bias| + 511 * sum |w|) decides per op; the long form runs otherwise.
//
// With use_fp32() (CpuOptions::int8_fp32_requant) the form of XNNPACK's and qnnpack's
// kernels instead: float(acc) * scale + zo in one fused multiply-add, scale = multiplier *
// 2^(shift - 31) as a float, rounded to nearest (ties to even), clamped: 3 vector ops per 16
// outputs where the accumulator bound keeps |acc * scale| + |zo| below 2^30 (else the product
// clamped to the range less zo first, zo added after the rounding). Within one step of
// NNAPI's: both results are the exact value rounded down or up (NNAPI's rounds twice, the
// float one is off it by a few 2^-24 of it), so they differ only where the exact value lies
// that close to a half or NNAPI's second rounding meets one.
struct ChannelRequant {
  // acc_bound: per channel, the most |accumulator| the kernel can reach.
  ChannelRequant(const std::vector<quant::Multiplier>& multipliers, size_t padded, int32_t zo_,
                 quant::Range range_, const std::vector<int64_t>& acc_bound)
      : mult(padded, 0),
        right(padded, 0),
        mask(padded, 0),
        threshold(padded, 0),
        folded_even(padded / 2, 0),
        folded_odd(padded / 2, 0),
        negative_rounds(padded / 16, 0),
        scale(padded, 0.f),
        mults(multipliers),
        zo(zo_),
        range(range_) {
    short_form = true;
    for (size_t j = 0; j < multipliers.size(); ++j) {
      mult[j] = multipliers[j].multiplier;
      scale[j] = float(std::ldexp(double(multipliers[j].multiplier), multipliers[j].shift - 31));
      right[j] = -multipliers[j].shift;
      mask[j] = static_cast<int32_t>((int64_t{1} << right[j]) - 1);
      threshold[j] = mask[j] >> 1;
      const int64_t half = right[j] > 0 ? int64_t{1} << (right[j] - 1) : 0;
      const int64_t pre_shift = half + int64_t{zo} * (int64_t{1} << right[j]);  // added to h
      // Where it passes 2^31 the short form is off and the constant unused; it would overflow.
      const bool fits = std::abs(pre_shift) < (int64_t{1} << 31);
      (j % 2 ? folded_odd : folded_even)[j / 16 * 8 + j % 16 / 2] =
          fits ? (int64_t{1} << 30) + pre_shift * (int64_t{1} << 31) : 0;
      if (right[j] > 0) negative_rounds[j / 16] |= uint16_t(1u << (j % 16));
      // fp32: |acc * scale| + |zo| well inside int32, so the rounded product needs no clamp
      // before its conversion (an overflow would convert to INT32_MIN) and the adds cannot wrap.
      if (double(acc_bound[j]) * scale[j] + std::abs(zo) >= 0x1p30) fp32_bounded = false;
      const int64_t h_most = acc_bound[j] + 2;  // |h| <= |x| + 1 (m < 2^31)
      if (!fits || h_most + std::abs(pre_shift) + 1 >= (int64_t{1} << 31)) short_form = false;
    }
  }
  void use_fp32() { fp32 = true; }
  int8_t scalar(int32_t acc, size_t j) const {
    if (fp32 && fp32_bounded)  // the SIMD forms' one rounding of the fused multiply-add
      return static_cast<int8_t>(
          std::clamp(int32_t(std::nearbyint(std::fma(float(acc), scale[j], float(zo)))), range.lo, range.hi));
    if (fp32) {
      const float v = std::clamp(float(acc) * scale[j], float(range.lo - zo), float(range.hi - zo));
      return static_cast<int8_t>(int32_t(std::nearbyint(v)) + zo);
    }
    const int32_t v = quant::multiply_by_quantized_multiplier(acc, mults[j]) + zo;
    return static_cast<int8_t>(std::clamp(v, range.lo, range.hi));
  }
#if NN_NATIVE_X86
  // The per-column constants of columns [j, j + 16) in registers, for loops that requantize
  // many rows of the same columns (int8 stores may alias the vectors, so the compiler would
  // reload them per row).
  struct Columns16 {
    __m512i mult, mult_odd, folded_even, folded_odd, mask, threshold, right, zo, lo, hi;
    __m512 scale, scaled_lo, scaled_hi, float_zo;  // fp32: the range less zo, zo, as floats
    __mmask16 negative_rounds;
    bool short_form, clamp_lo, clamp_hi, fp32, fp32_bounded;
    // The activation range where it is narrower than int8's: callers store with signed
    // saturation (vpmovsdb), which is the clamp to [-128, 127].
    NN_INLINE_I8_512 __m512i clamp(__m512i v) const {
      if (clamp_lo) v = _mm512_max_epi32(v, lo);
      if (clamp_hi) v = _mm512_min_epi32(v, hi);
      return v;
    }
    NN_INLINE_I8_512 __m512i apply(__m512i x) const {
      if (fp32) {
        if (fp32_bounded) return clamp(_mm512_cvtps_epi32(_mm512_fmadd_ps(_mm512_cvtepi32_ps(x), scale, float_zo)));
        __m512 v = _mm512_mul_ps(_mm512_cvtepi32_ps(x), scale);
        v = _mm512_min_ps(_mm512_max_ps(v, scaled_lo), scaled_hi);
        return clamp(_mm512_add_epi32(_mm512_cvtps_epi32(v), zo));
      }
      if (short_form) {
        const __m512i even = _mm512_add_epi64(_mm512_mul_epi32(x, mult), folded_even);
        const __m512i odd =
            _mm512_add_epi64(_mm512_mul_epi32(_mm512_srli_epi64(x, 32), mult_odd), folded_odd);
        __m512i h = _mm512_mask_blend_epi32(0xAAAA, _mm512_srli_epi64(even, 31), _mm512_slli_epi64(odd, 1));
        h = _mm512_add_epi32(h, _mm512_maskz_srai_epi32(negative_rounds, x, 31));  // - [x < 0]
        return clamp(_mm512_srav_epi32(h, right));
      }
      const __m512i half = _mm512_set1_epi64(int64_t{1} << 30);
      const __m512i even = _mm512_srli_epi64(_mm512_add_epi64(_mm512_mul_epi32(x, mult), half), 31);
      const __m512i odd =
          _mm512_slli_epi64(_mm512_add_epi64(_mm512_mul_epi32(_mm512_srli_epi64(x, 32), mult_odd), half), 1);
      const __m512i high = _mm512_mask_blend_epi32(0xAAAA, even, odd);
      const __m512i rem = _mm512_and_si512(high, mask);
      const __m512i limit = _mm512_add_epi32(threshold, _mm512_srli_epi32(high, 31));
      const __m512i q = _mm512_srav_epi32(high, right);
      const __m512i v = _mm512_add_epi32(
          _mm512_mask_add_epi32(q, _mm512_cmpgt_epi32_mask(rem, limit), q, _mm512_set1_epi32(1)), zo);
      return clamp(v);
    }
  };
  NN_INLINE_I8_512 Columns16 columns16(size_t j) const {
    Columns16 c;
    c.mult = _mm512_loadu_si512(mult.data() + j);
    c.mult_odd = _mm512_srli_epi64(c.mult, 32);
    c.folded_even = _mm512_loadu_si512(folded_even.data() + j / 2);
    c.folded_odd = _mm512_loadu_si512(folded_odd.data() + j / 2);
    c.negative_rounds = negative_rounds[j / 16];
    c.short_form = short_form;
    c.fp32 = fp32;
    c.fp32_bounded = fp32_bounded;
    c.scale = _mm512_loadu_ps(scale.data() + j);
    c.float_zo = _mm512_set1_ps(float(zo));
    c.scaled_lo = _mm512_set1_ps(float(range.lo - zo));
    c.scaled_hi = _mm512_set1_ps(float(range.hi - zo));
    c.clamp_lo = range.lo > -128;
    c.clamp_hi = range.hi < 127;
    c.mask = _mm512_loadu_si512(mask.data() + j);
    c.threshold = _mm512_loadu_si512(threshold.data() + j);
    c.right = _mm512_loadu_si512(right.data() + j);
    c.zo = _mm512_set1_epi32(zo);
    c.lo = _mm512_set1_epi32(range.lo);
    c.hi = _mm512_set1_epi32(range.hi);
    return c;
  }

  NN_INLINE_I8_512 __m512i apply16(__m512i x, size_t j) const {
    return columns16(j).apply(x);
  }

  // The fp32 form's constants for 8 columns, and the form (Columns8::apply and apply8).
  // Callers pack with signed saturation (vpackssdw, vpacksswb), which is the clamp to
  // [-128, 127]: only a narrower activation range takes vpmaxsd / vpminsd.
  struct Fp32Columns8 {
    __m256 scale, float_zo, scaled_lo, scaled_hi;
    __m256i zo, lo, hi;
    bool bounded, clamp_lo, clamp_hi;
    NN_INLINE_I8_AVX2 __m256i apply(__m256i x) const {
      __m256i q;
      if (bounded) {
        q = _mm256_cvtps_epi32(_mm256_fmadd_ps(_mm256_cvtepi32_ps(x), scale, float_zo));
      } else {
        const __m256 v = _mm256_mul_ps(_mm256_cvtepi32_ps(x), scale);
        q = _mm256_add_epi32(_mm256_cvtps_epi32(_mm256_min_ps(_mm256_max_ps(v, scaled_lo), scaled_hi)), zo);
      }
      if (clamp_lo) q = _mm256_max_epi32(q, lo);
      if (clamp_hi) q = _mm256_min_epi32(q, hi);
      return q;
    }
  };
  NN_INLINE_I8_AVX2 Fp32Columns8 fp32_columns8(size_t j) const {
    return {_mm256_loadu_ps(scale.data() + j),
            _mm256_set1_ps(float(zo)),
            _mm256_set1_ps(float(range.lo - zo)),
            _mm256_set1_ps(float(range.hi - zo)),
            _mm256_set1_epi32(zo),
            _mm256_set1_epi32(range.lo),
            _mm256_set1_epi32(range.hi),
            fp32_bounded,
            range.lo > -128,
            range.hi < 127};
  }

  // Columns [j, j + 8) with AVX2: the short form as Columns16's (a lane mask for the s > 0
  // correction), else apply8.
  struct Columns8 {
    const ChannelRequant* rq;
    size_t j;
    __m256i mult, mult_odd, folded_even, folded_odd, right, negative_rounds, lo, hi;
    Fp32Columns8 fp32_form;
    bool clamp_lo, clamp_hi, fp32;
    NN_INLINE_I8_AVX2 __m256i apply(__m256i x) const {
      if (fp32) return fp32_form.apply(x);
      if (!rq->short_form) return rq->apply8(x, j);
      const __m256i even = _mm256_add_epi64(_mm256_mul_epi32(x, mult), folded_even);
      const __m256i odd = _mm256_add_epi64(_mm256_mul_epi32(_mm256_srli_epi64(x, 32), mult_odd), folded_odd);
      __m256i h = _mm256_blend_epi32(_mm256_srli_epi64(even, 31), _mm256_slli_epi64(odd, 1), 0xAA);
      h = _mm256_add_epi32(h, _mm256_and_si256(_mm256_srai_epi32(x, 31), negative_rounds));  // - [x < 0]
      __m256i v = _mm256_srav_epi32(h, right);
      if (clamp_lo) v = _mm256_max_epi32(v, lo);
      if (clamp_hi) v = _mm256_min_epi32(v, hi);
      return v;
    }
  };
  NN_INLINE_I8_AVX2 Columns8 columns8(size_t j) const {
    Columns8 c;
    c.rq = this;
    c.j = j;
    c.mult = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(mult.data() + j));
    c.mult_odd = _mm256_srli_epi64(c.mult, 32);
    c.folded_even = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(folded_even.data() + j / 2));
    c.folded_odd = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(folded_odd.data() + j / 2));
    c.right = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(right.data() + j));
    c.negative_rounds = _mm256_cmpgt_epi32(c.right, _mm256_setzero_si256());
    c.lo = _mm256_set1_epi32(range.lo);
    c.hi = _mm256_set1_epi32(range.hi);
    c.clamp_lo = range.lo > -128;
    c.clamp_hi = range.hi < 127;
    c.fp32 = fp32;
    c.fp32_form = fp32_columns8(j);
    return c;
  }

  NN_INLINE_I8_AVX2 __m256i apply8(__m256i x, size_t j) const {
    if (fp32) return fp32_columns8(j).apply(x);
    const __m256i m = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(mult.data() + j));
    const __m256i half = _mm256_set1_epi64x(int64_t{1} << 30);
    const __m256i even = _mm256_srli_epi64(_mm256_add_epi64(_mm256_mul_epi32(x, m), half), 31);
    const __m256i odd = _mm256_slli_epi64(
        _mm256_add_epi64(_mm256_mul_epi32(_mm256_srli_epi64(x, 32), _mm256_srli_epi64(m, 32)), half), 1);
    const __m256i high = _mm256_blend_epi32(even, odd, 0xAA);
    const __m256i rem =
        _mm256_and_si256(high, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(mask.data() + j)));
    const __m256i limit =
        _mm256_add_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(threshold.data() + j)),
                         _mm256_srli_epi32(high, 31));
    const __m256i q =
        _mm256_srav_epi32(high, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(right.data() + j)));
    const __m256i v =
        _mm256_add_epi32(_mm256_sub_epi32(q, _mm256_cmpgt_epi32(rem, limit)), _mm256_set1_epi32(zo));
    return _mm256_min_epi32(_mm256_max_epi32(v, _mm256_set1_epi32(range.lo)), _mm256_set1_epi32(range.hi));
  }

#endif
  std::vector<int32_t> mult, right, mask, threshold;  // per channel, padded
  // The short form's constant per channel, even and odd channels apart (index j / 16 * 8 +
  // j % 16 / 2), and per 16 channels which have s > 0.
  std::vector<int64_t> folded_even, folded_odd;
  std::vector<uint16_t> negative_rounds;
  std::vector<float> scale;  // fp32: multiplier * 2^(shift - 31) per channel, padded
  bool short_form = false;
  bool fp32 = false;
  bool fp32_bounded = true;  // every channel's |acc * scale| + |zo| below 2^30
  std::vector<quant::Multiplier> mults;
  int32_t zo;
  quant::Range range;
};

// The int8 GEMM: x [rows][k] int8 -> out [rows][n] int8, with per-column weights, bias
// and requantization.
class Int8Gemm {
 public:
  // w: [n][k] symmetric int8; bias [n] or null; mult: NNAPI's per column (shift <= 0).
  // amx: the AMX form where isa allows it (make_native_int8_conv decides by the shape).
  Int8Gemm(size_t k, size_t n, const int8_t* w, const int32_t* bias,
           const std::vector<quant::Multiplier>& mult, int32_t zx, int32_t zo, quant::Range range,
           const NativeIsa& isa, bool amx = false, size_t rows = 0)
      : k_(k),
        n_(n),
        n_pad_((n + kVnniCols - 1) / kVnniCols * kVnniCols),
        zx_(zx),
        vnni_(has_vnni(isa)),
        avx2_(!vnni_ && native_conv_supported()),
        dp_(avx2_ && isa.avx_vnni),
        sign_(avx2_ && (dp_ || std::find(w, w + n * k, int8_t{-128}) == w + n * k)),
        requant_(mult, n_pad_, zo, range, accumulator_bounds(w, n, k, k, 1, bias, zx)) {
    bias_.assign(n_pad_, 0);
    for (size_t j = 0; j < n; ++j) {
      int32_t wsum = 0;
      for (size_t i = 0; i < k; ++i) wsum += w[j * k + i];
      bias_[j] = (bias ? bias[j] : 0) - (vnni_ || dp_ ? (128 + zx) * wsum : sign_ ? zx * wsum : 0);
    }
    if (sign_) {  // [n / 8][ceil(k / 4)][8 columns][4 bytes] (also dp_'s)
      k_groups_ = (k + 3) / 4;
      packed8_.assign(n_pad_ * k_groups_ * 4, 0);
      for (size_t j = 0; j < n; ++j)
        for (size_t i = 0; i < k; ++i)
          packed8_[((j / 8 * k_groups_ + i / 4) * 8 + j % 8) * 4 + i % 4] = w[j * k + i];
    } else if (vnni_) {  // [n / 16][ceil(k / 4)][16 columns][4 bytes]
      k_groups_ = (k + 3) / 4;
      packed8_.assign(n_pad_ * k_groups_ * 4, 0);
      for (size_t j = 0; j < n; ++j)
        for (size_t i = 0; i < k; ++i)
          packed8_[((j / 16 * k_groups_ + i / 4) * 16 + j % 16) * 4 + i % 4] = w[j * k + i];
    } else {  // [n / 8][ceil(k / 2)][8 columns][2 int16]
      k_groups_ = (k + 1) / 2;
      packed16_.assign(n_pad_ * k_groups_ * 2, 0);
      for (size_t j = 0; j < n; ++j)
        for (size_t i = 0; i < k; ++i)
          packed16_[((j / 8 * k_groups_ + i / 2) * 8 + j % 8) * 2 + i % 2] = w[j * k + i];
    }
#if NN_AMX
    amx_ = amx && isa.amx && vnni_ && amx_int8_usable();
#else
    (void)amx;
#endif
    // Each task loads the tile configuration and releases the tiles (a fixed cost): tasks of
    // rows / 8 (some for each thread), 64 to 512 rows in whole blocks.
    amx_task_rows_ = std::clamp<size_t>((rows / 8 + kAmxRows - 1) / kAmxRows * kAmxRows, 64, 512);
    if (amx_) {  // [n / 16][k / 64 rounded up][16 groups of 4 k][16 columns][4 bytes], zeros past k
      amx_steps_ = (k + 63) / 64;
      amx_w_.assign(n_pad_ * amx_steps_ * 64, 0);
      for (size_t j = 0; j < n; ++j)
        for (size_t i = 0; i < k; ++i)
          amx_w_[((j / 16 * amx_steps_ * 16 + i / 4) * 16 + j % 16) * 4 + i % 4] = w[j * k + i];
      amx_bias_.assign(n_pad_, 0);
      for (size_t j = 0; j < n; ++j) {
        int32_t wsum = 0;
        for (size_t i = 0; i < k; ++i) wsum += w[j * k + i];
        amx_bias_[j] = (bias ? bias[j] : 0) - zx * wsum;  // x enters as it is (signed)
      }
    }
    // scalar path: weights as given, bias uncorrected
    w_.assign(w, w + n * k);
    raw_bias_.assign(n, 0);
    if (bias) std::copy(bias, bias + n, raw_bias_.begin());
    if (avx2_ && n == 4 && k % 8 == 0) {  // the AVX2 four-column form: 2 rows x 4 columns a ymm
      quad16_w_.assign(k / 2 * 16, 0);
      for (size_t g = 0; g < k / 2; ++g)
        for (size_t lane = 0; lane < 8; ++lane)
          for (size_t b = 0; b < 2; ++b) quad16_w_[(g * 8 + lane) * 2 + b] = w[lane % 4 * k + 2 * g + b];
      for (size_t lane = 0; lane < 8; ++lane) {
        int32_t wsum = 0;
        for (size_t i = 0; i < k; ++i) wsum += w[lane % 4 * k + i];
        quad16_bias_[lane] = (bias ? bias[lane % 4] : 0) - zx * wsum;  // x enters as it is
      }
    }
    // the four-column form: 4 rows x 4 columns a vector (its requantization also the AVX2 form's,
    // whose weights are quad16_w_: k_groups_ counts other groups there)
    if ((vnni_ && n == 4 && k % 4 == 0) || !quad16_w_.empty()) {
      if (vnni_) {
        quad_w_.assign(k_groups_ * 64, 0);
        for (size_t g = 0; g < k_groups_; ++g)
          for (size_t lane = 0; lane < 16; ++lane)
            for (size_t b = 0; b < 4; ++b) quad_w_[(g * 16 + lane) * 4 + b] = w[lane % 4 * k + 4 * g + b];
      }
      std::vector<quant::Multiplier> m16(16);
      std::vector<int64_t> bounds = accumulator_bounds(w, n, k, k, 1, bias, zx), bounds16(16);
      for (size_t lane = 0; lane < 16; ++lane) {
        m16[lane] = mult[lane % 4];
        bounds16[lane] = bounds[lane % 4];
        quad_bias_[lane] = bias_[lane % 4];
      }
      quad_requant_ = std::make_unique<ChannelRequant>(m16, 16, zo, range, bounds16);
    }
  }

  // The 2x2/2 transpose conv to one channel (a segmentation head's last layer: 4 columns),
  // when the GEMM has the four-column form: 4 input pixels x 4 columns per vector, and the
  // columns (ky, kx) go straight to the two output rows. x: `pixels` rows of k bytes.
  bool has_deconv_2x2() const { return quad_requant_ != nullptr; }
#if NN_NATIVE_X86
  void deconv_2x2_row(const int8_t* x, size_t pixels, int8_t* out0, int8_t* out1) const {
    if (vnni_) return deconv_2x2_vnni(x, pixels, out0, out1);
    deconv_2x2_avx2(x, pixels, out0, out1);
  }
  NN_TARGET_VNNI void deconv_2x2_vnni(const int8_t* x, size_t pixels, int8_t* out0, int8_t* out1) const {
    const __m512i flip = _mm512_set1_epi8(char(0x80));
    const __m512i b = _mm512_loadu_si512(quad_bias_);
    const ChannelRequant::Columns16 rq = quad_requant_->columns16(0);
    // bytes (ky 0: pixel q's kx 0, 1 for q = 0..3), then ky 1's
    const __m128i rows = _mm_setr_epi8(0, 1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10, 11, 14, 15);
    for (size_t p = 0; p < pixels; p += 4) {
      const size_t here = std::min<size_t>(4, pixels - p);
      const int8_t* px[4];
      for (size_t q = 0; q < 4; ++q) px[q] = x + (p + (q < here ? q : 0)) * k_;
      __m512i acc = b;
      if (k_ % 16 == 0) {
        // Per 16 bytes of channels: the 4 pixels' bytes one in each 128-bit lane (one load for
        // 4 whole 16-channel pixels), then each group of 4 spread over its lane's 4 columns by
        // an in-lane shuffle, where the general form below builds it from 4 scalar loads.
        for (size_t c = 0; c < k_ / 16; ++c) {
          __m512i z;
          if (k_ == 16 && here == 4) {
            z = _mm512_loadu_si512(px[0]);
          } else {
            z = _mm512_castsi128_si512(_mm_loadu_si128(reinterpret_cast<const __m128i*>(px[0] + 16 * c)));
            z = _mm512_inserti32x4(z, _mm_loadu_si128(reinterpret_cast<const __m128i*>(px[1] + 16 * c)), 1);
            z = _mm512_inserti32x4(z, _mm_loadu_si128(reinterpret_cast<const __m128i*>(px[2] + 16 * c)), 2);
            z = _mm512_inserti32x4(z, _mm_loadu_si128(reinterpret_cast<const __m128i*>(px[3] + 16 * c)), 3);
          }
          z = _mm512_xor_si512(z, flip);
          const int8_t* w = quad_w_.data() + c * 4 * 64;
          acc = _mm512_dpbusd_epi32(acc, _mm512_shuffle_epi32(z, _MM_PERM_AAAA), _mm512_loadu_si512(w));
          acc = _mm512_dpbusd_epi32(acc, _mm512_shuffle_epi32(z, _MM_PERM_BBBB), _mm512_loadu_si512(w + 64));
          acc = _mm512_dpbusd_epi32(acc, _mm512_shuffle_epi32(z, _MM_PERM_CCCC), _mm512_loadu_si512(w + 128));
          acc = _mm512_dpbusd_epi32(acc, _mm512_shuffle_epi32(z, _MM_PERM_DDDD), _mm512_loadu_si512(w + 192));
        }
      } else {
        for (size_t g = 0; g < k_groups_; ++g) {
          int32_t d[4];
          for (size_t q = 0; q < 4; ++q) std::memcpy(&d[q], px[q] + 4 * g, 4);
          __m512i v = _mm512_maskz_set1_epi32(0x000F, d[0]);
          v = _mm512_mask_set1_epi32(v, 0x00F0, d[1]);
          v = _mm512_mask_set1_epi32(v, 0x0F00, d[2]);
          v = _mm512_mask_set1_epi32(v, 0xF000, d[3]);
          acc =
              _mm512_dpbusd_epi32(acc, _mm512_xor_si512(v, flip), _mm512_loadu_si512(quad_w_.data() + g * 64));
        }
      }
      const __m128i out = _mm_shuffle_epi8(_mm512_cvtsepi32_epi8(rq.apply(acc)), rows);
      const __mmask16 keep = __mmask16((1u << (2 * here)) - 1);
      _mm_mask_storeu_epi8(out0 + 2 * p, keep, out);
      _mm_mask_storeu_epi8(out1 + 2 * p, keep, _mm_srli_si128(out, 8));
    }
  }
  // The AVX2 four-column form (k % 8 == 0): a ymm holds 2 pixels x 4 columns. Per 16 bytes of
  // channels, pixels q and q + 1 one in each 128-bit lane, widened to int16 in place (x as it
  // is: the bias holds -zx * sum(w)), each int16 pair spread over its lane's 4 columns by
  // vpshufd into a vpmaddwd: exact for any weight. 4 pixels a pass, 8 bytes to each output row.
  static NN_INLINE_I8_AVX2 __m256i madd_at(__m256i v, const int16_t* w) {
    return _mm256_madd_epi16(v, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w)));
  }
  NN_TARGET_I8_AVX2 void deconv_2x2_avx2(const int8_t* x, size_t pixels, int8_t* out0, int8_t* out1) const {
    if (k_ == 16) return deconv_2x2_avx2_k<16>(x, pixels, out0, out1);  // a segmentation head's
    deconv_2x2_avx2_k<0>(x, pixels, out0, out1);
  }
  // kK: k where fixed, else 0.
  template <size_t kK>
  NN_INLINE_I8_AVX2 void deconv_2x2_avx2_k(const int8_t* x, size_t pixels, int8_t* out0, int8_t* out1) const {
    const size_t k = kK ? kK : k_;
    const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(quad16_bias_));
    const ChannelRequant::Columns8 rq = quad_requant_->columns8(0);
    const __m128i rows = _mm_setr_epi8(0, 1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10, 11, 14, 15);
    const int16_t* w = quad16_w_.data();
    // 4 pixels (p[0..3]) into bytes of pixels 0-3 x columns 0-3 (signed saturation, as vpmovsdb)
    auto pass = [&](const int8_t* const* px) NN_LAMBDA_I8_AVX2 {
      __m256i acc[2] = {b, b};
      size_t c = 0;
#pragma GCC unroll 2
      for (; c + 16 <= k; c += 16) {
        const int16_t* wc = w + c * 8;  // pairs c / 2 .. c / 2 + 7, 16 int16 each
#pragma GCC unroll 2
        for (size_t h = 0; h < 2; ++h) {
          const __m256i z = _mm256_inserti128_si256(
              _mm256_castsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(px[2 * h] + c))),
              _mm_loadu_si128(reinterpret_cast<const __m128i*>(px[2 * h + 1] + c)), 1);
          const __m256i lo = _mm256_srai_epi16(_mm256_unpacklo_epi8(z, z), 8);
          const __m256i hi = _mm256_srai_epi16(_mm256_unpackhi_epi8(z, z), 8);
          __m256i s0 = _mm256_add_epi32(madd_at(_mm256_shuffle_epi32(lo, 0x00), wc + 0 * 16),
                                        madd_at(_mm256_shuffle_epi32(lo, 0x55), wc + 1 * 16));
          __m256i s1 = _mm256_add_epi32(madd_at(_mm256_shuffle_epi32(lo, 0xAA), wc + 2 * 16),
                                        madd_at(_mm256_shuffle_epi32(lo, 0xFF), wc + 3 * 16));
          s0 = _mm256_add_epi32(s0, _mm256_add_epi32(madd_at(_mm256_shuffle_epi32(hi, 0x00), wc + 4 * 16),
                                                     madd_at(_mm256_shuffle_epi32(hi, 0x55), wc + 5 * 16)));
          s1 = _mm256_add_epi32(s1, _mm256_add_epi32(madd_at(_mm256_shuffle_epi32(hi, 0xAA), wc + 6 * 16),
                                                     madd_at(_mm256_shuffle_epi32(hi, 0xFF), wc + 7 * 16)));
          acc[h] = _mm256_add_epi32(acc[h], _mm256_add_epi32(s0, s1));
        }
      }
      if (c < k) {  // the last 8 bytes
        const int16_t* wc = w + c * 8;
        for (size_t h = 0; h < 2; ++h) {
          const __m256i z = _mm256_inserti128_si256(
              _mm256_castsi128_si256(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(px[2 * h] + c))),
              _mm_loadl_epi64(reinterpret_cast<const __m128i*>(px[2 * h + 1] + c)), 1);
          const __m256i lo = _mm256_srai_epi16(_mm256_unpacklo_epi8(z, z), 8);
          acc[h] = _mm256_add_epi32(
              acc[h],
              _mm256_add_epi32(_mm256_add_epi32(madd_at(_mm256_shuffle_epi32(lo, 0x00), wc + 0 * 16),
                                                madd_at(_mm256_shuffle_epi32(lo, 0x55), wc + 1 * 16)),
                               _mm256_add_epi32(madd_at(_mm256_shuffle_epi32(lo, 0xAA), wc + 2 * 16),
                                                madd_at(_mm256_shuffle_epi32(lo, 0xFF), wc + 3 * 16))));
        }
      }
      const __m256i v0 = rq.apply(acc[0]), v1 = rq.apply(acc[1]);
      const __m128i w01 = _mm_packs_epi32(_mm256_castsi256_si128(v0), _mm256_extracti128_si256(v0, 1));
      const __m128i w23 = _mm_packs_epi32(_mm256_castsi256_si128(v1), _mm256_extracti128_si256(v1, 1));
      return _mm_shuffle_epi8(_mm_packs_epi16(w01, w23), rows);
    };
    size_t p = 0;
    for (; p + 4 <= pixels; p += 4) {
      const int8_t* px[4] = {x + p * k, x + (p + 1) * k, x + (p + 2) * k, x + (p + 3) * k};
      const __m128i out = pass(px);
      _mm_storel_epi64(reinterpret_cast<__m128i*>(out0 + 2 * p), out);
      _mm_storel_epi64(reinterpret_cast<__m128i*>(out1 + 2 * p), _mm_srli_si128(out, 8));
    }
    if (p < pixels) {  // 1-3 pixels, the missing ones read as the first
      const size_t here = pixels - p;
      const int8_t* px[4];
      for (size_t q = 0; q < 4; ++q) px[q] = x + (p + (q < here ? q : 0)) * k;
      alignas(16) int8_t tmp[16];
      _mm_store_si128(reinterpret_cast<__m128i*>(tmp), pass(px));
      std::memcpy(out0 + 2 * p, tmp, 2 * here);
      std::memcpy(out1 + 2 * p, tmp + 8, 2 * here);
    }
  }
#endif

  // VNNI tiles read x in place when k is a multiple of 4 (tile_vnni), unless `on` is false.
  void read_in_place(bool on) { in_place_ = on && vnni_ && k_ % 4 == 0; }
  void amx_in_place_tail(bool on) { shift_tail_ = on; }
  // Requantizes in fp32 (ChannelRequant::use_fp32; CpuOptions::int8_fp32_requant).
  void fp32_requant() {
    requant_.use_fp32();
    if (quad_requant_) quad_requant_->use_fp32();
  }

  std::string isa_name() const {
    return std::string(amx_    ? "AMX"
                       : vnni_ ? "AVX-512 VNNI"
                       : dp_   ? "AVX-VNNI"
                       : sign_ ? "AVX2 vpmaddubsw"
                       : avx2_ ? "AVX2"
                               : "scalar") +
           (requant_.fp32 ? ", fp32 requant" : "");
  }

  // Rows [r0, r1) of x (row stride k) into out (row stride ldo).
  void run_rows(const int8_t* x, size_t r0, size_t r1, int8_t* out, size_t ldo) const {
#if NN_AMX
    if (amx_) return rows_amx(x, r0, r1, out, ldo);
#endif
#if NN_NATIVE_X86
    if (vnni_) return rows_vnni(x, r0, r1, out, ldo);
    if (dp_) return rows_sign<true>(x, r0, r1, out, ldo);
    if (sign_) return rows_sign<false>(x, r0, r1, out, ldo);
    if (avx2_) return rows_avx2(x, r0, r1, out, ldo);
#endif
    for (size_t r = r0; r < r1; ++r)
      for (size_t j = 0; j < n_; ++j) {
        int32_t acc = raw_bias_[j];
        for (size_t i = 0; i < k_; ++i) acc += (int32_t(x[r * k_ + i]) - zx_) * w_[j * k_ + i];
        out[r * ldo + j] = requant_.scalar(acc, j);
      }
  }

  // A narrow window conv (an RGB stem: kernel_w * in_c <= 16 bytes a tap row) without a
  // GEMM row per pixel: the caller lays each output row's kh window rows out padded and
  // flipped to unsigned (Int8WindowConv::direct_row), and each pixel broadcasts its tap row's
  // bytes 4 at a time straight from there; a row's last group reads up to 3 bytes past the
  // row's taps, which meet zero weights. Weights [n / 16][kh][groups][16 columns][4 bytes].
  void prepare_direct(size_t kh, size_t row_bytes) {
    direct_kh_ = kh;
    direct_groups_ = (row_bytes + 3) / 4;
    direct_w_.assign(n_pad_ * kh * direct_groups_ * 4, 0);
    for (size_t j = 0; j < n_; ++j)
      for (size_t ky = 0; ky < kh; ++ky)
        for (size_t b = 0; b < row_bytes; ++b)
          direct_w_[(((j / 16 * kh + ky) * direct_groups_ + b / 4) * 16 + j % 16) * 4 + b % 4] =
              w_[j * k_ + ky * row_bytes + b];
  }
  static constexpr size_t kDirectMaxGroups = 32;  // kh * groups, the tap groups of a window
  // The AVX2 form of the narrow window convs (not with AVX-VNNI, which keeps the gathered rows):
  // the window rows laid out as int16 x - zx (the padding 0), each pixel's tap row read an int16
  // pair a broadcast into vpmaddwd against the columns' weight pairs (exact for any weight: no
  // saturating pair sums as vpmaddubsw on bytes has). A row's last pair reads up to one value
  // past the row's taps, which meets a zero weight. Weights [n / 8][kh][pairs][8 columns][2 int16].
  bool direct16_fits() const {
    return avx2_ && !dp_;
  }
  void prepare_direct16(size_t kh, size_t row_values) {
    direct_kh_ = kh;
    direct_groups_ = (row_values + 1) / 2;
    direct16_w_.assign(n_pad_ * kh * direct_groups_ * 2, 0);
    for (size_t j = 0; j < n_; ++j)
      for (size_t ky = 0; ky < kh; ++ky)
        for (size_t b = 0; b < row_values; ++b)
          direct16_w_[(((j / 8 * kh + ky) * direct_groups_ + b / 2) * 8 + j % 8) * 2 + b % 2] =
              w_[j * k_ + ky * row_values + b];
    direct16_bias_.assign(n_pad_, 0);
    std::copy(raw_bias_.begin(), raw_bias_.end(), direct16_bias_.begin());
  }
  static constexpr size_t kDirect16Pixels = 4;  // direct16_run's pixels a pass
  // The int16 values each pixel reads of a tap row.
  size_t direct16_reach() const {
    return 2 * direct_groups_;
  }
  // The bytes each pixel reads of a tap row.
  size_t direct_reach() const {
    return 4 * direct_groups_;
  }

#if NN_NATIVE_X86
  // `count` output pixels, the first one's window at x (its kh rows row_stride apart, already
  // flipped), the next `step` bytes on; out: count rows of ldo.
  NN_TARGET_VNNI void direct_run(const int8_t* x, size_t row_stride, size_t step, size_t count, int8_t* out,
                                 size_t ldo) const {
    size_t j = 0;
    if (direct_kh_ * direct_groups_ == 9) {  // 3x3 on 3 or 4 channels: weights in registers
      for (; j + 2 * kVnniCols <= n_; j += 2 * kVnniCols)
        direct_held<2, 9>(x, row_stride, step, count, j, out, ldo);
      for (; j < n_; j += kVnniCols) direct_held<1, 9>(x, row_stride, step, count, j, out, ldo);
      return;
    }
    for (; j + 2 * kVnniCols <= n_; j += 2 * kVnniCols)
      direct_columns<2>(x, row_stride, step, count, j, out, ldo);
    for (; j < n_; j += kVnniCols) direct_columns<1>(x, row_stride, step, count, j, out, ldo);
  }
  // direct_run's columns [j, j + 16 * kBlocks) for kTaps groups, their weights held in
  // registers over all the pixels.
  template <size_t kBlocks, size_t kTaps>
  NN_TARGET_VNNI void direct_held(const int8_t* x, size_t row_stride, size_t step, size_t count, size_t j,
                                  int8_t* out, size_t ldo) const {
    const size_t per_block = kTaps * 64;
    __m512i w[kBlocks][kTaps];
    __m512i b[kBlocks];
    ChannelRequant::Columns16 rq[kBlocks];
    __mmask16 keep[kBlocks];
    for (size_t i = 0; i < kBlocks; ++i) {
      const size_t jb = j + i * kVnniCols;
      for (size_t t = 0; t < kTaps; ++t)
        w[i][t] = _mm512_loadu_si512(direct_w_.data() + jb / 16 * per_block + t * 64);
      b[i] = _mm512_loadu_si512(bias_.data() + jb);
      rq[i] = requant_.columns16(jb);
      keep[i] = __mmask16((1u << std::min<size_t>(16, n_ - jb)) - 1);
    }
    size_t offset[kTaps];
    for (size_t t = 0; t < kTaps; ++t) offset[t] = t / direct_groups_ * row_stride + 4 * (t % direct_groups_);
    const int8_t* px = x;
    int8_t* o = out + j;
    // Two pixels a pass (their chains interleaved), each column block's sum split over two
    // accumulators where the registers allow it (one block: half the chain's latency).
    constexpr size_t kSplit = kBlocks == 1 ? 2 : 1;
    size_t p = 0;
    for (; p + 2 <= count; p += 2, px += 2 * step, o += 2 * ldo) {
      __m512i acc[kBlocks][2][2];
#pragma GCC unroll 4
      for (size_t i = 0; i < kBlocks; ++i)
        acc[i][0][0] = acc[i][1][0] = b[i], acc[i][0][1] = acc[i][1][1] = _mm512_setzero_si512();
#pragma GCC unroll 16
      for (size_t t = 0; t < kTaps; ++t) {
        int32_t d0, d1;
        std::memcpy(&d0, px + offset[t], 4);
        std::memcpy(&d1, px + step + offset[t], 4);
        const __m512i u0 = _mm512_set1_epi32(d0), u1 = _mm512_set1_epi32(d1);
#pragma GCC unroll 4
        for (size_t i = 0; i < kBlocks; ++i) {
          dpbusd_in_place(acc[i][0][t % kSplit], u0, w[i][t]);
          dpbusd_in_place(acc[i][1][t % kSplit], u1, w[i][t]);
        }
      }
#pragma GCC unroll 4
      for (size_t i = 0; i < kBlocks; ++i) {
        _mm512_mask_cvtsepi32_storeu_epi8(o + i * kVnniCols, keep[i],
                                          rq[i].apply(_mm512_add_epi32(acc[i][0][0], acc[i][0][1])));
        _mm512_mask_cvtsepi32_storeu_epi8(o + ldo + i * kVnniCols, keep[i],
                                          rq[i].apply(_mm512_add_epi32(acc[i][1][0], acc[i][1][1])));
      }
    }
    for (; p < count; ++p, px += step, o += ldo) {
      __m512i acc[kBlocks][3];
#pragma GCC unroll 4
      for (size_t i = 0; i < kBlocks; ++i) acc[i][0] = b[i], acc[i][1] = acc[i][2] = _mm512_setzero_si512();
#pragma GCC unroll 16
      for (size_t t = 0; t < kTaps; ++t) {
        int32_t d;
        std::memcpy(&d, px + offset[t], 4);
        const __m512i u = _mm512_set1_epi32(d);
#pragma GCC unroll 4
        for (size_t i = 0; i < kBlocks; ++i) dpbusd_in_place(acc[i][t % 3], u, w[i][t]);
      }
#pragma GCC unroll 4
      for (size_t i = 0; i < kBlocks; ++i)
        _mm512_mask_cvtsepi32_storeu_epi8(
            o + i * kVnniCols, keep[i],
            rq[i].apply(_mm512_add_epi32(_mm512_add_epi32(acc[i][0], acc[i][1]), acc[i][2])));
    }
  }
  // direct_run's columns [j, j + 16 * kBlocks) for any number of groups, weights from memory.
  template <size_t kBlocks>
  NN_TARGET_VNNI void direct_columns(const int8_t* x, size_t row_stride, size_t step, size_t count, size_t j,
                                     int8_t* out, size_t ldo) const {
    const size_t per_block = direct_kh_ * direct_groups_ * 64;
    const int8_t* w[kBlocks];
    __m512i b[kBlocks];
    ChannelRequant::Columns16 rq[kBlocks];
    __mmask16 keep[kBlocks];
    for (size_t i = 0; i < kBlocks; ++i) {
      const size_t jb = j + i * kVnniCols;
      w[i] = direct_w_.data() + jb / 16 * per_block;
      b[i] = _mm512_loadu_si512(bias_.data() + jb);
      rq[i] = requant_.columns16(jb);
      keep[i] = __mmask16((1u << std::min<size_t>(16, n_ - jb)) - 1);
    }
    const size_t taps = direct_kh_ * direct_groups_;
    size_t offset[kDirectMaxGroups];
    for (size_t t = 0; t < taps; ++t) offset[t] = t / direct_groups_ * row_stride + 4 * (t % direct_groups_);
    const int8_t* px = x;
    int8_t* o = out + j;
    for (size_t p = 0; p < count; ++p, px += step, o += ldo) {
      __m512i acc[kBlocks], odd[kBlocks];
      for (size_t i = 0; i < kBlocks; ++i) acc[i] = b[i], odd[i] = _mm512_setzero_si512();
      size_t t = 0;
      for (; t + 2 <= taps; t += 2) {
        int32_t dg, dh;
        std::memcpy(&dg, px + offset[t], 4);
        std::memcpy(&dh, px + offset[t + 1], 4);
        const __m512i ug = _mm512_set1_epi32(dg), uh = _mm512_set1_epi32(dh);
        for (size_t i = 0; i < kBlocks; ++i) {
          dpbusd_in_place(acc[i], ug, _mm512_loadu_si512(w[i] + t * 64));
          dpbusd_in_place(odd[i], uh, _mm512_loadu_si512(w[i] + (t + 1) * 64));
        }
      }
      if (t < taps) {
        int32_t dg;
        std::memcpy(&dg, px + offset[t], 4);
        const __m512i ug = _mm512_set1_epi32(dg);
        for (size_t i = 0; i < kBlocks; ++i) dpbusd_in_place(acc[i], ug, _mm512_loadu_si512(w[i] + t * 64));
      }
      for (size_t i = 0; i < kBlocks; ++i)
        _mm512_mask_cvtsepi32_storeu_epi8(o + i * kVnniCols, keep[i], rq[i].apply(_mm512_add_epi32(acc[i], odd[i])));
    }
  }
  // `count` output pixels, the first one's window at x (its kh rows row_stride int16 apart),
  // the next `step` values on; out: count rows of ldo.
  NN_TARGET_I8_AVX2 void direct16_run(const int16_t* x, size_t row_stride, size_t step, size_t count,
                                      int8_t* out, size_t ldo) const {
    // an RGB stem's 3x3 stride 2 window: every tap at a fixed offset from its row's pointer
    if (direct_kh_ == 3 && direct_groups_ == 5 && step == 6)
      return direct16_shape<3, 5, 6>(x, row_stride, step, count, out, ldo);
    direct16_shape<0, 0, 0>(x, row_stride, step, count, out, ldo);
  }
  // kKh, kPairs, kStep: the window's rows, pairs a row and step where fixed, else 0.
  template <size_t kKh, size_t kPairs, size_t kStep>
  NN_INLINE_I8_AVX2 void direct16_shape(const int16_t* x, size_t row_stride, size_t step, size_t count,
                                        int8_t* out, size_t ldo) const {
    size_t j = 0;
    for (; j + 2 * kSignCols <= n_; j += 2 * kSignCols)
      direct16_columns<2, kKh, kPairs, kStep>(x, row_stride, step, count, j, out, ldo);
    for (; j < n_; j += kSignCols)
      direct16_columns<1, kKh, kPairs, kStep>(x, row_stride, step, count, j, out, ldo);
  }
  // Columns [j, j + 8 * kBlocks) of all the pixels, their requantization constants built once.
  template <size_t kBlocks, size_t kKh, size_t kPairs, size_t kStep>
  NN_INLINE_I8_AVX2 void direct16_columns(const int16_t* x, size_t row_stride, size_t step, size_t count,
                                          size_t j, int8_t* out, size_t ldo) const {
    ChannelRequant::Columns8 rq[kBlocks];
    for (size_t i = 0; i < kBlocks; ++i) rq[i] = requant_.columns8(j + i * kSignCols);
    // in locals: the int8 stores may alias the vectors' pointers, which GCC would reload per pass
    const int16_t* w = direct16_w_.data() + j / 8 * direct_kh_ * direct_groups_ * 16;
    const int32_t* bias = direct16_bias_.data() + j;
    const size_t cols = std::min<size_t>(kBlocks * kSignCols, n_ - j);
    size_t p = 0;
    for (; p + kDirect16Pixels <= count; p += kDirect16Pixels)
      direct16_pixels<kDirect16Pixels, kBlocks, kKh, kPairs, kStep>(x + p * step, row_stride, step, w, bias,
                                                                    rq, cols, out + p * ldo + j, ldo);
    for (; p < count; ++p)
      direct16_pixels<1, kBlocks, kKh, kPairs, kStep>(x + p * step, row_stride, step, w, bias, rq, cols,
                                                      out + p * ldo + j, ldo);
  }
  // kPixels pixels against columns [j, j + 8 * kBlocks): each weight pair vector loaded once for
  // all the pixels, each pixel's pair broadcast once for all the blocks.
  template <size_t kPixels, size_t kBlocks, size_t kKh, size_t kPairs, size_t kStep>
  // w, bias: the columns' own; cols: how many of them there are; out: the first one's.
  NN_INLINE_I8_AVX2 void direct16_pixels(const int16_t* x, size_t row_stride, size_t step_, const int16_t* w,
                                         const int32_t* bias, const ChannelRequant::Columns8* rq, size_t cols,
                                         int8_t* out, size_t ldo) const {
    const size_t kh = kKh ? kKh : direct_kh_, pairs = kPairs ? kPairs : direct_groups_,
                 step = kStep ? kStep : step_;
    const size_t per_block = kh * pairs * 16;
    __m256i acc[kPixels][kBlocks];
#pragma GCC unroll 2
    for (size_t i = 0; i < kBlocks; ++i) {
      const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(bias + i * kSignCols));
#pragma GCC unroll 4
      for (size_t q = 0; q < kPixels; ++q) acc[q][i] = b;
    }
    // ky not unrolled: per window row the pixels' tap rows stay in kPixels registers and each
    // pair is at a fixed offset from them (unrolled, GCC kept every tap's address on the stack)
#pragma GCC unroll 3
    for (size_t ky = 0; ky < kh; ++ky) {
      const int16_t* row = x + ky * row_stride;
      const int16_t* wk = w + ky * pairs * 16;
#pragma GCC unroll 8
      for (size_t g = 0; g < pairs; ++g) {
        __m256i wg[kBlocks];
#pragma GCC unroll 2
        for (size_t i = 0; i < kBlocks; ++i)
          wg[i] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wk + i * per_block + g * 16));
#pragma GCC unroll 4
        for (size_t q = 0; q < kPixels; ++q) {
          int32_t d;
          std::memcpy(&d, row + q * step + 2 * g, 4);
          const __m256i u = _mm256_set1_epi32(d);
#pragma GCC unroll 2
          for (size_t i = 0; i < kBlocks; ++i) maddwd_in_place(acc[q][i], u, wg[i]);
        }
      }
    }
#pragma GCC unroll 2
    for (size_t i = 0; i < kBlocks; ++i) {
      const size_t here = std::min(kSignCols, cols - i * kSignCols);
#pragma GCC unroll 4
      for (size_t q = 0; q < kPixels; ++q) {
        store_int8x8(out + q * ldo + i * kSignCols, rq[i].apply(acc[q][i]), here);
      }
    }
  }
#endif
  bool vnni() const {
    return vnni_;
  }
  size_t k() const { return k_; }
  bool amx() const {
    return amx_;
  }

  size_t rows_per_task() const {
    if (amx_) return amx_task_rows_;
    return (vnni_ ? kVnniRows : dp_ ? kDpRows : sign_ ? kSignRows : kAvx2Rows) * kTilesPerTask;
  }

 private:
#if NN_NATIVE_X86
  // kRows rows from x, the tile for every 16 columns. When k is a multiple of 4 the rows are
  // read in place, each broadcast group flipped to unsigned (x ^ 0x80) in its register; else
  // they are flipped into u, which has 4 spare bytes at its end (the last group's bytes past k
  // meet zero weights). Reading in place matters: the tile's broadcasts right after the copy's
  // stores wait for them to reach the cache (store-to-load forwarding fails from 64-byte
  // masked stores), which cost the narrow 1x1 convs (k = 16: 32 broadcasts a tile) a fifth
  // of their time (bench/README.md, "int8 speed").
  template <size_t kRows>
  NN_TARGET_VNNI void tile_vnni(const int8_t* x, uint8_t* u, int8_t* out, size_t ldo) const {
    if (in_place_) {
      const uint8_t* rows = reinterpret_cast<const uint8_t*>(x);
      size_t j = 0;
      for (; j + 2 * kVnniCols <= n_; j += 2 * kVnniCols) columns_vnni<kRows, 2, true>(rows, j, out, ldo);
      for (; j < n_; j += kVnniCols) columns_vnni<kRows, 1, true>(rows, j, out, ldo);
      return;
    }
    const size_t bytes = kRows * k_;
    const __m512i flip = _mm512_set1_epi8(char(0x80));
    size_t i = 0;
    for (; i + 64 <= bytes; i += 64)
      _mm512_storeu_si512(u + i, _mm512_xor_si512(_mm512_loadu_si512(x + i), flip));
    if (i < bytes) {
      const __mmask64 m = (__mmask64{1} << (bytes - i)) - 1;
      _mm512_mask_storeu_epi8(u + i, m, _mm512_xor_si512(_mm512_maskz_loadu_epi8(m, x + i), flip));
    }
    size_t j = 0;
    for (; j + 2 * kVnniCols <= n_; j += 2 * kVnniCols) columns_vnni<kRows, 2>(u, j, out, ldo);
    for (; j < n_; j += kVnniCols) columns_vnni<kRows, 1>(u, j, out, ldo);
  }

  template <size_t kBlocks>
  NN_TARGET_VNNI void rows_narrow_vnni(const int8_t* x, size_t r0, size_t r1, int8_t* out, size_t ldo) const {
    const uint8_t* rows = reinterpret_cast<const uint8_t*>(x);
    const ColumnConsts<kBlocks> cc = column_consts<kBlocks>(0);
    size_t r = r0;
    for (; r + kVnniRows <= r1; r += kVnniRows)
      columns_vnni<kVnniRows, kBlocks, true>(rows + r * k_, 0, cc, out + r * ldo, ldo);
    for (; r < r1; ++r) columns_vnni<1, kBlocks, true>(rows + r * k_, 0, cc, out + r * ldo, ldo);
  }

  // tile_vnni's columns [j, j + 16 * kBlocks): each broadcast of 4 input bytes feeds kBlocks
  // vpdpbusd (one broadcast per vpdpbusd bounds the tile by the loads otherwise). kFlip: u is
  // x as it is, flipped here.
  template <size_t kRows, size_t kBlocks, bool kFlip = false>
  NN_INLINE_VNNI void columns_vnni(const uint8_t* u, size_t j, int8_t* out, size_t ldo) const {
    columns_vnni<kRows, kBlocks, kFlip>(u, j, column_consts<kBlocks>(j), out, ldo);
  }
  // The bias, requantization and store mask of columns [j, j + 16 * kBlocks): built per tile,
  // or once per run of rows where they are all the columns (rows_vnni).
  template <size_t kBlocks>
  struct ColumnConsts {
    __m512i bias[kBlocks];
    ChannelRequant::Columns16 rq[kBlocks];
    __mmask16 keep[kBlocks];
  };
  template <size_t kBlocks>
  NN_INLINE_VNNI ColumnConsts<kBlocks> column_consts(size_t j) const {
    ColumnConsts<kBlocks> c;
#pragma GCC unroll 2
    for (size_t i = 0; i < kBlocks; ++i) {
      const size_t jb = j + i * kVnniCols;
      c.bias[i] = _mm512_loadu_si512(bias_.data() + jb);
      c.rq[i] = requant_.columns16(jb);
      c.keep[i] = __mmask16((1u << std::min<size_t>(16, n_ - jb)) - 1);
    }
    return c;
  }
  template <size_t kRows, size_t kBlocks, bool kFlip = false>
  NN_INLINE_VNNI void columns_vnni(const uint8_t* u, size_t j, const ColumnConsts<kBlocks>& cc, int8_t* out,
                                   size_t ldo) const {
    const int8_t* w = packed8_.data() + j * k_groups_ * 4;
    __m512i acc[kBlocks][kRows];
#pragma GCC unroll 2
    for (size_t i = 0; i < kBlocks; ++i) {
#pragma GCC unroll 8
      for (size_t r = 0; r < kRows; ++r) acc[i][r] = cc.bias[i];
    }
    for (size_t g = 0; g < k_groups_; ++g) {
      __m512i wg[kBlocks];
#pragma GCC unroll 2
      for (size_t i = 0; i < kBlocks; ++i) wg[i] = _mm512_loadu_si512(w + (i * kVnniCols * k_groups_ + g * 16) * 4);
#pragma GCC unroll 8
      for (size_t r = 0; r < kRows; ++r) {
        int32_t xv;
        std::memcpy(&xv, u + r * k_ + 4 * g, 4);
        const __m512i xb =
            kFlip ? _mm512_xor_si512(_mm512_set1_epi32(xv), _mm512_set1_epi8(char(0x80))) : _mm512_set1_epi32(xv);
#pragma GCC unroll 2
        for (size_t i = 0; i < kBlocks; ++i) dpbusd_in_place(acc[i][r], xb, wg[i]);
      }
    }
#pragma GCC unroll 2
    for (size_t i = 0; i < kBlocks; ++i) {
      const size_t jb = j + i * kVnniCols;
#pragma GCC unroll 8
      for (size_t r = 0; r < kRows; ++r)
        _mm512_mask_cvtsepi32_storeu_epi8(out + r * ldo + jb, cc.keep[i], cc.rq[i].apply(acc[i][r]));
    }
  }

#if NN_AMX
  // Rows [r0, r1) on AMX, 32 rows (two x tiles) at a time against 32 columns (two w tiles):
  // four accumulator tiles over k in steps of 64 bytes, read in place (row stride k_). The
  // bytes of k past its last full 64 come from a zero-padded copy (the packed w is zero
  // there), as do all of a last block of fewer than 32 rows where [r0, r1) holds fewer than 32
  // (else that block is the last 32 rows, in place): no tile reads outside [r0, r1).
  NN_TARGET_VNNI void rows_amx(const int8_t* x, size_t r0, size_t r1, int8_t* out, size_t ldo) const {
    const AmxTiles tiles;
    const size_t full = k_ / 64, tail = k_ % 64, k64 = amx_steps_ * 64;
    thread_local std::vector<int8_t> staged;  // [kAmxRows][k64] (short blocks) or [kAmxRows][64] (k's tail)
    for (size_t r = r0; r < r1; r += kAmxRows) {
      const size_t rows = std::min(kAmxRows, r1 - r);
      // A last block of fewer than 32 rows in a task of 32 or more: the block of the task's last
      // 32 rows, read in place, its first `skip` rows (done already) not stored again.
      const size_t skip = rows < kAmxRows && r1 - r0 >= kAmxRows && shift_tail_ ? kAmxRows - rows : 0;
      const int8_t* a = x + (r - skip) * k_;
      size_t lda = k_;
      const int8_t* a_tail = a + full * 64;  // the last step's x: [kAmxRows][64 at a_tail_stride]
      size_t a_tail_stride = lda;
      if (rows < kAmxRows && !skip) {
        staged.assign(kAmxRows * k64, 0);
        for (size_t q = 0; q < rows; ++q) std::memcpy(staged.data() + q * k64, a + q * k_, k_);
        a = staged.data(), lda = k64, a_tail = a + full * 64, a_tail_stride = k64;
      } else if (tail) {
        staged.assign(kAmxRows * 64, 0);
        for (size_t q = 0; q < kAmxRows; ++q)
          std::memcpy(staged.data() + q * 64, a + q * k_ + full * 64, tail);
        a_tail = staged.data(), a_tail_stride = 64;
      }
      const AmxRows src{a, lda, a_tail, a_tail_stride, full, tail != 0};
      size_t j = 0;
      if (rows + skip > 16) {
        for (; j + 16 < n_; j += kAmxCols) block_amx<2, 2>(src, j, rows, skip, out + r * ldo, ldo);
        if (j < n_) block_amx<2, 1>(src, j, rows, skip, out + r * ldo, ldo);
      } else {
        for (; j + 16 < n_; j += kAmxCols) block_amx<1, 2>(src, j, rows, skip, out + r * ldo, ldo);
        if (j < n_) block_amx<1, 1>(src, j, rows, skip, out + r * ldo, ldo);
      }
    }
  }

  struct AmxRows {
    const int8_t* a;  // 64-byte steps [0, full) at row stride lda
    size_t lda;
    const int8_t* tail;  // the last step (has_tail) at row stride tail_stride
    size_t tail_stride, full;
    bool has_tail;
  };

  // 16 * kRowTiles rows of src against columns [j, j + 16 * kColTiles); rows [skip, skip + rows)
  // of them kept, written from out.
  template <size_t kRowTiles, size_t kColTiles>
  NN_TARGET_VNNI void block_amx(const AmxRows& src, size_t j, size_t rows, size_t skip, int8_t* out,
                                size_t ldo) const {
    const int8_t* b0 = amx_w_.data() + j / 16 * amx_steps_ * 1024;
    const int8_t* b1 = b0 + amx_steps_ * 1024;
    NN_AMX_ZERO(0);
    if constexpr (kColTiles == 2) NN_AMX_ZERO(1);
    if constexpr (kRowTiles == 2) NN_AMX_ZERO(2);
    if constexpr (kRowTiles == 2 && kColTiles == 2) NN_AMX_ZERO(3);
    auto step = [&](const int8_t* a, size_t lda, size_t s) {
      NN_AMX_LOAD(4, a, lda);
      if constexpr (kRowTiles == 2) NN_AMX_LOAD(5, a + 16 * lda, lda);
      NN_AMX_LOAD(6, b0 + s * 1024, 64);
      NN_AMX_DPBSSD(0, 4, 6);
      if constexpr (kRowTiles == 2) NN_AMX_DPBSSD(2, 5, 6);
      if constexpr (kColTiles == 2) {
        NN_AMX_LOAD(7, b1 + s * 1024, 64);
        NN_AMX_DPBSSD(1, 4, 7);
        if constexpr (kRowTiles == 2) NN_AMX_DPBSSD(3, 5, 7);
      }
    };
    for (size_t s = 0; s < src.full; ++s) step(src.a + s * 64, src.lda, s);
    if (src.has_tail) step(src.tail, src.tail_stride, src.full);
    int32_t* c = acc_block();
    constexpr size_t ldc = kAmxCols * 4;  // bytes
    NN_AMX_STORE(0, c, ldc);
    if constexpr (kColTiles == 2) NN_AMX_STORE(1, c + 16, ldc);
    if constexpr (kRowTiles == 2) NN_AMX_STORE(2, c + 16 * kAmxCols, ldc);
    if constexpr (kRowTiles == 2 && kColTiles == 2) NN_AMX_STORE(3, c + 16 * kAmxCols + 16, ldc);
    for (size_t i = 0; i < kColTiles; ++i) {
      const size_t jb = j + 16 * i;
      const __mmask16 keep = __mmask16((1u << std::min<size_t>(16, n_ - jb)) - 1);
      const ChannelRequant::Columns16 rq = requant_.columns16(jb);
      const __m512i bias = _mm512_loadu_si512(amx_bias_.data() + jb);
      for (size_t q = 0; q < rows; ++q)
        _mm512_mask_cvtsepi32_storeu_epi8(
            out + q * ldo + jb, keep,
            rq.apply(_mm512_add_epi32(_mm512_loadu_si512(c + (q + skip) * kAmxCols + 16 * i), bias)));
    }
  }

  // The per-thread block the accumulator tiles are stored to.
  static int32_t* acc_block() {
    alignas(64) thread_local int32_t block[kAmxRows * kAmxCols];
    return block;
  }
#endif

  NN_TARGET_VNNI void rows_vnni(const int8_t* x, size_t r0, size_t r1, int8_t* out, size_t ldo) const {
    // Read in place with at most two column blocks (a segmentation net's 16- and 32-channel
    // 1x1 convs): the columns' constants once for all the rows, not once per tile.
    if (in_place_ && n_ <= 2 * kVnniCols) {
      if (n_ > kVnniCols) return rows_narrow_vnni<2>(x, r0, r1, out, ldo);
      return rows_narrow_vnni<1>(x, r0, r1, out, ldo);
    }
    thread_local std::vector<uint8_t> u;
    u.resize(kVnniRows * k_ + 4);
    size_t r = r0;
    for (; r + kVnniRows <= r1; r += kVnniRows)
      tile_vnni<kVnniRows>(x + r * k_, u.data(), out + r * ldo, ldo);
    for (; r < r1; ++r) tile_vnni<1>(x + r * k_, u.data(), out + r * ldo, ldo);
  }

  // kRows rows widened to int16 (x - zx), k rounded up to even with a zero.
  template <size_t kRows>
  NN_TARGET_I8_AVX2 void tile_avx2(const int8_t* x, int16_t* wide, int8_t* out, size_t ldo) const {
    const size_t k2 = k_groups_ * 2;
    const __m256i zx = _mm256_set1_epi16(static_cast<int16_t>(zx_));
    for (size_t r = 0; r < kRows; ++r) {
      size_t i = 0;
      for (; i + 16 <= k_; i += 16)
        _mm256_storeu_si256(
            reinterpret_cast<__m256i*>(wide + r * k2 + i),
            _mm256_sub_epi16(
                _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x + r * k_ + i))), zx));
      for (; i < k_; ++i) wide[r * k2 + i] = static_cast<int16_t>(x[r * k_ + i] - zx_);
      if (k2 > k_) wide[r * k2 + k_] = 0;
    }
    for (size_t j = 0; j < n_; j += kAvx2Cols) {
      const int16_t* w = packed16_.data() + j * k_groups_ * 2;
      __m256i acc[kRows];
#pragma GCC unroll 8
      for (size_t r = 0; r < kRows; ++r)
        acc[r] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(bias_.data() + j));
      for (size_t g = 0; g < k_groups_; ++g) {
        const __m256i wg = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + g * 16));
#pragma GCC unroll 8
        for (size_t r = 0; r < kRows; ++r) {
          int32_t xv;
          std::memcpy(&xv, wide + r * k2 + 2 * g, 4);
          acc[r] = _mm256_add_epi32(acc[r], _mm256_madd_epi16(_mm256_set1_epi32(xv), wg));
        }
      }
      const size_t cols = std::min<size_t>(kAvx2Cols, n_ - j);
      for (size_t r = 0; r < kRows; ++r) {
        const __m256i v = requant_.apply8(acc[r], j);
        const __m128i w16 = _mm_packs_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
        const __m128i b8 = _mm_packs_epi16(w16, w16);
        if (cols == kAvx2Cols) {
          _mm_storel_epi64(reinterpret_cast<__m128i*>(out + r * ldo + j), b8);
        } else {
          alignas(16) int8_t tmp[16];
          _mm_store_si128(reinterpret_cast<__m128i*>(tmp), b8);
          std::memcpy(out + r * ldo + j, tmp, cols);
        }
      }
    }
  }

  // kRows rows of x (row stride `stride` >= 4 * k_groups_, bytes past k zero) against
  // columns [j, j + 8 * kBlocks) (w, bias: theirs; cols: how many there are; out: the first
  // one's). Each 4-byte group of a row is broadcast; vpmaddubsw takes
  // |x| (unsigned, 128 for -128) against w with x's sign (vpsignb), so each pair sum
  // |x0 w0 + x1 w1| <= 2 * 128 * 127 fits int16 without saturating (no weight is -128), and
  // vpmaddwd by ones sums the pairs into int32: the exact dot product, 32 products per
  // vpmaddubsw + vpmaddwd, which issue on different ports (vpmaddwd alone on int16 runs
  // half as many products per cycle).
  // kDp (AVX-VNNI): x + 128 by one vpdpbusd against w, the bias holding -(128 + zx) * sum(w).
  // kAbsCopy: ax holds |x| at the same offsets, made once for all the column blocks (else
  // vpabsb per broadcast).
  template <size_t kRows, size_t kBlocks, bool kDp, bool kAbsCopy>
  NN_INLINE_I8_AVX2 void columns_sign(const int8_t* x, const int8_t* ax, size_t stride, const int8_t* w,
                                      const int32_t* bias, const ChannelRequant::Columns8* rq, size_t cols,
                                      int8_t* out, size_t ldo) const {
    const __m256i ones = _mm256_set1_epi16(1), flip = _mm256_set1_epi8(char(0x80));
    __m256i acc[kBlocks][kRows];
#pragma GCC unroll 2
    for (size_t i = 0; i < kBlocks; ++i) {
      const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(bias + i * kSignCols));
#pragma GCC unroll 6
      for (size_t r = 0; r < kRows; ++r) acc[i][r] = b;
    }
    for (size_t g = 0; g < k_groups_; ++g) {
      __m256i wg[kBlocks];
#pragma GCC unroll 2
      for (size_t i = 0; i < kBlocks; ++i)
        wg[i] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + (i * kSignCols * k_groups_ + g * 8) * 4));
#pragma GCC unroll 6
      for (size_t r = 0; r < kRows; ++r) {
        int32_t xv;
        std::memcpy(&xv, x + r * stride + 4 * g, 4);
        const __m256i xb = _mm256_set1_epi32(xv);
        if constexpr (kDp) {
          const __m256i ux = _mm256_xor_si256(xb, flip);
#pragma GCC unroll 2
          for (size_t i = 0; i < kBlocks; ++i) dpbusd_ymm(acc[i][r], ux, wg[i]);
        } else {
          __m256i axb;
          if constexpr (kAbsCopy) {
            int32_t av;
            std::memcpy(&av, ax + r * stride + 4 * g, 4);
            axb = _mm256_set1_epi32(av);
          } else {
            axb = _mm256_abs_epi8(xb);
          }
#pragma GCC unroll 2
          for (size_t i = 0; i < kBlocks; ++i)
            acc[i][r] = _mm256_add_epi32(
                acc[i][r], _mm256_madd_epi16(_mm256_maddubs_epi16(axb, _mm256_sign_epi8(wg[i], xb)), ones));
        }
      }
    }
    if (kBlocks == 2 && cols == 2 * kSignCols) {  // 16 columns: both blocks packed into one store
#pragma GCC unroll 6
      for (size_t r = 0; r < kRows; ++r) {
        const __m256i v = _mm256_permute4x64_epi64(
            _mm256_packs_epi32(rq[0].apply(acc[0][r]), rq[kBlocks - 1].apply(acc[kBlocks - 1][r])), 0xD8);
        _mm_storeu_si128(reinterpret_cast<__m128i*>(out + r * ldo),
                         _mm_packs_epi16(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1)));
      }
      return;
    }
#pragma GCC unroll 2
    for (size_t i = 0; i < kBlocks; ++i) {
      const size_t here = std::min(kSignCols, cols - i * kSignCols);
#pragma GCC unroll 6
      for (size_t r = 0; r < kRows; ++r) {
        store_int8x8(out + r * ldo + i * kSignCols, rq[i].apply(acc[i][r]), here);
      }
    }
  }

  // All `rows` rows of x against columns [j, j + 8 * kBlocks): their weights, bias and
  // requantization constants set up once for the rows (the int8 stores may alias the vectors'
  // pointers, which GCC would otherwise reload per tile).
  template <size_t kBlocks, bool kDp, bool kAbsCopy>
  NN_INLINE_I8_AVX2 void rows_columns_sign(const int8_t* x, const int8_t* ax, size_t stride, size_t rows,
                                           size_t j, int8_t* out, size_t ldo) const {
    constexpr size_t kRows = kDp ? kDpRows : kSignRows;
    ChannelRequant::Columns8 rq[kBlocks];
    for (size_t i = 0; i < kBlocks; ++i) rq[i] = requant_.columns8(j + i * kSignCols);
    const int8_t* w = packed8_.data() + j * k_groups_ * 4;
    const int32_t* bias = bias_.data() + j;
    const size_t cols = std::min(kBlocks * kSignCols, n_ - j);
    size_t r = 0;
    for (; r + kRows <= rows; r += kRows)
      columns_sign<kRows, kBlocks, kDp, kAbsCopy>(x + r * stride, ax + r * stride, stride, w, bias, rq, cols,
                                                  out + r * ldo + j, ldo);
    for (; r < rows; ++r)
      columns_sign<1, kBlocks, kDp, kAbsCopy>(x + r * stride, ax + r * stride, stride, w, bias, rq, cols,
                                              out + r * ldo + j, ldo);
  }

  // Rows read in place when k is a multiple of 4, else copied with zero bytes up to the group
  // (which meet zero weights, also as 128 in the kDp form). Column blocks outside, rows inside:
  // a block's weights stay in L1 over the task's rows.
  template <bool kDp>
  NN_TARGET_I8_AVX2 void rows_sign(const int8_t* x, size_t r0, size_t r1, int8_t* out, size_t ldo) const {
    const size_t k4 = k_groups_ * 4, rows = r1 - r0;
    thread_local std::vector<int8_t> staged;
    const int8_t* src = x + r0 * k_;
    size_t stride = k_;
    if (k4 != k_) {
      staged.assign(rows * k4, 0);
      for (size_t q = 0; q < rows; ++q) std::memcpy(staged.data() + q * k4, src + q * k_, k_);
      src = staged.data(), stride = k4;
    }
    // |x| once for all the column blocks where they are more than one pair (vpabsb per broadcast
    // otherwise, per block pair)
    thread_local std::vector<int8_t> absolute;
    const int8_t* ax = src;
    const bool copy = !kDp && n_ > 2 * kSignCols;
    if (copy) {
      const size_t bytes = (rows - 1) * stride + k4;
      absolute.resize(bytes);
      size_t i = 0;
      for (; i + 32 <= bytes; i += 32)
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(absolute.data() + i),
                            _mm256_abs_epi8(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i))));
      for (; i < bytes; ++i)
        absolute[i] = int8_t(std::abs(int32_t{src[i]}));  // -128: 128 unsigned, as vpabsb
      ax = absolute.data();
    }
    out += r0 * ldo;
    size_t j = 0;
    if (copy) {
      for (; j + 2 * kSignCols <= n_; j += 2 * kSignCols)
        rows_columns_sign<2, kDp, true>(src, ax, stride, rows, j, out, ldo);
      for (; j < n_; j += kSignCols) rows_columns_sign<1, kDp, true>(src, ax, stride, rows, j, out, ldo);
      return;
    }
    for (; j + 2 * kSignCols <= n_; j += 2 * kSignCols)
      rows_columns_sign<2, kDp, false>(src, ax, stride, rows, j, out, ldo);
    for (; j < n_; j += kSignCols) rows_columns_sign<1, kDp, false>(src, ax, stride, rows, j, out, ldo);
  }

  NN_TARGET_I8_AVX2 void rows_avx2(const int8_t* x, size_t r0, size_t r1, int8_t* out, size_t ldo) const {
    thread_local std::vector<int16_t> wide;
    wide.resize(kAvx2Rows * k_groups_ * 2);
    size_t r = r0;
    for (; r + kAvx2Rows <= r1; r += kAvx2Rows)
      tile_avx2<kAvx2Rows>(x + r * k_, wide.data(), out + r * ldo, ldo);
    for (; r < r1; ++r) tile_avx2<1>(x + r * k_, wide.data(), out + r * ldo, ldo);
  }
#endif

  size_t k_, n_, n_pad_, k_groups_ = 0;
  int32_t zx_;
  bool vnni_, avx2_;
  bool dp_;    // AVX2 with AVX-VNNI: columns_sign's vpdpbusd form (any weight)
  bool sign_;  // AVX2 with no weight -128 (or dp_): vpmaddubsw on |x| and w with x's sign (columns_sign)
  bool in_place_ = false;  // VNNI tiles read x in place (tile_vnni)
  bool shift_tail_ = true;  // rows_amx: a task's short last block read in place (amx_in_place_tail)
  bool amx_ = false;       // rows_amx
  size_t amx_task_rows_ = 0;  // a multiple of kAmxRows
  size_t amx_steps_ = 0;      // k in steps of 64 bytes, rounded up
  std::vector<int8_t> amx_w_;
  std::vector<int32_t> amx_bias_;  // per column, padded; less zx * sum of the column's weights
  ChannelRequant requant_;
  std::vector<int32_t> bias_;  // per column, padded; less (128 + zx) (VNNI, dp_) or zx (sign_) * sum of the column's weights
  std::vector<int8_t> packed8_;
  std::vector<int8_t> direct_w_;  // prepare_direct's [n / 16][kh][groups][16 columns][4 bytes]
  size_t direct_kh_ = 0, direct_groups_ = 0;  // direct16: groups are int16 pairs
  std::vector<int16_t> direct16_w_;           // prepare_direct16's [n / 8][kh][pairs][8 columns][2 int16]
  std::vector<int32_t> direct16_bias_;        // the bias as given, padded (x - zx enters)
  std::vector<int16_t> packed16_;
  std::vector<int8_t> w_;
  std::vector<int32_t> raw_bias_;
  // the four-column form (has_deconv_2x2): lane 4q + j is row q's column j
  std::vector<int8_t> quad_w_;  // [k / 4][16 lanes][4 bytes]
  int32_t quad_bias_[16] = {};
  std::vector<int16_t> quad16_w_;  // AVX2: [k / 2][8 lanes][2 int16]
  int32_t quad16_bias_[8] = {};    // AVX2: bias - zx * sum(w) per lane
  std::unique_ptr<ChannelRequant> quad_requant_;
};

// An int8 conv or depthwise conv that may take the ADD reading its output (a residual ADD,
// fuse_int8_residual_adds): each task, having written a chunk of the conv's output into the
// ADD's output buffer, adds the residual to those bytes while they are in cache, so the
// conv's own output never reaches memory and the ADD is no step of its own.
class Int8ConvOp : public NativeDataOp {
 public:
  const char* kernel() const override { return name_.c_str(); }
  void add_residual(std::unique_ptr<Int8AddMath> add, uint32_t residual) {
    add_ = std::move(add);
    operands_.push_back(residual);
    name_ += " +ADD";
  }
  // The same ADD by its byte tables (AVX-512 VBMI; built and checked by the caller).
  void add_residual(std::unique_ptr<Int8AddTable> table, uint32_t residual) {
    table_ = std::move(table);
    operands_.push_back(residual);
    name_ += " +ADD table";
  }
  // A table op (HARD_SWISH, LOGISTIC, TANH) applied to the rows as they are written.
  void add_lookup(std::shared_ptr<const Int8Lookup> lookup, const std::string& op_name) {
    lookup_ = std::move(lookup);
    name_ += " +" + op_name + " table";
  }
  bool runs_residual() const { return add_ || table_; }

 protected:
  static const int8_t* residual_input(const NativeDataArgs& args) {
    return args.inputs.size() > 1 ? static_cast<const int8_t*>(args.inputs[1]) : nullptr;
  }
  // Elements [e0, e1) of out, just written as the conv's output, become the ADD's.
  void finish(int8_t* out, const int8_t* residual, size_t e0, size_t e1) const {
    if (lookup_) lookup_->lookup(out + e0, out + e0, e1 - e0);
    if (table_)
      table_->run(out + e0, residual + e0, out + e0, e1 - e0, true);
    else if (add_)
      add_->run(out + e0, residual + e0, out + e0, e1 - e0);
  }
  std::string name_;

 private:
  std::unique_ptr<Int8AddMath> add_;
  std::unique_ptr<Int8AddTable> table_;
  std::shared_ptr<const Int8Lookup> lookup_;
};

// CONV_2D 1x1, stride 1, unpadded: the GEMM over all pixels.
class Int8PointwiseConv final : public Int8ConvOp {
 public:
  Int8PointwiseConv(std::unique_ptr<Int8Gemm> gemm, size_t pixels, size_t n, uint32_t input)
      : gemm_(std::move(gemm)), pixels_(pixels), n_(n) {
    operands_ = {input};
    name_ = std::string("native int8 conv 1x1 ") + gemm_->isa_name();
  }
  const Int8Gemm& gemm() const { return *gemm_; }
  size_t pixels() const { return pixels_; }
  size_t columns() const { return n_; }
  void run(const NativeDataArgs& args) const override {
    Task t{this, static_cast<const int8_t*>(args.inputs[0]), static_cast<int8_t*>(args.output),
           residual_input(args)};
    const size_t per = gemm_->rows_per_task();
    for_each_row(args.pool, (pixels_ + per - 1) / per, &Int8PointwiseConv::task, &t);
  }

 private:
  struct Task {
    const Int8PointwiseConv* op;
    const int8_t* x;
    int8_t* out;
    const int8_t* residual;
  };
  static void task(void* ctx, size_t i) {
    const Task& t = *static_cast<const Task*>(ctx);
    const size_t per = t.op->gemm_->rows_per_task(), r0 = i * per, r1 = std::min(t.op->pixels_, r0 + per);
    t.op->gemm_->run_rows(t.x, r0, r1, t.out, t.op->n_);
    t.op->finish(t.out, t.residual, r0 * t.op->n_, r1 * t.op->n_);
  }
  std::unique_ptr<Int8Gemm> gemm_;
  size_t pixels_, n_;
};

// A short copy without a call for the few bytes of a narrow conv's taps (an RGB stem's
// 3x3 window row is 9 bytes): two overlapping fixed-size moves up to 32 bytes, any ISA.
inline void copy_bytes(int8_t* dst, const int8_t* src, size_t n) {
  auto two = [&](auto size) {
    constexpr size_t b = decltype(size)::value;
    std::memcpy(dst, src, b);
    std::memcpy(dst + n - b, src + n - b, b);
  };
  if (n > 32) std::memcpy(dst, src, n);
  else if (n >= 16) two(std::integral_constant<size_t, 16>{});
  else if (n >= 8) two(std::integral_constant<size_t, 8>{});
  else if (n >= 4) two(std::integral_constant<size_t, 4>{});
  else
    for (size_t i = 0; i < n; ++i) dst[i] = src[i];
}

#if NN_NATIVE_X86
// dst[0, len): `left` bytes of pad, then src's `bytes` each ^ 0x80 (signed to unsigned), then pad
// to the end; all pad when src is null (a row in the padding).
NN_TARGET_I8_512 inline void flip_padded_row(const int8_t* src, size_t bytes, size_t left, uint8_t pad,
                                             uint8_t* dst, size_t len) {
  const __m512i flip = _mm512_set1_epi8(char(0x80));
  const size_t body = src ? std::min(bytes, len - std::min(left, len)) : 0;
  const size_t head = src ? std::min(left, len) : len;
  std::memset(dst, pad, head);
  size_t i = 0;
  for (; i + 64 <= body; i += 64)
    _mm512_storeu_si512(dst + head + i, _mm512_xor_si512(_mm512_loadu_si512(src + i), flip));
  if (i < body) {
    const __mmask64 m = (__mmask64{1} << (body - i)) - 1;
    _mm512_mask_storeu_epi8(dst + head + i, m, _mm512_xor_si512(_mm512_maskz_loadu_epi8(m, src + i), flip));
  }
  if (head + body < len) std::memset(dst + head + body, pad, len - head - body);
}

// dst[0, len): `left` zeros, then src's `bytes` each less zx as int16, then zeros to the end;
// all zeros when src is null (a row in the padding, whose taps read the zero point).
NN_TARGET_I8_AVX2 inline void centered_padded_row(const int8_t* src, size_t bytes, size_t left, int32_t zx,
                                                  int16_t* dst, size_t len) {
  const size_t body = src ? std::min(bytes, len - std::min(left, len)) : 0;
  const size_t head = src ? std::min(left, len) : len;
  std::fill(dst, dst + head, int16_t{0});
  const __m256i z = _mm256_set1_epi16(int16_t(zx));
  size_t i = 0;
  for (; i + 16 <= body; i += 16)
    _mm256_storeu_si256(
        reinterpret_cast<__m256i*>(dst + head + i),
        _mm256_sub_epi16(_mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i))),
                         z));
  for (; i < body; ++i) dst[head + i] = int16_t(src[i] - zx);
  std::fill(dst + head + body, dst + len, int16_t{0});
}
#endif

// Any other CONV_2D (groups 1): each task gathers its output pixels' windows into
// rows of kh * kw * in_c bytes (taps in the padding read the input zero point, adding nothing), then the
// GEMM. Narrow windows with VNNI (direct_: an RGB stem's 3 tap rows of 9 bytes) skip the
// gathered rows: per output row, its window rows are laid out once, padded with the zero
// point and flipped to unsigned, and the GEMM's direct form reads every pixel's taps there;
// on AVX2 without AVX-VNNI (direct16_) laid out as int16 x - zx, the padding 0.
class Int8WindowConv final : public Int8ConvOp {
 public:
  // direct: CpuOptions::native_int8_direct_windows.
  Int8WindowConv(std::unique_ptr<Int8Gemm> gemm, const NativeConvShape& s, int32_t zx, uint32_t input,
                 bool direct)
      : gemm_(std::move(gemm)), s_(s), zx_(zx) {
    operands_ = {input};
    const size_t row_bytes = size_t(s.kernel_w) * s.in_c;
    direct_ = direct && gemm_->vnni() && !gemm_->amx() && row_bytes <= 16 && s.dilation_w == 1 &&
              s.kernel_h * ((row_bytes + 3) / 4) <= Int8Gemm::kDirectMaxGroups;
    direct16_ = direct && gemm_->direct16_fits() && row_bytes <= kDirect16MaxRow && s.dilation_w == 1;
    if (direct_) {
      gemm_->prepare_direct(s.kernel_h, row_bytes);
      // the last pixel's taps start (out_w - 1) * stride_w pixels in and read direct_reach() bytes
      band_row_ = (size_t(s.out_w) - 1) * s.stride_w * s.in_c + gemm_->direct_reach();
    } else if (direct16_) {
      gemm_->prepare_direct16(s.kernel_h, row_bytes);
      band_row_ = (size_t(s.out_w) - 1) * s.stride_w * s.in_c + gemm_->direct16_reach();  // int16 values
      direct_ = true;
    }
    name_ = std::string("native int8 conv ") + gemm_->isa_name() + (direct_ ? ", direct windows" : "");
  }
  void run(const NativeDataArgs& args) const override {
    Task t{this, static_cast<const int8_t*>(args.inputs[0]), static_cast<int8_t*>(args.output),
           residual_input(args)};
    if (direct_) return for_each_row(args.pool, size_t(s_.batch) * s_.out_h, &Int8WindowConv::direct_row, &t);
    const size_t pixels = size_t(s_.batch) * s_.out_h * s_.out_w, per = gemm_->rows_per_task();
    for_each_row(args.pool, (pixels + per - 1) / per, &Int8WindowConv::task, &t);
  }

 private:
  struct Task {
    const Int8WindowConv* op;
    const int8_t* x;
    int8_t* out;
    const int8_t* residual;
  };
  // Output row r (direct_): its kh window rows one after another, each padded with the zero
  // point (a row in the padding all of it) and flipped to unsigned, so that every pixel's
  // taps are inside; then the direct GEMM over the row's pixels.
  static void direct_row(void* ctx, size_t r) {
    const Task& t = *static_cast<const Task*>(ctx);
    const Int8WindowConv& op = *t.op;
    const NativeConvShape& s = op.s_;
#if NN_NATIVE_X86
    const size_t n = r / s.out_h, oy = r % s.out_h, c = s.in_c;
    if (op.direct16_) {
      thread_local std::vector<int16_t> band16;
      band16.resize(s.kernel_h * op.band_row_);
      for (size_t ky = 0; ky < s.kernel_h; ++ky) {
        const int64_t iy = int64_t(oy * s.stride_h + ky * s.dilation_h) - s.pad_top;
        const int8_t* src =
            iy >= 0 && iy < int64_t(s.in_h) ? t.x + (n * s.in_h + size_t(iy)) * size_t(s.in_w) * c : nullptr;
        centered_padded_row(src, size_t(s.in_w) * c, size_t(s.pad_left) * c, op.zx_,
                            band16.data() + ky * op.band_row_, op.band_row_);
      }
      op.gemm_->direct16_run(band16.data(), op.band_row_, size_t(s.stride_w) * c, s.out_w,
                             t.out + r * s.out_w * s.out_c, s.out_c);
    } else {
      thread_local std::vector<uint8_t> band_storage;
      band_storage.resize(s.kernel_h * op.band_row_);
      uint8_t* band = band_storage.data();
      const uint8_t pad = uint8_t(op.zx_ ^ 0x80);
      for (size_t ky = 0; ky < s.kernel_h; ++ky) {
        const int64_t iy = int64_t(oy * s.stride_h + ky * s.dilation_h) - s.pad_top;
        const int8_t* src =
            iy >= 0 && iy < int64_t(s.in_h) ? t.x + (n * s.in_h + size_t(iy)) * size_t(s.in_w) * c : nullptr;
        flip_padded_row(src, size_t(s.in_w) * c, size_t(s.pad_left) * c, pad, band + ky * op.band_row_,
                        op.band_row_);
      }
      op.gemm_->direct_run(reinterpret_cast<const int8_t*>(band), op.band_row_, size_t(s.stride_w) * c,
                           s.out_w, t.out + r * s.out_w * s.out_c, s.out_c);
    }
#endif
    const size_t bytes = size_t(s.out_w) * s.out_c;  // an output row's
    op.finish(t.out, t.residual, r * bytes, (r + 1) * bytes);
  }
  static void gather_chunks(const Task& t, size_t p0, size_t p1) {
    const size_t per = t.op->gemm_->rows_per_task();
    for (size_t p = p0; p < p1; p += per) gather(t, p, std::min(p1, p + per));
  }
  static void task(void* ctx, size_t i) {
    const Task& t = *static_cast<const Task*>(ctx);
    const size_t pixels = size_t(t.op->s_.batch) * t.op->s_.out_h * t.op->s_.out_w,
                 per = t.op->gemm_->rows_per_task(), p0 = i * per, p1 = std::min(pixels, p0 + per);
    gather(t, p0, p1);
    t.op->finish(t.out, t.residual, p0 * t.op->s_.out_c, p1 * t.op->s_.out_c);
  }
  // Output pixels [p0, p1): windows gathered into GEMM rows (at most rows_per_task), then the GEMM.
  static void gather(const Task& t, size_t p0, size_t p1) {
    const Int8WindowConv& op = *t.op;
    const NativeConvShape& s = op.s_;
    const size_t per = op.gemm_->rows_per_task(), c = s.in_c;
    const size_t k = size_t(s.kernel_h) * s.kernel_w * c;
    thread_local std::vector<int8_t> rows_storage;
    rows_storage.resize(per * k + 64);
    int8_t* const rows = rows_storage.data();
    size_t n = p0 / (size_t(s.out_h) * s.out_w), oy = p0 / s.out_w % s.out_h, ox = p0 % s.out_w;
    for (size_t p = p0; p < p1; ++p) {
      if (p > p0 && ++ox == s.out_w) {
        ox = 0;
        if (++oy == s.out_h) oy = 0, ++n;
      }
      int8_t* row = rows + (p - p0) * k;
      for (size_t ky = 0; ky < s.kernel_h; ++ky, row += s.kernel_w * c) {
        const int64_t iy = int64_t(oy * s.stride_h + ky * s.dilation_h) - s.pad_top;
        const int64_t ix0 = int64_t(ox * s.stride_w) - s.pad_left;
        const int64_t ix1 = ix0 + int64_t((s.kernel_w - 1) * s.dilation_w);
        const bool row_in = iy >= 0 && iy < int64_t(s.in_h);
        const int8_t* src = t.x + (n * s.in_h + size_t(row_in ? iy : 0)) * s.in_w * c;
        if (row_in && s.dilation_w == 1 && ix0 >= 0 && ix1 < int64_t(s.in_w)) {  // one contiguous run
          copy_bytes(row, src + size_t(ix0) * c, s.kernel_w * c);
          continue;
        }
        for (size_t kx = 0; kx < s.kernel_w; ++kx) {
          const int64_t ix = ix0 + int64_t(kx * s.dilation_w);
          if (!row_in || ix < 0 || ix >= int64_t(s.in_w))
            std::memset(row + kx * c, static_cast<int8_t>(op.zx_), c);
          else
            copy_bytes(row + kx * c, src + size_t(ix) * c, c);
        }
      }
    }
    op.gemm_->run_rows(rows, 0, p1 - p0, t.out + p0 * s.out_c, s.out_c);
  }
  std::unique_ptr<Int8Gemm> gemm_;
  NativeConvShape s_;
  int32_t zx_;
  // The AVX2 direct form's widest tap row (kernel_w * in_c values): 7x7 on 4 channels.
  static constexpr size_t kDirect16MaxRow = 28;
  bool direct_ = false;
  bool direct16_ = false;  // direct_ in the AVX2 form (Int8Gemm::direct16_run)
  size_t band_row_ = 0;    // direct_: bytes (direct16_: int16 values) of each laid-out window row
};

// DEPTHWISE_CONV_2D with multiplier 1: per output pixel and 16 (AVX-512) or 8 (AVX2)
// channels, the taps' (x - zx) * w summed exactly in int32 lanes (vpmulld), then
// ChannelRequant. Taps in the padding are skipped (they read the zero point: nothing to add);
// a pixel whose taps are all inside starts from bias - zx * sum(w) and multiplies x as it is.
bool has_avx512_int8();  // the CPU runs the AVX-512 F/BW/VL int8 kernels (defined below)

class Int8Depthwise final : public Int8ConvOp {
 public:
  // w: [kh][kw][C] symmetric int8; bias [C] or null.
  Int8Depthwise(const NativeConvShape& s, const int8_t* w, const int32_t* bias,
                const std::vector<quant::Multiplier>& mult, int32_t zx, int32_t zo, quant::Range range,
                const NativeIsa& isa, uint32_t input, bool fp32_requant = false)
      : s_(s),
        c_pad_((s.out_c + 15) / 16 * 16),
        zx_(zx),
        avx512_(isa.avx512 && has_avx512_int8()),
        requant_(mult, c_pad_, zo, range,
                 accumulator_bounds(w, s.out_c, size_t(s.kernel_h) * s.kernel_w, 1, s.out_c, bias, zx)) {
    operands_ = {input};
    const size_t taps = size_t(s.kernel_h) * s.kernel_w, c = s.out_c;
    w_.assign(taps * c_pad_, 0);
    bias_.assign(c_pad_, 0);
    inner_bias_.assign(c_pad_, 0);
    for (size_t ch = 0; ch < c; ++ch) {
      int32_t sum = 0;
      for (size_t t = 0; t < taps; ++t) {
        w_[t * c_pad_ + ch] = w[t * c + ch];
        sum += w[t * c + ch];
      }
      bias_[ch] = bias ? bias[ch] : 0;
      inner_bias_[ch] = bias_[ch] - zx * sum;
    }
    for (size_t ky = 0; ky < s.kernel_h; ++ky)
      for (size_t kx = 0; kx < s.kernel_w; ++kx)
        rel_.push_back(int64_t((ky * s.dilation_h * s.in_w + kx * s.dilation_w) * c));
    // Output columns whose taps are all inside the image (rows are checked per row).
    const int64_t reach_w = int64_t((s.kernel_w - 1) * s.dilation_w);
    while (ox_lo_ < s.out_w && int64_t(ox_lo_ * s.stride_w) < int64_t(s.pad_left)) ++ox_lo_;
    ox_hi_ = ox_lo_;
    while (ox_hi_ < s.out_w && int64_t(ox_hi_ * s.stride_w) - s.pad_left + reach_w < int64_t(s.in_w))
      ++ox_hi_;
    // 3x3 and 5x5, dilation 1 with VNNI and VBMI: the tap rows' bytes interleaved per channel
    // in groups of four (ky 0-3, then 4 and zero-weight fillers), so one vpdpbusd sums four
    // taps of a column.
    vnni_k_ = avx512_ && has_vnni(isa) && has_vbmi() && s.kernel_h == s.kernel_w &&
                      (s.kernel_h == 3 || s.kernel_h == 5) && s.dilation_h == 1 && s.dilation_w == 1
                  ? s.kernel_h
                  : 0;
    // Without VNNI, the same interleave on AVX2 (vpmaddubsw on |x| and w with x's sign, as the
    // AVX2 GEMM; no weight -128: make_native_int8_conv checks it); with AVX-VNNI, x + 128 by
    // vpdpbusd (any weight).
    avx2_k_ = !vnni_k_ && native_conv_supported() && s.kernel_h == s.kernel_w &&
                      (s.kernel_h == 3 || s.kernel_h == 5) && s.dilation_h == 1 && s.dilation_w == 1
                  ? s.kernel_h
                  : 0;
    avx_vnni_ = avx2_k_ && isa.avx_vnni;
    if (avx2_k_) {
      const size_t kk = avx2_k_, groups = (kk + 3) / 4;
      w8_.assign(c_pad_ * groups * kk * 4, 0);
      zero_row_.assign(size_t(s.in_w) * c + 16, static_cast<int8_t>(zx));
      for (size_t ch = 0; ch < c; ++ch)
        for (size_t ky = 0; ky < kk; ++ky)
          for (size_t kx = 0; kx < kk; ++kx)
            w8_[(((ch / 8 * groups + ky / 4) * kk + kx) * 8 + ch % 8) * 4 + ky % 4] = w[(ky * kk + kx) * c + ch];
      if (kk == 3 && !avx_vnni_) {  // row_pair_avx2's lower row: its taps in row slots 1-3
        w8_next_.assign(c_pad_ * kk * 4, 0);
        for (size_t ch = 0; ch < c; ++ch)
          for (size_t ky = 0; ky < kk; ++ky)
            for (size_t kx = 0; kx < kk; ++kx)
              w8_next_[((ch / 8 * kk + kx) * 8 + ch % 8) * 4 + ky + 1] = w[(ky * kk + kx) * c + ch];
      }
      if (avx_vnni_) {  // the input enters as x + 128
        vnni_bias_.assign(c_pad_, 0);
        for (size_t ch = 0; ch < c; ++ch) {
          int32_t sum = 0;
          for (size_t t = 0; t < size_t(kk) * kk; ++t) sum += w[t * c + ch];
          vnni_bias_[ch] = bias_[ch] - (zx + 128) * sum;
        }
      }
    }
    if (vnni_k_) {
      const size_t kk = vnni_k_, groups = (kk + 3) / 4;
      w4_.assign(c_pad_ * groups * kk * 4, 0);
      if (kk == 3) w4_next_.assign(c_pad_ * kk * 4, 0);
      vnni_bias_.assign(c_pad_, 0);
      zero_row_.assign(size_t(s.in_w) * c + 16, static_cast<int8_t>(zx));
      for (size_t ch = 0; ch < c; ++ch) {
        int32_t sum = 0;
        for (size_t ky = 0; ky < kk; ++ky)
          for (size_t kx = 0; kx < kk; ++kx) {
            const int8_t v = w[(ky * kk + kx) * c + ch];
            w4_[(((ch / 16 * groups + ky / 4) * kk + kx) * 16 + ch % 16) * 4 + ky % 4] = v;
            if (kk == 3) w4_next_[((ch / 16 * kk + kx) * 16 + ch % 16) * 4 + ky + 1] = v;
            sum += v;
          }
        vnni_bias_[ch] = bias_[ch] - (zx + 128) * sum;  // the input enters as x + 128
      }
    }
    name_ = std::string("native int8 depthwise ") +
            (avx_vnni_  ? "AVX-VNNI"
             : avx2_k_ ? "AVX2 vpmaddubsw"
                       : std::string(avx512_ ? "AVX-512" : "scalar") + (vnni_k_ ? " VNNI" : ""));
    if (fp32_requant) {
      requant_.use_fp32();
      name_ += ", fp32 requant";
    }
  }
  void run(const NativeDataArgs& args) const override {
    Task t{this, static_cast<const int8_t*>(args.inputs[0]), static_cast<int8_t*>(args.output),
           residual_input(args)};
    if (pairs())
      for_each_row(args.pool, size_t(s_.batch) * ((s_.out_h + 1) / 2), &Int8Depthwise::row_pair, &t);
    else
      for_each_row(args.pool, size_t(s_.batch) * s_.out_h, &Int8Depthwise::row, &t);
  }
  // Output rows two at a time (row_pair_vnni3, row_pair_avx2): the 3x3 VNNI or AVX2 form (not
  // AVX-VNNI's) at stride 1, where the four input rows a pair reads are interleaved once for
  // both rows.
  bool pairs() const {
    return (vnni_k_ == 3 || avx2_k_ == 3) && s_.stride_h == 1 && s_.out_h >= 2 &&
           !(vnni_k_ ? w4_next_ : w8_next_).empty();
  }
  const NativeConvShape& shape() const { return s_; }
  // Whether rows come from the row-pointer forms (3x3 / 5x5, dilation 1: VNNI or AVX2), which
  // can read input rows from anywhere (an expansion's ring, Int8ExpandDepthwise).
  bool row_kernel() const { return vnni_k_ || avx2_k_; }
  // One output row (row_kernel()) from the kernel's kernel_h input rows, null where the row
  // is outside the image. The AVX2 and VNNI forms read the rows, then fillers (zero weights)
  // to 8; rows outside the image read the zero row.
  void row_from(const int8_t* const taps[], int8_t* out_row) const {
#if NN_NATIVE_X86
    const size_t k = vnni_k_ ? vnni_k_ : avx2_k_;
    const int8_t* rows[8];
    for (size_t ky = 0; ky < 8; ++ky) {
      const int8_t* p = taps[std::min(ky, k - 1)];
      rows[ky] = p ? p : zero_row_.data();
    }
    if (avx2_k_) {
      if (avx_vnni_)
        avx2_k_ == 3 ? row_avx2<3, true>(rows, out_row) : row_avx2<5, true>(rows, out_row);
      else if (avx2_k_ == 3)
        row_avx2<3, false>(rows, out_row);
      else
        row_avx2<5, false>(rows, out_row);
    } else if (vnni_k_ == 3) {
      row_vnni<3>(rows, out_row);
    } else {
      row_vnni<5>(rows, out_row);
    }
#else
    (void)taps, (void)out_row;
#endif
  }

 private:
  struct Task {
    const Int8Depthwise* op;
    const int8_t* x;
    int8_t* out;
    const int8_t* residual;
  };
  static void row(void* ctx, size_t r) {
    const Task& t = *static_cast<const Task*>(ctx);
    row_conv(t, r);
    const size_t bytes = size_t(t.op->s_.out_w) * t.op->s_.out_c;  // an output row's
    t.op->finish(t.out, t.residual, r * bytes, (r + 1) * bytes);
  }
  // Output rows 2i and 2i + 1 of an image (pairs()); the last row alone where out_h is odd.
  static void row_pair(void* ctx, size_t pair) {
    const Task& t = *static_cast<const Task*>(ctx);
    const Int8Depthwise& op = *t.op;
    const NativeConvShape& s = op.s_;
    const size_t per_image = (s.out_h + 1) / 2, n = pair / per_image, oy = pair % per_image * 2;
    const size_t r = n * s.out_h + oy, c = s.out_c, bytes = size_t(s.out_w) * c;
    if (oy + 1 >= s.out_h) {
      row_conv(t, r);
    } else {
#if NN_NATIVE_X86
      const int8_t* rows[4];  // input rows oy - pad .. oy - pad + 3; the zero row outside the image
      for (size_t ky = 0; ky < 4; ++ky) {
        const int64_t iy = int64_t(oy) - s.pad_top + int64_t(ky);
        rows[ky] = iy >= 0 && iy < int64_t(s.in_h) ? t.x + (n * s.in_h + size_t(iy)) * s.in_w * c
                                                   : op.zero_row_.data();
      }
      if (op.vnni_k_)
        op.row_pair_vnni3(rows, t.out + r * bytes, t.out + (r + 1) * bytes);
      else
        op.row_pair_avx2(rows, t.out + r * bytes, t.out + (r + 1) * bytes);
#endif
    }
    op.finish(t.out, t.residual, r * bytes, std::min(r + 2, (n + 1) * size_t(s.out_h)) * bytes);
  }
  // Output row r: per pixel, the taps inside the image (input offsets) and whether all are.
  static void row_conv(const Task& t, size_t r) {
    const Int8Depthwise& op = *t.op;
    const NativeConvShape& s = op.s_;
    const size_t n = r / s.out_h, oy = r % s.out_h, c = s.out_c;
    thread_local std::vector<int64_t> offsets;  // per tap: input element offset, or -1
    offsets.resize(size_t(s.kernel_h) * s.kernel_w);
    const int64_t iy0 = int64_t(oy * s.stride_h) - s.pad_top;
    const bool row_inside = iy0 >= 0 && iy0 + int64_t((s.kernel_h - 1) * s.dilation_h) < int64_t(s.in_h);
    size_t skip_lo = s.out_w, skip_hi = s.out_w;  // columns the fast path did
#if NN_NATIVE_X86
    if (op.row_kernel()) {
      const int8_t* taps[5] = {};  // the kernel's input rows, null where outside the image
      for (size_t ky = 0; ky < s.kernel_h; ++ky) {
        const int64_t iy = iy0 + int64_t(ky);
        if (iy >= 0 && iy < int64_t(s.in_h)) taps[ky] = t.x + (n * s.in_h + size_t(iy)) * s.in_w * c;
      }
      return op.row_from(taps, t.out + r * s.out_w * c);
    }
    if (row_inside && op.avx512_ && op.ox_lo_ < op.ox_hi_) {
      const int8_t* x0 = t.x + (n * s.in_h + size_t(iy0)) * s.in_w * c;
      int8_t* out_row = t.out + r * s.out_w * c;
      if (op.rel_.size() == 9)
        op.inner_avx512<9>(x0, out_row);
      else if (op.rel_.size() == 25)
        op.inner_avx512<25>(x0, out_row);
      else
        op.inner_avx512<0>(x0, out_row);
      skip_lo = op.ox_lo_, skip_hi = op.ox_hi_;
    }
#endif
    for (size_t ox = 0; ox < s.out_w; ++ox) {
      if (ox == skip_lo) ox = skip_hi;
      if (ox >= s.out_w) break;
      bool inner = true;
      for (size_t ky = 0; ky < s.kernel_h; ++ky) {
        const int64_t iy = int64_t(oy * s.stride_h + ky * s.dilation_h) - s.pad_top;
        for (size_t kx = 0; kx < s.kernel_w; ++kx) {
          const int64_t ix = int64_t(ox * s.stride_w + kx * s.dilation_w) - s.pad_left;
          const bool in = iy >= 0 && iy < int64_t(s.in_h) && ix >= 0 && ix < int64_t(s.in_w);
          offsets[ky * s.kernel_w + kx] =
              in ? int64_t(((n * s.in_h + size_t(iy)) * s.in_w + size_t(ix)) * c) : -1;
          inner = inner && in;
        }
      }
      int8_t* o = t.out + (r * s.out_w + ox) * c;
      size_t ch = 0;
#if NN_NATIVE_X86
      if (op.avx512_) ch = op.pixel_avx512(t.x, offsets.data(), inner, o);
#endif
      for (; ch < c; ++ch) {
        int32_t acc = op.bias_[ch];
        for (size_t k = 0; k < offsets.size(); ++k)
          if (offsets[k] >= 0)
            acc += (int32_t(t.x[offsets[k] + int64_t(ch)]) - op.zx_) * op.w_[k * op.c_pad_ + ch];
        o[ch] = op.requant_.scalar(acc, ch);
      }
    }
  }

#if NN_NATIVE_X86
  // Columns [ox_lo_, ox_hi_) of an output row whose tap rows are all inside; x0: the input
  // at that row's first tap row, column 0. kTaps: the kernel's taps when 9 or 25 (weights held
  // in registers across the row), else 0.
  template <size_t kTaps>
  NN_TARGET_I8_512 void inner_avx512(const int8_t* x0, int8_t* out_row) const {
    const size_t c = s_.out_c, taps = kTaps ? kTaps : rel_.size();
    for (size_t ch = 0; ch < c; ch += 16) {
      const __mmask16 k = __mmask16((1u << std::min<size_t>(16, c - ch)) - 1);
      __m512i wv[kTaps ? kTaps : 1];
      if constexpr (kTaps > 0)
        for (size_t t = 0; t < kTaps; ++t) wv[t] = _mm512_loadu_si512(w_.data() + t * c_pad_ + ch);
      const __m512i b = _mm512_loadu_si512(inner_bias_.data() + ch);
      for (size_t ox = ox_lo_; ox < ox_hi_; ++ox) {
        const int8_t* px = x0 + (ox * s_.stride_w - s_.pad_left) * c + ch;
        __m512i acc = b;
#pragma GCC unroll 25
        for (size_t t = 0; t < taps; ++t) {
          const __m512i xv = _mm512_cvtepi8_epi32(_mm_maskz_loadu_epi8(k, px + rel_[t]));
          const __m512i wt = kTaps ? wv[kTaps ? t : 0] : _mm512_loadu_si512(w_.data() + t * c_pad_ + ch);
          acc = _mm512_add_epi32(acc, _mm512_mullo_epi32(xv, wt));
        }
        _mm512_mask_cvtsepi32_storeu_epi8(out_row + ox * c + ch, k, requant_.apply16(acc, ch));
      }
    }
  }

  // A whole output row of the kK x kK form with AVX2: per 8 channels, each input column the
  // row reads (padding columns: the zero point) becomes kGroups x 32 bytes, four rows' bytes
  // per channel (rows past the kernel meet zero weights), kept with their absolute values;
  // then per output kK * kGroups x (vpsignb, vpmaddubsw, vpmaddwd by ones): each int16 pair
  // sum |x0 w0 + x1 w1| <= 2 * 128 * 127, exact. Accumulators start at bias - zx * sum(w).
  // kDp (AVX-VNNI): the columns hold x + 128 alone, and one vpdpbusd a group sums the quad
  // against w; accumulators start at bias - (zx + 128) * sum(w).
  // One input column of 8 channels: rows r0..r3's bytes interleaved per channel, then |x|
  // (kDp: x + 128 only).
  template <bool kDp>
  NN_INLINE_I8_AVX2 static void interleave_column(int8_t* at, __m128i r0, __m128i r1, __m128i r2, __m128i r3) {
    const __m128i a = _mm_unpacklo_epi8(r0, r1), b = _mm_unpacklo_epi8(r2, r3);
    const __m256i v = _mm256_set_m128i(_mm_unpackhi_epi16(a, b), _mm_unpacklo_epi16(a, b));
    if constexpr (kDp) {
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(at), _mm256_xor_si256(v, _mm256_set1_epi8(char(0x80))));
    } else {
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(at), v);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(at) + 1, _mm256_abs_epi8(v));
    }
  }
  // cn (<= 8) channels of four input rows r[0..3], interleaved column by column into
  // dst + i * step for the span's columns i: those in [i0, i1) inside the image, the first of
  // them at byte `at` of each row, `c` bytes apart; the others the zero point.
  template <bool kDp>
  NN_INLINE_I8_AVX2 static void interleave_columns_avx2(const int8_t* const r[4], size_t at, size_t c,
                                                        size_t cn, size_t i0, size_t i1, size_t span,
                                                        __m128i zx, int8_t* dst, size_t step) {
    for (size_t i = 0; i < i0; ++i) interleave_column<kDp>(dst + i * step, zx, zx, zx, zx);
    for (size_t i = i1; i < span; ++i) interleave_column<kDp>(dst + i * step, zx, zx, zx, zx);
    const int8_t *p0 = r[0] + at, *p1 = r[1] + at, *p2 = r[2] + at, *p3 = r[3] + at;
    if (cn == 8) {
      for (size_t i = i0; i < i1; ++i, p0 += c, p1 += c, p2 += c, p3 += c)
        interleave_column<kDp>(dst + i * step, _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p0)),
                               _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p1)),
                               _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p2)),
                               _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p3)));
      return;
    }
    auto part = [cn](const int8_t* p) {
      int64_t b = 0;
      std::memcpy(&b, p, cn);
      return b;
    };
    for (size_t i = i0; i < i1; ++i, p0 += c, p1 += c, p2 += c, p3 += c)
      interleave_column<kDp>(dst + i * step, _mm_cvtsi64_si128(part(p0)), _mm_cvtsi64_si128(part(p1)),
                             _mm_cvtsi64_si128(part(p2)), _mm_cvtsi64_si128(part(p3)));
  }
  template <size_t kK, bool kDp>
  NN_TARGET_I8_AVX2 void row_avx2(const int8_t* const rows[8], int8_t* out_row) const {
    constexpr size_t kGroups = (kK + 3) / 4;
    const NativeConvShape& s = s_;
    const size_t c = s.out_c, stride = s.stride_w;
    const int64_t first = -int64_t(s.pad_left);
    const size_t span = (s.out_w - 1) * stride + kK;  // columns first .. first + span - 1
    constexpr size_t kBytes = kDp ? 32 : 64;          // a column group's
    thread_local std::vector<int8_t> cols_storage;    // [span][kGroups][x, |x|] (kDp: [x + 128]), 32 bytes each
    cols_storage.resize(span * kGroups * kBytes);
    int8_t* const cols = cols_storage.data();
    const __m256i ones = _mm256_set1_epi16(1);
    const __m128i zx = _mm_set1_epi8(static_cast<char>(zx_));
    for (size_t ch = 0; ch < c; ch += 8) {
      const size_t cn = std::min<size_t>(8, c - ch);
      // Input columns [i0, i1) of the span are inside the image.
      const size_t i0 = size_t(std::clamp<int64_t>(-first, 0, int64_t(span)));
      const size_t i1 = size_t(std::clamp<int64_t>(int64_t(s.in_w) - first, int64_t(i0), int64_t(span)));
      const size_t at = ch + size_t(first + int64_t(i0)) * c;
      for (size_t g = 0; g < kGroups; ++g)
        interleave_columns_avx2<kDp>(rows + 4 * g, at, c, cn, i0, i1, span, zx, cols + g * kBytes,
                                     kGroups * kBytes);
      __m256i wv[kK][kGroups];
      const int8_t* wp = w8_.data() + ch / 8 * kGroups * kK * 32;
      for (size_t g = 0; g < kGroups; ++g)
        for (size_t kx = 0; kx < kK; ++kx)
          wv[kx][g] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wp + (g * kK + kx) * 32));
      const __m256i b =
          _mm256_loadu_si256(reinterpret_cast<const __m256i*>((kDp ? vnni_bias_ : inner_bias_).data() + ch));
      const ChannelRequant::Columns8 rq = requant_.columns8(ch);
      for (size_t ox = 0; ox < s.out_w; ++ox) {
        const __m256i* col = reinterpret_cast<const __m256i*>(cols + ox * stride * kGroups * kBytes);
        __m256i acc = b;
#pragma GCC unroll 10
        for (size_t t = 0; t < kK * kGroups; ++t) {
          if constexpr (kDp) {
            dpbusd_ymm(acc, _mm256_loadu_si256(col + t), wv[t / kGroups][t % kGroups]);
          } else {
            const __m256i v = _mm256_loadu_si256(col + 2 * t), av = _mm256_loadu_si256(col + 2 * t + 1);
            acc = _mm256_add_epi32(
                acc, _mm256_madd_epi16(_mm256_maddubs_epi16(av, _mm256_sign_epi8(wv[t / kGroups][t % kGroups], v)),
                                       ones));
          }
        }
        const __m256i v = rq.apply(acc);
        const __m128i w16 = _mm_packs_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
        const __m128i b8 = _mm_packs_epi16(w16, w16);
        if (cn == 8) {
          _mm_storel_epi64(reinterpret_cast<__m128i*>(out_row + ox * c + ch), b8);
        } else {
          const int64_t bytes = _mm_cvtsi128_si64(b8);
          std::memcpy(out_row + ox * c + ch, &bytes, cn);
        }
      }
    }
  }

  // Output rows oy and oy + 1 of the 3x3 AVX2 form at stride 1 from the four input rows they
  // read (rows[0..3]): per 8 channels each input column interleaved once (row_avx2's) for both,
  // the upper row against w8_ (slots 0-2), the lower against w8_next_ (slots 1-3). The same
  // products in the same order per row as row_avx2.
  NN_TARGET_I8_AVX2 void row_pair_avx2(const int8_t* const rows[4], int8_t* out0, int8_t* out1) const {
    constexpr size_t kK = 3, kBytes = 64;  // a column's: x, |x|
    const NativeConvShape& s = s_;
    const size_t c = s.out_c, stride = s.stride_w;
    const int64_t first = -int64_t(s.pad_left);
    const size_t span = (s.out_w - 1) * stride + kK;
    thread_local std::vector<int8_t> cols_storage;  // [span][x, |x|], 32 bytes each
    cols_storage.resize(span * kBytes);
    int8_t* const cols = cols_storage.data();
    const __m256i ones = _mm256_set1_epi16(1);
    const __m128i zx = _mm_set1_epi8(static_cast<char>(zx_));
    const size_t i0 = size_t(std::clamp<int64_t>(-first, 0, int64_t(span)));
    const size_t i1 = size_t(std::clamp<int64_t>(int64_t(s.in_w) - first, int64_t(i0), int64_t(span)));
    for (size_t ch = 0; ch < c; ch += 8) {
      const size_t cn = std::min<size_t>(8, c - ch);
      interleave_columns_avx2<false>(rows, ch + size_t(first + int64_t(i0)) * c, c, cn, i0, i1, span, zx,
                                     cols, kBytes);
      __m256i wv[kK], wn[kK];
      const int8_t* wp = w8_.data() + ch / 8 * kK * 32;
      const int8_t* wq = w8_next_.data() + ch / 8 * kK * 32;
#pragma GCC unroll 3
      for (size_t kx = 0; kx < kK; ++kx) {
        wv[kx] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wp + kx * 32));
        wn[kx] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wq + kx * 32));
      }
      const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(inner_bias_.data() + ch));
      const ChannelRequant::Columns8 rq = requant_.columns8(ch);
      int8_t* o0 = out0 + ch;
      int8_t* o1 = out1 + ch;
      for (size_t ox = 0; ox < s.out_w; ++ox, o0 += c, o1 += c) {
        const __m256i* col = reinterpret_cast<const __m256i*>(cols + ox * stride * kBytes);
        __m256i acc0 = b, acc1 = b;
#pragma GCC unroll 3
        for (size_t kx = 0; kx < kK; ++kx) {
          const __m256i v = _mm256_loadu_si256(col + 2 * kx), av = _mm256_loadu_si256(col + 2 * kx + 1);
          acc0 = _mm256_add_epi32(
              acc0, _mm256_madd_epi16(_mm256_maddubs_epi16(av, _mm256_sign_epi8(wv[kx], v)), ones));
          acc1 = _mm256_add_epi32(
              acc1, _mm256_madd_epi16(_mm256_maddubs_epi16(av, _mm256_sign_epi8(wn[kx], v)), ones));
        }
        const __m256i v0 = rq.apply(acc0), v1 = rq.apply(acc1);
        const __m128i w0 = _mm_packs_epi32(_mm256_castsi256_si128(v0), _mm256_extracti128_si256(v0, 1));
        const __m128i w1 = _mm_packs_epi32(_mm256_castsi256_si128(v1), _mm256_extracti128_si256(v1, 1));
        const __m128i b8 = _mm_packs_epi16(w0, w1);  // row 0's 8 bytes, then row 1's
        if (cn == 8) {
          _mm_storel_epi64(reinterpret_cast<__m128i*>(o0), b8);
          _mm_storel_epi64(reinterpret_cast<__m128i*>(o1), _mm_unpackhi_epi64(b8, b8));
        } else {
          alignas(16) int8_t tmp[16];
          _mm_store_si128(reinterpret_cast<__m128i*>(tmp), b8);
          std::memcpy(o0, tmp, cn);
          std::memcpy(o1, tmp + 8, cn);
        }
      }
    }
  }

  // A whole output row of the kK x kK form with VNNI: per 16 channels, each input column the
  // row reads becomes kGroups x 64 bytes (channel-major: four rows' bytes + 128 each, rows past
  // the kernel with zero weights; columns and rows in the padding hold the zero point, which
  // adds nothing against vnni_bias_), then each output is kK * kGroups vpdpbusd. rows: the
  // kernel's input rows (zero_row_ where outside), then fillers.
  // The VNNI row forms' input columns (row_vnni, row_pair_vnni3): from input column -pad_left,
  // `groups` groups of 4 tap rows each, 16 channels x 4 rows interleaved (a channel's 4 bytes
  // side by side) and moved into u8 (x + 128), 64-byte aligned, one buffer per thread; the
  // columns in the padding hold zx (vnni_columns writes them).
  struct VnniColumns {
    uint8_t* cols;
    size_t groups, in_lo, in_hi;
  };
  NN_TARGET_VNNI_VBMI VnniColumns vnni_columns(size_t kk, size_t groups) const {
    const size_t pad = s_.pad_left;
    const size_t cols_n = (size_t(s_.out_w) - 1) * s_.stride_w + kk;  // from input column -pad
    const size_t in_lo = std::min(pad, cols_n), in_hi = std::min(cols_n, pad + s_.in_w);
    thread_local std::vector<uint8_t> storage;  // [column][group][16 channels][4 rows]
    storage.resize(cols_n * groups * 64 + 64);
    uint8_t* const cols = storage.data() + (-reinterpret_cast<uintptr_t>(storage.data()) & 63);
    const __m512i padding = _mm512_set1_epi8(char(zx_ ^ 0x80));
    for (size_t i = 0; i < in_lo * groups; ++i) _mm512_store_si512(cols + i * 64, padding);
    for (size_t i = in_hi * groups; i < cols_n * groups; ++i) _mm512_store_si512(cols + i * 64, padding);
    return {cols, groups, in_lo, in_hi};
  }
  // Channels [ch, ch + 16) of v's in-image columns from rows[0 .. kRows) (a last group of
  // fewer than 4 rows leaves its slots zero: their weights are zero).
  template <size_t kGroups, size_t kRows>
  NN_TARGET_VNNI_VBMI void interleave_columns(const VnniColumns& v, const int8_t* const rows[], size_t ch) const {
    alignas(64) static constexpr uint8_t kInterleave[64] = {
        0,  16, 32, 48, 1,  17, 33, 49, 2,  18, 34, 50, 3,  19, 35, 51, 4,  20, 36, 52, 5,  21,
        37, 53, 6,  22, 38, 54, 7,  23, 39, 55, 8,  24, 40, 56, 9,  25, 41, 57, 10, 26, 42, 58,
        11, 27, 43, 59, 12, 28, 44, 60, 13, 29, 45, 61, 14, 30, 46, 62, 15, 31, 47, 63};
    const __m512i order = _mm512_load_si512(kInterleave);
    const __m512i flip = _mm512_set1_epi8(char(0x80));
    const size_t c = s_.out_c, pad = s_.pad_left;
    const __mmask16 k = __mmask16((1u << std::min<size_t>(16, c - ch)) - 1);
    for (size_t i = v.in_lo; i < v.in_hi; ++i) {
      const size_t at = (i - pad) * c + ch;
#pragma GCC unroll 2
      for (size_t g = 0; g < kGroups; ++g) {
        __m512i z = _mm512_zextsi128_si512(_mm_maskz_loadu_epi8(k, rows[4 * g] + at));
        z = _mm512_inserti32x4(z, _mm_maskz_loadu_epi8(k, rows[4 * g + 1] + at), 1);
        z = _mm512_inserti32x4(z, _mm_maskz_loadu_epi8(k, rows[4 * g + 2] + at), 2);
        if (4 * g + 3 < kRows) z = _mm512_inserti32x4(z, _mm_maskz_loadu_epi8(k, rows[4 * g + 3] + at), 3);
        _mm512_store_si512(v.cols + (i * kGroups + g) * 64, _mm512_xor_si512(_mm512_permutexvar_epi8(order, z), flip));
      }
    }
  }

  template <size_t kK>
  NN_TARGET_VNNI_VBMI void row_vnni(const int8_t* const rows[8], int8_t* out_row) const {
    constexpr size_t kGroups = (kK + 3) / 4;
    const size_t c = s_.out_c, stride = s_.stride_w;
    const VnniColumns v = vnni_columns(kK, kGroups);
    uint8_t* const cols = v.cols;
    for (size_t ch = 0; ch < c; ch += 16) {
      const __mmask16 k = __mmask16((1u << std::min<size_t>(16, c - ch)) - 1);
      interleave_columns<kGroups, kK>(v, rows, ch);
      const int8_t* wp = w4_.data() + ch / 16 * kGroups * kK * 64;
      __m512i wv[kGroups * kK];
#pragma GCC unroll 10
      for (size_t t = 0; t < kGroups * kK; ++t) wv[t] = _mm512_loadu_si512(wp + t * 64);
      const __m512i b = _mm512_loadu_si512(vnni_bias_.data() + ch);
      const ChannelRequant::Columns16 rq = requant_.columns16(ch);
      const uint8_t* u = cols;
      int8_t* o = out_row + ch;
      for (size_t ox = 0; ox < s_.out_w; ++ox, u += stride * kGroups * 64, o += c) {
        __m512i acc = b;
#pragma GCC unroll 10
        for (size_t g = 0; g < kGroups; ++g)
#pragma GCC unroll 5
          for (size_t kx = 0; kx < kK; ++kx)
            dpbusd_in_place(acc, _mm512_load_si512(u + (kx * kGroups + g) * 64), wv[g * kK + kx]);
        _mm512_mask_cvtsepi32_storeu_epi8(o, k, rq.apply(acc));
      }
    }
  }

  // row_vnni<3> for two output rows at once: the four input rows they read interleaved once
  // per column (rows 0-2 the upper row's taps, 1-3 the lower's: w4_ and w4_next_), each
  // pixel's two rows accumulated side by side. The same products in the same order per row.
  NN_TARGET_VNNI_VBMI void row_pair_vnni3(const int8_t* const rows[4], int8_t* out0, int8_t* out1) const {
    constexpr size_t kK = 3;
    const size_t c = s_.out_c, stride = s_.stride_w;
    const VnniColumns v = vnni_columns(kK, 1);
    uint8_t* const cols = v.cols;
    for (size_t ch = 0; ch < c; ch += 16) {
      const __mmask16 k = __mmask16((1u << std::min<size_t>(16, c - ch)) - 1);
      interleave_columns<1, 4>(v, rows, ch);  // all four rows: the pair's
      const int8_t* wp = w4_.data() + ch / 16 * kK * 64;
      const int8_t* wq = w4_next_.data() + ch / 16 * kK * 64;
      __m512i wv[kK], wn[kK];
#pragma GCC unroll 3
      for (size_t t = 0; t < kK; ++t) wv[t] = _mm512_loadu_si512(wp + t * 64), wn[t] = _mm512_loadu_si512(wq + t * 64);
      const __m512i b = _mm512_loadu_si512(vnni_bias_.data() + ch);
      const ChannelRequant::Columns16 rq = requant_.columns16(ch);
      const uint8_t* u = cols;
      int8_t* o0 = out0 + ch;
      int8_t* o1 = out1 + ch;
      for (size_t ox = 0; ox < s_.out_w; ++ox, u += stride * 64, o0 += c, o1 += c) {
        __m512i acc0 = b, acc1 = b;
        // Unrolled, each accumulator in its register: a loop here kept the three taps as a
        // runtime loop with two register copies per vpdpbusd.
#pragma GCC unroll 3
        for (size_t kx = 0; kx < kK; ++kx) {
          const __m512i x = _mm512_load_si512(u + kx * 64);
          dpbusd_in_place(acc0, x, wv[kx]);
          dpbusd_in_place(acc1, x, wn[kx]);
        }
        _mm512_mask_cvtsepi32_storeu_epi8(o0, k, rq.apply(acc0));
        _mm512_mask_cvtsepi32_storeu_epi8(o1, k, rq.apply(acc1));
      }
    }
  }

  NN_TARGET_I8_512 size_t pixel_avx512(const int8_t* x, const int64_t* offsets, bool inner, int8_t* o) const {
    const size_t c = s_.out_c, taps = size_t(s_.kernel_h) * s_.kernel_w;
    const __m512i zx = _mm512_set1_epi32(zx_);
    for (size_t ch = 0; ch < c; ch += 16) {
      const __mmask16 k = __mmask16((1u << std::min<size_t>(16, c - ch)) - 1);
      __m512i acc = _mm512_loadu_si512((inner ? inner_bias_ : bias_).data() + ch);
      for (size_t t = 0; t < taps; ++t) {
        if (offsets[t] < 0) continue;
        __m512i xv = _mm512_cvtepi8_epi32(_mm_maskz_loadu_epi8(k, x + offsets[t] + ch));
        if (!inner) xv = _mm512_sub_epi32(xv, zx);
        acc = _mm512_add_epi32(acc, _mm512_mullo_epi32(xv, _mm512_loadu_si512(w_.data() + t * c_pad_ + ch)));
      }
      _mm512_mask_cvtsepi32_storeu_epi8(o + ch, k, requant_.apply16(acc, ch));
    }
    return c;
  }

#endif

  NativeConvShape s_;
  size_t c_pad_;
  int32_t zx_;
  bool avx512_;
  ChannelRequant requant_;
  std::vector<int32_t> w_;                  // [taps][c_pad]
  std::vector<int32_t> bias_, inner_bias_;  // [c_pad]
  std::vector<int64_t> rel_;                // per tap: input offset from the window's corner
  uint32_t vnni_k_ = 0;                     // 3 or 5: the VNNI form's kernel size (row_vnni), else 0
  uint32_t avx2_k_ = 0;                     // 3 or 5: the AVX2 form's (row_avx2), else 0
  bool avx_vnni_ = false;                   // row_avx2's vpdpbusd form
  std::vector<int8_t> w8_;                  // AVX2: [C / 8][ky / 4][kx][8 channels][ky % 4]
  std::vector<int8_t> w8_next_;  // AVX2 3x3 (row_pair_avx2): the lower row's, in row slots 1-3, slot 0 zero
  std::vector<int8_t> w4_;                  // VNNI: [C / 16][ky / 4][kx][16 channels][ky % 4]
  // The 3x3 VNNI form's weights for the lower row of a pair (row_pair_vnni3): its taps in
  // row slots 1-3 of the four rows the pair reads, slot 0 zero.
  std::vector<int8_t> w4_next_;
  std::vector<int32_t> vnni_bias_;          // VNNI: bias - (zx + 128) * sum(w)
  std::vector<int8_t> zero_row_;            // VNNI, AVX2: an input row of zero points (rows in the padding)
  size_t ox_lo_ = 0, ox_hi_ = 0;
};

// A 1x1 conv (an inverted residual's expansion) and the depthwise conv that alone reads it
// as one op: per output row of the depthwise, the expansion's rows its taps read that the
// ring (the kernel's rows and a run of rows ahead) does not hold yet are computed by the
// conv's GEMM, then the depthwise's row kernel reads them there, so the expanded tensor is
// never written out.
// Rows over the threads in one range each, a range's first rows' halo computed twice.
// The same GEMM and row kernels as the two ops alone: the same bytes.
class Int8ExpandDepthwise final : public NativeDataOp {
 public:
  Int8ExpandDepthwise(std::unique_ptr<Int8PointwiseConv> conv, std::unique_ptr<Int8Depthwise> dw)
      : conv_(std::move(conv)), dw_(std::move(dw)) {
    operands_ = conv_->operands();
    // The ring: the kernel's rows and runs of about 128 pixels more, so each GEMM call has
    // rows for whole tiles (a row of a 7- or 14-wide image alone leaves most of a tile idle).
    const NativeConvShape& d = dw_->shape();
    const size_t runs = std::max<size_t>(1, (128 + d.in_w - 1) / d.in_w);
    ring_rows_ = std::min<size_t>(d.in_h, d.kernel_h - 1 + std::max<size_t>(runs, d.stride_h));
    ring_rows_ = std::max<size_t>(ring_rows_, 1);
    const std::string dw_name = dw_->kernel(), prefix = "native int8 depthwise ";
    name_ = std::string("native int8 conv+depthwise ") + conv_->gemm().isa_name() + ", " +
            (dw_name.rfind(prefix, 0) == 0 ? dw_name.substr(prefix.size()) : dw_name);
  }
  const char* kernel() const override { return name_.c_str(); }
  void run(const NativeDataArgs& args) const override {
    const NativeConvShape& d = dw_->shape();
    const size_t rows = size_t(d.batch) * d.out_h;
    size_t chunks = 1;
    if (args.pool) chunks = std::min<size_t>(pthreadpool_get_threads_count(args.pool), rows);
    Task t{this, static_cast<const int8_t*>(args.inputs[0]), static_cast<int8_t*>(args.output), rows, chunks};
    if (chunks == 1) return range(&t, 0);
    for_each_row(args.pool, chunks, &Int8ExpandDepthwise::range, &t);
  }

 private:
  struct Task {
    const Int8ExpandDepthwise* op;
    const int8_t* x;
    int8_t* out;
    size_t rows, chunks;
  };
  static void range(void* ctx, size_t chunk) {
    const Task& t = *static_cast<const Task*>(ctx);
    const Int8ExpandDepthwise& op = *t.op;
    const NativeConvShape& d = op.dw_->shape();
    const Int8Gemm& gemm = op.conv_->gemm();
    const size_t slots = op.ring_rows_, row_bytes = size_t(d.in_w) * d.in_c;
    const size_t in_row = size_t(d.in_w) * gemm.k(), out_row = size_t(d.out_w) * d.out_c;
    thread_local std::vector<int8_t> ring;  // [slots][row_bytes]: expanded row y in slot y % slots
    ring.resize(slots * row_bytes);
    // Rows [a, hi) of image `image` are in the ring; rows are computed up to `hi` in runs.
    int64_t image = -1, hi = 0;
    // Expanded rows [from, to) of image b into their slots: one GEMM per run of slots.
    auto expand = [&](size_t b, int64_t from, int64_t to) {
      while (from < to) {
        const size_t slot = size_t(from) % slots, n = std::min<size_t>(size_t(to - from), slots - slot);
        gemm.run_rows(t.x + (b * d.in_h + size_t(from)) * in_row, 0, n * d.in_w, ring.data() + slot * row_bytes,
                      d.in_c);
        from += int64_t(n);
      }
    };
    const int8_t* taps[5] = {};
    const size_t first = t.rows * chunk / t.chunks, last = t.rows * (chunk + 1) / t.chunks;
    for (size_t r = first; r < last; ++r) {
      const size_t b = r / d.out_h, oy = r % d.out_h;
      const int64_t y0 = int64_t(oy) * d.stride_h - d.pad_top;
      const int64_t a = std::max<int64_t>(0, y0), e = std::min<int64_t>(d.in_h, y0 + d.kernel_h);
      if (int64_t(b) != image || a > hi) image = int64_t(b), hi = a;
      if (e > hi) {
        // As many rows as the ring holds past a (runs of rows for the GEMM), none past what
        // this range's last output row of the image reads.
        const size_t end_oy = std::min<size_t>(last - b * d.out_h, d.out_h) - 1;
        const int64_t limit =
            std::min<int64_t>(d.in_h, int64_t(end_oy) * d.stride_h - d.pad_top + d.kernel_h);
        const int64_t to = std::max(e, std::min(limit, a + int64_t(slots)));
        expand(b, hi, to);
        hi = to;
      }
      for (size_t ky = 0; ky < d.kernel_h; ++ky) {
        const int64_t iy = y0 + int64_t(ky);
        taps[ky] = iy >= 0 && iy < int64_t(d.in_h) ? ring.data() + size_t(iy) % slots * row_bytes : nullptr;
      }
      op.dw_->row_from(taps, t.out + r * out_row);
    }
  }
  std::unique_ptr<Int8PointwiseConv> conv_;
  std::unique_ptr<Int8Depthwise> dw_;
  size_t ring_rows_ = 1;  // expanded rows the ring holds
  std::string name_;
};

// TRANSPOSE_CONV_2D with kernel == stride, no padding: per input pixel the GEMM's
// kh * kw * out_c columns (ky, kx, o) are its output block, written in place.
class Int8TiledDeconv final : public NativeDataOp {
 public:
  Int8TiledDeconv(std::unique_ptr<Int8Gemm> gemm, size_t batch, size_t in_h, size_t in_w, size_t in_c,
                  size_t kh, size_t kw, size_t out_c, uint32_t input)
      : gemm_(std::move(gemm)),
        batch_(batch),
        in_h_(in_h),
        in_w_(in_w),
        in_c_(in_c),
        kh_(kh),
        kw_(kw),
        out_c_(out_c) {
    operands_ = {input};
    four_columns_ = gemm_->has_deconv_2x2() && kh == 2 && kw == 2 && out_c == 1;
    name_ = std::string("native int8 deconv ") + gemm_->isa_name() + (four_columns_ ? ", four columns" : "");
  }
  const char* kernel() const override { return name_.c_str(); }
  void run(const NativeDataArgs& args) const override {
    Task t{this, static_cast<const int8_t*>(args.inputs[0]), static_cast<int8_t*>(args.output)};
    for_each_row(args.pool, batch_ * in_h_, &Int8TiledDeconv::task, &t);
  }

 private:
  struct Task {
    const Int8TiledDeconv* op;
    const int8_t* x;
    int8_t* out;
  };
  // One input row: the GEMM into a scratch row, then each pixel's (ky, kx) blocks of out_c.
  static void task(void* ctx, size_t row) {
    const Task& t = *static_cast<const Task*>(ctx);
    const Int8TiledDeconv& op = *t.op;
#if NN_NATIVE_X86
    if (op.four_columns_) {
      int8_t* out0 = t.out + row * 2 * (op.in_w_ * 2);
      op.gemm_->deconv_2x2_row(t.x + row * op.in_w_ * op.in_c_, op.in_w_, out0, out0 + op.in_w_ * 2);
      return;
    }
#endif
    const size_t n = op.kh_ * op.kw_ * op.out_c_, c = op.out_c_;
    thread_local std::vector<int8_t> scratch;
    scratch.resize(op.in_w_ * n);
    op.gemm_->run_rows(t.x + row * op.in_w_ * op.in_c_, 0, op.in_w_, scratch.data(), n);
    const size_t b = row / op.in_h_, y = row % op.in_h_;
    const size_t out_w = op.in_w_ * op.kw_;
    for (size_t x = 0; x < op.in_w_; ++x)
      for (size_t ky = 0; ky < op.kh_; ++ky) {
        int8_t* dst = t.out + (((b * op.in_h_ + y) * op.kh_ + ky) * out_w + x * op.kw_) * c;
        std::memcpy(dst, scratch.data() + x * n + ky * op.kw_ * c, op.kw_ * c);
      }
  }
  std::unique_ptr<Int8Gemm> gemm_;
  size_t batch_, in_h_, in_w_, in_c_, kh_, kw_, out_c_;
  bool four_columns_;  // 2x2 to one channel, the GEMM's deconv_2x2_row
  std::string name_;
};

#if NN_NATIVE_X86
NN_TARGET_I8_AVX2 void requantize_avx2(const ChannelRequant& rq, const int32_t* acc, size_t rows, size_t n,
                                      int8_t* out) {
  for (size_t j = 0; j < n; j += 8) {
    const size_t cols = std::min<size_t>(8, n - j);
    const ChannelRequant::Columns8 c = rq.columns8(j);
    for (size_t r = 0; r < rows; ++r) {
      alignas(32) int32_t a[8] = {};
      std::memcpy(a, acc + r * n + j, cols * 4);
      const __m256i v = c.apply(_mm256_load_si256(reinterpret_cast<const __m256i*>(a)));
      const __m128i w16 = _mm_packs_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
      alignas(16) int8_t b8[16];
      _mm_store_si128(reinterpret_cast<__m128i*>(b8), _mm_packs_epi16(w16, w16));
      std::memcpy(out + r * n + j, b8, cols);
    }
  }
}

NN_TARGET_I8_512 void requantize_avx512(const ChannelRequant& rq, const int32_t* acc, size_t rows, size_t n,
                                        int8_t* out) {
  for (size_t j = 0; j < n; j += 16) {
    const __mmask16 k = __mmask16((1u << std::min<size_t>(16, n - j)) - 1);
    const ChannelRequant::Columns16 c = rq.columns16(j);
    for (size_t r = 0; r < rows; ++r)
      _mm512_mask_cvtsepi32_storeu_epi8(out + r * n + j, k,
                                        c.apply(_mm512_maskz_loadu_epi32(k, acc + r * n + j)));
  }
}
#endif

bool has_avx512_int8() {
#if NN_NATIVE_X86
  static const bool has = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                          __builtin_cpu_supports("avx512vl");
  return has;
#else
  return false;
#endif
}

}  // namespace

// Measured per conv against the VNNI form (bench/README.md, "AMX"; bench/int8_amx_shapes.cpp):
// AMX wins from k = 64 on, loses below it (k 16-32: k padded to 64, and the block's store and
// reload cost more than VNNI's few steps) and on a few rows (a squeeze-and-excitation gate's
// single pixel). Below 64 rows (7x7 and smaller images) it wins where the GEMM is not tiny: at
// 16-36 rows a GEMM of 64 x 64 columns or of 16 columns ties or loses (the tile configuration
// and the block's store and reload are fixed costs), from about 2e5 multiply-adds it wins.
bool amx_int8_conv_pays(size_t k, size_t n, size_t rows) {
  if (k < 64 || n < 16 || rows < 16) return false;
  return rows >= 64 || (n >= 32 && rows * k * n >= 200000);
}

bool amx_int8_cpu() {
#if NN_AMX
  // AMX-TILE and AMX-INT8 (cpuid 7.0 EDX bits 24, 25) and the OS saving the tile state (XCR0
  // bits 17, 18).
  static const bool has = [] {
    unsigned a = 0, b = 0, c = 0, d = 0;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d) || !(d & (1u << 24)) || !(d & (1u << 25))) return false;
    if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & (1u << 27))) return false;  // OSXSAVE: xgetbv exists
    uint32_t lo = 0, hi = 0;
    asm volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return (lo & (3u << 17)) == (3u << 17);
  }();
  return has;
#else
  return false;
#endif
}

bool amx_int8_usable() {
#if NN_AMX
  // Linux's per-process permission for the tile data, asked once, by the first GEMM that
  // would use it (so a process without such a conv leaves its signal frames as they were);
  // refused by kernels before 5.16, where a thread's sigaltstack is too small for the tile
  // state, and by emulators that do not know AMX (valgrind).
  static bool usable = false;
  static std::once_flag once;
  std::call_once(once, [] {
    constexpr long kReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
    usable = amx_int8_cpu() && syscall(SYS_arch_prctl, kReqXcompPerm, kXfeatureXtiledata) == 0;
  });
  return usable;
#else
  return false;
#endif
}

void requantize_per_channel(const int32_t* acc, size_t rows, const std::vector<quant::Multiplier>& m,
                            int32_t zo, quant::Range range, int64_t acc_bound, bool avx512, int8_t* out,
                            bool* short_form, bool fp32) {
  const size_t n = m.size(), padded = (n + 15) / 16 * 16;
  ChannelRequant rq(m, padded, zo, range, std::vector<int64_t>(n, acc_bound));
  if (fp32) rq.use_fp32();
  *short_form = rq.short_form;
#if NN_NATIVE_X86
  if (avx512 && has_avx512_int8()) return requantize_avx512(rq, acc, rows, n, out);
  if (!avx512 && native_conv_supported()) return requantize_avx2(rq, acc, rows, n, out);
#endif
  for (size_t r = 0; r < rows; ++r)
    for (size_t j = 0; j < n; ++j) out[r * n + j] = rq.scalar(acc[r * n + j], j);
}

std::unique_ptr<NativeDataOp> make_native_int8_conv(const Model& m, uint32_t k, const StaticLookup& statics,
                                                    const NativeIsa& isa, std::string* why, const CpuOptions& cpu) {
  const Operation& op = m.operations[k];
  auto no = [&](const char* reason) {
    *why = reason;
    return std::unique_ptr<NativeDataOp>();
  };
  const Operand& in = m.operands[op.inputs[0]];
  const Operand& filter = m.operands[op.inputs[1]];
  const Operand& out = m.operands[op.outputs[0]];
  if (in.dims.size() != 4 || out.dims.size() != 4) return no("not NHWC");
  if (filter.type != kPerChannel && !(filter.type == kQ8 && filter.zero_point == 0))
    return no("filter is not symmetric int8");
  const auto* w = static_cast<const int8_t*>(statics(op.inputs[1]));
  if (!w) return no("filter is not constant");
  const bool has_bias = m.has_value(op.inputs[2]);
  const auto* bias = has_bias ? static_cast<const int32_t*>(statics(op.inputs[2])) : nullptr;
  if (has_bias && !bias) return no("bias is not constant");
  std::string reason;
  auto p = parse_window_op(m, op, &reason);
  if (!p) return no("window parameters");
  // Without AVX-512 VNNI the convs run on the AVX2 GEMM and 3x3 / 5x5 depthwise convs on its
  // interleave (vpmaddubsw: faster than XNNPACK's AVX2 qs8 kernels, bench/README.md), but
  // where our kernels may use AVX-512 without VNNI, XNNPACK's AVX-512 ones are left to it.
  const bool wide = has_vnni(isa);
  const bool avx2_forms = !wide && !(isa.avx512 && has_avx512_int8()) && native_conv_supported();
  if (op.type == T::DEPTHWISE_CONV_2D) {
    if (!wide) {
      if (!avx2_forms) return no("int8 depthwise with AVX-512 but no VNNI, or without AVX2: XNNPACK's");
      if (filter.dims[1] != filter.dims[2] || (filter.dims[1] != 3 && filter.dims[1] != 5) ||
          p->dilation_h != 1 || p->dilation_w != 1)
        return no("int8 depthwise without AVX-512 VNNI other than 3x3 / 5x5, dilation 1: XNNPACK's");
      if (!isa.avx_vnni &&
          std::find(w, w + num_elements(filter.dims), int8_t{-128}) != w + num_elements(filter.dims))
        return no("int8 depthwise with a weight -128 without AVX-512 VNNI or AVX-VNNI: XNNPACK's");
    }
    // Our int32 lanes pay where XNNPACK's per-pixel overhead dominates (few channels) or the
    // taps are many (5x5); on MobileNetV2's wide 3x3 layers XNNPACK's (fp32 requantization,
    // 16-bit products) was 1.6-2x faster than them, but not than the VNNI 3x3 form (VBMI).
    const bool vnni3x3 =
        has_vbmi() && filter.dims[1] == 3 && filter.dims[2] == 3 && p->dilation_h == 1 && p->dilation_w == 1;
    if (wide && !vnni3x3 && filter.dims[3] > 32 && size_t(filter.dims[1]) * filter.dims[2] < 25)
      return no("int8 3x3 depthwise on more than 32 channels: XNNPACK's");
    // filter [1, kh, kw, C]: the per-channel axis is 3
    if (p->depth_multiplier != 1 || in.dims[3] != out.dims[3]) return no("int8 depthwise with a multiplier");
    const size_t c = filter.dims[3];
    if (filter.type == kPerChannel && filter.channel_quant.channel_dim != 3)
      return no("per-channel axis is not 3");
    NativeConvShape shape;
    shape.batch = in.dims[0], shape.in_h = in.dims[1], shape.in_w = in.dims[2], shape.in_c = uint32_t(c);
    shape.out_h = out.dims[1], shape.out_w = out.dims[2], shape.out_c = uint32_t(c);
    shape.kernel_h = filter.dims[1], shape.kernel_w = filter.dims[2];
    shape.stride_h = p->stride_h, shape.stride_w = p->stride_w;
    shape.dilation_h = p->dilation_h, shape.dilation_w = p->dilation_w;
    shape.pad_top = p->pad_top, shape.pad_left = p->pad_left;
    const std::vector<quant::Multiplier> per_channel = nnapi_multipliers(in, filter, out, c);
    for (const quant::Multiplier& mu : per_channel)
      if (mu.shift > 0) return no("a requantization multiplier above 1");
    return std::make_unique<Int8Depthwise>(shape, w, bias, per_channel, in.zero_point, out.zero_point,
                                           quant::activation_range(p->fuse, out), isa, op.inputs[0],
                                           cpu.int8_fp32_requant);
  }
  if (filter.type == kPerChannel && filter.channel_quant.channel_dim != 0)
    return no("per-channel axis is not 0");
  const size_t out_c = filter.dims[0], kh = filter.dims[1], kw = filter.dims[2], in_c = filter.dims[3];
  if (in_c != in.dims[3] || out_c != out.dims[3]) return no("filter / tensor channels differ");
  const std::vector<quant::Multiplier> per_channel = nnapi_multipliers(in, filter, out, out_c);
  for (const quant::Multiplier& mu : per_channel)
    if (mu.shift > 0) return no("a requantization multiplier above 1");
  const quant::Range range = quant::activation_range(p->fuse, out);
  if (op.type == T::CONV_2D) {
    if (!wide && !avx2_forms) return no("int8 conv with AVX-512 but no VNNI, or without AVX2: XNNPACK's");
    if (p->groups != 1) return no("grouped int8 conv");
    const size_t pixels = size_t(out.dims[0]) * out.dims[1] * out.dims[2];
    auto gemm =
        std::make_unique<Int8Gemm>(kh * kw * in_c, out_c, w, bias, per_channel, in.zero_point, out.zero_point,
                                   range, isa, amx_int8_conv_pays(kh * kw * in_c, out_c, pixels), pixels);
    gemm->read_in_place(cpu.native_int8_in_place_tiles);
    gemm->amx_in_place_tail(cpu.amx_in_place_tail);
    if (cpu.int8_fp32_requant) gemm->fp32_requant();
    if (kh == 1 && kw == 1 && p->stride_h == 1 && p->stride_w == 1 && !p->pad_top && !p->pad_bottom &&
        !p->pad_left && !p->pad_right)
      return std::make_unique<Int8PointwiseConv>(std::move(gemm), num_elements(in.dims) / in_c, out_c,
                                                 op.inputs[0]);
    NativeConvShape shape;
    shape.batch = in.dims[0], shape.in_h = in.dims[1], shape.in_w = in.dims[2], shape.in_c = in_c;
    shape.out_h = out.dims[1], shape.out_w = out.dims[2], shape.out_c = out_c;
    shape.kernel_h = kh, shape.kernel_w = kw, shape.stride_h = p->stride_h, shape.stride_w = p->stride_w;
    shape.dilation_h = p->dilation_h, shape.dilation_w = p->dilation_w;
    shape.pad_top = p->pad_top, shape.pad_left = p->pad_left;
    return std::make_unique<Int8WindowConv>(std::move(gemm), shape, in.zero_point, op.inputs[0],
                                            cpu.native_int8_direct_windows);
  }
  if (op.type == T::TRANSPOSE_CONV_2D) {
    if (kh != p->stride_h || kw != p->stride_w || p->pad_top || p->pad_bottom || p->pad_left ||
        p->pad_right || p->adjustment_h || p->adjustment_w || out.dims[1] != in.dims[1] * kh ||
        out.dims[2] != in.dims[2] * kw)
      return no("int8 transpose conv other than kernel == stride, unpadded");
    // GEMM columns j = (ky * kw + kx) * out_c + o read filter[o][ky][kx][:].
    const size_t n = kh * kw * out_c;
    std::vector<int8_t> wt(n * in_c);
    std::vector<int32_t> bt(n, 0);
    std::vector<quant::Multiplier> mt(n);
    for (size_t o = 0; o < out_c; ++o)
      for (size_t t = 0; t < kh * kw; ++t) {
        const size_t j = t * out_c + o;
        std::memcpy(wt.data() + j * in_c, w + (o * kh * kw + t) * in_c, in_c);
        bt[j] = bias ? bias[o] : 0;
        mt[j] = per_channel[o];
      }
    auto gemm = std::make_unique<Int8Gemm>(in_c, n, wt.data(), bt.data(), mt, in.zero_point, out.zero_point,
                                           range, isa);
    gemm->read_in_place(cpu.native_int8_in_place_tiles);
    if (cpu.int8_fp32_requant) gemm->fp32_requant();
    return std::make_unique<Int8TiledDeconv>(std::move(gemm), in.dims[0], in.dims[1], in.dims[2], in_c, kh,
                                             kw, out_c, op.inputs[0]);
  }
  return no("not a conv");
}

std::unique_ptr<NativeDataOp> int8_expand_depthwise(std::unique_ptr<NativeDataOp>& conv,
                                                    std::unique_ptr<NativeDataOp>& depthwise) {
  auto* c = dynamic_cast<Int8PointwiseConv*>(conv.get());
  auto* d = dynamic_cast<Int8Depthwise*>(depthwise.get());
  // A residual ADD either op runs (operands beyond its input) has no place in the rows.
  if (!c || !d || c->operands().size() != 1 || d->operands().size() != 1 || !d->row_kernel()) return nullptr;
  // AVX-512 VNNI (or AMX) GEMMs only: on AVX2 it gained nothing, and without AVX-VNNI it lost
  // (bench/README.md, "int8 expansion + depthwise").
  if (!c->gemm().vnni()) return nullptr;
  const NativeConvShape& s = d->shape();
  if (s.dilation_h != 1 || s.kernel_h > 5 || c->columns() != s.in_c ||
      c->pixels() != size_t(s.batch) * s.in_h * s.in_w)
    return nullptr;
  conv.release(), depthwise.release();
  return std::make_unique<Int8ExpandDepthwise>(std::unique_ptr<Int8PointwiseConv>(c),
                                               std::unique_ptr<Int8Depthwise>(d));
}

bool fuse_int8_table(NativeDataOp& conv, std::shared_ptr<const Int8Lookup> table, const std::string& op_name) {
  auto* op = dynamic_cast<Int8ConvOp*>(&conv);
  if (!op || !table || op->runs_residual()) return false;
  op->add_lookup(std::move(table), op_name);
  return true;
}

bool fuse_int8_residual_add(NativeDataOp& conv, const Model& m, uint32_t add, uint32_t residual, int32_t fuse,
                            const NativeIsa& isa, bool by_table, bool by_arithmetic) {
  auto* op = dynamic_cast<Int8ConvOp*>(&conv);
  if (!op || op->operands().size() != 1) return false;
  const Operation& a = m.operations[add];
  if (a.type != T::ADD || a.inputs.size() != 3 || a.outputs.size() != 1) return false;
  const uint32_t own = a.inputs[0] == residual ? a.inputs[1] : a.inputs[0];
  const Operand& x = m.operands[own];
  const Operand& r = m.operands[residual];
  const Operand& out = m.operands[a.outputs[0]];
  if (own == residual || x.type != kQ8 || r.type != kQ8 || out.type != kQ8 || x.dims != out.dims ||
      r.dims != out.dims)
    return false;
  auto math = std::make_unique<Int8AddMath>(x, r, out, fuse, isa);
  if (by_table && avx512_int8(isa) && has_vbmi()) {
    auto table = std::make_unique<Int8AddTable>();
    if (table->build(*math)) {
      op->add_residual(std::move(table), residual);
      return true;
    }
  }
  if (!by_arithmetic) return false;
  op->add_residual(std::move(math), residual);
  return true;
}

}  // namespace nn::cpu

// The native int8 kernels of native_int8.h: MUL, the table activations, MEAN over H and W,
// bilinear resize. Each has an AVX-512 form (F, BW, VL; the tables also VBMI), an AVX2
// form and scalar tails written as the reference kernels compute, so every path gives the
// reference's bytes.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "delegates/cpu/native_int8.h"
#include "delegates/cpu/native_int8_add.h"
#include "ops/op_params.h"
#include "ops/quant_math.h"
#include "ops/resize_taps.h"

#if NN_NATIVE_X86
// GCC 12 calls the AVX-512 intrinsics' unused pass-through operand (_mm512_undefined_*)
// uninitialized wherever they inline.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
// No "fma": GCC would contract the resize's multiplies and adds, which the reference
// (built for baseline x86-64) rounds one by one.
#define NN_INLINE_INT8_AVX2 __attribute__((target("avx2"), always_inline)) inline
#define NN_TARGET_VBMI __attribute__((target("avx512f,avx512bw,avx512vl,avx512vbmi,avx2")))
#define NN_TARGET_GATE_VNNI __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx2")))
#endif

namespace nn::cpu {
namespace {

using T = OperationType;
constexpr OperandType kQ8 = OperandType::TENSOR_QUANT8_ASYMM_SIGNED;

bool avx512_vbmi(const NativeIsa& isa) {
#if NN_NATIVE_X86
  static const bool has = __builtin_cpu_supports("avx512vbmi");
  return avx512_int8(isa) && has;
#else
  (void)isa;
  return false;
#endif
}

bool avx2(const NativeIsa&) {
  return native_conv_supported();
}

// Splits `units` of `unit_bytes` each into chunks of about 16 KB for for_each_row
// (*per_chunk units each); returns the number of chunks.
size_t chunk_count(size_t units, size_t unit_bytes, size_t* per_chunk) {
  *per_chunk = std::max<size_t>(1, 16384 / std::max<size_t>(unit_bytes, 1));
  return (units + *per_chunk - 1) / *per_chunk;
}

#if NN_NATIVE_X86
// si * (q - zi) for 16 (masked) / 8 int8 values, as the reference dequantizes.
NN_TARGET_INT8_512 inline __m512 dequantize16(const int8_t* p, __mmask16 k, __m512i zi, __m512 si) {
  return _mm512_mul_ps(
      si, _mm512_cvtepi32_ps(_mm512_sub_epi32(_mm512_cvtepi8_epi32(_mm_maskz_loadu_epi8(k, p)), zi)));
}
NN_TARGET_INT8_AVX2 inline __m256 dequantize8(const int8_t* p, __m256i zi, __m256 si) {
  const __m256i q = _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
  return _mm256_mul_ps(si, _mm256_cvtepi32_ps(_mm256_sub_epi32(q, zi)));
}

#endif

// ---------------------------------------------------------------------------------------
// MUL: out = clamp(MBQM((a - za) * (b - zb), a.scale * b.scale / out.scale) + zo, act).
// `a` is the full tensor, `b` per channel (broadcast over pixels) or shaped like `a`.
class Int8Mul final : public NativeDataOp {
 public:
  Int8Mul(const Operand& a, const Operand& b, const Operand& out, uint32_t a_index, uint32_t b_index,
          int32_t fuse, bool b_per_channel, const NativeIsa& isa, bool gate_pairs, bool fp32)
      : channels_(a.dims.back()),
        pixels_(num_elements(a.dims) / channels_),
        za_(a.zero_point),
        zb_(b.zero_point),
        zo_(out.zero_point),
        per_channel_(b_per_channel),
        real_(double(a.scale) * b.scale / out.scale),
        m_(quant::quantize_multiplier(real_)),
        fp_(m_),
        range_(quant::activation_range(fuse, out)) {
    operands_ = {a_index, b_index};
    // |(a - za) * (b - zb)| < 2^16: a left shift below 16 cannot overflow int32.
    simd_ = fp_.left < 16;
    avx512_ = simd_ && avx512_int8(isa);
    avx2_ = simd_ && !avx512_ && avx2(isa);
    // The gate's int32-only form (GateConstants): no left shift, a right shift of at most 15,
    // and not the multiplier 2^30, whose rounding sign test differs at a product of -1.
    gate_int32_ = (avx512_ || avx2_) && per_channel_ && m_.shift <= 0 && -m_.shift <= 15 &&
                  m_.multiplier != (1 << 30);
#if NN_NATIVE_X86
    gate_pairs_ = gate_int32_ && avx512_ && gate_pairs && __builtin_cpu_supports("avx512vnni");
#endif
    gate_pairs_avx2_ = gate_int32_ && avx2_ && gate_pairs;
    avx_vnni_ = gate_pairs_avx2_ && isa.avx_vnni;
    gate_fp32_avx512_ = per_channel_ && fp32 && avx512_int8(isa);
    gate_fp32_avx2_ = per_channel_ && fp32 && !gate_fp32_avx512_ && avx2(isa);
  }

  const char* kernel() const override {
    return gate_fp32_avx512_  ? "native int8 mul AVX-512 gate, fp32 requant"
           : gate_fp32_avx2_  ? "native int8 mul AVX2 gate, fp32 requant"
           : gate_pairs_      ? "native int8 mul AVX-512 VNNI gate pairs"
           : avx_vnni_        ? "native int8 mul AVX2 gate pairs, AVX-VNNI"
           : gate_pairs_avx2_ ? "native int8 mul AVX2 gate pairs"
           : avx512_          ? "native int8 mul AVX-512"
           : avx2_            ? "native int8 mul AVX2"
                              : "native int8 mul";
  }

  void run(const NativeDataArgs& args) const override {
    Task t{this,
           static_cast<const int8_t*>(args.inputs[0]),
           static_cast<const int8_t*>(args.inputs[1]),
           static_cast<int8_t*>(args.output),
           {},
           {},
           {},
           {},
           0,
           0,
           0,
           {}};
    if (per_channel_) {
      t.gate.resize(channels_ + 16);
      for (size_t c = 0; c < channels_; ++c) t.gate[c] = int32_t(t.b[c]) - zb_;
      if (gate_fp32_avx512_ || gate_fp32_avx2_) {
        fp32_constants(&t);
      } else if (gate_pairs_ || gate_pairs_avx2_) {
        pair_constants(&t);
      } else if (gate_int32_) {
        t.g_high.assign(channels_ + 16, 0);
        t.g_low.assign(channels_ + 16, 0);
        for (size_t c = 0; c < channels_; ++c) {
          const int64_t g = int64_t{t.gate[c]} * m_.multiplier;  // floor division by 2^17 below
          t.g_high[c] = static_cast<int32_t>(g >> 17);
          t.g_low[c] = static_cast<int32_t>(g & ((1 << 17) - 1));
        }
      }
    }
    const size_t rows = chunk_count(pixels_, channels_, &t.per_chunk);
    for_each_row(args.pool, rows, &Int8Mul::chunk, &t);
  }

 private:
  struct Task {
    const Int8Mul* op;
    const int8_t *a, *b;
    int8_t* out;
    std::vector<int32_t> gate;  // b - zb per channel (per_channel_)
    std::vector<int32_t> g_high, g_low;  // (b - zb) * multiplier = high * 2^17 + low (gate_int32_)
    // gate_pairs_: per channel c, repeated so that entry e is channel e % C for e < C + 64.
    // Rows of pairs_stride entries from pairs_start (64-byte aligned): high and low as int16
    // pairs (h & 127, h >> 7); the constant added to a high for a >= za, for a < za; -za low.
    std::vector<int32_t> pairs;
    size_t pairs_start, pairs_stride;
    size_t per_chunk;
    // The fp32 gate: per channel c the multiplier (b - zb) sa sb / so, then the constant
    // zo - za * multiplier, each repeated as `pairs` (entry e is channel e % C, e < C + 64).
    std::vector<float> fp32;
    bool fp32_small = false;  // every |a * m + k| of the fp32 gate below 2^30
  };

  int32_t scalar(int32_t a, int32_t b) const {
    const int32_t v = quant::multiply_by_quantized_multiplier((a - za_) * b, m_) + zo_;
    return std::clamp(v, range_.lo, range_.hi);
  }

  static void chunk(void* ctx, size_t row) {
    const Task& t = *static_cast<const Task*>(ctx);
    const Int8Mul& op = *t.op;
    const size_t p0 = row * t.per_chunk, p1 = std::min(op.pixels_, p0 + t.per_chunk);
#if NN_NATIVE_X86
    if (op.gate_fp32_avx512_) return op.gate_fp32_avx512(t, p0, p1);
    if (op.gate_fp32_avx2_) return op.gate_fp32_avx2(t, p0, p1);
    if (op.gate_pairs_) return op.gate_pairs_vnni(t, p0, p1);
    if (op.avx_vnni_) return op.gate_pairs_avx2<true>(t, p0, p1);
    if (op.gate_pairs_avx2_) return op.gate_pairs_avx2<false>(t, p0, p1);
    if (op.gate_int32_ && op.avx512_) return op.gate_avx512(t, p0, p1);
    if (op.gate_int32_) return op.gate_avx2(t, p0, p1);
    if (op.avx512_) return op.pixels_avx512(t, p0, p1);
    if (op.avx2_) return op.pixels_avx2(t, p0, p1);
#endif
    for (size_t p = p0; p < p1; ++p) op.pixel_tail(t, p, 0);
  }

  // Channels [from, C) of pixel p, as the reference computes them.
  void pixel_tail(const Task& t, size_t p, size_t from) const {
    const size_t c = channels_;
    for (size_t i = from; i < c; ++i) {
      const int32_t b = per_channel_ ? t.gate[i] : int32_t(t.b[p * c + i]) - zb_;
      t.out[p * c + i] = static_cast<int8_t>(scalar(t.a[p * c + i], b));
    }
  }

#if NN_NATIVE_X86
  // Pixels [p0, p1): a same-shaped b as one flat run of elements, a gate pixel by pixel;
  // masked tails.
  NN_TARGET_INT8_512 void pixels_avx512(const Task& t, size_t p0, size_t p1) const {
    const __m512i za = _mm512_set1_epi32(za_), zb = _mm512_set1_epi32(zb_), zo = _mm512_set1_epi32(zo_);
    const __m512i lo = _mm512_set1_epi32(range_.lo), hi = _mm512_set1_epi32(range_.hi);
    const Fixed16 fp(fp_);
#define NN_MUL_BLOCK(a, vb, o, k)                                                               \
  do {                                                                                          \
    const __m512i va_ = _mm512_sub_epi32(_mm512_cvtepi8_epi32(_mm_maskz_loadu_epi8(k, a)), za); \
    const __m512i v_ = _mm512_add_epi32(fp.apply(_mm512_mullo_epi32(va_, vb)), zo);             \
    _mm512_mask_cvtepi32_storeu_epi8(o, k, _mm512_min_epi32(_mm512_max_epi32(v_, lo), hi));     \
  } while (0)
    const size_t c = channels_;
    if (!per_channel_) {
      const size_t n = (p1 - p0) * c;
      const int8_t *a = t.a + p0 * c, *b = t.b + p0 * c;
      int8_t* o = t.out + p0 * c;
      for (size_t i = 0; i < n; i += 16) {
        const __mmask16 k = __mmask16((1u << std::min<size_t>(16, n - i)) - 1);
        const __m512i vb = _mm512_sub_epi32(_mm512_cvtepi8_epi32(_mm_maskz_loadu_epi8(k, b + i)), zb);
        NN_MUL_BLOCK(a + i, vb, o + i, k);
      }
      return;
    }
    for (size_t p = p0; p < p1; ++p)
      for (size_t i = 0; i < c; i += 16) {
        const __mmask16 k = __mmask16((1u << std::min<size_t>(16, c - i)) - 1);
        const __m512i vb = _mm512_maskz_loadu_epi32(k, t.gate.data() + i);
        NN_MUL_BLOCK(t.a + p * c + i, vb, t.out + p * c + i, k);
      }
#undef NN_MUL_BLOCK
  }

  // A per-channel gate g = b - zb without 64-bit products. With d = a - za, P = d g (|P| < 2^16),
  // M the multiplier and e the right shift, NNAPI's rounding doubling high multiply and
  // rounding divide nest into one floor:
  //   out - zo = floor((d G + 2^30 + 2^31 (2^(e-1) - n)) / 2^(31+e)),  G = g M,
  // n = [P M < -2^30] = [P < 0] (M > 2^30), the 2^31 term absent for e = 0. With
  // G = Gh 2^17 + Gl (0 <= Gl < 2^17) the floor splits into int32 steps:
  //   floor((d Gh + Ch + floor(d Gl / 2^17)) / 2^(14+e)),  Ch = 2^13 + 2^14 (2^(e-1) - n),
  // |d Gh| < 2^30, Ch < 2^29 (e <= 15), and sign(d Gh) = sign(P).
  NN_TARGET_INT8_512 void gate_avx512(const Task& t, size_t p0, size_t p1) const {
    const int e = -m_.shift;
    const __m512i za = _mm512_set1_epi32(za_), zo = _mm512_set1_epi32(zo_);
    const __m512i lo = _mm512_set1_epi32(range_.lo), hi = _mm512_set1_epi32(range_.hi);
    const __m512i ch = _mm512_set1_epi32((1 << 13) + (e > 0 ? (1 << (13 + e)) : 0));
    const __m512i negative = _mm512_set1_epi32(e > 0 ? 1 << 14 : 0);
    const __m128i shift = _mm_cvtsi32_si128(14 + e);
    const size_t c = channels_;
    for (size_t p = p0; p < p1; ++p)
      for (size_t i = 0; i < c; i += 16) {
        const __mmask16 k = __mmask16((1u << std::min<size_t>(16, c - i)) - 1);
        const __m512i d = _mm512_sub_epi32(_mm512_cvtepi8_epi32(_mm_maskz_loadu_epi8(k, t.a + p * c + i)), za);
        const __m512i high = _mm512_mullo_epi32(d, _mm512_loadu_si512(t.g_high.data() + i));
        const __m512i low = _mm512_srai_epi32(_mm512_mullo_epi32(d, _mm512_loadu_si512(t.g_low.data() + i)), 17);
        __m512i v = _mm512_add_epi32(_mm512_add_epi32(high, ch), low);
        v = _mm512_mask_sub_epi32(v, _mm512_cmplt_epi32_mask(high, _mm512_setzero_si512()), v, negative);  // - 2^14 n
        v = _mm512_add_epi32(_mm512_sra_epi32(v, shift), zo);
        _mm512_mask_cvtepi32_storeu_epi8(t.out + p * c + i, k, _mm512_min_epi32(_mm512_max_epi32(v, lo), hi));
      }
  }

  // gate_avx512's arithmetic with its two products as AVX-512 VNNI's vpdpwssd on int16
  // pairs, 64 elements a step over a run of pixels (the channel constants repeated past C,
  // read from offset e % C; kept in registers when C divides 16), packed to bytes with
  // saturation. x = (a, 128 a) per int32 lane (a the input byte, |128 a| < 2^15) times
  // (h & 127, h >> 7) gives a h for any |h| < 2^22 (|high| < 2^22, low < 2^17), added to the
  // lane's constant in the same instruction: -za low for the low product; for the high one
  // -za high (d = a - za) + gate_avx512's Ch - 2^14 n, n = [d g < 0] = [a < za] xor [g < 0]
  // (for d = 0 either n gives floor(Ch / 2^(14+e)) = 0), one row per sign of d.
  void pair_constants(Task* t) const {
    const int e = -m_.shift;
    const size_t c = channels_, n = c + 64;
    // Five rows of n entries, each row 64-byte aligned.
    t->pairs_stride = (n + 15) / 16 * 16;
    t->pairs.assign(5 * t->pairs_stride + 16, 0);
    t->pairs_start = (64 - reinterpret_cast<uintptr_t>(t->pairs.data()) % 64) % 64 / sizeof(int32_t);
    int32_t* row = t->pairs.data() + t->pairs_start;
    int32_t *p_high = row, *p_low = row + t->pairs_stride, *k_pos = row + 2 * t->pairs_stride,
            *k_neg = row + 3 * t->pairs_stride, *k_low = row + 4 * t->pairs_stride;
    const int32_t ch = (1 << 13) + (e > 0 ? (1 << (13 + e)) : 0), negative = e > 0 ? 1 << 14 : 0;
    auto pair = [](int32_t v) {  // v = (v >> 7) 128 + (v & 127), both halves int16
      return int32_t(uint32_t(v & 127) | (uint32_t(v >> 7) << 16));
    };
    for (size_t i = 0; i < n; ++i) {
      const int32_t g = t->gate[i % c];
      const int64_t big = int64_t{g} * m_.multiplier;
      const int32_t high = static_cast<int32_t>(big >> 17), low = static_cast<int32_t>(big & ((1 << 17) - 1));
      p_high[i] = pair(high);
      p_low[i] = pair(low);
      const int32_t base = -za_ * high + ch;
      k_pos[i] = base - (g < 0 ? negative : 0);
      k_neg[i] = base - (g > 0 ? negative : 0);
      k_low[i] = -za_ * low;
    }
  }

  // The fp32 gate's constants (Task::fp32), made per run from the gate's bytes.
  void fp32_constants(Task* t) const {
    const size_t c = channels_, n = c + 64;
    t->fp32.assign(2 * n, 0.f);
    double largest = 0.0;
    for (size_t i = 0; i < n; ++i) {
      const double m = double(t->gate[i % c]) * real_;
      t->fp32[i] = float(m);
      t->fp32[n + i] = float(double(zo_) - double(za_) * double(float(m)));
      largest = std::max(largest, 128.0 * std::fabs(double(t->fp32[i])) + std::fabs(double(t->fp32[n + i])));
    }
    t->fp32_small = largest < 0x1p30;
  }

  // One element of the fp32 gate: a * m + k in one rounding (the FMA the vector forms run),
  // clamped, rounded to nearest even.
  int8_t gate_fp32(int8_t a, float m, float k) const {
    const float y = std::clamp(std::fma(float(a), m, k), float(range_.lo), float(range_.hi));
    return static_cast<int8_t>(std::nearbyint(y));
  }

  // CpuOptions::int8_fp32_requant's gate: each output one FMA in float, as XNNPACK and qnnpack
  // requantize, where NNAPI's fixed point takes two roundings on int32 products (within one
  // step of it, equal on nearly every byte). 64 elements a step, masked tail.
  NN_TARGET_INT8_512 void gate_fp32_avx512(const Task& t, size_t p0, size_t p1) const {
    const size_t c = channels_, n = c + 64, end = p1 * c, step = 64 % c;
    const float* mul = t.fp32.data();
    const float* add = mul + n;
    const __m512 lo = _mm512_set1_ps(float(range_.lo)), hi = _mm512_set1_ps(float(range_.hi));
    const __m512i order = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
    const int8_t* a = t.a;
    int8_t* out = t.out;  // locals: the stores may alias t's members
    size_t off = 0;       // e % c: chunks start at a pixel
    for (size_t e = p0 * c; e < end; e += 64) {
      const bool full = end - e >= 64;
      const __mmask64 k = full ? ~__mmask64{0} : (__mmask64{1} << (end - e)) - 1;
      __m512i v[4];
#pragma GCC unroll 4
      for (int q = 0; q < 4; ++q) {
        const __m128i bytes = full ? _mm_loadu_si128(reinterpret_cast<const __m128i*>(a + e + 16 * q))
                                   : _mm_maskz_loadu_epi8(__mmask16(k >> (16 * q)), a + e + 16 * q);
        const __m512 x = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(bytes));
        const __m512 y = _mm512_fmadd_ps(x, _mm512_loadu_ps(mul + off + 16 * q), _mm512_loadu_ps(add + off + 16 * q));
        v[q] = _mm512_cvtps_epi32(_mm512_min_ps(_mm512_max_ps(y, lo), hi));
      }
      const __m512i w = _mm512_permutexvar_epi32(
          order, _mm512_packs_epi16(_mm512_packs_epi32(v[0], v[1]), _mm512_packs_epi32(v[2], v[3])));
      if (full)  // whole vectors unmasked
        _mm512_storeu_si512(out + e, w);
      else
        _mm512_mask_storeu_epi8(out + e, k, w);
      off += step;
      if (off >= c) off -= c;
    }
  }

  // The same on 8 lanes, 32 elements a step; the last few by gate_fp32.
  NN_TARGET_AVX2 void gate_fp32_avx2(const Task& t, size_t p0, size_t p1) const {
    const size_t c = channels_, n = c + 64, end = p1 * c, step = 32 % c;
    const float* mul = t.fp32.data();
    const float* add = mul + n;
    const __m256 lo = _mm256_set1_ps(float(range_.lo)), hi = _mm256_set1_ps(float(range_.hi));
    const __m256i lo8 = _mm256_set1_epi8(int8_t(range_.lo)), hi8 = _mm256_set1_epi8(int8_t(range_.hi));
    const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    size_t off = 0, e = p0 * c;
    for (; e + 32 <= end; e += 32) {
      __m256i v[4];
#pragma GCC unroll 4
      for (int q = 0; q < 4; ++q) {
        // 8 bytes loaded and widened in one vpmovsxbd.
        const __m128i part = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(t.a + e + 8 * q));
        const __m256 x = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(part));
        const __m256 y = _mm256_fmadd_ps(x, _mm256_loadu_ps(mul + off + 8 * q), _mm256_loadu_ps(add + off + 8 * q));
        // Where every |y| is below 2^30 (t.fp32_small), rounded first and clamped as bytes
        // below: the same integers, as the bounds are.
        v[q] = _mm256_cvtps_epi32(t.fp32_small ? y : _mm256_min_ps(_mm256_max_ps(y, lo), hi));
      }
      __m256i w = _mm256_packs_epi16(_mm256_packs_epi32(v[0], v[1]), _mm256_packs_epi32(v[2], v[3]));
      if (t.fp32_small) w = _mm256_min_epi8(_mm256_max_epi8(w, lo8), hi8);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(t.out + e), _mm256_permutevar8x32_epi32(w, order));
      off += step;
      if (off >= c) off -= c;
    }
    for (; e < end; ++e, ++off) {
      if (off >= c) off -= c;
      t.out[e] = gate_fp32(t.a[e], mul[off], add[off]);
    }
  }

// 16 elements (quarter q of the 64 bytes in `bytes`) into v[q], the constants ph, pl (the
// pairs of high and low), kp, kn (the high's constant for a >= za, a < za), kl (the low's)
// from CONST(q).
#define NN_GATE_PAIRS_QUARTER(q, CONST)                                                                  \
  do {                                                                                                  \
    CONST(q);                                                                                           \
    const __m512i a = _mm512_cvtepi8_epi32(_mm512_extracti32x4_epi32(bytes, q));                        \
    const __m512i x = _mm512_ternarylogic_epi32(a, _mm512_slli_epi32(a, 23), low16, 0xEC); /* a & low16 | a << 23 */ \
    const __m512i kh = _mm512_mask_mov_epi32(kp, _mm512_cmplt_epi32_mask(a, za), kn);                   \
    const __m512i high = _mm512_dpwssd_epi32(kh, x, ph);                                                \
    const __m512i low = _mm512_srai_epi32(_mm512_dpwssd_epi32(kl, x, pl), 17);                          \
    v[q] = _mm512_sra_epi32(_mm512_add_epi32(high, low), shift);                                        \
  } while (0)
// The 64 elements from e (mask k).
#define NN_GATE_PAIRS_STEP(CONST)                                                                        \
  do {                                                                                                  \
    __m512i v[4];                                                                                       \
    const __m512i bytes = _mm512_maskz_loadu_epi8(k, t.a + e);                                          \
    NN_GATE_PAIRS_QUARTER(0, CONST);                                                                    \
    NN_GATE_PAIRS_QUARTER(1, CONST);                                                                    \
    NN_GATE_PAIRS_QUARTER(2, CONST);                                                                    \
    NN_GATE_PAIRS_QUARTER(3, CONST);                                                                    \
    const __m512i w01 = _mm512_adds_epi16(_mm512_packs_epi32(v[0], v[1]), zo);                          \
    const __m512i w23 = _mm512_adds_epi16(_mm512_packs_epi32(v[2], v[3]), zo);                          \
    const __m512i y = _mm512_permutexvar_epi32(order, _mm512_packs_epi16(w01, w23));                    \
    _mm512_mask_storeu_epi8(t.out + e, k, _mm512_min_epi8(_mm512_max_epi8(y, lo), hi));                \
  } while (0)
#define NN_GATE_PAIRS_AT(q)                                              \
  const size_t o = off + 16 * (q);                                      \
  const __m512i ph = _mm512_loadu_si512(cst + o);                       \
  const __m512i pl = _mm512_loadu_si512(cst + stride + o);              \
  const __m512i kp = _mm512_loadu_si512(cst + 2 * stride + o);          \
  const __m512i kn = _mm512_loadu_si512(cst + 3 * stride + o);          \
  const __m512i kl = _mm512_loadu_si512(cst + 4 * stride + o)

  NN_TARGET_GATE_VNNI void gate_pairs_vnni(const Task& t, size_t p0, size_t p1) const {
    const __m512i za = _mm512_set1_epi32(za_), low16 = _mm512_set1_epi32(0xFFFF);
    const __m512i zo = _mm512_set1_epi16(static_cast<int16_t>(zo_));
    const __m512i lo = _mm512_set1_epi8(static_cast<char>(range_.lo));
    const __m512i hi = _mm512_set1_epi8(static_cast<char>(range_.hi));
    const __m512i order = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
    const __m128i shift = _mm_cvtsi32_si128(14 - m_.shift);
    const size_t c = channels_, end = p1 * c;
    const int32_t* cst = t.pairs.data() + t.pairs_start;
    const size_t stride = t.pairs_stride;
    if (16 % c == 0) {  // every 16 elements start a pixel: one set of constants
      const __m512i ph = _mm512_load_si512(cst), pl = _mm512_load_si512(cst + stride);
      const __m512i kp = _mm512_load_si512(cst + 2 * stride), kn = _mm512_load_si512(cst + 3 * stride);
      const __m512i kl = _mm512_load_si512(cst + 4 * stride);
      for (size_t e = p0 * c; e < end; e += 64) {
        const __mmask64 k = end - e >= 64 ? ~__mmask64{0} : (__mmask64{1} << (end - e)) - 1;
        NN_GATE_PAIRS_STEP((void));
      }
      return;
    }
    const size_t step = 64 % c;
    size_t off = 0;  // e % c: runs start at a pixel
    for (size_t e = p0 * c; e < end; e += 64) {
      const __mmask64 k = end - e >= 64 ? ~__mmask64{0} : (__mmask64{1} << (end - e)) - 1;
      NN_GATE_PAIRS_STEP(NN_GATE_PAIRS_AT);
      off += step;
      if (off >= c) off -= c;
    }
  }
#undef NN_GATE_PAIRS_AT
#undef NN_GATE_PAIRS_STEP
#undef NN_GATE_PAIRS_QUARTER

  // acc + the int16 pair products of x and y: AVX-VNNI's vpdpwssd (in asm, as the int8 convs'
  // vpdpbusd: it runs only where NativeIsa::avx_vnni says the CPU has it), else vpmaddwd + add.
  template <bool kVnni>
  static NN_INLINE_INT8_AVX2 __m256i gate_dot(__m256i acc, __m256i x, __m256i y) {
    if constexpr (kVnni) {
      asm("%{vex%} vpdpwssd %2, %1, %0" : "+x"(acc) : "x"(x), "x"(y));
      return acc;
    } else {
      return _mm256_add_epi32(acc, _mm256_madd_epi16(x, y));
    }
  }

  // gate_pairs_vnni on 8 int32 lanes, 32 elements a step (the elements past the last 32 of
  // the run as the reference); the products as AVX-VNNI's vpdpwssd (kVnni) or vpmaddwd and an
  // add.
  template <bool kVnni>
  NN_TARGET_INT8_AVX2 void gate_pairs_avx2(const Task& t, size_t p0, size_t p1) const {
    const __m256i za = _mm256_set1_epi32(za_), zo = _mm256_set1_epi16(static_cast<int16_t>(zo_));
    const __m256i lo = _mm256_set1_epi8(static_cast<char>(range_.lo));
    const __m256i hi = _mm256_set1_epi8(static_cast<char>(range_.hi));
    const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    const __m128i shift = _mm_cvtsi32_si128(14 - m_.shift);
    const size_t c = channels_, end = p1 * c, step = 32 % c;
    const int32_t* cst = t.pairs.data() + t.pairs_start;
    const size_t stride = t.pairs_stride;
    size_t off = 0, e = p0 * c;  // off = e % c: runs start at a pixel
    for (; e + 32 <= end; e += 32) {
      __m256i v[4];
      for (int q = 0; q < 4; ++q) {
        const int32_t* k = cst + off + 8 * q;
        const __m256i a = _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(t.a + e + 8 * q)));
        const __m256i x = _mm256_blend_epi16(a, _mm256_slli_epi32(a, 23), 0xAA);  // (a, 128 a)
        const __m256i kh = _mm256_blendv_epi8(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(k + 2 * stride)),
                                              _mm256_loadu_si256(reinterpret_cast<const __m256i*>(k + 3 * stride)),
                                              _mm256_cmpgt_epi32(za, a));
        const __m256i high = gate_dot<kVnni>(kh, x, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(k)));
        const __m256i low = _mm256_srai_epi32(
            gate_dot<kVnni>(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(k + 4 * stride)), x,
                _mm256_loadu_si256(reinterpret_cast<const __m256i*>(k + stride))),
            17);
        v[q] = _mm256_sra_epi32(_mm256_add_epi32(high, low), shift);
      }
      const __m256i w01 = _mm256_adds_epi16(_mm256_packs_epi32(v[0], v[1]), zo);
      const __m256i w23 = _mm256_adds_epi16(_mm256_packs_epi32(v[2], v[3]), zo);
      const __m256i y = _mm256_permutevar8x32_epi32(_mm256_packs_epi16(w01, w23), order);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(t.out + e), _mm256_min_epi8(_mm256_max_epi8(y, lo), hi));
      off += step;
      if (off >= c) off -= c;
    }
    for (; e < end; ++e) t.out[e] = static_cast<int8_t>(scalar(t.a[e], t.gate[e % c]));
  }

  // gate_avx512 on 8 channels a step, the channels past the last 8 as the reference.
  NN_TARGET_INT8_AVX2 void gate_avx2(const Task& t, size_t p0, size_t p1) const {
    const int e = -m_.shift;
    const __m256i za = _mm256_set1_epi32(za_), zo = _mm256_set1_epi32(zo_), zero = _mm256_setzero_si256();
    const __m256i lo = _mm256_set1_epi32(range_.lo), hi = _mm256_set1_epi32(range_.hi);
    const __m256i ch = _mm256_set1_epi32((1 << 13) + (e > 0 ? (1 << (13 + e)) : 0));
    const __m256i negative = _mm256_set1_epi32(e > 0 ? 1 << 14 : 0);
    const __m128i shift = _mm_cvtsi32_si128(14 + e);
    const size_t c = channels_;
    for (size_t p = p0; p < p1; ++p) {
      size_t i = 0;
      for (; i + 8 <= c; i += 8) {
        const __m256i d = _mm256_sub_epi32(
            _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(t.a + p * c + i))), za);
        const __m256i high = _mm256_mullo_epi32(
            d, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(t.g_high.data() + i)));
        const __m256i low = _mm256_srai_epi32(
            _mm256_mullo_epi32(d, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(t.g_low.data() + i))), 17);
        __m256i v = _mm256_add_epi32(_mm256_add_epi32(high, ch), low);
        v = _mm256_sub_epi32(v, _mm256_and_si256(_mm256_cmpgt_epi32(zero, high), negative));  // - 2^14 n
        v = _mm256_add_epi32(_mm256_sra_epi32(v, shift), zo);
        store8(t.out + p * c + i, _mm256_min_epi32(_mm256_max_epi32(v, lo), hi));
      }
      pixel_tail(t, p, i);
    }
  }

  NN_TARGET_INT8_AVX2 void pixels_avx2(const Task& t, size_t p0, size_t p1) const {
    const __m256i za = _mm256_set1_epi32(za_), zb = _mm256_set1_epi32(zb_), zo = _mm256_set1_epi32(zo_);
    const __m256i lo = _mm256_set1_epi32(range_.lo), hi = _mm256_set1_epi32(range_.hi);
    const size_t c = channels_;
    for (size_t p = p0; p < p1; ++p) {
      const int8_t* a = t.a + p * c;
      int8_t* o = t.out + p * c;
      size_t i = 0;
      for (; i + 8 <= c; i += 8) {
        const __m256i va = _mm256_sub_epi32(
            _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(a + i))), za);
        const __m256i vb = per_channel_
                               ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(t.gate.data() + i))
                               : _mm256_sub_epi32(_mm256_cvtepi8_epi32(_mm_loadl_epi64(
                                                      reinterpret_cast<const __m128i*>(t.b + p * c + i))),
                                                  zb);
        const __m256i v = _mm256_add_epi32(mbqm8(_mm256_mullo_epi32(va, vb), fp_), zo);
        store8(o + i, _mm256_min_epi32(_mm256_max_epi32(v, lo), hi));
      }
      pixel_tail(t, p, i);
    }
  }
#endif

  size_t channels_, pixels_;
  int32_t za_, zb_, zo_;
  bool per_channel_;
  double real_;  // sa sb / so
  quant::Multiplier m_;
  FixedPoint fp_;
  quant::Range range_;
  bool simd_ = false, avx512_ = false, avx2_ = false, gate_int32_ = false;
  bool gate_fp32_avx512_ = false;  // gate_fp32_avx512 (CpuOptions::int8_fp32_requant)
  bool gate_fp32_avx2_ = false;    // gate_fp32_avx2 (the same switch)
  bool gate_pairs_ = false;       // gate_pairs_vnni (CpuOptions::native_int8_gate_pairs)
  bool gate_pairs_avx2_ = false;  // gate_pairs_avx2 (the same switch)
  bool avx_vnni_ = false;         // gate_pairs_avx2<true>: AVX-VNNI's ymm vpdpwssd
};

// ---------------------------------------------------------------------------------------
// ADD of two same-shaped tensors in chunks, by a Form's run(a, b, out, n): NNAPI's addQuant8
// arithmetic (Int8AddMath) or its byte tables (TableForm, AVX-512 VBMI).
struct TableForm {
  Int8AddTable table;
  void run(const int8_t* a, const int8_t* b, int8_t* out, size_t n) const { table.run(a, b, out, n, true); }
};

// XNNPACK's qs8 add scheme on AVX2, one rounding where NNAPI rounds three times:
// out = clamp(zo + ((a Ma + b Mb + bias) >> s)), Ma = round(sa / so 2^s), Mb likewise,
// bias = 2^(s-1) - za Ma - zb Mb (half up). Ma and Mb are int16, so each input pair is one
// vpmaddwd lane: 32 outputs from four. Within one step of NNAPI's bytes: build() checks all
// 65536 input pairs against Int8AddMath and refuses otherwise.
class OneRoundingForm {
 public:
  bool build(const Operand& a, const Operand& b, const Operand& out, int32_t fuse, const Int8AddMath& exact) {
    const double ra = double(a.scale) / out.scale, rb = double(b.scale) / out.scale;
    const double larger = std::max(ra, rb);
    if (!(larger > 0) || !std::isfinite(larger)) return false;
    // The largest shift (at most 30) whose larger multiplier fits int16; at least 12, so the
    // multipliers' rounding moves a sum (|a - za| <= 255 per input) by under 1/16 of a step.
    shift_ = 30;
    while (shift_ >= 12 && std::lround(std::ldexp(larger, shift_)) > 32767) --shift_;
    if (shift_ < 12) return false;
    ma_ = int16_t(std::lround(std::ldexp(ra, shift_)));
    mb_ = int16_t(std::lround(std::ldexp(rb, shift_)));
    bias_ = (int32_t{1} << (shift_ - 1)) - a.zero_point * int32_t{ma_} - b.zero_point * int32_t{mb_};
    zo_ = int16_t(out.zero_point);
    const quant::Range range = quant::activation_range(fuse, out);
    lo_ = int8_t(range.lo);
    hi_ = int8_t(range.hi);
    for (int32_t x = -128; x < 128; ++x)
      for (int32_t y = -128; y < 128; ++y)
        if (std::abs(scalar(int8_t(x), int8_t(y)) - exact.scalar(x, y)) > 1) return false;
    return true;
  }

  int8_t scalar(int8_t a, int8_t b) const {
    const int32_t q = ((a * int32_t{ma_} + b * int32_t{mb_} + bias_) >> shift_) + zo_;
    return static_cast<int8_t>(std::clamp<int32_t>(q, lo_, hi_));
  }

  // out[i] = a[i] + b[i] for i < n; out may be a or b (each vector is read before it is written).
  void run(const int8_t* a, const int8_t* b, int8_t* out, size_t n) const {
    size_t i = 0;
#if NN_NATIVE_X86
    i = run_avx2(a, b, out, n);
#endif
    for (; i < n; ++i) out[i] = scalar(a[i], b[i]);
  }

 private:
#if NN_NATIVE_X86
  // 8 outputs (4 per 128-bit half) from their (a, b) pairs as int16: vpmaddwd by (Ma, Mb),
  // the bias, the shift.
  NN_INLINE_INT8_AVX2 static __m256i eight(__m256i pairs16, __m256i m, __m256i bias, __m128i shift) {
    return _mm256_sra_epi32(_mm256_add_epi32(_mm256_madd_epi16(pairs16, m), bias), shift);
  }

  // 32 outputs a step: a and b interleaved bytewise, widened to int16 with their sign bytes
  // (unpacks within 128-bit halves), which the packs back to bytes undo in order.
  NN_TARGET_INT8_AVX2 size_t run_avx2(const int8_t* a, const int8_t* b, int8_t* out, size_t n) const {
    const __m256i m = _mm256_set1_epi32(int32_t(uint16_t(ma_)) | int32_t(uint32_t(uint16_t(mb_)) << 16));
    const __m256i bias = _mm256_set1_epi32(bias_), zo = _mm256_set1_epi16(zo_);
    const __m256i lo = _mm256_set1_epi8(lo_), hi = _mm256_set1_epi8(hi_), zero = _mm256_setzero_si256();
    const __m128i shift = _mm_cvtsi32_si128(shift_);
    size_t i = 0;
    for (; i + 32 <= n; i += 32) {
      const __m256i va = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a + i));
      const __m256i vb = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + i));
      // Pairs 0-7 | 16-23 and 8-15 | 24-31, each (a, b) as two bytes.
      const __m256i y0 = _mm256_unpacklo_epi8(va, vb), y1 = _mm256_unpackhi_epi8(va, vb);
      const __m256i s0 = _mm256_cmpgt_epi8(zero, y0), s1 = _mm256_cmpgt_epi8(zero, y1);
      const __m256i v0 = eight(_mm256_unpacklo_epi8(y0, s0), m, bias, shift);    // pairs 0-3 | 16-19
      const __m256i v1 = eight(_mm256_unpackhi_epi8(y0, s0), m, bias, shift);    // 4-7 | 20-23
      const __m256i v2 = eight(_mm256_unpacklo_epi8(y1, s1), m, bias, shift);    // 8-11 | 24-27
      const __m256i v3 = eight(_mm256_unpackhi_epi8(y1, s1), m, bias, shift);    // 12-15 | 28-31
      const __m256i first = _mm256_adds_epi16(_mm256_packs_epi32(v0, v1), zo);   // 0-7 | 16-23
      const __m256i second = _mm256_adds_epi16(_mm256_packs_epi32(v2, v3), zo);  // 8-15 | 24-31
      const __m256i bytes = _mm256_packs_epi16(first, second);                   // 0-15 | 16-31
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i),
                          _mm256_min_epi8(_mm256_max_epi8(bytes, lo), hi));
    }
    return i;
  }
#endif

  int16_t ma_ = 0, mb_ = 0, zo_ = 0;
  int32_t bias_ = 0;
  int shift_ = 0;
  int8_t lo_ = -128, hi_ = 127;
};

template <typename Form>
class Int8Add final : public NativeDataOp {
 public:
  Int8Add(Form form, std::string name, size_t count, uint32_t a_index, uint32_t b_index)
      : count_(count), form_(std::move(form)), name_(std::move(name)) {
    operands_ = {a_index, b_index};
  }

  const char* kernel() const override { return name_.c_str(); }

  void run(const NativeDataArgs& args) const override {
    Task t{this, static_cast<const int8_t*>(args.inputs[0]), static_cast<const int8_t*>(args.inputs[1]),
           static_cast<int8_t*>(args.output), 0};
    const size_t rows = chunk_count(count_, 1, &t.per_chunk);
    for_each_row(args.pool, rows, &Int8Add::chunk, &t);
  }

 private:
  struct Task {
    const Int8Add* op;
    const int8_t *a, *b;
    int8_t* out;
    size_t per_chunk;
  };

  static void chunk(void* ctx, size_t row) {
    const Task& t = *static_cast<const Task*>(ctx);
    const size_t i0 = row * t.per_chunk, i1 = std::min(t.op->count_, i0 + t.per_chunk);
    t.op->form_.run(t.a + i0, t.b + i0, t.out + i0, i1 - i0);
  }

  size_t count_;
  Form form_;
  std::string name_;
};

// ---------------------------------------------------------------------------------------
// HARD_SWISH / TANH / LOGISTIC through the reference's table: out[i] = table[in[i] + 128].
class Int8Table final : public NativeDataOp, public Int8Lookup {
 public:
  Int8Table(const std::vector<int32_t>& table, uint32_t input, size_t count, const NativeIsa& isa, bool avx2_lookup)
      : count_(count),
        vbmi_(avx512_vbmi(isa)),
        avx2_(!vbmi_ && avx2_lookup && avx2(isa)),
        avx512_(avx512_int8(isa)),
        avx2_cvt_(avx2(isa)) {
    for (size_t i = 0; i < 256; ++i) table_[i] = static_cast<int8_t>(table[i]);
    operands_ = {input};
    name_ = vbmi_ ? "native int8 table AVX-512 VBMI" : avx2_ ? "native int8 table AVX2" : "native int8 table";
  }
  const char* kernel() const override { return name_.c_str(); }

  // This table writing float(q - zq) * scale for each byte q it looks up (int8_table_dequantized).
  std::unique_ptr<NativeDataOp> dequantized(float scale, int32_t zq) const {
    auto d = std::make_unique<Int8Table>(*this);
    d->to_float_ = true;
    d->scale_ = scale;
    d->zq_ = zq;
    d->name_ += " +DEQUANTIZE";
    return d;
  }

  void run(const NativeDataArgs& args) const override {
    Task t{this, static_cast<const int8_t*>(args.inputs[0]), args.output, 0};
    const size_t rows = chunk_count(count_, 1, &t.per_chunk);
    for_each_row(args.pool, rows, &Int8Table::chunk, &t);
  }

 private:
  struct Task {
    const Int8Table* op;
    const int8_t* in;
    void* out;
    size_t per_chunk;
  };

 public:
  bool to_float() const { return to_float_; }
  // out[i] = the table's byte for in[i], i < n.
  void lookup(const int8_t* in, int8_t* out, size_t n) const override {
    size_t i = 0;
#if NN_NATIVE_X86
    if (vbmi_) i = lookup_vbmi(in, out, n);
    else if (avx2_) i = lookup_avx2(in, out, n);
#endif
    for (; i < n; ++i) out[i] = table_[static_cast<uint8_t>(in[i]) ^ 0x80u];
  }

 private:
  static void chunk(void* ctx, size_t row) {
    const Task& t = *static_cast<const Task*>(ctx);
    const size_t i0 = row * t.per_chunk, n = std::min(t.op->count_, i0 + t.per_chunk) - i0;
    if (!t.op->to_float_) return t.op->lookup(t.in + i0, static_cast<int8_t*>(t.out) + i0, n);
    // Through a block of bytes that stays in L1, then dequantized as the reference does.
    alignas(64) int8_t q[256];
    float* out = static_cast<float*>(t.out) + i0;
    for (size_t b = 0; b < n; b += sizeof(q)) {
      const size_t m = std::min(sizeof(q), n - b);
      t.op->lookup(t.in + i0 + b, q, m);
      t.op->dequantize(q, out + b, m);
    }
  }
  void dequantize(const int8_t* q, float* out, size_t n) const {
    size_t i = 0;
#if NN_NATIVE_X86
    if (avx512_) i = dequantize_avx512(q, out, n);
    else if (avx2_cvt_) i = dequantize_avx2(q, out, n);
#endif
    for (; i < n; ++i) out[i] = static_cast<float>(q[i] - zq_) * scale_;
  }
#if NN_NATIVE_X86
  NN_TARGET_INT8_512 size_t dequantize_avx512(const int8_t* q, float* out, size_t n) const {
    const __m512i zq = _mm512_set1_epi32(zq_);
    const __m512 scale = _mm512_set1_ps(scale_);
    for (size_t i = 0; i < n; i += 16) {
      const __mmask16 k = n - i >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << (n - i)) - 1);
      _mm512_mask_storeu_ps(out + i, k, dequantize16(q + i, k, zq, scale));
    }
    return n;
  }
  NN_TARGET_INT8_AVX2 size_t dequantize_avx2(const int8_t* q, float* out, size_t n) const {
    const __m256i zq = _mm256_set1_epi32(zq_);
    const __m256 scale = _mm256_set1_ps(scale_);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(out + i, dequantize8(q + i, zq, scale));
    return i;
  }
#endif

#if NN_NATIVE_X86
  // 64 bytes a step: two 128-entry permutes (index bits 0-6), chosen by bit 7.
  NN_TARGET_VBMI size_t lookup_vbmi(const int8_t* in, int8_t* out, size_t n) const {
    const __m512i t0 = _mm512_loadu_si512(table_.data()), t1 = _mm512_loadu_si512(table_.data() + 64);
    const __m512i t2 = _mm512_loadu_si512(table_.data() + 128), t3 = _mm512_loadu_si512(table_.data() + 192);
    const __m512i flip = _mm512_set1_epi8(char(0x80));
    for (size_t i = 0; i < n; i += 64) {
      const __mmask64 k = n - i >= 64 ? ~__mmask64{0} : (__mmask64{1} << (n - i)) - 1;
      const __m512i idx = _mm512_xor_si512(_mm512_maskz_loadu_epi8(k, in + i), flip);
      const __m512i low = _mm512_permutex2var_epi8(t0, idx, t1);
      const __m512i high = _mm512_permutex2var_epi8(t2, idx, t3);
      _mm512_mask_storeu_epi8(out + i, k, _mm512_mask_blend_epi8(_mm512_movepi8_mask(idx), low, high));
    }
    return n;
  }

  // 32 bytes a step, whole vectors only: the table's 16 rows of 16 entries, each looked up
  // by the index's low nibble (vpshufb) and kept where the high nibble names that row. About
  // 3x the byte-wise loop, which is bound by its two loads and a store per byte.
  NN_TARGET_INT8_AVX2 size_t lookup_avx2(const int8_t* in, int8_t* out, size_t n) const {
    const __m256i flip = _mm256_set1_epi8(char(0x80)), nibble = _mm256_set1_epi8(0x0F);
    __m256i rows[16];
    for (size_t r = 0; r < 16; ++r)
      rows[r] = _mm256_broadcastsi128_si256(_mm_load_si128(reinterpret_cast<const __m128i*>(table_.data() + 16 * r)));
    size_t i = 0;
    for (; i + 32 <= n; i += 32) {
      const __m256i idx = _mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(in + i)), flip);
      const __m256i lo = _mm256_and_si256(idx, nibble), hi = _mm256_and_si256(_mm256_srli_epi16(idx, 4), nibble);
      __m256i y = _mm256_shuffle_epi8(rows[0], lo);
      for (int r = 1; r < 16; ++r)
        y = _mm256_blendv_epi8(y, _mm256_shuffle_epi8(rows[r], lo), _mm256_cmpeq_epi8(hi, _mm256_set1_epi8(char(r))));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i), y);
    }
    return i;
  }
#endif

  size_t count_;
  bool vbmi_, avx2_, avx512_, avx2_cvt_;
  bool to_float_ = false;  // writes float(q - zq_) * scale_ (int8_table_dequantized)
  float scale_ = 0;
  int32_t zq_ = 0;
  std::string name_;
  alignas(64) std::array<int8_t, 256> table_{};
};

// ---------------------------------------------------------------------------------------
// MEAN over H and W of NHWC: the reference sums exactly, then requantizes
// round((sum / count - zi) * si / so) + zo in double. int32 sums are exact below 2^23 pixels.
// A global AVERAGE_POOL_2D (`pool`: same scale and zero point in and out, as NNAPI requires)
// divides the sum by the count rounding half away from zero, clamped to `pool_range`.
class Int8Mean final : public NativeDataOp {
 public:
  Int8Mean(const Operand& in, const Operand& out, uint32_t input, const NativeIsa& isa, bool pool = false,
           quant::Range pool_range = {})
      : pool_(pool),
        pool_range_(pool_range),
        batch_(in.dims[0]),
        pixels_(size_t(in.dims[1]) * in.dims[2]),
        channels_(in.dims[3]),
        in_(in),
        out_(out),
        avx512_(avx512_int8(isa)),
        avx2_(!avx512_ && avx2(isa)) {
    operands_ = {input};
  }
  const char* kernel() const override {
    if (pool_)
      return avx512_ ? "native int8 average pool AVX-512" : avx2_ ? "native int8 average pool AVX2"
                                                                  : "native int8 average pool";
    return avx512_ ? "native int8 mean AVX-512" : avx2_ ? "native int8 mean AVX2" : "native int8 mean";
  }

  void run(const NativeDataArgs& args) const override {
    Task t{this, static_cast<const int8_t*>(args.inputs[0]), static_cast<int8_t*>(args.output)};
    for_each_row(args.pool, batch_ * ((channels_ + 63) / 64), &Int8Mean::chunk, &t);
  }

 private:
  struct Task {
    const Int8Mean* op;
    const int8_t* in;
    int8_t* out;
  };
  // 64 channels of one image.
  static void chunk(void* ctx, size_t row) {
    const Task& t = *static_cast<const Task*>(ctx);
    const Int8Mean& op = *t.op;
    const size_t blocks = (op.channels_ + 63) / 64, n = row / blocks, c0 = row % blocks * 64;
    const size_t c1 = std::min(op.channels_, c0 + 64);
    std::array<int32_t, 64> sum{};
    const int8_t* image = t.in + n * op.pixels_ * op.channels_;
    size_t c = c0;
#if NN_NATIVE_X86
    if (op.avx512_)
      c = op.sums_avx512(image, c0, c1, sum.data());
    else if (op.avx2_)
      c = op.sums_avx2(image, c0, c1, sum.data());
#endif
    for (; c < c1; ++c)
      for (size_t p = 0; p < op.pixels_; ++p) sum[c - c0] += image[p * op.channels_ + c];
    if (op.pool_) {  // the reference pool's integer division
      const int32_t count = static_cast<int32_t>(op.pixels_);
      for (c = c0; c < c1; ++c) {
        const int32_t v = sum[c - c0];
        const int32_t q = v >= 0 ? (v + count / 2) / count : (v - count / 2) / count;
        t.out[n * op.channels_ + c] = static_cast<int8_t>(std::clamp(q, op.pool_range_.lo, op.pool_range_.hi));
      }
      return;
    }
    const double count = double(op.pixels_);  // the reference: elements in / elements out
    const quant::Range r = quant::type_range(op.out_.type);
    for (c = c0; c < c1; ++c) {
      const double real = (double(sum[c - c0]) / count - op.in_.zero_point) * op.in_.scale;
      const double q = std::round(real / op.out_.scale) + op.out_.zero_point;
      t.out[n * op.channels_ + c] = static_cast<int8_t>(std::clamp(q, double(r.lo), double(r.hi)));
    }
  }

#if NN_NATIVE_X86
  // Sums in int16 lanes (255 int8 values at most, then added into int32), 32 channels a
  // step; fewer channels that divide 32 take 32 / C pixels a step, lane j holding channel j % C.
  NN_TARGET_INT8_512 size_t sums_avx512(const int8_t* image, size_t c0, size_t c1, int32_t* sum) const {
    const size_t c = channels_;
    const bool packed = c < 32 && 32 % c == 0;  // then c0 == 0, c1 == c: one block
    const size_t per_step = packed ? 32 / c : 1, steps = pixels_ / per_step;
    for (size_t c_begin = c0; c_begin < c1; c_begin += 32) {
      const size_t width = packed ? 32 : std::min<size_t>(32, c1 - c_begin);
      const __mmask32 k = width == 32 ? ~__mmask32{0} : (__mmask32{1} << width) - 1;
      __m512i lo = _mm512_setzero_si512(), hi = _mm512_setzero_si512();
      for (size_t s0 = 0; s0 < steps; s0 += 255) {
        __m512i acc = _mm512_setzero_si512();
        const size_t s1 = std::min(steps, s0 + 255);
        for (size_t st = s0; st < s1; ++st)
          acc = _mm512_add_epi16(acc, _mm512_cvtepi8_epi16(_mm256_maskz_loadu_epi8(
                                          k, image + st * per_step * c + (packed ? 0 : c_begin))));
        lo = _mm512_add_epi32(lo, _mm512_cvtepi16_epi32(_mm512_castsi512_si256(acc)));
        hi = _mm512_add_epi32(hi, _mm512_cvtepi16_epi32(_mm512_extracti64x4_epi64(acc, 1)));
      }
      alignas(64) int32_t lane[32];
      _mm512_store_si512(lane, lo);
      _mm512_store_si512(lane + 16, hi);
      if (!packed) {
        for (size_t j = 0; j < width; ++j) sum[c_begin - c0 + j] = lane[j];
        continue;
      }
      for (size_t j = 0; j < c; ++j) sum[j] = 0;
      for (size_t j = 0; j < 32; ++j) sum[j % c] += lane[j];
      for (size_t p = steps * per_step; p < pixels_; ++p)  // pixels left over from the last step
        for (size_t j = 0; j < c; ++j) sum[j] += image[p * c + j];
      return c1;
    }
    return c1;
  }
  // sums_avx512 on AVX2: 16 channels a vector in int16 lanes (fewer that divide 16 take 16 / C
  // pixels a step), two accumulators taking alternate steps; channels past the last 16 eight
  // at a time in int32 lanes.
  NN_TARGET_INT8_AVX2 size_t sums_avx2(const int8_t* image, size_t c0, size_t c1, int32_t* sum) const {
    const size_t channels = channels_;
    const bool packed = channels < 16 && 16 % channels == 0;  // then c0 == 0, c1 == channels: one block
    const size_t per_step = packed ? 16 / channels : 1, steps = pixels_ / per_step, stride = per_step * channels;
    size_t c = c0;
    for (; packed ? c == c0 : c + 16 <= c1; c += 16) {
      const int8_t* from = image + (packed ? 0 : c);
      __m256i lo = _mm256_setzero_si256(), hi = _mm256_setzero_si256();
      for (size_t s0 = 0; s0 < steps; s0 += 255) {  // at most 255 int8 values in an int16 lane
        __m256i even = _mm256_setzero_si256(), odd = _mm256_setzero_si256();
        const size_t s1 = std::min(steps, s0 + 255);
        size_t st = s0;
#define NN_AT(step) _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(from + (step)*stride)))
        for (; st + 2 <= s1; st += 2) {
          even = _mm256_add_epi16(even, NN_AT(st));
          odd = _mm256_add_epi16(odd, NN_AT(st + 1));
        }
        if (st < s1) even = _mm256_add_epi16(even, NN_AT(st));
#undef NN_AT
        const __m256i acc = _mm256_add_epi16(even, odd);
        lo = _mm256_add_epi32(lo, _mm256_cvtepi16_epi32(_mm256_castsi256_si128(acc)));
        hi = _mm256_add_epi32(hi, _mm256_cvtepi16_epi32(_mm256_extracti128_si256(acc, 1)));
      }
      alignas(32) int32_t lane[16];
      _mm256_store_si256(reinterpret_cast<__m256i*>(lane), lo);
      _mm256_store_si256(reinterpret_cast<__m256i*>(lane + 8), hi);
      if (!packed) {
        for (size_t j = 0; j < 16; ++j) sum[c - c0 + j] = lane[j];
        continue;
      }
      for (size_t j = 0; j < channels; ++j) sum[j] = 0;
      for (size_t j = 0; j < 16; ++j) sum[j % channels] += lane[j];
      for (size_t p = steps * per_step; p < pixels_; ++p)  // pixels left over from the last step
        for (size_t j = 0; j < channels; ++j) sum[j] += image[p * channels + j];
      return c1;
    }
    for (; c + 8 <= c1; c += 8) {
      __m256i acc = _mm256_setzero_si256();
      for (size_t p = 0; p < pixels_; ++p)
        acc = _mm256_add_epi32(acc, _mm256_cvtepi8_epi32(_mm_loadl_epi64(
                                        reinterpret_cast<const __m128i*>(image + p * channels_ + c))));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(sum + (c - c0)), acc);
    }
    return c;
  }
#endif

  bool pool_;
  quant::Range pool_range_;
  size_t batch_, pixels_, channels_;
  Operand in_, out_;
  bool avx512_, avx2_;
};

// ---------------------------------------------------------------------------------------
// RESIZE_BILINEAR as the reference computes it for quant8: x = si * (q - zi) per input,
// y = x00 (1-v)(1-h) + x01 (1-v) h + x10 v (1-h) + x11 v h (left to right), then
// round(y / so) + zo, half away from zero, clamped. The same float operations in the same
// order (ISO C++: no contraction), so the bytes match.
class Int8Resize final : public NativeDataOp {
  // The float just below 1/2 (0x1.fffffep-2). Half away from zero is trunc(q + copysign(this, q))
  // for every finite float q (checked on all 2^32 bit patterns against trunc and a step when
  // the dropped fraction is at least 1/2): with 1/2 itself, q + 1/2 could round up to the next
  // integer for q just below a half.
  static constexpr int32_t kJustBelowHalf = 0x3EFFFFFF;

 public:
  Int8Resize(const Operand& in, const Operand& out, uint32_t input, const ResizeParams& p,
             const NativeIsa& isa, bool twice_w, bool quarters, bool reciprocal, bool integer)
      : batch_(in.dims[0]),
        in_h_(in.dims[1]),
        in_w_(in.dims[2]),
        channels_(in.dims[3]),
        out_h_(p.out_h),
        out_w_(p.out_w),
        si_(in.scale),
        so_(out.scale),
        zi_(in.zero_point),
        zo_(out.zero_point),
        rows_(bilinear_taps(in_h_, out_h_, p.align_corners, p.half_pixel_centers)),
        cols_(bilinear_taps(in_w_, out_w_, p.align_corners, p.half_pixel_centers)),
        avx512_(avx512_int8(isa)),
        avx2_(!avx512_ && avx2(isa)),
        twice_w_((avx512_ || avx2_) && twice_w && doubles_width(cols_, in_w_)),
        // |q| <= 255 si / so: below 2^30, trunc(q) + zo fits int32 and the saturating
        // narrowing stores (vpmovsdb, vpackssdw / vpacksswb) clamp to the int8 range.
        saturates_(255.0 * si_ / so_ < double(1 << 30)) {
    operands_ = {input};
    // The column weights 3/4, 1/4 (odd) and 1/4, 3/4 (even) of a half-pixel 2x width; a
    // weighted tap is at least si / 4 - rounding apart from zero, so with si >= 2^-100 its
    // quarter is a normal float: exact.
    const bool quarter_cols =
        twice_w_ && quarters && cols_[1].frac == 0.25f && cols_[2].frac == 0.75f && si_ >= 0x1p-100f;
    quarters_ = avx512_ && quarter_cols;
    // Quotients far below float's range, so q0 and its correction stay finite (an infinite q0
    // would make the correction NaN where the division gives infinity, clamped to 127).
    reciprocal_ = avx512_ && reciprocal && 255.0 * si_ / so_ < 0x1p100 && int8_resize_reciprocal(so_, zo_, &inv_so_);
    name_ = avx512_ ? "native int8 resize AVX-512" : avx2_ ? "native int8 resize AVX2" : "native int8 resize";
    // The integer form (AVX-512 or AVX2, the same bytes): a 2x width with the quarter taps,
    // every row's weight a multiple of 1/4, the same scale and zero point in and out.
    integer_ = integer && quarter_cols && si_ == so_ && zi_ == zo_ &&
               quarter_weight(cols_[0].frac) != kNoQuarter &&
               quarter_weight(cols_[2 * in_w_ - 1].frac) != kNoQuarter &&
               std::all_of(rows_.begin(), rows_.end(),
                           [](const BilinearTap& t) { return quarter_weight(t.frac) != kNoQuarter; });
    if (integer_) {
      name_ += ", width doubled, integer sums";
      return;
    }
    if (twice_w_) name_ += ", width doubled";
    if (quarters_) name_ += ", quarters fused";
    if (reciprocal_) name_ += ", reciprocal";
  }
  const char* kernel() const override { return name_.c_str(); }

  void run(const NativeDataArgs& args) const override {
    Task t{this, static_cast<const int8_t*>(args.inputs[0]), static_cast<int8_t*>(args.output)};
    for_each_row(args.pool, batch_ * out_h_, &Int8Resize::row, &t);
  }

 private:
  struct Task {
    const Int8Resize* op;
    const int8_t* in;
    int8_t* out;
  };

  // One channel from the weighted rows (a = x0 * (1 - v), b = x1 * v, as the reference's
  // first products): a_lo (1 - h) + a_hi h + b_lo (1 - h) + b_hi h, requantized.
  int8_t scalar(float a_lo, float a_hi, float b_lo, float b_hi, float h) const {
    const float y = a_lo * (1.f - h) + a_hi * h + b_lo * (1.f - h) + b_hi * h;
    return static_cast<int8_t>(std::clamp(std::round(y / so_) + static_cast<float>(zo_), -128.f, 127.f));
  }

  static void row(void* ctx, size_t r) {
    const Task& t = *static_cast<const Task*>(ctx);
    const Int8Resize& op = *t.op;
    const size_t n = r / op.out_h_, oy = r % op.out_h_, c = op.channels_;
    const BilinearTap& ty = op.rows_[oy];
    const int8_t* r0 = t.in + (n * op.in_h_ + ty.lo) * op.in_w_ * c;
    const int8_t* r1 = t.in + (n * op.in_h_ + ty.hi) * op.in_w_ * c;
    int8_t* out = t.out + r * op.out_w_ * c;
    const size_t nw = op.in_w_ * c;
#if NN_NATIVE_X86
    if (op.integer_ && op.avx512_) return op.row_integer_avx512(r0, r1, quarter_weight(ty.frac), out);
    if (op.integer_) return op.row_integer_avx2(r0, r1, quarter_weight(ty.frac), out);
#endif
    thread_local std::vector<float> rows;
    if (rows.size() < 2 * nw) rows.resize(2 * nw);
    float *a = rows.data(), *b = rows.data() + nw;
    size_t done = 0;
#if NN_NATIVE_X86
    if (op.avx512_) {
      op.weighted_rows_avx512(r0, r1, ty.frac, a, b);
      op.row_avx512(a, b, out);
      return;
    }
    if (op.avx2_) done = op.weighted_rows_avx2(r0, r1, ty.frac, a, b);
#endif
    for (; done < nw; ++done) {  // the reference's first products, in the same order
      a[done] = op.si_ * (int32_t(r0[done]) - op.zi_) * (1.f - ty.frac);
      b[done] = op.si_ * (int32_t(r1[done]) - op.zi_) * ty.frac;
    }
#if NN_NATIVE_X86
    if (op.twice_w_) return op.row_twice_w_avx2(a, b, out);
#endif
    for (size_t ox = 0; ox < op.out_w_; ++ox) {
      const BilinearTap& tx = op.cols_[ox];
      const float *a_lo = a + tx.lo * c, *a_hi = a + tx.hi * c, *b_lo = b + tx.lo * c, *b_hi = b + tx.hi * c;
      int8_t* o = out + ox * c;
      size_t i = 0;
#if NN_NATIVE_X86
      if (op.avx2_) i = op.pixel_avx2(a_lo, a_hi, b_lo, b_hi, tx.frac, o);
#endif
      for (; i < c; ++i) o[i] = op.scalar(a_lo[i], a_hi[i], b_lo[i], b_hi[i], tx.frac);
    }
  }

#if NN_NATIVE_X86
  // The two input rows dequantized and weighted once per output row: a = x0 * (1 - v),
  // b = x1 * v (the reference's first products, the same floats).
  NN_TARGET_INT8_512 void weighted_rows_avx512(const int8_t* r0, const int8_t* r1, float v, float* a,
                                               float* b) const {
    const __m512 si = _mm512_set1_ps(si_), v1 = _mm512_set1_ps(1.f - v), vv = _mm512_set1_ps(v);
    const __m512i zi = _mm512_set1_epi32(zi_);
    const size_t n = in_w_ * channels_;
    for (size_t i = 0; i < n; i += 16) {
      const __mmask16 k = __mmask16((1u << std::min<size_t>(16, n - i)) - 1);
      _mm512_mask_storeu_ps(a + i, k, _mm512_mul_ps(dequantize16(r0 + i, k, zi, si), v1));
      _mm512_mask_storeu_ps(b + i, k, _mm512_mul_ps(dequantize16(r1 + i, k, zi, si), vv));
    }
  }

  // The requantization's constants, copied into a local by each row loop: the int8 stores
  // may alias the op's members, so read from the op they would be loaded again per vector.
  struct Requant16 {
    __m512 so, inv, lo, hi;
    __m512i zo;
    bool reciprocal, saturates;
    // The blended value y divided by the output scale, rounded half away from zero, + zo,
    // clamped (pixel16's last steps).
    NN_INLINE_INT8_512 __m512i apply(__m512 y) const {
      __m512 q;
      if (reciprocal) {  // y / so by its reciprocal and one correction (int8_resize_reciprocal)
        const __m512 q0 = _mm512_mul_ps(y, inv);
        q = _mm512_fmadd_ps(_mm512_fnmadd_ps(q0, so, y), inv, q0);
      } else {
        q = _mm512_div_ps(y, so);
      }
      // round(q) + zo, clamped, as trunc(q + copysign(kJustBelowHalf, q)) + zo: the clamp first,
      // to [-128 - zo, 127 - zo] (integers, so it commutes with trunc), zo added as an integer.
      const __m512 r = _mm512_add_ps(q, _mm512_castsi512_ps(_mm512_ternarylogic_epi32(
                                            _mm512_castps_si512(q), _mm512_set1_epi32(int32_t(0x80000000u)),
                                            _mm512_set1_epi32(kJustBelowHalf), 0xEA)));  // (q & sign) | 0.49999997
      return _mm512_add_epi32(_mm512_cvttps_epi32(saturates ? r : _mm512_min_ps(_mm512_max_ps(r, lo), hi)), zo);
    }
  };
  NN_INLINE_INT8_512 Requant16 requant16() const {
    return Requant16{_mm512_set1_ps(so_),
                     _mm512_set1_ps(inv_so_),
                     _mm512_set1_ps(float(-128 - zo_)),
                     _mm512_set1_ps(float(127 - zo_)),
                     _mm512_set1_epi32(zo_),
                     reciprocal_,
                     saturates_};
  }

  // 16 (masked) channels of one output pixel from the weighted rows' taps (lo, hi of row a
  // and of row b) and the column weights h1 = 1 - h, hh = h: the reference's sum in its
  // order, divided by the output scale, rounded half away from zero, + zo, clamped.
  NN_INLINE_INT8_512 static __m512i pixel16(__m512 a_lo, __m512 a_hi, __m512 b_lo, __m512 b_hi, __m512 h1,
                                            __m512 hh, const Requant16& rq) {
    // AVX-512F has FMA: the register barriers keep GCC from contracting a product into the sum.
    __m512 a = _mm512_mul_ps(a_lo, h1);
    __m512 b = _mm512_mul_ps(a_hi, hh);
    __m512 c = _mm512_mul_ps(b_lo, h1);
    __m512 d = _mm512_mul_ps(b_hi, hh);
    NN_KEEP_IN_REGISTER(a);
    NN_KEEP_IN_REGISTER(b);
    NN_KEEP_IN_REGISTER(c);
    NN_KEEP_IN_REGISTER(d);
    return rq.apply(_mm512_add_ps(_mm512_add_ps(_mm512_add_ps(a, b), c), d));
  }

  // One output row from the weighted rows a (row lo) and b (row hi).
  NN_TARGET_INT8_512 void row_avx512(const float* wa, const float* wb, int8_t* out) const {
    if (twice_w_) return row_twice_w_avx512(wa, wb, out);
    const Requant16 rq = requant16();
    const size_t c = channels_;
    for (size_t ox = 0; ox < out_w_; ++ox) {
      const BilinearTap& tx = cols_[ox];
      const float *a_lo = wa + tx.lo * c, *a_hi = wa + tx.hi * c, *b_lo = wb + tx.lo * c,
                  *b_hi = wb + tx.hi * c;
      int8_t* o = out + ox * c;
      const __m512 h1 = _mm512_set1_ps(1.f - tx.frac), hh = _mm512_set1_ps(tx.frac);
      for (size_t i = 0; i < c; i += 16) {
        const __mmask16 k = __mmask16((1u << std::min<size_t>(16, c - i)) - 1);
        _mm512_mask_cvtsepi32_storeu_epi8(o + i, k,
                                         pixel16(_mm512_maskz_loadu_ps(k, a_lo + i), _mm512_maskz_loadu_ps(k, a_hi + i),
                                                 _mm512_maskz_loadu_ps(k, b_lo + i), _mm512_maskz_loadu_ps(k, b_hi + i), h1, hh, rq));
      }
    }
  }

  // An edge pixel of a width-doubled row (the first or the last): channels i .. i + 15 (mask
  // k) from its own taps, as the reference.
  NN_TARGET_INT8_512 void store_edge_avx512(const float* wa, const float* wb, const BilinearTap& t, size_t i,
                                            __mmask16 k, int8_t* out, const Requant16& rq) const {
    const size_t c = channels_;
    const __m512 a_lo = _mm512_maskz_loadu_ps(k, wa + t.lo * c + i), a_hi = _mm512_maskz_loadu_ps(k, wa + t.hi * c + i);
    const __m512 b_lo = _mm512_maskz_loadu_ps(k, wb + t.lo * c + i), b_hi = _mm512_maskz_loadu_ps(k, wb + t.hi * c + i);
    _mm512_mask_cvtsepi32_storeu_epi8(out + i, k,
                                      pixel16(a_lo, a_hi, b_lo, b_hi, _mm512_set1_ps(1.f - t.frac), _mm512_set1_ps(t.frac), rq));
  }

  // row_avx512 for a width doubling (doubles_width): each input pixel's weighted taps are
  // loaded once and feed the two output pixels on either side of it, with no tap lookups
  // per pixel; the same arithmetic, so the same bytes.
  NN_TARGET_INT8_512 void row_twice_w_avx512(const float* wa, const float* wb, int8_t* out) const {
    if (quarters_) return row_quarters_avx512(wa, wb, out);
    const Requant16 rq = requant16();
    const size_t c = channels_, w = in_w_;
    const __m512 odd1 = _mm512_set1_ps(1.f - cols_[1].frac), oddh = _mm512_set1_ps(cols_[1].frac);
    const __m512 even1 = _mm512_set1_ps(1.f - cols_[2].frac), evenh = _mm512_set1_ps(cols_[2].frac);
    const BilinearTap &first = cols_[0], &last = cols_[2 * w - 1];
    for (size_t i = 0; i < c; i += 16) {
      const __mmask16 k = __mmask16((1u << std::min<size_t>(16, c - i)) - 1);
#define NN_AT(row, x) _mm512_maskz_loadu_ps(k, (row) + (x)*c + i)
      store_edge_avx512(wa, wb, first, i, k, out, rq);
      __m512 pa = NN_AT(wa, 0), pb = NN_AT(wb, 0);
      for (size_t x = 1; x < w; ++x) {
        const __m512 ca = NN_AT(wa, x), cb = NN_AT(wb, x);
        _mm512_mask_cvtsepi32_storeu_epi8(out + (2 * x - 1) * c + i, k, pixel16(pa, ca, pb, cb, odd1, oddh, rq));
        _mm512_mask_cvtsepi32_storeu_epi8(out + 2 * x * c + i, k, pixel16(pa, ca, pb, cb, even1, evenh, rq));
        pa = ca;
        pb = cb;
      }
      store_edge_avx512(wa, wb, last, i, k, out + (2 * w - 1) * c, rq);
#undef NN_AT
    }
  }

  // row_twice_w_avx512 with the column weights 3/4 and 1/4 (quarters_): a tap times 1/4 is
  // exact, so each such product and the sum it joins are one FMA with the same rounding,
  // and a tap times 3/4 is the same product for the two output pixels that use it: per
  // input pixel two products, per output pixel three adds, where the reference order has
  // four products and three adds.
  //   odd 2x - 1:  ((p 3/4 + c / 4) + p' 3/4) + c' / 4
  //   even 2x:     ((p / 4 + c 3/4) + p' / 4) + c' 3/4
  // (p, c: input pixels x - 1 and x of row a; p', c' of row b.)
  NN_TARGET_INT8_512 void row_quarters_avx512(const float* wa, const float* wb, int8_t* out) const {
    const Requant16 rq = requant16();
    const size_t c = channels_, w = in_w_;
    const __m512 quarter = _mm512_set1_ps(0.25f), three = _mm512_set1_ps(0.75f);
    const BilinearTap &first = cols_[0], &last = cols_[2 * w - 1];
    for (size_t i = 0; i < c; i += 16) {
      const __mmask16 k = __mmask16((1u << std::min<size_t>(16, c - i)) - 1);
#define NN_AT(row, x) _mm512_maskz_loadu_ps(k, (row) + (x)*c + i)
      store_edge_avx512(wa, wb, first, i, k, out, rq);
      __m512 pa = NN_AT(wa, 0), pb = NN_AT(wb, 0);
      __m512 pa3 = _mm512_mul_ps(pa, three), pb3 = _mm512_mul_ps(pb, three);
      NN_KEEP_IN_REGISTER(pa3);  // products rounded on their own: no contraction into the adds
      NN_KEEP_IN_REGISTER(pb3);
      for (size_t x = 1; x < w; ++x) {
        const __m512 ca = NN_AT(wa, x), cb = NN_AT(wb, x);
        __m512 ca3 = _mm512_mul_ps(ca, three), cb3 = _mm512_mul_ps(cb, three);
        NN_KEEP_IN_REGISTER(ca3);
        NN_KEEP_IN_REGISTER(cb3);
        const __m512 odd =
            _mm512_fmadd_ps(cb, quarter, _mm512_add_ps(_mm512_fmadd_ps(ca, quarter, pa3), pb3));
        const __m512 even =
            _mm512_add_ps(_mm512_fmadd_ps(pb, quarter, _mm512_fmadd_ps(pa, quarter, ca3)), cb3);
        _mm512_mask_cvtsepi32_storeu_epi8(out + (2 * x - 1) * c + i, k, rq.apply(odd));
        _mm512_mask_cvtsepi32_storeu_epi8(out + 2 * x * c + i, k, rq.apply(even));
        pa = ca;
        pb = cb;
        pa3 = ca3;
        pb3 = cb3;
      }
      store_edge_avx512(wa, wb, last, i, k, out + (2 * w - 1) * c, rq);
#undef NN_AT
    }
  }

  // 4 * frac where that is a whole number, else kNoQuarter. An edge tap has frac -1/4 (the
  // half-pixel source left of pixel 0, both taps pixel 0): weights 5/4 and -1/4.
  static constexpr int kNoQuarter = 100;
  static int quarter_weight(float frac) {
    const float q = frac * 4.f;
    return q >= -4.f && q <= 8.f && q == std::floor(q) ? int(q) : kNoQuarter;
  }

#if NN_NATIVE_X86
  // One output row in integers (integer_): the reference's value is the dequantized blend
  // (zi = zo, si = so), so q = zo + (S - 16 zo) / 16 for the integer tap sum
  // S = 16 * sum(weight * tap); rounded half away from zero as the reference rounds (which
  // computes it in floats: within one step of these bytes, equal but near a half). The
  // vertical blend V = (4 - wv) r0 + wv r1 of the two input rows in int16, then per input
  // pixel i the two output pixels 2i + 1 = 3 V_i + V_(i+1) and 2i + 2 = V_i + 3 V_(i+1), the
  // edges by their own taps; each sum in a flat int16 row, narrowed into the output pixel by
  // pixel. Where the float form spent 4 products, 3 adds, a division and its rounding per
  // output value, this is a handful of int16 ops per 32.
  NN_TARGET_INT8_512 void row_integer_avx512(const int8_t* r0, const int8_t* r1, int wv, int8_t* out) const {
    const size_t c = channels_, w = in_w_, n = w * c;
    thread_local std::vector<int16_t> rows;
    if (rows.size() < 3 * n + 64) rows.resize(3 * n + 64);
    int16_t *v = rows.data(), *odd = v + n + 32, *even = odd + n;  // even[i]: output pixel 2i + 2
    const __m512i w0 = _mm512_set1_epi16(int16_t(4 - wv)), w1 = _mm512_set1_epi16(int16_t(wv));
    for (size_t i = 0; i < n; i += 32) {
      const __mmask32 k = n - i >= 32 ? __mmask32(~0u) : __mmask32((1u << (n - i)) - 1);
      const __m512i a = _mm512_cvtepi8_epi16(_mm256_maskz_loadu_epi8(k, r0 + i));
      const __m512i b = _mm512_cvtepi8_epi16(_mm256_maskz_loadu_epi8(k, r1 + i));
      _mm512_mask_storeu_epi16(v + i, k, _mm512_add_epi16(_mm512_mullo_epi16(a, w0), _mm512_mullo_epi16(b, w1)));
    }
    const __m512i three = _mm512_set1_epi16(3), zo = _mm512_set1_epi16(int16_t(zo_));
    const __m512i zo16 = _mm512_set1_epi16(int16_t(16 * zo_));
#define NN_NARROW(sum) sixteenth(sum, zo, zo16)
    const size_t pairs = n - c;  // input pixels 0 .. w - 2 and the one after each
    if (c % 16 == 0) {
      // Output pixels 2p + 1 and 2p + 2 straight from input pixels p and p + 1, 16 channels a
      // step (no int16 rows in between): the same sums and roundings.
      const __m256i three16 = _mm512_castsi512_si256(three), zo_16 = _mm512_castsi512_si256(zo);
      const __m256i zo16_16 = _mm512_castsi512_si256(zo16);
      for (size_t p = 0; p + 1 < w; ++p)
        for (size_t i = 0; i < c; i += 16) {
          const __m256i here = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(v + p * c + i));
          const __m256i next = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(v + (p + 1) * c + i));
          const __m256i o = sixteenth16(_mm256_add_epi16(_mm256_mullo_epi16(here, three16), next), zo_16, zo16_16);
          const __m256i e = sixteenth16(_mm256_add_epi16(here, _mm256_mullo_epi16(next, three16)), zo_16, zo16_16);
          _mm_storeu_si128(reinterpret_cast<__m128i*>(out + (2 * p + 1) * c + i), _mm256_cvtsepi16_epi8(o));
          _mm_storeu_si128(reinterpret_cast<__m128i*>(out + (2 * p + 2) * c + i), _mm256_cvtsepi16_epi8(e));
        }
    }
    for (size_t i = 0; i < pairs && c % 16; i += 32) {
      const __mmask32 k = pairs - i >= 32 ? __mmask32(~0u) : __mmask32((1u << (pairs - i)) - 1);
      const __m512i here = _mm512_maskz_loadu_epi16(k, v + i), next = _mm512_maskz_loadu_epi16(k, v + c + i);
      _mm512_mask_storeu_epi16(odd + i, k, NN_NARROW(_mm512_add_epi16(_mm512_mullo_epi16(here, three), next)));
      _mm512_mask_storeu_epi16(even + i, k, NN_NARROW(_mm512_add_epi16(here, _mm512_mullo_epi16(next, three))));
    }
    // Output pixel 0 and 2w - 1 by their own taps (the edge pixel twice: 4 V).
    const BilinearTap &first = cols_[0], &last = cols_[2 * w - 1];
    const int fh = quarter_weight(first.frac), lh = quarter_weight(last.frac);
    for (size_t i = 0; i < c; i += 32) {
      const __mmask32 k = c - i >= 32 ? __mmask32(~0u) : __mmask32((1u << (c - i)) - 1);
      for (int e = 0; e < 2; ++e) {
        const BilinearTap& t = e ? last : first;
        const int h = e ? lh : fh;
        const __m512i sum = _mm512_add_epi16(
            _mm512_mullo_epi16(_mm512_maskz_loadu_epi16(k, v + t.lo * c + i), _mm512_set1_epi16(int16_t(4 - h))),
            _mm512_mullo_epi16(_mm512_maskz_loadu_epi16(k, v + t.hi * c + i), _mm512_set1_epi16(int16_t(h))));
        _mm256_mask_storeu_epi8(out + (e ? (2 * w - 1) * c : 0) + i, k, _mm512_cvtsepi16_epi8(NN_NARROW(sum)));
      }
    }
    // Pixel by pixel into the output row: odd[i] -> 2i + 1, even[i] -> 2i + 2.
    for (size_t p = 0; p + 1 < w && c % 16; ++p)
      for (size_t i = 0; i < c; i += 32) {
        const __mmask32 k = c - i >= 32 ? __mmask32(~0u) : __mmask32((1u << (c - i)) - 1);
        _mm256_mask_storeu_epi8(out + (2 * p + 1) * c + i, k,
                                _mm512_cvtsepi16_epi8(_mm512_maskz_loadu_epi16(k, odd + p * c + i)));
        _mm256_mask_storeu_epi8(out + (2 * p + 2) * c + i, k,
                                _mm512_cvtsepi16_epi8(_mm512_maskz_loadu_epi16(k, even + p * c + i)));
      }
#undef NN_NARROW
  }
  // zo + (S - 16 zo) / 16 rounded half away from zero: ((d + 8 - [d < 0]) >> 4) + zo, d = S - 16 zo.
  NN_INLINE_INT8_512 static __m512i sixteenth(__m512i sum, __m512i zo, __m512i zo16) {
    const __m512i d = _mm512_sub_epi16(sum, zo16);
    return _mm512_add_epi16(
        _mm512_srai_epi16(_mm512_add_epi16(_mm512_add_epi16(d, _mm512_set1_epi16(8)), _mm512_srai_epi16(d, 15)), 4), zo);
  }
  // The same on 16 lanes.
  NN_INLINE_INT8_512 static __m256i sixteenth16(__m256i sum, __m256i zo, __m256i zo16) {
    const __m256i d = _mm256_sub_epi16(sum, zo16);
    return _mm256_add_epi16(
        _mm256_srai_epi16(_mm256_add_epi16(_mm256_add_epi16(d, _mm256_set1_epi16(8)), _mm256_srai_epi16(d, 15)), 4), zo);
  }
#endif

  // Output pixels 2p + 1 and 2p + 2 of the integer form from V_p (at `here`) and V_(p+1) (c
  // lanes on), 16 channels: the odd pixel's bytes in the low half, the even pixel's in the high.
  NN_INLINE_INT8_AVX2 static __m256i integer_pair16(const int16_t* here_at, size_t c, __m256i three,
                                                    __m256i lim) {
    const __m256i here = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(here_at));
    const __m256i next = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(here_at + c));
    const __m256i o = _mm256_add_epi16(_mm256_mullo_epi16(here, three), next);
    const __m256i e = _mm256_add_epi16(here, _mm256_mullo_epi16(next, three));
    const __m256i ro = _mm256_srai_epi16(_mm256_add_epi16(o, _mm256_cmpgt_epi16(lim, o)), 4);
    const __m256i re = _mm256_srai_epi16(_mm256_add_epi16(e, _mm256_cmpgt_epi16(lim, e)), 4);
    return _mm256_permute4x64_epi64(_mm256_packs_epi16(ro, re), 0xD8);
  }

  // row_integer_avx512 on AVX2, the same sums and roundings (so the same bytes), 16 channels
  // a step. Each input row pair's vertical blend is kept as V + 2, so a horizontal sum is
  // S + 8 (the horizontal weights add up to 4) and its rounding is (S + 8 - [S < 16 zo]) >> 4:
  // the same value as sixteenth's ((d + 8 - [d < 0]) >> 4) + zo, d = S - 16 zo, with 16 zo
  // moved inside the shift.
  NN_TARGET_INT8_AVX2 void row_integer_avx2(const int8_t* r0, const int8_t* r1, int wv, int8_t* out) const {
    const size_t c = channels_, w = in_w_, n = w * c, pairs = n - c;
    // Under 16 channels the odd and even outputs go through flat byte rows; from 16 up, 16
    // channels a step, the last step overlapping the one before where c is not a multiple
    // of 16 (the same bytes written twice).
    const bool flat = c < 16;
    thread_local std::vector<int16_t> rows;
    thread_local std::vector<int8_t> bytes;
    if (rows.size() < n) rows.resize(n);
    if (flat && bytes.size() < 2 * pairs) bytes.resize(2 * pairs);
    int16_t* v = rows.data();
    const __m256i w0 = _mm256_set1_epi16(int16_t(4 - wv)), w1 = _mm256_set1_epi16(int16_t(wv));
    const __m256i two = _mm256_set1_epi16(2);
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
      const __m256i a = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(r0 + i)));
      const __m256i b = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(r1 + i)));
      _mm256_storeu_si256(
          reinterpret_cast<__m256i*>(v + i),
          _mm256_add_epi16(_mm256_add_epi16(_mm256_mullo_epi16(a, w0), _mm256_mullo_epi16(b, w1)), two));
    }
    for (; i < n; ++i) v[i] = int16_t((4 - wv) * r0[i] + wv * r1[i] + 2);
    const auto step = [c](size_t j) { return j + 16 > c ? c - 16 : j; };  // the last one overlapping
    const int32_t limit = 16 * zo_ + 8;
    const __m256i three = _mm256_set1_epi16(3), lim = _mm256_set1_epi16(int16_t(limit));
    const auto round = [limit](int32_t s) {
      return static_cast<int8_t>(std::clamp((s - (s < limit ? 1 : 0)) >> 4, -128, 127));
    };
    if (!flat) {
      for (size_t p = 0; p + 1 < w; ++p)
        for (size_t jj = 0; jj < c; jj += 16) {
          const size_t j = step(jj);
          const __m256i oe = integer_pair16(v + p * c + j, c, three, lim);
          _mm_storeu_si128(reinterpret_cast<__m128i*>(out + (2 * p + 1) * c + j), _mm256_castsi256_si128(oe));
          _mm_storeu_si128(reinterpret_cast<__m128i*>(out + (2 * p + 2) * c + j),
                           _mm256_extracti128_si256(oe, 1));
        }
    } else {
      int8_t *odd = bytes.data(), *even = odd + pairs;  // even[i]: output pixel 2i + 2
      size_t k = 0;
      for (; k + 16 <= pairs; k += 16) {
        const __m256i oe = integer_pair16(v + k, c, three, lim);
        _mm_storeu_si128(reinterpret_cast<__m128i*>(odd + k), _mm256_castsi256_si128(oe));
        _mm_storeu_si128(reinterpret_cast<__m128i*>(even + k), _mm256_extracti128_si256(oe, 1));
      }
      for (; k < pairs; ++k) {
        odd[k] = round(3 * v[k] + v[k + c]);
        even[k] = round(v[k] + 3 * v[k + c]);
      }
      for (size_t p = 0; p + 1 < w; ++p) {
        std::memcpy(out + (2 * p + 1) * c, odd + p * c, c);
        std::memcpy(out + (2 * p + 2) * c, even + p * c, c);
      }
    }
    // Output pixel 0 and 2w - 1 by their own taps (the edge pixel twice: 4 V).
    for (int edge = 0; edge < 2; ++edge) {
      const BilinearTap& t = edge ? cols_[2 * w - 1] : cols_[0];
      const int h = quarter_weight(t.frac);
      const int16_t *lo = v + t.lo * c, *hi = v + t.hi * c;
      int8_t* o = out + (edge ? (2 * w - 1) * c : 0);
      const __m256i hl = _mm256_set1_epi16(int16_t(4 - h)), hh = _mm256_set1_epi16(int16_t(h));
      for (size_t jj = 0; !flat && jj < c; jj += 16) {
        const size_t j = step(jj);
        const __m256i s = _mm256_add_epi16(
            _mm256_mullo_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(lo + j)), hl),
            _mm256_mullo_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(hi + j)), hh));
        const __m256i r = _mm256_srai_epi16(_mm256_add_epi16(s, _mm256_cmpgt_epi16(lim, s)), 4);
        const __m256i b = _mm256_permute4x64_epi64(_mm256_packs_epi16(r, r), 0xD8);
        _mm_storeu_si128(reinterpret_cast<__m128i*>(o + j), _mm256_castsi256_si128(b));
      }
      for (size_t j = 0; flat && j < c; ++j) o[j] = round((4 - h) * lo[j] + h * hi[j]);
    }
  }

  // Whether output pixel ox in [1, 2 in_w - 2] blends input pixels (ox - 1) / 2 and the next
  // with one of two fractions by its parity (a 2x upsampling with half-pixel centres).
  static bool doubles_width(const std::vector<BilinearTap>& cols, size_t in_w) {
    if (in_w < 2 || cols.size() != 2 * in_w) return false;
    for (size_t ox = 1; ox + 1 < cols.size(); ++ox) {
      const BilinearTap& t = cols[ox];
      if (t.lo != (ox - 1) / 2 || t.hi != t.lo + 1 || t.frac != cols[1 + (ox - 1) % 2].frac) return false;
    }
    return true;
  }

  NN_TARGET_INT8_AVX2 size_t weighted_rows_avx2(const int8_t* r0, const int8_t* r1, float v, float* a,
                                                float* b) const {
    const __m256 si = _mm256_set1_ps(si_), v1 = _mm256_set1_ps(1.f - v), vv = _mm256_set1_ps(v);
    const __m256i zi = _mm256_set1_epi32(zi_);
    const size_t n = in_w_ * channels_;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
      _mm256_storeu_ps(a + i, _mm256_mul_ps(dequantize8(r0 + i, zi, si), v1));
      _mm256_storeu_ps(b + i, _mm256_mul_ps(dequantize8(r1 + i, zi, si), vv));
    }
    return i;
  }

  // Requant16 on 8 channels, division only (no FMA in this target), built once per loop for
  // the same reason.
  struct Requant8 {
    __m256 so, lo, hi;
    __m256i zo;
    bool saturates;
    NN_INLINE_INT8_AVX2 __m256i apply(__m256 y) const {
      const __m256 q = _mm256_div_ps(y, so);
      const __m256 r = _mm256_add_ps(
          q, _mm256_or_ps(_mm256_and_ps(q, _mm256_set1_ps(-0.f)), _mm256_castsi256_ps(_mm256_set1_epi32(kJustBelowHalf))));
      return _mm256_add_epi32(_mm256_cvttps_epi32(saturates ? r : _mm256_min_ps(_mm256_max_ps(r, lo), hi)), zo);
    }
  };
  NN_INLINE_INT8_AVX2 Requant8 requant8() const {
    return Requant8{_mm256_set1_ps(so_), _mm256_set1_ps(float(-128 - zo_)), _mm256_set1_ps(float(127 - zo_)),
                    _mm256_set1_epi32(zo_), saturates_};
  }

  // pixel16 on 8 channels (no FMA in this target: nothing to contract).
  NN_INLINE_INT8_AVX2 static __m256i pixel8(__m256 a_lo, __m256 a_hi, __m256 b_lo, __m256 b_hi, __m256 h1,
                                            __m256 hh, const Requant8& rq) {
    __m256 y = _mm256_mul_ps(a_lo, h1);
    y = _mm256_add_ps(y, _mm256_mul_ps(a_hi, hh));
    y = _mm256_add_ps(y, _mm256_mul_ps(b_lo, h1));
    y = _mm256_add_ps(y, _mm256_mul_ps(b_hi, hh));
    return rq.apply(y);
  }

  // row_avx512's pixel on 8 channels a step.
  NN_TARGET_INT8_AVX2 size_t pixel_avx2(const float* a_lo, const float* a_hi, const float* b_lo,
                                        const float* b_hi, float h, int8_t* o) const {
    const __m256 h1 = _mm256_set1_ps(1.f - h), hh = _mm256_set1_ps(h);
    const Requant8 rq = requant8();
    size_t i = 0;
    for (; i + 8 <= channels_; i += 8)
      store8(o + i, pixel8(_mm256_loadu_ps(a_lo + i), _mm256_loadu_ps(a_hi + i), _mm256_loadu_ps(b_lo + i),
                           _mm256_loadu_ps(b_hi + i), h1, hh, rq));
    return i;
  }

  // row_twice_w_avx512 on 8 channels a step; the channels past the last 8 pixel by pixel
  // as the reference.
  NN_TARGET_INT8_AVX2 void row_twice_w_avx2(const float* wa, const float* wb, int8_t* out) const {
    const size_t c = channels_, w = in_w_, c8 = c / 8 * 8;
    const Requant8 rq = requant8();
    const __m256 odd1 = _mm256_set1_ps(1.f - cols_[1].frac), oddh = _mm256_set1_ps(cols_[1].frac);
    const __m256 even1 = _mm256_set1_ps(1.f - cols_[2].frac), evenh = _mm256_set1_ps(cols_[2].frac);
    const BilinearTap &first = cols_[0], &last = cols_[2 * w - 1];
    for (size_t i = 0; i < c8; i += 8) {
#define NN_AT(row, x) _mm256_loadu_ps((row) + (x)*c + i)
      store8(out + i, pixel8(NN_AT(wa, first.lo), NN_AT(wa, first.hi), NN_AT(wb, first.lo), NN_AT(wb, first.hi),
                             _mm256_set1_ps(1.f - first.frac), _mm256_set1_ps(first.frac), rq));
      __m256 pa = NN_AT(wa, 0), pb = NN_AT(wb, 0);
      for (size_t x = 1; x < w; ++x) {
        const __m256 ca = NN_AT(wa, x), cb = NN_AT(wb, x);
        store8(out + (2 * x - 1) * c + i, pixel8(pa, ca, pb, cb, odd1, oddh, rq));
        store8(out + 2 * x * c + i, pixel8(pa, ca, pb, cb, even1, evenh, rq));
        pa = ca;
        pb = cb;
      }
      store8(out + (2 * w - 1) * c + i, pixel8(NN_AT(wa, last.lo), NN_AT(wa, last.hi), NN_AT(wb, last.lo),
                                               NN_AT(wb, last.hi), _mm256_set1_ps(1.f - last.frac),
                                               _mm256_set1_ps(last.frac), rq));
#undef NN_AT
    }
    if (c8 == c) return;
    for (size_t ox = 0; ox < out_w_; ++ox) {
      const BilinearTap& tx = cols_[ox];
      for (size_t i = c8; i < c; ++i)
        out[ox * c + i] = scalar(wa[tx.lo * c + i], wa[tx.hi * c + i], wb[tx.lo * c + i], wb[tx.hi * c + i], tx.frac);
    }
  }
#endif

  size_t batch_, in_h_, in_w_, channels_, out_h_, out_w_;
  float si_, so_;
  int32_t zi_, zo_;
  std::vector<BilinearTap> rows_, cols_;
  bool avx512_, avx2_;
  bool twice_w_;  // row_twice_w_avx512 / _avx2
  bool quarters_ = false;  // row_quarters_avx512
  bool integer_ = false;   // row_integer_avx512 / _avx2
  bool reciprocal_ = false;  // Requant16::apply by inv_so_ rather than a division
  float inv_so_ = 0.f;
  std::string name_;
  bool saturates_;  // pixel16 / pixel8 leave the clamp to the stores
};

}  // namespace

std::unique_ptr<NativeDataOp> make_native_int8_op(const Model& m, uint32_t k, const StaticLookup& statics,
                                                  const NativeIsa& isa, const CpuOptions& cpu, std::string* why) {
  const Operation& op = m.operations[k];
  auto no = [&](const char* reason) {
    *why = reason;
    return std::unique_ptr<NativeDataOp>();
  };
  if (op.outputs.size() != 1 || op.inputs.empty()) return no("not a one-output op");
  const Operand& in = m.operands[op.inputs[0]];
  const Operand& out = m.operands[op.outputs[0]];
  if (in.type != kQ8 || out.type != kQ8) return no("not int8 (TENSOR_QUANT8_ASYMM_SIGNED) in and out");
  if (in.dims.empty() || num_elements(in.dims) == 0) return no("empty tensor");
  switch (op.type) {
    case T::MUL: {
      const Operand& b = m.operands[op.inputs[1]];
      const void* fuse = statics(op.inputs[2]);
      if (b.type != kQ8 || !fuse) return no("int8 MUL with a non-int8 input or a non-constant fuse code");
      // The full tensor first: MUL is symmetric in its inputs, so is its arithmetic.
      const bool a_full = in.dims == out.dims;
      const Operand& full = a_full ? in : b;
      const Operand& other = a_full ? b : in;
      const uint32_t full_index = a_full ? op.inputs[0] : op.inputs[1];
      const uint32_t other_index = a_full ? op.inputs[1] : op.inputs[0];
      if (full.dims != out.dims) return no("int8 MUL whose output is shaped like neither input");
      bool per_channel = false;
      if (other.dims != full.dims) {
        const size_t channels = full.dims.back();
        per_channel =
            !other.dims.empty() && other.dims.back() == channels && num_elements(other.dims) == channels;
        if (!per_channel) return no("int8 MUL broadcast other than per channel");
      }
      return std::make_unique<Int8Mul>(full, other, out, full_index, other_index,
                                       *static_cast<const int32_t*>(fuse), per_channel, isa,
                                       cpu.native_int8_gate_pairs, cpu.int8_fp32_requant);
    }
    case T::ADD: {
      const bool by_table = cpu.native_int8_add_table && avx512_vbmi(isa);
      // AVX2 only: AVX-512 keeps the VBMI tables or XNNPACK's AVX-512 qs8 add.
      const bool one_rounding =
          cpu.native_int8_add_avx2 && !avx512_int8(isa) && !cpu.native_int8_add && avx2(isa);
      if (!cpu.native_int8_add && !by_table && !one_rounding) return no("native int8 ADD off");
      const Operand& b = m.operands[op.inputs[1]];
      const void* fuse = statics(op.inputs[2]);
      if (b.type != kQ8 || !fuse) return no("int8 ADD with a non-int8 input or a non-constant fuse code");
      if (in.dims != out.dims || b.dims != out.dims) return no("int8 ADD with broadcasting");
      const int32_t code = *static_cast<const int32_t*>(fuse);
      if (by_table) {
        // The tables where they give NNAPI's bytes for every input pair, else the
        // arithmetic (when asked for) or XNNPACK.
        TableForm form;
        if (form.table.build(Int8AddMath(in, b, out, code, isa)))
          return std::make_unique<Int8Add<TableForm>>(form, "native int8 add AVX-512 VBMI table",
                                                      num_elements(out.dims), op.inputs[0], op.inputs[1]);
        if (!cpu.native_int8_add) return no("int8 ADD whose byte tables differ from NNAPI's arithmetic");
      }
      Int8AddMath math(in, b, out, code, isa);
      if (one_rounding) {
        OneRoundingForm form;
        if (!form.build(in, b, out, code, math))
          return no("int8 ADD whose one rounding is not within a step of NNAPI's");
        return std::make_unique<Int8Add<OneRoundingForm>>(form, "native int8 add AVX2, one rounding",
                                                          num_elements(out.dims), op.inputs[0], op.inputs[1]);
      }
      const std::string form = math.isa_name();
      return std::make_unique<Int8Add<Int8AddMath>>(math, form == "scalar" ? "native int8 add" : "native int8 add " + form,
                                                    num_elements(out.dims), op.inputs[0], op.inputs[1]);
    }
    case T::LOGISTIC:  // XNNPACK's beats a table looked up a byte at a time
      if (!cpu.native_int8_logistic) return no("native int8 LOGISTIC off");
      if (!avx512_vbmi(isa)) return no("int8 LOGISTIC without AVX-512 VBMI (XNNPACK's is faster)");
      [[fallthrough]];
    case T::HARD_SWISH:
    case T::TANH: {
      const T type = op.type;
      const std::vector<int32_t> table = quant::lookup_table(in, out, [type](double x) {
        if (type == T::LOGISTIC) return 1.0 / (1.0 + std::exp(-x));
        return type == T::HARD_SWISH ? x * std::clamp(x + 3.0, 0.0, 6.0) / 6.0 : std::tanh(x);
      });
      return std::make_unique<Int8Table>(table, op.inputs[0], num_elements(in.dims), isa, cpu.native_int8_table_avx2);
    }
    case T::AVERAGE_POOL_2D: {
      if (!cpu.native_int8_pool) return no("native int8 AVERAGE_POOL_2D off");
      auto p = decode_pool(m, op);
      if (!p.is_ok() || in.dims.size() != 4) return no("int8 AVERAGE_POOL_2D parameters");
      const int64_t h0 = -p->pad_h.before, w0 = -p->pad_w.before;
      const bool global = p->out_h == 1 && p->out_w == 1 && h0 <= 0 && w0 <= 0 && h0 + p->filter_h >= p->in_h &&
                          w0 + p->filter_w >= p->in_w;
      if (!global) return no("int8 AVERAGE_POOL_2D other than global");
      if (in.scale != out.scale || in.zero_point != out.zero_point)
        return no("int8 AVERAGE_POOL_2D that requantizes");
      if (size_t(in.dims[1]) * in.dims[2] >= (size_t{1} << 23))
        return no("int8 AVERAGE_POOL_2D over 2^23 pixels or more");
      return std::make_unique<Int8Mean>(in, out, op.inputs[0], isa, true, quant::activation_range(p->fuse, out));
    }
    case T::MEAN:
      if (in.dims.size() != 4 || !is_global_mean(m, op, statics))
        return no("int8 MEAN over other than H and W");
      if (size_t(in.dims[1]) * in.dims[2] >= (size_t{1} << 23))
        return no("int8 MEAN over 2^23 pixels or more");
      return std::make_unique<Int8Mean>(in, out, op.inputs[0], isa);
    case T::RESIZE_BILINEAR: {
      if (in.dims.size() != 4) return no("int8 resize of other than NHWC");
      std::string reason;
      auto p = parse_resize(m, op, &reason);
      if (!p) return no("int8 resize parameters");
      return std::make_unique<Int8Resize>(in, out, op.inputs[0], *p, isa, cpu.native_int8_resize_twice_w,
                                          cpu.native_int8_resize_quarters, cpu.native_int8_resize_reciprocal,
                                          cpu.native_int8_resize_integer);
    }
    case T::CONV_2D:
    case T::DEPTHWISE_CONV_2D:
    case T::TRANSPOSE_CONV_2D:
      return make_native_int8_conv(m, k, statics, isa, why, cpu);
    default:
      return no("no native int8 kernel");
  }
}

float int8_resize_quotient(float y, float so, float inv) {
  const float q0 = y * inv;
  return std::fma(std::fma(-q0, so, y), inv, q0);
}

bool int8_resize_reciprocal(float so, int32_t zo, float* inv) {
  if (!(so >= 0x1p-100f && so <= 0x1p100f)) return false;
  *inv = 1.f / so;
  return int8_resize_rounds_alike(so, zo, *inv);
}

bool int8_resize_rounds_alike(float so, int32_t zo, float r) {
  if (zo < -128 || zo > 127) return false;
  // Beyond `levels` from zero either side the output clamps to -128 or 127.
  const int32_t levels = std::max(127 - zo, 128 + zo);
  for (int32_t n = 1; n <= levels; ++n) {
    // The least y >= 0 (float bit patterns order as integers for y >= 0) whose quotient
    // rounds to n or more.
    uint32_t lo = 0, hi = 0x7f800000u;
    while (lo < hi) {
      const uint32_t mid = lo + (hi - lo) / 2;
      float y;
      std::memcpy(&y, &mid, sizeof y);
      if (std::round(y / so) >= float(n)) hi = mid; else lo = mid + 1;
    }
    constexpr uint32_t kWindow = 64;
    for (uint32_t bits = lo > kWindow ? lo - kWindow : 0; bits <= lo + kWindow; ++bits) {
      float y;
      std::memcpy(&y, &bits, sizeof y);
      if (std::round(int8_resize_quotient(y, so, r)) != std::round(y / so)) return false;
    }
  }
  return true;
}

std::shared_ptr<const Int8Lookup> int8_table_lookup(const NativeDataOp& table) {
  const auto* t = dynamic_cast<const Int8Table*>(&table);
  if (!t || t->to_float()) return nullptr;
  return std::make_shared<Int8Table>(*t);
}

std::unique_ptr<NativeDataOp> int8_table_dequantized(const NativeDataOp& table, float scale, int32_t zero_point) {
  const auto* t = dynamic_cast<const Int8Table*>(&table);
  return t ? t->dequantized(scale, zero_point) : nullptr;
}

}  // namespace nn::cpu

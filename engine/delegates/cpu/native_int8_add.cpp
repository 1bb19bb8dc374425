// Int8AddMath's AVX-512 and AVX2 forms (native_int8_add.h): native_int8_add_simd.inc's loop,
// once per instruction set. Each copy is built under its own `#pragma GCC target` because GCC
// does not inline an always_inline helper of a wider target into a narrower (or default)
// one, so one template over both widths would leave calls in the loop.
#include "delegates/cpu/native_int8_add.h"

#include <vector>

#if NN_NATIVE_X86

#define NN_ADD_INLINE __attribute__((always_inline)) inline

namespace nn::cpu {

#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx2")
namespace add_avx512 {
namespace {
struct Ops {
  using V = __m512i;
  using Fixed = Fixed16;
  using Mask = __mmask16;  // lanes selected
  static constexpr size_t kLanes = 16;
  static constexpr bool kMaskedTail = true;
  static NN_ADD_INLINE __mmask16 first(size_t n) { return __mmask16((1u << n) - 1); }
  // n (<= 16) int8 from p, widened; the lanes past n 0.
  static NN_ADD_INLINE V load(const int8_t* p, size_t n) { return _mm512_cvtepi8_epi32(_mm_maskz_loadu_epi8(first(n), p)); }
  // The first n lanes (in the int8 range) to n bytes.
  static NN_ADD_INLINE void store(int8_t* p, V v, size_t n) { _mm512_mask_cvtepi32_storeu_epi8(p, first(n), v); }
  static NN_ADD_INLINE V set1(int32_t x) { return _mm512_set1_epi32(x); }
  static NN_ADD_INLINE V set1_64(int64_t x) { return _mm512_set1_epi64(x); }
  static NN_ADD_INLINE V add(V a, V b) { return _mm512_add_epi32(a, b); }
  static NN_ADD_INLINE V sub(V a, V b) { return _mm512_sub_epi32(a, b); }
  static NN_ADD_INLINE V mullo(V a, V b) { return _mm512_mullo_epi32(a, b); }
  static NN_ADD_INLINE V min(V a, V b) { return _mm512_min_epi32(a, b); }
  static NN_ADD_INLINE V max(V a, V b) { return _mm512_max_epi32(a, b); }
  template <int kBits>
  static NN_ADD_INLINE V srai(V x) { return _mm512_srai_epi32(x, kBits); }
  static NN_ADD_INLINE V sll(V x, __m128i count) { return _mm512_sll_epi32(x, count); }
  static NN_ADD_INLINE V sra(V x, __m128i count) { return _mm512_sra_epi32(x, count); }
  // The 64-bit lanes' arithmetic; mul_even multiplies the even int32 lanes into 64 bits.
  static NN_ADD_INLINE V add64(V a, V b) { return _mm512_add_epi64(a, b); }
  static NN_ADD_INLINE V mul_even(V a, V b) { return _mm512_mul_epi32(a, b); }
  template <int kBits>
  static NN_ADD_INLINE V srli64(V x) { return _mm512_srli_epi64(x, kBits); }
  template <int kBits>
  static NN_ADD_INLINE V slli64(V x) { return _mm512_slli_epi64(x, kBits); }
  // The even int32 lanes of `even`, the odd ones of `odd`.
  static NN_ADD_INLINE V blend_odd(V even, V odd) { return _mm512_mask_blend_epi32(0xAAAA, even, odd); }
  static NN_ADD_INLINE Mask mask_if(bool all) { return all ? 0xFFFF : 0; }
  // x >> 31 (-1 for negative x) in the lanes of `lanes`, 0 elsewhere.
  static NN_ADD_INLINE V sign_where(Mask lanes, V x) { return _mm512_maskz_srai_epi32(lanes, x, 31); }
};
#include "delegates/cpu/native_int8_add_simd.inc"
}  // namespace
}  // namespace add_avx512

#pragma GCC pop_options

#pragma GCC push_options
#pragma GCC target("avx2")
namespace add_avx2 {
namespace {
struct Ops {
  using V = __m256i;
  using Mask = __m256i;  // lanes selected: all bits set
  struct Fixed {
    explicit Fixed(const FixedPoint& f) : f(f) {}
    NN_ADD_INLINE V apply(V x) const { return mbqm8(x, f); }
    FixedPoint f;
  };
  static constexpr size_t kLanes = 8;
  static constexpr bool kMaskedTail = false;  // n is always 8: the caller does the tail
  static NN_ADD_INLINE V load(const int8_t* p, size_t) {
    return _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
  }
  static NN_ADD_INLINE void store(int8_t* p, V v, size_t) { store8(p, v); }
  static NN_ADD_INLINE V set1(int32_t x) { return _mm256_set1_epi32(x); }
  static NN_ADD_INLINE V set1_64(int64_t x) { return _mm256_set1_epi64x(x); }
  static NN_ADD_INLINE V add(V a, V b) { return _mm256_add_epi32(a, b); }
  static NN_ADD_INLINE V sub(V a, V b) { return _mm256_sub_epi32(a, b); }
  static NN_ADD_INLINE V mullo(V a, V b) { return _mm256_mullo_epi32(a, b); }
  static NN_ADD_INLINE V min(V a, V b) { return _mm256_min_epi32(a, b); }
  static NN_ADD_INLINE V max(V a, V b) { return _mm256_max_epi32(a, b); }
  template <int kBits>
  static NN_ADD_INLINE V srai(V x) { return _mm256_srai_epi32(x, kBits); }
  static NN_ADD_INLINE V sll(V x, __m128i count) { return _mm256_sll_epi32(x, count); }
  static NN_ADD_INLINE V sra(V x, __m128i count) { return _mm256_sra_epi32(x, count); }
  static NN_ADD_INLINE V add64(V a, V b) { return _mm256_add_epi64(a, b); }
  static NN_ADD_INLINE V mul_even(V a, V b) { return _mm256_mul_epi32(a, b); }
  template <int kBits>
  static NN_ADD_INLINE V srli64(V x) { return _mm256_srli_epi64(x, kBits); }
  template <int kBits>
  static NN_ADD_INLINE V slli64(V x) { return _mm256_slli_epi64(x, kBits); }
  static NN_ADD_INLINE V blend_odd(V even, V odd) { return _mm256_blend_epi32(even, odd, 0xAA); }
  static NN_ADD_INLINE Mask mask_if(bool all) { return _mm256_set1_epi32(all ? -1 : 0); }
  static NN_ADD_INLINE V sign_where(Mask lanes, V x) { return _mm256_and_si256(_mm256_srai_epi32(x, 31), lanes); }
};
#include "delegates/cpu/native_int8_add_simd.inc"
}  // namespace
}  // namespace add_avx2

#pragma GCC pop_options

// Outside the pragmas: each definition has exactly its declaration's target.
NN_TARGET_INT8_512 size_t Int8AddMath::run_avx512(const int8_t* a, const int8_t* b, int8_t* out, size_t n) const {
  return add_avx512::add_rows(lanes_, a, b, out, n);
}

NN_TARGET_INT8_AVX2 size_t Int8AddMath::run_avx2(const int8_t* a, const int8_t* b, int8_t* out, size_t n) const {
  return add_avx2::add_rows(lanes_, a, b, out, n);
}

}  // namespace nn::cpu

#undef NN_ADD_INLINE

#endif  // NN_NATIVE_X86

namespace nn::cpu {

bool Int8AddTable::build(const Int8AddMath& math) {
  const quant::Multiplier mo = math.output_multiplier();
  if (mo.multiplier <= 0) return false;
  const int left = mo.shift > 0 ? mo.shift : 0, right = mo.shift > 0 ? 0 : -mo.shift;
  // |s| < 2^28 (Int8AddMath): s P and the constants stay below 2^62.
  if (left > 2 || right > 28) return false;
  const int bits = 31 + right;
  const int64_t p = int64_t{mo.multiplier} << left, n = int64_t{1} << bits;
  // floor((h + 2^(right-1)) / 2^right) of h = floor((s P + 2^30) / 2^31), nested into one floor.
  const int64_t k = (int64_t{1} << 30) + (right > 0 ? int64_t{1} << (right - 1 + 31) : 0);
  int64_t qa[256], ra[256], qb[256], t[256];
  for (int u = 0; u < 256; ++u) {
    const int32_t x = static_cast<int8_t>(u);
    const int64_t va = int64_t{math.rescaled_a(x)} * p, vb = int64_t{math.rescaled_b(x)} * p + k;
    qa[u] = va >> bits;  // floor
    ra[u] = va & (n - 1);
    qb[u] = vb >> bits;
    t[u] = n - (vb & (n - 1));  // the carry: ra >= t
  }
  std::vector<int64_t> ts(t, t + 256);
  std::sort(ts.begin(), ts.end());
  ts.erase(std::unique(ts.begin(), ts.end()), ts.end());
  const int64_t d = static_cast<int64_t>(ts.size());
  for (int u = 0; u < 256; ++u) {
    // ra[x] >= t[y] <=> #{t <= ra[x]} > index of t[y]; a carry for every b goes into qa.
    int64_t ca = std::upper_bound(ts.begin(), ts.end(), ra[u]) - ts.begin();
    if (ca == d) {
      ++qa[u];
      ca = 0;
    }
    ca_[u] = static_cast<uint8_t>(ca);
    cb_[u] = static_cast<uint8_t>(std::lower_bound(ts.begin(), ts.end(), t[u]) - ts.begin());
  }
  const quant::Range r = math.range();
  lo_ = r.lo;
  hi_ = r.hi;
  // clamp(A + B + c): an A past hi - min B or below lo - max B - 1 gives hi / lo for every
  // b, as does the bound itself; then B likewise against A's bounds.
  int64_t a[256], b[256];
  for (int u = 0; u < 256; ++u) a[u] = qa[u] + math.output_zero_point(), b[u] = qb[u];
  const auto [bmin, bmax] = std::minmax_element(b, b + 256);
  const int64_t a_lo = lo_ - *bmax - 1, a_hi = hi_ - *bmin;
  if (a_lo > a_hi) return false;
  for (int64_t& v : a) v = std::clamp(v, a_lo, a_hi);
  const auto [amin, amax] = std::minmax_element(a, a + 256);
  const int64_t b_lo = lo_ - *amax - 1, b_hi = hi_ - *amin;
  if (b_lo > b_hi) return false;
  for (int64_t& v : b) v = std::clamp(v, b_lo, b_hi);
  const auto [bmin2, bmax2] = std::minmax_element(b, b + 256);
  // A - s and B + s in int8, B + s + 1 too (the carry is added to B first).
  const int64_t s_lo = std::max(*amax - 127, -128 - *bmin2), s_hi = std::min(*amin + 128, 126 - *bmax2);
  split_ = s_lo > s_hi;
  if (!split_) {
    for (int u = 0; u < 256; ++u) {
      a_[u] = static_cast<int8_t>(a[u] - s_lo);
      b_[u] = static_cast<int8_t>(b[u] + s_lo);
      b1_[u] = 0;
    }
  } else {
    // A - s in int8; B1 (B + s clamped so that A - s + B1 stays in int8) and B2 = the rest,
    // B2 + 1 in int8 too.
    const int64_t s = *amax - 127;
    if (*amin - s < -128) return false;
    const int64_t b1_lo = -128 - (*amin - s), b1_hi = 127 - (*amax - s);
    for (int u = 0; u < 256; ++u) {
      const int64_t b1 = std::clamp(b[u] + s, b1_lo, b1_hi), b2 = b[u] + s - b1;
      if (b2 < -128 || b2 > 126) return false;
      a_[u] = static_cast<int8_t>(a[u] - s);
      b1_[u] = static_cast<int8_t>(b1);
      b_[u] = static_cast<int8_t>(b2);
    }
  }
  // Every pair against NNAPI's arithmetic.
  std::vector<int8_t> xa(65536), xb(65536), want(65536);
  for (size_t i = 0; i < 65536; ++i) {
    xa[i] = static_cast<int8_t>(i & 255);
    xb[i] = static_cast<int8_t>(i >> 8);
  }
  math.run(xa.data(), xb.data(), want.data(), want.size());
  for (size_t i = 0; i < 65536; ++i)
    if (scalar(xa[i], xb[i]) != want[i]) return false;
  return true;
}

void Int8AddTable::run(const int8_t* a, const int8_t* b, int8_t* out, size_t n, bool vbmi) const {
#if NN_NATIVE_X86
  if (vbmi) return split_ ? run_vbmi<true>(a, b, out, n) : run_vbmi<false>(a, b, out, n);
#else
  (void)vbmi;
#endif
  for (size_t i = 0; i < n; ++i) out[i] = scalar(a[i], b[i]);
}

#if NN_NATIVE_X86
namespace {
// table[x] for 64 bytes x: entries 0-127 (x >= 0) and 128-255 (x < 0) by two permutes.
__attribute__((target("avx512f,avx512bw,avx512vl,avx512vbmi,avx2"), always_inline)) inline __m512i lookup64(
    const __m512i t[4], __m512i x, __mmask64 negative) {
  return _mm512_mask_blend_epi8(negative, _mm512_permutex2var_epi8(t[0], x, t[1]),
                                _mm512_permutex2var_epi8(t[2], x, t[3]));
}
}  // namespace

template <bool kSplit>
void Int8AddTable::run_vbmi(const int8_t* a, const int8_t* b, int8_t* out, size_t n) const {
  __m512i ta[4], tb[4], tb1[4], tca[4], tcb[4];
  for (int j = 0; j < 4; ++j) {
    ta[j] = _mm512_load_si512(a_ + 64 * j);
    tb1[j] = _mm512_load_si512(b1_ + 64 * j);
    tb[j] = _mm512_load_si512(b_ + 64 * j);
    tca[j] = _mm512_load_si512(ca_ + 64 * j);
    tcb[j] = _mm512_load_si512(cb_ + 64 * j);
  }
  const __m512i lo = _mm512_set1_epi8(static_cast<char>(lo_)), hi = _mm512_set1_epi8(static_cast<char>(hi_));
  const __m512i minus_one = _mm512_set1_epi8(-1);
  for (size_t i = 0; i < n; i += 64) {
    const __mmask64 k = n - i >= 64 ? ~__mmask64{0} : (__mmask64{1} << (n - i)) - 1;
    const __m512i x = _mm512_maskz_loadu_epi8(k, a + i), y = _mm512_maskz_loadu_epi8(k, b + i);
    const __mmask64 nx = _mm512_movepi8_mask(x), ny = _mm512_movepi8_mask(y);
    const __mmask64 carry = _mm512_cmpgt_epu8_mask(lookup64(tca, x, nx), lookup64(tcb, y, ny));
    __m512i bv = lookup64(tb, y, ny);
    bv = _mm512_mask_sub_epi8(bv, carry, bv, minus_one);
    __m512i av = lookup64(ta, x, nx);
    if (kSplit) av = _mm512_add_epi8(av, lookup64(tb1, y, ny));  // within int8 by construction
    __m512i r = _mm512_adds_epi8(av, bv);
    r = _mm512_min_epi8(_mm512_max_epi8(r, lo), hi);
    _mm512_mask_storeu_epi8(out + i, k, r);
  }
}
template void Int8AddTable::run_vbmi<false>(const int8_t*, const int8_t*, int8_t*, size_t) const;
template void Int8AddTable::run_vbmi<true>(const int8_t*, const int8_t*, int8_t*, size_t) const;
#endif

}  // namespace nn::cpu

// Int8AddMath's AVX-512 and AVX2 forms (native_int8_add.h): native_int8_add_simd.inc's loop,
// once per instruction set. Each copy is built under its own `#pragma GCC target` because GCC
// does not inline an always_inline helper of a wider target into a narrower (or default)
// one, so one template over both widths would leave calls in the loop.
#include "delegates/cpu/native_int8_add.h"

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

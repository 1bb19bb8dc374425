// nnpeak: measures one core's fp32 peak with independent FMA chains (the roofline's top),
// on AVX-512 when the CPU has it, else AVX2+FMA. Prints {"gflops": ..., "isa": ...}.
#include <immintrin.h>

#include <chrono>
#include <cstdio>

namespace {

constexpr long kIters = 20'000'000;

// Twelve independent chains, spelled out: an array of accumulators is kept in memory by
// GCC (a load-FMA-store loop that measures the cache, not the FMA units).
#define NN_TWELVE(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11)

__attribute__((target("avx2,fma"))) double run_avx2() {
#define DECL(i) __m256 a##i = _mm256_set1_ps(1.0f + i * 1e-3f);
#define STEP(i) a##i = _mm256_fmadd_ps(a##i, m, b);
#define SUM(i) sum = _mm256_add_ps(sum, a##i);
  NN_TWELVE(DECL)
  const __m256 m = _mm256_set1_ps(0.999999f), b = _mm256_set1_ps(1e-7f);
  auto t0 = std::chrono::steady_clock::now();
  for (long i = 0; i < kIters; ++i) {
    NN_TWELVE(STEP)
  }
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  __m256 sum = _mm256_setzero_ps();
  NN_TWELVE(SUM)
  float sink[8];
  _mm256_storeu_ps(sink, sum);
  if (sink[0] == 42.f) std::puts("");
  return 12.0 * 8 * 2 * kIters / s / 1e9;
#undef DECL
#undef STEP
#undef SUM
}

__attribute__((target("avx512f"))) double run_avx512() {
#define DECL(i) __m512 a##i = _mm512_set1_ps(1.0f + i * 1e-3f);
#define STEP(i) a##i = _mm512_fmadd_ps(a##i, m, b);
#define SUM(i) sum = _mm512_add_ps(sum, a##i);
  NN_TWELVE(DECL)
  const __m512 m = _mm512_set1_ps(0.999999f), b = _mm512_set1_ps(1e-7f);
  auto t0 = std::chrono::steady_clock::now();
  for (long i = 0; i < kIters; ++i) {
    NN_TWELVE(STEP)
  }
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  __m512 sum = _mm512_setzero_ps();
  NN_TWELVE(SUM)
  float lanes[16];
  _mm512_storeu_ps(lanes, sum);
  if (lanes[0] == 42.f) std::puts("");
  return 12.0 * 16 * 2 * kIters / s / 1e9;
#undef DECL
#undef STEP
#undef SUM
}

}  // namespace

int main() {
  __builtin_cpu_init();
  double best = 0;
  const char* isa = "avx2";
  for (int rep = 0; rep < 3; ++rep) {
    double g = __builtin_cpu_supports("avx512f") ? run_avx512() : run_avx2();
    if (g > best) best = g;
  }
  if (__builtin_cpu_supports("avx512f")) isa = "avx512f";
  std::printf("{\"gflops\": %.2f, \"isa\": \"%s\"}\n", best, isa);
  return 0;
}

#include "audio/real_fft.h"

#include <fftw3.h>

#include <cstdint>
#include <cstring>
#include <map>
#include <mutex>
#include <utility>

namespace nn::audio {

namespace {

struct Plans {
  fftwf_plan forward;
  fftwf_plan inverse;
};

// One pair of plans per size for the process; never destroyed (processors come and go,
// the plans are a few KB).
Plans plans_for(size_t n) {
  static std::mutex mu;
  static std::map<size_t, Plans> cache;
  std::lock_guard<std::mutex> lock(mu);
  auto it = cache.find(n);
  if (it != cache.end()) return it->second;
  // FFTW_ESTIMATE: no timing runs at plan time, and the same plan (so the same rounding)
  // on every run, which the tests and the numpy cross-check rely on.
  float* real = fftwf_alloc_real(n);
  fftwf_complex* cplx = fftwf_alloc_complex(n / 2 + 1);
  Plans p;
  p.forward = fftwf_plan_dft_r2c_1d(static_cast<int>(n), real, cplx, FFTW_ESTIMATE);
  p.inverse = fftwf_plan_dft_c2r_1d(static_cast<int>(n), cplx, real, FFTW_ESTIMATE);
  fftwf_free(real);
  fftwf_free(cplx);
  cache.emplace(n, p);
  return p;
}

}  // namespace

RealFft::RealFft(size_t n) : n_(n) {
  Plans p = plans_for(n);
  forward_plan_ = p.forward;
  inverse_plan_ = p.inverse;
}

void RealFft::forward(const float* in, std::complex<float>* out) const {
  // r2c out of place keeps its input (FFTW's default for r2c); the cast is FFTW's API.
  fftwf_execute_dft_r2c(static_cast<fftwf_plan>(forward_plan_), const_cast<float*>(in),
                        reinterpret_cast<fftwf_complex*>(out));
}

void RealFft::inverse(std::complex<float>* in, float* out) const {
  fftwf_execute_dft_c2r(static_cast<fftwf_plan>(inverse_plan_), reinterpret_cast<fftwf_complex*>(in), out);
  const float scale = 1.f / static_cast<float>(n_);
  for (size_t i = 0; i < n_; ++i) out[i] *= scale;
}

// New-array execution needs the planning arrays' SIMD alignment (fftwf_alloc's: offset 0).
bool RealFft::aligned(const void* p) {
  return fftwf_alignment_of(static_cast<float*>(const_cast<void*>(p))) == 0;
}

void FftwFree::operator()(void* p) const { fftwf_free(p); }

float* fft_alloc_floats(size_t n) {
  float* p = fftwf_alloc_real(n ? n : 1);
  if (p) std::memset(p, 0, (n ? n : 1) * sizeof(float));
  return p;
}

std::complex<float>* fft_alloc_complex(size_t n) {
  fftwf_complex* p = fftwf_alloc_complex(n ? n : 1);
  if (p) std::memset(p, 0, (n ? n : 1) * sizeof(fftwf_complex));
  return reinterpret_cast<std::complex<float>*>(p);
}

}  // namespace nn::audio

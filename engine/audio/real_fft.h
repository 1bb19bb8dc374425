// Real FFTs of one size through FFTW3 (single precision). Plans are made once per size
// per process (FFTW's planner is not thread-safe, so under a lock) and executed on the
// caller's arrays (fftwf_execute_dft_*, which is thread-safe), so a processor per channel
// shares them. Arrays must have fftwf_malloc's alignment (aligned() says; the session's
// 64-byte aligned buffers have it).
#pragma once

#include <complex>
#include <cstddef>

namespace nn::audio {

class RealFft {
 public:
  explicit RealFft(size_t n);
  size_t size() const { return n_; }
  size_t bins() const { return n_ / 2 + 1; }
  // bins() complex values of the unnormalized forward transform; `in` is kept.
  void forward(const float* in, std::complex<float>* out) const;
  // n real values of the inverse transform scaled by 1/n (so inverse(forward(x)) == x);
  // `in` is destroyed (FFTW's c2r works in place on it).
  void inverse(std::complex<float>* in, float* out) const;
  static bool aligned(const void* p);

 private:
  size_t n_;
  void* forward_plan_;
  void* inverse_plan_;
};

// float buffers from fftwf_malloc (SIMD aligned), zeroed.
struct FftwFree {
  void operator()(void* p) const;
};
float* fft_alloc_floats(size_t n);
std::complex<float>* fft_alloc_complex(size_t n);

}  // namespace nn::audio

// The CPU delegate flushes denormals for a whole partition run (CpuOptions::flush_denormals):
// a value below FLT_MIN reads and writes as 0 in the native kernels on the caller and on the
// pool's workers; off, they compute the exact denormal results. The caller's own MXCSR is
// the same after a run as before, and a model without denormals gives the same bits either
// way. AVX-512 and AVX2 kernels; x86 only (MXCSR).
#include <gtest/gtest.h>
#include <pthreadpool.h>

#include <atomic>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h>
#endif

#include "runtime/thread_pool.h"
#include "runtime_test_util.h"
#include "test_model.h"

#if defined(__x86_64__) || defined(__i386__)
namespace {

using T = nn::OperationType;
using Built = nn_test::TestModel;
constexpr unsigned kFtzDaz = 0x8040;

// A 1x1 conv (zero bias) of x plus x: every output a sum of products of x, all below
// FLT_MIN when x is (|x| <= 1e-40, 40 input channels, |w| <= 1). 48x48 pixels: both
// threads of a pool take rows.
Built conv_plus_input() {
  Built b;
  const uint32_t x = b.input({1, 48, 48, 40});
  const uint32_t y = b.op(T::CONV_2D, {x, b.constant({40, 1, 1, 40}, 11), b.constant({40}, 12, 0.f, 0.f), b.i32(1),
                                       b.i32(1), b.i32(1), b.i32(0)});
  b.output(b.op(T::ADD, {y, x, b.i32(0)}));
  EXPECT_TRUE(b.model->validate_and_infer_shapes().is_ok());
  return b;
}

struct Outcome {
  std::vector<float> out;
  std::string kernels;
  unsigned csr_before = 0, csr_after = 0;
};

Outcome run(Built& b, const std::vector<float>& input, const std::string& delegate, int threads, bool flush,
            bool avx512 = true) {
  nn::SessionOptions o;
  o.delegates = {delegate};
  o.threads = threads;
  o.cpu.flush_denormals = flush;
  o.cpu.avx512 = avx512;
  o.cpu.adaptive_threads = false;  // every run shares the pool
  Outcome r;
  auto opened = nn::Session::open(b.model, o);
  EXPECT_TRUE(opened.is_ok()) << opened.status().to_string();
  if (!opened.is_ok()) return r;
  auto& session = *opened;
  EXPECT_TRUE(session->set_input(0, input.data(), input.size() * sizeof(float)).is_ok());
  r.csr_before = _mm_getcsr();
  EXPECT_TRUE(session->run().is_ok());
  r.csr_after = _mm_getcsr();
  const size_t n = nn::num_elements(session->output_desc(0).dims);
  r.out.assign(session->output_f32(0), session->output_f32(0) + n);
  for (const auto& k : session->kernels()) r.kernels += k.kernel + "\n";
  return r;
}

std::vector<float> denormal_input(size_t n) {
  std::vector<float> v = nn_test::random_floats(n, 5, -1.f, 1.f);
  for (float& x : v) x *= 1e-40f;
  return v;
}

TEST(CpuDenormals, FlushedToZeroAtOneAndTwoThreads) {
  Built b = conv_plus_input();
  const std::vector<float> in = denormal_input(48 * 48 * 40);
  for (bool avx512 : {true, false})
    for (int threads : {1, 2}) {
      if (threads == 2 && nn::usable_cores() < 2) continue;
      const Outcome r = run(b, in, "cpu", threads, true, avx512);
      EXPECT_NE(r.kernels.find("native conv"), std::string::npos) << r.kernels;
      ASSERT_EQ(r.out.size(), in.size());
      size_t nonzero = 0;
      for (float v : r.out) nonzero += v != 0.f;
      EXPECT_EQ(nonzero, 0u) << threads << " threads, avx512 " << avx512 << ", of " << r.out.size();
    }
}

// Off: the native kernels compute the denormals, as the reference kernels do (the sums of
// products on the denormal grid differ only in the products' rounding).
TEST(CpuDenormals, ExactDenormalsWithTheSwitchOff) {
  Built b = conv_plus_input();
  const std::vector<float> in = denormal_input(48 * 48 * 40);
  const Outcome ref = run(b, in, "reference", 1, true);
  ASSERT_EQ(ref.out.size(), in.size());
  size_t ref_nonzero = 0;
  for (float v : ref.out) ref_nonzero += v != 0.f && std::fabs(v) < FLT_MIN;
  EXPECT_GT(ref_nonzero, in.size() * 9 / 10) << "the reference delegate never flushes";
  for (bool avx512 : {true, false})
    for (int threads : {1, 2}) {
      if (threads == 2 && nn::usable_cores() < 2) continue;
      const Outcome r = run(b, in, "cpu", threads, false, avx512);
      EXPECT_NE(r.kernels.find("native conv"), std::string::npos) << r.kernels;
      ASSERT_EQ(r.out.size(), in.size());
      size_t nonzero = 0, far = 0;
      for (size_t i = 0; i < r.out.size(); ++i) {
        nonzero += r.out[i] != 0.f;
        far += std::fabs(r.out[i] - ref.out[i]) > 64 * 1.4e-45f;  // 40 products' roundings
      }
      EXPECT_EQ(far, 0u) << threads << " threads, avx512 " << avx512;
      EXPECT_GT(nonzero, in.size() * 9 / 10) << threads << " threads, avx512 " << avx512;
    }
}

// The caller's MXCSR comes back after a run, flushing or not, whatever it was.
TEST(CpuDenormals, CallersMxcsrRestored) {
  Built b = conv_plus_input();
  const std::vector<float> in = denormal_input(48 * 48 * 40);
  const unsigned original = _mm_getcsr();
  for (unsigned caller : {original & ~kFtzDaz, original | kFtzDaz, (original & ~kFtzDaz) | 0x6000u /* round to 0 */})
    for (int threads : {1, 2})
      for (bool flush : {true, false}) {
        _mm_setcsr(caller);
        const Outcome r = run(b, in, "cpu", threads, flush);
        _mm_setcsr(original);
        EXPECT_EQ(r.csr_before, caller);
        EXPECT_EQ(r.csr_after, caller) << std::hex << caller << " " << threads << " threads, flush " << flush;
      }
}

// A model whose values stay normal gives the same bits with the switch on and off.
TEST(CpuDenormals, NormalModelSameBits) {
  Built b;
  const uint32_t x = b.input({1, 23, 23, 24});
  const uint32_t y = b.op(T::CONV_2D, {x, b.constant({32, 3, 3, 24}, 21), b.constant({32}, 22), b.i32(1), b.i32(1),
                                       b.i32(1), b.i32(1)});  // ReLU
  const uint32_t z = b.op(T::CONV_2D, {y, b.constant({24, 1, 1, 32}, 23), b.constant({24}, 24), b.i32(1), b.i32(1),
                                       b.i32(1), b.i32(0)});
  b.output(b.op(T::ADD, {z, x, b.i32(0)}));
  ASSERT_TRUE(b.model->validate_and_infer_shapes().is_ok());
  const std::vector<float> in = nn_test::random_floats(23 * 23 * 24, 9, -1.f, 1.f);
  for (int threads : {1, 2}) {
    const Outcome on = run(b, in, "cpu", threads, true), off = run(b, in, "cpu", threads, false);
    ASSERT_EQ(on.out.size(), off.out.size());
    ASSERT_FALSE(on.out.empty());
    EXPECT_EQ(std::memcmp(on.out.data(), off.out.data(), on.out.size() * sizeof(float)), 0) << threads << " threads";
  }
}

// The pool: while a FlushDenormals lives, every item of a job runs with FTZ|DAZ, on the
// workers too; after it, the caller's MXCSR is back and jobs run without.
TEST(CpuDenormals, PoolJobsFlushWhileTheCallerDoes) {
  pthreadpool_t pool = pthreadpool_create(2);
  ASSERT_NE(pool, nullptr);
  struct Seen {
    std::atomic<int> flushed{0}, not_flushed{0};
  };
  auto item = [](void* ctx, size_t) {
    volatile float sink = 0;  // a little work per item, so the worker takes some
    for (int k = 0; k < 2000; ++k) sink = sink + 1.f;
    auto* s = static_cast<Seen*>(ctx);
    ((_mm_getcsr() & kFtzDaz) == kFtzDaz ? s->flushed : s->not_flushed).fetch_add(1);
  };
  const unsigned original = _mm_getcsr();
  _mm_setcsr(original & ~kFtzDaz);
  {
    Seen s;
    {
      nn::FlushDenormals flush(true);
      EXPECT_EQ(_mm_getcsr() & kFtzDaz, kFtzDaz);
      pthreadpool_parallelize_1d(pool, item, &s, 4000, 0);
    }
    EXPECT_EQ(_mm_getcsr(), original & ~kFtzDaz);
    EXPECT_EQ(s.flushed.load(), 4000);
    EXPECT_EQ(s.not_flushed.load(), 0);
  }
  {
    Seen s;
    {
      nn::FlushDenormals flush(false);
      pthreadpool_parallelize_1d(pool, item, &s, 4000, 0);
    }
    EXPECT_EQ(s.not_flushed.load(), 4000);
  }
  _mm_setcsr(original);
  pthreadpool_destroy(pool);
}

}  // namespace
#endif

// nn::percentile, the one latency percentile the tools, bench and elements report: linear
// interpolation between ranks (numpy.percentile's default). Before it, nnbench_quick took
// the nearest rank of a 0..1 fraction and nnrun interpolated a 0..100 percent, so the
// same run printed two different medians.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

#include "nn/percentile.h"

namespace {

TEST(Percentile, InterpolatesBetweenRanksLikeNumpy) {
  const std::vector<double> v = {4.0, 1.0, 3.0, 2.0};  // unsorted on purpose
  EXPECT_DOUBLE_EQ(nn::percentile(v, 0), 1.0);
  EXPECT_DOUBLE_EQ(nn::percentile(v, 50), 2.5);   // numpy.percentile([1,2,3,4], 50)
  EXPECT_DOUBLE_EQ(nn::percentile(v, 90), 3.7);   // numpy.percentile([1,2,3,4], 90)
  EXPECT_DOUBLE_EQ(nn::percentile(v, 100), 4.0);
  EXPECT_DOUBLE_EQ(nn::percentile(v, 25), 1.75);
}

TEST(Percentile, EmptyIsZeroAndOutOfRangeClamps) {
  EXPECT_EQ(nn::percentile(std::vector<double>{}, 50), 0.0);
  const std::vector<double> v = {7.0, 9.0};
  EXPECT_DOUBLE_EQ(nn::percentile(v, -5), 7.0);
  EXPECT_DOUBLE_EQ(nn::percentile(v, 250), 9.0);
  EXPECT_DOUBLE_EQ(nn::percentile(std::vector<double>{5.0}, 99), 5.0);
}

TEST(Percentile, MatchesASortedReferenceOnRandomData) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> dist(0.0, 100.0);
  for (size_t n : {2u, 13u, 127u, 1000u}) {
    std::vector<double> v(n);
    for (double& x : v) x = dist(rng);
    std::vector<double> sorted = v;
    std::sort(sorted.begin(), sorted.end());
    for (double p : {0.0, 1.0, 33.3, 50.0, 90.0, 99.0, 100.0}) {
      const double rank = p / 100.0 * static_cast<double>(n - 1);
      const size_t lo = static_cast<size_t>(rank);
      const size_t hi = std::min(lo + 1, n - 1);
      const double expected = sorted[lo] + (sorted[hi] - sorted[lo]) * (rank - static_cast<double>(lo));
      EXPECT_NEAR(nn::percentile(v, p), expected, 1e-12) << "n=" << n << " p=" << p;
    }
  }
}

}  // namespace

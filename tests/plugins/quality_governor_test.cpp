// nnbackground adaptive=true's governor (plugins/quality_governor.h) on its own: when full
// quality is chosen, and what it predicts, from the costs it is fed (in ms, as measured).
#include <gtest/gtest.h>

#include "quality_governor.h"

namespace {

using nn::plugins::QualityGovernor;

// A 4K stream on a busy machine: the warm-up measured 96 ms for full quality and 40 ms for
// the fast path (both slowed alike); then the machine is quick again and fast frames cost
// 4 ms. Full quality (predicted 96 / 40 * 4 = 9.6 ms) fits the 27 ms left again, and
// the cost reported upstream is that prediction, not the warm-up's 96 ms.
TEST(QualityGovernor, AWarmUpSlowedByLoadDoesNotKeepTheFastPathForever) {
  QualityGovernor g;
  g.record_warm_up(96.0, QualityGovernor::kFastReused, 40.0);
  EXPECT_TRUE(g.choose_fast(27.0)) << "just after the warm-up, full quality looks too slow";
  double reported = 0;
  for (int i = 0; i < 16; ++i) reported = g.record(QualityGovernor::kFastReused, 4.0);
  EXPECT_NEAR(g.lowest_full(), 9.6, 1e-9);
  EXPECT_NEAR(g.full_ms(), 9.6, 1e-9);
  EXPECT_NEAR(reported, 9.6, 1e-9) << "the full-quality equivalent goes upstream";
  EXPECT_FALSE(g.choose_fast(27.0)) << "full quality fits again";
  EXPECT_TRUE(g.choose_fast(9.0)) << "but not in less than its predicted cost";
  // Full frames then measure it themselves, and from then on only they count.
  g.record(QualityGovernor::kFull, 12.0);
  EXPECT_NEAR(g.lowest_full(), 12.0, 1e-9) << "a measured full frame outranks the warm-up's ratio";
  for (int i = 0; i < 4; ++i) g.record(QualityGovernor::kFastReused, 1.0);
  EXPECT_NEAR(g.lowest_full(), 12.0, 1e-9);
  g.record(QualityGovernor::kFull, 8.0);
  EXPECT_NEAR(g.lowest_full(), 8.0, 1e-9);
}

// A warm-up whose fast sample was the slow one (full 16 ms, fast 22 ms: noise at start-up)
// underestimates full quality only until a full frame measures it.
TEST(QualityGovernor, AFullFrameCorrectsANoisyWarmUpRatio) {
  QualityGovernor g;
  g.record_warm_up(16.0, QualityGovernor::kFastReused, 22.0);
  g.record(QualityGovernor::kFastReused, 2.0);
  EXPECT_NEAR(g.lowest_full(), 16.0 / 22.0 * 2.0, 1e-9);
  g.record(QualityGovernor::kFull, 3.5);
  EXPECT_NEAR(g.lowest_full(), 3.5, 1e-9);
}

// Contention that comes after the warm-up still sends frames down the fast path: every
// kind slows alike, so the slowdown scales the full prediction.
TEST(QualityGovernor, ContentionAfterTheWarmUpStillChoosesTheFastPath) {
  QualityGovernor g;
  g.record_warm_up(10.0, QualityGovernor::kFastBlurred, 4.0);
  EXPECT_FALSE(g.choose_fast(27.0));
  for (int i = 0; i < 16; ++i) g.record(QualityGovernor::kFastBlurred, 12.0);  // 3x slower
  EXPECT_NEAR(g.full_ms(), 30.0, 1e-9);
  EXPECT_TRUE(g.choose_fast(27.0));
  EXPECT_NEAR(g.lowest_full(), 10.0, 1e-9) << "the uncontended cost is unchanged";
}

// Without a warm-up's fast measurement only full frames say what full quality costs; an
// unmeasured governor lets the first frame through at full quality (to measure it).
TEST(QualityGovernor, WithoutAWarmUpRatioOnlyFullFramesCount) {
  QualityGovernor g;
  EXPECT_FALSE(g.choose_fast(0.0)) << "nothing measured: measure full quality";
  g.record(QualityGovernor::kFull, 50.0);
  for (int i = 0; i < 16; ++i) g.record(QualityGovernor::kFastReused, 2.0);
  EXPECT_NEAR(g.lowest_full(), 50.0, 1e-9);
  EXPECT_TRUE(g.choose_fast(27.0));
  g.reset();
  EXPECT_EQ(g.lowest_full(), 0.0);
  EXPECT_FALSE(g.choose_fast(0.0));
}

}  // namespace

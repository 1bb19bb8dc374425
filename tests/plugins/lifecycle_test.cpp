// Element lifecycle: what a stopped element keeps. nnbackground's compositor holds frame-size
// buffers while streaming (blurred background, coefficients, alpha); PAUSED -> READY gives them
// back, and the element composites as before when it plays again. Measured as glibc's heap in
// use (mallinfo2: allocated chunks, mmapped ones included), which only this process's own
// allocations move.
#include <malloc.h>

#include <cstdio>

#include "plugin_test_util.h"

using namespace nn_gst_test;

namespace {

constexpr int kW = 1920, kH = 1080;

double heap_in_use_mib() {
  const struct mallinfo2 m = mallinfo2();
  return static_cast<double>(m.uordblks + m.hblkhd) / (1 << 20);
}

// A left-half-person mask at 64x48 on a full-frame rectangle.
void attach_half_mask(GstBuffer* buf, GBytes* mask) {
  ASSERT_NE(gst_buffer_add_nn_mask_meta(buf, GST_NN_MASK_FORMAT_UINT8, 64, 48, 64, mask, kW, kH, 0, 0, kW, kH, 0),
            nullptr);
}

GBytes* half_mask() {
  std::vector<uint8_t> m(64 * 48);
  for (int y = 0; y < 48; ++y)
    for (int x = 0; x < 64; ++x) m[y * 64 + x] = x < 32 ? 255 : 0;
  return g_bytes_new(m.data(), m.size());
}

class NnBackgroundLifecycle : public ::testing::Test {
 protected:
  void SetUp() override {
    mask_ = half_mask();
    frame_ = test_image_rgb(kW, kH);
  }
  void TearDown() override {
    if (h_) gst_harness_teardown(h_);
    g_bytes_unref(mask_);
  }
  void start(const std::string& props) {
    h_ = gst_harness_new_parse(("nnbackground " + props).c_str());
    ASSERT_NE(h_, nullptr);
    gst_harness_set_src_caps_str(h_, caps_string("RGBA", kW, kH).c_str());
  }
  // One frame through; its output as RGB.
  cv::Mat push() {
    GstBuffer* in = make_frame("RGBA", frame_);
    attach_half_mask(in, mask_);
    GstBuffer* out = gst_harness_push_and_pull(h_, in);
    EXPECT_NE(out, nullptr);
    if (!out) return {};
    cv::Mat rgb = buffer_to_rgb(out, "RGBA", kW, kH);
    gst_buffer_unref(out);
    return rgb;
  }
  void set_state(GstState state) {
    ASSERT_EQ(gst_element_set_state(h_->element, state), GST_STATE_CHANGE_SUCCESS);
    // A deactivated pad forgets its sticky events: caps and segment again, as a restarted
    // upstream would send them.
    if (state == GST_STATE_PLAYING) gst_harness_set_src_caps_str(h_, caps_string("RGBA", kW, kH).c_str());
  }

  GstHarness* h_ = nullptr;
  GBytes* mask_ = nullptr;
  cv::Mat frame_;
};

// 1080p RGBA: the blurred background alone is 7.9 MiB. A stopped element keeps none of it.
TEST_F(NnBackgroundLifecycle, ReadyGivesBackTheFrameBuffers) {
  start("mode=blur adaptive=false");
  const cv::Mat first = push();
  for (int i = 0; i < 2; ++i) push();
  malloc_trim(0);
  const double streaming = heap_in_use_mib();
  set_state(GST_STATE_READY);
  const double stopped = heap_in_use_mib();
  std::printf("heap in use: %.2f MiB streaming, %.2f MiB in READY\n", streaming, stopped);
  EXPECT_GT(streaming - stopped, 7.9) << "heap in use " << streaming << " MiB streaming, " << stopped
                                      << " MiB in READY";
  // And it composites the same when it plays again.
  set_state(GST_STATE_PLAYING);
  const cv::Mat again = push();
  ASSERT_FALSE(again.empty());
  EXPECT_EQ(cv::norm(first, again, cv::NORM_INF), 0.0);
}

// mode=image: the image goes with the buffers at READY and is loaded again at start.
TEST_F(NnBackgroundLifecycle, ImageModeComposesTheSameAfterReady) {
  ASSERT_TRUE(nn_test::require_asset("media/messi5.jpg"));
  start("mode=image adaptive=false location=" + nn_test::asset("media/messi5.jpg"));
  const cv::Mat first = push();
  set_state(GST_STATE_READY);
  set_state(GST_STATE_PLAYING);
  const cv::Mat again = push();
  ASSERT_FALSE(again.empty());
  EXPECT_EQ(cv::norm(first, again, cv::NORM_INF), 0.0);
  // The right half is background: the image, not the frame.
  cv::Mat diff;
  cv::absdiff(first(cv::Rect(kW * 3 / 4, 0, kW / 4, kH)), frame_(cv::Rect(kW * 3 / 4, 0, kW / 4, kH)), diff);
  EXPECT_GT(cv::mean(diff.reshape(1))[0], 10.0);
}

}  // namespace

NN_GST_TEST_MAIN()

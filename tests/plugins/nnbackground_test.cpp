// nnbackground with GstHarness, fed buffers that carry hand-made masks: what is person
// stays bit-exact, what is background is blurred / recoloured / replaced / made
// transparent; every format at an odd size; edge refinement sharpens the alpha edge.
#include <atomic>
#include <cmath>
#include <random>
#include <thread>

#include <sched.h>

#include "gstnnbackground.h"
#include "plugin_test_util.h"

using namespace nn_gst_test;

namespace {

constexpr int kW = 385, kH = 289;

// A mask whose left `person_fraction` of the frame is foreground, at 64x48 (uint8).
GBytes* half_mask(int mw, int mh, double person_fraction) {
  std::vector<uint8_t> m(static_cast<size_t>(mw) * mh);
  for (int y = 0; y < mh; ++y)
    for (int x = 0; x < mw; ++x) m[y * mw + x] = (x + 0.5) < person_fraction * mw ? 255 : 0;
  return g_bytes_new(m.data(), m.size());
}

void attach_mask(GstBuffer* buf, GBytes* mask, int mw, int mh, int fw, int fh) {
  ASSERT_NE(
      gst_buffer_add_nn_mask_meta(buf, GST_NN_MASK_FORMAT_UINT8, mw, mh, mw, mask, fw, fh, 0, 0, fw, fh, 0),
      nullptr);
}

// Noise texture: every pixel differs from its neighbours, so blur shows up plainly.
cv::Mat noise_rgb(int w, int h, uint32_t seed = 5) {
  cv::Mat m(h, w, CV_8UC3);
  cv::randu(m, cv::Scalar::all(0), cv::Scalar::all(255));
  (void)seed;
  return m;
}

double high_freq_energy(const cv::Mat& img, const cv::Rect& r) {
  cv::Mat gray, lap;
  cv::Mat roi = img(r);
  if (img.channels() == 4)
    cv::cvtColor(roi, gray, cv::COLOR_RGBA2GRAY);
  else
    cv::cvtColor(roi, gray, cv::COLOR_RGB2GRAY);
  cv::Laplacian(gray, lap, CV_32F);
  return cv::mean(cv::abs(lap))[0];
}

class NnBackgroundTest : public ::testing::Test {
 protected:
  void TearDown() override {
    if (bg_) gst_object_unref(bg_);
    if (h_) gst_harness_teardown(h_);
  }
  void start(const std::string& props, const char* format = "RGBA", int w = kW, int h = kH) {
    const std::string line = "nnbackground " + props;
    h_ = gst_harness_new_parse(line.c_str());
    ASSERT_NE(h_, nullptr);
    bg_ = gst_harness_find_element(h_, "nnbackground");
    gst_harness_set_src_caps_str(h_, caps_string(format, w, h).c_str());
  }
  GstHarness* h_ = nullptr;
  GstElement* bg_ = nullptr;
};

// Compositing reports its cost upstream (for nnsegment's budget) every few frames.
TEST_F(NnBackgroundTest, ReportsItsCostUpstream) {
  start("mode=blur");
  GBytes* mask = half_mask(64, 48, 0.5);
  const cv::Mat rgb = noise_rgb(kW, kH);
  int cost_events = 0;
  for (int i = 0; i < 8; ++i) {
    GstBuffer* in = make_frame("RGBA", rgb);
    attach_mask(in, mask, 64, 48, kW, kH);
    gst_buffer_unref(gst_harness_push_and_pull(h_, in));
    while (GstEvent* ev = gst_harness_try_pull_upstream_event(h_)) {
      if (GST_EVENT_TYPE(ev) == GST_EVENT_CUSTOM_UPSTREAM && gst_event_has_name(ev, GST_NN_DOWNSTREAM_COST_EVENT)) {
        ++cost_events;
        gdouble ms = -1;
        EXPECT_TRUE(gst_structure_get_double(gst_event_get_structure(ev), "ms", &ms));
        EXPECT_GT(ms, 0.0);
        EXPECT_LT(ms, 10000.0);
      }
      gst_event_unref(ev);
    }
  }
  g_bytes_unref(mask);
  EXPECT_EQ(cost_events, 3) << "the warm-up's estimate at caps, then frames 1 and 5 of 8";
}

// adaptive=true: a frame whose deadline (the meta's, from nnsegment's budget) full quality
// would miss goes the fast path -- still a composite: the person kept, the background
// replaced; frames with time to spare, and every frame with adaptive=false, get full quality.
TEST_F(NnBackgroundTest, AdaptiveTakesTheFastPathOnlyWhenTheDeadlineIsNear) {
  start("mode=blur");
  GBytes* mask = half_mask(64, 48, 0.5);  // left half: person
  const cv::Mat rgb = noise_rgb(kW, kH);
  const auto push = [&](gint64 deadline_us) {
    GstBuffer* in = make_frame("RGBA", rgb);
    attach_mask(in, mask, 64, 48, kW, kH);
    gst_buffer_get_nn_mask_meta(in)->deadline_us = deadline_us;
    GstBuffer* out = gst_harness_push_and_pull(h_, in);
    const cv::Mat got = packed_to_mat(out, "RGBA", kW, kH);
    gst_buffer_unref(out);
    return got;
  };
  const auto plenty = [] { return g_get_monotonic_time() + 10 * G_USEC_PER_SEC; };
  const auto missed = [] { return g_get_monotonic_time() - 1000; };
  for (int i = 0; i < 5; ++i) push(plenty());
  EXPECT_EQ(stat_u64(bg_, "fast-frames"), 0u) << "time to spare: full quality";
  for (int i = 0; i < 5; ++i) {
    const cv::Mat got = push(missed());
    const cv::Vec4b person = got.at<cv::Vec4b>(kH / 2, 20);
    EXPECT_EQ(cv::Vec3b(person[0], person[1], person[2]), rgb.at<cv::Vec3b>(kH / 2, 20)) << "frame " << i;
    EXPECT_LT(high_freq_energy(got, cv::Rect(kW - 60, 20, 40, kH - 40)),
              0.5 * high_freq_energy(got, cv::Rect(20, 20, 40, kH - 40)))
        << "frame " << i << ": the background is still blurred";
  }
  EXPECT_EQ(stat_u64(bg_, "fast-frames"), 5u) << "every frame past its deadline";
  g_object_set(bg_, "adaptive", FALSE, nullptr);
  for (int i = 0; i < 3; ++i) push(missed());
  EXPECT_EQ(stat_u64(bg_, "fast-frames"), 5u) << "adaptive=false: always full quality";
  g_bytes_unref(mask);
}

// A real-time streaming thread (here the thread pushing) composites alone, never waiting
// for OpenCV's normal-priority helpers; back on SCHED_OTHER the helpers take rows again.
// Needs the right to SCHED_RR (root, CAP_SYS_NICE or RLIMIT_RTPRIO): skipped without it.
TEST_F(NnBackgroundTest, RealtimeStreamingThreadCompositesAlone) {
  const int w = 1920, h = 1080;
  start("mode=blur adaptive=false", "RGBA", w, h);
  GBytes* mask = half_mask(64, 48, 0.5);
  const cv::Mat rgb = noise_rgb(w, h);
  const auto push = [&](int n) {
    for (int i = 0; i < n; ++i) {
      GstBuffer* in = make_frame("RGBA", rgb);
      attach_mask(in, mask, 64, 48, w, h);
      gst_buffer_unref(gst_harness_push_and_pull(h_, in));
    }
  };
  push(2);
  EXPECT_EQ(stat_u64(bg_, "serial-frames"), 0u) << "a normal thread lets the helpers take rows";
  sched_param rt{};
  rt.sched_priority = 1;
  if (sched_setscheduler(0, SCHED_RR, &rt) != 0) {
    g_bytes_unref(mask);
    GTEST_SKIP() << "SCHED_RR not permitted here";
  }
  push(3);
  sched_param other{};
  sched_setscheduler(0, SCHED_OTHER, &other);
  EXPECT_EQ(stat_u64(bg_, "serial-frames"), 3u) << "every frame on the real-time thread";
  push(2);
  EXPECT_EQ(stat_u64(bg_, "serial-frames"), 3u) << "back on SCHED_OTHER: helpers again";
  EXPECT_EQ(stat_u64(bg_, "frames"), 7u);
  g_bytes_unref(mask);
}

TEST_F(NnBackgroundTest, BuffersWithoutMaskPassUnchanged) {
  start("mode=color");
  cv::Mat rgb = noise_rgb(kW, kH);
  GstBuffer* in = make_frame("RGBA", rgb);
  GstBuffer* copy = gst_buffer_copy_deep(in);
  GstBuffer* out = gst_harness_push_and_pull(h_, in);
  GstMapInfo map;
  gst_buffer_map(copy, &map, GST_MAP_READ);
  EXPECT_EQ(gst_buffer_memcmp(out, 0, map.data, map.size), 0);
  gst_buffer_unmap(copy, &map);
  gst_buffer_unref(copy);
  gst_buffer_unref(out);
  EXPECT_EQ(stat_u64(bg_, "frames-without-mask"), 1u);
}

// Every template format at an odd size: the person side is bit-exact, the background side
// loses its high frequencies.
TEST_F(NnBackgroundTest, BlurKeepsPersonAndBlursBackgroundInEveryFormat) {
  const char* formats[] = {"RGBA", "BGRA", "RGBx", "BGRx", "RGB", "BGR"};
  GBytes* mask = half_mask(64, 48, 0.5);
  cv::Mat rgb = noise_rgb(kW, kH);
  for (const char* fmt : formats) {
    SCOPED_TRACE(fmt);
    start("mode=blur blur-strength=12", fmt);
    GstBuffer* in = make_frame(fmt, rgb);
    attach_mask(in, mask, 64, 48, kW, kH);
    cv::Mat before = packed_to_mat(in, fmt, kW, kH);
    GstBuffer* out = gst_harness_push_and_pull(h_, in);
    ASSERT_NE(out, nullptr);
    cv::Mat after = packed_to_mat(out, fmt, kW, kH);
    const cv::Rect person(0, 0, kW / 2 - 30, kH), background(kW / 2 + 30, 0, kW - (kW / 2 + 30), kH);
    cv::Mat diff;
    cv::absdiff(before(person), after(person), diff);
    double max_diff;
    cv::minMaxLoc(diff.reshape(1), nullptr, &max_diff);
    EXPECT_EQ(max_diff, 0.0) << "person pixels must be untouched";
    const double e_before = high_freq_energy(before, background),
                 e_after = high_freq_energy(after, background);
    EXPECT_LT(e_after, 0.1 * e_before) << "background must be blurred";
    gst_buffer_unref(out);
    gst_object_unref(bg_);
    bg_ = nullptr;
    gst_harness_teardown(h_);
    h_ = nullptr;
  }
  g_bytes_unref(mask);
}

TEST_F(NnBackgroundTest, ColorReplacesBackground) {
  start("mode=color color=0x80102030", "BGRA");
  GBytes* mask = half_mask(64, 48, 0.0);  // all background
  GstBuffer* in = make_frame("BGRA", noise_rgb(kW, kH));
  attach_mask(in, mask, 64, 48, kW, kH);
  GstBuffer* out = gst_harness_push_and_pull(h_, in);
  cv::Mat bgra = packed_to_mat(out, "BGRA", kW, kH);
  for (int y = 0; y < kH; y += 17)
    for (int x = 0; x < kW; x += 19) {
      const cv::Vec4b p = bgra.at<cv::Vec4b>(y, x);
      ASSERT_EQ(p, cv::Vec4b(0x30, 0x20, 0x10, 0x80)) << x << "," << y;
    }
  gst_buffer_unref(out);
  g_bytes_unref(mask);
}

TEST_F(NnBackgroundTest, TransparentNegotiatesAlphaAndWritesTheMask) {
  h_ = gst_harness_new_parse("nnbackground mode=transparent refine=false feather=0");
  bg_ = gst_harness_find_element(h_, "nnbackground");
  // Only formats with alpha are offered to a neighbour that can convert (a videoconvert
  // asking with every format).
  GstPad* sink = gst_element_get_static_pad(bg_, "sink");
  GstCaps* any_format = gst_caps_from_string("video/x-raw,format={RGBx,RGB,BGRx,RGBA,BGR,BGRA}");
  GstCaps* caps = gst_pad_query_caps(sink, any_format);
  ASSERT_FALSE(gst_caps_is_empty(caps));
  for (guint i = 0; i < gst_caps_get_size(caps); ++i) {
    gchar* s = gst_structure_to_string(gst_caps_get_structure(caps, i));
    EXPECT_EQ(std::string(s).find("RGBx"), std::string::npos) << s;
    EXPECT_EQ(std::string(s).find("RGB,"), std::string::npos) << s;
    EXPECT_NE(std::string(s).find("RGBA"), std::string::npos) << s;
    g_free(s);
  }
  gst_caps_unref(caps);
  gst_caps_unref(any_format);
  gst_object_unref(sink);

  gst_harness_set_src_caps_str(h_, caps_string("RGBA", kW, kH).c_str());
  GBytes* mask = half_mask(64, 48, 0.5);
  cv::Mat rgb = noise_rgb(kW, kH);
  GstBuffer* in = make_frame("RGBA", rgb);
  attach_mask(in, mask, 64, 48, kW, kH);
  GstBuffer* out = gst_harness_push_and_pull(h_, in);
  cv::Mat rgba = packed_to_mat(out, "RGBA", kW, kH);
  EXPECT_EQ(rgba.at<cv::Vec4b>(100, 20)[3], 255);
  EXPECT_EQ(rgba.at<cv::Vec4b>(100, kW - 20)[3], 0);
  // Colour untouched.
  const cv::Vec3b c = rgb.at<cv::Vec3b>(100, kW - 20);
  const cv::Vec4b o = rgba.at<cv::Vec4b>(100, kW - 20);
  EXPECT_EQ(cv::Vec3b(o[0], o[1], o[2]), c);
  gst_buffer_unref(out);
  g_bytes_unref(mask);
}

TEST_F(NnBackgroundTest, ImageCoversTheBackground) {
  const std::string image = nn_test::asset("media/messi5.jpg");
  ASSERT_TRUE(nn_test::require_asset("media/messi5.jpg"));
  start("mode=image location=" + image, "RGB");
  GBytes* mask = half_mask(64, 48, 0.0);
  GstBuffer* in = make_frame("RGB", noise_rgb(kW, kH));
  attach_mask(in, mask, 64, 48, kW, kH);
  GstBuffer* out = gst_harness_push_and_pull(h_, in);
  cv::Mat got = packed_to_mat(out, "RGB", kW, kH);
  // Our own "cover" of the image: scale so both sides cover the frame, crop the middle.
  cv::Mat bgr = cv::imread(image), rgb;
  const double sc = std::max(double(kW) / bgr.cols, double(kH) / bgr.rows);
  cv::resize(bgr, bgr, cv::Size(int(std::ceil(bgr.cols * sc)), int(std::ceil(bgr.rows * sc))), 0, 0,
             cv::INTER_AREA);
  cv::cvtColor(bgr(cv::Rect((bgr.cols - kW) / 2, (bgr.rows - kH) / 2, kW, kH)), rgb, cv::COLOR_BGR2RGB);
  cv::Mat diff;
  cv::absdiff(got, rgb, diff);
  EXPECT_LT(cv::mean(diff.reshape(1))[0], 2.0);
  gst_buffer_unref(out);
  g_bytes_unref(mask);
}

TEST(NnBackgroundErrors, MissingImageIsAnErrorAtStart) {
  GstElement* pipe = gst_parse_launch(
      "videotestsrc num-buffers=2 ! video/x-raw,format=RGBA ! nnbackground name=bg mode=image "
      "location=/nonexistent/beach.png ! fakesink",
      nullptr);
  ASSERT_NE(pipe, nullptr);
  GstBus* bus = gst_element_get_bus(pipe);
  EXPECT_EQ(gst_element_set_state(pipe, GST_STATE_PLAYING), GST_STATE_CHANGE_FAILURE);
  GstMessage* msg = gst_bus_timed_pop_filtered(bus, 5 * GST_SECOND, GST_MESSAGE_ERROR);
  ASSERT_NE(msg, nullptr);
  GError* err = nullptr;
  gst_message_parse_error(msg, &err, nullptr);
  EXPECT_EQ(err->domain, GST_RESOURCE_ERROR);
  EXPECT_NE(std::string(err->message).find("/nonexistent/beach.png"), std::string::npos) << err->message;
  g_error_free(err);
  gst_message_unref(msg);
  gst_element_set_state(pipe, GST_STATE_NULL);
  gst_object_unref(bus);
  gst_object_unref(pipe);
}

// A bright person on a dark background, seen through a coarse 24x18 mask: the guided
// filter snaps the alpha edge to the luma edge, so far fewer pixels are half-transparent
// than with the plain bilinear upsampling.
TEST_F(NnBackgroundTest, GuidedFilterSharpensTheAlphaEdge) {
  auto alpha_of = [](bool refine) {
    const std::string props = std::string("mode=transparent feather=0 refine=") + (refine ? "true" : "false");
    GstHarness* h = gst_harness_new_parse(("nnbackground " + props).c_str());
    gst_harness_set_src_caps_str(h, caps_string("RGBA", kW, kH).c_str());
    cv::Mat rgb(kH, kW, CV_8UC3, cv::Scalar(30, 30, 30));
    cv::circle(rgb, {kW / 2, kH / 2}, 90, cv::Scalar(220, 200, 180), -1, cv::LINE_AA);
    // Coarse mask of the same disc.
    std::vector<uint8_t> m(24 * 18);
    for (int y = 0; y < 18; ++y)
      for (int x = 0; x < 24; ++x) {
        const double fx = (x + 0.5) * kW / 24.0, fy = (y + 0.5) * kH / 18.0;
        m[y * 24 + x] = std::hypot(fx - kW / 2, fy - kH / 2) < 90 ? 255 : 0;
      }
    GBytes* mask = g_bytes_new(m.data(), m.size());
    GstBuffer* in = make_frame("RGBA", rgb);
    attach_mask(in, mask, 24, 18, kW, kH);
    GstBuffer* out = gst_harness_push_and_pull(h, in);
    cv::Mat rgba = packed_to_mat(out, "RGBA", kW, kH);
    cv::Mat alpha;
    cv::extractChannel(rgba, alpha, 3);
    gst_buffer_unref(out);
    g_bytes_unref(mask);
    gst_harness_teardown(h);
    return alpha;
  };
  const cv::Mat coarse = alpha_of(false), refined = alpha_of(true);
  auto soft_pixels = [](const cv::Mat& a) {
    cv::Mat mid = (a > 25) & (a < 230);
    return cv::countNonZero(mid);
  };
  EXPECT_LT(soft_pixels(refined), soft_pixels(coarse) / 2)
      << "refined " << soft_pixels(refined) << " vs coarse " << soft_pixels(coarse);
  // And it still says person inside, background outside, with the edge where the disc is.
  EXPECT_GT(refined.at<uint8_t>(kH / 2, kW / 2), 240);
  EXPECT_LT(refined.at<uint8_t>(5, 5), 15);
  for (int dx : {-1, 1}) {
    EXPECT_GT(refined.at<uint8_t>(kH / 2, kW / 2 + dx * 85), 200) << "5 px inside the disc";
    EXPECT_LT(refined.at<uint8_t>(kH / 2, kW / 2 + dx * 95), 55) << "5 px outside the disc";
  }
}

TEST_F(NnBackgroundTest, PropertiesChangedFromAnotherThreadWhileBuffersFlow) {
  start("mode=blur");
  std::atomic<bool> stop{false};
  std::thread changer([&] {
    int i = 0;
    while (!stop.load()) {
      // blur <-> color; transparent renegotiates and image needs a file, both tested apart.
      g_object_set(bg_, "mode", i % 2, "blur-strength", 4.0 + (i % 20), "feather", (i % 5) * 1.0, "refine",
                   i % 2 == 0, "color", 0xFF000000u | static_cast<guint>(i * 7919), nullptr);
      ++i;
      g_usleep(300);
    }
  });
  GBytes* mask = half_mask(64, 48, 0.4);
  cv::Mat rgb = noise_rgb(kW, kH);
  for (int i = 0; i < 30; ++i) {
    GstBuffer* in = make_frame("RGBA", rgb);
    attach_mask(in, mask, 64, 48, kW, kH);
    GstBuffer* out = gst_harness_push_and_pull(h_, in);
    ASSERT_NE(out, nullptr);
    gst_buffer_unref(out);
  }
  stop = true;
  changer.join();
  g_bytes_unref(mask);
  EXPECT_EQ(stat_u64(bg_, "frames"), 30u);
}

// ---- mode=video: the "background" pad ------------------------------------------------

// Our own "cover" (as nnbackground documents it): scale so both sides cover, crop the middle.
cv::Mat cover_rgb(const cv::Mat& src, int w, int h) {
  const double sc = std::max(double(w) / src.cols, double(h) / src.rows);
  const int cw = std::max(w, int(std::ceil(src.cols * sc))), ch = std::max(h, int(std::ceil(src.rows * sc)));
  cv::Mat big;
  cv::resize(src, big, cv::Size(cw, ch), 0, 0, sc < 1.0 ? cv::INTER_AREA : cv::INTER_LINEAR);
  return big(cv::Rect((cw - w) / 2, (ch - h) / 2, w, h)).clone();
}

cv::Mat rgb_of(const cv::Mat& rgba) {
  cv::Mat rgb;
  cv::cvtColor(rgba, rgb, cv::COLOR_RGBA2RGB);
  return rgb;
}

double mean_abs_diff(const cv::Mat& a, const cv::Mat& b) {
  cv::Mat d;
  cv::absdiff(a, b, d);
  return cv::mean(d.reshape(1))[0];
}

class NnBackgroundVideoTest : public ::testing::Test {
 protected:
  void SetUp() override {
    h_ = gst_harness_new_with_padnames("nnbackground", "sink", "src");
    ASSERT_NE(h_, nullptr);
    bg_ = h_->element;
    g_object_set(bg_, "mode", 4 /* video */, "refine", FALSE, "feather", 0.0, nullptr);
    gst_harness_set_src_caps_str(h_, caps_string("RGBA", kW, kH).c_str());
    mask_ = half_mask(64, 48, 0.5);  // left half person
  }
  void TearDown() override {
    if (bh_) gst_harness_teardown(bh_);
    gst_harness_teardown(h_);
    g_bytes_unref(mask_);
  }
  // A second harness feeding the element's background pad.
  void open_background(const char* format, int w, int h) {
    bh_ = gst_harness_new_with_element(bg_, "background", nullptr);
    ASSERT_NE(bh_, nullptr);
    gst_harness_set_src_caps_str(bh_, caps_string(format, w, h).c_str());
  }
  // One main frame (noise, left half person) through the element, as RGBA.
  cv::Mat composite(GstClockTime pts = GST_CLOCK_TIME_NONE) {
    GstBuffer* in = make_frame("RGBA", person_, pts, 33 * GST_MSECOND);
    attach_mask(in, mask_, 64, 48, kW, kH);
    GstBuffer* out = gst_harness_push_and_pull(h_, in);
    EXPECT_NE(out, nullptr);
    if (!out) return {};
    cv::Mat m = packed_to_mat(out, "RGBA", kW, kH);
    gst_buffer_unref(out);
    return m;
  }
  const cv::Rect person_side{0, 0, kW / 2 - 10, kH};
  const cv::Rect background_side{kW / 2 + 10, 0, kW - (kW / 2 + 10), kH};
  GstHarness* h_ = nullptr;
  GstHarness* bh_ = nullptr;
  GstElement* bg_ = nullptr;
  GBytes* mask_ = nullptr;
  cv::Mat person_ = noise_rgb(kW, kH);
};

// The background pad's frame (BGRx 160x120, another format and size) covers the frame where
// the mask says background; the person side stays bit-exact.
TEST_F(NnBackgroundVideoTest, UsesTheBackgroundPadsPixels) {
  open_background("BGRx", 160, 120);
  const cv::Mat picture = test_image_rgb(160, 120);
  ASSERT_EQ(gst_harness_push(bh_, make_frame("BGRx", picture)), GST_FLOW_OK);
  const cv::Mat out = rgb_of(composite());
  const cv::Mat want = cover_rgb(picture, kW, kH);
  EXPECT_LT(mean_abs_diff(out(background_side), want(background_side)), 1.5);
  EXPECT_EQ(mean_abs_diff(out(person_side), person_(person_side)), 0.0) << "person pixels untouched";
  EXPECT_EQ(stat_u64(bg_, "background-frames"), 1u);
  EXPECT_EQ(stat_u64(bg_, "frames-without-background"), 0u);

  // A newer background frame replaces it.
  cv::Mat flipped;
  cv::flip(picture, flipped, 1);
  ASSERT_EQ(gst_harness_push(bh_, make_frame("BGRx", flipped)), GST_FLOW_OK);
  const cv::Mat out2 = rgb_of(composite());
  EXPECT_LT(mean_abs_diff(out2(background_side), cover_rgb(flipped, kW, kH)(background_side)), 1.5);
}

// No background frame (pad unlinked): the main stream flows, background blurred.
TEST_F(NnBackgroundVideoTest, MainStreamFlowsWithoutBackground) {
  for (int i = 0; i < 5; ++i) {
    const cv::Mat out = composite(i * 33 * GST_MSECOND);
    ASSERT_FALSE(out.empty());
    EXPECT_LT(high_freq_energy(out, background_side), 0.1 * high_freq_energy(person_, background_side))
        << "falls back to blur";
  }
  EXPECT_EQ(stat_u64(bg_, "frames"), 5u);
  EXPECT_EQ(stat_u64(bg_, "frames-without-background"), 5u);
}

// The background ends: its last frame stays, the main stream keeps going to its own EOS.
TEST_F(NnBackgroundVideoTest, BackgroundEosKeepsTheLastFrame) {
  open_background("RGB", 100, 300);
  const cv::Mat picture = test_image_rgb(100, 300);
  ASSERT_EQ(gst_harness_push(bh_, make_frame("RGB", picture)), GST_FLOW_OK);
  ASSERT_TRUE(gst_harness_push_event(bh_, gst_event_new_eos()));
  const cv::Mat want = cover_rgb(picture, kW, kH);
  for (int i = 0; i < 3; ++i) {
    const cv::Mat out = rgb_of(composite(i * 33 * GST_MSECOND));
    ASSERT_FALSE(out.empty());
    EXPECT_LT(mean_abs_diff(out(background_side), want(background_side)), 1.5) << "frame " << i;
  }
  // Nothing of the background branch (its EOS) reached the main output.
  ASSERT_TRUE(gst_harness_push_event(h_, gst_event_new_eos()));
  GstEvent* e;
  int eos = 0;
  while ((e = gst_harness_try_pull_event(h_))) {
    eos += GST_EVENT_TYPE(e) == GST_EVENT_EOS;
    gst_event_unref(e);
  }
  EXPECT_EQ(eos, 1) << "only the main stream's EOS";
  // After the main stream's EOS the background pad refuses data: its source stops.
  EXPECT_EQ(gst_harness_push(bh_, make_frame("RGB", picture)), GST_FLOW_EOS);
}

// A flush on the background pad keeps the last frame until a new one arrives.
TEST_F(NnBackgroundVideoTest, BackgroundFlush) {
  open_background("RGBA", 64, 48);
  const cv::Mat a(48, 64, CV_8UC3, cv::Scalar(200, 10, 10)), b(48, 64, CV_8UC3, cv::Scalar(10, 10, 200));
  ASSERT_EQ(gst_harness_push(bh_, make_frame("RGBA", a)), GST_FLOW_OK);
  ASSERT_TRUE(gst_harness_push_event(bh_, gst_event_new_flush_start()));
  ASSERT_TRUE(gst_harness_push_event(bh_, gst_event_new_flush_stop(TRUE)));
  cv::Mat out = rgb_of(composite());
  EXPECT_EQ(out.at<cv::Vec3b>(kH / 2, kW - 5), cv::Vec3b(200, 10, 10)) << "kept across the flush";
  GstSegment segment;
  gst_segment_init(&segment, GST_FORMAT_TIME);
  ASSERT_TRUE(gst_harness_push_event(bh_, gst_event_new_segment(&segment)));
  ASSERT_EQ(gst_harness_push(bh_, make_frame("RGBA", b)), GST_FLOW_OK);
  out = rgb_of(composite());
  EXPECT_EQ(out.at<cv::Vec3b>(kH / 2, kW - 5), cv::Vec3b(10, 10, 200));
}

TEST_F(NnBackgroundVideoTest, BackgroundPadRefusesFormatsItCannotUse) {
  GstPad* pad = gst_element_request_pad_simple(bg_, "background");
  ASSERT_NE(pad, nullptr);
  GstCaps* i420 = gst_caps_from_string(caps_string("I420", 64, 48).c_str());
  GstCaps* bgr = gst_caps_from_string(caps_string("BGR", 1919, 7).c_str());
  EXPECT_FALSE(gst_pad_query_accept_caps(pad, i420));
  EXPECT_TRUE(gst_pad_query_accept_caps(pad, bgr)) << "any size, independent of the main stream";
  gst_caps_unref(i420);
  gst_caps_unref(bgr);
  gst_element_release_request_pad(bg_, pad);
  gst_object_unref(pad);
}

// A non-live background source is paced to the main stream's running time: it may not
// race ahead, and it is let go when the main stream moves on.
TEST_F(NnBackgroundVideoTest, BackgroundIsPacedToTheMainStream) {
  open_background("RGBA", 64, 48);
  const cv::Mat picture = test_image_rgb(64, 48);
  composite(0);  // main stream at running time 0
  std::atomic<int> pushed{0};
  std::thread feeder([&] {
    for (int i = 0; i < 20; ++i) {
      if (gst_harness_push(bh_, make_frame("RGBA", picture, i * 40 * GST_MSECOND, 40 * GST_MSECOND)) !=
          GST_FLOW_OK)
        break;
      ++pushed;
    }
  });
  g_usleep(100 * 1000);
  // Frame 0 goes in at once and anchors the timelines; frame 1 (40 ms) waits for the main
  // stream (at most 200 ms of real time).
  EXPECT_LE(stat_u64(bg_, "background-frames"), 2u);
  // The main stream advances to 400 ms: the background catches up to it.
  for (int i = 1; i <= 10; ++i) composite(i * 40 * GST_MSECOND);
  g_usleep(100 * 1000);
  const guint64 got = stat_u64(bg_, "background-frames");
  EXPECT_GE(got, 8u);
  EXPECT_LE(got, 13u);
  // Main EOS releases the feeder (its pushes return EOS).
  ASSERT_TRUE(gst_harness_push_event(h_, gst_event_new_eos()));
  feeder.join();
  EXPECT_LT(pushed.load(), 20);
}

// The scenario of the launch line in the docs, with a real clip: Megamind.avi through
// nnsegment, videotestsrc as the background; main reaches EOS with every frame, the
// background is paced (a free-running one would push thousands of frames), and a
// background that ends early does not end the main stream.
TEST(NnBackgroundVideoPipeline, MegamindOverBall) {
  ASSERT_TRUE(nn_test::require_asset("models/selfie_segmentation.tflite"));
  ASSERT_TRUE(nn_test::require_asset("media/Megamind.avi"));
  for (const char* bg_buffers : {"-1", "5"}) {
    SCOPED_TRACE(std::string("background num-buffers=") + bg_buffers);
    const std::string line = "filesrc location=" + nn_test::asset("media/Megamind.avi") +
                             " ! decodebin ! videoconvert ! nnsegment name=seg model=" + model_path() +
                             " ! nnbackground name=bg mode=video ! videoconvert ! fakesink "
                             "videotestsrc num-buffers=" +
                             bg_buffers +
                             " pattern=ball ! video/x-raw,width=320,height=240 ! "
                             "videoconvert ! bg.background";
    GError* err = nullptr;
    GstElement* pipe = gst_parse_launch(line.c_str(), &err);
    ASSERT_NE(pipe, nullptr) << (err ? err->message : "");
    GstBus* bus = gst_element_get_bus(pipe);
    ASSERT_NE(gst_element_set_state(pipe, GST_STATE_PLAYING), GST_STATE_CHANGE_FAILURE);
    GstMessage* msg = gst_bus_timed_pop_filtered(
        bus, 120 * GST_SECOND, static_cast<GstMessageType>(GST_MESSAGE_EOS | GST_MESSAGE_ERROR));
    ASSERT_NE(msg, nullptr) << "timed out";
    EXPECT_EQ(GST_MESSAGE_TYPE(msg), GST_MESSAGE_EOS);
    gst_message_unref(msg);
    GstElement* bg = gst_bin_get_by_name(GST_BIN(pipe), "bg");
    EXPECT_EQ(stat_u64(bg, "frames"), 270u);
    const guint64 received = stat_u64(bg, "background-frames");
    if (std::string(bg_buffers) == "5") {
      EXPECT_EQ(received, 5u);
      EXPECT_EQ(stat_u64(bg, "frames-without-background"), 0u) << "the last frame stays";
    } else {
      EXPECT_GE(received, 100u);
      EXPECT_LE(received, 400u) << "paced to the main stream";
    }
    gst_object_unref(bg);
    ASSERT_EQ(gst_element_set_state(pipe, GST_STATE_NULL), GST_STATE_CHANGE_SUCCESS);
    gst_object_unref(bus);
    gst_object_unref(pipe);
  }
}

// Letterboxed masks: the cells outside the frame's band (the padding) are never used. A
// hand-made 32x32 mask of a 128x32 frame (rect 0,-48 128x128): padding rows say person,
// the band rows 12..19 say background -- the whole frame must get the background colour.
TEST_F(NnBackgroundTest, LetterboxPaddingIsNeverUsed) {
  constexpr int w = 128, h = 32;
  start("mode=color color=0xFF0000FF refine=false feather=0", "RGBA", w, h);
  std::vector<uint8_t> m(32 * 32, 255);
  for (int y = 12; y < 20; ++y)
    for (int x = 0; x < 32; ++x) m[y * 32 + x] = 0;
  GBytes* mask = g_bytes_new(m.data(), m.size());
  GstBuffer* in = make_frame("RGBA", noise_rgb(w, h));
  ASSERT_NE(
      gst_buffer_add_nn_mask_meta(in, GST_NN_MASK_FORMAT_UINT8, 32, 32, 32, mask, w, h, 0, -48, 128, 128, 0),
      nullptr);
  GstNnMaskMeta* meta = gst_buffer_get_nn_mask_meta(in);
  for (int y : {0, h - 1}) EXPECT_FLOAT_EQ(gst_nn_mask_meta_sample_frame(meta, 10, y), 0.f) << "row " << y;
  GstBuffer* out = gst_harness_push_and_pull(h_, in);
  const cv::Mat rgba = packed_to_mat(out, "RGBA", w, h);
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; x += 7)
      ASSERT_EQ(rgba.at<cv::Vec4b>(y, x), cv::Vec4b(0, 0, 255, 255)) << x << "," << y;
  gst_buffer_unref(out);
  g_bytes_unref(mask);
}

// ---- behaving as GStreamer users expect --------------------------------------------

// A user's first try: RGB or BGRx caps into mode=transparent (which needs alpha). The
// pipeline must end with an error from nnbackground that names the formats it takes --
// never sit in PREROLL with the main stream on the "background" pad (bounded wait).
TEST(NnBackgroundNegotiation, TransparentWithoutAlphaFailsWithAMessageNamingTheFormats) {
  ASSERT_TRUE(nn_test::require_asset("models/selfie_segmentation.tflite"));
  for (const char* format : {"RGB", "BGRx"}) {
    SCOPED_TRACE(format);
    const std::string line = std::string("videotestsrc num-buffers=5 ! video/x-raw,format=") + format +
                             ",width=64,height=48 ! nnsegment latency-budget=1000 model=" + model_path() +
                             " ! nnbackground name=bg mode=transparent ! fakesink";
    GError* err = nullptr;
    GstElement* pipe = gst_parse_launch(line.c_str(), &err);
    ASSERT_NE(pipe, nullptr) << (err ? err->message : "");
    ASSERT_EQ(err, nullptr) << err->message;
    GstBus* bus = gst_element_get_bus(pipe);
    gst_element_set_state(pipe, GST_STATE_PLAYING);
    GstMessage* msg = gst_bus_timed_pop_filtered(
        bus, 20 * GST_SECOND, static_cast<GstMessageType>(GST_MESSAGE_EOS | GST_MESSAGE_ERROR));
    ASSERT_NE(msg, nullptr) << "hung: no error and no EOS within 20 s";
    ASSERT_EQ(GST_MESSAGE_TYPE(msg), GST_MESSAGE_ERROR);
    GError* e = nullptr;
    gchar* debug = nullptr;
    gst_message_parse_error(msg, &e, &debug);
    EXPECT_STREQ(GST_OBJECT_NAME(GST_MESSAGE_SRC(msg)), "bg") << e->message;
    EXPECT_TRUE(g_error_matches(e, GST_CORE_ERROR, GST_CORE_ERROR_NEGOTIATION)) << e->message;
    const std::string text = std::string(e->message) + " " + (debug ? debug : "");
    EXPECT_NE(text.find("RGBA"), std::string::npos) << text;
    EXPECT_NE(text.find("BGRA"), std::string::npos) << text;
    EXPECT_NE(text.find(format), std::string::npos) << text;
    g_error_free(e);
    g_free(debug);
    gst_message_unref(msg);
    gst_element_set_state(pipe, GST_STATE_NULL);
    gst_object_unref(bus);
    gst_object_unref(pipe);
  }
}

// Switched to mode=transparent mid-stream when upstream cannot give alpha (caps fixed to
// RGB): the next frame is a negotiation error naming the formats, not a frame without alpha.
TEST_F(NnBackgroundTest, TransparentMidStreamWithoutAlphaIsAnError) {
  start("mode=blur", "RGB");
  GstBus* bus = gst_bus_new();
  gst_element_set_bus(bg_, bus);
  GBytes* mask = half_mask(64, 48, 0.5);
  GstBuffer* in = make_frame("RGB", noise_rgb(kW, kH));
  attach_mask(in, mask, 64, 48, kW, kH);
  gst_buffer_unref(gst_harness_push_and_pull(h_, in));
  g_object_set(bg_, "mode", GST_NN_BACKGROUND_MODE_TRANSPARENT, nullptr);
  in = make_frame("RGB", noise_rgb(kW, kH));
  attach_mask(in, mask, 64, 48, kW, kH);
  EXPECT_EQ(gst_harness_push(h_, in), GST_FLOW_NOT_NEGOTIATED);
  GstMessage* msg = gst_bus_pop_filtered(bus, GST_MESSAGE_ERROR);
  ASSERT_NE(msg, nullptr);
  GError* e = nullptr;
  gst_message_parse_error(msg, &e, nullptr);
  EXPECT_NE(std::string(e->message).find("RGBA or BGRA"), std::string::npos) << e->message;
  EXPECT_NE(std::string(e->message).find("RGB"), std::string::npos) << e->message;
  g_error_free(e);
  gst_message_unref(msg);
  gst_element_set_bus(bg_, nullptr);
  gst_object_unref(bus);
  g_bytes_unref(mask);
}

// ... while a videoconvert in front still negotiates a format with alpha by itself.
TEST(NnBackgroundNegotiation, TransparentBehindVideoconvertNegotiatesAlpha) {
  ASSERT_TRUE(nn_test::require_asset("models/selfie_segmentation.tflite"));
  const std::string line =
      "videotestsrc num-buffers=3 ! video/x-raw,format=I420,width=64,height=48 ! videoconvert ! "
      "nnsegment latency-budget=1000 model=" +
      model_path() + " ! nnbackground name=bg mode=transparent ! fakesink";
  GError* err = nullptr;
  GstElement* pipe = gst_parse_launch(line.c_str(), &err);
  ASSERT_NE(pipe, nullptr) << (err ? err->message : "");
  GstBus* bus = gst_element_get_bus(pipe);
  gst_element_set_state(pipe, GST_STATE_PLAYING);
  GstMessage* msg = gst_bus_timed_pop_filtered(bus, 20 * GST_SECOND,
                                               static_cast<GstMessageType>(GST_MESSAGE_EOS | GST_MESSAGE_ERROR));
  ASSERT_NE(msg, nullptr) << "hung";
  EXPECT_EQ(GST_MESSAGE_TYPE(msg), GST_MESSAGE_EOS);
  gst_message_unref(msg);
  GstElement* bg = gst_bin_get_by_name(GST_BIN(pipe), "bg");
  GstPad* sink = gst_element_get_static_pad(bg, "sink");
  GstCaps* caps = gst_pad_get_current_caps(sink);
  ASSERT_NE(caps, nullptr);
  const std::string format = gst_structure_get_string(gst_caps_get_structure(caps, 0), "format");
  EXPECT_TRUE(format == "RGBA" || format == "BGRA") << format;
  gst_caps_unref(caps);
  gst_object_unref(sink);
  gst_object_unref(bg);
  gst_element_set_state(pipe, GST_STATE_NULL);
  gst_object_unref(bus);
  gst_object_unref(pipe);
}

// The background pad is never the target of automatic linking: it exists only when
// asked for by name ("bg.background" in a launch line). A second automatic link into
// nnbackground fails instead of feeding the background.
TEST(NnBackgroundNegotiation, BackgroundPadIsOnlyLinkedByName) {
  GstElement* bin = gst_pipeline_new(nullptr);
  GstElement* main_src = gst_element_factory_make("videotestsrc", nullptr);
  GstElement* other_src = gst_element_factory_make("videotestsrc", nullptr);
  GstElement* bg = gst_element_factory_make("nnbackground", nullptr);
  ASSERT_NE(bg, nullptr);
  gst_bin_add_many(GST_BIN(bin), main_src, other_src, bg, nullptr);
  GstPad* before = gst_element_get_static_pad(bg, "background");
  EXPECT_EQ(before, nullptr) << "no background pad until one is requested";
  if (before) gst_object_unref(before);
  ASSERT_TRUE(gst_element_link(main_src, bg));
  GstPad* sink = gst_element_get_static_pad(bg, "sink");
  EXPECT_TRUE(gst_pad_is_linked(sink)) << "the automatic link goes to the main sink";
  gst_object_unref(sink);
  EXPECT_FALSE(gst_element_link(other_src, bg)) << "an automatic link never takes the background pad";
  EXPECT_TRUE(gst_element_link_pads(other_src, "src", bg, "background")) << "by name it links";
  GstPad* pad = gst_element_get_static_pad(bg, "background");
  ASSERT_NE(pad, nullptr);
  EXPECT_TRUE(gst_pad_is_linked(pad));
  gst_object_unref(pad);
  gst_object_unref(bin);
}

// nnsegment forgotten upstream: frames pass unchanged (as documented) and one warning on
// the bus says why nothing happens -- once, not per frame.
TEST_F(NnBackgroundTest, NoMaskUpstreamWarnsOnceOnTheBus) {
  start("mode=blur");
  GstBus* bus = gst_bus_new();
  gst_element_set_bus(bg_, bus);
  for (int i = 0; i < 4; ++i) gst_buffer_unref(gst_harness_push_and_pull(h_, make_frame("RGBA", noise_rgb(kW, kH))));
  int warnings = 0;
  while (GstMessage* msg = gst_bus_pop_filtered(bus, GST_MESSAGE_WARNING)) {
    GError* e = nullptr;
    gchar* debug = nullptr;
    gst_message_parse_warning(msg, &e, &debug);
    const std::string text = std::string(e->message) + " " + (debug ? debug : "");
    EXPECT_NE(text.find("nnsegment"), std::string::npos) << text;
    g_error_free(e);
    g_free(debug);
    gst_message_unref(msg);
    ++warnings;
  }
  EXPECT_EQ(warnings, 1);
  EXPECT_EQ(stat_u64(bg_, "frames-without-mask"), 4u);
  gst_element_set_bus(bg_, nullptr);
  gst_object_unref(bus);
}

// With nnsegment upstream, frames without a mask yet (budget 0: nothing has finished) are
// no reason to warn.
TEST(NnBackgroundNoMask, NoWarningWhenNnsegmentIsUpstream) {
  ASSERT_TRUE(nn_test::require_asset("models/selfie_segmentation.tflite"));
  const std::string line = "nnsegment latency-budget=0 model=" + model_path() + " ! nnbackground";
  GstHarness* h = gst_harness_new_parse(line.c_str());
  ASSERT_NE(h, nullptr);
  GstElement* bg = gst_harness_find_element(h, "nnbackground");
  GstBus* bus = gst_bus_new();
  gst_element_set_bus(bg, bus);
  gst_harness_set_src_caps_str(h, caps_string("RGBA", kW, kH).c_str());
  GstBuffer* out = gst_harness_push_and_pull(h, make_frame("RGBA", noise_rgb(kW, kH)));
  ASSERT_NE(out, nullptr);
  EXPECT_EQ(gst_buffer_get_nn_mask_meta(out), nullptr) << "the first frame has no mask yet";
  gst_buffer_unref(out);
  EXPECT_EQ(stat_u64(bg, "frames-without-mask"), 1u);
  GstMessage* warning = gst_bus_pop_filtered(bus, GST_MESSAGE_WARNING);
  EXPECT_EQ(warning, nullptr);
  if (warning) gst_message_unref(warning);
  gst_element_set_bus(bg, nullptr);
  gst_object_unref(bus);
  gst_object_unref(bg);
  gst_harness_teardown(h);
}

}  // namespace

// I420 and NV12 frames are composited on their planes, never converted to RGB: the result,
// converted to RGB, matches the RGB composite of the same picture within the loss of the
// 4:2:0 round trip itself (the picture alone through I420 and back) plus 1.5 levels of mean
// |difference|, and a 99th percentile <= 16 levels, in every mode that draws a background.
// (The rest: chroma at half resolution softens the mask edge, the blur rounds per plane.)
// Person pixels keep their exact Y.
TEST_F(NnBackgroundTest, YuvPlanesMatchTheRgbComposite) {
  const int w = 386, h = 290;  // even: 4:2:0 without a half chroma column; odd sizes below
  GBytes* mask = half_mask(64, 48, 0.5);
  const cv::Mat rgb = test_image_rgb(w, h);
  for (const char* mode : {"mode=blur blur-strength=12", "mode=color color=0xFF2080E0", "mode=blur refine=false"}) {
    start(mode, "RGBA", w, h);
    GstBuffer* in = make_frame("RGBA", rgb);
    attach_mask(in, mask, 64, 48, w, h);
    GstBuffer* out = gst_harness_push_and_pull(h_, in);
    ASSERT_NE(out, nullptr);
    const cv::Mat want = buffer_to_rgb(out, "RGBA", w, h);
    gst_buffer_unref(out);
    gst_object_unref(bg_);
    gst_harness_teardown(h_);
    bg_ = nullptr;
    h_ = nullptr;
    for (const char* fmt : {"I420", "NV12"}) {
      SCOPED_TRACE(std::string(fmt) + " " + mode);
      start(mode, fmt, w, h);
      GstBuffer* yuv_in = make_frame(fmt, rgb);
      attach_mask(yuv_in, mask, 64, 48, w, h);
      GstVideoInfo info;
      gst_video_info_set_format(&info, gst_video_format_from_string(fmt), w, h);
      GstVideoFrame vf;
      ASSERT_TRUE(gst_video_frame_map(&vf, &info, yuv_in, GST_MAP_READ));
      const cv::Mat y_before =
          cv::Mat(h, w, CV_8UC1, GST_VIDEO_FRAME_PLANE_DATA(&vf, 0), GST_VIDEO_FRAME_PLANE_STRIDE(&vf, 0)).clone();
      gst_video_frame_unmap(&vf);
      GstBuffer* yuv_out = gst_harness_push_and_pull(h_, yuv_in);
      ASSERT_NE(yuv_out, nullptr);
      ASSERT_TRUE(gst_video_frame_map(&vf, &info, yuv_out, GST_MAP_READ));
      const cv::Mat y_after(h, w, CV_8UC1, GST_VIDEO_FRAME_PLANE_DATA(&vf, 0), GST_VIDEO_FRAME_PLANE_STRIDE(&vf, 0));
      const cv::Rect person(0, 0, w / 2 - 30, h), background(w / 2 + 30, 0, w - (w / 2 + 30), h);
      EXPECT_EQ(cv::norm(y_before(person), y_after(person), cv::NORM_INF), 0) << "person luma must be untouched";
      EXPECT_GT(cv::norm(y_before(background), y_after(background), cv::NORM_L1), 0) << "background unchanged";
      gst_video_frame_unmap(&vf);
      const cv::Mat got = buffer_to_rgb(yuv_out, fmt, w, h);
      gst_buffer_unref(yuv_out);
      GstBuffer* plain = make_frame(fmt, rgb);
      cv::Mat rt_diff;
      cv::absdiff(buffer_to_rgb(plain, fmt, w, h), rgb, rt_diff);
      const double round_trip = cv::mean(rt_diff.reshape(1))[0];
      gst_buffer_unref(plain);
      cv::Mat diff;
      cv::absdiff(got, want, diff);
      diff = diff.reshape(1);
      const double mean = cv::mean(diff)[0];
      cv::Mat sorted;
      cv::sort(diff.reshape(1, 1), sorted, cv::SORT_ASCENDING);
      const int p99 = sorted.at<uint8_t>(0, static_cast<int>(sorted.cols * 0.99));
      EXPECT_LE(mean, round_trip + 1.5);
      EXPECT_LE(p99, 16);
      std::printf("%s %s: mean |diff| %.2f (the 4:2:0 round trip alone %.2f), p99 %d\n", fmt, mode, mean,
                  round_trip, p99);
      gst_object_unref(bg_);
      gst_harness_teardown(h_);
      bg_ = nullptr;
      h_ = nullptr;
    }
  }
  // Odd sizes (a half chroma column and row) composite without reading past the planes.
  for (const char* fmt : {"I420", "NV12"}) {
    start("mode=blur", fmt, kW, kH);
    GstBuffer* in = make_frame(fmt, test_image_rgb(kW, kH));
    attach_mask(in, mask, 64, 48, kW, kH);
    GstBuffer* out = gst_harness_push_and_pull(h_, in);
    ASSERT_NE(out, nullptr);
    gst_buffer_unref(out);
    gst_object_unref(bg_);
    gst_harness_teardown(h_);
    bg_ = nullptr;
    h_ = nullptr;
  }
  g_bytes_unref(mask);
}

NN_GST_TEST_MAIN()
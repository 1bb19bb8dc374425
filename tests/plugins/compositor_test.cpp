// nnbackground's compositing core (plugins/compositor.cpp) on its own: the work image
// nnsegment hands over in the mask meta gives the same composite as the one the compositor
// makes itself.
#include <gtest/gtest.h>

#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include "compositor.h"
#include "imageops.h"
#include "test_support.h"

namespace {

using nn::plugins::BackgroundMode;
using nn::plugins::Compositor;
using nn::plugins::CompositorSettings;
using nn::plugins::MaskView;
using nn::plugins::PackedLayout;

// messi5.jpg (a person on a pitch) stretched to w x h, in RGBA (or RGB).
cv::Mat picture(int w, int h, int channels = 4) {
  cv::Mat bgr = cv::imread(nn_test::asset("media/messi5.jpg"), cv::IMREAD_COLOR);
  if (bgr.empty()) {
    bgr = cv::Mat(h, w, CV_8UC3, cv::Scalar(60, 140, 90));
    cv::circle(bgr, {w / 2, h / 2}, std::min(w, h) / 4, cv::Scalar(160, 190, 230), -1);
  }
  cv::resize(bgr, bgr, cv::Size(w, h), 0, 0, cv::INTER_AREA);
  cv::Mat out;
  cv::cvtColor(bgr, out, channels == 4 ? cv::COLOR_BGR2RGBA : cv::COLOR_BGR2RGB);
  return out;
}

// A soft ellipse at the selfie model's 256x256, stretched over the whole frame.
struct Mask {
  cv::Mat values;
  MaskView view;
  Mask(int fw, int fh) : values(256, 256, CV_32F, cv::Scalar(0)) {
    cv::ellipse(values, {128, 140}, {60, 100}, 0, 0, 360, cv::Scalar(1), -1);
    cv::GaussianBlur(values, values, cv::Size(0, 0), 3);
    view.width = view.height = 256;
    view.stride = 256 * sizeof(float);
    view.data = values.data;
    view.frame_width = fw;
    view.frame_height = fh;
    view.rect_w = fw;
    view.rect_h = fh;
  }
};

PackedLayout layout_of(int channels) {
  return channels == 4 ? PackedLayout{4, 0, 1, 2, 3} : PackedLayout{3, 0, 1, 2, -1};
}

// The composite with nnsegment's work image equals the one made from the frame alone, in
// every mode that reads it (blur: guided filter and blur; color: guided filter), at sizes
// where the work image is a shrink (1080p, 720p: a factor of 3) and where it is the frame.
TEST(CompositorWorkImage, SharedWorkImageGivesTheSameComposite) {
  struct Case {
    int w, h, channels;
    BackgroundMode mode;
  };
  for (const Case c : {Case{1920, 1080, 4, BackgroundMode::kBlur}, Case{1280, 720, 3, BackgroundMode::kBlur},
                       Case{1280, 720, 4, BackgroundMode::kColor}, Case{385, 289, 4, BackgroundMode::kBlur}}) {
    SCOPED_TRACE(testing::Message() << c.w << "x" << c.h << "x" << c.channels << " mode " << int(c.mode));
    const cv::Mat frame = picture(c.w, c.h, c.channels);
    Mask mask(c.w, c.h);
    CompositorSettings settings;
    settings.mode = c.mode;

    Compositor alone, shared;
    cv::Mat own = frame.clone();
    alone.process(own, layout_of(c.channels), mask.view, settings);
    EXPECT_FALSE(alone.last_used_shared_work_image());

    cv::Mat work;
    nn::plugins::make_work_image(frame, work);
    MaskView with_work = mask.view;
    with_work.small_data = work.data;
    with_work.small_width = work.cols;
    with_work.small_height = work.rows;
    with_work.small_stride = work.step[0];
    cv::Mat got = frame.clone();
    shared.process(got, layout_of(c.channels), with_work, settings);
    EXPECT_TRUE(shared.last_used_shared_work_image());
    EXPECT_EQ(cv::norm(got, own, cv::NORM_INF), 0) << "the work image from the meta changed the composite";
    EXPECT_GT(cv::norm(got, frame, cv::NORM_L1), 0) << "nothing was composited";

    // A work image of another size (a scale between the elements) is not used.
    with_work.small_width = work.cols - 1;
    cv::Mat again = frame.clone();
    shared.process(again, layout_of(c.channels), with_work, settings);
    EXPECT_FALSE(shared.last_used_shared_work_image());
    EXPECT_EQ(cv::norm(again, own, cv::NORM_INF), 0);
  }
}

// The same for YUV frames: the packed 4:4:4 work image nnsegment makes from the planes
// (make_yuv_work_image) gives the same composite as the planes shrunk by the compositor.
TEST(CompositorWorkImage, SharedYuvWorkImageGivesTheSameComposite) {
  for (const bool nv12 : {false, true}) {
    SCOPED_TRACE(nv12 ? "NV12" : "I420");
    const int w = 1920, h = 1080, ch = h / 2;
    cv::Mat i420;
    cv::cvtColor(picture(w, h, 3), i420, cv::COLOR_RGB2YUV_I420);  // Y rows, then U, then V
    const cv::Mat y = i420(cv::Rect(0, 0, w, h)).clone();
    const cv::Mat u = i420(cv::Rect(0, h, w, h / 4)).clone().reshape(1, ch);
    const cv::Mat v = i420(cv::Rect(0, h + h / 4, w, h / 4)).clone().reshape(1, ch);
    cv::Mat uv;
    const cv::Mat both[2] = {u, v};
    cv::merge(both, 2, uv);
    Mask mask(w, h);
    CompositorSettings settings;
    const auto frame_of = [&](cv::Mat& yy, cv::Mat& uu, cv::Mat& vv, cv::Mat& uvuv) {
      nn::plugins::YuvFrame f;
      f.nv12 = nv12;
      f.width = w, f.height = h;
      f.y = yy.data, f.y_stride = yy.step[0];
      if (nv12) {
        f.u = uvuv.data, f.u_stride = uvuv.step[0];
      } else {
        f.u = uu.data, f.u_stride = uu.step[0];
        f.v = vv.data, f.v_stride = vv.step[0];
      }
      return f;
    };
    cv::Mat y1 = y.clone(), u1 = u.clone(), v1 = v.clone(), uv1 = uv.clone();
    Compositor alone, shared;
    alone.process_yuv(frame_of(y1, u1, v1, uv1), mask.view, settings);
    EXPECT_FALSE(alone.last_used_shared_work_image());

    cv::Mat work;
    nn::plugins::make_yuv_work_image(y, nv12 ? uv : u, nv12 ? cv::Mat() : v, work);
    ASSERT_EQ(work.size(), nn::plugins::work_size({w, h}));
    MaskView with_work = mask.view;
    with_work.small_data = work.data;
    with_work.small_width = work.cols;
    with_work.small_height = work.rows;
    with_work.small_stride = work.step[0];
    cv::Mat y2 = y.clone(), u2 = u.clone(), v2 = v.clone(), uv2 = uv.clone();
    shared.process_yuv(frame_of(y2, u2, v2, uv2), with_work, settings);
    EXPECT_TRUE(shared.last_used_shared_work_image());
    EXPECT_EQ(cv::norm(y2, y1, cv::NORM_INF), 0);
    EXPECT_EQ(cv::norm(nv12 ? uv2 : u2, nv12 ? uv1 : u1, cv::NORM_INF), 0);
    EXPECT_EQ(cv::norm(v2, v1, cv::NORM_INF), 0);
    EXPECT_GT(cv::norm(y2, y, cv::NORM_L1), 0) << "nothing was composited";
  }
}

// At 4K the coefficients serve 4x4 pixel blocks (a quarter-size grid instead of half):
// without refinement and feathering the alpha is the mask itself, so the alpha written at
// 3840x2160 (RGBA, transparent) and the alpha the YUV path blends with (I420, a light
// frame over the black of transparent without alpha) must follow the mask upsampled to the
// frame everywhere: within 10 levels (measured: 8 at the steepest edge of this mask with
// 4x4 blocks, 4 with 2x2; a block mapped to the wrong pixels is off by far more).
TEST(CompositorCoefficients, QuarterGridAt4KFollowsTheMask) {
  const int w = 3840, h = 2160;
  Mask mask(w, h);
  cv::Mat want;
  nn::plugins::mask_to_grid(mask.values, 0, 0, w, h, w, h, cv::Size(w, h), want);
  want.convertTo(want, CV_8U, 255.0);
  CompositorSettings settings;
  settings.mode = BackgroundMode::kTransparent;
  settings.refine = false;
  settings.feather = 0;

  cv::Mat rgba(h, w, CV_8UC4, cv::Scalar(200, 150, 100, 255));
  Compositor packed;
  packed.process(rgba, layout_of(4), mask.view, settings);
  cv::Mat alpha, diff;
  cv::extractChannel(rgba, alpha, 3);
  cv::absdiff(alpha, want, diff);
  double worst = 0;
  cv::minMaxLoc(diff, nullptr, &worst);
  EXPECT_LE(worst, 10) << "RGBA alpha";

  cv::Mat y(h, w, CV_8UC1, cv::Scalar(235)), u(h / 2, w / 2, CV_8UC1, cv::Scalar(128)),
      v(h / 2, w / 2, CV_8UC1, cv::Scalar(128));
  nn::plugins::YuvFrame f;
  f.width = w, f.height = h;
  f.y = y.data, f.y_stride = y.step[0];
  f.u = u.data, f.u_stride = u.step[0];
  f.v = v.data, f.v_stride = v.step[0];
  Compositor planes;
  planes.process_yuv(f, mask.view, settings);
  // Over black (Y 16): y = 16 + (235 - 16) * alpha / 255.
  cv::Mat want_y;
  want.convertTo(want_y, CV_8U, 219.0 / 255.0, 16.0);
  cv::absdiff(y, want_y, diff);
  cv::minMaxLoc(diff, nullptr, &worst);
  EXPECT_LE(worst, 10) << "I420 luma";
}

// serial=true (nnbackground on a real-time streaming thread) runs the full-resolution rows
// on the calling thread alone: the same composite, byte for byte, and no helper CPU time,
// in every row loop (4K RGBA: the blend with its alpha; I420: the alpha image and the
// luma and chroma blends; a fast frame; a colour frame). Parallel calls do use helpers
// where OpenCV has more than one thread (checked so the serial figure means something).
TEST(CompositorSerial, SerialRowsGiveTheSameCompositeWithoutHelpers) {
  struct Case {
    int w, h;
    bool yuv, fast;
    BackgroundMode mode;
  };
  bool parallel_used_helpers = false;
  for (const Case c : {Case{3840, 2160, false, false, BackgroundMode::kBlur},
                       Case{1920, 1080, false, true, BackgroundMode::kBlur},
                       Case{1920, 1080, true, false, BackgroundMode::kBlur},
                       Case{1280, 720, true, false, BackgroundMode::kColor}}) {
    SCOPED_TRACE(testing::Message() << c.w << "x" << c.h << (c.yuv ? " I420" : " RGBA") << (c.fast ? " fast" : "")
                                    << " mode " << int(c.mode));
    Mask mask(c.w, c.h);
    CompositorSettings settings;
    settings.mode = c.mode;
    settings.fast = c.fast;
    const cv::Mat rgba = picture(c.w, c.h, 4);
    cv::Mat i420;
    cv::cvtColor(picture(c.w, c.h, 3), i420, cv::COLOR_RGB2YUV_I420);
    const auto run = [&](bool serial, Compositor& comp) {
      CompositorSettings s = settings;
      s.serial = serial;
      cv::Mat out = c.yuv ? i420.clone() : rgba.clone();
      if (c.yuv) {
        nn::plugins::YuvFrame f;
        f.width = c.w, f.height = c.h;
        f.y = out.data, f.y_stride = c.w;
        f.u = out.data + static_cast<size_t>(c.w) * c.h, f.u_stride = c.w / 2;
        f.v = f.u + static_cast<size_t>(c.w / 2) * (c.h / 2), f.v_stride = c.w / 2;
        comp.process_yuv(f, mask.view, s);
      } else {
        comp.process(out, layout_of(4), mask.view, s);
      }
      return out;
    };
    // A fast frame reuses the previous frame's blur: give each compositor one full frame first.
    Compositor parallel_comp, serial_comp;
    if (c.fast) {
      CompositorSettings full = settings;
      full.fast = false;
      cv::Mat warm = rgba.clone();
      parallel_comp.process(warm, layout_of(4), mask.view, full);
      warm = rgba.clone();
      serial_comp.process(warm, layout_of(4), mask.view, full);
    }
    const cv::Mat parallel = run(false, parallel_comp);
    parallel_used_helpers |= parallel_comp.last_stage_times().helper_ms > 0;
    const cv::Mat serial = run(true, serial_comp);
    EXPECT_EQ(serial_comp.last_stage_times().helper_ms, 0.0) << "serial: no helper thread took rows";
    EXPECT_EQ(cv::norm(serial, parallel, cv::NORM_INF), 0) << "serial rows changed the composite";
    EXPECT_GT(cv::norm(serial, c.yuv ? i420 : rgba, cv::NORM_L1), 0) << "nothing was composited";
  }
  if (cv::getNumThreads() > 1) {
    EXPECT_TRUE(parallel_used_helpers) << "parallel calls never used a helper";
  }
}

}  // namespace

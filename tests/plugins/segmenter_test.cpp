// nnsegment's front end in two parts: Segmenter::resample on the streaming thread, and
// Segmenter::encode on the worker, straight into the session's input buffer
// (AsyncSession's InputWriter). On the selfie model and a real photo, in every pixel
// layout, stretched and letterboxed, with both samplings: the input the worker writes is
// the one preprocess() makes into a tensor, byte for byte, and so is the mask; the
// resampled frame owns its pixels (the worker reads it after the frame is gone); a bad
// resampled frame is a failed result, not a hang.
#include <gtest/gtest.h>

#include <cstring>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include "segmenter.h"
#include "test_support.h"

namespace {

using namespace std::chrono_literals;
using nn::plugins::FrameView;
using nn::plugins::PixelLayout;
using nn::plugins::ResizeMode;
using nn::plugins::Segmenter;

// A frame in memory the test owns, and the FrameView that borrows it.
struct OwnedFrame {
  std::vector<uint8_t> bytes;
  FrameView view;
};

const char* layout_name(PixelLayout l) {
  switch (l) {
    case PixelLayout::kRGBA: return "RGBA";
    case PixelLayout::kBGRA: return "BGRA";
    case PixelLayout::kRGBx: return "RGBx";
    case PixelLayout::kBGRx: return "BGRx";
    case PixelLayout::kRGB: return "RGB";
    case PixelLayout::kBGR: return "BGR";
    case PixelLayout::kI420: return "I420";
    case PixelLayout::kNV12: return "NV12";
  }
  return "?";
}

// bgr (CV_8UC3, even width and height) as a frame of `layout`; rows padded to a stride
// wider than the row, as GStreamer's often are.
OwnedFrame make_frame(const cv::Mat& bgr, PixelLayout layout) {
  OwnedFrame f;
  FrameView& v = f.view;
  v.layout = layout;
  v.width = bgr.cols;
  v.height = bgr.rows;
  const int w = bgr.cols, h = bgr.rows;
  if (layout == PixelLayout::kI420 || layout == PixelLayout::kNV12) {
    cv::Mat i420;
    cv::cvtColor(bgr, i420, cv::COLOR_BGR2YUV_I420);  // Y, then U, then V (BT.601 limited range)
    const int cw = w / 2, ch = h / 2, ys = w + 16, cs = layout == PixelLayout::kI420 ? cw + 8 : w + 16;
    const size_t y_bytes = static_cast<size_t>(ys) * h, c_bytes = static_cast<size_t>(cs) * ch;
    f.bytes.assign(y_bytes + 2 * c_bytes, 0);
    const uint8_t* u = i420.data + static_cast<size_t>(w) * h;
    const uint8_t* vp = u + static_cast<size_t>(cw) * ch;
    for (int y = 0; y < h; ++y) std::memcpy(&f.bytes[static_cast<size_t>(y) * ys], i420.ptr(0) + y * w, w);
    for (int y = 0; y < ch; ++y)
      for (int x = 0; x < cw; ++x) {
        const uint8_t uu = u[y * cw + x], vv = vp[y * cw + x];
        if (layout == PixelLayout::kI420) {
          f.bytes[y_bytes + static_cast<size_t>(y) * cs + x] = uu;
          f.bytes[y_bytes + c_bytes + static_cast<size_t>(y) * cs + x] = vv;
        } else {
          f.bytes[y_bytes + static_cast<size_t>(y) * cs + 2 * x] = uu;
          f.bytes[y_bytes + static_cast<size_t>(y) * cs + 2 * x + 1] = vv;
        }
      }
    v.planes[0] = f.bytes.data();
    v.planes[1] = f.bytes.data() + y_bytes;
    v.planes[2] = layout == PixelLayout::kI420 ? f.bytes.data() + y_bytes + c_bytes : nullptr;
    v.strides[0] = ys;
    v.strides[1] = v.strides[2] = cs;
    return f;
  }
  cv::Mat packed;
  switch (layout) {
    case PixelLayout::kRGBA:
    case PixelLayout::kRGBx: cv::cvtColor(bgr, packed, cv::COLOR_BGR2RGBA); break;
    case PixelLayout::kBGRA:
    case PixelLayout::kBGRx: cv::cvtColor(bgr, packed, cv::COLOR_BGR2BGRA); break;
    case PixelLayout::kRGB: cv::cvtColor(bgr, packed, cv::COLOR_BGR2RGB); break;
    default: packed = bgr.clone(); break;
  }
  const size_t row = static_cast<size_t>(w) * packed.channels(), stride = row + 64;
  f.bytes.assign(stride * h, 0);
  for (int y = 0; y < h; ++y) std::memcpy(&f.bytes[y * stride], packed.ptr(y), row);
  v.planes[0] = f.bytes.data();
  v.strides[0] = static_cast<int>(stride);
  return f;
}

cv::Mat photo(cv::Size size) {
  const cv::Mat bgr = cv::imread(nn_test::asset("media/messi5.jpg"), cv::IMREAD_COLOR);
  if (bgr.empty()) return {};
  cv::Mat out;
  cv::resize(bgr, out, size, 0, 0, cv::INTER_LINEAR);
  return out;
}

std::unique_ptr<Segmenter> open_segmenter(std::optional<nn::image::Sampling> sampling) {
  nn::plugins::SegmenterOptions options;
  options.model_path = nn_test::asset("models/selfie_segmentation.tflite");
  options.delegates = {"cpu"};
  options.sampling = sampling;
  auto s = Segmenter::open(options);
  EXPECT_TRUE(s.is_ok()) << s.status().to_string();
  return s.is_ok() ? std::move(s).value() : nullptr;
}

bool same_bytes(const nn::Tensor& a, const nn::Tensor& b) {
  return a.bytes.size() == b.bytes.size() && std::memcmp(a.data(), b.data(), a.bytes.size()) == 0;
}

struct Case {
  PixelLayout layout;
  ResizeMode resize;
  cv::Size size;
};

// For each case: the worker's in-place input is preprocess()'s tensor, and so is its mask.
// Before the in-place frame the session's input holds another picture (the photo upside
// down, stretched), so padding left unwritten or a write elsewhere shows.
void check_in_place_equals_tensor(Segmenter& seg, const std::vector<Case>& cases) {
  uint64_t tag = 0;
  for (const Case& c : cases) {
    SCOPED_TRACE(std::string(layout_name(c.layout)) + " " + std::to_string(c.size.width) + "x" +
                 std::to_string(c.size.height) + (c.resize == ResizeMode::kLetterbox ? " letterbox" : " stretch"));
    const cv::Mat bgr = photo(c.size);
    ASSERT_FALSE(bgr.empty()) << "media/messi5.jpg";
    cv::Mat flipped;
    cv::flip(bgr, flipped, 0);
    OwnedFrame frame = make_frame(bgr, c.layout), other = make_frame(flipped, c.layout);

    nn::Tensor want;
    NN_ASSERT_OK(seg.preprocess(frame.view, c.resize, &want));
    std::vector<uint8_t> thumb;
    auto resampled = seg.resample(frame.view, c.resize, &thumb);
    NN_ASSERT_OK(resampled.status());
    EXPECT_EQ(thumb.size(), static_cast<size_t>(Segmenter::kThumbSize * Segmenter::kThumbSize));
    // encode() writes every byte of the input: over garbage it gives the tensor.
    std::vector<uint8_t> scratch(want.bytes.size(), 0x5A);
    NN_ASSERT_OK(seg.encode(resampled.value(), scratch.data()));
    EXPECT_EQ(std::memcmp(scratch.data(), want.data(), scratch.size()), 0) << "encode() differs from preprocess()";
    // The frame is gone (overwritten) before the worker reads the resampled image.
    std::fill(frame.bytes.begin(), frame.bytes.end(), uint8_t{0});

    nn::Tensor before;
    NN_ASSERT_OK(seg.preprocess(other.view, ResizeMode::kStretch, &before));
    seg.submit(std::move(before), ++tag);
    auto r0 = seg.wait_for(tag, 30s);
    ASSERT_TRUE(r0.has_value());
    NN_ASSERT_OK(r0->status);
    seg.submit(std::move(resampled).value(), ++tag);
    auto in_place = seg.wait_for(tag, 30s);
    seg.submit(std::move(want), ++tag);
    auto copied = seg.wait_for(tag, 30s);
    ASSERT_TRUE(in_place.has_value() && copied.has_value());
    NN_ASSERT_OK(in_place->status);
    NN_ASSERT_OK(copied->status);
    EXPECT_TRUE(same_bytes(in_place->probability, copied->probability)) << "the in-place input gave another mask";
    EXPECT_FALSE(same_bytes(r0->probability, copied->probability)) << "the two pictures should give two masks";
    // A real mask: the person is in it, and so is background.
    const float* p = copied->probability.f32();
    const size_t n = copied->probability.size();
    const size_t person = static_cast<size_t>(std::count_if(p, p + n, [](float v) { return v > 0.5f; }));
    EXPECT_GT(person, n / 50);
    EXPECT_LT(person, n - n / 50);
  }
}

TEST(SegmenterInPlaceInput, EqualsTheTensorPathMediaPipeSampling) {
  if (!nn_test::require_asset("models/selfie_segmentation.tflite") || !nn_test::require_asset("media/messi5.jpg"))
    return;
  auto seg = open_segmenter(std::nullopt);  // the selfie model's own: MediaPipe's sampling
  ASSERT_TRUE(seg);
  ASSERT_EQ(seg->sampling(), nn::image::Sampling::kMediaPipe);
  std::vector<Case> cases;
  for (PixelLayout l : {PixelLayout::kRGBA, PixelLayout::kBGRx, PixelLayout::kRGB, PixelLayout::kBGR,
                        PixelLayout::kI420, PixelLayout::kNV12})
    for (ResizeMode m : {ResizeMode::kStretch, ResizeMode::kLetterbox}) cases.push_back({l, m, cv::Size(548, 342)});
  cases.push_back({PixelLayout::kRGBA, ResizeMode::kStretch, cv::Size(1920, 1080)});
  check_in_place_equals_tensor(*seg, cases);
}

TEST(SegmenterInPlaceInput, EqualsTheTensorPathAreaSampling) {
  if (!nn_test::require_asset("models/selfie_segmentation.tflite") || !nn_test::require_asset("media/messi5.jpg"))
    return;
  auto seg = open_segmenter(nn::image::Sampling::kArea);
  ASSERT_TRUE(seg);
  // 1080p takes the block averages (reduce_rgba, the YUV planes' halvings); 256x256 frames
  // need no shrinking at all.
  check_in_place_equals_tensor(*seg, {{PixelLayout::kRGBA, ResizeMode::kStretch, cv::Size(1920, 1080)},
                                      {PixelLayout::kBGRA, ResizeMode::kLetterbox, cv::Size(1920, 1080)},
                                      {PixelLayout::kI420, ResizeMode::kStretch, cv::Size(1920, 1080)},
                                      {PixelLayout::kNV12, ResizeMode::kLetterbox, cv::Size(1920, 1080)},
                                      {PixelLayout::kRGBx, ResizeMode::kStretch, cv::Size(256, 256)},
                                      {PixelLayout::kI420, ResizeMode::kStretch, cv::Size(256, 256)}});
}

// A resampled frame that does not fit the model input is refused by the worker's encode:
// the caller gets a failed result naming it, and the next frame runs.
TEST(SegmenterInPlaceInput, BadResampledFrameIsAFailedResult) {
  if (!nn_test::require_asset("models/selfie_segmentation.tflite") || !nn_test::require_asset("media/messi5.jpg"))
    return;
  auto seg = open_segmenter(std::nullopt);
  ASSERT_TRUE(seg);
  nn::plugins::ResampledFrame bad;
  bad.layout = PixelLayout::kRGBA;
  bad.placement = {0, 0, seg->input_width(), seg->input_height()};
  bad.image[0] = cv::Mat(10, 10, CV_8UC4, cv::Scalar::all(128));
  seg->submit(std::move(bad), 1);
  auto r = seg->wait_for(1, 30s);
  ASSERT_TRUE(r.has_value()) << "no result for a frame the worker could not encode";
  EXPECT_FALSE(r->status.is_ok());
  EXPECT_NE(r->status.message().find("resampled frame"), std::string::npos) << r->status.to_string();
  EXPECT_EQ(seg->counters().failed, 1u);

  OwnedFrame frame = make_frame(photo(cv::Size(548, 342)), PixelLayout::kRGBA);
  auto good = seg->resample(frame.view, ResizeMode::kStretch);
  NN_ASSERT_OK(good.status());
  seg->submit(std::move(good).value(), 2);
  r = seg->wait_for(2, 30s);
  ASSERT_TRUE(r.has_value());
  NN_ASSERT_OK(r->status);
  EXPECT_EQ(r->probability.size(), static_cast<size_t>(r->width) * r->height);
}

}  // namespace

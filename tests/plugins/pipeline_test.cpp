// Real media end to end: Megamind.avi -> decodebin -> nnsegment (selfie model) ->
// nnbackground blur -> x264 -> mp4. Checks every frame made it, masks were fresh, and that
// in the encoded result the person stays sharp while the background loses detail.
#include <algorithm>
#include <filesystem>
#include <map>
#include <vector>

#include "plugin_test_util.h"

using namespace nn_gst_test;

namespace {

std::string megamind() {
  const std::string a = nn_test::asset("media/Megamind.avi");
  if (std::filesystem::exists(a)) return a;
  return "/usr/share/doc/opencv-doc/examples/data/Megamind.avi";
}

GstMessage* run_to_end(GstElement* pipe, GstClockTime timeout) {
  GstBus* bus = gst_element_get_bus(pipe);
  EXPECT_NE(gst_element_set_state(pipe, GST_STATE_PLAYING), GST_STATE_CHANGE_FAILURE);
  GstMessage* msg = gst_bus_timed_pop_filtered(
      bus, timeout, static_cast<GstMessageType>(GST_MESSAGE_EOS | GST_MESSAGE_ERROR));
  gst_object_unref(bus);
  return msg;
}

// Fine detail where `where` is set: mean |image - image blurred with sigma 2| (grey).
double sharpness(const cv::Mat& img, const cv::Mat& where) {
  cv::Mat gray, smooth, diff;
  cv::cvtColor(img, gray, cv::COLOR_RGB2GRAY);
  gray.convertTo(gray, CV_32F);
  cv::GaussianBlur(gray, smooth, cv::Size(0, 0), 2.0);
  cv::absdiff(gray, smooth, diff);
  return cv::mean(diff, where)[0];
}

// Raw frames captured around nnbackground: before (at nnsegment's src pad, with the mask
// meta) and after (at nnbackground's src pad). nnbackground works in place, so "before"
// must be copied when the buffer passes.
struct Capture {
  std::vector<int> wanted;
  int seen = 0;
  std::map<int, cv::Mat> frames;
  std::map<int, cv::Mat> masks;  // at frame size, 0..1
  std::string format;
};

GstPadProbeReturn capture_probe(GstPad* pad, GstPadProbeInfo* info, gpointer data) {
  auto* cap = static_cast<Capture*>(data);
  GstBuffer* buf = GST_PAD_PROBE_INFO_BUFFER(info);
  const int index = cap->seen++;
  if (std::find(cap->wanted.begin(), cap->wanted.end(), index) == cap->wanted.end()) return GST_PAD_PROBE_OK;
  GstCaps* caps = gst_pad_get_current_caps(pad);
  GstVideoInfo vinfo;
  gst_video_info_from_caps(&vinfo, caps);
  gst_caps_unref(caps);
  const char* fmt = gst_video_format_to_string(GST_VIDEO_INFO_FORMAT(&vinfo));
  cv::Mat m = buffer_to_rgb(buf, fmt, GST_VIDEO_INFO_WIDTH(&vinfo), GST_VIDEO_INFO_HEIGHT(&vinfo));
  cap->frames[index] = m;
  cap->format = fmt;
  if (GstNnMaskMeta* meta = gst_buffer_get_nn_mask_meta(buf)) {
    cv::Mat mask;
    cv::resize(mask_to_mat(meta), mask, m.size(), 0, 0, cv::INTER_LINEAR);
    cap->masks[index] = mask;
  }
  return GST_PAD_PROBE_OK;
}

// RGBA through both elements, and I420 (the decoder's own format: nnbackground composites
// its planes, nothing is converted to RGB).
class NnPipeline : public ::testing::TestWithParam<const char*> {};

TEST_P(NnPipeline, MegamindBlurredBackgroundToMp4) {
  ASSERT_TRUE(nn_test::require_asset("models/selfie_segmentation.tflite"));
  const std::string format = GetParam();
  const std::string out = std::string(NN_TEST_OUT_DIR) + "/megamind_blur_" + format + ".mp4";
  std::filesystem::remove(out);
  // latency-budget is generous: a file is not live, we want every frame's own mask here.
  const std::string line =
      "filesrc location=" + megamind() + " ! decodebin ! videoconvert ! video/x-raw,format=" + format +
      " ! nnsegment name=seg latency-budget=2000 model=" + model_path() +
      " ! nnbackground name=bg mode=blur blur-strength=12 ! "
      "videoconvert ! x264enc speed-preset=ultrafast ! mp4mux ! filesink location=" +
      out;
  GError* err = nullptr;
  GstElement* pipe = gst_parse_launch(line.c_str(), &err);
  ASSERT_NE(pipe, nullptr) << (err ? err->message : "");
  GstElement* seg = gst_bin_get_by_name(GST_BIN(pipe), "seg");
  GstElement* bg = gst_bin_get_by_name(GST_BIN(pipe), "bg");
  // Frames 40 and 120: a close-up with a blurry bar scene behind, and a two-shot.
  Capture before, after;
  before.wanted = after.wanted = {40, 120};
  GstPad* seg_src = gst_element_get_static_pad(seg, "src");
  GstPad* bg_src = gst_element_get_static_pad(bg, "src");
  gst_pad_add_probe(seg_src, GST_PAD_PROBE_TYPE_BUFFER, capture_probe, &before, nullptr);
  gst_pad_add_probe(bg_src, GST_PAD_PROBE_TYPE_BUFFER, capture_probe, &after, nullptr);
  gst_object_unref(seg_src);
  gst_object_unref(bg_src);

  GstMessage* msg = run_to_end(pipe, 300 * GST_SECOND);
  ASSERT_NE(msg, nullptr) << "timed out";
  if (GST_MESSAGE_TYPE(msg) == GST_MESSAGE_ERROR) {
    GError* e = nullptr;
    gchar* dbg = nullptr;
    gst_message_parse_error(msg, &e, &dbg);
    ADD_FAILURE() << e->message << " / " << (dbg ? dbg : "");
    g_error_free(e);
    g_free(dbg);
  }
  gst_message_unref(msg);

  EXPECT_EQ(stat_u64(seg, "frames-out"), 270u) << "Megamind.avi has 270 frames";
  EXPECT_EQ(stat_u64(seg, "frames-dropped"), 0u);
  EXPECT_GE(stat_u64(seg, "inferences-run"), 266u);
  EXPECT_EQ(stat_u64(seg, "scene-cuts"), 4u) << "the clip cuts after frames 0, 97, 153 and 199";
  EXPECT_EQ(stat_u64(bg, "frames-without-mask"), 0u);
  std::cout << "nnsegment: inference p50 " << stat_double(seg, "inference-p50-ms") << " ms, p99 "
            << stat_double(seg, "inference-p99-ms") << " ms; nnbackground: composite p50 "
            << stat_double(bg, "composite-p50-ms") << " ms\n";
  gst_element_set_state(pipe, GST_STATE_NULL);
  gst_object_unref(seg);
  gst_object_unref(bg);
  gst_object_unref(pipe);

  EXPECT_GT(std::filesystem::file_size(out), 100000u) << "an encoded mp4";
  for (int i : {40, 120}) {
    SCOPED_TRACE("frame " + std::to_string(i));
    ASSERT_TRUE(before.frames.count(i) && after.frames.count(i) && before.masks.count(i));
    const cv::Mat& mask = before.masks[i];
    cv::Mat person, background;
    cv::erode(mask > 0.95, person, cv::Mat(), cv::Point(-1, -1), 10);
    cv::erode(mask < 0.05, background, cv::Mat(), cv::Point(-1, -1), 10);
    ASSERT_GT(cv::countNonZero(person), 10000) << "the selfie model must find the character";
    ASSERT_GT(cv::countNonZero(background), 10000);
    const double person_kept = sharpness(after.frames[i], person) / sharpness(before.frames[i], person);
    const double background_kept =
        sharpness(after.frames[i], background) / sharpness(before.frames[i], background);
    std::cout << "frame " << i << ": detail kept: person " << person_kept << ", background "
              << background_kept << " (detail in the background " << sharpness(before.frames[i], background)
              << " -> " << sharpness(after.frames[i], background) << ")\n";
    // For looking at: before | after, in the test's output folder.
    cv::Mat pair, bgr;
    cv::hconcat(before.frames[i], after.frames[i], pair);
    cv::cvtColor(pair, bgr, cv::COLOR_RGB2BGR);
    cv::imwrite(std::string(NN_TEST_OUT_DIR) + "/megamind_pair_" + format + "_" + std::to_string(i) + ".png",
                bgr);
    EXPECT_GT(person_kept, 0.97) << "people stay sharp";
    EXPECT_LT(background_kept, 0.4) << "the background is blurred";
  }
}

INSTANTIATE_TEST_SUITE_P(Formats, NnPipeline, ::testing::Values("RGBA", "I420"));

}  // namespace

NN_GST_TEST_MAIN()

// Helpers shared by the plugin tests: GStreamer set-up pointing at the built plugin,
// frames in any format made from a real image, stats access.
#pragma once

#include <cstdlib>
#include <string>
#include <vector>

#include <gst/app/gstappsink.h>
#include <gst/check/gstharness.h>
#include <gst/gst.h>
#include <gst/video/video.h>
#include <gtest/gtest.h>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include "gstnnmaskmeta.h"
#include "test_support.h"

namespace nn_gst_test {

// Plays `launch` (a pipeline ending in F32 audio into `appsink name=sink`) to EOS and returns
// every sample it delivered; empty (and a test failure) when the line does not parse.
inline std::vector<float> pull_f32(const std::string& launch) {
  GError* err = nullptr;
  GstElement* pipe = gst_parse_launch(launch.c_str(), &err);
  EXPECT_NE(pipe, nullptr) << (err ? err->message : "");
  if (err) g_error_free(err);
  if (!pipe) return {};
  GstElement* sink = gst_bin_get_by_name(GST_BIN(pipe), "sink");
  gst_element_set_state(pipe, GST_STATE_PLAYING);
  std::vector<float> out;
  while (GstSample* sample = gst_app_sink_pull_sample(GST_APP_SINK(sink))) {
    GstBuffer* b = gst_sample_get_buffer(sample);
    GstMapInfo map;
    gst_buffer_map(b, &map, GST_MAP_READ);
    const float* p = reinterpret_cast<const float*>(map.data);
    out.insert(out.end(), p, p + map.size / sizeof(float));
    gst_buffer_unmap(b, &map);
    gst_sample_unref(sample);
  }
  gst_element_set_state(pipe, GST_STATE_NULL);
  gst_object_unref(sink);
  gst_object_unref(pipe);
  return out;
}

inline std::string model_path() {
  return nn_test::asset("models/selfie_segmentation.tflite");
}

// An RGB test picture of w x h: messi5.jpg (a person on a pitch), stretched.
inline cv::Mat test_image_rgb(int w, int h) {
  cv::Mat bgr = cv::imread(nn_test::asset("media/messi5.jpg"), cv::IMREAD_COLOR);
  if (bgr.empty()) bgr = cv::imread("/usr/share/doc/opencv-doc/examples/data/messi5.jpg", cv::IMREAD_COLOR);
  cv::Mat rgb;
  if (bgr.empty()) {
    rgb = cv::Mat(h, w, CV_8UC3, cv::Scalar(90, 140, 60));
    cv::circle(rgb, {w / 2, h / 2}, std::min(w, h) / 4, cv::Scalar(230, 190, 160), -1);
    return rgb;
  }
  cv::resize(bgr, bgr, cv::Size(w, h), 0, 0, cv::INTER_AREA);
  cv::cvtColor(bgr, rgb, cv::COLOR_BGR2RGB);
  return rgb;
}

inline std::string caps_string(const char* format, int w, int h, int fps = 30) {
  return "video/x-raw,format=" + std::string(format) + ",width=" + std::to_string(w) +
         ",height=" + std::to_string(h) + ",framerate=" + std::to_string(fps) + "/1";
}

// A buffer in `format` holding `rgb` (converted with GstVideoConverter, strides and odd
// sizes as GStreamer lays them out).
inline GstBuffer* make_frame(const char* format, const cv::Mat& rgb, GstClockTime pts = GST_CLOCK_TIME_NONE,
                             GstClockTime duration = GST_CLOCK_TIME_NONE) {
  GstVideoInfo in_info, out_info;
  gst_video_info_set_format(&in_info, GST_VIDEO_FORMAT_RGB, rgb.cols, rgb.rows);
  gst_video_info_set_format(&out_info, gst_video_format_from_string(format), rgb.cols, rgb.rows);
  GstBuffer* in = gst_buffer_new_allocate(nullptr, GST_VIDEO_INFO_SIZE(&in_info), nullptr);
  GstVideoFrame in_frame, out_frame;
  gst_video_frame_map(&in_frame, &in_info, in, GST_MAP_WRITE);
  for (int y = 0; y < rgb.rows; ++y)
    memcpy(static_cast<uint8_t*>(GST_VIDEO_FRAME_PLANE_DATA(&in_frame, 0)) +
               y * GST_VIDEO_FRAME_PLANE_STRIDE(&in_frame, 0),
           rgb.ptr(y), rgb.cols * 3);
  GstBuffer* out = gst_buffer_new_allocate(nullptr, GST_VIDEO_INFO_SIZE(&out_info), nullptr);
  gst_video_frame_map(&out_frame, &out_info, out, GST_MAP_WRITE);
  GstVideoConverter* conv = gst_video_converter_new(&in_info, &out_info, nullptr);
  gst_video_converter_frame(conv, &in_frame, &out_frame);
  gst_video_converter_free(conv);
  gst_video_frame_unmap(&out_frame);
  gst_video_frame_unmap(&in_frame);
  gst_buffer_unref(in);
  GST_BUFFER_PTS(out) = pts;
  GST_BUFFER_DURATION(out) = duration;
  return out;
}

// Any format -> RGB (GstVideoConverter, as GStreamer would convert it).
inline cv::Mat buffer_to_rgb(GstBuffer* buf, const char* format, int w, int h) {
  GstVideoInfo in_info, out_info;
  gst_video_info_set_format(&in_info, gst_video_format_from_string(format), w, h);
  gst_video_info_set_format(&out_info, GST_VIDEO_FORMAT_RGB, w, h);
  GstBuffer* out = gst_buffer_new_allocate(nullptr, GST_VIDEO_INFO_SIZE(&out_info), nullptr);
  GstVideoFrame in_frame, out_frame;
  EXPECT_TRUE(gst_video_frame_map(&in_frame, &in_info, buf, GST_MAP_READ));
  EXPECT_TRUE(gst_video_frame_map(&out_frame, &out_info, out, GST_MAP_WRITE));
  GstVideoConverter* conv = gst_video_converter_new(&in_info, &out_info, nullptr);
  gst_video_converter_frame(conv, &in_frame, &out_frame);
  gst_video_converter_free(conv);
  cv::Mat rgb(h, w, CV_8UC3);
  for (int y = 0; y < h; ++y)
    memcpy(rgb.ptr(y),
           static_cast<uint8_t*>(GST_VIDEO_FRAME_PLANE_DATA(&out_frame, 0)) +
               y * GST_VIDEO_FRAME_PLANE_STRIDE(&out_frame, 0),
           static_cast<size_t>(w) * 3);
  gst_video_frame_unmap(&out_frame);
  gst_video_frame_unmap(&in_frame);
  gst_buffer_unref(out);
  return rgb;
}

// Copies plane 0 of a packed-format buffer into a Mat (channels 3 or 4).
inline cv::Mat packed_to_mat(GstBuffer* buf, const char* format, int w, int h) {
  GstVideoInfo info;
  gst_video_info_set_format(&info, gst_video_format_from_string(format), w, h);
  GstVideoFrame frame;
  EXPECT_TRUE(gst_video_frame_map(&frame, &info, buf, GST_MAP_READ));
  const int nc = GST_VIDEO_INFO_COMP_PSTRIDE(&info, 0);
  cv::Mat m(h, w, nc == 4 ? CV_8UC4 : CV_8UC3);
  for (int y = 0; y < h; ++y)
    memcpy(m.ptr(y),
           static_cast<uint8_t*>(GST_VIDEO_FRAME_PLANE_DATA(&frame, 0)) +
               y * GST_VIDEO_FRAME_PLANE_STRIDE(&frame, 0),
           static_cast<size_t>(w) * nc);
  gst_video_frame_unmap(&frame);
  return m;
}

// The element's "stats" structure field as double/uint64.
inline double stat_double(GstElement* e, const char* field) {
  GstStructure* s = nullptr;
  g_object_get(e, "stats", &s, nullptr);
  double v = -1;
  if (s) gst_structure_get_double(s, field, &v);
  if (s) gst_structure_free(s);
  return v;
}
inline guint64 stat_u64(GstElement* e, const char* field) {
  GstStructure* s = nullptr;
  g_object_get(e, "stats", &s, nullptr);
  guint64 v = G_MAXUINT64;
  if (s) gst_structure_get_uint64(s, field, &v);
  if (s) gst_structure_free(s);
  return v;
}

inline std::string stat_string(GstElement* e, const char* field) {
  GstStructure* s = nullptr;
  g_object_get(e, "stats", &s, nullptr);
  std::string v;
  if (s && gst_structure_get_string(s, field)) v = gst_structure_get_string(s, field);
  if (s) gst_structure_free(s);
  return v;
}

inline guint stat_uint(GstElement* e, const char* field) {
  GstStructure* s = nullptr;
  g_object_get(e, "stats", &s, nullptr);
  guint v = G_MAXUINT;
  if (s) gst_structure_get_uint(s, field, &v);
  if (s) gst_structure_free(s);
  return v;
}

// The mask as a float Mat (model resolution).
inline cv::Mat mask_to_mat(const GstNnMaskMeta* m) {
  cv::Mat out(m->height, m->width, CV_32F);
  for (guint y = 0; y < m->height; ++y)
    for (guint x = 0; x < m->width; ++x) out.at<float>(y, x) = gst_nn_mask_meta_get_value(m, x, y);
  return out;
}

inline int run_all(int argc, char** argv) {
  // The freshly built plugin, and a registry of our own: an installed copy of the plugin
  // or other agents' registry rewrites must not interfere.
  if (!g_getenv("GST_PLUGIN_PATH")) g_setenv("GST_PLUGIN_PATH", NN_GST_PLUGIN_DIR, TRUE);
  g_setenv("GST_REGISTRY", NN_GST_REGISTRY, TRUE);
  gst_init(&argc, &argv);
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}

}  // namespace nn_gst_test

#define NN_GST_TEST_MAIN()                   \
  int main(int argc, char** argv) {          \
    return nn_gst_test::run_all(argc, argv); \
  }

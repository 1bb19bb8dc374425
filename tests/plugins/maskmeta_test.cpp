// GstNnMaskMeta: the C API, copies share the data, scaling transforms rescale the mapping.
#include "plugin_test_util.h"

using namespace nn_gst_test;

namespace {

GstBuffer* buffer_with_mask(int fw, int fh, GBytes** out_bytes = nullptr) {
  GstBuffer* buf = make_frame("RGBA", cv::Mat(fh, fw, CV_8UC3, cv::Scalar(1, 2, 3)));
  std::vector<float> m(4 * 2);
  for (int i = 0; i < 8; ++i) m[i] = i / 7.f;  // row 0: 0..3/7, row 1: 4/7..1
  GBytes* bytes = g_bytes_new(m.data(), m.size() * sizeof(float));
  GstNnMaskMeta* meta = gst_buffer_add_nn_mask_meta(buf, GST_NN_MASK_FORMAT_FLOAT32, 4, 2, 4 * sizeof(float),
                                                    bytes, fw, fh, 0, 0, fw, fh, 3);
  EXPECT_NE(meta, nullptr);
  meta->source_id = 42;
  meta->deadline_us = 1234567;
  if (out_bytes)
    *out_bytes = bytes;
  else
    g_bytes_unref(bytes);
  return buf;
}

TEST(NnMaskMeta, AddGetAndValues) {
  GstBuffer* buf = buffer_with_mask(400, 300);
  GstNnMaskMeta* m = gst_buffer_get_nn_mask_meta(buf);
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m->age, 3u);
  EXPECT_EQ(m->source_id, 42u);
  EXPECT_FLOAT_EQ(gst_nn_mask_meta_get_value(m, 3, 1), 1.f);
  EXPECT_FLOAT_EQ(gst_nn_mask_meta_get_value(m, 1, 0), 1 / 7.f);
  EXPECT_FLOAT_EQ(gst_nn_mask_meta_get_value(m, 9, 0), 0.f);  // out of range
  // Frame pixel at the centre of mask cell (1,0): x = 1.5 * 100 - 0.5, y = 0.5 * 150 - 0.5
  EXPECT_NEAR(gst_nn_mask_meta_sample_frame(m, 149.5, 74.5), 1 / 7.f, 1e-5);
  EXPECT_EQ(gst_nn_mask_meta_sample_frame(m, -5, 10), 0.f);
  EXPECT_EQ(gst_nn_mask_meta_get_row(m, 2), nullptr);
  // The API type is registered by name: applications can find it without linking us.
  EXPECT_EQ(g_type_from_name("GstNnMaskMetaAPI"), GST_NN_MASK_META_API_TYPE);
  EXPECT_TRUE(
      gst_meta_api_type_has_tag(GST_NN_MASK_META_API_TYPE, g_quark_from_string(GST_META_TAG_VIDEO_STR)));
  gst_buffer_unref(buf);
}

TEST(NnMaskMeta, CopySharesTheData) {
  GBytes* bytes = nullptr;
  GstBuffer* buf = buffer_with_mask(64, 48, &bytes);
  GstBuffer* copy = gst_buffer_copy(buf);
  GstNnMaskMeta* a = gst_buffer_get_nn_mask_meta(buf);
  GstNnMaskMeta* b = gst_buffer_get_nn_mask_meta(copy);
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(a->data, b->data) << "copies reference the same GBytes";
  EXPECT_EQ(b->age, 3u);
  EXPECT_EQ(b->source_id, 42u);
  EXPECT_EQ(b->deadline_us, 1234567);
  gst_buffer_unref(buf);
  EXPECT_FLOAT_EQ(gst_nn_mask_meta_get_value(b, 3, 1), 1.f) << "data outlives the original buffer";
  gst_buffer_unref(copy);
  g_bytes_unref(bytes);
}

TEST(NnMaskMeta, RejectsInconsistentArguments) {
  GstBuffer* buf = gst_buffer_new();
  GBytes* small = g_bytes_new_static("abc", 3);
  // 4x2 uint8 needs 8 bytes: refused (with a critical, which we silence here).
  static int criticals = 0;
  criticals = 0;
  const guint handler = g_log_set_handler(
      nullptr, G_LOG_LEVEL_CRITICAL,
      [](const gchar*, GLogLevelFlags, const gchar*, gpointer) { ++criticals; }, nullptr);
  EXPECT_EQ(
      gst_buffer_add_nn_mask_meta(buf, GST_NN_MASK_FORMAT_UINT8, 4, 2, 4, small, 10, 10, 0, 0, 10, 10, 0),
      nullptr);
  g_log_remove_handler(nullptr, handler);
  EXPECT_EQ(criticals, 1);
  EXPECT_EQ(gst_buffer_get_nn_mask_meta(buf), nullptr);
  g_bytes_unref(small);
  gst_buffer_unref(buf);
}

// videoscale between nnsegment and a consumer: the meta follows, mapped to the new size.
TEST(NnMaskMeta, SurvivesVideoscaleWithRescaledRect) {
  GstHarness* h = gst_harness_new("videoscale");
  gst_harness_set_caps_str(h, caps_string("RGBA", 400, 300).c_str(), caps_string("RGBA", 200, 150).c_str());
  GstBuffer* out = gst_harness_push_and_pull(h, buffer_with_mask(400, 300));
  ASSERT_NE(out, nullptr);
  GstNnMaskMeta* m = gst_buffer_get_nn_mask_meta(out);
  ASSERT_NE(m, nullptr) << "the meta must survive scaling";
  EXPECT_EQ(m->frame_width, 200u);
  EXPECT_EQ(m->frame_height, 150u);
  EXPECT_DOUBLE_EQ(m->rect_w, 200.0);
  EXPECT_DOUBLE_EQ(m->rect_h, 150.0);
  EXPECT_EQ(m->age, 3u);
  gst_buffer_unref(out);
  gst_harness_teardown(h);
}

// The optional small frame: absent by default, attached by reference, kept by copies and
// scales, refused with a critical when inconsistent or not packed RGB.
TEST(NnMaskMeta, SmallFrameIsOptionalSharedAndChecked) {
  GstBuffer* buf = buffer_with_mask(64, 48);
  GstNnMaskMeta* m = gst_buffer_get_nn_mask_meta(buf);
  EXPECT_EQ(gst_nn_mask_meta_get_small_frame(m), nullptr);
  EXPECT_EQ(m->small_format, GST_VIDEO_FORMAT_UNKNOWN);
  std::vector<guint8> pixels(16 * 12 * 4);
  for (size_t i = 0; i < pixels.size(); ++i) pixels[i] = static_cast<guint8>(i * 7);
  GBytes* bytes = g_bytes_new(pixels.data(), pixels.size());
  ASSERT_TRUE(gst_nn_mask_meta_set_small_frame(m, GST_VIDEO_FORMAT_RGBA, 16, 12, 16 * 4, bytes));
  EXPECT_EQ(gst_nn_mask_meta_get_small_frame(m), bytes) << "referenced, not copied";
  EXPECT_EQ(m->small_width, 16u);
  EXPECT_EQ(m->small_height, 12u);

  GstBuffer* copy = gst_buffer_copy(buf);
  GstNnMaskMeta* c = gst_buffer_get_nn_mask_meta(copy);
  EXPECT_EQ(gst_nn_mask_meta_get_small_frame(c), bytes);
  EXPECT_EQ(c->small_format, GST_VIDEO_FORMAT_RGBA);
  gst_buffer_unref(buf);
  EXPECT_EQ(static_cast<const guint8*>(g_bytes_get_data(gst_nn_mask_meta_get_small_frame(c), nullptr))[5],
            static_cast<guint8>(35))
      << "the small frame outlives the original buffer";

  static int criticals = 0;
  criticals = 0;
  const guint handler = g_log_set_handler(
      nullptr, G_LOG_LEVEL_CRITICAL,
      [](const gchar*, GLogLevelFlags, const gchar*, gpointer) { ++criticals; }, nullptr);
  EXPECT_FALSE(gst_nn_mask_meta_set_small_frame(c, GST_VIDEO_FORMAT_RGBA, 17, 12, 17 * 4, bytes));  // too few bytes
  EXPECT_FALSE(gst_nn_mask_meta_set_small_frame(c, GST_VIDEO_FORMAT_I420, 16, 12, 16, bytes));      // not packed
  EXPECT_FALSE(gst_nn_mask_meta_set_small_frame(c, GST_VIDEO_FORMAT_RGB, 16, 12, 40, bytes));       // stride < row
  g_log_remove_handler(nullptr, handler);
  EXPECT_EQ(criticals, 3);
  EXPECT_EQ(c->small_width, 16u) << "a refused call leaves the small frame alone";

  GstHarness* h = gst_harness_new("videoscale");
  gst_harness_set_caps_str(h, caps_string("RGBA", 64, 48).c_str(), caps_string("RGBA", 32, 24).c_str());
  GstBuffer* scaled = gst_harness_push_and_pull(h, copy);
  ASSERT_NE(scaled, nullptr);
  GstNnMaskMeta* sm = gst_buffer_get_nn_mask_meta(scaled);
  ASSERT_NE(sm, nullptr);
  EXPECT_EQ(gst_nn_mask_meta_get_small_frame(sm), bytes);
  gst_buffer_unref(scaled);
  gst_harness_teardown(h);
  g_bytes_unref(bytes);
}

}  // namespace

NN_GST_TEST_MAIN()

// nnsegment with GstHarness and small pipelines: events, formats at odd sizes, properties
// from another thread, bad models, renegotiation, QoS, latency, mask meta age, policies.
#include <atomic>
#include <cerrno>
#include <chrono>
#include <fstream>
#include <random>
#include <thread>

#include <sched.h>
#include <sys/resource.h>
#include <unistd.h>

#include "gstnnsegment.h"
#include "imageops.h"
#include "plugin_test_util.h"

using namespace nn_gst_test;

namespace {

constexpr int kW = 385, kH = 289;  // odd on purpose: chroma rounding, stride padding

class NnSegmentTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(nn_test::require_asset("models/selfie_segmentation.tflite")); }
  void TearDown() override {
    if (seg_) gst_object_unref(seg_);
    if (h_) gst_harness_teardown(h_);
  }
  // Harness around "nnsegment model=... <props>", caps set, ready for buffers.
  void start(const std::string& props, const char* format = "RGBA", int w = kW, int h = kH) {
    const std::string line = "nnsegment model=" + model_path() + " " + props;
    h_ = gst_harness_new_parse(line.c_str());
    ASSERT_NE(h_, nullptr);
    seg_ = gst_harness_find_element(h_, "nnsegment");
    ASSERT_NE(seg_, nullptr);
    gst_harness_set_src_caps_str(h_, caps_string(format, w, h).c_str());
  }
  GstBuffer* push_pull(GstBuffer* in) {
    EXPECT_EQ(gst_harness_push(h_, in), GST_FLOW_OK);
    return gst_harness_pull(h_);
  }
  GstBuffer* frame(const char* format = "RGBA", int w = kW, int h = kH,
                   GstClockTime pts = GST_CLOCK_TIME_NONE) {
    return make_frame(format, test_image_rgb(w, h), pts, 33 * GST_MSECOND);
  }
  // Waits until the element has finished `n` inferences.
  bool wait_inferences(guint64 n, int timeout_ms = 10000) {
    for (int i = 0; i < timeout_ms / 5; ++i) {
      if (stat_u64(seg_, "inferences-run") >= n) return true;
      g_usleep(5000);
    }
    return false;
  }

  GstHarness* h_ = nullptr;
  GstElement* seg_ = nullptr;
};

TEST_F(NnSegmentTest, EventOrderStreamStartCapsSegment) {
  start("latency-budget=5000");
  GstBuffer* out = push_pull(frame());
  ASSERT_NE(out, nullptr);
  gst_buffer_unref(out);
  const GstEventType expected[] = {GST_EVENT_STREAM_START, GST_EVENT_CAPS, GST_EVENT_SEGMENT};
  for (GstEventType t : expected) {
    GstEvent* e = gst_harness_pull_event(h_);
    ASSERT_NE(e, nullptr);
    EXPECT_EQ(GST_EVENT_TYPE(e), t) << GST_EVENT_TYPE_NAME(e);
    gst_event_unref(e);
  }
  ASSERT_TRUE(gst_harness_push_event(h_, gst_event_new_eos()));
  GstEvent* e = gst_harness_pull_event(h_);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(GST_EVENT_TYPE(e), GST_EVENT_EOS);
  gst_event_unref(e);
}

// Every template format at an odd size: a fresh mask (age 0) at model resolution that maps
// onto the whole frame, pixels untouched, and the same mask whatever the format.
TEST_F(NnSegmentTest, EveryFormatAtOddSize) {
  const char* formats[] = {"RGBA", "BGRA", "RGBx", "BGRx", "RGB", "BGR", "I420", "NV12"};
  cv::Mat reference;
  for (const char* fmt : formats) {
    SCOPED_TRACE(fmt);
    start("latency-budget=10000 threshold=0", fmt);
    GstBuffer* in = frame(fmt);
    GstBuffer* copy = gst_buffer_copy_deep(in);
    GstBuffer* out = push_pull(in);
    ASSERT_NE(out, nullptr);
    GstNnMaskMeta* m = gst_buffer_get_nn_mask_meta(out);
    ASSERT_NE(m, nullptr);
    EXPECT_EQ(m->age, 0u);
    EXPECT_EQ(m->width, 256u);
    EXPECT_EQ(m->height, 256u);
    EXPECT_EQ(m->frame_width, static_cast<guint>(kW));
    EXPECT_EQ(m->frame_height, static_cast<guint>(kH));
    EXPECT_DOUBLE_EQ(m->rect_w, kW);
    EXPECT_DOUBLE_EQ(m->rect_h, kH);
    cv::Mat mask = mask_to_mat(m);
    double lo, hi;
    cv::minMaxLoc(mask, &lo, &hi);
    EXPECT_GE(lo, 0.0);
    EXPECT_LE(hi, 1.0);
    EXPECT_GT(hi - lo, 0.5) << "the picture has a person and a pitch: the mask must not be flat";
    // meta mode leaves the pixels alone
    EXPECT_EQ(gst_buffer_get_size(out), gst_buffer_get_size(copy));
    GstMapInfo map;
    gst_buffer_map(copy, &map, GST_MAP_READ);
    EXPECT_EQ(gst_buffer_memcmp(out, 0, map.data, map.size), 0);
    gst_buffer_unmap(copy, &map);
    if (reference.empty()) {
      reference = mask;
    } else {
      // Format conversion (incl. 4:2:0 chroma) barely changes what the model sees.
      const double diff = cv::mean(cv::abs(mask - reference))[0];
      EXPECT_LT(diff, 0.03) << "mean |mask - RGBA mask|";
    }
    gst_buffer_unref(copy);
    gst_buffer_unref(out);
    gst_object_unref(seg_);
    seg_ = nullptr;
    gst_harness_teardown(h_);
    h_ = nullptr;
  }
}

TEST_F(NnSegmentTest, PropertiesChangedFromAnotherThreadWhileBuffersFlow) {
  start("latency-budget=20");
  std::atomic<bool> stop{false};
  std::thread changer([&] {
    std::mt19937 rng(7);
    std::uniform_real_distribution<double> u(0.0, 0.95);
    int i = 0;
    while (!stop.load()) {
      g_object_set(seg_, "threshold", u(rng), "smoothing", u(rng), "latency-budget",
                   static_cast<guint>(i % 30), "output-mode", i % 2, "stats-interval",
                   static_cast<guint>(i % 3), nullptr);
      GstStructure* s = nullptr;
      g_object_get(seg_, "stats", &s, nullptr);
      if (s) gst_structure_free(s);
      ++i;
      g_usleep(500);
    }
  });
  constexpr int kFrames = 40;
  for (int i = 0; i < kFrames; ++i) {
    ASSERT_EQ(gst_harness_push(h_, frame("RGBA", kW, kH, i * 33 * GST_MSECOND)), GST_FLOW_OK);
    gst_buffer_unref(gst_harness_pull(h_));
  }
  stop = true;
  changer.join();
  EXPECT_EQ(gst_harness_buffers_received(h_), static_cast<guint>(kFrames)) << "reuse-mask never drops";
  EXPECT_EQ(stat_u64(seg_, "frames-out"), static_cast<guint64>(kFrames));
}

// A bad model is an error before data flows, naming the file and the reason.
static void expect_model_error(const std::string& model, const std::string& message_fragment,
                               const std::string& debug_fragment) {
  std::string line =
      "videotestsrc num-buffers=3 ! video/x-raw,format=RGBA,width=64,height=48 ! nnsegment name=seg";
  if (!model.empty()) line += " model=\"" + model + "\"";
  line += " ! fakesink";
  GError* err = nullptr;
  GstElement* pipe = gst_parse_launch(line.c_str(), &err);
  ASSERT_NE(pipe, nullptr) << (err ? err->message : "");
  GstBus* bus = gst_element_get_bus(pipe);
  EXPECT_EQ(gst_element_set_state(pipe, GST_STATE_PLAYING), GST_STATE_CHANGE_FAILURE);
  GstMessage* msg = gst_bus_timed_pop_filtered(bus, 5 * GST_SECOND, GST_MESSAGE_ERROR);
  ASSERT_NE(msg, nullptr) << "no error message for model '" << model << "'";
  GError* gerr = nullptr;
  gchar* debug = nullptr;
  gst_message_parse_error(msg, &gerr, &debug);
  EXPECT_EQ(gerr->domain, GST_RESOURCE_ERROR);
  EXPECT_NE(std::string(gerr->message).find(message_fragment), std::string::npos) << gerr->message;
  const std::string dbg = debug ? debug : "";
  EXPECT_NE(dbg.find(debug_fragment), std::string::npos) << dbg;
  EXPECT_GT(dbg.size(), 10u) << "the reason must be in the debug string";
  EXPECT_STREQ(GST_OBJECT_NAME(GST_MESSAGE_SRC(msg)), "seg");
  g_error_free(gerr);
  g_free(debug);
  gst_message_unref(msg);
  gst_element_set_state(pipe, GST_STATE_NULL);
  gst_object_unref(bus);
  gst_object_unref(pipe);
}

TEST(NnSegmentErrors, MissingModelFile) {
  expect_model_error("/nonexistent/dir/person.tflite", "/nonexistent/dir/person.tflite", "No such file");
}

TEST(NnSegmentErrors, CorruptModelFile) {
  const std::string path = std::string(NN_TEST_OUT_DIR) + "/corrupt_model.tflite";
  {
    std::ofstream f(path, std::ios::binary);
    std::mt19937 rng(3);
    for (int i = 0; i < 4096; ++i) f.put(static_cast<char>(rng() & 0xFF));
  }
  expect_model_error(path, path, "");
}

TEST(NnSegmentErrors, UnknownExtension) {
  const std::string path = std::string(NN_TEST_OUT_DIR) + "/model.bin";
  {
    std::ofstream f(path);
    f << "x";
  }
  expect_model_error(path, path, "extension");
}

TEST(NnSegmentErrors, NoModelSet) {
  expect_model_error("", "No model", "model property");
}

TEST_F(NnSegmentTest, RenegotiatesOnSizeAndFormatChange) {
  start("latency-budget=10000");
  GstBuffer* out = push_pull(frame("RGBA", kW, kH));
  ASSERT_NE(gst_buffer_get_nn_mask_meta(out), nullptr);
  gst_buffer_unref(out);

  gst_harness_set_src_caps_str(h_, caps_string("RGBA", 640, 360).c_str());
  out = push_pull(frame("RGBA", 640, 360));
  GstNnMaskMeta* m = gst_buffer_get_nn_mask_meta(out);
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m->frame_width, 640u);
  EXPECT_EQ(m->frame_height, 360u);
  EXPECT_EQ(m->age, 0u) << "a mask for the old size must not be reused";
  gst_buffer_unref(out);

  gst_harness_set_src_caps_str(h_, caps_string("I420", 321, 241).c_str());
  out = push_pull(frame("I420", 321, 241));
  m = gst_buffer_get_nn_mask_meta(out);
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m->frame_width, 321u);
  EXPECT_EQ(m->age, 0u);
  gst_buffer_unref(out);
}

// QoS: a late frame first skips inference (and goes out with the previous mask); frames
// that keep coming late are dropped.
TEST_F(NnSegmentTest, QosSkipsInferenceThenDropsFrames) {
  start("latency-budget=10000");
  GstBuffer* out = push_pull(frame("RGBA", kW, kH, 0));
  ASSERT_NE(gst_buffer_get_nn_mask_meta(out), nullptr);
  gst_buffer_unref(out);
  ASSERT_TRUE(wait_inferences(1));
  const guint64 run_before = stat_u64(seg_, "inferences-run");

  // Downstream: "running time 10 s is the earliest I can still show".
  ASSERT_TRUE(gst_harness_push_upstream_event(
      h_, gst_event_new_qos(GST_QOS_TYPE_UNDERFLOW, 2.0, 0, 10 * GST_SECOND)));
  // (Frames from 2 s on: none is dropped in the first second, see the next test.)
  out = push_pull(frame("RGBA", kW, kH, 2 * GST_SECOND + 33 * GST_MSECOND));
  GstNnMaskMeta* m = gst_buffer_get_nn_mask_meta(out);
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m->age, 1u) << "late frame: inference skipped, previous mask reused";
  gst_buffer_unref(out);
  EXPECT_EQ(stat_u64(seg_, "inferences-skipped"), 1u);

  for (int i = 2; i <= 4; ++i)
    ASSERT_EQ(gst_harness_push(h_, frame("RGBA", kW, kH, 2 * GST_SECOND + i * 33 * GST_MSECOND)), GST_FLOW_OK);
  // Second late frame still passes, the third and fourth are dropped.
  EXPECT_EQ(gst_harness_buffers_in_queue(h_), 1u);
  EXPECT_EQ(stat_u64(seg_, "frames-dropped"), 2u);
  EXPECT_EQ(stat_u64(seg_, "inferences-skipped"), 4u);
  EXPECT_EQ(stat_u64(seg_, "inferences-run"), run_before) << "no inference ran while late";
  gst_buffer_unref(gst_harness_pull(h_));

  // On time again: inference resumes.
  out = push_pull(frame("RGBA", kW, kH, 11 * GST_SECOND));
  m = gst_buffer_get_nn_mask_meta(out);
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m->age, 0u);
  gst_buffer_unref(out);
}

// The first second after start: a pipeline behind at its start (QoS proportion 2) only
// skips inference; from 1 s of running time on, frames that keep coming late are dropped.
TEST_F(NnSegmentTest, QosDropsNoFrameInTheFirstSecond) {
  start("latency-budget=10000");
  gst_buffer_unref(push_pull(frame("RGBA", kW, kH, 0)));
  ASSERT_TRUE(wait_inferences(1));
  ASSERT_TRUE(gst_harness_push_upstream_event(
      h_, gst_event_new_qos(GST_QOS_TYPE_UNDERFLOW, 2.0, 0, 10 * GST_SECOND)));
  for (int i = 1; i <= 6; ++i)
    ASSERT_EQ(gst_harness_push(h_, frame("RGBA", kW, kH, i * 100 * GST_MSECOND)), GST_FLOW_OK);
  EXPECT_EQ(gst_harness_buffers_in_queue(h_), 6u);
  EXPECT_EQ(stat_u64(seg_, "frames-dropped"), 0u);
  EXPECT_EQ(stat_u64(seg_, "inferences-skipped"), 6u);
  for (int i = 1; i <= 6; ++i) gst_buffer_unref(gst_harness_pull(h_));
  // Still late at 1.1 s: the third late frame in a row (consecutive since 0.1 s) goes.
  ASSERT_EQ(gst_harness_push(h_, frame("RGBA", kW, kH, 1100 * GST_MSECOND)), GST_FLOW_OK);
  EXPECT_EQ(stat_u64(seg_, "frames-dropped"), 1u);
  EXPECT_EQ(gst_harness_buffers_in_queue(h_), 0u);
}

// A pipeline that keeps up on average (QoS proportion < 1) but had a late burst, as at
// a decoder's start-up: late frames skip inference, none is dropped.
TEST_F(NnSegmentTest, QosLateBurstSkipsInferenceWithoutDropping) {
  start("latency-budget=10000");
  gst_buffer_unref(push_pull(frame("RGBA", kW, kH, 0)));
  ASSERT_TRUE(wait_inferences(1));
  const guint64 run_before = stat_u64(seg_, "inferences-run");
  ASSERT_TRUE(gst_harness_push_upstream_event(
      h_, gst_event_new_qos(GST_QOS_TYPE_UNDERFLOW, 0.8, 0, 10 * GST_SECOND)));
  for (int i = 1; i <= 5; ++i)
    ASSERT_EQ(gst_harness_push(h_, frame("RGBA", kW, kH, i * 33 * GST_MSECOND)), GST_FLOW_OK);
  EXPECT_EQ(gst_harness_buffers_in_queue(h_), 5u) << "no frame dropped";
  EXPECT_EQ(stat_u64(seg_, "frames-dropped"), 0u);
  EXPECT_EQ(stat_u64(seg_, "inferences-skipped"), 5u);
  EXPECT_EQ(stat_u64(seg_, "inferences-run"), run_before) << "no inference ran while late";
  for (int i = 1; i <= 5; ++i) gst_buffer_unref(gst_harness_pull(h_));
}

// What nnbackground sends upstream after compositing (GST_NN_DOWNSTREAM_COST_EVENT).
GstEvent* downstream_cost(double ms) {
  return gst_event_new_custom(GST_EVENT_CUSTOM_UPSTREAM,
                              gst_structure_new(GST_NN_DOWNSTREAM_COST_EVENT, "ms", G_TYPE_DOUBLE, ms, nullptr));
}

// nnbackground's reported compositing cost comes out of the budget: with all of it spent
// downstream, a frame does not wait for its mask (with none reported, the same budget
// waits, as every other test shows); the event is consumed and shows in the stats.
TEST_F(NnSegmentTest, DownstreamCostComesOutOfTheBudget) {
  start("latency-budget=10000");
  ASSERT_TRUE(gst_harness_push_upstream_event(h_, downstream_cost(10000.0)));
  EXPECT_DOUBLE_EQ(stat_double(seg_, "downstream-ms"), 10000.0);
  GstBuffer* out = push_pull(frame());
  EXPECT_EQ(gst_buffer_get_nn_mask_meta(out), nullptr) << "no time left to wait for the first mask";
  gst_buffer_unref(out);
  ASSERT_TRUE(wait_inferences(1));
  // Downstream got cheap again: the whole budget is this element's, the frame waits.
  ASSERT_TRUE(gst_harness_push_upstream_event(h_, downstream_cost(2.0)));
  out = push_pull(frame());
  GstNnMaskMeta* m = gst_buffer_get_nn_mask_meta(out);
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m->age, 0u);
  gst_buffer_unref(out);
  while (GstEvent* ev = gst_harness_try_pull_upstream_event(h_)) {
    EXPECT_FALSE(gst_event_has_name(ev, GST_NN_DOWNSTREAM_COST_EVENT)) << "the cost event is nnsegment's";
    gst_event_unref(ev);
  }
}

// The meta carries the frame's deadline for the compositor: the budget from its arrival.
TEST_F(NnSegmentTest, MaskMetaCarriesTheDeadline) {
  start("latency-budget=5000");
  const gint64 before = g_get_monotonic_time();
  GstBuffer* out = push_pull(frame());  // waits for its own mask (well within 5 s)
  const gint64 after = g_get_monotonic_time();
  GstNnMaskMeta* m = gst_buffer_get_nn_mask_meta(out);
  ASSERT_NE(m, nullptr);
  EXPECT_GE(m->deadline_us, before + 5000 * 1000);
  EXPECT_LE(m->deadline_us, after + 5000 * 1000);
  gst_buffer_unref(out);
}

// thread-priority: the thread that runs the element (here the one pushing) gets what the
// stats say -- from the caps on, so what runs on it before the first frame (nnbackground's
// warm-up) has it too -- and is put back at stop. As root real-time priority is allowed.
TEST_F(NnSegmentTest, ThreadPriorityIsAppliedAndPutBackAtStop) {
  ASSERT_EQ(sched_getscheduler(0), SCHED_OTHER);
  start("thread-priority=realtime latency-budget=0");  // pushes the caps
  const std::string at_caps = stat_string(seg_, "thread-priority");
  if (geteuid() == 0) {
    EXPECT_EQ(at_caps, "realtime") << "applied with the caps, before the first frame";
    EXPECT_EQ(sched_getscheduler(0), SCHED_RR);
  }
  gst_buffer_unref(push_pull(frame()));
  const std::string got = stat_string(seg_, "thread-priority");
  if (geteuid() == 0) {
    EXPECT_EQ(got, "realtime");
  }
  if (got == "realtime") {
    EXPECT_EQ(sched_getscheduler(0), SCHED_RR);
  } else {
    EXPECT_TRUE(got == "low-latency" || got == "normal") << got;
    EXPECT_EQ(sched_getscheduler(0), SCHED_OTHER);
  }
  ASSERT_EQ(gst_element_set_state(seg_, GST_STATE_NULL), GST_STATE_CHANGE_SUCCESS);
  EXPECT_EQ(sched_getscheduler(0), SCHED_OTHER) << "the streaming thread is put back at stop";
}

TEST_F(NnSegmentTest, ThreadPriorityNormalLeavesTheThreadAlone) {
  start("thread-priority=normal latency-budget=0");
  gst_buffer_unref(push_pull(frame()));
  EXPECT_EQ(stat_string(seg_, "thread-priority"), "normal");
  EXPECT_EQ(sched_getscheduler(0), SCHED_OTHER);
}

// Unasked, the element leaves the streaming thread's scheduling alone: the default is
// normal (as root, realtime would switch the thread to SCHED_RR).
TEST_F(NnSegmentTest, ThreadPriorityDefaultIsNormal) {
  start("latency-budget=0");
  GstNnThreadPriority prio;
  g_object_get(seg_, "thread-priority", &prio, nullptr);
  EXPECT_EQ(prio, GST_NN_THREAD_PRIORITY_NORMAL);
  GParamSpec* spec = g_object_class_find_property(G_OBJECT_GET_CLASS(seg_), "thread-priority");
  EXPECT_EQ(G_PARAM_SPEC_ENUM(spec)->default_value, GST_NN_THREAD_PRIORITY_NORMAL);
  ASSERT_EQ(sched_getscheduler(0), SCHED_OTHER);
  errno = 0;
  const int nice_before = getpriority(PRIO_PROCESS, 0);
  gst_buffer_unref(push_pull(frame()));
  EXPECT_EQ(stat_string(seg_, "thread-priority"), "normal");
  EXPECT_EQ(sched_getscheduler(0), SCHED_OTHER);
  EXPECT_EQ(getpriority(PRIO_PROCESS, 0), nice_before) << "nice untouched";
}

// qos is on by default, as for GstBaseTransform elements that honour QoS; qos=false
// ignores QoS events (every frame gets inference, none is dropped), and still passes
// them upstream.
TEST_F(NnSegmentTest, QosIsOnByDefaultAndQosFalseIgnoresQosEvents) {
  start("latency-budget=10000");
  gboolean qos = FALSE;
  g_object_get(seg_, "qos", &qos, nullptr);
  EXPECT_TRUE(qos) << "qos defaults to true";
  g_object_set(seg_, "qos", FALSE, nullptr);
  gst_buffer_unref(push_pull(frame("RGBA", kW, kH, 0)));
  ASSERT_TRUE(wait_inferences(1));
  ASSERT_TRUE(gst_harness_push_upstream_event(
      h_, gst_event_new_qos(GST_QOS_TYPE_UNDERFLOW, 2.0, 0, 10 * GST_SECOND)));
  bool qos_went_upstream = false;
  while (GstEvent* ev = gst_harness_try_pull_upstream_event(h_)) {
    qos_went_upstream |= GST_EVENT_TYPE(ev) == GST_EVENT_QOS;
    gst_event_unref(ev);
  }
  EXPECT_TRUE(qos_went_upstream);
  for (int i = 1; i <= 5; ++i)
    ASSERT_EQ(gst_harness_push(h_, frame("RGBA", kW, kH, 2 * GST_SECOND + i * 33 * GST_MSECOND)), GST_FLOW_OK);
  ASSERT_EQ(gst_harness_buffers_in_queue(h_), 5u) << "no frame dropped";
  for (int i = 1; i <= 5; ++i) {
    GstBuffer* out = gst_harness_try_pull(h_);
    ASSERT_NE(out, nullptr);
    GstNnMaskMeta* m = gst_buffer_get_nn_mask_meta(out);
    ASSERT_NE(m, nullptr);
    EXPECT_EQ(m->age, 0u) << "frame " << i << ": its own mask, QoS ignored";
    gst_buffer_unref(out);
  }
  EXPECT_EQ(stat_u64(seg_, "inferences-skipped"), 0u);
  EXPECT_EQ(stat_u64(seg_, "frames-dropped"), 0u);
  // Back on: the same lateness now skips inference.
  g_object_set(seg_, "qos", TRUE, nullptr);
  ASSERT_TRUE(gst_harness_push_upstream_event(
      h_, gst_event_new_qos(GST_QOS_TYPE_UNDERFLOW, 2.0, 0, 10 * GST_SECOND)));
  gst_buffer_unref(push_pull(frame("RGBA", kW, kH, 3 * GST_SECOND)));
  EXPECT_EQ(stat_u64(seg_, "inferences-skipped"), 1u);
}

TEST_F(NnSegmentTest, LatencyQueryAddsTheBudgetWhenLive) {
  start("latency-budget=40");
  gst_harness_set_upstream_latency(h_, 10 * GST_MSECOND);
  EXPECT_EQ(gst_harness_query_latency(h_), 50 * GST_MSECOND);
  g_object_set(seg_, "latency-budget", 25u, nullptr);
  EXPECT_EQ(gst_harness_query_latency(h_), 35 * GST_MSECOND);
}

// budget 0: the streaming thread never waits; frames carry the newest finished mask
// and its age in frames.
TEST_F(NnSegmentTest, MaskMetaCarriesAge) {
  start("latency-budget=0");
  GstBuffer* out = push_pull(frame());
  EXPECT_EQ(gst_buffer_get_nn_mask_meta(out), nullptr) << "nothing finished yet";
  gst_buffer_unref(out);
  ASSERT_TRUE(wait_inferences(1));
  out = push_pull(frame());
  GstNnMaskMeta* m = gst_buffer_get_nn_mask_meta(out);
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m->age, 1u);
  EXPECT_GT(m->source_id, 0u);
  const guint64 first_source = m->source_id;
  gst_buffer_unref(out);
  // A third frame right away: the mask is from frame 1 or 2, age 2 or 1.
  out = push_pull(frame());
  m = gst_buffer_get_nn_mask_meta(out);
  ASSERT_NE(m, nullptr);
  EXPECT_GE(m->age, 1u);
  EXPECT_LE(m->age, 2u);
  EXPECT_GE(m->source_id, first_source);
  EXPECT_EQ(stat_uint(seg_, "mask-age"), m->age);
  gst_buffer_unref(out);
}

TEST_F(NnSegmentTest, DropFramePolicyDropsWhenBusy) {
  start("latency-budget=0 over-budget=drop-frame");
  for (int i = 0; i < 5; ++i) ASSERT_EQ(gst_harness_push(h_, frame()), GST_FLOW_OK);
  EXPECT_EQ(gst_harness_buffers_received(h_), 0u) << "no mask can be ready within a 0 ms budget";
  EXPECT_EQ(stat_u64(seg_, "frames-dropped"), 5u);
  // With time to finish, frames go out with their own mask.
  g_object_set(seg_, "latency-budget", 10000u, nullptr);
  GstBuffer* out = push_pull(frame());
  GstNnMaskMeta* m = gst_buffer_get_nn_mask_meta(out);
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m->age, 0u);
  gst_buffer_unref(out);
}

TEST_F(NnSegmentTest, AlphaModeWritesTheMaskIntoAlpha) {
  start("latency-budget=10000 output-mode=alpha");
  GstBuffer* out = push_pull(frame("RGBA"));
  GstNnMaskMeta* m = gst_buffer_get_nn_mask_meta(out);
  ASSERT_NE(m, nullptr);
  cv::Mat rgba = packed_to_mat(out, "RGBA", kW, kH);
  int checked = 0;
  for (int y = 5; y < kH; y += 23)
    for (int x = 3; x < kW; x += 31) {
      const float want = gst_nn_mask_meta_sample_frame(m, x, y);
      const float got = rgba.at<cv::Vec4b>(y, x)[3] / 255.f;
      EXPECT_NEAR(got, want, 0.03f) << "at " << x << "," << y;
      ++checked;
    }
  EXPECT_GT(checked, 100);
  gst_buffer_unref(out);
}

TEST_F(NnSegmentTest, PostsStatsMessages) {
  start("latency-budget=10000 stats-interval=1");
  GstBus* bus = gst_bus_new();
  gst_element_set_bus(h_->element, bus);
  for (int i = 0; i < 3; ++i) {
    g_usleep(2000);
    gst_buffer_unref(push_pull(frame()));
  }
  GstMessage* msg = gst_bus_timed_pop_filtered(bus, GST_SECOND, GST_MESSAGE_ELEMENT);
  ASSERT_NE(msg, nullptr);
  const GstStructure* s = gst_message_get_structure(msg);
  EXPECT_TRUE(gst_structure_has_name(s, "nnsegment-stats"));
  for (const char* f : {"inference-p50-ms", "inference-p99-ms"})
    EXPECT_TRUE(gst_structure_has_field_typed(s, f, G_TYPE_DOUBLE)) << f;
  for (const char* f : {"inferences-run", "inferences-skipped", "frames-dropped"})
    EXPECT_TRUE(gst_structure_has_field_typed(s, f, G_TYPE_UINT64)) << f;
  EXPECT_TRUE(gst_structure_has_field_typed(s, "mask-age", G_TYPE_UINT));
  EXPECT_TRUE(gst_structure_has_field_typed(s, "partitions", G_TYPE_UINT));
  EXPECT_NE(gst_structure_get_string(s, "delegate"), nullptr);
  gst_message_unref(msg);
  gst_element_set_bus(h_->element, nullptr);
  gst_object_unref(bus);
  EXPECT_GT(stat_double(seg_, "inference-p50-ms"), 0.0);
}

TEST_F(NnSegmentTest, FlushForgetsTheMask) {
  start("latency-budget=10000");
  gst_buffer_unref(push_pull(frame()));
  ASSERT_TRUE(gst_harness_push_event(h_, gst_event_new_flush_start()));
  ASSERT_TRUE(gst_harness_push_event(h_, gst_event_new_flush_stop(TRUE)));
  GstSegment segment;
  gst_segment_init(&segment, GST_FORMAT_TIME);
  ASSERT_TRUE(gst_harness_push_event(h_, gst_event_new_segment(&segment)));
  g_object_set(seg_, "latency-budget", 0u, nullptr);
  GstBuffer* out = push_pull(frame());
  EXPECT_EQ(gst_buffer_get_nn_mask_meta(out), nullptr) << "a pre-seek mask must not leak past a flush";
  gst_buffer_unref(out);
}

// A scene cut makes the previous mask wrong: it is discarded, not reused.
TEST_F(NnSegmentTest, SceneCutDiscardsTheOldMask) {
  start("latency-budget=10000");
  gst_buffer_unref(push_pull(frame()));
  g_object_set(seg_, "latency-budget", 0u, nullptr);
  // Same shot: the previous mask is reused (age 1).
  GstBuffer* out = push_pull(frame());
  GstNnMaskMeta* m = gst_buffer_get_nn_mask_meta(out);
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m->age, 1u);
  gst_buffer_unref(out);
  ASSERT_TRUE(wait_inferences(2));
  // A different shot (the picture upside down and darker).
  cv::Mat other;
  cv::flip(test_image_rgb(kW, kH), other, -1);
  other = other * 0.4;
  out = push_pull(make_frame("RGBA", other));
  EXPECT_EQ(gst_buffer_get_nn_mask_meta(out), nullptr) << "the mask of the previous shot must not be applied";
  gst_buffer_unref(out);
  EXPECT_EQ(stat_u64(seg_, "scene-cuts"), 1u);
}

// The GRAY8 mask frame of a buffer (stride as GStreamer lays it out).
cv::Mat gray_to_mat(GstBuffer* buf, int w, int h) {
  GstVideoInfo info;
  gst_video_info_set_format(&info, GST_VIDEO_FORMAT_GRAY8, w, h);
  GstVideoFrame frame;
  EXPECT_TRUE(gst_video_frame_map(&frame, &info, buf, GST_MAP_READ));
  cv::Mat m(h, w, CV_8UC1);
  for (int y = 0; y < h; ++y)
    memcpy(m.ptr(y),
           static_cast<uint8_t*>(GST_VIDEO_FRAME_PLANE_DATA(&frame, 0)) +
               y * GST_VIDEO_FRAME_PLANE_STRIDE(&frame, 0),
           w);
  gst_video_frame_unmap(&frame);
  return m;
}

// output-mode=mask: RGBx 97x61 in, GRAY8 97x61 out; the pixels are the meta's
// model-resolution mask resampled to the frame, timestamps and meta kept.
TEST_F(NnSegmentTest, MaskOutputIsGray8AtFrameSize) {
  constexpr int w = 97, h = 61;
  start("latency-budget=10000 output-mode=mask", "RGBx", w, h);
  GstBuffer* out = push_pull(frame("RGBx", w, h, 5 * GST_SECOND));
  ASSERT_NE(out, nullptr);
  GstCaps* caps = gst_pad_get_current_caps(h_->sinkpad);
  ASSERT_NE(caps, nullptr);
  GstVideoInfo info;
  ASSERT_TRUE(gst_video_info_from_caps(&info, caps));
  EXPECT_EQ(GST_VIDEO_INFO_FORMAT(&info), GST_VIDEO_FORMAT_GRAY8) << gst_caps_to_string(caps);
  EXPECT_EQ(GST_VIDEO_INFO_WIDTH(&info), w);
  EXPECT_EQ(GST_VIDEO_INFO_HEIGHT(&info), h);
  gst_caps_unref(caps);
  EXPECT_EQ(gst_buffer_get_size(out), GST_VIDEO_INFO_SIZE(&info));
  EXPECT_EQ(GST_BUFFER_PTS(out), 5 * GST_SECOND);
  EXPECT_EQ(GST_BUFFER_DURATION(out), 33 * GST_MSECOND);

  GstNnMaskMeta* m = gst_buffer_get_nn_mask_meta(out);
  ASSERT_NE(m, nullptr) << "the GRAY8 buffer still carries the mask meta";
  EXPECT_EQ(m->age, 0u);
  EXPECT_EQ(m->frame_width, static_cast<guint>(w));
  EXPECT_EQ(m->frame_height, static_cast<guint>(h));
  const cv::Mat gray = gray_to_mat(out, w, h);
  // Our own resampling of the meta's mask (stretch: the mask covers the frame exactly).
  cv::Mat resized;
  cv::resize(mask_to_mat(m), resized, cv::Size(w, h), 0, 0, cv::INTER_LINEAR);
  int checked = 0;
  for (int y = 0; y < h; y += 3)
    for (int x = 0; x < w; x += 4) {
      EXPECT_NEAR(gray.at<uint8_t>(y, x), resized.at<float>(y, x) * 255.f, 3.0) << "at " << x << "," << y;
      EXPECT_NEAR(gray.at<uint8_t>(y, x), gst_nn_mask_meta_sample_frame(m, x, y) * 255.f, 3.0)
          << "at " << x << "," << y;
      ++checked;
    }
  EXPECT_GT(checked, 400);
  double lo, hi;
  cv::minMaxLoc(gray, &lo, &hi);
  EXPECT_LT(lo, 30) << "the pitch is background";
  EXPECT_GT(hi, 225) << "the player is a person";
  gst_buffer_unref(out);
}

// The threshold shapes the GRAY8 mask as it shapes the meta: threshold=0 gives raw
// probabilities (soft), the default ramp pushes most pixels to 0 or 255.
TEST_F(NnSegmentTest, MaskOutputAppliesThreshold) {
  constexpr int w = 97, h = 61;
  auto soft_fraction = [&](const char* props) {
    start(std::string("latency-budget=10000 output-mode=mask ") + props, "RGBx", w, h);
    GstBuffer* out = push_pull(frame("RGBx", w, h));
    const cv::Mat gray = gray_to_mat(out, w, h);
    gst_buffer_unref(out);
    gst_object_unref(seg_);
    seg_ = nullptr;
    gst_harness_teardown(h_);
    h_ = nullptr;
    return cv::countNonZero((gray > 5) & (gray < 250)) / static_cast<double>(w * h);
  };
  const double raw = soft_fraction("threshold=0"), ramped = soft_fraction("threshold=0.5");
  EXPECT_LT(ramped, raw) << "raw " << raw << " vs thresholded " << ramped;
}

// Before the first mask, the GRAY8 frame says "keep everything" (255) and carries no meta.
TEST_F(NnSegmentTest, MaskOutputWithoutMaskIsAll255) {
  start("latency-budget=0 output-mode=mask", "I420", 33, 17);
  GstBuffer* out = push_pull(frame("I420", 33, 17));
  ASSERT_NE(out, nullptr);
  EXPECT_EQ(gst_buffer_get_nn_mask_meta(out), nullptr);
  const cv::Mat gray = gray_to_mat(out, 33, 17);
  EXPECT_EQ(cv::countNonZero(gray != 255), 0);
  gst_buffer_unref(out);
}

// Switching output-mode to mask mid-stream renegotiates the src caps to GRAY8 (and back).
TEST_F(NnSegmentTest, OutputModeMaskRenegotiatesMidStream) {
  start("latency-budget=10000", "RGBA", 64, 48);
  GstBuffer* out = push_pull(frame("RGBA", 64, 48));
  EXPECT_EQ(gst_buffer_get_size(out), 64u * 48u * 4u);
  gst_buffer_unref(out);
  g_object_set(seg_, "output-mode", 2 /* mask */, nullptr);
  out = push_pull(frame("RGBA", 64, 48));
  ASSERT_NE(out, nullptr);
  EXPECT_EQ(gst_buffer_get_size(out), 64u * 48u) << "GRAY8 after the switch";
  EXPECT_NE(gst_buffer_get_nn_mask_meta(out), nullptr);
  gst_buffer_unref(out);
  g_object_set(seg_, "output-mode", 0 /* meta */, nullptr);
  out = push_pull(frame("RGBA", 64, 48));
  EXPECT_EQ(gst_buffer_get_size(out), 64u * 48u * 4u) << "RGBA again";
  gst_buffer_unref(out);
}

// Letterbox on a very wide frame: 400x100 fits the 256x256 input as 256x64 with 96 rows of
// padding above and below, so the mask covers a 400x400 frame square centred on the frame.
TEST_F(NnSegmentTest, LetterboxMetaRectOnAWideFrame) {
  constexpr int w = 400, h = 100;
  start("latency-budget=10000 resize=letterbox output-mode=mask threshold=0", "RGBA", w, h);
  GstBuffer* out = push_pull(frame("RGBA", w, h));
  GstNnMaskMeta* m = gst_buffer_get_nn_mask_meta(out);
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m->width, 256u);
  EXPECT_EQ(m->height, 256u);
  EXPECT_DOUBLE_EQ(m->rect_x, 0.0);
  EXPECT_DOUBLE_EQ(m->rect_y, -150.0);
  EXPECT_DOUBLE_EQ(m->rect_w, 400.0);
  EXPECT_DOUBLE_EQ(m->rect_h, 400.0);
  // The frame's rows 0..99 come from mask rows 96..159 only: the GRAY8 frame is that band
  // resampled, edges repeating the band's own border rows, never the padding.
  const cv::Mat gray = gray_to_mat(out, w, h);
  const cv::Mat band = mask_to_mat(m)(cv::Rect(0, 96, 256, 64));
  cv::Mat expected;
  cv::resize(band, expected, cv::Size(w, h), 0, 0, cv::INTER_LINEAR);
  for (int y : {0, 1, 37, 50, 98, 99})
    for (int x = 0; x < w; x += 13) {
      EXPECT_NEAR(gray.at<uint8_t>(y, x), expected.at<float>(y, x) * 255.f, 3.0) << "at " << x << "," << y;
      EXPECT_NEAR(gray.at<uint8_t>(y, x), gst_nn_mask_meta_sample_frame(m, x, y) * 255.f, 3.0)
          << "at " << x << "," << y;
    }
  gst_buffer_unref(out);
  gst_object_unref(seg_);
  seg_ = nullptr;
  gst_harness_teardown(h_);
  h_ = nullptr;

  // Stretch (the default) on the same frame: the mask covers the frame exactly.
  start("latency-budget=10000", "RGBA", w, h);
  out = push_pull(frame("RGBA", w, h));
  m = gst_buffer_get_nn_mask_meta(out);
  ASSERT_NE(m, nullptr);
  EXPECT_DOUBLE_EQ(m->rect_y, 0.0);
  EXPECT_DOUBLE_EQ(m->rect_h, 100.0);
  gst_buffer_unref(out);
}

// Letterbox on a tall frame pads left and right; the model still finds the person.
TEST_F(NnSegmentTest, LetterboxTallFrame) {
  constexpr int w = 90, h = 360;
  start("latency-budget=10000 resize=letterbox threshold=0", "NV12", w, h);
  GstBuffer* out = push_pull(frame("NV12", w, h));
  GstNnMaskMeta* m = gst_buffer_get_nn_mask_meta(out);
  ASSERT_NE(m, nullptr);
  // 90x360 -> 64x256 at x = 96: 256 input columns span 360 frame pixels.
  EXPECT_DOUBLE_EQ(m->rect_x, -96.0 * 90.0 / 64.0);
  EXPECT_DOUBLE_EQ(m->rect_w, 256.0 * 90.0 / 64.0);
  EXPECT_DOUBLE_EQ(m->rect_y, 0.0);
  EXPECT_DOUBLE_EQ(m->rect_h, 360.0);
  gst_buffer_unref(out);
}

TEST(NnSegmentErrors, BadEnumValueIsAParseError) {
  GError* err = nullptr;
  GstElement* e = gst_parse_launch("nnsegment resize=squash", &err);
  ASSERT_NE(err, nullptr) << "resize=squash must be refused";
  EXPECT_NE(std::string(err->message).find("squash"), std::string::npos) << err->message;
  g_clear_error(&err);
  if (e) gst_object_unref(e);
  e = gst_parse_launch("nnsegment output-mode=grey", &err);
  ASSERT_NE(err, nullptr);
  g_clear_error(&err);
  if (e) gst_object_unref(e);
}

TEST(NnSegmentDefaults, DelegateIsAuto) {
  GstElement* e = gst_element_factory_make("nnsegment", nullptr);
  ASSERT_NE(e, nullptr);
  gint delegate = -1, resize = -1;
  g_object_get(e, "delegate", &delegate, "resize", &resize, nullptr);
  EXPECT_EQ(delegate, 0) << "auto";
  EXPECT_EQ(resize, 0) << "stretch";
  gst_object_unref(e);
}

// PLAYING <-> NULL cycles with a real source, each run to EOS.
TEST(NnSegmentPipeline, StateCyclesToEos) {
  ASSERT_TRUE(nn_test::require_asset("models/selfie_segmentation.tflite"));
  const std::string line =
      "videotestsrc num-buffers=8 pattern=ball ! video/x-raw,format=NV12,width=161,height=97 ! "
      "nnsegment name=seg latency-budget=5 model=" +
      model_path() + " ! fakesink";
  GstElement* pipe = gst_parse_launch(line.c_str(), nullptr);
  ASSERT_NE(pipe, nullptr);
  GstBus* bus = gst_element_get_bus(pipe);
  for (int cycle = 0; cycle < 3; ++cycle) {
    ASSERT_NE(gst_element_set_state(pipe, GST_STATE_PLAYING), GST_STATE_CHANGE_FAILURE);
    GstMessage* msg = gst_bus_timed_pop_filtered(
        bus, 30 * GST_SECOND, static_cast<GstMessageType>(GST_MESSAGE_EOS | GST_MESSAGE_ERROR));
    ASSERT_NE(msg, nullptr);
    EXPECT_EQ(GST_MESSAGE_TYPE(msg), GST_MESSAGE_EOS) << "cycle " << cycle;
    gst_message_unref(msg);
    GstElement* seg = gst_bin_get_by_name(GST_BIN(pipe), "seg");
    EXPECT_EQ(stat_u64(seg, "frames-out"), 8u);
    gst_object_unref(seg);
    ASSERT_EQ(gst_element_set_state(pipe, GST_STATE_NULL), GST_STATE_CHANGE_SUCCESS);
  }
  gst_object_unref(bus);
  gst_object_unref(pipe);
}

}  // namespace

// The mask meta carries nnsegment's work image (the "small frame" nnbackground composites
// from): the frame's own format, the compositor's work size, exactly make_work_image of the
// frame's pixels; for I420 and NV12 packed 4:4:4 YUV (v308), exactly make_yuv_work_image.
TEST_F(NnSegmentTest, MaskMetaCarriesTheWorkImage) {
  struct Case {
    const char* format;
    int w, h;
  };
  for (const Case c : {Case{"RGBA", 1280, 720}, Case{"BGR", kW, kH}, Case{"BGRx", 1920, 1080}}) {
    SCOPED_TRACE(c.format);
    start("latency-budget=5000", c.format, c.w, c.h);
    GstBuffer* in = frame(c.format, c.w, c.h);
    const cv::Mat pixels = packed_to_mat(in, c.format, c.w, c.h);
    GstBuffer* out = push_pull(in);
    GstNnMaskMeta* m = gst_buffer_get_nn_mask_meta(out);
    ASSERT_NE(m, nullptr);
    GBytes* small = gst_nn_mask_meta_get_small_frame(m);
    ASSERT_NE(small, nullptr);
    EXPECT_EQ(m->small_format, gst_video_format_from_string(c.format));
    cv::Mat want;
    nn::plugins::make_work_image(pixels, want);
    ASSERT_EQ(static_cast<int>(m->small_width), want.cols);
    ASSERT_EQ(static_cast<int>(m->small_height), want.rows);
    const cv::Mat got(want.rows, want.cols, want.type(), const_cast<void*>(g_bytes_get_data(small, nullptr)),
                      m->small_stride);
    EXPECT_EQ(cv::norm(got, want, cv::NORM_INF), 0);
    gst_buffer_unref(out);
    gst_object_unref(seg_);
    gst_harness_teardown(h_);
    seg_ = nullptr;
    h_ = nullptr;
  }
  for (const char* format : {"I420", "NV12"}) {
    SCOPED_TRACE(format);
    const int w = 1280, h = 721;  // odd: a half chroma row
    start("latency-budget=5000", format, w, h);
    GstBuffer* in = frame(format, w, h);
    GstVideoInfo info;
    gst_video_info_set_format(&info, gst_video_format_from_string(format), w, h);
    GstVideoFrame vf;
    ASSERT_TRUE(gst_video_frame_map(&vf, &info, in, GST_MAP_READ));
    const bool nv12 = std::string(format) == "NV12";
    const int cw = (w + 1) / 2, ch = (h + 1) / 2;
    const auto plane = [&](int i, int type, int rows, int cols) {
      return cv::Mat(rows, cols, type, GST_VIDEO_FRAME_PLANE_DATA(&vf, i), GST_VIDEO_FRAME_PLANE_STRIDE(&vf, i))
          .clone();
    };
    const cv::Mat y = plane(0, CV_8UC1, h, w), u = plane(1, nv12 ? CV_8UC2 : CV_8UC1, ch, cw),
                  v = nv12 ? cv::Mat() : plane(2, CV_8UC1, ch, cw);
    gst_video_frame_unmap(&vf);
    cv::Mat want;
    nn::plugins::make_yuv_work_image(y, u, v, want);
    GstBuffer* out = push_pull(in);
    GstNnMaskMeta* m = gst_buffer_get_nn_mask_meta(out);
    ASSERT_NE(m, nullptr);
    GBytes* small = gst_nn_mask_meta_get_small_frame(m);
    ASSERT_NE(small, nullptr);
    EXPECT_EQ(m->small_format, GST_VIDEO_FORMAT_v308);
    ASSERT_EQ(static_cast<int>(m->small_width), want.cols);
    ASSERT_EQ(static_cast<int>(m->small_height), want.rows);
    const cv::Mat got(want.rows, want.cols, CV_8UC3, const_cast<void*>(g_bytes_get_data(small, nullptr)),
                      m->small_stride);
    EXPECT_EQ(cv::norm(got, want, cv::NORM_INF), 0);
    gst_buffer_unref(out);
    gst_object_unref(seg_);
    gst_harness_teardown(h_);
    seg_ = nullptr;
    h_ = nullptr;
  }
}

NN_GST_TEST_MAIN()

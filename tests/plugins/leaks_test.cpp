// Leak check: nnsegment ! nnbackground mode=video (with its background pad fed), and
// nnsegment output-mode=mask resize=letterbox, through three PLAYING -> NULL cycles, run in a child process
// under GStreamer's leaks tracer. The tracer reports at gst_deinit(): every GstObject / GstMiniObject still
// alive is logged as an "object-alive" record on GST_TRACER (level 7) and a "Leaks detected" warning is
// printed. The parent test fails on either. A second test injects a leak into the child to prove the check
// can fail.
#include <string>

#include "plugin_test_util.h"

using namespace nn_gst_test;

namespace {

constexpr int kCycles = 3;

bool is_child() {
  return g_getenv("NN_LEAKS_CHILD") != nullptr;
}

// The child: the cycles themselves. Skipped unless run by the parent.
TEST(NnLeaksChild, Cycles) {
  if (!is_child()) GTEST_SKIP() << "runs as the leaks tracer's child process only";
  const std::string line =
      "videotestsrc num-buffers=6 ! video/x-raw,format=RGBA,width=96,height=64 ! "
      "nnsegment latency-budget=1000 model=" +
      model_path() +
      " ! nnbackground name=bg mode=video ! fakesink "
      "videotestsrc num-buffers=4 pattern=ball ! video/x-raw,format=BGRx,width=40,height=30 ! bg.background "
      // and the copying path: GRAY8 mask output of a letterboxed frame
      "videotestsrc num-buffers=6 ! video/x-raw,format=I420,width=90,height=30 ! "
      "nnsegment latency-budget=1000 output-mode=mask resize=letterbox model=" +
      model_path() + " ! fakesink";
  GError* err = nullptr;
  GstElement* pipe = gst_parse_launch(line.c_str(), &err);
  ASSERT_NE(pipe, nullptr) << (err ? err->message : "");
  GstBus* bus = gst_element_get_bus(pipe);
  for (int cycle = 0; cycle < kCycles; ++cycle) {
    ASSERT_NE(gst_element_set_state(pipe, GST_STATE_PLAYING), GST_STATE_CHANGE_FAILURE);
    GstMessage* msg = gst_bus_timed_pop_filtered(
        bus, 30 * GST_SECOND, static_cast<GstMessageType>(GST_MESSAGE_EOS | GST_MESSAGE_ERROR));
    ASSERT_NE(msg, nullptr) << "cycle " << cycle << " timed out";
    EXPECT_EQ(GST_MESSAGE_TYPE(msg), GST_MESSAGE_EOS) << "cycle " << cycle;
    gst_message_unref(msg);
    ASSERT_EQ(gst_element_set_state(pipe, GST_STATE_NULL), GST_STATE_CHANGE_SUCCESS);
  }
  gst_object_unref(bus);
  gst_object_unref(pipe);
  if (g_getenv("NN_LEAKS_INJECT")) gst_buffer_new();  // deliberately leaked
  std::fprintf(stderr, "NN_LEAKS_CYCLES_DONE %d\n", kCycles);
}

struct ChildResult {
  int exit_status = -1;
  std::string err;
};

ChildResult run_child(bool inject_leak) {
  gchar** env = g_get_environ();
  env = g_environ_setenv(env, "NN_LEAKS_CHILD", "1", TRUE);
  env = g_environ_setenv(env, "GST_TRACERS", "leaks", TRUE);
  env = g_environ_setenv(env, "GST_DEBUG", "GST_TRACER:7", TRUE);
  env = g_environ_setenv(env, "GST_DEBUG_NO_COLOR", "1", TRUE);
  env = g_environ_unsetenv(env, "GST_LEAKS_TRACER_STACK_TRACE");  // slow, and not needed to count
  env = g_environ_unsetenv(env, "G_DEBUG");
  if (inject_leak)
    env = g_environ_setenv(env, "NN_LEAKS_INJECT", "1", TRUE);
  else
    env = g_environ_unsetenv(env, "NN_LEAKS_INJECT");
  gchar* self = g_file_read_link("/proc/self/exe", nullptr);
  gchar* argv[] = {self, const_cast<gchar*>("--gtest_filter=NnLeaksChild.Cycles"), nullptr};
  gchar* out = nullptr;
  gchar* err = nullptr;
  ChildResult r;
  GError* error = nullptr;
  if (!g_spawn_sync(nullptr, argv, env, G_SPAWN_DEFAULT, nullptr, nullptr, &out, &err, &r.exit_status,
                    &error)) {
    ADD_FAILURE() << "cannot run " << self << ": " << error->message;
    g_error_free(error);
  }
  r.err = err ? err : "";
  g_free(out);
  g_free(err);
  g_free(self);
  g_strfreev(env);
  return r;
}

// The object-alive records of the leaks tracer, one per line.
std::string alive_lines(const std::string& log) {
  std::string lines;
  size_t pos = 0;
  while ((pos = log.find("object-alive, type-name=(string)", pos)) != std::string::npos) {
    // Records only, not the tracer's declaration of their format.
    const size_t start = log.rfind('\n', pos) + 1, end = log.find('\n', pos);
    const std::string line = log.substr(start, end - start);
    if (line.find("build_format") == std::string::npos) lines += line + "\n";
    pos = end;
  }
  return lines;
}

TEST(NnLeaks, ThreeStateCyclesLeakNothing) {
  if (is_child()) GTEST_SKIP();
  ASSERT_TRUE(nn_test::require_asset("models/selfie_segmentation.tflite"));
  const ChildResult r = run_child(false);
  ASSERT_NE(r.err.find("NN_LEAKS_CYCLES_DONE 3"), std::string::npos) << "the child did not finish:\n"
                                                                     << r.err;
  EXPECT_TRUE(g_spawn_check_wait_status(r.exit_status, nullptr)) << r.err;
  const std::string alive = alive_lines(r.err);
  EXPECT_TRUE(alive.empty()) << "objects alive at gst_deinit():\n" << alive;
  EXPECT_EQ(r.err.find("Leaks detected"), std::string::npos) << r.err;
}

// The check itself: one leaked GstBuffer in the child must be reported.
TEST(NnLeaks, InjectedLeakIsReported) {
  if (is_child()) GTEST_SKIP();
  ASSERT_TRUE(nn_test::require_asset("models/selfie_segmentation.tflite"));
  const ChildResult r = run_child(true);
  ASSERT_NE(r.err.find("NN_LEAKS_CYCLES_DONE 3"), std::string::npos) << r.err;
  const std::string alive = alive_lines(r.err);
  EXPECT_NE(alive.find("GstBuffer"), std::string::npos) << "the leaks tracer did not see the leak:\n"
                                                        << r.err;
}

}  // namespace

int main(int argc, char** argv) {
  const int ret = nn_gst_test::run_all(argc, argv);
  // The leaks tracer reports when GStreamer shuts down.
  gst_deinit();
  return ret;
}

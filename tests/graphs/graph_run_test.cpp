// The runner: graphs play to EOS with the expected frame count, stop cleanly, report
// errors with the node; the C++ API example and the demo run.
#include <gst/gst.h>

#include <array>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include <gtest/gtest.h>
#include <opencv2/videoio.hpp>

#include "nn/graph/app.h"
#include "test_support.h"

namespace fs = std::filesystem;

namespace {

// Megamind.avi (OpenCV's sample): 270 frames, 720x528, 23.976 fps (counted with OpenCV and
// with gst-launch-1.0 ... ! identity silent=false ! fakesink).
constexpr uint64_t kMegamindFrames = 270;

struct CommandResult {
  int exit_code = -1;
  std::string output;
};

CommandResult run_command(const std::string& cmd) {
  CommandResult r;
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  if (!p) return r;
  std::array<char, 4096> buf{};
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) r.output.append(buf.data(), n);
  const int status = pclose(p);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

int count_video_frames(const std::string& path) {
  cv::VideoCapture cap(path);
  if (!cap.isOpened()) return -1;
  int n = 0;
  cv::Mat f;
  while (cap.read(f)) ++n;
  return n;
}

class GraphRun : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { nn::graph::init(); }
};

TEST_F(GraphRun, SegmentBenchmarkOnMegamindRunsToEosWithEveryFrame) {
  ASSERT_TRUE(nn_test::require_asset("media/Megamind.avi"));
  ASSERT_TRUE(nn_test::require_asset("models/selfie_segmentation.tflite"));
  auto app = nn::graph::App::load("segment-benchmark", {{"source", "file"}});
  ASSERT_TRUE(app.is_ok()) << app.status().message();
  std::atomic<int> eos{0}, stats_calls{0};
  (*app)->on_eos([&] { ++eos; });
  (*app)->on_stats([&](const nn::graph::Stats&) { ++stats_calls; }, std::chrono::milliseconds(200));
  const nn::Status st = (*app)->run();
  ASSERT_TRUE(st.is_ok()) << st.message();
  EXPECT_EQ(eos.load(), 1);
  EXPECT_GT(stats_calls.load(), 0);
  const nn::graph::Stats s = (*app)->stats();
  EXPECT_EQ(s.frames, kMegamindFrames);
  EXPECT_TRUE(s.has_inference);
  // Every frame is accounted for: inferred, or skipped with the previous mask reused.
  EXPECT_GT(s.inferences_run, 0u);
  EXPECT_LE(s.inferences_run + s.inferences_skipped, kMegamindFrames + 1);
  EXPECT_EQ(s.frames_dropped, 0u);
  EXPECT_GT(s.inference_p50_ms, 0.0);
  EXPECT_EQ(s.latency_budget_ms, 1000u);  // the graph's budget reached the element
  EXPECT_FALSE(s.delegate.empty());
}

// nnbackground mode=video with an endless background (a test pattern): the person stream
// (the clip) decides the end, every frame arrives, and the background is the pattern.
TEST_F(GraphRun, BackgroundVideoEndsWithThePersonStream) {
  ASSERT_TRUE(nn_test::require_asset("media/Megamind.avi"));
  ASSERT_TRUE(nn_test::require_asset("models/selfie_segmentation.tflite"));
  auto app = nn::graph::App::load("background-video", {{"background-source", "test"}, {"output", "none"}});
  ASSERT_TRUE(app.is_ok()) << app.status().message();
  std::atomic<int> eos{0};
  (*app)->on_eos([&] { ++eos; });
  const nn::Status st = (*app)->run();
  ASSERT_TRUE(st.is_ok()) << st.message();
  EXPECT_EQ(eos.load(), 1);
  EXPECT_EQ((*app)->stats().frames, kMegamindFrames);
  EXPECT_EQ((*app)->stats().frames_dropped, 0u);
}

TEST_F(GraphRun, BlurOnTestPatternToMp4HasEveryFrame) {
  const std::string out =
      std::string(NN_GRAPH_TEST_OUT) + "/out/blur-test.mp4";  // out/ is made by the runner
  fs::remove_all(std::string(NN_GRAPH_TEST_OUT) + "/out");
  auto app = nn::graph::App::load(
      "background-blur", {{"source", "test"}, {"test-frames", "45"}, {"output", "file"}, {"out", out}});
  ASSERT_TRUE(app.is_ok()) << app.status().message();
  const nn::Status st = (*app)->run();
  ASSERT_TRUE(st.is_ok()) << st.message();
  // A live source behind a leaky one-frame limiter: frames inference cannot take are
  // dropped before nnsegment, so the count is at most 45 and the file holds all that came.
  const uint64_t frames = (*app)->stats().frames;
  EXPECT_GT(frames, 0u);
  EXPECT_LE(frames, 45u);
  EXPECT_EQ(count_video_frames(out), static_cast<int>(frames));
}

TEST_F(GraphRun, StopSendsEosAndFinishesTheFile) {
  const std::string out = std::string(NN_GRAPH_TEST_OUT) + "/stopped.mp4";
  fs::remove(out);
  auto app = nn::graph::App::load("background-blur", {{"source", "test"}, {"output", "file"}, {"out", out}});
  ASSERT_TRUE(app.is_ok()) << app.status().message();
  nn::graph::App* a = app.value().get();
  std::atomic<bool> eos{false};
  a->on_eos([&] { eos = true; });
  a->on_stats(
      [a](const nn::graph::Stats& s) {
        if (s.frames >= 20) a->stop();  // from the callback thread, as an app would
      },
      std::chrono::milliseconds(100));
  const nn::Status st = a->run();  // endless live source: only stop() ends it
  ASSERT_TRUE(st.is_ok()) << st.message();
  EXPECT_TRUE(eos);
  const uint64_t frames = a->stats().frames;
  EXPECT_GE(frames, 20u);
  // EOS reached the muxer: the MP4 is complete and holds what reached the sink.
  EXPECT_EQ(count_video_frames(out), static_cast<int>(frames));
}

TEST_F(GraphRun, ElementErrorNamesTheNodeAndItsLine) {
  auto g = nn::graph::GraphFile::load(std::string(NN_GRAPHS_DIR) + "/segment-benchmark.toml");
  ASSERT_TRUE(g.is_ok());
  nn::graph::BuildOptions opt;
  opt.check_files = false;  // let the element itself find out
  auto app =
      nn::graph::App::create(g.value(), {{"source", "test"}, {"model", "/nonexistent/model.tflite"}}, opt);
  ASSERT_TRUE(app.is_ok()) << app.status().message();
  std::string reported;
  (*app)->on_error([&](const nn::Status& s) { reported = s.message(); });
  const nn::Status st = (*app)->run();
  ASSERT_FALSE(st.is_ok());
  const nn::graph::NodeDecl* seg = g->node("segment");
  ASSERT_NE(seg, nullptr);
  EXPECT_NE(st.message().find(g->where(seg->line) + ": node 'segment' (nnsegment): "), std::string::npos)
      << st.message();
  EXPECT_NE(st.message().find("/nonexistent/model.tflite"), std::string::npos) << st.message();
  EXPECT_EQ(reported, st.message());
}

// A decoded format the next node does not take is found when decodebin's pad appears: the
// error names that node and asks for a converter (GStreamer alone blames decodebin: not-linked).
TEST_F(GraphRun, DecodedFormatNobodyTakesNamesTheNodeAndTheConverter) {
  const std::string y4m = std::string(NN_GRAPH_TEST_OUT) + "/y444.y4m";
  const std::string make = "gst-launch-1.0 -q videotestsrc num-buffers=3 ! "
                           "video/x-raw,format=Y444,width=64,height=48 ! y4menc ! filesink location=" + y4m;
  ASSERT_EQ(std::system(make.c_str()), 0) << make;
  auto app = nn::graph::App::load(std::string(NN_GRAPH_TEST_DATA) + "/decodebin_runtime_format.toml",
                                  {{"location", y4m}});
  ASSERT_TRUE(app.is_ok()) << app.status().message();  // the static check cannot know the file
  const nn::Status st = (*app)->run();
  ASSERT_FALSE(st.is_ok());
  EXPECT_NE(st.message().find("node 'segment' cannot take what node 'decode' outputs (video/x-raw"),
            std::string::npos)
      << st.message();
  EXPECT_NE(st.message().find("format=(string)Y444"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("put a videoconvert between them"), std::string::npos) << st.message();
}

TEST_F(GraphRun, MissingModelIsCaughtBeforePlaying) {
  auto app = nn::graph::App::load("segment-benchmark", {{"model", "/nonexistent/model.tflite"}});
  ASSERT_FALSE(app.is_ok());
  EXPECT_NE(app.status().message().find(
                "node 'segment': property 'model': file not found: /nonexistent/model.tflite"),
            std::string::npos)
      << app.status().message();
}

TEST_F(GraphRun, SetPropertyOnARunningNode) {
  auto app = nn::graph::App::load(std::string(NN_GRAPH_TEST_DATA) + "/tiny_valid.toml", {{"frames", "5"}});
  ASSERT_TRUE(app.is_ok()) << app.status().message();
  EXPECT_TRUE((*app)->set_property("sink", "sync", "false").is_ok());
  const nn::Status bad = (*app)->set_property("sink", "sync", "perhaps");
  EXPECT_EQ(bad.message(), "node 'sink': bad value 'perhaps' for property 'sync': expected true or false");
  EXPECT_FALSE((*app)->set_property("nope", "sync", "true").is_ok());
  ASSERT_TRUE((*app)->run().is_ok());
  EXPECT_EQ((*app)->stats().frames, 5u);
}

TEST_F(GraphRun, GraphExampleRunsATestPatternToTheEnd) {
  const CommandResult r = run_command(std::string(NN_GRAPH_EXAMPLE_BIN) +
                                      " background-blur source=test test-frames=30 output=none");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("end of stream"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("frames:            "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("inferences:"), std::string::npos) << r.output;
}

TEST_F(GraphRun, NngraphRunPrintsStatusAndSummary) {
  const CommandResult r =
      run_command(std::string(NN_NNGRAPH_BIN) +
                  " run background-blur source=test test-frames=40 output=none --stats-interval 200");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find(" fps | inference "), std::string::npos) << r.output;  // the status line
  EXPECT_NE(r.output.find("summary of background-blur (finished):"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("frames:            "), std::string::npos) << r.output;
}

TEST_F(GraphRun, NngraphInterruptEndsWithEosAndSummary) {
  // SIGINT once the graph runs (its first status line, so the handler is in place however
  // loaded the machine): the live source gets EOS, the summary follows, exit code 0. A run
  // that ignored the signal is killed after 60 s instead of hanging the suite. The old log
  // goes first: its status line, read before the new run truncates the file, had sent the
  // signal before the handler was in place.
  const std::string log = std::string(NN_GRAPH_TEST_OUT) + "/interrupt.log";
  const CommandResult r = run_command(
      "sh -c 'rm -f " + log + "; " + std::string(NN_NNGRAPH_BIN) +
      " run background-blur source=test output=none --stats-interval 200 > " + log + " 2>&1 & pid=$!; "
      "i=0; while [ $i -lt 600 ] && ! grep -q \" fps | inference \" " + log + "; do sleep 0.1; i=$((i+1)); done; "
      "kill -INT $pid; i=0; while [ $i -lt 600 ] && kill -0 $pid 2>/dev/null; do sleep 0.1; i=$((i+1)); done; "
      "kill -KILL $pid 2>/dev/null; wait $pid; code=$?; cat " + log + "; exit $code'");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("summary of background-blur (finished):"), std::string::npos) << r.output;
}

TEST_F(GraphRun, DemoWritesTheFileWithAHudAndVideoBackground) {
  const std::string out = std::string(NN_GRAPH_TEST_OUT) + "/demo.mp4";
  fs::remove(out);
  const CommandResult r =
      run_command("env -u DISPLAY " + std::string(NN_DEMO_BIN) +
                  " --input test --frames 30 --background video --hud -o file --out '" + out + "'");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  const int frames = count_video_frames(out);
  EXPECT_GT(frames, 0) << r.output;
  // The person stream (30 test frames) ends the graph: without ends-graph the compositor would
  // go on for the whole background video (270 frames at 23.976 fps, ~340 output frames). A
  // live compositor may add frames while the first inference runs, hence the margin.
  EXPECT_LT(frames, 100) << r.output;
  EXPECT_NE(r.output.find("frames:            " + std::to_string(frames) + " in"), std::string::npos)
      << r.output;
}

TEST_F(GraphRun, DemoHelpExplainsTheDefaults) {
  const CommandResult r = run_command(std::string(NN_DEMO_BIN) + " --help");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.output.find("With no options it reads the sample video"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("--background"), std::string::npos);
}

}  // namespace

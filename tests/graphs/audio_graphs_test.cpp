// The sound graphs: denoise-file writes every sample of its input, denoise-mic runs a live
// source; the video-call graph keeps sound and picture in sync: Megamind.avi (picture and
// soundtrack) through nnsegment + nnbackground and nndenoise into an MP4; in that file the
// soundtrack sits where it sat in the original relative to the picture. Both offsets are
// measured on content: the picture's frame-to-frame motion and the sound's waveform are
// cross-correlated with the original's, each on its own timestamps.
#include <gst/app/gstappsink.h>
#include <gst/gst.h>

#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "nn/graph/app.h"
#include "test_support.h"

namespace {

constexpr int kRate = 16000;

struct Decoded {
  std::vector<double> frame_pts;  // s
  std::vector<double> motion;     // mean |frame - previous frame|, 0 for the first
  double audio_start = -1;        // s, PTS of the first sample
  std::vector<float> audio;       // mono, 16 kHz, placed by PTS from audio_start
};

Decoded decode(const std::string& path) {
  const bool has_video = path.size() < 4 || path.substr(path.size() - 4) != ".wav";
  const std::string line = "filesrc location=\"" + path + "\" ! decodebin name=d " +
                           std::string(has_video ? "d. ! " : "videotestsrc num-buffers=0 ! ") +
                           "queue ! videoconvert ! videoscale ! video/x-raw,format=GRAY8,width=96,height=72 ! "
                           "appsink name=v sync=false "
                           "d. ! queue ! audioconvert ! audioresample ! "
                           "audio/x-raw,format=F32LE,channels=1,rate=16000 ! appsink name=a sync=false";
  GError* err = nullptr;
  GstElement* pipe = gst_parse_launch(line.c_str(), &err);
  EXPECT_NE(pipe, nullptr) << (err ? err->message : "");
  Decoded out;
  if (!pipe) return out;
  GstElement* v = gst_bin_get_by_name(GST_BIN(pipe), "v");
  GstElement* a = gst_bin_get_by_name(GST_BIN(pipe), "a");
  gst_element_set_state(pipe, GST_STATE_PLAYING);
  std::vector<uint8_t> prev;
  bool v_done = false, a_done = false;
  while (!v_done || !a_done) {
    if (!v_done) {
      GstSample* s = gst_app_sink_try_pull_sample(GST_APP_SINK(v), 100 * GST_MSECOND);
      if (!s && gst_app_sink_is_eos(GST_APP_SINK(v))) v_done = true;
      if (s) {
        GstBuffer* b = gst_sample_get_buffer(s);
        GstMapInfo m;
        gst_buffer_map(b, &m, GST_MAP_READ);
        std::vector<uint8_t> cur(m.data, m.data + std::min<size_t>(m.size, 96 * 72));
        double d = 0;
        if (!prev.empty())
          for (size_t i = 0; i < cur.size(); ++i) d += std::abs(int(cur[i]) - int(prev[i]));
        out.motion.push_back(d / cur.size());
        out.frame_pts.push_back(GST_BUFFER_PTS(b) / 1e9);
        prev = cur;
        gst_buffer_unmap(b, &m);
        gst_sample_unref(s);
      }
    }
    if (!a_done) {
      GstSample* s = gst_app_sink_try_pull_sample(GST_APP_SINK(a), 100 * GST_MSECOND);
      if (!s && gst_app_sink_is_eos(GST_APP_SINK(a))) a_done = true;
      if (s) {
        GstBuffer* b = gst_sample_get_buffer(s);
        const double pts = GST_BUFFER_PTS(b) / 1e9;
        if (out.audio_start < 0) out.audio_start = pts;
        GstMapInfo m;
        gst_buffer_map(b, &m, GST_MAP_READ);
        const size_t at = static_cast<size_t>(std::llround((pts - out.audio_start) * kRate));
        const size_t n = m.size / sizeof(float);
        if (out.audio.size() < at + n) out.audio.resize(at + n, 0.0f);
        memcpy(&out.audio[at], m.data, m.size);
        gst_buffer_unmap(b, &m);
        gst_sample_unref(s);
      }
    }
  }
  gst_element_set_state(pipe, GST_STATE_NULL);
  gst_object_unref(v);
  gst_object_unref(a);
  gst_object_unref(pipe);
  return out;
}

// The lag (in elements of b) at which b best matches a, within +-max_lag; normalized
// correlation, so a level change (denoising, blur) does not matter.
int best_lag(const std::vector<double>& a, const std::vector<double>& b, int max_lag, double* score) {
  int best = 0;
  double best_c = -2;
  for (int lag = -max_lag; lag <= max_lag; ++lag) {
    double ab = 0, aa = 0, bb = 0;
    for (size_t i = 0; i < a.size(); ++i) {
      const long j = static_cast<long>(i) + lag;
      if (j < 0 || j >= static_cast<long>(b.size())) continue;
      ab += a[i] * b[j], aa += a[i] * a[i], bb += b[j] * b[j];
    }
    const double c = ab / std::sqrt(aa * bb + 1e-30);
    if (c > best_c) best_c = c, best = lag;
  }
  if (score) *score = best_c;
  return best;
}

TEST(VideoCall, MuxedFileKeepsSoundAndPictureInSync) {
  ASSERT_TRUE(nn_test::require_asset("media/Megamind.avi"));
  ASSERT_TRUE(nn_test::require_asset("models/dtln.nnapi")) << "scripts/setup.sh makes it (nnconvert --stream)";
  nn::graph::init();
  const std::string out = std::string(NN_GRAPH_TEST_OUT) + "/video-call-sync.mp4";
  std::filesystem::remove(out);
  auto app = nn::graph::App::load("video-call", {{"source", "file"}, {"output", "file"}, {"out", out}});
  ASSERT_TRUE(app.is_ok()) << app.status().message();
  const nn::Status st = (*app)->run();
  ASSERT_TRUE(st.is_ok()) << st.message();

  const Decoded in = decode(nn_test::asset("media/Megamind.avi"));
  const Decoded got = decode(out);
  ASSERT_GT(in.motion.size(), 200u);
  // Every frame in the file (OpenCV counts all 270; GStreamer's MP4 decode may hold back
  // the last one).
  ASSERT_GE(got.motion.size() + 1, in.motion.size());
  ASSERT_GT(got.audio.size(), static_cast<size_t>(10 * kRate));

  // Picture: which original frame each output frame shows, and when.
  double vscore = 0;
  const int frame_lag = best_lag(in.motion, got.motion, 5, &vscore);
  // (Frames whose mask was reused blur a little differently: the match is not perfect.)
  EXPECT_GT(vscore, 0.5);
  const double video_offset = got.frame_pts[50 + frame_lag] - in.frame_pts[50];

  // Sound: the denoised soundtrack against the original, sample lags up to +-0.25 s.
  std::vector<double> a(in.audio.begin(), in.audio.end()), b(got.audio.begin(), got.audio.end());
  double ascore = 0;
  const int sample_lag = best_lag(a, b, kRate / 4, &ascore);
  EXPECT_GT(ascore, 0.5);
  const double audio_offset = (got.audio_start + double(sample_lag) / kRate) - in.audio_start;

  const double av_ms = 1000 * (audio_offset - video_offset);
  std::printf("video offset %.1f ms (frame lag %d, score %.3f), audio offset %.1f ms (score %.3f): A/V %.1f ms\n",
              1000 * video_offset, frame_lag, vscore, 1000 * audio_offset, ascore, av_ms);
  // Lip sync is noticed from about 45 ms (sound early) / 125 ms (sound late): hold it to
  // a few milliseconds, well inside one video frame (42 ms).
  EXPECT_LT(std::fabs(av_ms), 5.0);
}

// The LibriSpeech clip (48 kHz) to a 16 kHz WAV: every sample (7.285 s), denoised.
TEST(DenoiseGraphs, FileToFileKeepsEverySample) {
  ASSERT_TRUE(nn_test::require_asset("media/librispeech-7729-102255-0000.wav"));
  ASSERT_TRUE(nn_test::require_asset("models/dtln.nnapi"));
  nn::graph::init();
  const std::string out = std::string(NN_GRAPH_TEST_OUT) + "/denoised.wav";
  std::filesystem::remove(out);
  auto app = nn::graph::App::load("denoise-file", {{"out", out}});
  ASSERT_TRUE(app.is_ok()) << app.status().message();
  const nn::Status st = (*app)->run();
  ASSERT_TRUE(st.is_ok()) << st.message();
  const Decoded in = decode(nn_test::asset("media/librispeech-7729-102255-0000.wav"));
  const Decoded got = decode(out);
  EXPECT_EQ(got.audio.size(), static_cast<size_t>(116560));  // 349680 samples at 48 kHz
  std::vector<double> a(in.audio.begin(), in.audio.end()), b(got.audio.begin(), got.audio.end());
  double score = 0;
  EXPECT_EQ(best_lag(a, b, 800, &score), 0);
  EXPECT_GT(score, 0.9) << "clean speech comes out nearly as it went in";
}

// A live test source, 100 buffers of 10 ms, through to nowhere: it ends, nothing fails.
TEST(DenoiseGraphs, MicGraphRunsALiveSource) {
  ASSERT_TRUE(nn_test::require_asset("models/dtln.nnapi"));
  nn::graph::init();
  auto app = nn::graph::App::load("denoise-mic", {{"source", "test"}, {"test-buffers", "100"}, {"output", "none"}});
  ASSERT_TRUE(app.is_ok()) << app.status().message();
  const nn::Status st = (*app)->run();
  ASSERT_TRUE(st.is_ok()) << st.message();
}

}  // namespace

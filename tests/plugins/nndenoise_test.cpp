// nndenoise with GstHarness and small pipelines, on the real DTLN model (made by the
// nndenoise_model fixture with nnconvert) and real recorded speech (the LibriSpeech clip):
// sample-exact timing for every buffer size, the measured delay against the reported one,
// DISCONT / FLUSH / EOS, S16 and F32, independent stereo channels, bypass crossfades,
// over-budget hops, non-finite input, bad models and rates, stats.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <fstream>
#include <numeric>
#include <random>
#include <thread>

#include <gst/app/gstappsink.h>
#include <gst/audio/audio.h>

#include "plugin_test_util.h"

using namespace nn_gst_test;

namespace {

constexpr int kRate = 16000;

std::string dtln_model() {
  return NN_DTLN_MODEL;
}

// The speech clip, decoded by GStreamer to mono F32 at `rate`.
std::vector<float> decode_audio(const std::string& path, int rate = kRate) {
  const std::string line = "filesrc location=\"" + path +
                           "\" ! decodebin ! audioconvert ! audioresample ! "
                           "audio/x-raw,format=F32LE,layout=interleaved,channels=1,rate=" +
                           std::to_string(rate) + " ! appsink name=sink sync=false";
  return nn_gst_test::pull_f32(line);
}

const std::vector<float>& speech() {
  static const std::vector<float> s = decode_audio(nn_test::asset(NN_SPEECH_ASSET));
  return s;
}

// `n` samples of the clip's speech, from `offset` samples into it (the clip's first two
// seconds are digital silence).
std::vector<float> voiced(size_t n, size_t offset = 0) {
  const size_t from = std::min(speech().size(), 2 * kRate + offset);
  const size_t to = std::min(speech().size(), from + n);
  return std::vector<float>(speech().begin() + from, speech().begin() + to);
}

// Seeded white noise scaled so that speech + noise has `snr_db`.
std::vector<float> noisy(const std::vector<float>& clean, double snr_db, uint32_t seed = 7) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> noise(clean.size());
  for (float& v : noise) v = nd(rng);
  const double ps = std::inner_product(clean.begin(), clean.end(), clean.begin(), 0.0);
  const double pn = std::inner_product(noise.begin(), noise.end(), noise.begin(), 0.0);
  const double g = std::sqrt(ps / pn / std::pow(10.0, snr_db / 10.0));
  std::vector<float> out(clean.size());
  for (size_t i = 0; i < clean.size(); ++i) out[i] = clean[i] + static_cast<float>(g) * noise[i];
  return out;
}

// Scale-invariant SDR of `est` against `ref`, dB.
double si_sdr(const std::vector<float>& ref, const std::vector<float>& est, size_t from = 0, size_t to = 0) {
  if (to == 0) to = std::min(ref.size(), est.size());
  double rr = 0, re = 0;
  for (size_t i = from; i < to; ++i) rr += double(ref[i]) * ref[i], re += double(ref[i]) * est[i];
  const double a = re / rr;
  double s = 0, e = 0;
  for (size_t i = from; i < to; ++i) {
    const double t = a * ref[i];
    s += t * t;
    e += (est[i] - t) * (est[i] - t);
  }
  return 10 * std::log10(s / e);
}

struct OutBuffer {
  GstClockTime pts, duration;
  guint64 offset, offset_end;
  size_t frames;
  bool discont;
};

// Runs nndenoise in a harness over interleaved `in`, `buffer_frames` at a time, then EOS.

class Harness {
 public:
  explicit Harness(const std::string& props, int channels = 1, const char* format = "F32LE", bool live = false)
      : channels_(channels), s16_(std::string(format) == "S16LE") {
    const std::string line = "nndenoise model=\"" + dtln_model() + "\" " + props;
    h_ = gst_harness_new_parse(line.c_str());
    element_ = gst_harness_find_element(h_, "nndenoise");
    gst_harness_set_live(h_, live);
    gst_harness_set_src_caps_str(h_, ("audio/x-raw,format=" + std::string(format) +
                                      ",layout=interleaved,rate=16000,channels=" + std::to_string(channels))
                                         .c_str());
  }
  ~Harness() {
    if (element_) gst_object_unref(element_);
    gst_harness_teardown(h_);
  }
  GstHarness* h() { return h_; }
  GstElement* element() { return element_; }

  GstBuffer* make(const float* p, size_t frames, guint64 at_frame, guint64 pts_base = 0) {
    const size_t n = frames * channels_;
    GstBuffer* b = gst_buffer_new_allocate(nullptr, n * (s16_ ? 2 : 4), nullptr);
    GstMapInfo map;
    gst_buffer_map(b, &map, GST_MAP_WRITE);
    if (s16_) {
      auto* o = reinterpret_cast<gint16*>(map.data);
      for (size_t i = 0; i < n; ++i) o[i] = static_cast<gint16>(std::clamp(std::lrint(p[i] * 32768.0f), -32768L, 32767L));
    } else {
      memcpy(map.data, p, n * sizeof(float));
    }
    gst_buffer_unmap(b, &map);
    GST_BUFFER_PTS(b) = pts_base + gst_util_uint64_scale_int(at_frame, GST_SECOND, kRate);
    GST_BUFFER_DURATION(b) = gst_util_uint64_scale_int(frames, GST_SECOND, kRate);
    GST_BUFFER_OFFSET(b) = at_frame;
    GST_BUFFER_OFFSET_END(b) = at_frame + frames;
    return b;
  }
  // Pushes [from, from+frames) of `in` in buffers of `buffer_frames`.
  void push(const std::vector<float>& in, size_t buffer_frames, size_t from = 0, size_t frames = SIZE_MAX,
            guint64 pts_base = 0, guint64 frame_base = 0) {
    const size_t total = std::min(frames, in.size() / channels_ - from);
    for (size_t f = 0; f < total; f += buffer_frames) {
      const size_t n = std::min(buffer_frames, total - f);
      ASSERT_EQ(gst_harness_push(h_, make(&in[(from + f) * channels_], n, frame_base + f, pts_base)), GST_FLOW_OK);
      collect();
    }
  }
  void eos() {
    ASSERT_TRUE(gst_harness_push_event(h_, gst_event_new_eos()));
    collect();
  }
  // Takes every buffer the element has pushed so far.
  void collect() {
    while (GstBuffer* b = gst_harness_try_pull(h_)) {
      GstMapInfo map;
      gst_buffer_map(b, &map, GST_MAP_READ);
      const size_t n = map.size / (s16_ ? 2 : 4);
      if (s16_) {
        const auto* p = reinterpret_cast<const gint16*>(map.data);
        for (size_t i = 0; i < n; ++i) out.push_back(p[i] / 32768.0f);
      } else {
        const auto* p = reinterpret_cast<const float*>(map.data);
        out.insert(out.end(), p, p + n);
      }
      gst_buffer_unmap(b, &map);
      buffers.push_back({GST_BUFFER_PTS(b), GST_BUFFER_DURATION(b), GST_BUFFER_OFFSET(b), GST_BUFFER_OFFSET_END(b),
                         n / channels_, GST_BUFFER_IS_DISCONT(b) != 0});
      gst_buffer_unref(b);
    }
  }

  std::vector<float> out;
  std::vector<OutBuffer> buffers;

 private:
  GstHarness* h_ = nullptr;
  GstElement* element_ = nullptr;
  int channels_;
  bool s16_;
};

std::vector<float> run_once(const std::vector<float>& in, size_t buffer_frames, const std::string& props = "",
                            int channels = 1, const char* format = "F32LE") {
  Harness h("latency-budget=2000 " + props, channels, format);
  h.push(in, buffer_frames);
  h.eos();
  return h.out;
}

// Timestamps and offsets continuous from `pts0` / `offset0`; the frames they cover.
size_t check_continuous(const std::vector<OutBuffer>& bufs, GstClockTime pts0, guint64 offset0) {
  size_t frames = 0;
  for (const OutBuffer& b : bufs) {
    EXPECT_EQ(b.pts, pts0 + gst_util_uint64_scale_int(frames, GST_SECOND, kRate)) << "buffer at frame " << frames;
    EXPECT_EQ(b.pts + b.duration, pts0 + gst_util_uint64_scale_int(frames + b.frames, GST_SECOND, kRate));
    EXPECT_EQ(b.offset, offset0 + frames);
    EXPECT_EQ(b.offset_end, offset0 + frames + b.frames);
    frames += b.frames;
  }
  return frames;
}

double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b, size_t from = 0, size_t to = SIZE_MAX) {
  double m = 0;
  to = std::min({to, a.size(), b.size()});
  for (size_t i = from; i < to; ++i) m = std::max(m, double(std::fabs(a[i] - b[i])));
  return m;
}

class NnDenoiseTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(g_file_test(dtln_model().c_str(), G_FILE_TEST_EXISTS))
        << dtln_model() << " missing: the nndenoise_model ctest fixture makes it";
    ASSERT_TRUE(nn_test::require_asset(NN_SPEECH_ASSET));
    ASSERT_GT(speech().size(), static_cast<size_t>(5 * kRate));
  }
};

// Every buffer size: as many samples out as in, timestamps and offsets continuous, the
// same output whatever the buffer size (nothing skipped, repeated or shifted), speech
// denoised.
TEST_F(NnDenoiseTest, SampleExactForEveryBufferSize) {
  const std::vector<float> clean = voiced(3 * kRate);
  const std::vector<float> in = noisy(clean, 5.0);
  std::vector<float> reference;
  for (size_t size : {4096, 441, 127, 1}) {
    SCOPED_TRACE("buffer size " + std::to_string(size));
    Harness h("latency-budget=2000");
    h.push(in, size);
    h.eos();
    ASSERT_FALSE(h.buffers.empty());
    EXPECT_TRUE(h.buffers.front().discont);
    EXPECT_EQ(check_continuous(h.buffers, 0, 0), in.size());
    ASSERT_EQ(h.out.size(), in.size());
    EXPECT_EQ(stat_u64(h.element(), "samples-in"), in.size());
    EXPECT_EQ(stat_u64(h.element(), "samples-out"), in.size());
    EXPECT_EQ(stat_u64(h.element(), "hops-late"), 0u);
    EXPECT_EQ(stat_u64(h.element(), "hops-bypassed"), 0u);
    if (reference.empty()) {
      reference = h.out;
      const double before = si_sdr(clean, in), after = si_sdr(clean, h.out);
      EXPECT_GT(after - before, 4.0) << "SI-SDR " << before << " dB in, " << after << " dB out";
    } else {
      EXPECT_EQ(max_abs_diff(reference, h.out), 0.0);
    }
  }
}

// The delay: (1) the processed output is aligned with its timestamps (the model's own delay
// is taken out exactly: the cross-correlation with the clean speech peaks at lag 0); (2) the
// longest any sample stays inside, measured pushing one sample at a time, is the delay the
// LATENCY query reports (minus the budget, which is inference time, not samples).
TEST_F(NnDenoiseTest, MeasuredDelayIsTheReportedOne) {
  const std::vector<float> clean = voiced(2 * kRate);
  const std::vector<float> in = noisy(clean, 10.0);
  Harness h("latency-budget=7", 1, "F32LE", /*live=*/true);
  gst_harness_set_upstream_latency(h.h(), 0);
  size_t max_hold = 0;
  for (size_t f = 0; f < in.size(); ++f) {
    const size_t before = h.out.size();
    ASSERT_EQ(gst_harness_push(h.h(), h.make(&in[f], 1, f)), GST_FLOW_OK);
    h.collect();
    // Output sample m left when sample f had gone in: it waited f - m samples.
    if (h.out.size() > before) max_hold = std::max(max_hold, f - before);
  }
  const GstClockTime reported = gst_harness_query_latency(h.h());
  const guint64 reported_hold = gst_util_uint64_scale_round(reported - 7 * GST_MSECOND, kRate, GST_SECOND);
  EXPECT_EQ(max_hold, reported_hold) << "reported latency " << reported << " ns";
  EXPECT_NEAR(stat_double(h.element(), "delay-ms"), 1000.0 * max_hold / kRate, 0.07);
  h.eos();
  ASSERT_EQ(h.out.size(), in.size());

  // Cross-correlation of the output with the clean speech, lags -600..600.
  int best_lag = 0;
  double best = -1;
  for (int lag = -600; lag <= 600; ++lag) {
    double c = 0;
    for (size_t i = 1000; i + 1000 < clean.size(); ++i) c += double(clean[i]) * h.out[i + lag];
    if (c > best) best = c, best_lag = lag;
  }
  EXPECT_EQ(best_lag, 0);
}

// DISCONT: what is held goes out first (stamped after the previous chunk), then the new
// chunk starts on its own timestamps from a reset state: its output equals a fresh run's.
TEST_F(NnDenoiseTest, DiscontDrainsThenResets) {
  const std::vector<float> in = noisy(voiced(2 * kRate), 5.0);
  const size_t half = kRate;
  const std::vector<float> second(in.begin() + half, in.end());
  const std::vector<float> fresh = run_once(second, 441);

  Harness h("latency-budget=2000");
  h.push(in, 441, 0, half);
  const size_t out_before = h.out.size();
  EXPECT_LT(out_before, half) << "some samples are held";
  const GstClockTime gap = 10 * GST_SECOND;
  GstBuffer* b = h.make(&second[0], 441, 0, gap);
  GST_BUFFER_OFFSET(b) = GST_BUFFER_OFFSET_NONE;
  GST_BUFFER_OFFSET_END(b) = GST_BUFFER_OFFSET_NONE;
  GST_BUFFER_FLAG_SET(b, GST_BUFFER_FLAG_DISCONT);
  ASSERT_EQ(gst_harness_push(h.h(), b), GST_FLOW_OK);
  h.collect();
  h.push(second, 441, 441, SIZE_MAX, gap, 441);
  h.eos();
  ASSERT_EQ(h.out.size(), in.size());
  // First chunk: continuous and complete, ending with the drained tail.
  size_t first_frames = 0, k = 0;
  while (k < h.buffers.size() && first_frames < half) first_frames += h.buffers[k++].frames;
  EXPECT_EQ(first_frames, half);
  EXPECT_EQ(check_continuous({h.buffers.begin(), h.buffers.begin() + k}, 0, 0), half);
  // Second chunk: DISCONT, on the new timeline, as a fresh element makes it.
  ASSERT_LT(k, h.buffers.size());
  EXPECT_TRUE(h.buffers[k].discont);
  EXPECT_EQ(check_continuous({h.buffers.begin() + k, h.buffers.end()}, gap,
                             gst_util_uint64_scale_int_round(gap, kRate, GST_SECOND)),
            second.size());
  const std::vector<float> got(h.out.begin() + half, h.out.end());
  EXPECT_LT(max_abs_diff(got, fresh), 1e-6);
}

// FLUSH: what was held is dropped, the state is reset: the same input again gives the
// same output as the first time.
TEST_F(NnDenoiseTest, FlushResetsTheState) {
  const std::vector<float> in = noisy(voiced(kRate), 5.0);
  const std::vector<float> first = run_once(in, 441);
  ASSERT_EQ(first.size(), in.size());
  Harness h("latency-budget=2000");
  // Half a stream, then a flush in the middle of it, then the whole stream again.
  h.push(in, 441, 0, in.size() / 2);
  ASSERT_TRUE(gst_harness_push_event(h.h(), gst_event_new_flush_start()));
  ASSERT_TRUE(gst_harness_push_event(h.h(), gst_event_new_flush_stop(TRUE)));
  GstSegment seg;
  gst_segment_init(&seg, GST_FORMAT_TIME);
  ASSERT_TRUE(gst_harness_push_event(h.h(), gst_event_new_segment(&seg)));
  h.collect();
  h.out.clear();
  h.buffers.clear();
  h.push(in, 441);
  h.eos();
  ASSERT_EQ(h.out.size(), in.size()) << "nothing from before the flush comes out after it";
  EXPECT_LT(max_abs_diff(first, h.out), 1e-6);
  EXPECT_EQ(check_continuous(h.buffers, 0, 0), in.size());
}

// EOS lets the tail out: the last buffer ends exactly where the input did.
TEST_F(NnDenoiseTest, EosDrainsTheTail) {
  const std::vector<float> in = noisy(voiced(1000), 5.0);
  Harness h("latency-budget=2000");
  h.push(in, 1000);
  const size_t before_eos = h.out.size();
  EXPECT_LT(before_eos, in.size());
  h.eos();
  EXPECT_EQ(h.out.size(), in.size());
  ASSERT_FALSE(h.buffers.empty());
  const OutBuffer& last = h.buffers.back();
  EXPECT_EQ(last.pts + last.duration, gst_util_uint64_scale_int(in.size(), GST_SECOND, kRate));
  GstEvent* e = nullptr;
  bool saw_eos = false;
  while ((e = gst_harness_try_pull_event(h.h()))) {
    saw_eos |= GST_EVENT_TYPE(e) == GST_EVENT_EOS;
    gst_event_unref(e);
  }
  EXPECT_TRUE(saw_eos);
}

// S16LE in and out gives what F32LE gives, to 16-bit precision.
TEST_F(NnDenoiseTest, S16AgreesWithF32) {
  const std::vector<float> in = noisy(voiced(2 * kRate), 5.0);
  std::vector<float> q(in.size());  // the S16 input, exactly
  for (size_t i = 0; i < in.size(); ++i) q[i] = std::clamp(std::lrint(in[i] * 32768.0f), -32768L, 32767L) / 32768.0f;
  const std::vector<float> f32 = run_once(q, 441);
  const std::vector<float> s16 = run_once(q, 441, "", 1, "S16LE");
  ASSERT_EQ(s16.size(), in.size());
  EXPECT_LT(max_abs_diff(f32, s16), 2.0 / 32768.0);
  EXPECT_GT(std::inner_product(s16.begin(), s16.end(), s16.begin(), 0.0), 1.0) << "not silence";
}

// Stereo: each channel has its own state; each comes out as it would alone.
TEST_F(NnDenoiseTest, StereoChannelsAreIndependent) {
  const std::vector<float> left = noisy(voiced(2 * kRate), 5.0, 1);
  // The right channel: the same speech a second later, other noise.
  const std::vector<float> right =
      noisy(voiced(2 * kRate, kRate / 2), 0.0, 2);
  std::vector<float> stereo(left.size() * 2);
  for (size_t i = 0; i < left.size(); ++i) stereo[2 * i] = left[i], stereo[2 * i + 1] = right[i];
  const std::vector<float> both = run_once(stereo, 441, "", 2);
  ASSERT_EQ(both.size(), stereo.size());
  const std::vector<float> l = run_once(left, 441), r = run_once(right, 441);
  std::vector<float> got_l(left.size()), got_r(left.size());
  for (size_t i = 0; i < left.size(); ++i) got_l[i] = both[2 * i], got_r[i] = both[2 * i + 1];
  EXPECT_LT(max_abs_diff(got_l, l), 1e-6);
  EXPECT_LT(max_abs_diff(got_r, r), 1e-6);
  EXPECT_GT(max_abs_diff(got_l, got_r), 0.01);
}

// bypass=true: the input itself, sample for sample, at the same timing.
TEST_F(NnDenoiseTest, BypassIsTheInputExactly) {
  const std::vector<float> in = noisy(voiced(kRate), 5.0);
  Harness h("bypass=true");
  h.push(in, 441);
  h.eos();
  ASSERT_EQ(h.out.size(), in.size());
  EXPECT_EQ(max_abs_diff(in, h.out), 0.0);
  EXPECT_EQ(stat_u64(h.element(), "hops-run"), 0u);
  EXPECT_GE(stat_u64(h.element(), "hops-bypassed"), in.size() / 128);
}

// Mains hum under speech: DTLN removes it, so the processed and unprocessed signals differ
// by the hum. Toggling bypass while the audio flows must not click: no sample-to-sample
// step larger than the steepest either signal has on its own (a hard switch jumps by the
// hum's amplitude).
TEST_F(NnDenoiseTest, BypassToggleIsClickFree) {
  std::vector<float> in = voiced(3 * kRate);
  for (size_t i = 0; i < in.size(); ++i) in[i] = 0.5f * in[i] + 0.3f * std::sin(2 * M_PI * 100.0 * i / kRate);
  const std::vector<float> processed = run_once(in, 160);
  auto max_step = [](const std::vector<float>& v) {
    double m = 0;
    for (size_t i = 1; i < v.size(); ++i) m = std::max(m, double(std::fabs(v[i] - v[i - 1])));
    return m;
  };
  Harness h("latency-budget=2000");
  for (size_t f = 0, k = 0; f < in.size(); f += 160, ++k) {
    if (k % 25 == 12) g_object_set(h.element(), "bypass", (k / 25) % 2 == 0, nullptr);
    ASSERT_EQ(gst_harness_push(h.h(), h.make(&in[f], std::min<size_t>(160, in.size() - f), f)), GST_FLOW_OK);
    h.collect();
  }
  h.eos();
  ASSERT_EQ(h.out.size(), in.size());
  EXPECT_GT(stat_u64(h.element(), "hops-bypassed"), 100u);
  EXPECT_GT(stat_u64(h.element(), "hops-run"), 100u);
  // The switches really happened: the output is partly the input, partly processed.
  EXPECT_GT(max_abs_diff(h.out, in), 0.1);
  EXPECT_GT(max_abs_diff(h.out, processed), 0.1);
  const double bound = std::max(max_step(in), max_step(processed));
  EXPECT_LE(max_step(h.out), 1.1 * bound) << "input steps " << max_step(in) << ", processed " << max_step(processed);
}

// Over budget (live, a budget of 0: no hop is waited for): hops go out unprocessed and are
// counted, yet every sample comes out once, in order, and finite; with the budget back the
// model (whose state was kept valid) denoises again.
TEST_F(NnDenoiseTest, OverBudgetHopsPassThroughAndNothingIsLost) {
  const std::vector<float> clean = voiced(3 * kRate);
  const std::vector<float> in = noisy(clean, 5.0);
  Harness h("latency-budget=0", 1, "F32LE", /*live=*/true);
  const size_t half = in.size() / 2;
  h.push(in, 64, 0, half);
  const guint64 late = stat_u64(h.element(), "hops-late");
  EXPECT_GT(late, 10u);
  g_object_set(h.element(), "latency-budget", 2000u, nullptr);
  h.push(in, 64, half, SIZE_MAX, 0, half);
  h.eos();
  ASSERT_EQ(h.out.size(), in.size());
  EXPECT_EQ(check_continuous(h.buffers, 0, 0), in.size());
  for (float v : h.out) ASSERT_TRUE(std::isfinite(v));
  EXPECT_EQ(stat_u64(h.element(), "samples-out"), in.size());
  // The last second, processed in time again, is as good as a run that never fell behind.
  const std::vector<float> good = run_once(in, 64);
  const size_t from = in.size() - kRate;
  EXPECT_GT(si_sdr(clean, h.out, from), si_sdr(clean, good, from) - 0.5);
  EXPECT_GT(si_sdr(clean, h.out, from), si_sdr(clean, in, from) + 3.0);
}

// Under a CPU hog on every core (2x overload), live at 1x real time: the streaming thread
// never waits past the budget, late hops are counted, and nothing is lost.
TEST_F(NnDenoiseTest, BudgetHoldsUnderCpuLoad) {
  const std::vector<float> in = noisy(voiced(2 * kRate), 5.0);
  std::atomic<bool> stop{false};
  std::vector<std::thread> hogs;
  for (unsigned i = 0; i < std::max(1u, std::thread::hardware_concurrency()); ++i)
    hogs.emplace_back([&] {
      volatile double x = 1;
      while (!stop.load(std::memory_order_relaxed)) x = x * 1.0000001 + 1e-9;
    });
  Harness h("latency-budget=5 thread-priority=realtime", 1, "F32LE", /*live=*/true);
  std::vector<double> waits;
  const auto t0 = std::chrono::steady_clock::now();
  for (size_t f = 0; f < in.size(); f += 160) {
    // Paced like a 10 ms capture.
    std::this_thread::sleep_until(t0 + std::chrono::microseconds(f * 1000000 / kRate));
    const auto a = std::chrono::steady_clock::now();
    ASSERT_EQ(gst_harness_push(h.h(), h.make(&in[f], std::min<size_t>(160, in.size() - f), f)), GST_FLOW_OK);
    waits.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - a).count());
    h.collect();
  }
  stop = true;
  for (auto& t : hogs) t.join();
  h.eos();
  ASSERT_EQ(h.out.size(), in.size());
  std::sort(waits.begin(), waits.end());
  const double p90 = waits[waits.size() * 9 / 10];
  // The wait for a hop ends at its deadline. With a real-time streaming thread (the
  // default, where permitted) it runs again at once, whatever the load; without one,
  // being scheduled again is up to the kernel, hence the slack.
  if (stat_string(h.element(), "thread-priority") == "realtime") {
    EXPECT_LT(waits.back(), 5.0 + 3.0) << "longest push under load";
  } else {
    EXPECT_LT(p90, 5.0 + 10.0) << "p90 push time under load";
  }
  EXPECT_EQ(stat_u64(h.element(), "samples-out"), in.size());
  EXPECT_EQ(stat_u64(h.element(), "hops-run") + stat_u64(h.element(), "hops-late"), in.size() / 128 + 3);
  std::printf("under load: hops run %" G_GUINT64_FORMAT ", late %" G_GUINT64_FORMAT
              ", push p90 %.2f ms, max %.2f ms, streaming thread %s\n",
              stat_u64(h.element(), "hops-run"), stat_u64(h.element(), "hops-late"), p90, waits.back(),
              stat_string(h.element(), "thread-priority").c_str());
}

// Not live (a file): every hop is waited for, even with a budget of 0 and every core busy:
// the output is the one an idle machine makes.
TEST_F(NnDenoiseTest, FileOutputDoesNotDependOnLoad) {
  const std::vector<float> in = noisy(voiced(2 * kRate), 5.0);
  const std::vector<float> idle = run_once(in, 441);
  std::atomic<bool> stop{false};
  std::vector<std::thread> hogs;
  for (unsigned i = 0; i < std::max(1u, std::thread::hardware_concurrency()); ++i)
    hogs.emplace_back([&] {
      volatile double x = 1;
      while (!stop.load(std::memory_order_relaxed)) x = x * 1.0000001 + 1e-9;
    });
  Harness h("latency-budget=0");
  h.push(in, 441);
  h.eos();
  stop = true;
  for (auto& t : hogs) t.join();
  ASSERT_EQ(h.out.size(), in.size());
  EXPECT_EQ(stat_u64(h.element(), "hops-late"), 0u);
  EXPECT_EQ(max_abs_diff(idle, h.out), 0.0);
}

// NaN and Inf samples: taken as silence (counted); the state is not poisoned: a second
// later the output is as good as without them.
TEST_F(NnDenoiseTest, NonFiniteInputDoesNotPoisonTheState) {
  const std::vector<float> clean = voiced(3 * kRate);
  std::vector<float> in = noisy(clean, 5.0);
  const std::vector<float> good = run_once(in, 441);
  for (size_t i = 8000; i < 8100; ++i) in[i] = (i % 2) ? NAN : INFINITY;
  Harness h("latency-budget=2000");
  h.push(in, 441);
  h.eos();
  ASSERT_EQ(h.out.size(), in.size());
  for (float v : h.out) ASSERT_TRUE(std::isfinite(v));
  EXPECT_EQ(stat_u64(h.element(), "nonfinite-samples"), 100u);
  const size_t from = 2 * kRate;
  EXPECT_GT(si_sdr(clean, h.out, from), si_sdr(clean, good, from) - 0.5);
}

// attenuation-limit: noise is turned down by no more than the limit.
TEST_F(NnDenoiseTest, AttenuationLimitBoundsTheNoiseReduction) {
  std::vector<float> noise(2 * kRate);
  std::mt19937 rng(3);
  std::normal_distribution<float> nd(0.0f, 0.05f);
  for (float& v : noise) v = nd(rng);
  auto attenuation_db = [&](const std::vector<float>& out) {
    double pi = 0, po = 0;
    for (size_t i = kRate / 2; i < noise.size(); ++i) pi += double(noise[i]) * noise[i], po += double(out[i]) * out[i];
    return 10 * std::log10(pi / po);
  };
  const double unlimited = attenuation_db(run_once(noise, 441));
  const double limited = attenuation_db(run_once(noise, 441, "attenuation-limit=6"));
  EXPECT_GT(unlimited, 12.0);
  // The limit floors the spectral mask (stage 1); stage 2 may turn down a little more.
  EXPECT_LT(limited, 6.0 + 3.0);
  EXPECT_LT(limited, unlimited - 3.0);
  EXPECT_GT(limited, 3.0);
}

TEST_F(NnDenoiseTest, LatencyQueryAddsHoldAndBudget) {
  Harness h("latency-budget=20", 1, "F32LE", /*live=*/true);
  const std::vector<float> in(4410, 0.0f);
  h.push(in, 441);
  gst_harness_set_upstream_latency(h.h(), 10 * GST_MSECOND);
  const GstClockTime a = gst_harness_query_latency(h.h());
  const double hold_ms = stat_double(h.element(), "delay-ms");
  EXPECT_GT(hold_ms, 8.0);
  EXPECT_NEAR(static_cast<double>(a) / GST_MSECOND, 10 + hold_ms + 20, 0.01);
  g_object_set(h.element(), "latency-budget", 5u, nullptr);
  EXPECT_NEAR(static_cast<double>(gst_harness_query_latency(h.h())) / GST_MSECOND, 10 + hold_ms + 5, 0.01);
}

TEST_F(NnDenoiseTest, StatsPropertyAndBusMessage) {
  Harness h("stats-interval=1 latency-budget=2000");
  GstBus* bus = gst_bus_new();
  gst_element_set_bus(h.element(), bus);
  const std::vector<float> in = noisy(voiced(kRate), 5.0);
  h.push(in, 441);
  GstMessage* msg = gst_bus_timed_pop_filtered(bus, GST_SECOND, GST_MESSAGE_ELEMENT);
  ASSERT_NE(msg, nullptr);
  EXPECT_TRUE(gst_structure_has_name(gst_message_get_structure(msg), "nndenoise-stats"));
  gst_message_unref(msg);
  gst_element_set_bus(h.element(), nullptr);
  gst_object_unref(bus);
  EXPECT_GT(stat_u64(h.element(), "hops-run"), 100u);
  EXPECT_GT(stat_double(h.element(), "hop-p50-ms"), 0.0);
  EXPECT_GE(stat_double(h.element(), "hop-p99-ms"), stat_double(h.element(), "hop-p50-ms"));
  const double rtf = stat_double(h.element(), "real-time-factor");
  EXPECT_GT(rtf, 0.0);
  EXPECT_LT(rtf, 1.0);
  EXPECT_NE(stat_string(h.element(), "delegate").find("cpu"), std::string::npos);
}

// Every property has a description for gst-inspect.
TEST(NnDenoiseElement, EveryPropertyDocumented) {
  GstElement* e = gst_element_factory_make("nndenoise", nullptr);
  ASSERT_NE(e, nullptr);
  guint n = 0;
  GParamSpec** specs = g_object_class_list_properties(G_OBJECT_GET_CLASS(e), &n);
  const char* ours[] = {"model",  "delegate", "threads",        "latency-budget", "attenuation-limit",
                        "bypass", "stats",    "stats-interval", "thread-priority"};
  for (const char* name : ours) {
    GParamSpec* p = g_object_class_find_property(G_OBJECT_GET_CLASS(e), name);
    ASSERT_NE(p, nullptr) << name;
    EXPECT_GT(strlen(g_param_spec_get_blurb(p)), 20u) << name;
  }
  g_free(specs);
  gst_object_unref(e);
}

// A bad model is an error before data flows, naming the file and the reason.
void expect_pipeline_error(const std::string& line, GQuark domain, const std::string& message_fragment,
                           const std::string& debug_fragment) {
  GError* err = nullptr;
  GstElement* pipe = gst_parse_launch(line.c_str(), &err);
  ASSERT_NE(pipe, nullptr) << (err ? err->message : "");
  GstBus* bus = gst_element_get_bus(pipe);
  gst_element_set_state(pipe, GST_STATE_PLAYING);
  GstMessage* msg = gst_bus_timed_pop_filtered(bus, 10 * GST_SECOND, GST_MESSAGE_ERROR);
  ASSERT_NE(msg, nullptr) << "no error for: " << line;
  GError* gerr = nullptr;
  gchar* debug = nullptr;
  gst_message_parse_error(msg, &gerr, &debug);
  EXPECT_EQ(gerr->domain, domain) << gerr->message;
  EXPECT_NE(std::string(gerr->message).find(message_fragment), std::string::npos) << gerr->message;
  const std::string dbg = debug ? debug : "";
  EXPECT_NE(dbg.find(debug_fragment), std::string::npos) << dbg;
  EXPECT_STREQ(GST_OBJECT_NAME(GST_MESSAGE_SRC(msg)), "dn");
  g_error_free(gerr);
  g_free(debug);
  gst_message_unref(msg);
  gst_element_set_state(pipe, GST_STATE_NULL);
  gst_object_unref(bus);
  gst_object_unref(pipe);
}

std::string line_with_model(const std::string& model) {
  return "audiotestsrc num-buffers=5 ! audio/x-raw,rate=16000 ! nndenoise name=dn model=\"" + model +
         "\" ! fakesink";
}

TEST(NnDenoiseErrors, MissingModel) {
  const std::string path = std::string(NN_TEST_OUT_DIR) + "/no_such_model.nnapi";
  expect_pipeline_error(line_with_model(path), GST_RESOURCE_ERROR, path, "no_such_model.nnapi");
}

TEST(NnDenoiseErrors, CorruptModel) {
  const std::string path = std::string(NN_TEST_OUT_DIR) + "/corrupt_dtln.nnapi";
  {
    // The real file's first kilobyte: a valid header over a cut-off body.
    std::ifstream src(dtln_model(), std::ios::binary);
    std::string head(1024, '\0');
    src.read(head.data(), head.size());
    std::ofstream(path, std::ios::binary) << head;
  }
  expect_pipeline_error(line_with_model(path), GST_RESOURCE_ERROR, path, "corrupt_dtln.nnapi");
}

// The selfie segmentation model, as converted to .nnapi: a valid model, not a streaming one.
TEST(NnDenoiseErrors, NotAStreamingModel) {
  const std::string path = NN_SELFIE_NNAPI;
  ASSERT_TRUE(g_file_test(path.c_str(), G_FILE_TEST_EXISTS)) << path << ": the nndenoise_model fixture makes it";
  expect_pipeline_error(line_with_model(path), GST_RESOURCE_ERROR, path, "not a streaming audio model");
}

// The selfie model's .tflite: not an .nnapi file at all; the error says what to give instead.
TEST(NnDenoiseErrors, TfliteInsteadOfStreamingFile) {
  ASSERT_TRUE(nn_test::require_asset("models/selfie_segmentation.tflite"));
  const std::string path = nn_test::asset("models/selfie_segmentation.tflite");
  expect_pipeline_error(line_with_model(path), GST_RESOURCE_ERROR, path, "--stream");
}

TEST(NnDenoiseErrors, WrongRateNamesTheRateItNeeds) {
  expect_pipeline_error(
      "audiotestsrc num-buffers=5 ! audio/x-raw,rate=48000 ! nndenoise name=dn model=\"" + dtln_model() +
          "\" ! fakesink",
      GST_CORE_ERROR, "16000", "audioresample");
}

// With audioresample in front, a 48 kHz stereo source negotiates and plays to the end.
TEST(NnDenoisePipeline, ResampledSourceNegotiatesAndPlays) {
  const std::string line = "audiotestsrc num-buffers=20 wave=pink-noise ! audio/x-raw,rate=48000,channels=2 ! "
                           "audioconvert ! audioresample ! nndenoise model=\"" +
                           dtln_model() + "\" ! audioconvert ! fakesink";
  GstElement* pipe = gst_parse_launch(line.c_str(), nullptr);
  ASSERT_NE(pipe, nullptr);
  GstBus* bus = gst_element_get_bus(pipe);
  gst_element_set_state(pipe, GST_STATE_PLAYING);
  GstMessage* msg =
      gst_bus_timed_pop_filtered(bus, 30 * GST_SECOND, static_cast<GstMessageType>(GST_MESSAGE_EOS | GST_MESSAGE_ERROR));
  ASSERT_NE(msg, nullptr);
  EXPECT_EQ(GST_MESSAGE_TYPE(msg), GST_MESSAGE_EOS);
  gst_message_unref(msg);
  gst_element_set_state(pipe, GST_STATE_NULL);
  gst_object_unref(bus);
  gst_object_unref(pipe);
}

}  // namespace

NN_GST_TEST_MAIN()

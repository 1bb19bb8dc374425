// Streaming audio models: the framing on hand-built identity models (exact answers), the
// streaming .nnapi file (round trip, refusals), and the real DTLN (state, delegates,
// SNR, recovery from non-finite input). The DTLN file comes from the ctest fixture
// make_dtln_nnapi (tests/audio/CMakeLists.txt).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <sys/wait.h>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>

#include "format/nnapi_format.h"
#include "nn/audio/stream.h"
#include "nn/audio/wav.h"
#include "nn/format/nnapi_file.h"
#include "nn/format/stream_file.h"
#include "nn/import/import.h"
#include "test_support.h"

namespace {

using nn::Model;
using nn::OperandType;
using nn::OperationType;
using nn::StageInputSource;
using nn::StageOutputRole;
using nn::StreamDescription;
using nn::StreamWindow;
using nn::audio::StreamProcessor;

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("nn_stream_test_" + name)).string();
}

// ---------------------------------------------------------------------------------------
// Hand-built models whose answer is known exactly.

// y = x * scale + offset, broadcasting one constant each; and state' = state + 1.
std::shared_ptr<Model> affine_stage(uint32_t n, float scale, float offset, bool with_state) {
  auto m = std::make_shared<Model>();
  const uint32_t x = m->add_tensor(OperandType::TENSOR_FLOAT32, {1, n}, "x");
  m->inputs.push_back(x);
  const uint32_t s = m->add_constant_f32({1}, std::vector<float>{scale}, "scale");
  const uint32_t o = m->add_constant_f32({1}, std::vector<float>{offset}, "offset");
  const uint32_t scaled = m->add_tensor(OperandType::TENSOR_FLOAT32, {}, "scaled");
  m->add_operation(OperationType::MUL, {x, s, m->add_scalar_i32(0)}, {scaled});
  const uint32_t y = m->add_tensor(OperandType::TENSOR_FLOAT32, {}, "y");
  m->add_operation(OperationType::ADD, {scaled, o, m->add_scalar_i32(0)}, {y});
  m->outputs.push_back(y);
  if (with_state) {
    const uint32_t st = m->add_tensor(OperandType::TENSOR_FLOAT32, {1, 2, 4, 2}, "state");
    m->inputs.push_back(st);
    const uint32_t one = m->add_constant_f32({1}, std::vector<float>{1.f}, "one");
    const uint32_t next = m->add_tensor(OperandType::TENSOR_FLOAT32, {}, "state_next");
    m->add_operation(OperationType::ADD, {st, one, m->add_scalar_i32(0)}, {next});
    m->outputs.push_back(next);
  }
  const nn::Status valid = m->validate_and_infer_shapes();
  EXPECT_TRUE(valid.is_ok()) << valid.to_string();
  return m;
}

// Two stages like DTLN's: a mask from the magnitude (mask_value everywhere), then the
// masked block back in time passed through. With the given windows and gain.
StreamDescription two_stage_description(StreamWindow analysis, StreamWindow synthesis, float gain) {
  StreamDescription d;
  d.description = "identity";
  d.sample_rate = 16000;
  d.block = 512;
  d.hop = 128;
  d.analysis_window = analysis;
  d.synthesis_window = synthesis;
  d.output_gain = gain;
  d.stages.push_back({"mask", {{StageInputSource::kRfftMagnitude, 0}, {StageInputSource::kState, 1}},
                      {StageOutputRole::kSpectralMask, StageOutputRole::kState}});
  d.stages.push_back({"time", {{StageInputSource::kMaskedTimeBlock, 0}, {StageInputSource::kState, 1}},
                      {StageOutputRole::kTimeBlock, StageOutputRole::kState}});
  return d;
}

std::shared_ptr<const nn::audio::StreamModel> make_model(const StreamDescription& d,
                                                         std::vector<std::shared_ptr<Model>> stages) {
  auto m = nn::audio::make_stream_model(d, std::move(stages));
  EXPECT_TRUE(m.is_ok()) << m.status().to_string();
  return m.is_ok() ? m.value() : nullptr;
}

std::shared_ptr<const nn::audio::StreamModel> identity_model(StreamWindow analysis, StreamWindow synthesis,
                                                             float gain, float mask_value = 1.f) {
  return make_model(two_stage_description(analysis, synthesis, gain),
                    {affine_stage(257, 0.f, mask_value, true), affine_stage(512, 1.f, 0.f, true)});
}

// Runs a signal hop by hop; the output has the input's length (the raw stream).
std::vector<float> run(StreamProcessor& p, const std::vector<float>& x) {
  const size_t hop = static_cast<size_t>(p.info().hop);
  std::vector<float> y(x.size());
  for (size_t i = 0; i + hop <= x.size(); i += hop) {
    nn::Status s = p.process_hop(x.data() + i, y.data() + i);
    EXPECT_TRUE(s.is_ok()) << s.to_string();
  }
  return y;
}

double max_abs_diff(const float* a, const float* b, size_t n) {
  double worst = 0;
  for (size_t i = 0; i < n; ++i) worst = std::max(worst, std::abs(double(a[i]) - double(b[i])));
  return worst;
}

struct WindowCase {
  StreamWindow analysis, synthesis;
  float gain;  // 1 / (the windows' product summed over the 4 overlapping blocks)
};

class IdentityStream : public ::testing::TestWithParam<WindowCase> {};

// mask = 1 and a pass-through stage 2: the output is the input delayed by exactly
// latency_samples (block - hop), through the rFFT, the irFFT, the windows and the
// overlap-add.
TEST_P(IdentityStream, GivesTheInputBackDelayedByTheLatency) {
  const WindowCase& c = GetParam();
  auto model = identity_model(c.analysis, c.synthesis, c.gain);
  ASSERT_TRUE(model);
  EXPECT_EQ(model->info().latency_samples, 384);
  auto p = StreamProcessor::open(model);
  ASSERT_TRUE(p.is_ok()) << p.status().to_string();
  const std::vector<float> x = nn_test::random_floats(128 * 40, 7, -0.8f, 0.8f);
  const std::vector<float> y = run(**p, x);
  const size_t latency = 384;
  // The first `latency` samples are the warm-up (before the first full block the
  // synthesis sum is incomplete); from then on the output is the delayed input.
  const size_t start = c.analysis == StreamWindow::kNone ? 0 : latency;
  for (size_t i = start; i < latency; ++i) EXPECT_NEAR(y[i], 0.f, 1e-6f) << i;
  EXPECT_LT(max_abs_diff(y.data() + latency, x.data(), x.size() - latency), 2e-6);
  // One sample off is far off: the test sees the delay, not just the signal.
  EXPECT_GT(max_abs_diff(y.data() + latency + 1, x.data(), x.size() - latency - 1), 0.1);
}

INSTANTIATE_TEST_SUITE_P(Windows, IdentityStream,
                         ::testing::Values(WindowCase{StreamWindow::kNone, StreamWindow::kNone, 0.25f},
                                           WindowCase{StreamWindow::kSqrtHann, StreamWindow::kSqrtHann, 0.5f},
                                           WindowCase{StreamWindow::kNone, StreamWindow::kHann, 0.5f}),
                         [](const ::testing::TestParamInfo<WindowCase>& info) {
                           return std::string(nn::stream_window_name(info.param.analysis)) + "_" +
                                  nn::stream_window_name(info.param.synthesis);
                         });

// A stage whose output block is its state and whose state counts hops: block j is all
// j, so after the overlap-add (gain 1/4) hop k gives (k + k-1 + k-2 + k-3) / 4 = k - 1.5.
// The state must come back every hop, and reset() must start it over.
TEST(StreamFraming, StateOutputsFeedTheNextHopAndResetClearsThem) {
  auto m = std::make_shared<Model>();
  const uint32_t x = m->add_tensor(OperandType::TENSOR_FLOAT32, {1, 512}, "x");
  const uint32_t st = m->add_tensor(OperandType::TENSOR_FLOAT32, {1, 512}, "state");
  m->inputs = {x, st};
  const uint32_t zero = m->add_constant_f32({1}, std::vector<float>{0.f}, "zero");
  const uint32_t one = m->add_constant_f32({1}, std::vector<float>{1.f}, "one");
  const uint32_t y = m->add_tensor(OperandType::TENSOR_FLOAT32, {}, "y");
  const uint32_t next = m->add_tensor(OperandType::TENSOR_FLOAT32, {}, "next");
  m->add_operation(OperationType::ADD, {st, zero, m->add_scalar_i32(0)}, {y});
  m->add_operation(OperationType::ADD, {st, one, m->add_scalar_i32(0)}, {next});
  m->outputs = {y, next};
  NN_ASSERT_OK(m->validate_and_infer_shapes());
  StreamDescription d = two_stage_description(StreamWindow::kNone, StreamWindow::kNone, 0.25f);
  d.stages = {{"counter", {{StageInputSource::kTimeBlock, 0}, {StageInputSource::kState, 1}},
               {StageOutputRole::kTimeBlock, StageOutputRole::kState}}};
  auto model = make_model(d, {m});
  ASSERT_TRUE(model);
  auto p = StreamProcessor::open(model);
  ASSERT_TRUE(p.is_ok()) << p.status().to_string();
  const std::vector<float> x0(128, 0.f);
  std::vector<float> y0(128);
  for (int round = 0; round < 2; ++round) {
    for (int k = 0; k < 10; ++k) {
      NN_ASSERT_OK((*p)->process_hop(x0.data(), y0.data()));
      if (k >= 3) {
        EXPECT_FLOAT_EQ(y0[77], static_cast<float>(k) - 1.5f) << "round " << round << " hop " << k;
      }
    }
    (*p)->reset();
  }
}

// A single stage that only gives a mask: the stream's output is the masked spectrum back
// in time. With mask 0, the attenuation limit alone decides the output: 20 dB -> 0.1 x
// the delayed input, 0 -> silence.
TEST(StreamFraming, AttenuationLimitFloorsTheMask) {
  StreamDescription d = two_stage_description(StreamWindow::kNone, StreamWindow::kNone, 0.25f);
  d.stages.resize(1);
  auto model = make_model(d, {affine_stage(257, 0.f, 0.f, true)});
  ASSERT_TRUE(model);
  const std::vector<float> x = nn_test::random_floats(128 * 20, 8);
  for (float db : {0.f, 20.f, 6.f}) {
    nn::audio::StreamOptions options;
    options.attenuation_limit_db = db;
    auto p = StreamProcessor::open(model, options);
    ASSERT_TRUE(p.is_ok()) << p.status().to_string();
    const std::vector<float> y = run(**p, x);
    const float gain = db == 0.f ? 0.f : std::pow(10.f, -db / 20.f);
    std::vector<float> want(x.size() - 384);
    for (size_t i = 0; i < want.size(); ++i) want[i] = gain * x[i];
    EXPECT_LT(max_abs_diff(y.data() + 384, want.data(), want.size()), 2e-6) << db << " dB";
  }
  // Changing the limit mid-stream takes effect on the next hop.
  auto p = StreamProcessor::open(model);
  ASSERT_TRUE(p.is_ok());
  (*p)->set_attenuation_limit_db(40.f);
  const std::vector<float> y = run(**p, x);
  EXPECT_NEAR(y[1000], 0.01f * x[1000 - 384], 1e-6f);
}

// skip_hop keeps the framing: the delayed input it gives lines up with what process_hop
// gives for an identity model, and processing resumes seamlessly after skipped hops.
TEST(StreamFraming, SkipHopGivesTheDelayedInputAndKeepsTheFraming) {
  auto model = identity_model(StreamWindow::kNone, StreamWindow::kNone, 0.25f);
  ASSERT_TRUE(model);
  auto p = StreamProcessor::open(model);
  ASSERT_TRUE(p.is_ok());
  const std::vector<float> x = nn_test::random_floats(128 * 30, 9);
  std::vector<float> y(x.size());
  for (size_t h = 0; h < 30; ++h) {
    const float* in = x.data() + h * 128;
    float* out = y.data() + h * 128;
    if (h >= 10 && h < 14) {
      (*p)->skip_hop(in, out);
    } else {
      NN_ASSERT_OK((*p)->process_hop(in, out));
    }
  }
  // Skipped hops are exact; the three hops after them miss the skipped blocks' share of
  // the overlap-add (those blocks were never synthesized), then it is exact again.
  EXPECT_LT(max_abs_diff(y.data() + 10 * 128, x.data() + 10 * 128 - 384, 4 * 128), 1e-7);
  EXPECT_LT(max_abs_diff(y.data() + 17 * 128, x.data() + 17 * 128 - 384, 13 * 128), 2e-6);
  EXPECT_LT(max_abs_diff(y.data() + 3 * 128, x.data(), 7 * 128), 2e-6);
}

// ---------------------------------------------------------------------------------------
// The streaming file.

std::vector<uint8_t> read_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::vector<uint8_t>((std::istreambuf_iterator<char>(f)), {});
}

void write_bytes(const std::string& path, const std::vector<uint8_t>& b) {
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
}

TEST(StreamFile, RoundTripsTheFramingAndTheStages) {
  const StreamDescription d = two_stage_description(StreamWindow::kSqrtHann, StreamWindow::kHann, 0.5f);
  auto s1 = affine_stage(257, 0.f, 1.f, true), s2 = affine_stage(512, 1.f, 0.f, true);
  const std::string path = temp_path("roundtrip.nnapi");
  NN_ASSERT_OK(nn::save_stream_file(d, {s1.get(), s2.get()}, path));
  auto loaded = nn::audio::load_stream_model(path);
  ASSERT_TRUE(loaded.is_ok()) << loaded.status().to_string();
  const StreamDescription& got = (*loaded)->description();
  EXPECT_EQ(nn::stream_summary(got), nn::stream_summary(d));
  EXPECT_EQ(got.description, "identity");
  ASSERT_EQ((*loaded)->num_stages(), 2u);
  EXPECT_EQ((*loaded)->stage(1)->op_summary(), "MUL x 1, ADD x 2");
  EXPECT_EQ((*loaded)->info().summary,
            "16000 Hz, block 512, hop 128 (latency 384 samples), windows sqrt_hann/hann, gain 0.500000, 2 stages: "
            "1 mask (rfft_magnitude, state<-out1 -> spectral_mask, state); 2 time (masked_time_block, "
            "state<-out1 -> time_block, state)");
  // A single-model reader refuses it by name, and so does a 1.0 reader (required sections).
  auto plain = nn::load_nnapi_file(path);
  ASSERT_FALSE(plain.is_ok());
  EXPECT_NE(plain.status().message().find("a streaming model"), std::string::npos) << plain.status().to_string();
  std::filesystem::remove(path);
}

// nninspect shows the framing and, per stage, what feeds each input and what each output is.
TEST(StreamFile, NninspectShowsStagesAndFraming) {
  const std::string tool = std::string(NN_BINARY_DIR) + "/engine/nninspect";
  if (!std::filesystem::exists(tool)) GTEST_SKIP() << "nninspect is not built in " << NN_BINARY_DIR;
  const StreamDescription d = two_stage_description(StreamWindow::kNone, StreamWindow::kNone, 0.25f);
  auto s1 = affine_stage(257, 0.f, 1.f, true), s2 = affine_stage(512, 1.f, 0.f, true);
  const std::string path = temp_path("inspect.nnapi");
  NN_ASSERT_OK(nn::save_stream_file(d, {s1.get(), s2.get()}, path));
  std::string out;
  FILE* pipe = popen((tool + " " + path + " 2>&1").c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  char buf[4096];
  for (size_t n; (n = fread(buf, 1, sizeof buf, pipe)) > 0;) out.append(buf, n);
  EXPECT_EQ(pclose(pipe), 0) << out;
  for (const char* want : {"format: .nnapi 1.1", "section STREAM", "section STAGE_MODELS",
                           "stream: 16000 Hz, block 512, hop 128 (latency 384 samples)", "== stage 2 'time'",
                           "input 0 'x' [1,512] <- masked_time_block",
                           "input 1 'state' [1,2,4,2] <- state (output 1 of the previous hop)",
                           "output 0 'y' [1,257] -> spectral_mask"})
    EXPECT_NE(out.find(want), std::string::npos) << want << "\n" << out;
  std::filesystem::remove(path);
}

TEST(StreamFile, ADescriptionThatDoesNotFitItsModelsIsRefused) {
  StreamDescription d = two_stage_description(StreamWindow::kNone, StreamWindow::kNone, 1.f);
  auto s1 = affine_stage(257, 0.f, 1.f, true), s2 = affine_stage(512, 1.f, 0.f, true);
  const std::string path = temp_path("bad.nnapi");
  // Stages swapped: the magnitude input gets 512 values.
  nn::Status s = nn::save_stream_file(d, {s2.get(), s1.get()}, path);
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("stage 1 'mask': input 0 (rfft_magnitude) 'x' [1,512] has 512 values, expected 257"),
            std::string::npos)
      << s.to_string();
  // A masked time block before any mask.
  StreamDescription early = d;
  early.stages[0].inputs[0].source = StageInputSource::kMaskedTimeBlock;
  s = nn::validate_stream(early, {s1.get(), s2.get()});
  EXPECT_NE(s.message().find("no earlier stage has a spectral_mask"), std::string::npos) << s.to_string();
  // A state output that feeds nothing.
  StreamDescription loose = d;
  loose.stages[1].inputs[1] = {StageInputSource::kTimeBlock, 0};
  s = nn::validate_stream(loose, {s1.get(), s2.get()});
  EXPECT_NE(s.message().find("state output 1 feeds no input"), std::string::npos) << s.to_string();
  EXPECT_FALSE(std::filesystem::exists(path));
}

TEST(StreamFile, MissingCorruptAndPlainModelFilesAreRefusedWithTheFileAndReason) {
  const std::string missing = temp_path("does_not_exist.nnapi");
  auto r = nn::audio::load_stream_model(missing);
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find(missing + ": cannot open"), std::string::npos) << r.status().to_string();

  // The selfie model, converted as the demo does: a single model, not a stream.
  if (!nn_test::require_asset("models/selfie_segmentation.tflite")) return;
  auto selfie = nn::load_model(nn_test::asset("models/selfie_segmentation.tflite"));
  ASSERT_TRUE(selfie.is_ok());
  const std::string plain = temp_path("selfie.nnapi");
  NN_ASSERT_OK(nn::save_nnapi_file(**selfie, plain));
  r = nn::audio::load_stream_model(plain);
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find(plain + ": not a streaming audio model: it is a single model"),
            std::string::npos)
      << r.status().to_string();
  std::filesystem::remove(plain);

  const StreamDescription d = two_stage_description(StreamWindow::kNone, StreamWindow::kNone, 0.25f);
  auto s1 = affine_stage(257, 0.f, 1.f, true), s2 = affine_stage(512, 1.f, 0.f, true);
  const std::string good = temp_path("good.nnapi"), bad = temp_path("corrupt.nnapi");
  NN_ASSERT_OK(nn::save_stream_file(d, {s1.get(), s2.get()}, good));
  const std::vector<uint8_t> bytes = read_bytes(good);

  // Truncated.
  write_bytes(bad, std::vector<uint8_t>(bytes.begin(), bytes.begin() + static_cast<long>(bytes.size() / 2)));
  r = nn::audio::load_stream_model(bad);
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find(bad + ": truncated"), std::string::npos) << r.status().to_string();

  // One flipped byte in the stage models: the checksum.
  std::vector<uint8_t> flipped = bytes;
  flipped[bytes.size() - 100] ^= 0x10;
  write_bytes(bad, flipped);
  r = nn::audio::load_stream_model(bad);
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("checksum mismatch"), std::string::npos) << r.status().to_string();

  // A stage offset past its section, with a correct checksum: the bounds check names it.
  namespace fmt = nn::nnapi_format;
  auto info = nn::read_nnapi_file_info(bytes);
  ASSERT_TRUE(info.is_ok());
  const nn::NnapiSectionInfo& stream = info->sections[0];
  ASSERT_EQ(stream.type_name, "STREAM");
  // description (4 + 8) + 5 u32 + f32 + stage count + name (4 + 4) -> stage 1's model offset.
  const size_t offset_at = stream.offset + 4 + 8 + 6 * 4 + 4 + 4 + 4;
  std::vector<uint8_t> hostile = bytes;
  fmt::store_u64(hostile.data() + offset_at, uint64_t{1} << 40);
  fmt::store_u32(hostile.data() + fmt::kOffChecksum, fmt::file_checksum(hostile));
  write_bytes(bad, hostile);
  r = nn::audio::load_stream_model(bad);
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("stream section: stage 1: model offset 1099511627776"), std::string::npos)
      << r.status().to_string();

  // Every single-byte corruption of the stream section, and seeded random corruptions
  // anywhere (checksum fixed up so the parsers see them), is refused or loads a model that
  // validates; none crashes (the sanitized build runs this too).
  size_t refused = 0, tried = 0;
  auto try_load = [&](std::vector<uint8_t>& b) {
    fmt::store_u32(b.data() + fmt::kOffChecksum, fmt::file_checksum(b));
    auto any = nn::load_stream_buffer(b);
    ++tried;
    if (!any.is_ok()) {
      ++refused;
      EXPECT_FALSE(any.status().message().empty());
    } else {
      std::vector<const Model*> views;
      for (const auto& m : any->stages) views.push_back(m.get());
      EXPECT_TRUE(nn::validate_stream(any->stream, views).is_ok());
    }
  };
  for (size_t i = stream.offset; i < stream.offset + stream.length; ++i) {
    std::vector<uint8_t> b = bytes;
    b[i] ^= 0xff;
    try_load(b);
  }
  std::mt19937 rng(99);
  for (int iter = 0; iter < 500; ++iter) {
    std::vector<uint8_t> b = bytes;
    const int flips = 1 + static_cast<int>(rng() % 4);
    for (int f = 0; f < flips; ++f) b[fmt::kHeaderSize + rng() % (b.size() - fmt::kHeaderSize)] ^= uint8_t(1u << (rng() % 8));
    try_load(b);
  }
  EXPECT_GT(refused, tried / 4) << refused << " of " << tried;
  std::filesystem::remove(good);
  std::filesystem::remove(bad);
}

TEST(StreamFile, TomlDescriptionErrorsNameTheFileAndKey) {
  const std::string path = temp_path("bad.toml");
  {
    std::ofstream f(path);
    f << "sample_rate = 16000\nblock = 512\nhop = 128\nwindow = \"hann\"\n[[stage]]\ninputs = []\noutputs = []\n";
  }
  auto d = nn::parse_stream_toml(path);
  ASSERT_FALSE(d.is_ok());
  EXPECT_EQ(d.status().message(), path + ": unknown key 'window'");
  {
    std::ofstream f(path);
    f << "sample_rate = 16000\nblock = 512\nhop = 128\n[[stage]]\ninputs = [\"spectrum\"]\noutputs = []\n";
  }
  d = nn::parse_stream_toml(path);
  ASSERT_FALSE(d.is_ok());
  EXPECT_NE(d.status().message().find("stage 1: input 0 \"spectrum\""), std::string::npos) << d.status().to_string();
  // The committed DTLN description parses.
  auto dtln = nn::parse_stream_toml(std::string(NN_SOURCE_DIR) + "/assets/streams/dtln.toml");
  ASSERT_TRUE(dtln.is_ok()) << dtln.status().to_string();
  EXPECT_EQ(dtln->block, 512u);
  EXPECT_EQ(dtln->hop, 128u);
  EXPECT_EQ(dtln->stages.size(), 2u);
  std::filesystem::remove(path);
}

// ---------------------------------------------------------------------------------------
// The real DTLN.

std::shared_ptr<const nn::audio::StreamModel> dtln() {
  auto m = nn::audio::load_stream_model(NN_DTLN_NNAPI);
  EXPECT_TRUE(m.is_ok()) << m.status().to_string() << " (made by the ctest fixture make_dtln_nnapi)";
  return m.is_ok() ? m.value() : nullptr;
}

// 48 kHz -> 16 kHz: a windowed-sinc low-pass (Blackman, 129 taps, cut at 7 kHz), then
// every third sample.
std::vector<float> decimate3(const std::vector<float>& x) {
  constexpr int kTaps = 129;
  std::vector<double> h(kTaps);
  double sum = 0;
  for (int i = 0; i < kTaps; ++i) {
    const double t = i - (kTaps - 1) / 2.0, fc = 7000.0 / 48000.0;
    const double sinc = t == 0 ? 2 * fc : std::sin(2 * M_PI * fc * t) / (M_PI * t);
    const double w = 0.42 - 0.5 * std::cos(2 * M_PI * i / (kTaps - 1)) + 0.08 * std::cos(4 * M_PI * i / (kTaps - 1));
    h[i] = sinc * w;
    sum += h[i];
  }
  std::vector<float> y;
  for (size_t n = 0; n < x.size(); n += 3) {
    double acc = 0;
    for (int k = 0; k < kTaps; ++k) {
      const long j = static_cast<long>(n) + k - (kTaps - 1) / 2;
      if (j >= 0 && j < static_cast<long>(x.size())) acc += h[k] / sum * x[static_cast<size_t>(j)];
    }
    y.push_back(static_cast<float>(acc));
  }
  return y;
}

std::vector<float> librispeech_16k() {
  if (!nn_test::require_asset("media/librispeech-7729-102255-0000.wav")) return {};
  auto a = nn::audio::read_audio(nn_test::asset("media/librispeech-7729-102255-0000.wav"));
  EXPECT_TRUE(a.is_ok()) << a.status().to_string();
  if (!a.is_ok()) return {};
  EXPECT_EQ(a->sample_rate, 48000);
  EXPECT_EQ(a->channels, 1);
  return decimate3(a->samples);
}

double energy(const float* x, size_t n) {
  double e = 0;
  for (size_t i = 0; i < n; ++i) e += double(x[i]) * x[i];
  return e;
}

// Scale-invariant SDR of est against ref (same length).
double si_sdr(const float* ref, const float* est, size_t n) {
  double dot = 0;
  for (size_t i = 0; i < n; ++i) dot += double(ref[i]) * est[i];
  const double alpha = dot / energy(ref, n);
  double target = 0, error = 0;
  for (size_t i = 0; i < n; ++i) {
    const double t = alpha * ref[i];
    target += t * t;
    error += (est[i] - t) * (est[i] - t);
  }
  return 10 * std::log10(target / error);
}

// Clean speech plus seeded white noise at snr_db.
std::vector<float> add_white_noise(const std::vector<float>& clean, double snr_db, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> g(0.f, 1.f);
  std::vector<float> noise(clean.size());
  for (float& v : noise) v = g(rng);
  const double scale = std::sqrt(energy(clean.data(), clean.size()) / energy(noise.data(), noise.size()) /
                                 std::pow(10.0, snr_db / 10.0));
  std::vector<float> noisy(clean.size());
  for (size_t i = 0; i < clean.size(); ++i) noisy[i] = clean[i] + static_cast<float>(scale * noise[i]);
  return noisy;
}

TEST(Dtln, TheFileHoldsBothStagesAndTheFraming) {
  auto m = dtln();
  ASSERT_TRUE(m);
  const auto& info = m->info();
  EXPECT_EQ(info.sample_rate, 16000);
  EXPECT_EQ(info.block, 512);
  EXPECT_EQ(info.hop, 128);
  EXPECT_EQ(info.latency_samples, 384);
  EXPECT_EQ(info.num_stages, 2);
  EXPECT_EQ(m->stage(0)->operands[m->stage(0)->inputs[1]].dims, (nn::Dims{1, 2, 128, 2}));
  EXPECT_EQ(m->stage(1)->operands[m->stage(1)->inputs[0]].dims, (nn::Dims{1, 1, 512}));
}

// The real assertion: at 0 dB SNR with white noise, DTLN improves SI-SDR by more than
// 5 dB (the output lined up with the clean speech by the stated latency).
TEST(Dtln, RaisesSiSdrOnNoisySpeech) {
  auto m = dtln();
  ASSERT_TRUE(m);
  const std::vector<float> clean = librispeech_16k();
  ASSERT_GT(clean.size(), 16000u * 5);
  nn::audio::AudioBuffer noisy{16000, 1, add_white_noise(clean, 0.0, 1234)};
  auto out = nn::audio::process_audio(m, noisy, {}, /*compensate_latency=*/true);
  ASSERT_TRUE(out.is_ok()) << out.status().to_string();
  const double before = si_sdr(clean.data(), noisy.samples.data(), clean.size());
  const double after = si_sdr(clean.data(), out->samples.data(), clean.size());
  std::printf("SI-SDR at 0 dB white noise: %.2f dB -> %.2f dB (+%.2f)\n", before, after, after - before);
  EXPECT_NEAR(before, 0.0, 0.1);
  EXPECT_GT(after - before, 5.0);
  // Clean speech alone stays speech.
  nn::audio::AudioBuffer alone{16000, 1, clean};
  auto kept = nn::audio::process_audio(m, alone, {}, true);
  ASSERT_TRUE(kept.is_ok());
  const double clean_sdr = si_sdr(clean.data(), kept->samples.data(), clean.size());
  std::printf("clean speech through DTLN: SI-SDR %.2f dB\n", clean_sdr);
  EXPECT_GT(clean_sdr, 15.0);
}

// reset() is a fresh start: the same hops give the same output, bit for bit.
TEST(Dtln, OutputRepeatsExactlyAfterReset) {
  auto m = dtln();
  ASSERT_TRUE(m);
  auto p = StreamProcessor::open(m);
  ASSERT_TRUE(p.is_ok());
  const std::vector<float> x = add_white_noise(nn_test::random_floats(128 * 50, 3, -0.3f, 0.3f), 5.0, 4);
  const std::vector<float> first = run(**p, x);
  (*p)->reset();
  const std::vector<float> second = run(**p, x);
  EXPECT_EQ(std::memcmp(first.data(), second.data(), first.size() * sizeof(float)), 0);
  // And the state matters: without the reset the same input gives another output.
  const std::vector<float> third = run(**p, x);
  EXPECT_GT(max_abs_diff(first.data(), third.data(), first.size()), 1e-4);
}

// The CPU delegate (XNNPACK / native kernels) against the reference kernels on both
// stages, hop by hop over a second of noisy speech.
TEST(Dtln, CpuDelegateMatchesTheReferenceKernels) {
  auto m = dtln();
  ASSERT_TRUE(m);
  std::vector<float> clean = librispeech_16k();
  ASSERT_FALSE(clean.empty());
  clean.resize(16000 * 2);
  const std::vector<float> x = add_white_noise(clean, 5.0, 5);
  nn::audio::StreamOptions cpu, ref;
  cpu.session.delegates = {"cpu"};
  ref.session.delegates = {"reference"};
  auto pc = StreamProcessor::open(m, cpu);
  auto pr = StreamProcessor::open(m, ref);
  ASSERT_TRUE(pc.is_ok() && pr.is_ok());
  EXPECT_EQ((*pc)->delegate_summary(), "cpu");
  EXPECT_EQ((*pr)->delegate_summary(), "reference");
  const std::vector<float> yc = run(**pc, x), yr = run(**pr, x);
  double err = 0;
  for (size_t i = 0; i < yc.size(); ++i) err += (double(yc[i]) - yr[i]) * (double(yc[i]) - yr[i]);
  const double snr = 10 * std::log10(energy(yr.data(), yr.size()) / err);
  std::printf("cpu vs reference: SNR %.1f dB, max abs diff %.2e\n", snr, max_abs_diff(yc.data(), yr.data(), yc.size()));
  EXPECT_GT(snr, 80.0);
}

// Channels have their own state: a stereo file's left channel comes out as the mono run
// of the same samples; a wrong rate is refused naming the rate needed.
TEST(Dtln, ChannelsAreIndependentAndTheRateIsChecked) {
  auto m = dtln();
  ASSERT_TRUE(m);
  const std::vector<float> left = nn_test::random_floats(16000, 10, -0.2f, 0.2f);
  const std::vector<float> right = nn_test::random_floats(16000, 11, -0.5f, 0.5f);
  nn::audio::AudioBuffer stereo{16000, 2, {}};
  for (size_t i = 0; i < left.size(); ++i) {
    stereo.samples.push_back(left[i]);
    stereo.samples.push_back(right[i]);
  }
  auto both = nn::audio::process_audio(m, stereo, {}, true);
  auto mono = nn::audio::process_audio(m, {16000, 1, left}, {}, true);
  ASSERT_TRUE(both.is_ok() && mono.is_ok());
  ASSERT_EQ(both->frames(), left.size());
  for (size_t i = 0; i < left.size(); ++i) ASSERT_EQ(both->samples[2 * i], mono->samples[i]) << i;
  auto wrong = nn::audio::process_audio(m, {48000, 1, left}, {}, true);
  ASSERT_FALSE(wrong.is_ok());
  EXPECT_NE(wrong.status().message().find("48000 Hz, the model takes 16000 Hz"), std::string::npos)
      << wrong.status().to_string();
}

// NaN and Inf input samples are taken as 0 and do not reach the state; samples so large
// that the spectrum overflows turn the state non-finite, which resets the model (counted)
// instead of silencing the rest of the stream.
TEST(Dtln, NonFiniteInputDoesNotPoisonTheStream) {
  auto m = dtln();
  ASSERT_TRUE(m);
  std::vector<float> clean = librispeech_16k();
  ASSERT_FALSE(clean.empty());
  clean.resize(16000 * 4);
  std::vector<float> x = add_white_noise(clean, 5.0, 6);
  auto p = StreamProcessor::open(m);
  ASSERT_TRUE(p.is_ok());
  std::vector<float> damaged = x;
  damaged[16000] = std::numeric_limits<float>::quiet_NaN();
  damaged[16001] = std::numeric_limits<float>::infinity();
  for (size_t i = 24000; i < 24000 + 128; ++i) damaged[i] = 3e38f;  // finite, but overflows the FFT
  const std::vector<float> y = run(**p, damaged);
  for (size_t i = 0; i < y.size(); ++i) ASSERT_TRUE(std::isfinite(y[i])) << i;
  EXPECT_GE((*p)->nonfinite_resets(), 1u);
  EXPECT_EQ((*p)->nonfinite_samples(), 2u);
  // A second after the damage the output is denoised speech again.
  const size_t from = 24000 + 16000, n = x.size() - from - 384;
  const double before = si_sdr(clean.data() + from, x.data() + from, n);
  const double after = si_sdr(clean.data() + from, y.data() + from + 384, n);
  std::printf("after recovery: SI-SDR %.2f dB -> %.2f dB\n", before, after);
  EXPECT_GT(after, before + 3.0);
}

std::pair<int, std::string> run_tool(const std::string& cmd) {
  std::string out;
  FILE* pipe = popen((cmd + " 2>&1").c_str(), "r");
  if (!pipe) return {-1, ""};
  char buf[4096];
  for (size_t n; (n = fread(buf, 1, sizeof buf, pipe)) > 0;) out.append(buf, n);
  const int status = pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

// nnrun over a WAV file writes the processed WAV, as long as the input's; a file at
// another rate is refused naming the rate the model needs.
TEST(Dtln, NnrunProcessesAWavFile) {
  const std::string tool = std::string(NN_BINARY_DIR) + "/engine/nnrun";
  if (!std::filesystem::exists(tool)) GTEST_SKIP() << "nnrun is not built in " << NN_BINARY_DIR;
  const std::string in = temp_path("nnrun_in.wav"), dir = temp_path("nnrun_out");
  nn::audio::AudioBuffer a{16000, 2, nn_test::random_floats(2 * 9000, 13, -0.3f, 0.3f)};
  NN_ASSERT_OK(nn::audio::write_wav(in, a));
  auto [code, out] = run_tool(tool + " " + NN_DTLN_NNAPI + " --input " + in + " --save-outputs " + dir);
  ASSERT_EQ(code, 0) << out;
  EXPECT_NE(out.find("2 channel(s)"), std::string::npos) << out;
  EXPECT_NE(out.find("real-time factor"), std::string::npos) << out;
  auto written = nn::audio::read_audio(dir + "/output_0.wav");
  ASSERT_TRUE(written.is_ok()) << written.status().to_string();
  EXPECT_EQ(written->frames(), 9000u);
  EXPECT_EQ(written->channels, 2);
  a.sample_rate = 48000;
  NN_ASSERT_OK(nn::audio::write_wav(in, a));
  std::tie(code, out) = run_tool(tool + " " + NN_DTLN_NNAPI + " --input " + in);
  EXPECT_EQ(code, 1);
  EXPECT_NE(out.find(in + ": "), std::string::npos) << out;
  EXPECT_NE(out.find("48000 Hz, the model takes 16000 Hz only"), std::string::npos) << out;
  std::filesystem::remove(in);
  std::filesystem::remove_all(dir);
}

TEST(Dtln, WavRoundTrip) {
  const std::string path = temp_path("roundtrip.wav");
  nn::audio::AudioBuffer a{16000, 2, nn_test::random_floats(2000, 12)};
  NN_ASSERT_OK(nn::audio::write_wav(path, a));
  auto b = nn::audio::read_audio(path);
  ASSERT_TRUE(b.is_ok()) << b.status().to_string();
  EXPECT_EQ(b->sample_rate, 16000);
  EXPECT_EQ(b->channels, 2);
  EXPECT_EQ(b->samples, a.samples);
  std::filesystem::remove(path);
  auto missing = nn::audio::read_audio(path);
  ASSERT_FALSE(missing.is_ok());
  EXPECT_NE(missing.status().message().find(path + ": cannot open"), std::string::npos);
}

}  // namespace

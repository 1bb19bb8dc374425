// The streaming audio processor: interprets a StreamDescription (nn/format/stream_file.h)
// around its stages' sessions. Per hop: shift the new samples into the block, window it,
// rFFT once if any stage wants the spectrum, run the stages in order (writing each input
// straight into the session's input buffer), overlap-add the output block.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <complex>
#include <cstring>

#include "audio/real_fft.h"
#include "nn/audio/stream.h"

namespace nn::audio {

namespace {

class FileStreamModel final : public StreamModel {
 public:
  FileStreamModel(StreamDescription d, std::vector<std::shared_ptr<Model>> stages)
      : desc_(std::move(d)), stages_(std::move(stages)) {
    info_.sample_rate = static_cast<int>(desc_.sample_rate);
    info_.block = static_cast<int>(desc_.block);
    info_.hop = static_cast<int>(desc_.hop);
    info_.latency_samples = static_cast<int>(desc_.latency_samples());
    info_.num_stages = static_cast<int>(stages_.size());
    info_.summary = stream_summary(desc_);
    info_.description = desc_.description;
  }
  const StreamInfo& info() const override { return info_; }
  size_t num_stages() const override { return stages_.size(); }
  std::shared_ptr<const Model> stage(size_t i) const override { return i < stages_.size() ? stages_[i] : nullptr; }
  const StreamDescription& description() const override { return desc_; }

 private:
  StreamDescription desc_;
  std::vector<std::shared_ptr<Model>> stages_;
  StreamInfo info_;
};

std::vector<float> window_values(StreamWindow w, size_t n) {
  std::vector<float> v(n, 1.f);
  if (w == StreamWindow::kNone) return v;
  for (size_t i = 0; i < n; ++i) {
    const double hann = 0.5 - 0.5 * std::cos(2.0 * M_PI * static_cast<double>(i) / static_cast<double>(n));
    v[i] = static_cast<float>(w == StreamWindow::kSqrtHann ? std::sqrt(hann) : hann);
  }
  return v;
}

template <typename T>
using FftwPtr = std::unique_ptr<T[], FftwFree>;

class Processor final : public StreamProcessor {
 public:
  Processor(std::shared_ptr<const StreamModel> model, const StreamOptions& options)
      : model_(std::move(model)),
        desc_(model_->description()),
        on_stage_inputs_(options.on_stage_inputs),
        fft_(desc_.block),
        block_(desc_.block),
        hop_(desc_.hop),
        bins_(desc_.bins()) {
    set_attenuation_limit_db(options.attenuation_limit_db);
  }

  Status open(const StreamOptions& options) {
    history_.reset(fft_alloc_floats(block_));
    windowed_.reset(fft_alloc_floats(block_));
    scratch_.reset(fft_alloc_floats(block_));
    overlap_.reset(fft_alloc_floats(block_));
    spectrum_.reset(fft_alloc_complex(bins_));
    masked_.reset(fft_alloc_complex(bins_));
    if (!history_ || !windowed_ || !scratch_ || !overlap_ || !spectrum_ || !masked_)
      return {StatusCode::kOutOfMemory, "cannot allocate the stream's buffers"};
    analysis_ = desc_.analysis_window == StreamWindow::kNone ? std::vector<float>{}
                                                              : window_values(desc_.analysis_window, block_);
    synthesis_ = window_values(desc_.synthesis_window, block_);
    for (float& v : synthesis_) v *= desc_.output_gain;
    for (size_t s = 0; s < model_->num_stages(); ++s) {
      auto session = Session::open(model_->stage(s), options.session);
      if (!session.is_ok()) return session.status().with_context("stage " + std::to_string(s + 1));
      sessions_.push_back(std::move(session).value());
      const StreamStage& st = desc_.stages[s];
      for (const StageInputBinding& b : st.inputs)
        needs_spectrum_ |= b.source == StageInputSource::kRfftMagnitude || b.source == StageInputSource::kMaskedTimeBlock;
      for (StageOutputRole r : st.outputs) {
        if (r == StageOutputRole::kTimeBlock) has_time_output_ = true;
        needs_spectrum_ |= r == StageOutputRole::kSpectralMask;
      }
    }
    reset();
    return Status::ok();
  }

  const StreamInfo& info() const override { return model_->info(); }

  Status process_hop(const float* in, float* out) override {
    const auto t0 = std::chrono::steady_clock::now();
    push(in);
    const float* block = history_.get();
    if (!analysis_.empty()) {
      for (size_t i = 0; i < block_; ++i) windowed_[i] = history_[i] * analysis_[i];
      block = windowed_.get();
    }
    if (needs_spectrum_) fft_.forward(block, spectrum_.get());

    const float* mask = nullptr;
    const float* out_block = nullptr;
    for (size_t s = 0; s < sessions_.size(); ++s) {
      Session& session = *sessions_[s];
      const StreamStage& st = desc_.stages[s];
      for (size_t k = 0; k < st.inputs.size(); ++k) {
        float* dst = session.input_f32(k);
        switch (st.inputs[k].source) {
          case StageInputSource::kRfftMagnitude:
            // sqrt(re^2 + im^2): vectorizes, where std::abs (hypot) does not; no overflow
            // guard needed, as an overflow here is caught as a non-finite state.
            for (size_t i = 0; i < bins_; ++i) {
              const float re = spectrum_[i].real(), im = spectrum_[i].imag();
              dst[i] = std::sqrt(re * re + im * im);
            }
            break;
          case StageInputSource::kTimeBlock:
            std::memcpy(dst, block, block_ * sizeof(float));
            break;
          case StageInputSource::kMaskedTimeBlock:
            masked_time_block(mask, dst);
            break;
          case StageInputSource::kState:
            break;  // the previous hop's state output is already there
        }
      }
      if (on_stage_inputs_) on_stage_inputs_(s, session);
      Status run = session.run();
      if (!run.is_ok()) return run.with_context("stage " + std::to_string(s + 1));
      for (size_t o = 0; o < st.outputs.size(); ++o) {
        if (st.outputs[o] == StageOutputRole::kSpectralMask) mask = session.output_f32(o);
        if (st.outputs[o] == StageOutputRole::kTimeBlock) out_block = session.output_f32(o);
      }
    }
    if (!has_time_output_) {  // the stream's output is the masked spectrum back in time
      masked_time_block(mask, scratch_.get());
      out_block = scratch_.get();
    }

    if (!all_finite(out_block, block_) || !states_finite()) {
      // A non-finite state would poison every later hop: start the model over, keep the
      // input history, and let this hop through as the delayed input.
      std::memcpy(out, history_.get(), hop_ * sizeof(float));
      reset_state();
      ++nonfinite_resets_;
      last_ms_ = elapsed_ms(t0);
      return Status::ok();
    }
    feed_back_state();
    shift_overlap();
    for (size_t i = 0; i < block_; ++i) overlap_[i] += out_block[i] * synthesis_[i];
    std::memcpy(out, overlap_.get(), hop_ * sizeof(float));
    last_ms_ = elapsed_ms(t0);
    return Status::ok();
  }

  void skip_hop(const float* in) override {
    push(in);
    shift_overlap();
  }

  void skip_hop(const float* in, float* delayed_in) override {
    skip_hop(in);
    std::memcpy(delayed_in, history_.get(), hop_ * sizeof(float));
  }

  void reset() override {
    std::memset(history_.get(), 0, block_ * sizeof(float));
    reset_state();
  }

  void set_attenuation_limit_db(float db) override {
    mask_floor_ = (std::isfinite(db) && db > 0.f) ? std::pow(10.f, -db / 20.f) : 0.f;
  }

  double last_hop_ms() const override { return last_ms_; }
  uint64_t nonfinite_resets() const override { return nonfinite_resets_; }
  uint64_t nonfinite_samples() const override { return nonfinite_samples_; }

  std::string delegate_summary() const override {
    std::vector<std::string> per_stage;
    for (const auto& s : sessions_) {
      std::vector<std::string> names;
      for (const auto& p : s->report().partitions)
        if (std::find(names.begin(), names.end(), p.delegate) == names.end()) names.push_back(p.delegate);
      std::string joined;
      for (const std::string& n : names) joined += (joined.empty() ? "" : "+") + n;
      per_stage.push_back(joined.empty() ? "none" : joined);
    }
    if (std::all_of(per_stage.begin(), per_stage.end(), [&](const std::string& v) { return v == per_stage[0]; }))
      return per_stage.empty() ? "" : per_stage[0];
    std::string out;
    for (size_t i = 0; i < per_stage.size(); ++i)
      out += (i ? ", " : "") + std::string("stage ") + std::to_string(i + 1) + ": " + per_stage[i];
    return out;
  }

 private:
  static double elapsed_ms(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  }

  static bool all_finite(const float* v, size_t n) {
    // Summing keeps the loop branch-free; a NaN or Inf anywhere makes the sum non-finite
    // (a finite overflow to Inf counts too, which is as poisonous).
    float acc = 0.f;
    for (size_t i = 0; i < n; ++i) acc += v[i] * 0.f;
    return acc == 0.f;
  }

  // Shifts the block left by a hop and appends the new samples; non-finite ones become 0.
  void push(const float* in) {
    std::memmove(history_.get(), history_.get() + hop_, (block_ - hop_) * sizeof(float));
    float* tail = history_.get() + (block_ - hop_);
    for (size_t i = 0; i < hop_; ++i) {
      const bool finite = std::isfinite(in[i]);
      tail[i] = finite ? in[i] : 0.f;
      nonfinite_samples_ += !finite;
    }
  }

  void shift_overlap() {
    std::memmove(overlap_.get(), overlap_.get() + hop_, (block_ - hop_) * sizeof(float));
    std::memset(overlap_.get() + (block_ - hop_), 0, hop_ * sizeof(float));
  }

  // irFFT(spectrum x max(mask, floor)) into dst (block values). Without a mask (no stage
  // has given one yet) the spectrum goes back unchanged.
  void masked_time_block(const float* mask, float* dst) {
    for (size_t i = 0; i < bins_; ++i) masked_[i] = spectrum_[i] * (mask ? std::max(mask[i], mask_floor_) : 1.f);
    if (RealFft::aligned(dst)) {
      fft_.inverse(masked_.get(), dst);
    } else {
      fft_.inverse(masked_.get(), scratch_.get());
      std::memcpy(dst, scratch_.get(), block_ * sizeof(float));
    }
  }

  bool states_finite() const {
    for (size_t s = 0; s < sessions_.size(); ++s) {
      const StreamStage& st = desc_.stages[s];
      for (size_t o = 0; o < st.outputs.size(); ++o)
        if (st.outputs[o] == StageOutputRole::kState &&
            !all_finite(sessions_[s]->output_f32(o), sessions_[s]->output_desc(o).byte_size() / sizeof(float)))
          return false;
    }
    return true;
  }

  // The state outputs become next hop's state inputs (a copy of a few KB: the session's
  // buffers are its own).
  void feed_back_state() {
    for (size_t s = 0; s < sessions_.size(); ++s) {
      const StreamStage& st = desc_.stages[s];
      for (size_t k = 0; k < st.inputs.size(); ++k)
        if (st.inputs[k].source == StageInputSource::kState)
          std::memcpy(sessions_[s]->input_data(k), sessions_[s]->output_data(st.inputs[k].state_output),
                      sessions_[s]->input_desc(k).byte_size());
    }
  }

  void reset_state() {
    std::memset(overlap_.get(), 0, block_ * sizeof(float));
    for (size_t s = 0; s < sessions_.size(); ++s) {
      const StreamStage& st = desc_.stages[s];
      for (size_t k = 0; k < st.inputs.size(); ++k)
        if (st.inputs[k].source == StageInputSource::kState)
          std::memset(sessions_[s]->input_data(k), 0, sessions_[s]->input_desc(k).byte_size());
    }
  }

  std::shared_ptr<const StreamModel> model_;
  const StreamDescription& desc_;
  std::function<void(size_t, Session&)> on_stage_inputs_;
  RealFft fft_;
  const size_t block_, hop_, bins_;
  FftwPtr<float> history_, windowed_, scratch_, overlap_;
  FftwPtr<std::complex<float>> spectrum_, masked_;
  std::vector<float> analysis_, synthesis_;
  std::vector<std::unique_ptr<Session>> sessions_;
  bool needs_spectrum_ = false, has_time_output_ = false;
  float mask_floor_ = 0.f;
  double last_ms_ = 0;
  uint64_t nonfinite_resets_ = 0;
  uint64_t nonfinite_samples_ = 0;
};

}  // namespace

Result<std::shared_ptr<const StreamModel>> make_stream_model(const StreamDescription& description,
                                                             std::vector<std::shared_ptr<Model>> stages) {
  std::vector<const Model*> views;
  for (const auto& m : stages) {
    if (!m) return Status(StatusCode::kInvalidArgument, "a stage model is null");
    views.push_back(m.get());
  }
  NN_RETURN_IF_ERROR(validate_stream(description, views));
  return std::shared_ptr<const StreamModel>(std::make_shared<FileStreamModel>(description, std::move(stages)));
}

Result<std::shared_ptr<const StreamModel>> load_stream_model(const std::string& path) {
  auto file = load_stream_file(path);
  if (!file.is_ok()) {
    const Status& s = file.status();
    // "not a streaming model: ..." from the reader becomes the API's wording.
    const std::string& m = s.message();
    const std::string prefix = path + ": not a streaming model: ";
    if (m.rfind(prefix, 0) == 0)
      return Status(s.code(), path + ": not a streaming audio model: " + m.substr(prefix.size()));
    return s;
  }
  return std::shared_ptr<const StreamModel>(
      std::make_shared<FileStreamModel>(std::move(file->stream), std::move(file->stages)));
}

Result<std::unique_ptr<StreamProcessor>> StreamProcessor::open(std::shared_ptr<const StreamModel> model,
                                                               const StreamOptions& options) {
  if (!model) return Status(StatusCode::kInvalidArgument, "no stream model");
  auto p = std::make_unique<Processor>(std::move(model), options);
  NN_RETURN_IF_ERROR(p->open(options));
  return std::unique_ptr<StreamProcessor>(std::move(p));
}

}  // namespace nn::audio

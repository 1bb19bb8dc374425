#include "denoise_stream.h"

#include <algorithm>
#include <cmath>

namespace nn::plugins {

DenoiseStream::DenoiseStream(std::shared_ptr<const audio::StreamModel> model, int channels)
    : model_(std::move(model)), channels_(channels) {}

Result<std::unique_ptr<DenoiseStream>> DenoiseStream::open(std::shared_ptr<const audio::StreamModel> model,
                                                           int channels, const audio::StreamOptions& options) {
  if (!model) return Status(StatusCode::kInvalidArgument, "no streaming model");
  if (channels < 1) return Status(StatusCode::kInvalidArgument, "channels must be >= 1, got " + std::to_string(channels));
  const audio::StreamInfo& info = model->info();
  if (info.hop < 1 || info.sample_rate < 1 || info.latency_samples < 0)
    return Status(StatusCode::kInvalidModel, "streaming model framing: hop " + std::to_string(info.hop) + ", rate " +
                                                 std::to_string(info.sample_rate) + ", latency " +
                                                 std::to_string(info.latency_samples));
  std::unique_ptr<DenoiseStream> s(new DenoiseStream(model, channels));
  s->info_ = info;
  s->hop_ = info.hop;
  s->latency_ = info.latency_samples;
  // Half a hop (4 ms for DTLN): long enough that switching between the processed and the
  // unprocessed signal does not click, short enough to add little delay.
  s->fade_ = std::max(1, info.hop / 2);
  for (int c = 0; c < channels; ++c) {
    auto p = audio::StreamProcessor::open(model, options);
    if (!p.is_ok()) return p.status().with_context("channel " + std::to_string(c));
    s->processors_.push_back(std::move(p).value());
  }
  s->delegate_summary_ = s->processors_[0]->delegate_summary();
  s->attenuation_db_.store(options.attenuation_limit_db);
  s->applied_attenuation_db_ = options.attenuation_limit_db;
  s->hop_fill_.assign(static_cast<size_t>(channels) * info.hop, 0.0f);
  s->worker_ = std::thread([p = s.get()] { p->worker_loop(); });
  return s;
}

DenoiseStream::~DenoiseStream() {
  {
    std::lock_guard<std::mutex> lk(mutex_);
    stop_ = true;
  }
  work_cv_.notify_all();
  if (worker_.joinable()) worker_.join();
}

void DenoiseStream::worker_loop() {
  const size_t H = static_cast<size_t>(hop_);
  for (;;) {
    std::shared_ptr<Job> job;
    {
      std::unique_lock<std::mutex> lk(mutex_);
      work_cv_.wait(lk, [&] { return stop_ || !queue_.empty(); });
      if (stop_) return;
      job = std::move(queue_.front());
      queue_.pop_front();
      if (!job->reset && !job->skip && !job->cancelled.load()) job->state = HopState::kRunning;
    }
    if (job->reset) {
      for (auto& p : processors_) p->reset();
      continue;
    }
    const float att = attenuation_db_.load();
    if (att != applied_attenuation_db_) {
      for (auto& p : processors_) p->set_attenuation_limit_db(att);
      applied_attenuation_db_ = att;
    }
    if (job->skip || job->cancelled.load()) {
      for (int c = 0; c < channels_; ++c) processors_[c]->skip_hop(&job->in[c * H]);
      std::lock_guard<std::mutex> lk(mutex_);
      job->state = HopState::kSkipped;
      continue;
    }
    const auto t0 = Clock::now();
    Status failed;
    for (int c = 0; c < channels_; ++c) {
      // Every channel sees every hop exactly once, processed or skipped, so the framing
      // of all channels stays in step whatever happens to this one.
      if (!failed.is_ok() || job->cancelled.load()) {
        processors_[c]->skip_hop(&job->in[c * H]);
        continue;
      }
      Status st = processors_[c]->process_hop(&job->in[c * H], &job->out[c * H]);
      if (!st.is_ok()) failed = st.with_context("channel " + std::to_string(c));
    }
    const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    uint64_t resets = 0;
    for (auto& p : processors_) resets += p->nonfinite_resets();
    {
      std::lock_guard<std::mutex> lk(mutex_);
      job->state = failed.is_ok() ? HopState::kDone : HopState::kFailed;
      counters_.busy_ms += ms;
      counters_.processed_ms += 1000.0 * hop_ / info_.sample_rate;
      counters_.nonfinite_resets = resets;
      if (!failed.is_ok()) counters_.last_error = failed.to_string();
      hop_ms_.add(ms);
    }
    done_cv_.notify_all();
  }
}

void DenoiseStream::submit_hop(Clock::time_point deadline, bool no_deadline) {
  auto job = std::make_shared<Job>();
  job->in = hop_fill_;
  job->out.assign(hop_fill_.size(), 0.0f);
  job->deadline = deadline;
  job->no_deadline = no_deadline;
  job->skip = bypass_.load();
  {
    std::lock_guard<std::mutex> lk(mutex_);
    queue_.push_back(job);
  }
  work_cv_.notify_one();
  undecided_.push_back(std::move(job));
  ++hops_submitted_;
}

// Waits for each submitted hop, oldest first, until its deadline; late ones are cancelled.
void DenoiseStream::decide_pending() {
  const size_t C = static_cast<size_t>(channels_);
  while (!undecided_.empty()) {
    std::shared_ptr<Job> job = std::move(undecided_.front());
    undecided_.pop_front();
    const int64_t j = hops_decided_;
    Outcome outcome = Outcome::kUnprocessed;
    {
      std::unique_lock<std::mutex> lk(mutex_);
      if (job->skip) {
        ++counters_.hops_bypassed;
      } else {
        auto finished = [&] { return job->state == HopState::kDone || job->state == HopState::kFailed; };
        if (job->no_deadline)
          done_cv_.wait(lk, finished);
        else
          done_cv_.wait_until(lk, job->deadline, finished);
        if (job->state == HopState::kDone) {
          outcome = Outcome::kProcessed;
          ++counters_.hops_run;
        } else if (job->state == HopState::kFailed) {
          ++counters_.hops_failed;
        } else {
          job->cancelled.store(true);  // queued: skipped; running: its result is ignored
          ++counters_.hops_late;
        }
      }
    }
    if (outcome == Outcome::kProcessed) {
      // Output frame i of hop j is content frame j*H + i - La.
      for (int i = 0; i < hop_; ++i) {
        const int64_t m = j * hop_ + i - latency_;
        // Before the first frame (the model's start-up), or past the last (drain's padding).
        if (m < emit_pos_ || m >= frames_taken_) continue;
        const size_t at = static_cast<size_t>(m - emit_pos_) * C;
        for (size_t c = 0; c < C; ++c) pending_out_[at + c] = job->out[c * hop_ + i];
      }
    }
    outcomes_.push_back(outcome);
    ++hops_decided_;
  }
}

DenoiseStream::Outcome DenoiseStream::outcome_of(int64_t hop, bool final) const {
  if (hop < outcome_base_ || hops_decided_ == 0) return Outcome::kProcessed;
  if (hop >= hops_decided_) return final ? outcomes_.back() : Outcome::kProcessed;
  return outcomes_[static_cast<size_t>(hop - outcome_base_)];
}

// 1 = processed, 0 = unprocessed; F-frame linear ramps where a hop's neighbour went out
// the other way.
float DenoiseStream::gain_at(int64_t m, bool final) const {
  const int64_t p = m + latency_;
  const int64_t j = p / hop_;
  const int pos = static_cast<int>(p - j * hop_);
  if (outcome_of(j, final) == Outcome::kUnprocessed) return 0.0f;
  float g = 1.0f;
  if (j > 0 && outcome_of(j - 1, final) == Outcome::kUnprocessed) g = std::min(g, (pos + 0.5f) / fade_);
  if (outcome_of(j + 1, final) == Outcome::kUnprocessed) g = std::min(g, (hop_ - pos - 0.5f) / fade_);
  return std::clamp(g, 0.0f, 1.0f);
}

void DenoiseStream::emit(size_t end, bool final, std::vector<float>& out) {
  const size_t C = static_cast<size_t>(channels_);
  if (static_cast<int64_t>(end) <= emit_pos_) return;
  const size_t n = static_cast<size_t>(static_cast<int64_t>(end) - emit_pos_);
  const size_t base = out.size();
  out.resize(base + n * C);
  for (size_t f = 0; f < n; ++f) {
    const float g = gain_at(emit_pos_ + static_cast<int64_t>(f), final);
    const float* in = &pending_in_[f * C];
    const float* pr = &pending_out_[f * C];
    float* o = &out[base + f * C];
    if (g >= 1.0f) {
      for (size_t c = 0; c < C; ++c) o[c] = pr[c];
    } else if (g <= 0.0f) {
      for (size_t c = 0; c < C; ++c) o[c] = in[c];
    } else {
      for (size_t c = 0; c < C; ++c) o[c] = g * pr[c] + (1.0f - g) * in[c];
    }
  }
  pending_in_.erase(pending_in_.begin(), pending_in_.begin() + static_cast<std::ptrdiff_t>(n * C));
  pending_out_.erase(pending_out_.begin(), pending_out_.begin() + static_cast<std::ptrdiff_t>(n * C));
  emit_pos_ += static_cast<int64_t>(n);
  // Keep the outcome of the hop before the next frame's hop (its fade-in looks back).
  const int64_t keep_from = (emit_pos_ + latency_) / hop_ - 1;
  while (outcome_base_ < keep_from && outcome_base_ < hops_decided_ - 1) {
    outcomes_.pop_front();
    ++outcome_base_;
  }
  std::lock_guard<std::mutex> lk(mutex_);
  counters_.frames_out += n;
}

void DenoiseStream::push(const float* in, size_t frames, Clock::time_point arrival, bool live,
                         std::vector<float>& out) {
  const size_t C = static_cast<size_t>(channels_);
  const auto deadline = arrival + std::chrono::microseconds(budget_us_.load());
  live_ = live;
  uint64_t nonfinite = 0;
  pending_in_.reserve(pending_in_.size() + frames * C);
  for (size_t f = 0; f < frames; ++f) {
    for (size_t c = 0; c < C; ++c) {
      float v = in[f * C + c];
      // NaN/Inf would reach the output through the unprocessed path: silence instead.
      if (!std::isfinite(v)) {
        v = 0.0f;
        ++nonfinite;
      }
      pending_in_.push_back(v);
      hop_fill_[c * hop_ + fill_] = v;
    }
    if (++fill_ == hop_) {
      fill_ = 0;
      submit_hop(deadline, !live);
    }
  }
  pending_out_.resize(pending_in_.size(), 0.0f);
  frames_taken_ += static_cast<int64_t>(frames);
  {
    std::lock_guard<std::mutex> lk(mutex_);
    counters_.frames_in += frames;
    counters_.nonfinite_samples += nonfinite;
  }
  decide_pending();
  // Content of the last decided hop minus the fade look-ahead (its fade-out, if the next
  // hop goes out unprocessed, starts there).
  const int64_t end = std::min<int64_t>(frames_taken_, hops_decided_ * hop_ - latency_ - fade_);
  if (end > emit_pos_) emit(static_cast<size_t>(end), false, out);
}

void DenoiseStream::drain(std::vector<float>& out) {
  if (frames_taken_ > 0) {
    const auto deadline = Clock::now() + std::chrono::microseconds(budget_us_.load());
    // Enough hops (the partial one padded with silence) that the processed stream covers
    // every frame taken.
    const int64_t needed = (frames_taken_ - 1 + latency_) / hop_ + 1;
    while (hops_submitted_ < needed) {
      for (int c = 0; c < channels_; ++c)
        std::fill(hop_fill_.begin() + c * hop_ + fill_, hop_fill_.begin() + (c + 1) * hop_, 0.0f);
      fill_ = 0;
      submit_hop(deadline, !live_);
    }
    decide_pending();
    emit(static_cast<size_t>(frames_taken_), true, out);
  }
  reset();
}

void DenoiseStream::reset() {
  {
    std::lock_guard<std::mutex> lk(mutex_);
    // Hops not started yet are dropped: the processors start over after the marker.
    queue_.erase(std::remove_if(queue_.begin(), queue_.end(), [](const auto& j) { return !j->reset; }),
                 queue_.end());
    auto marker = std::make_shared<Job>();
    marker->reset = true;
    queue_.push_back(std::move(marker));
  }
  work_cv_.notify_one();
  std::fill(hop_fill_.begin(), hop_fill_.end(), 0.0f);
  fill_ = 0;
  hops_submitted_ = frames_taken_ = emit_pos_ = 0;
  pending_in_.clear();
  pending_out_.clear();
  undecided_.clear();
  outcomes_.clear();
  outcome_base_ = hops_decided_ = 0;
}

DenoiseCounters DenoiseStream::counters() const {
  std::lock_guard<std::mutex> lk(mutex_);
  return counters_;
}

double DenoiseStream::hop_ms_percentile(double p) const {
  std::lock_guard<std::mutex> lk(mutex_);
  return hop_ms_.percentile(p);
}

}  // namespace nn::plugins

// nndenoise's plain C++ core (no GStreamer): interleaved audio in, the same audio out with
// noise suppressed, under a latency budget. One nn::audio::StreamProcessor per channel runs
// on a worker thread; the caller's (streaming) thread only frames samples into hops, waits
// for each hop's result until its deadline and mixes.
//
// Timeline. The processors' output for hop j (input frames [j*H, (j+1)*H)) is the stream
// delayed by La = info().latency_samples. The stream takes that back out: the k-th frame
// it emits is the k-th frame it took, processed (its timestamps stay true). A frame waits
// inside at most delay_frames() = H - 1 + La + F frames before it can leave (H - 1 to
// complete its hop, La the model's own delay, F the crossfade look-ahead); drain() lets
// the rest out (EOS, DISCONT), the last hop padded with silence.
//
// Over budget. A hop whose result is not ready by its deadline goes out unprocessed: the
// input itself, which is exactly aligned with the processed stream, crossfaded over F
// frames at both ends (the fade-out runs in the tail of the last processed hop, hence the
// look-ahead). Its inference is cancelled: queued, the processors skip_hop() it (framing
// and state stay valid); already running, the result is thrown away. No frame is dropped
// or repeated. bypass=true takes every hop this way, on purpose.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "nn/audio/stream.h"
#include "latency_window.h"

namespace nn::plugins {

struct DenoiseCounters {
  uint64_t hops_run = 0;       // processed in time: their output went out
  uint64_t hops_late = 0;      // result not ready by the deadline: went out unprocessed
  uint64_t hops_bypassed = 0;  // bypass=true: not processed on purpose
  uint64_t hops_failed = 0;    // the processor returned an error: went out unprocessed
  uint64_t nonfinite_samples = 0;  // NaN/Inf input samples, taken as silence
  uint64_t nonfinite_resets = 0;   // the processors' own resets after a non-finite state
  uint64_t frames_in = 0, frames_out = 0;
  double busy_ms = 0;       // worker time spent in process_hop, every channel
  double processed_ms = 0;  // audio duration the worker processed (for the real-time factor)
  std::string last_error;   // the newest processor error, if any
};

class DenoiseStream {
 public:
  using Clock = std::chrono::steady_clock;

  // Opens one processor per channel. Errors name the channel.
  static Result<std::unique_ptr<DenoiseStream>> open(std::shared_ptr<const audio::StreamModel> model,
                                                     int channels, const audio::StreamOptions& options);
  ~DenoiseStream();
  DenoiseStream(const DenoiseStream&) = delete;
  DenoiseStream& operator=(const DenoiseStream&) = delete;

  int channels() const { return channels_; }
  const audio::StreamInfo& info() const { return info_; }
  // The most frames that can be inside after push(): the element's algorithmic delay.
  int delay_frames() const { return hop_ - 1 + latency_ + fade_; }

  // Takes `frames` interleaved frames and appends to `out` every frame whose output is
  // decided. Live, each hop completed here gets until arrival + budget. Not live (a file),
  // every hop is waited for: nothing is late when nothing runs against a clock, and the
  // output is the same on a loaded machine as on an idle one.
  void push(const float* in, size_t frames, Clock::time_point arrival, bool live, std::vector<float>& out);
  // Emits everything held (the last hop padded with silence), then starts a new stream.
  void drain(std::vector<float>& out);
  // Forgets everything held and resets the model state (FLUSH).
  void reset();

  void set_budget(std::chrono::microseconds budget) { budget_us_.store(budget.count()); }
  void set_bypass(bool bypass) { bypass_.store(bypass); }
  void set_attenuation_limit_db(float db) { attenuation_db_.store(db); }

  DenoiseCounters counters() const;
  // Per-hop worker time (all channels), ms: p50, p99 over the recent hops.
  double hop_ms_percentile(double p) const;
  std::string delegate_summary() const { return delegate_summary_; }

 private:
  enum class HopState { kQueued, kRunning, kDone, kFailed, kSkipped };
  struct Job {
    bool reset = false;  // a reset marker, not a hop
    bool skip = false;   // bypass: the worker only advances the framing
    std::atomic<bool> cancelled{false};
    HopState state = HopState::kQueued;  // under mutex_
    std::vector<float> in, out;          // planar: channel c at [c*H, (c+1)*H)
    Clock::time_point deadline;
    bool no_deadline = false;  // not live: waited for however long it takes
  };
  // How a hop's frames went out (the crossfade looks at the neighbours).
  enum class Outcome : uint8_t { kProcessed, kUnprocessed };

  DenoiseStream(std::shared_ptr<const audio::StreamModel> model, int channels);
  void worker_loop();
  void submit_hop(Clock::time_point deadline, bool no_deadline);
  void decide_pending();
  void emit(size_t limit_frames, bool final, std::vector<float>& out);
  float gain_at(int64_t content_index, bool final) const;
  Outcome outcome_of(int64_t hop, bool final) const;

  std::shared_ptr<const audio::StreamModel> model_;
  std::vector<std::unique_ptr<audio::StreamProcessor>> processors_;  // worker thread only
  audio::StreamInfo info_;
  int channels_ = 1, hop_ = 1, latency_ = 0, fade_ = 1;
  std::string delegate_summary_;

  // Streaming thread side.
  std::vector<float> hop_fill_;  // planar, the hop being filled
  int fill_ = 0;
  int64_t hops_submitted_ = 0;
  bool live_ = false;  // of the last push: how drain() waits
  int64_t frames_taken_ = 0;       // since the last reset
  int64_t emit_pos_ = 0;           // content index of pending_in_'s first frame
  std::vector<float> pending_in_;  // interleaved input not yet emitted (the unprocessed signal)
  std::vector<float> pending_out_;  // interleaved processed output, parallel to pending_in_
  std::deque<std::shared_ptr<Job>> undecided_;
  std::deque<Outcome> outcomes_;   // hops [outcome_base_, hops_decided_)
  int64_t outcome_base_ = 0, hops_decided_ = 0;

  std::atomic<int64_t> budget_us_{10000};
  std::atomic<bool> bypass_{false};
  std::atomic<float> attenuation_db_{0};
  float applied_attenuation_db_ = 0;  // worker thread

  mutable std::mutex mutex_;
  std::condition_variable work_cv_, done_cv_;
  std::deque<std::shared_ptr<Job>> queue_;
  bool stop_ = false;
  DenoiseCounters counters_;  // under mutex_
  LatencyWindow hop_ms_{1024};
  std::thread worker_;
};

}  // namespace nn::plugins

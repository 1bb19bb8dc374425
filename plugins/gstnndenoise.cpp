/**
 * SECTION:element-nndenoise
 * @title: nndenoise
 *
 * Suppresses noise in speech with a streaming audio model (an nnpipe .nnapi file that
 * holds the model's stages and framing, such as DTLN made by
 * `nnconvert dtln_1.tflite dtln_2.tflite --stream assets/streams/dtln.toml -o dtln.nnapi`).
 * The element knows nothing of one model: rate, block, hop, delay and state wiring come
 * from the file.
 *
 * Caps: F32LE or S16LE, interleaved, any number of channels (each with its own model
 * state), at the model's rate only; put audioresample in front. A rate the model cannot
 * take is refused at negotiation with an error that names the rate it needs.
 *
 * Timing. Output buffers carry the input's timestamps and offsets, continuous, and every
 * sample that goes in comes out once, in order, aligned with its timestamp: the model's
 * own delay is taken back out. To do that the element holds up to one hop plus the
 * model's delay plus a short crossfade look-ahead (35.9 ms for DTLN at 16 kHz); the
 * first buffers come out shorter by that much and EOS (or a DISCONT) lets the rest out,
 * so over a stream samples out == samples in. FLUSH forgets what is held and resets the
 * model state; DISCONT drains, then resets. The LATENCY query answers that hold plus
 * latency-budget.
 *
 * Inference runs on a worker thread. With a live source each hop's result is waited for
 * until latency-budget ms after the buffer that completed it arrived; from a file (not
 * live) every hop is waited for, so a file's output does not depend on the machine's
 * load. A hop that is not ready in time goes out
 * unprocessed, the input itself at the same alignment, crossfaded in and out; its
 * inference is skipped, so the model state stays valid and the worker catches up. The
 * stats property and periodic "nndenoise-stats" element messages count hops run, late
 * and bypassed, per-hop p50/p99 time, the real-time factor and the delegate.
 * thread-priority=realtime (asked for: the default is normal, as for nnsegment; the sound
 * graphs ask for it) gives the streaming thread a real-time round-robin priority where the
 * process may have one (else a short scheduling slice), so on a loaded machine it wakes at
 * its hop's deadline; the worker stays at normal priority. NaN or Inf
 * input samples are taken as silence (counted); a model state that turns non-finite is
 * reset (counted).
 *
 * ## Example launch lines
 * |[
 * gst-launch-1.0 filesrc location=noisy.wav ! decodebin ! audioconvert ! audioresample ! \
 *   nndenoise model=assets/models/dtln.nnapi ! audioconvert ! wavenc ! filesink location=clean.wav
 * ]| Denoises a file (any format decodebin reads) into a 16 kHz WAV.
 * |[
 * gst-launch-1.0 -m autoaudiosrc ! audioconvert ! audioresample ! \
 *   nndenoise model=assets/models/dtln.nnapi attenuation-limit=30 latency-budget=10 ! \
 *   audioconvert ! audioresample ! autoaudiosink
 * ]| A microphone to the speakers, noise turned down by at most 30 dB; -m prints the
 * nndenoise-stats messages.
 */
#include "gstnndenoise.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "denoise_stream.h"
#include "thread_priority.h"

GST_DEBUG_CATEGORY_STATIC(gst_nn_denoise_debug);
#define GST_CAT_DEFAULT gst_nn_denoise_debug

enum {
  PROP_0,
  PROP_MODEL,
  PROP_DELEGATE,
  PROP_THREADS,
  PROP_LATENCY_BUDGET,
  PROP_ATTENUATION_LIMIT,
  PROP_BYPASS,
  PROP_STATS,
  PROP_STATS_INTERVAL,
  PROP_THREAD_PRIORITY,
};

#define DEFAULT_PROP_MODEL nullptr
// A streaming audio model is small (DTLN: a few hundred kMAC per hop): the CPU answers in
// a fraction of a millisecond, where a hand-off to another device costs more than that.
#define DEFAULT_PROP_DELEGATE GST_NN_DELEGATE_CPU
#define DEFAULT_PROP_THREADS 1
// Slightly more than one 8 ms hop: a hop that has waited that long will not be missed.
#define DEFAULT_PROP_LATENCY_BUDGET 10
#define DEFAULT_PROP_ATTENUATION_LIMIT 0.0
#define DEFAULT_PROP_BYPASS FALSE
#define DEFAULT_PROP_STATS_INTERVAL 1000
#define DEFAULT_PROP_THREAD_PRIORITY GST_NN_THREAD_PRIORITY_NORMAL

#define NN_DENOISE_CAPS GST_AUDIO_CAPS_MAKE("{ F32LE, S16LE }") ", layout = (string) interleaved"

namespace nn::plugins {

// What the streaming thread works with. `stream` and the final counters are read by
// get_property("stats") too: swapped and read under GST_OBJECT_LOCK.
struct DenoiseState {
  std::mutex model_mutex;  // loading (start, or a caps query before it)
  std::shared_ptr<const audio::StreamModel> model;
  std::string model_path;
  std::string model_error;

  std::unique_ptr<DenoiseStream> stream;
  DenoiseCounters final_counters;  // kept after stop
  double final_p50 = 0, final_p99 = 0;
  std::string delegate_summary;

  GstAudioFormat format = GST_AUDIO_FORMAT_UNKNOWN;
  int channels = 0, rate = 0;
  bool live = false, live_known = false;
  // Between start and stop: caps say the model's rate (before it, links made in NULL
  // state stay open so a wrong rate fails at negotiation, with a message that names it).
  std::atomic<bool> started{false};

  // Output timestamps: a chunk starts at the first buffer after start, FLUSH or DISCONT.
  bool chunk_started = false;
  GstClockTime chunk_pts = GST_CLOCK_TIME_NONE;
  guint64 chunk_offset = GST_BUFFER_OFFSET_NONE;
  guint64 chunk_frames_out = 0;
  bool next_discont = true;

  FrameThreadPriority thread_priority;
  ThreadPriority thread_priority_got = ThreadPriority::kNormal;

  std::vector<float> in_f32, out_f32;
  std::deque<GstBuffer*> out_queue;
  gint64 last_stats_post_us = 0;

  ~DenoiseState() {
    for (GstBuffer* b : out_queue) gst_buffer_unref(b);
  }
};

}  // namespace nn::plugins

using nn::plugins::DenoiseState;
using nn::plugins::DenoiseStream;
using nn::plugins::ThreadPriority;

#define gst_nn_denoise_parent_class parent_class
G_DEFINE_TYPE(GstNnDenoise, gst_nn_denoise, GST_TYPE_AUDIO_FILTER);
GST_ELEMENT_REGISTER_DEFINE(nndenoise, "nndenoise", GST_RANK_NONE, GST_TYPE_NN_DENOISE);

// The model at the model property's path, loaded once per path. Empty on failure (the
// reason in state->model_error).
static std::shared_ptr<const nn::audio::StreamModel> ensure_model(GstNnDenoise* self) {
  DenoiseState* s = self->state;
  GST_OBJECT_LOCK(self);
  const std::string path = self->model ? self->model : "";
  GST_OBJECT_UNLOCK(self);
  std::lock_guard<std::mutex> lk(s->model_mutex);
  if (s->model && s->model_path == path) return s->model;
  s->model.reset();
  s->model_path = path;
  if (path.empty()) {
    s->model_error = "no model set: set the model property to a streaming audio .nnapi file";
    return nullptr;
  }
  try {
    auto loaded = nn::audio::load_stream_model(path);
    if (!loaded.is_ok()) {
      s->model_error = loaded.status().to_string();
      if (!g_str_has_suffix(path.c_str(), ".nnapi"))
        s->model_error +=
            "; nndenoise takes a streaming .nnapi file: nnconvert STAGE1 [STAGE2 ...] --stream FRAMING.toml -o "
            "MODEL.nnapi (DTLN: assets/streams/dtln.toml)";
      return nullptr;
    }
    s->model = std::move(loaded).value();
    s->model_error.clear();
  } catch (const std::exception& e) {
    s->model_error = path + ": " + e.what();
  }
  return s->model;
}

static GstStructure* make_stats_locked(GstNnDenoise* self) {
  DenoiseState* s = self->state;
  nn::plugins::DenoiseCounters c = s->final_counters;
  double p50 = s->final_p50, p99 = s->final_p99;
  if (s->stream) {
    c = s->stream->counters();
    p50 = s->stream->hop_ms_percentile(50);
    p99 = s->stream->hop_ms_percentile(99);
  }
  const double rtf = c.processed_ms > 0 ? c.busy_ms / c.processed_ms : 0.0;
  const double delay_ms =
      s->stream ? 1000.0 * s->stream->delay_frames() / s->stream->info().sample_rate : 0.0;
  return gst_structure_new(
      "nndenoise-stats", "hops-run", G_TYPE_UINT64, c.hops_run, "hops-late", G_TYPE_UINT64, c.hops_late,
      "hops-bypassed", G_TYPE_UINT64, c.hops_bypassed, "hops-failed", G_TYPE_UINT64, c.hops_failed,
      "hop-p50-ms", G_TYPE_DOUBLE, p50, "hop-p99-ms", G_TYPE_DOUBLE, p99, "real-time-factor", G_TYPE_DOUBLE,
      rtf, "delegate", G_TYPE_STRING, s->delegate_summary.c_str(), "nonfinite-samples", G_TYPE_UINT64,
      c.nonfinite_samples, "nonfinite-resets", G_TYPE_UINT64, c.nonfinite_resets, "samples-in", G_TYPE_UINT64,
      c.frames_in, "samples-out", G_TYPE_UINT64, c.frames_out, "channels", G_TYPE_UINT,
      static_cast<guint>(s->channels), "delay-ms", G_TYPE_DOUBLE, delay_ms, "latency-budget-ms", G_TYPE_UINT,
      self->latency_budget_ms, "last-error", G_TYPE_STRING, c.last_error.c_str(), "thread-priority", G_TYPE_STRING,
      nn::plugins::to_string(s->thread_priority_got), nullptr);
}

static void gst_nn_denoise_set_property(GObject* object, guint prop_id, const GValue* value, GParamSpec* pspec) {
  GstNnDenoise* self = GST_NN_DENOISE(object);
  bool latency_changed = false;
  GST_OBJECT_LOCK(self);
  DenoiseStream* stream = self->state->stream.get();
  switch (prop_id) {
    case PROP_MODEL:
      g_free(self->model);
      self->model = g_value_dup_string(value);
      break;
    case PROP_DELEGATE:
      self->delegate = static_cast<GstNnDelegate>(g_value_get_enum(value));
      break;
    case PROP_THREADS:
      self->threads = g_value_get_int(value);
      break;
    case PROP_LATENCY_BUDGET: {
      const guint v = g_value_get_uint(value);
      latency_changed = v != self->latency_budget_ms;
      self->latency_budget_ms = v;
      if (stream) stream->set_budget(std::chrono::milliseconds(v));
      break;
    }
    case PROP_ATTENUATION_LIMIT:
      self->attenuation_limit_db = g_value_get_double(value);
      if (stream) stream->set_attenuation_limit_db(static_cast<float>(self->attenuation_limit_db));
      break;
    case PROP_BYPASS:
      self->bypass = g_value_get_boolean(value);
      if (stream) stream->set_bypass(self->bypass);
      break;
    case PROP_STATS_INTERVAL:
      self->stats_interval_ms = g_value_get_uint(value);
      break;
    case PROP_THREAD_PRIORITY:
      self->thread_priority = static_cast<GstNnThreadPriority>(g_value_get_enum(value));
      break;
    default:
      G_OBJECT_WARN_INVALID_PROPERTY_ID(object, prop_id, pspec);
      break;
  }
  GST_OBJECT_UNLOCK(self);
  // The budget is part of what this element adds to the pipeline latency.
  if (latency_changed) gst_element_post_message(GST_ELEMENT(self), gst_message_new_latency(GST_OBJECT(self)));
}

static void gst_nn_denoise_get_property(GObject* object, guint prop_id, GValue* value, GParamSpec* pspec) {
  GstNnDenoise* self = GST_NN_DENOISE(object);
  GST_OBJECT_LOCK(self);
  switch (prop_id) {
    case PROP_MODEL:
      g_value_set_string(value, self->model);
      break;
    case PROP_DELEGATE:
      g_value_set_enum(value, self->delegate);
      break;
    case PROP_THREADS:
      g_value_set_int(value, self->threads);
      break;
    case PROP_LATENCY_BUDGET:
      g_value_set_uint(value, self->latency_budget_ms);
      break;
    case PROP_ATTENUATION_LIMIT:
      g_value_set_double(value, self->attenuation_limit_db);
      break;
    case PROP_BYPASS:
      g_value_set_boolean(value, self->bypass);
      break;
    case PROP_STATS:
      g_value_take_boxed(value, make_stats_locked(self));
      break;
    case PROP_STATS_INTERVAL:
      g_value_set_uint(value, self->stats_interval_ms);
      break;
    case PROP_THREAD_PRIORITY:
      g_value_set_enum(value, self->thread_priority);
      break;
    default:
      G_OBJECT_WARN_INVALID_PROPERTY_ID(object, prop_id, pspec);
      break;
  }
  GST_OBJECT_UNLOCK(self);
}

static void post_model_error(GstNnDenoise* self) {
  DenoiseState* s = self->state;
  std::string path, why;
  {
    std::lock_guard<std::mutex> lk(s->model_mutex);
    path = s->model_path;
    why = s->model_error;
  }
  if (path.empty()) {
    GST_ELEMENT_ERROR(self, RESOURCE, NOT_FOUND, ("No model set"), ("%s", why.c_str()));
  } else if (!g_file_test(path.c_str(), G_FILE_TEST_EXISTS)) {
    GST_ELEMENT_ERROR(self, RESOURCE, NOT_FOUND, ("Could not open model \"%s\"", path.c_str()),
                      ("%s", why.c_str()));
  } else {
    GST_ELEMENT_ERROR(self, RESOURCE, FAILED, ("Could not load model \"%s\"", path.c_str()), ("%s", why.c_str()));
  }
}

static void clear_output_queue(DenoiseState* s) {
  for (GstBuffer* b : s->out_queue) gst_buffer_unref(b);
  s->out_queue.clear();
}

static void reset_timeline(DenoiseState* s) {
  s->chunk_started = false;
  s->chunk_pts = GST_CLOCK_TIME_NONE;
  s->chunk_offset = GST_BUFFER_OFFSET_NONE;
  s->chunk_frames_out = 0;
  s->next_discont = true;
}

static gboolean gst_nn_denoise_start(GstBaseTransform* trans) {
  GstNnDenoise* self = GST_NN_DENOISE(trans);
  if (!ensure_model(self)) {
    post_model_error(self);
    return FALSE;
  }
  DenoiseState* s = self->state;
  reset_timeline(s);
  s->live_known = false;
  s->started = true;
  s->last_stats_post_us = g_get_monotonic_time();
  return TRUE;
}

static gboolean gst_nn_denoise_stop(GstBaseTransform* trans) {
  GstNnDenoise* self = GST_NN_DENOISE(trans);
  DenoiseState* s = self->state;
  s->started = false;
  std::unique_ptr<DenoiseStream> old;
  GST_OBJECT_LOCK(self);
  if (s->stream) {
    // Keep the final counts readable after stop.
    s->final_counters = s->stream->counters();
    s->final_p50 = s->stream->hop_ms_percentile(50);
    s->final_p99 = s->stream->hop_ms_percentile(99);
  }
  old = std::move(s->stream);
  GST_OBJECT_UNLOCK(self);
  old.reset();  // joins the worker outside the object lock
  clear_output_queue(s);
  s->thread_priority.restore();
  s->format = GST_AUDIO_FORMAT_UNKNOWN;
  s->channels = s->rate = 0;
  return TRUE;
}

// Same caps both ways, at the model's rate once the model is known.
static GstCaps* gst_nn_denoise_transform_caps(GstBaseTransform* trans, GstPadDirection direction, GstCaps* caps,
                                              GstCaps* filter) {
  GstNnDenoise* self = GST_NN_DENOISE(trans);
  GstCaps* result = gst_caps_copy(caps);
  std::shared_ptr<const nn::audio::StreamModel> model;
  if (self->state->started) model = ensure_model(self);
  if (model) {
    const int rate = model->info().sample_rate;
    for (guint i = 0; i < gst_caps_get_size(result); ++i)
      gst_structure_set(gst_caps_get_structure(result, i), "rate", G_TYPE_INT, rate, nullptr);
    GstCaps* templ = gst_pad_get_pad_template_caps(direction == GST_PAD_SINK ? GST_BASE_TRANSFORM_SRC_PAD(trans)
                                                                              : GST_BASE_TRANSFORM_SINK_PAD(trans));
    GstCaps* t = gst_caps_intersect(result, templ);
    gst_caps_unref(templ);
    gst_caps_unref(result);
    result = t;
  }
  if (filter) {
    GstCaps* t = gst_caps_intersect_full(filter, result, GST_CAPS_INTERSECT_FIRST);
    gst_caps_unref(result);
    result = t;
  }
  GST_LOG_OBJECT(self, "%s: %" GST_PTR_FORMAT " -> %" GST_PTR_FORMAT,
                 direction == GST_PAD_SINK ? "sink to src" : "src to sink", caps, result);
  return result;
}

// Upstream offers only a rate the model cannot take (its caps, or the filter of its caps
// query, fix the rate and nothing is left): say which rate is needed. Upstream fails to
// negotiate right after; this names the fix.
static void refuse_rate_if_fixed(GstNnDenoise* self, GstCaps* offered) {
  if (!self->state->started || !offered || gst_caps_get_size(offered) == 0) return;
  int rate = 0;
  auto model = ensure_model(self);
  if (model && gst_structure_get_int(gst_caps_get_structure(offered, 0), "rate", &rate) &&
      rate != model->info().sample_rate) {
    GST_ELEMENT_ERROR(self, CORE, NEGOTIATION,
                      ("nndenoise needs %d Hz audio, got %d Hz", model->info().sample_rate, rate),
                      ("model \"%s\" runs at %d Hz only: put audioresample in front of nndenoise",
                       self->state->model_path.c_str(), model->info().sample_rate));
  }
}

static gboolean gst_nn_denoise_accept_caps(GstBaseTransform* trans, GstPadDirection direction, GstCaps* caps) {
  const gboolean ok = GST_BASE_TRANSFORM_CLASS(parent_class)->accept_caps(trans, direction, caps);
  if (!ok && direction == GST_PAD_SINK) refuse_rate_if_fixed(GST_NN_DENOISE(trans), caps);
  return ok;
}

static gboolean gst_nn_denoise_setup(GstAudioFilter* filter, const GstAudioInfo* info) {
  GstNnDenoise* self = GST_NN_DENOISE(filter);
  DenoiseState* s = self->state;
  auto model = ensure_model(self);
  if (!model) {
    post_model_error(self);
    return FALSE;
  }
  const int rate = GST_AUDIO_INFO_RATE(info), channels = GST_AUDIO_INFO_CHANNELS(info);
  if (rate != model->info().sample_rate) {
    GST_ELEMENT_ERROR(self, CORE, NEGOTIATION, ("nndenoise needs %d Hz audio, got %d Hz", model->info().sample_rate, rate),
                      ("model \"%s\": put audioresample in front of nndenoise", s->model_path.c_str()));
    return FALSE;
  }
  GST_OBJECT_LOCK(self);
  nn::audio::StreamOptions options;
  options.session.delegates = nn::plugins::delegate_names(self->delegate);
  options.session.threads = self->threads > 0 ? self->threads : static_cast<int>(g_get_num_processors());
  options.attenuation_limit_db = static_cast<float>(self->attenuation_limit_db);
  const bool bypass = self->bypass;
  const guint budget_ms = self->latency_budget_ms;
  const bool same = s->stream && s->channels == channels;
  GST_OBJECT_UNLOCK(self);
  s->format = GST_AUDIO_INFO_FORMAT(info);
  s->rate = rate;
  if (same) return TRUE;  // a format change only: the stream goes on

  std::unique_ptr<DenoiseStream> stream;
  try {
    auto opened = DenoiseStream::open(model, channels, options);
    if (!opened.is_ok()) {
      GST_ELEMENT_ERROR(self, RESOURCE, FAILED, ("Could not prepare model \"%s\" for inference", s->model_path.c_str()),
                        ("%s", opened.status().to_string().c_str()));
      return FALSE;
    }
    stream = std::move(opened).value();
  } catch (const std::exception& e) {
    GST_ELEMENT_ERROR(self, RESOURCE, FAILED, ("Could not prepare model \"%s\" for inference", s->model_path.c_str()),
                      ("%s", e.what()));
    return FALSE;
  }
  stream->set_bypass(bypass);
  stream->set_budget(std::chrono::milliseconds(budget_ms));
  std::unique_ptr<DenoiseStream> old;
  GST_OBJECT_LOCK(self);
  old = std::move(s->stream);
  s->stream = std::move(stream);
  s->channels = channels;
  s->delegate_summary = s->stream->delegate_summary();
  GST_OBJECT_UNLOCK(self);
  old.reset();
  reset_timeline(s);
  GST_INFO_OBJECT(self, "model %s: %s; %d channel(s), delay %d samples", s->model_path.c_str(),
                  model->info().summary.c_str(), channels, s->stream->delay_frames());
  // The hold depends on the model: let the pipeline ask again.
  gst_element_post_message(GST_ELEMENT(self), gst_message_new_latency(GST_OBJECT(self)));
  return TRUE;
}

// Interleaved float frames -> an output buffer in the negotiated format, stamped where the
// chunk's timeline says.
static GstBuffer* make_output(GstNnDenoise* self, const std::vector<float>& frames) {
  DenoiseState* s = self->state;
  const size_t n = frames.size() / s->channels;
  const bool s16 = s->format == GST_AUDIO_FORMAT_S16LE;
  GstBuffer* buf = gst_buffer_new_allocate(nullptr, frames.size() * (s16 ? 2 : 4), nullptr);
  GstMapInfo map;
  gst_buffer_map(buf, &map, GST_MAP_WRITE);
  if (s16) {
    auto* o = reinterpret_cast<gint16*>(map.data);
    for (size_t i = 0; i < frames.size(); ++i)
      o[i] = static_cast<gint16>(std::clamp(std::lrint(frames[i] * 32768.0f), -32768L, 32767L));
  } else {
    memcpy(map.data, frames.data(), frames.size() * sizeof(float));
  }
  gst_buffer_unmap(buf, &map);
  if (GST_CLOCK_TIME_IS_VALID(s->chunk_pts)) {
    const GstClockTime start = s->chunk_pts + gst_util_uint64_scale_int(s->chunk_frames_out, GST_SECOND, s->rate);
    const GstClockTime end =
        s->chunk_pts + gst_util_uint64_scale_int(s->chunk_frames_out + n, GST_SECOND, s->rate);
    GST_BUFFER_PTS(buf) = start;
    GST_BUFFER_DURATION(buf) = end - start;
  }
  if (s->chunk_offset != GST_BUFFER_OFFSET_NONE) {
    GST_BUFFER_OFFSET(buf) = s->chunk_offset + s->chunk_frames_out;
    GST_BUFFER_OFFSET_END(buf) = s->chunk_offset + s->chunk_frames_out + n;
  }
  if (s->next_discont) {
    GST_BUFFER_FLAG_SET(buf, GST_BUFFER_FLAG_DISCONT);
    s->next_discont = false;
  }
  s->chunk_frames_out += n;
  return buf;
}

// Everything held, out now (EOS, DISCONT, caps change), into the output queue.
static void drain_into_queue(GstNnDenoise* self) {
  DenoiseState* s = self->state;
  if (!s->stream) return;
  s->out_f32.clear();
  s->stream->drain(s->out_f32);
  if (!s->out_f32.empty()) s->out_queue.push_back(make_output(self, s->out_f32));
  reset_timeline(s);
}

static GstFlowReturn push_queue(GstNnDenoise* self) {
  DenoiseState* s = self->state;
  GstFlowReturn ret = GST_FLOW_OK;
  while (!s->out_queue.empty()) {
    GstBuffer* b = s->out_queue.front();
    s->out_queue.pop_front();
    if (ret == GST_FLOW_OK)
      ret = gst_pad_push(GST_BASE_TRANSFORM_SRC_PAD(self), b);
    else
      gst_buffer_unref(b);
  }
  return ret;
}

static void maybe_post_stats(GstNnDenoise* self) {
  DenoiseState* s = self->state;
  GST_OBJECT_LOCK(self);
  const guint interval_ms = self->stats_interval_ms;
  const gint64 now = g_get_monotonic_time();
  if (interval_ms == 0 || now - s->last_stats_post_us < static_cast<gint64>(interval_ms) * 1000) {
    GST_OBJECT_UNLOCK(self);
    return;
  }
  s->last_stats_post_us = now;
  GstStructure* st = make_stats_locked(self);
  GST_OBJECT_UNLOCK(self);
  gst_element_post_message(GST_ELEMENT(self), gst_message_new_element(GST_OBJECT(self), st));
}

static bool upstream_is_live(GstNnDenoise* self) {
  DenoiseState* s = self->state;
  if (!s->live_known) {
    GstQuery* q = gst_query_new_latency();
    gboolean live = FALSE;
    if (gst_pad_peer_query(GST_BASE_TRANSFORM_SINK_PAD(self), q)) gst_query_parse_latency(q, &live, nullptr, nullptr);
    gst_query_unref(q);
    s->live = live;
    s->live_known = true;
    GST_DEBUG_OBJECT(self, "upstream is %s", live ? "live" : "not live");
  }
  return s->live;
}

static GstFlowReturn gst_nn_denoise_submit_input_buffer(GstBaseTransform* trans, gboolean is_discont,
                                                        GstBuffer* input) {
  GstNnDenoise* self = GST_NN_DENOISE(trans);
  DenoiseState* s = self->state;
  if (!s->stream || s->channels < 1) {
    gst_buffer_unref(input);
    GST_ELEMENT_ERROR(self, CORE, NEGOTIATION, ("No caps set before the first buffer"), (nullptr));
    return GST_FLOW_NOT_NEGOTIATED;
  }
  const auto arrival = DenoiseStream::Clock::now();
  GST_OBJECT_LOCK(self);
  const auto priority_wanted = static_cast<ThreadPriority>(self->thread_priority);
  GST_OBJECT_UNLOCK(self);
  const ThreadPriority priority_got = s->thread_priority.apply(priority_wanted);
  if (priority_got != s->thread_priority_got) {
    GST_OBJECT_LOCK(self);
    s->thread_priority_got = priority_got;
    GST_OBJECT_UNLOCK(self);
  }
  // A gap: what is held belongs before it.
  if (is_discont && s->chunk_started) drain_into_queue(self);
  if (!s->chunk_started) {
    s->chunk_started = true;
    s->chunk_pts = GST_BUFFER_PTS(input);
    s->chunk_offset = GST_BUFFER_OFFSET(input);
    if (s->chunk_offset == GST_BUFFER_OFFSET_NONE && GST_CLOCK_TIME_IS_VALID(s->chunk_pts))
      s->chunk_offset = gst_util_uint64_scale_int_round(s->chunk_pts, s->rate, GST_SECOND);
    s->chunk_frames_out = 0;
  }
  const bool live = upstream_is_live(self);

  GstMapInfo map;
  if (!gst_buffer_map(input, &map, GST_MAP_READ)) {
    gst_buffer_unref(input);
    GST_ELEMENT_ERROR(self, STREAM, FAILED, ("Could not map the input buffer"), (nullptr));
    return GST_FLOW_ERROR;
  }
  const bool s16 = s->format == GST_AUDIO_FORMAT_S16LE;
  const size_t bpf = static_cast<size_t>(s->channels) * (s16 ? 2 : 4);
  const size_t frames = map.size / bpf;
  const float* in = nullptr;
  if (s16) {
    s->in_f32.resize(frames * s->channels);
    const auto* p = reinterpret_cast<const gint16*>(map.data);
    for (size_t i = 0; i < s->in_f32.size(); ++i) s->in_f32[i] = p[i] * (1.0f / 32768.0f);
    in = s->in_f32.data();
  } else if (reinterpret_cast<uintptr_t>(map.data) % alignof(float) == 0) {
    in = reinterpret_cast<const float*>(map.data);
  } else {
    s->in_f32.resize(frames * s->channels);
    memcpy(s->in_f32.data(), map.data, frames * bpf);
    in = s->in_f32.data();
  }
  s->out_f32.clear();
  try {
    s->stream->push(in, frames, arrival, live, s->out_f32);
  } catch (const std::exception& e) {
    gst_buffer_unmap(input, &map);
    gst_buffer_unref(input);
    GST_ELEMENT_ERROR(self, STREAM, FAILED, ("Denoising failed"), ("%s", e.what()));
    return GST_FLOW_ERROR;
  }
  gst_buffer_unmap(input, &map);
  gst_buffer_unref(input);
  if (!s->out_f32.empty()) s->out_queue.push_back(make_output(self, s->out_f32));
  maybe_post_stats(self);
  return GST_FLOW_OK;
}

static GstFlowReturn gst_nn_denoise_generate_output(GstBaseTransform* trans, GstBuffer** outbuf) {
  DenoiseState* s = GST_NN_DENOISE(trans)->state;
  *outbuf = nullptr;
  if (!s->out_queue.empty()) {
    *outbuf = s->out_queue.front();
    s->out_queue.pop_front();
  }
  return GST_FLOW_OK;
}

static gboolean gst_nn_denoise_sink_event(GstBaseTransform* trans, GstEvent* event) {
  GstNnDenoise* self = GST_NN_DENOISE(trans);
  DenoiseState* s = self->state;
  switch (GST_EVENT_TYPE(event)) {
    case GST_EVENT_EOS:
    case GST_EVENT_SEGMENT:
    case GST_EVENT_CAPS:
      // The held tail goes out before the event (and under the caps it was taken with).
      if (s->stream && s->chunk_started) {
        drain_into_queue(self);
        push_queue(self);
      }
      break;
    case GST_EVENT_FLUSH_STOP:
      clear_output_queue(s);
      if (s->stream) s->stream->reset();
      reset_timeline(s);
      s->live_known = false;
      break;
    default:
      break;
  }
  return GST_BASE_TRANSFORM_CLASS(parent_class)->sink_event(trans, event);
}

static gboolean gst_nn_denoise_query(GstBaseTransform* trans, GstPadDirection direction, GstQuery* query) {
  GstNnDenoise* self = GST_NN_DENOISE(trans);
  if (direction == GST_PAD_SRC && GST_QUERY_TYPE(query) == GST_QUERY_LATENCY) {
    if (!gst_pad_peer_query(GST_BASE_TRANSFORM_SINK_PAD(trans), query)) return FALSE;
    gboolean live;
    GstClockTime min, max;
    gst_query_parse_latency(query, &live, &min, &max);
    GstClockTime hold = 0;
    GST_OBJECT_LOCK(self);
    if (self->state->stream)
      hold = gst_util_uint64_scale_int(self->state->stream->delay_frames(), GST_SECOND,
                                       self->state->stream->info().sample_rate);
    const GstClockTime ours = hold + self->latency_budget_ms * GST_MSECOND;
    GST_OBJECT_UNLOCK(self);
    min += ours;
    if (GST_CLOCK_TIME_IS_VALID(max)) max += ours;
    GST_DEBUG_OBJECT(self, "latency: live %d, ours %" GST_TIME_FORMAT " (hold %" GST_TIME_FORMAT ")", live,
                     GST_TIME_ARGS(ours), GST_TIME_ARGS(hold));
    gst_query_set_latency(query, live, min, max);
    return TRUE;
  }
  const gboolean ok = GST_BASE_TRANSFORM_CLASS(parent_class)->query(trans, direction, query);
  if (ok && direction == GST_PAD_SINK && GST_QUERY_TYPE(query) == GST_QUERY_CAPS) {
    GstCaps *filter = nullptr, *result = nullptr;
    gst_query_parse_caps(query, &filter);
    gst_query_parse_caps_result(query, &result);
    if (filter && result && gst_caps_is_empty(result)) refuse_rate_if_fixed(self, filter);
  }
  return ok;
}

static void gst_nn_denoise_finalize(GObject* object) {
  GstNnDenoise* self = GST_NN_DENOISE(object);
  delete self->state;
  self->state = nullptr;
  g_free(self->model);
  G_OBJECT_CLASS(parent_class)->finalize(object);
}

static void gst_nn_denoise_class_init(GstNnDenoiseClass* klass) {
  GObjectClass* gobject_class = G_OBJECT_CLASS(klass);
  GstElementClass* element_class = GST_ELEMENT_CLASS(klass);
  GstBaseTransformClass* trans_class = GST_BASE_TRANSFORM_CLASS(klass);
  GstAudioFilterClass* filter_class = GST_AUDIO_FILTER_CLASS(klass);

  GST_DEBUG_CATEGORY_INIT(gst_nn_denoise_debug, "nndenoise", 0, "nnpipe noise suppression");

  gobject_class->set_property = gst_nn_denoise_set_property;
  gobject_class->get_property = gst_nn_denoise_get_property;
  gobject_class->finalize = gst_nn_denoise_finalize;

  const auto ready = static_cast<GParamFlags>(G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS | GST_PARAM_MUTABLE_READY);
  const auto playing =
      static_cast<GParamFlags>(G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS | GST_PARAM_MUTABLE_PLAYING);
  g_object_class_install_property(
      gobject_class, PROP_MODEL,
      g_param_spec_string("model", "Model",
                          "Streaming audio model (.nnapi holding the stages and framing, e.g. made by "
                          "nnconvert dtln_1.tflite dtln_2.tflite --stream assets/streams/dtln.toml -o dtln.nnapi)",
                          DEFAULT_PROP_MODEL, ready));
  g_object_class_install_property(
      gobject_class, PROP_DELEGATE,
      g_param_spec_enum("delegate", "Delegate", "Where inference runs (the CPU takes what others cannot)",
                        GST_TYPE_NN_DELEGATE, DEFAULT_PROP_DELEGATE, ready));
  g_object_class_install_property(
      gobject_class, PROP_THREADS,
      g_param_spec_int("threads", "Threads", "Inference threads per channel (0 = one per core)", 0, 64,
                       DEFAULT_PROP_THREADS, ready));
  g_object_class_install_property(
      gobject_class, PROP_LATENCY_BUDGET,
      g_param_spec_uint("latency-budget", "Latency budget",
                        "Live sources: longest time in ms a buffer waits for its hops' inference; a hop not "
                        "ready by then goes out unprocessed (crossfaded, counted). Reported in the LATENCY query "
                        "on top of the model's delay. Non-live sources (files) wait for every hop",
                        0, 10000, DEFAULT_PROP_LATENCY_BUDGET, playing));
  g_object_class_install_property(
      gobject_class, PROP_ATTENUATION_LIMIT,
      g_param_spec_double("attenuation-limit", "Attenuation limit",
                          "The most the model may turn any part of the sound down, in dB (0 = no limit); a "
                          "limit keeps some of the background, which sounds more natural",
                          0.0, 200.0, DEFAULT_PROP_ATTENUATION_LIMIT, playing));
  g_object_class_install_property(
      gobject_class, PROP_BYPASS,
      g_param_spec_boolean("bypass", "Bypass",
                           "Pass the audio through unprocessed (same delay-compensated timing, crossfaded "
                           "in and out so switching does not click); the model state keeps its framing",
                           DEFAULT_PROP_BYPASS, playing));
  g_object_class_install_property(
      gobject_class, PROP_STATS,
      g_param_spec_boxed("stats", "Statistics",
                         "hops-run / hops-late (over budget, went out unprocessed) / hops-bypassed / hops-failed, "
                         "hop-p50-ms / hop-p99-ms (worker time per hop, all channels), real-time-factor, "
                         "delegate, nonfinite-samples / nonfinite-resets, samples-in / samples-out, delay-ms",
                         GST_TYPE_STRUCTURE, static_cast<GParamFlags>(G_PARAM_READABLE | G_PARAM_STATIC_STRINGS)));
  g_object_class_install_property(
      gobject_class, PROP_STATS_INTERVAL,
      g_param_spec_uint("stats-interval", "Stats interval",
                        "Post an nndenoise-stats element message every this many ms (0 = never)", 0, G_MAXUINT,
                        DEFAULT_PROP_STATS_INTERVAL, playing));

  g_object_class_install_property(
      gobject_class, PROP_THREAD_PRIORITY,
      g_param_spec_enum("thread-priority", "Thread priority",
                        "Scheduling for the streaming thread that runs this element (put back at stop): on a "
                        "loaded machine a real-time priority keeps the wait for a hop within the budget; the "
                        "inference worker always stays at normal priority. The default leaves the thread as it "
                        "is",
                        GST_TYPE_NN_THREAD_PRIORITY, DEFAULT_PROP_THREAD_PRIORITY, ready));

  gst_element_class_set_static_metadata(element_class, "nnpipe noise suppression", "Filter/Effect/Audio",
                                        "Suppresses noise in speech with a streaming nnpipe model (DTLN) under a "
                                        "latency budget",
                                        "nnpipe developers");
  GstCaps* caps = gst_caps_from_string(NN_DENOISE_CAPS);
  gst_audio_filter_class_add_pad_templates(filter_class, caps);
  gst_caps_unref(caps);

  trans_class->start = GST_DEBUG_FUNCPTR(gst_nn_denoise_start);
  trans_class->stop = GST_DEBUG_FUNCPTR(gst_nn_denoise_stop);
  trans_class->transform_caps = GST_DEBUG_FUNCPTR(gst_nn_denoise_transform_caps);
  trans_class->accept_caps = GST_DEBUG_FUNCPTR(gst_nn_denoise_accept_caps);
  trans_class->sink_event = GST_DEBUG_FUNCPTR(gst_nn_denoise_sink_event);
  trans_class->query = GST_DEBUG_FUNCPTR(gst_nn_denoise_query);
  trans_class->submit_input_buffer = GST_DEBUG_FUNCPTR(gst_nn_denoise_submit_input_buffer);
  trans_class->generate_output = GST_DEBUG_FUNCPTR(gst_nn_denoise_generate_output);
  trans_class->passthrough_on_same_caps = FALSE;
  filter_class->setup = GST_DEBUG_FUNCPTR(gst_nn_denoise_setup);
}

static void gst_nn_denoise_init(GstNnDenoise* self) {
  self->model = nullptr;
  self->delegate = DEFAULT_PROP_DELEGATE;
  self->threads = DEFAULT_PROP_THREADS;
  self->latency_budget_ms = DEFAULT_PROP_LATENCY_BUDGET;
  self->attenuation_limit_db = DEFAULT_PROP_ATTENUATION_LIMIT;
  self->bypass = DEFAULT_PROP_BYPASS;
  self->stats_interval_ms = DEFAULT_PROP_STATS_INTERVAL;
  self->thread_priority = DEFAULT_PROP_THREAD_PRIORITY;
  self->state = new DenoiseState();
  // Audio is never dropped for lateness: over budget, hops go out unprocessed instead.
  gst_base_transform_set_qos_enabled(GST_BASE_TRANSFORM(self), FALSE);
}

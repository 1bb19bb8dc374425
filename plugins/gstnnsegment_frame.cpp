// nnsegment's per-frame work on the streaming thread: QoS, handing frames to the inference
// worker, waiting for masks within the latency budget, and attaching or writing the mask.
#include <algorithm>
#include <chrono>
#include <exception>
#include <optional>

#include <opencv2/core.hpp>

#include "cpu_time.h"
#include "gstnnmaskmeta.h"
#include "imageops.h"
#include "segment_state.h"

#define GST_CAT_DEFAULT gst_nn_segment_debug

// Consecutive late frames (per QoS) that only skip inference before frames are dropped.
// Frames are dropped only while downstream's QoS proportion says the pipeline runs slower
// than real time (>= 1): a burst of lateness in a pipeline that keeps up on average (e.g.
// the decoder's start-up) is absorbed by skipping inference, and no frame is lost.
static constexpr int kLateFramesBeforeDrop = 2;
static constexpr double kDropProportion = 1.0;
// No frame is dropped for lateness this soon after the first frame (running time): a
// pipeline's start (decoder start-up, warm-ups, the queue filling) makes the first frames
// late once; QoS drops are for a pipeline that stays behind. Inference is still skipped.
static constexpr GstClockTime kDropGrace = GST_SECOND;
// Mean absolute difference of 32x32 grey thumbnails (0..255) above which consecutive
// frames are a scene cut: the previous mask belongs to another shot and must not be
// reused. On Megamind.avi cuts measure 33..43, motion within a shot stays below 4.
static constexpr double kSceneCutDifference = 16.0;

using nn::plugins::make_stats_locked;
using nn::plugins::SegmentState;

// Takes a finished inference: stats, and the new current mask when it is the newest valid one.
static void accept_result(GstNnSegment* self, nn::plugins::MaskResult& r, double smoothing,
                          double threshold) {
  SegmentState* s = self->state;
  guint64 failures = 0;
  GST_OBJECT_LOCK(self);
  if (r.status.is_ok()) {
    s->latency.add(r.run_ms);
    s->inference_cpu_ms_total += r.cpu_ms;
    s->inferences_timed++;
  } else
    failures = s->segmenter->counters().failed;
  GST_OBJECT_UNLOCK(self);
  if (!r.status.is_ok()) {
    // One failed inference costs one mask, not the stream; say so without flooding the bus.
    if (failures == 1 || failures % 100 == 0)
      GST_ELEMENT_WARNING(self, STREAM, FAILED, ("Inference failed (%" G_GUINT64_FORMAT " so far)", failures),
                          ("%s", r.status.to_string().c_str()));
    return;
  }
  if (r.tag < s->min_valid_tag || (s->mask && r.tag <= s->mask_tag)) return;
  // The filter writes straight into the memory the meta will share (no copy after it).
  const size_t n = r.probability.size();
  float* values = g_new(float, n);
  s->filter.apply(r, smoothing, threshold, values);
  if (s->mask) g_bytes_unref(s->mask);
  s->mask = g_bytes_new_take(values, n * sizeof(float));
  s->mask_w = r.width;
  s->mask_h = r.height;
  s->mask_tag = r.tag;
}

// The mask at frame resolution, 0..255, mapped through its rect as nnbackground and
// gst_nn_mask_meta_sample_frame() map it (letterbox padding never read).
static cv::Mat mask_at_frame_size(const SegmentState* s, int w, int h) {
  const cv::Mat mask(s->mask_h, s->mask_w, CV_32FC1, const_cast<void*>(g_bytes_get_data(s->mask, nullptr)));
  const nn::plugins::FrameRect& r = s->rect;
  cv::Mat up, out;
  nn::plugins::mask_to_grid(mask, r.x, r.y, r.width, r.height, w, h, cv::Size(w, h), up);
  up.convertTo(out, CV_8U, 255.0);
  return out;
}

// Upsamples the mask into the alpha channel of an RGBA/BGRA frame.
static void write_alpha(SegmentState* s, GstVideoFrame* frame) {
  const int w = GST_VIDEO_FRAME_WIDTH(frame), h = GST_VIDEO_FRAME_HEIGHT(frame);
  const cv::Mat alpha = mask_at_frame_size(s, w, h);
  cv::Mat rgba(h, w, CV_8UC4, GST_VIDEO_FRAME_PLANE_DATA(frame, 0), GST_VIDEO_FRAME_PLANE_STRIDE(frame, 0));
  const int from_to[] = {0, 3};
  cv::mixChannels(&alpha, 1, &rgba, 1, from_to, 1);
}

// output-mode=mask: the GRAY8 frame. Without a mask yet it is all 255 ("keep everything"),
// as nnbackground leaves frames without a mask unchanged.
static void write_gray(SegmentState* s, GstVideoFrame* out) {
  const int w = GST_VIDEO_FRAME_WIDTH(out), h = GST_VIDEO_FRAME_HEIGHT(out);
  cv::Mat gray(h, w, CV_8UC1, GST_VIDEO_FRAME_PLANE_DATA(out, 0), GST_VIDEO_FRAME_PLANE_STRIDE(out, 0));
  if (s->mask)
    mask_at_frame_size(s, w, h).copyTo(gray);
  else
    gray.setTo(255);
}

// The frame shrunk to the compositor's work size (imageops' make_work_image; I420 and NV12:
// make_yuv_work_image, packed 4:4:4), as GBytes that keep the image alive without a copy.
// *format receives the small frame's format.
static GBytes* make_small_frame(GstVideoFrame* frame, GstVideoFormat* format) {
  int channels = 0;
  const GstVideoFormat f = GST_VIDEO_FRAME_FORMAT(frame);
  *format = f;
  auto* small = new cv::Mat();
  const auto bytes_of = [](cv::Mat* m) {
    if (!m->isContinuous()) *m = m->clone();
    return g_bytes_new_with_free_func(m->data, m->total() * m->elemSize(),
                                      [](gpointer p) { delete static_cast<cv::Mat*>(p); }, m);
  };
  if (f == GST_VIDEO_FORMAT_I420 || f == GST_VIDEO_FORMAT_NV12) {
    const int w = GST_VIDEO_FRAME_WIDTH(frame), h = GST_VIDEO_FRAME_HEIGHT(frame);
    const int cw = (w + 1) / 2, ch = (h + 1) / 2;
    const auto plane = [&](int i, int type, int rows, int cols) {
      return cv::Mat(rows, cols, type, GST_VIDEO_FRAME_PLANE_DATA(frame, i), GST_VIDEO_FRAME_PLANE_STRIDE(frame, i));
    };
    const bool nv12 = f == GST_VIDEO_FORMAT_NV12;
    nn::plugins::make_yuv_work_image(plane(0, CV_8UC1, h, w), plane(1, nv12 ? CV_8UC2 : CV_8UC1, ch, cw),
                                     nv12 ? cv::Mat() : plane(2, CV_8UC1, ch, cw), *small);
    *format = GST_VIDEO_FORMAT_v308;
    return bytes_of(small);
  }
  switch (f) {
    case GST_VIDEO_FORMAT_RGBA:
    case GST_VIDEO_FORMAT_BGRA:
    case GST_VIDEO_FORMAT_RGBx:
    case GST_VIDEO_FORMAT_BGRx:
      channels = 4;
      break;
    case GST_VIDEO_FORMAT_RGB:
    case GST_VIDEO_FORMAT_BGR:
      channels = 3;
      break;
    default:
      delete small;
      return nullptr;
  }
  const cv::Mat src(GST_VIDEO_FRAME_HEIGHT(frame), GST_VIDEO_FRAME_WIDTH(frame), CV_8UC(channels),
                    GST_VIDEO_FRAME_PLANE_DATA(frame, 0), GST_VIDEO_FRAME_PLANE_STRIDE(frame, 0));
  nn::plugins::make_work_image(src, *small);
  return bytes_of(small);
}

static void maybe_post_stats(GstNnSegment* self, guint interval_ms) {
  SegmentState* s = self->state;
  if (interval_ms == 0) return;
  const gint64 now = g_get_monotonic_time();
  if (now - s->last_stats_post_us < static_cast<gint64>(interval_ms) * 1000) return;
  s->last_stats_post_us = now;
  GST_OBJECT_LOCK(self);
  GstStructure* st = make_stats_locked(self);
  GST_OBJECT_UNLOCK(self);
  gst_element_post_message(GST_ELEMENT(self), gst_message_new_element(GST_OBJECT(self), st));
}

// frame: the input. gray_out: the GRAY8 output frame with output-mode=mask, else null (the
// input buffer is the output and carries the meta).
static GstFlowReturn process_frame(GstNnSegment* self, GstVideoFrame* frame, GstVideoFrame* gray_out) {
  using Clock = std::chrono::steady_clock;
  GstBaseTransform* trans = GST_BASE_TRANSFORM(self);
  SegmentState* s = self->state;
  if (!s->segmenter) {
    GST_ELEMENT_ERROR(self, CORE, NEGOTIATION, ("No model loaded"), ("buffer arrived before start()"));
    return GST_FLOW_ERROR;
  }

  const bool qos = gst_base_transform_is_qos_enabled(trans);  // takes the object lock itself
  GST_OBJECT_LOCK(self);
  const guint budget_ms = self->latency_budget_ms;
  const GstNnOverBudget policy = self->over_budget;
  const double threshold = self->threshold, smoothing = self->smoothing;
  const GstNnSegmentOutputMode mode = self->output_mode;
  const guint stats_interval = self->stats_interval_ms;
  const GstClockTime earliest = qos ? s->qos_earliest : GST_CLOCK_TIME_NONE;
  const double proportion = s->qos_proportion;
  const double downstream_ms = s->downstream_ms;
  const double overrun_ms = s->overrun_ms.percentile(100);
  s->frames_in++;
  GST_OBJECT_UNLOCK(self);

  // The budget bounds the time this frame spends here, pre-processing included: under CPU
  // contention pre-processing itself slows down, and the wait for the mask gets shorter.
  const auto entered = Clock::now();
  nn::plugins::apply_thread_priority(self);  // once per thread (set_info did it for the caps' thread)
  const gint64 entered_us = g_get_monotonic_time();  // the clock of the meta's deadline
  std::optional<Clock::time_point> deadline;  // set when the frame waits for its mask
  // How late this frame leaves past its deadline (0 if in time), for the next frames' wait.
  const auto note_overrun = [&]() {
    if (!deadline) return;
    const double late_ms = std::chrono::duration<double, std::milli>(Clock::now() - *deadline).count();
    GST_OBJECT_LOCK(self);
    s->overrun_ms.add(std::max(0.0, late_ms));
    GST_OBJECT_UNLOCK(self);
  };
  const uint64_t seq = ++s->seq;
  GstBuffer* buf = frame->buffer;
  const GstClockTime running_time =
      gst_segment_to_running_time(&trans->segment, GST_FORMAT_TIME, GST_BUFFER_PTS(buf));

  // 1. Whatever finished since the last frame.
  if (auto r = s->segmenter->take_latest()) accept_result(self, *r, smoothing, threshold);

  if (!GST_CLOCK_TIME_IS_VALID(s->first_running_time) && GST_CLOCK_TIME_IS_VALID(running_time))
    s->first_running_time = running_time;
  // 2. QoS: a late frame first skips inference; if frames keep coming late while the
  // pipeline falls behind (and has been running for a while), drop them.
  const bool late =
      GST_CLOCK_TIME_IS_VALID(running_time) && GST_CLOCK_TIME_IS_VALID(earliest) && running_time <= earliest;
  if (late) {
    GST_OBJECT_LOCK(self);
    s->inferences_skipped++;
    const int consecutive = ++s->consecutive_late;
    GST_OBJECT_UNLOCK(self);
    const bool settled = GST_CLOCK_TIME_IS_VALID(s->first_running_time) &&
                         running_time >= s->first_running_time + kDropGrace;
    if (consecutive > kLateFramesBeforeDrop && proportion >= kDropProportion && settled) {
      GST_OBJECT_LOCK(self);
      s->frames_dropped++;
      const guint64 processed = s->frames_out, dropped = s->frames_dropped;
      GST_OBJECT_UNLOCK(self);
      GST_DEBUG_OBJECT(self, "QoS: dropping late frame %" GST_TIME_FORMAT, GST_TIME_ARGS(running_time));
      GstMessage* qos = gst_message_new_qos(
          GST_OBJECT(self), FALSE, running_time,
          gst_segment_to_stream_time(&trans->segment, GST_FORMAT_TIME, GST_BUFFER_PTS(buf)),
          GST_BUFFER_PTS(buf), GST_BUFFER_DURATION(buf));
      gst_message_set_qos_stats(qos, GST_FORMAT_BUFFERS, processed, dropped);
      gst_element_post_message(GST_ELEMENT(self), qos);
      maybe_post_stats(self, stats_interval);
      return GST_BASE_TRANSFORM_FLOW_DROPPED;
    }
  } else {
    GST_OBJECT_LOCK(self);
    s->consecutive_late = 0;
    GST_OBJECT_UNLOCK(self);
  }

  // The compositor's work image (GstNnMaskMeta's small frame), made here once: the model
  // input below takes the same reductions from the memo instead of reading the frame (or
  // its planes) again, and nnbackground does not shrink the frame itself.
  nn::plugins::ShrinkMemo memo;
  GstVideoFormat small_format = GST_VIDEO_FORMAT_UNKNOWN;
  GBytes* small = gray_out ? nullptr : make_small_frame(frame, &small_format);
  struct UnrefSmall {
    GBytes*& b;
    ~UnrefSmall() {
      if (b) g_bytes_unref(b);
    }
  } unref_small{small};

  // 3. Hand the frame to the worker, then wait for its mask until the budget (from arrival) is spent.
  if (!late) {
    nn::plugins::FrameView v = s->view_template;
    for (guint p = 0; p < GST_VIDEO_FRAME_N_PLANES(frame) && p < 3; ++p) {
      v.planes[p] = static_cast<const uint8_t*>(GST_VIDEO_FRAME_PLANE_DATA(frame, p));
      v.strides[p] = GST_VIDEO_FRAME_PLANE_STRIDE(frame, p);
    }
    // Only the resampling here (inside the memo); the worker normalises the small image
    // straight into the session's input buffer.
    auto input = s->segmenter->resample(v, s->resize, &s->thumb);
    if (!input.is_ok()) {
      GST_ELEMENT_ERROR(self, STREAM, FAILED, ("Pre-processing failed"), ("%s", input.status().to_string().c_str()));
      return GST_FLOW_ERROR;
    }
    // A new shot: the newest mask outlines people who are not there any more.
    if (!s->prev_thumb.empty() &&
        nn::plugins::thumb_difference(s->thumb, s->prev_thumb) > kSceneCutDifference) {
      GST_DEBUG_OBJECT(self, "frame %" G_GUINT64_FORMAT ": scene cut, previous mask discarded", seq);
      s->drop_mask();
      s->filter.reset();
      s->min_valid_tag = seq;
      GST_OBJECT_LOCK(self);
      s->scene_cuts++;
      GST_OBJECT_UNLOCK(self);
    }
    std::swap(s->thumb, s->prev_thumb);
    if (s->segmenter->submit(std::move(input).value(), seq)) {
      GST_OBJECT_LOCK(self);
      s->inferences_skipped++;  // a frame that was still waiting got replaced by this one
      GST_OBJECT_UNLOCK(self);
    }
    // The budget covers compositing downstream too (nnbackground reports its worst recent
    // time) and how late this element itself tends to finish past its deadline: the wait
    // gets what is left.
    const double own_ms = std::max(0.0, budget_ms - downstream_ms - overrun_ms);
    deadline = entered + std::chrono::microseconds(static_cast<int64_t>(own_ms * 1000));
    while (!(s->mask && s->mask_tag >= seq)) {
      const auto left = std::chrono::duration_cast<std::chrono::microseconds>(*deadline - Clock::now());
      if (left.count() <= 0) break;
      // Anything newer than the mask we hold is worth taking, even if not this frame's.
      const uint64_t want = std::max<uint64_t>(s->mask ? s->mask_tag + 1 : 0, s->min_valid_tag);
      auto r = s->segmenter->wait_for(want, left);
      if (!r) break;
      accept_result(self, *r, smoothing, threshold);
    }
  }

  const bool fresh = s->mask && s->mask_tag == seq;
  if (!fresh && policy == GST_NN_OVER_BUDGET_DROP_FRAME) {
    GST_OBJECT_LOCK(self);
    s->frames_dropped++;
    GST_OBJECT_UNLOCK(self);
    GST_LOG_OBJECT(self, "frame %" G_GUINT64_FORMAT ": no mask within %u ms, dropped", seq, budget_ms);
    note_overrun();
    maybe_post_stats(self, stats_interval);
    return GST_BASE_TRANSFORM_FLOW_DROPPED;
  }

  // 4. The newest mask goes out with the frame.
  if (gray_out) write_gray(s, gray_out);
  if (s->mask) {
    const guint age = static_cast<guint>(seq - s->mask_tag);
    const int fw = GST_VIDEO_FRAME_WIDTH(frame), fh = GST_VIDEO_FRAME_HEIGHT(frame);
    const nn::plugins::FrameRect& r = s->rect;
    GstNnMaskMeta* meta = gst_buffer_add_nn_mask_meta(
        gray_out ? gray_out->buffer : buf, GST_NN_MASK_FORMAT_FLOAT32, s->mask_w, s->mask_h,
        s->mask_w * sizeof(float), s->mask, fw, fh, r.x, r.y, r.width, r.height, age);
    if (meta && small) {
      const cv::Size ws = nn::plugins::work_size(cv::Size(fw, fh));
      gst_nn_mask_meta_set_small_frame(meta, small_format, ws.width, ws.height, g_bytes_get_size(small) / ws.height,
                                       small);
    }
    if (meta) {
      meta->source_id = s->mask_tag;
      meta->deadline_us = entered_us + static_cast<gint64>(budget_ms) * 1000;
    }
    GST_LOG_OBJECT(self, "frame %" G_GUINT64_FORMAT ": mask of frame %" G_GUINT64_FORMAT " (age %u)", seq,
                   s->mask_tag, age);
    if (mode == GST_NN_SEGMENT_OUTPUT_ALPHA) {
      const GstVideoFormat fmt = GST_VIDEO_FRAME_FORMAT(frame);
      if (fmt == GST_VIDEO_FORMAT_RGBA || fmt == GST_VIDEO_FORMAT_BGRA) {
        write_alpha(s, frame);
      } else if (!s->warned_alpha) {
        s->warned_alpha = true;
        GST_WARNING_OBJECT(self, "output-mode=alpha needs RGBA or BGRA, got %s: attaching the meta only",
                           gst_video_format_to_string(fmt));
      }
    }
    GST_OBJECT_LOCK(self);
    s->mask_age = age;
    GST_OBJECT_UNLOCK(self);
  }
  GST_OBJECT_LOCK(self);
  s->frames_out++;
  GST_OBJECT_UNLOCK(self);
  note_overrun();
  maybe_post_stats(self, stats_interval);
  return GST_FLOW_OK;
}

GstFlowReturn nn::plugins::run_guarded(GstNnSegment* self, GstVideoFrame* frame, GstVideoFrame* gray_out) {
  try {
    const double cpu0 = thread_cpu_ms();
    const GstFlowReturn ret = process_frame(self, frame, gray_out);
    const double cpu_ms = thread_cpu_ms() - cpu0;
    GST_OBJECT_LOCK(self);
    self->state->frame_cpu_ms_total += cpu_ms;
    self->state->frames_timed++;
    GST_OBJECT_UNLOCK(self);
    return ret;
  } catch (const std::exception& e) {
    GST_ELEMENT_ERROR(self, STREAM, FAILED, ("Segmentation failed"), ("%s", e.what()));
  } catch (...) {
    GST_ELEMENT_ERROR(self, STREAM, FAILED, ("Segmentation failed"), ("unknown exception"));
  }
  return GST_FLOW_ERROR;
}

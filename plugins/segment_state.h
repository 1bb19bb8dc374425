// nnsegment's plain C++ state (SegmentState) and what the element (gstnnsegment.cpp) and its
// per-frame work (gstnnsegment_frame.cpp) share.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "gstnnsegment.h"
#include "latency_window.h"
#include "segmenter.h"
#include "thread_priority.h"

GST_DEBUG_CATEGORY_EXTERN(gst_nn_segment_debug);

namespace nn::plugins {

// What the streaming thread works with. Counters are read by get_property("stats") on
// the application thread, so they are touched under GST_OBJECT_LOCK.
struct SegmentState {
  // Kept across stop/start so PLAYING<->NULL cycles do not re-convert the model.
  std::shared_ptr<const Model> cached_model;
  std::string cached_model_path;

  std::unique_ptr<Segmenter> segmenter;
  FrameView view_template;  // layout and colour matrix from the caps
  // Latched at negotiation so every mask of a caps period maps to the frame the same way.
  ResizeMode resize = ResizeMode::kStretch;
  FrameRect rect;            // where the mask lies in frame pixels
  bool gray_output = false;  // output-mode=mask negotiated: GRAY8 out, not in place
  MaskFilter filter;

  // The newest finished mask (after smoothing and threshold), shared by every buffer
  // that carries it until the next one arrives.
  GBytes* mask = nullptr;
  int mask_w = 0, mask_h = 0;
  uint64_t mask_tag = 0;
  uint64_t seq = 0;            // sequence number of the last frame seen
  uint64_t min_valid_tag = 1;  // results for frames before this (pre-flush, old caps) are stale

  // QoS (OBJECT_LOCK: written by the src_event handler).
  GstClockTime qos_earliest = GST_CLOCK_TIME_NONE;
  gdouble qos_proportion = 1.0;
  int consecutive_late = 0;
  // Running time of the first frame since start or flush: late frames in the first
  // kDropGrace after it only skip inference (start-up transients: decoders, warm-ups).
  GstClockTime first_running_time = GST_CLOCK_TIME_NONE;
  // Compositing time downstream (GST_NN_DOWNSTREAM_COST_EVENT), taken out of the budget
  // (OBJECT_LOCK).
  double downstream_ms = 0;
  // How late this element's own part finished past its deadline (scheduling delay after
  // the wait, the meta), the last ~2 s: its worst is also kept out of the wait (OBJECT_LOCK).
  LatencyWindow overrun_ms{64};

  // Stats (OBJECT_LOCK).
  LatencyWindow latency;
  guint64 frames_in = 0, frames_out = 0, frames_dropped = 0;
  guint64 inferences_run = 0, inferences_failed = 0, inferences_skipped = 0;
  guint mask_age = 0;
  // CPU time: the streaming thread's in this element per frame, the worker's per inference.
  double frame_cpu_ms_total = 0, inference_cpu_ms_total = 0;
  guint64 frames_timed = 0, inferences_timed = 0;
  std::string delegate_summary;
  guint partitions = 0;

  guint64 scene_cuts = 0;  // OBJECT_LOCK
  std::vector<uint8_t> thumb, prev_thumb;

  gint64 last_stats_post_us = 0;
  bool warned_alpha = false;

  // thread-priority: the streaming threads changed (put back at stop), and what the last
  // frame's thread has (OBJECT_LOCK, for the stats).
  FrameThreadPriority thread_priority;
  ThreadPriority thread_priority_got = ThreadPriority::kNormal;

  ~SegmentState() { drop_mask(); }
  void drop_mask() {
    if (mask) g_bytes_unref(mask);
    mask = nullptr;
    mask_tag = 0;
  }
};

// Stream set-up (gstnnsegment_stream.cpp): GstBaseTransform's start/stop and
// GstVideoFilter's set_info, and what a flush resets.
gboolean segment_start(GstBaseTransform* trans);
gboolean segment_stop(GstBaseTransform* trans);
gboolean segment_set_info(GstVideoFilter* filter, GstCaps* incaps, GstVideoInfo* in_info, GstCaps* outcaps,
                          GstVideoInfo* out_info);
void reset_stream(GstNnSegment* self);
// Gives the calling thread (the streaming thread) the thread-priority asked for, once per
// thread; records what it got for the stats.
void apply_thread_priority(GstNnSegment* self);

// Builds the stats structure. Caller holds the object lock.
GstStructure* make_stats_locked(GstNnSegment* self);

// Runs one frame (process_frame, gstnnsegment_frame.cpp); an exception becomes an element
// error. gray_out: the GRAY8 output frame with output-mode=mask, else null.
GstFlowReturn run_guarded(GstNnSegment* self, GstVideoFrame* frame, GstVideoFrame* gray_out);

}  // namespace nn::plugins

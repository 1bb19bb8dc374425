// nnsegment's stream set-up: the model and its session at start (and their release at
// stop), the frame layout from the caps, a flush's reset, and the stats the element reports.
// The element's glue is gstnnsegment.cpp, the per-frame work gstnnsegment_frame.cpp.
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include "element_stats.h"
#include "segment_state.h"

#define GST_CAT_DEFAULT gst_nn_segment_debug

namespace nn::plugins {

GstStructure* make_stats_locked(GstNnSegment* self) {
  SegmentState* s = self->state;
  // The worker's own counters: they move even while no frame comes to collect results.
  if (s->segmenter) {
    const nn::AsyncSession::Counters c = s->segmenter->counters();
    s->inferences_run = c.completed;
    s->inferences_failed = c.failed;
  }
  const double frame_cpu_ms = s->frames_timed ? s->frame_cpu_ms_total / s->frames_timed : 0.0;
  const double inference_cpu_ms = s->inferences_timed ? s->inference_cpu_ms_total / s->inferences_timed : 0.0;
  return gst_structure_new(
      NN_SEGMENT_STATS, NN_STAT_INFERENCE_P50_MS, G_TYPE_DOUBLE, s->latency.percentile(50),
      NN_STAT_INFERENCE_P99_MS, G_TYPE_DOUBLE, s->latency.percentile(99), NN_STAT_INFERENCES_RUN, G_TYPE_UINT64,
      s->inferences_run, NN_STAT_INFERENCES_FAILED, G_TYPE_UINT64, s->inferences_failed,
      NN_STAT_INFERENCES_SKIPPED, G_TYPE_UINT64, s->inferences_skipped, NN_STAT_FRAMES_IN, G_TYPE_UINT64,
      s->frames_in, NN_STAT_FRAMES_OUT, G_TYPE_UINT64, s->frames_out, NN_STAT_FRAMES_DROPPED, G_TYPE_UINT64,
      s->frames_dropped, NN_STAT_MASK_AGE, G_TYPE_UINT, s->mask_age, NN_STAT_DELEGATE, G_TYPE_STRING,
      s->delegate_summary.c_str(), NN_STAT_PARTITIONS, G_TYPE_UINT, s->partitions, NN_STAT_SCENE_CUTS,
      G_TYPE_UINT64, s->scene_cuts, NN_STAT_LATENCY_BUDGET_MS, G_TYPE_UINT, self->latency_budget_ms,
      NN_STAT_DOWNSTREAM_MS, G_TYPE_DOUBLE, s->downstream_ms, NN_STAT_OVERRUN_MS, G_TYPE_DOUBLE,
      s->overrun_ms.percentile(100), NN_STAT_THREAD_PRIORITY, G_TYPE_STRING, to_string(s->thread_priority_got),
      NN_STAT_RUNTIME_FALLBACKS, G_TYPE_UINT64,
      static_cast<guint64>(s->segmenter ? s->segmenter->runtime_fallbacks() : 0), NN_STAT_FRAME_CPU_MS,
      G_TYPE_DOUBLE, frame_cpu_ms, NN_STAT_INFERENCE_CPU_MS, G_TYPE_DOUBLE, inference_cpu_ms, nullptr);
}

gboolean segment_start(GstBaseTransform* trans) {
  GstNnSegment* self = GST_NN_SEGMENT(trans);
  SegmentState* s = self->state;
  GST_OBJECT_LOCK(self);
  const std::string path = self->model ? self->model : "";
  SegmenterOptions options;
  options.model_path = path;
  options.delegates = delegate_names(self->delegate);
  options.threads = self->threads > 0 ? self->threads : static_cast<int>(g_get_num_processors());
  options.budget_ms = self->latency_budget_ms;
  options.classes = self->classes ? self->classes : "";
  options.input_mean = self->input_mean ? self->input_mean : "";
  options.input_std = self->input_std ? self->input_std : "";
  options.channel_order = self->channel_order == GST_NN_CHANNEL_ORDER_RGB   ? ChannelOrder::kRGB
                          : self->channel_order == GST_NN_CHANNEL_ORDER_BGR ? ChannelOrder::kBGR
                                                                            : ChannelOrder::kFromModel;
  if (self->sampling != GST_NN_SEGMENT_SAMPLING_AUTO)
    options.sampling = self->sampling == GST_NN_SEGMENT_SAMPLING_MEDIAPIPE ? nn::image::Sampling::kMediaPipe
                                                                          : nn::image::Sampling::kArea;
  GST_OBJECT_UNLOCK(self);

  if (path.empty()) {
    GST_ELEMENT_ERROR(self, RESOURCE, NOT_FOUND, ("No model set"),
                      ("set the model property to a .nnapi, .tflite or .onnx file"));
    return FALSE;
  }
  try {
    std::shared_ptr<const nn::Model> model;
    if (s->cached_model && s->cached_model_path == path) {
      model = s->cached_model;
    } else {
      auto loaded = Segmenter::load(path);
      if (!loaded.is_ok()) {
        const nn::Status& st = loaded.status();
        if (st.code() == nn::StatusCode::kIoError)
          GST_ELEMENT_ERROR(self, RESOURCE, OPEN_READ, ("Could not open model \"%s\"", path.c_str()),
                            ("%s", st.to_string().c_str()));
        else
          GST_ELEMENT_ERROR(self, RESOURCE, FAILED, ("Could not load model \"%s\"", path.c_str()),
                            ("%s", st.to_string().c_str()));
        return FALSE;
      }
      model = std::move(loaded).value();
    }
    auto seg = Segmenter::open(options, model);
    if (!seg.is_ok() && seg.status().code() == nn::StatusCode::kInvalidArgument) {
      // Settings the model cannot be driven with (classes, normalisation): the user's to fix.
      GST_ELEMENT_ERROR(self, LIBRARY, SETTINGS, ("Cannot use model \"%s\" with these settings", path.c_str()),
                        ("%s", seg.status().to_string().c_str()));
      return FALSE;
    }
    if (!seg.is_ok()) {
      GST_ELEMENT_ERROR(self, RESOURCE, FAILED,
                        ("Could not prepare model \"%s\" for inference", path.c_str()),
                        ("%s", seg.status().to_string().c_str()));
      return FALSE;
    }
    for (const std::string& missing : seg.value()->missing_delegates())
      GST_ELEMENT_WARNING(self, RESOURCE, SETTINGS, ("Requested delegate unavailable: %s", missing.c_str()),
                          ("delegate property; inference runs on the CPU instead"));
    s->cached_model = model;
    s->cached_model_path = path;
    GST_OBJECT_LOCK(self);
    s->segmenter = std::move(seg).value();
    s->delegate_summary = s->segmenter->delegate_summary();
    s->partitions = static_cast<guint>(s->segmenter->num_partitions());
    s->latency.clear();
    s->frames_in = s->frames_out = s->frames_dropped = 0;
    s->inferences_run = s->inferences_failed = s->inferences_skipped = 0;
    s->mask_age = 0;
    s->scene_cuts = 0;
    s->qos_earliest = GST_CLOCK_TIME_NONE;
    s->qos_proportion = 1.0;
    s->consecutive_late = 0;
    s->first_running_time = GST_CLOCK_TIME_NONE;
    s->downstream_ms = 0;
    s->overrun_ms.clear();
    s->frame_cpu_ms_total = s->inference_cpu_ms_total = 0;
    s->frames_timed = s->inferences_timed = 0;
    GST_OBJECT_UNLOCK(self);
    GST_INFO_OBJECT(self, "model %s: input %dx%d, %s", path.c_str(), s->segmenter->input_width(),
                    s->segmenter->input_height(), s->delegate_summary.c_str());
  } catch (const std::exception& e) {
    GST_ELEMENT_ERROR(self, RESOURCE, FAILED, ("Could not load model \"%s\"", path.c_str()),
                      ("%s", e.what()));
    return FALSE;
  }
  s->drop_mask();
  s->filter.reset();
  s->prev_thumb.clear();
  s->min_valid_tag = s->seq + 1;
  s->last_stats_post_us = g_get_monotonic_time();
  return TRUE;
}

gboolean segment_stop(GstBaseTransform* trans) {
  GstNnSegment* self = GST_NN_SEGMENT(trans);
  SegmentState* s = self->state;
  // Joins the worker (after its current inference) outside the object lock.
  std::unique_ptr<Segmenter> old;
  GST_OBJECT_LOCK(self);
  if (s->segmenter) {
    // Keep the final counts readable after stop.
    const nn::AsyncSession::Counters c = s->segmenter->counters();
    s->inferences_run = c.completed;
    s->inferences_failed = c.failed;
  }
  old = std::move(s->segmenter);
  GST_OBJECT_UNLOCK(self);
  old.reset();
  s->drop_mask();
  s->filter.reset();
  s->thread_priority.restore();
  return TRUE;
}

gboolean segment_set_info(GstVideoFilter* filter, GstCaps* /*incaps*/, GstVideoInfo* in_info,
                                        GstCaps* /*outcaps*/, GstVideoInfo* out_info) {
  GstNnSegment* self = GST_NN_SEGMENT(filter);
  SegmentState* s = self->state;
  // The thread delivering the caps is the one that carries the frames after them: it gets
  // its priority now, so what runs before the first frame on it (nnbackground's warm-up
  // composites, at 4K tens of ms under load) does not hold up the first frames.
  apply_thread_priority(self);
  const bool gray = GST_VIDEO_INFO_FORMAT(out_info) == GST_VIDEO_FORMAT_GRAY8;
  if (gray && (GST_VIDEO_INFO_WIDTH(out_info) != GST_VIDEO_INFO_WIDTH(in_info) ||
               GST_VIDEO_INFO_HEIGHT(out_info) != GST_VIDEO_INFO_HEIGHT(in_info))) {
    GST_ERROR_OBJECT(self, "mask output must have the frame's size");
    return FALSE;
  }
  // The GRAY8 mask is a new buffer; every other mode annotates (or writes alpha) in place.
  gst_base_transform_set_in_place(GST_BASE_TRANSFORM(self), !gray);
  s->gray_output = gray;
  FrameView v;
  switch (GST_VIDEO_INFO_FORMAT(in_info)) {
    case GST_VIDEO_FORMAT_RGBA:
      v.layout = PixelLayout::kRGBA;
      break;
    case GST_VIDEO_FORMAT_BGRA:
      v.layout = PixelLayout::kBGRA;
      break;
    case GST_VIDEO_FORMAT_RGBx:
      v.layout = PixelLayout::kRGBx;
      break;
    case GST_VIDEO_FORMAT_BGRx:
      v.layout = PixelLayout::kBGRx;
      break;
    case GST_VIDEO_FORMAT_RGB:
      v.layout = PixelLayout::kRGB;
      break;
    case GST_VIDEO_FORMAT_BGR:
      v.layout = PixelLayout::kBGR;
      break;
    case GST_VIDEO_FORMAT_I420:
      v.layout = PixelLayout::kI420;
      break;
    case GST_VIDEO_FORMAT_NV12:
      v.layout = PixelLayout::kNV12;
      break;
    default:
      GST_ERROR_OBJECT(self, "unsupported format %s", GST_VIDEO_INFO_NAME(in_info));
      return FALSE;
  }
  v.width = GST_VIDEO_INFO_WIDTH(in_info);
  v.height = GST_VIDEO_INFO_HEIGHT(in_info);
  gdouble kr = 0.299, kb = 0.114;
  if (gst_video_color_matrix_get_Kr_Kb(in_info->colorimetry.matrix, &kr, &kb)) {
    v.kr = kr;
    v.kb = kb;
  }
  v.full_range = in_info->colorimetry.range == GST_VIDEO_COLOR_RANGE_0_255;
  GST_OBJECT_LOCK(self);
  const auto resize = self->resize == GST_NN_SEGMENT_RESIZE_LETTERBOX ? ResizeMode::kLetterbox
                                                                      : ResizeMode::kStretch;
  GST_OBJECT_UNLOCK(self);
  const FrameView& old = s->view_template;
  const bool same_geometry =
      old.width == v.width && old.height == v.height && old.layout == v.layout && s->resize == resize;
  s->view_template = v;
  s->resize = resize;
  if (s->segmenter) s->rect = s->segmenter->mask_rect(v.width, v.height, resize);
  // Masks computed for another size or placement map to the wrong pixels: start over.
  // (Only the output side changed, e.g. output-mode: the mask still fits.)
  if (!same_geometry) {
    s->prev_thumb.clear();
    s->drop_mask();
    s->filter.reset();
    s->min_valid_tag = s->seq + 1;
  }
  GST_DEBUG_OBJECT(self, "configured for %s %dx%d -> %s, mask rect %.1f,%.1f %.1fx%.1f",
                   GST_VIDEO_INFO_NAME(in_info), v.width, v.height, GST_VIDEO_INFO_NAME(out_info), s->rect.x,
                   s->rect.y, s->rect.width, s->rect.height);
  return TRUE;
}

void apply_thread_priority(GstNnSegment* self) {
  SegmentState* s = self->state;
  GST_OBJECT_LOCK(self);
  const auto wanted = static_cast<ThreadPriority>(self->thread_priority);
  GST_OBJECT_UNLOCK(self);
  const ThreadPriority got = s->thread_priority.apply(wanted);
  if (got != s->thread_priority_got) {
    GST_OBJECT_LOCK(self);
    s->thread_priority_got = got;
    GST_OBJECT_UNLOCK(self);
    GST_INFO_OBJECT(self, "streaming thread priority: %s (asked for %s)", to_string(got), to_string(wanted));
  }
}

void reset_stream(GstNnSegment* self) {
  SegmentState* s = self->state;
  s->prev_thumb.clear();
  s->drop_mask();
  s->filter.reset();
  s->min_valid_tag = s->seq + 1;
  GST_OBJECT_LOCK(self);
  s->qos_earliest = GST_CLOCK_TIME_NONE;
  s->qos_proportion = 1.0;
  s->consecutive_late = 0;
  s->first_running_time = GST_CLOCK_TIME_NONE;
  GST_OBJECT_UNLOCK(self);
}


}  // namespace nn::plugins

/**
 * SECTION:element-nnsegment
 * @title: nnsegment
 *
 * Segments people in raw video with an nnpipe model (.nnapi, or .tflite/.onnx converted
 * on load) and attaches the mask to each buffer as a #GstNnMaskMeta (at the model's
 * resolution, with its mapping to the frame and its age in frames). The meta also carries
 * the frame shrunk to nnbackground's work size (its "small frame", made on the way to the
 * model input), so the frame is shrunk once for both elements. With
 * output-mode=alpha the mask is also written into the alpha channel of RGBA/BGRA frames;
 * with output-mode=mask the element outputs the mask itself as GRAY8 video at the frame's
 * size (0..255 person probability after threshold and smoothing, 255 until the first mask
 * is ready), still carrying the meta and the input's timestamps.
 *
 * resize=stretch (default) fills the model input with the whole frame, as MediaPipe's
 * selfie models expect; resize=letterbox keeps the aspect ratio and pads with black, and
 * the meta's rect then reaches outside the frame (consumers never read the padding).
 * sampling=auto (default) resamples the frame as the model's own runtime does: for
 * MediaPipe's selfie models that is MediaPipe's ImageToTensor (bilinear at corner-aligned
 * points, [0,1] input, aspect ratio not kept; nn/image/preprocess.h), and the mask goes
 * back to the frame with a bilinear resize between pixel centres, as MediaPipe's
 * TensorsToSegmentation does: its masks match MediaPipe's own runtime on the same frames
 * (bench/fidelity.py). sampling=area averages instead (no aliasing on frames many times
 * the model's size); other models default to it.
 * delegate=auto (default) takes the best available delegate; it passes over Vulkan devices
 * that run on the CPU (lavapipe), so on a machine without a GPU it is the CPU (XNNPACK).
 *
 * Inference runs on a worker thread. The streaming thread hands over the newest frame
 * and waits for its mask until latency-budget milliseconds from the frame's arrival,
 * minus what compositing downstream costs (nnbackground reports its worst recent time
 * upstream) and minus its own worst recent overrun past that deadline (the streaming
 * thread is not always scheduled the moment the wait ends), so the budget bounds
 * segmentation and compositing together, also under CPU contention. When the mask is late the
 * frame goes out with the newest finished mask (its age says how old) or, with
 * over-budget=drop-frame, is dropped. QoS from downstream first skips inference, then,
 * while the pipeline runs slower than real time (QoS proportion >= 1), drops frames. The
 * stats property and periodic "nnsegment-stats" element messages report inference
 * p50/p99, inferences run and skipped, frames dropped, the downstream cost and the
 * delegates.
 *
 * QoS (qos=true, the default, as for GStreamer's filters that honour it): a frame that
 * QoS events from downstream say is late first skips inference, then, while the pipeline
 * runs slower than real time, is dropped (with a QoS message). qos=false ignores them.
 *
 * thread-priority=normal (default) leaves the streaming thread's scheduling alone.
 * thread-priority=realtime, asked for explicitly, gives the streaming thread that runs
 * nnsegment a real-time round-robin priority (10) when the process may have one, else a
 * short scheduling slice (low-latency); the inference worker stays at normal priority, so
 * on a loaded machine inference gives way, not the frames. The thread is put back at stop.
 * With GStreamer's own thread policy in the application (stream-status messages), keep
 * normal.
 *
 * Models: one [1,H,W,3] image input (NHWC, or NCHW for ONNX); an output of per-pixel
 * scores. One channel is the foreground probability (or logits, as the metadata says).
 * Several channels are classes: the mask is the softmax probability summed over the
 * classes property (e.g. classes=15 for person in the 21 Pascal VOC classes of torchvision's
 * LR-ASPP and DeepLabV3), else over the model's metadata "foreground_classes"; a two-class
 * model defaults to class 1; more classes and none named is an error. input-mean, input-std
 * and channel-order set the input normalisation ((pixel - mean) / std, pixels 0..255),
 * each defaulting to the model's metadata, else [0,1] RGB. An output that is no per-pixel
 * map (a classifier's [1,1000]) is an error naming its shape in the model's own layout.
 *
 * ## Example launch lines
 * |[
 * gst-launch-1.0 filesrc location=Megamind.avi ! decodebin ! videoconvert ! \
 *   nnsegment model=assets/models/selfie_segmentation.tflite ! nnbackground mode=blur ! \
 *   videoconvert ! autovideosink
 * ]| Blurs the background (delegate=auto, resize=stretch, output-mode=meta).
 * |[
 * gst-launch-1.0 filesrc location=Megamind.avi ! decodebin ! videoconvert ! \
 *   nnsegment model=assets/models/selfie_segmentation.tflite output-mode=mask threshold=0 ! \
 *   videoconvert ! autovideosink
 * ]| Shows the raw person probability as a grey picture.
 * |[
 * gst-launch-1.0 videotestsrc ! video/x-raw,width=1280,height=360 ! videoconvert ! \
 *   nnsegment model=assets/models/selfie_segmentation.tflite resize=letterbox delegate=cpu \
 *   latency-budget=50 over-budget=drop-frame ! nnbackground mode=color ! videoconvert ! autovideosink
 * ]| A very wide frame letterboxed into the model; frames without their own mask in 50 ms are dropped.
 * |[
 * gst-launch-1.0 -m v4l2src ! videoconvert ! \
 *   nnsegment model=assets/models/selfie_segmentation.tflite threads=2 smoothing=0.5 stats-interval=1000 ! \
 *   nnbackground ! videoconvert ! autovideosink
 * ]| A webcam with temporally smoothed masks and two inference threads; -m prints the
 * nnsegment-stats messages posted every second.
 * |[
 * gst-launch-1.0 filesrc location=Megamind.avi ! decodebin ! videoconvert ! \
 *   nnsegment model=deeplabv3.onnx classes=15 input-mean=123.675,116.28,103.53 \
 *   input-std=58.395,57.12,57.375 ! nnbackground ! videoconvert ! autovideosink
 * ]| A torchvision (ImageNet-normalised, 21-class) model with person as the foreground.
 *
 * Caps: video/x-raw in RGBA, BGRA, RGBx, BGRx, RGB, BGR, I420 or NV12, any size; the
 * output caps equal the input caps, except with output-mode=mask: GRAY8 at the same size.
 * Changing output-mode to or from mask while playing renegotiates the src caps (a
 * reconfigure): downstream must accept GRAY8 (put videoconvert after nnsegment).
 * resize is set in the NULL or READY state: it is read when the caps are negotiated.
 */
#include "gstnnsegment.h"

#include <algorithm>
#include <cmath>
#include <exception>
#include <string>
#include <vector>

#include "gstnnmaskmeta.h"
#include "segment_state.h"

GST_DEBUG_CATEGORY(gst_nn_segment_debug);
#define GST_CAT_DEFAULT gst_nn_segment_debug

enum {
  PROP_0,
  PROP_MODEL,
  PROP_DELEGATE,
  PROP_THREADS,
  PROP_LATENCY_BUDGET,
  PROP_OVER_BUDGET,
  PROP_THRESHOLD,
  PROP_SMOOTHING,
  PROP_OUTPUT_MODE,
  PROP_RESIZE,
  PROP_STATS,
  PROP_STATS_INTERVAL,
  PROP_THREAD_PRIORITY,
  PROP_CLASSES,
  PROP_INPUT_MEAN,
  PROP_INPUT_STD,
  PROP_CHANNEL_ORDER,
  PROP_SAMPLING,
};

#define DEFAULT_PROP_MODEL nullptr
// "auto": the best available delegate. The engine's auto passes over Vulkan devices that
// are really the CPU (Mesa's lavapipe: ~1.3 s per selfie-model frame against ~15-30 ms on
// XNNPACK), so auto is never slower than cpu; delegate=vulkan still forces such a device.
#define DEFAULT_PROP_DELEGATE GST_NN_DELEGATE_AUTO
#define DEFAULT_PROP_THREADS 1
#define DEFAULT_PROP_LATENCY_BUDGET 30
#define DEFAULT_PROP_OVER_BUDGET GST_NN_OVER_BUDGET_REUSE_MASK
#define DEFAULT_PROP_THRESHOLD 0.5
#define DEFAULT_PROP_SMOOTHING 0.0
#define DEFAULT_PROP_OUTPUT_MODE GST_NN_SEGMENT_OUTPUT_META
// What MediaPipe's selfie models are trained on (a stretched camera frame).
#define DEFAULT_PROP_RESIZE GST_NN_SEGMENT_RESIZE_STRETCH
#define DEFAULT_PROP_STATS_INTERVAL 1000
// Unasked, an element leaves its streaming thread's scheduling alone; applications and
// graphs that want the frame path ahead of other work opt in.
#define DEFAULT_PROP_THREAD_PRIORITY GST_NN_THREAD_PRIORITY_NORMAL
#define DEFAULT_PROP_CHANNEL_ORDER GST_NN_CHANNEL_ORDER_AUTO
#define DEFAULT_PROP_SAMPLING GST_NN_SEGMENT_SAMPLING_AUTO

#define NN_SEGMENT_FORMATS "{ RGBA, BGRA, RGBx, BGRx, RGB, BGR, I420, NV12 }"

static GstStaticPadTemplate sink_template = GST_STATIC_PAD_TEMPLATE(
    "sink", GST_PAD_SINK, GST_PAD_ALWAYS, GST_STATIC_CAPS(GST_VIDEO_CAPS_MAKE(NN_SEGMENT_FORMATS)));
// GRAY8 only with output-mode=mask (transform_caps decides which).
static GstStaticPadTemplate src_template = GST_STATIC_PAD_TEMPLATE(
    "src", GST_PAD_SRC, GST_PAD_ALWAYS,
    GST_STATIC_CAPS(GST_VIDEO_CAPS_MAKE("{ RGBA, BGRA, RGBx, BGRx, RGB, BGR, I420, NV12, GRAY8 }")));

using nn::plugins::make_stats_locked;
using nn::plugins::reset_stream;
using nn::plugins::run_guarded;
using nn::plugins::SegmentState;

static bool is_mask_output(GstNnSegmentOutputMode m) {
  return m == GST_NN_SEGMENT_OUTPUT_MASK;
}

#define gst_nn_segment_parent_class parent_class
G_DEFINE_TYPE(GstNnSegment, gst_nn_segment, GST_TYPE_VIDEO_FILTER);
GST_ELEMENT_REGISTER_DEFINE(nnsegment, "nnsegment", GST_RANK_NONE, GST_TYPE_NN_SEGMENT);

static void gst_nn_segment_set_property(GObject* object, guint prop_id, const GValue* value,
                                        GParamSpec* pspec) {
  GstNnSegment* self = GST_NN_SEGMENT(object);
  bool latency_changed = false, renegotiate = false;
  GST_OBJECT_LOCK(self);
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
      break;
    }
    case PROP_OVER_BUDGET:
      self->over_budget = static_cast<GstNnOverBudget>(g_value_get_enum(value));
      break;
    case PROP_THRESHOLD:
      self->threshold = g_value_get_double(value);
      break;
    case PROP_SMOOTHING:
      self->smoothing = g_value_get_double(value);
      break;
    case PROP_OUTPUT_MODE: {
      const auto mode = static_cast<GstNnSegmentOutputMode>(g_value_get_enum(value));
      // mask changes the src caps (GRAY8): renegotiate when crossing that edge.
      renegotiate = is_mask_output(mode) != is_mask_output(self->output_mode);
      self->output_mode = mode;
      break;
    }
    case PROP_RESIZE:
      self->resize = static_cast<GstNnSegmentResize>(g_value_get_enum(value));
      break;
    case PROP_SAMPLING:
      self->sampling = static_cast<GstNnSegmentSampling>(g_value_get_enum(value));
      break;
    case PROP_THREAD_PRIORITY:
      self->thread_priority = static_cast<GstNnThreadPriority>(g_value_get_enum(value));
      break;
    case PROP_STATS_INTERVAL:
      self->stats_interval_ms = g_value_get_uint(value);
      break;
    case PROP_CLASSES:
      g_free(self->classes);
      self->classes = g_value_dup_string(value);
      break;
    case PROP_INPUT_MEAN:
      g_free(self->input_mean);
      self->input_mean = g_value_dup_string(value);
      break;
    case PROP_INPUT_STD:
      g_free(self->input_std);
      self->input_std = g_value_dup_string(value);
      break;
    case PROP_CHANNEL_ORDER:
      self->channel_order = static_cast<GstNnChannelOrder>(g_value_get_enum(value));
      break;
    default:
      G_OBJECT_WARN_INVALID_PROPERTY_ID(object, prop_id, pspec);
      break;
  }
  GST_OBJECT_UNLOCK(self);
  if (renegotiate) gst_base_transform_reconfigure_src(GST_BASE_TRANSFORM(self));
  // The budget is what this element adds to the pipeline latency: let the bin recompute.
  if (latency_changed) gst_element_post_message(GST_ELEMENT(self), gst_message_new_latency(GST_OBJECT(self)));
}

static void gst_nn_segment_get_property(GObject* object, guint prop_id, GValue* value, GParamSpec* pspec) {
  GstNnSegment* self = GST_NN_SEGMENT(object);
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
    case PROP_OVER_BUDGET:
      g_value_set_enum(value, self->over_budget);
      break;
    case PROP_THRESHOLD:
      g_value_set_double(value, self->threshold);
      break;
    case PROP_SMOOTHING:
      g_value_set_double(value, self->smoothing);
      break;
    case PROP_OUTPUT_MODE:
      g_value_set_enum(value, self->output_mode);
      break;
    case PROP_RESIZE:
      g_value_set_enum(value, self->resize);
      break;
    case PROP_SAMPLING:
      g_value_set_enum(value, self->sampling);
      break;
    case PROP_STATS:
      g_value_take_boxed(value, make_stats_locked(self));
      break;
    case PROP_THREAD_PRIORITY:
      g_value_set_enum(value, self->thread_priority);
      break;
    case PROP_STATS_INTERVAL:
      g_value_set_uint(value, self->stats_interval_ms);
      break;
    case PROP_CLASSES:
      g_value_set_string(value, self->classes);
      break;
    case PROP_INPUT_MEAN:
      g_value_set_string(value, self->input_mean);
      break;
    case PROP_INPUT_STD:
      g_value_set_string(value, self->input_std);
      break;
    case PROP_CHANNEL_ORDER:
      g_value_set_enum(value, self->channel_order);
      break;
    default:
      G_OBJECT_WARN_INVALID_PROPERTY_ID(object, prop_id, pspec);
      break;
  }
  GST_OBJECT_UNLOCK(self);
}

// output-mode=mask: the src side is GRAY8 at the sink side's size (and the other way round,
// any of our formats). Other modes: same caps both ways.
static GstCaps* gst_nn_segment_transform_caps(GstBaseTransform* trans, GstPadDirection direction,
                                              GstCaps* caps, GstCaps* filter) {
  GstNnSegment* self = GST_NN_SEGMENT(trans);
  GST_OBJECT_LOCK(self);
  const bool mask = is_mask_output(self->output_mode);
  GST_OBJECT_UNLOCK(self);
  if (!mask) return GST_BASE_TRANSFORM_CLASS(parent_class)->transform_caps(trans, direction, caps, filter);

  static const char* const kFormats[] = {"RGBA", "BGRA", "RGBx", "BGRx", "RGB", "BGR", "I420", "NV12"};
  GstCaps* result = gst_caps_new_empty();
  for (guint i = 0; i < gst_caps_get_size(caps); ++i) {
    GstStructure* st = gst_structure_copy(gst_caps_get_structure(caps, i));
    // Colour properties of one side say nothing about the other.
    gst_structure_remove_fields(st, "format", "colorimetry", "chroma-site", nullptr);
    if (direction == GST_PAD_SINK) {
      gst_structure_set(st, "format", G_TYPE_STRING, "GRAY8", nullptr);
    } else {
      GValue list = G_VALUE_INIT;
      g_value_init(&list, GST_TYPE_LIST);
      for (const char* f : kFormats) {
        GValue v = G_VALUE_INIT;
        g_value_init(&v, G_TYPE_STRING);
        g_value_set_string(&v, f);
        gst_value_list_append_and_take_value(&list, &v);
      }
      gst_structure_take_value(st, "format", &list);
    }
    result =
        gst_caps_merge_structure_full(result, st, gst_caps_features_copy(gst_caps_get_features(caps, i)));
  }
  if (filter) {
    GstCaps* t = gst_caps_intersect_full(filter, result, GST_CAPS_INTERSECT_FIRST);
    gst_caps_unref(result);
    result = t;
  }
  GST_DEBUG_OBJECT(self, "mask output, %s: %" GST_PTR_FORMAT " -> %" GST_PTR_FORMAT,
                   direction == GST_PAD_SINK ? "sink to src" : "src to sink", caps, result);
  return result;
}

static gboolean gst_nn_segment_sink_event(GstBaseTransform* trans, GstEvent* event) {
  GstNnSegment* self = GST_NN_SEGMENT(trans);
  if (GST_EVENT_TYPE(event) == GST_EVENT_FLUSH_STOP) reset_stream(self);
  return GST_BASE_TRANSFORM_CLASS(parent_class)->sink_event(trans, event);
}

static gboolean gst_nn_segment_src_event(GstBaseTransform* trans, GstEvent* event) {
  GstNnSegment* self = GST_NN_SEGMENT(trans);
  if (GST_EVENT_TYPE(event) == GST_EVENT_CUSTOM_UPSTREAM && gst_event_has_name(event, GST_NN_DOWNSTREAM_COST_EVENT)) {
    // A compositor downstream (nnbackground) says what it costs per frame: ours to consume.
    gdouble ms = 0;
    if (gst_structure_get_double(gst_event_get_structure(event), "ms", &ms) && std::isfinite(ms)) {
      GST_OBJECT_LOCK(self);
      self->state->downstream_ms = std::clamp(ms, 0.0, 60000.0);
      GST_OBJECT_UNLOCK(self);
      GST_LOG_OBJECT(self, "downstream compositing: %.2f ms per frame", ms);
    }
    gst_event_unref(event);
    return TRUE;
  }
  if (GST_EVENT_TYPE(event) == GST_EVENT_QOS) {
    // Acted on here (skip inference first, then drop), never by GstBaseTransform: the
    // event goes upstream without passing through its handler. qos=false: ignored.
    if (gst_base_transform_is_qos_enabled(trans)) {
      GstQOSType type;
      gdouble proportion;
      GstClockTimeDiff diff;
      GstClockTime timestamp;
      gst_event_parse_qos(event, &type, &proportion, &diff, &timestamp);
      GST_OBJECT_LOCK(self);
      self->state->qos_proportion = proportion;
      if (GST_CLOCK_TIME_IS_VALID(timestamp)) {
        // Like GstBaseTransform: when late, expect to stay late for about as long again.
        self->state->qos_earliest = diff > 0 ? timestamp + 2 * diff : timestamp + diff;
      }
      GST_OBJECT_UNLOCK(self);
      GST_LOG_OBJECT(self, "QoS: proportion %g, diff %" G_GINT64_FORMAT ", timestamp %" GST_TIME_FORMAT,
                     proportion, diff, GST_TIME_ARGS(timestamp));
    }
    return gst_pad_push_event(GST_BASE_TRANSFORM_SINK_PAD(trans), event);
  }
  return GST_BASE_TRANSFORM_CLASS(parent_class)->src_event(trans, event);
}

static gboolean gst_nn_segment_query(GstBaseTransform* trans, GstPadDirection direction, GstQuery* query) {
  GstNnSegment* self = GST_NN_SEGMENT(trans);
  if (direction == GST_PAD_SRC && GST_QUERY_TYPE(query) == GST_QUERY_CUSTOM) {
    const GstStructure* st = gst_query_get_structure(query);
    if (st && gst_structure_has_name(st, GST_NN_SEGMENT_PRESENT_QUERY)) return TRUE;
  }
  if (direction == GST_PAD_SRC && GST_QUERY_TYPE(query) == GST_QUERY_LATENCY) {
    if (!gst_pad_peer_query(GST_BASE_TRANSFORM_SINK_PAD(trans), query)) return FALSE;
    gboolean live;
    GstClockTime min, max;
    gst_query_parse_latency(query, &live, &min, &max);
    GST_OBJECT_LOCK(self);
    const GstClockTime ours = self->latency_budget_ms * GST_MSECOND;
    GST_OBJECT_UNLOCK(self);
    // Live: a frame may wait up to the budget for its mask. Not live: nothing to add.
    if (live) {
      min += ours;
      if (GST_CLOCK_TIME_IS_VALID(max)) max += ours;
    }
    GST_DEBUG_OBJECT(self, "latency: live %d, min %" GST_TIME_FORMAT " max %" GST_TIME_FORMAT, live,
                     GST_TIME_ARGS(min), GST_TIME_ARGS(max));
    gst_query_set_latency(query, live, min, max);
    return TRUE;
  }
  return GST_BASE_TRANSFORM_CLASS(parent_class)->query(trans, direction, query);
}

static GstFlowReturn gst_nn_segment_transform_frame_ip(GstVideoFilter* filter, GstVideoFrame* frame) {
  return run_guarded(GST_NN_SEGMENT(filter), frame, nullptr);
}

// output-mode=mask only (set_info turns in-place off for it).
static GstFlowReturn gst_nn_segment_transform_frame(GstVideoFilter* filter, GstVideoFrame* in,
                                                    GstVideoFrame* out) {
  GstNnSegment* self = GST_NN_SEGMENT(filter);
  if (GST_VIDEO_FRAME_FORMAT(out) != GST_VIDEO_FORMAT_GRAY8) {
    GST_ELEMENT_ERROR(
        self, CORE, NEGOTIATION, ("Unexpected output format"),
        ("copying transform with %s output", gst_video_format_to_string(GST_VIDEO_FRAME_FORMAT(out))));
    return GST_FLOW_ERROR;
  }
  return run_guarded(self, in, out);
}

static void gst_nn_segment_finalize(GObject* object) {
  GstNnSegment* self = GST_NN_SEGMENT(object);
  delete self->state;
  self->state = nullptr;
  g_free(self->model);
  g_free(self->classes);
  g_free(self->input_mean);
  g_free(self->input_std);
  G_OBJECT_CLASS(parent_class)->finalize(object);
}

static void gst_nn_segment_class_init(GstNnSegmentClass* klass) {
  GObjectClass* gobject_class = G_OBJECT_CLASS(klass);
  GstElementClass* element_class = GST_ELEMENT_CLASS(klass);
  GstBaseTransformClass* trans_class = GST_BASE_TRANSFORM_CLASS(klass);
  GstVideoFilterClass* filter_class = GST_VIDEO_FILTER_CLASS(klass);

  GST_DEBUG_CATEGORY_INIT(gst_nn_segment_debug, "nnsegment", 0, "nnpipe person segmentation");

  gobject_class->set_property = gst_nn_segment_set_property;
  gobject_class->get_property = gst_nn_segment_get_property;
  gobject_class->finalize = gst_nn_segment_finalize;

  g_object_class_install_property(
      gobject_class, PROP_MODEL,
      g_param_spec_string(
          "model", "Model", "Segmentation model: .nnapi, or .tflite/.onnx converted on load",
          DEFAULT_PROP_MODEL,
          static_cast<GParamFlags>(G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS | GST_PARAM_MUTABLE_READY)));
  g_object_class_install_property(
      gobject_class, PROP_DELEGATE,
      g_param_spec_enum(
          "delegate", "Delegate", "Where inference runs (the CPU takes what others cannot)",
          GST_TYPE_NN_DELEGATE, DEFAULT_PROP_DELEGATE,
          static_cast<GParamFlags>(G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS | GST_PARAM_MUTABLE_READY)));
  g_object_class_install_property(
      gobject_class, PROP_THREADS,
      g_param_spec_int(
          "threads", "Threads", "Inference threads (0 = one per core)", 0, 64, DEFAULT_PROP_THREADS,
          static_cast<GParamFlags>(G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS | GST_PARAM_MUTABLE_READY)));
  g_object_class_install_property(
      gobject_class, PROP_LATENCY_BUDGET,
      g_param_spec_uint(
          "latency-budget", "Latency budget",
          "Latency, in ms from a frame's arrival, that this element and the compositing downstream of it "
          "(nnbackground) may add together; the frame waits for its own mask only that long (also the "
          "latency reported when live)",
          0,
          10000, DEFAULT_PROP_LATENCY_BUDGET,
          static_cast<GParamFlags>(G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS | GST_PARAM_MUTABLE_PLAYING)));
  g_object_class_install_property(
      gobject_class, PROP_OVER_BUDGET,
      g_param_spec_enum(
          "over-budget", "Over budget", "What to do with a frame whose mask is not ready in time",
          GST_TYPE_NN_OVER_BUDGET, DEFAULT_PROP_OVER_BUDGET,
          static_cast<GParamFlags>(G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS | GST_PARAM_MUTABLE_PLAYING)));
  g_object_class_install_property(
      gobject_class, PROP_THRESHOLD,
      g_param_spec_double(
          "threshold", "Threshold",
          "Person probability at the centre of a soft edge ramp of +-0.2 (0 = raw probabilities)", 0.0, 1.0,
          DEFAULT_PROP_THRESHOLD,
          static_cast<GParamFlags>(G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS | GST_PARAM_MUTABLE_PLAYING)));
  g_object_class_install_property(
      gobject_class, PROP_SMOOTHING,
      g_param_spec_double(
          "smoothing", "Smoothing",
          "Temporal smoothing: weight of the previous mask in an exponential moving average", 0.0, 0.99,
          DEFAULT_PROP_SMOOTHING,
          static_cast<GParamFlags>(G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS | GST_PARAM_MUTABLE_PLAYING)));
  g_object_class_install_property(
      gobject_class, PROP_OUTPUT_MODE,
      g_param_spec_enum(
          "output-mode", "Output mode",
          "Where the mask goes. Changing to or from mask mid-stream renegotiates (src caps become or "
          "stop being GRAY8): downstream must accept the new caps",
          GST_TYPE_NN_SEGMENT_OUTPUT_MODE, DEFAULT_PROP_OUTPUT_MODE,
          static_cast<GParamFlags>(G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS | GST_PARAM_MUTABLE_PLAYING)));
  g_object_class_install_property(
      gobject_class, PROP_RESIZE,
      g_param_spec_enum(
          "resize", "Resize",
          "How frames are fitted to the model input; letterbox keeps the aspect ratio and the mask meta's "
          "rect then reaches outside the frame. Set in the NULL or READY state (read when the caps are negotiated)",
          GST_TYPE_NN_SEGMENT_RESIZE, DEFAULT_PROP_RESIZE,
          static_cast<GParamFlags>(G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS | GST_PARAM_MUTABLE_READY)));
  g_object_class_install_property(
      gobject_class, PROP_SAMPLING,
      g_param_spec_enum("sampling", "Sampling",
                        "How frames are resampled to the model input: auto takes the model's own "
                        "(mediapipe for MediaPipe's selfie models, as its runtime does; else area). Takes "
                        "effect at the next start",
                        GST_TYPE_NN_SEGMENT_SAMPLING, DEFAULT_PROP_SAMPLING,
                        static_cast<GParamFlags>(G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS |
                                                 GST_PARAM_MUTABLE_READY)));
  g_object_class_install_property(
      gobject_class, PROP_STATS,
      g_param_spec_boxed("stats", "Statistics",
                         "Inference p50/p99 ms, inferences run/skipped, frames dropped, mask age, delegates, "
                         "downstream compositing ms and own overrun ms taken out of the budget",
                         GST_TYPE_STRUCTURE,
                         static_cast<GParamFlags>(G_PARAM_READABLE | G_PARAM_STATIC_STRINGS)));
  g_object_class_install_property(
      gobject_class, PROP_STATS_INTERVAL,
      g_param_spec_uint(
          "stats-interval", "Stats interval",
          "Post an nnsegment-stats element message every this many ms (0 = never)", 0, G_MAXUINT,
          DEFAULT_PROP_STATS_INTERVAL,
          static_cast<GParamFlags>(G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS | GST_PARAM_MUTABLE_PLAYING)));
  g_object_class_install_property(
      gobject_class, PROP_THREAD_PRIORITY,
      g_param_spec_enum("thread-priority", "Thread priority",
                        "Scheduling for the streaming thread that runs this element (put back at stop): "
                        "normal leaves it alone; realtime (asked for explicitly) gives it a real-time "
                        "priority where the process may have one. The inference worker always stays at "
                        "normal priority",
                        GST_TYPE_NN_THREAD_PRIORITY, DEFAULT_PROP_THREAD_PRIORITY,
                        static_cast<GParamFlags>(G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS |
                                                 GST_PARAM_MUTABLE_READY)));

  const auto ready =
      static_cast<GParamFlags>(G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS | GST_PARAM_MUTABLE_READY);
  g_object_class_install_property(
      gobject_class, PROP_CLASSES,
      g_param_spec_string("classes", "Foreground classes",
                          "Multi-class models: the output classes that count as foreground, e.g. \"15\" "
                          "(person in Pascal VOC's 21 classes) or \"3,15\" (their probabilities add up). "
                          "Unset: the model's metadata (foreground_classes), else class 1 of a two-class "
                          "model; a model with more classes must say, or this must be set",
                          nullptr, ready));
  g_object_class_install_property(
      gobject_class, PROP_INPUT_MEAN,
      g_param_spec_string("input-mean", "Input mean",
                          "Subtracted from each input pixel (0..255) before dividing by input-std: one value, "
                          "or one per channel in the model's channel order, e.g. \"123.675,116.28,103.53\" "
                          "(ImageNet). Unset: the model's metadata, else 0",
                          nullptr, ready));
  g_object_class_install_property(
      gobject_class, PROP_INPUT_STD,
      g_param_spec_string("input-std", "Input standard deviation",
                          "Input pixels (0..255, minus input-mean) are divided by this: one value > 0, or one "
                          "per channel, e.g. \"58.395,57.12,57.375\" (ImageNet). Unset: the model's "
                          "metadata, else 255 (input in [0,1])",
                          nullptr, ready));
  g_object_class_install_property(
      gobject_class, PROP_CHANNEL_ORDER,
      g_param_spec_enum("channel-order", "Channel order", "The order of the colour channels the model reads",
                        GST_TYPE_NN_CHANNEL_ORDER, DEFAULT_PROP_CHANNEL_ORDER, ready));

  gst_element_class_set_static_metadata(element_class, "nnpipe person segmentation", "Filter/Effect/Video",
                                        "Segments people with an nnpipe model and attaches the mask as meta",
                                        "nnpipe developers");
  gst_element_class_add_static_pad_template(element_class, &sink_template);
  gst_element_class_add_static_pad_template(element_class, &src_template);

  trans_class->start = GST_DEBUG_FUNCPTR(nn::plugins::segment_start);
  trans_class->stop = GST_DEBUG_FUNCPTR(nn::plugins::segment_stop);
  trans_class->sink_event = GST_DEBUG_FUNCPTR(gst_nn_segment_sink_event);
  trans_class->src_event = GST_DEBUG_FUNCPTR(gst_nn_segment_src_event);
  trans_class->query = GST_DEBUG_FUNCPTR(gst_nn_segment_query);
  // Buffers are only annotated (and alpha written in place): same caps both ways.
  trans_class->passthrough_on_same_caps = FALSE;
  trans_class->transform_ip_on_passthrough = FALSE;
  filter_class->set_info = GST_DEBUG_FUNCPTR(nn::plugins::segment_set_info);
  filter_class->transform_frame_ip = GST_DEBUG_FUNCPTR(gst_nn_segment_transform_frame_ip);
  filter_class->transform_frame = GST_DEBUG_FUNCPTR(gst_nn_segment_transform_frame);
  trans_class->transform_caps = GST_DEBUG_FUNCPTR(gst_nn_segment_transform_caps);

  gst_type_mark_as_plugin_api(GST_TYPE_NN_DELEGATE, static_cast<GstPluginAPIFlags>(0));
  gst_type_mark_as_plugin_api(GST_TYPE_NN_OVER_BUDGET, static_cast<GstPluginAPIFlags>(0));
  gst_type_mark_as_plugin_api(GST_TYPE_NN_SEGMENT_OUTPUT_MODE, static_cast<GstPluginAPIFlags>(0));
  gst_type_mark_as_plugin_api(GST_TYPE_NN_SEGMENT_RESIZE, static_cast<GstPluginAPIFlags>(0));
  gst_type_mark_as_plugin_api(GST_TYPE_NN_CHANNEL_ORDER, static_cast<GstPluginAPIFlags>(0));
  gst_type_mark_as_plugin_api(GST_TYPE_NN_SEGMENT_SAMPLING, static_cast<GstPluginAPIFlags>(0));
  gst_type_mark_as_plugin_api(GST_TYPE_NN_THREAD_PRIORITY, static_cast<GstPluginAPIFlags>(0));
}

static void gst_nn_segment_init(GstNnSegment* self) {
  self->model = nullptr;
  self->delegate = DEFAULT_PROP_DELEGATE;
  self->threads = DEFAULT_PROP_THREADS;
  self->latency_budget_ms = DEFAULT_PROP_LATENCY_BUDGET;
  self->over_budget = DEFAULT_PROP_OVER_BUDGET;
  self->threshold = DEFAULT_PROP_THRESHOLD;
  self->smoothing = DEFAULT_PROP_SMOOTHING;
  self->output_mode = DEFAULT_PROP_OUTPUT_MODE;
  self->resize = DEFAULT_PROP_RESIZE;
  self->stats_interval_ms = DEFAULT_PROP_STATS_INTERVAL;
  self->thread_priority = DEFAULT_PROP_THREAD_PRIORITY;
  self->classes = nullptr;
  self->input_mean = nullptr;
  self->input_std = nullptr;
  self->channel_order = DEFAULT_PROP_CHANNEL_ORDER;
  self->sampling = DEFAULT_PROP_SAMPLING;
  self->state = new SegmentState();
  // QoS on, as GstBaseTransform elements that honour it. The element acts on it itself
  // (skip inference before dropping frames, src_event), GstBaseTransform never drops.
  gst_base_transform_set_qos_enabled(GST_BASE_TRANSFORM(self), TRUE);
}

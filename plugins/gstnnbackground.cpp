/**
 * SECTION:element-nnbackground
 * @title: nnbackground
 *
 * Replaces the background behind people using the #GstNnMaskMeta that nnsegment
 * attaches. The low-resolution mask is upsampled to the frame with edge refinement (a
 * fast guided filter against the frame's luma) and optional feathering, then:
 *
 * - mode=blur: the background is blurred (blur-strength = Gaussian sigma in pixels),
 *   computed at reduced resolution with the person masked out so no halo bleeds in;
 * - mode=color: a solid ARGB colour (its alpha lands in the alpha channel, if any);
 * - mode=image: an image file (location), scaled to cover the frame;
 * - mode=transparent: the mask goes into the alpha channel (RGBA/BGRA are negotiated
 *   when upstream can convert; a stream fixed to a format without alpha is a
 *   not-negotiated error that names the two);
 * - mode=video: the newest frame that arrived on the "background" sink pad, scaled to
 *   cover the frame. That pad is a request pad, made only when linked by name
 *   ("bg.background"): automatic linking never picks it. The main stream never waits for that pad: until its first frame
 *   arrives the background is blurred (as mode=blur); after its EOS, its last frame
 *   stays. The background branch is paced to the main stream's running time (it waits at
 *   most 200 ms per frame for the main stream), and gets EOS once the main stream ends.
 *
 * Buffers without a mask pass unchanged. When the first such buffer arrives and no
 * nnsegment answers upstream (nnsegment forgotten), one warning goes on the bus.
 *
 * adaptive=true (default) keeps each frame within nnsegment's latency budget under CPU
 * contention: the mask meta carries the frame's deadline, and a frame that would finish
 * compositing after it at full quality takes the fast path instead -- no edge refinement
 * (the feathered mask is upsampled), and in mode=blur the blurred background of one of the
 * last frames (never more than 2 in a row). The full-quality cost is predicted from the
 * lowest cost seen at the current caps and settings times the recent slowdown. The stats
 * count these frames (fast-frames).
 *
 * On a real-time streaming thread (nnsegment thread-priority=realtime upstream, or the
 * application's choice) the frame is composited on that thread alone: OpenCV's helper
 * threads have normal priority, and one preempted by a busy process in the middle of its
 * rows would hold the frame (serial-frames counts these frames).
 *
 * ## Example launch lines
 * |[
 * gst-launch-1.0 filesrc location=Megamind.avi ! decodebin ! videoconvert ! \
 *   nnsegment model=assets/models/selfie_segmentation.tflite ! \
 *   nnbackground mode=blur blur-strength=20 refine=true feather=2 ! videoconvert ! autovideosink
 * ]| Blurs the background with edge refinement and 2 px of feathering.
 * |[
 * gst-launch-1.0 filesrc location=Megamind.avi ! decodebin ! videoconvert ! \
 *   nnsegment model=assets/models/selfie_segmentation.tflite ! \
 *   nnbackground mode=color color=0xFF00B140 ! videoconvert ! autovideosink
 * ]| A green screen.
 * |[
 * gst-launch-1.0 filesrc location=Megamind.avi ! decodebin ! videoconvert ! \
 *   nnsegment model=assets/models/selfie_segmentation.tflite ! \
 *   nnbackground mode=image location=beach.jpg ! videoconvert ! autovideosink
 * ]| A picture behind people.
 * |[
 * gst-launch-1.0 filesrc location=Megamind.avi ! decodebin ! videoconvert ! \
 *   nnsegment model=assets/models/selfie_segmentation.tflite ! nnbackground name=bg mode=video ! \
 *   videoconvert ! autovideosink \
 *   videotestsrc pattern=ball ! video/x-raw,width=320,height=240 ! videoconvert ! bg.background
 * ]| A video behind people (any size; it is scaled to cover the frame).
 * |[
 * gst-launch-1.0 filesrc location=Megamind.avi ! decodebin ! videoconvert ! \
 *   nnsegment model=assets/models/selfie_segmentation.tflite ! nnbackground mode=transparent ! \
 *   videoconvert ! pngenc ! multifilesink location=cutout-%05d.png
 * ]| Cut-outs with transparency.
 *
 * Caps: video/x-raw in RGBA, BGRA, RGBx, BGRx, RGB, BGR, I420 or NV12, same caps out.
 * I420 and NV12 frames (a camera's or a decoder's own format) are composited on their
 * planes without a conversion to RGB: the edge refinement is guided by the frame's Y, the
 * blur runs on Y, U and V, and each plane is blended with the alpha at its resolution;
 * colours and images are converted with the stream's colour matrix. mode=transparent
 * needs RGBA or BGRA (the only formats offered to a neighbour that can convert; others are
 * a negotiation error). The background pad takes the packed RGB formats at any size,
 * independently of the main stream.
 */
#include "gstnnbackground.h"

#include <algorithm>
#include <exception>
#include <memory>
#include <string>

#include "background_input.h"
#include "compositor.h"
#include "cpu_time.h"
#include "element_stats.h"
#include "gstnnmaskmeta.h"
#include "gstnnsegment.h"  // GST_NN_SEGMENT_PRESENT_QUERY
#include "latency_window.h"
#include "quality_governor.h"
#include "thread_priority.h"

GST_DEBUG_CATEGORY_STATIC(gst_nn_background_debug);
#define GST_CAT_DEFAULT gst_nn_background_debug

enum {
  PROP_0,
  PROP_MODE,
  PROP_BLUR_STRENGTH,
  PROP_COLOR,
  PROP_LOCATION,
  PROP_REFINE,
  PROP_FEATHER,
  PROP_ADAPTIVE,
  PROP_STATS,
};

#define DEFAULT_PROP_MODE GST_NN_BACKGROUND_MODE_BLUR
#define DEFAULT_PROP_BLUR_STRENGTH 16.0
#define DEFAULT_PROP_COLOR 0xFF00B140u
#define DEFAULT_PROP_LOCATION nullptr
#define DEFAULT_PROP_REFINE TRUE
#define DEFAULT_PROP_FEATHER 2.0
#define DEFAULT_PROP_ADAPTIVE TRUE

#define NN_BACKGROUND_FORMATS "{ RGBA, BGRA, RGBx, BGRx, RGB, BGR, I420, NV12 }"
// The background pad's frames are packed RGB (scaled and converted once per frame).
#define NN_BACKGROUND_PAD_FORMATS "{ RGBA, BGRA, RGBx, BGRx, RGB, BGR }"
#define NN_BACKGROUND_ALPHA_FORMATS "{ RGBA, BGRA }"

static GstStaticPadTemplate sink_template = GST_STATIC_PAD_TEMPLATE(
    "sink", GST_PAD_SINK, GST_PAD_ALWAYS, GST_STATIC_CAPS(GST_VIDEO_CAPS_MAKE(NN_BACKGROUND_FORMATS)));
static GstStaticPadTemplate src_template = GST_STATIC_PAD_TEMPLATE(
    "src", GST_PAD_SRC, GST_PAD_ALWAYS, GST_STATIC_CAPS(GST_VIDEO_CAPS_MAKE(NN_BACKGROUND_FORMATS)));
// mode=video's background frames: a request pad, made only when asked for by name
// ("bg.background" in a launch line, gst_element_request_pad_simple). An always pad would
// take the automatic link whenever the main stream's format does not fit "sink", and the
// pipeline would wait in PREROLL for frames that never come.
static GstStaticPadTemplate background_template = GST_STATIC_PAD_TEMPLATE(
    "background", GST_PAD_SINK, GST_PAD_REQUEST, GST_STATIC_CAPS(GST_VIDEO_CAPS_MAKE(NN_BACKGROUND_PAD_FORMATS)));

GType gst_nn_background_mode_get_type(void) {
  static GType type = 0;
  static const GEnumValue values[] = {
      {GST_NN_BACKGROUND_MODE_BLUR, "Blur the background", "blur"},
      {GST_NN_BACKGROUND_MODE_COLOR, "Solid colour (color property)", "color"},
      {GST_NN_BACKGROUND_MODE_IMAGE, "Image file (location property)", "image"},
      {GST_NN_BACKGROUND_MODE_TRANSPARENT, "Mask into the alpha channel", "transparent"},
      {GST_NN_BACKGROUND_MODE_VIDEO, "Newest frame of the background pad (blur until there is one)", "video"},
      {0, nullptr, nullptr}};
  if (g_once_init_enter(&type))
    g_once_init_leave(&type, g_enum_register_static("GstNnBackgroundMode", values));
  return type;
}

namespace nn::plugins {

struct BackgroundState {
  Compositor compositor;
  PackedLayout layout;  // YUV frames: RGB, the layout mode=video's background is converted to
  // I420 / NV12 frames are composited on their planes (Compositor::process_yuv); `yuv`
  // holds the stream's planar layout and colour matrix (the planes are set per frame).
  bool is_yuv = false;
  YuvFrame yuv;
  std::string loaded_location;             // the image the compositor holds
  std::unique_ptr<BackgroundInput> input;  // the background pad (mode=video)
  // mode=video: the background buffer last converted, and the result (frame size and
  // layout), reused while no newer background frame arrives.
  GstBuffer* converted_from = nullptr;
  cv::Mat converted;
  // Stats (OBJECT_LOCK).
  LatencyWindow composite_ms;
  // The last ~2 s of this element's time per frame, for the cost reported upstream.
  LatencyWindow recent_ms{64};
  guint64 frames = 0, frames_without_mask = 0, frames_without_background = 0, fast_frames = 0, serial_frames = 0;
  // CPU time per frame: the streaming thread's and the compositor's helper threads'.
  double cpu_ms_total = 0;
  guint64 frames_timed = 0;
  double helper_cpu_ms = 0;  // this frame's compositor helper threads (streaming thread only)
  guint last_mask_age = 0;
  // Whether a frame without a mask was looked into since start (streaming thread only).
  bool missing_mask_checked = false;
  // adaptive=true (streaming thread only), and the settings its costs belong to.
  QualityGovernor governor;
  CompositorSettings governed;

  ~BackgroundState() { forget_converted(); }
  void forget_converted() {
    gst_clear_buffer(&converted_from);
    converted.release();
  }
};

}  // namespace nn::plugins

using nn::plugins::BackgroundState;

#define gst_nn_background_parent_class parent_class
G_DEFINE_TYPE(GstNnBackground, gst_nn_background, GST_TYPE_VIDEO_FILTER);
GST_ELEMENT_REGISTER_DEFINE(nnbackground, "nnbackground", GST_RANK_NONE, GST_TYPE_NN_BACKGROUND);

static void gst_nn_background_set_property(GObject* object, guint prop_id, const GValue* value,
                                           GParamSpec* pspec) {
  GstNnBackground* self = GST_NN_BACKGROUND(object);
  bool renegotiate = false;
  GST_OBJECT_LOCK(self);
  switch (prop_id) {
    case PROP_MODE: {
      const auto mode = static_cast<GstNnBackgroundMode>(g_value_get_enum(value));
      // transparent restricts the caps to formats with alpha: renegotiate on the edge.
      renegotiate =
          (mode == GST_NN_BACKGROUND_MODE_TRANSPARENT) != (self->mode == GST_NN_BACKGROUND_MODE_TRANSPARENT);
      self->mode = mode;
      break;
    }
    case PROP_BLUR_STRENGTH:
      self->blur_strength = g_value_get_double(value);
      break;
    case PROP_COLOR:
      self->color = g_value_get_uint(value);
      break;
    case PROP_LOCATION:
      g_free(self->location);
      self->location = g_value_dup_string(value);
      break;
    case PROP_REFINE:
      self->refine = g_value_get_boolean(value);
      break;
    case PROP_FEATHER:
      self->feather = g_value_get_double(value);
      break;
    case PROP_ADAPTIVE:
      self->adaptive = g_value_get_boolean(value);
      break;
    default:
      G_OBJECT_WARN_INVALID_PROPERTY_ID(object, prop_id, pspec);
      break;
  }
  GST_OBJECT_UNLOCK(self);
  if (renegotiate) gst_base_transform_reconfigure_sink(GST_BASE_TRANSFORM(self));
}

static void gst_nn_background_get_property(GObject* object, guint prop_id, GValue* value, GParamSpec* pspec) {
  GstNnBackground* self = GST_NN_BACKGROUND(object);
  GST_OBJECT_LOCK(self);
  switch (prop_id) {
    case PROP_MODE:
      g_value_set_enum(value, self->mode);
      break;
    case PROP_BLUR_STRENGTH:
      g_value_set_double(value, self->blur_strength);
      break;
    case PROP_COLOR:
      g_value_set_uint(value, self->color);
      break;
    case PROP_LOCATION:
      g_value_set_string(value, self->location);
      break;
    case PROP_REFINE:
      g_value_set_boolean(value, self->refine);
      break;
    case PROP_FEATHER:
      g_value_set_double(value, self->feather);
      break;
    case PROP_ADAPTIVE:
      g_value_set_boolean(value, self->adaptive);
      break;
    case PROP_STATS: {
      BackgroundState* s = self->state;
      g_value_take_boxed(
          value,
          gst_structure_new(NN_BACKGROUND_STATS, NN_STAT_COMPOSITE_P50_MS, G_TYPE_DOUBLE, s->composite_ms.percentile(50),
                            NN_STAT_COMPOSITE_P99_MS, G_TYPE_DOUBLE, s->composite_ms.percentile(99), NN_STAT_FRAMES,
                            G_TYPE_UINT64, s->frames, NN_STAT_FRAMES_WITHOUT_MASK, G_TYPE_UINT64,
                            s->frames_without_mask, NN_STAT_MASK_AGE, G_TYPE_UINT, s->last_mask_age,
                            NN_STAT_BACKGROUND_FRAMES, G_TYPE_UINT64, s->input->frames_received(),
                            NN_STAT_FRAMES_WITHOUT_BACKGROUND, G_TYPE_UINT64, s->frames_without_background,
                            NN_STAT_FAST_FRAMES, G_TYPE_UINT64, s->fast_frames, NN_STAT_SERIAL_FRAMES, G_TYPE_UINT64,
                            s->serial_frames, NN_STAT_FRAME_CPU_MS, G_TYPE_DOUBLE,
                            s->frames_timed ? s->cpu_ms_total / s->frames_timed : 0.0, nullptr));
      break;
    }
    default:
      G_OBJECT_WARN_INVALID_PROPERTY_ID(object, prop_id, pspec);
      break;
  }
  GST_OBJECT_UNLOCK(self);
}

// Loads the image named by `location` when it changed. Posts the error itself.
static bool ensure_image(GstNnBackground* self, const std::string& location) {
  BackgroundState* s = self->state;
  if (location.empty()) {
    GST_ELEMENT_ERROR(self, RESOURCE, NOT_FOUND, ("No background image set"),
                      ("mode=image needs the location property"));
    return false;
  }
  if (location == s->loaded_location && s->compositor.has_image()) return true;
  nn::Status st = s->compositor.set_image(location);
  if (!st.is_ok()) {
    GST_ELEMENT_ERROR(self, RESOURCE, OPEN_READ, ("Could not load background image \"%s\"", location.c_str()),
                      ("%s", st.to_string().c_str()));
    return false;
  }
  s->loaded_location = location;
  return true;
}

static gboolean gst_nn_background_start(GstBaseTransform* trans) {
  GstNnBackground* self = GST_NN_BACKGROUND(trans);
  GST_OBJECT_LOCK(self);
  const bool image = self->mode == GST_NN_BACKGROUND_MODE_IMAGE;
  const std::string location = self->location ? self->location : "";
  self->state->composite_ms.clear();
  self->state->recent_ms.clear();
  self->state->frames = self->state->frames_without_mask = self->state->frames_without_background = 0;
  self->state->fast_frames = self->state->serial_frames = 0;
  self->state->cpu_ms_total = 0;
  self->state->frames_timed = 0;
  self->state->missing_mask_checked = false;
  GST_OBJECT_UNLOCK(self);
  self->state->input->on_main_start();
  if (image) {
    try {
      if (!ensure_image(self, location)) return FALSE;
    } catch (const std::exception& e) {
      GST_ELEMENT_ERROR(self, RESOURCE, OPEN_READ,
                        ("Could not load background image \"%s\"", location.c_str()), ("%s", e.what()));
      return FALSE;
    }
  }
  return TRUE;
}

static GstCaps* gst_nn_background_transform_caps(GstBaseTransform* trans, GstPadDirection direction,
                                                 GstCaps* caps, GstCaps* filter) {
  GstNnBackground* self = GST_NN_BACKGROUND(trans);
  GstCaps* result = GST_BASE_TRANSFORM_CLASS(parent_class)->transform_caps(trans, direction, caps, filter);
  GST_OBJECT_LOCK(self);
  const bool transparent = self->mode == GST_NN_BACKGROUND_MODE_TRANSPARENT;
  GST_OBJECT_UNLOCK(self);
  if (transparent && filter) {
    // A neighbour that can give a format with alpha (a videoconvert) is offered only those.
    // One that cannot (caps fixed to RGB) is offered what it has: the stream links to
    // "sink" and set_info fails with an error that says what to do. Refusing it here would
    // fail the link with no word about alpha (the background pad once took the link and
    // the pipeline waited in PREROLL). Queries without a filter (linking) see every format.
    GstCaps* alpha = gst_caps_from_string(GST_VIDEO_CAPS_MAKE(NN_BACKGROUND_ALPHA_FORMATS));
    GstCaps* restricted = gst_caps_intersect_full(result, alpha, GST_CAPS_INTERSECT_FIRST);
    gst_caps_unref(alpha);
    if (!gst_caps_is_empty(restricted)) {
      gst_caps_unref(result);
      result = restricted;
    } else {
      gst_caps_unref(restricted);
    }
  }
  return result;
}

// Where R, G, B and alpha sit in a packed format; false for formats we do not take.
static bool layout_of(GstVideoFormat format, nn::plugins::PackedLayout* out) {
  nn::plugins::PackedLayout& l = *out;
  switch (format) {
    case GST_VIDEO_FORMAT_RGBA:
      l = {4, 0, 1, 2, 3};
      break;
    case GST_VIDEO_FORMAT_BGRA:
      l = {4, 2, 1, 0, 3};
      break;
    case GST_VIDEO_FORMAT_RGBx:
      l = {4, 0, 1, 2, -1};
      break;
    case GST_VIDEO_FORMAT_BGRx:
      l = {4, 2, 1, 0, -1};
      break;
    case GST_VIDEO_FORMAT_RGB:
      l = {3, 0, 1, 2, -1};
      break;
    case GST_VIDEO_FORMAT_BGR:
      l = {3, 2, 1, 0, -1};
      break;
    default:
      return false;
  }
  return true;
}

// mode=transparent writes the mask into the alpha channel: a format without one is a
// negotiation error that names the formats that work. Posts the error itself.
static bool check_alpha(GstNnBackground* self, GstVideoFormat format, const nn::plugins::PackedLayout& l) {
  GST_OBJECT_LOCK(self);
  const bool transparent = self->mode == GST_NN_BACKGROUND_MODE_TRANSPARENT;
  GST_OBJECT_UNLOCK(self);
  if (!transparent || l.alpha >= 0) return true;
  GST_ELEMENT_ERROR(self, CORE, NEGOTIATION,
                    ("mode=transparent needs a format with alpha (RGBA or BGRA), got %s",
                     gst_video_format_to_string(format)),
                    ("the mask goes into the alpha channel; put videoconvert before nnsegment (or before "
                     "nnbackground) so it can convert to RGBA or BGRA"));
  return false;
}

// The compositor's settings from the element's properties (OBJECT_LOCK held).
static nn::plugins::CompositorSettings settings_locked(GstNnBackground* self) {
  nn::plugins::CompositorSettings settings;
  switch (self->mode) {
    case GST_NN_BACKGROUND_MODE_BLUR:
      settings.mode = nn::plugins::BackgroundMode::kBlur;
      break;
    case GST_NN_BACKGROUND_MODE_COLOR:
      settings.mode = nn::plugins::BackgroundMode::kColor;
      break;
    case GST_NN_BACKGROUND_MODE_IMAGE:
      settings.mode = nn::plugins::BackgroundMode::kImage;
      break;
    case GST_NN_BACKGROUND_MODE_TRANSPARENT:
      settings.mode = nn::plugins::BackgroundMode::kTransparent;
      break;
    case GST_NN_BACKGROUND_MODE_VIDEO:
      settings.mode = nn::plugins::BackgroundMode::kVideo;
      break;
  }
  settings.blur_sigma = self->blur_strength;
  settings.color_argb = self->color;
  settings.refine = self->refine;
  settings.feather = self->feather;
  return settings;
}

// Frames between two GST_NN_DOWNSTREAM_COST_EVENTs sent upstream.
static constexpr guint64 kCostReportFrames = 4;

// One composite in the element's mode on a grey frame at the negotiated size, before the
// first buffer (image mode before its image loads, and video mode, warm up as black / blur): the
// first real frame otherwise pays for every buffer allocation and OpenCV's worker threads
// (1080p: 47 ms instead of 9), late enough for a live sink's QoS to drop the frames after it.
// Tells nnsegment upstream what compositing costs per frame: it takes this out of its
// latency budget (GST_NN_DOWNSTREAM_COST_EVENT).
static void report_cost(GstNnBackground* self, double ms) {
  GstStructure* st = gst_structure_new(GST_NN_DOWNSTREAM_COST_EVENT, "ms", G_TYPE_DOUBLE, ms, nullptr);
  gst_pad_push_event(GST_BASE_TRANSFORM_SINK_PAD(GST_BASE_TRANSFORM(self)),
                     gst_event_new_custom(GST_EVENT_CUSTOM_UPSTREAM, st));
}

// Composites a grey frame three times at the new size: the first allocates and faults in
// the buffers, the second (full quality) is timed, the third (the fast path) too. Returns
// the full one's cost in ms (its wall time, or its CPU time when less), or -1. That first estimate of the cost goes upstream
// before the first frame (nnsegment's budget), and both seed the adaptive governor, so
// frame 1 is already judged against its deadline (and a warm-up slowed by a busy machine
// is corrected by the fast frames that follow).
static double warm_up(GstNnBackground* self, int width, int height) {
  if (width <= 0 || height <= 0) return -1;
  const nn::plugins::PackedLayout& l = self->state->layout;
  cv::Mat frame;
  if (!self->state->is_yuv) frame = cv::Mat(height, width, l.channels == 4 ? CV_8UC4 : CV_8UC3, cv::Scalar::all(128));
  const std::vector<float> half(16 * 16, 0.5f);
  nn::plugins::MaskView mask;
  mask.width = mask.height = 16;
  mask.stride = 16 * sizeof(float);
  mask.data = half.data();
  mask.frame_width = width;
  mask.frame_height = height;
  mask.rect_w = width;
  mask.rect_h = height;
  GST_OBJECT_LOCK(self);
  nn::plugins::CompositorSettings settings = settings_locked(self);
  GST_OBJECT_UNLOCK(self);
  settings.serial = nn::plugins::current_thread_is_realtime();  // as composite() will
  // YUV: a grey frame's planes in one buffer (Y, then chroma).
  nn::plugins::YuvFrame yuv = self->state->yuv;
  std::vector<uint8_t> planes;
  if (self->state->is_yuv) {
    const size_t cw = (width + 1) / 2, ch = (height + 1) / 2;
    planes.assign(static_cast<size_t>(width) * height + 2 * cw * ch, 128);
    yuv.y = planes.data();
    yuv.y_stride = width;
    yuv.u = yuv.y + static_cast<size_t>(width) * height;
    yuv.u_stride = yuv.nv12 ? 2 * cw : cw;
    yuv.v = yuv.u + cw * ch;
    yuv.v_stride = cw;
  }
  double cpu_ms = 0;
  const auto composite_once = [&](bool fast) {
    nn::plugins::CompositorSettings s = settings;
    s.fast = fast;
    const gint64 t0 = g_get_monotonic_time();
    const double cpu0 = nn::plugins::thread_cpu_ms();
    if (self->state->is_yuv)
      self->state->compositor.process_yuv(yuv, mask, s);
    else
      self->state->compositor.process(frame, l, mask, s);
    cpu_ms = nn::plugins::thread_cpu_ms() - cpu0 + self->state->compositor.last_stage_times().helper_ms;
    return (g_get_monotonic_time() - t0) / 1000.0;
  };
  try {
    composite_once(false);
    const double ms = composite_once(false);
    const double full_cpu = cpu_ms;
    const double fast_ms = composite_once(true);
    const double fast_cpu = cpu_ms;
    using Governor = nn::plugins::QualityGovernor;
    self->state->governed = settings;
    // The uncontended cost is wanted: at caps time the machine is often busy (the model's
    // first inference, other processes), and the wall time then mostly measures waiting
    // for a core or a helper thread (1080p on a loaded host: 22-48 ms wall, 5.6-13 ms CPU,
    // 3.5 ms per frame later). CPU time (this thread's and the helpers') does not wait.
    self->state->governor.record_warm_up(
        std::min(ms, full_cpu),
        self->state->compositor.last_reused_background() ? Governor::kFastReused : Governor::kFastBlurred,
        std::min(fast_ms, fast_cpu));
    GST_INFO_OBJECT(self, "warm-up composite at %dx%d: full quality %.2f ms (CPU %.2f), fast path %.2f ms (CPU %.2f)",
                    width, height, ms, full_cpu, fast_ms, fast_cpu);
    return std::min(ms, full_cpu);
  } catch (const std::exception& e) {  // only a head start: the first frame will say it properly
    GST_WARNING_OBJECT(self, "warm-up composite failed: %s", e.what());
  }
  return -1;
}

static gboolean gst_nn_background_set_info(GstVideoFilter* filter, GstCaps* /*incaps*/, GstVideoInfo* in_info,
                                           GstCaps* /*outcaps*/, GstVideoInfo* /*out_info*/) {
  GstNnBackground* self = GST_NN_BACKGROUND(filter);
  nn::plugins::PackedLayout l;
  const GstVideoFormat format = GST_VIDEO_INFO_FORMAT(in_info);
  const bool yuv = format == GST_VIDEO_FORMAT_I420 || format == GST_VIDEO_FORMAT_NV12;
  if (yuv) {
    l = {3, 0, 1, 2, -1};  // no alpha (transparent is refused below); mode=video converts to RGB
    nn::plugins::YuvFrame& y = self->state->yuv;
    y = {};
    y.nv12 = format == GST_VIDEO_FORMAT_NV12;
    y.width = GST_VIDEO_INFO_WIDTH(in_info);
    y.height = GST_VIDEO_INFO_HEIGHT(in_info);
    gdouble kr = 0.299, kb = 0.114;
    if (gst_video_color_matrix_get_Kr_Kb(in_info->colorimetry.matrix, &kr, &kb)) y.kr = kr, y.kb = kb;
    y.full_range = in_info->colorimetry.range == GST_VIDEO_COLOR_RANGE_0_255;
  } else if (!layout_of(format, &l)) {
    GST_ERROR_OBJECT(self, "unsupported format %s", GST_VIDEO_INFO_NAME(in_info));
    return FALSE;
  }
  self->state->is_yuv = yuv;
  if (!check_alpha(self, GST_VIDEO_INFO_FORMAT(in_info), l)) return FALSE;
  self->state->layout = l;
  self->state->forget_converted();  // converted for the old size or layout
  self->state->governor.reset();     // costs of the old size
  const double ms = warm_up(self, GST_VIDEO_INFO_WIDTH(in_info), GST_VIDEO_INFO_HEIGHT(in_info));
  if (ms > 0) {
    GST_OBJECT_LOCK(self);
    self->state->recent_ms.clear();
    self->state->recent_ms.add(ms);
    GST_OBJECT_UNLOCK(self);
    report_cost(self, ms);
  }
  return TRUE;
}

// mode=video: the newest background frame at this frame's size and layout (converted once
// per background frame), or null when there is none yet.
static const cv::Mat* video_background(GstNnBackground* self, GstBuffer* newest, const GstVideoInfo& info,
                                       cv::Size size) {
  BackgroundState* s = self->state;
  if (!newest) return nullptr;
  if (newest == s->converted_from && s->converted.size() == size) return &s->converted;
  nn::plugins::PackedLayout from;
  if (!layout_of(GST_VIDEO_INFO_FORMAT(&info), &from)) return nullptr;  // refused at caps already
  GstVideoFrame vf;
  if (!gst_video_frame_map(&vf, &info, newest, GST_MAP_READ)) {
    GST_WARNING_OBJECT(self, "cannot map the background frame: blurring instead");
    return nullptr;
  }
  struct Unmap {
    GstVideoFrame* f;
    ~Unmap() { gst_video_frame_unmap(f); }
  } unmap{&vf};
  const cv::Mat src(GST_VIDEO_FRAME_HEIGHT(&vf), GST_VIDEO_FRAME_WIDTH(&vf), CV_8UC(from.channels),
                    GST_VIDEO_FRAME_PLANE_DATA(&vf, 0), GST_VIDEO_FRAME_PLANE_STRIDE(&vf, 0));
  nn::plugins::cover_and_convert(src, from, size, s->layout, s->converted);
  gst_clear_buffer(&s->converted_from);
  s->converted_from = gst_buffer_ref(newest);
  return &s->converted;
}

// The first frame without a mask: is there an nnsegment upstream at all? (Its first frames
// may carry no mask yet, that is no reason to warn.) Without one, one warning on the bus:
// otherwise the video passes unchanged and nothing says why.
static void warn_if_no_segmenter(GstNnBackground* self) {
  BackgroundState* s = self->state;
  if (s->missing_mask_checked) return;
  s->missing_mask_checked = true;
  GstQuery* q = gst_query_new_custom(GST_QUERY_CUSTOM, gst_structure_new_empty(GST_NN_SEGMENT_PRESENT_QUERY));
  const bool segmenter = gst_pad_peer_query(GST_BASE_TRANSFORM_SINK_PAD(GST_BASE_TRANSFORM(self)), q);
  gst_query_unref(q);
  if (segmenter) return;
  GST_ELEMENT_WARNING(self, STREAM, FORMAT, ("Frames carry no mask: is nnsegment upstream?"),
                      ("nnbackground composites with the mask nnsegment attaches to each frame "
                       "(GstNnMaskMeta); no nnsegment answered upstream, frames without a mask pass "
                       "unchanged. Put nnsegment model=... before nnbackground"));
}

// A buffer reference released on every path out (exceptions included).
struct BufferUnref {
  void operator()(GstBuffer* b) const { gst_buffer_unref(b); }
};
using BufferRef = std::unique_ptr<GstBuffer, BufferUnref>;

static GstFlowReturn composite(GstNnBackground* self, GstVideoFrame* frame) {
  const gint64 t0 = g_get_monotonic_time();  // the cost reported upstream is all of this
  BackgroundState* s = self->state;
  GST_OBJECT_LOCK(self);
  nn::plugins::CompositorSettings settings = settings_locked(self);
  const std::string location = self->location ? self->location : "";
  const bool adaptive = self->adaptive;
  s->frames++;
  GST_OBJECT_UNLOCK(self);

  if (settings.mode == nn::plugins::BackgroundMode::kImage && !ensure_image(self, location))
    return GST_FLOW_ERROR;

  // Every frame tells the background pad how far the main stream is (its pacing), even
  // in other modes; mode=video also takes its newest frame. Never blocks.
  const bool video = settings.mode == nn::plugins::BackgroundMode::kVideo;
  GstBaseTransform* trans = GST_BASE_TRANSFORM(self);
  const GstClockTime running_time =
      gst_segment_to_running_time(&trans->segment, GST_FORMAT_TIME, GST_BUFFER_PTS(frame->buffer));
  GstVideoInfo bg_info;
  const BufferRef bg_buffer(s->input->on_main_frame(running_time, video, &bg_info));

  // The mode may have become transparent while upstream could not renegotiate.
  if (settings.mode == nn::plugins::BackgroundMode::kTransparent &&
      !check_alpha(self, GST_VIDEO_FRAME_FORMAT(frame), s->layout))
    return GST_FLOW_NOT_NEGOTIATED;

  GstNnMaskMeta* meta = gst_buffer_get_nn_mask_meta(frame->buffer);
  if (!meta || !meta->data) {
    GST_OBJECT_LOCK(self);
    s->frames_without_mask++;
    GST_OBJECT_UNLOCK(self);
    GST_LOG_OBJECT(self, "no mask on this buffer: passing it unchanged");
    warn_if_no_segmenter(self);
    return GST_FLOW_OK;
  }
  nn::plugins::MaskView mask;
  mask.is_float = meta->format == GST_NN_MASK_FORMAT_FLOAT32;
  mask.width = static_cast<int>(meta->width);
  mask.height = static_cast<int>(meta->height);
  mask.stride = meta->stride;
  mask.data = g_bytes_get_data(meta->data, nullptr);
  mask.frame_width = static_cast<int>(meta->frame_width);
  mask.frame_height = static_cast<int>(meta->frame_height);
  mask.rect_x = meta->rect_x;
  mask.rect_y = meta->rect_y;
  mask.rect_w = meta->rect_w;
  mask.rect_h = meta->rect_h;
  // nnsegment's work image (the compositor checks its size): only in this frame's format.
  const GstVideoFormat work_format = s->is_yuv ? GST_VIDEO_FORMAT_v308 : GST_VIDEO_FRAME_FORMAT(frame);
  if (GBytes* small = gst_nn_mask_meta_get_small_frame(meta); small && meta->small_format == work_format) {
    mask.small_data = g_bytes_get_data(small, nullptr);
    mask.small_width = static_cast<int>(meta->small_width);
    mask.small_height = static_cast<int>(meta->small_height);
    mask.small_stride = meta->small_stride;
  }

  const cv::Size size(GST_VIDEO_FRAME_WIDTH(frame), GST_VIDEO_FRAME_HEIGHT(frame));
  if (video) {
    settings.background = video_background(self, bg_buffer.get(), bg_info, size);
  }
  // Costs measured under other settings say nothing about these.
  const nn::plugins::CompositorSettings& g = s->governed;
  if (g.mode != settings.mode || g.refine != settings.refine || g.blur_sigma != settings.blur_sigma ||
      g.feather != settings.feather) {
    s->governor.reset();
    s->governed = settings;
  }
  // Would full quality finish after the frame's deadline? Then the fast path.
  if (adaptive && meta->deadline_us > 0) {
    settings.fast = s->governor.choose_fast((meta->deadline_us - t0) / 1000.0);
    GST_LOG_OBJECT(self, "adaptive: %.2f ms left, full quality predicted %.2f ms (uncontended %.2f): %s",
                   (meta->deadline_us - t0) / 1000.0, s->governor.full_ms(), s->governor.lowest_full(),
                   settings.fast ? "fast" : "full");
  }
  // A real-time streaming thread (nnsegment thread-priority=realtime, or the application's)
  // composites alone: handing rows to OpenCV's normal-priority helpers would make it wait
  // whenever a busy process preempts one mid-rows, the frame's tail latency.
  settings.serial = nn::plugins::current_thread_is_realtime();
  if (s->is_yuv) {
    nn::plugins::YuvFrame yuv = s->yuv;
    yuv.y = static_cast<uint8_t*>(GST_VIDEO_FRAME_PLANE_DATA(frame, 0));
    yuv.y_stride = GST_VIDEO_FRAME_PLANE_STRIDE(frame, 0);
    yuv.u = static_cast<uint8_t*>(GST_VIDEO_FRAME_PLANE_DATA(frame, 1));
    yuv.u_stride = GST_VIDEO_FRAME_PLANE_STRIDE(frame, 1);
    if (!yuv.nv12) {
      yuv.v = static_cast<uint8_t*>(GST_VIDEO_FRAME_PLANE_DATA(frame, 2));
      yuv.v_stride = GST_VIDEO_FRAME_PLANE_STRIDE(frame, 2);
    }
    s->compositor.process_yuv(yuv, mask, settings);
  } else {
    cv::Mat img(size, s->layout.channels == 4 ? CV_8UC4 : CV_8UC3, GST_VIDEO_FRAME_PLANE_DATA(frame, 0),
                GST_VIDEO_FRAME_PLANE_STRIDE(frame, 0));
    s->compositor.process(img, s->layout, mask, settings);
  }
  s->helper_cpu_ms = s->compositor.last_stage_times().helper_ms;
  const double ms = (g_get_monotonic_time() - t0) / 1000.0;
  using Governor = nn::plugins::QualityGovernor;
  const double full_equivalent_ms = s->governor.record(
      !settings.fast ? Governor::kFull
                     : (s->compositor.last_reused_background() ? Governor::kFastReused : Governor::kFastBlurred),
      ms);
  GST_OBJECT_LOCK(self);
  if (video && !settings.background) s->frames_without_background++;
  s->composite_ms.add(ms);
  s->recent_ms.add(adaptive ? full_equivalent_ms : ms);
  s->last_mask_age = meta->age;
  if (settings.fast) s->fast_frames++;
  if (settings.serial) s->serial_frames++;
  // Every few frames, tell nnsegment upstream what compositing costs. The worst of the
  // last ~2 s, not a typical time: the budget bounds the pair's p99, and under CPU
  // contention the tail is what grows.
  const bool report = s->frames % kCostReportFrames == 1;
  const double cost_ms = report ? s->recent_ms.percentile(100) : 0.0;
  GST_OBJECT_UNLOCK(self);
  if (report) report_cost(self, cost_ms);
  return GST_FLOW_OK;
}

static GstFlowReturn gst_nn_background_transform_frame_ip(GstVideoFilter* filter, GstVideoFrame* frame) {
  GstNnBackground* self = GST_NN_BACKGROUND(filter);
  try {
    BackgroundState* s = self->state;
    s->helper_cpu_ms = 0;
    const double cpu0 = nn::plugins::thread_cpu_ms();
    const GstFlowReturn ret = composite(self, frame);
    const double cpu_ms = nn::plugins::thread_cpu_ms() - cpu0 + s->helper_cpu_ms;
    GST_OBJECT_LOCK(self);
    s->cpu_ms_total += cpu_ms;
    s->frames_timed++;
    GST_OBJECT_UNLOCK(self);
    return ret;
  } catch (const std::exception& e) {
    GST_ELEMENT_ERROR(self, STREAM, FAILED, ("Compositing failed"), ("%s", e.what()));
  } catch (...) {
    GST_ELEMENT_ERROR(self, STREAM, FAILED, ("Compositing failed"), ("unknown exception"));
  }
  return GST_FLOW_ERROR;
}

// The main stream's EOS and flushes matter to the background pad's pacing.
static gboolean gst_nn_background_sink_event(GstBaseTransform* trans, GstEvent* event) {
  GstNnBackground* self = GST_NN_BACKGROUND(trans);
  switch (GST_EVENT_TYPE(event)) {
    case GST_EVENT_EOS:
      self->state->input->on_main_eos();
      break;
    case GST_EVENT_FLUSH_STOP:
      self->state->input->on_main_flush();
      break;
    default:
      break;
  }
  return GST_BASE_TRANSFORM_CLASS(parent_class)->sink_event(trans, event);
}

static GstStateChangeReturn gst_nn_background_change_state(GstElement* element, GstStateChange transition) {
  GstNnBackground* self = GST_NN_BACKGROUND(element);
  const GstStateChangeReturn ret = GST_ELEMENT_CLASS(parent_class)->change_state(element, transition);
  // Pads are deactivated now (no streaming thread inside): drop the background frame, and
  // the compositor's frame-size buffers (the blurred background, coefficients, alpha: ~10 MiB
  // at 1080p) a stopped pipeline has no use for. mode=image loads its image again at start.
  if (transition == GST_STATE_CHANGE_PAUSED_TO_READY) {
    self->state->input->clear();
    self->state->forget_converted();
    self->state->compositor = nn::plugins::Compositor();
    self->state->loaded_location.clear();
  }
  return ret;
}

// The background pad, only when asked for by name: automatic linking (gst_element_link,
// "a ! nnbackground" in a launch line) requests a pad without a name, and is refused.
static GstPad* gst_nn_background_request_new_pad(GstElement* element, GstPadTemplate* templ, const gchar* name,
                                                 const GstCaps* /*caps*/) {
  GstNnBackground* self = GST_NN_BACKGROUND(element);
  if (!name || g_strcmp0(name, "background") != 0) {
    GST_INFO_OBJECT(self,
                    "not making the background pad for an automatic link: link it by name "
                    "(\"name.background\" in a launch line)");
    return nullptr;
  }
  GstPad* pad = self->state->input->add_pad(templ);
  if (!pad) GST_WARNING_OBJECT(self, "the background pad exists already");
  return pad;
}

static void gst_nn_background_release_pad(GstElement* element, GstPad* pad) {
  GstNnBackground* self = GST_NN_BACKGROUND(element);
  self->state->input->remove_pad(pad);
}

static void gst_nn_background_finalize(GObject* object) {
  GstNnBackground* self = GST_NN_BACKGROUND(object);
  delete self->state;
  self->state = nullptr;
  g_free(self->location);
  G_OBJECT_CLASS(parent_class)->finalize(object);
}

static void gst_nn_background_class_init(GstNnBackgroundClass* klass) {
  GObjectClass* gobject_class = G_OBJECT_CLASS(klass);
  GstElementClass* element_class = GST_ELEMENT_CLASS(klass);
  GstBaseTransformClass* trans_class = GST_BASE_TRANSFORM_CLASS(klass);
  GstVideoFilterClass* filter_class = GST_VIDEO_FILTER_CLASS(klass);

  GST_DEBUG_CATEGORY_INIT(gst_nn_background_debug, "nnbackground", 0, "nnpipe background replacement");

  gobject_class->set_property = gst_nn_background_set_property;
  gobject_class->get_property = gst_nn_background_get_property;
  gobject_class->finalize = gst_nn_background_finalize;

  const auto playing =
      static_cast<GParamFlags>(G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS | GST_PARAM_MUTABLE_PLAYING);
  g_object_class_install_property(gobject_class, PROP_MODE,
                                  g_param_spec_enum("mode", "Mode",
                                                    "What replaces the background. Frames without nnsegment's "
                                                    "mask pass unchanged (one warning on the bus when no "
                                                    "nnsegment is upstream)",
                                                    GST_TYPE_NN_BACKGROUND_MODE, DEFAULT_PROP_MODE, playing));
  g_object_class_install_property(
      gobject_class, PROP_BLUR_STRENGTH,
      g_param_spec_double("blur-strength", "Blur strength", "Background blur: Gaussian sigma in frame pixels",
                          0.0, 500.0, DEFAULT_PROP_BLUR_STRENGTH, playing));
  g_object_class_install_property(
      gobject_class, PROP_COLOR,
      g_param_spec_uint("color", "Color", "Background colour for mode=color, as 0xAARRGGBB", 0, G_MAXUINT32,
                        DEFAULT_PROP_COLOR, playing));
  g_object_class_install_property(
      gobject_class, PROP_LOCATION,
      g_param_spec_string("location", "Location",
                          "Background image for mode=image (scaled to cover the frame)",
                          DEFAULT_PROP_LOCATION, playing));
  g_object_class_install_property(
      gobject_class, PROP_REFINE,
      g_param_spec_boolean("refine", "Refine edges",
                           "Snap the upsampled mask to the frame's edges (guided filter)",
                           DEFAULT_PROP_REFINE, playing));
  g_object_class_install_property(
      gobject_class, PROP_FEATHER,
      g_param_spec_double("feather", "Feather", "Extra softening of the mask edge, in frame pixels", 0.0,
                          100.0, DEFAULT_PROP_FEATHER, playing));
  g_object_class_install_property(
      gobject_class, PROP_ADAPTIVE,
      g_param_spec_boolean("adaptive", "Adaptive quality",
                           "Composite a frame on the fast path (no edge refinement, a recent blurred "
                           "background) when full quality would finish after the frame's deadline "
                           "(nnsegment's latency budget)",
                           DEFAULT_PROP_ADAPTIVE, playing));
  g_object_class_install_property(
      gobject_class, PROP_STATS,
      g_param_spec_boxed(
          "stats", "Statistics",
          "Compositing time p50/p99 ms, frames, frames without a mask, background-pad frames received, "
          "frames composited without a background frame (mode=video), frames composited on the fast path "
          "(adaptive), frames composited on a real-time streaming thread alone (serial-frames), CPU ms per frame",
          GST_TYPE_STRUCTURE, static_cast<GParamFlags>(G_PARAM_READABLE | G_PARAM_STATIC_STRINGS)));

  gst_element_class_set_static_metadata(
      element_class, "nnpipe background replacement", "Filter/Effect/Video",
      "Blurs or replaces the background behind people using nnsegment's mask", "nnpipe developers");
  gst_element_class_add_static_pad_template(element_class, &sink_template);
  gst_element_class_add_static_pad_template(element_class, &src_template);
  gst_element_class_add_static_pad_template(element_class, &background_template);

  element_class->change_state = GST_DEBUG_FUNCPTR(gst_nn_background_change_state);
  element_class->request_new_pad = GST_DEBUG_FUNCPTR(gst_nn_background_request_new_pad);
  element_class->release_pad = GST_DEBUG_FUNCPTR(gst_nn_background_release_pad);
  trans_class->start = GST_DEBUG_FUNCPTR(gst_nn_background_start);
  trans_class->sink_event = GST_DEBUG_FUNCPTR(gst_nn_background_sink_event);
  trans_class->transform_caps = GST_DEBUG_FUNCPTR(gst_nn_background_transform_caps);
  trans_class->passthrough_on_same_caps = FALSE;
  filter_class->set_info = GST_DEBUG_FUNCPTR(gst_nn_background_set_info);
  filter_class->transform_frame_ip = GST_DEBUG_FUNCPTR(gst_nn_background_transform_frame_ip);

  gst_type_mark_as_plugin_api(GST_TYPE_NN_BACKGROUND_MODE, static_cast<GstPluginAPIFlags>(0));
}

static void gst_nn_background_init(GstNnBackground* self) {
  self->mode = DEFAULT_PROP_MODE;
  self->blur_strength = DEFAULT_PROP_BLUR_STRENGTH;
  self->color = DEFAULT_PROP_COLOR;
  self->location = nullptr;
  self->refine = DEFAULT_PROP_REFINE;
  self->feather = DEFAULT_PROP_FEATHER;
  self->adaptive = DEFAULT_PROP_ADAPTIVE;
  self->state = new BackgroundState();
  self->state->input = std::make_unique<nn::plugins::BackgroundInput>(GST_ELEMENT(self));
}

// BackgroundInput: the newest-frame slot behind nnbackground's "background" pad, and the
// pacing that keeps a non-live background source from racing ahead. See the header.
#include "background_input.h"

GST_DEBUG_CATEGORY_STATIC(nn_background_input_debug);
#define GST_CAT_DEFAULT nn_background_input_debug

namespace nn::plugins {

namespace {

bool supported_format(GstVideoFormat f) {
  switch (f) {
    case GST_VIDEO_FORMAT_RGBA:
    case GST_VIDEO_FORMAT_BGRA:
    case GST_VIDEO_FORMAT_RGBx:
    case GST_VIDEO_FORMAT_BGRx:
    case GST_VIDEO_FORMAT_RGB:
    case GST_VIDEO_FORMAT_BGR:
      return true;
    default:
      return false;
  }
}

BackgroundInput* from_pad(GstPad* pad) {
  return static_cast<BackgroundInput*>(gst_pad_get_element_private(pad));
}

}  // namespace

BackgroundInput::BackgroundInput(GstElement* element) : element_(element) {
  // Shares the element's category name, so GST_DEBUG=nnbackground:6 shows both.
  if (!nn_background_input_debug)
    GST_DEBUG_CATEGORY_INIT(nn_background_input_debug, "nnbackground", 0, "nnpipe background replacement");
  g_mutex_init(&lock_);
  g_cond_init(&cond_);
  gst_video_info_init(&newest_info_);
  gst_video_info_init(&caps_info_);
  gst_segment_init(&segment_, GST_FORMAT_TIME);
}

GstPad* BackgroundInput::add_pad(GstPadTemplate* templ) {
  if (pad_) return nullptr;
  GstPad* pad = gst_pad_new_from_template(templ, "background");
  gst_pad_set_element_private(pad, this);
  gst_pad_set_chain_function(pad, GST_DEBUG_FUNCPTR(BackgroundInput::chain));
  gst_pad_set_event_function(pad, GST_DEBUG_FUNCPTR(BackgroundInput::event));
  gst_pad_set_query_function(pad, GST_DEBUG_FUNCPTR(BackgroundInput::query));
  gst_pad_set_activatemode_function(pad, GST_DEBUG_FUNCPTR(BackgroundInput::activate_mode));
  pad_ = pad;
  // Activated here when the element is already running.
  if (!gst_element_add_pad(element_, pad)) {
    pad_ = nullptr;
    return nullptr;
  }
  return pad;
}

void BackgroundInput::remove_pad(GstPad* pad) {
  if (pad != pad_ || !pad_) return;
  gst_pad_set_active(pad, FALSE);  // wakes and waits out a background thread inside
  gst_element_remove_pad(element_, pad);
  pad_ = nullptr;
}

BackgroundInput::~BackgroundInput() {
  // The element is finalizing: its pads are gone, no thread can be in here.
  if (newest_) gst_buffer_unref(newest_);
  g_cond_clear(&cond_);
  g_mutex_clear(&lock_);
}

GstBuffer* BackgroundInput::on_main_frame(GstClockTime running_time, bool take, GstVideoInfo* info) {
  g_mutex_lock(&lock_);
  if (GST_CLOCK_TIME_IS_VALID(running_time)) {
    main_time_ = running_time;
    g_cond_broadcast(&cond_);
  }
  GstBuffer* b = nullptr;
  if (take && newest_) {
    b = gst_buffer_ref(newest_);
    *info = newest_info_;
  }
  g_mutex_unlock(&lock_);
  return b;
}

void BackgroundInput::on_main_flush() {
  g_mutex_lock(&lock_);
  main_time_ = GST_CLOCK_TIME_NONE;
  anchored_ = false;
  main_eos_ = false;
  g_cond_broadcast(&cond_);
  g_mutex_unlock(&lock_);
}

void BackgroundInput::on_main_eos() {
  g_mutex_lock(&lock_);
  main_eos_ = true;
  g_cond_broadcast(&cond_);
  g_mutex_unlock(&lock_);
}

void BackgroundInput::on_main_start() {
  on_main_flush();
}

void BackgroundInput::clear() {
  g_mutex_lock(&lock_);
  gst_clear_buffer(&newest_);
  received_ = 0;
  g_mutex_unlock(&lock_);
}

guint64 BackgroundInput::frames_received() const {
  g_mutex_lock(&lock_);
  const guint64 n = received_;
  g_mutex_unlock(&lock_);
  return n;
}

GstFlowReturn BackgroundInput::push_frame(GstBuffer* buffer) {
  g_mutex_lock(&lock_);
  if (flushing_) {
    g_mutex_unlock(&lock_);
    gst_buffer_unref(buffer);
    return GST_FLOW_FLUSHING;
  }
  if (main_eos_) {
    // Nothing will show this frame: tell the background source to stop.
    g_mutex_unlock(&lock_);
    gst_buffer_unref(buffer);
    return GST_FLOW_EOS;
  }
  if (!caps_valid_) {
    g_mutex_unlock(&lock_);
    gst_buffer_unref(buffer);
    GST_ELEMENT_ERROR(element_, CORE, NEGOTIATION, ("Background frame without caps"),
                      ("a buffer reached the background pad before a caps event"));
    return GST_FLOW_NOT_NEGOTIATED;
  }
  const GstClockTime ts = gst_segment_to_running_time(&segment_, GST_FORMAT_TIME, GST_BUFFER_PTS(buffer));
  const gint64 deadline = g_get_monotonic_time() + kMaxWaitUs;
  // The first frame goes in at once (the main stream has something to show); later ones
  // when the main stream has caught up with them.
  while (newest_ && GST_CLOCK_TIME_IS_VALID(ts) && !flushing_ && !main_eos_) {
    if (GST_CLOCK_TIME_IS_VALID(main_time_)) {
      if (!anchored_) {
        offset_ = GST_CLOCK_DIFF(main_time_, ts);
        anchored_ = true;
        GST_DEBUG_OBJECT(pad_, "anchored: background %" GST_TIME_FORMAT " at main %" GST_TIME_FORMAT,
                         GST_TIME_ARGS(ts), GST_TIME_ARGS(main_time_));
        break;
      }
      if (static_cast<GstClockTimeDiff>(ts) - offset_ <= static_cast<GstClockTimeDiff>(main_time_)) break;
    }
    if (!g_cond_wait_until(&cond_, &lock_, deadline)) {
      GST_LOG_OBJECT(pad_, "main stream did not advance within %" G_GINT64_FORMAT " ms: taking the frame",
                     kMaxWaitUs / 1000);
      break;
    }
  }
  if (flushing_) {
    g_mutex_unlock(&lock_);
    gst_buffer_unref(buffer);
    return GST_FLOW_FLUSHING;
  }
  if (newest_) gst_buffer_unref(newest_);
  newest_ = buffer;
  newest_info_ = caps_info_;
  received_++;
  g_mutex_unlock(&lock_);
  return GST_FLOW_OK;
}

GstFlowReturn BackgroundInput::chain(GstPad* pad, GstObject* /*parent*/, GstBuffer* buffer) {
  return from_pad(pad)->push_frame(buffer);
}

bool BackgroundInput::set_caps(GstCaps* caps) {
  GstVideoInfo info;
  if (!gst_video_info_from_caps(&info, caps) || !supported_format(GST_VIDEO_INFO_FORMAT(&info))) {
    GST_WARNING_OBJECT(pad_, "refusing background caps %" GST_PTR_FORMAT, caps);
    return false;
  }
  g_mutex_lock(&lock_);
  caps_info_ = info;
  caps_valid_ = true;
  g_mutex_unlock(&lock_);
  return true;
}

// Events end here: nothing from the background branch goes downstream (its EOS must not
// end the main stream, its segment is not the main stream's).
gboolean BackgroundInput::event(GstPad* pad, GstObject* /*parent*/, GstEvent* event) {
  BackgroundInput* self = from_pad(pad);
  gboolean ret = TRUE;
  switch (GST_EVENT_TYPE(event)) {
    case GST_EVENT_CAPS: {
      GstCaps* caps = nullptr;
      gst_event_parse_caps(event, &caps);
      ret = self->set_caps(caps);
      break;
    }
    case GST_EVENT_SEGMENT: {
      const GstSegment* seg = nullptr;
      gst_event_parse_segment(event, &seg);
      g_mutex_lock(&self->lock_);
      if (seg->format == GST_FORMAT_TIME)
        gst_segment_copy_into(seg, &self->segment_);
      else
        gst_segment_init(&self->segment_, GST_FORMAT_TIME);  // no times: no pacing
      g_mutex_unlock(&self->lock_);
      break;
    }
    case GST_EVENT_FLUSH_START:
      g_mutex_lock(&self->lock_);
      self->flushing_ = true;
      g_cond_broadcast(&self->cond_);
      g_mutex_unlock(&self->lock_);
      break;
    case GST_EVENT_FLUSH_STOP:
      g_mutex_lock(&self->lock_);
      self->flushing_ = false;
      self->anchored_ = false;
      self->eos_ = false;
      gst_segment_init(&self->segment_, GST_FORMAT_TIME);
      g_mutex_unlock(&self->lock_);
      break;
    case GST_EVENT_STREAM_START:
      g_mutex_lock(&self->lock_);
      self->eos_ = false;
      g_mutex_unlock(&self->lock_);
      break;
    case GST_EVENT_EOS:
      g_mutex_lock(&self->lock_);
      self->eos_ = true;
      GST_DEBUG_OBJECT(pad, "background ended: keeping its last frame (%s)", self->newest_ ? "one" : "none");
      g_mutex_unlock(&self->lock_);
      break;
    default:
      break;
  }
  gst_event_unref(event);
  return ret;
}

gboolean BackgroundInput::query(GstPad* pad, GstObject* parent, GstQuery* query) {
  switch (GST_QUERY_TYPE(query)) {
    case GST_QUERY_ALLOCATION:
      // Not forwarded: downstream allocates for the main stream's caps, not these.
      return FALSE;
    case GST_QUERY_CAPS: {
      // Any size and any of our formats, whatever the main stream negotiated.
      GstCaps* filter = nullptr;
      gst_query_parse_caps(query, &filter);
      GstCaps* templ = gst_pad_get_pad_template_caps(pad);
      GstCaps* result =
          filter ? gst_caps_intersect_full(filter, templ, GST_CAPS_INTERSECT_FIRST) : gst_caps_ref(templ);
      gst_caps_unref(templ);
      gst_query_set_caps_result(query, result);
      gst_caps_unref(result);
      return TRUE;
    }
    case GST_QUERY_ACCEPT_CAPS: {
      GstCaps* caps = nullptr;
      gst_query_parse_accept_caps(query, &caps);
      GstCaps* templ = gst_pad_get_pad_template_caps(pad);
      gst_query_set_accept_caps_result(query, gst_caps_is_subset(caps, templ));
      gst_caps_unref(templ);
      return TRUE;
    }
    default:
      // Nothing else concerns the background branch (and nothing may reach the main src pad).
      (void)parent;
      return FALSE;
  }
}

gboolean BackgroundInput::activate_mode(GstPad* pad, GstObject* /*parent*/, GstPadMode mode,
                                        gboolean active) {
  if (mode != GST_PAD_MODE_PUSH) return FALSE;
  BackgroundInput* self = from_pad(pad);
  g_mutex_lock(&self->lock_);
  // Deactivation waits for the streaming thread: wake it first.
  self->flushing_ = !active;
  if (active) {
    self->eos_ = false;
    self->anchored_ = false;
    self->caps_valid_ = false;
    gst_segment_init(&self->segment_, GST_FORMAT_TIME);
  }
  g_cond_broadcast(&self->cond_);
  g_mutex_unlock(&self->lock_);
  return TRUE;
}

}  // namespace nn::plugins

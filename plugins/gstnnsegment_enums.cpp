// The GTypes of nnsegment's enum properties (delegate, over-budget, output-mode, resize,
// thread-priority, the last shared with nndenoise), declared in gstnnsegment.h.
#include "gstnnsegment.h"
#include "thread_priority.h"

static_assert(GST_NN_THREAD_PRIORITY_NORMAL == static_cast<int>(nn::plugins::ThreadPriority::kNormal) &&
              GST_NN_THREAD_PRIORITY_LOW_LATENCY == static_cast<int>(nn::plugins::ThreadPriority::kLowLatency) &&
              GST_NN_THREAD_PRIORITY_REALTIME == static_cast<int>(nn::plugins::ThreadPriority::kRealtime));

GType gst_nn_delegate_get_type(void) {
  static GType type = 0;
  static const GEnumValue values[] = {
      {GST_NN_DELEGATE_AUTO,
       "Every available delegate, best first (skips CPU-type Vulkan devices such as lavapipe)", "auto"},
      {GST_NN_DELEGATE_CPU, "CPU (XNNPACK, reference kernels for the rest)", "cpu"},
      {GST_NN_DELEGATE_VULKAN, "Vulkan compute, CPU for the rest", "vulkan"},
      {GST_NN_DELEGATE_NNAPI, "Android NNAPI, CPU for the rest", "nnapi"},
      {GST_NN_DELEGATE_REFERENCE, "Plain C++ reference kernels only", "reference"},
      {0, nullptr, nullptr}};
  if (g_once_init_enter(&type)) g_once_init_leave(&type, g_enum_register_static("GstNnDelegate", values));
  return type;
}

GType gst_nn_over_budget_get_type(void) {
  static GType type = 0;
  static const GEnumValue values[] = {
      {GST_NN_OVER_BUDGET_REUSE_MASK, "Send the frame with the newest finished mask", "reuse-mask"},
      {GST_NN_OVER_BUDGET_DROP_FRAME, "Drop the frame", "drop-frame"},
      {0, nullptr, nullptr}};
  if (g_once_init_enter(&type)) g_once_init_leave(&type, g_enum_register_static("GstNnOverBudget", values));
  return type;
}

GType gst_nn_segment_output_mode_get_type(void) {
  static GType type = 0;
  static const GEnumValue values[] = {
      {GST_NN_SEGMENT_OUTPUT_META, "Attach the mask as GstNnMaskMeta only", "meta"},
      {GST_NN_SEGMENT_OUTPUT_ALPHA, "Also write the mask into the alpha channel (RGBA/BGRA)", "alpha"},
      {GST_NN_SEGMENT_OUTPUT_MASK, "Output the mask itself: GRAY8 video at the frame's size, meta attached",
       "mask"},
      {0, nullptr, nullptr}};
  if (g_once_init_enter(&type))
    g_once_init_leave(&type, g_enum_register_static("GstNnSegmentOutputMode", values));
  return type;
}

GType gst_nn_segment_resize_get_type(void) {
  static GType type = 0;
  static const GEnumValue values[] = {
      {GST_NN_SEGMENT_RESIZE_STRETCH, "Stretch the frame to the model's input (selfie models expect this)",
       "stretch"},
      {GST_NN_SEGMENT_RESIZE_LETTERBOX, "Keep the aspect ratio, pad with black (the meta's rect says where)",
       "letterbox"},
      {0, nullptr, nullptr}};
  if (g_once_init_enter(&type))
    g_once_init_leave(&type, g_enum_register_static("GstNnSegmentResize", values));
  return type;
}

GType gst_nn_thread_priority_get_type(void) {
  static GType type = 0;
  static const GEnumValue values[] = {
      {GST_NN_THREAD_PRIORITY_NORMAL, "Leave the streaming thread's scheduling alone", "normal"},
      {GST_NN_THREAD_PRIORITY_LOW_LATENCY,
       "A short scheduling slice (Linux >= 6.12): same CPU share, runs soon after it wakes", "low-latency"},
      {GST_NN_THREAD_PRIORITY_REALTIME,
       "Real-time round-robin priority 10 where the process may (root, CAP_SYS_NICE, RLIMIT_RTPRIO), "
       "else low-latency",
       "realtime"},
      {0, nullptr, nullptr}};
  if (g_once_init_enter(&type))
    g_once_init_leave(&type, g_enum_register_static("GstNnThreadPriority", values));
  return type;
}

GType gst_nn_channel_order_get_type(void) {
  static GType type = 0;
  static const GEnumValue values[] = {
      {GST_NN_CHANNEL_ORDER_AUTO, "As the model's metadata says (RGB when it says nothing)", "auto"},
      {GST_NN_CHANNEL_ORDER_RGB, "Red, green, blue", "rgb"},
      {GST_NN_CHANNEL_ORDER_BGR, "Blue, green, red", "bgr"},
      {0, nullptr, nullptr}};
  if (g_once_init_enter(&type)) g_once_init_leave(&type, g_enum_register_static("GstNnChannelOrder", values));
  return type;
}

GType gst_nn_segment_sampling_get_type(void) {
  static GType type = 0;
  static const GEnumValue values[] = {
      {GST_NN_SEGMENT_SAMPLING_AUTO, "The model's own: mediapipe for MediaPipe's selfie models, else area", "auto"},
      {GST_NN_SEGMENT_SAMPLING_AREA, "Average the frame pixels each input pixel covers (no aliasing)", "area"},
      {GST_NN_SEGMENT_SAMPLING_MEDIAPIPE,
       "MediaPipe's ImageToTensor: bilinear at corner-aligned points, as its runtime feeds the model", "mediapipe"},
      {0, nullptr, nullptr}};
  if (g_once_init_enter(&type)) g_once_init_leave(&type, g_enum_register_static("GstNnSegmentSampling", values));
  return type;
}

std::vector<std::string> nn::plugins::delegate_names(GstNnDelegate delegate) {
  switch (delegate) {
    case GST_NN_DELEGATE_CPU:
      return {"cpu"};
    case GST_NN_DELEGATE_VULKAN:
      return {"vulkan"};
    case GST_NN_DELEGATE_NNAPI:
      return {"nnapi"};
    case GST_NN_DELEGATE_REFERENCE:
      return {"reference"};
    case GST_NN_DELEGATE_AUTO:
      break;
  }
  return {"auto"};
}

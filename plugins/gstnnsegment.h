/* nnsegment: person segmentation under a latency budget. See gstnnsegment.cpp. */
#pragma once

#include <gst/gst.h>
#include <gst/video/gstvideofilter.h>
#include <gst/video/video.h>

#include <string>
#include <vector>

namespace nn::plugins {
struct SegmentState;
}

G_BEGIN_DECLS

#define GST_TYPE_NN_SEGMENT (gst_nn_segment_get_type())
G_DECLARE_FINAL_TYPE(GstNnSegment, gst_nn_segment, GST, NN_SEGMENT, GstVideoFilter)

typedef enum {
  GST_NN_DELEGATE_AUTO,
  GST_NN_DELEGATE_CPU,
  GST_NN_DELEGATE_VULKAN,
  GST_NN_DELEGATE_NNAPI,
  GST_NN_DELEGATE_REFERENCE,
} GstNnDelegate;

typedef enum {
  GST_NN_OVER_BUDGET_REUSE_MASK,
  GST_NN_OVER_BUDGET_DROP_FRAME,
} GstNnOverBudget;

typedef enum {
  GST_NN_SEGMENT_OUTPUT_META,
  GST_NN_SEGMENT_OUTPUT_ALPHA,
  GST_NN_SEGMENT_OUTPUT_MASK,
} GstNnSegmentOutputMode;

typedef enum {
  GST_NN_SEGMENT_RESIZE_STRETCH,
  GST_NN_SEGMENT_RESIZE_LETTERBOX,
} GstNnSegmentResize;

/* How frames are resampled to the model input (auto: the model's own, from its metadata). */
typedef enum {
  GST_NN_SEGMENT_SAMPLING_AUTO,
  GST_NN_SEGMENT_SAMPLING_AREA,
  GST_NN_SEGMENT_SAMPLING_MEDIAPIPE,
} GstNnSegmentSampling;

/* The order of the colour channels the model reads (auto: the model's metadata). */
typedef enum {
  GST_NN_CHANNEL_ORDER_AUTO,
  GST_NN_CHANNEL_ORDER_RGB,
  GST_NN_CHANNEL_ORDER_BGR,
} GstNnChannelOrder;

/* The scheduling of the streaming thread that runs the element (thread_priority.h);
 * nndenoise's thread-priority property takes the same enum. */
typedef enum {
  GST_NN_THREAD_PRIORITY_NORMAL,
  GST_NN_THREAD_PRIORITY_LOW_LATENCY,
  GST_NN_THREAD_PRIORITY_REALTIME,
} GstNnThreadPriority;

#define GST_TYPE_NN_THREAD_PRIORITY (gst_nn_thread_priority_get_type())
GType gst_nn_thread_priority_get_type(void);
#define GST_TYPE_NN_DELEGATE (gst_nn_delegate_get_type())
GType gst_nn_delegate_get_type(void);
#define GST_TYPE_NN_OVER_BUDGET (gst_nn_over_budget_get_type())
GType gst_nn_over_budget_get_type(void);
#define GST_TYPE_NN_SEGMENT_OUTPUT_MODE (gst_nn_segment_output_mode_get_type())
GType gst_nn_segment_output_mode_get_type(void);
#define GST_TYPE_NN_SEGMENT_RESIZE (gst_nn_segment_resize_get_type())
GType gst_nn_segment_resize_get_type(void);
#define GST_TYPE_NN_SEGMENT_SAMPLING (gst_nn_segment_sampling_get_type())
GType gst_nn_segment_sampling_get_type(void);
#define GST_TYPE_NN_CHANNEL_ORDER (gst_nn_channel_order_get_type())
GType gst_nn_channel_order_get_type(void);

/* A custom upstream query nnsegment answers: nnbackground asks it to tell "no mask yet"
 * from "no nnsegment upstream". */
#define GST_NN_SEGMENT_PRESENT_QUERY "nn-segment-present"

struct _GstNnSegment {
  GstVideoFilter parent;

  /* Properties: written by the application thread, read by the streaming thread, both
   * under GST_OBJECT_LOCK. */
  gchar* model;
  GstNnDelegate delegate;
  gint threads;
  guint latency_budget_ms;
  GstNnOverBudget over_budget;
  gdouble threshold;
  gdouble smoothing;
  GstNnSegmentOutputMode output_mode;
  GstNnSegmentResize resize;
  guint stats_interval_ms;
  GstNnThreadPriority thread_priority;
  gchar* classes;    /* NULL: the model's metadata */
  gchar* input_mean; /* NULL: the model's metadata */
  gchar* input_std;  /* NULL: the model's metadata */
  GstNnChannelOrder channel_order;
  GstNnSegmentSampling sampling;

  /* Everything else: the plain C++ side (engine session, mask, QoS and stats). */
  nn::plugins::SegmentState* state;
};

GST_ELEMENT_REGISTER_DECLARE(nnsegment);

G_END_DECLS

namespace nn::plugins {
// The delegate property (nnsegment, nndenoise) as the engine's delegate list.
std::vector<std::string> delegate_names(GstNnDelegate delegate);
}  // namespace nn::plugins

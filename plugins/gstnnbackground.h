/* nnbackground: replaces the background behind people, from GstNnMaskMeta. See gstnnbackground.cpp. */
#pragma once

#include <gst/gst.h>
#include <gst/video/gstvideofilter.h>
#include <gst/video/video.h>

namespace nn::plugins {
struct BackgroundState;
}

G_BEGIN_DECLS

#define GST_TYPE_NN_BACKGROUND (gst_nn_background_get_type())
G_DECLARE_FINAL_TYPE(GstNnBackground, gst_nn_background, GST, NN_BACKGROUND, GstVideoFilter)

typedef enum {
  GST_NN_BACKGROUND_MODE_BLUR,
  GST_NN_BACKGROUND_MODE_COLOR,
  GST_NN_BACKGROUND_MODE_IMAGE,
  GST_NN_BACKGROUND_MODE_TRANSPARENT,
  GST_NN_BACKGROUND_MODE_VIDEO,
} GstNnBackgroundMode;

#define GST_TYPE_NN_BACKGROUND_MODE (gst_nn_background_mode_get_type())
GType gst_nn_background_mode_get_type(void);

struct _GstNnBackground {
  GstVideoFilter parent;

  /* Properties, under GST_OBJECT_LOCK. */
  GstNnBackgroundMode mode;
  gdouble blur_strength;
  guint color;
  gchar* location;
  gboolean refine;
  gdouble feather;
  gboolean adaptive;

  nn::plugins::BackgroundState* state;
};

GST_ELEMENT_REGISTER_DECLARE(nnbackground);

G_END_DECLS

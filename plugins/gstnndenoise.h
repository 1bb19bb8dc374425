/* nndenoise: streaming noise suppression under a latency budget. See gstnndenoise.cpp. */
#pragma once

#include <gst/audio/audio.h>
#include <gst/audio/gstaudiofilter.h>
#include <gst/gst.h>

#include "gstnnsegment.h" /* GstNnDelegate, shared by the nnpipe elements */

namespace nn::plugins {
struct DenoiseState;
}

G_BEGIN_DECLS

#define GST_TYPE_NN_DENOISE (gst_nn_denoise_get_type())
G_DECLARE_FINAL_TYPE(GstNnDenoise, gst_nn_denoise, GST, NN_DENOISE, GstAudioFilter)

struct _GstNnDenoise {
  GstAudioFilter parent;

  /* Properties: written by the application thread, read by the streaming thread, both
   * under GST_OBJECT_LOCK. */
  gchar* model;
  GstNnDelegate delegate;
  gint threads;
  guint latency_budget_ms;
  gdouble attenuation_limit_db;
  gboolean bypass;
  guint stats_interval_ms;
  GstNnThreadPriority thread_priority;

  /* Everything else: the plain C++ side (model, DenoiseStream, timestamps, stats). */
  nn::plugins::DenoiseState* state;
};

GST_ELEMENT_REGISTER_DECLARE(nndenoise);

G_END_DECLS

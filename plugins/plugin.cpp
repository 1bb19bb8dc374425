// The nnpipe GStreamer plugin: registers every element.
#include <gst/gst.h>

#include "gstnnbackground.h"
#include "gstnndenoise.h"
#include "gstnnmaskmeta.h"
#include "gstnnsegment.h"

#ifndef PACKAGE
#define PACKAGE "nnpipe"
#endif
#ifndef NN_VERSION
#define NN_VERSION "0.1.0"
#endif

static gboolean plugin_init(GstPlugin* plugin) {
  // Register the meta up front so applications can look it up by name once loaded.
  gst_nn_mask_meta_get_info();
  gboolean ok = FALSE;
  ok |= GST_ELEMENT_REGISTER(nnsegment, plugin);
  ok |= GST_ELEMENT_REGISTER(nnbackground, plugin);
  ok |= GST_ELEMENT_REGISTER(nndenoise, plugin);
  return ok;
}

GST_PLUGIN_DEFINE(GST_VERSION_MAJOR, GST_VERSION_MINOR, nnpipe, "nnpipe: on-device inference elements",
                  plugin_init, NN_VERSION, "MIT/X11", "nnpipe", "https://github.com/nnpipe/nnpipe")

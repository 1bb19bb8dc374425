/* GstNnMaskMeta: a segmentation mask riding on a video buffer.
 *
 * nnsegment attaches it; nnbackground (and any application) reads it. The mask stays at
 * the model's resolution: consumers upsample it to the frame themselves, so a pipeline
 * that only needs, say, a person-present flag never pays for a full-resolution mask.
 *
 * The mask is a row-major single-channel image of width x height values (float 0..1 or
 * uint8 0..255: 255 = foreground). It covers the rectangle (rect_x, rect_y, rect_w,
 * rect_h) of a frame of frame_width x frame_height pixels. The rectangle is in frame
 * pixels and may reach outside the frame (letterboxing): mask column u maps to frame
 * x = rect_x + (u + 0.5) * rect_w / width - 0.5, likewise for rows.
 *
 * age counts frames: 0 when the mask was computed from this very buffer, n when it was
 * computed n frames earlier and reused because inference had not finished in time.
 *
 * The data is immutable and shared (a GBytes): copying the meta to another buffer costs
 * a reference, not a copy.
 *
 * Optionally the meta also carries the frame itself, shrunk (the "small frame", set with
 * gst_nn_mask_meta_set_small_frame): nnsegment shrinks every frame on its way to the model
 * and keeps the image a compositor works on (nnbackground's guided filter and blur run at
 * about 480 px wide), so the frame is read once for both. small_format is
 * GST_VIDEO_FORMAT_UNKNOWN when there is none. It is the picture nnsegment saw (elements
 * that draw into the frame afterwards are not in it), in the frame's own packed format
 * (RGBA, BGRA, RGBx, BGRx, RGB or BGR; for I420 and NV12 frames packed 4:4:4 YUV, v308,
 * each plane shrunk on its own), small_width x small_height pixels covering the whole
 * frame, made by area averaging (nnpipe's make_work_image: the frame's width divided by
 * ceil(width / 480), the height by the same factor). A consumer checks the format and
 * size against what it needs and shrinks the frame itself otherwise. Immutable and shared
 * like the mask; copies keep it, a scale keeps it (it still shows the frame, at a size that
 * no longer follows the rule above).
 *
 * Applications: link the small static library nnmaskmeta (or compile gstnnmaskmeta.cpp)
 * and use the functions below. Registration looks the API type and meta info up by name
 * first, so an application and the loaded nnpipe plugin share one registration.
 */
#pragma once

#include <gst/gst.h>
#include <gst/video/video.h>

G_BEGIN_DECLS

typedef enum {
  GST_NN_MASK_FORMAT_FLOAT32 = 0, /* gfloat, 0.0 = background .. 1.0 = foreground */
  GST_NN_MASK_FORMAT_UINT8 = 1,   /* guint8, 0 = background .. 255 = foreground */
} GstNnMaskFormat;

#define GST_NN_MASK_META_API_TYPE (gst_nn_mask_meta_api_get_type())
#define GST_NN_MASK_META_INFO (gst_nn_mask_meta_get_info())

typedef struct _GstNnMaskMeta GstNnMaskMeta;

struct _GstNnMaskMeta {
  GstMeta meta;

  GstNnMaskFormat format;
  guint width;  /* mask columns */
  guint height; /* mask rows */
  gsize stride; /* bytes from one mask row to the next */
  GBytes* data; /* at least stride * height bytes; immutable, shared */

  /* Where the mask sits in frame coordinates (pixels of a frame_width x frame_height
   * frame). Transforms that scale the frame (videoscale) scale these too. */
  guint frame_width;
  guint frame_height;
  gdouble rect_x;
  gdouble rect_y;
  gdouble rect_w;
  gdouble rect_h;

  guint age;         /* frames between the buffer and the frame the mask came from */
  guint64 source_id; /* nnsegment's sequence number of the frame the mask came from */

  /* g_get_monotonic_time() (us) by which the frame should have left the compositing
   * downstream: nnsegment's latency budget counted from the frame's arrival. A compositor
   * may take a cheaper path when it would finish later (nnbackground adaptive=true).
   * 0: no deadline. */
  gint64 deadline_us;

  /* The small frame (see above); NULL small_data and GST_VIDEO_FORMAT_UNKNOWN when absent.
   * Added after the fields above, which keep their places. */
  GstVideoFormat small_format;
  guint small_width;
  guint small_height;
  gsize small_stride; /* bytes from one row to the next */
  GBytes* small_data; /* at least small_stride * small_height bytes; immutable, shared */
};

GType gst_nn_mask_meta_api_get_type(void);
const GstMetaInfo* gst_nn_mask_meta_get_info(void);

/* Attaches a mask. data is referenced, not copied; stride * height must fit in it.
 * Returns NULL (and logs a critical) on inconsistent arguments. */
GstNnMaskMeta* gst_buffer_add_nn_mask_meta(GstBuffer* buffer, GstNnMaskFormat format, guint width,
                                           guint height, gsize stride, GBytes* data, guint frame_width,
                                           guint frame_height, gdouble rect_x, gdouble rect_y, gdouble rect_w,
                                           gdouble rect_h, guint age);

/* Attaches the small frame (data referenced, not copied). FALSE (and a critical) on
 * inconsistent arguments or a format that is not packed 8-bit RGB; FALSE without a message
 * when the registered meta is an older, smaller one (an application built against a header
 * without these fields registered it first): consumers then shrink the frame themselves. */
gboolean gst_nn_mask_meta_set_small_frame(GstNnMaskMeta* meta, GstVideoFormat format, guint width, guint height,
                                          gsize stride, GBytes* data);

/* The small frame's data, or NULL when the meta has none (or is an older, smaller
 * registration without the fields: read them only after this returned non-NULL). */
GBytes* gst_nn_mask_meta_get_small_frame(const GstNnMaskMeta* meta);

/* The buffer's mask meta, or NULL. */
GstNnMaskMeta* gst_buffer_get_nn_mask_meta(GstBuffer* buffer);

/* Pointer to the first value of mask row `row` (NULL when row is out of range). */
gconstpointer gst_nn_mask_meta_get_row(const GstNnMaskMeta* meta, guint row);

/* The mask value at mask pixel (x, y) as 0.0..1.0 (0 outside the mask). */
gfloat gst_nn_mask_meta_get_value(const GstNnMaskMeta* meta, guint x, guint y);

/* Samples the mask at frame pixel (fx, fy) (bilinear; 0 outside the rect). When the frame
 * lies inside the rect (stretch or letterbox), mask cells that see no frame pixel (the
 * letterbox padding) are never read: the frame's border cells repeat, as nnbackground does. */
gfloat gst_nn_mask_meta_sample_frame(const GstNnMaskMeta* meta, gdouble fx, gdouble fy);

/* Upstream custom event (GST_EVENT_CUSTOM_UPSTREAM) a compositor downstream of nnsegment
 * sends to say how long it takes per frame: field "ms" (gdouble, its recent worst case, wall
 * time). nnsegment takes it out of its latency budget, so the budget bounds the latency
 * of segmentation and compositing together. nnbackground sends it every few frames. */
#define GST_NN_DOWNSTREAM_COST_EVENT "nn-downstream-cost"

G_END_DECLS

// GstNnMaskMeta implementation. See gstnnmaskmeta.h for the contract.
#include "gstnnmaskmeta.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace {

// Whether the registered meta has room for the small-frame fields: an application built
// against an older header may have registered a smaller one first (registration is shared
// by name).
bool small_frame_fits();

constexpr const char* kApiName = "GstNnMaskMetaAPI";
constexpr const char* kImplName = "GstNnMaskMeta";

gboolean mask_meta_init(GstMeta* meta, gpointer /*params*/, GstBuffer* /*buffer*/) {
  auto* m = reinterpret_cast<GstNnMaskMeta*>(meta);
  m->format = GST_NN_MASK_FORMAT_FLOAT32;
  m->width = m->height = 0;
  m->stride = 0;
  m->data = nullptr;
  m->frame_width = m->frame_height = 0;
  m->rect_x = m->rect_y = m->rect_w = m->rect_h = 0.0;
  m->age = 0;
  m->source_id = 0;
  m->deadline_us = 0;
  if (small_frame_fits()) {
    m->small_format = GST_VIDEO_FORMAT_UNKNOWN;
    m->small_width = m->small_height = 0;
    m->small_stride = 0;
    m->small_data = nullptr;
  }
  return TRUE;
}

void mask_meta_free(GstMeta* meta, GstBuffer* /*buffer*/) {
  auto* m = reinterpret_cast<GstNnMaskMeta*>(meta);
  if (m->data) g_bytes_unref(m->data);
  m->data = nullptr;
  if (small_frame_fits() && m->small_data) g_bytes_unref(m->small_data);
  if (small_frame_fits()) m->small_data = nullptr;
}

GstNnMaskMeta* copy_to(GstBuffer* dest, const GstNnMaskMeta* src) {
  GstNnMaskMeta* d = gst_buffer_add_nn_mask_meta(dest, src->format, src->width, src->height, src->stride,
                                                 src->data, src->frame_width, src->frame_height, src->rect_x,
                                                 src->rect_y, src->rect_w, src->rect_h, src->age);
  if (d) d->source_id = src->source_id, d->deadline_us = src->deadline_us;
  if (d && small_frame_fits() && src->small_data)
    gst_nn_mask_meta_set_small_frame(d, src->small_format, src->small_width, src->small_height, src->small_stride,
                                     src->small_data);
  return d;
}

// Full copies keep the meta; a scale (videoscale, videoconvertscale) rescales the mapping.
// Region copies and other transforms (crops, rotations) would need a remapped rect that
// the transform does not tell us in a form we can trust, so the meta is dropped there.
gboolean mask_meta_transform(GstBuffer* dest, GstMeta* meta, GstBuffer* /*buffer*/, GQuark type,
                             gpointer data) {
  const auto* src = reinterpret_cast<const GstNnMaskMeta*>(meta);
  if (GST_META_TRANSFORM_IS_COPY(type)) {
    const auto* copy = static_cast<const GstMetaTransformCopy*>(data);
    if (copy->region) return TRUE;  // partial copy: the mask no longer matches
    return copy_to(dest, src) != nullptr;
  }
  if (type == gst_video_meta_transform_scale_get_quark()) {
    const auto* scale = static_cast<const GstVideoMetaTransform*>(data);
    const guint in_w = GST_VIDEO_INFO_WIDTH(scale->in_info);
    const guint in_h = GST_VIDEO_INFO_HEIGHT(scale->in_info);
    const guint out_w = GST_VIDEO_INFO_WIDTH(scale->out_info);
    const guint out_h = GST_VIDEO_INFO_HEIGHT(scale->out_info);
    if (in_w == 0 || in_h == 0) return FALSE;
    GstNnMaskMeta* d = copy_to(dest, src);
    if (!d) return FALSE;
    const double sx = static_cast<double>(out_w) / in_w;
    const double sy = static_cast<double>(out_h) / in_h;
    d->frame_width = out_w;
    d->frame_height = out_h;
    d->rect_x = src->rect_x * sx;
    d->rect_y = src->rect_y * sy;
    d->rect_w = src->rect_w * sx;
    d->rect_h = src->rect_h * sy;
    return TRUE;
  }
  return FALSE;
}

}  // namespace

GType gst_nn_mask_meta_api_get_type(void) {
  static GType type = 0;
  if (g_once_init_enter(&type)) {
    // Another copy of this file (the plugin, or an application) may have registered it.
    GType t = g_type_from_name(kApiName);
    if (t == 0) {
      static const gchar* tags[] = {GST_META_TAG_VIDEO_STR, GST_META_TAG_VIDEO_SIZE_STR, nullptr};
      t = gst_meta_api_type_register(kApiName, tags);
    }
    g_once_init_leave(&type, t);
  }
  return type;
}

const GstMetaInfo* gst_nn_mask_meta_get_info(void) {
  static const GstMetaInfo* info = nullptr;
  if (g_once_init_enter(&info)) {
    const GstMetaInfo* i = gst_meta_get_info(kImplName);
    if (i == nullptr) {
      i = gst_meta_register(GST_NN_MASK_META_API_TYPE, kImplName, sizeof(GstNnMaskMeta), mask_meta_init,
                            mask_meta_free, mask_meta_transform);
    }
    g_once_init_leave(&info, i);
  }
  return info;
}

GstNnMaskMeta* gst_buffer_add_nn_mask_meta(GstBuffer* buffer, GstNnMaskFormat format, guint width,
                                           guint height, gsize stride, GBytes* data, guint frame_width,
                                           guint frame_height, gdouble rect_x, gdouble rect_y, gdouble rect_w,
                                           gdouble rect_h, guint age) {
  g_return_val_if_fail(GST_IS_BUFFER(buffer), nullptr);
  g_return_val_if_fail(data != nullptr, nullptr);
  g_return_val_if_fail(format == GST_NN_MASK_FORMAT_FLOAT32 || format == GST_NN_MASK_FORMAT_UINT8, nullptr);
  const gsize elem = format == GST_NN_MASK_FORMAT_FLOAT32 ? sizeof(gfloat) : 1;
  g_return_val_if_fail(width > 0 && height > 0, nullptr);
  g_return_val_if_fail(stride >= width * elem, nullptr);
  g_return_val_if_fail(g_bytes_get_size(data) >= stride * (height - 1) + width * elem, nullptr);
  g_return_val_if_fail(rect_w > 0 && rect_h > 0, nullptr);

  auto* m = reinterpret_cast<GstNnMaskMeta*>(gst_buffer_add_meta(buffer, GST_NN_MASK_META_INFO, nullptr));
  if (!m) return nullptr;
  m->format = format;
  m->width = width;
  m->height = height;
  m->stride = stride;
  m->data = g_bytes_ref(data);
  m->frame_width = frame_width;
  m->frame_height = frame_height;
  m->rect_x = rect_x;
  m->rect_y = rect_y;
  m->rect_w = rect_w;
  m->rect_h = rect_h;
  m->age = age;
  return m;
}

namespace {
bool small_frame_fits() {
  return GST_NN_MASK_META_INFO->size >= sizeof(GstNnMaskMeta);
}
}  // namespace

gboolean gst_nn_mask_meta_set_small_frame(GstNnMaskMeta* meta, GstVideoFormat format, guint width, guint height,
                                          gsize stride, GBytes* data) {
  g_return_val_if_fail(meta != nullptr && data != nullptr, FALSE);
  guint bpp = 0;
  switch (format) {
    case GST_VIDEO_FORMAT_RGBA:
    case GST_VIDEO_FORMAT_BGRA:
    case GST_VIDEO_FORMAT_RGBx:
    case GST_VIDEO_FORMAT_BGRx:
      bpp = 4;
      break;
    case GST_VIDEO_FORMAT_RGB:
    case GST_VIDEO_FORMAT_BGR:
    case GST_VIDEO_FORMAT_v308:  // planar YUV frames' small frame: packed 4:4:4
      bpp = 3;
      break;
    default:
      break;
  }
  g_return_val_if_fail(bpp > 0, FALSE);
  g_return_val_if_fail(width > 0 && height > 0 && stride >= static_cast<gsize>(width) * bpp, FALSE);
  g_return_val_if_fail(g_bytes_get_size(data) >= stride * (height - 1) + static_cast<gsize>(width) * bpp, FALSE);
  if (!small_frame_fits()) return FALSE;
  GBytes* old = meta->small_data;
  meta->small_data = g_bytes_ref(data);
  if (old) g_bytes_unref(old);
  meta->small_format = format;
  meta->small_width = width;
  meta->small_height = height;
  meta->small_stride = stride;
  return TRUE;
}

GBytes* gst_nn_mask_meta_get_small_frame(const GstNnMaskMeta* meta) {
  if (!meta || !small_frame_fits()) return nullptr;
  return meta->small_data;
}

GstNnMaskMeta* gst_buffer_get_nn_mask_meta(GstBuffer* buffer) {
  return reinterpret_cast<GstNnMaskMeta*>(gst_buffer_get_meta(buffer, GST_NN_MASK_META_API_TYPE));
}

gconstpointer gst_nn_mask_meta_get_row(const GstNnMaskMeta* meta, guint row) {
  g_return_val_if_fail(meta != nullptr && meta->data != nullptr, nullptr);
  if (row >= meta->height) return nullptr;
  const auto* base = static_cast<const guint8*>(g_bytes_get_data(meta->data, nullptr));
  return base + row * meta->stride;
}

gfloat gst_nn_mask_meta_get_value(const GstNnMaskMeta* meta, guint x, guint y) {
  if (!meta || x >= meta->width || y >= meta->height) return 0.f;
  gconstpointer row = gst_nn_mask_meta_get_row(meta, y);
  if (meta->format == GST_NN_MASK_FORMAT_FLOAT32) return static_cast<const gfloat*>(row)[x];
  return static_cast<const guint8*>(row)[x] / 255.f;
}

gfloat gst_nn_mask_meta_sample_frame(const GstNnMaskMeta* meta, gdouble fx, gdouble fy) {
  if (!meta || meta->rect_w <= 0 || meta->rect_h <= 0) return 0.f;
  if (fx < meta->rect_x || fy < meta->rect_y || fx >= meta->rect_x + meta->rect_w ||
      fy >= meta->rect_y + meta->rect_h)
    return 0.f;
  // Inverse of the mapping in the header: frame x -> continuous mask column.
  const double u = (fx - meta->rect_x + 0.5) * meta->width / meta->rect_w - 0.5;
  const double v = (fy - meta->rect_y + 0.5) * meta->height / meta->rect_h - 0.5;
  // Only cells that see the frame are read (letterbox padding never is): clamp to them.
  double u_lo = 0, u_hi = meta->width - 1.0, v_lo = 0, v_hi = meta->height - 1.0;
  if (meta->frame_width > 0 && meta->frame_height > 0 && meta->rect_x <= 0.5 && meta->rect_y <= 0.5 &&
      meta->rect_x + meta->rect_w >= meta->frame_width - 0.5 &&
      meta->rect_y + meta->rect_h >= meta->frame_height - 0.5) {
    const double kx = meta->width / meta->rect_w, ky = meta->height / meta->rect_h;
    u_lo = std::clamp(std::floor(-meta->rect_x * kx + 1e-6), 0.0, u_hi);
    v_lo = std::clamp(std::floor(-meta->rect_y * ky + 1e-6), 0.0, v_hi);
    u_hi = std::clamp(std::ceil((meta->frame_width - meta->rect_x) * kx - 1e-6) - 1.0, u_lo, u_hi);
    v_hi = std::clamp(std::ceil((meta->frame_height - meta->rect_y) * ky - 1e-6) - 1.0, v_lo, v_hi);
  }
  const double uc = std::clamp(u, u_lo, u_hi);
  const double vc = std::clamp(v, v_lo, v_hi);
  const guint x0 = static_cast<guint>(uc), y0 = static_cast<guint>(vc);
  const guint x1 = std::min(x0 + 1, meta->width - 1), y1 = std::min(y0 + 1, meta->height - 1);
  const float ax = static_cast<float>(uc - x0), ay = static_cast<float>(vc - y0);
  const float top =
      gst_nn_mask_meta_get_value(meta, x0, y0) * (1 - ax) + gst_nn_mask_meta_get_value(meta, x1, y0) * ax;
  const float bot =
      gst_nn_mask_meta_get_value(meta, x0, y1) * (1 - ax) + gst_nn_mask_meta_get_value(meta, x1, y1) * ax;
  return top * (1 - ay) + bot * ay;
}

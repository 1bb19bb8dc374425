// Segmenter: model loading, OpenCV pre-processing, async inference, mask post-processing.
#include "segmenter.h"
#include "imageops.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cctype>
#include <cstring>
#include <map>

#include <opencv2/core.hpp>
#include <opencv2/imgproc.hpp>

namespace nn::plugins {

namespace {

bool is_quant8(OperandType t) {
  return t == OperandType::TENSOR_QUANT8_ASYMM || t == OperandType::TENSOR_QUANT8_ASYMM_SIGNED;
}

// "15", "3,15", "0.5 0.5 0.5": numbers separated by commas and/or spaces.
Result<std::vector<float>> parse_numbers(const std::string& text, const char* what) {
  std::vector<float> values;
  size_t i = 0;
  while (i < text.size()) {
    if (text[i] == ',' || std::isspace(static_cast<unsigned char>(text[i]))) {
      ++i;
      continue;
    }
    const char* start = text.c_str() + i;
    char* end = nullptr;
    const float v = std::strtof(start, &end);
    if (end == start || !std::isfinite(v) ||
        (*end && *end != ',' && !std::isspace(static_cast<unsigned char>(*end))))
      return Status(StatusCode::kInvalidArgument, std::string(what) + ": \"" + text +
                                                      "\" is not a list of numbers (e.g. \"" +
                                                      (std::string(what) == "classes" ? "3,15" : "0.5,0.5,0.5") +
                                                      "\")");
    values.push_back(v);
    i = static_cast<size_t>(end - text.c_str());
  }
  return values;
}

// The classes whose probabilities make the foreground (see Segmenter::open).
Result<std::vector<int>> choose_foreground_classes(const Model& model, const SegmenterOptions& options) {
  const Operand& out = model.operands[model.outputs[0]];
  const int n = out.dims.size() == 4 ? static_cast<int>(out.dims[3]) : 1;
  const std::string shape = output_shape_in_model_layout(model, 0);
  std::string text = options.classes, source = "classes";
  if (text.empty()) {
    for (const char* key : {"foreground_classes", "onnx.foreground_classes", "person_class"}) {
      auto it = model.metadata.extra.find(key);
      if (it == model.metadata.extra.end()) continue;
      text = it->second;
      source = options.model_path + ": metadata " + key;
      break;
    }
  }
  if (text.empty()) {
    if (n == 1) return std::vector<int>{0};
    if (n == 2) return std::vector<int>{1};  // (background, foreground)
    return Status(StatusCode::kInvalidArgument,
                  options.model_path + ": output 0 " + shape + " scores " + std::to_string(n) +
                      " classes and the model does not say which are foreground: set classes= to the class "
                      "indices that count as foreground (e.g. classes=15, person in Pascal VOC's 21 classes)");
  }
  auto values = parse_numbers(text, source.c_str());
  if (!values.is_ok()) return values.status();
  if (values.value().empty())
    return Status(StatusCode::kInvalidArgument, source + ": \"" + text + "\" names no class");
  std::vector<int> classes;
  for (float v : values.value()) {
    const int c = static_cast<int>(v);
    if (static_cast<float>(c) != v || c < 0 || c >= n)
      return Status(StatusCode::kInvalidArgument,
                    source + ": " + (static_cast<float>(c) == v ? std::to_string(c) : std::to_string(v)) +
                        " is not a class of " + options.model_path + " (output 0 " + shape + " has classes 0.." +
                        std::to_string(n - 1) + ")");
    if (std::find(classes.begin(), classes.end(), c) == classes.end()) classes.push_back(c);
  }
  return classes;
}

}  // namespace

std::string output_shape_in_model_layout(const Model& model, size_t index) {
  const Operand& out = model.operands[model.outputs[index]];
  const auto& layouts = model.metadata.output_source_layouts;
  if (out.dims.size() == 4 && index < layouts.size() && layouts[index] == "NCHW") {
    const Dims d = out.dims;
    return dims_to_string(Dims{d[0], d[3], d[1], d[2]}) + " (NCHW)";
  }
  return dims_to_string(out.dims);
}

Result<std::shared_ptr<const Model>> Segmenter::load(const std::string& path) {
  auto loaded = load_model(path);
  if (!loaded.is_ok()) return loaded.status();
  std::shared_ptr<const Model> model = std::move(loaded).value();
  if (model->inputs.size() != 1)
    return Status(StatusCode::kInvalidModel,
                  path + ": expected one image input, model has " + std::to_string(model->inputs.size()));
  const Operand& in = model->operands[model->inputs[0]];
  if (in.dims.size() != 4 || in.dims[0] != 1 || in.dims[3] != 3 || in.dims[1] == 0 || in.dims[2] == 0)
    return Status(StatusCode::kInvalidModel,
                  path + ": input must be an NHWC image [1,H,W,3], got " + dims_to_string(in.dims));
  if (in.type != OperandType::TENSOR_FLOAT32 && !is_quant8(in.type))
    return Status(StatusCode::kInvalidModel, path + ": input type " +
                                                 std::string(operand_type_name(in.type)) +
                                                 " not supported (float32 or quant8)");
  if (model->outputs.empty()) return Status(StatusCode::kInvalidModel, path + ": model has no output");
  const Operand& out = model->operands[model->outputs[0]];
  const bool rank3 = out.dims.size() == 3, rank4 = out.dims.size() == 4;
  // A mask is a per-pixel map: a classifier's scores ([1,1000], or pooled to [1,C,1,1])
  // are not one, whatever their rank.
  if (!(rank3 || rank4) || out.dims[0] != 1 || out.dims[1] < 2 || out.dims[2] < 2 ||
      (rank4 && out.dims[3] == 0)) {
    const bool nchw = model->metadata.output_source_layouts.size() > 0 &&
                      model->metadata.output_source_layouts[0] == "NCHW";
    return Status(StatusCode::kInvalidModel,
                  path + ": output 0" + (out.name.empty() ? "" : " '" + out.name + "'") + " is " +
                      output_shape_in_model_layout(*model, 0) + ", which cannot be read as a mask: nnsegment " +
                      "needs a per-pixel map of " +
                      (nchw ? "[1,C,H,W] (NCHW) scores" : "[1,H,W,C] or [1,H,W] scores") +
                      " with H and W >= 2 (one channel: the foreground probability; C classes: "
                      "the classes property picks the foreground)");
  }
  if (out.type != OperandType::TENSOR_FLOAT32 && !is_quant8(out.type))
    return Status(StatusCode::kInvalidModel, path + ": output type " +
                                                 std::string(operand_type_name(out.type)) +
                                                 " not supported (float32 or quant8)");
  return model;
}

Result<std::unique_ptr<Segmenter>> Segmenter::open(const SegmenterOptions& options,
                                                   std::shared_ptr<const Model> model) {
  if (!model) {
    auto loaded = load(options.model_path);
    if (!loaded.is_ok()) return loaded.status();
    model = std::move(loaded).value();
  }
  std::unique_ptr<Segmenter> s(new Segmenter());
  s->model_ = model;
  const Operand& in = model->operands[model->inputs[0]];
  s->in_h_ = static_cast<int>(in.dims[1]);
  s->in_w_ = static_cast<int>(in.dims[2]);
  const Metadata& md = model->metadata;
  image::EncodingOverrides overrides;
  overrides.mean_name = "input-mean";
  overrides.std_name = "input-std";
  if (options.channel_order != ChannelOrder::kFromModel) overrides.bgr = options.channel_order == ChannelOrder::kBGR;
  if (!options.input_mean.empty()) {
    auto mean = parse_numbers(options.input_mean, "input-mean");
    if (!mean.is_ok()) return mean.status();
    overrides.mean = std::move(mean).value();
  }
  if (!options.input_std.empty()) {
    auto sd = parse_numbers(options.input_std, "input-std");
    if (!sd.is_ok()) return sd.status();
    overrides.std = std::move(sd).value();
  }
  auto encoding = image::InputEncoding::for_input(*model, 0, overrides);
  if (!encoding.is_ok()) return encoding.status().with_context(options.model_path);
  s->encoding_ = encoding.value();
  s->sampling_ = options.sampling.value_or(image::default_sampling(md));

  const Operand& out = model->operands[model->outputs[0]];
  s->out_h_ = static_cast<int>(out.dims[1]);
  s->out_w_ = static_cast<int>(out.dims[2]);
  s->out_c_ = out.dims.size() == 4 ? static_cast<int>(out.dims[3]) : 1;
  s->output_is_logits_ = md.output_meaning == "logits";
  auto classes = choose_foreground_classes(*model, options);
  if (!classes.is_ok()) return classes.status();
  s->foreground_.assign(s->out_c_, false);
  for (int c : classes.value()) s->foreground_[c] = true;

  SessionOptions so;
  so.delegates = options.delegates;
  so.threads = std::max(1, options.threads);
  so.strict_delegates = options.strict_delegates;
  so.budget_ms = options.budget_ms;
  auto session = Session::open(model, so);
  if (!session.is_ok()) return session.status().with_context(options.model_path);
  // Two warm-up inferences on a black frame, here (before data flows) rather than on the
  // first frames: the first run touches every arena page and starts the thread pool,
  // several times a steady run's latency, which made a live sink's QoS drop the frames
  // that followed. A model that cannot run fails here, naming the file.
  for (int i = 0; i < 2; ++i) {
    for (size_t k = 0; k < session.value()->num_inputs(); ++k)
      std::memset(session.value()->input_data(k), 0, session.value()->input_desc(k).byte_size());
    Status warm = session.value()->run();
    if (!warm.is_ok()) return warm.with_context(options.model_path + ": warm-up inference");
  }
  // The worker turns the output into the probability mask where the session wrote it
  // (read_mask): no copy of the output, and the conversion stays off the streaming thread.
  Segmenter* self = s.get();
  s->async_ = std::make_unique<AsyncSession>(
      std::move(session).value(), [self](const Session& session, AsyncResult& r) { return self->read_mask(session, r); });
  return s;
}

namespace {

void make_thumb(const cv::Mat& src, int gray_code, std::vector<uint8_t>* thumb) {
  if (!thumb) return;
  cv::Mat gray, small;
  if (gray_code >= 0)
    cv::cvtColor(src, gray, gray_code);
  else
    gray = src;
  cv::resize(gray, small, cv::Size(Segmenter::kThumbSize, Segmenter::kThumbSize), 0, 0, cv::INTER_AREA);
  thumb->assign(small.datastart, small.dataend);
}

}  // namespace

double thumb_difference(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b) {
  if (a.empty() || a.size() != b.size()) return 255.0;
  uint64_t sum = 0;
  for (size_t i = 0; i < a.size(); ++i) sum += static_cast<uint64_t>(std::abs(int(a[i]) - int(b[i])));
  return static_cast<double>(sum) / a.size();
}

Placement Segmenter::placement(int frame_w, int frame_h, ResizeMode resize) const {
  Placement p{0, 0, in_w_, in_h_};
  if (resize == ResizeMode::kStretch || frame_w <= 0 || frame_h <= 0) return p;
  const double s = std::min(static_cast<double>(in_w_) / frame_w, static_cast<double>(in_h_) / frame_h);
  p.width = std::clamp(static_cast<int>(std::lround(frame_w * s)), 1, in_w_);
  p.height = std::clamp(static_cast<int>(std::lround(frame_h * s)), 1, in_h_);
  p.x = (in_w_ - p.width) / 2;
  p.y = (in_h_ - p.height) / 2;
  return p;
}

FrameRect Segmenter::mask_rect(int frame_w, int frame_h, ResizeMode resize) const {
  // Input pixels [p.x, p.x + p.width) hold frame pixels [0, frame_w): the input's (and
  // the mask's, which sees the same field) left edge is p.x input pixels further left.
  const Placement p = placement(frame_w, frame_h, resize);
  const double sx = static_cast<double>(frame_w) / p.width, sy = static_cast<double>(frame_h) / p.height;
  return {-p.x * sx, -p.y * sy, in_w_ * sx, in_h_ * sy};
}

namespace {

// Frame plane -> model size with the segmenter's sampling. kArea takes shrink_area (block
// averages, then INTER_AREA: area averaging at a fraction of INTER_AREA's cost on big
// frames); kMediaPipe is nn::image's (MediaPipe's ImageToTensor warp).
Status resample_plane(const cv::Mat& src, cv::Mat& dst, int w, int h, image::Sampling sampling) {
  if (sampling == image::Sampling::kArea) {
    shrink_area(src, dst, cv::Size(w, h));
    return Status::ok();
  }
  dst.create(h, w, src.type());
  const image::ImageView view{src.data, src.cols, src.rows, src.step[0], src.channels()};
  return image::resample(view, sampling, w, h, dst.data, dst.step[0]);
}

}  // namespace

namespace {

bool packed_bgr(PixelLayout layout) {
  return layout == PixelLayout::kBGRA || layout == PixelLayout::kBGRx || layout == PixelLayout::kBGR;
}

}  // namespace

Result<ResampledFrame> Segmenter::resample(const FrameView& f, ResizeMode resize,
                                           std::vector<uint8_t>* thumb) const {
  if (f.width <= 0 || f.height <= 0 || !f.planes[0])
    return Status(StatusCode::kInvalidArgument, "empty frame");
  ResampledFrame r;
  r.layout = f.layout;
  r.kr = f.kr;
  r.kb = f.kb;
  r.full_range = f.full_range;
  // The frame goes into the part `pl` of the input; the padding around it is black.
  r.placement = placement(f.width, f.height, resize);
  const int content_w = r.placement.width, content_h = r.placement.height;
  switch (f.layout) {
    case PixelLayout::kRGBA:
    case PixelLayout::kBGRA:
    case PixelLayout::kRGBx:
    case PixelLayout::kBGRx:
    case PixelLayout::kRGB:
    case PixelLayout::kBGR: {
      const bool packed3 = f.layout == PixelLayout::kRGB || f.layout == PixelLayout::kBGR;
      const bool bgr_order = packed_bgr(f.layout);
      // Wrap the mapped frame: no copy.
      const cv::Mat frame(f.height, f.width, packed3 ? CV_8UC3 : CV_8UC4, const_cast<uint8_t*>(f.planes[0]),
                          static_cast<size_t>(f.strides[0]));
      if (Status st = resample_plane(frame, r.image[0], content_w, content_h, sampling_); !st.is_ok()) return st;
      make_thumb(r.image[0],
                 packed3 ? (bgr_order ? cv::COLOR_BGR2GRAY : cv::COLOR_RGB2GRAY)
                         : (bgr_order ? cv::COLOR_BGRA2GRAY : cv::COLOR_RGBA2GRAY),
                 thumb);
      break;
    }
    case PixelLayout::kI420:
    case PixelLayout::kNV12: {
      // Resample the planes separately straight to the model size (4:4:4 there); encode
      // converts to RGB with the stream's matrix: cheap at 256x256 and exact for odd sizes.
      const int cw = (f.width + 1) / 2, ch = (f.height + 1) / 2;
      const cv::Mat y_plane(f.height, f.width, CV_8UC1, const_cast<uint8_t*>(f.planes[0]),
                            static_cast<size_t>(f.strides[0]));
      if (Status st = resample_plane(y_plane, r.image[0], content_w, content_h, sampling_); !st.is_ok()) return st;
      make_thumb(r.image[0], -1, thumb);
      if (f.layout == PixelLayout::kI420) {
        if (!f.planes[1] || !f.planes[2])
          return Status(StatusCode::kInvalidArgument, "I420 frame without chroma");
        const cv::Mat u(ch, cw, CV_8UC1, const_cast<uint8_t*>(f.planes[1]),
                        static_cast<size_t>(f.strides[1]));
        const cv::Mat v(ch, cw, CV_8UC1, const_cast<uint8_t*>(f.planes[2]),
                        static_cast<size_t>(f.strides[2]));
        if (Status st = resample_plane(u, r.image[1], content_w, content_h, sampling_); !st.is_ok()) return st;
        if (Status st = resample_plane(v, r.image[2], content_w, content_h, sampling_); !st.is_ok()) return st;
      } else {
        if (!f.planes[1]) return Status(StatusCode::kInvalidArgument, "NV12 frame without chroma");
        const cv::Mat uv(ch, cw, CV_8UC2, const_cast<uint8_t*>(f.planes[1]),
                         static_cast<size_t>(f.strides[1]));
        cv::Mat uvs;
        if (Status st = resample_plane(uv, uvs, content_w, content_h, sampling_); !st.is_ok()) return st;
        cv::split(uvs, &r.image[1]);
      }
      break;
    }
    default:
      return Status(StatusCode::kInternal, "unknown pixel layout");
  }
  // The worker reads these after the frame is gone: an image that still points into the
  // frame (a resample that had nothing to do) becomes a copy.
  for (cv::Mat& m : r.image)
    if (!m.empty() && !m.u) m = m.clone();
  return r;
}

Status Segmenter::encode(const ResampledFrame& r, void* tensor) const {
  const Placement& pl = r.placement;
  const int content_w = pl.width, content_h = pl.height;
  const bool yuv = r.layout == PixelLayout::kI420 || r.layout == PixelLayout::kNV12;
  for (int p = 0; p < (yuv ? 3 : 1); ++p)
    if (r.image[p].cols != content_w || r.image[p].rows != content_h || r.image[p].depth() != CV_8U)
      return Status(StatusCode::kInvalidArgument,
                    "resampled frame plane " + std::to_string(p) + " is " + std::to_string(r.image[p].cols) + "x" +
                        std::to_string(r.image[p].rows) + ", its placement " + std::to_string(content_w) + "x" +
                        std::to_string(content_h));
  if (pl.x < 0 || pl.y < 0 || pl.x + content_w > in_w_ || pl.y + content_h > in_h_)
    return Status(StatusCode::kInvalidArgument, "resampled frame placed outside the model input");
  const image::InputRect rect{pl.x, pl.y, pl.width, pl.height};
  if (content_w != in_w_ || content_h != in_h_) encoding_.fill_black(tensor);
  if (!yuv) {
    const cv::Mat& small = r.image[0];
    const image::ImageView view{small.data, small.cols, small.rows, small.step[0], small.channels()};
    return image::encode(view, packed_bgr(r.layout), encoding_, rect, tensor);
  }
  const cv::Mat &ys = r.image[0], &us = r.image[1], &vs = r.image[2];
  const float kr = static_cast<float>(r.kr), kb = static_cast<float>(r.kb), kg = 1.f - kr - kb;
  const float y_off = r.full_range ? 0.f : 16.f, y_gain = r.full_range ? 1.f : 255.f / 219.f;
  const float c_gain = r.full_range ? 1.f : 255.f / 224.f;
  // Input channel m holds colour rgb_of[m] (0 = R).
  const int rgb_of[3] = {encoding_.bgr ? 2 : 0, 1, encoding_.bgr ? 0 : 2};
  for (int yy = 0; yy < content_h; ++yy) {
    const uint8_t* yr = ys.ptr<uint8_t>(yy);
    const uint8_t* ur = us.ptr<uint8_t>(yy);
    const uint8_t* vr = vs.ptr<uint8_t>(yy);
    size_t base = (static_cast<size_t>(yy + pl.y) * in_w_ + pl.x) * 3;
    for (int x = 0; x < content_w; ++x, base += 3) {
      const float Y = (yr[x] - y_off) * y_gain;
      const float cb = (ur[x] - 128.f) * c_gain, cr = (vr[x] - 128.f) * c_gain;
      const float red = Y + 2.f * (1.f - kr) * cr;
      const float blue = Y + 2.f * (1.f - kb) * cb;
      const float green = (Y - kr * red - kb * blue) / kg;
      const float rgb[3] = {std::clamp(red, 0.f, 255.f), std::clamp(green, 0.f, 255.f),
                            std::clamp(blue, 0.f, 255.f)};
      for (int m = 0; m < 3; ++m) encoding_.put(tensor, base + m, m, rgb[rgb_of[m]]);
    }
  }
  return Status::ok();
}

Status Segmenter::preprocess(const FrameView& f, ResizeMode resize, Tensor* out,
                             std::vector<uint8_t>* thumb) const {
  auto resampled = resample(f, resize, thumb);
  if (!resampled.is_ok()) return resampled.status();
  *out = Tensor::like(model_->operands[model_->inputs[0]]);
  return encode(resampled.value(), out->data());
}

bool Segmenter::submit(Tensor input, uint64_t tag) {
  std::vector<Tensor> inputs;
  inputs.push_back(std::move(input));
  return async_->submit(std::move(inputs), tag);
}

bool Segmenter::submit(ResampledFrame frame, uint64_t tag) {
  // The closure owns the small image; the worker writes the input where the session reads it.
  return async_->submit(
      [this, frame = std::move(frame)](Session& session) { return encode(frame, session.input_data(0)); }, tag);
}

std::optional<MaskResult> Segmenter::take_latest() {
  auto r = async_->take_latest();
  if (!r) return std::nullopt;
  return to_mask(std::move(*r));
}

std::optional<MaskResult> Segmenter::wait_for(uint64_t min_tag, std::chrono::microseconds timeout) {
  auto r = async_->wait_for(min_tag, timeout);
  if (!r) return std::nullopt;
  return to_mask(std::move(*r));
}

MaskResult Segmenter::to_mask(AsyncResult r) const {
  MaskResult m;
  m.tag = r.tag;
  m.run_ms = r.run_ms;
  m.cpu_ms = r.cpu_ms;
  m.status = r.status;
  if (!r.status.is_ok()) return m;
  if (r.outputs.size() != 1) {
    m.status = Status(StatusCode::kInternal, "inference returned no mask");
    return m;
  }
  m.width = out_w_;
  m.height = out_h_;
  m.probability = std::move(r.outputs[0]);
  return m;
}

Status Segmenter::read_mask(const Session& session, AsyncResult& r) const {
  const Operand& desc = session.output_desc(0);
  const size_t n = static_cast<size_t>(out_w_) * out_h_;
  if (num_elements(desc.dims) != n * out_c_)
    return Status(StatusCode::kInternal, "output 0 has " + std::to_string(num_elements(desc.dims)) + " values, expected " +
                                             std::to_string(n * out_c_));
  const void* data = session.output_data(0);
  const auto value = [&](size_t i) -> float {
    if (desc.type == OperandType::TENSOR_FLOAT32) return static_cast<const float*>(data)[i];
    const uint8_t byte = static_cast<const uint8_t*>(data)[i];
    if (desc.type == OperandType::TENSOR_QUANT8_ASYMM) return (byte - desc.zero_point) * desc.scale;
    return (static_cast<int8_t>(byte) - desc.zero_point) * desc.scale;
  };
  Tensor mask(OperandType::TENSOR_FLOAT32, {static_cast<uint32_t>(out_h_), static_cast<uint32_t>(out_w_)});
  float* probability = mask.f32();
  if (out_c_ == 1) {
    for (size_t i = 0; i < n; ++i) {
      const float v = value(i);
      probability[i] = output_is_logits_ ? 1.f / (1.f + std::exp(-v)) : std::clamp(v, 0.f, 1.f);
    }
  } else {
    // Softmax over classes; the foreground is the sum of its classes' probabilities.
    for (size_t i = 0; i < n; ++i) {
      float mx = -INFINITY;
      for (int c = 0; c < out_c_; ++c) mx = std::max(mx, value(i * out_c_ + c));
      float sum = 0.f, foreground = 0.f;
      for (int c = 0; c < out_c_; ++c) {
        const float e = std::exp(value(i * out_c_ + c) - mx);
        sum += e;
        if (foreground_[c]) foreground += e;
      }
      probability[i] = std::min(1.f, foreground / sum);
    }
  }
  r.outputs.clear();
  r.outputs.push_back(std::move(mask));
  return Status::ok();
}

std::string Segmenter::delegate_summary() const {
  const PlanReport& rep = async_->session().report();
  std::map<std::string, size_t> ops;
  std::vector<std::string> order;
  for (const auto& p : rep.partitions) {
    if (!ops.count(p.delegate)) order.push_back(p.delegate);
    ops[p.delegate] += p.op_indices.size();
  }
  std::string s;
  for (const auto& d : order) s += (s.empty() ? "" : ", ") + d + " (" + std::to_string(ops[d]) + " ops)";
  return s.empty() ? "none" : s;
}

size_t Segmenter::num_partitions() const {
  return async_->session().report().partitions.size();
}

void MaskFilter::apply(const MaskResult& in, double smoothing, double threshold, float* out) {
  const size_t n = in.probability.size();
  const float* p = in.probability.f32();
  // Without smoothing nothing of this mask is kept (smoothing turned on later starts afresh).
  const float* src = p;
  if (smoothing > 0.0) {
    if (ema_.size() != n || w_ != in.width || h_ != in.height) {
      ema_.assign(p, p + n);
      w_ = in.width;
      h_ = in.height;
    } else {
      const float a = static_cast<float>(std::clamp(smoothing, 0.0, 1.0));
      for (size_t i = 0; i < n; ++i) ema_[i] = a * ema_[i] + (1.f - a) * p[i];
    }
    src = ema_.data();
  } else {
    ema_.clear();
  }
  if (threshold <= 0.0) {
    std::copy(src, src + n, out);
    return;
  }
  constexpr float kHalfBand = 0.2f;
  const float lo = static_cast<float>(threshold) - kHalfBand;
  for (size_t i = 0; i < n; ++i) out[i] = std::clamp((src[i] - lo) / (2 * kHalfBand), 0.f, 1.f);
}

}  // namespace nn::plugins

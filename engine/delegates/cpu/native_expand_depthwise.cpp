// A conv (an inverted residual's expansion, a stem conv) and the depthwise conv reading
// it as one op (native_kernels.h says why). Per output row of the depthwise: compute the
// first conv's rows its taps read that the ring does not hold yet, then run the depthwise
// row kernel on row pointers into the ring. Rows arrive in order, so each is computed once
// per range of output rows. With a projection, the depthwise rows collect in a small
// per-chunk buffer that the projection reads while it is in cache. A stride-1 depthwise
// whose kernel takes rows in pairs gets them so wherever both rows' taps are in the image.
#include <pthreadpool.h>

#include <algorithm>
#include <vector>

#include "delegates/cpu/native_kernels.h"

namespace nn::cpu {

struct NativeExpandDepthwise::Task {
  const NativeExpandDepthwise* op;
  const float* input;
  const float* residual;
  float* output;
  size_t rows, chunks;  // output rows over the batch, and the ranges they are split into
  float* rings;         // the scratch: per chunk its ring of first-conv rows,
  int64_t* held_rows;   // per chunk and slot the row it holds,
  float* groups;        // and per chunk its depthwise rows awaiting the projection
};

size_t NativeExpandDepthwise::halo_rows(const NativeConvShape& d) {
  const size_t reach = size_t(d.kernel_h - 1) * d.dilation_h + 1;
  return reach > d.stride_h ? reach - d.stride_h : 0;
}

namespace {

// Rows of output row y's taps above and below the image (top, bottom) of a conv.
std::pair<uint32_t, uint32_t> row_padding(const NativeConvShape& s, uint32_t y) {
  const int64_t r0 = int64_t(y) * s.stride_h - s.pad_top;  // the first tap row
  return {uint32_t(std::max<int64_t>(0, -r0)),
          uint32_t(std::max<int64_t>(0, r0 + int64_t(s.kernel_h) - int64_t(s.in_h)))};
}

}  // namespace

bool NativeExpandDepthwise::supports(const NativeConvShape& first) {
  if (first.dilation_h != 1) return false;
  for (uint32_t y = 0; y < first.out_h; ++y) {
    auto [top, bottom] = row_padding(first, y);
    if (top + bottom >= first.kernel_h) return false;
  }
  return true;
}

NativeExpandDepthwise::NativeExpandDepthwise(const NativeConvShape& first, const float* filter,
                                             const float* bias, const Epilogue& epilogue,
                                             std::unique_ptr<NativeDepthwise> depthwise, size_t chunks,
                                             const NativeIsa& isa)
    : first_(first), depthwise_(std::move(depthwise)), chunks_(std::max<size_t>(1, chunks)) {
  if (!depthwise_ || !depthwise_->ok() || !supports(first)) return;
  // Output row y reads input rows y * stride - pad_top + [0, kernel_h): those in the image,
  // the rest is padding. One conv per distinct (top, bottom) padding.
  std::vector<std::pair<uint32_t, uint32_t>> keys;
  for (uint32_t y = 0; y < first.out_h; ++y) {
    auto [top, bottom] = row_padding(first, y);
    auto it = std::find(keys.begin(), keys.end(), std::pair{top, bottom});
    if (it == keys.end()) {
      NativeConvShape row = first;
      row.batch = 1, row.in_h = first.kernel_h - top - bottom, row.out_h = 1;
      row.stride_h = 1, row.pad_top = top;
      row_convs_.push_back(std::make_unique<NativeConv>(row, filter, bias, epilogue, isa));
      if (!row_convs_.back()->ok()) return;
      it = keys.insert(keys.end(), std::pair{top, bottom});
    }
    row_conv_of_.push_back(uint32_t(it - keys.begin()));
  }
  const NativeConvShape& d = depthwise_->shape();
  pairs_ = isa.expand_depthwise_pairs && depthwise_->row_pairs();
  ring_rows_ = size_t(d.kernel_h - 1) * d.dilation_h + 1 + (pairs_ ? 1 : 0);
  row_floats_ = (size_t(d.in_w) * d.in_c + 15) / 16 * 16 + 16;  // + the kernels' read slack
  ring_bytes_ = chunks_ * ring_rows_ * row_floats_ * sizeof(float);
  held_bytes_ = (chunks_ * ring_rows_ * sizeof(int64_t) + 63) / 64 * 64;
  packed_ = allocate_floats(1);  // marks it built
}

bool NativeExpandDepthwise::add_projection(std::unique_ptr<NativeConv> project) {
  if (!ok() || !project || !project->ok() || !project->pointwise()) return false;
  const NativeConvShape& d = depthwise_->shape();
  const NativeConvShape& p = project->shape();
  if (p.batch != d.batch || p.in_h != d.out_h || p.in_w != d.out_w || p.in_c != d.out_c || p.groups != 1)
    return false;
  group_rows_ = std::min<size_t>(d.out_h, (kProjectPixels + d.out_w - 1) / d.out_w);
  // A pair can take the group one row past group_rows_.
  group_floats_ = ((group_rows_ + (pairs_ ? 1 : 0)) * d.out_w * d.out_c + 15) / 16 * 16;
  project_ = std::move(project);
  return true;
}

size_t NativeExpandDepthwise::scratch_bytes() const {
  return ring_bytes_ + held_bytes_ + chunks_ * group_floats_ * sizeof(float);
}

void NativeExpandDepthwise::run(const NativeArgs& args) const {
  const NativeConvShape& d = depthwise_->shape();
  const size_t rows = size_t(d.batch) * d.out_h;
  size_t chunks = 1;
  if (args.pool) chunks = std::min({chunks_, pthreadpool_get_threads_count(args.pool), rows});
  float* rings = static_cast<float*>(args.scratch);
  int64_t* held_rows = reinterpret_cast<int64_t*>(static_cast<uint8_t*>(args.scratch) + ring_bytes_);
  float* groups = reinterpret_cast<float*>(static_cast<uint8_t*>(args.scratch) + ring_bytes_ + held_bytes_);
  Task task{this, args.input, args.residual, args.output, rows, chunks, rings, held_rows, groups};
  const pthreadpool_t pool = args.pool;
  auto body = [](void* ctx, size_t chunk) {
    const Task& t = *static_cast<const Task*>(ctx);
    const NativeExpandDepthwise& op = *t.op;
    const NativeConvShape& d = op.depthwise_->shape();
    const NativeConvShape& f = op.first_;
    const size_t in_row = size_t(f.in_w) * f.in_c;
    const size_t out_row = size_t(d.out_w) * d.out_c;
    // Projecting: depthwise rows [group_first, r) wait in `group` for the projection.
    const NativeConv* project = op.project_.get();
    float* group = t.groups + chunk * op.group_floats_;
    const size_t final_row = project ? size_t(project->shape().out_w) * project->shape().out_c : out_row;
    size_t group_first = 0;
    auto flush = [&](size_t end) {
      project->run_pixels(group, t.residual ? t.residual + group_first * final_row : nullptr,
                          t.output + group_first * final_row, (end - group_first) * d.out_w);
    };
    float* ring = t.rings + chunk * op.ring_rows_ * op.row_floats_;
    // Which row (image * in_h + y) each ring slot holds; -1 none yet.
    int64_t* held = t.held_rows + chunk * op.ring_rows_;
    std::fill(held, held + op.ring_rows_, -1);
    const float* taps[NativeDepthwise::kMaxKernelH + 1] = {};
    const size_t first = t.rows * chunk / t.chunks, last = t.rows * (chunk + 1) / t.chunks;
    group_first = first;
    for (size_t r = first; r < last;) {
      const size_t b = r / d.out_h, oy = r % d.out_h;
      const int64_t y0 = int64_t(oy) * d.stride_h - d.pad_top;
      // Two rows where the next one is in this range and image and both rows' taps are all
      // inside it (pairs_: stride and dilation 1, so the pair reads rows y0 .. y0 + kernel_h).
      const size_t n = op.pairs_ && r + 1 < last && oy + 1 < d.out_h && y0 >= 0 &&
                               y0 + int64_t(d.kernel_h) < int64_t(d.in_h)
                           ? 2
                           : 1;
      for (uint32_t ky = 0; ky < d.kernel_h + (n - 1); ++ky) {
        const int64_t iy = y0 + int64_t(ky) * d.dilation_h;
        taps[ky] = nullptr;
        if (iy < 0 || iy >= int64_t(d.in_h)) continue;
        const int64_t key = int64_t(b) * d.in_h + iy;
        const size_t slot = size_t(iy) % op.ring_rows_;
        float* row = ring + slot * op.row_floats_;
        if (held[slot] != key) {
          const int64_t r0 = std::max<int64_t>(0, iy * f.stride_h - f.pad_top);
          op.row_convs_[op.row_conv_of_[size_t(iy)]]->run(
              {.input = t.input + (b * f.in_h + size_t(r0)) * in_row, .output = row});
          held[slot] = key;
        }
        taps[ky] = row;
      }
      const float* residual = !project && t.residual ? t.residual + r * out_row : nullptr;
      float* out = project ? group + (r - group_first) * out_row : t.output + r * out_row;
      if (n == 2)
        op.depthwise_->run_two_rows(taps, residual, out);
      else
        op.depthwise_->run_row(taps, oy, residual, out);
      r += n;
      if (project && r - group_first >= op.group_rows_) flush(r), group_first = r;
    }
    if (project && last > group_first) flush(last);
  };
  if (chunks == 1) return body(&task, 0);
  pthreadpool_parallelize_1d(pool, body, &task, chunks, 0);
}

}  // namespace nn::cpu

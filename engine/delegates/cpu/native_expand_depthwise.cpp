// Expansion (pointwise conv) and depthwise conv of an inverted-residual block as one op
// (native_kernels.h says why). Per output row of the depthwise: expand the input rows its
// taps read that the ring does not hold yet, then run the depthwise row kernel on row
// pointers into the ring. Rows arrive in order, so each expanded row is computed once per
// range of output rows.
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
};

size_t NativeExpandDepthwise::halo_rows(const NativeConvShape& d) {
  const size_t reach = size_t(d.kernel_h - 1) * d.dilation_h + 1;
  return reach > d.stride_h ? reach - d.stride_h : 0;
}

NativeExpandDepthwise::NativeExpandDepthwise(std::unique_ptr<NativeConv> expand_row,
                                             std::unique_ptr<NativeDepthwise> depthwise, size_t chunks)
    : expand_(std::move(expand_row)), depthwise_(std::move(depthwise)), chunks_(std::max<size_t>(1, chunks)) {
  if (!expand_ || !expand_->ok() || !depthwise_ || !depthwise_->ok()) return;
  const NativeConvShape& d = depthwise_->shape();
  ring_rows_ = size_t(d.kernel_h - 1) * d.dilation_h + 1;
  row_floats_ = (size_t(d.in_w) * d.in_c + 15) / 16 * 16 + 16;  // + the kernels' read slack
  ring_ = allocate_floats(chunks_ * ring_rows_ * row_floats_);
  if (ring_) packed_ = allocate_floats(1);
}

void NativeExpandDepthwise::run(const float* input, const float* residual, float* output,
                                pthreadpool_t pool) const {
  const NativeConvShape& d = depthwise_->shape();
  const size_t rows = size_t(d.batch) * d.out_h;
  size_t chunks = 1;
  if (pool) chunks = std::min({chunks_, pthreadpool_get_threads_count(pool), rows});
  Task task{this, input, residual, output, rows, chunks};
  auto body = [](void* ctx, size_t chunk) {
    const Task& t = *static_cast<const Task*>(ctx);
    const NativeExpandDepthwise& op = *t.op;
    const NativeConvShape& d = op.depthwise_->shape();
    const size_t in_row = size_t(d.in_w) * op.expand_->shape().in_c;
    const size_t out_row = size_t(d.out_w) * d.out_c;
    float* ring = op.ring_.get() + chunk * op.ring_rows_ * op.row_floats_;
    // Which expanded row (image * in_h + y) each ring slot holds; -1 none yet.
    std::vector<int64_t> held(op.ring_rows_, -1);
    const float* taps[NativeDepthwise::kMaxKernelH] = {};
    const size_t first = t.rows * chunk / t.chunks, last = t.rows * (chunk + 1) / t.chunks;
    for (size_t r = first; r < last; ++r) {
      const size_t b = r / d.out_h, oy = r % d.out_h;
      const int64_t y0 = int64_t(oy) * d.stride_h - d.pad_top;
      for (uint32_t ky = 0; ky < d.kernel_h; ++ky) {
        const int64_t iy = y0 + int64_t(ky) * d.dilation_h;
        taps[ky] = nullptr;
        if (iy < 0 || iy >= int64_t(d.in_h)) continue;
        const int64_t key = int64_t(b) * d.in_h + iy;
        const size_t slot = size_t(iy) % op.ring_rows_;
        float* row = ring + slot * op.row_floats_;
        if (held[slot] != key) {
          op.expand_->run(t.input + size_t(key) * in_row, nullptr, row, nullptr);
          held[slot] = key;
        }
        taps[ky] = row;
      }
      op.depthwise_->run_row(taps, oy, t.residual ? t.residual + r * out_row : nullptr,
                             t.output + r * out_row);
    }
  };
  if (chunks == 1) return body(&task, 0);
  pthreadpool_parallelize_1d(pool, body, &task, chunks, 0);
}

}  // namespace nn::cpu

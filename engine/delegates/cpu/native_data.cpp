// Data-movement, MEAN-over-an-axis and ERF kernels of the CPU delegate (native_data.h).
// Copies run a row at a time (memcpy when the input row is contiguous, a strided gather
// otherwise) with the multi-index carried from row to row; rows are split over the pool
// only for tensors large enough to pay for waking it.
#include "delegates/cpu/native_data.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <set>

#include "delegates/cpu/native_kernels.h"

namespace nn::cpu {

namespace {

// Work below this many bytes stays on the calling thread: waking the pool costs more.
constexpr size_t kParallelBytes = size_t(128) << 10;
constexpr size_t kMaxChunks = 64;

// Chunks of `rows` rows of `row_bytes` each for the pool: 1 when small.
size_t chunk_count(size_t rows, size_t row_bytes, pthreadpool_t pool) {
  if (!pool || rows < 2 || rows * row_bytes < kParallelBytes) return 1;
  return std::min({rows, kMaxChunks, std::max<size_t>(1, rows * row_bytes / (kParallelBytes / 4))});
}

// Runs body(ctx, first_row, end_row) over `chunks` contiguous ranges of rows.
template <class F>
void for_each_range(pthreadpool_t pool, size_t rows, size_t chunks, const F& body) {
  if (chunks <= 1) {
    body(size_t(0), rows);
    return;
  }
  struct Ctx {
    const F* body;
    size_t rows, chunks;
  } ctx{&body, rows, chunks};
  for_each_row(
      pool, chunks,
      [](void* p, size_t c) {
        const Ctx& x = *static_cast<const Ctx*>(p);
        (*x.body)(c * x.rows / x.chunks, (c + 1) * x.rows / x.chunks);
      },
      &ctx);
}

bool four_byte(const Operand& o) {
  return o.type == OperandType::TENSOR_FLOAT32 || o.type == OperandType::TENSOR_INT32;
}

bool static_ints(const Model& m, uint32_t operand, const std::function<const void*(uint32_t)>& statics,
                 std::vector<int32_t>* out) {
  if (!m.has_value(operand)) return false;
  const Operand& o = m.operands[operand];
  const void* data = statics(operand);
  if (o.type != OperandType::TENSOR_INT32 || !data) return false;
  out->resize(num_elements(o.dims));
  if (!out->empty()) std::memcpy(out->data(), data, out->size() * sizeof(int32_t));
  return true;
}

std::vector<int64_t> row_major(const Dims& d) {
  std::vector<int64_t> s(d.size(), 1);
  for (size_t k = d.size(); k-- > 1;) s[k - 1] = s[k] * d[k];
  return s;
}

#if NN_NATIVE_X86
// dst[i * dst_stride + j] = src[j * src_stride + i] for i, j < 8: eight rows of eight floats
// transposed in registers (unpack, shuffle, then swap 128-bit halves), one vector store per
// output row where the scalar form paid 64 loads and stores.
NN_TARGET_AVX2 void transpose_8x8_avx2(const float* src, int64_t src_stride, float* dst, size_t dst_stride) {
  __m256 r[8], t[8];
  for (int j = 0; j < 8; ++j) r[j] = _mm256_loadu_ps(src + j * src_stride);
  for (int j = 0; j < 8; j += 2) {
    t[j] = _mm256_unpacklo_ps(r[j], r[j + 1]);
    t[j + 1] = _mm256_unpackhi_ps(r[j], r[j + 1]);
  }
  for (int j = 0; j < 8; j += 4) {
    r[j] = _mm256_shuffle_ps(t[j], t[j + 2], _MM_SHUFFLE(1, 0, 1, 0));
    r[j + 1] = _mm256_shuffle_ps(t[j], t[j + 2], _MM_SHUFFLE(3, 2, 3, 2));
    r[j + 2] = _mm256_shuffle_ps(t[j + 1], t[j + 3], _MM_SHUFFLE(1, 0, 1, 0));
    r[j + 3] = _mm256_shuffle_ps(t[j + 1], t[j + 3], _MM_SHUFFLE(3, 2, 3, 2));
  }
  // r[0..3]: columns 0, 1, 2, 3 of rows 0-3 (low half) and columns 4-7 (high half); r[4..7]
  // the same for rows 4-7.
  for (int i = 0; i < 4; ++i) {
    _mm256_storeu_ps(dst + i * dst_stride, _mm256_permute2f128_ps(r[i], r[i + 4], 0x20));
    _mm256_storeu_ps(dst + (i + 4) * dst_stride, _mm256_permute2f128_ps(r[i], r[i + 4], 0x31));
  }
}
#endif

// TRANSPOSE, SLICE: one strided copy.
class CopyOp final : public NativeDataOp {
 public:
  CopyOp(uint32_t input, const StridedCopy& copy, const char* kernel, bool tiles)
      : c_(coalesce(copy)), kernel_(kernel) {
    operands_ = {input};
    last_ = size_t(c_.dims.back());
    rows_ = 1;
    for (size_t k = 0; k + 1 < c_.dims.size(); ++k) rows_ *= size_t(c_.dims[k]);
    // A transpose whose input-contiguous dim lands second to last: blocks of 8 of it are
    // read as 8 contiguous floats and written to 8 output rows (a gather at the input's
    // row stride touches a cache line per float: NHWC <-> NCHW around ShuffleNet's shuffles).
    const size_t r = c_.dims.size();
    blocked_ = r >= 2 && c_.strides[r - 2] == 1 && c_.strides[r - 1] != 1 && c_.dims[r - 2] >= 8;
    tiles_ = blocked_ && tiles && native_conv_supported();
    if (tiles_) kernel_ = "native transpose AVX2 8x8";
  }
  const char* kernel() const override { return kernel_; }

  void run(const NativeDataArgs& args) const override {
    const std::vector<const void*>& inputs = args.inputs;
    void* const output = args.output;
    const pthreadpool_t pool = args.pool;
    if (blocked_) return run_blocked(static_cast<const float*>(inputs[0]) + c_.offset, static_cast<float*>(output), pool);
    const float* in = static_cast<const float*>(inputs[0]) + c_.offset;
    float* out = static_cast<float*>(output);
    const size_t outer_rank = c_.dims.size() - 1;
    const int64_t step = c_.strides.back();
    for_each_range(pool, rows_, chunk_count(rows_, last_ * 4, pool), [&](size_t r0, size_t r1) {
      // The multi-index of row r0 over dims[0 .. outer_rank), then carried row to row.
      int64_t idx[8] = {0}, at = 0;
      for (size_t k = outer_rank, r = r0; k-- > 0;) {
        idx[k] = int64_t(r % size_t(c_.dims[k]));
        r /= size_t(c_.dims[k]);
        at += idx[k] * c_.strides[k];
      }
      for (size_t r = r0; r < r1; ++r) {
        float* dst = out + r * last_;
        const float* src = in + at;
        if (step == 1) {
          std::memcpy(dst, src, last_ * sizeof(float));
        } else {
          for (size_t j = 0; j < last_; ++j) dst[j] = src[int64_t(j) * step];
        }
        for (size_t k = outer_rank; k-- > 0;) {  // next row: carry
          at += c_.strides[k];
          if (++idx[k] < c_.dims[k]) break;
          at -= c_.strides[k] * c_.dims[k];
          idx[k] = 0;
        }
      }
    });
  }

 private:
  // out[o][a][b] = in[base(o) + a + b * stride] for a < A (8 at a time), b < B.
  void run_blocked(const float* in, float* out, pthreadpool_t pool) const {
    const size_t r = c_.dims.size(), outer_rank = r - 2;
    const size_t A = size_t(c_.dims[r - 2]), B = last_, blocks = (A + 7) / 8;
    const int64_t stride = c_.strides[r - 1];
    size_t outer = 1;
    for (size_t k = 0; k < outer_rank; ++k) outer *= size_t(c_.dims[k]);
    for_each_range(pool, outer * blocks, chunk_count(outer * blocks, 8 * B * 4, pool), [&](size_t u0, size_t u1) {
      for (size_t u = u0; u < u1; ++u) {
        const size_t o = u / blocks, a0 = u % blocks * 8, n = std::min<size_t>(8, A - a0);
        int64_t base = 0;
        for (size_t k = outer_rank, rest = o; k-- > 0;) {
          base += int64_t(rest % size_t(c_.dims[k])) * c_.strides[k];
          rest /= size_t(c_.dims[k]);
        }
        const float* src = in + base + int64_t(a0);
        float* dst = out + (o * A + a0) * B;
        if (n == 8) {
          size_t b = 0;
#if NN_NATIVE_X86
          if (tiles_)
            for (; b + 8 <= B; b += 8) transpose_8x8_avx2(src + int64_t(b) * stride, stride, dst + b, B);
#endif
          for (; b < B; ++b) {
            const float* s8 = src + int64_t(b) * stride;
            for (size_t i = 0; i < 8; ++i) dst[i * B + b] = s8[i];
          }
        } else {
          for (size_t b = 0; b < B; ++b)
            for (size_t i = 0; i < n; ++i) dst[i * B + b] = src[int64_t(b) * stride + int64_t(i)];
        }
      }
    });
  }

  StridedCopy c_;
  const char* kernel_;
  size_t rows_ = 1, last_ = 1;
  bool blocked_ = false;
  bool tiles_ = false;  // 8 x 8 tiles transposed in AVX2 registers
};

// y = clamp(x * s + b, lo, hi): the product rounded, then the sum, as the MUL and ADD
// it stands for (std::clamp's order: NaN and -0 pass as the reference's). The empty asm
// keeps the compiler from contracting the two into one FMA, which rounds once.
inline float affine1(float x, float s, float b, float lo, float hi) {
  float p = x * s;
#if NN_NATIVE_X86
  __asm__("" : "+x"(p));
#else
  volatile float q = p;
  p = q;
#endif
  return std::clamp(p + b, lo, hi);
}

void affine_row(const float* x, const float* s, const float* b, float* y, size_t n, float lo, float hi) {
  for (size_t j = 0; j < n; ++j) y[j] = affine1(x[j], s[j], b[j], lo, hi);
}

#if NN_NATIVE_X86
// max(lo, v) then min(hi, v) in that operand order are std::clamp's: maxps returns its
// second operand unless the first is greater (NaN, -0 against 0 stay v).
NN_TARGET_AVX2 void affine_row_avx2(const float* x, const float* s, const float* b, float* y, size_t n, float lo,
                                    float hi) {
  const __m256 vlo = _mm256_set1_ps(lo), vhi = _mm256_set1_ps(hi);
  size_t j = 0;
  for (; j + 8 <= n; j += 8) {
    __m256 p = _mm256_mul_ps(_mm256_loadu_ps(x + j), _mm256_loadu_ps(s + j));
    __asm__("" : "+v"(p));
    const __m256 v = _mm256_add_ps(p, _mm256_loadu_ps(b + j));
    _mm256_storeu_ps(y + j, _mm256_min_ps(vhi, _mm256_max_ps(vlo, v)));
  }
  // The tail here, not by a call to affine_row: GCC made that a tail jump that skipped
  // this function's vzeroupper, and the caller's SSE code then ran with dirty ymm halves.
  for (; j < n; ++j) y[j] = affine1(x[j], s[j], b[j], lo, hi);
}

NN_TARGET_AVX512 void affine_row_avx512(const float* x, const float* s, const float* b, float* y, size_t n, float lo,
                                        float hi) {
  const __m512 vlo = _mm512_set1_ps(lo), vhi = _mm512_set1_ps(hi);
  for (size_t j = 0; j < n; j += 16) {
    const __mmask16 m = n - j >= 16 ? __mmask16(0xffff) : __mmask16((1u << (n - j)) - 1);
    __m512 p = _mm512_mul_ps(_mm512_maskz_loadu_ps(m, x + j), _mm512_maskz_loadu_ps(m, s + j));
    __asm__("" : "+v"(p));
    const __m512 v = _mm512_add_ps(p, _mm512_maskz_loadu_ps(m, b + j));
    _mm512_mask_storeu_ps(y + j, m, min16(vhi, max16(vlo, v)));
  }
}
#endif

// CONCATENATION: per outer row, each input's inner run in turn. With a channel affine
// (concat_with_channel_affine) the copy writes clamp(x * scale[c] + bias[c]) instead.
class ConcatOp final : public NativeDataOp {
 public:
  ConcatOp(std::vector<uint32_t> inputs, size_t outer, std::vector<size_t> inner, size_t after)
      : outer_(outer), after_(after), inner_(std::move(inner)) {
    operands_ = std::move(inputs);
    total_ = std::accumulate(inner_.begin(), inner_.end(), size_t(0));
  }
  const char* kernel() const override { return kernel_; }
  size_t after() const { return after_; }
  size_t total() const { return total_; }

  // A copy of this concat that applies the affine (scale, bias: total() each) while copying.
  std::unique_ptr<ConcatOp> with_affine(std::vector<float> scale, std::vector<float> bias, float lo, float hi,
                                        const NativeIsa& isa) const {
    auto c = std::make_unique<ConcatOp>(*this);
    c->scale_ = std::move(scale), c->bias_ = std::move(bias), c->lo_ = lo, c->hi_ = hi;
    c->affine_ = true;
    c->avx512_ = isa.avx512;
    c->avx2_ = !isa.avx512 && native_conv_supported();
    c->kernel_ = c->avx512_ ? "native concat+affine AVX-512" : c->avx2_ ? "native concat+affine AVX2" : "native concat+affine";
    return c;
  }

  void run(const NativeDataArgs& args) const override {
    const std::vector<const void*>& inputs = args.inputs;
    void* const output = args.output;
    const pthreadpool_t pool = args.pool;
    float* out = static_cast<float*>(output);
    for_each_range(pool, outer_, chunk_count(outer_, total_ * 4, pool), [&](size_t r0, size_t r1) {
      for (size_t r = r0; r < r1; ++r) {
        float* dst = out + r * total_;
        size_t c = 0;
        for (size_t i = 0; i < inner_.size(); ++i) {
          const float* src = static_cast<const float*>(inputs[i]) + r * inner_[i];
          if (!affine_) {
            std::memcpy(dst + c, src, inner_[i] * sizeof(float));
          } else {
#if NN_NATIVE_X86
            if (avx512_)
              affine_row_avx512(src, scale_.data() + c, bias_.data() + c, dst + c, inner_[i], lo_, hi_);
            else if (avx2_)
              affine_row_avx2(src, scale_.data() + c, bias_.data() + c, dst + c, inner_[i], lo_, hi_);
            else
#endif
              affine_row(src, scale_.data() + c, bias_.data() + c, dst + c, inner_[i], lo_, hi_);
          }
          c += inner_[i];
        }
      }
    });
  }

 private:
  size_t outer_ = 1, after_ = 1, total_ = 0;
  std::vector<size_t> inner_;
  const char* kernel_ = "native concat";
  bool affine_ = false, avx512_ = false, avx2_ = false;
  std::vector<float> scale_, bias_;  // per output channel (after_ == 1)
  float lo_ = 0, hi_ = 0;
};

#if NN_NATIVE_X86
NN_TARGET_AVX2 float sum_avx2(const float* x, size_t n) {
  __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    a0 = _mm256_add_ps(a0, _mm256_loadu_ps(x + i));
    a1 = _mm256_add_ps(a1, _mm256_loadu_ps(x + i + 8));
  }
  for (; i + 8 <= n; i += 8) a0 = _mm256_add_ps(a0, _mm256_loadu_ps(x + i));
  __m256 a = _mm256_add_ps(a0, a1);
  __m128 h = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
  h = _mm_add_ps(h, _mm_movehl_ps(h, h));
  h = _mm_add_ss(h, _mm_shuffle_ps(h, h, 1));
  float s = _mm_cvtss_f32(h);
  for (; i < n; ++i) s += x[i];
  return s;
}
#endif

float sum_row(const float* x, size_t n) {
#if NN_NATIVE_X86
  if (native_conv_supported()) return sum_avx2(x, n);
#endif
  float s = 0.f;
  for (size_t i = 0; i < n; ++i) s += x[i];
  return s;
}

// MEAN over a run of adjacent axes: [outer, n, inner] -> [outer, inner].
class MeanOp final : public NativeDataOp {
 public:
  MeanOp(uint32_t input, size_t outer, size_t n, size_t inner) : outer_(outer), n_(n), inner_(inner) {
    operands_ = {input};
  }
  const char* kernel() const override { return "native mean"; }

  void run(const NativeDataArgs& args) const override {
    const std::vector<const void*>& inputs = args.inputs;
    void* const output = args.output;
    const pthreadpool_t pool = args.pool;
    const float* in = static_cast<const float*>(inputs[0]);
    float* out = static_cast<float*>(output);
    const float scale = 1.f / float(n_);
    for_each_range(pool, outer_, chunk_count(outer_, n_ * inner_ * 4, pool), [&](size_t r0, size_t r1) {
      for (size_t r = r0; r < r1; ++r) {
        const float* x = in + r * n_ * inner_;
        float* y = out + r * inner_;
        if (inner_ == 1) {
          y[0] = sum_row(x, n_) * scale;
          continue;
        }
        std::memcpy(y, x, inner_ * sizeof(float));
        for (size_t k = 1; k < n_; ++k)
          for (size_t j = 0; j < inner_; ++j) y[j] += x[k * inner_ + j];
        for (size_t j = 0; j < inner_; ++j) y[j] *= scale;
      }
    });
  }

 private:
  size_t outer_, n_, inner_;
};

#if NN_NATIVE_X86
NN_TARGET_AVX2 void erf_avx2(const float* in, float* out, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(out + i, erf8(_mm256_loadu_ps(in + i)));
  for (; i < n; ++i) out[i] = erf_approx(in[i]);
}
#endif

// erf as native_epilogue.h computes it (erf_approx: the GELU epilogue's erf too).
class ErfOp final : public NativeDataOp {
 public:
  ErfOp(uint32_t input, size_t count) : count_(count) { operands_ = {input}; }
  const char* kernel() const override { return "native erf"; }

  void run(const NativeDataArgs& args) const override {
    const std::vector<const void*>& inputs = args.inputs;
    void* const output = args.output;
    const pthreadpool_t pool = args.pool;
    const float* in = static_cast<const float*>(inputs[0]);
    float* out = static_cast<float*>(output);
    constexpr size_t kBlock = 1024;  // elements per row of work
    const size_t rows = (count_ + kBlock - 1) / kBlock;
    for_each_range(pool, rows, chunk_count(rows, kBlock * 16, pool), [&](size_t r0, size_t r1) {
      const size_t begin = r0 * kBlock, end = std::min(count_, r1 * kBlock);
#if NN_NATIVE_X86
      if (native_conv_supported()) {
        erf_avx2(in + begin, out + begin, end - begin);
        return;
      }
#endif
      for (size_t i = begin; i < end; ++i) out[i] = erf_approx(in[i]);
    });
  }

 private:
  size_t count_;
};

}  // namespace

std::unique_ptr<NativeDataOp> concat_with_channel_affine(const NativeDataOp& concat, std::vector<float> scale,
                                                        std::vector<float> bias, float lo, float hi,
                                                        const NativeIsa& isa) {
  const auto* c = dynamic_cast<const ConcatOp*>(&concat);
  if (!c || c->after() != 1 || scale.size() != c->total() || bias.size() != c->total()) return nullptr;
  return c->with_affine(std::move(scale), std::move(bias), lo, hi, isa);
}

StridedCopy coalesce(const StridedCopy& copy) {
  StridedCopy c;
  c.offset = copy.offset;
  for (size_t k = 0; k < copy.dims.size(); ++k) {
    if (copy.dims[k] == 1) continue;
    if (!c.dims.empty() && c.strides.back() == copy.strides[k] * copy.dims[k]) {
      c.dims.back() *= copy.dims[k];  // contiguous with the dim before: one longer dim
      c.strides.back() = copy.strides[k];
      continue;
    }
    c.dims.push_back(copy.dims[k]);
    c.strides.push_back(copy.strides[k]);
  }
  if (c.dims.empty()) c.dims = {1}, c.strides = {1};
  return c;
}

std::unique_ptr<NativeDataOp> make_native_data_op(const Model& m, uint32_t op_index,
                                                  const std::function<const void*(uint32_t)>& statics,
                                                  std::string* why, const NativeIsa& isa) {
  const Operation& op = m.operations[op_index];
  auto no = [&](const char* reason) -> std::unique_ptr<NativeDataOp> {
    *why = reason;
    return nullptr;
  };
  if (op.outputs.size() != 1 || op.inputs.empty()) return no("not one output");
  const Operand& in = m.operands[op.inputs[0]];
  const Operand& out = m.operands[op.outputs[0]];
  if (out.dims.size() > 8 || in.dims.size() > 8) return no("rank above 8");
  switch (op.type) {
    case OperationType::TRANSPOSE: {
      if (!four_byte(in) || out.type != in.type) return no("not a 4-byte element type");
      std::vector<int32_t> perm;
      const bool given = op.inputs.size() > 1 && m.has_value(op.inputs[1]);
      if (given && !static_ints(m, op.inputs[1], statics, &perm)) return no("perm is not constant");
      const size_t rank = in.dims.size();
      if (perm.empty())
        for (size_t i = 0; i < rank; ++i) perm.push_back(int32_t(rank - 1 - i));
      if (perm.size() != rank) return no("perm size");
      const std::vector<int64_t> s = row_major(in.dims);
      StridedCopy c;
      for (int32_t a : perm) {
        if (a < 0 || size_t(a) >= rank) return no("perm out of range");
        c.dims.push_back(in.dims[a]);
        c.strides.push_back(s[a]);
      }
      return std::make_unique<CopyOp>(op.inputs[0], c, "native transpose", isa.transpose_tiles);
    }
    case OperationType::SLICE: {
      if (!four_byte(in) || out.type != in.type) return no("not a 4-byte element type");
      std::vector<int32_t> begin, size;
      if (op.inputs.size() != 3 || !static_ints(m, op.inputs[1], statics, &begin) ||
          !static_ints(m, op.inputs[2], statics, &size))
        return no("begin/size are not constant");
      const size_t rank = in.dims.size();
      if (begin.size() != rank || size.size() != rank) return no("begin/size rank");
      const std::vector<int64_t> s = row_major(in.dims);
      StridedCopy c;
      for (size_t i = 0; i < rank; ++i) {
        const int64_t b = begin[i], n = size[i] == -1 ? int64_t(in.dims[i]) - b : size[i];
        if (b < 0 || n < 1 || b + n > int64_t(in.dims[i])) return no("slice outside the input");
        c.dims.push_back(n);
        c.strides.push_back(s[i]);
        c.offset += b * s[i];
      }
      return std::make_unique<CopyOp>(op.inputs[0], c, "native slice", false);
    }
    case OperationType::CONCATENATION: {
      const size_t count = op.inputs.size() - 1;
      if (count < 1 || !statics(op.inputs.back())) return no("axis is not constant");
      const size_t rank = out.dims.size();
      int32_t axis = m.scalar_i32(op.inputs.back());
      if (axis < 0) axis += int32_t(rank);
      if (axis < 0 || size_t(axis) >= rank) return no("axis out of range");
      size_t outer = 1, after = 1;
      for (size_t k = 0; k < size_t(axis); ++k) outer *= out.dims[k];
      for (size_t k = size_t(axis) + 1; k < rank; ++k) after *= out.dims[k];
      std::vector<uint32_t> inputs(op.inputs.begin(), op.inputs.end() - 1);
      std::vector<size_t> inner;
      for (uint32_t i : inputs) {
        const Operand& o = m.operands[i];
        if (!m.has_value(i) || !four_byte(o) || o.type != out.type || o.dims.size() != rank)
          return no("inputs are not 4-byte tensors of the output's rank");
        inner.push_back(size_t(o.dims[axis]) * after);
      }
      return std::make_unique<ConcatOp>(std::move(inputs), outer, std::move(inner), after);
    }
    case OperationType::MEAN: {
      if (in.type != OperandType::TENSOR_FLOAT32 || out.type != in.type) return no("not float32");
      std::vector<int32_t> axes;
      if (op.inputs.size() < 2 || !static_ints(m, op.inputs[1], statics, &axes) || axes.empty())
        return no("axes are not constant");
      const int32_t rank = int32_t(in.dims.size());
      std::set<int32_t> norm;
      for (int32_t a : axes) {
        if (a < -rank || a >= rank) return no("axis out of range");
        norm.insert(a < 0 ? a + rank : a);
      }
      if (*norm.rbegin() - *norm.begin() + 1 != int32_t(norm.size())) return no("axes are not adjacent");
      size_t outer = 1, n = 1, inner = 1;
      for (int32_t k = 0; k < rank; ++k)
        (k < *norm.begin() ? outer : k > *norm.rbegin() ? inner : n) *= in.dims[k];
      return std::make_unique<MeanOp>(op.inputs[0], outer, n, inner);
    }
    case OperationType::NNPIPE_ERF:
      if (in.type != OperandType::TENSOR_FLOAT32 || out.type != in.type) return no("not float32");
      return std::make_unique<ErfOp>(op.inputs[0], num_elements(in.dims));
    default:
      return no("not a data op");
  }
}

}  // namespace nn::cpu

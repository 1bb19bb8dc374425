// LayerNorm over the last axis as one native op (native_layer_norm.h).
#include "delegates/cpu/native_layer_norm.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "delegates/cpu/native_epilogue.h"
#include "delegates/cpu/native_kernels.h"

namespace nn::cpu {

namespace {

using Statics = std::function<const void*(uint32_t)>;

const float* float_constant(const Model& m, uint32_t o, const Statics& statics) {
  const OperandType t = m.operands[o].type;
  return t == OperandType::TENSOR_FLOAT32 || t == OperandType::FLOAT32 ? static_cast<const float*>(statics(o))
                                                                         : nullptr;
}

// A float constant of one element equal to `want` (want < 0: any value, returned in *v).
bool scalar(const Model& m, uint32_t o, const Statics& statics, float want, float* v = nullptr) {
  const float* c = float_constant(m, o, statics);
  if (!c || num_elements(m.operands[o].dims) != 1) return false;
  if (v) *v = *c;
  return want < 0 || *c == want;
}

// The values of a constant holding one per channel (dims [.., 1, C]).
bool per_channel(const Model& m, uint32_t o, const Statics& statics, size_t channels, std::vector<float>* v) {
  const float* c = float_constant(m, o, statics);
  const Dims& d = m.operands[o].dims;
  if (!c || d.empty() || d.back() != channels) return false;
  for (size_t i = 0; i + 1 < d.size(); ++i)
    if (d[i] != 1) return false;
  v->assign(c, c + channels);
  return true;
}

bool no_fuse_code(const Operation& op, const Statics& statics) {
  if (op.inputs.size() != 3) return false;
  const void* fuse = statics(op.inputs[2]);
  return fuse && *static_cast<const int32_t*>(fuse) == 0;
}

// MEAN of `in` over its last axis only, keeping it.
bool last_axis_mean(const Model& m, const Operation& op, uint32_t in, const Statics& statics) {
  if (op.type != OperationType::MEAN || op.inputs.size() != 3 || op.inputs[0] != in) return false;
  const Operand& axes = m.operands[op.inputs[1]];
  const void* a = statics(op.inputs[1]);
  const void* keep = statics(op.inputs[2]);
  const int32_t rank = int32_t(m.operands[in].dims.size());
  if (!a || !keep || axes.type != OperandType::TENSOR_INT32 || num_elements(axes.dims) != 1 || rank < 1)
    return false;
  const int32_t axis = *static_cast<const int32_t*>(a);
  return (axis == rank - 1 || axis == -1) && *static_cast<const int32_t*>(keep) != 0;
}

#if NN_NATIVE_X86
// GCC 12 reads the unused pass-through operand of _mm512_reduce_add_ps's extracts uninitialized.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
NN_TARGET_AVX512 void layer_norm_rows_avx512(const float* x, float* y, size_t rows, size_t c, float eps,
                                             const float* gamma, const float* beta) {
  const size_t full = c / 16 * 16;
  const __mmask16 tail = __mmask16((1u << (c - full)) - 1);
  const float inv_c = 1.f / float(c);
  for (size_t r = 0; r < rows; ++r, x += c, y += c) {
    __m512 s0 = _mm512_setzero_ps(), s1 = _mm512_setzero_ps();
    size_t i = 0;
    for (; i + 32 <= full; i += 32) {
      s0 = _mm512_add_ps(s0, _mm512_loadu_ps(x + i));
      s1 = _mm512_add_ps(s1, _mm512_loadu_ps(x + i + 16));
    }
    for (; i < full; i += 16) s0 = _mm512_add_ps(s0, _mm512_loadu_ps(x + i));
    if (tail) s1 = _mm512_add_ps(s1, _mm512_maskz_loadu_ps(tail, x + full));
    const float mean = _mm512_reduce_add_ps(_mm512_add_ps(s0, s1)) * inv_c;
    const __m512 mv = _mm512_set1_ps(mean);
    __m512 q0 = _mm512_setzero_ps(), q1 = _mm512_setzero_ps();
    for (i = 0; i + 32 <= full; i += 32) {
      const __m512 d0 = _mm512_sub_ps(_mm512_loadu_ps(x + i), mv);
      const __m512 d1 = _mm512_sub_ps(_mm512_loadu_ps(x + i + 16), mv);
      q0 = _mm512_fmadd_ps(d0, d0, q0);
      q1 = _mm512_fmadd_ps(d1, d1, q1);
    }
    for (; i < full; i += 16) {
      const __m512 d = _mm512_sub_ps(_mm512_loadu_ps(x + i), mv);
      q0 = _mm512_fmadd_ps(d, d, q0);
    }
    if (tail) {
      const __m512 d = _mm512_maskz_sub_ps(tail, _mm512_maskz_loadu_ps(tail, x + full), mv);
      q1 = _mm512_fmadd_ps(d, d, q1);
    }
    const float var = _mm512_reduce_add_ps(_mm512_add_ps(q0, q1)) * inv_c;
    const __m512 inv = _mm512_set1_ps(1.f / std::sqrt(var + eps));
    for (i = 0; i < full; i += 16) {
      const __m512 n = _mm512_mul_ps(_mm512_sub_ps(_mm512_loadu_ps(x + i), mv), inv);
      _mm512_storeu_ps(y + i, _mm512_fmadd_ps(n, _mm512_loadu_ps(gamma + i), _mm512_loadu_ps(beta + i)));
    }
    if (tail) {
      const __m512 n = _mm512_mul_ps(_mm512_sub_ps(_mm512_maskz_loadu_ps(tail, x + full), mv), inv);
      _mm512_mask_storeu_ps(y + full, tail,
                            _mm512_fmadd_ps(n, _mm512_maskz_loadu_ps(tail, gamma + full),
                                            _mm512_maskz_loadu_ps(tail, beta + full)));
    }
  }
}

#pragma GCC diagnostic pop

NN_INLINE_AVX2 float sum8(__m256 v) {
  const __m128 h = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 q = _mm_add_ps(h, _mm_movehl_ps(h, h));
  return _mm_cvtss_f32(_mm_add_ss(q, _mm_movehdup_ps(q)));
}

NN_TARGET_AVX2 void layer_norm_rows_avx2(const float* x, float* y, size_t rows, size_t c, float eps,
                                         const float* gamma, const float* beta) {
  const size_t full = c / 8 * 8;
  const float inv_c = 1.f / float(c);
  for (size_t r = 0; r < rows; ++r, x += c, y += c) {
    __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
    size_t i = 0;
    for (; i + 16 <= full; i += 16) {
      s0 = _mm256_add_ps(s0, _mm256_loadu_ps(x + i));
      s1 = _mm256_add_ps(s1, _mm256_loadu_ps(x + i + 8));
    }
    for (; i < full; i += 8) s0 = _mm256_add_ps(s0, _mm256_loadu_ps(x + i));
    float sum = sum8(_mm256_add_ps(s0, s1));
    for (i = full; i < c; ++i) sum += x[i];
    const float mean = sum * inv_c;
    const __m256 mv = _mm256_set1_ps(mean);
    __m256 q0 = _mm256_setzero_ps(), q1 = _mm256_setzero_ps();
    for (i = 0; i + 16 <= full; i += 16) {
      const __m256 d0 = _mm256_sub_ps(_mm256_loadu_ps(x + i), mv);
      const __m256 d1 = _mm256_sub_ps(_mm256_loadu_ps(x + i + 8), mv);
      q0 = _mm256_fmadd_ps(d0, d0, q0);
      q1 = _mm256_fmadd_ps(d1, d1, q1);
    }
    for (; i < full; i += 8) {
      const __m256 d = _mm256_sub_ps(_mm256_loadu_ps(x + i), mv);
      q0 = _mm256_fmadd_ps(d, d, q0);
    }
    float sq = sum8(_mm256_add_ps(q0, q1));
    for (i = full; i < c; ++i) sq += (x[i] - mean) * (x[i] - mean);
    const float inv_s = 1.f / std::sqrt(sq * inv_c + eps);
    const __m256 inv = _mm256_set1_ps(inv_s);
    for (i = 0; i < full; i += 8) {
      const __m256 n = _mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(x + i), mv), inv);
      _mm256_storeu_ps(y + i, _mm256_fmadd_ps(n, _mm256_loadu_ps(gamma + i), _mm256_loadu_ps(beta + i)));
    }
    for (i = full; i < c; ++i) y[i] = std::fma((x[i] - mean) * inv_s, gamma[i], beta[i]);
  }
}
#endif

void layer_norm_rows(const float* x, float* y, size_t rows, size_t c, float eps, const float* gamma,
                     const float* beta) {
  for (size_t r = 0; r < rows; ++r, x += c, y += c) {
    float sum = 0, sq = 0;
    for (size_t i = 0; i < c; ++i) sum += x[i];
    const float mean = sum / float(c);
    for (size_t i = 0; i < c; ++i) sq += (x[i] - mean) * (x[i] - mean);
    const float inv_s = 1.f / std::sqrt(sq / float(c) + eps);
    for (size_t i = 0; i < c; ++i) y[i] = std::fma((x[i] - mean) * inv_s, gamma[i], beta[i]);
  }
}

}  // namespace

std::optional<LayerNormPattern> match_layer_norm(
    const Model& m, uint32_t mean, const std::function<const void*(uint32_t)>& statics,
    const std::function<std::vector<uint32_t>(uint32_t)>& internal_readers,
    const std::function<bool(uint32_t)>& fusable) {
  const Operation& first = m.operations[mean];
  if (first.inputs.empty() || first.outputs.size() != 1) return std::nullopt;
  const uint32_t x = first.inputs[0];
  const Operand& xo = m.operands[x];
  if (xo.type != OperandType::TENSOR_FLOAT32 || !last_axis_mean(m, first, x, statics) || xo.dims.empty())
    return std::nullopt;
  LayerNormPattern p;
  p.x = x;
  p.channels = xo.dims.back();
  p.rows = p.channels ? num_elements(xo.dims) / p.channels : 0;
  if (p.channels == 0) return std::nullopt;
  // The op after operand o when it is o's only reader and may be absorbed, else -1.
  auto next = [&](uint32_t o) -> int64_t {
    const std::vector<uint32_t> r = internal_readers(o);
    return r.size() == 1 && fusable(r[0]) ? int64_t(r[0]) : -1;
  };
  auto op_at = [&](int64_t k) -> const Operation* { return k < 0 ? nullptr : &m.operations[size_t(k)]; };
  const uint32_t mu = first.outputs[0];
  const int64_t sub_k = next(mu);
  const Operation* sub = op_at(sub_k);
  if (!sub || sub->type != OperationType::SUB || !no_fuse_code(*sub, statics) || sub->inputs[0] != x ||
      sub->inputs[1] != mu)
    return std::nullopt;
  const uint32_t d = sub->outputs[0];
  if (m.operands[d].dims != xo.dims) return std::nullopt;
  const std::vector<uint32_t> d_readers = internal_readers(d);
  if (d_readers.size() != 2) return std::nullopt;
  for (int first_reader = 0; first_reader < 2; ++first_reader) {
    const uint32_t sq_k = d_readers[first_reader], div_k = d_readers[1 - first_reader];
    const Operation& sq = m.operations[sq_k];
    const bool squares =
        fusable(sq_k) &&
        ((sq.type == OperationType::POW && sq.inputs[0] == d && scalar(m, sq.inputs[1], statics, 2.f)) ||
         (sq.type == OperationType::MUL && no_fuse_code(sq, statics) && sq.inputs[0] == d && sq.inputs[1] == d));
    if (!squares) continue;
    const int64_t var_k = next(sq.outputs[0]);
    const Operation* var = op_at(var_k);
    if (!var || !last_axis_mean(m, *var, sq.outputs[0], statics)) continue;
    const int64_t eps_k = next(var->outputs[0]);
    const Operation* add = op_at(eps_k);
    if (!add || add->type != OperationType::ADD || !no_fuse_code(*add, statics)) continue;
    const int side = add->inputs[0] == var->outputs[0] ? 1 : 0;
    if (add->inputs[1 - side] != var->outputs[0] || !scalar(m, add->inputs[side], statics, -1.f, &p.epsilon) ||
        !(p.epsilon >= 0))
      continue;
    const int64_t sqrt_k = next(add->outputs[0]);
    const Operation* root = op_at(sqrt_k);
    if (!root || root->type != OperationType::SQRT || next(root->outputs[0]) != int64_t(div_k)) continue;
    const Operation& div = m.operations[div_k];
    if (div.type != OperationType::DIV || !no_fuse_code(div, statics) || div.inputs[0] != d ||
        div.inputs[1] != root->outputs[0])
      continue;
    p.ops = {uint32_t(sub_k), sq_k, uint32_t(var_k), uint32_t(eps_k), uint32_t(sqrt_k), div_k};
    p.output = div.outputs[0];
    // * gamma, then + beta (each optional, in that order).
    auto affine = [&](OperationType type, std::vector<float>* values) {
      const int64_t k = next(p.output);
      const Operation* op = op_at(k);
      if (!op || op->type != type || !no_fuse_code(*op, statics)) return false;
      const int s = op->inputs[0] == p.output ? 1 : 0;
      if (op->inputs[1 - s] != p.output || !per_channel(m, op->inputs[s], statics, p.channels, values) ||
          m.operands[op->outputs[0]].dims != xo.dims)
        return false;
      p.ops.push_back(uint32_t(k));
      p.output = op->outputs[0];
      return true;
    };
    affine(OperationType::MUL, &p.gamma);
    affine(OperationType::ADD, &p.beta);
    std::sort(p.ops.begin(), p.ops.end());
    return p;
  }
  return std::nullopt;
}

NativeLayerNorm::NativeLayerNorm(const LayerNormPattern& p, bool avx512)
    : rows_(p.rows),
      channels_(p.channels),
      epsilon_(p.epsilon),
      gamma_(p.gamma.empty() ? std::vector<float>(p.channels, 1.f) : p.gamma),
      beta_(p.beta.empty() ? std::vector<float>(p.channels, 0.f) : p.beta),
      avx512_(avx512) {
  operands_ = {p.x};
}

void NativeLayerNorm::run(const NativeDataArgs& args) const {
  struct Ctx {
    const NativeLayerNorm* op;
    const float* x;
    float* y;
    size_t chunks;
  } ctx{this, static_cast<const float*>(args.inputs[0]), static_cast<float*>(args.output), 1};
  // Chunks of at least 64 KB of rows for the pool (below, waking it costs more than it saves).
  const size_t bytes = rows_ * channels_ * sizeof(float);
  if (args.pool) ctx.chunks = std::clamp<size_t>(bytes / (size_t(64) << 10), 1, std::min<size_t>(rows_, 32));
  auto body = [](void* p, size_t chunk) {
    const Ctx& c = *static_cast<const Ctx*>(p);
    const NativeLayerNorm& op = *c.op;
    const size_t r0 = chunk * op.rows_ / c.chunks, r1 = (chunk + 1) * op.rows_ / c.chunks;
    const float* x = c.x + r0 * op.channels_;
    float* y = c.y + r0 * op.channels_;
#if NN_NATIVE_X86
    if (op.avx512_)
      return layer_norm_rows_avx512(x, y, r1 - r0, op.channels_, op.epsilon_, op.gamma_.data(), op.beta_.data());
    if (native_conv_supported())
      return layer_norm_rows_avx2(x, y, r1 - r0, op.channels_, op.epsilon_, op.gamma_.data(), op.beta_.data());
#endif
    layer_norm_rows(x, y, r1 - r0, op.channels_, op.epsilon_, op.gamma_.data(), op.beta_.data());
  };
  if (ctx.chunks <= 1) return body(&ctx, 0);
  for_each_row(args.pool, ctx.chunks, body, &ctx);
}

}  // namespace nn::cpu

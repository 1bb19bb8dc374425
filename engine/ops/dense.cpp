// FULLY_CONNECTED and BATCH_MATMUL: shape inference and reference kernels. Quantized
// FULLY_CONNECTED accumulates (x - x_zp) * (w - w_zp) in int32 with the int32 bias and
// requantizes as ops/quant_math.h says (NNAPI's fixed point or qnnpack's float); quantized
// BATCH_MATMUL dequantizes, multiplies in float and requantizes.
#include <algorithm>
#include <string>
#include <vector>

#include "nn/ops/registry.h"
#include "ops/conv_util.h"
#include "ops/quant_math.h"
#include "ops/tensor_util.h"

namespace nn {

namespace {

Status invalid(std::string message) {
  return {StatusCode::kInvalidModel, std::move(message)};
}

constexpr std::initializer_list<OperandType> kDataTypes = {
    OperandType::TENSOR_FLOAT32, OperandType::TENSOR_QUANT8_ASYMM, OperandType::TENSOR_QUANT8_ASYMM_SIGNED};

// ---- FULLY_CONNECTED: in, weights [units, input_size], bias [units] or NO_VALUE, fuse ----

struct FcParams {
  uint32_t batch = 0, input_size = 0, units = 0;
  int32_t fuse = 0;
  bool has_bias = false;
};

Result<FcParams> parse_fc(const Model& m, const Operation& op) {
  using namespace conv_util;
  NN_RETURN_IF_ERROR(check_input_count(op, 4, 4));
  NN_RETURN_IF_ERROR(check_output_count(op, 1));
  NN_RETURN_IF_ERROR(check_tensor_type(m, op, 0, kDataTypes, "input"));
  NN_RETURN_IF_ERROR(check_rank(m, op, 0, 2, 4, "input"));
  const Operand& input = m.operands[op.inputs[0]];
  NN_RETURN_IF_ERROR(check_quant_params(input, input_label(0, "input")));
  NN_RETURN_IF_ERROR(check_filter_type(m, op, 1, "weights", -1));
  NN_RETURN_IF_ERROR(check_rank(m, op, 1, 2, 2, "weights"));
  const Operand& weights = m.operands[op.inputs[1]];
  FcParams p;
  p.units = weights.dims[0];
  p.input_size = weights.dims[1];
  if (p.units == 0 || p.input_size == 0)
    return invalid(input_label(1, "weights") + " has a zero dim " + dims_to_string(weights.dims));
  const size_t numel = num_elements(input.dims);
  if (numel == 0 || numel % p.input_size != 0)
    return invalid(input_label(0, "input") + " " + dims_to_string(input.dims) + " has " +
                   std::to_string(numel) + " elements, not a positive multiple of input_size " +
                   std::to_string(p.input_size) + " (weights " + dims_to_string(weights.dims) + ")");
  p.batch = static_cast<uint32_t>(numel / p.input_size);
  p.has_bias = m.has_value(op.inputs[2]);
  if (p.has_bias) NN_RETURN_IF_ERROR(check_bias(m, op, 2, p.units));
  NN_ASSIGN_OR_RETURN(p.fuse, read_fuse(m, op, 3));
  return p;
}

Status prepare_fc(Model& m, const Operation& op) {
  NN_ASSIGN_OR_RETURN(FcParams p, parse_fc(m, op));
  conv_util::set_output_like(m, op, m.operands[op.inputs[0]], {p.batch, p.units});
  return conv_util::check_quant_params(m.operands[op.outputs[0]], "output 0");
}

void run_fc_quant(const OpContext& ctx, const FcParams& p) {
  const Operand& input = ctx.input(0);
  const Operand& weights = ctx.input(1);
  const Operand& output = ctx.output(0);
  const std::vector<int32_t> x = quant::centered(input, ctx.input_data[0]);
  const std::vector<int32_t> w = quant::centered(weights, ctx.input_data[1]);
  const int32_t* bias = p.has_bias ? ctx.in<int32_t>(2) : nullptr;
  std::vector<int32_t> acc(size_t(p.batch) * p.units);
  for (size_t b = 0; b < p.batch; ++b)
    for (size_t u = 0; u < p.units; ++u) {
      const int32_t* row = x.data() + b * p.input_size;
      const int32_t* wrow = w.data() + u * p.input_size;
      int32_t sum = bias ? bias[u] : 0;
      for (size_t i = 0; i < p.input_size; ++i) sum += row[i] * wrow[i];
      acc[b * p.units + u] = sum;
    }
  quant::requantize_store(acc.data(), acc.size(),
                          quant::conv_requantizers(ctx.requantization, input, weights, output, 1), p.fuse, output,
                          ctx.output_data[0]);
}

Status run_fc(const OpContext& ctx) {
  NN_ASSIGN_OR_RETURN(FcParams p, parse_fc(ctx.model, ctx.op));
  const Operand& input = ctx.input(0);
  const Operand& weights = ctx.input(1);
  if (conv_util::is_quant8(input.type)) {
    run_fc_quant(ctx, p);
    return Status::ok();
  }
  conv_util::FloatInput x(input, ctx.input_data[0]);
  conv_util::FloatInput w(weights, ctx.input_data[1]);
  const std::vector<float> bias =
      conv_util::bias_as_float(p.has_bias ? &ctx.input(2) : nullptr, p.has_bias ? ctx.input_data[2] : nullptr,
                               input, weights, p.units);
  conv_util::FloatOutput y(ctx.output(0), ctx.output_data[0]);
  for (size_t b = 0; b < p.batch; ++b) {
    const float* row = x.data() + b * p.input_size;
    for (size_t u = 0; u < p.units; ++u) {
      const float* wrow = w.data() + u * p.input_size;
      float sum = 0.f;
      for (size_t i = 0; i < p.input_size; ++i) sum += row[i] * wrow[i];
      y.data()[b * p.units + u] = sum + bias[u];
    }
  }
  y.finish(p.fuse);
  return Status::ok();
}

// ---- BATCH_MATMUL: a [..., M, K] (or [..., K, M] with adj_x), b [..., K, N] (or [..., N, K]
// with adj_y); leading batch dims broadcast numpy-style. ----

struct MatmulParams {
  Dims batch_a, batch_b, batch_out;
  uint32_t m = 0, k = 0, n = 0;
  bool adj_x = false, adj_y = false;
};

Result<MatmulParams> parse_matmul(const Model& m, const Operation& op) {
  using namespace conv_util;
  NN_RETURN_IF_ERROR(check_input_count(op, 4, 4));
  NN_RETURN_IF_ERROR(check_output_count(op, 1));
  NN_RETURN_IF_ERROR(check_tensor_type(m, op, 0, kDataTypes, "a"));
  const Operand& a = m.operands[op.inputs[0]];
  NN_RETURN_IF_ERROR(check_tensor_type(m, op, 1, {a.type}, "b"));
  NN_RETURN_IF_ERROR(check_rank(m, op, 0, 2, 8, "a"));
  NN_RETURN_IF_ERROR(check_rank(m, op, 1, 2, 8, "b"));
  const Operand& b = m.operands[op.inputs[1]];
  NN_RETURN_IF_ERROR(check_quant_params(a, input_label(0, "a")));
  NN_RETURN_IF_ERROR(check_quant_params(b, input_label(1, "b")));
  MatmulParams p;
  NN_ASSIGN_OR_RETURN(p.adj_x, read_bool(m, op, 2, "adj_x"));
  NN_ASSIGN_OR_RETURN(p.adj_y, read_bool(m, op, 3, "adj_y"));
  const size_t ra = a.dims.size(), rb = b.dims.size();
  const uint32_t a_rows = a.dims[ra - 2], a_cols = a.dims[ra - 1];
  const uint32_t b_rows = b.dims[rb - 2], b_cols = b.dims[rb - 1];
  p.m = p.adj_x ? a_cols : a_rows;
  const uint32_t ka = p.adj_x ? a_rows : a_cols;
  p.k = p.adj_y ? b_cols : b_rows;
  p.n = p.adj_y ? b_rows : b_cols;
  if (ka != p.k)
    return invalid("inner dims differ: input 0 (a) " + dims_to_string(a.dims) + (p.adj_x ? " (adj_x)" : "") +
                   " has K = " + std::to_string(ka) + ", input 1 (b) " + dims_to_string(b.dims) +
                   (p.adj_y ? " (adj_y)" : "") + " has K = " + std::to_string(p.k));
  if (p.m == 0 || p.n == 0 || p.k == 0) return invalid("matrix dims must be >= 1");
  p.batch_a.assign(a.dims.begin(), a.dims.end() - 2);
  p.batch_b.assign(b.dims.begin(), b.dims.end() - 2);
  auto batch = broadcast_dims(p.batch_a, p.batch_b);
  if (!batch) return invalid("batch dims: " + batch.status().message());
  p.batch_out = batch.value();
  return p;
}

Status prepare_matmul(Model& m, const Operation& op) {
  NN_ASSIGN_OR_RETURN(MatmulParams p, parse_matmul(m, op));
  Dims out = p.batch_out;
  out.push_back(p.m);
  out.push_back(p.n);
  conv_util::set_output_like(m, op, m.operands[op.inputs[0]], std::move(out));
  return conv_util::check_quant_params(m.operands[op.outputs[0]], "output 0");
}

Status run_matmul(const OpContext& ctx) {
  NN_ASSIGN_OR_RETURN(MatmulParams p, parse_matmul(ctx.model, ctx.op));
  conv_util::FloatInput a(ctx.input(0), ctx.input_data[0]);
  conv_util::FloatInput b(ctx.input(1), ctx.input_data[1]);
  conv_util::FloatOutput y(ctx.output(0), ctx.output_data[0]);
  const size_t mk = size_t(p.m) * p.k, kn = size_t(p.k) * p.n, mn = size_t(p.m) * p.n;
  // Element (row, col) of each operand as the product sees it, whatever its storage.
  const size_t a_row_stride = p.adj_x ? 1 : p.k, a_col_stride = p.adj_x ? p.m : 1;
  const size_t b_row_stride = p.adj_y ? 1 : p.n, b_col_stride = p.adj_y ? p.k : 1;
  for_each_broadcast(p.batch_out, p.batch_a, p.batch_b, [&](size_t io, size_t ia, size_t ib) {
    const float* am = a.data() + ia * mk;
    const float* bm = b.data() + ib * kn;
    float* om = y.data() + io * mn;
    std::fill(om, om + mn, 0.f);
    for (size_t i = 0; i < p.m; ++i)
      for (size_t kk = 0; kk < p.k; ++kk) {
        const float av = am[i * a_row_stride + kk * a_col_stride];
        const float* brow = bm + kk * b_row_stride;
        float* orow = om + i * p.n;
        for (size_t j = 0; j < p.n; ++j) orow[j] += av * brow[j * b_col_stride];
      }
  });
  y.finish(0);
  return Status::ok();
}

}  // namespace

void register_dense_ops(OpRegistry& r) {
  r.add({OperationType::FULLY_CONNECTED, prepare_fc, run_fc});
  r.add({OperationType::BATCH_MATMUL, prepare_matmul, run_matmul});
}

}  // namespace nn

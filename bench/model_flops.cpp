#include "model_flops.h"

namespace nn::bench {

double model_flops(const Model& m) {
  double total = 0;
  for (uint32_t k = 0; k < m.operations.size(); ++k) total += op_flops(m, k);
  return total;
}

double op_flops(const Model& m, uint32_t op_index) {
  const Operation& op = m.operations[op_index];
  double total = 0;
  {
    const Operand& out = m.operands[op.outputs.at(0)];
    double out_elems = static_cast<double>(num_elements(out.dims));
    auto in_dims = [&](size_t i) -> const Dims& { return m.operands[op.inputs.at(i)].dims; };
    switch (op.type) {
      case OperationType::CONV_2D: {  // filter [Cout, kh, kw, Cin]
        const Dims& f = in_dims(1);
        total += 2.0 * out_elems * f[1] * f[2] * f[3];
        break;
      }
      case OperationType::GROUPED_CONV_2D: {
        const Dims& f = in_dims(1);
        total += 2.0 * out_elems * f[1] * f[2] * f[3];
        break;
      }
      case OperationType::DEPTHWISE_CONV_2D: {  // filter [1, kh, kw, Cout]
        const Dims& f = in_dims(1);
        total += 2.0 * out_elems * f[1] * f[2];
        break;
      }
      case OperationType::TRANSPOSE_CONV_2D: {  // each input pixel scatters kh*kw*Cout MACs per Cin
        const Dims& in = in_dims(0);
        const Dims& f = in_dims(1);
        total += 2.0 * static_cast<double>(num_elements(in)) * f[0] * f[1] * f[2];
        break;
      }
      case OperationType::FULLY_CONNECTED: {  // weights [units, input_size]
        const Dims& w = in_dims(1);
        total += 2.0 * out_elems * w[1];
        break;
      }
      case OperationType::AVERAGE_POOL_2D:
      case OperationType::MAX_POOL_2D:
      case OperationType::MEAN:
        total += static_cast<double>(num_elements(in_dims(0)));
        break;
      default:
        total += out_elems;
    }
  }
  return total;
}

}  // namespace nn::bench

#include "nn/ops/registry.h"

#include <algorithm>

namespace nn {

const OpRegistry& OpRegistry::instance() {
  static const OpRegistry registry = [] {
    OpRegistry r;
    register_conv_ops(r);
    register_pool_ops(r);
    register_dense_ops(r);
    register_elementwise_ops(r);
    register_unary_ops(r);
    register_shape_ops(r);
    register_reduce_ops(r);
    register_resize_ops(r);
    register_recurrent_ops(r);
    return r;
  }();
  return registry;
}

const OpDef* OpRegistry::find(OperationType type) const {
  for (const OpDef& d : defs_)
    if (d.type == type) return &d;
  return nullptr;
}

void OpRegistry::add(const OpDef& def) { defs_.push_back(def); }

void apply_fused_activation(int32_t fuse_code, float* data, size_t count) {
  if (static_cast<FuseCode>(fuse_code) == FuseCode::NONE) return;
  const ActivationRange r = fuse_code_range(fuse_code);
  for (size_t i = 0; i < count; ++i) data[i] = std::clamp(data[i], r.lo, r.hi);
}

}  // namespace nn

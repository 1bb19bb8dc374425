// nnpipe's own kernels for the ops around the convolutions that Debian's Feb-2022 XNNPACK
// has no subgraph node for, so they ran on the reference kernels inside the CPU delegate
// (and split its XNNPACK steps): CONCATENATION, TRANSPOSE and SLICE (ShuffleNet's channel
// shuffle, DenseNet/Inception/SqueezeNet joins), MEAN over one axis (ConvNeXt's layer
// norm) and NNPIPE_ERF (GELU). Each takes any number of inputs and writes one output; none
// has weights or an epilogue. Copies move 4-byte elements (float32 or int32).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "delegates/cpu/native_kernels.h"
#include "nn/ir/model.h"

typedef struct pthreadpool* pthreadpool_t;

namespace nn::cpu {


// What one run of a native data op reads and writes, bound once by the CPU delegate when
// its buffers are known (prepare).
struct NativeDataArgs {
  std::vector<const void*> inputs;  // NativeDataOp::operands(), in that order
  void* output = nullptr;
  pthreadpool_t pool = nullptr;     // null: run on the caller
};

class NativeDataOp {
 public:
  virtual ~NativeDataOp() = default;
  virtual void run(const NativeDataArgs& args) const = 0;
  // The kernel's name for --explain / --profile.
  virtual const char* kernel() const = 0;
  // The op's inputs that carry data, in the order run() takes them.
  const std::vector<uint32_t>& operands() const { return operands_; }

 protected:
  std::vector<uint32_t> operands_;
};

// The data-movement op for IR op `op_index`, or nullptr (with *why) when the op is none of
// the above or has a form these kernels leave to the reference (non-constant parameters,
// other element types). `statics` gives compile-time data (perm, begin/size, axes).
// With `isa.transpose_tiles`, a transpose whose input-contiguous dim lands second to last
// moves 8 x 8 tiles through AVX2 registers where the CPU has AVX2.
std::unique_ptr<NativeDataOp> make_native_data_op(const Model& model, uint32_t op_index,
                                                  const std::function<const void*(uint32_t)>& statics,
                                                  std::string* why, const NativeIsa& isa = NativeIsa::best());

// `concat` (a native CONCATENATION along its last axis, channels last) made to write
// y = clamp(x * scale[c] + bias[c], lo, hi) per output channel c as it copies, the product
// and the sum each rounded as a MUL and an ADD are (no FMA): a batch norm after a concat
// (DenseNet) with no pass of its own over the output. AVX-512 with isa.avx512, else AVX2
// where the CPU has it. nullptr when `concat` is no such op or the sizes differ.
std::unique_ptr<NativeDataOp> concat_with_channel_affine(const NativeDataOp& concat, std::vector<float> scale,
                                                        std::vector<float> bias, float lo, float hi,
                                                        const NativeIsa& isa);

// Exposed for tests: out = the elements of `in` (4 bytes each) at offset + sum_k i_k *
// strides[k] over the index space `dims`, row-major.
struct StridedCopy {
  std::vector<int64_t> dims, strides;
  int64_t offset = 0;
};
// Merges dims that are contiguous in the input, drops size-1 dims (at least one dim stays).
StridedCopy coalesce(const StridedCopy& copy);

}  // namespace nn::cpu

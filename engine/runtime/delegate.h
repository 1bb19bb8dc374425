// The delegate interface (internal to the engine): what the partitioner asks a backend
// and what the session runs. A delegate says whether it exists on this machine
// (available), which ops it takes (supports, with a reason when not), and compiles a
// partition -- a set of ops in a valid execution order -- into a CompiledPartition.
//
//   Session::open -> Partitioner (supports) -> Delegate::compile -> CompiledPartition
//                 -> prepare(operand buffers) once -> run() per inference
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "nn/ir/model.h"
#include "nn/runtime/session.h"
#include "nn/status.h"
#include "runtime/buffer.h"       // kTensorSlackBytes
#include "runtime/thread_pool.h"  // the session's pool (pthreadpool_t)

namespace nn {

struct SupportResult {
  bool supported = false;
  std::string reason;  // why not, e.g. "extension ops are not supported by nnapi"
  static SupportResult yes() { return {true, {}}; }
  static SupportResult no(std::string why) { return {false, std::move(why)}; }
};

// A partition: ops in an order that respects their data dependencies, plus the
// non-constant operands that cross its boundary.
struct PartitionSpec {
  std::vector<uint32_t> ops;
  std::vector<uint32_t> inputs;   // operands read here but produced elsewhere (or model inputs)
  std::vector<uint32_t> outputs;  // operands produced here and read elsewhere (or model outputs)
};

struct CompileOptions {
  int threads = 1;
  // The session's thread pool: nnpipe's own (runtime/thread_pool.h), reached through the
  // pthreadpool C API it implements, which XNNPACK and the native kernels take; nullptr =
  // run on the caller. A delegate without CPU work ignores it.
  pthreadpool_t threadpool = nullptr;
  bool profile = false;                // time each step (one XNNPACK runtime per node)
  double budget_ms = 0;                // SessionOptions::budget_ms
  CpuOptions cpu;                      // SessionOptions::cpu
};

class CompiledPartition {
 public:
  virtual ~CompiledPartition() = default;
  // Binds the session-owned buffers of the boundary operands: buffers[operand index] is
  // valid for every operand in PartitionSpec::inputs/outputs (other entries may be null).
  // Each buffer is 64-byte aligned with kTensorSlackBytes (runtime/buffer.h) of readable
  // slack past its end.
  // Called once before the first run and again whenever a buffer moves.
  virtual Status prepare(std::span<void* const> buffers) = 0;
  virtual Status run() = 0;
  // Per-step times of the last run when compiled with CompileOptions::profile.
  virtual std::vector<StepTiming> step_timings() const { return {}; }
  // Runs this partition redid on the CPU after its delegate failed them at run time.
  virtual uint64_t runtime_fallbacks() const { return 0; }
  // Which kernel runs each op (Session::kernels).
  virtual std::vector<StepTiming> kernels() const { return {}; }
  // Bytes of the one buffer holding the tensors between this partition's steps (its arena).
  virtual uint64_t arena_bytes() const { return 0; }
};

class Delegate {
 public:
  virtual ~Delegate() = default;
  virtual std::string name() const = 0;
  // ok, or kDelegateUnavailable with the reason ("libneuralnetworks.so not found").
  virtual Status available() const = 0;
  // Non-empty when "auto" should pass over this available delegate, with why (a Vulkan
  // device that is really the CPU, such as lavapipe, is slower than the CPU delegate).
  // Asking for the delegate by name still uses it.
  virtual std::string auto_skip_reason() const { return {}; }
  // What an available delegate runs on, for --explain ("libneuralnetworks.so, feature
  // level 30, devices: ..."); "" when there is nothing to say.
  virtual std::string describe() const { return {}; }
  virtual SupportResult supports(const Model& model, uint32_t op_index) const = 0;
  // kDelegateIncompatible when the backend refuses the partition; the session then
  // moves its ops to the CPU delegate and says so in the report.
  virtual Result<std::unique_ptr<CompiledPartition>> compile(const Model& model,
                                                             const PartitionSpec& partition,
                                                             const CompileOptions& options) = 0;
};

// Built-in delegates by name: "cpu", "reference", "nnapi", "vulkan". nullptr if unknown.
std::unique_ptr<Delegate> make_delegate(const std::string& name);
// Tests: make_delegate(name) returns factory() from now on (an empty factory removes it).
void register_delegate_for_testing(const std::string& name,
                                   std::function<std::unique_ptr<Delegate>()> factory);
// Every delegate "auto" tries, best first (the CPU delegate last).
std::vector<std::string> auto_delegate_order();

// Factories of the built-in delegates (each in its own folder).
std::unique_ptr<Delegate> make_cpu_delegate();        // XNNPACK + reference kernels
std::unique_ptr<Delegate> make_reference_delegate();  // reference kernels only
std::unique_ptr<Delegate> make_nnapi_delegate();      // dlopen("libneuralnetworks.so")
std::unique_ptr<Delegate> make_vulkan_delegate();     // compute shaders on a Vulkan 1.1 device

// Helpers shared by delegates.
std::string op_label(const Model& model, uint32_t op_index);  // "op 12 RESIZE_BILINEAR"
// Fills inputs/outputs of a spec whose ops are set: boundary operands in first-use order.
void compute_partition_boundary(const Model& model, PartitionSpec& spec,
                                std::span<const uint32_t> op_partition_of);

}  // namespace nn

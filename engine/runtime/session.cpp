// Session: the model planned onto delegates (runtime/partitioner), each partition
// compiled once, boundary tensors in session-owned buffers, run() = the partitions in
// order. When a delegate refuses a partition at compile time, its ops are excluded from
// that delegate and the plan is made again: they go to the next delegate in the preference
// order that supports them (the fallback, cpu or reference, last) and the report says why.
#include "nn/runtime/session.h"

#include <pthreadpool.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <thread>

#include "runtime/buffer.h"
#include "runtime/partitioner.h"
#include "runtime/thread_pool.h"

namespace nn {

namespace {

struct ThreadPoolDeleter {
  void operator()(pthreadpool* pool) const {
    if (pool) pthreadpool_destroy(pool);
  }
};
using ThreadPoolPtr = std::unique_ptr<pthreadpool, ThreadPoolDeleter>;

class PartitionedSession final : public Session {
 public:
  const Model& model() const override { return *model_; }
  const PlanReport& report() const override { return report_; }
  void* input_data(size_t i) override {
    return i < model_->inputs.size() ? operand_buffer_[model_->inputs[i]] : nullptr;
  }
  const void* output_data(size_t i) const override {
    return i < model_->outputs.size() ? operand_buffer_[model_->outputs[i]] : nullptr;
  }
  double last_run_ms() const override { return last_ms_; }

  Status run() override {
    auto t0 = std::chrono::steady_clock::now();
    for (size_t p = 0; p < compiled_.size(); ++p) {
      Status s = compiled_[p]->run();
      if (!s.is_ok())
        return s.with_context("partition " + std::to_string(p) + " (" + report_.partitions[p].delegate + ")");
    }
    last_ms_ = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    return Status::ok();
  }

  uint64_t runtime_fallbacks() const override {
    uint64_t n = 0;
    for (const auto& c : compiled_) n += c->runtime_fallbacks();
    return n;
  }

  std::vector<StepTiming> step_timings() const override {
    std::vector<StepTiming> all;
    for (const auto& c : compiled_) {
      std::vector<StepTiming> t = c->step_timings();
      all.insert(all.end(), t.begin(), t.end());
    }
    return all;
  }
  std::vector<StepTiming> kernels() const override {
    std::vector<StepTiming> all;
    for (const auto& c : compiled_) {
      std::vector<StepTiming> t = c->kernels();
      all.insert(all.end(), t.begin(), t.end());
    }
    return all;
  }

  static Result<std::unique_ptr<Session>> open(std::shared_ptr<const Model> model,
                                               const SessionOptions& options);

 private:
  std::shared_ptr<const Model> model_;
  PlanReport report_;
  // Destroyed in reverse: compiled partitions go before their delegates and the pool.
  ThreadPoolPtr pool_;
  std::vector<std::unique_ptr<Delegate>> delegates_;
  std::vector<AlignedBuffer> storage_;
  std::vector<void*> operand_buffer_;  // by operand index; null unless a boundary tensor
  std::vector<std::unique_ptr<CompiledPartition>> compiled_;
  double last_ms_ = 0;
};

Result<std::unique_ptr<Session>> PartitionedSession::open(std::shared_ptr<const Model> model,
                                                          const SessionOptions& options) {
  NN_CHECK_OR_RETURN(model != nullptr, StatusCode::kInvalidArgument, "Session::open: no model");
  NN_CHECK_OR_RETURN(
      options.threads >= 0 && options.threads <= 256, StatusCode::kInvalidArgument,
      "Session::open: threads must be in 0..256 (0 = the cores free now), got " + std::to_string(options.threads));
  NN_CHECK_OR_RETURN(!options.delegates.empty(), StatusCode::kInvalidArgument,
                     "Session::open: empty delegate list (use {\"auto\"})");
  for (uint32_t i : model->inputs)
    NN_CHECK_OR_RETURN(i < model->operands.size() && !model->operands[i].dims.empty(),
                       StatusCode::kInvalidModel,
                       "Session::open: model input operand " + std::to_string(i) +
                           " has no dims (call validate_and_infer_shapes first)");

  auto session = std::unique_ptr<PartitionedSession>(new PartitionedSession());
  session->model_ = model;
  // More threads than cores never runs faster; 0 asks for the cores idle now.
  const int cores = static_cast<int>(usable_cores());
  int threads = options.threads == 0 ? static_cast<int>(free_cores()) : std::min(options.threads, cores);
  if (threads > 1) {
    session->pool_.reset(pthreadpool_create(static_cast<size_t>(threads)));
    NN_CHECK_OR_RETURN(session->pool_ != nullptr, StatusCode::kOutOfMemory,
                       "Session::open: cannot create a pool of " + std::to_string(threads) + " threads");
  }
  CompileOptions compile_options;
  compile_options.threads = threads;
  compile_options.threadpool = session->pool_.get();
  compile_options.profile = options.profile;
  compile_options.budget_ms = options.budget_ms;
  compile_options.cpu = options.cpu;
  compile_options.requantization = options.requantization;

  PartitionRequest request;
  request.delegates = options.delegates;
  request.log = options.log;
  request.strict = options.strict_delegates;
  // Each failed compilation excludes that delegate from those ops and replans; the
  // fallback delegate takes everything, so this ends after at most one round per delegate.
  std::vector<std::unique_ptr<CompiledPartition>> compiled;
  Plan plan;
  for (int round = 0;; ++round) {
    compiled.clear();  // before the plan that owns their delegates goes
    NN_ASSIGN_OR_RETURN(plan, make_plan(*model, request));
    bool replan = false;
    const size_t fallback = plan.delegates.size() - 1;
    for (size_t p = 0; p < plan.partitions.size(); ++p) {
      const PlannedPartition& part = plan.partitions[p];
      Delegate& delegate = *plan.delegates[part.delegate];
      auto result = delegate.compile(*model, part.spec, compile_options);
      if (result.is_ok()) {
        compiled.push_back(std::move(result).value());
        continue;
      }
      if (part.delegate == fallback || round > 8)
        return result.status().with_context("Session::open: " + delegate.name() + " partition " +
                                            std::to_string(p));
      std::string why = "compilation failed: " + result.status().message();
      log_line(options.log, "delegate " + delegate.name() + " refused partition " + std::to_string(p) + " (" +
                                std::to_string(part.spec.ops.size()) +
                                " ops): " + result.status().to_string());
      for (uint32_t k : part.spec.ops) request.excluded[{delegate.name(), k}] = why;
      replan = true;
      break;
    }
    if (!replan) break;
  }

  // One buffer per tensor that crosses a partition boundary, plus every model input
  // and output; the partitions read and write them in place.
  const Model& m = *model;
  session->operand_buffer_.assign(m.operands.size(), nullptr);
  auto ensure_buffer = [&](uint32_t operand) -> Status {
    if (session->operand_buffer_[operand]) return Status::ok();
    AlignedBuffer b(m.operands[operand].byte_size());
    NN_CHECK_OR_RETURN(b.ok(), StatusCode::kOutOfMemory,
                       "Session::open: cannot allocate " + std::to_string(m.operands[operand].byte_size()) +
                           " bytes for operand " + std::to_string(operand));
    session->operand_buffer_[operand] = b.data();
    session->storage_.push_back(std::move(b));
    return Status::ok();
  };
  for (uint32_t i : m.inputs) NN_RETURN_IF_ERROR(ensure_buffer(i));
  for (uint32_t i : m.outputs) NN_RETURN_IF_ERROR(ensure_buffer(i));
  for (const PlannedPartition& part : plan.partitions) {
    for (uint32_t i : part.spec.inputs) NN_RETURN_IF_ERROR(ensure_buffer(i));
    for (uint32_t i : part.spec.outputs) NN_RETURN_IF_ERROR(ensure_buffer(i));
  }
  for (size_t p = 0; p < compiled.size(); ++p) {
    Status s = compiled[p]->prepare(session->operand_buffer_);
    if (!s.is_ok()) return s.with_context("Session::open: prepare partition " + std::to_string(p));
  }
  session->report_ = std::move(plan.report);
  session->report_.threads = threads;
  session->delegates_ = std::move(plan.delegates);
  session->compiled_ = std::move(compiled);
  return std::unique_ptr<Session>(std::move(session));
}

}  // namespace

Result<std::unique_ptr<Session>> Session::open(std::shared_ptr<const Model> model,
                                               const SessionOptions& options) {
  return PartitionedSession::open(std::move(model), options);
}

Status Session::set_input(size_t i, const void* data, size_t bytes) {
  NN_CHECK_OR_RETURN(
      i < num_inputs(), StatusCode::kInvalidArgument,
      "input " + std::to_string(i) + " out of range (model has " + std::to_string(num_inputs()) + ")");
  size_t want = input_desc(i).byte_size();
  NN_CHECK_OR_RETURN(bytes == want, StatusCode::kInvalidArgument,
                     "input " + std::to_string(i) + ": got " + std::to_string(bytes) + " bytes, expected " +
                         std::to_string(want) + " for " + dims_to_string(input_desc(i).dims));
  NN_CHECK_OR_RETURN(data != nullptr || bytes == 0, StatusCode::kInvalidArgument,
                     "input " + std::to_string(i) + ": null data");
  if (bytes) std::memcpy(input_data(i), data, bytes);
  return Status::ok();
}

}  // namespace nn

// The partitioner: assigns every op to the first delegate in the preference list that is
// available and supports it, leaves the rest to the fallback delegate (cpu, or reference),
// and groups the ops into as few partitions as their data dependencies allow.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "nn/runtime/session.h"
#include "runtime/delegate.h"

namespace nn {

// Groups `ops` (a valid execution order of a subset of the model's ops) into runs of the
// same label: a topological order that keeps taking ready ops of the current label before
// switching, so ops of one label end up in as few groups as dependencies allow.
// labels[k] is the label of ops[k]. Returns the groups in execution order; each group's
// op list is in a valid execution order.
struct LabeledGroup {
  int label = 0;
  std::vector<uint32_t> ops;
};
std::vector<LabeledGroup> group_by_label(const Model& model, std::span<const uint32_t> ops,
                                         std::span<const int> labels);
// The same over units that are not single model ops (e.g. an op with the ops fused into
// it): inputs[k] / outputs[k] are the operands unit k reads / writes; ops[k] names it.
std::vector<LabeledGroup> group_by_label(std::span<const uint32_t> ops, std::span<const int> labels,
                                         std::span<const std::vector<uint32_t>> inputs,
                                         std::span<const std::vector<uint32_t>> outputs);

struct PlannedPartition {
  size_t delegate = 0;  // index into Plan::delegates
  PartitionSpec spec;
};

struct Plan {
  std::vector<std::unique_ptr<Delegate>> delegates;  // the preference list, fallback last
  std::vector<PlannedPartition> partitions;
  PlanReport report;
};

struct PartitionRequest {
  std::vector<std::string> delegates;  // SessionOptions::delegates
  // Ops a delegate must not take, with the reason ("nnapi compilation failed: ...").
  // Keyed by (delegate name, op index).
  std::map<std::pair<std::string, uint32_t>, std::string> excluded;
  std::function<void(const std::string&)> log;  // called for every fallback line
  bool strict = false;  // SessionOptions::strict_delegates
};

// Builds the plan. Errors: an unknown delegate name (kInvalidArgument), an op no
// delegate can run (kUnsupportedOp).
Result<Plan> make_plan(const Model& model, const PartitionRequest& request);

// Logs to the callback if set, else to stderr when NN_LOG=1.
void log_line(const std::function<void(const std::string&)>& log, const std::string& line);

}  // namespace nn

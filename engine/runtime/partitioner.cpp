#include "runtime/partitioner.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>

namespace nn {

void log_line(const std::function<void(const std::string&)>& log, const std::string& line) {
  if (log) {
    log(line);
    return;
  }
  static const bool enabled = [] {
    const char* v = std::getenv("NN_LOG");
    return v && *v && std::string(v) != "0";
  }();
  if (enabled) std::fprintf(stderr, "[nn] %s\n", line.c_str());
}

std::vector<LabeledGroup> group_by_label(const Model& model, std::span<const uint32_t> ops,
                                         std::span<const int> labels) {
  std::vector<std::vector<uint32_t>> inputs, outputs;
  for (uint32_t k : ops) {
    inputs.push_back(model.operations[k].inputs);
    outputs.push_back(model.operations[k].outputs);
  }
  return group_by_label(ops, labels, inputs, outputs);
}

std::vector<LabeledGroup> group_by_label(std::span<const uint32_t> ops, std::span<const int> labels,
                                         std::span<const std::vector<uint32_t>> inputs,
                                         std::span<const std::vector<uint32_t>> outputs) {
  const size_t n = ops.size();
  // producer[operand] = position in `ops` of the unit that writes it (within this subset).
  std::map<uint32_t, size_t> producer;
  for (size_t k = 0; k < n; ++k)
    for (uint32_t o : outputs[k]) producer[o] = k;
  std::vector<std::vector<size_t>> consumers(n);
  std::vector<size_t> pending(n, 0);
  for (size_t k = 0; k < n; ++k) {
    std::vector<size_t> deps;
    for (uint32_t o : inputs[k]) {
      auto it = producer.find(o);
      if (it != producer.end() && it->second != k) deps.push_back(it->second);
    }
    std::sort(deps.begin(), deps.end());
    deps.erase(std::unique(deps.begin(), deps.end()), deps.end());
    pending[k] = deps.size();
    for (size_t d : deps) consumers[d].push_back(k);
  }
  // Ready ops ordered by their position, so the original order breaks ties.
  std::set<size_t> ready;
  for (size_t k = 0; k < n; ++k)
    if (pending[k] == 0) ready.insert(k);
  std::vector<LabeledGroup> groups;
  while (!ready.empty()) {
    const int label = labels[*ready.begin()];
    LabeledGroup group{label, {}};
    for (;;) {
      auto it = std::find_if(ready.begin(), ready.end(), [&](size_t k) { return labels[k] == label; });
      if (it == ready.end()) break;
      size_t k = *it;
      ready.erase(it);
      group.ops.push_back(ops[k]);
      for (size_t c : consumers[k])
        if (--pending[c] == 0) ready.insert(c);
    }
    groups.push_back(std::move(group));
  }
  return groups;
}

namespace {

std::string join(const std::vector<std::string>& parts, const char* sep) {
  std::string s;
  for (const auto& p : parts) {
    if (!s.empty()) s += sep;
    s += p;
  }
  return s;
}

}  // namespace

Result<Plan> make_plan(const Model& model, const PartitionRequest& request) {
  Plan plan;
  plan.report.requested = request.delegates;

  // Expand the preference list: "auto" -> every built-in delegate best first. The
  // fallback is "reference" when it is named, otherwise "cpu".
  std::vector<std::string> names;
  std::vector<std::string> named_explicitly;
  auto add_name = [&](const std::string& name) {
    if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
  };
  for (const std::string& name : request.delegates) {
    if (name == "auto") {
      for (const std::string& a : auto_delegate_order()) add_name(a);
    } else {
      add_name(name);
      named_explicitly.push_back(name);
    }
  }
  const bool reference_fallback = std::find(names.begin(), names.end(), "reference") != names.end();
  const std::string fallback = reference_fallback ? "reference" : "cpu";
  names.erase(std::remove(names.begin(), names.end(), fallback), names.end());
  names.push_back(fallback);

  std::vector<bool> usable;
  std::vector<std::string> unavailable_reason;
  for (const std::string& name : names) {
    std::unique_ptr<Delegate> d = make_delegate(name);
    if (!d) {
      std::vector<std::string> known = {"auto"};
      for (const std::string& a : auto_delegate_order()) known.push_back(a);
      known.push_back("reference");
      return Status(StatusCode::kInvalidArgument,
                    "unknown delegate '" + name + "' (known: " + join(known, ", ") + ")");
    }
    Status avail = d->available();
    if (avail.is_ok() && name != fallback &&
        std::find(named_explicitly.begin(), named_explicitly.end(), name) == named_explicitly.end()) {
      std::string skip = d->auto_skip_reason();
      if (!skip.empty()) avail = Status(StatusCode::kDelegateUnavailable, "skipped by auto: " + skip);
    }
    usable.push_back(avail.is_ok());
    unavailable_reason.push_back(avail.message());
    const bool named = std::find(named_explicitly.begin(), named_explicitly.end(), name) != named_explicitly.end();
    if (!avail.is_ok() && named && request.strict)
      return Status(StatusCode::kDelegateUnavailable,
                    "delegate " + name + " was asked for by name but is unavailable: " + avail.message());
    if (avail.is_ok() && !d->describe().empty()) plan.report.delegate_info.push_back(name + ": " + d->describe());
    if (!avail.is_ok()) {
      plan.report.unavailable.push_back(name + ": " + avail.message());
      log_line(request.log, "delegate " + name + " unavailable: " + avail.message());
    }
    plan.delegates.push_back(std::move(d));
  }
  const size_t fallback_index = plan.delegates.size() - 1;
  if (!usable[fallback_index])
    return Status(StatusCode::kDelegateUnavailable,
                  "fallback delegate " + fallback + " unavailable: " + unavailable_reason.back());

  const uint32_t num_ops = static_cast<uint32_t>(model.operations.size());
  std::vector<int> assignment(num_ops, 0);
  for (uint32_t k = 0; k < num_ops; ++k) {
    std::vector<std::string> reasons;
    int chosen = -1;
    for (size_t d = 0; d < plan.delegates.size(); ++d) {
      const std::string& name = names[d];
      const bool is_fallback = d == fallback_index;
      auto excluded = request.excluded.find({name, k});
      if (excluded != request.excluded.end() && !is_fallback) {
        reasons.push_back(name + ": " + excluded->second);
        continue;
      }
      if (!usable[d]) {
        reasons.push_back(name + " unavailable: " + unavailable_reason[d]);
        continue;
      }
      SupportResult s = plan.delegates[d]->supports(model, k);
      if (s.supported) {
        chosen = static_cast<int>(d);
        break;
      }
      reasons.push_back(name + ": " + s.reason);
    }
    if (chosen < 0)
      return Status(StatusCode::kUnsupportedOp,
                    op_label(model, k) + ": no delegate can run it (" + join(reasons, "; ") + ")");
    assignment[k] = chosen;
    PlanReport::OpAssignment a{k, model.operations[k].type, names[chosen], join(reasons, "; ")};
    if (!a.fallback_reason.empty())
      log_line(request.log, op_label(model, k) + " stays on " + a.delegate + ": " + a.fallback_reason);
    plan.report.ops.push_back(std::move(a));
  }

  std::vector<uint32_t> order(num_ops);
  for (uint32_t k = 0; k < num_ops; ++k) order[k] = k;
  std::vector<LabeledGroup> groups = group_by_label(model, order, assignment);
  for (LabeledGroup& g : groups) {
    PlannedPartition p;
    p.delegate = static_cast<size_t>(g.label);
    p.spec.ops = std::move(g.ops);
    plan.partitions.push_back(std::move(p));
  }
  std::vector<uint32_t> partition_of(num_ops, 0);
  for (size_t p = 0; p < plan.partitions.size(); ++p)
    for (uint32_t k : plan.partitions[p].spec.ops) partition_of[k] = static_cast<uint32_t>(p);
  for (PlannedPartition& p : plan.partitions) {
    compute_partition_boundary(model, p.spec, partition_of);
    plan.report.partitions.push_back({names[p.delegate], p.spec.ops});
  }
  return plan;
}

std::vector<std::string> PlanReport::missing_requested() const {
  std::vector<std::string> missing;
  for (const std::string& name : requested)
    for (const std::string& u : unavailable)
      if (name != "auto" && u.rfind(name + ": ", 0) == 0) missing.push_back(u);
  return missing;
}

std::string PlanReport::to_string() const {
  std::string s = "requested: " + join(requested, ", ") + "\n";
  for (const auto& u : unavailable) s += "unavailable: " + u + "\n";
  for (const auto& d : delegate_info) s += "delegate " + d + "\n";
  for (size_t p = 0; p < partitions.size(); ++p) {
    s += "partition " + std::to_string(p) + ": " + partitions[p].delegate + ", " +
         std::to_string(partitions[p].op_indices.size()) + " ops";
    if (!partitions[p].op_indices.empty()) {
      auto [lo, hi] = std::minmax_element(partitions[p].op_indices.begin(), partitions[p].op_indices.end());
      s += " (op " + std::to_string(*lo) + ".." + std::to_string(*hi) + ")";
    }
    s += "\n";
  }
  for (const auto& op : ops)
    if (!op.fallback_reason.empty())
      s += "op " + std::to_string(op.op_index) + " " + std::string(operation_type_name(op.type)) +
           " stays on " + op.delegate + ": " + op.fallback_reason + "\n";
  return s;
}

}  // namespace nn

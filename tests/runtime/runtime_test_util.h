// Helpers for the runtime tests: building one-op models and comparing a session's
// outputs against the reference executor (run_reference) on the same seeded inputs.
#pragma once

#include <cmath>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "nn/ir/model.h"
#include "nn/ops/registry.h"
#include "nn/runtime/session.h"
#include "test_support.h"

namespace nn_test {

struct Comparison {
  double max_rel_error = 0;
  double max_abs_expected = 0;
  std::vector<nn::StepTiming> steps;  // from a profiled cpu session
  std::string report;
};

// Fills every model input with seeded uniform values in [lo, hi], runs run_reference and
// a session with `options`, and returns the worst relative error over all outputs
// (|a-b| / max(|b|, floor, 1% of max|b|)). Fails the test on any error.
inline Comparison compare_with_reference(const std::shared_ptr<nn::Model>& model, nn::SessionOptions options,
                                         float lo = -1.f, float hi = 1.f, uint32_t seed = 7,
                                         double floor = 1e-2) {
  Comparison c;
  std::vector<std::vector<float>> inputs;
  std::vector<const void*> in_ptrs;
  for (size_t k = 0; k < model->inputs.size(); ++k) {
    const nn::Operand& o = model->operands[model->inputs[k]];
    inputs.push_back(random_floats(nn::num_elements(o.dims), seed + static_cast<uint32_t>(k), lo, hi));
  }
  for (auto& v : inputs) in_ptrs.push_back(v.data());
  std::vector<std::vector<float>> expected;
  std::vector<void*> out_ptrs;
  for (uint32_t o : model->outputs) expected.emplace_back(nn::num_elements(model->operands[o].dims) + 4);
  for (auto& v : expected) out_ptrs.push_back(v.data());
  nn::Status s = nn::run_reference(*model, in_ptrs, out_ptrs);
  EXPECT_TRUE(s.is_ok()) << s.to_string();
  if (!s.is_ok()) return c;

  auto opened = nn::Session::open(model, options);
  EXPECT_TRUE(opened.is_ok()) << opened.status().to_string();
  if (!opened.is_ok()) return c;
  auto& session = *opened;
  for (size_t k = 0; k < inputs.size(); ++k) {
    nn::Status st = session->set_input(k, inputs[k].data(), inputs[k].size() * sizeof(float));
    EXPECT_TRUE(st.is_ok()) << st.to_string();
  }
  s = session->run();
  EXPECT_TRUE(s.is_ok()) << s.to_string();
  if (!s.is_ok()) return c;
  for (size_t k = 0; k < expected.size(); ++k) {
    const size_t n = nn::num_elements(session->output_desc(k).dims);
    double scale = 0;
    for (size_t i = 0; i < n; ++i) scale = std::max(scale, std::fabs(double(expected[k][i])));
    c.max_abs_expected = std::max(c.max_abs_expected, scale);
    // Relative error with a floor at 1% of the output's range: values near zero are
    // judged by absolute error (1e-4 relative = 1e-6 of the range), as float sums of
    // hundreds of terms differ by a few ulps of their largest term in any order.
    c.max_rel_error = std::max(c.max_rel_error, max_relative_error(session->output_f32(k), expected[k].data(),
                                                                   n, std::max(floor, 1e-2 * scale)));
  }
  c.steps = session->step_timings();
  c.report = session->report().to_string();
  return c;
}

// Number of profiled steps whose label contains `needle` ("[xnnpack]", "CONV_2D [xnnpack]").
inline int count_steps(const Comparison& c, const std::string& needle) {
  int n = 0;
  for (const auto& s : c.steps)
    if (s.label.find(needle) != std::string::npos) ++n;
  return n;
}

inline std::string step_labels(const Comparison& c) {
  std::string s;
  for (const auto& st : c.steps) s += st.label + "\n";
  return s;
}

// The CPU delegate with each of `cpus`' switches, at 1 and at 2 threads, within `tolerance`
// (relative to the output's largest value) of the reference kernels.
inline void expect_cpu_matches_reference(const std::shared_ptr<nn::Model>& model,
                                         std::initializer_list<nn::CpuOptions> cpus, double tolerance = 1e-4) {
  for (const nn::CpuOptions& cpu : cpus)
    for (int threads : {1, 2}) {
      nn::SessionOptions o;
      o.delegates = {"cpu"};
      o.cpu = cpu;
      o.threads = threads;
      EXPECT_LE(compare_with_reference(model, o).max_rel_error, tolerance) << threads << " threads";
    }
}

// The kernel Session::kernels() names for the CPU delegate's step whose label is `op` or
// starts with `op ` ("op 0", "op 0 CONV_2D"), with `cpu`'s switches at `threads` threads.
inline std::string cpu_kernel_of(const std::shared_ptr<nn::Model>& model, const nn::CpuOptions& cpu,
                                 const std::string& op, int threads = 1) {
  nn::SessionOptions o;
  o.delegates = {"cpu"};
  o.cpu = cpu;
  o.threads = threads;
  auto session = nn::Session::open(model, o);
  EXPECT_TRUE(session.is_ok()) << session.status().to_string();
  if (!session.is_ok()) return "";
  for (const auto& k : (*session)->kernels())
    if (k.label.rfind(op + " ", 0) == 0 || k.label == op) return k.kernel;
  return "(no step " + op + ")";
}

}  // namespace nn_test
